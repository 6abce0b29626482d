//! Key binding beyond DPoP (issue 27): tokens bound to the client certificate their caller
//! authenticated with (RFC 8705), usable only on a connection presenting that certificate; and
//! the authorization policy's `requireKeyBinding`, which refuses unbound tokens for chosen
//! audiences and for self-service. Thumbprints are computed here from the certificate's DER with
//! aws-lc-rs, not with warrant's own function.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use http::{Method, StatusCode};
use serde_json::{Value, json};
use warrant_testkit::{DpopHolder, Issued, TestCa, sha256_b64url};

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

/// Where warrant is addressed in these tests, for DPoP proofs' `htu`.
const HOST: &str = "warrant.example:8443";

/// A proof by `holder` for `GET /metrics` presenting `token`.
fn metrics_proof(holder: &DpopHolder, token: &str, jti: &str) -> String {
    holder.proof(
        &json!({"jti": jti, "htm": "GET", "htu": format!("https://{HOST}/metrics"),
                         "iat": NOW, "ath": sha256_b64url(token.as_bytes())}),
    )
}

/// `GET /metrics` with `authorization`, a `DPoP` proof if any, over a connection presenting
/// `peer` if any.
async fn metrics(
    s: &Setup,
    peer: Option<&Issued>,
    authorization: &str,
    proof: Option<&str>,
) -> Reply {
    let mut headers = vec![("authorization", authorization), ("host", HOST)];
    if let Some(proof) = proof {
        headers.push(("dpop", proof));
    }
    s.api
        .send_with_peer(
            Method::GET,
            "/metrics",
            peer.map(Issued::peer),
            &headers,
            None,
        )
        .await
}

/// Issue 31, item 3: a token bound to a DPoP key and a certificate authenticates only with the
/// proof of the key under the DPoP scheme on a connection presenting the certificate: the proof
/// alone, or the certificate alone, is not enough. (warrant's API once passed it on the proof
/// alone.)
#[tokio::test]
async fn a_token_bound_to_a_key_and_a_certificate_needs_both() {
    let s = setup("");
    let client = s.ca.issue_client("deployer", &[]);
    let holder = DpopHolder::new();
    let token = with_cnf(
        &certificate_bound(&s, &s.ca.issue_client("admin-cert", &["system:masters"])).await,
        json!({"jkt": holder.thumbprint(), "x5t#S256": thumbprint(&client)}),
    );
    let dpop = format!("DPoP {token}");
    let r = metrics(&s, None, &dpop, Some(&metrics_proof(&holder, &token, "p1"))).await;
    assert_eq!(
        r.code,
        StatusCode::UNAUTHORIZED,
        "the proof alone: {}",
        r.text
    );
    let other = s.ca.issue_client("other", &[]);
    let r = metrics(
        &s,
        Some(&other),
        &dpop,
        Some(&metrics_proof(&holder, &token, "p2")),
    )
    .await;
    assert_eq!(
        r.code,
        StatusCode::UNAUTHORIZED,
        "another certificate: {}",
        r.text
    );
    let r = metrics(&s, Some(&client), &format!("Bearer {token}"), None).await;
    assert_eq!(
        r.code,
        StatusCode::UNAUTHORIZED,
        "the certificate alone: {}",
        r.text
    );
    let r = metrics(
        &s,
        Some(&client),
        &dpop,
        Some(&metrics_proof(&holder, &token, "p3")),
    )
    .await;
    assert_eq!(r.code, StatusCode::OK, "both: {}", r.text);
}

/// Issue 31, item 3: a token whose `cnf` warrant does not understand (RFC 7800's `jwk`) is not a
/// bearer token at warrant's API either, on any connection, under either scheme. (It once
/// authenticated as one.)
#[tokio::test]
async fn a_cnf_warrant_does_not_understand_is_not_a_bearer_token() {
    let s = setup("");
    let holder = DpopHolder::new();
    let unbound = s.api.token("app", json!({})).await;
    let unbound = unbound.json["status"]["token"].as_str().unwrap();
    let r = metrics(&s, None, &format!("Bearer {unbound}"), None).await;
    assert_eq!(r.code, StatusCode::OK, "unbound, as before: {}", r.text);
    for cnf in [
        json!({"jwk": holder.jwk()}),
        json!({"jkt": holder.thumbprint(), "kid": "k"}),
        json!({"x5t#S256": 7}),
        json!({}),
        json!(null),
    ] {
        let token = with_cnf(unbound, cnf.clone());
        let r = metrics(&s, None, &format!("Bearer {token}"), None).await;
        assert_eq!(
            r.code,
            StatusCode::UNAUTHORIZED,
            "{cnf} as bearer: {}",
            r.text
        );
        let r = metrics(
            &s,
            None,
            &format!("DPoP {token}"),
            Some(&metrics_proof(&holder, &token, &cnf.to_string())),
        )
        .await;
        assert_eq!(
            r.code,
            StatusCode::UNAUTHORIZED,
            "{cnf} with a proof: {}",
            r.text
        );
    }
}

