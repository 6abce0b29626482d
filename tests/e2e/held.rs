//! What the end-to-end tests of keys held outside the key store share: a PKCS#11 token
//! (hsm.rs) and AWS KMS (kms.rs). The flags of a key directory whose keys a holder holds, a
//! server with the signer socket, `warrant keys` commands on its store, tokens and signatures
//! checked with the JWKS alone, and what a client sees while the holder cannot be reached.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{DecodingKey, Validation, decode, jwk::JwkSet};
use serde_json::Value;
use warrant_signer::proto::SignJwtRequest;

use crate::support::*;
use crate::tokens::OBJECTS;

/// The flags of a key directory `keys` whose private keys `holder` (its flags) holds, new keys
/// of `algorithm`.
pub(crate) fn held_flags(keys: &Path, holder: &[OsString], algorithm: &str) -> Vec<OsString> {
    let mut flags: Vec<OsString> = vec!["--key-dir".into(), keys.into()];
    flags.extend(holder.iter().cloned());
    flags.extend(["--key-algorithm".into(), algorithm.into()]);
    flags
}

/// `warrant keys CMD --key-dir KEYS HOLDER... EXTRA...`, with `env` (the holder's).
pub(crate) fn keys_command(
    keys: &Path,
    holder: &[OsString],
    env: &[(OsString, OsString)],
    cmd: &str,
    extra: &[&str],
) -> Output {
    Command::new(BIN)
        .args(["keys", cmd, "--key-dir"])
        .arg(keys)
        .args(holder)
        .args(extra)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .unwrap()
}

/// A server with the objects of [`OBJECTS`], the key flags `flags` makes from its directory,
/// `env` (the holder's) and the signer socket: the server, the directory holding the socket,
/// and the socket.
pub(crate) async fn start_with_signer(
    flags: impl FnOnce(&Path) -> Vec<OsString>,
    env: &[(OsString, OsString)],
) -> (Warrant, tempfile::TempDir, PathBuf) {
    let run = tempfile::tempdir().unwrap();
    let socket = run.path().join("signer.sock");
    let w = Warrant::start_with_env(
        OBJECTS,
        flags,
        &[
            "--service-account-signing-endpoint",
            socket.to_str().unwrap(),
        ],
        env,
    )
    .await;
    (w, run, socket)
}

