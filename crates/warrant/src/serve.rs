//! `warrant serve`: validate the flags as kube-apiserver does, load keys, TLS, callers and
//! objects, and serve until SIGTERM or SIGINT.

use std::error::Error;
use std::net::SocketAddr;

use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use warrant_audit::Auditor;
use warrant_auth::ClientTrust;
use warrant_clock::Clock;
use warrant_issuer::{Issuer, Settings, max_expiration_cap, validate_issuers};
use warrant_keys::{KeyMetrics, RotationPolicy};
use warrant_objects::Objects;
use warrant_proto::JWKS_PATH;
use warrant_server::{
    AppState, Connections, ServeOptions, ServingCertificate, StateParts, TlsFiles, TlsSettings,
    default_per_address, max_connections_for, router, serve, server_config,
};
use warrant_token::{ExpirationPolicy, validate_jwks_uri};

use crate::cli::ServeArgs;
use crate::holder;
use crate::keys::{self, KeySource};
use crate::running::Running;
use crate::{auth, objects, signer};

/// Runs the server, on `inherited` if the service manager passed a socket (see listen.rs):
/// each step fails the start before anything serves, so a configuration error is never a
/// server that half works.
pub(crate) async fn run(
    args: ServeArgs,
    inherited: Option<std::net::TcpListener>,
) -> Result<(), Box<dyn Error>> {
    // 1. The flags, checked as kube-apiserver checks them: the issuer settings, the publish
    //    targets (a target that cannot serve the issuer's documents is a configuration error),
    //    the key source and its rotation policy.
    let key_source = KeySource::from_args(&args.keys)?;
    let settings = settings(&args, key_source.is_managed())?;
    let clock = Clock::System;
    let mut registry = Registry::default();
    let key_metrics = KeyMetrics::new();
    key_metrics.register(&mut registry);
    let publisher = publisher(&args, &settings, &mut registry)?;
    let max_token_seconds = settings.expiration.longest_token_seconds();
    check_key_source(&args, &key_source, max_token_seconds)?;
    let injection_callers = crate::injection::callers(&args.injection)?;

    // 2. The keys, through their holder (whose errors are configuration errors, and which opens
    //    them), then what serving reads: HTTPS, the callers, the objects, the audit log.
    let holder = holder::open(&args.keys.pkcs11, &args.keys.kms, Some(&mut registry)).await?;
    let _holder_recovery = holder.as_ref().map(holder::keep_healthy);
    let keys = keys::open(
        &key_source,
        max_token_seconds,
        key_metrics,
        args.kubeconfig.as_deref(),
        holder.as_ref(),
        &clock,
    )
    .await?;
    let https = Https::setup(&args, inherited, &mut registry)?;
    let mut auth = auth::setup(
        &args.auth,
        args.client_ca_file.as_ref(),
        args.token_auth_file.as_ref(),
        args.kubeconfig.as_ref(),
        &mut registry,
    )
    .await?;
    // The policy's JWT-SVIDs share the pod certificates' trust domain.
    auth.authorizer.trust_domain = args.pod_certificates.trust_domain.clone();
    let (source, _objects) =
        objects::open(&args, &mut registry, clock.clone(), clock.now()).await?;
    let signer_metrics = signer::metrics(&args, &mut registry);
    let (auditor, audit_writer) = audit_log(&args, &clock, &mut registry)?;

    // The pod certificate signer: its CA loaded and its metrics registered now, started
    // once the state's readiness can hold its check.
    let pod_certificates = crate::podcert::prepare(
        &args.pod_certificates,
        crate::podcert::Context {
            kubeconfig: args.kubeconfig.as_deref(),
            policy_file: auth.authorizer.policy.clone(),
            holder: holder.as_ref(),
            lease_seconds: args.keys.key_lease_duration,
            auditor: &auditor,
            clock: &clock,
        },
        &mut registry,
    )
    .await?;

    // 3. The issuer core, and the API's state over it. The token agent's pod token is
    //    reviewed for warrant's audience alone (docs/injection.md), whether or not this warrant
    //    injects agents itself.
    let mut authenticator = auth.authenticator;
    authenticator.agent_audience = Some(args.injection.agent_audience.clone());
    let issuer = Issuer::new(settings, keys.initial.clone(), clock.clone(), auditor);
    let objects = Objects::new(source);
    let state = AppState::new(StateParts {
        issuer: issuer.clone(),
        objects: if args.disable_secret_binding {
            objects.without_secret_binding()
        } else {
            objects
        },
        authenticator,
        authorizer: auth.authorizer,
        registry,
    });
    let _injection = crate::injection::setup(&args.injection, injection_callers, &state)?;

    // 4. Key changes, published (with the SPIFFE trust bundle) before the key manager starts.
    let changes =
        start_key_changes(publisher, pod_certificates, keys, &issuer, &state, clock).await?;

    // 5. The signer, before the HTTPS listener and whatever the cluster's state:
    //    kube-apiserver needs it to start at all.
    let signer = signer::start(&args, &issuer, signer_metrics)?;
    warn_without_discovery(&issuer);

    // 6. Serve until a signal: the API (or the signer alone), with the metrics and health
    //    listener beside it until the API has stopped.
    let _auth = auth.running;
    let shutdown = shutdown(state.clone(), args.shutdown_delay);
    let observe = observe(&args, &state).await?;
    serve_api(https, &args, &auth.trust, &issuer, state, shutdown).await?;

    // 7. Stop, in order.
    Stopping {
        observe,
        signer,
        changes,
        audit: audit_writer,
    }
    .stop()
    .await;
    Ok(())
}