/// Issue 31, item 4: a caller that authenticated with a certificate-bound token gets tokens
/// bound to the same certificate, which then pass no review without it; asking for another
/// binding is refused. (It once got unbound tokens, which worked with no certificate at all.)
#[tokio::test]
async fn a_certificate_bound_caller_mints_only_tokens_bound_to_its_certificate() {
    let s = setup("");
    let client = s.ca.issue_client("deployer", &["system:masters"]);
    let own = certificate_bound(&s, &client).await;
    let bearer = format!("Bearer {own}");
    let ask = |headers: Vec<(&'static str, String)>| {
        let (api, peer, bearer) = (&s.api, client.peer(), bearer.clone());
        async move {
            let mut all: Vec<(&str, &str)> = vec![("authorization", bearer.as_str())];
            all.extend(headers.iter().map(|(name, value)| (*name, value.as_str())));
            api.send_with_peer(
                Method::POST,
                TOKEN_PATH,
                Some(peer),
                &all,
                Some(token_request(&["vault"])),
            )
            .await
        }
    };
    for headers in [vec![], vec![(BIND.0, BIND.1.to_owned())]] {
        let r = ask(headers.clone()).await;
        assert_eq!(r.code, StatusCode::CREATED, "{headers:?}: {}", r.text);
        let minted = r.json["status"]["token"].as_str().unwrap().to_owned();
        assert_eq!(
            payload(&minted)["cnf"],
            json!({"x5t#S256": thumbprint(&client)}),
            "{headers:?}"
        );
        let review = s
            .api
            .review("authentication.k8s.io/v1", &minted, &["vault"])
            .await;
        assert_eq!(
            review.json["status"]["authenticated"],
            Value::Null,
            "{}",
            review.text
        );
    }
    // A DPoP proof would bind the new token to another key: refused, saying why.
    let holder = DpopHolder::new();
    let proof = holder.proof(&json!({"jti": "other-key", "htm": "POST",
        "htu": format!("https://{HOST}{TOKEN_PATH}"), "iat": NOW}));
    let r = ask(vec![("dpop", proof), ("host", HOST.to_owned())]).await;
    assert_eq!(r.code, StatusCode::BAD_REQUEST, "{}", r.text);
    assert_eq!(
        r.json["message"],
        "the token you authenticated with is bound to a client certificate (cnf.x5t#S256): a token you ask for carries the same binding, and cannot be bound to a DPoP proof's key instead"
    );
}

/// Issue 31, item 4: a DPoP-bound caller asking for a certificate binding is refused too: its
/// tokens carry its key's binding.
#[tokio::test]
async fn a_dpop_bound_caller_cannot_ask_for_another_binding() {
    let s = setup("");
    let holder = DpopHolder::new();
    let token = with_cnf(
        &certificate_bound(&s, &s.ca.issue_client("deployer", &["system:masters"])).await,
        json!({"jkt": holder.thumbprint()}),
    );
    let proof = holder.proof(&json!({"jti": "ask", "htm": "POST",
        "htu": format!("https://{HOST}{TOKEN_PATH}"), "iat": NOW,
        "ath": sha256_b64url(token.as_bytes())}));
    let client = s.ca.issue_client("app-cert", &[]);
    let dpop = format!("DPoP {token}");
    let r = s
        .api
        .send_with_peer(
            Method::POST,
            TOKEN_PATH,
            Some(client.peer()),
            &[
                ("authorization", dpop.as_str()),
                ("dpop", proof.as_str()),
                ("host", HOST),
                BIND,
            ],
            Some(token_request(&["vault"])),
        )
        .await;
    assert_eq!(r.code, StatusCode::BAD_REQUEST, "{}", r.text);
    assert!(
        r.json["message"]
            .as_str()
            .unwrap()
            .contains("a token is bound to one key"),
        "{}",
        r.text
    );
}
