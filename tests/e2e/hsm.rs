//! Managed keys held in a PKCS#11 token, on the real binary: `warrant serve --key-pkcs11-uri`
//! with a key directory and the signer socket, against SoftHSM2. Each test makes its own token
//! in a temporary directory; `SOFTHSM2_CONF` is set in the children's environment only.

use std::ffi::{OsStr, OsString};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::Value;
use warrant_signer::proto::FetchKeysRequest;
use warrant_testkit::softhsm::{PIN, SoftHsm2};

use crate::held::*;
use crate::support::*;
use crate::tokens::OBJECTS;

/// One test's SoftHSM2 (warrant-testkit's), with one token labelled `warrant` and its PIN
/// files: `pin` (right) and `wrong-pin`.
pub(crate) struct SoftHsm {
    softhsm: SoftHsm2,
    /// Where it lives; removed when the test ends.
    dir: tempfile::TempDir,
    /// The token's files.
    token: PathBuf,
}

impl SoftHsm {
    /// A SoftHSM2 with one token labelled `warrant`.
    pub(crate) fn new() -> SoftHsm {
        let dir = tempfile::tempdir().unwrap();
        let softhsm = SoftHsm2::create(dir.path());
        softhsm.pin_file("pin", PIN);
        softhsm.pin_file("wrong-pin", "9999");
        let token = softhsm.init_token("warrant");
        SoftHsm {
            softhsm,
            dir,
            token,
        }
    }

    pub(crate) fn env(&self) -> Vec<(OsString, OsString)> {
        self.softhsm
            .env()
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect()
    }

    /// `--key-pkcs11-uri` with the module and the PIN file.
    pub(crate) fn uri(&self) -> String {
        self.uri_with_pin("pin")
    }

    fn uri_with_pin(&self, file: &str) -> String {
        self.softhsm.uri("warrant", &self.dir.path().join(file))
    }

    /// Makes the token disappear (its files moved aside), as a device unplugged or a network
    /// HSM out of reach: every session on it fails until
    /// [`bring_token_back`](Self::bring_token_back).
    pub(crate) fn take_token_away(&self) {
        std::fs::rename(&self.token, self.aside()).unwrap();
    }

    /// Puts the token's files back where SoftHSM2 looks for them.
    pub(crate) fn bring_token_back(&self) {
        std::fs::rename(self.aside(), &self.token).unwrap();
    }

    /// Where the token's files wait while it is away.
    fn aside(&self) -> PathBuf {
        self.dir.path().join("aside")
    }

    /// A warrant command (not `serve`) with this HSM in its environment.
    fn warrant(&self, args: &[&OsStr]) -> Output {
        self.softhsm.command(BIN).args(args).output().unwrap()
    }

    pub(crate) fn warrant_ok(&self, args: &[&OsStr]) -> String {
        let out = self.warrant(args);
        assert!(out.status.success(), "warrant {args:?}: {}", stderr(&out));
        String::from_utf8(out.stdout).unwrap()
    }

    /// OpenSC's `pkcs11-tool --list-objects`, logged in: every object on the token.
    fn objects(&self) -> String {
        self.pkcs11_tool(&["--list-objects"])
    }

