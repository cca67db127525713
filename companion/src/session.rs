//! The MQTT connection (rumqttc), per `docs/companion-protocol.md`, "The
//! phone's connection".
//!
//! One loop owns the `EventLoop` and only polls it, using the client's
//! non-blocking `try_*` calls; answers are published from their own tasks
//! with clones of the client, because publishing into a full request
//! channel from the polling task deadlocks.
//!
//! - Clean session, QoS 1 everywhere; the will is `offline`, retained.
//! - On every ConnAck the request topic is subscribed (rumqttc does not
//!   restore subscriptions); on its SubAck `online` is published retained,
//!   so a request sent in reaction to `online` is never missed.
//! - After a connection error, a capped, doubling backoff with jitter
//!   before the next attempt (rumqttc reconnects on the next poll with no
//!   delay of its own).
//! - On shutdown: `offline` retained, then DISCONNECT, within a bound.
//! - Events: `battery` on every connection; notification postings and
//!   removals from a reading of the list every `notification_poll_s`
//!   while online (the first reading is the baseline, see [`crate::watch`]).
//! - A Termux wake lock from the first connection until shutdown, so
//!   Android does not suspend the process while it keeps the connection.
//! - The state goes to the status file ([`crate::status`]).

use crate::config::Config;
use crate::respond::{self, Checked};
use crate::status::{Reporter, State};
use crate::watch::Watcher;
use crate::{CompanionError, exec, termux};
use droidwarden_bridge::backoff::Backoff;
use rumqttc::{
    AsyncClient, Event, EventLoop, LastWill, MqttOptions, Outgoing, Packet, QoS,
    SubscribeReasonCode,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Keep-alive: the broker publishes the will about 1.5 × this after the
/// phone vanished without closing its connection.
const KEEP_ALIVE: Duration = Duration::from_secs(20);

/// Requests and responses up to the daemon's limit (1 MiB); rumqttc's
/// default is 10 KiB.
const MAX_PACKET: usize = 1024 * 1024 + 4096;

/// rumqttc's request channel: only answer tasks wait on it, so a small
/// bound keeps memory flat while the broker is slow.
const REQUEST_CAPACITY: usize = 32;

/// Requests performed at once: each runs a Termux:API command (a process
/// and a broadcast to the Termux:API app); the daemon sends changes one at
/// a time anyway.
const CONCURRENT_REQUESTS: usize = 4;

const RECONNECT: Backoff = Backoff {
    first: Duration::from_millis(500),
    max: Duration::from_secs(30),
};

/// How long a clean goodbye (`offline`, DISCONNECT) may take.
const GOODBYE_WAIT: Duration = Duration::from_secs(3);

/// How long one answer may wait to be handed to the MQTT client.
const PUBLISH_WAIT: Duration = Duration::from_secs(10);

/// The MQTT options: will, clean session, credentials, TLS.
///
/// # Errors
/// [`CompanionError::Tls`] when the CA file cannot be used.
pub fn options(config: &Config, password: Option<String>) -> Result<MqttOptions, CompanionError> {
    let b = &config.broker;
    let mut options = MqttOptions::new(config.companion_id.clone(), b.host.clone(), b.port);
    options
        .set_keep_alive(KEEP_ALIVE)
        // The daemon queues requests for an offline phone; a persistent
        // session would have the broker deliver stale ones as well.
        .set_clean_session(true)
        .set_max_packet_size(MAX_PACKET, MAX_PACKET)
        .set_last_will(LastWill::new(
            config.topic("online"),
            "offline",
            QoS::AtLeastOnce,
            true,
        ));
    if let Some(password) = password {
        options.set_credentials(config.user.clone(), password);
    }
    if let Some(ca) = &b.tls {
        options.set_transport(rumqttc::Transport::tls_with_config(
            rumqttc::TlsConfiguration::Rustls(Arc::new(
                droidwarden_bridge::tls::client_config(ca.as_deref())
                    .map_err(CompanionError::Tls)?,
            )),
        ));
    }
    Ok(options)
}

/// The wait before reconnection attempt `failures` (from 0), with up to a
/// quarter more from the clock, so phones that lost the broker together
/// do not all come back in the same millisecond.
fn reconnect_delay(failures: u32) -> Duration {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|t| t.subsec_nanos())
        .unwrap_or(0);
    RECONNECT.delay_with_jitter(failures, nanos)
}

