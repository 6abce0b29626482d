//! Where the objects tokens bind to come from: the manifest file (`--objects-file`), watched for
//! changes and reloaded on SIGHUP.

use std::error::Error;
use std::sync::Arc;

use jiff::Timestamp;
use prometheus_client::registry::Registry;
use warrant_objects::{FileSource, FileWatch, ObjectSource};
use warrant_server::Clock;

use crate::cli::ServeArgs;

/// Keeps the source's background work alive; dropping it stops watching.
pub(crate) struct Running {
    _watch: FileWatch,
    _hangup: Option<tokio::task::JoinHandle<()>>,
}

/// Opens the configured source, registers its metrics and starts keeping it current.
pub(crate) async fn open(
    args: &ServeArgs,
    registry: &mut Registry,
    clock: Clock,
    now: Timestamp,
) -> Result<(Arc<dyn ObjectSource>, Running), Box<dyn Error>> {
    let source = FileSource::load(&args.objects_file, now).await?;
    source.register_metrics(registry);
    let watch_clock = clock.clone();
    let watch = source.watch(move || watch_clock.now())?;
    let hangup = reload_on_hangup(source.clone(), clock);
    Ok((
        Arc::new(source),
        Running {
            _watch: watch,
            _hangup: hangup,
        },
    ))
}

/// SIGHUP re-reads the file at once, for editors and tools whose writes the watcher misses.
fn reload_on_hangup(source: FileSource, clock: Clock) -> Option<tokio::task::JoinHandle<()>> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut hangup = signal(SignalKind::hangup()).ok()?;
        Some(tokio::spawn(async move {
            while hangup.recv().await.is_some() {
                // A failure is logged and counted by the source; the last good set stays.
                let _ = source.reload_now(clock.now()).await;
            }
        }))
    }
    #[cfg(not(unix))]
    {
        let _ = (source, clock);
        None
    }
}
