//! Sign, FetchKeys and Metadata as kube-apiserver sees them, and the claims Sign refuses.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};
use tonic::Code;
use warrant_keys::KeySet;
use warrant_signer::proto::{FetchKeysRequest, MetadataRequest, SignJwtRequest};
use warrant_token::{ExpirationPolicy, KeyType, SigningKey, Verifier, VerifyingKey};

use crate::support::*;

fn decode_json(part: &str) -> Value {
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(part).unwrap()).unwrap()
}

#[tokio::test]
async fn a_signed_token_is_one_kube_apiserver_assembles_and_warrant_accepts() {
    for key_type in [KeyType::Rsa2048, KeyType::P256, KeyType::P384] {
        let key = SigningKey::generate(key_type).unwrap();
        let mut env = start(
            KeySet::new(key.clone(), vec![]),
            ExpirationPolicy::default(),
        )
        .await;
        let claims = encode_claims(&pod_claims(NOW, 3600));
        let signed = env
            .client
            .sign(SignJwtRequest {
                claims: claims.clone(),
            })
            .await
            .unwrap()
            .into_inner();

        // The header holds exactly what kube-apiserver accepts: alg, kid, typ JWT.
        assert_eq!(
            decode_json(&signed.header),
            json!({"alg": key.algorithm().name(), "kid": key.kid(), "typ": "JWT"})
        );
        // kube-apiserver assembles the token from its own claims string, unchanged.
        let token = format!("{}.{claims}.{}", signed.header, signed.signature);

        // The signature verifies with the key FetchKeys gives for that kid...
        let keys = env
            .client
            .fetch_keys(FetchKeysRequest {})
            .await
            .unwrap()
            .into_inner();
        let fetched = keys.keys.iter().find(|k| k.key_id == key.kid()).unwrap();
        assert!(!fetched.exclude_from_oidc_discovery);
        let from_fetch = VerifyingKey::from_spki_der(&fetched.key).unwrap();
        let verifier = Verifier::new(vec![ISSUER.into()], vec!["vault".into()], vec![from_fetch]);
        assert!(verifier.verify_signature(&token).is_ok(), "{key_type:?}");
        // ...and with warrant's JWKS, and warrant's TokenReview accepts the token.
        let jwks: Value = serde_json::from_slice(env.state.issuer().published().jwks()).unwrap();
        assert_eq!(jwks["keys"][0]["kid"], key.kid());
        let review = env.review(&token, &["vault"]).await;
        assert_eq!(review["authenticated"], true, "{review}");
        assert_eq!(review["user"]["username"], "system:serviceaccount:demo:app");
        assert_eq!(
            env.metric(r#"warrant_signer_requests_total{rpc="Sign",result="ok"}"#),
            1.0
        );
    }
}

#[tokio::test]
async fn claims_that_are_not_warrants_to_sign_are_refused_with_the_reason() {
    let key = SigningKey::generate(KeyType::P256).unwrap();
    // A day at most, as with managed keys.
    let expiration = ExpirationPolicy {
        max_seconds: Some(86_400),
        extend: false,
        ..ExpirationPolicy::default()
    };
    let mut env = start(KeySet::new(key, vec![]), expiration).await;
    let with = |change: &dyn Fn(&mut Value)| {
        let mut claims = pod_claims(NOW, 3600);
        change(&mut claims);
        encode_claims(&claims)
    };
    let cases: Vec<(String, &str, &str)> = vec![
        (
            "eyJpc3Mi.not base64!".into(),
            "not_base64url",
            "claims are not unpadded base64url",
        ),
        (
            URL_SAFE_NO_PAD.encode("[1,2,3]"),
            "not_json_object",
            "claims do not decode to a JSON object",
        ),
        (
            with(&|c| c["iss"] = json!("https://elsewhere")),
            "wrong_issuer",
            "iss \"https://elsewhere\" is not an issuer of this signer",
        ),
        (
            with(&|c| {
                c.as_object_mut().unwrap().remove("exp");
            }),
            "no_exp",
            "claims have no exp",
        ),
        (
            with(&|c| c["exp"] = json!(NOW + 86_400 + 61)),
            "exp_beyond_max",
            "exp is 86461 s from now, beyond the 86400 s",
        ),
        (
            with(&|c| c["sub"] = json!("x".repeat(20_000))),
            "oversized",
            "claims of ",
        ),
    ];
    for (claims, reason, message) in &cases {
        let status = env
            .client
            .sign(SignJwtRequest {
                claims: claims.clone(),
            })
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{reason}: {status:?}");
        assert!(
            status.message().starts_with(message),
            "{reason}: {}",
            status.message()
        );
        assert_eq!(
            env.metric(&format!(
                r#"warrant_signer_requests_total{{rpc="Sign",result="{reason}"}}"#
            )),
            1.0,
            "{reason}"
        );
    }
    // At the bound (the leeway included) it signs.
    let edge = with(&|c| c["exp"] = json!(NOW + 86_400 + 60));
    assert!(
        env.client
            .sign(SignJwtRequest { claims: edge })
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn metadata_is_the_longest_token_lifetime() {
    let key = SigningKey::generate(KeyType::P256).unwrap();
    // As `serve` sets it up with managed keys: a day, extended tokens included.
    let managed = ExpirationPolicy {
        max_seconds: Some(86_400),
        extended_seconds: 86_400,
        ..ExpirationPolicy::default()
    };
    let mut env = start(KeySet::new(key.clone(), vec![]), managed).await;
    let metadata = env
        .client
        .metadata(MetadataRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(metadata.max_token_expiration_seconds, 86_400);

    // Without a cap, kube's own longest (2^32 s); kube-apiserver caps extended tokens at a year.
    let mut env = start(KeySet::new(key, vec![]), ExpirationPolicy::default()).await;
    let metadata = env.client.metadata(MetadataRequest {}).await.unwrap();
    assert_eq!(
        metadata.into_inner().max_token_expiration_seconds,
        ExpirationPolicy::default().longest_token_seconds()
    );
}

/// With key files, `--service-account-max-token-expiration 48h` and the default extension, warrant
/// issues ordinary tokens of two days and extended ones of a year. kube-apiserver without its own
/// cap takes Metadata's year for every token: Sign must still hold ordinary ones to two days.
#[tokio::test]
async fn the_operators_maximum_bounds_every_token_but_extended_ones() {
    let key = SigningKey::generate(KeyType::P256).unwrap();
    let static_keys = ExpirationPolicy {
        max_seconds: Some(172_800),
        ..ExpirationPolicy::default()
    };
    let year = 31_536_000;
    let env = start(KeySet::new(key, vec![]), static_keys).await;
    // Metadata: the year extended tokens need; its metadata: the two days for the others.
    let metadata = env
        .client
        .clone()
        .metadata(MetadataRequest {})
        .await
        .unwrap();
    assert_eq!(
        metadata
            .metadata()
            .get(warrant_signer::ORDINARY_MAX_METADATA)
            .unwrap(),
        "172800"
    );
    assert_eq!(metadata.into_inner().max_token_expiration_seconds, year);

    let sign = |claims: Value| {
        let mut client = env.client.clone();
        async move {
            client
                .sign(SignJwtRequest {
                    claims: encode_claims(&claims),
                })
                .await
        }
    };
    // What kube-apiserver minted for a 100000h request, capped at Metadata's year: refused.
    let refused = sign(pod_claims(NOW, year)).await.unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert!(
        refused.message().starts_with(
            "exp is 31536000 s from now, beyond the 172800 s maximum of a token that is not extended"
        ),
        "{}",
        refused.message()
    );
    assert!(sign(pod_claims(NOW, 172_800 + 61)).await.is_err());
    assert!(sign(pod_claims(NOW, 172_800)).await.is_ok());

    // kube's extended token: warnafter an hour and 7 s on, valid a year.
    let extended = |warn_after: Value, lifetime: i64| {
        let mut claims = pod_claims(NOW, lifetime);
        claims["kubernetes.io"]["warnafter"] = warn_after;
        claims
    };
    assert!(sign(extended(json!(NOW + 3607), year)).await.is_ok());
    let beyond = sign(extended(json!(NOW + 3607), year + 61))
        .await
        .unwrap_err();
    assert!(
        beyond.message().contains("beyond the 31536000 s"),
        "{beyond:?}"
    );
    // A warnafter that is itself past the maximum, or not a date, makes nothing extended.
    for (warn_after, message) in [
        (
            json!(NOW + year),
            "kubernetes.io.warnafter is 31536000 s from now, beyond the 172800 s",
        ),
        // Claims TokenReview would not read are not signed.
        (
            json!("soon"),
            "claims are not those of a service-account token: invalid type: string \"soon\"",
        ),
    ] {
        let refused = sign(extended(warn_after, year)).await.unwrap_err();
        assert_eq!(refused.code(), Code::InvalidArgument);
        assert!(
            refused.message().starts_with(message),
            "{}",
            refused.message()
        );
    }
    assert_eq!(
        env.metric(r#"warrant_signer_requests_total{rpc="Sign",result="exp_beyond_max"}"#),
        3.0
    );
    assert_eq!(
        env.metric(r#"warrant_signer_requests_total{rpc="Sign",result="bad_warnafter"}"#),
        1.0
    );
    assert_eq!(
        env.metric(r#"warrant_signer_requests_total{rpc="Sign",result="malformed_claims"}"#),
        1.0
    );
    assert_eq!(
        env.metric(r#"warrant_signer_requests_total{rpc="Sign",result="ok"}"#),
        2.0
    );
}

/// Claims that a Go reader (go-oidc, kube's JWT authenticator) would read otherwise than
/// warrant's check: a repeated key, or a case variant of a registered claim.
#[tokio::test]
async fn claims_readers_would_read_differently_are_refused() {
    let key = SigningKey::generate(KeyType::P256).unwrap();
    let env = start(KeySet::new(key, vec![]), ExpirationPolicy::default()).await;
    // The issue's two: the far exp first and the near one last, or the far one as "EXP".
    let text = pod_claims(NOW, 3600).to_string();
    let far = "99999999999";
    let cases = [
        (
            text.replacen('{', &format!("{{\"exp\":{far},"), 1),
            "duplicate_claim",
            "claims repeat the key \"exp\"",
        ),
        (
            text.replacen('{', &format!("{{\"EXP\":{far},"), 1),
            "case_variant_claim",
            "claims have the key \"EXP\", which Go's JSON readers take for \"exp\"",
        ),
        (
            text.replacen(
                "\"namespace\":\"demo\"",
                "\"namespace\":\"demo\",\"namespace\":\"kube-system\"",
                1,
            ),
            "duplicate_claim",
            "claims repeat the key \"namespace\" inside \"kubernetes.io\"",
        ),
        (
            text.replacen("\"sub\"", "\"Sub\"", 1),
            "case_variant_claim",
            "claims have the key \"Sub\"",
        ),
    ];
    for (claims, _reason, message) in cases {
        assert_ne!(claims, text);
        let refused = env
            .client
            .clone()
            .sign(SignJwtRequest {
                claims: URL_SAFE_NO_PAD.encode(&claims),
            })
            .await
            .unwrap_err();
        assert_eq!(refused.code(), Code::InvalidArgument, "{claims}");
        assert!(
            refused.message().starts_with(message),
            "{}",
            refused.message()
        );
    }
    for (reason, count) in [
        ("duplicate_claim", 2.0),
        ("case_variant_claim", 2.0),
        ("ok", 0.0),
    ] {
        assert_eq!(
            env.metric(&format!(
                r#"warrant_signer_requests_total{{rpc="Sign",result="{reason}"}}"#
            )),
            count,
            "{reason}"
        );
    }
}

/// Claims beyond kube's (the policy's extra claims, issue 47) are signed as given: Sign checks
/// the registered claims and refuses only their case variants. kube-apiserver never sends any,
/// but a token of warrant's that carries them verifies with the keys kube-apiserver fetches, and
/// warrant's TokenReview accepts it.
#[tokio::test]
async fn claims_beyond_kubes_are_signed_as_given() {
    let key = SigningKey::generate(KeyType::P256).unwrap();
    let mut env = start(KeySet::new(key, vec![]), ExpirationPolicy::default()).await;
    let mut claims = pod_claims(NOW, 3600);
    let tags = json!({"principal_tags": {"team": ["blue"]}, "transitive_tag_keys": ["team"]});
    claims["https://aws.amazon.com/tags"] = tags.clone();
    let encoded = encode_claims(&claims);
    let signed = env
        .client
        .sign(SignJwtRequest {
            claims: encoded.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    let token = format!("{}.{encoded}.{}", signed.header, signed.signature);
    assert_eq!(
        decode_json(token.split('.').nth(1).unwrap())["https://aws.amazon.com/tags"],
        tags
    );
    let review = env.review(&token, &["vault"]).await;
    assert_eq!(review["authenticated"], true, "{review}");
}
