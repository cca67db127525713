//! `droidwarden daemon`: the long-running hub between phones, home
//! automation and people.
//!
//! Start-up: load devices (one refresh so the first announcements are
//! right), start the embedded broker when no broker is configured, connect
//! to MQTT, then run the tasks. Shutdown on SIGINT/SIGTERM: stop taking
//! commands, let calls in flight finish (bounded), publish `offline`,
//! disconnect cleanly, stop the rest.
//!
//! One [`CancellationToken`] per stage is the shutdown signal; every task is
//! spawned through one [`TaskTracker`] so shutdown waits for all of them.

use crate::config::{BrokerTarget, Config};
use crate::hub::Hub;
use crate::mqtt;
use droidwarden_bridge::companion::CompanionHub;
use droidwarden_bridge::{DeviceEvent, Registry, adb::AdbTransport};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How long shutdown waits for calls in flight.
const CALL_GRACE: Duration = Duration::from_secs(20);
/// How long shutdown waits for the remaining tasks.
const TASK_GRACE: Duration = Duration::from_secs(5);

pub(crate) async fn run(config: Config) -> ExitCode {
    let shutdown = CancellationToken::new();
    let tracker = TaskTracker::new();
    let registry = Arc::new(Registry::new());
    let hub = Hub::new(Arc::clone(&registry));
    let adb = Arc::new(AdbTransport::new(config.adb.clone(), Arc::clone(&registry)));
    let (companion, companion_requests) =
        CompanionHub::new(config.companion.clone(), Arc::clone(&registry));
    tracing::info!(state_dir = %config.state_dir.display(), "droidwarden starting");
    if let Err(e) = adb.refresh().await {
        tracing::warn!(error = %e, "no devices yet; will keep trying");
    }

    let mut mqtt_settings = config.mqtt.clone();
    let broker_stop = CancellationToken::new();
    if let BrokerTarget::Embedded {
        listen,
        allow_remote,
    } = mqtt_settings.broker
    {
        let broker = crate::broker::BrokerConfig {
            listen,
            allow_remote,
        };
        match crate::broker::start(broker, broker_stop.clone(), &tracker).await {
            Ok(bound) => {
                tracing::info!(%bound, "embedded MQTT broker listening");
                mqtt_settings.broker = BrokerTarget::Embedded {
                    listen: bound,
                    allow_remote,
                };
            }
            Err(e) => {
                tracing::error!(%listen, error = %e, "cannot start the embedded MQTT broker");
                return ExitCode::FAILURE;
            }
        }
    }
    let (link, eventloop) = match mqtt::connect(
        mqtt_settings,
        hub.clone(),
        companion,
        config.state_dir.clone(),
    ) {
        Ok(pair) => pair,
        Err(e) => {
            tracing::error!(error = %e, "cannot set up MQTT");
            return ExitCode::FAILURE;
        }
    };
    let (incoming_tx, incoming_rx) = tokio::sync::mpsc::channel(mqtt::INCOMING_CHANNEL);
    let mqtt_stop = CancellationToken::new();
    tracker.spawn(mqtt::run_event_loop(
        Arc::clone(&link),
        eventloop,
        incoming_tx,
        mqtt_stop.clone(),
    ));
    tracker.spawn(mqtt::run_resync(Arc::clone(&link), shutdown.clone()));
    tracker.spawn(mqtt::run_dispatch(
        Arc::clone(&link),
        incoming_rx,
        shutdown.clone(),
    ));
    tracker.spawn(mqtt::run_publisher(Arc::clone(&link), mqtt_stop.clone()));
    tracker.spawn(mqtt::run_companion_requests(
        Arc::clone(&link),
        companion_requests,
        mqtt_stop.clone(),
    ));
    tracker.spawn({
        let adb = Arc::clone(&adb);
        let shutdown = shutdown.clone();
        async move { adb.run(shutdown).await }
    });
    tracker.spawn(crate::poll::run(
        hub.clone(),
        config.poll.clone(),
        tracker.clone(),
        shutdown.clone(),
    ));
    tracker.spawn(log_availability(Arc::clone(&registry), shutdown.clone()));

    wait_for_signal().await;
    tracing::info!("shutting down: no new commands; waiting for calls in flight");
    shutdown.cancel();
    link.shutdown(CALL_GRACE).await;
    // Let the event loop flush the goodbye before it stops.
    tokio::time::sleep(Duration::from_millis(200)).await;
    mqtt_stop.cancel();
    broker_stop.cancel();
    tracker.close();
    if tokio::time::timeout(TASK_GRACE, tracker.wait())
        .await
        .is_err()
    {
        tracing::warn!("some tasks did not stop within {TASK_GRACE:?}");
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
