//! warrant.dev's TokenReview with the proof of a key-bound token (issue 27): `spec.dpop` (the
//! DPoP proof a relying party received, with its request's method and URI) or
//! `spec.certificateThumbprint`. Proofs and thumbprints come from warrant-testkit (aws-lc-rs by
//! RFC 7638's and RFC 8705's recipes), not from warrant's code.
//! kube's TokenReview routes drop those fields unread.

use axum::body::Body;
use http::{Method, Request, StatusCode};
use serde_json::{Value, json};

use crate::support::*;
use warrant_testkit::DpopHolder;
use warrant_testkit::sha256_b64url as sha256;

const WARRANT: &str = "warrant.dev/v1alpha1";
/// Where warrant is addressed when a test asks it for a token.
const HOST: &str = "warrant.example:8443";
const TOKEN_PATH: &str = "/api/v1/namespaces/demo/serviceaccounts/app/token";
/// The relying party's request that the client's proof is for.
const RP_METHOD: &str = "GET";
const RP_URI: &str = "https://vault.example/v1/secret/data/app";
/// What `status.error` says of a key-bound token on kube's routes.
const KUBE_ROUTE_REFUSAL: &str = "service account token is bound to a key (cnf): this TokenReview cannot carry the proof of that key; review it with the proof (spec.dpop or spec.certificateThumbprint) at /apis/warrant.dev/v1alpha1/tokenreviews";

/// A proof for the relying party's request, presenting `token`.
fn for_rp(holder: &DpopHolder, token: &str, jti: &str) -> String {
    holder.proof(
        &json!({"jti": jti, "htm": RP_METHOD, "htu": RP_URI, "iat": NOW,
                         "ath": sha256(token.as_bytes())}),
    )
}

/// A proof for a TokenRequest for `demo/app`.
fn for_token_request(holder: &DpopHolder, jti: &str) -> String {
    holder.proof(&json!({"jti": jti, "htm": "POST",
                         "htu": format!("https://{HOST}{TOKEN_PATH}"), "iat": NOW}))
}

/// A TokenRequest for `demo/app`, for `vault`, with the `DPoP` header `proof` if any.
async fn token_request(api: &Api, proof: Option<&str>) -> Reply {
    let mut request = Request::builder()
        .method(Method::POST)
        .uri(TOKEN_PATH)
        .header("authorization", format!("Bearer {ADMIN}"))
        .header("content-type", "application/json")
        .header("host", HOST);
    if let Some(proof) = proof {
        request = request.header("dpop", proof);
    }
    let body = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                      "spec": {"audiences": ["vault"]}});
    api.send(request.body(Body::from(body.to_string())).unwrap())
        .await
}

/// A token for `vault` bound to `holder`'s DPoP key, as warrant issues it.
async fn dpop_bound_token(api: &Api, holder: &DpopHolder) -> String {
    let reply = token_request(api, Some(&for_token_request(holder, "issue"))).await;
    assert_eq!(reply.code, StatusCode::CREATED, "{}", reply.text);
    let token = reply.json["status"]["token"].as_str().unwrap().to_owned();
    assert_eq!(
        claims(&token)
            .cnf
            .and_then(|cnf| cnf.binding().ok()?.jkt.clone()),
        Some(holder.thumbprint())
    );
    token
}

/// A token for `vault` without a key.
async fn unbound_token(api: &Api) -> String {
    let reply = token_request(api, None).await;
    assert_eq!(reply.code, StatusCode::CREATED, "{}", reply.text);
    reply.json["status"]["token"].as_str().unwrap().to_owned()
}

/// A token for `vault` bound to the client certificate whose thumbprint is `x5t`: an unbound
/// token's claims with `cnf.x5t#S256`, signed by the server's own key.
async fn certificate_bound_token(api: &Api, x5t: &str) -> String {
    with_cnf(&unbound_token(api).await, json!({"x5t#S256": x5t}))
}

