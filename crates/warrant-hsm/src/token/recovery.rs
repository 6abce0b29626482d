//! Keeping a token healthy: what warrant-keys' recovery loop ([`warrant_keys::keep_healthy`])
//! asks of a token. `Token::recover` reopens a broken pool, re-initializing the module if the
//! token cannot be found any more, so the pool heals without a restart; while healthy,
//! [`Token::probe`] checks the token so a token lost while idle shows in readiness before a
//! request needs it. A refused PIN is never tried again.

use std::sync::Arc;

use cryptoki::error::{Error as CkError, RvError};
use cryptoki::session::SessionState;
use tokio::time::Instant;

use warrant_keys::{Recovery, RecoveryPolicy};

use super::{Health, Token, find_slot};
use crate::error::HsmError;
use crate::holder::Pkcs11Holder;

impl Token {
    /// Keeps the token healthy with warrant-keys' one recovery loop
    /// ([`warrant_keys::keep_healthy`]): waits until the pool breaks (or probes it every
    /// `probe_interval`), then reopens with backoff until it works. Returns only if the PIN was
    /// refused (never retried) or the runtime shuts down. Spawn it once per token and hold its
    /// handle; every time here is tokio's, so a paused test clock drives it.
    pub async fn run_recovery(&self, policy: RecoveryPolicy) {
        warrant_keys::keep_healthy(&Pkcs11Holder::new(self.clone()), policy).await;
    }

    /// One probe of a healthy token, on a blocking thread (its outcome is in the health).
    pub(crate) async fn probe_now(&self) {
        let token = self.clone();
        let _ = tokio::task::spawn_blocking(move || token.probe()).await;
    }

    /// One attempt at reopening a broken pool, on a blocking thread. Gives up for good on a
    /// refused PIN.
    pub(crate) async fn recover(&self) -> Recovery {
        if self.fatal().is_some() {
            tracing::error!(token = %self.inner.name, "not reopening the token: its PIN was refused");
            return Recovery::GiveUp;
        }
        let token = self.clone();
        let Ok(result) = tokio::task::spawn_blocking(move || token.reopen()).await else {
            return Recovery::GiveUp;
        };
        match result {
            Ok(()) => {
                tracing::info!(token = %self.inner.name, "PKCS#11 token available again");
                Recovery::Recovered
            }
            Err(err) => {
                tracing::warn!(token = %self.inner.name, error = %err, "PKCS#11 token still unavailable");
                Recovery::NotYet
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
}
