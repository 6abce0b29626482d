//! Key binding beyond DPoP (issue 27): tokens bound to the client certificate their caller
//! authenticated with (RFC 8705), usable only on a connection presenting that certificate; and
//! the authorization policy's `requireKeyBinding`, which refuses unbound tokens for chosen
//! audiences and for self-service. Thumbprints are computed here from the certificate's DER with
//! aws-lc-rs, not with warrant's own function.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use http::{Method, StatusCode};
use serde_json::{Value, json};
use warrant_testkit::{Issued, TestCa};

use crate::support::*;

const TOKEN_PATH: &str = "/api/v1/namespaces/demo/serviceaccounts/app/token";
const BIND: (&str, &str) = ("warrant-token-binding", "client-certificate");

/// `demo/app` may read `/metrics` with its own tokens; it may ask for `vault` and `rp-*`
/// tokens for itself; what `requireKeyBinding` says is the test's.
fn policy(require: &str) -> String {
    format!(
        "apiVersion: warrant.dev/v1alpha1
kind: AuthorizationPolicy
rules:
- name: metrics
  subjects: [{{kind: ServiceAccount, namespace: demo, name: app}}]
  metrics: true
selfService:
  audiences: [vault, 'rp-*']
{require}"
    )
}

struct Setup {
    api: Api,
    ca: TestCa,
}

/// Callers with a certificate of the client CA; the policy `policy(require)`.
fn setup(require: &str) -> Setup {
    let ca = TestCa::new("client-ca");
    let policy = warrant_auth::Policy::parse(&policy(require), "policy.yaml").unwrap();
    let api = api_auth(|authn, authz| {
        authn.trust.set_client_ca(Some(ca.bundle()));
        authz.policy = Some(warrant_auth::PolicyFile::from_policy(
            policy,
            std::path::Path::new("policy.yaml"),
        ));
    });
    Setup { api, ca }
}

/// RFC 8705 §3.1: base64url of the SHA-256 of the certificate's DER.
fn thumbprint(certificate: &Issued) -> String {
    URL_SAFE_NO_PAD.encode(aws_lc_rs::digest::digest(
        &aws_lc_rs::digest::SHA256,
        certificate.der().as_ref(),
    ))
}

fn payload(token: &str) -> Value {
    serde_json::from_slice(
        &URL_SAFE_NO_PAD
            .decode(token.split('.').nth(1).unwrap())
            .unwrap(),
    )
    .unwrap()
}

fn token_request(audiences: &[&str]) -> Value {
    json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
           "spec": {"audiences": audiences}})
}