/// The DER of the client certificate in these tests: its bytes only matter through their hash.
const CLIENT_CERT_DER: &[u8] = b"0\x82\x01\x0a the client certificate's DER";

/// Reviews `token` for `vault` at `/apis/<version>/tokenreviews`, with `extra` merged into the
/// spec.
async fn review(api: &Api, version: &str, token: &str, extra: Value) -> Reply {
    let mut spec = json!({"token": token, "audiences": ["vault"]});
    for (name, value) in extra.as_object().unwrap() {
        spec[name] = value.clone();
    }
    api.post(
        &format!("/apis/{version}/tokenreviews"),
        json!({"apiVersion": version, "kind": "TokenReview", "spec": spec}),
    )
    .await
}

fn dpop(proof: &str) -> Value {
    json!({"dpop": {"proof": proof, "method": RP_METHOD, "uri": RP_URI}})
}

fn thumbprint(x5t: &str) -> Value {
    json!({"certificateThumbprint": x5t})
}

/// Asserts a review that did not authenticate, saying `why` (the start of `status.error`),
/// naming no user, quoting neither the token nor the proof.
fn assert_refused(reply: &Reply, why: &str, secrets: &[&str], case: &str) {
    assert_eq!(reply.code, StatusCode::CREATED, "{case}: {}", reply.text);
    let status = &reply.json["status"];
    assert_eq!(
        status["authenticated"],
        Value::Null,
        "{case}: {}",
        reply.text
    );
    assert_eq!(status["user"], json!({}), "{case}");
    assert_eq!(status.get("keyBinding"), None, "{case}");
    let error = status["error"].as_str().unwrap();
    assert!(error.starts_with(why), "{case}: {error}");
    for secret in secrets {
        assert!(
            !error.contains(secret),
            "{case}: the error quotes a credential"
        );
    }
}

/// The relying party's proof for a DPoP-bound token: authenticated, and the status says which
/// binding was checked. The proof is echoed in the spec, as the token is.
#[tokio::test]
async fn a_dpop_bound_token_passes_with_its_proof() {
    let api = api();
    let holder = DpopHolder::new();
    let token = dpop_bound_token(&api, &holder).await;
    let proof = for_rp(&holder, &token, "rp-1");
    let reply = review(&api, WARRANT, &token, dpop(&proof)).await;
    assert_eq!(reply.code, StatusCode::CREATED, "{}", reply.text);
    assert_eq!(reply.json["apiVersion"], WARRANT);
    let status = reply.assert_authenticated();
    assert_eq!(status["user"]["username"], "system:serviceaccount:demo:app");
    assert_eq!(status["audiences"], json!(["vault"]));
    assert_eq!(
        status["keyBinding"],
        json!({"method": "DPoP", "thumbprint": holder.thumbprint()})
    );
    assert_eq!(status.get("error"), None);
    assert_eq!(reply.json["spec"]["dpop"], dpop(&proof)["dpop"]);
    // The proof's htu query is ignored, as RFC 9449 says; the URI given may carry one too.
    let with_query = for_rp(&holder, &token, "rp-2");
    let reply = review(
        &api,
        WARRANT,
        &token,
        json!({"dpop": {"proof": with_query, "method": RP_METHOD, "uri": format!("{RP_URI}?version=2")}}),
    )
    .await;
    reply.assert_authenticated();
}

