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
//!
//! The event centre ([`crate::events`]) is made once here; the MQTT
//! publisher, the D-Bus signals, the metrics and the main loop each
//! subscribe to it before anything can happen that they must see.
//!
//! Once started, the main loop ([`main_loop`]) takes one [`Event`] at a
//! time: a signal (SIGTERM/SIGINT stop, SIGHUP reloads the configuration,
//! see [`crate::reload`]), a watchdog tick, readiness, or an event of the
//! centre (a change of device availability, which it logs, or of the
//! agent's activity); it keeps systemd informed ([`crate::systemd`]):
//! `READY=1` once every part registered in [`Readiness`] is up (MQTT
//! today), `STATUS=` with the devices online, `WATCHDOG=1`, `RELOADING=1`
//! and `STOPPING=1`.

use crate::assistant::{Activity, Assistant};
use crate::config::{BrokerTarget, Config};
use crate::events::{self, Centre, Events, Streams};
use crate::hub::Hub;
use crate::mqtt;
use crate::reload;
use crate::systemd::{self, Notifier, Readiness};
use droidwarden_bridge::companion::CompanionHub;
use droidwarden_bridge::{DeviceEvent, Registry, adb::AdbTransport};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How long shutdown waits for calls in flight.
const CALL_GRACE: Duration = Duration::from_secs(20);
/// How long shutdown waits for the goodbye to reach the broker.
const FLUSH_GRACE: Duration = Duration::from_secs(2);
/// How long shutdown waits for the remaining tasks.
const TASK_GRACE: Duration = Duration::from_secs(5);

/// Create the state directory if needed and prove it writable, so that a
/// read-only or full disk stops the daemon at once with a status that says
/// so (see [`crate::EXIT_CANTCREAT`]) instead of failing later.
///
/// # Errors
/// The exit status and the I/O error.
async fn check_state_dir(dir: &std::path::Path) -> Result<(), (u8, std::io::Error)> {
    // Created 0700, or narrowed to it (private.rs).
    let owned = dir.to_path_buf();
    tokio::task::spawn_blocking(move || crate::private::state_dir(&owned))
        .await
        .map_err(|e| (crate::EXIT_CANTCREAT, std::io::Error::other(e)))?
        .map_err(|e| (crate::EXIT_CANTCREAT, e))?;
    // Another user's directory: refused before anything is written there.
    let owned = dir.to_path_buf();
    tokio::task::spawn_blocking(move || crate::private::check_owner(&owned))
        .await
        .map_err(|e| (crate::EXIT_CANTCREAT, std::io::Error::other(e)))?
        .map_err(|e| (crate::EXIT_CANTCREAT, e))?;
    let probe = dir.join(".droidwarden-write-check");
    tokio::fs::write(&probe, b"")
        .await
        .map_err(|e| (crate::EXIT_CANTCREAT, e))?;
    tokio::fs::remove_file(&probe)
        .await
        .map_err(|e| (crate::EXIT_IOERR, e))
}

/// The exit status for an agent that cannot start: a bad key or setting is
/// a configuration error (78, not restarted); a store directory or file
/// that cannot be created is 73 and any other store failure an I/O error
/// (74), both restarted by systemd once the disk is fixed.
fn agent_exit_status(e: &droidwarden_agent::AgentError) -> u8 {
    use droidwarden_agent::AgentError;
    match e {
        AgentError::Config { .. } | AgentError::Secret { .. } => crate::EXIT_CONFIG,
        _ if e.store_cannot_create() => crate::EXIT_CANTCREAT,
        _ if e.is_store_failure() => crate::EXIT_IOERR,
        _ => 1,
    }
}

/// The exit status, and what to do, when the daemon's account on the
/// embedded broker cannot be set up: a user file that does not read as one
/// (damaged, edited by hand) is a configuration error (78: restarting does
/// not help, a person must fix or move it); one that cannot be read is an
/// I/O error (74); otherwise the file or the secret could not be written
/// (73). Both restarted by systemd once the disk is fixed.
fn users_exit_status(file: &std::path::Path) -> (u8, String) {
    match crate::mqtt_users::UserDb::load(file) {
        // Not UTF-8 is damage, not a read failure.
        Err(e)
            if e.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() != std::io::ErrorKind::InvalidData) =>
        {
            (
                crate::EXIT_IOERR,
                format!(
                    "{} cannot be read: check its owner and the disk",
                    file.display()
                ),
            )
        }
        Err(_) => (
            crate::EXIT_CONFIG,
            format!(
                "{} is damaged: fix it, or move it aside (every MQTT account is then lost and must be made again with `droidwarden mqtt-user add`), then start the daemon",
                file.display()
            ),
        ),
        Ok(_) => (
            crate::EXIT_CANTCREAT,
            format!(
                "the user file or the daemon's secret beside it cannot be written: check that {} is writable and the disk not full",
                file.parent().unwrap_or(file).display()
            ),
        ),
    }
}

