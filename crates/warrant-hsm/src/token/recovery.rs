//! Keeping a token healthy: [`Token::run_recovery`] reopens a broken pool with backoff (on
//! tokio's clock), re-initializing the module if the token cannot be found any more, so the pool
//! heals without a restart; while healthy, it probes the token so a token lost while idle shows
//! in readiness before a request needs it. A refused PIN is never tried again.

use std::sync::Arc;
use std::time::Duration;

use cryptoki::error::{Error as CkError, RvError};
use cryptoki::session::SessionState;
use tokio::time::Instant;

use super::{Health, Token, find_slot};
use crate::error::HsmError;

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

impl Token {
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
}