/// Serves the API over `https` until `shutdown` completes; without it (`--secure-port 0`),
/// only waits for `shutdown` while the signer serves.
async fn serve_api(
    https: Option<Https>,
    args: &ServeArgs,
    trust: &ClientTrust,
    issuer: &Issuer,
    state: AppState,
    shutdown: impl Future<Output = ()>,
) -> Result<(), Box<dyn Error>> {
    match https {
        Some(https) => https.serve(args, trust, issuer, state, shutdown).await,
        None => {
            tracing::info!(
                issuer = %issuer.settings().issuer(),
                signing_kid = %signing_kid(issuer),
                "serving the signing socket only (--secure-port 0: no HTTPS API; metrics and health only with --metrics-bind-address)"
            );
            shutdown.await;
            Ok(())
        }
    }
}

/// The audit log of `--audit-log-path` (and its writer, to finish last), or an auditor that
/// records nothing.
fn audit_log(
    args: &ServeArgs,
    clock: &Clock,
    registry: &mut Registry,
) -> Result<(Auditor, Option<warrant_audit::AuditWriter>), Box<dyn Error>> {
    Ok(match args.audit.options() {
        Some(options) => {
            let (auditor, writer) = warrant_audit::start(&options, clock.clone(), registry)?;
            (auditor, Some(writer))
        }
        None => (Auditor::disabled(), None),
    })
}

/// What keeps the keys current once `serve` runs: the key manager (or the static files'
/// watch), the pod certificate signer, and the discovery publisher.
struct KeyChanges {
    keys: Running,
    pod_certificates: Option<Running>,
    _publisher: Option<warrant_publish::PublisherTask>,
}

/// Starts what follows key changes, the publishing first, so that a key due to sign is held
/// until the targets list it. With the pod certificate signer, the SPIFFE trust bundle is
/// published beside the documents; without it, the bundle holds the JWT keys alone (for the
/// policy's JWT-SVIDs), and is published only if the policy makes JWT-SVIDs.
async fn start_key_changes(
    publisher: Option<warrant_publish::Publisher>,
    pod_certificates: Option<crate::podcert::Prepared>,
    keys: keys::Opened,
    issuer: &Issuer,
    state: &AppState,
    clock: Clock,
) -> Result<KeyChanges, Box<dyn Error>> {
    let (spiffe_roots, spiffe_feed) = tokio::sync::watch::channel(None);
    let jwt_svids = state
        .authorizer()
        .policy
        .as_ref()
        .is_some_and(|p| p.current().claims.iter().any(|entry| entry.value.jwt_svid));
    if pod_certificates.is_none() {
        state.set_spiffe_roots(warrant_issuer::SpiffeRoots::none());
        if jwt_svids {
            spiffe_roots.send_replace(Some(std::sync::Arc::new(
                warrant_issuer::SpiffeRoots::none(),
            )));
        }
    }
    let (publishing, publisher) = match publisher {
        Some(mut publisher) => {
            if pod_certificates.is_some() || jwt_svids {
                publisher.follow_spiffe_roots(spiffe_feed);
            }
            let (publishing, task) =
                start_publishing(publisher, &keys, issuer, state, &clock).await;
            (Some(publishing), Some(task))
        }
        None => (None, None),
    };
    let spiffe_roots = publishing.is_some().then_some(spiffe_roots);
    let pod_certificates = pod_certificates.map(|prepared| prepared.start(state, spiffe_roots));
    let keys = keys.start(state.clone(), clock, publishing)?;
    Ok(KeyChanges {
        keys,
        pod_certificates,
        _publisher: publisher,
    })
}

