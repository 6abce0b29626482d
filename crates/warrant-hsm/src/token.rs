//! One token: a pool of logged-in sessions, the keys on it, and its recovery.
//!
//! **Sessions.** Up to `sessions` read-write sessions are opened on demand and kept; each call
//! takes one for its duration, so at most that many PKCS#11 calls run at once. The user logs in
//! once (PKCS#11 logs in the application, not a session). Every call here blocks (a network
//! HSM takes milliseconds): async code goes through [`crate::SigningThreads`].
//!
//! **Loss and recovery.** A return value that means the session, the login or the token is
//! gone (`CKR_SESSION_HANDLE_INVALID`, `CKR_DEVICE_REMOVED`, `CKR_TOKEN_NOT_PRESENT`,
//! `CKR_GENERAL_ERROR`, …) breaks the pool: every later call answers
//! [`HsmError::Unavailable`] at once, without touching the module, and [`Health`] says why.
//! [`Token::run_recovery`] then reopens with backoff (on tokio's clock), re-initializing the
//! module if the token cannot be found any more, and the pool heals without a restart. A wrong
//! or locked PIN is different: it is reported once and never tried again.
//!
//! **Keys.** A key is a private key object and a public key object sharing a `CKA_ID`. Private
//! keys are made with `CKA_TOKEN`, `CKA_PRIVATE`, `CKA_SENSITIVE` true and `CKA_EXTRACTABLE`
//! false, and sign only (`CKA_DECRYPT`, `CKA_UNWRAP`, `CKA_DERIVE` false); a key found on the
//! token is refused unless it is sensitive and not extractable, and only private key objects
//! with `CKA_PRIVATE` are ever looked at. Public key objects are `CKA_PRIVATE` too: only a
//! session with the PIN can make, see or destroy them, which is how the token vouches for a
//! key a store lists (`ownership.rs`). warrant reads only public keys back.

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use aws_lc_rs::encoding::AsDer as _;
use aws_lc_rs::{digest, rsa, signature};
use cryptoki::error::{Error as CkError, RvError};
use cryptoki::mechanism::Mechanism;
use cryptoki::object::{Attribute, AttributeType, KeyType as CkKeyType, ObjectClass, ObjectHandle};
use cryptoki::session::{Session, SessionState, UserType};
use cryptoki::slot::Slot;
use cryptoki::types::AuthPin;
use tokio::sync::watch;
use tokio::time::Instant;
use warrant_token::{Algorithm, KeyType, PemKey, VerifyingKey};

use crate::der;
use crate::error::{HsmError, Unsuitable};
use crate::metrics::HsmMetrics;
use crate::module::{Entered, Module};
use crate::pin::{PinError, PinSource};
use crate::threads::SigningThreads;
use crate::uri::Pkcs11Uri;

/// How to open a token.
#[derive(Debug, Clone)]
pub struct TokenConfig {
    uri: Pkcs11Uri,
    module: Option<PathBuf>,
    pin_env: Option<String>,
    sessions: usize,
}

impl TokenConfig {
    /// The default number of sessions: enough to keep a local or network HSM busy from a
    /// two- to eight-core host; raise it for a network HSM with high latency.
    pub const DEFAULT_SESSIONS: usize = 4;

    /// A token named by `uri`, with the module and PIN file the URI gives.
    pub fn new(uri: Pkcs11Uri) -> Self {
        TokenConfig {
            uri,
            module: None,
            pin_env: None,
            sessions: Self::DEFAULT_SESSIONS,
        }
    }

    /// The module, when the URI has no `module-path` (e.g. `--pkcs11-module`). Giving a
    /// different one from the URI's is an error at open.
    pub fn module(mut self, path: impl Into<PathBuf>) -> Self {
        self.module = Some(path.into());
        self
    }

    /// Read the user PIN from this environment variable instead of the URI's `pin-source`.
    pub fn pin_env(mut self, name: impl Into<String>) -> Self {
        self.pin_env = Some(name.into());
        self
    }

    /// At most this many sessions (at least 1), so at most this many concurrent PKCS#11 calls.
    pub fn sessions(mut self, sessions: usize) -> Self {
        self.sessions = sessions.max(1);
        self
    }
}

/// How [`Token::run_recovery`] waits.
#[derive(Debug, Clone, Copy)]
pub struct RecoveryPolicy {
    /// The first wait after a failed reopen; doubled after each failure.
    pub initial_backoff: Duration,
    /// The longest wait between reopen attempts.
    pub max_backoff: Duration,
    /// How often a healthy token is checked (`C_GetTokenInfo`, `C_GetSessionInfo`), so a
    /// token lost while idle shows in readiness before a request needs it.
    pub probe_interval: Duration,
}

impl Default for RecoveryPolicy {
    fn default() -> Self {
        RecoveryPolicy {
            initial_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(30),
            probe_interval: Duration::from_secs(10),
        }
    }
}

/// Whether a token can sign now.
#[derive(Debug, Clone)]
pub enum Health {
    /// Sessions open, logged in.
    Healthy,
    /// Not now; `cause` says why (the recovery task is working on it unless the cause is a
    /// wrong or locked PIN).
    Unavailable {
        /// The token's URI.
        token: String,
        /// What broke it.
        cause: Arc<HsmError>,
    },
}

impl Health {
    /// True when the token can sign.
    pub fn is_healthy(&self) -> bool {
        matches!(self, Health::Healthy)
    }
}

impl fmt::Display for Health {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Health::Healthy => f.write_str("healthy"),
            Health::Unavailable { token, cause } => write!(f, "token {token}: {cause}"),
        }
    }
}

/// What a key object's flags say, read back through PKCS#11.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyAttributes {
    /// `CKA_TOKEN`: stored on the token (not a session object).
    pub token: bool,
    /// `CKA_PRIVATE`: only visible after login.
    pub private: bool,
    /// `CKA_SENSITIVE`: the private value cannot be read.
    pub sensitive: bool,
    /// `CKA_EXTRACTABLE`: can be wrapped out of the token.
    pub extractable: bool,
    /// `CKA_ALWAYS_SENSITIVE`: has been sensitive since creation.
    pub always_sensitive: bool,
    /// `CKA_NEVER_EXTRACTABLE`: has never been extractable.
    pub never_extractable: bool,
    /// `CKA_SIGN`.
    pub sign: bool,
    /// `CKA_DECRYPT`: warrant's keys never decrypt.
    pub decrypt: bool,
    /// `CKA_UNWRAP`: warrant's keys never unwrap other keys into the token.
    pub unwrap: bool,
    /// `CKA_DERIVE`: warrant's keys never derive other keys.
    pub derive: bool,
}

/// A key on the token, as [`Token::list_keys`] finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyEntry {
    /// `CKA_ID`.
    pub id: Vec<u8>,
    /// `CKA_LABEL`, if UTF-8.
    pub label: Option<String>,
    /// True when the private key object exists (false once destroyed).
    pub has_private: bool,
    /// True when the public key object exists.
    pub has_public: bool,
}

/// A handle on one token. Cheap to clone; clones share the sessions.
#[derive(Clone)]
pub struct Token {
    inner: Arc<Inner>,
}

struct Inner {
    uri: Pkcs11Uri,
    name: String,
    module: Arc<Module>,
    pin: AuthPin,
    max_sessions: usize,
    pool: Mutex<Pool>,
    returned: Condvar,
    health: watch::Sender<Health>,
    metrics: HsmMetrics,
    threads: SigningThreads,
}