    /// `pkcs11-tool` on the token, logged in; its stdout.
    fn pkcs11_tool(&self, args: &[&str]) -> String {
        let out = self
            .softhsm
            .pkcs11_tool("warrant", true)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "pkcs11-tool {args:?}: {}",
            stderr(&out)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// OpenSC's `pkcs11-tool --list-objects --type privkey`, logged in: an independent reader.
    pub(crate) fn private_objects(&self) -> String {
        self.pkcs11_tool(&["--list-objects", "--type", "privkey"])
    }
}

/// The key directory `keys` in `dir`, its private keys in the token of `uri`, new keys ES256.
pub(crate) fn flags(dir: &Path, uri: &str) -> Vec<OsString> {
    flags_with(&dir.join("keys"), uri, "ES256")
}

/// A key directory `keys` with its private keys in the token of `uri`, new keys of `algorithm`.
fn flags_with(keys: &Path, uri: &str, algorithm: &str) -> Vec<OsString> {
    held_flags(keys, &in_token(uri), algorithm)
}

/// `--key-pkcs11-uri URI`.
fn in_token(uri: &str) -> [OsString; 2] {
    ["--key-pkcs11-uri".into(), uri.into()]
}

#[tokio::test]
async fn keys_in_a_token_sign_through_both_front_ends_and_never_leave_it() {
    let hsm = SoftHsm::new();
    let uri = hsm.uri();
    let (mut w, _run, socket) = start_with_signer(|dir| flags(dir, &uri), &hsm.env()).await;

    // TokenRequest through kubectl: signed in the token, verified with the JWKS alone.
    let published = jwks(&w).await;
    let issued = token(&w);
    let kid = verify_offline(&w, &published, &issued);
    assert_eq!(w.review(&issued, &["vault"])["authenticated"], true);

    // Sign on the socket, as kube-apiserver asks: the same key, and FetchKeys is the JWKS.
    let fetched = fetched_kids(&socket).await;
    let jwks_kids: Vec<String> = published
        .keys
        .iter()
        .map(|k| k.common.key_id.clone().unwrap())
        .collect();
    assert_eq!(fetched, jwks_kids);
    let assembled = sign_on_socket(&socket, &issued).await;
    assert_eq!(verify_offline(&w, &published, &assembled), kid);
    assert_eq!(
        jsonwebtoken::decode_header(&assembled).unwrap().alg,
        jsonwebtoken::Algorithm::ES256
    );

    // The private key is an object in the token, labelled by its kid, that cannot leave it;
    // the key directory holds public keys and locators only.
    let objects = hsm.private_objects();
    assert!(objects.contains(&format!("label:      {kid}")), "{objects}");
    assert!(
        objects.contains("sensitive") && objects.contains("never extractable"),
        "{objects}"
    );
    let access = objects.lines().find(|l| l.contains("Access:")).unwrap();
    assert!(
        !access.split([':', ',']).any(|a| a.trim() == "extractable"),
        "{access}"
    );
    no_private_key_under(&w.path("keys"));
    let index = std::fs::read_to_string(w.path("keys").join(warrant_keys::INDEX_FILE)).unwrap();
    assert!(
        index.contains("pkcs11:token=warrant;type=private;id=%"),
        "{index}"
    );
    assert!(
        !index.contains("pin") && !index.contains("module"),
        "{index}"
    );

    // The token's metrics: signatures counted by result.
    let metrics = w
        .http
        .get(w.url("/metrics"))
        .bearer_auth(w.admin_token())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics
            .contains(r#"warrant_hsm_operations_total{holder="pkcs11",op="sign",result="ok"} 2"#),
        "{metrics}"
    );

    // A restart finds the same key in the token and signs with it.
    let uri = hsm.uri();
    w.restart(|dir| flags(dir, &uri)).await;
    let again = token(&w);
    assert_eq!(verify_offline(&w, &jwks(&w).await, &again), kid);
}

#[tokio::test]
async fn a_token_that_disappears_while_serving_is_503_and_unready_until_it_returns() {
    let hsm = SoftHsm::new();
    let uri = hsm.uri();
    let (w, _run, socket) = start_with_signer(|dir| flags(dir, &uri), &hsm.env()).await;
    let (status, issued) = token_request(&w).await;
    assert_eq!(status, 201, "{issued}");
    let issued = issued["status"]["token"].as_str().unwrap().to_owned();
    let kid = verify_offline(&w, &jwks(&w).await, &issued);
    let mut signer = warrant_signer::client::connect(&socket).await.unwrap();

    hsm.take_token_away();
    // TokenRequest: 503 with a Kubernetes Status saying the key cannot sign now (it may later),
    // naming the token and never its PIN; Sign: UNAVAILABLE.
    let message = assert_unavailable(&w, &socket, &kid, &issued).await;
    assert!(message.contains("pkcs11:token=warrant"), "{message}");
    assert!(!message.contains(PIN), "{message}");
    let body = until_ready(&w, false).await;
    assert!(body.contains("pkcs11:token=warrant"), "{body}");
    // Verification never touches the HSM: the JWKS is still served.
    assert!(!jwks(&w).await.keys.is_empty());

    // Back, and warrant recovers by itself, without a restart.
    hsm.bring_token_back();
    until_ready(&w, true).await;
    let published = jwks(&w).await;
    verify_offline(&w, &published, &token(&w));
    // The connection made before the outage signs again.
    let assembled = sign_with(&mut signer, &issued).await;
    assert_eq!(verify_offline(&w, &published, &assembled), kid);
}

#[tokio::test]
async fn a_wrong_pin_is_one_clear_startup_error() {
    let hsm = SoftHsm::new();
    let keys = tempfile::tempdir().unwrap();
    let said = serve_refused(&hsm, keys.path(), &hsm.uri_with_pin("wrong-pin"));
    assert!(said.contains("--key-pkcs11-uri: pkcs11:token=warrant: the token refused the user PIN (CKR_PIN_INCORRECT)"), "{said}");
    assert_eq!(said.matches("refused the user PIN").count(), 1, "{said}");
    assert!(!said.contains("9999"), "{said}");

    // A PIN file every user of the machine can read is refused, before the token is tried.
    let pin = hsm.dir.path().join("pin");
    std::fs::set_permissions(&pin, PermissionsExt::from_mode(0o644)).unwrap();
    let said = serve_refused(&hsm, keys.path(), &hsm.uri());
    assert!(
        said.contains(&format!(
            "--key-pkcs11-uri: pkcs11:token=warrant: the PIN file {} can be read or written by every user (mode 644)",
            pin.display()
        )),
        "{said}"
    );
    assert!(!said.contains(PIN), "{said}");

    // A PIN in the URI is refused before anything is opened, without echoing it.
    let out = hsm.warrant(&[
        OsStr::new("keys"),
        OsStr::new("list"),
        OsStr::new("--key-dir"),
        keys.path().as_os_str(),
        OsStr::new("--key-pkcs11-uri"),
        OsStr::new("pkcs11:token=warrant;pin-value=4321"),
    ]);
    assert!(!out.status.success());
    let said = stderr(&out);
    assert!(
        said.contains("\"pin-value\" is refused") && !said.contains("4321"),
        "{said}"
    );
}

#[tokio::test]
async fn pem_stores_and_held_stores_are_not_mixed_and_import_and_revoke_work() {
    let hsm = SoftHsm::new();
    let uri = hsm.uri();
    let work = tempfile::tempdir().unwrap();
    let pem_dir = work.path().join("pem");
    let held_dir = work.path().join("held");
    let arg = |s: &str| OsString::from(s);
    let keys_cmd = |cmd: &str, dir: &Path, with_uri: bool, extra: &[&str]| -> Vec<OsString> {
        let mut v = vec![arg("keys"), arg(cmd), arg("--key-dir"), dir.into()];
        if with_uri {
            v.extend([arg("--key-pkcs11-uri"), arg(&uri)]);
        }
        v.extend(extra.iter().map(|s| arg(s)));
        v
    };
    let run = |args: Vec<OsString>| {
        let refs: Vec<&OsStr> = args.iter().map(OsString::as_os_str).collect();
        hsm.warrant(&refs)
    };
    let run_ok = |args: Vec<OsString>| {
        let refs: Vec<&OsStr> = args.iter().map(OsString::as_os_str).collect();
        hsm.warrant_ok(&refs)
    };

    // A PEM store read with a token, and a held store read without one: refused, saying why.
    run_ok(keys_cmd(
        "generate",
        &pem_dir,
        false,
        &["--key-algorithm", "ES256"],
    ));
    let out = run(keys_cmd("list", &pem_dir, true, &[]));
    assert!(!out.status.success());
    assert!(stderr(&out).contains("is a private key in the store, but warrant was started with keys in PKCS#11 token \"warrant\""), "{}", stderr(&out));
    run_ok(keys_cmd(
        "generate",
        &held_dir,
        true,
        &["--key-algorithm", "ES256"],
    ));
    no_private_key_under(&held_dir);
    let out = run(keys_cmd("list", &held_dir, false, &[]));
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("is held in pkcs11:token=warrant;type=private;id=%"),
        "{}",
        stderr(&out)
    );

