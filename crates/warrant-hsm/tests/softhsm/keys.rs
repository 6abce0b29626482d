//! Keys generated and imported in the token: they sign, the signatures verify independently,
//! they cannot leave the token, and they can be destroyed.

use std::process::Command;

use warrant_hsm::{HsmError, Unsuitable};
use warrant_keys::{Disposal, Disposed};
use warrant_token::{Algorithm, KeyType, SigningKey, key_id};

use crate::support::{jws_verifies_with_jsonwebtoken, verify_everywhere};
use warrant_keys::KeyPurpose;

hsm_test!(
    fn generated_rsa_and_ec_keys_sign_in_the_token_and_verify_independently(hsm) {
        hsm.init_token("gen");
        let token = hsm.open("gen").unwrap();
        let message = b"eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0";
        for (i, (key_type, alg)) in [
            (KeyType::Rsa2048, Algorithm::RS256),
            (KeyType::Rsa3072, Algorithm::RS256),
            (KeyType::P256, Algorithm::ES256),
            (KeyType::P384, Algorithm::ES384),
        ]
        .into_iter()
        .enumerate()
        {
            let id = [0x10, i as u8];
            let key = token.generate(key_type, &id, &format!("warrant-{i}")).unwrap();
            let public = key.verifying_key();
            assert_eq!(public.algorithm(), alg);
            // The kid rule: SHA-256 of the canonical SPKI, the same as for a PEM key.
            assert_eq!(key.kid(), key_id(public.spki_der()));
            let reparsed = warrant_token::VerifyingKey::from_spki_der(public.spki_der()).unwrap();
            assert_eq!(reparsed.kid(), key.kid());
            let signature = key.sign(message).unwrap();
            let expected_len = match key_type {
                KeyType::Rsa2048 => 256,
                KeyType::Rsa3072 => 384,
                KeyType::P256 => 64,
                _ => 96,
            };
            assert_eq!(signature.len(), expected_len, "{key_type:?}");
            verify_everywhere(hsm.dir(), public, message, &signature);
            // A signature over other bytes does not verify: the checks are real.
            let other = key.sign(b"something else").unwrap();
            let parsed = aws_lc_rs::signature::ParsedPublicKey::new(
                match alg {
                    Algorithm::RS256 => &aws_lc_rs::signature::RSA_PKCS1_2048_8192_SHA256,
                    Algorithm::ES256 => &aws_lc_rs::signature::ECDSA_P256_SHA256_FIXED,
                    _ => &aws_lc_rs::signature::ECDSA_P384_SHA384_FIXED,
                },
                public.spki_der(),
            )
            .unwrap();
            assert!(parsed.verify_sig(message, &other).is_err());
            if alg != Algorithm::ES384 || i == 3 {
                jws_verifies_with_jsonwebtoken(&key);
            }
            // Found again by id, it is the same key.
            let found = token.key(&id, Some(alg)).unwrap();
            assert_eq!(found.kid(), key.kid());
            assert_eq!(found.uri().object_label(), Some(format!("warrant-{i}").as_str()));
            verify_everywhere(hsm.dir(), public, message, &found.sign(message).unwrap());
        }
    }
);

hsm_test!(
    fn private_keys_are_sensitive_and_never_extractable(hsm) {
        hsm.init_token("attrs");
        let token = hsm.open("attrs").unwrap();
        token.generate(KeyType::P256, &[1], "ec").unwrap();
        token.generate(KeyType::Rsa2048, &[2], "rsa").unwrap();
        for id in [[1u8], [2]] {
            let a = token.key_attributes(&id).unwrap();
            assert!(a.token && a.private && a.sensitive && a.sign, "{a:?}");
            assert!(!a.extractable, "{a:?}");
            assert!(a.always_sensitive && a.never_extractable, "{a:?}");
        }
        // An independent reader (OpenSC's pkcs11-tool) sees the same flags.
        let listing = hsm.pkcs11_tool("attrs", &["--list-objects", "--type", "privkey"]);
        let access: Vec<&str> = listing.lines().filter(|l| l.contains("Access:")).collect();
        assert_eq!(access.len(), 2, "{listing}");
        for line in access {
            let flags: Vec<&str> = line.split_once(':').unwrap().1.split(',').map(str::trim).collect();
            assert!(flags.contains(&"sensitive") && flags.contains(&"never extractable"), "{line}");
            assert!(!flags.contains(&"extractable"), "{line}");
        }
    }
);