/// The daemon as the `droidwarden daemon` command runs it: start, then
/// serve until SIGTERM or SIGINT, reloading on SIGHUP, and stop in order.
pub(crate) async fn run(config: Config) -> ExitCode {
    // Signals first: until SIGHUP is handled, its default action would end
    // the process.
    let mut signals = match Signals::new() {
        Ok(signals) => signals,
        Err(e) => {
            tracing::error!(error = %e, "cannot listen for signals");
            return ExitCode::FAILURE;
        }
    };
    let notifier = Notifier::from_env();
    if notifier.enabled() {
        tracing::debug!("notifying systemd");
    }
    let mut running = match Daemon::new(config).start(CancellationToken::new()).await {
        Ok(running) => running,
        Err(failed) => return ExitCode::from(failed.status),
    };
    let stop = running.serve(&notifier, &mut signals).await;
    notifier.stopping();
    tracing::info!(
        signal = stop,
        "shutting down: no new commands; waiting for calls in flight"
    );
    running.stop().await;
    ExitCode::SUCCESS
}

/// The daemon, ready to start: its configuration.
///
/// [`Daemon::start`] brings up every part in order and returns the
/// [`Running`] daemon, which [`Running::stop`] stops in order; a start that
/// fails part-way stops what it had begun the same way before it returns.
/// Tests start it in-process; the `daemon` command adds signals and systemd.
#[derive(Debug)]
pub struct Daemon {
    config: Config,
}

/// Why the daemon did not start (already logged): the exit status that
/// says so (`EX_CONFIG` 78, `EX_CANTCREAT` 73, `EX_IOERR` 74, or 1) and
/// what failed.
#[derive(Debug, thiserror::Error)]
#[error("the daemon did not start (exit status {status}): {what}")]
pub struct StartFailed {
    /// The process's exit status for this failure.
    pub status: u8,
    /// What failed, in a person's words.
    pub what: String,
}

impl StartFailed {
    fn new(status: u8, what: impl Into<String>) -> Self {
        Self {
            status,
            what: what.into(),
        }
    }
}

/// Where the running daemon listens: the real ports when port 0 was asked
/// for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Addresses {
    /// The embedded MQTT broker, when it runs.
    pub broker: Option<std::net::SocketAddr>,
    /// `/metrics`, when `[metrics] listen` is set.
    pub metrics: Option<std::net::SocketAddr>,
    /// MCP over Streamable HTTP, when `[mcp] listen` is set.
    pub mcp: Option<std::net::SocketAddr>,
    /// The private D-Bus socket (`droidwarden` commands connect to it).
    pub api_socket: std::path::PathBuf,
}

/// A started daemon. Drop it only after [`Running::stop`]: the ordered
/// shutdown (calls in flight finish, statuses and the MQTT goodbye go out,
/// the delivery store is closed) happens there.
#[derive(Debug)]
pub struct Running {
    config: Config,
    addresses: Addresses,
    shutdown: CancellationToken,
    broker_stop: CancellationToken,
    mqtt_stop: CancellationToken,
    publisher_stop: CancellationToken,
    tracker: TaskTracker,
    delivery: crate::delivery::DeliveryStore,
    registry: Arc<Registry>,
    hub: Hub,
    adb: Arc<AdbTransport>,
    companion: CompanionHub,
    poll: watch::Sender<droidwarden_core::poll::Intervals>,
    assistant: Option<Assistant>,
    broker_users: Option<crate::broker::UsersHandle>,
    link: Arc<mqtt::Mqtt>,
    event_loop: tokio::task::JoinHandle<()>,
    publisher: tokio::task::JoinHandle<()>,
    readiness: Readiness,
    events: Option<Events>,
}

impl Daemon {
    /// A daemon that will run with `config`.
    pub fn new(config: Config) -> Self {
        Self { config }
    }