    // Import: the PEM store's keys move into the token with the same kids.
    let before: Value =
        serde_json::from_str(&run_ok(keys_cmd("list", &pem_dir, false, &["-o", "json"]))).unwrap();
    run_ok(keys_cmd("import", &pem_dir, true, &[]));
    no_private_key_under(&pem_dir);
    let after: Value =
        serde_json::from_str(&run_ok(keys_cmd("list", &pem_dir, true, &["-o", "json"]))).unwrap();
    assert_eq!(before["keys"], after["keys"]);
    let imported_kid = after["keys"][0]["kid"].as_str().unwrap().to_owned();
    assert!(hsm.private_objects().contains(&imported_kid));

    // A static key (kubeadm's sa.key) into an empty store.
    let sa = warrant_token::SigningKey::generate(warrant_token::KeyType::Rsa2048).unwrap();
    let sa_file = work.path().join("sa.key");
    std::fs::write(&sa_file, sa.to_pkcs8_pem().unwrap().as_str()).unwrap();
    let sa_dir = work.path().join("sa");
    run_ok(keys_cmd(
        "import",
        &sa_dir,
        true,
        &["--from-pem", sa_file.to_str().unwrap()],
    ));
    let listed: Value =
        serde_json::from_str(&run_ok(keys_cmd("list", &sa_dir, true, &["-o", "json"]))).unwrap();
    assert_eq!(listed["keys"][0]["kid"], sa.kid());
    no_private_key_under(&sa_dir);

