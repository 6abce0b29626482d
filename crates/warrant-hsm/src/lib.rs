//! Signing keys that never leave a hardware security module: a PKCS#11 key store.
//!
//! - [`Pkcs11Uri`]: an RFC 7512 URI names the module, the token and (optionally) a key;
//!   `pin-value` is refused, the PIN comes from a file or an environment variable
//!   ([`PinSource`]).
//! - [`Token::open`] loads the module, finds the token by label and logs in, with one clear
//!   error for each way that can fail. [`Token::generate`] and [`Token::import_pem`] create
//!   non-extractable, sensitive keys in the token; [`Token::key`] finds one by `CKA_ID` and
//!   refuses keys that could leave it; [`Token::vouch`] says whether the token holds a key a
//!   key store lists for warrant, and [`Token::dispose`] destroys one, only if it is the
//!   recorded key (the objects that prove it, and why: `token/ownership.rs`).
//! - [`HsmKey`] signs inside the token (blocking: the device layer) and carries its public key
//!   as a [`warrant_token::VerifyingKey`], so the kid and the JWK are exactly those of a PEM key.
//! - [`Pkcs11Key`] is the key layer: warrant-token's [`warrant_token::RemoteKey`] for a key in
//!   a token, signing on the token's [`BlockingSemaphore`], never on the runtime's workers; the
//!   issuer core signs with it through [`warrant_token::SigningKey::remote`].
//! - [`Pkcs11Holder`] is warrant-keys' [`warrant_keys::KeyHolder`] for a token: a managed key
//!   set's keys are generated, vouched for, found and destroyed there, and the key store
//!   records only public keys and locators. warrant-kms is one more `RemoteKey` and `KeyHolder`.
//! - A token's sessions are a bounded pool; losing them makes the token [`Health::Unavailable`]
//!   (calls fail fast) until warrant-keys' one recovery loop ([`Token::run_recovery`]) reopens
//!   them, with backoff on tokio's clock.
//!
//! The PKCS#11 calls themselves (and their `unsafe`) are the `cryptoki` crate's; this crate
//! forbids `unsafe` like every warrant crate. Hashing for ECDSA is aws-lc's.
//!
//! ```no_run
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! use warrant_hsm::{HsmMetrics, Pkcs11Holder, Pkcs11Uri, RecoveryPolicy, Token, TokenConfig};
//! use warrant_keys::{KeyHolder, KeyPurpose};
//!
//! let uri: Pkcs11Uri = "pkcs11:token=warrant?module-path=/usr/lib/softhsm/libsofthsm2.so&pin-source=file:/run/secrets/pin".parse()?;
//! let token = tokio::task::spawn_blocking(move || {
//!     Token::open(TokenConfig::new(uri).sessions(4), HsmMetrics::default())
//! })
//! .await??;
//! let recovery = tokio::spawn({
//!     let token = token.clone();
//!     async move { token.run_recovery(RecoveryPolicy::default()).await }
//! });
//! let holder = Pkcs11Holder::new(token);
//! // On the token's blocking threads, through its semaphore.
//! let key = KeyHolder::generate(&holder, warrant_token::KeyType::P256, KeyPurpose::Tokens).await?;
//! let signature = key.sign_detached_async("eyJzdWIiOiJ4In0").await?;
//! # drop((recovery, signature)); Ok(()) }
//! ```

mod der;
mod error;
#[cfg(feature = "fault-injection")]
#[doc(hidden)]
pub mod fault;
mod holder;
mod metrics;
mod module;
mod pin;
mod remote;
mod semaphore;
mod token;
mod uri;

pub use error::{HsmError, LocatorError, Unsuitable};
pub use holder::{ADVICE, KEY_ID_LEN, Pkcs11Holder};
pub use metrics::HsmMetrics;
pub use pin::{PinError, PinSource};
pub use remote::{Pkcs11Key, remote_sign_error};
pub use semaphore::BlockingSemaphore;
pub use token::{Health, HsmKey, KeyAttributes, KeyEntry, Token, TokenConfig, object_label};
pub use uri::{ObjectType, Pkcs11Uri, UriError};
pub use warrant_keys::RecoveryPolicy;
