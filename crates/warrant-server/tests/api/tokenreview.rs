//! TokenReview (spec §3, §5): always 201, the spec echoed, the verdict and its exact message,
//! replying in the request's version.

use http::StatusCode;
use jiff::Timestamp;
use serde_json::json;
use warrant_objects::Kind;

use crate::support::*;

/// warrant.dev's review with the proof of a key-bound token.
mod proof;

async fn pod_token(api: &Api, audiences: &[&str]) -> String {
    let r = api
        .token("app", json!({"audiences": audiences, "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "app-0"}}))
        .await;
    assert_eq!(r.code, StatusCode::CREATED, "{}", r.text);
    r.json["status"]["token"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn valid_pod_bound_token() {
    let api = api();
    let token = pod_token(&api, &["vault"]).await;
    let jti = claims(&token).jti;
    let r = api
        .review("authentication.k8s.io/v1", &token, &["vault"])
        .await;
    assert_eq!(r.code, StatusCode::CREATED, "{}", r.text);
    assert_eq!(r.json["kind"], "TokenReview");
    assert_eq!(r.json["apiVersion"], "authentication.k8s.io/v1");
    assert_eq!(r.json["metadata"], json!({}));
    assert_eq!(
        r.json["spec"],
        json!({"token": token, "audiences": ["vault"]})
    );
    assert_eq!(
        r.json["status"],
        json!({
            "authenticated": true,
            "user": {
                "username": "system:serviceaccount:demo:app",
                "uid": SA_UID,
                "groups": ["system:serviceaccounts", "system:serviceaccounts:demo", "system:authenticated"],
                "extra": {
                    "authentication.kubernetes.io/credential-id": [format!("JTI={jti}")],
                    "authentication.kubernetes.io/node-name": ["node-1"],
                    "authentication.kubernetes.io/node-uid": [NODE_UID],
                    "authentication.kubernetes.io/pod-name": ["app-0"],
                    "authentication.kubernetes.io/pod-uid": [POD_UID],
                }
            },
            "audiences": ["vault"],
        })
    );
    // Wire order is Go's: authenticated, user, audiences.
    let status_at = r.text.find("\"status\"").unwrap();
    let order: Vec<usize> = ["\"authenticated\"", "\"user\"", "\"audiences\""]
        .iter()
        .map(|k| r.text[status_at..].find(k).unwrap())
        .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{}", r.text);
}

#[tokio::test]
async fn replies_in_the_requests_version() {
    let api = api();
    let token = pod_token(&api, &[]).await;
    for version in [
        "authentication.k8s.io/v1beta1",
        "authentication.k8s.io/v1",
        "warrant.dev/v1alpha1",
    ] {
        let r = api.review(version, &token, &[]).await;
        assert_eq!(r.code, StatusCode::CREATED, "{version}: {}", r.text);
        assert_eq!(r.json["apiVersion"], version);
        r.assert_authenticated();
        assert_eq!(r.json["status"]["audiences"], json!([ISSUER]));
    }
    // A v1beta1 body sent to the v1 path (kube's webhook posts to whatever URL it is given).
    let r = api
        .post("/apis/authentication.k8s.io/v1/tokenreviews", json!({"apiVersion": "authentication.k8s.io/v1beta1", "kind": "TokenReview", "spec": {"token": token}}))
        .await;
    assert_eq!(r.json["apiVersion"], "authentication.k8s.io/v1beta1");
}

#[tokio::test]
async fn deleting_or_replacing_the_pod_revokes() {
    let api = api();
    let token = pod_token(&api, &[]).await;
    api.objects.remove(Kind::Pod, "demo", "app-0");
    let r = api.review("authentication.k8s.io/v1", &token, &[]).await;
    assert_eq!(r.code, StatusCode::CREATED);
    assert_eq!(
        r.json["status"],
        json!({"user": {}, "error": "service account token has been invalidated"})
    );

    api.objects
        .put(Kind::Pod, "demo", "app-0", pod("new-uid", "app", "node-1"));
    let r = api.review("authentication.k8s.io/v1", &token, &[]).await;
    assert_eq!(
        r.json["status"]["error"],
        format!("pod UID (new-uid) does not match service account pod ref claim ({POD_UID})")
    );

    // Graceful deletion: valid until 60 s after the deletion timestamp.
    let mut record = pod(POD_UID, "app", "node-1");
    record.deletion_timestamp = Some(Timestamp::from_second(NOW).unwrap());
    api.objects.put(Kind::Pod, "demo", "app-0", record);
    api.set_now(NOW + 60);
    api.review("authentication.k8s.io/v1", &token, &[])
        .await
        .assert_authenticated();
    api.set_now(NOW + 61);
    assert_eq!(
        api.review("authentication.k8s.io/v1", &token, &[])
            .await
            .json["status"]["error"],
        "service account token has been invalidated"
    );

    api.objects.remove(Kind::ServiceAccount, "demo", "app");
    assert_eq!(
        api.review("authentication.k8s.io/v1", &token, &[])
            .await
            .json["status"]["error"],
        r#"serviceaccounts "app" not found"#
    );
}

#[tokio::test]
async fn time_and_audience_failures() {
    let api = api();
    let token = pod_token(&api, &["vault"]).await;
    let r = api.review("authentication.k8s.io/v1", &token, &[]).await;
    assert_eq!(
        r.json["status"]["error"],
        format!(r#"token audiences ["vault"] is invalid for the target audiences ["{ISSUER}"]"#)
    );
    api.set_now(NOW + 3600 + 60);
    api.review("authentication.k8s.io/v1", &token, &["vault"])
        .await
        .assert_authenticated();
    api.set_now(NOW + 3600 + 61);
    assert_eq!(
        api.review("authentication.k8s.io/v1", &token, &["vault"])
            .await
            .json["status"]["error"],
        "service account token has expired"
    );
}

#[tokio::test]
async fn tokens_that_are_not_ours() {
    let api = api();
    let token = pod_token(&api, &[]).await;
    let truncated = &token[..token.len() / 2];
    let other_key = warrant_token::SigningKey::generate(warrant_token::KeyType::P256).unwrap();
    let foreign = other_key.sign(&claims(&token)).unwrap();
    for (name, t, error) in [
        ("garbage", "not-a-token", "invalid bearer token"),
        ("truncated", truncated, "invalid bearer token"),
        (
            "another key",
            foreign.as_str(),
            "invalid signature, no keys found",
        ),
    ] {
        let r = api.review("authentication.k8s.io/v1", t, &[]).await;
        assert_eq!(r.code, StatusCode::CREATED, "{name}");
        assert_eq!(
            r.json["status"],
            json!({"user": {}, "error": error}),
            "{name}"
        );
    }
    // Another issuer's token, signed by our own key: still not ours.
    let mut c = claims(&token);
    c.iss = "https://someone.else".into();
    let r = api
        .review("authentication.k8s.io/v1", &key().sign(&c).unwrap(), &[])
        .await;
    assert_eq!(r.json["status"]["error"], "invalid bearer token");
}

#[tokio::test]
async fn request_errors() {
    let api = api();
    let r = api
        .post(
            "/apis/authentication.k8s.io/v1/tokenreviews",
            json!({"kind": "TokenReview", "spec": {}}),
        )
        .await;
    assert_eq!(r.code, StatusCode::BAD_REQUEST);
    assert_eq!(
        r.json["message"],
        "token is required for TokenReview in authentication"
    );
    let r = api
        .post(
            "/apis/authentication.k8s.io/v1/tokenreviews",
            json!({"metadata": {"namespace": "x"}, "spec": {"token": "t"}}),
        )
        .await;
    assert_eq!(
        r.json["message"],
        "namespace is not allowed on this type: x"
    );
    let r = api
        .post(
            "/apis/warrant.dev/v1alpha1/tokenreviews",
            json!({"apiVersion": "authentication.k8s.io/v1", "spec": {"token": "t"}}),
        )
        .await;
    assert_eq!(r.code, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn cached_signatures_never_skip_the_object_checks_or_outlive_the_keys() {
    let api = api();
    let token = pod_token(&api, &[]).await;
    let metric = |text: &str, result: &str| {
        let line = format!("warrant_signature_cache_lookups_total{{result=\"{result}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&line))
            .map_or(0, |v| v.parse::<u64>().unwrap())
    };
    let metrics = || async {
        api.send(
            http::Request::builder()
                .uri("/metrics")
                .header("authorization", format!("Bearer {ADMIN}"))
                .body(axum::body::Body::empty())
                .unwrap(),
        )
        .await
        .text
    };
    for _ in 0..3 {
        api.review("authentication.k8s.io/v1", &token, &[])
            .await
            .assert_authenticated();
    }
    // The first review notes the token, the second caches its signature, the third hits.
    let text = metrics().await;
    assert_eq!((metric(&text, "miss"), metric(&text, "hit")), (2, 1));

    // The signature is cached; the pod's deletion still revokes at once.
    api.objects.remove(Kind::Pod, "demo", "app-0");
    assert_eq!(
        api.review("authentication.k8s.io/v1", &token, &[])
            .await
            .json["status"]["error"],
        "service account token has been invalidated"
    );
    assert_eq!(metric(&metrics().await, "hit"), 2);
    api.objects
        .put(Kind::Pod, "demo", "app-0", pod(POD_UID, "app", "node-1"));

    // Time is still checked on a hit.
    api.set_now(NOW + 3600 + 61);
    assert_eq!(
        api.review("authentication.k8s.io/v1", &token, &[])
            .await
            .json["status"]["error"],
        "service account token has expired"
    );
    api.set_now(NOW);

    // New keys without the old one: the cached signature does not carry the token through.
    let next = warrant_token::SigningKey::generate(warrant_token::KeyType::P256).unwrap();
    api.state
        .issuer()
        .set_keys(warrant_keys::KeySet::new(next, vec![]));
    assert_eq!(
        api.review("authentication.k8s.io/v1", &token, &[])
            .await
            .json["status"]["error"],
        "invalid signature, no keys found"
    );
}

/// Forgeries the verifier refuses in its own tests, sent through the endpoint, where the
/// verified-signature cache sits in front of it: each reviewed twice, so an answer remembered
/// from the first review (or from the genuine token reviewed before) would show.
#[tokio::test]
async fn forged_tokens_are_refused_through_the_endpoint_every_time() {
    use aws_lc_rs::hmac;
    use base64::Engine as _;
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);

    let api = api();
    let genuine = pod_token(&api, &[]).await;
    // The genuine token first: its signature is now in the cache.
    let r = api.review("authentication.k8s.io/v1", &genuine, &[]).await;
    r.assert_authenticated();

    let payload = genuine.split('.').nth(1).unwrap();
    let kid = key().kid();
    let header = |alg: &str| b64(format!(r#"{{"alg":"{alg}","kid":"{kid}"}}"#).as_bytes());
    // alg none: the genuine claims, no signature.
    let none = format!("{}.{payload}.", header("none"));
    // HS256 keyed with the public key (both as its DER and as its PEM, the two ways a
    // confused verifier might read "the key").
    let hs256 = |secret: &[u8]| {
        let signing_input = format!("{}.{payload}", header("HS256"));
        let tag = hmac::sign(
            &hmac::Key::new(hmac::HMAC_SHA256, secret),
            signing_input.as_bytes(),
        );
        format!("{signing_input}.{}", b64(tag.as_ref()))
    };
    let public = key().verifying_key();
    let hs256_der = hs256(public.spki_der());
    let hs256_pem = hs256(public.to_pem().as_bytes());
    // The genuine claims without exp, signed by the real key.
    let mut no_exp: serde_json::Value = serde_json::to_value(claims(&genuine)).unwrap();
    no_exp.as_object_mut().unwrap().remove("exp");
    let no_exp = key()
        .sign_payload(&serde_json::to_vec(&no_exp).unwrap())
        .unwrap();
    // The genuine header and claims with another token's signature.
    let other = pod_token(&api, &["vault"]).await;
    let spliced = format!(
        "{}.{}",
        genuine.rsplit_once('.').unwrap().0,
        other.rsplit_once('.').unwrap().1
    );

    const BAD_SIGNATURE: &str = "go-jose/go-jose: error in cryptographic primitive";
    for (name, token, error) in [
        ("alg none", none, BAD_SIGNATURE),
        (
            "HS256 keyed with the public key's DER",
            hs256_der,
            BAD_SIGNATURE,
        ),
        (
            "HS256 keyed with the public key's PEM",
            hs256_pem,
            BAD_SIGNATURE,
        ),
        (
            "no exp",
            no_exp,
            "service account token has no expiration (exp) claim",
        ),
        ("another token's signature", spliced, BAD_SIGNATURE),
    ] {
        for round in ["first", "second"] {
            let r = api.review("authentication.k8s.io/v1", &token, &[]).await;
            assert_eq!(r.code, StatusCode::CREATED, "{name}, {round}: {}", r.text);
            assert_eq!(
                r.json["status"],
                json!({"user": {}, "error": error}),
                "{name}, {round}"
            );
        }
    }
    // And the genuine token still passes.
    let r = api.review("authentication.k8s.io/v1", &genuine, &[]).await;
    r.assert_authenticated();
}

/// Times from a validly signed token are whatever its signer wrote: an `exp` or `nbf` at the
/// ends of i64 is answered (twice, through the signature cache), never an overflow.
#[tokio::test]
async fn extreme_times_in_a_signed_token_do_not_overflow() {
    let api = api();
    let genuine = pod_token(&api, &[]).await;
    for (name, field, value, authenticated) in [
        ("exp at i64::MAX", "exp", i64::MAX, true),
        ("exp at i64::MIN", "exp", i64::MIN, false),
        ("nbf at i64::MAX", "nbf", i64::MAX, false),
        ("iat at i64::MAX", "iat", i64::MAX, false),
    ] {
        let mut claims = serde_json::to_value(claims(&genuine)).unwrap();
        claims[field] = json!(value);
        let token = key()
            .sign_payload(&serde_json::to_vec(&claims).unwrap())
            .unwrap();
        for round in ["first", "second"] {
            let r = api.review("authentication.k8s.io/v1", &token, &[]).await;
            assert_eq!(r.code, StatusCode::CREATED, "{name}, {round}: {}", r.text);
            assert_eq!(
                r.json["status"]["authenticated"] == true,
                authenticated,
                "{name}, {round}: {}",
                r.text
            );
        }
    }
}

/// `--disable-secret-binding`: a Secret-bound token issued before (or by kube-apiserver through
/// the external signer) is refused, even though its Secret exists, since a server that does not
/// watch Secrets cannot tell whether it was deleted. The webhook answer and the own-token
/// authenticator say the same; the token is counted as invalid.
#[tokio::test]
async fn secret_bound_tokens_are_refused_with_secret_binding_off() {
    let issuer = api();
    let r = issuer
        .token("app", json!({"audiences": ["vault"], "boundObjectRef": {"kind": "Secret", "apiVersion": "v1", "name": "app-token"}}))
        .await;
    assert_eq!(r.code, StatusCode::CREATED, "{}", r.text);
    let token = r.json["status"]["token"].as_str().unwrap().to_owned();
    issuer
        .review("authentication.k8s.io/v1", &token, &["vault"])
        .await
        .assert_authenticated();

    let api = api_without_secret_binding();
    let refused = json!({"user": {}, "error": "token is bound to a Secret object but secret binding is disabled on this server"});
    for version in [
        "authentication.k8s.io/v1",
        "authentication.k8s.io/v1beta1",
        "warrant.dev/v1alpha1",
    ] {
        let r = api.review(version, &token, &["vault"]).await;
        assert_eq!(r.code, StatusCode::CREATED, "{version}: {}", r.text);
        assert_eq!(r.json["status"], refused, "{version}");
    }
    let r = api
        .post_as(
            &token,
            "/apis/authentication.k8s.io/v1/tokenreviews",
            json!({}),
        )
        .await;
    assert_eq!(r.code, StatusCode::UNAUTHORIZED, "{}", r.text);
    // Other tokens still pass on that server.
    let pod = pod_token(&api, &["vault"]).await;
    api.review("authentication.k8s.io/v1", &pod, &["vault"])
        .await
        .assert_authenticated();
    let metrics = api
        .get_with("/metrics", &[("authorization", &format!("Bearer {ADMIN}"))])
        .await;
    assert!(
        metrics
            .text
            .contains(r#"warrant_token_reviews_total{result="invalid"}"#),
        "{}",
        metrics.text
    );
}