    // Revoke destroys the key's objects at once, the public one too: no store can list it again.
    run_ok(keys_cmd("revoke", &sa_dir, true, &[sa.kid()]));
    let objects = hsm.private_objects();
    assert!(!objects.contains(sa.kid()), "{objects}");
    assert!(objects.contains(&imported_kid), "{objects}");
    assert!(!hsm.objects().contains(sa.kid()), "{}", hsm.objects());
}

/// `warrant serve` with placeholder TLS and object files, the key directory `keys` and the
/// token at `uri`: for configurations refused while the keys load (before those files are read).
fn serve_refused(hsm: &SoftHsm, keys: &Path, uri: &str) -> String {
    let out = hsm
        .softhsm
        .command(BIN)
        .args([
            "serve",
            "--service-account-issuer",
            "https://warrant.example",
        ])
        .args([
            "--tls-cert-file",
            "unused.crt",
            "--tls-private-key-file",
            "unused.key",
        ])
        .args(["--objects-file", "unused.yaml", "--key-dir"])
        .arg(keys)
        .args(["--key-pkcs11-uri", uri])
        .output()
        .unwrap();
    assert!(!out.status.success(), "warrant serve started");
    stderr(&out)
}

/// The kid of the store's first key and its object's `CKA_ID`, as the key store recorded them:
/// the id percent-encoded as in a PKCS#11 URI (`%0a%1b…`) and in hex for `pkcs11-tool`.
fn recorded_key(keys: &Path) -> (String, String, String) {
    let index: Value = serde_json::from_str(
        &std::fs::read_to_string(keys.join(warrant_keys::INDEX_FILE)).unwrap(),
    )
    .unwrap();
    let held_in = index["keys"][0]["heldIn"].as_str().unwrap();
    let encoded = held_in.split_once(";id=").unwrap().1.to_owned();
    let hex = encoded.replace('%', "");
    let kid = index["keys"][0]["kid"].as_str().unwrap().to_owned();
    (kid, encoded, hex)
}

#[tokio::test]
async fn a_missing_or_unsuitable_key_object_is_one_clear_startup_error() {
    let hsm = SoftHsm::new();
    let work = tempfile::tempdir().unwrap();
    let keys = work.path().join("keys");
    let uri = hsm.uri();
    let keys_cmd = |cmd: &str| -> Vec<OsString> {
        vec![
            cmd.into(),
            "--key-dir".into(),
            keys.clone().into(),
            "--key-pkcs11-uri".into(),
            uri.as_str().into(),
            "--key-algorithm".into(),
            "ES256".into(),
        ]
    };
    let run = |cmd: &str| {
        let mut args: Vec<OsString> = vec!["keys".into()];
        args.extend(keys_cmd(cmd));
        let refs: Vec<&OsStr> = args.iter().map(OsString::as_os_str).collect();
        hsm.warrant(&refs)
    };
    let generated = run("generate");
    assert!(generated.status.success(), "{}", stderr(&generated));
    let (kid, id, hex) = recorded_key(&keys);

    // The active key's private object deleted behind warrant's back (an operator's mistake,
    // a token restored from an old backup): serve refuses to start, once, naming the object.
    let deleted = hsm
        .softhsm
        .pkcs11_tool("warrant", true)
        .args(["--delete-object", "--type", "privkey", "--id", &hex])
        .output()
        .unwrap();
    assert!(
        deleted.status.success(),
        "pkcs11-tool: {}",
        stderr(&deleted)
    );
    let said = serve_refused(&hsm, &keys, &hsm.uri());
    let expected = format!(
        "--key-pkcs11-uri: the active key {kid} cannot sign: pkcs11:token=warrant;id={id}: no private key object with this CKA_ID on the token. Restore the object from the token's backup, or replace the key at once with `warrant keys revoke {kid}`"
    );
    assert!(said.contains(&expected), "{said}");
    assert_eq!(said.matches("cannot sign").count(), 1, "{said}");
    assert!(!said.contains(PIN), "{said}");
    // `keys rotate` refuses too: the key it would keep signing until the next one cannot.
    let rotated = run("rotate");
    assert!(!rotated.status.success());
    assert!(stderr(&rotated).contains(&expected), "{}", stderr(&rotated));

    // Another kind of key under the recorded id: refused for what it is.
    let replaced = hsm
        .softhsm
        .pkcs11_tool("warrant", true)
        .args(["--keypairgen", "--key-type", "rsa:2048"])
        .args(["--id", &hex, "--label", "stranger", "--sensitive"])
        .output()
        .unwrap();
    assert!(
        replaced.status.success(),
        "pkcs11-tool: {}",
        stderr(&replaced)
    );
    let said = serve_refused(&hsm, &keys, &hsm.uri());
    assert!(
        said.contains(&format!(
            "--key-pkcs11-uri: the active key {kid} cannot sign: pkcs11:token=warrant;object=stranger;id={id}: the key cannot be used: it signs RS256, the key store expects ES256"
        )),
        "{said}"
    );
    assert_eq!(said.matches("cannot sign").count(), 1, "{said}");
}