/// A proof is good once: reviewed again it is refused, and the replay cache is the one warrant's
/// own API uses, so a proof reviewed is refused at the API and the other way round.
#[tokio::test]
async fn a_replayed_proof_is_refused_across_reviews_and_the_api() {
    let api = api();
    let holder = DpopHolder::new();
    let token = dpop_bound_token(&api, &holder).await;
    let proof = for_rp(&holder, &token, "once");
    let first = review(&api, WARRANT, &token, dpop(&proof)).await;
    first.assert_authenticated();
    api.advance(30);
    let again = review(&api, WARRANT, &token, dpop(&proof)).await;
    assert_refused(
        &again,
        "invalid DPoP proof: DPoP proof has already been used (its jti was seen before)",
        &[&token, &proof],
        "replayed",
    );

    // Used at warrant's API first (a TokenRequest takes it: it presents no token there), the
    // same proof is then refused by a review for that request.
    let holder = DpopHolder::new();
    let token = dpop_bound_token(&api, &holder).await;
    let used = holder.proof(&json!({"jti": "shared", "htm": "POST",
        "htu": format!("https://{HOST}{TOKEN_PATH}"), "iat": NOW + 30,
        "ath": sha256(token.as_bytes())}));
    let issued = token_request(&api, Some(&used)).await;
    assert_eq!(issued.code, StatusCode::CREATED, "{}", issued.text);
    let spec = json!({"dpop": {"proof": used, "method": "POST",
                               "uri": format!("https://{HOST}{TOKEN_PATH}")}});
    let reviewed = review(&api, WARRANT, &token, spec.clone()).await;
    assert_refused(
        &reviewed,
        "invalid DPoP proof: DPoP proof has already been used",
        &[&token, &used],
        "used at the API",
    );
    // And the other way: reviewed first, then refused at the API.
    let fresh = holder.proof(&json!({"jti": "reviewed-first", "htm": "POST",
        "htu": format!("https://{HOST}{TOKEN_PATH}"), "iat": NOW + 30,
        "ath": sha256(token.as_bytes())}));
    let spec = json!({"dpop": {"proof": fresh, "method": "POST",
                               "uri": format!("https://{HOST}{TOKEN_PATH}")}});
    let reviewed = review(&api, WARRANT, &token, spec).await;
    reviewed.assert_authenticated();
    let refused = token_request(&api, Some(&fresh)).await;
    assert_eq!(refused.code, StatusCode::BAD_REQUEST, "{}", refused.text);
    assert!(
        refused.json["message"]
            .as_str()
            .unwrap()
            .contains("has already been used"),
        "{}",
        refused.text
    );
}

/// Each wrong or missing proof leaves the token unauthenticated, saying why.
#[tokio::test]
async fn a_dpop_bound_token_without_a_valid_proof_is_refused_saying_why() {
    let api = api();
    let holder = DpopHolder::new();
    let token = dpop_bound_token(&api, &holder).await;
    let thief = DpopHolder::new();
    let other_token = unbound_token(&api).await;
    let stale = holder.proof(&json!({"jti": "stale", "htm": RP_METHOD, "htu": RP_URI,
        "iat": NOW - 120, "ath": sha256(token.as_bytes())}));
    let no_ath = holder.proof(&json!({"jti": "no-ath", "htm": RP_METHOD, "htu": RP_URI,
        "iat": NOW}));
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "no proof",
            json!({}),
            "service account token is bound to a DPoP key (cnf.jkt): it authenticates only with the DPoP proof that came with it, in spec.dpop",
        ),
        (
            "another key",
            dpop(&for_rp(&thief, &token, "t")),
            "invalid DPoP proof: DPoP proof key does not match the key the token is bound to (cnf.jkt)",
        ),
        (
            "another token",
            dpop(&for_rp(&holder, &other_token, "o")),
            "invalid DPoP proof: DPoP proof ath does not match the access token",
        ),
        (
            "no ath",
            dpop(&no_ath),
            "invalid DPoP proof: DPoP proof has no ath claim",
        ),
        (
            "another method",
            json!({"dpop": {"proof": for_rp(&holder, &token, "m"), "method": "POST", "uri": RP_URI}}),
            "invalid DPoP proof: DPoP proof htm does not match the request method",
        ),
        (
            "another URI",
            json!({"dpop": {"proof": for_rp(&holder, &token, "u"), "method": RP_METHOD,
                            "uri": "https://vault.example/v1/other"}}),
            "invalid DPoP proof: DPoP proof htu does not match the request URI",
        ),
        (
            "stale",
            dpop(&stale),
            "invalid DPoP proof: DPoP proof is too old",
        ),
        (
            "not a JWT",
            dpop("not a proof, with spaces"),
            "invalid DPoP proof: DPoP proof is not a well-formed JWT",
        ),
        (
            "a certificate instead",
            thumbprint(&sha256(CLIENT_CERT_DER)),
            "service account token is bound to a DPoP key (cnf.jkt), not to a client certificate",
        ),
    ];
    for (case, spec, why) in cases {
        let proof = spec["dpop"]["proof"].as_str().unwrap_or("-").to_owned();
        let reply = review(&api, WARRANT, &token, spec).await;
        assert_refused(&reply, why, &[&token, &proof], case);
    }
    // A refused proof is not used up: the holder's good proof still passes.
    let good = for_rp(&holder, &token, "m");
    let reply = review(&api, WARRANT, &token, dpop(&good)).await;
    reply.assert_authenticated();
}

