//! Where the objects tokens bind to come from: a manifest file (`--objects-file`, watched and
//! re-read on SIGHUP), or a cluster (`--kubeconfig`, or in-cluster config in a pod) kept in a
//! watch cache.

use std::error::Error;
use std::sync::Arc;

use jiff::Timestamp;
use prometheus_client::registry::Registry;
use tokio_util::task::AbortOnDropHandle;
use warrant_clock::Clock;
use warrant_objects::kube::{KubeOptions, KubeSource, cluster_client};
use warrant_objects::{FileSource, ObjectSource};

use crate::cli::ServeArgs;
use crate::running::Running;

/// Opens the configured source, registers its metrics and starts keeping it current: a file
/// is watched (and re-read on SIGHUP) while the returned task runs; the cluster cache's
/// watches live as long as the source, and need no task.
pub(crate) async fn open(
    args: &ServeArgs,
    registry: &mut Registry,
    clock: Clock,
    now: Timestamp,
) -> Result<(Arc<dyn ObjectSource>, Option<Running>), Box<dyn Error>> {
    if let Some(path) = &args.objects_file {
        let source = FileSource::load(path, now).await?;
        source.register_metrics(registry);
        let watch = source.watch(clock.clone())?;
        let hangup = reload_on_hangup(source.clone(), clock);
        return Ok((Arc::new(source), Some(Running::hold((watch, hangup)))));
    }
    let client = cluster_client(args.kubeconfig.as_deref())
        .await
        .map_err(|e| {
            if args.kubeconfig.is_none() {
                format!("{e} (or give --objects-file for the standalone issuer)")
            } else {
                e.to_string()
            }
        })?;
    let options = KubeOptions {
        max_staleness: args.max_cache_staleness,
        watch_secrets: !args.disable_secret_binding,
        ..KubeOptions::default()
    };
    let source = Arc::new(KubeSource::start_with(client, registry, options)?);
    tracing::info!(
        kubeconfig = %args.kubeconfig.as_ref().map_or("in-cluster".into(), |p| p.display().to_string()),
        max_cache_staleness = args.max_cache_staleness.map(|d| d.as_secs()),
        "watching the cluster's {}; ready once each is listed",
        if args.disable_secret_binding {
            "service accounts, pods and nodes (not secrets: secret binding is disabled)"
        } else {
            "service accounts, pods, secrets and nodes"
        }
    );
    Ok((source, None))
}

/// SIGHUP re-reads the file at once, for editors and tools whose writes the watcher misses.
fn reload_on_hangup(source: FileSource, clock: Clock) -> Option<AbortOnDropHandle<()>> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut hangup = signal(SignalKind::hangup()).ok()?;
        Some(AbortOnDropHandle::new(tokio::spawn(async move {
            while hangup.recv().await.is_some() {
                // A failure is logged and counted by the source; the last good set stays.
                let _ = source.reload_now(clock.now()).await;
            }
        })))
    }
    #[cfg(not(unix))]
    {
        let _ = (source, clock);
        None
    }
}

#[cfg(all(test, unix))]
mod tests {
    use std::time::Duration;

    use super::*;

    /// The SIGHUP task holds the file source; once its owner is dropped the task must be gone,
    /// and the source with it (the source's status channel closes). Dropping a bare
    /// `JoinHandle` would leave the task running for good.
    #[tokio::test(start_paused = true)]
    async fn dropping_the_hangup_owner_stops_its_task() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("objects.yaml");
        std::fs::write(&path, "").unwrap();
        let clock = Clock::System;
        let source = FileSource::load(&path, clock.now()).await.unwrap();
        let mut status = source.subscribe();
        let owner = reload_on_hangup(source, clock).expect("a SIGHUP handler on unix");
        drop(owner);
        // The paused clock only moves when every task is idle: a task still holding the
        // source makes this time out instead of seeing the channel close.
        let closed = tokio::time::timeout(Duration::from_secs(3600), status.changed()).await;
        assert!(
            matches!(closed, Ok(Err(_))),
            "the SIGHUP task outlived its owner"
        );
    }
}
