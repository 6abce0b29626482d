//! A relying party's view: discovery document, then the JWKS it names, then a token verified
//! with an independent JWT library.

use jsonwebtoken::{DecodingKey, Validation, decode, jwk::JwkSet};
use serde_json::Value;

use crate::support::*;
use crate::tokens::OBJECTS;

#[tokio::test]
async fn a_relying_party_verifies_tokens_through_discovery() {
    let w = Warrant::start(OBJECTS, &[]).await;
    // Served without authentication: relying parties have no credentials.
    let r = w
        .http
        .get(w.url("/.well-known/openid-configuration"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "application/json");
    assert_eq!(r.headers()["cache-control"], "public, max-age=3600");
    let discovery: Value = r.json().await.unwrap();
    assert_eq!(discovery["issuer"], w.issuer());
    assert_eq!(
        discovery["id_token_signing_alg_values_supported"],
        serde_json::json!(["RS256"])
    );
    let jwks_uri = discovery["jwks_uri"].as_str().unwrap();
    assert_eq!(jwks_uri, format!("{}/openid/v1/jwks", w.issuer()));

    let r = w.http.get(jwks_uri).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "application/jwk-set+json");
    let jwks: JwkSet = r.json().await.unwrap();

    let token = w.token(&["--audience", "sts.example.com"]);
    let token = token.trim();
    let header = jsonwebtoken::decode_header(token).unwrap();
    let jwk = jwks
        .find(header.kid.as_deref().unwrap())
        .expect("the token's kid is in the JWKS");
    let mut validation = Validation::new(jsonwebtoken::Algorithm::RS256);
    validation.set_audience(&["sts.example.com"]);
    validation.set_issuer(&[w.issuer()]);
    let verified =
        decode::<Value>(token, &DecodingKey::from_jwk(jwk).unwrap(), &validation).unwrap();
    assert_eq!(verified.claims["sub"], "system:serviceaccount:demo:app");
}

#[tokio::test]
async fn warrant_verify_checks_a_token_like_a_relying_party() {
    let w = Warrant::start(OBJECTS, &[]).await;
    let token = w.token(&["--audience", "vault"]);
    let verify = |audience: &str| {
        w.verify_command(audience)
            .arg(token.trim())
            .output()
            .unwrap()
    };
    let out = verify("vault");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let claims: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(claims["sub"], "system:serviceaccount:demo:app");

    let out = verify("s3");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains(r#"token audiences ["vault"] is invalid for the target audiences ["s3"]"#),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// An issuer with a path (`https://host/tenant-a`, common for discovery hosted in a bucket):
/// discovery and the JWKS it names are served below the path (and at the root, as before),
/// `warrant verify` works against it, and `discovery export` writes the same layout.
#[tokio::test]
async fn an_issuer_with_a_path_is_discoverable_below_it() {
    let w = Warrant::start_at_issuer_path(OBJECTS, "/tenant-a").await;
    let get = |path: String| {
        let http = w.http.clone();
        let url = w.url(&path);
        async move {
            let response = http.get(url).send().await.unwrap();
            (response.status().as_u16(), response.bytes().await.unwrap())
        }
    };
    let (code, body) = get("/tenant-a/.well-known/openid-configuration".into()).await;
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    let discovery: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(discovery["issuer"], w.issuer());
    let jwks_uri = discovery["jwks_uri"].as_str().unwrap().to_owned();
    assert_eq!(jwks_uri, format!("{}/openid/v1/jwks", w.issuer()));
    let (code, jwks) = get("/tenant-a/openid/v1/jwks".into()).await;
    assert_eq!(code, 200);
    assert_eq!(get("/openid/v1/jwks".into()).await, (200, jwks.clone()));
    assert_eq!(get("/tenant-a/version".into()).await.0, 404);

    let token = w.token(&["--audience", "vault"]);
    let out = w
        .verify_command("vault")
        .arg(token.trim())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));

    let out_dir = w.path("export");
    let mut args: Vec<std::ffi::OsString> =
        vec!["discovery".into(), "export".into(), "--dir".into()];
    args.push(out_dir.clone().into());
    args.extend(["--service-account-issuer".into(), w.issuer().into()]);
    args.extend(static_keys(w.dir.path()));
    let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
    w.warrant_ok(&args);
    assert_eq!(
        std::fs::read(out_dir.join("tenant-a/.well-known/openid-configuration")).unwrap(),
        body.to_vec()
    );
    assert_eq!(
        std::fs::read(out_dir.join("tenant-a/openid/v1/jwks")).unwrap(),
        jwks.to_vec()
    );
}