/// What `serve` stops when a signal has come and the API has stopped.
struct Stopping {
    observe: Option<Running>,
    signer: Option<Running>,
    changes: KeyChanges,
    audit: Option<warrant_audit::AuditWriter>,
}

impl Stopping {
    /// Stops, in order: the listeners, the signer, the pod certificate signer, the key
    /// manager, and last the audit log, once every request that could make an event has been
    /// answered.
    async fn stop(self) {
        if let Some(observe) = self.observe {
            observe.stop().await;
        }
        if let Some(signer) = self.signer {
            signer.stop_within(signer::SHUTDOWN_GRACE).await;
        }
        if let Some(pod_certificates) = self.changes.pod_certificates {
            pod_certificates.stop().await;
        }
        self.changes.keys.stop().await;
        if let Some(writer) = self.audit {
            writer.finish().await;
        }
        tracing::info!("stopped");
    }
}

/// The publisher of `--publish-discovery`, if any target is given, its metrics registered.
fn publisher(
    args: &ServeArgs,
    settings: &Settings,
    registry: &mut Registry,
) -> Result<Option<warrant_publish::Publisher>, Box<dyn Error>> {
    let publish_metrics = warrant_publish::PublishMetrics::new();
    let endpoint = args.publish_endpoint.endpoint();
    let targets = args
        .publish_discovery
        .iter()
        .map(|url| warrant_publish::Target::open(url, &endpoint, &[]))
        .collect::<Result<Vec<_>, _>>()
        .map_err(publish_flag)?;
    if targets.is_empty() {
        if endpoint.is_set() {
            return Err("--publish-endpoint is set but no --publish-discovery target".into());
        }
        return Ok(None);
    }
    publish_metrics.register(registry);
    let issuer = settings
        .issuers
        .first()
        .map(String::as_str)
        .unwrap_or_default();
    Ok(Some(
        warrant_publish::Publisher::new(targets, issuer, &settings.jwks_uri, publish_metrics)
            .map_err(publish_flag)?,
    ))
}

/// Refuses a rotation policy that cannot work (for replicas sharing a Secret, one that gives
/// them too little time to hear of a new key), and warns about settings an operator probably
/// did not mean.
fn check_key_source(
    args: &ServeArgs,
    key_source: &KeySource,
    max_token_seconds: i64,
) -> Result<(), Box<dyn Error>> {
    if let KeySource::Managed { rotation, .. } = key_source {
        let policy = keys::policy(rotation, None, max_token_seconds);
        policy.validate()?;
        // Replicas that share a Secret need longer to hear of a new key before it signs.
        if key_source.uses_cluster() {
            policy.validate_shared()?;
        }
        warn_about_policy(&policy);
    }
    if args.jwks_x5c && !key_source.is_managed() {
        return Err("--jwks-x5c needs managed keys (--key-dir or --key-secret): each key's certificate is valid from the key's publication, which static key files do not record".into());
    }
    if args.signing_endpoint.is_some() && key_source.secret_without_copy() {
        tracing::warn!(
            "--service-account-signing-endpoint with --key-secret but no --key-copy-dir: if the Secret is in the cluster whose kube-apiserver uses this signer, that kube-apiserver cannot start while warrant cannot read the Secret, nor warrant read it before kube-apiserver starts; give each control-plane node a --key-copy-dir (docs/external-signer.md)"
        );
    }
    if args.objects_file.is_some()
        && args.kubeconfig.is_some()
        && !key_source.uses_cluster()
        && !args.auth.uses_cluster_kubeconfig()
    {
        tracing::warn!(
            "--kubeconfig is not used: objects come from --objects-file, and neither --key-secret nor delegation is set"
        );
    }
    Ok(())
}

