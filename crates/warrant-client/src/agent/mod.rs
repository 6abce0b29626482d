//! `warrant token-agent`: keeps warrant tokens in files a pod's containers read, as cloud SDKs
//! read `AWS_WEB_IDENTITY_TOKEN_FILE`, `AZURE_FEDERATED_TOKEN_FILE` or Google's credential
//! source. It runs as a native sidecar (an init container with `restartPolicy: Always`) that
//! token injection adds (docs/injection.md), or by hand with the same flags.
//!
//! For each token (a file and an audience), it asks warrant's TokenRequest for a token of the
//! pod's own service account, bound to the pod (name and UID from the downward API), and
//! authenticates as the pod with the pod's own projected kube token, re-read on every request
//! (the kubelet rotates it). It calls warrant directly, not through kube-apiserver's
//! aggregator: warrant checks the kube token with kube-apiserver (delegated authentication) and
//! lets a pod's token ask for itself (self-service), while the aggregated path would need an
//! RBAC grant per service account, which RBAC cannot limit to an audience (docs/injection.md
//! says more).
//!
//! - Files are replaced atomically ([`warrant_watch::private_file::replace`]): a reader
//!   polling a file sees the old token or the new one, whole, never an empty or partial file;
//!   mode 0644 by default, as the kubelet writes projected tokens (the volume is the pod's own,
//!   and its containers may run as any user).
//! - A token is refreshed between 75 % and 80 % of its lifetime (the `refresh` module); a failed
//!   attempt is retried with a backoff doubling from 1 s to a minute.
//! - While warrant cannot be reached (or answers 401, 404, 409, 429, 5xx: a kube token being
//!   rotated, a cache behind a recreated pod, overload), the agent keeps the token it has, says
//!   so in its log, and retries; `--check` (the readiness probe) fails once a token expires.
//! - It exits non-zero only on what retrying cannot mend: its configuration (flags, the CA, a
//!   token directory it cannot open), and warrant refusing the request itself (400, 403, 422:
//!   an audience the policy does not allow, a lifetime it refuses). The kubelet restarts it
//!   with its own backoff, and the pod shows why.
//! - An existing file that holds a token warrant issued, for its audience and this pod, not
//!   expired, is kept at start (a restarted agent does not mint anew); anything else found
//!   there is discarded and a fresh token asked for at once (the `adopt` module: the volume is shared,
//!   so the file may hold what another container wrote).
//!
//! Time is warrant's clock (`warrant_clock`); waits are tokio's, so tests run it on a paused
//! clock. DPoP binding of the agent's tokens is not offered: the SDKs that read the files send
//! them as bearer assertions and hold no key to prove.

use std::error::Error;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use jiff::Timestamp;
use rustix::fs::{Mode, OFlags};
use warrant_clock::Clock;
use warrant_proto::agent_contract;
use warrant_proto::wire::{TokenRequest, TokenRequestSpec, TokenRequestStatus};
use warrant_token::BoundObjectReference;

use crate::endpoint;
use crate::refresh;
use crate::request::{self, Caller, RequestError};

mod adopt;
#[cfg(test)]
mod tests;

/// The agent's configuration: its flags, or the variables token injection sets for them
/// ([`agent_contract`]).
#[derive(Debug, Clone)]
pub struct Config {
    /// The tokens to keep (`--token`, `WARRANT_TOKENS`).
    pub tokens: Vec<TokenSpec>,
    /// warrant's URL (`--warrant-url`, `WARRANT_URL`), https only.
    pub warrant_url: Option<String>,
    /// The CA bundle warrant's serving certificate is checked with, instead of the system's
    /// roots.
    pub warrant_ca: Option<CaBundle>,
    /// The pod's own projected kube token (`--kube-token-file`), read on every request.
    pub kube_token_file: PathBuf,
    /// The pod's name (`--pod-name`, downward API `metadata.name`).
    pub pod_name: Option<String>,
    /// The pod's UID (`--pod-uid`, downward API `metadata.uid`).
    pub pod_uid: Option<String>,
    /// The lifetime asked for each token, in seconds (`--expiration-seconds`).
    pub expiration_seconds: i64,
    /// The token files' permission bits (`--file-mode`).
    pub file_mode: u32,
}

/// Where the agent's CA bundle comes from.
#[derive(Debug, Clone)]
pub enum CaBundle {
    /// A PEM file (`--warrant-ca-file`, `WARRANT_CA_FILE`).
    File(PathBuf),
    /// PEM text (`--warrant-ca-data`, `WARRANT_CA_DATA`: how token injection passes it).
    Pem(String),
}

