//! The token's pool of logged-in sessions, and how losing one breaks it.
//!
//! Up to `sessions` read-write sessions are opened on demand and kept; each call ([`Token::call`])
//! takes one for its duration, so at most that many PKCS#11 calls run at once. The user logs in
//! once (PKCS#11 logs in the application, not a session).
//!
//! A return value that means the session, the login or the token is gone
//! (`CKR_SESSION_HANDLE_INVALID`, `CKR_DEVICE_REMOVED`, `CKR_TOKEN_NOT_PRESENT`,
//! `CKR_GENERAL_ERROR`, …) breaks the pool: every later call answers [`HsmError::Unavailable`]
//! at once, without touching the module, and [`Health`] says why, until `recovery` reopens it.
//! A wrong or locked PIN breaks it for good: it is reported once and never tried again.

use std::collections::HashMap;
use std::sync::{Arc, MutexGuard, PoisonError};

use cryptoki::error::{Error as CkError, RvError};
use cryptoki::object::ObjectHandle;
use cryptoki::session::{Session, SessionState, UserType};
use cryptoki::slot::Slot;
use tokio::time::Instant;

use super::{Health, Token};
use crate::error::HsmError;
use crate::module::Entered;

/// The sessions of a token and its state, under the token's lock.
pub(super) struct Pool {
    /// The token's slot (found again at each reopen).
    pub(super) slot: Slot,
    /// Sessions open and not in use.
    pub(super) idle: Vec<Pooled>,
    /// Sessions open, idle or in use.
    pub(super) open: usize,
    /// Bumped when the pool breaks: sessions leased before are discarded on return.
    pub(super) epoch: u64,
    /// Why the pool is broken, while it is: every call fails at once with it.
    pub(super) broken: Option<Arc<HsmError>>,
}

impl Pool {
    /// An empty pool on `slot`, not broken.
    pub(super) fn new(slot: Slot) -> Self {
        Pool {
            slot,
            idle: Vec::new(),
            open: 0,
            epoch: 0,
            broken: None,
        }
    }
}

/// A session of the pool, taken for one call.
pub(crate) struct Pooled {
    pub(crate) session: Session,
    /// The module's initialization the session was opened in: after a re-initialization its
    /// handle may name another session.
    pub(super) generation: u64,
    /// The pool's epoch when the session was taken.
    pub(super) epoch: u64,
    /// Private key handles found in this session, by `CKA_ID`.
    pub(super) handles: HashMap<Vec<u8>, ObjectHandle>,
}

impl Pooled {
    /// Forgets the private key handle of `id` cached in this session (its object was destroyed).
    pub(crate) fn forget_handle(&mut self, id: &[u8]) {
        self.handles.remove(id);
    }
}

impl Token {
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
    pub(super) fn give_back(&self, session: Pooled) {
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
    pub(super) fn discard(&self, session: Pooled) {
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

    /// Opens a session on `slot` and makes sure the user is logged in. A refused PIN breaks the
    /// pool for good.
    pub(super) fn open_session(&self, slot: Slot) -> Result<Pooled, HsmError> {
        self.open_session_with(slot, true)
    }

    /// [`open_session`](Self::open_session); `record_fatal` false at open, where a refused
    /// PIN is simply the error of [`Token::open`] (no pool to break, nothing to log).
    pub(super) fn open_session_with(
        &self,
        slot: Slot,
        record_fatal: bool,
    ) -> Result<Pooled, HsmError> {
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

    /// Marks the pool broken with `cause` (unless already broken), drops its idle sessions,
    /// wakes waiters, and reports the health. Returns the error for the caller.
    pub(super) fn break_pool(&self, cause: HsmError) -> HsmError {
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
            holder: self.health_name(),
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

    pub(super) fn unavailable(&self, cause: Arc<HsmError>) -> HsmError {
        HsmError::Unavailable {
            token: self.inner.name.clone(),
            cause,
        }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Pool> {
        self.inner
            .pool
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
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
}