struct Pool {
    slot: Slot,
    idle: Vec<Pooled>,
    /// Sessions open, idle or in use.
    open: usize,
    /// Bumped when the pool breaks: sessions leased before are discarded on return.
    epoch: u64,
    broken: Option<Arc<HsmError>>,
}

pub(crate) struct Pooled {
    pub(crate) session: Session,
    generation: u64,
    epoch: u64,
    /// Private key handles found in this session, by `CKA_ID`.
    handles: HashMap<Vec<u8>, ObjectHandle>,
}

impl Pooled {
    /// Forgets the private key handle of `id` cached in this session (its object was destroyed).
    pub(crate) fn forget_handle(&mut self, id: &[u8]) {
        self.handles.remove(id);
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Token")
            .field("uri", &self.inner.name)
            .field("module", &self.inner.module.path())
            .finish_non_exhaustive()
    }
}

impl Token {
    /// Loads the module, finds the token, and logs in: every configuration error surfaces here,
    /// once, naming the URI (module missing or not a module, no such token, wrong PIN, …).
    /// Blocks.
    pub fn open(config: TokenConfig, metrics: HsmMetrics) -> Result<Token, HsmError> {
        let started = Instant::now();
        let result = Self::open_inner(config, metrics.clone());
        metrics.observe("open", &result, started);
        result
    }

    fn open_inner(config: TokenConfig, metrics: HsmMetrics) -> Result<Token, HsmError> {
        let uri = config.uri.token_uri();
        let name = uri.to_string();
        let module_path = match (config.uri.module_path(), &config.module) {
            (Some(a), Some(b)) if a != b.as_path() => {
                return Err(HsmError::ModuleConflict {
                    uri: name,
                    in_uri: a.to_path_buf(),
                    given: b.clone(),
                });
            }
            (Some(a), _) => a.to_path_buf(),
            (None, Some(b)) => b.clone(),
            (None, None) => return Err(HsmError::NoModule { uri: name }),
        };
        let source = match (config.uri.pin_source(), config.pin_env) {
            (Some(_), Some(_)) => Err(PinError::TwoSources),
            (Some(path), None) => Ok(PinSource::File(path.to_path_buf())),
            (None, Some(env)) => Ok(PinSource::Env(env)),
            (None, None) => Err(PinError::None),
        };
        let pin = source
            .and_then(|s| s.read())
            .map_err(|cause| HsmError::Pin {
                uri: name.clone(),
                cause,
            })?;
        let module = Module::load(&module_path)?;
        let slot = find_slot(&module.enter(), &uri)?;
        let token = Token {
            inner: Arc::new(Inner {
                uri,
                name,
                module,
                pin,
                max_sessions: config.sessions,
                pool: Mutex::new(Pool {
                    slot,
                    idle: Vec::new(),
                    open: 0,
                    epoch: 0,
                    broken: None,
                }),
                returned: Condvar::new(),
                health: watch::Sender::new(Health::Healthy),
                threads: SigningThreads::new(config.sessions.max(1)),
                metrics,
            }),
        };
        // Open one session now, so a wrong PIN is a startup error (returned, not also logged:
        // the caller reports it once).
        let first = token.open_session_with(slot, false)?;
        token.lock().idle.push(first);
        Ok(token)
    }

    /// The token's URI (no object, no query), as errors and health name it.
    pub fn uri(&self) -> &Pkcs11Uri {
        &self.inner.uri
    }

    /// The token's health now.
    pub fn health(&self) -> Health {
        self.inner.health.borrow().clone()
    }

    /// Follows the token's health (for readiness).
    pub fn subscribe_health(&self) -> watch::Receiver<Health> {
        self.inner.health.subscribe()
    }

    /// The bounded set of blocking threads this token's keys sign on from async code: as many
    /// as the token has sessions.
    pub fn signing_threads(&self) -> &SigningThreads {
        &self.inner.threads
    }

    /// Generates a key pair inside the token: private key `CKA_TOKEN`, `CKA_PRIVATE`,
    /// `CKA_SENSITIVE` true, `CKA_EXTRACTABLE` false, `CKA_SIGN` true and every other use false;
    /// public key `CKA_PRIVATE` too (see the module's doc); both halves with `id` and `label`
    /// (the token vouches only for keys labelled by their kid: see
    /// [`generate_labelled_by_kid`](Self::generate_labelled_by_kid)). Refuses an `id` already in
    /// use. If anything after the generation fails, both objects are destroyed again. Blocks.
    pub fn generate(&self, key_type: KeyType, id: &[u8], label: &str) -> Result<HsmKey, HsmError> {
        self.generate_labelled(key_type, id, Some(label))
    }

    /// [`generate`](Self::generate), labelling both objects with the new key's kid (known only
    /// once the token has made the key): `CKA_LABEL` is then what `warrant keys list` and the
    /// JWKS call the key. If the label cannot be set, both objects are destroyed again. Blocks.
    pub fn generate_labelled_by_kid(
        &self,
        key_type: KeyType,
        id: &[u8],
    ) -> Result<HsmKey, HsmError> {
        self.generate_labelled(key_type, id, None)
    }

    fn generate_labelled(
        &self,
        key_type: KeyType,
        id: &[u8],
        label: Option<&str>,
    ) -> Result<HsmKey, HsmError> {
        let key_uri = self.inner.uri.with_object(id, label);
        let label = label.unwrap_or_default();
        let by_kid = label.is_empty();
        self.call("generate", |s, e| {
            self.refuse_taken_id(s, id, &key_uri)?;
            let (mechanism, mut public, alg) = match key_type {
                KeyType::Rsa2048 | KeyType::Rsa3072 => {
                    let bits: u64 = if key_type == KeyType::Rsa2048 {
                        2048
                    } else {
                        3072
                    };
                    let public = vec![
                        Attribute::ModulusBits(bits.into()),
                        Attribute::PublicExponent(vec![0x01, 0x00, 0x01]),
                    ];
                    (Mechanism::RsaPkcsKeyPairGen, public, Algorithm::RS256)
                }
                KeyType::P256 | KeyType::P384 | KeyType::P521 => {
                    let alg = key_type.algorithm();
                    let params = der::ec_params(alg).ok_or(HsmError::KeyType(key_type))?;
                    (
                        Mechanism::EccKeyPairGen,
                        vec![Attribute::EcParams(params.to_vec())],
                        alg,
                    )
                }
            };
            public.extend(public_template(id, label));
            let private = private_template(id, label);
            let (pub_h, priv_h) = s
                .session
                .generate_key_pair(&mechanism, &public, &private)
                .map_err(|e| HsmError::pkcs11(&key_uri, "C_GenerateKeyPair", e))?;
            let mut key = self.finish_new_key(e, s, &key_uri, id, Some(alg), &[pub_h, priv_h])?;
            if by_kid {
                let kid = key.kid().to_owned();
                let labelled = [Attribute::Label(kid.as_bytes().to_vec())];
                for h in [pub_h, priv_h] {
                    if let Err(err) = s.session.update_attributes(h, &labelled) {
                        destroy_all(&s.session, &[pub_h, priv_h]);
                        s.handles.remove(id);
                        return Err(HsmError::pkcs11(
                            &key_uri,
                            "C_SetAttributeValue (CKA_LABEL)",
                            err,
                        ));
                    }
                }
                key.uri = Arc::new(self.inner.uri.with_object(id, Some(&kid)));
            }
            Ok(key)
        })
    }