/// Waits until `/readyz/keys` answers ready (200) or not (503); its body.
pub(crate) async fn until_ready(w: &Warrant, ready: bool) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let answer = w
            .http
            .get(w.url("/readyz/keys"))
            .bearer_auth(w.admin_token())
            .send()
            .await
            .unwrap();
        let ok = answer.status() == 200;
        let body = answer.text().await.unwrap();
        if ok == ready {
            return body;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "/readyz/keys: {body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until the JWKS `w` publishes satisfies `check` (the server reads its key store on its
/// own schedule); `what` names the wait in the failure.
pub(crate) async fn until_published(w: &Warrant, what: &str, check: impl Fn(&JwkSet) -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !check(&jwks(w).await) {
        assert!(tokio::time::Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What clients see while the key `kid` cannot sign for now: TokenRequest answers 503 with a
/// Kubernetes Status naming the key (its message, returned), and Sign on `socket` (for the
/// claims of `issued`) answers UNAVAILABLE, which kube-apiserver retries.
pub(crate) async fn assert_unavailable(
    w: &Warrant,
    socket: &Path,
    kid: &str,
    issued: &str,
) -> String {
    let (status, refused) = token_request(w).await;
    assert_eq!(status, 503, "{refused}");
    assert_eq!(refused["kind"], "Status", "{refused}");
    assert_eq!(refused["status"], "Failure", "{refused}");
    assert_eq!(refused["code"], 503, "{refused}");
    assert_eq!(refused["reason"], "ServiceUnavailable", "{refused}");
    let message = refused["message"].as_str().unwrap().to_owned();
    assert!(
        message.starts_with(&format!(
            "failed to generate token: the signing key {kid} is unavailable: "
        )),
        "{message}"
    );
    let mut signer = warrant_signer::client::connect(socket).await.unwrap();
    let claims = issued.split('.').nth(1).unwrap().to_owned();
    let unavailable = signer.sign(SignJwtRequest { claims }).await.unwrap_err();
    assert_eq!(
        unavailable.code(),
        warrant_signer::Code::Unavailable,
        "{unavailable:?}"
    );
    assert!(
        unavailable.message().contains(kid) && unavailable.message().contains("unavailable"),
        "{unavailable:?}"
    );
    message
}

/// TokenReview of `issued` fails because its key has been revoked.
pub(crate) fn assert_revoked(w: &Warrant, issued: &str) {
    let review = w.review(issued, &["vault"]);
    assert!(
        review["error"]
            .as_str()
            .unwrap()
            .contains("has been revoked"),
        "{review}"
    );
}

/// Verifies `token` (audience `vault`, `w`'s issuer) with the key of its kid in `jwks`
/// alone, as a relying party does; its kid.
pub(crate) fn verify_offline(w: &Warrant, jwks: &JwkSet, token: &str) -> String {
    let header = jsonwebtoken::decode_header(token).unwrap();
    let kid = header.kid.clone().unwrap();
    let jwk = jwks.find(&kid).expect("the token's kid is published");
    let mut validation = Validation::new(header.alg);
    validation.set_audience(&["vault"]);
    validation.set_issuer(&[w.issuer()]);
    decode::<Value>(token, &DecodingKey::from_jwk(jwk).unwrap(), &validation).unwrap();
    kid
}

/// The JWKS `w` publishes.
pub(crate) async fn jwks(w: &Warrant) -> JwkSet {
    w.http
        .get(w.url("/openid/v1/jwks"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// A token for `demo/app` and audience `vault`, through kubectl.
pub(crate) fn token(w: &Warrant) -> String {
    w.token(&["--audience", "vault"])
}

/// Every file under `dir`, read as bytes: none may hold a private key.
pub(crate) fn no_private_key_under(dir: &Path) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            !text.contains("PRIVATE KEY"),
            "{} holds a private key",
            path.display()
        );
    }
}

/// `TokenRequest` for `demo/app` straight over HTTPS as the local setup's admin: the answer's
/// status and body, whatever they are (kubectl would reduce a failure to a sentence).
pub(crate) async fn token_request(w: &Warrant) -> (reqwest::StatusCode, Value) {
    let answer = w
        .http
        .post(w.url("/api/v1/namespaces/demo/serviceaccounts/app/token"))
        .bearer_auth(w.admin_token())
        .json(&serde_json::json!({
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"audiences": ["vault"]},
        }))
        .send()
        .await
        .unwrap();
    (answer.status(), answer.json().await.unwrap())
}

/// The RSA key `kid` of `jwks` as DER SubjectPublicKeyInfo, built by `openssl asn1parse` from
/// the JWK's `n` and `e` alone: what a relying party with nothing but the JWKS has.
pub(crate) fn openssl_rsa_key(dir: &Path, jwks: &JwkSet, kid: &str) -> PathBuf {
    let jwk = jwks.find(kid).expect("the kid is published");
    let jsonwebtoken::jwk::AlgorithmParameters::RSA(rsa) = &jwk.algorithm else {
        panic!("{kid} is not an RSA key: {jwk:?}")
    };
    let hex = |b64: &str| -> String {
        URL_SAFE_NO_PAD
            .decode(b64)
            .unwrap()
            .iter()
            .map(|b| format!("{b:02X}"))
            .collect()
    };
    let conf = dir.join(format!("{kid}.asn1"));
    std::fs::write(
        &conf,
        format!(
            "asn1=SEQUENCE:spki\n[spki]\nalgorithm=SEQUENCE:alg\nkey=BITWRAP,SEQUENCE:rsa\n[alg]\nalgorithm=OID:rsaEncryption\nparameter=NULL\n[rsa]\nn=INTEGER:0x{}\ne=INTEGER:0x{}\n",
            hex(&rsa.n),
            hex(&rsa.e)
        ),
    )
    .unwrap();
    let der = dir.join(format!("{kid}.der"));
    let out = Command::new("openssl")
        .args(["asn1parse", "-noout", "-genconf"])
        .arg(&conf)
        .arg("-out")
        .arg(&der)
        .output()
        .unwrap();
    assert!(out.status.success(), "openssl asn1parse: {}", stderr(&out));
    der
}

/// `openssl dgst -sha256 -verify` of an RS256 compact JWS against the DER public key `der`.
pub(crate) fn openssl_verifies(dir: &Path, der: &Path, token: &str) {
    let (input, signature) = token.rsplit_once('.').unwrap();
    let n = warrant_token::new_jti();
    let (message, sig) = (dir.join(format!("{n}.msg")), dir.join(format!("{n}.sig")));
    std::fs::write(&message, input).unwrap();
    std::fs::write(&sig, URL_SAFE_NO_PAD.decode(signature).unwrap()).unwrap();
    let out = Command::new("openssl")
        .args(["dgst", "-sha256", "-keyform", "DER", "-verify"])
        .arg(der)
        .arg("-signature")
        .arg(&sig)
        .arg(&message)
        .output()
        .unwrap();
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("Verified OK"),
        "openssl dgst: {} {}",
        String::from_utf8_lossy(&out.stdout),
        stderr(&out)
    );
}

/// Sign on `socket` for the claims of `token`: the assembled token.
pub(crate) async fn sign_on_socket(socket: &Path, token: &str) -> String {
    let mut signer = warrant_signer::client::connect(socket).await.unwrap();
    sign_with(&mut signer, token).await
}

/// Sign through the connection `signer` for the claims of `token`: the assembled token.
pub(crate) async fn sign_with(
    signer: &mut warrant_signer::client::SignerClient,
    token: &str,
) -> String {
    let claims = token.split('.').nth(1).unwrap().to_owned();
    let signed = signer
        .sign(SignJwtRequest {
            claims: claims.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    format!("{}.{claims}.{}", signed.header, signed.signature)
}
