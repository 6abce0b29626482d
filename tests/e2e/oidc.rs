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

/// `--jwks-x5c`: each managed key is also in the JWKS as a certificate, which openssl reads as
/// holding the JWK's key, and from which PyJWT takes the key that verifies a token (what a
/// relying party that trusts `x5c` runs). Static keys refuse the flag, naming why.
#[tokio::test]
async fn a_relying_party_reads_the_keys_from_their_certificates() {
    let w = Warrant::start_with(OBJECTS, key_dir, &["--jwks-x5c"]).await;
    let token = w.token(&["--audience", "vault"]);
    let jwks: Value = serde_json::from_str(
        &w.http
            .get(w.url("/openid/v1/jwks"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
    )
    .unwrap();
    let keys = jwks["keys"].as_array().unwrap();
    assert!(!keys.is_empty());
    for jwk in keys {
        assert_x5c_holds_the_key(jwk);
    }
    // PyJWT verifies the token with the key of the certificate its kid names.
    let program = "import sys, json, base64, jwt\nfrom cryptography import x509\njwks = json.loads(sys.argv[1])\nheader = jwt.get_unverified_header(sys.argv[2])\nkey = next(k for k in jwks['keys'] if k['kid'] == header['kid'])\ncert = x509.load_der_x509_certificate(base64.b64decode(key['x5c'][0]))\nclaims = jwt.decode(sys.argv[2], cert.public_key(), algorithms=[header['alg']], audience='vault', issuer=sys.argv[3])\nprint(claims['sub'])";
    let out = warrant_testkit::tools::python(&["jwt", "cryptography"])
        .args(["-c", program, &jwks.to_string(), token.trim(), &w.issuer()])
        .output()
        .unwrap();
    assert!(out.status.success(), "PyJWT: {}", stderr(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "system:serviceaccount:demo:app"
    );

    // Static keys have no publication time to start a certificate from: refused.
    let refused = serve_refusing(&["--jwks-x5c"], &[]);
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("--jwks-x5c needs managed keys"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
}

/// The JWK's `x5c` certificate, read by openssl, holds the JWK's own key and names it by kid
/// (`CN=warrant token key <kid>`).
pub(crate) fn assert_x5c_holds_the_key(jwk: &Value) {
    use base64::Engine as _;
    let der = base64::engine::general_purpose::STANDARD
        .decode(jwk["x5c"][0].as_str().expect("no x5c in the JWK"))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("key.der"), &der).unwrap();
    let read = |what: &str| {
        crate::pki::openssl(
            dir.path(),
            &["x509", "-inform", "DER", "-in", "key.der", "-noout", what],
        )
    };
    let jwk_key = warrant_token::VerifyingKey::from_jwk(jwk).unwrap().to_pem();
    assert_eq!(read("-pubkey").trim(), jwk_key.trim(), "{jwk}");
    let subject = read("-subject");
    let kid = jwk["kid"].as_str().unwrap();
    assert!(
        subject.contains(&format!("warrant token key {kid}")),
        "{subject}"
    );
}
