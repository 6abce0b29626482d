//! Keys end to end: a key directory that warrant manages, an operator's rotation picked up by
//! a running server, a restart, moving from a static key to managed keys, a static key file
//! replaced on disk, and `warrant discovery export`.

use std::ffi::{OsStr, OsString};
use std::path::Path;

use jsonwebtoken::{DecodingKey, Validation, decode, jwk::JwkSet};
use serde_json::Value;
use warrant_token::{KeyType, SigningKey};

use crate::support::*;
use crate::tokens::OBJECTS;

fn token(w: &Warrant) -> String {
    w.kubectl_ok(&[
        "create",
        "token",
        "app",
        "-n",
        "demo",
        "--audience",
        "vault",
    ])
    .trim()
    .to_owned()
}

fn kid(token: &str) -> String {
    jsonwebtoken::decode_header(token).unwrap().kid.unwrap()
}

fn authenticated(w: &Warrant, token: &str) -> bool {
    w.review(token, &["vault"])["authenticated"] == true
}

/// `warrant keys list --key-dir <setup>/keys -o json`.
fn list(w: &Warrant) -> Value {
    let dir = w.path("keys");
    let out = w.warrant_ok(&[
        OsStr::new("keys"),
        OsStr::new("list"),
        OsStr::new("--key-dir"),
        dir.as_os_str(),
        OsStr::new("-o"),
        OsStr::new("json"),
    ]);
    serde_json::from_str(&out).unwrap()
}

