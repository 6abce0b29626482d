//! Losing the token while serving: signing fails fast as unavailable, health says why, and the
//! recovery task brings it back without a restart. Every wait is on tokio's paused clock.

use std::time::Duration;

use warrant_hsm::{HsmError, HsmMetrics, Pkcs11Key, RecoveryPolicy};
use warrant_token::KeyType;

use crate::support::PIN;
use warrant_testkit::signatures::verify_signature;

const POLICY: RecoveryPolicy = RecoveryPolicy {
    initial_backoff: Duration::from_secs(1),
    max_backoff: Duration::from_secs(8),
    probe_interval: Duration::from_secs(60),
};

fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap()
}

#[allow(clippy::print_stderr)] // shows the metrics when the assertion that uses this fails
fn metric(metrics: &HsmMetrics, line: &str) -> bool {
    let mut registry = prometheus_client::registry::Registry::default();
    metrics.register(&mut registry);
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
    let found = out.lines().any(|l| l == line);
    if !found {
        eprintln!("{line} not in:\n{out}");
    }
    found
}

fn count(metrics: &HsmMetrics, prefix: &str) -> u64 {
    let mut registry = prometheus_client::registry::Registry::default();
    metrics.register(&mut registry);
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
    out.lines()
        .find_map(|l| l.strip_prefix(prefix).map(|v| v.trim().parse().unwrap()))
        .unwrap_or(0)
}

/// Waits for the token to be healthy again, at most an hour of the paused clock (which passes
/// in no time when nothing else is due), so a recovery that never succeeds fails the test
/// instead of hanging it.
async fn healthy_within_an_hour(token: &warrant_hsm::Token) {
    let mut watch = token.subscribe_health();
    tokio::time::timeout(
        Duration::from_secs(3600),
        watch.wait_for(|h| h.is_healthy()),
    )
    .await
    .expect("the token recovers")
    .unwrap();
}

hsm_test!(
    fn a_token_that_disappears_is_unavailable_until_it_returns(hsm) {
        let token_dir = hsm.init_token("vanish");
        paused_runtime().block_on(async {
            let metrics = HsmMetrics::default();
            let token = hsm.open_with("vanish", 2, metrics.clone()).unwrap();
            let key = token.generate(KeyType::P256, &[1], "k").unwrap();
            let signer = Pkcs11Key::new(key.clone());
            let recovery = tokio::spawn({
                let token = token.clone();
                async move { token.run_recovery(POLICY).await }
            });
            signer.sign(b"before".to_vec()).await.unwrap();

            let aside = hsm.dir().join("aside");
            std::fs::rename(&token_dir, &aside).unwrap();
            let err = signer.sign(b"during".to_vec()).await.unwrap_err();
            assert!(err.is_unavailable(), "{err}");
            let health = token.health();
            assert!(!health.is_healthy());
            assert!(health.to_string().starts_with("token pkcs11:token=vanish: "), "{health}");
            // The issuer's view (warrant-token's RemoteKey): unavailable, naming the token, and
            // a signature refused as unavailable (TokenRequest 503, Sign UNAVAILABLE).
            let why = warrant_token::RemoteKey::unavailable(&signer).expect("unavailable");
            assert!(why.starts_with("token pkcs11:token=vanish: "), "{why}");
            let refused = warrant_token::RemoteKey::sign(&signer, b"x".to_vec()).await.unwrap_err();
            assert!(refused.unavailable, "{refused}");
            // While broken, calls fail at once as unavailable, without touching the module.
            let err = key.sign(b"again").unwrap_err();
            assert!(matches!(err, HsmError::Unavailable { .. }) && err.is_unavailable(), "{err:?}");

            // Recovery keeps trying, with backoff, and keeps failing while the token is away.
            tokio::time::sleep(Duration::from_secs(30)).await;
            assert!(!token.health().is_healthy());
            let attempts = count(&metrics, r#"warrant_hsm_operations_total{holder="pkcs11",op="reopen",result="no_token"}"#);
            // 30 s with backoff 1, 2, 4, 8, 8, …: a handful of attempts, not a busy loop.
            assert!((3..=7).contains(&attempts), "{attempts} reopen attempts in 30 s");

            std::fs::rename(&aside, &token_dir).unwrap();
            healthy_within_an_hour(&token).await;
            assert_eq!(warrant_token::RemoteKey::unavailable(&signer), None);
            let signature = signer.sign(b"after".to_vec()).await.unwrap();
            verify_signature(key.verifying_key(), b"after", &signature);
            assert!(metric(&metrics, r#"warrant_hsm_operations_total{holder="pkcs11",op="reopen",result="ok"} 1"#));
            assert_eq!(metrics.sessions_in_use(), 0);
            assert!(!recovery.is_finished());
            recovery.abort();
        });
    }
);

hsm_test!(
    fn a_token_lost_while_idle_shows_in_health_at_the_next_probe(hsm) {
        let token_dir = hsm.init_token("idle");
        paused_runtime().block_on(async {
            let token = hsm.open("idle").unwrap();
            let key = token.generate(KeyType::Rsa2048, &[1], "k").unwrap();
            let recovery = tokio::spawn({
                let token = token.clone();
                async move { token.run_recovery(POLICY).await }
            });
            let aside = hsm.dir().join("aside");
            std::fs::rename(&token_dir, &aside).unwrap();
            tokio::time::sleep(POLICY.probe_interval / 2).await;
            assert!(token.health().is_healthy(), "not probed yet");
            tokio::time::sleep(POLICY.probe_interval).await;
            assert!(!token.health().is_healthy(), "the probe found the token gone");
            std::fs::rename(&aside, &token_dir).unwrap();
            healthy_within_an_hour(&token).await;
            let signature = key.sign(b"back").unwrap();
            verify_signature(key.verifying_key(), b"back", &signature);
            recovery.abort();
        });
    }
);

hsm_test!(
    fn a_pin_refused_during_recovery_is_not_tried_again(hsm) {
        let token_dir = hsm.init_token("repin");
        paused_runtime().block_on(async {
            let metrics = HsmMetrics::default();
            let token = hsm.open_with("repin", 2, metrics.clone()).unwrap();
            let key = token.generate(KeyType::P256, &[1], "k").unwrap();
            let recovery = tokio::spawn({
                let token = token.clone();
                async move { token.run_recovery(POLICY).await }
            });
            // Someone changes the PIN; then the token goes away and comes back.
            hsm.pkcs11_tool("repin", &["--change-pin", "--new-pin", "4321"]);
            let aside = hsm.dir().join("aside");
            std::fs::rename(&token_dir, &aside).unwrap();
            key.sign(b"x").unwrap_err();
            std::fs::rename(&aside, &token_dir).unwrap();
            // Recovery logs in once with the old PIN, is refused, and stops for good.
            tokio::time::timeout(Duration::from_secs(3600), recovery)
                .await
                .expect("recovery stops after the PIN is refused")
                .unwrap();
            let health = token.health();
            assert!(health.to_string().contains("CKR_PIN_INCORRECT"), "{health}");
            assert!(!health.to_string().contains(PIN));
            assert!(metric(&metrics, r#"warrant_hsm_operations_total{holder="pkcs11",op="login",result="pin"} 1"#));
            tokio::time::sleep(Duration::from_secs(3600)).await;
            assert!(metric(&metrics, r#"warrant_hsm_operations_total{holder="pkcs11",op="login",result="pin"} 1"#));
            // Signing now fails as a configuration error, not as "try again later".
            let err = key.sign(b"y").unwrap_err();
            assert!(!err.is_unavailable(), "{err}");
        });
    }
);
