//! What can go wrong with a PKCS#11 key store, each with a message an operator can act on: it
//! names the module, the token URI or the key's URI, and the PKCS#11 return code (`CKR_…`).
//! No message carries a PIN or key material.

use std::path::PathBuf;
use std::sync::Arc;

use cryptoki::error::{Error as CkError, RvError};

use crate::pin::PinError;
use crate::uri::UriError;

/// An error from the PKCS#11 key store.
#[derive(Debug, thiserror::Error)]
pub enum HsmError {
    /// The URI does not parse or is refused.
    #[error(transparent)]
    Uri(#[from] UriError),
    /// Neither the URI nor the configuration names a module.
    #[error("{uri}: no PKCS#11 module: give module-path in the URI or the module path separately")]
    NoModule {
        /// The token's URI.
        uri: String,
    },
    /// The PIN could not be read.
    #[error("{uri}: {cause}")]
    Pin {
        /// The token's URI.
        uri: String,
        /// Why.
        #[source]
        cause: PinError,
    },
    /// The module file does not exist.
    #[error("PKCS#11 module {path}: no such file")]
    ModuleNotFound {
        /// The module path.
        path: PathBuf,
    },
    /// The file exists but is not a loadable PKCS#11 module.
    #[error(
        "PKCS#11 module {path} is not a PKCS#11 module (it does not load, or has no C_GetFunctionList): {cause}"
    )]
    NotAModule {
        /// The module path.
        path: PathBuf,
        /// The loader's error.
        #[source]
        cause: CkError,
    },
    /// `C_Initialize` failed.
    #[error("PKCS#11 module {path}: C_Initialize failed ({code})")]
    ModuleInit {
        /// The module path.
        path: PathBuf,
        /// The `CKR_…` name.
        code: String,
        /// The module's error.
        #[source]
        cause: CkError,
    },
    /// No token matches the URI.
    #[error("{uri}: no token with that label; the module has tokens {present:?}")]
    NoToken {
        /// The token's URI.
        uri: String,
        /// The labels of the tokens present.
        present: Vec<String>,
    },
    /// More than one token matches the URI.
    #[error("{uri}: {count} tokens match; add serial=… to the URI to say which")]
    AmbiguousToken {
        /// The token's URI.
        uri: String,
        /// How many matched.
        count: usize,
    },
    /// The token refused the PIN. Never retried: tokens lock after a few wrong PINs.
    #[error(
        "{uri}: the token refused the user PIN ({code}); warrant does not try it again, because tokens lock after a few wrong PINs: fix the PIN and restart"
    )]
    WrongPin {
        /// The token's URI.
        uri: String,
        /// `CKR_PIN_INCORRECT`, `CKR_PIN_INVALID`, `CKR_PIN_LEN_RANGE` or `CKR_PIN_EXPIRED`.
        code: &'static str,
    },
    /// The PIN is locked after too many wrong tries.
    #[error(
        "{uri}: the user PIN is locked (CKR_PIN_LOCKED): the token's security officer must unlock or reset it"
    )]
    PinLocked {
        /// The token's URI.
        uri: String,
    },
    /// No object with that id.
    #[error("{uri}: no {what} object with this CKA_ID on the token")]
    ObjectMissing {
        /// The key's URI.
        uri: String,
        /// `private key` or `public key`.
        what: &'static str,
    },
    /// The token does not vouch for a key a key store says it holds (see `token/ownership.rs`).
    #[error("{uri}: the token holds no key {kid} made for warrant: {reason}")]
    NotHeld {
        /// The key's URI, as the store names it.
        uri: String,
        /// The key the store claims.
        kid: String,
        /// Why not.
        reason: String,
    },
    /// The PKCS#11 module could be replaced by someone other than its owner: whoever can write
    /// it (or a directory above it) runs code in warrant, with the PIN.
    #[error(
        "PKCS#11 module {path}: {culprit} {problem}: whoever can change it runs code inside warrant, with the token's PIN. Make it and every directory above it writable by their owner only, owned by root or by warrant's user"
    )]
    ModuleUnsafe {
        /// The module path, as configured.
        path: PathBuf,
        /// The file or directory at fault.
        culprit: PathBuf,
        /// What is wrong with it.
        problem: String,
    },
    /// Creating a key whose id is already taken.
    #[error(
        "{uri}: the token already holds an object with this CKA_ID; refusing to create a second key with the same id"
    )]
    ObjectExists {
        /// The key's URI.
        uri: String,
    },
    /// The object exists but must not or cannot sign tokens.
    #[error("{uri}: the key cannot be used: {problem}")]
    Unsuitable {
        /// The key's URI.
        uri: String,
        /// What is wrong.
        problem: Unsuitable,
    },
    /// The public key read from the token does not parse as a key warrant can publish.
    #[error("{uri}: the public key on the token is not usable: {cause}")]
    PublicKey {
        /// The key's URI.
        uri: String,
        /// Why.
        #[source]
        cause: warrant_token::KeyError,
    },
    /// A PEM key to import does not parse or is of a kind that cannot be imported.
    #[error("the key to import: {0}")]
    Import(#[source] warrant_token::KeyError),
    /// The key to import is of a kind warrant does not import.
    #[error("the key to import: {0}")]
    ImportUnsupported(&'static str),
    /// A key type warrant does not generate in a token.
    #[error("{0:?} keys are not generated in a token (use RSA 2048/3072, P-256, P-384 or P-521)")]
    KeyType(warrant_token::KeyType),
    /// The token cannot be used now: its sessions were lost and are being reopened.
    #[error("{token} is unavailable: {cause}")]
    Unavailable {
        /// The token's URI.
        token: String,
        /// What broke it (the same value the health report shows).
        #[source]
        cause: Arc<HsmError>,
    },
    /// The module returned a signature of the wrong length.
    #[error("{uri}: the token returned a {len}-byte signature, expected {expected}")]
    SignatureLength {
        /// The key's URI.
        uri: String,
        /// What came back.
        len: usize,
        /// What the algorithm produces.
        expected: usize,
    },
    /// The URI's `module-path` and the separately given module differ.
    #[error(
        "{uri}: the URI's module-path {in_uri} and the module given separately, {given}, differ: give one"
    )]
    ModuleConflict {
        /// The token's URI.
        uri: String,
        /// The URI's `module-path`.
        in_uri: PathBuf,
        /// The module given separately.
        given: PathBuf,
    },
    /// Another handle on the same module re-initialized it, which closed this handle's
    /// sessions; they are reopened.
    #[error("PKCS#11 module {path} was re-initialized to recover a token; reopening sessions")]
    Reinitialized {
        /// The module path.
        path: PathBuf,
    },
    /// Several private keys share the `CKA_ID`: which one signs would be the module's choice.
    #[error(
        "{uri}: {count} private key objects have this CKA_ID; a key's id must be unique on the token"
    )]
    DuplicateId {
        /// The key's URI.
        uri: String,
        /// How many.
        count: usize,
    },
    /// A key store's locator does not name a key on this token.
    #[error(transparent)]
    Locator(#[from] LocatorError),
    /// The blocking thread a PKCS#11 call ran on panicked, or was cancelled at shutdown.
    #[error("the thread running a PKCS#11 call failed: {0}")]
    Thread(#[source] tokio::task::JoinError),
    /// The signing threads were shut down.
    #[error("the PKCS#11 signing threads are shut down")]
    ThreadsClosed(#[source] tokio::sync::AcquireError),
    /// The system's random generator failed (making a new key's `CKA_ID`).
    #[error("the random generator failed to make a key id")]
    Random,
    /// A PKCS#11 call failed.
    #[error("{uri}: {op} failed ({code})")]
    Pkcs11 {
        /// The token's or key's URI.
        uri: String,
        /// What warrant was doing (`C_Sign`, `open a session`, …).
        op: &'static str,
        /// The `CKR_…` name.
        code: String,
        /// The module's error.
        #[source]
        cause: CkError,
    },
}

/// Why a key store's locator (`pkcs11:token=…;type=private;id=…`) does not name a key here.
/// A locator that does not parse is not quoted (a corrupted store could hold anything).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LocatorError {
    /// The locator is not a PKCS#11 URI warrant accepts.
    #[error("a key locator in the store is not a usable PKCS#11 URI: {0}")]
    Parse(#[source] UriError),
    /// The locator names no object.
    #[error("key locator {0} has no id=")]
    NoId(String),
    /// The locator names another token than the one warrant was started with.
    #[error("key locator {locator} is on another token than {token}")]
    OtherToken {
        /// The locator.
        locator: String,
        /// The token warrant uses.
        token: String,
    },
    /// The key is not held in a PKCS#11 token at all.
    #[error("the key is not held in a PKCS#11 token")]
    NotHeld,
}

/// What is wrong with a key object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unsuitable {
    /// `CKA_EXTRACTABLE` is true: the key can be exported in the clear or wrapped.
    #[error("CKA_EXTRACTABLE is true (a signing key must never leave the token)")]
    Extractable,
    /// `CKA_SENSITIVE` is false: the private value can be read.
    #[error("CKA_SENSITIVE is false (its private value can be read from the token)")]
    NotSensitive,
    /// `CKA_SIGN` is false.
    #[error("CKA_SIGN is false")]
    CannotSign,
    /// Not an RSA or EC key.
    #[error("it is not an RSA or EC key")]
    KeyType,
    /// RSA outside 2048 to 8192 bits.
    #[error("RSA key of {0} bits (2048 to 8192 are accepted)")]
    RsaSize(usize),
    /// EC on a curve warrant does not use.
    #[error("EC key on a curve other than P-256, P-384 or P-521")]
    Curve,
    /// The key is not of the algorithm the key store recorded.
    #[error("it signs {found}, the key store expects {expected}")]
    Algorithm {
        /// What the store recorded.
        expected: warrant_token::Algorithm,
        /// What the token holds.
        found: warrant_token::Algorithm,
    },
    /// The object is another key than the one the key store recorded there.
    #[error("its public key (kid {found}) is not the one the key store recorded (kid {recorded})")]
    NotRecorded {
        /// The kid the store recorded.
        recorded: String,
        /// The kid of the key on the token.
        found: String,
    },
}

impl HsmError {
    /// The key at `uri` is not one warrant signs with, for `problem`.
    pub(crate) fn unsuitable(uri: &impl ToString, problem: Unsuitable) -> Self {
        HsmError::Unsuitable {
            uri: uri.to_string(),
            problem,
        }
    }

    pub(crate) fn pkcs11(uri: &impl ToString, op: &'static str, cause: CkError) -> Self {
        HsmError::Pkcs11 {
            uri: uri.to_string(),
            op,
            code: ckr_name(&cause),
            cause,
        }
    }

    /// The PKCS#11 return value behind this error, if it is one.
    pub fn rv(&self) -> Option<RvError> {
        match self {
            HsmError::Pkcs11 {
                cause: CkError::Pkcs11(rv, _),
                ..
            }
            | HsmError::ModuleInit {
                cause: CkError::Pkcs11(rv, _),
                ..
            } => Some(*rv),
            HsmError::Unavailable { cause, .. } => cause.rv(),
            _ => None,
        }
    }

    /// True when this error means the token cannot sign right now but may again without a
    /// configuration change (session lost, token absent, recovering): HTTP 503 / gRPC
    /// UNAVAILABLE. False for errors a retry cannot fix (a missing or unsuitable key, a wrong
    /// PIN).
    pub fn is_unavailable(&self) -> bool {
        match self {
            HsmError::Unavailable { cause, .. } => !cause.is_fatal(),
            HsmError::NoToken { .. } | HsmError::Reinitialized { .. } => true,
            HsmError::ThreadsClosed(_) => true,
            HsmError::Thread(join) => join.is_cancelled(),
            _ => self.rv().is_some_and(is_session_loss),
        }
    }

    /// True for errors that retrying must not touch: a wrong or locked PIN.
    pub(crate) fn is_fatal(&self) -> bool {
        matches!(self, HsmError::WrongPin { .. } | HsmError::PinLocked { .. })
    }

    /// A copy of a wrong-PIN or locked-PIN error (the one kind shown both to the caller and in
    /// the health report).
    pub(crate) fn clone_fatal(&self) -> Option<HsmError> {
        match self {
            HsmError::WrongPin { uri, code } => Some(HsmError::WrongPin {
                uri: uri.clone(),
                code,
            }),
            HsmError::PinLocked { uri } => Some(HsmError::PinLocked { uri: uri.clone() }),
            _ => None,
        }
    }

    /// A short, bounded name for metrics labels.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            HsmError::Uri(_)
            | HsmError::Locator(_)
            | HsmError::NoModule { .. }
            | HsmError::Pin { .. }
            | HsmError::ModuleConflict { .. } => "config",
            HsmError::Reinitialized { .. } => "session_lost",
            HsmError::DuplicateId { .. } => "unsuitable",
            HsmError::ModuleNotFound { .. }
            | HsmError::NotAModule { .. }
            | HsmError::ModuleUnsafe { .. }
            | HsmError::ModuleInit { .. } => "module",
            HsmError::NoToken { .. } | HsmError::AmbiguousToken { .. } => "no_token",
            HsmError::WrongPin { .. } | HsmError::PinLocked { .. } => "pin",
            HsmError::ObjectMissing { .. } => "missing",
            HsmError::NotHeld { .. } => "not_held",
            HsmError::ObjectExists { .. } => "exists",
            HsmError::Unsuitable { .. } | HsmError::PublicKey { .. } => "unsuitable",
            HsmError::Import(_) | HsmError::ImportUnsupported(_) | HsmError::KeyType(_) => {
                "bad_key"
            }
            HsmError::Unavailable { .. } => "unavailable",
            HsmError::SignatureLength { .. } => "bad_signature",
            HsmError::Thread(_) | HsmError::ThreadsClosed(_) | HsmError::Random => "thread",
            HsmError::Pkcs11 { .. } => {
                if self.is_unavailable() {
                    "session_lost"
                } else {
                    "pkcs11_error"
                }
            }
        }
    }
}