/// One token the agent keeps: `FILE=AUDIENCE` on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenSpec {
    /// Where it is written.
    pub file: PathBuf,
    /// Its audience.
    pub audience: String,
}

/// Why a `FILE=AUDIENCE` value is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenSpecError {
    /// No `=`.
    #[error("{0:?} is not {fmt}", fmt = agent_contract::TOKEN_FORMAT)]
    NotTokenFormat(String),
    /// The file is not an absolute path to a file.
    #[error("{0:?} is not an absolute path to a file")]
    NotAbsolute(PathBuf),
    /// The audience is empty.
    #[error("{0:?} names no audience")]
    NoAudience(String),
}

impl std::str::FromStr for TokenSpec {
    type Err = TokenSpecError;

    /// `FILE=AUDIENCE` ([`agent_contract::split_token`]).
    fn from_str(text: &str) -> Result<TokenSpec, TokenSpecError> {
        let (file, audience) = agent_contract::split_token(text)
            .ok_or_else(|| TokenSpecError::NotTokenFormat(text.to_owned()))?;
        let file = PathBuf::from(file.trim());
        if !file.is_absolute() || file.file_name().is_none() {
            return Err(TokenSpecError::NotAbsolute(file));
        }
        let audience = audience.trim();
        if audience.is_empty() {
            return Err(TokenSpecError::NoAudience(text.to_owned()));
        }
        Ok(TokenSpec {
            file,
            audience: audience.to_owned(),
        })
    }
}

/// An error of the agent's: it may cross tasks.
pub type AgentError = Box<dyn Error + Send + Sync>;

/// Runs the agent `config` describes, on `clock`, until `shutdown` completes (then `Ok`), or
/// until a failure retrying cannot mend: its configuration, or warrant refusing the request
/// itself.
pub async fn run(
    config: &Config,
    clock: Clock,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), AgentError> {
    Agent::from_config(config, clock)?.run(shutdown).await
}

/// `--check`, the readiness probe: every file holds a token for its audience that has not
/// expired at `now`; else which do not, and why.
pub fn check(tokens: &[TokenSpec], now: Timestamp) -> Result<(), AgentError> {
    let problems: Vec<String> = tokens
        .iter()
        .filter_map(|spec| {
            current(spec, now)
                .err()
                .map(|why| format!("{}: {why}", spec.file.display()))
        })
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; ").into())
    }
}

/// What the agent knows of a token it wrote (never the token itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Held {
    issued_at: Timestamp,
    expires: Timestamp,
}

/// The token in `spec`'s file, if it is one for its audience that has not expired at `now`.
fn current(spec: &TokenSpec, now: Timestamp) -> Result<Held, String> {
    let text = std::fs::read_to_string(&spec.file).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => "no token yet".to_owned(),
        _ => format!("cannot read it: {e}"),
    })?;
    let claims = warrant_token::unverified_claims(text.trim())
        .map_err(|e| format!("it does not hold a token ({e})"))?;
    if !claims.aud.contains(&spec.audience) {
        return Err(format!(
            "its token is not for the audience {:?}",
            spec.audience
        ));
    }
    let second = |s: Option<i64>| s.and_then(|s| Timestamp::from_second(s).ok());
    let (Some(issued_at), Some(expires)) = (second(claims.iat), second(claims.exp)) else {
        return Err("its token has no issue or expiry time".to_owned());
    };
    if expires <= now {
        return Err(format!("its token expired at {expires}"));
    }
    Ok(Held { issued_at, expires })
}

/// Why an attempt to mint failed, and whether trying again can help.
#[derive(Debug)]
enum Failure {
    /// Warrant unreachable, overloaded, or refusing for a reason that may pass.
    Retry(AgentError),
    /// The request itself is refused, or the configuration is wrong: retrying the same
    /// request cannot help.
    Fatal(AgentError),
}

/// A token just minted.
struct Minted {
    token: String,
    held: Held,
}

/// Asks warrant for tokens, as the pod.
pub(crate) struct Minter {
    client: ::kube::Client,
    warrant: String,
    kube_token_file: PathBuf,
    pod: BoundObjectReference,
}