/// A certificate-bound token passes with its certificate's thumbprint, and only with it.
#[tokio::test]
async fn a_certificate_bound_token_passes_with_its_thumbprint() {
    let api = api();
    let x5t = sha256(CLIENT_CERT_DER);
    let token = certificate_bound_token(&api, &x5t).await;
    let reply = review(&api, WARRANT, &token, thumbprint(&x5t)).await;
    reply.assert_authenticated();
    assert_eq!(
        reply.json["status"]["keyBinding"],
        json!({"method": "ClientCertificate", "thumbprint": x5t})
    );
    assert_eq!(reply.json["spec"]["certificateThumbprint"], x5t);

    let holder = DpopHolder::new();
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "another certificate",
            thumbprint(&sha256(b"another certificate")),
            "client certificate is not the one the service account token is bound to (cnf.x5t#S256)",
        ),
        (
            "none",
            json!({}),
            "service account token is bound to a client certificate (cnf.x5t#S256): it authenticates only with the thumbprint of the certificate it came with, in spec.certificateThumbprint",
        ),
        (
            "empty, as good as none",
            thumbprint(""),
            "service account token is bound to a client certificate (cnf.x5t#S256): it authenticates",
        ),
        (
            "a DPoP proof instead",
            dpop(&for_rp(&holder, &token, "d")),
            "service account token is bound to a client certificate (cnf.x5t#S256), not to a DPoP key",
        ),
    ];
    for (case, spec, why) in cases {
        let reply = review(&api, WARRANT, &token, spec).await;
        assert_refused(&reply, why, &[&token], case);
    }
    // kube's review refuses it too: it cannot carry the thumbprint.
    let reply = review(&api, "authentication.k8s.io/v1", &token, thumbprint(&x5t)).await;
    assert_refused(&reply, KUBE_ROUTE_REFUSAL, &[&token], "kube's route");
}

/// A relying party that sends a proof expects a key-bound token: an unbound one, which any
/// holder could present, is refused. Without a proof it passes as before.
#[tokio::test]
async fn a_proof_for_an_unbound_token_is_refused() {
    let api = api();
    let token = unbound_token(&api).await;
    let holder = DpopHolder::new();
    let why = "service account token is not bound to a key (it has no cnf claim), so the proof given proves nothing: a relying party that checks proofs must not accept it as a bearer token";
    for (case, spec) in [
        ("dpop", dpop(&for_rp(&holder, &token, "u"))),
        ("certificate", thumbprint(&sha256(CLIENT_CERT_DER))),
    ] {
        let reply = review(&api, WARRANT, &token, spec).await;
        assert_refused(&reply, why, &[&token], case);
    }
    let reply = review(&api, WARRANT, &token, json!({})).await;
    reply.assert_authenticated();
    assert_eq!(reply.json["status"].get("keyBinding"), None);
}

