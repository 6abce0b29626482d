//! Bad configuration: one clear error each, naming the URI and what is wrong.

use std::os::unix::fs::PermissionsExt;

use warrant_hsm::{HsmError, HsmMetrics, PinError, Pkcs11Uri, Token, TokenConfig};
use warrant_token::KeyType;

use crate::support::module;

hsm_test!(
    fn a_wrong_pin_is_one_clear_error_and_tried_once(hsm) {
        hsm.init_token("pin");
        let metrics = HsmMetrics::default();
        let err = Token::open(TokenConfig::new(hsm.uri_with_pin("pin", "9999")), metrics.clone()).unwrap_err();
        assert!(matches!(err, HsmError::WrongPin { code: "CKR_PIN_INCORRECT", .. }), "{err:?}");
        let text = err.to_string();
        assert!(text.starts_with("pkcs11:token=pin: ") && text.contains("CKR_PIN_INCORRECT"), "{text}");
        assert!(!text.contains("9999"), "the PIN leaked: {text}");
        assert!(!format!("{err:?}").contains("9999"), "the PIN leaked");
        let mut registry = prometheus_client::registry::Registry::default();
        metrics.register(&mut registry);
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
        assert!(out.contains(r#"warrant_hsm_operations_total{op="login",result="pin"} 1"#), "{out}");
        // The right PIN still works: one failure did not lock the token.
        hsm.open("pin").unwrap();
    }
);

hsm_test!(
    fn a_missing_token_names_the_tokens_present(hsm) {
        hsm.init_token("alpha");
        hsm.init_token("beta");
        let err = hsm.open("gamma").unwrap_err();
        let HsmError::NoToken { present, .. } = &err else { panic!("{err:?}") };
        let mut present = present.clone();
        present.sort();
        assert_eq!(present, ["alpha", "beta"]);
        assert!(err.to_string().starts_with("pkcs11:token=gamma: no token with that label"), "{err}");
    }
);

hsm_test!(
    fn a_missing_object_names_its_uri(hsm) {
        hsm.init_token("objects");
        let token = hsm.open("objects").unwrap();
        let err = token.key(&[0xab, 0xcd], None).unwrap_err();
        assert!(matches!(err, HsmError::ObjectMissing { what: "private key", .. }), "{err:?}");
        assert_eq!(
            err.to_string(),
            "pkcs11:token=objects;id=%AB%CD: no private key object with this CKA_ID on the token"
        );
        assert!(!err.is_unavailable());
        assert!(token.health().is_healthy());
        let err = token.public_key(&[0xab]).unwrap_err();
        assert!(matches!(err, HsmError::ObjectMissing { what: "public key", .. }), "{err:?}");
    }
);

hsm_test!(
    fn a_missing_or_bogus_module_is_named(hsm) {
        let pin = hsm.pin_file("1234");
        let open = |module: &str| {
            let uri: Pkcs11Uri = format!("pkcs11:token=t?module-path={module}&pin-source=file:{}", pin.display())
                .parse()
                .unwrap();
            Token::open(TokenConfig::new(uri), HsmMetrics::default()).unwrap_err()
        };
        let err = open("/nonexistent/libpkcs11.so");
        assert!(matches!(err, HsmError::ModuleNotFound { .. }), "{err:?}");
        assert_eq!(err.to_string(), "PKCS#11 module /nonexistent/libpkcs11.so: no such file");
        let text_file = hsm.dir().join("not-a-module.so");
        std::fs::write(&text_file, "hello").unwrap();
        let err = open(text_file.to_str().unwrap());
        assert!(matches!(err, HsmError::NotAModule { .. }), "{err:?}");
        assert!(err.to_string().contains("is not a PKCS#11 module"), "{err}");
        // A real shared library that is not a PKCS#11 module (no C_GetFunctionList).
        let libc = ["/lib/x86_64-linux-gnu/libz.so.1", "/usr/lib/x86_64-linux-gnu/libz.so.1", "/lib/aarch64-linux-gnu/libz.so.1"]
            .into_iter()
            .find(|p| std::path::Path::new(p).exists());
        if let Some(lib) = libc {
            let err = open(lib);
            assert!(matches!(err, HsmError::NotAModule { .. }), "{err:?}");
        }
        // No module at all, or two different ones.
        let uri: Pkcs11Uri = format!("pkcs11:token=t?pin-source=file:{}", pin.display()).parse().unwrap();
        let err = Token::open(TokenConfig::new(uri.clone()), HsmMetrics::default()).unwrap_err();
        assert!(matches!(err, HsmError::NoModule { .. }), "{err:?}");
        let with_module: Pkcs11Uri =
            format!("pkcs11:token=t?module-path={}&pin-source=file:{}", module().display(), pin.display()).parse().unwrap();
        let err = Token::open(TokenConfig::new(with_module).module("/other/module.so"), HsmMetrics::default()).unwrap_err();
        assert!(matches!(err, HsmError::ModuleConflict { .. }), "{err:?}");
    }
);

hsm_test!(
    fn the_pin_comes_from_a_file_or_an_environment_variable(hsm) {
        hsm.init_token("sources");
        let bare: Pkcs11Uri = format!("pkcs11:token=sources?module-path={}", module().display()).parse().unwrap();
        // From the environment: `support::isolated` gives each test's process
        // WARRANT_HSM_TEST_PIN with the right PIN.
        let err = Token::open(TokenConfig::new(bare.clone()).pin_env("WARRANT_TEST_NO_SUCH_PIN"), HsmMetrics::default())
            .unwrap_err();
        assert!(matches!(&err, HsmError::Pin { cause: PinError::EnvUnset(_), .. }), "{err:?}");
        let token = Token::open(TokenConfig::new(bare.clone()).pin_env("WARRANT_HSM_TEST_PIN"), HsmMetrics::default());
        token.unwrap().generate(KeyType::P256, &[1], "env").unwrap();
        // Neither, both, a missing file, an empty file.
        let err = Token::open(TokenConfig::new(bare.clone()), HsmMetrics::default()).unwrap_err();
        assert!(matches!(&err, HsmError::Pin { cause: PinError::None, .. }), "{err:?}");
        let err = Token::open(TokenConfig::new(hsm.uri("sources")).pin_env("X"), HsmMetrics::default()).unwrap_err();
        assert!(matches!(&err, HsmError::Pin { cause: PinError::TwoSources, .. }), "{err:?}");
        let missing: Pkcs11Uri =
            format!("pkcs11:token=sources?module-path={}&pin-source=file:/nonexistent/pin", module().display()).parse().unwrap();
        let err = Token::open(TokenConfig::new(missing), HsmMetrics::default()).unwrap_err();
        assert!(matches!(&err, HsmError::Pin { cause: PinError::File { .. }, .. }), "{err:?}");
        let empty = hsm.dir().join("empty-pin");
        std::fs::write(&empty, "\n").unwrap();
        std::fs::set_permissions(&empty, PermissionsExt::from_mode(0o600)).unwrap();
        let uri: Pkcs11Uri =
            format!("pkcs11:token=sources?module-path={}&pin-source=file:{}", module().display(), empty.display()).parse().unwrap();
        let err = Token::open(TokenConfig::new(uri), HsmMetrics::default()).unwrap_err();
        assert!(matches!(&err, HsmError::Pin { cause: PinError::Empty(_), .. }), "{err:?}");
    }
);

hsm_test!(
    fn a_pin_file_every_user_can_read_or_write_is_refused(hsm) {
        hsm.init_token("exposed");
        let uri = hsm.uri("exposed");
        let pin = uri.pin_source().unwrap().to_path_buf();
        for mode in [0o644, 0o604, 0o602] {
            std::fs::set_permissions(&pin, PermissionsExt::from_mode(mode)).unwrap();
            let err = Token::open(TokenConfig::new(uri.clone()), HsmMetrics::default()).unwrap_err();
            assert!(matches!(&err, HsmError::Pin { cause: PinError::Exposed { .. }, .. }), "{mode:o}: {err:?}");
            let text = err.to_string();
            assert!(text.contains(&format!("the PIN file {} can be read or written by every user (mode {mode:o})", pin.display())), "{text}");
            // (The test's PIN file is named after the PIN it holds.)
            let without_path = text.replace(&pin.display().to_string(), "");
            assert!(!without_path.contains(crate::support::PIN), "{text}");
        }
        // Its owner and group only (a Secret volume with an fsGroup): accepted.
        for mode in [0o400, 0o600, 0o440, 0o640] {
            std::fs::set_permissions(&pin, PermissionsExt::from_mode(mode)).unwrap();
            Token::open(TokenConfig::new(uri.clone()), HsmMetrics::default()).unwrap();
        }
    }
);

hsm_test!(
    fn a_module_others_can_replace_is_refused(hsm) {
        hsm.init_token("module");
        let pin = hsm.pin_file(crate::support::PIN);
        // A copy of the module in a directory of this test's own, as safe as the original.
        let dir = hsm.dir().join("lib");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, PermissionsExt::from_mode(0o755)).unwrap();
        let copy = dir.join("libsofthsm2.so");
        std::fs::copy(module(), &copy).unwrap();
        let open = |module: &std::path::Path| {
            let uri: Pkcs11Uri = format!("pkcs11:token=module?module-path={}&pin-source=file:{}", module.display(), pin.display())
                .parse()
                .unwrap();
            Token::open(TokenConfig::new(uri), HsmMetrics::default())
        };
        // Writable by others, or its directory writable by its group: refused before loading.
        std::fs::set_permissions(&copy, PermissionsExt::from_mode(0o666)).unwrap();
        let err = open(&copy).unwrap_err();
        assert!(matches!(&err, HsmError::ModuleUnsafe { culprit, .. } if culprit == &copy), "{err:?}");
        assert!(err.to_string().contains("is writable by every user (mode 666)"), "{err}");
        std::fs::set_permissions(&copy, PermissionsExt::from_mode(0o644)).unwrap();
        std::fs::set_permissions(&dir, PermissionsExt::from_mode(0o775)).unwrap();
        let err = open(&copy).unwrap_err();
        assert!(matches!(&err, HsmError::ModuleUnsafe { culprit, .. } if culprit == &dir), "{err:?}");
        assert!(err.to_string().contains("is writable by its group (mode 775)"), "{err}");
        // A symbolic link is judged by what it points to.
        let link = hsm.dir().join("link.so");
        std::os::unix::fs::symlink(&copy, &link).unwrap();
        assert!(matches!(open(&link).unwrap_err(), HsmError::ModuleUnsafe { .. }));
        std::fs::set_permissions(&dir, PermissionsExt::from_mode(0o755)).unwrap();
        open(&link).unwrap();
    }
);