/// Runs the publisher's first round (awaited: it tells the gate what the targets list, so a
/// key due to sign is held if they do not list it), then keeps publishing as the keys change.
/// A failing target holds the next key back and fails readiness (`/readyz/publish` names it
/// and why), so the operator's alerts on readiness see it.
async fn start_publishing(
    mut publisher: warrant_publish::Publisher,
    keys: &keys::Opened,
    issuer: &Issuer,
    state: &AppState,
    clock: &Clock,
) -> (keys::Publishing, warrant_publish::PublisherTask) {
    let writer = keys.writer();
    let published = issuer.published();
    if let Err(error) = publisher
        .round(&published, clock.now(), writer.may_write())
        .await
    {
        tracing::error!(%error, "the first publish round failed; retrying (see /readyz/publish)");
    }
    let health = publisher.health();
    state.add_check("publish", move || health.borrow().failure());
    let gate = publisher.gate();
    let (feed, feed_rx) = tokio::sync::watch::channel(published);
    let task = publisher.spawn(feed_rx, writer, clock.clone());
    (keys::Publishing { feed, gate }, task)
}

/// The kid of the key that signs now, for the startup log: `-` while none does (the signing
/// key was revoked and no successor could be made yet).
fn signing_kid(issuer: &Issuer) -> String {
    issuer
        .published()
        .keys()
        .signing_at(issuer.clock().now())
        .map_or_else(|_| "-".to_owned(), |key| key.kid().to_owned())
}

/// Without discovery (an issuer kube-apiserver would not publish under), says that relying
/// parties cannot fetch the keys.
fn warn_without_discovery(issuer: &Issuer) {
    if let Err(why) = issuer.published().discovery() {
        tracing::warn!(
            reason = %why,
            "OIDC discovery and JWKS endpoints are disabled (kube-apiserver does the same): relying parties cannot fetch the keys"
        );
    }
}

/// The metrics and health listener of `--metrics-bind-address`, serving until stopped.
async fn observe(args: &ServeArgs, state: &AppState) -> Result<Option<Running>, Box<dyn Error>> {
    let Some(address) = args.metrics_bind_address else {
        return Ok(None);
    };
    let listener = TcpListener::bind(address)
        .await
        .map_err(|e| format!("--metrics-bind-address: cannot listen on {address}: {e}"))?;
    tracing::info!(address = %listener.local_addr()?, "serving metrics and health over HTTP");
    let state = state.clone();
    Ok(Some(Running::spawn(|stop| {
        warrant_server::serve_observe(listener, state, stop)
    })))
}

/// The HTTPS side: its certificate (watched for rotation), connection bounds and where it
/// listens. `None` with `--secure-port 0` (and no socket passed by a service manager).
struct Https {
    certificate: ServingCertificate,
    /// `--tls-min-version` and `--tls-cipher-suites`.
    tls: TlsSettings,
    _certificate_watch: warrant_watch::FileWatch,
    serving: ServeOptions,
    connections: Connections,
    inherited: Option<std::net::TcpListener>,
}

impl Https {
    fn setup(
        args: &ServeArgs,
        inherited: Option<std::net::TcpListener>,
        registry: &mut Registry,
    ) -> Result<Option<Https>, Box<dyn Error>> {
        if args.secure_port == 0 && inherited.is_none() {
            if args.signing_endpoint.is_none() {
                return Err("--secure-port 0 serves no HTTPS, and without --service-account-signing-endpoint there would be nothing to serve".into());
            }
            return Ok(None);
        }
        let (Some(cert), Some(key)) = (&args.tls_cert_file, &args.tls_private_key_file) else {
            return Err("--tls-cert-file and --tls-private-key-file are required to serve HTTPS (--secure-port 0 serves only the signing socket)".into());
        };
        let tls = TlsSettings::new(args.tls_min_version, &args.tls_cipher_suites)?;
        let certificate = ServingCertificate::load(&TlsFiles {
            cert: cert.clone(),
            key: key.clone(),
        })?;
        let certificate_watch = certificate.watch()?;
        certificate.register_metrics(registry);
        let serving = serve_options(args);
        let connections = Connections::new(&serving);
        connections.register_metrics(registry);
        Ok(Some(Https {
            certificate,
            tls,
            _certificate_watch: certificate_watch,
            serving,
            connections,
            inherited,
        }))
    }