#[tokio::test]
async fn rs256_keys_in_a_token_sign_through_both_front_ends_and_verify_with_openssl() {
    let hsm = SoftHsm::new();
    let uri = hsm.uri();
    let (w, run, socket) = start_with_signer(
        |dir| flags_with(&dir.join("keys"), &uri, "RS256"),
        &hsm.env(),
    )
    .await;
    let published = jwks(&w).await;
    assert_eq!(published.keys.len(), 1);

    // TokenRequest: RS256, signed in the token; jsonwebtoken verifies it with the JWKS, and
    // openssl with a public key built from the JWK's modulus and exponent.
    let issued = token(&w);
    let kid = verify_offline(&w, &published, &issued);
    assert_eq!(
        jsonwebtoken::decode_header(&issued).unwrap().alg,
        jsonwebtoken::Algorithm::RS256
    );
    let der = openssl_rsa_key(run.path(), &published, &kid);
    openssl_verifies(run.path(), &der, &issued);

    // Sign on the socket: the same key, verified both ways too.
    let assembled = sign_on_socket(&socket, &issued).await;
    assert_eq!(verify_offline(&w, &published, &assembled), kid);
    assert_eq!(
        jsonwebtoken::decode_header(&assembled).unwrap().alg,
        jsonwebtoken::Algorithm::RS256
    );
    openssl_verifies(run.path(), &der, &assembled);

    // FetchKeys hands kube-apiserver the same public key, byte for byte.
    let mut signer = warrant_signer::client::connect(&socket).await.unwrap();
    let fetched = signer
        .fetch_keys(FetchKeysRequest {})
        .await
        .unwrap()
        .into_inner()
        .keys;
    assert_eq!(fetched.len(), 1);
    assert_eq!(fetched[0].key_id, kid);
    assert_eq!(fetched[0].key, std::fs::read(&der).unwrap());

    // The object is an RSA private key in the token that cannot leave it.
    let objects = hsm.private_objects();
    assert!(objects.contains("Private Key Object; RSA"), "{objects}");
    assert!(objects.contains(&format!("label:      {kid}")), "{objects}");
    assert!(objects.contains("never extractable"), "{objects}");
    no_private_key_under(&w.path("keys"));
}

#[tokio::test]
async fn two_replicas_share_one_token_and_one_key_directory() {
    let hsm = SoftHsm::new();
    let uri = hsm.uri();
    let run = tempfile::tempdir().unwrap();
    let keys = run.path().join("keys");
    let (socket_a, socket_b) = (run.path().join("a.sock"), run.path().join("b.sock"));
    // A creates the key in the token at its first start; B, started on the same directory and
    // token, finds it there. Each replica has its own address, so its own issuer; B also
    // accepts A's, and A (restarted once B's address is known) B's.
    let mut a = Warrant::start_with_env(
        OBJECTS,
        |_| flags_with(&keys, &uri, "ES256"),
        &[
            "--service-account-signing-endpoint",
            socket_a.to_str().unwrap(),
        ],
        &hsm.env(),
    )
    .await;
    let issuer_a = a.issuer();
    let b = Warrant::start_with_env(
        OBJECTS,
        |_| {
            let mut flags = flags_with(&keys, &uri, "ES256");
            flags.extend(["--service-account-issuer".into(), issuer_a.clone().into()]);
            flags
        },
        &[
            "--service-account-signing-endpoint",
            socket_b.to_str().unwrap(),
        ],
        &hsm.env(),
    )
    .await;
    let issuer_b = b.issuer();
    a.restart(|_| {
        let mut flags = flags_with(&keys, &uri, "ES256");
        flags.extend(["--service-account-issuer".into(), issuer_b.clone().into()]);
        flags
    })
    .await;

    // One key in the token, published by both.
    let (jwks_a, jwks_b) = (jwks(&a).await, jwks(&b).await);
    assert_eq!(jwks_a.keys.len(), 1);
    assert_eq!(
        serde_json::to_value(&jwks_a).unwrap(),
        serde_json::to_value(&jwks_b).unwrap()
    );
    let objects = hsm.private_objects();
    assert_eq!(
        objects.matches("Private Key Object").count(),
        1,
        "{objects}"
    );

    // Both sign with it, through TokenRequest and through Sign.
    let (from_a, from_b) = (token(&a), token(&b));
    let kid = verify_offline(&a, &jwks_b, &from_a);
    assert_eq!(verify_offline(&b, &jwks_a, &from_b), kid);
    let signed_a = sign_on_socket(&socket_a, &from_b).await;
    let signed_b = sign_on_socket(&socket_b, &from_a).await;
    assert_eq!(verify_offline(&b, &jwks_a, &signed_a), kid);
    assert_eq!(verify_offline(&a, &jwks_b, &signed_b), kid);

    // Each reviews the other's tokens as authenticated.
    for (reviewer, issued) in [(&b, &from_a), (&a, &from_b), (&a, &signed_b)] {
        let review = reviewer.review(issued, &["vault"]);
        assert_eq!(review["authenticated"], true, "{review}");
        assert_eq!(
            review["user"]["username"], "system:serviceaccount:demo:app",
            "{review}"
        );
    }
}

