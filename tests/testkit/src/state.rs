//! The API state tests and benchmarks start from: issuer settings, keys, clock, objects,
//! callers, audit and metrics, each defaulted so a caller sets only what its test is about.

use std::sync::{Arc, OnceLock};

use jiff::Timestamp;
use prometheus_client::registry::Registry;
use warrant_audit::Auditor;
use warrant_auth::{Authenticator, Authorizer, TokenFile};
use warrant_clock::Clock;
use warrant_issuer::{DEFAULT_SIGNATURE_CACHE_ENTRIES, Issuer, Settings};
use warrant_keys::KeySet;
use warrant_objects::{MemorySource, Objects};
use warrant_server::{AppState, StateParts};
use warrant_token::{ExpirationPolicy, KeyType, SigningKey};

use crate::{ADMIN, NOW};

/// The settings of an issuer `issuer`, which is also its API audience, with the JWKS under it
/// and the default expiration policy and signature cache.
pub fn settings(issuer: &str) -> Settings {
    Settings {
        issuers: vec![issuer.into()],
        api_audiences: vec![issuer.into()],
        jwks_uri: format!("{issuer}/openid/v1/jwks"),
        expiration: ExpirationPolicy::default(),
        signature_cache_entries: DEFAULT_SIGNATURE_CACHE_ENTRIES,
        jwks_x5c: false,
    }
}

/// One P-256 key for the whole test binary (generated once): the standard state's signing key.
pub fn key() -> &'static SigningKey {
    static KEY: OnceLock<SigningKey> = OnceLock::new();
    KEY.get_or_init(|| SigningKey::generate(KeyType::P256).expect("a P-256 key"))
}

/// The standard state, to adjust and [`build`](StateBuilder::build): issuer [`ISSUER`](crate::ISSUER)
/// signing with [`key`], a manual clock at [`NOW`], no objects, the token file's only user
/// `admin` ([`ADMIN`], group `system:masters`) and warrant's own tokens accepted, the default
/// authorizer, no audit log and an empty metrics registry.
pub fn state() -> StateBuilder {
    StateBuilder {
        settings: settings(crate::ISSUER),
        keys: None,
        clock: None,
        objects: None,
        authenticator: authenticator(""),
        authorizer: Authorizer::default(),
        audit: Auditor::disabled(),
        registry: Registry::default(),
    }
}

/// An authenticator whose token file holds the admin and then `more` (token-file lines), and
/// which accepts warrant's own tokens.
fn authenticator(more: &str) -> Authenticator {
    let lines = format!("{ADMIN},admin,admin-uid,system:masters\n{more}");
    let mut authenticator = Authenticator::default();
    authenticator.token_file =
        Some(TokenFile::parse(lines.as_bytes(), "tokens.csv").expect("the test token file"));
    authenticator.own_tokens = true;
    authenticator
}

/// The parts of an [`AppState`], defaulted as [`state`] says.
pub struct StateBuilder {
    settings: Settings,
    keys: Option<KeySet>,
    clock: Option<Clock>,
    objects: Option<Objects>,
    authenticator: Authenticator,
    authorizer: Authorizer,
    audit: Auditor,
    registry: Registry,
}

impl StateBuilder {
    /// Issues as `issuer`, also the API audience (expiration and signature cache kept).
    pub fn issuer(mut self, issuer: &str) -> Self {
        self.settings = Settings {
            expiration: self.settings.expiration,
            signature_cache_entries: self.settings.signature_cache_entries,
            jwks_x5c: self.settings.jwks_x5c,
            ..settings(issuer)
        };
        self
    }

    /// The expiration policy (`--service-account-max-token-expiration` and the extension).
    pub fn expiration(mut self, expiration: ExpirationPolicy) -> Self {
        self.settings.expiration = expiration;
        self
    }

    /// How many verified signatures are remembered.
    pub fn signature_cache_entries(mut self, entries: u64) -> Self {
        self.settings.signature_cache_entries = entries;
        self
    }

    /// Signs with `keys` instead of [`key`].
    pub fn keys(mut self, keys: KeySet) -> Self {
        self.keys = Some(keys);
        self
    }

    /// Reads the time from `clock` (a clone shares it, so the caller can move it).
    pub fn clock(mut self, clock: Clock) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Looks objects up in `objects`.
    pub fn objects(mut self, objects: Objects) -> Self {
        self.objects = Some(objects);
        self
    }

    /// Adds `lines` (`token,user,uid[,"group,…"]` each, newline-terminated) to the token file
    /// after the admin's. It replaces the authenticator's token file, so call it before
    /// [`configure`](Self::configure).
    pub fn tokens(mut self, lines: &str) -> Self {
        let token_file = authenticator(lines).token_file;
        self.authenticator.token_file = token_file;
        self
    }

    /// Sets authentication and authorization up further (trust, delegation, policy).
    pub fn configure(
        mut self,
        configure: impl FnOnce(&mut Authenticator, &mut Authorizer),
    ) -> Self {
        configure(&mut self.authenticator, &mut self.authorizer);
        self
    }

    /// Audits to `audit`.
    pub fn audit(mut self, audit: Auditor) -> Self {
        self.audit = audit;
        self
    }

    /// Registers the API's metrics in `registry` (which may already hold others').
    pub fn registry(mut self, registry: Registry) -> Self {
        self.registry = registry;
        self
    }

    /// The state; its issuer is [`AppState::issuer`] (clone it for a signer socket).
    pub fn build(self) -> AppState {
        let keys = self
            .keys
            .unwrap_or_else(|| KeySet::new(key().clone(), vec![]));
        let clock = self.clock.unwrap_or_else(|| {
            Clock::manual(Timestamp::from_second(NOW).expect("NOW is a valid time"))
        });
        let objects = self
            .objects
            .unwrap_or_else(|| Objects::new(Arc::new(MemorySource::new())));
        AppState::new(StateParts {
            issuer: Issuer::new(self.settings, keys, clock, self.audit),
            objects,
            authenticator: self.authenticator,
            authorizer: self.authorizer,
            registry: self.registry,
        })
    }
}