    /// Start every part, in order: the state directory and the delivery
    /// store, the hub and the phones' transports, the agent, the event
    /// centre, D-Bus, the embedded broker and MQTT, polling, metrics, MCP,
    /// then the automations. `shutdown` is the first stage of the stop
    /// (no new commands); [`Running::stop`] cancels it and does the rest.
    ///
    /// # Errors
    /// A part cannot start ([`StartFailed`], logged); what had begun is
    /// stopped in order first.
    pub async fn start(self, shutdown: CancellationToken) -> Result<Running, StartFailed> {
        let Self { config } = self;
        let mut readiness = Readiness::default();
        let tracker = TaskTracker::new();
        let registry = Arc::new(Registry::new());
        tracing::info!(state_dir = %config.state_dir.display(), "droidwarden starting");
        if let Err((status, e)) = check_state_dir(&config.state_dir).await {
            tracing::error!(state_dir = %config.state_dir.display(), error = %e, status, "the state directory is not usable");
            return Err(StartFailed::new(
                status,
                format!("the state directory is not usable: {e}"),
            ));
        }
        // The delivery store (core/src/delivery.rs): command ids and calls in
        // flight, kept across restarts. Without it "once" cannot be promised,
        // so a store that cannot be opened stops the start.
        let limits = crate::delivery::Limits {
            window: config.mqtt.dedupe_window,
            max_ids: config.mqtt.max_ids_per_window,
        };
        let (delivery, interrupted) =
            match crate::delivery::DeliveryStore::open(&config.state_dir, limits).await {
                Ok(opened) => opened,
                Err(e) => {
                    tracing::error!(error = %e, "cannot open the delivery store");
                    return Err(StartFailed::new(
                        crate::EXIT_IOERR,
                        format!("cannot open the delivery store: {e}"),
                    ));
                }
            };
        tracing::debug!(file = %delivery.path().display(), interrupted = interrupted.len(), found_empty = delivery.found_empty(), "delivery store open");
        // From here on, a start that fails stops what it had begun, in order
        // (`Begun::abandon`), like a shutdown does.
        let broker_stop = CancellationToken::new();
        let mqtt_stop = CancellationToken::new();
        let begun = Begun {
            shutdown: &shutdown,
            broker_stop: &broker_stop,
            mqtt_stop: &mqtt_stop,
            tracker: &tracker,
            delivery: &delivery,
        };
        let hub = Hub::new(Arc::clone(&registry), Some(delivery.clone()))
            .with_phone_policy(config.phone_services.clone());
        let adb = Arc::new(AdbTransport::new(config.adb.clone(), Arc::clone(&registry)));
        let (companion, companion_requests) =
            CompanionHub::new(config.companion.clone(), Arc::clone(&registry));
        if let Err(e) = adb.refresh().await {
            tracing::warn!(error = %e, "no devices yet; will keep trying");
        }
        // The agent (core/src/assistant.rs), when a language model is set.
        let assistant = match &config.llm {
            None => {
                tracing::info!("agent off: no [llm] provider configured");
                None
            }
            Some(llm) => match Assistant::start(
                llm,
                config.agent.clone(),
                &config.state_dir,
                hub.clone(),
                // `[[mcp.servers]]` (mcp/src/client.rs): their tools.
                Arc::new(
                    crate::mcp::client::McpClients::start(&config.mcp.servers, &tracker, &shutdown)
                        .await,
                ),
                tracker.clone(),
                shutdown.clone(),
            )
            .await
            {
                Ok(assistant) => Some(assistant),
                Err(e) => {
                    let status = agent_exit_status(&e);
                    return Err(begun
                        .abandon(StartFailed::new(
                            status,
                            format!("cannot start the agent: {e}"),
                        ))
                        .await);
                }
            },
        };
        // D-Bus API (the droidwarden-dbus crate): owns org.droidwarden.Daemon1 on [dbus] bus,
        // and serves it on the private socket (dbus/p2p.rs) with or without a bus.
        let socket = config
            .api_socket
            .clone()
            .unwrap_or_else(|| crate::dbus::p2p::daemon_path(&config.state_dir));
        let mut addresses = Addresses {
            api_socket: socket.clone(),
            ..Addresses::default()
        };
        // The event centre (droidwarden_app::events): every consumer below reads
        // the bus, the devices and the agent's notices through it.
        // Automations (the automations crate): the handle now, so D-Bus, MQTT
        // and the centre have it; the driver starts once everything it runs
        // through is up. Its events are taken now, so no state is missed.
        let (automations, automations_pending) = crate::automations::Automations::new(
            crate::automations::model::mqtt_topics(&config.automations),
        );
        let centre =
            Centre::new(hub.clone(), assistant.clone()).with_automations(automations.clone());
        let automation_events = crate::automations::Inputs::new(&hub);
        let health = Arc::new(
            crate::health::Health::new(
                config.state_dir.clone(),
                Some(Arc::clone(&adb)),
                config.mqtt.broker.description(),
                config
                    .llm
                    .as_ref()
                    .map(|llm| format!("{} {}", llm.provider.as_str(), llm.model)),
            )
            .with_model(config.llm.clone()),
        );
        match crate::dbus::start(
            config.dbus,
            &hub,
            assistant.clone(),
            automations.clone(),
            &centre,
            socket,
            Arc::clone(&health),
        )
        .await
        {
            Ok(dbus) => {
                tracker.spawn(crate::dbus::run(dbus, shutdown.clone()));
            }
            Err(e) => {
                return Err(begun
                    .abandon(StartFailed::new(
                        1,
                        format!("cannot start the D-Bus API: {e}"),
                    ))
                    .await);
            }
        }
        // End of the D-Bus API.

        let mut mqtt_settings = config.mqtt.clone();
        let mut broker_users = None;
        let mut broker_clients = None;
        if let BrokerTarget::Embedded {
            listen,
            allow_remote,
            anonymous,
        } = mqtt_settings.broker
        {
            if !anonymous {
                // The daemon's own account: created at the first start, its
                // password in <state dir>/mqtt-daemon.secret.
                let state_dir = config.state_dir.clone();
                let ensured = tokio::task::spawn_blocking(move || {
                    crate::mqtt_users::ensure_daemon_user(&state_dir)
                })
                .await;
                match ensured {
                    Ok(Ok((username, password))) => {
                        mqtt_settings.credentials =
                            Some(crate::config::Credentials { username, password });
                    }
                    Ok(Err(e)) => {
                        let file = config.state_dir.join(crate::mqtt_users::USERS_FILE);
                        let (status, what) = users_exit_status(&file);
                        let what = format!(
                            "cannot set up the daemon's account on the embedded MQTT broker ({e:#}): {what}"
                        );
                        return Err(begun.abandon(StartFailed::new(status, what)).await);
                    }
                    Err(e) => {
                        return Err(begun
                            .abandon(StartFailed::new(
                                1,
                                format!("cannot set up the daemon's MQTT account: {e}"),
                            ))
                            .await);
                    }
                }
            }
            let broker = crate::broker::BrokerConfig {
                listen,
                allow_remote,
                policy: droidwarden_broker::Policy {
                    prefix: mqtt_settings.prefix.clone(),
                    ha_prefix: mqtt_settings
                        .discovery
                        .clone()
                        .unwrap_or_else(|| "homeassistant".into()),
                    anonymous,
                    // The daemon learns who published each command, for the
                    // record of who answered an approval.
                    vouch_to: mqtt_settings
                        .credentials
                        .as_ref()
                        .map(|c| c.username.clone()),
                },
                users_file: Some(config.state_dir.join(crate::mqtt_users::USERS_FILE)),
            };
            match crate::broker::start(broker, broker_stop.clone(), &tracker).await {
                Ok(started) => {
                    let bound = started.addr;
                    tracing::info!(%bound, "embedded MQTT broker listening");
                    addresses.broker = Some(bound);
                    broker_users = started.users;
                    broker_clients = Some(started.clients);
                    mqtt_settings.broker = BrokerTarget::Embedded {
                        listen: bound,
                        allow_remote,
                        anonymous,
                    };
                    health.broker_is(mqtt_settings.broker.description());
                }
                Err(e) => {
                    return Err(begun
                        .abandon(StartFailed::new(
                            1,
                            format!("cannot start the embedded MQTT broker on {listen}: {e}"),
                        ))
                        .await);
                }
            }
        }
        let (link, eventloop) = match mqtt::connect(
            mqtt_settings,
            hub.clone(),
            companion.clone(),
            assistant.clone(),
            automations.clone(),
            config.state_dir.clone(),
            delivery.clone(),
            &interrupted,
        ) {
            Ok(pair) => pair,
            Err(e) => {
                return Err(begun
                    .abandon(StartFailed::new(1, format!("cannot set up MQTT: {e}")))
                    .await);
            }
        };
        readiness.require_watch("MQTT", link.subscribed());
        let (incoming_tx, incoming_rx) = tokio::sync::mpsc::channel(mqtt::INCOMING_CHANNEL);
        let event_loop = tracker.spawn(mqtt::run_event_loop(
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
            mqtt_stop.clone(),
        ));
        // Stopped apart from the rest, before the goodbye (see the shutdown).
        let publisher_stop = CancellationToken::new();
        let publisher = tracker.spawn(mqtt::run_publisher(
            Arc::clone(&link),
            centre.subscribe(
                "MQTT",
                Streams {
                    activity: false,
                    ..Streams::ALL
                },
            ),
            publisher_stop.clone(),
        ));
        tracker.spawn(mqtt::run_health(
            Arc::clone(&link),
            Arc::clone(&health),
            mqtt_stop.clone(),
        ));
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
        let (poll_tx, poll_rx) = watch::channel(config.poll.clone());
        tracker.spawn(crate::poll::run(
            hub.clone(),
            poll_rx,
            tracker.clone(),
            shutdown.clone(),
        ));
        // The statuses published from here on and the MQTT goodbye are the
        // publisher's and the link's: a failure below stops them in order.
        let stages = Stages {
            begun,
            link: &link,
            publisher_stop: &publisher_stop,
        };
        // Prometheus metrics (daemon/src/metrics.rs), when [metrics] listen is set.
        if let Some(settings) = config.metrics {
            match crate::metrics::bind(settings.listen, settings.allow_remote).await {
                Ok(listener) => {
                    let metrics = Arc::new(crate::metrics::Metrics::new());
                    addresses.metrics = listener.local_addr().ok();
                    tracing::info!(
                        listen = %listener.local_addr().map(|a| a.to_string()).unwrap_or_default(),
                        "metrics on /metrics"
                    );
                    tracker.spawn(crate::metrics::collect(
                        Arc::clone(&metrics),
                        hub.clone(),
                        centre.subscribe("metrics", Streams::ALL),
                        broker_clients.clone(),
                        shutdown.clone(),
                    ));
                    tracker.spawn(crate::metrics::serve(
                        listener,
                        metrics,
                        tracker.clone(),
                        shutdown.clone(),
                    ));
                }
                Err(e) => {
                    return Err(stages
                        .abandon(StartFailed::new(1, format!("cannot serve metrics: {e}")))
                        .await);
                }
            }
        }
        // MCP over Streamable HTTP (mcp/src/http.rs), when [mcp] listen is set.
        match crate::mcp::start_http(&config.mcp, &hub, assistant.as_ref(), &tracker, &shutdown)
            .await
        {
            Ok(bound) => addresses.mcp = bound,
            Err(e) => {
                return Err(stages
                    .abandon(StartFailed::new(1, format!("cannot serve MCP: {e}")))
                    .await);
            }
        }
        // Every consumer of the agent's notices (MQTT, D-Bus, metrics) is
        // subscribed by now: runs a previous process left unfinished can go on.
        if let Some(assistant) = &assistant {
            assistant.resume_interrupted().await;
        }
        // Automations run from here on: every path they act through is up.
        let deps = crate::automations::Deps {
            automations: config.automations.clone(),
            context: config.automation_context.clone(),
            hub: hub.clone(),
            assistant: assistant.clone(),
            approval: config.agent.approval.clone(),
            events: automation_events,
        };
        if let Err(e) = crate::automations::start(
            &automations,
            automations_pending,
            deps,
            &config.state_dir,
            &tracker,
            shutdown.clone(),
        )
        .await
        {
            return Err(stages
                .abandon(StartFailed::new(
                    crate::EXIT_IOERR,
                    format!("cannot read the automations' records: {e}"),
                ))
                .await);
        }
        // The main loop reads device events and the agent's activity (not
        // every call's status).
        let events = centre.subscribe(
            "main loop",
            Streams {
                bus: false,
                notices: false,
                ..Streams::ALL
            },
        );
        Ok(Running {
            config,
            addresses,
            shutdown,
            broker_stop,
            mqtt_stop,
            publisher_stop,
            tracker,
            delivery,
            registry,
            hub,
            adb,
            companion,
            poll: poll_tx,
            assistant,
            broker_users,
            link,
            event_loop,
            publisher,
            readiness,
            events: Some(events),
        })
    }
}

