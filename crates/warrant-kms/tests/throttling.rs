//! KMS throttling (`ThrottlingException`), against a stand-in for KMS on loopback that throttles
//! the first requests it gets (moto never throttles): warrant retries with backoff until the
//! call's deadline, succeeds once KMS answers, and otherwise fails naming the throttling, without
//! marking KMS unreachable.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{self, EcdsaKeyPair, KeyPair as _};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use warrant_kms::{Kms, KmsConfig, KmsError, KmsKey, KmsMetrics, KmsUri};
use warrant_token::VerifyingKey;

const ARN: &str = "arn:aws:kms:us-east-1:111122223333:key/0c8c3a77-9ac3-4a2f-9f4e-1a2b3c4d5e6f";

/// A KMS that answers `Sign` with `ThrottlingException` `throttle` times, then signs with `key`
/// (a DER ECDSA signature, as KMS returns). Counts the requests.
struct ThrottlingKms {
    port: u16,
    requests: Arc<AtomicUsize>,
}

impl ThrottlingKms {
    async fn start(throttle: usize, key: Arc<EcdsaKeyPair>) -> ThrottlingKms {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(AtomicUsize::new(0));
        let counted = requests.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, throttle, counted.clone(), key.clone()));
            }
        });
        ThrottlingKms { port, requests }
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

/// One connection: requests answered one after the other (HTTP/1.1 keep-alive).
async fn serve(
    mut stream: TcpStream,
    throttle: usize,
    requests: Arc<AtomicUsize>,
    key: Arc<EcdsaKeyPair>,
) {
    let mut buffer = Vec::new();
    loop {
        let Some(end) = find(&buffer, b"\r\n\r\n") else {
            let mut chunk = [0u8; 4096];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buffer.extend_from_slice(&chunk[..n]),
            }
            continue;
        };
        let head = String::from_utf8_lossy(&buffer[..end]).to_lowercase();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .map_or(0, |v| v.trim().parse().unwrap());
        while buffer.len() < end + 4 + length {
            let mut chunk = [0u8; 4096];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buffer.extend_from_slice(&chunk[..n]),
            }
        }
        let body: serde_json::Value =
            serde_json::from_slice(&buffer[end + 4..end + 4 + length]).unwrap();
        buffer.drain(..end + 4 + length);
        let seen = requests.fetch_add(1, Ordering::SeqCst);
        let (status, answer) = if seen < throttle {
            (
                "400 Bad Request",
                serde_json::json!({"__type": "ThrottlingException", "message": "Rate exceeded"}),
            )
        } else {
            let message = STANDARD.decode(body["Message"].as_str().unwrap()).unwrap();
            let der = key.sign(&SystemRandom::new(), &message).unwrap();
            (
                "200 OK",
                serde_json::json!({
                    "KeyId": ARN,
                    "Signature": STANDARD.encode(der.as_ref()),
                    "SigningAlgorithm": "ECDSA_SHA_256",
                }),
            )
        };
        let answer = answer.to_string();
        let response = format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/x-amz-json-1.1\r\nx-amzn-requestid: test\r\ncontent-length: {}\r\n\r\n{answer}",
            answer.len()
        );
        if stream.write_all(response.as_bytes()).await.is_err() {
            return;
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

async fn key_at(endpoint: &str, deadline: Duration) -> (KmsKey, Kms) {
    let uri: KmsUri = "aws-kms://us-east-1/warrant".parse().unwrap();
    let config = KmsConfig::new(uri)
        .endpoint(endpoint)
        .credentials(aws_credential_types::Credentials::new(
            "testing", "testing", None, None, "test",
        ))
        .deadline(deadline);
    let kms = Kms::open(config, KmsMetrics::default()).await.unwrap();
    (KmsKey::new(kms.clone(), ARN, public_of(&PAIR)), kms)
}

static PAIR: std::sync::LazyLock<Arc<EcdsaKeyPair>> = std::sync::LazyLock::new(|| {
    Arc::new(EcdsaKeyPair::generate(&signature::ECDSA_P256_SHA256_ASN1_SIGNING).unwrap())
});

fn public_of(pair: &EcdsaKeyPair) -> VerifyingKey {
    let spki = aws_lc_rs::encoding::AsDer::as_der(pair.public_key()).unwrap();
    VerifyingKey::from_spki_der(spki.as_ref()).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn throttled_calls_are_retried_with_backoff_and_succeed_once_kms_answers() {
    let server = ThrottlingKms::start(3, PAIR.clone()).await;
    let (key, kms) = key_at(&server.endpoint(), Duration::from_secs(5)).await;
    let signature = key.sign(b"header.payload".to_vec()).await.unwrap();
    signature::UnparsedPublicKey::new(
        &signature::ECDSA_P256_SHA256_FIXED,
        PAIR.public_key().as_ref(),
    )
    .verify(b"header.payload", &signature)
    .expect("the signature from the fourth attempt verifies");
    assert_eq!(
        server.requests.load(Ordering::SeqCst),
        4,
        "three throttled, one signed"
    );
    assert_eq!(kms.metrics().count("sign", "ok"), 1);
    assert!(kms.health().is_healthy());
}

#[tokio::test(flavor = "multi_thread")]
async fn throttling_past_the_deadline_fails_naming_it_and_leaves_kms_healthy() {
    let server = ThrottlingKms::start(usize::MAX, PAIR.clone()).await;
    let (key, kms) = key_at(&server.endpoint(), Duration::from_millis(800)).await;
    let err = key.sign(b"header.payload".to_vec()).await.unwrap_err();
    let KmsError::Throttled { attempts, .. } = &err else {
        panic!("{err:?}")
    };
    let attempts = *attempts;
    // Backoff 50 ms doubling (with jitter), inside 0.8 s: a few attempts, not a busy loop.
    assert!((3..=8).contains(&attempts), "{attempts} attempts");
    assert_eq!(server.requests.load(Ordering::SeqCst), attempts as usize);
    assert!(err.to_string().contains("ThrottlingException"), "{err}");
    assert!(
        err.is_unavailable(),
        "a throttled signature may succeed later: {err}"
    );
    assert_eq!(kms.metrics().count("sign", "throttled"), 1);
    // Throttling is an answer: KMS is reachable, and the next call is tried, not refused.
    assert!(kms.health().is_healthy());
}
