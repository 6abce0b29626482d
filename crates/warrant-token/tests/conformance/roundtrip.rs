//! Property tests: any claims, signed with any algorithm, verify back to the same claims.

use proptest::prelude::*;
use warrant_token::{Binding, Claims, KeyType, NewToken, ObjectRef, Verifier};

use crate::support::{self, NOW, now};

fn object() -> impl Strategy<Value = ObjectRef> {
    ("[a-z0-9.-]{1,20}", "[a-f0-9-]{0,36}").prop_map(|(n, u)| ObjectRef::new(n, u))
}

fn binding() -> impl Strategy<Value = Binding> {
    prop_oneof![
        Just(Binding::None),
        (object(), proptest::option::of(object()))
            .prop_map(|(pod, node)| Binding::Pod { pod, node }),
        object().prop_map(Binding::Secret),
        object().prop_map(Binding::Node),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn sign_then_verify_returns_the_same_claims(
        key_index in 0usize..4,
        namespace in "[a-z0-9-]{1,30}",
        sa in object(),
        // Any text, including characters Go escapes (<, >, &, U+2028) and non-ASCII.
        audiences in proptest::collection::vec("\\PC{1,40}", 1..4),
        binding in binding(),
        lifetime in 600i64..(1 << 32),
        warn_after in proptest::option::of(1i64..100_000),
    ) {
        let key_type = [KeyType::Rsa2048, KeyType::P256, KeyType::P384, KeyType::P521][key_index];
        let key = support::key(key_type);
        let claims = Claims::new(NewToken {
            issuer: support::ISSUER,
            namespace: &namespace,
            service_account: sa,
            audiences: audiences.clone(),
            binding,
            issued_at: NOW,
            expires_at: NOW + lifetime,
            warn_after: warn_after.map(|w| NOW + w),
            jti: warrant_token::new_jti(),
        });
        let token = key.sign(&claims).unwrap();
        let verifier = Verifier::new(
            vec![support::ISSUER.into()],
            vec!["api".into()],
            vec![key.verifying_key().clone()],
        );
        let verified = verifier.verify(&token, &audiences, now()).unwrap();
        prop_assert_eq!(&*verified.claims, &claims);
        prop_assert_eq!(&verified.audiences, &audiences);
        // serde_json, which escapes differently, reads the same claims from the payload.
        let plain: Claims = serde_json::from_slice(&claims.to_json()).unwrap();
        prop_assert_eq!(plain, claims);
    }
}

#[test]
fn jti_is_a_lowercase_uuid_v4() {
    let jti = warrant_token::new_jti();
    let parsed = uuid::Uuid::parse_str(&jti).unwrap();
    assert_eq!(parsed.get_version_num(), 4);
    assert_eq!(jti, jti.to_lowercase());
    assert_eq!(jti.len(), 36);
    assert_ne!(jti, warrant_token::new_jti());
}
