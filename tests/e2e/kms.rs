//! Managed keys held in AWS KMS, on the real binary: `warrant serve --key-kms-uri` with a key
//! directory and the signer socket, against moto's KMS server on loopback (credentials from
//! the environment, as AWS's chain reads them). Each test runs its own moto.
//!
//! moto's `Sign` with `MessageType DIGEST` hashes again, and moto signs with a disabled key:
//! every token here is under 4096 bytes (sent `RAW`), and a disabled key is found by warrant's
//! own `DescribeKey` check (docs/kms.md, "Testing against moto").

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use warrant_testkit::servers::{Emulator, Proxy};
use warrant_testkit::tools;

use crate::held::*;
use crate::support::*;
use crate::tokens::OBJECTS;

/// AWS's chain as the server reads it: the environment's keys, nothing else.
pub(crate) fn env() -> Vec<(OsString, OsString)> {
    [
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
        ("AWS_CONFIG_FILE", "/nonexistent"),
        ("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent"),
        ("AWS_EC2_METADATA_DISABLED", "true"),
    ]
    .into_iter()
    .map(|(k, v)| (k.into(), v.into()))
    .collect()
}

/// A key directory `keys` with its private keys in KMS at `endpoint`, new keys of `algorithm`.
pub(crate) fn flags(keys: &Path, endpoint: &str, algorithm: &str) -> Vec<OsString> {
    held_flags(keys, &in_kms(endpoint), algorithm)
}

/// `--key-kms-uri` (the tests' store) and `--kms-endpoint ENDPOINT`.
fn in_kms(endpoint: &str) -> [OsString; 4] {
    [
        "--key-kms-uri".into(),
        "aws-kms://us-east-1/warrant-e2e".into(),
        "--kms-endpoint".into(),
        endpoint.into(),
    ]
}

pub(crate) fn moto_endpoint(moto: &Emulator) -> String {
    format!("http://127.0.0.1:{}", moto.port())
}

/// boto3 (which moto brings) on moto's KMS: runs `script` with `kms` the client; its stdout.
pub(crate) fn boto3(moto: &Emulator, script: &str) -> String {
    let program = format!(
        "import boto3\nkms = boto3.client('kms', endpoint_url='{}', region_name='us-east-1', aws_access_key_id='testing', aws_secret_access_key='testing')\n{script}",
        moto_endpoint(moto)
    );
    let out = tools::python(&["boto3"])
        .arg("-c")
        .arg(program)
        .output()
        .unwrap();
    assert!(out.status.success(), "boto3: {}", stderr(&out));
    String::from_utf8(out.stdout).unwrap()
}

/// The recorded ARN of every key in the key directory.
pub(crate) fn recorded_arns(keys: &Path) -> Vec<String> {
    let index = std::fs::read_to_string(keys.join(warrant_keys::INDEX_FILE)).unwrap();
    index
        .split('"')
        .filter(|s| s.starts_with("arn:aws:kms:us-east-1:"))
        .map(str::to_owned)
        .collect()
}