/// What whoever can write a key directory (but holds no PIN) writes: an entry in `keys.json`
/// for `key`'s public key, "held" at `held_in`, signing since a month ago for ten-year tokens,
/// and its `PUBLIC KEY` file; written as warrant writes (a file renamed into place), so the
/// running server sees the change.
fn write_forged_entry(keys: &Path, key: &warrant_token::SigningKey, held_in: &str) {
    let index_path = keys.join(warrant_keys::INDEX_FILE);
    let mut index: Value =
        serde_json::from_str(&std::fs::read_to_string(&index_path).unwrap()).unwrap();
    let month_ago = warrant_clock::Clock::System.now() - jiff::SignedDuration::from_hours(30 * 24);
    index["keys"].as_array_mut().unwrap().insert(
        0,
        serde_json::json!({
            "kid": key.kid(),
            "algorithm": "ES256",
            "publishedAt": month_ago.to_string(),
            "activateAt": month_ago.to_string(),
            "maxTokenSeconds": 10 * 365 * 86_400,
            "heldIn": held_in,
        }),
    );
    index["generation"] = (index["generation"].as_u64().unwrap() + 1).into();
    std::fs::write(
        keys.join(warrant_keys::key_file_name(key.kid())),
        key.verifying_key().to_pem(),
    )
    .unwrap();
    let temp = keys.join(".forged");
    std::fs::write(&temp, serde_json::to_vec_pretty(&index).unwrap()).unwrap();
    std::fs::rename(&temp, &index_path).unwrap();
}

/// `issued`'s claims, expiring in ten years, signed by `key`: the token a store writer who
/// made warrant trust `key` would present.
fn forged_token(issued: &str, key: &warrant_token::SigningKey) -> String {
    let payload = issued.split('.').nth(1).unwrap();
    let mut claims: Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap();
    let exp = warrant_clock::Clock::System.now().as_second() + 10 * 365 * 86_400;
    claims["exp"] = exp.into();
    key.sign_payload(&serde_json::to_vec(&claims).unwrap())
        .unwrap()
}