    /// Serves the API until `shutdown`, then finishes the requests in flight.
    async fn serve(
        mut self,
        args: &ServeArgs,
        trust: &ClientTrust,
        issuer: &Issuer,
        state: AppState,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), Box<dyn Error>> {
        let tls = server_config(&self.certificate, trust, &self.tls)?;
        let socket_activated = self.inherited.is_some();
        let listener = self.listen(args).await?;
        let published = issuer.published();
        let signing = published.keys().signing_at(issuer.clock().now());
        tracing::info!(
            address = %listener.local_addr()?,
            socket_activated,
            issuer = %issuer.settings().issuer(),
            signing_kid = %signing_kid(issuer),
            alg = %signing.map_or_else(|_| "-".to_owned(), |key| key.algorithm().to_string()),
            "serving"
        );
        serve(
            listener,
            tls,
            router(state),
            self.serving,
            self.connections,
            shutdown,
        )
        .await;
        Ok(())
    }

    /// The listener: the socket a service manager passed, or a new one on the flags' address.
    async fn listen(&mut self, args: &ServeArgs) -> Result<TcpListener, Box<dyn Error>> {
        Ok(match self.inherited.take() {
            Some(listener) => {
                listener.set_nonblocking(true)?;
                TcpListener::from_std(listener)
                    .map_err(|e| format!("cannot serve on the socket passed in LISTEN_FDS: {e}"))?
            }
            None => {
                let address = SocketAddr::new(args.bind_address, args.secure_port);
                TcpListener::bind(address)
                    .await
                    .map_err(|e| format!("cannot listen on {address}: {e}"))?
            }
        })
    }
}

/// The connection bounds from the flags. Raises the descriptor limit to its maximum first, as
/// Go programs (kube-apiserver among them) do at start, and sizes the default connection limit
/// from it.
fn serve_options(args: &ServeArgs) -> ServeOptions {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current < limit.maximum {
        let raised = rustix::process::Rlimit {
            current: limit.maximum,
            maximum: limit.maximum,
        };
        match setrlimit(Resource::Nofile, raised) {
            Ok(()) => limit = raised,
            Err(e) => tracing::warn!(error = %e, "cannot raise the descriptor limit"),
        }
    }
    let descriptors = limit.current.unwrap_or(u64::MAX);
    let max_connections = args
        .max_connections
        .unwrap_or_else(|| max_connections_for(descriptors));
    let max_connections_per_address = args
        .max_connections_per_address
        .map_or_else(
            || default_per_address(max_connections),
            |n| usize::try_from(n).unwrap_or(usize::MAX),
        )
        .min(max_connections);
    tracing::info!(
        descriptors,
        max_connections,
        max_connections_per_address,
        "connection limit"
    );
    ServeOptions {
        handshake_timeout: args.tls_handshake_timeout,
        first_request_timeout: args.request_header_timeout,
        idle_timeout: args.connection_idle_timeout,
        max_connections,
        max_connections_per_address,
        ..ServeOptions::default()
    }
}

/// Warns about rotation settings that work but that an operator probably did not mean.
fn warn_about_policy(policy: &RotationPolicy) {
    if policy.publish_ahead_seconds < 3600 {
        tracing::warn!(
            publish_ahead_seconds = policy.publish_ahead_seconds,
            "--key-publish-ahead is under an hour: relying parties that cache the JWKS longer than that (many cache for hours) may reject tokens from a new key until they re-read it"
        );
    }
    let keys = policy.most_published_keys();
    if keys > 10 {
        tracing::warn!(
            max_token_seconds = policy.max_token_seconds,
            rotation_period_seconds = policy.rotation_period_seconds,
            published_keys = keys,
            "tokens may live many rotation periods, so retired keys stay published for as long and the JWKS grows to this many keys; consider a lower --service-account-max-token-expiration or a longer --key-rotation-period"
        );
    }
}