/// PyJWT verifies `token` with the JWK `kid` of `jwks` (what a Python relying party runs).
fn pyjwt_verifies(w: &Warrant, jwks: &Value, token: &str) {
    let program = "import sys, json, jwt\njwks = json.loads(sys.argv[1])\nheader = jwt.get_unverified_header(sys.argv[2])\nkey = next(k for k in jwks['keys'] if k['kid'] == header['kid'])\nclaims = jwt.decode(sys.argv[2], jwt.PyJWK(key).key, algorithms=[header['alg']], audience='vault', issuer=sys.argv[3])\nprint(claims['sub'])";
    let out = tools::python(&["jwt", "cryptography"])
        .args(["-c", program, &jwks.to_string(), token, &w.issuer()])
        .output()
        .unwrap();
    assert!(out.status.success(), "PyJWT: {}", stderr(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "system:serviceaccount:demo:app"
    );
}

#[tokio::test]
async fn keys_in_kms_sign_through_both_front_ends_and_verify_with_openssl_and_pyjwt() {
    let moto = Emulator::moto().await;
    let endpoint = moto_endpoint(&moto);
    let (mut w, run, socket) =
        start_with_signer(|dir| flags(&dir.join("keys"), &endpoint, "RS256"), &env()).await;
    let published = jwks(&w).await;
    assert_eq!(published.keys.len(), 1);
    let published_json: Value = serde_json::to_value(&published).unwrap();

    // TokenRequest through kubectl, signed in KMS: jsonwebtoken, PyJWT and openssl verify it
    // with the JWKS alone.
    let issued = token(&w);
    let kid = verify_offline(&w, &published, &issued);
    pyjwt_verifies(&w, &published_json, &issued);
    let der = openssl_rsa_key(run.path(), &published, &kid);
    openssl_verifies(run.path(), &der, &issued);
    assert_eq!(w.review(&issued, &["vault"])["authenticated"], true);

    // Sign on the socket, as kube-apiserver asks: the same key.
    let assembled = sign_on_socket(&socket, &issued).await;
    assert_eq!(verify_offline(&w, &published, &assembled), kid);
    openssl_verifies(run.path(), &der, &assembled);

    // The key is KMS's, tagged with the store and its kid; the directory records its ARN only.
    let arns = recorded_arns(&w.path("keys"));
    assert_eq!(arns.len(), 1, "{arns:?}");
    let described = boto3(
        &moto,
        &format!(
            "m = kms.describe_key(KeyId='{0}')['KeyMetadata']\nprint(m['KeyUsage'], m['KeySpec'], m['KeyState'])\nprint(sorted((t['TagKey'], t['TagValue']) for t in kms.list_resource_tags(KeyId='{0}')['Tags']))",
            arns[0]
        ),
    );
    assert!(
        described.starts_with("SIGN_VERIFY RSA_2048 Enabled"),
        "{described}"
    );
    assert!(
        described.contains(&format!(
            "[('warrant.dev/kid', '{kid}'), ('warrant.dev/store', 'warrant-e2e')]"
        )),
        "{described}"
    );
    no_private_key_under(&w.path("keys"));

    // Counted with the PKCS#11 token's metrics, as holder="aws-kms": the two tokens, and the
    // challenge the new key signed at generation, verified before its kid was recorded.
    let metrics = w.metrics_text().await;
    assert!(
        metrics
            .contains(r#"warrant_hsm_operations_total{holder="aws-kms",op="sign",result="ok"} 3"#),
        "{metrics}"
    );

    // A restart vouches for the recorded key in KMS and signs with it.
    w.restart(|dir| flags(&dir.join("keys"), &endpoint, "RS256"))
        .await;
    assert_eq!(verify_offline(&w, &jwks(&w).await, &token(&w)), kid);
}

// Multi-threaded: the proxy's tasks must forward while the test blocks on kubectl.
#[tokio::test(flavor = "multi_thread")]
async fn kms_unreachable_is_503_unavailable_and_unready_until_it_answers_again() {
    let moto = Emulator::moto().await;
    let mut proxy = Proxy::start(moto.port()).await;
    let endpoint = proxy.endpoint();
    let (w, _run, socket) =
        start_with_signer(|dir| flags(&dir.join("keys"), &endpoint, "ES256"), &env()).await;
    let (status, issued) = token_request(&w).await;
    assert_eq!(status, 201, "{issued}");
    let issued = issued["status"]["token"].as_str().unwrap().to_owned();
    let kid = verify_offline(&w, &jwks(&w).await, &issued);
    let arn = recorded_arns(&w.path("keys")).remove(0);

    proxy.down();
    // TokenRequest: 503 with a Kubernetes Status naming the key and KMS, never a credential;
    // Sign on the socket: UNAVAILABLE.
    let message = assert_unavailable(&w, &socket, &kid, &issued).await;
    assert!(message.contains("AWS KMS"), "{message}");
    assert!(!message.contains("testing"), "{message}");
    // Readiness names the key and its ARN; the JWKS is still served.
    let body = until_ready(&w, false).await;
    assert!(body.contains(&kid) && body.contains(&arn), "{body}");
    assert!(!jwks(&w).await.keys.is_empty());

    // Back: warrant recovers by itself.
    proxy.up().await;
    until_ready(&w, true).await;
    let published = jwks(&w).await;
    assert_eq!(verify_offline(&w, &published, &token(&w)), kid);
    let assembled = sign_on_socket(&socket, &issued).await;
    assert_eq!(verify_offline(&w, &published, &assembled), kid);
}

#[tokio::test]
async fn a_key_disabled_behind_warrants_back_is_named_and_revoke_replaces_it() {
    let moto = Emulator::moto().await;
    let endpoint = moto_endpoint(&moto);
    let w = Warrant::start_with_env(
        OBJECTS,
        |dir| flags(&dir.join("keys"), &endpoint, "ES256"),
        &[],
        &env(),
    )
    .await;
    let kid = verify_offline(&w, &jwks(&w).await, &token(&w));
    let arn = recorded_arns(&w.path("keys")).remove(0);
    let key_id = arn.rsplit_once('/').unwrap().1.to_owned();
    boto3(&moto, &format!("kms.disable_key(KeyId='{key_id}')"));

    // Found by warrant's own check of the keys that sign, without a request.
    let body = until_ready(&w, false).await;
    assert!(body.contains(&arn) && body.contains("Disabled"), "{body}");
    let (status, refused) = token_request(&w).await;
    assert_eq!(status, 503, "{refused}");
    let message = refused["message"].as_str().unwrap();
    assert!(
        message.contains(&kid) && message.contains(&arn),
        "{message}"
    );
    // `keys rotate` refuses to plan around it (the startup check of the keys that sign, which
    // `serve` runs too), naming the key and what to do.
    let rotated = keys_command(&w.path("keys"), &in_kms(&endpoint), &env(), "rotate", &[]);
    let said = stderr(&rotated);
    assert!(!rotated.status.success(), "{said}");
    assert!(
        said.contains(&format!(
            "--key-kms-uri: the active key {kid} cannot sign: "
        )) && said.contains(&arn),
        "{said}"
    );
    // Disabled is KMS's answer for now (the key may be enabled again), so the advice is KMS's.
    assert!(
        said.contains("Disabled: it signs nothing until it is enabled again")
            && said.contains("to replace it at once, `warrant keys revoke KID`"),
        "{said}"
    );
    assert_eq!(said.matches("cannot sign").count(), 1, "{said}");

    // Revoked: a new key, made in KMS, signs at once; the old one is scheduled for deletion.
    let out = keys_command(
        &w.path("keys"),
        &in_kms(&endpoint),
        &env(),
        "revoke",
        &[&kid],
    );
    assert!(out.status.success(), "keys revoke: {}", stderr(&out));
    until_ready(&w, true).await;
    let again = token(&w);
    let new_kid = verify_offline(&w, &jwks(&w).await, &again);
    assert_ne!(new_kid, kid);
    let state = boto3(
        &moto,
        &format!("print(kms.describe_key(KeyId='{arn}')['KeyMetadata']['KeyState'])"),
    );
    assert_eq!(state.trim(), "PendingDeletion");
}

/// `warrant keys list` with `args` after `--key-dir`: its output, for a refused configuration.
fn keys_list(dir: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(BIN)
        .args(["keys", "list", "--key-dir"])
        .arg(dir)
        .args(args)
        .envs(env())
        .output()
        .unwrap()
}

#[tokio::test]
async fn one_holder_at_a_time_and_no_credentials_in_the_uri() {
    let dir = tempfile::tempdir().unwrap();
    let both = keys_list(
        dir.path(),
        &[
            "--key-kms-uri",
            "aws-kms://us-east-1/warrant",
            "--key-pkcs11-uri",
            "pkcs11:token=warrant",
        ],
    );
    assert!(!both.status.success());
    let said = stderr(&both);
    assert!(
        said.contains("--key-kms-uri") && said.contains("cannot be used with"),
        "{said}"
    );

    let endpoint_alone = keys_list(dir.path(), &["--kms-endpoint", "http://127.0.0.1:1"]);
    assert!(!endpoint_alone.status.success());
    assert!(
        stderr(&endpoint_alone).contains("--key-kms-uri"),
        "{}",
        stderr(&endpoint_alone)
    );

    let secret = keys_list(
        dir.path(),
        &[
            "--key-kms-uri",
            "aws-kms://AKIAEXAMPLE:hunter2@us-east-1/warrant",
        ],
    );
    assert!(!secret.status.success());
    let said = stderr(&secret);
    assert!(said.contains("must not carry credentials"), "{said}");
    assert!(
        !said.contains("hunter2") && !said.contains("AKIAEXAMPLE"),
        "{said}"
    );

    let plain = keys_list(
        dir.path(),
        &[
            "--key-kms-uri",
            "aws-kms://us-east-1/warrant",
            "--kms-endpoint",
            "http://kms.internal",
        ],
    );
    assert!(!plain.status.success());
    assert!(
        stderr(&plain).contains("only sent to a loopback address"),
        "{}",
        stderr(&plain)
    );
}

/// The loopback rule holds for KMS's endpoint wherever the AWS SDK reads it: the environment's
/// `AWS_ENDPOINT_URL_KMS` and `AWS_ENDPOINT_URL`, the config file's profile `endpoint_url` and
/// its `services` section. Each refusal names the endpoint and where it came from.
#[tokio::test]
async fn an_endpoint_from_the_environment_or_the_config_file_obeys_the_loopback_rule() {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("profile");
    std::fs::write(&profile, "[default]\nendpoint_url = http://10.1.2.3:4566\n").unwrap();
    let services = dir.path().join("services");
    std::fs::write(
        &services,
        "[default]\nservices = local\n\n[services local]\nkms =\n  endpoint_url = http://10.4.5.6:4566\n",
    )
    .unwrap();
    let (profile, services) = (profile.to_str().unwrap(), services.to_str().unwrap());
    for (name, value, url, from) in [
        (
            "AWS_ENDPOINT_URL_KMS",
            "http://10.0.0.1:4566",
            "http://10.0.0.1:4566",
            "from AWS_ENDPOINT_URL_KMS",
        ),
        (
            "AWS_ENDPOINT_URL",
            "http://kms.internal",
            "http://kms.internal",
            "from AWS_ENDPOINT_URL)",
        ),
        (
            "AWS_CONFIG_FILE",
            profile,
            "http://10.1.2.3:4566",
            "from the AWS config file",
        ),
        (
            "AWS_CONFIG_FILE",
            services,
            "http://10.4.5.6:4566",
            "from the AWS config file",
        ),
    ] {
        let out = std::process::Command::new(BIN)
            .args(["keys", "list", "--key-dir"])
            .arg(dir.path())
            .args(["--key-kms-uri", "aws-kms://us-east-1/warrant"])
            .envs(env())
            .env(name, value)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{name}={value}");
        let said = stderr(&out);
        assert!(
            said.contains(url)
                && said.contains(from)
                && said.contains("only sent to a loopback address"),
            "{name}={value}: {said}"
        );
    }
}

/// A loopback endpoint from the environment is used (the service's own variable before the
/// global one), and the log says which endpoint and where it came from.
#[tokio::test(flavor = "multi_thread")]
async fn a_loopback_endpoint_from_the_environment_is_used_and_logged() {
    let moto = Emulator::moto().await;
    let endpoint = moto_endpoint(&moto);
    let mut environment = env();
    environment.push(("AWS_ENDPOINT_URL_KMS".into(), endpoint.clone().into()));
    environment.push(("AWS_ENDPOINT_URL".into(), "http://10.9.9.9:4566".into()));
    let holder: [OsString; 2] = [
        "--key-kms-uri".into(),
        "aws-kms://us-east-1/warrant-e2e".into(),
    ];
    let (mut w, _run, _socket) = start_with_signer(
        |dir| held_flags(&dir.join("keys"), &holder, "ES256"),
        &environment,
    )
    .await;
    let published = jwks(&w).await;
    verify_offline(&w, &published, &token(&w));
    assert_eq!(recorded_arns(&w.path("keys")).len(), 1);
    let line = w.log_line("managed keys held in AWS KMS").await;
    assert!(
        line.contains(&endpoint) && line.contains("AWS_ENDPOINT_URL_KMS"),
        "{line}"
    );
}

#[tokio::test]
async fn two_replicas_share_one_key_directory_and_the_kms_keys() {
    let moto = Emulator::moto().await;
    let endpoint = moto_endpoint(&moto);
    let run = tempfile::tempdir().unwrap();
    let keys = run.path().join("keys");
    let socket_b = run.path().join("b.sock");
    // A creates the key in KMS at its first start; B, on the same directory, finds it there.
    // B accepts A's issuer, and A (restarted once B's address is known) B's.
    let mut a =
        Warrant::start_with_env(OBJECTS, |_| flags(&keys, &endpoint, "ES256"), &[], &env()).await;
    let issuer_a = a.issuer();
    let b = Warrant::start_with_env(
        OBJECTS,
        |_| {
            let mut flags = flags(&keys, &endpoint, "ES256");
            flags.extend(["--service-account-issuer".into(), issuer_a.clone().into()]);
            flags
        },
        &[
            "--service-account-signing-endpoint",
            socket_b.to_str().unwrap(),
        ],
        &env(),
    )
    .await;
    let issuer_b = b.issuer();
    a.restart(|_| {
        let mut flags = flags(&keys, &endpoint, "ES256");
        flags.extend(["--service-account-issuer".into(), issuer_b.clone().into()]);
        flags
    })
    .await;

    // One key in KMS, published by both.
    let listed = boto3(
        &moto,
        "print(sum(1 for k in kms.list_keys()['Keys'] if any(t['TagKey'] == 'warrant.dev/store' for t in kms.list_resource_tags(KeyId=k['KeyId'])['Tags'])))",
    );
    assert_eq!(listed.trim(), "1");
    let (jwks_a, jwks_b) = (jwks(&a).await, jwks(&b).await);
    assert_eq!(jwks_a.keys.len(), 1);
    assert_eq!(
        serde_json::to_value(&jwks_a).unwrap(),
        serde_json::to_value(&jwks_b).unwrap()
    );

    // Both sign with it; each reviews the other's tokens as authenticated.
    let (from_a, from_b) = (token(&a), token(&b));
    let kid = verify_offline(&a, &jwks_b, &from_a);
    assert_eq!(verify_offline(&b, &jwks_a, &from_b), kid);
    let signed_b = sign_on_socket(&socket_b, &from_a).await;
    assert_eq!(verify_offline(&a, &jwks_b, &signed_b), kid);
    for (reviewer, issued) in [(&b, &from_a), (&a, &from_b), (&a, &signed_b)] {
        let review = reviewer.review(issued, &["vault"]);
        assert_eq!(review["authenticated"], true, "{review}");
    }
}

/// `warrant keys CMD` on the key directory `keys` with KMS at `endpoint`, then `extra`.
fn keys_cmd(keys: &Path, endpoint: &str, cmd: &str, extra: &[&str]) -> std::process::Output {
    keys_command(keys, &in_kms(endpoint), &env(), cmd, extra)
}

/// The state KMS (moto) records for key `arn`.
fn kms_state(moto: &Emulator, arn: &str) -> String {
    boto3(
        moto,
        &format!("print(kms.describe_key(KeyId='{arn}')['KeyMetadata']['KeyState'])"),
    )
    .trim()
    .to_owned()
}

/// Revocation stops trust: with KMS out of reach, `keys revoke` still takes the key out of the
/// store (so out of every JWKS, and every server refuses its tokens); the server that writes
/// the store disables it in KMS and schedules its deletion once KMS answers, counted as a
/// pending disposal until then.
#[tokio::test(flavor = "multi_thread")]
async fn a_key_is_revoked_while_kms_is_unreachable_and_disposed_of_once_it_answers() {
    let moto = Emulator::moto().await;
    let mut proxy = Proxy::start(moto.port()).await;
    let endpoint = proxy.endpoint();
    let mut w = Warrant::start_with_env(
        OBJECTS,
        |dir| flags(&dir.join("keys"), &endpoint, "ES256"),
        &[],
        &env(),
    )
    .await;
    let keys = w.path("keys");
    let issued = token(&w);
    let leaked = verify_offline(&w, &jwks(&w).await, &issued);
    let arn = recorded_arns(&keys).remove(0);

    // A next key is published (so revoking the signing key needs no new key).
    let rotated = keys_cmd(&keys, &endpoint, "rotate", &[]);
    assert!(rotated.status.success(), "{}", stderr(&rotated));
    until_published(&w, "the server never saw the rotation", |jwks| {
        jwks.keys.len() == 2
    })
    .await;

    // KMS goes out of reach; the key leaks. Revoke records it without KMS, and says who
    // disables it.
    proxy.down();
    let revoked = keys_cmd(&keys, &endpoint, "revoke", &[&leaked]);
    let said = stderr(&revoked);
    assert!(revoked.status.success(), "{said}");
    assert!(said.contains("KMS cannot be reached"), "{said}");
    assert!(
        said.contains("the warrant server that writes this store disables it in KMS and schedules its deletion once KMS answers"),
        "{said}"
    );

    // The running server takes the key out of the JWKS and refuses its tokens at once.
    until_published(&w, "the revoked key is still published", |jwks| {
        jwks.find(&leaked).is_none()
    })
    .await;
    assert_revoked(&w, &issued);
    // Its disposal waits for KMS, counted; KMS still has the key enabled.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while w.metric("warrant_keys_holder_disposals_pending").await != 1.0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no pending disposal: {}",
            w.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(kms_state(&moto, &arn), "Enabled");

    // KMS answers again: the server disables the key and schedules its deletion by itself.
    proxy.up().await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    while kms_state(&moto, &arn) != "PendingDeletion" {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the revoked key was never scheduled for deletion:\n{}",
            w.log()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while w.metric("warrant_keys_holder_disposals_pending").await != 0.0 {
        assert!(tokio::time::Instant::now() < deadline, "{}", w.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        w.metric(r#"warrant_keys_holder_disposals_total{result="destroyed"}"#)
            .await,
        1.0
    );
    let published = jwks(&w).await;
    let signing = verify_offline(&w, &published, &token(&w));
    assert_ne!(signing, leaked);
    // The store remembers the revocation (`keys list` reads it through KMS, so only now).
    let listed = keys_cmd(&keys, &endpoint, "list", &[]);
    assert!(listed.status.success(), "{}", stderr(&listed));
    let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
    assert!(listed.contains(&format!("REVOKED {leaked}")), "{listed}");
}