/// Waits until the running server has read the key store since a store writer's change: it
/// either refused it (`/readyz?verbose` says why, naming `kid`) or published `kid`. Returns the
/// readiness report.
async fn store_read_since_forgery(w: &Warrant, kid: &str) -> String {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let verbose = w.get_as_admin("/readyz?verbose").await;
        let published = jwks(w).await.find(kid).is_some();
        if published || verbose.contains(kid) {
            assert!(!published, "the forged key is published: {verbose}");
            return verbose;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the server never read the key store: {verbose}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_key_store_writer_without_the_pin_cannot_add_a_verifying_key() {
    let hsm = SoftHsm::new();
    let uri = hsm.uri();
    let mut w = Warrant::start_with_env(OBJECTS, |dir| flags(dir, &uri), &[], &hsm.env()).await;
    let issued = token(&w);
    let kid = verify_offline(&w, &jwks(&w).await, &issued);

    // The attack of issue 31: a "retired" entry with any heldIn locator and the writer's own
    // public key, appended to the running server's key directory.
    let attacker = warrant_token::SigningKey::generate(warrant_token::KeyType::P256).unwrap();
    let forged = forged_token(&issued, &attacker);
    write_forged_entry(
        &w.path("keys"),
        &attacker,
        "pkcs11:token=warrant;type=private;id=%ee%ee%ee%ee%ee%ee%ee%ee%ee%ee%ee%ee%ee%ee%ee%ee",
    );
    let verbose = store_read_since_forgery(&w, attacker.kid()).await;
    assert!(
        verbose.contains(&format!(
            "key {} is not vouched for by PKCS#11 token \"warrant\"",
            attacker.kid()
        )),
        "{verbose}"
    );
    // Nothing the writer forged is trusted: not published, its token refused; warrant's own key
    // still signs and verifies.
    let review = w.review(&forged, &["vault"]);
    assert_eq!(review["authenticated"], Value::Null, "{review}");
    let published = jwks(&w).await;
    assert!(published.find(attacker.kid()).is_none());
    assert_eq!(verify_offline(&w, &published, &token(&w)), kid);
    assert_eq!(w.review(&issued, &["vault"])["authenticated"], true);

    // A restart refuses the store, naming the entry, never key material.
    let said = serve_refused(&hsm, &w.path("keys"), &hsm.uri());
    assert!(
        said.contains(&format!("key {} is not vouched for by PKCS#11 token \"warrant\": the store says it is held in pkcs11:token=warrant;type=private;id=%ee", attacker.kid())),
        "{said}"
    );
    assert!(said.contains("The store is refused"), "{said}");
    assert!(!said.contains("BEGIN"), "{said}");
    drop(w.log());
}

#[tokio::test]
async fn a_key_store_writer_cannot_make_warrant_destroy_another_applications_key() {
    let hsm = SoftHsm::new();
    let uri = hsm.uri();
    let w = Warrant::start_with_env(OBJECTS, |dir| flags(dir, &uri), &[], &hsm.env()).await;
    // Another application's key on the same token, made with the PIN.
    hsm.pkcs11_tool(&[
        "--keypairgen",
        "--key-type",
        "EC:prime256v1",
        "--id",
        "99",
        "--label",
        "other-app",
    ]);
    assert!(hsm.private_objects().contains("other-app"));

    // A retired entry naming its CKA_ID: before, warrant destroyed the object as a retired
    // key's; now the store is refused, and nothing is destroyed.
    let attacker = warrant_token::SigningKey::generate(warrant_token::KeyType::P256).unwrap();
    write_forged_entry(
        &w.path("keys"),
        &attacker,
        "pkcs11:token=warrant;type=private;id=%99",
    );
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        assert!(
            hsm.private_objects().contains("other-app"),
            "warrant destroyed another application's key"
        );
        if w.get_as_admin("/readyz?verbose")
            .await
            .contains(attacker.kid())
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the server never read the key store"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    // The other application still signs with it.
    let digest = hsm.dir.path().join("digest");
    std::fs::write(&digest, [7u8; 32]).unwrap();
    hsm.pkcs11_tool(&[
        "--sign",
        "--mechanism",
        "ECDSA",
        "--id",
        "99",
        "--input-file",
        digest.to_str().unwrap(),
        "--output-file",
        hsm.dir.path().join("signature").to_str().unwrap(),
    ]);
}

/// Revoking the signing key while the token is away and no successor is published (six days of
/// seven): the revocation is recorded at once and the server fails closed, TokenRequest
/// answering 503 with a Status that says why, until the token is back and the server makes a
/// successor, which signs at once; the revoked key is then destroyed.
#[tokio::test]
async fn the_signing_key_revoked_with_the_token_away_fails_closed_until_it_is_back() {
    let hsm = SoftHsm::new();
    let uri = hsm.uri();
    let w = Warrant::start_with_env(OBJECTS, |dir| flags(dir, &uri), &[], &hsm.env()).await;
    let keys = w.path("keys");
    let issued = token(&w);
    let leaked = verify_offline(&w, &jwks(&w).await, &issued);

    hsm.take_token_away();
    let revoked = keys_command(&keys, &in_token(&uri), &hsm.env(), "revoke", &[&leaked]);
    let said = stderr(&revoked);
    assert!(revoked.status.success(), "{said}");
    assert!(said.contains("NO KEY SIGNS from now on"), "{said}");
    assert!(!said.contains("needs no"), "{said}");
    let index = std::fs::read_to_string(keys.join(warrant_keys::INDEX_FILE)).unwrap();
    assert!(index.contains("\"signingStoppedAt\""), "{index}");

    // The key is out at once, its tokens refused; nothing signs, and TokenRequest says why.
    until_published(&w, "the revoked key is still published", |jwks| {
        jwks.find(&leaked).is_none()
    })
    .await;
    assert_revoked(&w, &issued);
    let (status, refused) = token_request(&w).await;
    assert_eq!(status, 503, "{refused}");
    assert_eq!(refused["kind"], "Status", "{refused}");
    assert_eq!(refused["reason"], "ServiceUnavailable", "{refused}");
    let message = refused["message"].as_str().unwrap();
    assert!(
        message
            .starts_with("failed to generate token: no key signs: the signing key was revoked at ")
            && message.contains(
                "no key could be made to take over yet (its key holder cannot be reached)"
            ),
        "{message}"
    );

    // The token is back: the server makes a successor, which signs at once.
    hsm.bring_token_back();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    let fresh = loop {
        let (status, answer) = token_request(&w).await;
        if status == 201 {
            break answer["status"]["token"].as_str().unwrap().to_owned();
        }
        assert_eq!(status, 503, "{answer}");
        assert!(
            tokio::time::Instant::now() < deadline,
            "no successor: {answer}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    };
    let successor = verify_offline(&w, &jwks(&w).await, &fresh);
    assert_ne!(successor, leaked);
    assert_revoked(&w, &issued);
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    while hsm.objects().contains(&leaked) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the revoked key was never destroyed: {}",
            hsm.objects()
        );
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
}

#[tokio::test]
async fn a_key_is_revoked_while_the_token_is_unreachable_and_destroyed_once_it_is_back() {
    let hsm = SoftHsm::new();
    let uri = hsm.uri();
    let mut w = Warrant::start_with_env(OBJECTS, |dir| flags(dir, &uri), &[], &hsm.env()).await;
    let keys = w.path("keys");
    let issued = token(&w);
    let leaked = verify_offline(&w, &jwks(&w).await, &issued);
    let keys_cmd =
        |cmd: &str, extra: &[&str]| keys_command(&keys, &in_token(&uri), &hsm.env(), cmd, extra);

    // A next key is published (so revoking the signing key needs no new key).
    let rotated = keys_cmd("rotate", &[]);
    assert!(rotated.status.success(), "{}", stderr(&rotated));
    until_published(&w, "the server never saw the rotation", |jwks| {
        jwks.keys.len() == 2
    })
    .await;

    // The token goes away; the key leaks. Revoke records it without the token.
    hsm.take_token_away();
    let revoked = keys_cmd("revoke", &[&leaked]);
    let said = stderr(&revoked);
    assert!(revoked.status.success(), "{said}");
    assert!(said.contains("the token cannot be reached"), "{said}");
    assert!(
        said.contains("the warrant server that writes this store destroys it once it reaches the token, retrying until it is gone"),
        "{said}"
    );
    let index = std::fs::read_to_string(keys.join(warrant_keys::INDEX_FILE)).unwrap();
    assert!(index.contains(&format!("\"kid\": \"{leaked}\"")), "{index}");

    // The running server takes the key out of the JWKS and refuses its tokens at once.
    until_published(&w, "the revoked key is still published", |jwks| {
        jwks.find(&leaked).is_none()
    })
    .await;
    assert_revoked(&w, &issued);

    // The token is back: the server destroys the key's objects by itself, with no restart.
    hsm.bring_token_back();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(120);
    while hsm.objects().contains(&leaked) {
        if tokio::time::Instant::now() >= deadline {
            panic!(
                "the revoked key was never destroyed: {}\n{}",
                hsm.objects(),
                w.log()
            );
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    assert_eq!(
        w.metric(r#"warrant_keys_holder_disposals_total{result="destroyed"}"#)
            .await,
        1.0
    );
    assert_eq!(w.metric("warrant_keys_holder_disposals_pending").await, 0.0);
}

/// `--jwks-x5c` with the keys in a token: each key's certificate is signed in the token, after
/// the key set is published, and the JWKS is published again with it; openssl reads it as the
/// JWK's key.
#[tokio::test]
async fn the_jwks_carries_the_certificate_of_a_key_in_the_token() {
    let hsm = SoftHsm::new();
    let uri = hsm.uri();
    let w =
        Warrant::start_with_env(OBJECTS, |dir| flags(dir, &uri), &["--jwks-x5c"], &hsm.env()).await;
    let mut jwks = Value::Null;
    for _ in 0..200 {
        jwks = serde_json::from_str(
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
        if jwks["keys"][0].get("x5c").is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    crate::oidc::assert_x5c_holds_the_key(&jwks["keys"][0]);
}
