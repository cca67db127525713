//! `droidwarden daemon`: the long-running process. It keeps every device's
//! availability fresh and shuts down gracefully on SIGINT or SIGTERM.
//!
//! One [`CancellationToken`] is the shutdown signal; every task is spawned
//! through one [`TaskTracker`] so shutdown waits for all of them.

use crate::config::Config;
use droidwarden_bridge::{DeviceEvent, Registry, adb::AdbTransport};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How long shutdown waits for tasks before giving up on them.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

pub(crate) async fn run(config: Config) -> ExitCode {
    let shutdown = CancellationToken::new();
    let tracker = TaskTracker::new();
    let registry = Arc::new(Registry::new());
    let adb = Arc::new(AdbTransport::new(config.adb, Arc::clone(&registry)));
    tracing::info!(state_dir = %config.state_dir.display(), "droidwarden starting");

    tracker.spawn({
        let adb = Arc::clone(&adb);
        let shutdown = shutdown.clone();
        async move { adb.run(shutdown).await }
    });
    tracker.spawn(log_availability(Arc::clone(&registry), shutdown.clone()));
    tracker.close();

    wait_for_signal().await;
    tracing::info!("shutting down");
    shutdown.cancel();
    if tokio::time::timeout(SHUTDOWN_GRACE, tracker.wait())
        .await
        .is_err()
    {
        tracing::warn!("some tasks did not stop within {SHUTDOWN_GRACE:?}");
    }
    tracing::info!("stopped");
    ExitCode::SUCCESS
}

async fn log_availability(registry: Arc<Registry>, shutdown: CancellationToken) {
    let mut events = registry.subscribe();
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            event = events.recv() => match event {
                Ok(DeviceEvent::Availability { device, online, detail }) => {
                    tracing::info!(%device, online, detail, "device availability");
                }
                Ok(DeviceEvent::Removed { device }) => tracing::info!(%device, "device removed"),
                Err(RecvError::Lagged(n)) => tracing::warn!(missed = n, "availability events missed"),
                Err(RecvError::Closed) => return,
            },
        }
    }
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot listen for SIGTERM; stopping on Ctrl-C only");
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