impl Running {
    /// Where it listens.
    pub fn addresses(&self) -> &Addresses {
        &self.addresses
    }

    /// The devices it knows; tests add fake phones here.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// Until every part registered for readiness is up (MQTT subscribed):
    /// `Err` names the part that gave up. Bounded by `within`.
    ///
    /// # Errors
    /// The part that gave up, or `"timeout"`.
    pub async fn ready(&self, within: Duration) -> Result<(), &'static str> {
        tokio::time::timeout(within, self.readiness.wait())
            .await
            .unwrap_or(Err("timeout"))
    }

    /// Reload the configuration as SIGHUP does, from `loaded`: the keys
    /// that can change live are applied; the plan names the others, which
    /// need a restart (and are logged so).
    ///
    /// # Errors
    /// `loaded` is a configuration error; nothing changed then.
    // The main loop calls `reload_with` itself (it holds the pieces apart);
    // tests reload through here, the same function.
    #[cfg(test)]
    pub(crate) async fn reload(
        &mut self,
        loaded: Result<Config, crate::config::ConfigError>,
    ) -> Result<reload::Plan, crate::config::ConfigError> {
        let live = reload::Live {
            adb: &self.adb,
            companion: &self.companion,
            poll: &self.poll,
            assistant: self.assistant.as_ref(),
            broker_users: self.broker_users.as_ref(),
        };
        reload_with(&mut self.config, &live, loaded).await
    }

    /// Serve until SIGTERM or SIGINT (returned), keeping systemd informed
    /// and reloading the configuration on SIGHUP.
    async fn serve(&mut self, notifier: &Notifier, signals: &mut Signals) -> &'static str {
        let live = reload::Live {
            adb: &self.adb,
            companion: &self.companion,
            poll: &self.poll,
            assistant: self.assistant.as_ref(),
            broker_users: self.broker_users.as_ref(),
        };
        let Some(events) = self.events.take() else {
            return "no events";
        };
        main_loop(
            &mut self.config,
            &live,
            &self.registry,
            events,
            &self.readiness,
            notifier,
            signals,
        )
        .await
    }

    /// Stop in order: no new commands; calls in flight finish (bounded);
    /// their statuses, then `offline` and a clean MQTT disconnect go out;
    /// the broker stops; the delivery store is committed and closed; every
    /// task ends (bounded).
    pub async fn stop(self) {
        let Self {
            shutdown,
            broker_stop,
            mqtt_stop,
            publisher_stop,
            tracker,
            delivery,
            link,
            mut event_loop,
            mut publisher,
            hub,
            ..
        } = self;
        drop(hub);
        shutdown.cancel();
        link.finish_calls(CALL_GRACE).await;
        // The statuses those calls ended with go out before the goodbye.
        publisher_stop.cancel();
        if tokio::time::timeout(FLUSH_GRACE, &mut publisher)
            .await
            .is_err()
        {
            tracing::warn!("the last statuses were not published within {FLUSH_GRACE:?}");
        }
        link.goodbye().await;
        // The event loop ends by itself once it has sent the DISCONNECT that
        // follows the goodbye; it is only cut short if the broker is gone.
        if tokio::time::timeout(FLUSH_GRACE, &mut event_loop)
            .await
            .is_err()
        {
            tracing::warn!("the MQTT goodbye was not sent within {FLUSH_GRACE:?}");
        }
        mqtt_stop.cancel();
        broker_stop.cancel();
        // Everything the calls recorded is committed, and checkpointed into
        // the main file, before the process ends: nothing lives in the WAL
        // alone while the daemon is stopped.
        close_store(&delivery).await;
        tracker.close();
        if tokio::time::timeout(TASK_GRACE, tracker.wait())
            .await
            .is_err()
        {
            tracing::warn!("some tasks did not stop within {TASK_GRACE:?}");
        }
        tracing::info!("stopped");
    }
}