fn states(list: &Value) -> Vec<(String, String)> {
    list["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            (
                k["kid"].as_str().unwrap().to_owned(),
                k["state"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// The JWKS as served, with its headers.
async fn jwks(w: &Warrant) -> (JwkSet, reqwest::header::HeaderMap) {
    let r = w.http.get(w.url("/openid/v1/jwks")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let headers = r.headers().clone();
    (r.json().await.unwrap(), headers)
}

/// Polls the served JWKS until `check` holds on its kids (the server reloads on its own
/// schedule), with a safety net.
async fn jwks_until(w: &Warrant, what: &str, check: impl Fn(&[String]) -> bool) -> JwkSet {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let (published, _) = jwks(w).await;
        if check(&kids(&published)) {
            return published;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for: {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

fn kids(jwks: &JwkSet) -> Vec<String> {
    jwks.keys
        .iter()
        .map(|k| k.common.key_id.clone().unwrap())
        .collect()
}

/// Verifies `token` as a relying party does, with the JWKS alone.
fn verify_offline(w: &Warrant, jwks: &JwkSet, token: &str) {
    let header = jsonwebtoken::decode_header(token).unwrap();
    let jwk = jwks
        .find(header.kid.as_deref().unwrap())
        .expect("the token's kid is published");
    let mut validation = Validation::new(header.alg);
    validation.set_audience(&["vault"]);
    validation.set_issuer(&[w.issuer()]);
    decode::<Value>(token, &DecodingKey::from_jwk(jwk).unwrap(), &validation).unwrap();
}

async fn metrics(w: &Warrant) -> String {
    w.http
        .get(w.url("/metrics"))
        .bearer_auth(w.admin_token())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_key_directory_publishes_the_next_key_ahead_and_rotates_without_a_restart() {
    let mut w = Warrant::start_with(OBJECTS, key_dir, &["--key-algorithm", "ES256"]).await;
    // warrant created the directory and its first key, which signs at once.
    let listed = list(&w);
    let [(a, state)] = states(&listed).try_into().unwrap();
    assert_eq!(state, "active");
    assert_eq!(listed["keys"][0]["algorithm"], "ES256");
    assert_eq!(listed["keys"][0]["maxTokenSeconds"], 86400);
    let first = token(&w);
    assert_eq!(kid(&first), a);

    // Cacheable until the next scheduled change (the successor's creation in six days):
    // capped at an hour; with an ETag to revalidate.
    let (published, headers) = jwks(&w).await;
    assert_eq!(kids(&published), std::slice::from_ref(&a));
    assert_eq!(headers["cache-control"], "public, max-age=3600");
    let etag = headers["etag"].clone();
    let r = w
        .http
        .get(w.url("/openid/v1/jwks"))
        .header("if-none-match", etag.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 304);

    // An operator starts a rotation beside the running server: the new key is published at
    // once and signs only after publish-ahead (a day), so tokens are still signed by the first.
    let dir = w.path("keys");
    w.warrant_ok(&[
        OsStr::new("keys"),
        OsStr::new("rotate"),
        OsStr::new("--key-dir"),
        dir.as_os_str(),
    ]);
    let [(_, active), (b, next)] = states(&list(&w)).try_into().unwrap();
    assert_eq!((active.as_str(), next.as_str()), ("active", "next"));
    let published = jwks_until(&w, "the next key in the JWKS", |k| k.len() == 2).await;
    assert_eq!(
        kids(&published),
        [a.clone(), b.clone()],
        "the next key is published ahead"
    );
    let r = w
        .http
        .get(w.url("/openid/v1/jwks"))
        .header("if-none-match", etag)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "a new key set has a new ETag");
    let second = token(&w);
    assert_eq!(
        kid(&second),
        a,
        "the next key does not sign before its time"
    );
    for t in [&first, &second] {
        assert!(authenticated(&w, t));
        verify_offline(&w, &published, t);
    }
    let text = metrics(&w).await;
    assert!(
        text.contains(r#"warrant_keys_held{state="next"} 1"#)
            && text.contains(r#"warrant_keys_held{state="active"} 1"#),
        "{text}"
    );

    // A restart picks up where it left off: same keys, same schedule, tokens still valid.
    w.restart(key_dir).await;
    assert_eq!(
        states(&list(&w)),
        [(a.clone(), "active".to_owned()), (b, "next".to_owned())]
    );
    assert_eq!(kid(&token(&w)), a);
    assert!(authenticated(&w, &first));
}

#[tokio::test]
async fn a_static_key_moves_under_management_without_breaking_its_tokens() {
    let mut w = Warrant::start(OBJECTS, &[]).await;
    let before = token(&w);
    let static_kid = kid(&before);

    // kube-apiserver's key (here, the setup's) becomes the first managed key.
    w.restart(|dir: &Path| {
        let args: [OsString; 8] = [
            "keys".into(),
            "generate".into(),
            "--key-dir".into(),
            dir.join("keys").into_os_string(),
            "--service-account-signing-key-file".into(),
            dir.join("sa.key").into_os_string(),
            "--service-account-max-token-expiration".into(),
            "24h".into(),
        ];
        warrant_ok(&args);
        key_dir(dir)
    })
    .await;
    let listed = list(&w);
    assert_eq!(states(&listed), [(static_kid.clone(), "active".to_owned())]);
    // It may have signed extended tokens (a year) before: it stays published that long after
    // it retires.
    assert_eq!(listed["keys"][0]["maxTokenSeconds"], 365 * 86400);
    assert!(
        authenticated(&w, &before),
        "a token from before the move still works"
    );
    let after = token(&w);
    assert_eq!(
        kid(&after),
        static_kid,
        "the same key signs on until it rotates"
    );
    assert!(authenticated(&w, &after));

    // Both key flags at once are refused, with the way forward.
    let mut flags: Vec<OsString> = vec!["serve".into()];
    flags.extend(static_keys(w.dir.path()));
    flags.extend(key_dir(w.dir.path()));
    flags.extend(
        [
            "--service-account-issuer",
            "https://a",
            "--tls-cert-file",
            "unused.crt",
            "--tls-private-key-file",
            "unused.key",
            "--objects-file",
            "unused.yaml",
        ]
        .map(OsString::from),
    );
    let args: Vec<&OsStr> = flags.iter().map(OsString::as_os_str).collect();
    let out = w.warrant(&args);
    assert!(!out.status.success());
    assert!(
        stderr(&out)
            .contains("--key-dir and --service-account-signing-key-file are mutually exclusive"),
        "{}",
        stderr(&out)
    );
}

#[tokio::test]
async fn a_static_signing_key_replaced_on_disk_is_picked_up() {
    let mut w = Warrant::start(OBJECTS, &[]).await;
    let before = token(&w);
    let old = kid(&before);

    // Replace the key file the way a Secret volume or `mv` does.
    let new = SigningKey::generate(KeyType::P256).unwrap();
    let temp = w.path("sa.key.new");
    std::fs::write(&temp, new.to_pkcs8_pem().unwrap().as_str()).unwrap();
    std::fs::rename(&temp, w.path("sa.key")).unwrap();

    jwks_until(&w, "the replaced key file served, without a restart", |k| {
        k == [new.kid()]
    })
    .await;
    let after = token(&w);
    assert_eq!(kid(&after), new.kid());
    assert!(authenticated(&w, &after));
    // The operator dropped the old key, so its tokens stop working, and the log says so.
    assert!(!authenticated(&w, &before));
    let log = w.log();
    assert!(
        log.contains("a key that verified tokens is gone from the key files") && log.contains(&old),
        "{log}"
    );
    assert!(log.contains("the new signing key was not published before it started signing"));
}

/// Exported files are byte for byte what the server serves.
async fn assert_export_matches(w: &Warrant, key_flags: Vec<OsString>) {
    let out_dir = w.path("export");
    let mut args: Vec<OsString> = ["discovery", "export", "--dir"]
        .map(OsString::from)
        .to_vec();
    args.push(out_dir.clone().into());
    args.extend(["--service-account-issuer".into(), w.issuer().into()]);
    args.extend(key_flags);
    let args: Vec<&OsStr> = args.iter().map(OsString::as_os_str).collect();
    w.warrant_ok(&args);
    assert_documents_in(w, &out_dir).await;
}

#[tokio::test]
async fn discovery_export_writes_what_the_server_serves() {
    let w = Warrant::start(OBJECTS, &[]).await;
    assert_export_matches(&w, static_keys(w.dir.path())).await;

    let w = Warrant::start_with(OBJECTS, key_dir, &[]).await;
    let dir = w.path("keys");
    w.warrant_ok(&[
        OsStr::new("keys"),
        OsStr::new("rotate"),
        OsStr::new("--key-dir"),
        dir.as_os_str(),
    ]);
    jwks_until(&w, "the next key in the JWKS", |k| k.len() == 2).await;
    assert_export_matches(&w, key_dir(w.dir.path())).await;
}

/// `warrant keys revoke` beside a running server on a key directory: the leaked key's tokens
/// are refused by name (a signature remembered from before included), it leaves the JWKS, the
/// next key signs at once, and the revocation shows in `keys list`.
#[tokio::test]
async fn a_revoked_key_leaves_the_jwks_and_its_tokens_are_refused_by_name() {
    let w = Warrant::start_with(OBJECTS, key_dir, &["--key-algorithm", "ES256"]).await;
    let dir = w.path("keys");
    let keys_cmd = |verb: &str, extra: &[&str]| {
        let mut args: Vec<&OsStr> = vec![
            OsStr::new("keys"),
            OsStr::new(verb),
            OsStr::new("--key-dir"),
            dir.as_os_str(),
        ];
        args.extend(extra.iter().map(OsStr::new));
        w.warrant(&args)
    };
    assert!(keys_cmd("rotate", &[]).status.success());
    let [(a, _), (b, _)] = states(&list(&w)).try_into().unwrap();
    jwks_until(&w, "the next key in the JWKS", |k| k.len() == 2).await;
    let leaked = token(&w);
    assert_eq!(kid(&leaked), a);
    // Reviewed twice: the second answer comes from the signature cache.
    assert!(authenticated(&w, &leaked) && authenticated(&w, &leaked));

    let out = keys_cmd("revoke", &[&a]);
    assert!(out.status.success(), "{}", stderr(&out));
    let said = stderr(&out);
    assert!(said.contains("KEY REVOKED") && said.contains(&a), "{said}");
    assert!(said.contains("the next key signs from now on"), "{said}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains(&format!("REVOKED {a} at ")), "{stdout}");

    let published = jwks_until(&w, "the revoked key out of the JWKS", |k| !k.contains(&a)).await;
    assert_eq!(kids(&published), std::slice::from_ref(&b));
    assert_eq!(
        w.review(&leaked, &["vault"])["error"],
        format!("invalid signature: the key that signed this token ({a}) has been revoked")
    );
    // The next key signs at once, without waiting out publish-ahead.
    let fresh = token(&w);
    assert_eq!(kid(&fresh), b);
    assert!(authenticated(&w, &fresh));
    verify_offline(&w, &published, &fresh);
    let listed = list(&w);
    assert_eq!(states(&listed), [(b.clone(), "active".to_owned())]);
    assert_eq!(listed["revoked"][0]["kid"], a.as_str());

    // Revoking it again, or a kid that never was, says so and changes nothing.
    let again = keys_cmd("revoke", &[&a]);
    assert!(!again.status.success());
    assert!(
        stderr(&again).contains("was revoked already"),
        "{}",
        stderr(&again)
    );
    let unknown = keys_cmd("revoke", &["no-such-kid"]);
    assert!(
        stderr(&unknown).contains("there is no key no-such-kid"),
        "{}",
        stderr(&unknown)
    );
    assert_eq!(states(&list(&w)), [(b, "active".to_owned())]);
}