    /// Imports a PEM private key (PKCS#8, PKCS#1 or SEC1, as warrant's key files hold them)
    /// into the token as a non-extractable, sensitive key with `id` and `label`, plus its public
    /// key, so a cluster can move an existing key (kubeadm's `sa.key`) into the HSM without
    /// breaking a token it signed. Refuses an `id` already in use; leaves no object behind on
    /// failure. The PEM's bytes are not kept. Blocks.
    pub fn import_pem(&self, pem: &[u8], id: &[u8], label: &str) -> Result<HsmKey, HsmError> {
        let signing = warrant_token::parse_pem_keys(pem)
            .map_err(HsmError::Import)?
            .into_iter()
            .find_map(|k| match k {
                PemKey::Private(k) => Some(k),
                PemKey::Public(_) => None,
            })
            .ok_or(HsmError::ImportUnsupported("the PEM holds no private key"))?;
        let alg = signing.algorithm();
        let public_key = signing.verifying_key().clone();
        let pkcs8 = signing.to_pkcs8_pem().map_err(HsmError::Import)?;
        let pkcs8 = {
            use rustls_pki_types::pem::PemObject as _;
            rustls_pki_types::PrivatePkcs8KeyDer::from_pem_slice(pkcs8.as_str().as_bytes())
                .map_err(|_| HsmError::ImportUnsupported("the key does not re-encode as PKCS#8"))?
        };
        let pkcs8 = pkcs8.secret_pkcs8_der();
        let (mut public, mut private) = match alg {
            Algorithm::RS256 => {
                let c = der::rsa_components(pkcs8)
                    .ok_or(HsmError::ImportUnsupported("the RSA key has no components"))?;
                let public = vec![
                    Attribute::KeyType(CkKeyType::RSA),
                    Attribute::Modulus(c.n.clone()),
                    Attribute::PublicExponent(c.e.clone()),
                ];
                let private = vec![
                    Attribute::KeyType(CkKeyType::RSA),
                    Attribute::Modulus(c.n),
                    Attribute::PublicExponent(c.e),
                    Attribute::PrivateExponent(c.d),
                    Attribute::Prime1(c.p),
                    Attribute::Prime2(c.q),
                    Attribute::Exponent1(c.dp),
                    Attribute::Exponent2(c.dq),
                    Attribute::Coefficient(c.qinv),
                ];
                (public, private)
            }
            Algorithm::ES256 | Algorithm::ES384 | Algorithm::ES512 => {
                let params = der::ec_params(alg)
                    .ok_or(HsmError::ImportUnsupported("unknown curve"))?
                    .to_vec();
                let len = der::coordinate_len(alg).unwrap_or_default();
                let spki = public_key.spki_der();
                let point = spki.get(spki.len().saturating_sub(2 * len + 1)..).ok_or(
                    HsmError::ImportUnsupported("the EC public key is malformed"),
                )?;
                let scalar = der::ec_private_scalar(pkcs8).ok_or(HsmError::ImportUnsupported(
                    "the EC key has no private scalar",
                ))?;
                let public = vec![
                    Attribute::KeyType(CkKeyType::EC),
                    Attribute::EcParams(params.clone()),
                    Attribute::EcPoint(der::octet_string(point)),
                ];
                let private = vec![
                    Attribute::KeyType(CkKeyType::EC),
                    Attribute::EcParams(params),
                    Attribute::Value(scalar),
                ];
                (public, private)
            }
        };
        public.push(Attribute::Class(ObjectClass::PUBLIC_KEY));
        public.extend(public_template(id, label));
        private.push(Attribute::Class(ObjectClass::PRIVATE_KEY));
        private.extend(private_template(id, label));
        let key_uri = self.inner.uri.with_object(id, Some(label));
        let key = self.call("import", |s, e| {
            self.refuse_taken_id(s, id, &key_uri)?;
            let pub_h = s
                .session
                .create_object(&public)
                .map_err(|e| HsmError::pkcs11(&key_uri, "C_CreateObject (public key)", e))?;
            let priv_h = match s.session.create_object(&private) {
                Ok(h) => h,
                Err(e) => {
                    destroy_all(&s.session, &[pub_h]);
                    return Err(HsmError::pkcs11(
                        &key_uri,
                        "C_CreateObject (private key)",
                        e,
                    ));
                }
            };
            self.finish_new_key(e, s, &key_uri, id, Some(alg), &[pub_h, priv_h])
        })?;
        debug_assert_eq!(key.verifying_key(), &public_key);
        Ok(key)
    }

    /// The key with `CKA_ID` `id`, checked: a private key object that signs, is sensitive and
    /// not extractable, RSA of 2048 to 8192 bits or EC on P-256/P-384/P-521 (and of algorithm
    /// `expected`, when given), with its public key read from the token. Blocks.
    pub fn key(&self, id: &[u8], expected: Option<Algorithm>) -> Result<HsmKey, HsmError> {
        let key_uri = self.inner.uri.with_object(id, None);
        self.call("find", |s, e| {
            self.load_key(e, s, &key_uri, id, expected, None)
        })
    }

    /// [`key`](Self::key) for a key whose public half a key store recorded as `recorded`: the
    /// public key is read from the object holding it, if several share the id. Blocks.
    pub(crate) fn recorded_key(
        &self,
        id: &[u8],
        recorded: &VerifyingKey,
    ) -> Result<HsmKey, HsmError> {
        let key_uri = self.inner.uri.with_object(id, None);
        self.call("find", |s, e| {
            self.load_key(
                e,
                s,
                &key_uri,
                id,
                Some(recorded.algorithm()),
                Some(recorded),
            )
        })
    }

    /// The public key of `id`, which stays on the token after the private key is destroyed
    /// (tokens it signed still verify until they expire). Blocks.
    pub fn public_key(&self, id: &[u8]) -> Result<VerifyingKey, HsmError> {
        let key_uri = self.inner.uri.with_object(id, None);
        self.call("find", |s, _| {
            let private = find(&s.session, ObjectClass::PRIVATE_KEY, id)
                .map_err(|err| HsmError::pkcs11(&key_uri, "C_FindObjects", err))?;
            read_public_key(s, &key_uri, id, private.first().copied(), None).map(|(key, _)| key)
        })
    }