/// Close the delivery store (committed, checkpointed), bounded.
async fn close_store(delivery: &crate::delivery::DeliveryStore) {
    match tokio::time::timeout(FLUSH_GRACE, delivery.close()).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, "the delivery store could not be closed cleanly"),
        Err(_) => tracing::warn!("the delivery store was not closed within {FLUSH_GRACE:?}"),
    }
}

/// What a start has begun once the delivery store is open, to stop in
/// order when a later step of the start fails.
#[derive(Debug, Clone, Copy)]
struct Begun<'a> {
    shutdown: &'a CancellationToken,
    broker_stop: &'a CancellationToken,
    mqtt_stop: &'a CancellationToken,
    tracker: &'a TaskTracker,
    delivery: &'a crate::delivery::DeliveryStore,
}

impl Begun<'_> {
    /// A later step of the start failed: log why, stop every task
    /// begun so far and wait for them (bounded), close the delivery store
    /// (committed, checkpointed), and return `failed`, as a shutdown
    /// would, rather than leave it all to the process's end.
    async fn abandon(self, failed: StartFailed) -> StartFailed {
        tracing::error!(status = failed.status, "{}", failed.what);
        self.shutdown.cancel();
        self.mqtt_stop.cancel();
        self.broker_stop.cancel();
        close_store(self.delivery).await;
        self.tracker.close();
        if tokio::time::timeout(TASK_GRACE, self.tracker.wait())
            .await
            .is_err()
        {
            tracing::warn!("some tasks did not stop within {TASK_GRACE:?}");
        }
        tracing::info!("stopped: the start did not complete");
        failed
    }
}