hsm_test!(
    fn an_extractable_key_or_one_of_another_algorithm_is_refused(hsm) {
        hsm.init_token("refuse");
        hsm.pkcs11_tool(
            "refuse",
            &["--keypairgen", "--key-type", "EC:prime256v1", "--id", "05", "--label", "exportable", "--extractable"],
        );
        let err = hsm.open("refuse").unwrap().key(&[5], None).unwrap_err();
        assert!(matches!(err, HsmError::Unsuitable { problem: Unsuitable::Extractable, .. }), "{err:?}");
        let text = err.to_string();
        assert!(text.contains("pkcs11:token=refuse;object=exportable;id=%05") && text.contains("CKA_EXTRACTABLE"), "{text}");

        let token = hsm.open("refuse").unwrap();
        token.generate(KeyType::P256, &[6], "ec").unwrap();
        let err = token.key(&[6], Some(Algorithm::RS256)).unwrap_err();
        assert!(
            matches!(err, HsmError::Unsuitable { problem: Unsuitable::Algorithm { expected: Algorithm::RS256, found: Algorithm::ES256 }, .. }),
            "{err:?}"
        );
    }
);

hsm_test!(
    fn pem_keys_are_imported_as_non_extractable_objects_and_keep_their_kid(hsm) {
        hsm.init_token("import");
        let token = hsm.open("import").unwrap();
        let dir = hsm.dir();
        let run = |args: &[&str]| {
            let out = Command::new("openssl").args(args).current_dir(dir).output().unwrap();
            assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        };
        // kubeadm's sa.key is PKCS#1 RSA; managed keys are PKCS#8; SEC1 EC keys exist too.
        run(&["genrsa", "-traditional", "-out", "sa.key", "2048"]);
        run(&["ecparam", "-name", "secp384r1", "-genkey", "-noout", "-out", "ec.key"]);
        let pkcs8 = SigningKey::generate(KeyType::P256).unwrap().to_pkcs8_pem().unwrap();
        std::fs::write(dir.join("p8.key"), pkcs8.as_str()).unwrap();
        let sa = std::fs::read(dir.join("sa.key")).unwrap();
        assert!(String::from_utf8_lossy(&sa).contains("BEGIN RSA PRIVATE KEY"));
        let ec = std::fs::read(dir.join("ec.key")).unwrap();
        assert!(String::from_utf8_lossy(&ec).contains("BEGIN EC PRIVATE KEY"));

        for (i, file) in ["sa.key", "ec.key", "p8.key"].into_iter().enumerate() {
            let pem = std::fs::read(dir.join(file)).unwrap();
            let original = warrant_token::signing_key_from_pem(&pem).unwrap();
            let id = [0x20, i as u8];
            let key = token.import_pem(&pem, &id, file).unwrap();
            assert_eq!(key.kid(), original.kid(), "{file}: the kid must not change on import");
            let attrs = token.key_attributes(&id).unwrap();
            assert!(attrs.sensitive && !attrs.extractable && attrs.private && attrs.token, "{file}: {attrs:?}");
            // Signed in the token, verified with the PEM's own public key.
            let message = format!("import {file}");
            let signature = key.sign(message.as_bytes()).unwrap();
            verify_everywhere(dir, original.verifying_key(), message.as_bytes(), &signature);
            jws_verifies_with_jsonwebtoken(&key);
        }

        // A PEM without a private key, and the same id twice, are refused.
        let public_only = original_public_pem();
        let err = token.import_pem(public_only.as_bytes(), &[0x30], "pub").unwrap_err();
        assert!(matches!(err, HsmError::ImportUnsupported(_)), "{err:?}");
        let err = token.import_pem(&std::fs::read(dir.join("p8.key")).unwrap(), &[0x20, 0], "again").unwrap_err();
        assert!(matches!(err, HsmError::ObjectExists { .. }), "{err:?}");
        let err = token.import_pem(b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", &[0x31], "junk").unwrap_err();
        assert!(matches!(err, HsmError::Import(_)), "{err:?}");
        assert_eq!(token.list_keys().unwrap().len(), 3);
    }
);

fn original_public_pem() -> String {
    SigningKey::generate(KeyType::P256)
        .unwrap()
        .verifying_key()
        .to_pem()
}

hsm_test!(
    fn retiring_a_key_destroys_its_private_object_and_keeps_the_public_one(hsm) {
        hsm.init_token("destroy");
        let token = hsm.open("destroy").unwrap();
        let key = token.generate_labelled_by_kid(KeyType::P256, &[7], KeyPurpose::Tokens).unwrap();
        key.sign(b"before").unwrap();
        assert_eq!(token.dispose(&[7], key.kid(), Disposal::Retire, KeyPurpose::Tokens).unwrap(), Disposed::Destroyed);
        assert_eq!(token.dispose(&[7], key.kid(), Disposal::Retire, KeyPurpose::Tokens).unwrap(), Disposed::Gone, "nothing left to destroy");

        let err = token.key(&[7], None).unwrap_err();
        assert!(matches!(err, HsmError::ObjectMissing { what: "private key", .. }), "{err:?}");
        assert!(err.to_string().contains("pkcs11:token=destroy;id=%07"), "{err}");
        // A handle that still holds the key cannot sign any more, and says why (not
        // "unavailable": retrying will not bring the key back).
        let err = key.sign(b"after").unwrap_err();
        assert!(matches!(err, HsmError::ObjectMissing { .. }), "{err:?}");
        assert!(!err.is_unavailable());
        // The public key stays, for tokens already issued, and the token still vouches for it.
        assert_eq!(token.public_key(&[7]).unwrap().kid(), key.kid());
        token.vouch(&[7], key.verifying_key(), KeyPurpose::Tokens).unwrap();
        let entries = token.list_keys().unwrap();
        assert_eq!(entries.len(), 1);
        assert!(entries[0].has_public && !entries[0].has_private);
        assert_eq!(entries[0].label.as_deref(), Some(key.kid()));
        assert!(token.health().is_healthy(), "a missing key is not a broken token");

        // Forgotten (removed, revoked): nothing of it is left, and nothing vouches for it.
        assert_eq!(token.dispose(&[7], key.kid(), Disposal::Forget, KeyPurpose::Tokens).unwrap(), Disposed::Destroyed);
        assert_eq!(token.list_keys().unwrap(), vec![]);
        let err = token.vouch(&[7], key.verifying_key(), KeyPurpose::Tokens).unwrap_err();
        assert!(matches!(err, HsmError::NotHeld { .. }), "{err:?}");
        assert_eq!(token.dispose(&[7], key.kid(), Disposal::Forget, KeyPurpose::Tokens).unwrap(), Disposed::Gone);
    }
);

hsm_test!(
    fn a_failed_creation_leaves_no_object_and_a_taken_id_is_refused(hsm) {
        hsm.init_token("orphans");
        let token = hsm.open("orphans").unwrap();
        warrant_hsm::fault::fail_next_key_creation();
        token.generate(KeyType::P256, &[1], "half").unwrap_err();
        assert_eq!(token.list_keys().unwrap(), vec![], "generation left objects behind");

        let pem = SigningKey::generate(KeyType::P384).unwrap().to_pkcs8_pem().unwrap();
        warrant_hsm::fault::fail_next_key_creation();
        token.import_pem(pem.as_str().as_bytes(), &[2], "half").unwrap_err();
        assert_eq!(token.list_keys().unwrap(), vec![], "import left objects behind");

        // The ids are free again, and a second key with a taken id is refused.
        token.generate(KeyType::P256, &[1], "whole").unwrap();
        token.import_pem(pem.as_str().as_bytes(), &[2], "whole").unwrap();
        let err = token.generate(KeyType::Rsa2048, &[1], "twin").unwrap_err();
        assert!(matches!(err, HsmError::ObjectExists { .. }), "{err:?}");
        assert_eq!(token.list_keys().unwrap().len(), 2);
        let listing = hsm.pkcs11_tool("orphans", &["--list-objects"]);
        assert_eq!(listing.matches("Private Key Object").count(), 2, "{listing}");
        assert_eq!(listing.matches("Public Key Object").count(), 2, "{listing}");
    }
);
