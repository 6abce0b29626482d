//! Micro-benchmarks of the token core: signing and verifying one token, per algorithm, with keys
//! parsed once as the server holds them. `make bench` runs these; docs/benchmarks.md has figures.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use jiff::Timestamp;
use warrant_token::{Binding, Claims, KeyType, NewToken, ObjectRef, SigningKey, Verifier, new_jti};

const ISSUER: &str = "https://warrant.bench";
const NOW: i64 = 1_800_000_000;

fn claims() -> Claims {
    Claims::new(NewToken {
        issuer: ISSUER,
        namespace: "bench",
        service_account: ObjectRef::new("app", "0b7c2e4e-51a6-4b5f-9f4c-6f9b2b4f1a01"),
        audiences: vec!["vault".into()],
        binding: Binding::Pod {
            pod: ObjectRef::new("app-0", "8f5b8d1c-5a0e-4c39-9d55-2b7f4e0f8c11"),
            node: Some(ObjectRef::new(
                "node-1",
                "3d9c2a47-0d8e-4b5e-8f0e-7c1d9e2b6a22",
            )),
        },
        issued_at: NOW,
        expires_at: NOW + 3600,
        warn_after: None,
        jti: new_jti(),
    })
}

fn bench(c: &mut Criterion) {
    let now = Timestamp::from_second(NOW).unwrap();
    let claims = claims();
    for (name, key_type) in [("RS256", KeyType::Rsa2048), ("ES256", KeyType::P256)] {
        let key = SigningKey::generate(key_type).unwrap();
        c.bench_function(&format!("sign/{name}"), |b| {
            b.iter(|| key.sign(black_box(&claims)).unwrap())
        });
        let token = key.sign(&claims).unwrap();
        let verifier = Verifier::new(
            vec![ISSUER.into()],
            vec![ISSUER.into()],
            vec![key.verifying_key().clone()],
        );
        let audiences = vec!["vault".to_owned()];
        c.bench_function(&format!("verify/{name}"), |b| {
            b.iter(|| verifier.verify(black_box(&token), &audiences, now).unwrap())
        });
    }

    // A DPoP proof (ES256, the algorithm clients use) for a request presenting a bound token,
    // made by jsonwebtoken: parse, key from the jwk, signature, claims, ath and the key's
    // thumbprint.
    let client = SigningKey::generate(KeyType::P256).unwrap();
    let public = client.verifying_key();
    let jkt = warrant_token::jwk_thumbprint(public);
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
    header.typ = Some("dpop+jwt".into());
    header.jwk = Some(serde_json::from_str(public.jwk_json()).unwrap());
    let token = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJiZW5jaCJ9.c2lnbmF0dXJl";
    let uri = "https://warrant.bench/version";
    let proof = jsonwebtoken::encode(
        &header,
        &serde_json::json!({"jti": "bench", "htm": "GET", "htu": uri, "iat": NOW,
                            "ath": warrant_token::access_token_hash(token)}),
        &jsonwebtoken::EncodingKey::from_ec_der(&pkcs8_der(
            client.to_pkcs8_pem().unwrap().as_str(),
        )),
    )
    .unwrap();
    let request = warrant_token::ProofRequest {
        method: "GET",
        uri,
        access_token: Some(token),
        bound_to: Some(&jkt),
    };
    c.bench_function("dpop/verify_proof/ES256", |b| {
        b.iter(|| warrant_token::verify_proof(black_box(&proof), &request, now, 60).unwrap())
    });
}

/// The DER inside a PKCS#8 PEM block.
fn pkcs8_der(pem: &str) -> Vec<u8> {
    use base64::Engine as _;
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    base64::engine::general_purpose::STANDARD
        .decode(body)
        .unwrap()
}

criterion_group!(benches, bench);
criterion_main!(benches);
