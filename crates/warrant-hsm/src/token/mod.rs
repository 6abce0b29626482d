//! One token: opening it, its health, and the jobs it does, one module each.
//!
//! A [`Token`] is one PKCS#11 token, opened once ([`Token::open`]: the module, the slot, the user
//! PIN) and shared by its clones. What it does is split by job, each module an `impl Token` of
//! its own:
//!
//! - `pool`: the logged-in sessions every call runs on, and how a lost one breaks the pool;
//! - `recovery`: reopening a broken pool with backoff, and probing a healthy one;
//! - `create`: keys made in the token (generated or imported), made to sign and nothing else;
//! - `objects`: finding a key's private key object and checking it is fit to sign; listing keys;
//! - `public`: reading a key's public half back from the token;
//! - `signing`: [`HsmKey`], a key found on the token, and its `C_Sign`;
//! - `ownership`: how the token vouches that a key a store lists is warrant's, and why only such
//!   a key is destroyed.
//!
//! **Keys.** A key is a private key object and a public key object sharing a `CKA_ID`. Private
//! keys are made with `CKA_TOKEN`, `CKA_PRIVATE`, `CKA_SENSITIVE` true and `CKA_EXTRACTABLE`
//! false, and sign only (`CKA_DECRYPT`, `CKA_UNWRAP`, `CKA_DERIVE` false); a key found on the
//! token is refused unless it is sensitive and not extractable, and only private key objects
//! with `CKA_PRIVATE` are ever looked at. Public key objects are `CKA_PRIVATE` too: only a
//! session with the PIN can make, see or destroy them, which is how the token vouches for a
//! key a store lists (`ownership`). warrant reads only public keys back.
//!
//! Every call here blocks (a network HSM takes milliseconds): async code goes through the
//! token's [`BlockingSemaphore`].

mod create;
mod objects;
mod ownership;
mod pool;
mod public;
mod recovery;
mod signing;
mod templates;

use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};

use cryptoki::slot::Slot;
use cryptoki::types::AuthPin;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::error::HsmError;
use crate::metrics::HsmMetrics;
use crate::module::{Entered, Module};
use crate::pin::{PinError, PinSource};
use crate::semaphore::BlockingSemaphore;
use crate::uri::Pkcs11Uri;
pub use warrant_keys::Health;

pub(crate) use objects::find;
pub use objects::{KeyAttributes, KeyEntry};
use pool::Pool;
pub(crate) use pool::Pooled;
pub(crate) use public::{PUBLIC_KEY_ATTRIBUTES, PublicObject, public_objects};
pub use signing::HsmKey;
pub use templates::object_label;

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
    semaphore: BlockingSemaphore,
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
                pool: Mutex::new(Pool::new(slot)),
                returned: Condvar::new(),
                health: watch::Sender::new(Health::Healthy),
                semaphore: BlockingSemaphore::new(config.sessions.max(1)),
                metrics,
            }),
        };
        // Open one session now, so a wrong PIN is a startup error (returned, not also logged:
        // the caller reports it once).
        let first = token.open_session_with(slot, false)?;
        token.lock().idle.push(first);
        Ok(token)
    }

    /// The token as its health names it: `token pkcs11:token=warrant`.
    pub(crate) fn health_name(&self) -> String {
        format!("token {}", self.inner.name)
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

    /// The semaphore this token's keys sign through from async code: as many permits as the
    /// token has sessions, each call on one of tokio's blocking threads.
    pub fn signing_threads(&self) -> &BlockingSemaphore {
        &self.inner.semaphore
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