    /// Reads the flags of `id`'s private key object. Blocks.
    pub fn key_attributes(&self, id: &[u8]) -> Result<KeyAttributes, HsmError> {
        let key_uri = self.inner.uri.with_object(id, None);
        self.call("find", |s, e| {
            let handle = self.private_handle(e, s, &key_uri, id)?;
            let attrs = s
                .session
                .get_attributes(
                    handle,
                    &[
                        AttributeType::Token,
                        AttributeType::Private,
                        AttributeType::Sensitive,
                        AttributeType::Extractable,
                        AttributeType::AlwaysSensitive,
                        AttributeType::NeverExtractable,
                        AttributeType::Sign,
                        AttributeType::Decrypt,
                        AttributeType::Unwrap,
                        AttributeType::Derive,
                    ],
                )
                .map_err(|err| HsmError::pkcs11(&key_uri, "C_GetAttributeValue", err))?;
            let mut out = KeyAttributes {
                token: false,
                private: false,
                sensitive: false,
                extractable: true,
                always_sensitive: false,
                never_extractable: false,
                sign: false,
                // Absent: a usage the token does not have for this kind of key.
                decrypt: false,
                unwrap: false,
                derive: false,
            };
            for a in attrs {
                match a {
                    Attribute::Token(v) => out.token = v,
                    Attribute::Private(v) => out.private = v,
                    Attribute::Sensitive(v) => out.sensitive = v,
                    Attribute::Extractable(v) => out.extractable = v,
                    Attribute::AlwaysSensitive(v) => out.always_sensitive = v,
                    Attribute::NeverExtractable(v) => out.never_extractable = v,
                    Attribute::Sign(v) => out.sign = v,
                    Attribute::Decrypt(v) => out.decrypt = v,
                    Attribute::Unwrap(v) => out.unwrap = v,
                    Attribute::Derive(v) => out.derive = v,
                    _ => {}
                }
            }
            Ok(out)
        })
    }

    /// The key objects on the token, by `CKA_ID`. Blocks.
    pub fn list_keys(&self) -> Result<Vec<KeyEntry>, HsmError> {
        let uri = self.inner.uri.clone();
        self.call("find", |s, _| {
            let mut entries: Vec<KeyEntry> = Vec::new();
            for class in [ObjectClass::PRIVATE_KEY, ObjectClass::PUBLIC_KEY] {
                let handles = s
                    .session
                    .find_objects(&[Attribute::Class(class)])
                    .map_err(|e| HsmError::pkcs11(&uri, "C_FindObjects", e))?;
                for h in handles {
                    let attrs = s
                        .session
                        .get_attributes(h, &[AttributeType::Id, AttributeType::Label])
                        .map_err(|e| HsmError::pkcs11(&uri, "C_GetAttributeValue", e))?;
                    let mut id = None;
                    let mut label = None;
                    for a in attrs {
                        match a {
                            Attribute::Id(v) => id = Some(v),
                            Attribute::Label(v) => label = String::from_utf8(v).ok(),
                            _ => {}
                        }
                    }
                    let Some(id) = id else { continue };
                    let pos = match entries.iter().position(|e| e.id == id) {
                        Some(pos) => pos,
                        None => {
                            entries.push(KeyEntry {
                                id,
                                label: None,
                                has_private: false,
                                has_public: false,
                            });
                            entries.len() - 1
                        }
                    };
                    if let Some(entry) = entries.get_mut(pos) {
                        if class == ObjectClass::PRIVATE_KEY {
                            entry.has_private = true;
                        } else {
                            entry.has_public = true;
                        }
                        entry.label = entry.label.take().or(label);
                    }
                }
            }
            entries.sort_by(|a, b| a.id.cmp(&b.id));
            Ok(entries)
        })
    }

    /// Signs `message` with the private key `id`: RS256 as `CKM_SHA256_RSA_PKCS` over the
    /// message; ES256/384/512 hashed here (aws-lc) and signed with `CKM_ECDSA`, whose `r || s`
    /// output is already JWS's signature format. Blocks.
    fn sign(&self, key: &HsmKey, message: &[u8]) -> Result<Vec<u8>, HsmError> {
        let (mechanism, digest) = mechanism(key.public.algorithm(), message);
        let data = digest.as_ref().map_or(message, |d| d.as_ref());
        let signature = self.call("sign", |s, e| {
            let handle = self.private_handle(e, s, &key.uri, &key.id)?;
            match s.session.sign(&mechanism, handle, data) {
                // The object went away (destroyed by another replica, or the token changed):
                // find it again once.
                Err(CkError::Pkcs11(
                    RvError::ObjectHandleInvalid | RvError::KeyHandleInvalid,
                    _,
                )) => {
                    s.handles.remove(&key.id[..]);
                    let handle = self.private_handle(e, s, &key.uri, &key.id)?;
                    s.session.sign(&mechanism, handle, data)
                }
                other => other,
            }
            .map_err(|err| HsmError::pkcs11(&key.uri, "C_Sign", err))
        })?;
        if signature.len() != key.signature_len {
            return Err(HsmError::SignatureLength {
                uri: key.uri.to_string(),
                len: signature.len(),
                expected: key.signature_len,
            });
        }
        Ok(signature)
    }

    /// Keeps the token healthy: waits until the pool breaks (or checks it every
    /// `probe_interval`), then reopens with backoff until it works. Returns only if the PIN was
    /// refused (never retried) or the runtime shuts down. Spawn it once per token and hold its
    /// handle; every time here is tokio's, so a paused test clock drives it.
    pub async fn run_recovery(&self, policy: RecoveryPolicy) {
        let mut health = self.subscribe_health();
        loop {
            if health.borrow_and_update().is_healthy() {
                tokio::select! {
                    changed = health.changed() => {
                        if changed.is_err() {
                            return;
                        }
                    }
                    () = tokio::time::sleep(policy.probe_interval) => {
                        let token = self.clone();
                        if tokio::task::spawn_blocking(move || token.probe()).await.is_err() {
                            return;
                        }
                    }
                }
                continue;
            }
            let mut delay = policy.initial_backoff;
            loop {
                if self.fatal().is_some() {
                    tracing::error!(token = %self.inner.name, "not reopening the token: its PIN was refused");
                    return;
                }
                let token = self.clone();
                let Ok(result) = tokio::task::spawn_blocking(move || token.reopen()).await else {
                    return;
                };
                match result {
                    Ok(()) => {
                        tracing::info!(token = %self.inner.name, "PKCS#11 token available again");
                        break;
                    }
                    Err(err) => {
                        tracing::warn!(token = %self.inner.name, error = %err, retry_in = ?delay, "PKCS#11 token still unavailable");
                    }
                }
                tokio::time::sleep(delay).await;
                delay = delay.saturating_mul(2).min(policy.max_backoff);
            }
        }
    }

    /// Checks a healthy token once: the token is still present and an idle session still
    /// logged in. Breaks the pool if not. Blocks.
    pub fn probe(&self) -> Result<(), HsmError> {
        let slot = {
            let pool = self.lock();
            if let Some(cause) = &pool.broken {
                return Err(self.unavailable(cause.clone()));
            }
            pool.slot
        };
        let entered = self.inner.module.enter();
        let result = match entered.ctx().get_token_info(slot) {
            Err(e) => Err(HsmError::pkcs11(&self.inner.uri, "C_GetTokenInfo", e)),
            Ok(_) => Ok(()),
        };
        drop(entered);
        if let Err(err) = result {
            if err.is_unavailable() {
                return Err(self.break_pool(err));
            }
            return Err(err);
        }
        let idle = {
            let mut pool = self.lock();
            pool.idle.pop()
        };
        if let Some(pooled) = idle {
            self.inner.metrics.session_taken();
            let entered = self.inner.module.enter();
            let state = if pooled.generation == entered.generation() {
                pooled
                    .session
                    .get_session_info()
                    .map(|i| i.session_state())
                    .map_err(|e| HsmError::pkcs11(&self.inner.uri, "C_GetSessionInfo", e))
            } else {
                Err(HsmError::Reinitialized {
                    path: self.inner.module.path().to_path_buf(),
                })
            };
            drop(entered);
            let state = match state {
                Ok(SessionState::RoUser | SessionState::RwUser) => Ok(()),
                Ok(_) => Err(HsmError::pkcs11(
                    &self.inner.uri,
                    "C_GetSessionInfo",
                    CkError::Pkcs11(
                        RvError::UserNotLoggedIn,
                        cryptoki::context::Function::GetSessionInfo,
                    ),
                )),
                Err(e) => Err(e),
            };
            match state {
                Ok(()) => self.give_back(pooled),
                Err(err) => {
                    self.inner.metrics.session_returned();
                    self.discard(pooled);
                    if err.is_unavailable() {
                        return Err(self.break_pool(err));
                    }
                    return Err(err);
                }
            }
        }
        Ok(())
    }