/// [`Begun`] once MQTT is up: a failure then also sends the `offline`
/// goodbye (the will is not left to fire) before the rest stops.
#[derive(Debug, Clone, Copy)]
struct Stages<'a> {
    begun: Begun<'a>,
    link: &'a Arc<mqtt::Mqtt>,
    publisher_stop: &'a CancellationToken,
}

impl Stages<'_> {
    async fn abandon(self, failed: StartFailed) -> StartFailed {
        self.begun.shutdown.cancel();
        self.publisher_stop.cancel();
        self.link.goodbye().await;
        self.begun.abandon(failed).await
    }
}

/// What the main loop reacts to.
#[derive(Debug)]
enum Event {
    /// SIGTERM or SIGINT: stop.
    Stop(&'static str),
    /// SIGHUP: reload the configuration.
    Reload,
    /// Time to tell systemd we are alive.
    Watchdog,
    /// Every part registered for readiness is up, or one gave up.
    Ready(Result<(), &'static str>),
    /// Something in the event centre: a device came, went or changed
    /// availability, or agent runs and approvals changed.
    Changed(events::Event),
}

/// The signals the daemon handles, registered at start.
#[derive(Debug)]
struct Signals {
    term: Signal,
    int: Signal,
    hup: Signal,
}

impl Signals {
    fn new() -> std::io::Result<Self> {
        Ok(Self {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            hup: signal(SignalKind::hangup())?,
        })
    }

    async fn next(&mut self) -> Event {
        tokio::select! {
            _ = self.term.recv() => Event::Stop("SIGTERM"),
            _ = self.int.recv() => Event::Stop("SIGINT"),
            _ = self.hup.recv() => Event::Reload,
        }
    }
}

/// Run until SIGTERM or SIGINT (returned), keeping systemd informed and
/// reloading the configuration on SIGHUP. The watchdog is fed from here,
/// so it fails if this loop stops turning.
async fn main_loop(
    config: &mut Config,
    live: &reload::Live<'_>,
    registry: &Registry,
    mut events: Events,
    readiness: &Readiness,
    notifier: &Notifier,
    signals: &mut Signals,
) -> &'static str {
    let mut watchdog = systemd::watchdog_period().map(|period| {
        tracing::info!(
            every_ms = period.as_millis() as u64,
            "feeding the systemd watchdog"
        );
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick
    });
    let ready = readiness.wait();
    tokio::pin!(ready);
    // Whether READY=1 was sent; `waiting` stays true until readiness is
    // decided either way.
    let mut is_ready = false;
    let mut waiting = true;
    let mut centre_open = true;
    let mut activity = events.activity();
    // Approval requests of every kind (the agent's and the automations').
    let mut approvals = crate::approvals::OpenCount::default();
    if let Some(a) = activity {
        approvals.on_event(&events::Event::Activity(a));
    }
    let status = |is_ready: bool, activity: Option<Activity>, pending: usize| {
        let mut devices = systemd::device_status(&registry.list());
        match activity {
            Some(a) => devices.push_str(&systemd::agent_status(a.runs, pending)),
            None if pending > 0 => devices.push_str(&systemd::approvals_status(pending)),
            None => {}
        }
        let waiting_for = readiness.waiting_for();
        if is_ready || waiting_for.is_empty() {
            devices
        } else {
            format!(
                "starting: waiting for {}; {devices}",
                waiting_for.join(", ")
            )
        }
    };
    notifier.status(&status(false, activity, approvals.total()));
    loop {
        let event = tokio::select! {
            event = signals.next() => event,
            result = &mut ready, if waiting => Event::Ready(result),
            () = async {
                match watchdog.as_mut() {
                    Some(tick) => { tick.tick().await; }
                    None => std::future::pending().await,
                }
            } => Event::Watchdog,
            event = events.next(), if centre_open => match event {
                Some(event) => Event::Changed(event),
                // The registry outlives this loop; nothing more will come.
                None => {
                    centre_open = false;
                    continue;
                }
            },
        };
        match event {
            Event::Stop(signal) => return signal,
            Event::Watchdog => notifier.watchdog(),
            Event::Changed(event) => {
                approvals.on_event(&event);
                match event {
                    events::Event::Device(DeviceEvent::Availability {
                        device,
                        online,
                        detail,
                    }) => tracing::info!(%device, online, detail, "device availability"),
                    events::Event::Device(DeviceEvent::Removed { device }) => {
                        tracing::info!(%device, "device removed");
                    }
                    events::Event::Activity(now) => activity = Some(now),
                    _ => {}
                }
                notifier.status(&status(is_ready, activity, approvals.total()));
            }
            Event::Ready(Ok(())) => {
                waiting = false;
                is_ready = true;
                tracing::info!("ready");
                notifier.ready(&status(true, activity, approvals.total()));
            }
            Event::Ready(Err(part)) => {
                waiting = false;
                tracing::error!(
                    part,
                    "stopped before it was ready; not telling systemd the daemon is ready"
                );
            }
            Event::Reload => {
                tracing::info!("SIGHUP: reloading the configuration");
                if is_ready {
                    notifier.reloading();
                }
                let loaded = crate::config::load(config.source.as_deref());
                match reload_with(config, live, loaded).await {
                    Ok(plan) if plan.has_live_changes() || !plan.needs_restart.is_empty() => {
                        tracing::info!("configuration reloaded");
                    }
                    Ok(_) => tracing::info!("configuration reloaded: nothing changed"),
                    Err(e) => tracing::error!(
                        error = %e,
                        "configuration reload failed; keeping the running configuration"
                    ),
                }
                if is_ready {
                    notifier.ready(&status(true, activity, approvals.total()));
                }
            }
        }
    }
}

/// SIGHUP's work: read the embedded broker's users again, apply `loaded`
/// (reload.rs: live keys now, the others named as needing a restart),
/// and give the agent its skills and agents again.
///
/// # Errors
/// `loaded` is a configuration error; nothing changed then.
async fn reload_with(
    config: &mut Config,
    live: &reload::Live<'_>,
    loaded: Result<Config, crate::config::ConfigError>,
) -> Result<reload::Plan, crate::config::ConfigError> {
    // The embedded broker's users (removed ones are disconnected).
    if let Some(users) = live.broker_users {
        users.reload().await;
    }
    let applied = reload::apply(config, loaded, live);
    if let Some(assistant) = live.assistant {
        assistant
            .reload_skills(&config.agent.skills, &config.state_dir)
            .await;
        if let Some(llm) = &config.llm {
            assistant.reload_agents(llm, &config.agent.agents).await;
        }
    }
    applied
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_damaged_user_file_is_a_configuration_error_and_says_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(crate::mqtt_users::USERS_FILE);
        std::fs::write(&file, b"{\"users\": [ garbage").unwrap();
        // The daemon's own account cannot be set up over it...
        assert!(crate::mqtt_users::ensure_daemon_user(dir.path()).is_err());
        // ... and the start stops with 78, naming the file and the way out.
        let (status, what) = users_exit_status(&file);
        assert_eq!(status, crate::EXIT_CONFIG);
        assert!(what.contains(&file.display().to_string()), "{what}");
        assert!(what.contains("move it aside"), "{what}");
        std::fs::write(&file, b"\xff\xfe not text").unwrap();
        assert_eq!(users_exit_status(&file).0, crate::EXIT_CONFIG);
        // A path that cannot be read as a file is an I/O error.
        std::fs::remove_file(&file).unwrap();
        std::fs::create_dir(&file).unwrap();
        assert_eq!(users_exit_status(&file).0, crate::EXIT_IOERR);
        // A file that reads: it was the writing that failed.
        std::fs::remove_dir(&file).unwrap();
        assert_eq!(users_exit_status(&file).0, crate::EXIT_CANTCREAT);
    }
}

#[cfg(test)]
mod in_process;