impl Minter {
    /// A minter that reaches warrant with `client` (whose requests go to warrant's URL).
    pub(crate) fn new(
        client: ::kube::Client,
        warrant: String,
        kube_token_file: PathBuf,
        pod_name: String,
        pod_uid: String,
    ) -> Self {
        Minter {
            client,
            warrant,
            kube_token_file,
            pod: BoundObjectReference {
                kind: "Pod".to_owned(),
                api_version: "v1".to_owned(),
                name: pod_name,
                uid: pod_uid,
            },
        }
    }

    /// warrant's issuer and keys, fetched from warrant.
    async fn published(&self) -> Result<adopt::Published, AgentError> {
        adopt::Published::fetch(&self.client, &self.warrant).await
    }

    /// One TokenRequest for `audience`, bound to the pod.
    async fn mint(
        &self,
        audience: &str,
        expiration_seconds: i64,
        now: Timestamp,
    ) -> Result<Minted, Failure> {
        let retry = |e: String| Failure::Retry(e.into());
        let token = std::fs::read_to_string(&self.kube_token_file)
            .map_err(|e| {
                retry(format!(
                    "cannot read the pod's kube token {}: {e}",
                    self.kube_token_file.display()
                ))
            })?
            .trim()
            .to_owned();
        let own = request::own_identity(&token).map_err(|e| match e {
            RequestError::OwnTokenNoServiceAccount => Failure::Fatal(e.into()),
            other => retry(format!(
                "the pod's kube token {}: {other}",
                self.kube_token_file.display()
            )),
        })?;
        let account = own.service_account.clone();
        let body = TokenRequest::new(TokenRequestSpec {
            audiences: Some(vec![audience.to_owned()]),
            expiration_seconds: Some(expiration_seconds),
            bound_object_ref: Some(self.pod.clone()),
        });
        let caller = Caller::Token {
            token,
            own,
            client: self.client.clone(),
            warrant: self.warrant.clone(),
        };
        let answer = tokio::time::timeout(
            request::REQUEST_TIMEOUT,
            caller.request(&account, &body, None),
        )
        .await
        .map_err(|_| {
            retry(format!(
                "warrant at {} did not answer within {}s",
                self.warrant,
                request::REQUEST_TIMEOUT.as_secs()
            ))
        })?
        .map_err(classify)?;
        let TokenRequestStatus {
            token,
            expiration_timestamp,
        } = answer;
        let expires: Option<Timestamp> = expiration_timestamp.parse().ok();
        let (false, Some(expires)) = (token.is_empty(), expires) else {
            return Err(retry(format!(
                "warrant at {} answered without a token and its expiry",
                self.warrant
            )));
        };
        let issued_at = request::issued_at(&token).unwrap_or(now);
        Ok(Minted {
            token,
            held: Held { issued_at, expires },
        })
    }
}

/// Whether a failed TokenRequest is worth repeating.
fn classify(error: RequestError) -> Failure {
    let fatal = match &error {
        // 401: the kube token is being rotated, or kube-apiserver could not be asked about it
        // (warrant fails closed); 404 and 409: warrant's cache has not seen the pod (or its
        // new UID) yet; 429 and 5xx: overload, an outage.
        RequestError::Refused { code, .. } => !matches!(code, 401 | 404 | 408 | 409 | 429 | 500..),
        RequestError::Redirect { .. } | RequestError::Build { .. } => true,
        _ => false,
    };
    if fatal {
        Failure::Fatal(error.into())
    } else {
        Failure::Retry(error.into())
    }
}

/// The agent: what it keeps, and how it asks.
pub(crate) struct Agent {
    minter: Minter,
    tokens: Vec<TokenSpec>,
    expiration_seconds: i64,
    mode: Mode,
    clock: Clock,
}

impl Agent {
    /// The agent `config` describes, checked (every problem here is fatal: it is
    /// configuration).
    fn from_config(config: &Config, clock: Clock) -> Result<Agent, AgentError> {
        let warrant = config
            .warrant_url
            .as_deref()
            .ok_or("no warrant URL: give --warrant-url (or WARRANT_URL)")?;
        let warrant = endpoint::warrant_url(warrant, "--warrant-url, WARRANT_URL")?;
        let ca = match &config.warrant_ca {
            Some(CaBundle::File(path)) => Some(endpoint::ca_file(path)?),
            Some(CaBundle::Pem(pem)) => {
                Some(endpoint::ca_bundle(pem.as_bytes(), "WARRANT_CA_DATA")?)
            }
            None => None,
        };
        let pod_name = config
            .pod_name
            .clone()
            .filter(|n| !n.is_empty())
            .ok_or("no pod name: give --pod-name (or WARRANT_POD_NAME, from the downward API's metadata.name)")?;
        let pod_uid = config.pod_uid.clone().filter(|u| !u.is_empty()).ok_or(
            "no pod UID: give --pod-uid (or WARRANT_POD_UID, from the downward API's metadata.uid)",
        )?;
        let client = request::own_token_client(&warrant, ca.as_deref())
            .map_err(|e| format!("cannot set up the client for warrant at {warrant}: {e}"))?;
        Agent::new(
            Minter::new(
                client,
                warrant,
                config.kube_token_file.clone(),
                pod_name,
                pod_uid,
            ),
            config.tokens.clone(),
            config.expiration_seconds,
            config.file_mode,
            clock,
        )
    }