    /// One reopen attempt of a broken pool, counted. Blocks.
    fn reopen(&self) -> Result<(), HsmError> {
        let started = Instant::now();
        let result = self.reopen_inner();
        self.inner.metrics.observe("reopen", &result, started);
        if result.is_ok() {
            // Under the pool's lock, so a break that happened meanwhile is not overwritten.
            let pool = self.lock();
            if pool.broken.is_none() {
                self.inner.health.send_replace(Health::Healthy);
            }
        }
        result
    }

    fn reopen_inner(&self) -> Result<(), HsmError> {
        {
            let pool = self.lock();
            match &pool.broken {
                None => return Ok(()),
                Some(cause) if cause.is_fatal() => return Err(self.unavailable(cause.clone())),
                Some(_) => {}
            }
        }
        // Never hold the module entered while re-initializing it (that waits for every holder).
        let module = &self.inner.module;
        let seen = module.enter().generation();
        let found = find_slot(&module.enter(), &self.inner.uri);
        let mut slot = match found {
            Ok(slot) => slot,
            Err(_) => {
                // Modules like SoftHSM2 only find tokens at C_Initialize.
                module.reinitialize(seen)?;
                let found = find_slot(&module.enter(), &self.inner.uri);
                found?
            }
        };
        let session = match self.open_session(slot) {
            Ok(s) => s,
            Err(err) if err.is_unavailable() => {
                let seen = module.enter().generation();
                module.reinitialize(seen)?;
                let found = find_slot(&module.enter(), &self.inner.uri);
                slot = found?;
                self.open_session(slot)?
            }
            Err(err) => return Err(err),
        };
        let mut pool = self.lock();
        if let Some(cause) = pool.broken.clone().filter(|c| c.is_fatal()) {
            drop(pool);
            self.discard(session);
            return Err(self.unavailable(cause));
        }
        pool.slot = slot;
        pool.broken = None;
        let mut session = session;
        session.epoch = pool.epoch;
        pool.idle.push(session);
        drop(pool);
        self.inner.returned.notify_all();
        Ok(())
    }

    fn fatal(&self) -> Option<Arc<HsmError>> {
        self.lock().broken.clone().filter(|c| c.is_fatal())
    }

    fn lock(&self) -> MutexGuard<'_, Pool> {
        self.inner
            .pool
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn unavailable(&self, cause: Arc<HsmError>) -> HsmError {
        HsmError::Unavailable {
            token: self.inner.name.clone(),
            cause,
        }
    }

    /// Marks the pool broken with `cause` (unless already broken), drops its idle sessions,
    /// wakes waiters, and reports the health. Returns the error for the caller.
    fn break_pool(&self, cause: HsmError) -> HsmError {
        let cause = Arc::new(cause);
        let mut pool = self.lock();
        if let Some(existing) = &pool.broken
            && (existing.is_fatal() || !cause.is_fatal())
        {
            return self.unavailable(existing.clone());
        }
        pool.broken = Some(cause.clone());
        pool.epoch += 1;
        let idle = std::mem::take(&mut pool.idle);
        self.inner.health.send_replace(Health::Unavailable {
            token: self.inner.name.clone(),
            cause: cause.clone(),
        });
        drop(pool);
        for s in idle {
            self.close(s);
        }
        self.inner.returned.notify_all();
        tracing::warn!(token = %self.inner.name, error = %cause, "PKCS#11 token unavailable");
        self.unavailable(cause)
    }

    /// Opens a session on `slot` and makes sure the user is logged in. A refused PIN breaks the
    /// pool for good.
    fn open_session(&self, slot: Slot) -> Result<Pooled, HsmError> {
        self.open_session_with(slot, true)
    }

    /// [`open_session`](Self::open_session); `record_fatal` false at open, where a refused
    /// PIN is simply the error of [`Token::open`] (no pool to break, nothing to log).
    fn open_session_with(&self, slot: Slot, record_fatal: bool) -> Result<Pooled, HsmError> {
        let uri = &self.inner.uri;
        let entered = self.inner.module.enter();
        let session = entered
            .ctx()
            .open_rw_session_no_drop(slot)
            .map_err(|e| HsmError::pkcs11(uri, "C_OpenSession", e))?;
        let pooled = Pooled {
            session,
            generation: entered.generation(),
            epoch: 0,
            handles: HashMap::new(),
        };
        let logged_in = matches!(
            pooled.session.get_session_info().map(|i| i.session_state()),
            Ok(SessionState::RoUser | SessionState::RwUser)
        );
        let login = if logged_in {
            Ok(())
        } else {
            let started = Instant::now();
            let result = match pooled.session.login(UserType::User, Some(&self.inner.pin)) {
                Ok(()) | Err(CkError::Pkcs11(RvError::UserAlreadyLoggedIn, _)) => Ok(()),
                Err(CkError::Pkcs11(
                    rv @ (RvError::PinIncorrect
                    | RvError::PinInvalid
                    | RvError::PinLenRange
                    | RvError::PinExpired),
                    _,
                )) => Err(HsmError::WrongPin {
                    uri: uri.to_string(),
                    code: match rv {
                        RvError::PinIncorrect => "CKR_PIN_INCORRECT",
                        RvError::PinInvalid => "CKR_PIN_INVALID",
                        RvError::PinLenRange => "CKR_PIN_LEN_RANGE",
                        _ => "CKR_PIN_EXPIRED",
                    },
                }),
                Err(CkError::Pkcs11(RvError::PinLocked, _)) => Err(HsmError::PinLocked {
                    uri: uri.to_string(),
                }),
                Err(e) => Err(HsmError::pkcs11(uri, "C_Login", e)),
            };
            self.inner.metrics.observe("login", &result, started);
            result
        };
        drop(entered);
        match login {
            Ok(()) => {
                self.lock().open += 1;
                self.inner.metrics.session_opened();
                Ok(pooled)
            }
            Err(err) => {
                let entered = self.inner.module.enter();
                if entered.generation() == pooled.generation {
                    let _ = pooled.session.close();
                }
                drop(entered);
                if record_fatal && let Some(shown) = err.clone_fatal() {
                    // Record it so nothing tries the PIN again, and answer with the cause
                    // itself: this is the error the operator must see.
                    self.break_pool(err);
                    return Err(shown);
                }
                Err(err)
            }
        }
    }