/// A token for `demo/app` and warrant's own API audience, bound to `client`'s certificate,
/// asked for by `client` (an administrator).
async fn certificate_bound(s: &Setup, client: &Issued) -> String {
    let reply = s
        .api
        .send_with_peer(
            Method::POST,
            TOKEN_PATH,
            Some(client.peer()),
            &[BIND],
            Some(
                json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                        "spec": {}}),
            ),
        )
        .await;
    assert_eq!(reply.code, StatusCode::CREATED, "{}", reply.text);
    reply.json["status"]["token"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_certificate_caller_gets_a_token_bound_to_its_certificate() {
    let s = setup("");
    let client = s.ca.issue_client("deployer", &["system:masters"]);
    let token = certificate_bound(&s, &client).await;
    assert_eq!(
        payload(&token)["cnf"],
        json!({"x5t#S256": thumbprint(&client)})
    );

    // Without the header, the same caller's token is unbound, as kube-apiserver's are.
    let reply = s
        .api
        .send_with_peer(
            Method::POST,
            TOKEN_PATH,
            Some(client.peer()),
            &[],
            Some(token_request(&["vault"])),
        )
        .await;
    assert_eq!(reply.code, StatusCode::CREATED, "{}", reply.text);
    assert_eq!(
        payload(reply.json["status"]["token"].as_str().unwrap())["cnf"],
        Value::Null
    );
}

/// The token works on a connection presenting its certificate, as its service account (not as
/// the certificate's user), and nowhere else.
#[tokio::test]
async fn a_certificate_bound_token_works_only_with_its_certificate() {
    let s = setup("");
    let client = s.ca.issue_client("deployer", &["system:masters"]);
    let token = certificate_bound(&s, &client).await;
    let bearer = format!("Bearer {token}");
    let metrics = |peer: Option<warrant_auth::PeerCertificate>, authorization: String| {
        let api = &s.api;
        async move {
            api.send_with_peer(
                Method::GET,
                "/metrics",
                peer,
                &[("authorization", authorization.as_str())],
                None,
            )
            .await
        }
    };

    // With its certificate: the service account, which the policy lets read metrics. (The
    // certificate's own user, "deployer", has no rule for metrics: a 200 is the token's.)
    let r = metrics(Some(client.peer()), bearer.clone()).await;
    assert_eq!(r.code, StatusCode::OK, "{}", r.text);

    // Without a certificate, or with another one of the same CA: refused, and not as the
    // other certificate's user either.
    let r = metrics(None, bearer.clone()).await;
    assert_eq!(r.code, StatusCode::UNAUTHORIZED, "{}", r.text);
    let other = s.ca.issue_client("mallory", &["system:masters"]);
    let r = metrics(Some(other.peer()), bearer.clone()).await;
    assert_eq!(r.code, StatusCode::UNAUTHORIZED, "{}", r.text);
    // Under the DPoP scheme it proves nothing.
    let r = metrics(Some(client.peer()), format!("DPoP {token}")).await;
    assert_eq!(r.code, StatusCode::UNAUTHORIZED, "{}", r.text);

    // An unbound token of the service account still works beside any certificate, as before:
    // the certificate's user decides (kube's order), here forbidden.
    let unbound = s.api.token("app", json!({})).await;
    let unbound = unbound.json["status"]["token"].as_str().unwrap().to_owned();
    let r = metrics(
        Some(s.ca.issue_client("nobody", &[]).peer()),
        format!("Bearer {unbound}"),
    )
    .await;
    assert_eq!(r.code, StatusCode::FORBIDDEN, "{}", r.text);
}

/// A binding that cannot be made as asked is a 400 saying why, never an unbound token.
#[tokio::test]
async fn a_binding_that_cannot_be_made_is_refused() {
    let s = setup("");
    let client = s.ca.issue_client("deployer", &["system:masters"]);
    let body = || Some(token_request(&["vault"]));
    let admin = format!("Bearer {ADMIN}");
    let cases = [
        // A token-file caller has no certificate to bind to.
        (
            None,
            vec![("authorization", admin.as_str()), BIND],
            "needs a caller that authenticated with a client certificate",
        ),
        (
            Some(&client),
            vec![("warrant-token-binding", "hsm")],
            "the one binding asked for this way is \"client-certificate\"",
        ),
        (
            Some(&client),
            vec![BIND, BIND],
            "warrant-token-binding may be given once",
        ),
        (
            Some(&client),
            vec![BIND, ("dpop", "x.y.z")],
            "a token is bound to one key",
        ),
    ];
    for (peer, headers, why) in cases {
        let r = s
            .api
            .send_with_peer(
                Method::POST,
                TOKEN_PATH,
                peer.map(Issued::peer),
                &headers,
                body(),
            )
            .await;
        assert_eq!(r.code, StatusCode::BAD_REQUEST, "{why}: {}", r.text);
        assert_eq!(r.json["kind"], "Status");
        let message = r.json["message"].as_str().unwrap();
        assert!(message.contains(why), "{message}");
    }
}

/// `requireKeyBinding.audiences`: an unbound token for such an audience is refused whoever
/// asks (system:masters included); a bound one is issued; other audiences are unaffected.
#[tokio::test]
async fn the_policy_requires_binding_for_an_audience() {
    let s = setup("requireKeyBinding:\n  audiences: ['rp-*']\n");
    let client = s.ca.issue_client("deployer", &["system:masters"]);
    let ask = |headers: Vec<(&'static str, &'static str)>, audiences: &'static [&'static str]| {
        let (api, peer) = (&s.api, client.peer());
        async move {
            api.send_with_peer(
                Method::POST,
                TOKEN_PATH,
                Some(peer),
                &headers,
                Some(token_request(audiences)),
            )
            .await
        }
    };
    let r = ask(vec![], &["vault", "rp-payments"]).await;
    assert_eq!(r.code, StatusCode::FORBIDDEN, "{}", r.text);
    assert_eq!(
        r.json["message"],
        "serviceaccounts \"app\" is forbidden: User \"deployer\" cannot request an unbound token for the audience \"rp-payments\": the authorization policy requires tokens for it to be bound to a key (send a DPoP proof of the key, or ask for the client certificate's binding)"
    );
    let r = ask(vec![BIND], &["vault", "rp-payments"]).await;
    assert_eq!(r.code, StatusCode::CREATED, "{}", r.text);
    let r = ask(vec![], &["vault"]).await;
    assert_eq!(r.code, StatusCode::CREATED, "{}", r.text);
}

/// `requireKeyBinding.selfService`: a service account asking for itself with its own token
/// gets only key-bound tokens; others asking for it are not held to that.
#[tokio::test]
async fn the_policy_requires_binding_for_self_service() {
    let s = setup("requireKeyBinding:\n  selfService: true\n");
    let own = s.api.token("app", json!({})).await;
    let own = own.json["status"]["token"].as_str().unwrap().to_owned();
    let r = s
        .api
        .token_as(&own, "app", json!({"audiences": ["vault"]}))
        .await;
    assert_eq!(r.code, StatusCode::FORBIDDEN, "{}", r.text);
    assert!(
        r.json["message"]
            .as_str()
            .unwrap()
            .contains("cannot request an unbound token for itself: the authorization policy requires self-service tokens to be bound to a key"),
        "{}",
        r.text
    );
    // The administrator is not asking for itself.
    let r = s.api.token("app", json!({"audiences": ["vault"]})).await;
    assert_eq!(r.code, StatusCode::CREATED, "{}", r.text);
}
