//! What the admission webhook keeps between reviews ([`Webhook`]), held by the server's state;
//! the reviews themselves are answered in `crate::admission`.

use warrant_audit::loglimit::SharedThrottle;

use super::limits::InFlight;
use super::lookup::AccountLookups;
use super::metrics::AdmissionMetrics;

/// What the webhook keeps between reviews: its metrics, the reviews in flight, the lookups.
#[derive(Debug)]
pub(crate) struct Webhook {
    pub(crate) metrics: AdmissionMetrics,
    pub(super) in_flight: InFlight,
    pub(super) accounts: AccountLookups,
    /// Reviews not answered are logged at most once a second, with a count of those left
    /// out: anyone may send them.
    pub(super) unanswered_logged: SharedThrottle,
}

impl Webhook {
    /// The webhook's state, its metrics registered in `registry`.
    pub(crate) fn register(registry: &mut prometheus_client::registry::Registry) -> Self {
        let accounts = AccountLookups::new();
        Webhook {
            metrics: AdmissionMetrics::register(registry, accounts.in_flight_gauge()),
            in_flight: InFlight::default(),
            accounts,
            unanswered_logged: SharedThrottle::default(),
        }
    }
}
