//! The one loop that keeps a key holder callable: [`keep_healthy`] drives the holder's
//! [`probe`](KeyHolder::probe) while healthy and its [`recover`](KeyHolder::recover) with
//! backoff while not, under the holder's own [`RecoveryPolicy`]. Every wait is tokio's, so a
//! paused test clock drives it.

use crate::holder::KeyHolder;
use crate::holder_health::{Recovery, RecoveryPolicy};

/// Keeps `holder` healthy: while healthy, waits for its health to change, probing it every
/// `probe_interval`; while not, tries to recover at once and then after each backoff (doubled
/// up to `max_backoff`) until it does. Returns only when the holder gives up or its health is
/// no longer followed. Spawn it once per holder and hold its handle.
pub async fn keep_healthy(holder: &dyn KeyHolder, policy: RecoveryPolicy) {
    let mut health = holder.health();
    loop {
        if health.borrow_and_update().is_healthy() {
            tokio::select! {
                changed = health.changed() => {
                    if changed.is_err() {
                        return;
                    }
                }
                () = tokio::time::sleep(policy.probe_interval) => holder.probe().await,
            }
            continue;
        }
        let mut delay = policy.initial_backoff;
        loop {
            match holder.recover().await {
                Recovery::Recovered => break,
                Recovery::GiveUp => return,
                Recovery::NotYet => {}
            }
            tokio::time::sleep(delay).await;
            delay = delay.saturating_mul(2).min(policy.max_backoff);
        }
    }
}