    /// An agent keeping `tokens` with `minter`.
    pub(crate) fn new(
        minter: Minter,
        tokens: Vec<TokenSpec>,
        expiration_seconds: i64,
        file_mode: u32,
        clock: Clock,
    ) -> Result<Agent, AgentError> {
        warrant_token::validate_expiration_seconds(expiration_seconds)
            .map_err(|why| format!("--expiration-seconds {expiration_seconds}: {why}"))?;
        if tokens.is_empty() {
            return Err("no token to keep: give --token FILE=AUDIENCE".into());
        }
        Ok(Agent {
            minter,
            tokens,
            expiration_seconds,
            mode: Mode::from_raw_mode(file_mode),
            clock,
        })
    }

    /// Keeps the tokens until `shutdown` completes (then returns `Ok`), or until a failure
    /// retrying cannot mend (then its error).
    pub(crate) async fn run(
        self,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> Result<(), AgentError> {
        let mut slots = Vec::with_capacity(self.tokens.len());
        for spec in &self.tokens {
            slots.push(Slot::open(spec)?);
        }
        self.adopt(&mut slots).await;
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            let now = tokio::time::Instant::now();
            for slot in slots.iter_mut().filter(|slot| slot.next <= now) {
                self.attempt(slot).await?;
            }
            let Some(next) = slots.iter().map(|slot| slot.next).min() else {
                return Ok(());
            };
            tokio::select! {
                () = tokio::time::sleep_until(next) => {}
                () = &mut shutdown => {
                    tracing::info!("stopping: the token files stay as they are");
                    return Ok(());
                }
            }
        }
    }

    /// Keeps the tokens already in the files that verify as warrant's for this pod (their
    /// refresh set as if the agent had written them); empties the files that hold anything else,
    /// so that nothing reads it; leaves a file it cannot check (warrant's keys unreachable) as
    /// it is. Every slot not kept is asked for at once.
    async fn adopt(&self, slots: &mut [Slot]) {
        let now = self.clock.now();
        let mut published: Option<Result<adopt::Published, String>> = None;
        for slot in slots.iter_mut() {
            let Some(token) = slot.found() else {
                continue;
            };
            if published.is_none() {
                published = Some(
                    self.minter
                        .published()
                        .await
                        .map_err(|e| crate::causes(e.as_ref())),
                );
            }
            let Some(published) = &published else {
                continue;
            };
            let file = slot.spec.file.display().to_string();
            let audience = slot.spec.audience.as_str();
            match published {
                Ok(published) => {
                    match published.adoptable(&token, audience, &self.minter.pod, now) {
                        Ok(held) => {
                            slot.held = Some(held);
                            slot.next = self.instant_at(refresh::refresh_at(
                                held.issued_at,
                                held.expires,
                                refresh::jitter(),
                            ));
                            tracing::info!(
                                file = %file,
                                audience,
                                expires = %held.expires,
                                "keeping the valid token already in the file"
                            );
                        }
                        Err(why) => {
                            let removed = slot.remove();
                            tracing::warn!(
                                file = %file,
                                audience,
                                reason = %why,
                                removed = %removed.map_or_else(|e| format!("no: {e}"), |()| "yes".to_owned()),
                                "discarding what the file holds: not a token this agent may keep; asking warrant for a new one"
                            );
                        }
                    }
                }
                Err(why) => tracing::warn!(
                    file = %file,
                    audience,
                    error = %why,
                    "cannot check the token already in the file against warrant's keys: not keeping it, asking warrant for a new one"
                ),
            }
        }
    }