/// What the answering tasks share.
struct Shared {
    config: Arc<Config>,
    client: AsyncClient,
    slots: Semaphore,
    reporter: Arc<Reporter>,
    context: termux::Context,
    online: AtomicBool,
    shutdown: CancellationToken,
}

/// Run the companion until `shutdown`: connected, answering requests,
/// reconnecting after errors.
///
/// # Errors
/// [`CompanionError::Tls`] when TLS cannot be set up.
pub async fn run(
    config: Arc<Config>,
    password: Option<String>,
    shutdown: CancellationToken,
) -> Result<(), CompanionError> {
    let reporter = Reporter::new(
        config.status_file.clone(),
        format!("{}:{}", config.broker.host, config.broker.port),
        config.companion_id.clone(),
    );
    let status_done = CancellationToken::new();
    let status_task = tokio::spawn(Arc::clone(&reporter).run(status_done.clone()));
    let result = session(config, password, shutdown, Arc::clone(&reporter)).await;
    reporter.set_state(State::Stopped, None);
    status_done.cancel();
    let _ = tokio::time::timeout(GOODBYE_WAIT, status_task).await;
    result
}

async fn session(
    config: Arc<Config>,
    password: Option<String>,
    shutdown: CancellationToken,
    reporter: Arc<Reporter>,
) -> Result<(), CompanionError> {
    let (client, mut eventloop) = AsyncClient::new(options(&config, password)?, REQUEST_CAPACITY);
    let mut network = rumqttc::NetworkOptions::new();
    network.set_tcp_nodelay(true);
    network.set_connection_timeout(10);
    eventloop.set_network_options(network);
    let request_topic = config.topic("request");
    let online_topic = config.topic("online");
    let tracker = TaskTracker::new();
    let shared = Arc::new(Shared {
        context: termux::Context {
            limit: config.command_timeout,
            photo_dir: config.photo_dir.clone(),
            background: termux::Background::new(tracker.clone(), shutdown.clone()),
        },
        config: Arc::clone(&config),
        client: client.clone(),
        slots: Semaphore::new(CONCURRENT_REQUESTS),
        reporter: Arc::clone(&reporter),
        online: AtomicBool::new(false),
        shutdown: shutdown.clone(),
    });
    if let Some(every) = config.notification_poll {
        tracker.spawn(watch_notifications(Arc::clone(&shared), every));
    }
    let mut failures: u32 = 0;
    let mut online = false;
    let mut wake_locked = false;
    loop {
        let event = tokio::select! {
            () = shutdown.cancelled() => break,
            event = eventloop.poll() => event,
        };
        match event {
            Ok(Event::Incoming(Packet::ConnAck(_))) => {
                failures = 0;
                tracing::debug!(broker = %config.broker.host, "connected; subscribing");
                if let Err(e) = client.try_subscribe(&request_topic, QoS::AtLeastOnce) {
                    tracing::warn!(error = %e, "cannot queue the subscription");
                }
            }
            Ok(Event::Incoming(Packet::SubAck(ack))) => {
                if ack
                    .return_codes
                    .iter()
                    .any(|c| matches!(c, SubscribeReasonCode::Failure))
                {
                    tracing::error!(topic = %request_topic, "the broker refused the subscription (check the user's role and companion id)");
                    continue;
                }
                if let Err(e) = client.try_publish(&online_topic, QoS::AtLeastOnce, true, "online")
                {
                    tracing::warn!(error = %e, "cannot queue the presence");
                }
                online = true;
                shared.online.store(true, Ordering::Relaxed);
                reporter.set_state(State::Online, None);
                tracing::info!(id = %config.companion_id, "online");
                if config.wake_lock && !wake_locked {
                    wake_locked = true;
                    tracker.spawn(wake_lock("termux-wake-lock", config.command_timeout));
                }
                tracker.spawn(push_battery(Arc::clone(&shared)));
            }
            Ok(Event::Incoming(Packet::Publish(publish))) if publish.topic == request_topic => {
                tracker.spawn(answer(Arc::clone(&shared), publish.payload.to_vec()));
            }
            Ok(_) => {}
            Err(e) => {
                shared.online.store(false, Ordering::Relaxed);
                if std::mem::take(&mut online) {
                    tracing::warn!(error = %e, "connection lost; reconnecting");
                    reporter.set_state(State::Reconnecting, Some(e.to_string()));
                } else {
                    tracing::debug!(error = %e, attempt = failures, "cannot connect; retrying");
                    reporter.set_state(
                        if wake_locked {
                            State::Reconnecting
                        } else {
                            State::Connecting
                        },
                        Some(e.to_string()),
                    );
                }
                tokio::select! {
                    () = shutdown.cancelled() => break,
                    () = tokio::time::sleep(reconnect_delay(failures)) => {}
                }
                failures = failures.saturating_add(1);
            }
        }
    }
    tracker.close();
    shared.online.store(false, Ordering::Relaxed);
    if online {
        goodbye(&client, &mut eventloop, &online_topic).await;
    }
    // Answers still running end with the process; none waits unbounded.
    let _ = tokio::time::timeout(GOODBYE_WAIT, tracker.wait()).await;
    if wake_locked {
        wake_lock("termux-wake-unlock", GOODBYE_WAIT).await;
    }
    Ok(())
}