/// Return values that mean the session, the login or the token is gone, so the pool must be
/// reopened (not that the request was bad).
pub(crate) fn is_session_loss(rv: RvError) -> bool {
    matches!(
        rv,
        RvError::SessionHandleInvalid
            | RvError::SessionClosed
            | RvError::SessionCount
            | RvError::DeviceRemoved
            | RvError::DeviceError
            | RvError::DeviceMemory
            | RvError::TokenNotPresent
            | RvError::TokenNotRecognized
            | RvError::CryptokiNotInitialized
            | RvError::GeneralError
            | RvError::UserNotLoggedIn
            | RvError::SlotIdInvalid
    )
}

/// `CKR_PIN_INCORRECT` for `PinIncorrect`: the PKCS#11 name of a return value, which is what
/// HSM documentation and vendors' support use. (cryptoki's `Display` is the spec's paragraph.)
pub(crate) fn ckr_name(err: &CkError) -> String {
    match err {
        CkError::Pkcs11(rv, _) => {
            let debug = format!("{rv:?}");
            let mut name = String::from("CKR");
            for c in debug.chars() {
                if c.is_ascii_uppercase() {
                    name.push('_');
                }
                name.push(c.to_ascii_uppercase());
            }
            name
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cryptoki::context::Function;

    #[test]
    fn return_values_are_named_as_in_the_standard() {
        let name = |rv| ckr_name(&CkError::Pkcs11(rv, Function::Login));
        assert_eq!(name(RvError::PinIncorrect), "CKR_PIN_INCORRECT");
        assert_eq!(name(RvError::PinLocked), "CKR_PIN_LOCKED");
        assert_eq!(
            name(RvError::SessionHandleInvalid),
            "CKR_SESSION_HANDLE_INVALID"
        );
        assert_eq!(name(RvError::TokenNotPresent), "CKR_TOKEN_NOT_PRESENT");
        assert_eq!(name(RvError::DeviceRemoved), "CKR_DEVICE_REMOVED");
    }

    #[test]
    fn session_loss_is_unavailable_and_a_bad_key_is_not() {
        let err = |rv| {
            HsmError::pkcs11(
                &"pkcs11:token=t",
                "C_Sign",
                CkError::Pkcs11(rv, Function::Sign),
            )
        };
        assert!(err(RvError::SessionHandleInvalid).is_unavailable());
        assert!(err(RvError::DeviceRemoved).is_unavailable());
        assert!(err(RvError::TokenNotPresent).is_unavailable());
        assert!(!err(RvError::KeyFunctionNotPermitted).is_unavailable());
        let wrong_pin = Arc::new(HsmError::WrongPin {
            uri: "pkcs11:token=t".into(),
            code: "CKR_PIN_INCORRECT",
        });
        let unavailable = HsmError::Unavailable {
            token: "pkcs11:token=t".into(),
            cause: wrong_pin,
        };
        assert!(
            !unavailable.is_unavailable(),
            "a wrong PIN is not fixed by retrying"
        );
    }
}
