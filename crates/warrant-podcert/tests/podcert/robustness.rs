//! Whatever bytes a PCR carries, the decision answers and never panics; and whatever a
//! request's bytes say beyond its key, a leaf carries exactly the key the request names.

use proptest::prelude::*;
use serde_json::json;
use warrant_podcert::*;

use crate::support::*;

fn now() -> jiff::Timestamp {
    at("2026-11-27T17:17:09Z")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_key_material_is_answered_never_issued(bytes in proptest::collection::vec(any::<u8>(), 0..400), pkix in any::<bool>()) {
        let pcr = if pkix { pcr_with_pkix(&bytes, now()) } else { pcr_with_csr(&bytes, now()) };
        let decision = ready(decide_json(&pcr, &facts(), &policy(), now(), ca())).unwrap();
        prop_assert!(matches!(decision, Decision::Denied { .. }), "{decision:?}");
    }

    #[test]
    fn a_damaged_request_is_denied_or_issued_to_the_key_it_names(at_byte in any::<prop::sample::Index>(), xor in 1u8..) {
        let mut csr = stub_csr(key(KeyType::EcdsaP256));
        let i = at_byte.index(csr.len());
        csr[i] ^= xor;
        let pcr = pcr_with_csr(&csr, now());
        match ready(decide_json(&pcr, &facts(), &policy(), now(), ca())).unwrap() {
            Decision::Denied { .. } => {}
            Decision::Issued(issued) => {
                let request = PodCertificateRequest::from_json(&pcr).unwrap();
                let named = request.spec.unwrap().key;
                let leaf = leaf_der(&issued.status.certificate_chain);
                let spki = named.spki();
                prop_assert!(leaf.windows(spki.len()).any(|w| w == spki));
            }
            other => prop_assert!(false, "{other:?}"),
        }
    }

    #[test]
    fn any_status_json_is_read_or_refused_without_a_panic(text in "\\PC{0,200}") {
        let mut pcr = pcr_with_csr(&stub_csr(key(KeyType::EcdsaP256)), now());
        pcr["status"] = json!({"certificateChain": text, "conditions": [{"type": "Issued", "status": "True"}]});
        let _ = ready(decide_json(&pcr, &facts(), &policy(), now(), ca()));
    }
}
