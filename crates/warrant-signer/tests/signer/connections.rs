//! Who may connect to the socket, how many at once, and for how long: through the real
//! accept loop, with raw connections and the gRPC client.

use std::os::unix::fs::MetadataExt as _;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::UnixStream;
use tokio::time::Instant;
use warrant_keys::KeySet;
use warrant_signer::proto::MetadataRequest;
use warrant_signer::{PeerPolicy, ServeOptions};
use warrant_token::{ExpirationPolicy, KeyType, SigningKey};

use crate::support::*;

async fn serving(options: impl FnOnce(u32) -> ServeOptions) -> Env {
    let key = SigningKey::generate(KeyType::P256).unwrap();
    start_serving(
        ISSUER,
        KeySet::new(key, vec![]),
        ExpirationPolicy::default(),
        |_| {},
        |socket| options(socket.owner_uid()),
    )
    .await
}

/// Reads until the server closes the connection (its HTTP/2 settings may come first), which
/// must happen `within` (on the paused clock).
async fn closed_by_server(stream: &mut UnixStream, within: Duration) {
    let mut buffer = [0u8; 256];
    let closed = async {
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(within, closed)
        .await
        .expect("the server did not close the connection");
}

/// Less than the default idle timeout: a close within it is not for idleness.
const AT_ONCE: Duration = Duration::from_secs(10);

/// Lets the accept loop and connection tasks run until `done` holds.
async fn until(env: &Env, done: impl Fn(&Env) -> bool) {
    for _ in 0..10_000 {
        if done(env) {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("the server never got there");
}

fn closed(env: &Env, reason: &str) -> f64 {
    env.metric(&format!(
        r#"warrant_signer_connections_closed_total{{reason="{reason}"}}"#
    ))
}

#[tokio::test(start_paused = true)]
async fn a_process_whose_user_and_group_are_not_allowed_is_refused() {
    // The tests run as root: allow only some other user, and root's processes are refused.
    let mut env = serving(|_| {
        ServeOptions::new(PeerPolicy {
            uids: vec![4242],
            gids: vec![],
        })
    })
    .await;
    let mut raw = UnixStream::connect(&env.path).await.unwrap();
    closed_by_server(&mut raw, AT_ONCE).await;
    assert_eq!(closed(&env, "peer_not_allowed"), 1.0);
    // The client sees a transport error (its exact code depends on when it noticed).
    assert!(env.client.metadata(MetadataRequest {}).await.is_err());
    assert_eq!(
        env.metric(r#"warrant_signer_requests_total{rpc="Metadata",result="ok"}"#),
        0.0
    );

    // By primary group instead: root's group 0.
    let own_gid = std::fs::metadata("/proc/self").unwrap().gid();
    let mut env = serving(|_| {
        ServeOptions::new(PeerPolicy {
            uids: vec![4242],
            gids: vec![own_gid],
        })
    })
    .await;
    assert!(env.client.metadata(MetadataRequest {}).await.is_ok());
    // And by default: the socket's owner.
    let mut env = serving(|owner| ServeOptions::new(PeerPolicy::for_socket(owner, None))).await;
    assert!(env.client.metadata(MetadataRequest {}).await.is_ok());
    assert_eq!(closed(&env, "peer_not_allowed"), 0.0);
}

#[tokio::test(start_paused = true)]
async fn connections_over_the_limit_are_closed_at_once() {
    let env = serving(|owner| ServeOptions {
        max_connections: 2,
        ..ServeOptions::new(PeerPolicy::for_socket(owner, None))
    })
    .await;
    let open = |env: &Env| env.metric("warrant_signer_connections_open");
    let first = UnixStream::connect(&env.path).await.unwrap();
    let _second = UnixStream::connect(&env.path).await.unwrap();
    until(&env, |env| open(env) == 2.0).await;
    let mut third = UnixStream::connect(&env.path).await.unwrap();
    closed_by_server(&mut third, AT_ONCE).await;
    assert_eq!(closed(&env, "limit"), 1.0);
    assert_eq!(open(&env), 2.0);
    // One closes: there is room again.
    drop(first);
    until(&env, |env| open(env) == 1.0).await;
    let _fourth = UnixStream::connect(&env.path).await.unwrap();
    until(&env, |env| open(env) == 2.0).await;
    assert_eq!(closed(&env, "limit"), 1.0);
}

#[tokio::test(start_paused = true)]
async fn an_idle_connection_is_closed_after_the_timeout_and_a_busy_one_is_not() {
    let timeout = Duration::from_secs(90);
    let mut env = serving(|owner| ServeOptions {
        idle_timeout: timeout,
        ..ServeOptions::new(PeerPolicy::for_socket(owner, None))
    })
    .await;
    // A connection that says nothing: closed at the timeout, to the second.
    let accepted = Instant::now();
    let mut silent = UnixStream::connect(&env.path).await.unwrap();
    closed_by_server(&mut silent, timeout * 2).await;
    assert_eq!(Instant::now() - accepted, timeout);
    assert_eq!(closed(&env, "idle"), 1.0);

    // kube-apiserver's connection: a call now, another 60 s later; the idle time counts from
    // the last one.
    env.client.metadata(MetadataRequest {}).await.unwrap();
    tokio::time::sleep(Duration::from_secs(60)).await;
    env.client.metadata(MetadataRequest {}).await.unwrap();
    let last = Instant::now();
    tokio::time::sleep(timeout - Duration::from_secs(1)).await;
    assert_eq!(closed(&env, "idle"), 1.0, "closed before the timeout");
    assert_eq!(env.metric("warrant_signer_connections_open"), 1.0);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(closed(&env, "idle"), 2.0, "not closed at the timeout");
    assert_eq!(env.metric("warrant_signer_connections_open"), 0.0);
    assert!(Instant::now() - last > timeout);
    // The client reconnects at its next call.
    env.client.metadata(MetadataRequest {}).await.unwrap();
    assert_eq!(env.metric("warrant_signer_connections_open"), 1.0);
}
