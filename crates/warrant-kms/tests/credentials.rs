//! Credentials that expire and are refreshed, on AWS's own chain as warrant runs it in EKS (IAM
//! roles for service accounts): a web identity token file, exchanged at STS
//! (`AssumeRoleWithWebIdentity`, moto's) for credentials that expire in an hour. The SDK judges
//! their expiry on warrant's clock (`KmsConfig::clock`), so the test sets the clock instead of
//! waiting an hour.
//!
//! The chain reads its configuration from the process environment, which a running test must
//! not change: the test re-runs itself, filtered to itself, in a child process given that
//! environment (the parent runs moto and watches).
//!
//! Whether a refresh is needed is seen through the token file: with the file gone, credentials
//! still valid keep signing, and expired ones cannot be refreshed (as in a pod whose projected
//! token went away), so signing stops until the file is back.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use warrant_clock::Clock;
use warrant_keys::KeyHolder as _;
use warrant_keys::KeyPurpose;
use warrant_kms::{Health, Kms, KmsConfig, KmsHolder, KmsMetrics, KmsUri, RecoveryPolicy};
use warrant_testkit::servers::Emulator;
use warrant_testkit::signatures::verify_signature;
use warrant_token::{KeyType, SigningKey};

const CHILD: &str = "WARRANT_KMS_CREDENTIALS_TEST_DIR";
const HOUR: i64 = 3600;

#[test]
fn signing_goes_on_when_credentials_expire_and_are_refreshed() {
    let Some(dir) = std::env::var_os(CHILD).map(PathBuf::from) else {
        return parent();
    };
    let endpoint = std::env::var("WARRANT_KMS_TEST_ENDPOINT").unwrap();
    let token_file = dir.join("token");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let clock = Clock::manual(Clock::System.now());
    let kms = runtime.block_on(async {
        let uri: KmsUri = "aws-kms://us-east-1/credentials".parse().unwrap();
        let config = KmsConfig::new(uri)
            .endpoint(&endpoint)
            .clock(clock.clone())
            .deadline(Duration::from_secs(3));
        Kms::open(config, KmsMetrics::default()).await.unwrap()
    });
    let _recovery = runtime.spawn({
        let kms = kms.clone();
        async move {
            kms.run_recovery(RecoveryPolicy {
                initial_backoff: Duration::from_millis(50),
                max_backoff: Duration::from_millis(200),
                probe_interval: Duration::from_secs(3600),
            })
            .await;
        }
    });
    let holder = KmsHolder::new(kms.clone());
    // The first call exchanges the token for credentials that expire in an hour.
    let key = runtime
        .block_on(holder.generate(KeyType::P256, KeyPurpose::Tokens))
        .unwrap();
    let signs = |key: &SigningKey| runtime.block_on(sign_and_verify(key));
    signs(&key).expect("signs with the first credentials");

    // Half an hour on, without the token file: the cached credentials sign, nothing refreshes.
    let token = std::fs::read(&token_file).unwrap();
    std::fs::remove_file(&token_file).unwrap();
    clock.advance(HOUR / 2);
    signs(&key).expect("the cached credentials sign within their hour");

    // Two hours on they have expired: with the token file back (the kubelet rotated it), the
    // next call refreshes them at STS and signing goes on without a failure.
    std::fs::write(&token_file, &token).unwrap();
    clock.advance(2 * HOUR);
    signs(&key).expect("signs with refreshed credentials");
    // Expired credentials are never used: once they have expired, a refresh that fails (the
    // token file gone) makes KMS unavailable, with a credential error that names no secret. So
    // the signature above was made with refreshed credentials. (moto's STS dates their expiry
    // by its own clock, an hour from the real now, so refreshed credentials look expired at
    // once to the test's clock, hours ahead: each call refreshes them.)
    std::fs::remove_file(&token_file).unwrap();
    clock.advance(HOUR);
    let failed = signs(&key).expect_err("expired credentials that cannot be refreshed");
    assert!(failed.contains("no usable AWS credentials"), "{failed}");
    assert!(!failed.contains("eyJ"), "{failed}");
    assert!(matches!(kms.health(), Health::Unavailable { .. }));
    // The token is back: warrant recovers by itself and signs again.
    std::fs::write(&token_file, &token).unwrap();
    runtime.block_on(async {
        let mut health = kms.subscribe_health();
        tokio::time::timeout(Duration::from_secs(30), health.wait_for(Health::is_healthy))
            .await
            .expect("KMS is healthy again")
            .unwrap();
    });
    signs(&key).expect("signs again once the token file is back");
}

/// Signs a token-like input with `key` in KMS and verifies it with the public key; the error's
/// message if KMS did not sign.
async fn sign_and_verify(key: &SigningKey) -> Result<(), String> {
    let detached = key
        .sign_detached_async("eyJzdWIiOiJ4In0")
        .await
        .map_err(|e| e.to_string())?;
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let input = format!("{}.eyJzdWIiOiJ4In0", detached.header);
    verify_signature(
        key.verifying_key(),
        input.as_bytes(),
        &b64.decode(&detached.signature).unwrap(),
    );
    Ok(())
}

/// Starts moto, writes the web identity token file and runs the test in a child process whose
/// environment is AWS's chain as EKS sets it up, with STS at moto.
fn parent() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let moto = runtime.block_on(Emulator::moto());
    let endpoint = format!("http://127.0.0.1:{}", moto.port());
    let dir = tempfile::tempdir().unwrap();
    // A service account token as the kubelet projects it (STS at moto does not verify it).
    std::fs::write(
        dir.path().join("token"),
        "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6a3ViZS1zeXN0ZW06d2FycmFudCJ9.c2ln",
    )
    .unwrap();
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args([
            "signing_goes_on_when_credentials_expire_and_are_refreshed",
            "--exact",
            "--nocapture",
        ])
        .env(CHILD, dir.path())
        .env("WARRANT_KMS_TEST_ENDPOINT", &endpoint)
        .env("AWS_ENDPOINT_URL_STS", &endpoint)
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/warrant")
        .env("AWS_ROLE_SESSION_NAME", "warrant")
        .env("AWS_WEB_IDENTITY_TOKEN_FILE", dir.path().join("token"))
        .env("AWS_CONFIG_FILE", "/nonexistent")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
        .env("AWS_EC2_METADATA_DISABLED", "true");
    for name in [
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    ] {
        command.env_remove(name);
    }
    let output = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "the child failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    drop(moto);
}
