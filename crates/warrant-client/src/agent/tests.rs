//! The agent against warrant's real API (its router, in process: the requests, authentication,
//! self-service and issuing are warrant's own; only TLS is left out), on a paused clock: every
//! wait is tokio's, and warrant's clock follows it, so hours pass in milliseconds and nothing
//! sleeps.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use http_body_util::BodyExt as _;
use jiff::Timestamp;
use serde_json::{Value, json};
use tower::ServiceExt as _;
use warrant_auth::{Policy, PolicyFile};
use warrant_clock::Clock;
use warrant_objects::{Kind, MemorySource, Objects};
use warrant_testkit::{ADMIN, ISSUER, NODE_UID, NOW, POD_UID, SA_UID, pod, record};

use super::*;

const POLICY: &str = "apiVersion: warrant.dev/v1alpha1
kind: AuthorizationPolicy
selfService:
  audiences: [sts.amazonaws.com, api://AzureADTokenExchange]
";

/// warrant's API in process, a switch that takes it off the network, and what the agent
/// needs: its kube token (a warrant token for the API audience, bound to the pod, as the
/// kubelet would project one where warrant is the signer) and a directory for the tokens.
struct Warrant {
    api: warrant_server::Api,
    objects: Arc<MemorySource>,
    up: Arc<AtomicBool>,
    /// TokenRequests the agent sent, answered or not (not its GETs of warrant's keys).
    calls: Arc<AtomicUsize>,
    clock: Clock,
    dir: tempfile::TempDir,
}

impl Warrant {
    /// Must run inside the paused runtime (its clock follows tokio's).
    async fn start() -> Warrant {
        let objects = Arc::new(MemorySource::new());
        objects.put(Kind::ServiceAccount, "demo", "app", record(SA_UID));
        objects.put(Kind::Pod, "demo", "app-0", pod(POD_UID, "app", "node-1"));
        objects.put(Kind::Node, "", "node-1", record(NODE_UID));
        let clock = Clock::follows_tokio(Timestamp::from_second(NOW).unwrap());
        let policy = Policy::parse(POLICY, "policy.yaml").unwrap();
        let state = warrant_testkit::state()
            .clock(clock.clone())
            .objects(Objects::new(objects.clone()))
            .configure(|_, authz| {
                authz.policy = Some(PolicyFile::from_policy(policy, Path::new("policy.yaml")));
            })
            .build();
        let warrant = Warrant {
            api: warrant_server::router(state),
            objects,
            up: Arc::new(AtomicBool::new(true)),
            calls: Arc::new(AtomicUsize::new(0)),
            clock,
            dir: tempfile::tempdir().unwrap(),
        };
        let kube_token = warrant
            .admin_post(
                "/api/v1/namespaces/demo/serviceaccounts/app/token",
                json!({"spec": {"audiences": [ISSUER], "expirationSeconds": 8_640_000,
                      "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "app-0", "uid": POD_UID}}}),
            )
            .await["status"]["token"]
            .as_str()
            .unwrap()
            .to_owned();
        std::fs::write(warrant.dir.path().join("kube-token"), kube_token).unwrap();
        warrant
    }

    async fn admin_post(&self, path: &str, body: Value) -> Value {
        let request = http::Request::post(path)
            .header("authorization", format!("Bearer {ADMIN}"))
            .header("content-type", "application/json")
            .body(http_body_util::Full::new(bytes::Bytes::from(
                body.to_string(),
            )))
            .unwrap();
        let response = self.api.clone().oneshot(request).await.unwrap();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        serde_json::from_slice(&bytes).unwrap()
    }

    /// Whether warrant, reviewing `token` for `audience`, still accepts it.
    async fn accepts(&self, token: &str, audience: &str) -> bool {
        let review = self
            .admin_post(
                "/apis/authentication.k8s.io/v1/tokenreviews",
                json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                       "spec": {"token": token, "audiences": [audience]}}),
            )
            .await;
        review["status"]["authenticated"] == true
    }

    /// A kube client whose requests reach the API while `up`, and fail as a refused connection
    /// otherwise.
    fn client(&self) -> ::kube::Client {
        let api = self.api.clone();
        let up = self.up.clone();
        let calls = self.calls.clone();
        let service = tower::service_fn(move |request: http::Request<::kube::client::Body>| {
            let api = api.clone();
            let up = up.load(Ordering::SeqCst);
            if request.method() == http::Method::POST {
                calls.fetch_add(1, Ordering::SeqCst);
            }
            async move {
                if !up {
                    return Err(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
                }
                Ok(api.oneshot(request).await.unwrap_or_else(|e| match e {}))
            }
        });
        ::kube::Client::new(service, "default")
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn agent(&self, tokens: &[(&str, &str)], expiration_seconds: i64) -> Agent {
        let minter = Minter::new(
            self.client(),
            "https://warrant.test".to_owned(),
            self.file("kube-token"),
            "app-0".to_owned(),
            POD_UID.to_owned(),
        );
        let specs = tokens
            .iter()
            .map(|(name, audience)| TokenSpec {
                file: self.file(name),
                audience: (*audience).to_owned(),
            })
            .collect();
        Agent::new(minter, specs, expiration_seconds, 0o644, self.clock.clone()).unwrap()
    }

    /// The agent running in its own task; stopping sends it the shutdown.
    fn spawn(&self, agent: Agent) -> Running {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(agent.run(async {
            let _ = stopped.await;
        }));
        Running { stop, task }
    }

    fn now(&self) -> i64 {
        self.clock.now().as_second()
    }
}

struct Running {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), AgentError>>,
}

impl Running {
    async fn stop(self) {
        let _ = self.stop.send(());
        self.task.await.unwrap().unwrap();
    }
}

/// The token in a file, and its claims (read, not verified: the tests verify through warrant's
/// TokenReview).
fn read(path: &Path) -> Option<(String, warrant_token::Claims)> {
    let text = std::fs::read_to_string(path).ok()?;
    let claims = warrant_token::unverified_claims(&text).ok()?;
    Some((text, claims))
}

/// Lets the paused clock run until `path` holds a token other than `not`.
async fn until_new_token(path: &Path, not: Option<&str>) -> (String, warrant_token::Claims) {
    for _ in 0..20_000 {
        if let Some((token, claims)) = read(path)
            && Some(token.as_str()) != not
        {
            return (token, claims);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    panic!("no new token in {}", path.display());
}

/// Advances the paused clock by `seconds` (the agent runs whatever falls due meanwhile).
async fn advance(seconds: u64) {
    tokio::time::sleep(Duration::from_secs(seconds)).await;
}

#[tokio::test(start_paused = true)]
async fn the_first_token_is_the_pods_own_bound_to_it_and_verifies() {
    let w = Warrant::start().await;
    let running = w.spawn(w.agent(
        &[
            ("aws-token", "sts.amazonaws.com"),
            ("azure-token", "api://AzureADTokenExchange"),
        ],
        3600,
    ));
    let (aws, claims) = until_new_token(&w.file("aws-token"), None).await;
    assert_eq!(claims.aud, ["sts.amazonaws.com"]);
    assert_eq!(claims.sub, "system:serviceaccount:demo:app");
    let pod = claims.kubernetes.pod.as_ref().unwrap();
    assert_eq!((pod.name.as_str(), pod.uid.as_str()), ("app-0", POD_UID));
    assert_eq!(claims.exp.unwrap() - claims.iat.unwrap(), 3600);
    assert!(w.accepts(&aws, "sts.amazonaws.com").await);
    let (azure, _) = until_new_token(&w.file("azure-token"), None).await;
    assert!(w.accepts(&azure, "api://AzureADTokenExchange").await);
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(w.file("aws-token"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o644);
    // Nothing but the tokens in the directory (no temporary file left behind).
    let mut names: Vec<String> = std::fs::read_dir(w.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["aws-token", "azure-token", "kube-token"]);
    check(&w.agent_tokens(), w.clock.now()).unwrap();
    running.stop().await;
}

impl Warrant {
    fn agent_tokens(&self) -> Vec<TokenSpec> {
        vec![TokenSpec {
            file: self.file("aws-token"),
            audience: "sts.amazonaws.com".to_owned(),
        }]
    }
}

#[tokio::test(start_paused = true)]
async fn a_token_is_replaced_between_three_quarters_and_four_fifths_of_its_life() {
    let w = Warrant::start().await;
    let running = w.spawn(w.agent(&[("aws-token", "sts.amazonaws.com")], 3600));
    let (first, claims) = until_new_token(&w.file("aws-token"), None).await;
    let issued = claims.iat.unwrap();
    let mut previous = first.clone();
    for _ in 0..5 {
        let (next, claims) = until_new_token(&w.file("aws-token"), Some(&previous)).await;
        let replaced_at = claims.iat.unwrap();
        let issued_before = read_iat(&previous);
        let elapsed = replaced_at - issued_before;
        assert!(
            (2700..=2881).contains(&elapsed),
            "replaced {elapsed}s into a 3600s token"
        );
        // Never expired in between: the old one was valid when the new one came.
        assert!(replaced_at < issued_before + 3600);
        previous = next;
    }
    assert!(previous != first && w.now() > issued + 5 * 2700);
    running.stop().await;
}

fn read_iat(token: &str) -> i64 {
    warrant_token::unverified_claims(token)
        .unwrap()
        .iat
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn while_warrant_is_down_the_valid_token_stays_and_readiness_ends_with_it() {
    let w = Warrant::start().await;
    let tokens = w.agent_tokens();
    let running = w.spawn(w.agent(&[("aws-token", "sts.amazonaws.com")], 3600));
    let (first, claims) = until_new_token(&w.file("aws-token"), None).await;
    let expires = claims.exp.unwrap();
    w.up.store(false, Ordering::SeqCst);
    let before = w.calls.load(Ordering::SeqCst);
    // Past the refresh point, before expiry: the old token is kept, and still current.
    advance(3500).await;
    assert_eq!(std::fs::read_to_string(w.file("aws-token")).unwrap(), first);
    check(&tokens, w.clock.now()).unwrap();
    // Past expiry: still the same file (never emptied), but readiness fails, saying why.
    advance(expires as u64 + 30 - w.now() as u64).await;
    assert_eq!(std::fs::read_to_string(w.file("aws-token")).unwrap(), first);
    let why = check(&tokens, w.clock.now()).unwrap_err().to_string();
    assert!(why.contains("expired"), "{why}");
    // It retried, backing off: from the refresh point (75-80 %) to past expiry is about
    // 750-900 s, which at 1 s doubling to a minute is some 15-20 attempts, not hundreds.
    let attempts = w.calls.load(Ordering::SeqCst) - before;
    assert!(
        (8..=30).contains(&attempts),
        "{attempts} attempts while down"
    );
    assert!(!running.task.is_finished(), "an outage is not fatal");
    // Back: a new token within a minute (the longest backoff).
    w.up.store(true, Ordering::SeqCst);
    let back_at = w.now();
    let (second, _) = until_new_token(&w.file("aws-token"), Some(&first)).await;
    assert!(
        w.now() - back_at <= 60,
        "{}s after warrant came back",
        w.now() - back_at
    );
    assert!(w.accepts(&second, "sts.amazonaws.com").await);
    check(&tokens, w.clock.now()).unwrap();
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_deleted_pods_agent_keeps_its_last_token_and_warrant_revokes_it() {
    let w = Warrant::start().await;
    let tokens = w.agent_tokens();
    let running = w.spawn(w.agent(&[("aws-token", "sts.amazonaws.com")], 3600));
    let (token, _) = until_new_token(&w.file("aws-token"), None).await;
    w.objects.remove(Kind::Pod, "demo", "app-0");
    let before = w.calls.load(Ordering::SeqCst);
    advance(3000).await;
    // Refused (its kube token is bound to the deleted pod: 401), retried: no new token, the
    // old one untouched in the file, and warrant no longer accepts it.
    assert!(w.calls.load(Ordering::SeqCst) > before);
    assert_eq!(std::fs::read_to_string(w.file("aws-token")).unwrap(), token);
    assert!(!w.accepts(&token, "sts.amazonaws.com").await);
    assert!(!running.task.is_finished());
    advance(700).await;
    assert!(check(&tokens, w.clock.now()).is_err());
    running.stop().await;
}

/// A refusal that retrying cannot mend (an audience warrant's policy does not allow) ends the
/// agent with the reason; no file is written.
#[tokio::test(start_paused = true)]
async fn a_refused_audience_ends_the_agent_with_the_reason() {
    let w = Warrant::start().await;
    let running = w.spawn(w.agent(&[("vault-token", "vault")], 3600));
    let error = running.task.await.unwrap().unwrap_err().to_string();
    assert!(
        error.contains("403") && error.contains("not a self-service audience"),
        "{error}"
    );
    assert!(error.contains("not retried"), "{error}");
    assert!(!w.file("vault-token").exists());
}

/// A restarted agent keeps the valid token it finds, and asks for a new one only when that
/// one is due.
#[tokio::test(start_paused = true)]
async fn a_restarted_agent_keeps_the_token_in_the_file() {
    let w = Warrant::start().await;
    let running = w.spawn(w.agent(&[("aws-token", "sts.amazonaws.com")], 3600));
    let (token, claims) = until_new_token(&w.file("aws-token"), None).await;
    running.stop().await;
    let calls = w.calls.load(Ordering::SeqCst);
    let running = w.spawn(w.agent(&[("aws-token", "sts.amazonaws.com")], 3600));
    advance(2600).await;
    assert_eq!(
        w.calls.load(Ordering::SeqCst),
        calls,
        "asked again before it was due"
    );
    assert_eq!(std::fs::read_to_string(w.file("aws-token")).unwrap(), token);
    let (_, renewed) = until_new_token(&w.file("aws-token"), Some(&token)).await;
    assert!(renewed.iat.unwrap() - claims.iat.unwrap() <= 2880);
    running.stop().await;
}

/// A reader polling the file while the agent replaces it again and again only ever sees a whole
/// token: never an empty file, never part of one.
#[tokio::test(start_paused = true)]
async fn a_polling_reader_never_sees_an_empty_or_partial_file() {
    let w = Warrant::start().await;
    let path = w.file("aws-token");
    let running = w.spawn(w.agent(&[("aws-token", "sts.amazonaws.com")], 600));
    let (first, _) = until_new_token(&path, None).await;
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (path, stop) = (path.clone(), stop.clone());
        std::thread::spawn(move || {
            let (mut reads, mut bad, mut seen) =
                (0u64, Vec::new(), std::collections::BTreeSet::new());
            while !stop.load(Ordering::SeqCst) {
                match std::fs::read(&path) {
                    Ok(bytes) => {
                        reads += 1;
                        let text = String::from_utf8_lossy(&bytes).into_owned();
                        if warrant_token::unverified_claims(&text).is_err()
                            || text.split('.').count() != 3
                        {
                            bad.push(text);
                        } else {
                            seen.insert(text);
                        }
                    }
                    Err(e) => bad.push(format!("read failed: {e}")),
                }
            }
            (reads, bad, seen)
        })
    };
    let mut previous = first;
    for _ in 0..200 {
        let (next, _) = until_new_token(&path, Some(&previous)).await;
        previous = next;
    }
    stop.store(true, Ordering::SeqCst);
    let (reads, bad, seen) = reader.join().unwrap();
    assert!(
        bad.is_empty(),
        "{} bad reads of {reads}, e.g. {:?}",
        bad.len(),
        bad.first()
    );
    assert!(reads > 0 && !seen.is_empty());
    running.stop().await;
}

#[test]
fn token_specs_parse_as_documented() {
    let parse = |text: &str| text.parse::<TokenSpec>();
    assert_eq!(
        parse("/var/run/secrets/warrant.dev/tokens/aws-token=sts.amazonaws.com").unwrap(),
        TokenSpec {
            file: "/var/run/secrets/warrant.dev/tokens/aws-token".into(),
            audience: "sts.amazonaws.com".into()
        }
    );
    assert_eq!(
        parse("/t=api://AzureADTokenExchange").unwrap().audience,
        "api://AzureADTokenExchange"
    );
    assert_eq!(
        parse("/t=https://x/?a=b").unwrap().audience,
        "https://x/?a=b"
    );
    for bad in ["relative=aud", "/t", "/t=", "/=aud"] {
        assert!(parse(bad).is_err(), "{bad}");
    }
    assert_eq!(
        parse("/t").unwrap_err().to_string(),
        "\"/t\" is not FILE=AUDIENCE"
    );
}

/// A token planted in the file before the agent starts (the volume is shared: anything that
/// can write it could) is kept only if warrant issued it for this pod and audience. An
/// unsigned token, one signed by another key, garbage, or warrant's own token not bound to the
/// pod, each valid "until 2099", is discarded at once (the file emptied) and a fresh token
/// written in its place.
#[tokio::test(start_paused = true)]
async fn a_planted_token_is_discarded_and_a_fresh_one_asked_for() {
    use base64::Engine as _;
    let w = Warrant::start().await;
    let b64 = |v: &Value| {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(serde_json::to_vec(v).unwrap())
    };
    let claims = |now: i64| {
        json!({
            "aud": ["sts.amazonaws.com"], "iss": ISSUER, "sub": "system:serviceaccount:demo:app",
            "iat": now, "nbf": now, "exp": 4_070_908_800_i64, "jti": "planted",
            "kubernetes.io": {"namespace": "demo", "serviceaccount": {"name": "app", "uid": SA_UID},
                              "pod": {"name": "app-0", "uid": POD_UID}},
        })
    };
    let unsigned = format!(
        "{}.{}.",
        b64(&json!({"alg": "none", "typ": "JWT"})),
        b64(&claims(w.now()))
    );
    let other_key = warrant_token::SigningKey::generate(warrant_token::KeyType::P256).unwrap();
    let forged = other_key
        .sign(&warrant_token::Claims::new(warrant_token::NewToken {
            issuer: ISSUER,
            namespace: "demo",
            service_account: warrant_token::ObjectRef::new("app", SA_UID),
            audiences: vec!["sts.amazonaws.com".into()],
            binding: warrant_token::Binding::Pod {
                pod: warrant_token::ObjectRef::new("app-0", POD_UID),
                node: None,
            },
            issued_at: w.now(),
            expires_at: 4_070_908_800,
            warn_after: None,
            jti: "forged".into(),
        }))
        .unwrap();
    let unbound = w
        .admin_post(
            "/api/v1/namespaces/demo/serviceaccounts/app/token",
            json!({"spec": {"audiences": ["sts.amazonaws.com"], "expirationSeconds": 86_400}}),
        )
        .await["status"]["token"]
        .as_str()
        .unwrap()
        .to_owned();
    for planted in [unsigned, forged, unbound, "not a token".to_owned()] {
        let path = w.file("aws-token");
        std::fs::write(&path, &planted).unwrap();
        let calls = w.calls.load(Ordering::SeqCst);
        let running = w.spawn(w.agent(&[("aws-token", "sts.amazonaws.com")], 3600));
        let (token, claims) = until_new_token(&path, Some(&planted)).await;
        assert!(
            w.calls.load(Ordering::SeqCst) > calls,
            "asked for a new one"
        );
        assert!(w.accepts(&token, "sts.amazonaws.com").await);
        assert_eq!(claims.kubernetes.pod.unwrap().uid, POD_UID);
        assert_eq!(claims.exp.unwrap() - claims.iat.unwrap(), 3600);
        running.stop().await;
        std::fs::remove_file(&path).unwrap();
    }
}

/// While warrant's keys cannot be fetched, a token found in the file cannot be checked: it is
/// not kept (the agent asks warrant at once, and keeps asking), and the file is left as it is,
/// since it may be warrant's own.
#[tokio::test(start_paused = true)]
async fn a_token_that_cannot_be_checked_is_not_kept_but_left_in_place() {
    let w = Warrant::start().await;
    let running = w.spawn(w.agent(&[("aws-token", "sts.amazonaws.com")], 3600));
    let (token, _) = until_new_token(&w.file("aws-token"), None).await;
    running.stop().await;
    w.up.store(false, Ordering::SeqCst);
    let calls = w.calls.load(Ordering::SeqCst);
    let running = w.spawn(w.agent(&[("aws-token", "sts.amazonaws.com")], 3600));
    advance(30).await;
    assert!(w.calls.load(Ordering::SeqCst) > calls, "not asked at once");
    assert_eq!(std::fs::read_to_string(w.file("aws-token")).unwrap(), token);
    w.up.store(true, Ordering::SeqCst);
    let (fresh, _) = until_new_token(&w.file("aws-token"), Some(&token)).await;
    assert!(w.accepts(&fresh, "sts.amazonaws.com").await);
    running.stop().await;
}