/// Take or release the Termux wake lock (`termux-wake-lock` /
/// `termux-wake-unlock`); a failure is logged, the companion keeps going.
async fn wake_lock(program: &'static str, limit: Duration) {
    match exec::run(&[program.to_owned()], limit).await {
        Ok(out) if out.status == Some(0) => tracing::info!(program, "wake lock changed"),
        Ok(out) => {
            tracing::warn!(program, status = ?out.status, stderr = %out.stderr.trim(), "wake lock not changed")
        }
        Err(e) => tracing::warn!(program, error = %e, "wake lock not changed"),
    }
}

/// Publish an event body on `event/<kind>` (QoS 1, not retained).
async fn publish_event(shared: &Shared, kind: &str, body: &serde_json::Value) {
    let topic = shared.config.topic(&format!("event/{kind}"));
    let sent = tokio::time::timeout(
        PUBLISH_WAIT,
        shared
            .client
            .publish(topic, QoS::AtLeastOnce, false, body.to_string()),
    )
    .await;
    match sent {
        Ok(Ok(())) => shared.reporter.event_sent(),
        Ok(Err(e)) => tracing::warn!(error = %e, kind, "cannot publish an event"),
        Err(_) => tracing::warn!(kind, "the MQTT client did not take an event in time"),
    }
}

/// The protocol's `battery` event on every connection.
async fn push_battery(shared: Arc<Shared>) {
    let Ok(_slot) = shared.slots.acquire().await else {
        return;
    };
    match termux::perform(&termux::Offered::Battery, &shared.context).await {
        Ok(body) => publish_event(&shared, "battery", &body).await,
        Err(e) => tracing::info!(code = ?e.code, message = %e.message, "no battery event"),
    }
}

