//! `serve --service-account-signing-endpoint`: kube-apiserver's external signer on a Unix
//! socket, beside the HTTPS API, from the same state (see the warrant-signer crate); and
//! `probe-signer`, which calls it as kube-apiserver does at its start.

use std::error::Error;

use prometheus_client::registry::Registry;
use tokio::sync::watch;
use warrant_server::AppState;
use warrant_signer::{Signer, SignerMetrics, SocketOptions};

use crate::cli::{ProbeSignerArgs, ServeArgs};

/// The signer's metrics, registered before the state takes the registry; `None` without the
/// flag.
pub(crate) fn metrics(args: &ServeArgs, registry: &mut Registry) -> Option<SignerMetrics> {
    args.signing_endpoint.as_ref().map(|_| {
        let metrics = SignerMetrics::default();
        metrics.register(registry);
        metrics
    })
}

/// The running signer: stop it with [`Running::stop`].
pub(crate) struct Running {
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

/// How long calls in flight may take to finish at shutdown. kube-apiserver holds its
/// connection open for good, so graceful shutdown alone would wait forever; a Sign takes
/// milliseconds.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

impl Running {
    /// Stops serving: calls in flight get [`SHUTDOWN_GRACE`] to finish, then every connection
    /// is closed and the socket file removed.
    pub(crate) async fn stop(mut self) {
        let _ = self.stop.send(true);
        if tokio::time::timeout(SHUTDOWN_GRACE, &mut self.task)
            .await
            .is_err()
        {
            // Aborting drops the server and, with it, the socket guard.
            self.task.abort();
            let _ = self.task.await;
        }
    }
}

/// Binds the socket and serves the signer on it, if the flag is given. Fails (and so does the
/// start) if the socket cannot be set up: kube-apiserver would not start without it.
pub(crate) fn start(
    args: &ServeArgs,
    state: &AppState,
    metrics: Option<SignerMetrics>,
) -> Result<Option<Running>, Box<dyn Error>> {
    let (Some(path), Some(metrics)) = (&args.signing_endpoint, metrics) else {
        return Ok(None);
    };
    let mut socket = warrant_signer::bind(&SocketOptions {
        path: path.clone(),
        group: args.signing_endpoint_group.clone(),
    })?;
    let Some(listener) = socket.take_listener() else {
        return Err("the signing socket was bound without a listener".into());
    };
    let (stop, mut stopped) = watch::channel(false);
    let signer = Signer::new(state.clone(), metrics);
    tracing::info!(
        path = %path.display(),
        group = args.signing_endpoint_group.as_deref().unwrap_or("-"),
        "serving kube-apiserver's external signer (ExternalJWTSigner v1)"
    );
    let task = tokio::spawn(async move {
        let shutdown = async move {
            let _ = stopped.wait_for(|stop| *stop).await;
        };
        if let Err(error) = warrant_signer::serve(listener, signer, shutdown).await {
            tracing::error!(%error, "the external signer stopped serving");
        }
        // The socket file goes with the guard, now that nothing serves on it.
        drop(socket);
    });
    Ok(Some(Running { stop, task }))
}

/// `warrant probe-signer`: Metadata, then FetchKeys, as kube-apiserver calls them when it
/// starts (it refuses to start if either fails or the key list is empty). Prints one line on
/// success; a failure is the command's error.
pub(crate) async fn probe(args: &ProbeSignerArgs) -> Result<(), Box<dyn Error>> {
    let path = &args.signing_endpoint;
    let calls = async {
        let mut client = warrant_signer::client::connect(path)
            .await
            .map_err(|e| format!("cannot connect to the signer at {}: {e}", path.display()))?;
        let metadata = client
            .metadata(warrant_signer::proto::MetadataRequest {})
            .await
            .map_err(|s| format!("Metadata failed: {}", s.message()))?
            .into_inner();
        let keys = client
            .fetch_keys(warrant_signer::proto::FetchKeysRequest {})
            .await
            .map_err(|s| format!("FetchKeys failed: {}", s.message()))?
            .into_inner();
        Ok::<_, String>((metadata, keys))
    };
    let (metadata, keys) = tokio::time::timeout(args.timeout, calls)
        .await
        .map_err(|_| {
            format!(
                "the signer at {} did not answer Metadata and FetchKeys within {} s",
                path.display(),
                args.timeout.as_secs()
            )
        })??;
    if keys.keys.is_empty() {
        return Err("the signer lists no keys: kube-apiserver would refuse to start".into());
    }
    let kids: Vec<&str> = keys.keys.iter().map(|k| k.key_id.as_str()).collect();
    #[allow(clippy::print_stdout)]
    {
        println!(
            "ok: {} key(s) ({}), refresh hint {} s, tokens up to {} s",
            kids.len(),
            kids.join(", "),
            keys.refresh_hint_seconds,
            metadata.max_token_expiration_seconds
        );
    }
    Ok(())
}
