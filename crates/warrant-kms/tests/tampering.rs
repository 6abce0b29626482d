//! KMS's answers altered on the way, by an HTTP proxy on loopback in front of moto's KMS
//! server: a `Sign` whose signature has one byte changed, a `GetPublicKey` that answers another
//! key. warrant verifies each signature with the recorded public key before using it, and a new
//! key's public key with a challenge it signs before recording it.
//!
//! Every message here is under 4096 bytes, sent `RAW`: moto's `DIGEST` hashes again.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::sync::Arc;
use std::time::Duration;

use aws_sdk_kms::types::KeyState;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use warrant_keys::KeyHolder;
use warrant_keys::KeyPurpose;
use warrant_kms::{KID_TAG, Kms, KmsConfig, KmsError, KmsHolder, KmsKey, KmsMetrics, KmsUri};
use warrant_testkit::servers::Emulator;
use warrant_testkit::signatures::verify_signature as verify;
use warrant_token::{KeyType, SigningKey};

async fn open(endpoint: &str) -> Kms {
    let uri: KmsUri = "aws-kms://us-east-1/prod".parse().unwrap();
    let config = KmsConfig::new(uri)
        .endpoint(endpoint)
        .credentials(aws_credential_types::Credentials::new(
            "testing", "testing", None, None, "test",
        ))
        .deadline(Duration::from_secs(3));
    Kms::open(config, KmsMetrics::default()).await.unwrap()
}

/// What the proxy does to the base64 field `field` of the answers to KMS operation `op`.
type Alter = Arc<dyn Fn(&mut Vec<u8>) + Send + Sync>;

/// An HTTP proxy on loopback to moto that passes every request through and alters the
/// answers to one KMS operation. One request per connection (it answers `Connection: close`).
struct Tampering {
    port: u16,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Tampering {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Tampering {
    async fn start(upstream: u16, op: &'static str, field: &'static str, alter: Alter) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let task = tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                let alter = Arc::clone(&alter);
                tokio::spawn(relay(inbound, upstream, op, field, alter));
            }
        });
        Tampering { port, task }
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

/// One HTTP message: its head (start line and headers, without the blank line) and body.
/// Without `Content-Length`, the body runs to the end of the stream.
async fn read_message(stream: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut data = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(at) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        data.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8(data[..head_end].to_vec()).ok()?;
    let mut body = data[head_end + 4..].to_vec();
    assert!(
        header(&head, "transfer-encoding").is_none(),
        "a chunked message: {head}"
    );
    match header(&head, "content-length") {
        Some(length) => {
            let length: usize = length.parse().unwrap();
            while body.len() < length {
                let n = stream.read(&mut chunk).await.ok()?;
                if n == 0 {
                    return None;
                }
                body.extend_from_slice(&chunk[..n]);
            }
        }
        None => {
            stream.read_to_end(&mut body).await.ok()?;
        }
    }
    Some((head, body))
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().skip(1).find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.trim()
            .eq_ignore_ascii_case(name)
            .then_some(value.trim())
    })
}

/// `head` with `Connection: close` and the body's length, for a body of `len` bytes.
fn framed(head: &str, len: usize) -> Vec<u8> {
    let mut lines: Vec<String> = head
        .lines()
        .filter(|line| {
            let name = line
                .split_once(':')
                .map(|(k, _)| k.trim().to_ascii_lowercase());
            !matches!(name.as_deref(), Some("connection" | "content-length"))
        })
        .map(str::to_owned)
        .collect();
    lines.push("Connection: close".into());
    lines.push(format!("Content-Length: {len}"));
    format!("{}\r\n\r\n", lines.join("\r\n")).into_bytes()
}

async fn relay(
    mut inbound: TcpStream,
    upstream: u16,
    op: &'static str,
    field: &'static str,
    alter: Alter,
) {
    let Some((head, body)) = read_message(&mut inbound).await else {
        return;
    };
    let target = header(&head, "x-amz-target").map(str::to_owned);
    let mut outbound = TcpStream::connect(("127.0.0.1", upstream)).await.unwrap();
    outbound
        .write_all(&framed(&head, body.len()))
        .await
        .unwrap();
    outbound.write_all(&body).await.unwrap();
    let (answer_head, mut answer) = read_message(&mut outbound).await.unwrap();
    if target.as_deref() == Some(&format!("TrentService.{op}")) && answer_head.contains(" 200 ") {
        let mut json: serde_json::Value = serde_json::from_slice(&answer).unwrap();
        let mut bytes = STANDARD
            .decode(json[field].as_str().expect("the field to alter"))
            .unwrap();
        alter(&mut bytes);
        json[field] = STANDARD.encode(&bytes).into();
        answer = serde_json::to_vec(&json).unwrap();
    }
    let _ = inbound.write_all(&framed(&answer_head, answer.len())).await;
    let _ = inbound.write_all(&answer).await;
    let _ = inbound.shutdown().await;
}