/// Malformed proof fields are a 400 naming the field, and never quoting its value.
#[tokio::test]
async fn malformed_proof_fields_are_a_400_naming_the_field() {
    let api = api();
    let token = unbound_token(&api).await;
    let x5t = sha256(CLIENT_CERT_DER);
    let oversized = format!("{}.e30.sig", "a".repeat(9000));
    let proof_of = |proof: &str, method: &str, uri: &str| json!({"dpop": {"proof": proof, "method": method, "uri": uri}});
    let cases: Vec<(Value, &str, &str, &str)> = vec![
        (
            json!({"dpop": {"proof": "a.b.c", "method": "GET", "uri": RP_URI},
                   "certificateThumbprint": x5t}),
            "spec.certificateThumbprint",
            "FieldValueForbidden",
            "Forbidden: may not be given together with spec.dpop",
        ),
        (
            proof_of("", "GET", RP_URI),
            "spec.dpop.proof",
            "FieldValueRequired",
            "Required value",
        ),
        (
            json!({"dpop": {}}),
            "spec.dpop.proof",
            "FieldValueRequired",
            "Required value",
        ),
        (
            proof_of(&oversized, "GET", RP_URI),
            "spec.dpop.proof",
            "FieldValueTooLong",
            "Too long: may not be more than 8192 bytes",
        ),
        (
            proof_of("a.b.c", "", RP_URI),
            "spec.dpop.method",
            "FieldValueRequired",
            "Required value",
        ),
        (
            proof_of("a.b.c", "GE T", RP_URI),
            "spec.dpop.method",
            "FieldValueInvalid",
            "Invalid value: must be the HTTP method",
        ),
        (
            proof_of("a.b.c", "GET", ""),
            "spec.dpop.uri",
            "FieldValueRequired",
            "Required value",
        ),
        (
            proof_of("a.b.c", "GET", "http://vault.example/v1/secret"),
            "spec.dpop.uri",
            "FieldValueInvalid",
            "Invalid value: must be the absolute https URI",
        ),
        (
            proof_of("a.b.c", "GET", "/v1/secret"),
            "spec.dpop.uri",
            "FieldValueInvalid",
            "Invalid value: must be the absolute https URI",
        ),
        (
            thumbprint("c2hvcnQ"),
            "spec.certificateThumbprint",
            "FieldValueInvalid",
            "Invalid value: must be the unpadded base64url SHA-256",
        ),
        (
            thumbprint(&format!("{x5t}=")),
            "spec.certificateThumbprint",
            "FieldValueInvalid",
            "Invalid value: must be the unpadded base64url SHA-256",
        ),
        (
            thumbprint(&format!("+{}", &x5t[1..])),
            "spec.certificateThumbprint",
            "FieldValueInvalid",
            "Invalid value: must be the unpadded base64url SHA-256",
        ),
    ];
    for (spec, field, cause, what) in cases {
        let case = format!("{field} {spec}");
        let reply = review(&api, WARRANT, &token, spec).await;
        assert_eq!(
            reply.code,
            StatusCode::BAD_REQUEST,
            "{case}: {}",
            reply.text
        );
        assert_eq!(reply.json["kind"], "Status", "{case}");
        assert_eq!(reply.json["reason"], "BadRequest", "{case}");
        let message = reply.json["message"].as_str().unwrap();
        assert!(
            message.starts_with(&format!("{field}: {what}")),
            "{case}: {message}"
        );
        assert_eq!(reply.json["details"]["causes"][0]["field"], field, "{case}");
        assert_eq!(
            reply.json["details"]["causes"][0]["reason"], cause,
            "{case}"
        );
        assert!(
            !reply.text.contains(&token),
            "{case}: the answer quotes the token"
        );
        assert!(
            !reply.text.contains("aaaaaaaa"),
            "{case}: the answer quotes the proof"
        );
        assert!(!message.contains("vault.example"), "{case}: {message}");
    }
    // The control: a well-formed thumbprint alone passes the checks, and the review.
    let bound = certificate_bound_token(&api, &x5t).await;
    let reply = review(&api, WARRANT, &bound, thumbprint(&x5t)).await;
    reply.assert_authenticated();
}

