//! What whoever can write the key store, or reach the token without its PIN, can no longer do:
//! make the token vouch for a key warrant does not hold, make warrant destroy an object that is
//! not its key (another application's key pair, or its public key object alone), stop warrant with a public object of their own, or find a key of warrant's that
//! decrypts or unwraps.

use warrant_hsm::{HsmError, Pkcs11Holder, Token};
use warrant_keys::{Disposal, Disposed, KeyHolder};
use warrant_token::{KeyError, KeyType, SigningKey, VerifyingKey};

use crate::support::SoftHsm;
use warrant_keys::KeyPurpose;

/// `key`'s public key as DER, written in the test's directory: what `pkcs11-tool` imports.
fn public_der(hsm: &SoftHsm, key: &VerifyingKey) -> String {
    let path = hsm.dir().join(format!("{}.pub.der", key.kid()));
    std::fs::write(&path, key.spki_der()).unwrap();
    path.display().to_string()
}

fn hex(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// The `CKA_ID` a held key's locator names.
fn id_of(key: &SigningKey) -> Vec<u8> {
    let locator: warrant_hsm::Pkcs11Uri = key.remote_key().unwrap().locator().parse().unwrap();
    locator.object_id().unwrap().to_vec()
}

fn refused(result: Result<(), KeyError>) -> String {
    let err = result.unwrap_err();
    let KeyError::Remote(remote) = &err else {
        panic!("{err:?}")
    };
    assert!(!remote.unavailable, "refused, not unavailable: {err}");
    err.to_string()
}

hsm_test!(
    fn the_token_vouches_only_for_keys_it_holds_for_warrant(hsm) {
        hsm.init_token("vouch");
        let holder = Pkcs11Holder::new(hsm.open("vouch").unwrap());
        let token: &Token = holder.token();
        let key = holder.generate(KeyType::P256, KeyPurpose::Tokens).unwrap();
        let locator = key.remote_key().unwrap().locator();
        holder.vouch(&locator, key.verifying_key(), KeyPurpose::Tokens).unwrap();

        // A store writer's own key, "held" under a fresh id or under warrant's key's id.
        let attacker = SigningKey::generate(KeyType::P256).unwrap();
        let fresh = token.uri().key_locator(&[0xee; 16]).to_string();
        let said = refused(holder.vouch(&fresh, attacker.verifying_key(), KeyPurpose::Tokens));
        assert!(said.contains(&format!("the token holds no key {} made for warrant", attacker.kid())), "{said}");
        refused(holder.vouch(&locator, attacker.verifying_key(), KeyPurpose::Tokens));

        // Reaching the token without the PIN does not help: an object only a logged-in session
        // can make cannot be made, and a public one vouches for nothing.
        let der = public_der(hsm, attacker.verifying_key());
        let id = hex(&[0xee; 16]);
        let private = hsm.pkcs11_tool_output("vouch", false, &["--write-object", &der, "--type", "pubkey", "--id", &id, "--label", attacker.kid(), "--private"]);
        assert!(!private.status.success());
        assert!(String::from_utf8_lossy(&private.stderr).contains("CKR_USER_NOT_LOGGED_IN"));
        let public = hsm.pkcs11_tool_output("vouch", false, &["--write-object", &der, "--type", "pubkey", "--id", &id, "--label", attacker.kid()]);
        assert!(public.status.success(), "{}", String::from_utf8_lossy(&public.stderr));
        refused(holder.vouch(&fresh, attacker.verifying_key(), KeyPurpose::Tokens));

        // Retired (its private half destroyed), the key is still vouched for; forgotten
        // (revoked or removed), never again.
        assert_eq!(holder.dispose(&locator, key.kid(), Disposal::Retire, KeyPurpose::Tokens).unwrap(), Disposed::Destroyed);
        holder.vouch(&locator, key.verifying_key(), KeyPurpose::Tokens).unwrap();
        assert_eq!(holder.dispose(&locator, key.kid(), Disposal::Forget, KeyPurpose::Tokens).unwrap(), Disposed::Destroyed);
        refused(holder.vouch(&locator, key.verifying_key(), KeyPurpose::Tokens));
        assert_eq!(holder.dispose(&locator, key.kid(), Disposal::Forget, KeyPurpose::Tokens).unwrap(), Disposed::Gone);
    }
);

hsm_test!(
    fn a_public_object_made_without_the_pin_does_not_stop_warrant(hsm) {
        hsm.init_token("planted");
        let holder = Pkcs11Holder::new(hsm.open("planted").unwrap());
        let key = holder.generate(KeyType::P256, KeyPurpose::Tokens).unwrap();
        let id = hex(&id_of(&key));
        // warrant's objects are invisible without the PIN (so they cannot be destroyed either).
        let listing = hsm.pkcs11_tool_output("planted", false, &["--list-objects"]);
        let listing = String::from_utf8_lossy(&listing.stdout).into_owned();
        assert!(!listing.contains(key.kid()), "{listing}");
        let attrs = holder.token().key_attributes(&id_of(&key)).unwrap();
        assert!(attrs.private);

        // A second public object under the key's id, holding another key, made without the
        // PIN: warrant still finds its key, vouches for it, and signs with it.
        for n in 0..3 {
            let stranger = SigningKey::generate(KeyType::P256).unwrap();
            let der = public_der(hsm, stranger.verifying_key());
            let out = hsm.pkcs11_tool_output("planted", false, &["--write-object", &der, "--type", "pubkey", "--id", &id, "--label", &format!("planted-{n}")]);
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        }
        let locator = key.remote_key().unwrap().locator();
        let opened = holder.open(&locator, key.verifying_key().clone()).unwrap();
        holder.check(&opened).unwrap();
        holder.vouch(&locator, key.verifying_key(), KeyPurpose::Tokens).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(opened.sign_detached_async("e30")).unwrap();
    }
);

hsm_test!(
    fn only_the_recorded_key_is_ever_destroyed(hsm) {
        hsm.init_token("others");
        let holder = Pkcs11Holder::new(hsm.open("others").unwrap());
        let ours = holder.generate(KeyType::P256, KeyPurpose::Tokens).unwrap();
        // Another application's key on the same token, made with the PIN.
        hsm.pkcs11_tool("others", &["--keypairgen", "--key-type", "EC:prime256v1", "--id", "99", "--label", "other-app"]);
        let theirs = holder.token().public_key(&[0x99]).unwrap();
        let locator = holder.token().uri().key_locator(&[0x99]).to_string();

        // A forged entry naming their object, with their public key or ours: nothing destroyed.
        for kid in [theirs.kid(), ours.kid()] {
            for disposal in [Disposal::Retire, Disposal::Forget] {
                let answer = holder.dispose(&locator, kid, disposal, KeyPurpose::Tokens).unwrap();
                assert!(matches!(answer, Disposed::NotTheKey(_)), "{kid} {disposal}: {answer:?}");
            }
        }
        let Disposed::NotTheKey(why) = holder.dispose(&locator, theirs.kid(), Disposal::Forget, KeyPurpose::Tokens).unwrap() else {
            unreachable!()
        };
        assert!(why.contains("labelled \"other-app\", not with the key's kid"), "{why}");
        let entry = holder.token().list_keys().unwrap().into_iter().find(|e| e.id == [0x99]).unwrap();
        assert!(entry.has_private && entry.has_public, "{entry:?}");
        hsm.pkcs11_tool("others", &["--sign", "--mechanism", "ECDSA", "--id", "99", "--input-file", &public_der(hsm, &theirs), "--output-file", "/dev/null"]);

        // Ours, named rightly: destroyed.
        let our_locator = ours.remote_key().unwrap().locator();
        assert_eq!(holder.dispose(&our_locator, ours.kid(), Disposal::Forget, KeyPurpose::Tokens).unwrap(), Disposed::Destroyed);
    }
);

hsm_test!(
    fn another_applications_public_key_object_survives_a_forged_entry(hsm) {
        hsm.init_token("pubonly");
        let holder = Pkcs11Holder::new(hsm.open("pubonly").unwrap());
        // Another application's public key objects, with no private key beside them: one made
        // without the PIN, one made with it (private). Their public key is public: anyone can
        // compute its kid and write a store entry naming their id and that kid.
        let theirs = SigningKey::generate(KeyType::P256).unwrap();
        let der = public_der(hsm, theirs.verifying_key());
        let out = hsm.pkcs11_tool_output("pubonly", false, &["--write-object", &der, "--type", "pubkey", "--id", "42", "--label", "app-a"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        hsm.pkcs11_tool("pubonly", &["--write-object", &der, "--type", "pubkey", "--id", "43", "--label", "app-b", "--private"]);

        for id in [0x42u8, 0x43] {
            let locator = holder.token().uri().key_locator(&[id]).to_string();
            let retired = holder.dispose(&locator, theirs.kid(), Disposal::Retire, KeyPurpose::Tokens).unwrap();
            assert_ne!(retired, Disposed::Destroyed, "{id:x}");
            let forgotten = holder.dispose(&locator, theirs.kid(), Disposal::Forget, KeyPurpose::Tokens).unwrap();
            let Disposed::NotTheKey(why) = forgotten else {
                panic!("{id:x}: {forgotten:?}")
            };
            assert!(why.contains("provably warrant's"), "{why}");
        }
        let listing = hsm.pkcs11_tool("pubonly", &["--list-objects"]);
        assert!(listing.contains("app-a") && listing.contains("app-b"), "{listing}");

        // warrant's own key, revoked: all of it goes, its proof object included.
        let ours = holder.generate(KeyType::P256, KeyPurpose::Tokens).unwrap();
        let locator = ours.remote_key().unwrap().locator();
        assert_eq!(holder.dispose(&locator, ours.kid(), Disposal::Forget, KeyPurpose::Tokens).unwrap(), Disposed::Destroyed);
        let listing = hsm.pkcs11_tool("pubonly", &["--list-objects"]);
        assert!(!listing.contains(ours.kid()), "{listing}");
    }
);

hsm_test!(
    fn warrants_keys_only_sign(hsm) {
        hsm.init_token("usage");
        let holder = Pkcs11Holder::new(hsm.open("usage").unwrap());
        let token = holder.token();
        let pem = SigningKey::generate(KeyType::Rsa2048).unwrap().to_pkcs8_pem().unwrap();
        let keys = [
            holder.generate(KeyType::P256, KeyPurpose::Tokens).unwrap(),
            holder.generate(KeyType::Rsa2048, KeyPurpose::Tokens).unwrap(),
            holder.import_pem(pem.as_str().as_bytes(), KeyPurpose::Tokens).unwrap(),
        ];
        for key in &keys {
            let a = token.key_attributes(&id_of(key)).unwrap();
            assert!(a.sign && !a.decrypt && !a.unwrap && !a.derive, "{}: {a:?}", key.kid());
        }
        // As OpenSC's pkcs11-tool reads them: private keys sign, public keys verify, nothing else.
        let listing = hsm.pkcs11_tool("usage", &["--list-objects"]);
        let usages: Vec<&str> = listing.lines().filter(|l| l.trim_start().starts_with("Usage:")).collect();
        assert_eq!(usages.len(), 6, "{listing}");
        for usage in usages {
            let usage = usage.trim();
            assert!(usage == "Usage:      sign" || usage == "Usage:      verify", "{listing}");
        }

        // A key another tool made with every use loses all but signing.
        hsm.pkcs11_tool("usage", &["--keypairgen", "--key-type", "rsa:2048", "--id", "77", "--label", "wide", "--usage-sign", "--usage-decrypt", "--usage-wrap"]);
        let before = token.key_attributes(&[0x77]).unwrap();
        assert!(before.decrypt && before.unwrap, "{before:?}");
        assert!(token.restrict_to_signing(&[0x77]).unwrap());
        let after = token.key_attributes(&[0x77]).unwrap();
        assert!(after.sign && !after.decrypt && !after.unwrap && !after.derive, "{after:?}");
        assert!(!token.restrict_to_signing(&[0x77]).unwrap(), "nothing left to take");
    }
);

hsm_test!(
    fn a_key_made_before_public_objects_were_private_is_vouched_for_and_kept_so(hsm) {
        hsm.init_token("legacy");
        let holder = Pkcs11Holder::new(hsm.open("legacy").unwrap());
        // The old layout: the private key object and a public key object anyone could have
        // made, both labelled by the kid; the private key also decrypts.
        let original = SigningKey::generate(KeyType::Rsa2048).unwrap();
        let pem = original.to_pkcs8_pem().unwrap();
        let der = hsm.dir().join("legacy.der");
        let out = std::process::Command::new("openssl")
            .args(["pkey", "-outform", "DER", "-out"])
            .arg(&der)
            .stdin(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut child| {
                use std::io::Write as _;
                child.stdin.take().unwrap().write_all(pem.as_str().as_bytes())?;
                child.wait_with_output()
            })
            .unwrap();
        assert!(out.status.success());
        let kid = original.kid();
        hsm.pkcs11_tool("legacy", &["--write-object", der.to_str().unwrap(), "--type", "privkey", "--id", "55", "--label", kid, "--usage-sign", "--usage-decrypt"]);
        let public = public_der(hsm, original.verifying_key());
        let out = hsm.pkcs11_tool_output("legacy", false, &["--write-object", &public, "--type", "pubkey", "--id", "55", "--label", kid]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

        // Its private key proves it; the startup check takes decryption away.
        let locator = holder.token().uri().key_locator(&[0x55]).to_string();
        holder.vouch(&locator, original.verifying_key(), KeyPurpose::Tokens).unwrap();
        let opened = holder.open(&locator, original.verifying_key().clone()).unwrap();
        holder.check(&opened).unwrap();
        assert!(!holder.token().key_attributes(&[0x55]).unwrap().decrypt);

        // Retired: the token keeps a private proof, so it vouches for the key after its private
        // half is gone, even once the old public object is deleted (anyone could).
        assert_eq!(holder.dispose(&locator, kid, Disposal::Retire, KeyPurpose::Tokens).unwrap(), Disposed::Destroyed);
        let deleted = hsm.pkcs11_tool_output("legacy", false, &["--delete-object", "--type", "pubkey", "--id", "55"]);
        assert!(deleted.status.success(), "{}", String::from_utf8_lossy(&deleted.stderr));
        holder.vouch(&locator, original.verifying_key(), KeyPurpose::Tokens).unwrap();
        let err = holder.token().vouch(&[0x56], original.verifying_key(), KeyPurpose::Tokens).unwrap_err();
        assert!(matches!(err, HsmError::NotHeld { .. }), "{err:?}");
    }
);

hsm_test!(
    fn a_token_out_of_reach_neither_vouches_nor_refuses_nor_finds_a_key_gone(hsm) {
        let dir = hsm.init_token("away");
        // Two handles (replicas), so each question meets the token gone, not a pool that a
        // first failure already broke.
        let holder = Pkcs11Holder::new(hsm.open("away").unwrap());
        let other = Pkcs11Holder::new(hsm.open("away").unwrap());
        let key = holder.generate(KeyType::P256, KeyPurpose::Tokens).unwrap();
        let locator = key.remote_key().unwrap().locator();
        // SoftHSM2 finds no objects on a token that went away: that is not "nothing there".
        let aside = hsm.dir().join("aside");
        std::fs::rename(&dir, &aside).unwrap();
        let disposed = holder.dispose(&locator, key.kid(), Disposal::Forget, KeyPurpose::Tokens);
        let vouched = other.vouch(&locator, key.verifying_key(), KeyPurpose::Tokens);
        for err in [disposed.unwrap_err(), vouched.unwrap_err()] {
            let KeyError::Remote(remote) = &err else { panic!("{err:?}") };
            assert!(remote.unavailable, "{err}");
        }
        std::fs::rename(&aside, &dir).unwrap();
        let listing = hsm.pkcs11_tool("away", &["--list-objects"]);
        assert_eq!(listing.matches(key.kid()).count(), 2, "{listing}");
    }
);
