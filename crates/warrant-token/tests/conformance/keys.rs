//! Loading keys from PEM: several per file, file order, kube's choice of signing key, clear
//! errors, and no key material in `Debug`.

use warrant_token::{
    KeyError, KeyType, PemKey, SigningKey, key_id, parse_pem_keys, signing_key_from_pem,
    verifying_keys_from_pem,
};

use crate::support::key;

#[test]
fn several_keys_per_file_in_order() {
    let a = key(KeyType::P256);
    let b = key(KeyType::Rsa2048);
    let c = key(KeyType::P384);
    let file = format!(
        "# comment lines outside blocks are ignored\n{}{}\n-----BEGIN EC PARAMETERS-----\nBggqhkjOPQMBBw==\n-----END EC PARAMETERS-----\n{}",
        a.verifying_key().to_pem(),
        b.to_pkcs8_pem().unwrap().as_str(),
        c.verifying_key().to_pem(),
    );
    let keys = verifying_keys_from_pem(file.as_bytes()).unwrap();
    let kids: Vec<&str> = keys.iter().map(|k| k.kid()).collect();
    assert_eq!(kids, [a.kid(), b.kid(), c.kid()]);
    // The signing key is the first private key, wherever it is.
    assert_eq!(
        signing_key_from_pem(file.as_bytes()).unwrap().kid(),
        b.kid()
    );
    let parsed = parse_pem_keys(file.as_bytes()).unwrap();
    assert!(matches!(parsed[1], PemKey::Private(_)));
}

#[test]
fn generated_keys_round_trip_through_pkcs8() {
    for key_type in [
        KeyType::Rsa2048,
        KeyType::Rsa3072,
        KeyType::P256,
        KeyType::P384,
        KeyType::P521,
    ] {
        let k = SigningKey::generate(key_type).unwrap();
        assert_eq!(k.algorithm(), key_type.algorithm());
        let again = signing_key_from_pem(k.to_pkcs8_pem().unwrap().as_str().as_bytes()).unwrap();
        assert_eq!(again.kid(), k.kid());
        assert_eq!(key_id(k.verifying_key().spki_der()), k.kid());
    }
}

#[test]
fn missing_or_malformed_keys_are_clear_errors() {
    assert_eq!(
        verifying_keys_from_pem(b"").unwrap_err(),
        KeyError::NoPublicKeys
    );
    assert_eq!(
        verifying_keys_from_pem(b"").unwrap_err().to_string(),
        "data does not contain any valid RSA or ECDSA public keys"
    );
    let public_only = key(KeyType::P256).verifying_key().to_pem();
    assert_eq!(
        signing_key_from_pem(public_only.as_bytes()).unwrap_err(),
        KeyError::NoPrivateKey
    );
    assert_eq!(
        KeyError::NoPrivateKey.to_string(),
        "data does not contain a valid RSA or ECDSA private key"
    );
    let truncated = &public_only[..public_only.len() - 20];
    assert!(matches!(
        verifying_keys_from_pem(truncated.as_bytes()),
        Err(KeyError::Pem(_))
    ));
    let junk = "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n";
    assert!(matches!(
        verifying_keys_from_pem(junk.as_bytes()),
        Err(KeyError::Invalid { .. })
    ));
    let bad_b64 = "-----BEGIN PRIVATE KEY-----\n!!!!\n-----END PRIVATE KEY-----\n";
    let err = signing_key_from_pem(bad_b64.as_bytes()).unwrap_err();
    assert!(matches!(err, KeyError::Pem(_)), "{err}");
}

#[test]
fn debug_and_errors_never_show_key_material() {
    let k = key(KeyType::Rsa2048);
    let pem = k.to_pkcs8_pem().unwrap();
    let body_line = pem.as_str().lines().nth(1).unwrap();
    for shown in [
        format!("{k:?}"),
        format!("{:?}", k.verifying_key()),
        format!("{pem:?}"),
    ] {
        assert!(!shown.contains(body_line), "{shown}");
        assert!(!shown.contains("BEGIN"), "{shown}");
    }
    assert_eq!(
        format!("{k:?}"),
        format!("SigningKey {{ kid: {:?}, alg: RS256 }}", k.kid())
    );
    // A corrupted private key's error does not echo its contents.
    let corrupted = pem
        .as_str()
        .replace(body_line, &body_line.replace('A', "*"));
    let err = signing_key_from_pem(corrupted.as_bytes())
        .unwrap_err()
        .to_string();
    assert!(!err.contains(&body_line[..20]), "{err}");
}
