//! The relying-party recipes of docs/relying-parties.md, held to what each provider documents.
//!
//! Each provider's requirements are written here as facts, each with where it comes from, and
//! checked against what the real binary serves: the discovery document and JWKS as a relying
//! party fetches them, a token from `kubectl create token` for the audience the recipe uses,
//! and, for Vault's kubernetes auth method, the TokenReview exchange Vault makes. Where the
//! doc says a requirement is unverified, the check here is the conservative reading of it.
//! `the_checks_refuse_what_the_providers_refuse` shows that each check can fail.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

use crate::support::*;
use crate::tokens::OBJECTS;
use warrant_testkit::SA_UID;

/// What a relying party sees: the documents it fetches and one token.
struct Seen {
    discovery: Value,
    jwks: Value,
    token: String,
    header: Value,
    claims: Value,
}

fn decode_part(token: &str, index: usize) -> Value {
    let part = token.split('.').nth(index).unwrap();
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(part).unwrap()).unwrap()
}

/// Fetches discovery and the JWKS it names, as a relying party does, and a token for `demo/app`
/// with `audience`.
async fn seen(w: &Warrant, audience: &str) -> Seen {
    let discovery: Value = w
        .http
        .get(w.url("/.well-known/openid-configuration"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let jwks_uri = discovery["jwks_uri"].as_str().unwrap().to_owned();
    let jwks: Value = w
        .http
        .get(jwks_uri)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let token = w.token(&["--audience", audience]);
    Seen {
        header: decode_part(&token, 0),
        claims: decode_part(&token, 1),
        discovery,
        jwks,
        token,
    }
}

type Check = Result<(), String>;

fn ensure(ok: bool, why: impl FnOnce() -> String) -> Check {
    if ok { Ok(()) } else { Err(why()) }
}

/// The size in bits of a base64url big-endian unsigned integer (a JWK's `n`).
fn bits(b64: &str) -> usize {
    let bytes = URL_SAFE_NO_PAD.decode(b64).unwrap_or_default();
    let bytes: Vec<u8> = bytes.into_iter().skip_while(|b| *b == 0).collect();
    match bytes.first() {
        Some(first) => bytes.len() * 8 - first.leading_zeros() as usize,
        None => 0,
    }
}

/// What every provider below needs of the documents and the token (OpenID Connect Discovery
/// 1.0 §3 and RFC 7517 §4, which each of them cites or follows): discovery names its `issuer`
/// (equal to the token's `iss`) and an https `jwks_uri`; every key has `kty` RSA or EC, a `kid`,
/// `alg` and `use: sig` (providers pick the key by `kid`, and AWS, Google and Entra ignore keys
/// they cannot classify); RSA moduli are at least 2048 bits (RFC 7518 §3.3 requires 2048 for
/// RS256; AWS and Google refuse shorter keys); EC keys name their curve and both coordinates;
/// the token's header names a `kid` the JWKS holds and that key's `alg`.
fn common(seen: &Seen) -> Check {
    let d = &seen.discovery;
    let issuer = d["issuer"].as_str().ok_or("discovery has no issuer")?;
    ensure(seen.claims["iss"] == issuer, || {
        format!(
            "token iss {} is not discovery's issuer {issuer}",
            seen.claims["iss"]
        )
    })?;
    let jwks_uri = d["jwks_uri"].as_str().ok_or("discovery has no jwks_uri")?;
    ensure(jwks_uri.starts_with("https://"), || {
        format!("jwks_uri {jwks_uri} is not https")
    })?;
    let algs = d["id_token_signing_alg_values_supported"]
        .as_array()
        .ok_or("discovery has no id_token_signing_alg_values_supported")?;
    let keys = seen.jwks["keys"].as_array().ok_or("the JWKS has no keys")?;
    ensure(!keys.is_empty(), || "the JWKS is empty".into())?;
    for key in keys {
        let kid = key["kid"].as_str().unwrap_or_default();
        ensure(!kid.is_empty(), || format!("a JWKS key has no kid: {key}"))?;
        ensure(key["use"] == "sig", || format!("key {kid}: use is not sig"))?;
        let alg = key["alg"]
            .as_str()
            .ok_or_else(|| format!("key {kid}: no alg"))?;
        ensure(algs.iter().any(|a| a == alg), || {
            format!("key {kid}: alg {alg} is not in discovery's algorithms")
        })?;
        match key["kty"].as_str() {
            Some("RSA") => {
                let n = bits(key["n"].as_str().unwrap_or_default());
                ensure(n >= 2048, || format!("key {kid}: RSA modulus of {n} bits"))?;
                ensure(key["e"].is_string(), || format!("key {kid}: no e"))?;
            }
            Some("EC") => {
                ensure(
                    ["P-256", "P-384", "P-521"].contains(&key["crv"].as_str().unwrap_or_default()),
                    || format!("key {kid}: curve {}", key["crv"]),
                )?;
                ensure(key["x"].is_string() && key["y"].is_string(), || {
                    format!("key {kid}: missing x or y")
                })?;
            }
            other => return Err(format!("key {kid}: kty {other:?}")),
        }
    }
    let kid = seen.header["kid"]
        .as_str()
        .ok_or("the token's header has no kid")?;
    let key = keys
        .iter()
        .find(|k| k["kid"] == kid)
        .ok_or_else(|| format!("the token's kid {kid} is not in the JWKS"))?;
    ensure(seen.header["alg"] == key["alg"], || {
        format!("the token's alg {} is not its key's", seen.header["alg"])
    })?;
    for claim in ["exp", "iat", "nbf"] {
        ensure(seen.claims[claim].is_i64(), || {
            format!("{claim} is not an integer NumericDate")
        })?;
    }
    Ok(())
}

/// `sub` is Kubernetes' username form, which every recipe's subject match is written for.
fn subject_is(seen: &Seen, namespace: &str, name: &str) -> Check {
    let want = format!("system:serviceaccount:{namespace}:{name}");
    ensure(seen.claims["sub"] == want.as_str(), || {
        format!("sub is {}, not {want}", seen.claims["sub"])
    })
}

/// The token's `aud` holds `audience`, as an array (kube's form, which AWS, Google, Entra and
/// Vault accept: OIDC Core 1.0 §2 allows an array of one).
fn audience_is(seen: &Seen, audience: &str) -> Check {
    let aud = seen.claims["aud"].as_array().ok_or("aud is not an array")?;
    ensure(aud.iter().any(|a| a == audience), || {
        format!("aud {aud:?} lacks {audience}")
    })
}

fn algorithms_within(seen: &Seen, allowed: &[&str], who: &str) -> Check {
    let alg = seen.header["alg"].as_str().unwrap_or_default();
    ensure(allowed.contains(&alg), || {
        format!("{who} does not accept tokens signed {alg}")
    })
}

/// AWS IAM OIDC identity provider and STS `AssumeRoleWithWebIdentity`.
fn aws(seen: &Seen, issuer_as_configured: &str) -> Check {
    common(seen)?;
    // IAM CreateOpenIDConnectProvider, `Url`: "must begin with https://", path components are
    // allowed but query parameters are not, and it "should not contain a port number"; 1 to
    // 255 characters.
    let url = reqwest::Url::parse(issuer_as_configured).map_err(|e| e.to_string())?;
    ensure(url.scheme() == "https", || {
        "AWS: issuer is not https".into()
    })?;
    ensure(url.query().is_none(), || "AWS: issuer has a query".into())?;
    ensure(url.port().is_none(), || "AWS: issuer has a port".into())?;
    ensure(issuer_as_configured.len() <= 255, || {
        "AWS: issuer over 255".into()
    })?;
    // The audience is a client ID of the provider: 1 to 255 characters (`ClientIDList`).
    // IRSA's client ID is sts.amazonaws.com (EKS, "IAM roles for service accounts").
    audience_is(seen, "sts.amazonaws.com")?;
    // STS AssumeRoleWithWebIdentity, `WebIdentityToken`: 4 to 20000 characters.
    ensure((4..=20_000).contains(&seen.token.len()), || {
        format!("AWS: a token of {} characters", seen.token.len())
    })?;
    // Unverified (docs/relying-parties.md says so): IAM verifies RS256/384/512 and ES256/384/512.
    algorithms_within(
        seen,
        &["RS256", "RS384", "RS512", "ES256", "ES384", "ES512"],
        "AWS",
    )?;
    // Unverified: IAM reads at most 100 RSA and 100 EC keys of a JWKS.
    let keys = seen.jwks["keys"].as_array().map(Vec::len).unwrap_or(0);
    ensure(keys <= 100, || format!("AWS: {keys} keys in the JWKS"))?;
    // The trust policy's `<provider>:sub` condition matches this exactly.
    subject_is(seen, "demo", "app")
}

/// The default allowed audience of a Google workload identity pool provider (used below).
const GOOGLE_AUDIENCE: &str = "https://iam.googleapis.com/projects/123456789012/locations/global/workloadIdentityPools/warrant/providers/cluster-a";

/// Google Cloud workload identity federation, OIDC provider.
fn google(seen: &Seen) -> Check {
    common(seen)?;
    // `gcloud iam workload-identity-pools providers create-oidc --issuer-uri`: https.
    let issuer = seen.discovery["issuer"].as_str().unwrap_or_default();
    ensure(issuer.starts_with("https://"), || {
        "Google: issuer is not https".into()
    })?;
    // WorkloadIdentityPoolProvider.oidc.allowedAudiences: at most 10, each at most 256
    // characters; when empty, the token's aud must be the provider's full canonical resource
    // name, with or without the https: prefix.
    audience_is(seen, GOOGLE_AUDIENCE)?;
    ensure(GOOGLE_AUDIENCE.len() <= 256, || {
        "Google: audience over 256".into()
    })?;
    // Attribute mapping `google.subject=assertion.sub`: google.subject is at most 127 bytes.
    let sub = seen.claims["sub"].as_str().unwrap_or_default();
    ensure(sub.len() <= 127, || {
        format!(
            "Google: sub of {} bytes, over google.subject's 127",
            sub.len()
        )
    })?;
    // Unverified: RS256 and ES256 are accepted.
    algorithms_within(seen, &["RS256", "ES256"], "Google")?;
    subject_is(seen, "demo", "app")
}

/// Microsoft Entra ID federated identity credential (an app registration or a user-assigned
/// managed identity).
fn azure(seen: &Seen) -> Check {
    common(seen)?;
    // federatedIdentityCredential (Microsoft Graph): `issuer` must match the token's iss
    // exactly, at most 600 characters; `subject` exactly the token's sub, at most 600;
    // `audiences` one value, at most 600, api://AzureADTokenExchange recommended.
    let issuer = seen.discovery["issuer"].as_str().unwrap_or_default();
    ensure(issuer.len() <= 600, || "Azure: issuer over 600".into())?;
    audience_is(seen, "api://AzureADTokenExchange")?;
    subject_is(seen, "demo", "app")?;
    ensure(
        seen.claims["sub"].as_str().unwrap_or_default().len() <= 600,
        || "Azure: subject over 600".into(),
    )?;
    // Unverified: Entra verifies RSA signatures only; the recipe keeps RS256 keys.
    algorithms_within(seen, &["RS256"], "Entra ID")
}

/// Vault's JWT/OIDC auth method, `auth/jwt/config` with `oidc_discovery_url`.
fn vault_jwt(seen: &Seen, discovery_url: &str) -> Check {
    common(seen)?;
    // oidc_discovery_url is the issuer without `.well-known`; Vault's OIDC library refuses a
    // discovery document whose `issuer` differs from it, and `bound_issuer` is compared with
    // `iss` as a string.
    ensure(seen.discovery["issuer"] == discovery_url, || {
        format!(
            "Vault: discovery issuer {} is not {discovery_url}",
            seen.discovery["issuer"]
        )
    })?;
    // Role `bound_audiences=vault`: a token with `aud` needs a role that binds one of them.
    audience_is(seen, "vault")?;
    // `jwt_supported_algs`: the recipe sets RS256 (Vault's default for discovery).
    algorithms_within(seen, &["RS256"], "Vault (jwt_supported_algs=RS256)")?;
    // `user_claim=sub`, and `bound_claims` on the JSON pointers the recipe names.
    subject_is(seen, "demo", "app")?;
    ensure(
        seen.claims.pointer("/kubernetes.io/namespace") == Some(&json!("demo")),
        || "Vault: no /kubernetes.io/namespace claim".into(),
    )?;
    ensure(
        seen.claims.pointer("/kubernetes.io/serviceaccount/name") == Some(&json!("app")),
        || "Vault: no /kubernetes.io/serviceaccount/name claim".into(),
    )
}

/// SPIFFE: a JWT-SVID's `sub` is a SPIFFE ID (`spiffe://…`) and a SPIFFE bundle marks its JWT
/// keys `use: jwt-svid` (SPIFFE JWT-SVID §3, SPIFFE Trust Domain and Bundle §4). warrant's
/// tokens are neither, and the doc says so: this check fails the day that changes, so the doc
/// is revisited.
fn spiffe_does_not_apply(seen: &Seen) -> Check {
    let sub = seen.claims["sub"].as_str().unwrap_or_default();
    ensure(!sub.starts_with("spiffe://"), || {
        "sub is a SPIFFE ID now: docs/relying-parties.md says it is not".into()
    })?;
    let keys = seen.jwks["keys"].as_array().cloned().unwrap_or_default();
    ensure(keys.iter().all(|k| k["use"] == "sig"), || {
        "a JWKS key is not use=sig: docs/relying-parties.md says warrant publishes no SPIFFE bundle"
            .into()
    })
}

#[tokio::test]
async fn warrants_documents_and_tokens_meet_each_providers_requirements() {
    let w = Warrant::start(OBJECTS, &[]).await;
    let issuer = w.issuer();

    // AWS: the e2e issuer has a port (a loopback test server), so the issuer form is checked on
    // the recipe's own issuer, through `discovery export`, which renders the documents a bucket
    // or the server would serve for it.
    let aws_seen = seen(&w, "sts.amazonaws.com").await;
    let recipe_issuer = "https://oidc.example.com/cluster-a";
    let dir = w.path("aws-export");
    let mut args: Vec<std::ffi::OsString> = vec![
        "discovery".into(),
        "export".into(),
        "--dir".into(),
        dir.clone().into(),
    ];
    args.extend(["--service-account-issuer".into(), recipe_issuer.into()]);
    args.extend(static_keys(w.dir.path()));
    warrant_ok(&args);
    let exported: Value = serde_json::from_slice(
        &std::fs::read(dir.join("cluster-a/.well-known/openid-configuration")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        exported["issuer"], recipe_issuer,
        "the issuer is published as given"
    );
    assert_eq!(
        exported["jwks_uri"],
        format!("{recipe_issuer}/openid/v1/jwks")
    );
    aws(&aws_seen, exported["issuer"].as_str().unwrap()).unwrap();
    assert!(aws(&aws_seen, &issuer).unwrap_err().contains("port"));

    google(&seen(&w, GOOGLE_AUDIENCE).await).unwrap();
    azure(&seen(&w, "api://AzureADTokenExchange").await).unwrap();
    let vault = seen(&w, "vault").await;
    vault_jwt(&vault, &issuer).unwrap();
    spiffe_does_not_apply(&vault).unwrap();
}

/// Vault's kubernetes auth method with warrant as `kubernetes_host`: the request Vault sends
/// (vault-plugin-auth-kubernetes: a v1 TokenReview with the role's `audience`, bearer
/// `token_reviewer_jwt`), and the fields it reads from the answer: 201 Created,
/// `status.authenticated`, `status.user.username` split on `:` into
/// `system:serviceaccount:NS:NAME` (checked against `bound_service_account_*`),
/// `status.user.uid` (the default alias), and `status.error` when refused.
#[tokio::test]
async fn vault_kubernetes_auth_reviews_against_warrant() {
    let w = Warrant::start(OBJECTS, &[]).await;
    let token = w.token(&["--audience", "vault"]);
    let review = |token: String| {
        let request = w
            .http
            .post(w.url("/apis/authentication.k8s.io/v1/tokenreviews"))
            .bearer_auth(w.admin_token())
            .json(&json!({
                "kind": "TokenReview",
                "apiVersion": "authentication.k8s.io/v1",
                "metadata": {"creationTimestamp": null},
                "spec": {"token": token, "audiences": ["vault"]},
                "status": {"user": {}},
            }));
        async move {
            let response = request.send().await.unwrap();
            (
                response.status().as_u16(),
                response.json::<Value>().await.unwrap(),
            )
        }
    };
    let (code, answer) = review(token.clone()).await;
    assert_eq!(code, 201, "{answer}");
    let status = &answer["status"];
    assert_eq!(status["authenticated"], true, "{answer}");
    let username = status["user"]["username"].as_str().unwrap();
    let parts: Vec<&str> = username.split(':').collect();
    assert_eq!(parts, ["system", "serviceaccount", "demo", "app"]);
    assert_eq!(status["user"]["uid"], SA_UID);
    assert_eq!(status["audiences"], json!(["vault"]));
    // Vault also reads the namespace and name from the token itself (unverified) and requires
    // them to agree with the review.
    let claims = claims(&token);
    assert_eq!(
        (
            claims.kubernetes.namespace.as_str(),
            claims.kubernetes.serviceaccount.name.as_str()
        ),
        (parts[2], parts[3])
    );

    // A token for another audience: still 201, refused with the reason.
    let other = w.token(&["--audience", "s3"]);
    let (code, answer) = review(other).await;
    assert_eq!(code, 201);
    assert_eq!(answer["status"]["authenticated"], Value::Null, "{answer}");
    assert!(
        answer["status"]["error"]
            .as_str()
            .unwrap()
            .contains("audiences"),
        "{answer}"
    );
}

/// Each check refuses what its provider refuses: a key without `kid`, a discovery document
/// without `jwks_uri`, a short RSA modulus, another `sub` form, a missing audience.
#[tokio::test]
async fn the_checks_refuse_what_the_providers_refuse() {
    let w = Warrant::start(OBJECTS, &[]).await;
    let good = seen(&w, "vault").await;
    let issuer = w.issuer();
    vault_jwt(&good, &issuer).unwrap();
    let changed = |change: &dyn Fn(&mut Seen)| {
        let mut s = Seen {
            discovery: good.discovery.clone(),
            jwks: good.jwks.clone(),
            token: good.token.clone(),
            header: good.header.clone(),
            claims: good.claims.clone(),
        };
        change(&mut s);
        vault_jwt(&s, &issuer).unwrap_err()
    };
    assert!(
        changed(&|s| {
            s.jwks["keys"][0].as_object_mut().unwrap().remove("kid");
        })
        .contains("no kid")
    );
    assert!(
        changed(&|s| {
            s.discovery.as_object_mut().unwrap().remove("jwks_uri");
        })
        .contains("jwks_uri")
    );
    assert!(
        changed(&|s| {
            // A 1024-bit modulus.
            s.jwks["keys"][0]["n"] = json!(URL_SAFE_NO_PAD.encode([0xc5u8; 128]));
        })
        .contains("1024 bits")
    );
    assert!(changed(&|s| s.claims["sub"] = json!("demo/app")).contains("sub is"));
    assert!(changed(&|s| s.claims["aud"] = json!(["other"])).contains("lacks vault"));
    assert!(changed(&|s| s.header["alg"] = json!("ES256")).contains("alg"));
    assert!(changed(&|s| s.claims["iss"] = json!("https://elsewhere")).contains("iss"));
    assert!(
        spiffe_does_not_apply(&Seen {
            claims: json!({"sub": "spiffe://example.org/demo/app"}),
            discovery: Value::Null,
            jwks: json!({"keys": []}),
            token: String::new(),
            header: Value::Null,
        })
        .is_err()
    );
}