    /// Takes a session: an idle one, a new one while fewer than the maximum are open, or the
    /// next one returned.
    fn checkout(&self) -> Result<Pooled, HsmError> {
        let mut pool = self.lock();
        loop {
            if let Some(cause) = &pool.broken {
                return Err(self.unavailable(cause.clone()));
            }
            if let Some(s) = pool.idle.pop() {
                self.inner.metrics.session_taken();
                return Ok(s);
            }
            if pool.open < self.inner.max_sessions {
                let (slot, epoch) = (pool.slot, pool.epoch);
                // Reserve the place while opening, without holding the lock.
                pool.open += 1;
                drop(pool);
                let opened = self.open_session(slot);
                let mut pool = self.lock();
                pool.open -= 1; // open_session counted it again on success
                drop(pool);
                return match opened {
                    Ok(mut s) => {
                        s.epoch = epoch;
                        self.inner.metrics.session_taken();
                        Ok(s)
                    }
                    Err(err)
                        if err.is_unavailable() && !matches!(err, HsmError::Unavailable { .. }) =>
                    {
                        Err(self.break_pool(err))
                    }
                    Err(err) => Err(err),
                };
            }
            pool = self
                .inner
                .returned
                .wait(pool)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Returns a session to the pool, or closes it if the pool broke since it was taken.
    fn give_back(&self, session: Pooled) {
        let mut pool = self.lock();
        if pool.broken.is_none() && session.epoch == pool.epoch {
            pool.idle.push(session);
            drop(pool);
            self.inner.metrics.session_returned();
            self.inner.returned.notify_one();
        } else {
            drop(pool);
            self.inner.metrics.session_returned();
            self.discard(session);
        }
    }

    /// Forgets a session (closing it if it is still valid).
    fn discard(&self, session: Pooled) {
        self.close(session);
        self.inner.returned.notify_one();
    }

    fn close(&self, session: Pooled) {
        {
            let mut pool = self.lock();
            pool.open = pool.open.saturating_sub(1);
        }
        self.inner.metrics.session_closed();
        let entered = self.inner.module.enter();
        if entered.generation() == session.generation {
            let _ = session.session.close();
        }
        // Otherwise the handle belongs to a finished initialization and may now name another
        // session: never close it (the Session was opened without close-on-drop).
    }

    /// Runs `f` with a session held and the module entered; breaks the pool if `f` reports a
    /// lost session; counts the operation.
    pub(crate) fn call<T>(
        &self,
        op: &'static str,
        f: impl FnOnce(&mut Pooled, &Entered<'_>) -> Result<T, HsmError>,
    ) -> Result<T, HsmError> {
        let started = Instant::now();
        let result = self.call_inner(f);
        self.inner.metrics.observe(op, &result, started);
        result
    }

    fn call_inner<T>(
        &self,
        f: impl FnOnce(&mut Pooled, &Entered<'_>) -> Result<T, HsmError>,
    ) -> Result<T, HsmError> {
        let mut session = self.checkout()?;
        let entered = self.inner.module.enter();
        if entered.generation() != session.generation {
            drop(entered);
            self.inner.metrics.session_returned();
            self.discard(session);
            return Err(self.break_pool(HsmError::Reinitialized {
                path: self.inner.module.path().to_path_buf(),
            }));
        }
        let result = f(&mut session, &entered);
        drop(entered);
        match result {
            Err(err) if err.is_unavailable() && !matches!(err, HsmError::Unavailable { .. }) => {
                self.inner.metrics.session_returned();
                self.discard(session);
                Err(self.break_pool(err))
            }
            other => {
                self.give_back(session);
                other
            }
        }
    }

    fn refuse_taken_id(&self, s: &Pooled, id: &[u8], key_uri: &Pkcs11Uri) -> Result<(), HsmError> {
        let taken = s
            .session
            .find_objects(&[Attribute::Id(id.to_vec())])
            .map_err(|e| HsmError::pkcs11(key_uri, "C_FindObjects", e))?;
        if taken.is_empty() {
            Ok(())
        } else {
            Err(HsmError::ObjectExists {
                uri: key_uri.to_string(),
            })
        }
    }

    /// After a key's objects exist: check and load it; destroy them if that fails.
    fn finish_new_key(
        &self,
        e: &Entered<'_>,
        s: &mut Pooled,
        key_uri: &Pkcs11Uri,
        id: &[u8],
        expected: Option<Algorithm>,
        created: &[ObjectHandle],
    ) -> Result<HsmKey, HsmError> {
        #[cfg(feature = "fault-injection")]
        if crate::fault::fail_after_create() {
            destroy_all(&s.session, created);
            return Err(HsmError::ImportUnsupported(
                "injected failure after the objects were created",
            ));
        }
        match self.load_key(e, s, key_uri, id, expected, None) {
            Ok(key) => Ok(key),
            Err(err) => {
                destroy_all(&s.session, created);
                s.handles.remove(id);
                Err(err)
            }
        }
    }

    /// Fails if the token is gone. A token that vanished finds no objects (SoftHSM2), so a
    /// search that found nothing asks this before concluding that nothing is there.
    pub(crate) fn confirm_present(&self, entered: &Entered<'_>) -> Result<(), HsmError> {
        let slot = self.lock().slot;
        entered
            .ctx()
            .get_token_info(slot)
            .map(drop)
            .map_err(|e| HsmError::pkcs11(&self.inner.uri, "C_GetTokenInfo", e))
    }

    /// The private key handle of `id` in this session (cached), or why not.
    fn private_handle(
        &self,
        entered: &Entered<'_>,
        s: &mut Pooled,
        key_uri: &Pkcs11Uri,
        id: &[u8],
    ) -> Result<ObjectHandle, HsmError> {
        if let Some(&h) = s.handles.get(id) {
            return Ok(h);
        }
        let found = find(&s.session, ObjectClass::PRIVATE_KEY, id)
            .map_err(|e| HsmError::pkcs11(key_uri, "C_FindObjects", e))?;
        match found.as_slice() {
            [h] => {
                s.handles.insert(id.to_vec(), *h);
                Ok(*h)
            }
            [] => {
                self.confirm_present(entered)?;
                Err(HsmError::ObjectMissing {
                    uri: key_uri.to_string(),
                    what: "private key",
                })
            }
            _ => Err(HsmError::DuplicateId {
                uri: key_uri.to_string(),
                count: found.len(),
            }),
        }
    }

    fn load_key(
        &self,
        e: &Entered<'_>,
        s: &mut Pooled,
        key_uri: &Pkcs11Uri,
        id: &[u8],
        expected: Option<Algorithm>,
        recorded: Option<&VerifyingKey>,
    ) -> Result<HsmKey, HsmError> {
        let handle = self.private_handle(e, s, key_uri, id)?;
        let attrs = s
            .session
            .get_attributes(
                handle,
                &[
                    AttributeType::KeyType,
                    AttributeType::Sign,
                    AttributeType::Extractable,
                    AttributeType::Sensitive,
                    AttributeType::EcParams,
                    AttributeType::Label,
                ],
            )
            .map_err(|err| HsmError::pkcs11(key_uri, "C_GetAttributeValue", err))?;
        let (mut key_type, mut sign, mut extractable, mut sensitive) = (None, false, true, false);
        let (mut params, mut label) = (None, None);
        for a in attrs {
            match a {
                Attribute::KeyType(t) => key_type = Some(t),
                Attribute::Sign(v) => sign = v,
                Attribute::Extractable(v) => extractable = v,
                Attribute::Sensitive(v) => sensitive = v,
                Attribute::EcParams(v) => params = Some(v),
                Attribute::Label(v) => label = String::from_utf8(v).ok(),
                _ => {}
            }
        }
        let key_uri = self.inner.uri.with_object(id, label.as_deref());
        let unsuitable = |problem| HsmError::Unsuitable {
            uri: key_uri.to_string(),
            problem,
        };
        if extractable {
            return Err(unsuitable(Unsuitable::Extractable));
        }
        if !sensitive {
            return Err(unsuitable(Unsuitable::NotSensitive));
        }
        if !sign {
            return Err(unsuitable(Unsuitable::CannotSign));
        }
        let alg = match key_type {
            Some(t) if t == CkKeyType::RSA => Algorithm::RS256,
            Some(t) if t == CkKeyType::EC => params
                .as_deref()
                .and_then(der::ec_algorithm)
                .ok_or_else(|| unsuitable(Unsuitable::Curve))?,
            _ => return Err(unsuitable(Unsuitable::KeyType)),
        };
        if let Some(expected) = expected
            && expected != alg
        {
            return Err(unsuitable(Unsuitable::Algorithm {
                expected,
                found: alg,
            }));
        }
        let (public, signature_len) = read_public_key(s, &key_uri, id, Some(handle), recorded)?;
        if public.algorithm() != alg {
            return Err(unsuitable(Unsuitable::Algorithm {
                expected: alg,
                found: public.algorithm(),
            }));
        }
        Ok(HsmKey {
            token: self.clone(),
            id: Arc::from(id),
            uri: Arc::new(key_uri),
            public,
            signature_len,
        })
    }
}

/// Attributes of every public key warrant creates. `CKA_PRIVATE`: only a logged-in session
/// (one with the PIN) can create, see or destroy it, which is what makes it the token's proof
/// that warrant holds the key (see `ownership.rs`); it verifies and does nothing else.
pub(crate) fn public_template(id: &[u8], label: &str) -> Vec<Attribute> {
    vec![
        Attribute::Token(true),
        Attribute::Private(true),
        Attribute::Verify(true),
        Attribute::Encrypt(false),
        Attribute::Wrap(false),
        Attribute::Id(id.to_vec()),
        Attribute::Label(label.as_bytes().to_vec()),
    ]
}

/// Attributes of every private key warrant creates: it stays in the token, and it signs and does
/// nothing else (SoftHSM2 and others let a generated key decrypt, unwrap and derive by default).
fn private_template(id: &[u8], label: &str) -> Vec<Attribute> {
    vec![
        Attribute::Token(true),
        Attribute::Private(true),
        Attribute::Sensitive(true),
        Attribute::Extractable(false),
        Attribute::Sign(true),
        Attribute::Decrypt(false),
        Attribute::Unwrap(false),
        Attribute::Derive(false),
        Attribute::Id(id.to_vec()),
        Attribute::Label(label.as_bytes().to_vec()),
    ]
}

/// The objects of `class` with `CKA_ID` `id`. Private key objects only if `CKA_PRIVATE`: one a
/// session without the PIN made is not warrant's, whatever id it claims.
pub(crate) fn find(
    session: &Session,
    class: ObjectClass,
    id: &[u8],
) -> Result<Vec<ObjectHandle>, CkError> {
    let mut template = vec![Attribute::Class(class), Attribute::Id(id.to_vec())];
    if class == ObjectClass::PRIVATE_KEY {
        template.push(Attribute::Private(true));
    }
    session.find_objects(&template)
}

fn destroy_all(session: &Session, handles: &[ObjectHandle]) {
    for &h in handles {
        if let Err(err) = session.destroy_object(h) {
            tracing::error!(error = %err, "could not destroy a key object after a failed creation");
        }
    }
}

/// The slot holding the token `uri` names.
fn find_slot(entered: &Entered<'_>, uri: &Pkcs11Uri) -> Result<Slot, HsmError> {
    let ctx = entered.ctx();
    let slots = ctx
        .get_slots_with_token()
        .map_err(|e| HsmError::pkcs11(uri, "C_GetSlotList", e))?;
    let mut present = Vec::new();
    let mut matching = Vec::new();
    for slot in slots {
        if uri.slot_id().is_some_and(|id| id != slot.id()) {
            continue;
        }
        let Ok(info) = ctx.get_token_info(slot) else {
            continue;
        };
        if !info.token_initialized() {
            continue;
        }
        if uri.matches_token(
            info.label(),
            info.manufacturer_id(),
            info.model(),
            info.serial_number(),
        ) {
            matching.push(slot);
        }
        present.push(info.label().trim_end_matches(' ').to_owned());
    }
    match matching.as_slice() {
        [slot] => Ok(*slot),
        [] => Err(HsmError::NoToken {
            uri: uri.to_string(),
            present,
        }),
        _ => Err(HsmError::AmbiguousToken {
            uri: uri.to_string(),
            count: matching.len(),
        }),
    }
}

/// A key in a token: a reference (`CKA_ID`) and its public key, read from the token. Signing
/// happens in the token. Cheap to clone. `Debug` shows the kid and the URI.
#[derive(Clone)]
pub struct HsmKey {
    token: Token,
    id: Arc<[u8]>,
    uri: Arc<Pkcs11Uri>,
    public: VerifyingKey,
    signature_len: usize,
}

impl fmt::Debug for HsmKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HsmKey")
            .field("kid", &self.public.kid())
            .field("uri", &self.uri.to_string())
            .finish()
    }
}

impl HsmKey {
    /// The key's `CKA_ID`.
    pub fn id(&self) -> &[u8] {
        &self.id
    }

    /// The key's URI (token, `id`, and `object` label when known).
    pub fn uri(&self) -> &Pkcs11Uri {
        &self.uri
    }

    /// The public key, with the kid kube-apiserver's rule gives it.
    pub fn verifying_key(&self) -> &VerifyingKey {
        &self.public
    }

    /// The key ID.
    pub fn kid(&self) -> &str {
        self.public.kid()
    }

    /// The token the key is on.
    pub fn token(&self) -> &Token {
        &self.token
    }

    /// Signs `signing_input` (a JWS's `header.payload`) in the token, returning the JWS
    /// signature bytes. Blocks: from async code use [`crate::Pkcs11Key`].
    pub fn sign(&self, signing_input: &[u8]) -> Result<Vec<u8>, HsmError> {
        self.token.sign(self, signing_input)
    }
}

/// How a key of `alg` signs `message` in a token: the mechanism, and the digest to sign when
/// the mechanism does not hash (ECDSA; hashed here with aws-lc), else `message` itself.
pub(crate) fn mechanism(
    alg: Algorithm,
    message: &[u8],
) -> (Mechanism<'static>, Option<digest::Digest>) {
    match alg {
        Algorithm::RS256 => (Mechanism::Sha256RsaPkcs, None),
        Algorithm::ES256 => (
            Mechanism::Ecdsa,
            Some(digest::digest(&digest::SHA256, message)),
        ),
        Algorithm::ES384 => (
            Mechanism::Ecdsa,
            Some(digest::digest(&digest::SHA384, message)),
        ),
        Algorithm::ES512 => (
            Mechanism::Ecdsa,
            Some(digest::digest(&digest::SHA512, message)),
        ),
    }
}

/// A public key object on the token, read.
pub(crate) struct PublicObject {
    pub(crate) handle: ObjectHandle,
    /// `CKA_PRIVATE`: made by a logged-in session.
    pub(crate) private: bool,
    /// `CKA_LABEL`, if UTF-8.
    pub(crate) label: Option<String>,
    pub(crate) key: VerifyingKey,
    pub(crate) signature_len: usize,
}

/// Every public key object with `CKA_ID` `id` that holds a key warrant can use, with its
/// `CKA_PRIVATE` and label. Objects that do not parse are skipped: a session without the PIN
/// can create public objects under any id, and such an object must not stop warrant; the
/// first one's error is returned only if none parses.
pub(crate) fn public_objects(
    s: &Pooled,
    key_uri: &Pkcs11Uri,
    id: &[u8],
) -> Result<(Vec<PublicObject>, Option<HsmError>), HsmError> {
    let handles = find(&s.session, ObjectClass::PUBLIC_KEY, id)
        .map_err(|e| HsmError::pkcs11(key_uri, "C_FindObjects", e))?;
    let mut objects = Vec::with_capacity(handles.len());
    let mut first_error = None;
    for handle in handles {
        let flags = s
            .session
            .get_attributes(handle, &[AttributeType::Private, AttributeType::Label])
            .map_err(|e| HsmError::pkcs11(key_uri, "C_GetAttributeValue", e))?;
        let (mut private, mut label) = (false, None);
        for a in flags {
            match a {
                Attribute::Private(v) => private = v,
                Attribute::Label(v) => label = String::from_utf8(v).ok(),
                _ => {}
            }
        }
        match read_key_object(s, key_uri, handle) {
            Ok((key, signature_len)) => objects.push(PublicObject {
                handle,
                private,
                label,
                key,
                signature_len,
            }),
            Err(err) => {
                first_error.get_or_insert(err);
            }
        }
    }
    Ok((objects, first_error))
}

/// The public key of `id` as a [`VerifyingKey`] (so the kid is exactly the rule of keys
/// loaded from PEM), and the length of the key's signatures. Read from a public key object:
/// the one holding `recorded` if given, else preferably one made by a logged-in session
/// (`CKA_PRIVATE`: warrant makes them so; keys made before, or by other tools, have public
/// ones); for RSA, the private key object's public attributes do when there is none.
fn read_public_key(
    s: &Pooled,
    key_uri: &Pkcs11Uri,
    id: &[u8],
    private: Option<ObjectHandle>,
    recorded: Option<&VerifyingKey>,
) -> Result<(VerifyingKey, usize), HsmError> {
    let (mut objects, error) = public_objects(s, key_uri, id)?;
    objects.sort_by_key(|o| !o.private);
    let chosen = match recorded {
        Some(recorded) => objects
            .iter()
            .position(|o| &o.key == recorded)
            .or((!objects.is_empty()).then_some(0)),
        None => (!objects.is_empty()).then_some(0),
    };
    if let Some(chosen) = chosen {
        let object = objects.swap_remove(chosen);
        return Ok((object.key, object.signature_len));
    }
    if let Some(error) = error {
        return Err(error);
    }
    let source = private.ok_or_else(|| HsmError::ObjectMissing {
        uri: key_uri.to_string(),
        what: "public key",
    })?;
    read_key_object(s, key_uri, source)
}

/// The attributes that make up a public key: its type, and RSA's modulus and exponent or EC's
/// curve and point.
pub(crate) const PUBLIC_KEY_ATTRIBUTES: [AttributeType; 5] = [
    AttributeType::KeyType,
    AttributeType::Modulus,
    AttributeType::PublicExponent,
    AttributeType::EcParams,
    AttributeType::EcPoint,
];

/// The public key an object holds (a public key object, or an RSA private key object's public
/// attributes), and the length of its signatures.
pub(crate) fn read_key_object(
    s: &Pooled,
    key_uri: &Pkcs11Uri,
    source: ObjectHandle,
) -> Result<(VerifyingKey, usize), HsmError> {
    let missing = || HsmError::ObjectMissing {
        uri: key_uri.to_string(),
        what: "public key",
    };
    let attrs = s
        .session
        .get_attributes(source, &PUBLIC_KEY_ATTRIBUTES)
        .map_err(|e| HsmError::pkcs11(key_uri, "C_GetAttributeValue", e))?;
    let (mut key_type, mut n, mut e, mut params, mut point) = (None, None, None, None, None);
    for a in attrs {
        match a {
            Attribute::KeyType(t) => key_type = Some(t),
            Attribute::Modulus(v) => n = Some(v),
            Attribute::PublicExponent(v) => e = Some(v),
            Attribute::EcParams(v) => params = Some(v),
            Attribute::EcPoint(v) => point = Some(v),
            _ => {}
        }
    }
    let unsuitable = |problem| HsmError::Unsuitable {
        uri: key_uri.to_string(),
        problem,
    };
    let parsed = match key_type {
        Some(t) if t == CkKeyType::RSA => {
            let (Some(n), Some(e)) = (n, e) else {
                return Err(missing());
            };
            let n: Vec<u8> = n.iter().copied().skip_while(|&b| b == 0).collect();
            let bits = n
                .first()
                .map_or(0, |b| n.len() * 8 - b.leading_zeros() as usize);
            if !(2048..=8192).contains(&bits) {
                return Err(unsuitable(Unsuitable::RsaSize(bits)));
            }
            let len = n.len();
            let key = rsa::PublicKeyComponents { n, e }
                .to_parsed_public_key(&signature::RSA_PKCS1_2048_8192_SHA256)
                .map_err(|_| unsuitable(Unsuitable::KeyType))?;
            (key, len)
        }
        Some(t) if t == CkKeyType::EC => {
            let alg = params
                .as_deref()
                .and_then(der::ec_algorithm)
                .ok_or_else(|| unsuitable(Unsuitable::Curve))?;
            let coordinate =
                der::coordinate_len(alg).ok_or_else(|| unsuitable(Unsuitable::Curve))?;
            let value = point.ok_or_else(missing)?;
            let point = der::ec_point(&value, coordinate).ok_or_else(|| HsmError::PublicKey {
                uri: key_uri.to_string(),
                cause: warrant_token::KeyError::Crypto("read CKA_EC_POINT"),
            })?;
            let verification: &'static signature::EcdsaVerificationAlgorithm = match alg {
                Algorithm::ES384 => &signature::ECDSA_P384_SHA384_FIXED,
                Algorithm::ES512 => &signature::ECDSA_P521_SHA512_FIXED,
                _ => &signature::ECDSA_P256_SHA256_FIXED,
            };
            let key = signature::ParsedPublicKey::new(verification, point).map_err(|_| {
                HsmError::PublicKey {
                    uri: key_uri.to_string(),
                    cause: warrant_token::KeyError::Crypto("parse the EC point"),
                }
            })?;
            (key, 2 * coordinate)
        }
        _ => return Err(unsuitable(Unsuitable::KeyType)),
    };
    let (key, signature_len) = parsed;
    let spki = key.as_der().map_err(|_| HsmError::PublicKey {
        uri: key_uri.to_string(),
        cause: warrant_token::KeyError::Crypto("encode a public key"),
    })?;
    let public =
        VerifyingKey::from_spki_der(spki.as_ref()).map_err(|cause| HsmError::PublicKey {
            uri: key_uri.to_string(),
            cause,
        })?;
    Ok((public, signature_len))
}
