//! `serve --service-account-signing-endpoint`: kube-apiserver's external signer on a Unix
//! socket, beside the HTTPS API, from the same state (see the warrant-signer crate).

use std::error::Error;

use prometheus_client::registry::Registry;
use tokio::sync::watch;
use warrant_server::AppState;
use warrant_signer::{Signer, SignerMetrics, SocketOptions};

use crate::cli::ServeArgs;

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