/// Read the notification list every `every` while online and push what
/// changed.
async fn watch_notifications(shared: Arc<Shared>, every: Duration) {
    let mut watcher = Watcher::new();
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut failing = false;
    loop {
        tokio::select! {
            () = shared.shutdown.cancelled() => return,
            _ = ticks.tick() => {}
        }
        if !shared.online.load(Ordering::Relaxed) {
            continue;
        }
        let reading = {
            let Ok(_slot) = shared.slots.acquire().await else {
                return;
            };
            termux::perform(&termux::Offered::Notifications(None), &shared.context).await
        };
        let list = match reading.and_then(|v| {
            serde_json::from_value::<droidwarden_services::NotificationList>(v).map_err(|e| {
                droidwarden_services::WireError::new(
                    droidwarden_services::ErrorCode::Internal,
                    e.to_string(),
                )
            })
        }) {
            Ok(list) => {
                failing = false;
                list
            }
            Err(e) => {
                // Logged once per run of failures (e.g. no notification access).
                if !std::mem::replace(&mut failing, true) {
                    tracing::warn!(code = ?e.code, message = %e.message, "cannot read the notifications; no notification events");
                }
                continue;
            }
        };
        let now = droidwarden_services::time::epoch_ms(SystemTime::now());
        let changes = watcher.reading(list.notifications, now);
        if changes.dropped > 0 {
            tracing::warn!(
                dropped = changes.dropped,
                "too many notification changes at once; the rest were not sent"
            );
        }
        for (kind, body) in &changes.events {
            publish_event(&shared, kind, body).await;
        }
    }
}

/// Publish `offline` retained and DISCONNECT (which cancels the will),
/// driving the event loop until the DISCONNECT is out or time is up.
async fn goodbye(client: &AsyncClient, eventloop: &mut EventLoop, online_topic: &str) {
    let _ = client.try_publish(online_topic, QoS::AtLeastOnce, true, "offline");
    let _ = client.try_disconnect();
    let _ = tokio::time::timeout(GOODBYE_WAIT, async {
        loop {
            match eventloop.poll().await {
                Ok(Event::Outgoing(Outgoing::Disconnect)) | Err(_) => break,
                Ok(_) => {}
            }
        }
    })
    .await;
}

/// Answer one request: check it, perform it if it may run, publish the response.
async fn answer(shared: Arc<Shared>, payload: Vec<u8>) {
    let now = droidwarden_services::time::epoch_ms(SystemTime::now());
    let (id, command) = match respond::check(&payload, now) {
        Err(reason) => {
            tracing::warn!(%reason, "unanswerable request ignored");
            return;
        }
        Ok(Checked::Answer(body)) => {
            shared.reporter.answered(false);
            publish(&shared.client, &shared.config, body, &shared.shutdown).await;
            return;
        }
        Ok(Checked::Perform { id, command }) => (id, command),
    };
    let Ok(_slot) = shared.slots.acquire().await else {
        return;
    };
    // The daemon checked its policy; this phone's own configuration is
    // checked again, so a request the person did not allow here (a number
    // not on this phone's list) never reaches a command.
    let allowed = shared.config.policy.check(&command).map_err(|mut e| {
        e.message = format!("refused by this phone's droidwarden-companion configuration: {}", e.message.replace("this daemon's list of allowed numbers ([phone_services.telephony] allowed_numbers)", "the companion's allowed_numbers").replace("[phone_services.telephony] enabled = true", "allowed_numbers in the companion's config.toml"));
        e
    });
    let outcome = match allowed.and_then(|()| termux::offered(&command)) {
        Ok(action) => termux::perform(&action, &shared.context).await,
        Err(e) => Err(e),
    };
    shared.reporter.answered(outcome.is_ok());
    // Parameters are never logged: they may hold a message or a number.
    match &outcome {
        Ok(_) => {
            tracing::info!(%id, service = command.service_id(), action = command.action_name(), "performed")
        }
        Err(e) => {
            tracing::info!(%id, service = command.service_id(), action = command.action_name(), code = ?e.code, message = %e.message, "refused or failed")
        }
    }
    publish(
        &shared.client,
        &shared.config,
        respond::response(&id, outcome),
        &shared.shutdown,
    )
    .await;
}

async fn publish(
    client: &AsyncClient,
    config: &Config,
    body: Vec<u8>,
    shutdown: &CancellationToken,
) {
    let topic = config.topic("response");
    tokio::select! {
        () = shutdown.cancelled() => {}
        sent = tokio::time::timeout(PUBLISH_WAIT, client.publish(topic, QoS::AtLeastOnce, false, body)) => {
            match sent {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::warn!(error = %e, "cannot publish an answer"),
                Err(_) => tracing::warn!("the MQTT client did not take an answer in time"),
            }
        }
    }
}
