//! Signing keys that never leave AWS KMS: the second key holder beside warrant-hsm's PKCS#11
//! token, behind the same two traits.
//!
//! - [`KmsUri`]: `aws-kms://REGION/NAME` names the region and warrant's key set there; no
//!   credentials (AWS's chain provides them).
//! - [`Kms::open`] builds the AWS SDK's KMS client with warrant's HTTPS client and clock, at
//!   the endpoint the SDK would use, from whichever source (`--kms-endpoint`, the environment,
//!   the config file), checked against one rule: plain HTTP only to loopback;
//!   every call has a deadline, a bound on calls in progress, and one retry policy
//!   (throttling retried with backoff); KMS's [`Health`] fails fast and recovers through
//!   [`Kms::run_recovery`].
//! - [`KmsKey`] is warrant-token's [`warrant_token::RemoteKey`] for a key in KMS: `Sign`
//!   (`RAW`, or `DIGEST` past KMS's 4096-byte limit), ECDSA signatures converted to JWS form.
//! - [`KmsHolder`] is warrant-keys' [`warrant_keys::KeyHolder`] for KMS: keys generated with
//!   `CreateKey`, tagged with warrant's store, their kid and (but for token keys) their purpose, vouched for by KMS itself
//!   (usage, spec, tags, public key), disabled when they retire and scheduled for deletion
//!   when they are revoked or removed, only once proven to be the recorded key (`ownership.rs`).
//!
//! ```no_run
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! use warrant_kms::{Kms, KmsConfig, KmsHolder, KmsMetrics, KmsUri, RecoveryPolicy};
//! use warrant_keys::{KeyHolder as _, KeyPurpose};
//!
//! let uri: KmsUri = "aws-kms://us-east-1/warrant-prod".parse()?;
//! let kms = Kms::open(KmsConfig::new(uri), KmsMetrics::default()).await?;
//! let recovery = tokio::spawn({
//!     let kms = kms.clone();
//!     async move { kms.run_recovery(RecoveryPolicy::default()).await }
//! });
//! let holder = KmsHolder::new(kms);
//! let key = holder.generate(warrant_token::KeyType::P256, KeyPurpose::Tokens).await?;
//! let signature = key.sign_detached_async("eyJzdWIiOiJ4In0").await?;
//! # drop((recovery, signature)); Ok(()) }
//! ```

mod client;
mod endpoint;
mod error;
mod holder;
mod http;
mod key;
mod metrics;
mod ownership;
mod revoked;
mod uri;

pub use client::{Kms, KmsConfig};
pub use endpoint::EndpointSource;
pub use error::KmsError;
pub use holder::{ADVICE, KmsHolder};
pub use key::{KmsKey, Message, RAW_MESSAGE_LIMIT, remote_sign_error, signing_algorithm};
pub use metrics::KmsMetrics;
pub use ownership::{KID_TAG, PENDING_WINDOW_DAYS, PURPOSE_TAG, STORE_TAG};
pub use uri::{KmsUri, KmsUriError, SCHEME};
pub use warrant_keys::{Health, RecoveryPolicy};