/// kube's TokenReview has no proof fields: its routes drop them unread (kube-apiserver drops a
/// body's unknown fields), echo none of them, and keep their verdict. A key-bound token is
/// refused, pointing to warrant.dev's review; an unbound token passes whatever proof fields,
/// even malformed ones, come with it; and a proof given there is not used up.
#[tokio::test]
async fn kube_routes_neither_use_nor_echo_the_proof_fields() {
    let api = api();
    let holder = DpopHolder::new();
    let token = dpop_bound_token(&api, &holder).await;
    let unbound = unbound_token(&api).await;
    let proof = for_rp(&holder, &token, "kube");
    for version in ["authentication.k8s.io/v1", "authentication.k8s.io/v1beta1"] {
        let reply = review(&api, version, &token, dpop(&proof)).await;
        assert_refused(&reply, KUBE_ROUTE_REFUSAL, &[&token, &proof], version);
        assert_eq!(reply.json["apiVersion"], version);
        assert_eq!(
            reply.json["spec"],
            json!({"token": token, "audiences": ["vault"]}),
            "{version}: the proof fields are echoed"
        );
        let both = json!({"dpop": {"proof": "", "method": "", "uri": "/"},
                          "certificateThumbprint": "not one"});
        let reply = review(&api, version, &unbound, both).await;
        assert_eq!(reply.code, StatusCode::CREATED, "{version}: {}", reply.text);
        reply.assert_authenticated();
        assert_eq!(reply.json["status"].get("keyBinding"), None);
        assert_eq!(
            reply.json["spec"],
            json!({"token": unbound, "audiences": ["vault"]}),
            "{version}"
        );
    }
    // The proof shown to kube's routes was not checked, so not used up.
    let reply = review(&api, WARRANT, &token, dpop(&proof)).await;
    reply.assert_authenticated();
}

/// The review metric counts a proven key-bound token as authenticated and a refused proof as
/// invalid; the audit events say whose token it was, its binding (thumbprint), and why it was
/// refused, and hold neither the token nor the proof.
#[tokio::test]
async fn metrics_and_audit_record_the_outcome() {
    let (api, writer, dir) = api_audited();
    let holder = DpopHolder::new();
    let token = dpop_bound_token(&api, &holder).await;
    let good = for_rp(&holder, &token, "good");
    let passed = review(&api, WARRANT, &token, dpop(&good)).await;
    passed.assert_authenticated();
    let replayed = review(&api, WARRANT, &token, dpop(&good)).await;
    assert_ne!(replayed.json["status"]["authenticated"], true);

    let metrics = api
        .get_with("/metrics", &[("authorization", &format!("Bearer {ADMIN}"))])
        .await;
    for line in [
        r#"warrant_token_reviews_total{result="authenticated"} 1"#,
        r#"warrant_token_reviews_total{result="invalid"} 1"#,
    ] {
        assert!(metrics.text.contains(line), "{line}: {}", metrics.text);
    }

    writer.finish().await;
    let text = std::fs::read_to_string(dir.path().join("audit.log")).unwrap();
    assert!(!text.contains(&token), "the audit log holds the token");
    assert!(!text.contains(&good), "the audit log holds the proof");
    let reviews: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|event| event["kind"] == "TokenReview")
        .collect();
    assert_eq!(reviews.len(), 2, "{text}");
    let cnf = json!({"jkt": holder.thumbprint()});
    assert_eq!(reviews[0]["decision"], "authenticated");
    assert_eq!(reviews[0]["cnf"], cnf);
    assert_eq!(reviews[1]["decision"], "unauthenticated");
    assert_eq!(reviews[1]["cnf"], cnf);
    assert_eq!(reviews[1]["serviceAccount"]["name"], "app");
    assert_eq!(reviews[1]["reason"], replayed.json["status"]["error"]);
}

