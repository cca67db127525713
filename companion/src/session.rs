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

use crate::config::Config;
use crate::respond::{self, Checked};
use crate::{CompanionError, termux};
use droidwarden_bridge::backoff::Backoff;
use rumqttc::{
    AsyncClient, Event, EventLoop, LastWill, MqttOptions, Outgoing, Packet, QoS,
    SubscribeReasonCode,
};
use std::sync::Arc;
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
    let (client, mut eventloop) = AsyncClient::new(options(&config, password)?, REQUEST_CAPACITY);
    let mut network = rumqttc::NetworkOptions::new();
    network.set_tcp_nodelay(true);
    network.set_connection_timeout(10);
    eventloop.set_network_options(network);
    let request_topic = config.topic("request");
    let online_topic = config.topic("online");
    let tracker = TaskTracker::new();
    let slots = Arc::new(Semaphore::new(CONCURRENT_REQUESTS));
    let mut failures: u32 = 0;
    let mut online = false;
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
                tracing::info!(id = %config.companion_id, "online");
            }
            Ok(Event::Incoming(Packet::Publish(publish))) if publish.topic == request_topic => {
                tracker.spawn(answer(
                    Arc::clone(&config),
                    client.clone(),
                    publish.payload.to_vec(),
                    Arc::clone(&slots),
                    shutdown.clone(),
                ));
            }
            Ok(_) => {}
            Err(e) => {
                if std::mem::take(&mut online) {
                    tracing::warn!(error = %e, "connection lost; reconnecting");
                } else {
                    tracing::debug!(error = %e, attempt = failures, "cannot connect; retrying");
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
    if online {
        goodbye(&client, &mut eventloop, &online_topic).await;
    }
    // Answers still running end with the process; none waits unbounded.
    let _ = tokio::time::timeout(GOODBYE_WAIT, tracker.wait()).await;
    Ok(())
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
async fn answer(
    config: Arc<Config>,
    client: AsyncClient,
    payload: Vec<u8>,
    slots: Arc<Semaphore>,
    shutdown: CancellationToken,
) {
    let now = droidwarden_services::time::epoch_ms(SystemTime::now());
    let (id, command) = match respond::check(&payload, now) {
        Err(reason) => {
            tracing::warn!(%reason, "unanswerable request ignored");
            return;
        }
        Ok(Checked::Answer(body)) => {
            publish(&client, &config, body, &shutdown).await;
            return;
        }
        Ok(Checked::Perform { id, command }) => (id, command),
    };
    let Ok(_slot) = slots.acquire().await else {
        return;
    };
    let outcome = match config
        .policy
        .check(&command)
        .and_then(|()| termux::offered(&command))
    {
        Ok(action) => termux::perform(&action, config.command_timeout).await,
        Err(e) => Err(e),
    };
    match &outcome {
        Ok(_) => {
            tracing::info!(%id, service = command.service_id(), action = command.action_name(), "performed")
        }
        Err(e) => {
            tracing::info!(%id, service = command.service_id(), action = command.action_name(), code = ?e.code, message = %e.message, "refused or failed")
        }
    }
    publish(&client, &config, respond::response(&id, outcome), &shutdown).await;
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