/// The issuer settings, checked with kube-apiserver's rules. With managed keys, the longest
/// token lifetime defaults to a day and also bounds extended tokens (as kube-apiserver bounds
/// them by an external signer's maximum), so that retired keys leave the JWKS soon after they
/// stop signing.
fn settings(args: &ServeArgs, managed_keys: bool) -> Result<Settings, Box<dyn Error>> {
    validate_issuers(&args.issuers)?;
    let api_audiences: Vec<String> = if args.api_audiences.is_empty() {
        args.issuers.clone()
    } else {
        args.api_audiences
            .iter()
            .filter(|a| !a.is_empty())
            .cloned()
            .collect()
    };
    // An empty list would make every token good for warrant's own API (kube-apiserver skips the
    // audience check when it has none): refuse it rather than guess.
    if api_audiences.is_empty() {
        return Err("--api-audiences names no audience: leave the flag out to use the issuers, or name at least one (an empty list would let tokens for any audience authenticate to warrant)".into());
    }
    // The agent's pod token must be one kube-apiserver refuses: an issuer is kube-apiserver's
    // default API audience where warrant is the cluster's signer (the issuers are then shared).
    let agent_audience = &args.injection.agent_audience;
    if args.issuers.contains(agent_audience) || api_audiences.contains(agent_audience) {
        return Err(format!(
            "--token-agent-audience {agent_audience:?} is an issuer or an API audience: the token agent's pod token would then be one kube-apiserver accepts; give warrant an audience of its own (the default, {:?})",
            warrant_server::TOKEN_AGENT_DEFAULT_AUDIENCE
        )
        .into());
    }
    let max_seconds = match max_expiration_cap(args.max_token_expiration)? {
        None if managed_keys => Some(keys::MANAGED_DEFAULT_MAX_TOKEN_SECONDS),
        cap => cap,
    };
    let mut expiration = ExpirationPolicy {
        max_seconds,
        extend: args.extend_token_expiration,
        ..ExpirationPolicy::default()
    };
    if managed_keys && let Some(max) = max_seconds {
        expiration.extended_seconds = expiration.extended_seconds.min(max);
    }
    let jwks_uri = jwks_uri(
        &args.issuers,
        args.jwks_uri.as_deref(),
        args.external_hostname.as_deref(),
        args.secure_port,
    )?;
    Ok(Settings {
        issuers: args.issuers.clone(),
        api_audiences,
        jwks_uri,
        expiration,
        signature_cache_entries: args.signature_cache_entries,
        jwks_x5c: args.jwks_x5c,
    })
}

/// The JWKS URL the discovery document names: `--service-account-jwks-uri` (https), else at
/// `--external-hostname` (with `port` if it names none), else under the first issuer.
pub(crate) fn jwks_uri(
    issuers: &[String],
    jwks_uri: Option<&str>,
    external_hostname: Option<&str>,
    port: u16,
) -> Result<String, Box<dyn Error>> {
    Ok(match (jwks_uri, external_hostname) {
        (Some(uri), _) => {
            validate_jwks_uri(uri)?;
            uri.to_owned()
        }
        (None, Some(host)) if host.contains(':') => format!("https://{host}{JWKS_PATH}"),
        (None, Some(host)) => format!("https://{host}:{port}{JWKS_PATH}"),
        (None, None) => {
            let issuer = warrant_issuer::first_issuer(issuers);
            format!("{}{JWKS_PATH}", issuer.trim_end_matches('/'))
        }
    })
}

pub(crate) async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = interrupt => {},
                    _ = term.recv() => {},
                }
            }
            Err(_) => {
                let _ = interrupt.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = interrupt.await;
    }
}

/// Completes when the server should stop accepting: at SIGTERM (or SIGINT) readiness fails at
/// once, the server goes on serving for `delay` (so endpoints and kube-apiserver's webhook
/// stop sending before anything is refused; a second signal cuts it short), then this
/// completes and requests in flight get the server's grace to finish.
async fn shutdown(state: AppState, delay: std::time::Duration) {
    shutdown_signal().await;
    state.begin_shutdown();
    if !delay.is_zero() {
        tracing::info!(
            delay = %format!("{}s", delay.as_secs_f64()),
            "shutting down: /readyz fails from now on; serving on for the shutdown delay"
        );
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            () = shutdown_signal() => tracing::info!("a second signal: not waiting out the shutdown delay"),
        }
    }
    tracing::info!("shutting down: no new connections; finishing requests in flight");
}

/// A target of `--publish-discovery` that cannot be used, named by its flag (`discovery
/// publish` takes the same URLs as arguments, and its errors name only the URL).
fn publish_flag(error: warrant_publish::TargetError) -> String {
    format!("--publish-discovery {error}")
}