/// A signature changed on the way from KMS (its last byte, so an ECDSA signature stays
/// well-formed DER) is refused and counted: the issuer gets an error, never a token. The same
/// key, its answers untouched, signs.
#[tokio::test(flavor = "multi_thread")]
async fn a_signature_altered_on_the_way_is_refused_never_used() {
    let moto = Emulator::moto().await;
    let direct = open(&format!("http://127.0.0.1:{}", moto.port())).await;
    let flip: Alter = Arc::new(|bytes: &mut Vec<u8>| {
        let last = bytes.last_mut().unwrap();
        *last ^= 0x01;
    });
    let proxy = Tampering::start(moto.port(), "Sign", "Signature", flip).await;
    let tampered = open(&proxy.endpoint()).await;

    for key_type in [KeyType::P256, KeyType::Rsa2048] {
        let h = KmsHolder::new(direct.clone());
        let key = h.generate(key_type, KeyPurpose::Tokens).await.unwrap();
        let arn = key.remote_key().unwrap().locator();
        let public = key.verifying_key().clone();

        let through_proxy = KmsKey::new(tampered.clone(), arn.clone(), public.clone());
        let err = through_proxy.sign(b"a.b".to_vec()).await.unwrap_err();
        assert!(matches!(err, KmsError::BadSignature { .. }), "{err:?}");
        let said = err.to_string();
        assert!(
            said.contains(&arn) && said.contains(key.kid()) && said.contains("does not verify"),
            "{said}"
        );
        assert!(!err.is_unavailable(), "{err}");

        // What the issuer signs tokens with: no signature, so no token.
        let h = KmsHolder::new(tampered.clone());
        let (locator, p) = (arn.clone(), public.clone());
        let issuer_key: SigningKey = h.open(&locator, p).unwrap();
        assert!(issuer_key.sign_detached_async("e30").await.is_err());

        let untouched = KmsKey::new(direct.clone(), arn, public);
        let signature = untouched.sign(b"a.b".to_vec()).await.unwrap();
        verify(key.verifying_key(), b"a.b", &signature);
    }
    assert_eq!(tampered.metrics().count("sign", "bad_signature"), 4);
    assert_eq!(tampered.metrics().count("sign", "ok"), 0);
    // An altered answer is an answer: KMS is reachable, and other keys sign on.
    assert!(tampered.health().is_healthy());
}

/// A `GetPublicKey` answer that is another key's is caught at generation by the challenge the
/// new key signs: nothing is recorded, and the key KMS made is scheduled for deletion without a
/// kid tag.
#[tokio::test(flavor = "multi_thread")]
async fn a_public_key_altered_on_the_way_is_never_recorded() {
    let moto = Emulator::moto().await;
    let direct = open(&format!("http://127.0.0.1:{}", moto.port())).await;
    let other = SigningKey::generate(KeyType::P256).unwrap();
    let spki = other.verifying_key().spki_der().to_vec();
    let swap: Alter = Arc::new(move |bytes: &mut Vec<u8>| bytes.clone_from(&spki));
    let proxy = Tampering::start(moto.port(), "GetPublicKey", "PublicKey", swap).await;
    let holder = KmsHolder::new(open(&proxy.endpoint()).await);

    let err = holder
        .generate_key(KeyType::P256, KeyPurpose::Tokens)
        .await
        .unwrap_err();
    let said = err.to_string();
    assert!(
        said.contains("does not verify with the public key GetPublicKey answered"),
        "{said}"
    );

    let keys = direct.client().list_keys().send().await.unwrap();
    let [made] = keys.keys() else {
        panic!("{keys:?}")
    };
    let arn = made.key_arn().unwrap();
    let meta = direct
        .client()
        .describe_key()
        .key_id(arn)
        .send()
        .await
        .unwrap();
    assert_eq!(
        meta.key_metadata().unwrap().key_state(),
        Some(&KeyState::PendingDeletion)
    );
    let tags = direct
        .client()
        .list_resource_tags()
        .key_id(arn)
        .send()
        .await
        .unwrap();
    assert!(
        tags.tags().iter().all(|t| t.tag_key() != KID_TAG),
        "{tags:?}"
    );
}