/// Issue 31, item 1, through the review: a proof reviewed twice at the same instant near the end
/// of its window authenticates at most once. (Whole seconds once let every review in
/// [iat + 60, iat + 61) say `authenticated: true`.)
#[tokio::test]
async fn a_proof_reviewed_at_the_end_of_its_window_passes_at_most_once() {
    let api = api();
    let holder = DpopHolder::new();
    let token = dpop_bound_token(&api, &holder).await;
    for (jti, millis, accepted) in [
        ("end-a", 59_999, true),
        ("end-b", 60_000, false),
        ("end-c", 60_400, false),
        ("end-d", 60_999, false),
    ] {
        let proof = for_rp(&holder, &token, jti);
        api.state.issuer().clock().set(
            jiff::Timestamp::from_second(NOW).unwrap() + jiff::SignedDuration::from_millis(millis),
        );
        let first = review(&api, WARRANT, &token, dpop(&proof)).await;
        let again = review(&api, WARRANT, &token, dpop(&proof)).await;
        assert_refused(
            &again,
            "invalid DPoP proof: DPoP proof ",
            &[&token, &proof],
            &format!("again at iat + {millis} ms"),
        );
        assert_eq!(
            first.json["status"]["authenticated"] == true,
            accepted,
            "at iat + {millis} ms: {}",
            first.json["status"]
        );
    }
}

/// Issue 31, item 3: a token whose `cnf` warrant does not understand (RFC 7800's `jwk`, here in a
/// token signed by warrant's own key) is not a bearer token in any review, kube's or warrant's,
/// whatever proof comes with it; the reason says what was not understood.
#[tokio::test]
async fn a_cnf_warrant_does_not_understand_never_passes_a_review() {
    let api = api();
    let holder = DpopHolder::new();
    let token = with_cnf(&unbound_token(&api).await, json!({"jwk": holder.jwk()}));
    let why = "the token's cnf claim has \"jwk\", which warrant does not check (it checks jkt and x5t#S256): the token is not valid anywhere";
    for version in [
        "authentication.k8s.io/v1",
        "authentication.k8s.io/v1beta1",
        WARRANT,
    ] {
        let reply = review(&api, version, &token, json!({})).await;
        assert_refused(&reply, why, &[&token], version);
    }
    let proof = for_rp(&holder, &token, "jwk");
    let reply = review(&api, WARRANT, &token, dpop(&proof)).await;
    assert_refused(&reply, why, &[&token, &proof], "with a proof of the jwk");
    let reply = review(&api, WARRANT, &token, thumbprint(&sha256(CLIENT_CERT_DER))).await;
    assert_refused(&reply, why, &[&token], "with a certificate");
    // Nor is a cnf that is not an object, or one naming nothing.
    for cnf in [json!("jkt"), json!(null), json!({})] {
        let token = with_cnf(&unbound_token(&api).await, cnf.clone());
        let reply = review(&api, "authentication.k8s.io/v1", &token, json!({})).await;
        assert_refused(&reply, "the token's cnf claim", &[&token], &cnf.to_string());
    }
}

/// Issue 31, item 3: a token bound to a DPoP key and a certificate needs both proven; a review
/// carries one, so it never passes one, and says why.
#[tokio::test]
async fn a_token_bound_to_a_key_and_a_certificate_needs_both() {
    let api = api();
    let holder = DpopHolder::new();
    let x5t = sha256(CLIENT_CERT_DER);
    let token = with_cnf(
        &unbound_token(&api).await,
        json!({"jkt": holder.thumbprint(), "x5t#S256": x5t}),
    );
    let both = "service account token is bound to both a DPoP key and a client certificate; both must be proven";
    let reply = review(&api, WARRANT, &token, dpop(&for_rp(&holder, &token, "b1"))).await;
    assert_refused(&reply, both, &[&token], "the proof alone");
    let reply = review(&api, WARRANT, &token, thumbprint(&x5t)).await;
    assert_refused(&reply, both, &[&token], "the certificate alone");
    // The proof was not spent on a review that could not pass.
    let proof = for_rp(&holder, &token, "b1");
    let reply = review(&api, WARRANT, &token, dpop(&proof)).await;
    assert_refused(&reply, both, &[&token, &proof], "the proof, again");
}
