//! Several handles on one token (replicas sharing an HSM) sign with the same key; concurrent
//! signing stays within the session bound.

use std::sync::Arc;

use warrant_hsm::{HsmError, HsmMetrics, Pkcs11Key};
use warrant_keys::{Disposal, Disposed};
use warrant_token::KeyType;

use crate::support::verify_everywhere;
use warrant_keys::KeyPurpose;
use warrant_testkit::signatures::verify_signature;

hsm_test!(
    fn two_handles_on_one_token_sign_with_the_same_key(hsm) {
        hsm.init_token("shared");
        let a = hsm.open("shared").unwrap();
        let b = hsm.open("shared").unwrap();
        let key_a = a.generate_labelled_by_kid(KeyType::P256, &[0x42], KeyPurpose::Tokens).unwrap();
        let key_b = b.key(&[0x42], None).unwrap();
        assert_eq!(key_a.kid(), key_b.kid());
        assert_eq!(key_a.verifying_key(), key_b.verifying_key());
        for (key, message) in [(&key_a, &b"from a"[..]), (&key_b, &b"from b"[..])] {
            let signature = key.sign(message).unwrap();
            verify_everywhere(hsm.dir(), key_a.verifying_key(), message, &signature);
        }
        // A replica in another process (OpenSC's pkcs11-tool) signs with it too.
        let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, b"from another process");
        std::fs::write(hsm.dir().join("digest"), digest.as_ref()).unwrap();
        let digest_file = hsm.dir().join("digest");
        let signature_file = hsm.dir().join("signature");
        hsm.pkcs11_tool("shared", &["--sign", "--mechanism", "ECDSA", "--id", "42", "--input-file", digest_file.to_str().unwrap(), "--output-file", signature_file.to_str().unwrap()]);
        let signature = std::fs::read(hsm.dir().join("signature")).unwrap();
        verify_signature(key_b.verifying_key(), b"from another process", &signature);

        // One replica retires it: the other's next signature fails, naming the key.
        assert_eq!(a.dispose(&[0x42], key_a.kid(), Disposal::Retire, KeyPurpose::Tokens).unwrap(), Disposed::Destroyed);
        let err = key_b.sign(b"after revocation").unwrap_err();
        assert!(matches!(err, HsmError::ObjectMissing { .. }), "{err:?}");
        // Dropping one handle does not log the other out.
        drop((a, key_a));
        let key = b.generate(KeyType::P256, &[0x43], "next").unwrap();
        key.sign(b"still logged in").unwrap();
    }
);

hsm_test!(
    fn concurrent_signatures_run_off_the_runtime_within_the_session_bound(hsm) {
        hsm.init_token("busy");
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        runtime.block_on(async {
            let metrics = HsmMetrics::default();
            let token = hsm.open_with("busy", 3, metrics.clone()).unwrap();
            let key = token.generate(KeyType::P256, &[1], "k").unwrap();
            let signer = Pkcs11Key::new(key.clone());
            let tasks: Vec<_> = (0..64)
                .map(|i| {
                    let signer = signer.clone();
                    tokio::spawn(async move {
                        let message = format!("token {i}");
                        (message.clone(), signer.sign(message.into_bytes()).await)
                    })
                })
                .collect();
            let public = Arc::new(key.verifying_key().clone());
            for task in tasks {
                let (message, signature) = task.await.unwrap();
                verify_signature(&public, message.as_bytes(), &signature.unwrap());
            }
            assert!(metrics.sessions_open() <= 3, "{} sessions", metrics.sessions_open());
            assert_eq!(metrics.sessions_in_use(), 0);
            assert_eq!(token.signing_threads().available(), 3);
        });
    }
);