    /// The tokio instant at wall time `at` (now, if `at` has passed).
    fn instant_at(&self, at: Timestamp) -> tokio::time::Instant {
        let wait = at
            .duration_since(self.clock.now())
            .try_into()
            .unwrap_or(std::time::Duration::ZERO);
        tokio::time::Instant::now() + wait
    }

    /// One attempt for `slot`: on success the file is replaced and the next refresh set; on a
    /// failure worth retrying, the next attempt is set after the backoff.
    async fn attempt(&self, slot: &mut Slot) -> Result<(), AgentError> {
        let now = self.clock.now();
        let outcome = match self
            .minter
            .mint(&slot.spec.audience, self.expiration_seconds, now)
            .await
        {
            Ok(minted) => slot.write(&minted, self.mode).map(|()| minted.held),
            Err(Failure::Fatal(error)) => {
                return Err(format!(
                    "cannot keep a token for the audience {:?}: {} (not retried: the request or the configuration must change)",
                    slot.spec.audience,
                    crate::causes(error.as_ref())
                )
                .into());
            }
            Err(Failure::Retry(error)) => Err(error),
        };
        match outcome {
            Ok(held) => {
                slot.held = Some(held);
                slot.failures = 0;
                let at = refresh::refresh_at(held.issued_at, held.expires, refresh::jitter());
                slot.next = self.instant_at(at);
                tracing::info!(
                    file = %slot.spec.file.display(),
                    audience = %slot.spec.audience,
                    expires = %held.expires,
                    refresh = %at,
                    "wrote a new token"
                );
            }
            Err(error) => {
                slot.failures = slot.failures.saturating_add(1);
                let wait = refresh::backoff(slot.failures, refresh::jitter());
                slot.next = tokio::time::Instant::now() + wait;
                let kept = match slot.held.filter(|held| held.expires > now) {
                    Some(held) => format!("keeping the token it has, valid until {}", held.expires),
                    None => "no valid token in the file until one comes".to_owned(),
                };
                tracing::warn!(
                    file = %slot.spec.file.display(),
                    audience = %slot.spec.audience,
                    failures = slot.failures,
                    retry_in_seconds = wait.as_secs_f64(),
                    error = %crate::causes(error.as_ref()),
                    "could not refresh the token; {kept}"
                );
            }
        }
        Ok(())
    }
}

/// The most of a file read to see whether it holds a token to keep: far more than any token
/// warrant issues (whose claims are bounded by kube's limits on names and audiences).
const MAX_FOUND_BYTES: u64 = 64 * 1024;

/// One token's file and schedule.
struct Slot {
    spec: TokenSpec,
    /// The file's directory, opened once; the file is replaced inside it.
    dir: OwnedFd,
    name: String,
    held: Option<Held>,
    failures: u32,
    next: tokio::time::Instant,
}

impl Slot {
    /// Opens the file's directory; nothing is kept yet ([`Agent::adopt`] decides).
    fn open(spec: &TokenSpec) -> Result<Slot, AgentError> {
        let parent = spec.file.parent().unwrap_or(Path::new("/"));
        let dir = rustix::fs::open(
            parent,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| format!("cannot open the token directory {}: {e}", parent.display()))?;
        let name = spec
            .file
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| format!("{} is not a file name", spec.file.display()))?
            .to_owned();
        Ok(Slot {
            spec: spec.clone(),
            dir,
            name,
            held: None,
            failures: 0,
            next: tokio::time::Instant::now(),
        })
    }

    /// What the file holds, if anything (at most [`MAX_FOUND_BYTES`]; more is no token of
    /// warrant's, and is read as such).
    fn found(&self) -> Option<String> {
        use std::io::Read as _;
        let file = std::fs::File::open(&self.spec.file).ok()?;
        let mut text = String::new();
        match file.take(MAX_FOUND_BYTES).read_to_string(&mut text) {
            Ok(_) => Some(text.trim().to_owned()),
            // Not text: nothing warrant wrote, and still something to discard.
            Err(_) => Some(String::new()),
        }
    }

    /// Empties the slot: removes the file.
    fn remove(&self) -> Result<(), std::io::Error> {
        match rustix::fs::unlinkat(&self.dir, self.name.as_str(), rustix::fs::AtFlags::empty()) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    fn write(&self, minted: &Minted, mode: Mode) -> Result<(), AgentError> {
        warrant_watch::private_file::replace(&self.dir, &self.name, minted.token.as_bytes(), mode)
            .map_err(|e| format!("cannot write {}: {e}", self.spec.file.display()).into())
    }
}
