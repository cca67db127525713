//! droidwarden's MQTT side: the connection to the broker, the command API,
//! the retained availability, status and state topics, and Home Assistant
//! discovery. Topics and payloads are documented in `docs/mqtt-api.md`.
//!
//! Tasks (all spawned by the daemon through one tracker):
//! - the event loop ([`run_event_loop`]) polls the rumqttc connection,
//!   reconnects with capped backoff, and hands incoming messages to the
//!   dispatcher. It never publishes: publishing into rumqttc's request
//!   channel from the polling task can deadlock. A (re)connection only
//!   wakes [`run_resync`], which resubscribes and republishes every retained
//!   topic (an embedded broker keeps nothing across restarts).
//! - the dispatcher ([`run_dispatch`]) parses commands, admits each call to
//!   the hub in arrival order (its place in the device's queue is taken
//!   there, synchronously, before anything is spawned), and runs it on the
//!   call tracker, so shutdown can wait for calls in flight.
//!
//! Delivery (docs/mqtt-api.md, "Delivery"): a persistent session (fixed
//! client id, no clean start, a session expiry) so the broker queues
//! commands while we are away; command filters subscribed with Retain
//! Handling 2 and retained command publishes ignored, so a retained command
//! never runs at a (re)start; command ids recorded durably before they run
//! ([`dedupe`]); MQTT 5 response topics honoured only under
//! `<prefix>/responses/`. Acknowledgements are manual: a command with an id
//! is acknowledged once its id is recorded, so a command the daemon did
//! not record (killed first, or arriving during shutdown) stays with the
//! broker and is delivered again to the next process; everything else is
//! acknowledged when dispatched.
//! - [`run_publisher`] turns bus events and availability changes into
//!   retained topics and discovery configs.

mod api;
mod dedupe;
pub(crate) mod discovery;
pub(crate) mod topics;

use crate::assistant::{self, Assistant, Notice, Origin};
use crate::config::{BrokerTarget, MqttSettings};
use crate::delivery::{DeliveryStore, Interrupted};
use crate::hub::{Admitted, BusEvent, Call, CallState, Hub};
use api::{Kind, Request};
use bytes::Bytes;
use dedupe::{Admission, Decision, Dedupe};
use droidwarden_bridge::DeviceEvent;
use droidwarden_bridge::companion::{CompanionHub, Outgoing, presence_from_payload};
use droidwarden_services::{ErrorCode, WireError};
use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::mqttbytes::v5::{
    Filter, LastWill, Packet, Publish, PublishProperties, RetainForwardRule, SubscribeReasonCode,
};
use rumqttc::v5::{AsyncClient, Event, EventLoop, MqttOptions};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Notify, broadcast::error::RecvError, mpsc, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use topics::Topics;

/// rumqttc's request channel: every publish waits here while the broker is
/// away. 4096 holds the replies and status updates of a burst of a thousand
/// calls; beyond that, callers wait (bounded memory) rather than drop.
const REQUEST_CHANNEL: usize = 4096;

/// Incoming messages waiting for the dispatcher. Dispatching only parses
/// and spawns, so this rarely holds more than a few; when full the event
/// loop waits, which pushes back on the broker instead of dropping commands.
pub(crate) const INCOMING_CHANNEL: usize = 1024;

/// Largest MQTT packet accepted or sent.
const MAX_PACKET: u32 = 1024 * 1024;

/// Most QoS 1 publishes awaiting the broker's acknowledgement (the broker's
/// own Receive Maximum lowers it; mosquitto's default is 20). rumqttc
/// allocates a slot per packet id up to this limit at once, and its default
/// of 65535 costs 14 MB; a local broker acknowledges in well under a
/// millisecond, so 256 in flight never holds anything back.
const MAX_INFLIGHT: u16 = 256;

/// The MQTT side of the daemon.
#[derive(Debug)]
pub(crate) struct Mqtt {
    client: AsyncClient,
    topics: Topics,
    settings: MqttSettings,
    hub: Hub,
    companion: CompanionHub,
    /// The agent, when a language model is configured.
    assistant: Option<Assistant>,
    dedupe: Dedupe,
    /// Topic → payload of everything published retained, republished after
    /// every reconnection.
    retained: Mutex<BTreeMap<String, Vec<u8>>>,
    /// Command handlers in flight.
    calls: TaskTracker,
    /// Devices whose discovery configs were published.
    discovered: Mutex<BTreeSet<String>>,
    /// Each device's number of music volume steps, once a read told it:
    /// Home Assistant's volume slider moves in those steps.
    volume_steps: Mutex<BTreeMap<String, u64>>,
    discovery_file: PathBuf,
    resync: Notify,
    /// True once the subscriptions of the current connection are requested;
    /// publishers wait for it, so after every (re)connection the broker sees
    /// our SUBSCRIBE before anything else we send, and no publish races the
    /// packet ids of the subscription.
    ready: watch::Sender<bool>,
    /// True once the broker has acknowledged a subscription: commands
    /// reach us from then on. Never goes back to false; it tells start-up
    /// readiness (systemd's READY=1), not the connection's health.
    subscribed: watch::Sender<bool>,
}

/// Create the client; the returned event loop must be driven by
/// [`run_event_loop`].
///
/// `interrupted` are the calls a previous process left in flight: their
/// `error` status is published with the first retained topics, before any
/// command is served.
pub(crate) fn connect(
    settings: MqttSettings,
    hub: Hub,
    companion: CompanionHub,
    assistant: Option<Assistant>,
    state_dir: PathBuf,
    delivery: DeliveryStore,
    interrupted: &[Interrupted],
) -> Result<(Arc<Mqtt>, EventLoop), String> {
    let topics = Topics::new(&settings.prefix);
    let (host, port) = match &settings.broker {
        BrokerTarget::External { host, port, .. } => (host.clone(), *port),
        BrokerTarget::Embedded { listen, .. } => (listen.ip().to_string(), listen.port()),
    };
    let mut options = MqttOptions::new(settings.client_id.clone(), host, port);
    // A persistent session: the broker keeps our subscriptions and queues
    // QoS 1 commands while we are away (a restart, a crash, a network cut),
    // up to the session expiry. Redelivered commands are not run twice:
    // their ids are in the delivery store.
    let expiry = u32::try_from(settings.session_expiry.as_secs()).unwrap_or(u32::MAX);
    options
        .set_keep_alive(settings.keep_alive)
        .set_clean_start(expiry == 0)
        .set_session_expiry_interval((expiry > 0).then_some(expiry))
        .set_manual_acks(true)
        .set_max_packet_size(Some(MAX_PACKET))
        .set_request_channel_capacity(REQUEST_CHANNEL)
        .set_network_options({
            // Commands and replies are small: without TCP_NODELAY each
            // would wait for the broker's delayed ACK (tens of milliseconds).
            let mut network = rumqttc::NetworkOptions::new();
            network.set_tcp_nodelay(true);
            network
        })
        .set_outgoing_inflight_upper_limit(MAX_INFLIGHT)
        .set_last_will(LastWill::new(
            topics.availability(),
            "offline",
            QoS::AtLeastOnce,
            true,
            None,
        ));
    if let Some(c) = &settings.credentials {
        options.set_credentials(c.username.clone(), c.password.clone());
    }
    if let BrokerTarget::External { tls: Some(ca), .. } = &settings.broker {
        options.set_transport(rumqttc::Transport::tls_with_config(
            rumqttc::TlsConfiguration::Rustls(Arc::new(tls_config(ca.as_deref())?)),
        ));
    }
    let (client, eventloop) = AsyncClient::new(options, REQUEST_CHANNEL);
    let mqtt = Arc::new(Mqtt {
        client,
        dedupe: Dedupe::new(delivery),
        retained: Mutex::new(stale_statuses(&topics, interrupted)),
        settings,
        hub,
        companion,
        assistant,
        calls: TaskTracker::new(),
        discovered: Mutex::new(BTreeSet::new()),
        volume_steps: Mutex::new(BTreeMap::new()),
        discovery_file: state_dir.join("ha-discovery.json"),
        resync: Notify::new(),
        ready: watch::channel(false).0,
        subscribed: watch::channel(false).0,
        topics,
    });
    Ok((mqtt, eventloop))
}

/// The retained `error` statuses that replace the `executing` a killed
/// process left behind: for each (device, service) call it had in flight,
/// on the service's status topic and the device's last status.
fn stale_statuses(topics: &Topics, interrupted: &[Interrupted]) -> BTreeMap<String, Vec<u8>> {
    let now = crate::hub::rfc3339(std::time::SystemTime::now());
    let mut retained = BTreeMap::new();
    for call in interrupted {
        tracing::warn!(
            device = call.device,
            service = call.service,
            action = call.action,
            "a call was in flight when the daemon stopped; its outcome is unknown"
        );
        let started = std::time::UNIX_EPOCH
            + Duration::from_millis(u64::try_from(call.started_ms).unwrap_or(0));
        let error = WireError::new(
            ErrorCode::Internal,
            format!(
                "the daemon stopped during this call ({}.{}); its outcome is unknown: check the device's state",
                call.service, call.action
            ),
        );
        let mut body = json!({
            "state": CallState::Error.as_str(),
            "action": call.action,
            "started_at": crate::hub::rfc3339(started),
            "finished_at": now,
            "duration_ms": null,
            "error": error,
        });
        retained.insert(
            topics.status(&call.device, &call.service),
            body.to_string().into_bytes(),
        );
        body["service"] = json!(call.service);
        retained.insert(
            topics.last_status(&call.device),
            body.to_string().into_bytes(),
        );
    }
    retained
}

fn tls_config(ca: Option<&std::path::Path>) -> Result<rustls::ClientConfig, String> {
    let mut roots = rustls::RootCertStore::empty();
    match ca {
        Some(path) => {
            let pem = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
            for cert in rustls_pemfile::certs(&mut pem.as_slice()) {
                let cert = cert.map_err(|e| format!("{}: {e}", path.display()))?;
                roots
                    .add(cert)
                    .map_err(|e| format!("{}: {e}", path.display()))?;
            }
        }
        None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
    }
    // The ring provider is chosen explicitly: adb_client already builds it,
    // and relying on a process-wide default panics when two are compiled in.
    rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map(|b| b.with_root_certificates(roots).with_no_client_auth())
        .map_err(|e| e.to_string())
}

/// Drive the connection until `stop` is cancelled; reconnect with capped,
/// jittered backoff.
pub(crate) async fn run_event_loop(
    mqtt: Arc<Mqtt>,
    mut eventloop: EventLoop,
    incoming: mpsc::Sender<Publish>,
    stop: CancellationToken,
) {
    let mut failures: u32 = 0;
    loop {
        let event = tokio::select! {
            () = stop.cancelled() => return,
            event = eventloop.poll() => event,
        };
        match event {
            Ok(Event::Incoming(Packet::ConnAck(_))) => {
                if failures > 0 {
                    tracing::info!("reconnected to the MQTT broker");
                } else {
                    tracing::info!("connected to the MQTT broker");
                }
                failures = 0;
                mqtt.resync.notify_one();
            }
            Ok(Event::Incoming(Packet::SubAck(ack))) => {
                let granted = ack
                    .return_codes
                    .iter()
                    .any(|c| matches!(c, SubscribeReasonCode::Success(_)));
                if granted {
                    mqtt.subscribed.send_replace(true);
                } else {
                    tracing::warn!(codes = ?ack.return_codes, "the broker refused our subscriptions");
                }
            }
            Ok(Event::Incoming(Packet::Publish(publish))) => {
                // A dispatcher that has stopped (shutdown) leaves the
                // message unacknowledged: the broker keeps it for the next
                // process. Polling goes on, so the goodbye still goes out.
                let _ = incoming.send(publish).await;
            }
            Ok(Event::Outgoing(rumqttc::Outgoing::Disconnect)) => {
                // The broker closes the socket next; polling on would only
                // report that as a lost connection.
                tracing::debug!("disconnect sent");
                return;
            }
            Ok(_) => {}
            Err(e) => {
                mqtt.ready.send_replace(false);
                failures = failures.saturating_add(1);
                let delay = backoff(failures);
                if failures == 1 {
                    tracing::warn!(error = %e, "MQTT connection lost; reconnecting");
                } else {
                    tracing::debug!(error = %e, attempt = failures, ?delay, "MQTT reconnect failed");
                }
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(delay) => {}
                }
            }
        }
    }
}

/// 100 ms doubling to 10 s, with up to 25 % jitter so that many daemons do
/// not reconnect in lockstep.
fn backoff(attempt: u32) -> Duration {
    let base = 100u64.saturating_mul(1 << attempt.min(7)).min(10_000);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    Duration::from_millis(base + base * u64::from(nanos % 250) / 1000)
}

/// After every (re)connection: subscribe and republish retained topics.
pub(crate) async fn run_resync(mqtt: Arc<Mqtt>, shutdown: CancellationToken) {
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = mqtt.resync.notified() => {}
        }
        // No-local: our own requests to phones need not come back to us.
        // Retain Handling 2 on command filters: a retained command is never
        // sent to us (it would run again at every start). Companion topics
        // keep retained delivery: a phone's presence is retained.
        let filters = [
            (mqtt.topics.commands_filter(), RetainForwardRule::Never),
            (mqtt.topics.ha_commands_filter(), RetainForwardRule::Never),
            (
                mqtt.topics.companion_filter(),
                RetainForwardRule::OnEverySubscribe,
            ),
        ]
        .map(|(path, retained)| {
            let mut filter = Filter::new(path, QoS::AtLeastOnce);
            filter.nolocal = true;
            filter.retain_forward_rule = retained;
            filter
        });
        if let Err(e) = mqtt.client.subscribe_many(filters).await {
            tracing::warn!(error = %e, "subscribe failed");
        }
        mqtt.ready.send_replace(true);
        mqtt.send(mqtt.topics.availability(), b"online".to_vec(), true)
            .await;
        let retained: Vec<(String, Vec<u8>)> = mqtt
            .retained()
            .iter()
            .map(|(t, p)| (t.clone(), p.clone()))
            .collect();
        for (topic, payload) in retained {
            if let Err(e) = mqtt
                .client
                .publish(topic, QoS::AtLeastOnce, true, payload)
                .await
            {
                tracing::warn!(error = %e, "republish failed");
            }
        }
    }
}

impl Mqtt {
    /// Becomes true when the broker first acknowledges our subscriptions
    /// (start-up readiness: commands can reach us).
    pub(crate) fn subscribed(&self) -> watch::Receiver<bool> {
        self.subscribed.subscribe()
    }

    fn retained(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Vec<u8>>> {
        self.retained.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Publish with QoS 1; retained topics are remembered for resync (an
    /// empty retained payload clears the topic and is forgotten).
    async fn send(&self, topic: String, payload: Vec<u8>, retain: bool) {
        self.publish(topic, payload, retain, QoS::AtLeastOnce).await;
    }

    /// Publish a retained "latest value" topic (call status, read state)
    /// with QoS 0. These change with every call, and a value lost with a
    /// dropped connection is restored by the resync after the reconnect,
    /// which republishes every retained topic; QoS 1 would only add two
    /// acknowledgements per message at the broker.
    async fn send_latest(&self, topic: String, payload: Vec<u8>) {
        self.publish(topic, payload, true, QoS::AtMostOnce).await;
    }

    async fn publish(&self, topic: String, payload: Vec<u8>, retain: bool, qos: QoS) {
        // Retained topics are republished after every connection anyway,
        // so they need not wait for one; everything else does.
        if !retain {
            let _ = self.ready.subscribe().wait_for(|ready| *ready).await;
        }
        if retain {
            let mut retained = self.retained();
            if payload.is_empty() {
                retained.remove(&topic);
            } else {
                retained.insert(topic.clone(), payload.clone());
            }
        }
        if let Err(e) = self.client.publish(topic, qos, retain, payload).await {
            tracing::warn!(error = %e, "publish failed");
        }
    }

    /// Publish a read state, unless the topic already holds exactly this
    /// payload (a read that found nothing new).
    async fn send_changed(&self, topic: String, payload: Vec<u8>) {
        if self.retained().get(&topic) == Some(&payload) {
            return;
        }
        self.send_latest(topic, payload).await;
    }

    async fn send_json(&self, topic: String, value: &Value, retain: bool) {
        self.send(topic, value.to_string().into_bytes(), retain)
            .await;
    }

    /// Send a reply where the request asked for it: its MQTT 5 response
    /// topic, else `reply/<id>`, else the errors topic.
    async fn reply(&self, id: Option<&str>, to: &Option<ResponseTo>, reply: &Value) {
        self.reply_bytes(id, to, reply.to_string().into_bytes())
            .await;
    }

    async fn reply_bytes(&self, id: Option<&str>, to: &Option<ResponseTo>, payload: Vec<u8>) {
        if let Some(to) = to {
            let _ = self.ready.subscribe().wait_for(|ready| *ready).await;
            let properties = PublishProperties {
                correlation_data: to.correlation.clone(),
                content_type: Some("application/json".into()),
                ..PublishProperties::default()
            };
            if let Err(e) = self
                .client
                .publish_with_properties(
                    to.topic.clone(),
                    QoS::AtLeastOnce,
                    false,
                    payload,
                    properties,
                )
                .await
            {
                tracing::warn!(error = %e, "reply publish failed");
            }
            return;
        }
        let topic = match id {
            Some(id) => self.topics.reply(id),
            None => self.topics.errors(),
        };
        self.send(topic, payload, false).await;
    }

    /// Stop taking commands, let calls in flight finish (bounded by
    /// `grace`), then say goodbye: `offline` on the availability topic and a
    /// clean disconnect (which suppresses the will).
    ///
    /// The command subscriptions are kept: with a persistent session the
    /// broker queues the commands published while the daemon is stopped,
    /// and the dispatcher leaves those arriving during the shutdown
    /// unacknowledged, for the next process.
    pub(crate) async fn shutdown(&self, grace: Duration) {
        self.calls.close();
        if tokio::time::timeout(grace, self.calls.wait())
            .await
            .is_err()
        {
            tracing::warn!("calls still running after {grace:?}; stopping anyway");
        }
        self.send(self.topics.availability(), b"offline".to_vec(), true)
            .await;
        let _ = self.client.disconnect().await;
    }
}

/// An MQTT 5 response topic and correlation data.
#[derive(Debug, Clone)]
struct ResponseTo {
    topic: String,
    correlation: Option<Bytes>,
}

/// Parse and run commands until `shutdown`; after it, until `stop`, keep
/// taking what phones send (responses to calls still draining) but leave
/// commands unacknowledged and unrun, for the next process.
pub(crate) async fn run_dispatch(
    mqtt: Arc<Mqtt>,
    mut incoming: mpsc::Receiver<Publish>,
    shutdown: CancellationToken,
    stop: CancellationToken,
) {
    loop {
        let publish = tokio::select! {
            () = stop.cancelled() => return,
            p = incoming.recv() => match p { Some(p) => p, None => return },
        };
        if shutdown.is_cancelled() && is_command(&mqtt, &publish) {
            tracing::debug!("shutting down: a command is left to the next process");
            continue;
        }
        dispatch(&mqtt, publish);
    }
}

fn is_command(mqtt: &Mqtt, publish: &Publish) -> bool {
    let topic = String::from_utf8_lossy(&publish.topic);
    mqtt.topics.command_name(&topic).is_some() || mqtt.topics.parse_ha_command(&topic).is_some()
}

impl Mqtt {
    /// Acknowledge a QoS 1 delivery (acknowledgements are manual).
    async fn ack(&self, publish: &Publish) {
        if let Err(e) = self.client.ack(publish).await {
            tracing::warn!(error = %e, "acknowledgement failed");
        }
    }
}

/// Acknowledge from the dispatcher, which never waits: at once when
/// rumqttc's request channel has room, else from a task.
fn ack_now(mqtt: &Arc<Mqtt>, publish: &Publish) {
    if mqtt.client.try_ack(publish).is_err() {
        let mqtt = Arc::clone(mqtt);
        let publish = publish.clone();
        mqtt.calls
            .clone()
            .spawn(async move { mqtt.ack(&publish).await });
    }
}

fn dispatch(mqtt: &Arc<Mqtt>, publish: Publish) {
    let topic = String::from_utf8_lossy(&publish.topic).into_owned();
    let command = mqtt.topics.command_name(&topic);
    let ha = mqtt.topics.parse_ha_command(&topic);
    if publish.retain && (command.is_some() || ha.is_some()) {
        // Retain Handling 2 keeps brokers that honour it from sending these;
        // this catches the others. A retained command would run again at
        // every start.
        tracing::info!(topic, "ignoring a retained command");
        ack_now(mqtt, &publish);
        let error = WireError::new(
            ErrorCode::InvalidRequest,
            format!(
                "{topic}: retained commands are ignored (one would run again at every start); publish without the retain flag, and clear this one with an empty retained message"
            ),
        );
        spawn_reply(mqtt, None, None, error);
        return;
    }
    if let Some(name) = command {
        let kind = match Kind::from_name(name) {
            Some(kind) => kind,
            None => {
                let error = WireError::new(
                    ErrorCode::InvalidRequest,
                    format!("unknown command topic {name:?}; valid: {}", Kind::NAMES),
                );
                tracing::warn!(topic, "{}", error.message);
                ack_now(mqtt, &publish);
                let response = response_to(mqtt, &publish).ok().flatten();
                spawn_reply(mqtt, None, response, error);
                return;
            }
        };
        let response = match response_to(mqtt, &publish) {
            Ok(response) => response,
            Err(error) => {
                // Not run, and not answered on the topic it named: only the
                // id (when it can be read) tells the caller where to look.
                let id = match api::parse(kind, &publish.payload, mqtt.settings.max_payload, false)
                {
                    Ok(request) => request.id().map(str::to_owned),
                    Err(rejected) => rejected.id,
                };
                tracing::warn!(topic, id, "{}", error.message);
                ack_now(mqtt, &publish);
                spawn_reply(mqtt, id, None, error);
                return;
            }
        };
        let request = match api::parse(
            kind,
            &publish.payload,
            mqtt.settings.max_payload,
            response.is_some(),
        ) {
            Ok(request) => request,
            Err(rejected) => {
                tracing::warn!(topic, id = rejected.id.as_deref(), error = %rejected.error.message, "rejected a command");
                ack_now(mqtt, &publish);
                spawn_reply(mqtt, rejected.id, response, rejected.error);
                return;
            }
        };
        // The call's place in its device's order is taken here, in the
        // order the broker delivered the commands, before anything is
        // spawned. A call that fails validation takes none.
        let admitted = match &request {
            Request::Call { id, call } => match mqtt.hub.admit(call) {
                Ok(admitted) => Some(admitted),
                Err(error) => {
                    tracing::debug!(topic, id, error = %error, "call refused");
                    ack_now(mqtt, &publish);
                    spawn_reply(mqtt, id.clone(), response, error);
                    return;
                }
            },
            _ => None,
        };
        // A command with an id is acknowledged once the id is recorded
        // (in `handle`); one without has nothing to record.
        let delivery = if request.id().is_some() {
            Some(publish)
        } else {
            ack_now(mqtt, &publish);
            None
        };
        let mqtt = Arc::clone(mqtt);
        let tracker = mqtt.calls.clone();
        tracker.spawn(async move { handle(&mqtt, request, admitted, response, delivery).await });
    } else if let Some((id, rest)) = mqtt.topics.parse_companion(&topic) {
        ack_now(mqtt, &publish);
        companion_message(mqtt, id, rest, &publish.payload);
    } else if let Some((device, object)) = ha {
        ack_now(mqtt, &publish);
        let payload = String::from_utf8_lossy(&publish.payload);
        match ha_admit(mqtt, device, object, &payload) {
            Ok(admitted) => {
                let (device, object) = (device.to_owned(), object.to_owned());
                mqtt.calls.spawn(async move {
                    if let Err(e) = admitted.run().await {
                        tracing::warn!(device, object, error = %e, "Home Assistant command failed");
                    }
                });
            }
            Err(error) => {
                tracing::warn!(device, object, message = %error.message, "rejected a Home Assistant command");
                spawn_reply(mqtt, None, None, error);
            }
        }
    } else {
        ack_now(mqtt, &publish);
        tracing::debug!(topic, "ignoring a message on an unexpected topic");
    }
}

/// Send an error reply from a task on the call tracker (the dispatcher
/// never waits on a publish).
fn spawn_reply(
    mqtt: &Arc<Mqtt>,
    id: Option<String>,
    response: Option<ResponseTo>,
    error: WireError,
) {
    let mqtt = Arc::clone(mqtt);
    let tracker = mqtt.calls.clone();
    tracker.spawn(async move {
        let reply = api::error_reply(id.as_deref(), &error);
        mqtt.reply(id.as_deref(), &response, &reply).await;
    });
}

/// The request's MQTT 5 response topic, when it has one. Only topics under
/// `<prefix>/responses/` are honoured: anywhere else a client could make
/// the daemon publish on a topic it does not own (a phone's request topic,
/// a command topic).
///
/// # Errors
/// `invalid_request` for a response topic outside that prefix.
fn response_to(mqtt: &Mqtt, publish: &Publish) -> Result<Option<ResponseTo>, WireError> {
    let Some(properties) = publish.properties.as_ref() else {
        return Ok(None);
    };
    let Some(topic) = properties.response_topic.as_ref() else {
        return Ok(None);
    };
    let allowed = mqtt.topics.responses_prefix();
    if !topic.starts_with(&allowed) || topic.len() == allowed.len() {
        return Err(WireError::new(
            ErrorCode::InvalidRequest,
            format!(
                "response topic {:?} is refused: replies go only to topics under {allowed}; the request was not run",
                topic.chars().take(200).collect::<String>()
            ),
        ));
    }
    Ok(Some(ResponseTo {
        topic: topic.clone(),
        correlation: properties.correlation_data.clone(),
    }))
}

/// A message from a companion phone: presence, a response, or an event.
/// The hub ignores (and logs) anything malformed; a request topic is our
/// own publication echoed back and is skipped.
fn companion_message(mqtt: &Mqtt, id: &str, rest: &str, payload: &[u8]) {
    match rest {
        "online" => match presence_from_payload(payload) {
            Some(online) => mqtt.companion.on_presence(id, online),
            // An empty retained payload clears presence: the phone is gone.
            None if payload.is_empty() => mqtt.companion.on_presence(id, false),
            None => tracing::warn!(companion = id, "unreadable presence payload"),
        },
        "response" => {
            let disposition = mqtt.companion.on_response(id, payload);
            tracing::debug!(companion = id, ?disposition, "companion response");
        }
        "request" => {}
        other => match other.strip_prefix("event/") {
            Some(kind) if !kind.contains('/') => {
                if let Some(event) = mqtt.companion.on_event(id, kind, payload) {
                    let kind = event.kind;
                    if let Some(service) = kind.service() {
                        mqtt.hub
                            .announce_state(event.device.clone(), service, event.data.clone());
                    }
                    mqtt.hub
                        .announce_event(event.device, kind.as_str(), event.data);
                }
            }
            _ => tracing::debug!(companion = id, topic = other, "ignoring a companion topic"),
        },
    }
}

/// Publish the companion hub's requests until `stop`.
pub(crate) async fn run_companion_requests(
    mqtt: Arc<Mqtt>,
    mut requests: mpsc::Receiver<Outgoing>,
    stop: CancellationToken,
) {
    loop {
        let request = tokio::select! {
            () = stop.cancelled() => return,
            r = requests.recv() => match r { Some(r) => r, None => return },
        };
        let topic = mqtt.topics.companion_request(&request.companion_id);
        mqtt.send(topic, request.payload, false).await;
    }
}

/// Run a command and reply. `delivery`, when given, is acknowledged once
/// the command's id is recorded (or known).
async fn handle(
    mqtt: &Mqtt,
    request: Request,
    admitted: Option<Admitted>,
    response: Option<ResponseTo>,
    delivery: Option<Publish>,
) {
    let id = request.id().map(str::to_owned);
    let acknowledge = async |delivery: Option<Publish>| {
        if let Some(publish) = &delivery {
            mqtt.ack(publish).await;
        }
    };
    if let Request::Approve {
        approval_id,
        approve,
        reason,
        ..
    } = &request
    {
        // Answering twice is harmless (the second is refused as already
        // answered), so approvals skip the dedupe table.
        acknowledge(delivery).await;
        let reply = answer_approval(mqtt, id.as_deref(), approval_id, *approve, reason).await;
        if id.is_some() || response.is_some() || reply["ok"] == false {
            mqtt.reply(id.as_deref(), &response, &reply).await;
        }
        return;
    }
    let Some(key) = id.as_deref() else {
        acknowledge(delivery).await;
        if let Some(reply) = execute(mqtt, None, request, admitted).await {
            mqtt.reply(None, &response, &reply).await;
        }
        return;
    };
    let reply: Option<dedupe::Reply> = match mqtt.dedupe.admit(key) {
        Admission::Repeat(first) => {
            // Not run: its place in the device's order is given up at once.
            drop(admitted);
            acknowledge(delivery).await;
            tracing::info!(id, "repeated command id: sending the first reply again");
            Some(dedupe::first_reply(first).await.unwrap_or_else(|| {
                let error = WireError::new(
                    ErrorCode::Internal,
                    "the first request with this id did not complete",
                );
                api::error_reply(Some(key), &error).to_string().into()
            }))
        }
        Admission::Owner(owner) => {
            let decision = owner
                .check(|error| api::error_reply(Some(key), error).to_string())
                .await;
            // Recorded (or known): a redelivery is answered from the store.
            acknowledge(delivery).await;
            match decision {
                Decision::Answer(reply) => {
                    drop(admitted);
                    owner.finish(&reply, false).await;
                    Some(reply)
                }
                Decision::Run => {
                    let reply: Option<dedupe::Reply> = execute(mqtt, Some(key), request, admitted)
                        .await
                        .map(|r| r.to_string().into());
                    if let Some(reply) = &reply {
                        owner.finish(reply, true).await;
                    }
                    reply
                }
            }
        }
    };
    if let Some(reply) = reply {
        mqtt.reply_bytes(Some(key), &response, reply.as_bytes().to_vec())
            .await;
    }
}

/// Run a request; `None` when there is no reply to send now (an agent run
/// that the daemon's shutdown interrupted: it resumes at the next start and
/// replies then). A call comes admitted (its place in the device's order
/// taken by the dispatcher).
async fn execute(
    mqtt: &Mqtt,
    id: Option<&str>,
    request: Request,
    admitted: Option<Admitted>,
) -> Option<Value> {
    Some(match request {
        Request::Devices { .. } => {
            api::ok_reply(id, &json!({ "devices": mqtt.hub.registry().list() }))
        }
        Request::Call { call, .. } => {
            let result = match admitted {
                Some(admitted) => admitted.run().await,
                None => match mqtt.hub.admit(&call) {
                    Ok(admitted) => admitted.run().await,
                    Err(e) => Err(e),
                },
            };
            match result {
                Ok(result) => api::ok_reply(id, &result),
                Err(error) => api::error_reply(id, &error),
            }
        }
        Request::Ask {
            prompt, session, ..
        } => {
            let Some(assistant) = &mqtt.assistant else {
                return Some(api::error_reply(id, &assistant::disabled()));
            };
            let origin = id.map(|id| Origin::Mqtt(id.to_owned()));
            match assistant.ask(&prompt, session, origin).await {
                Err(error) => api::error_reply(id, &error),
                Ok(started) => match started.done.await {
                    Ok(Ok(answer)) => api::ok_reply(id, &answer.to_json()),
                    Ok(Err(error)) => api::error_reply(id, &error),
                    Err(_) => return None,
                },
            }
        }
        Request::Approve {
            approval_id,
            approve,
            reason,
            ..
        } => answer_approval(mqtt, id, &approval_id, approve, &reason).await,
    })
}

async fn answer_approval(
    mqtt: &Mqtt,
    id: Option<&str>,
    approval_id: &str,
    approve: bool,
    reason: &Option<String>,
) -> Value {
    let Some(assistant) = &mqtt.assistant else {
        return api::error_reply(id, &assistant::disabled());
    };
    let answered = if approve {
        assistant.approve(approval_id).await
    } else {
        assistant
            .deny(approval_id, reason.as_deref().unwrap_or_default())
            .await
    };
    match answered {
        Ok(approval) => api::ok_reply(
            id,
            &json!({
                "approval_id": approval.approval_id,
                "decision": if approve { "approve" } else { "deny" },
            }),
        ),
        Err(error) => {
            tracing::warn!(approval = approval_id, error = %error.message, "approval answer refused");
            api::error_reply(id, &error)
        }
    }
}

/// Parse a Home Assistant control's command and admit its call to the hub
/// (synchronously, in arrival order).
///
/// # Errors
/// An unknown control or a payload it does not take (`invalid_request`),
/// or the hub's refusal.
fn ha_admit(mqtt: &Mqtt, device: &str, object: &str, payload: &str) -> Result<Admitted, WireError> {
    let command = discovery::ha_command(object, payload).map_err(|message| {
        WireError::new(
            ErrorCode::InvalidRequest,
            format!("{device}/{object}: {message}"),
        )
    })?;
    mqtt.hub.admit_call(Call {
        device: Some(device.to_owned()),
        command,
    })
}

/// Publish bus events and availability as retained topics, and discovery
/// configs for every device, until `shutdown`.
pub(crate) async fn run_publisher(mqtt: Arc<Mqtt>, shutdown: CancellationToken) {
    let mut bus = mqtt.hub.subscribe();
    let mut devices = mqtt.hub.registry().subscribe();
    let mut notices = mqtt.assistant.as_ref().map(Assistant::subscribe);
    mqtt.publish_pending_approvals().await;
    mqtt.clear_removed_devices().await;
    for info in mqtt.hub.registry().list() {
        mqtt.publish_availability(info.name.as_str(), info.online)
            .await;
        mqtt.publish_discovery(info.name.as_str()).await;
    }
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            event = bus.recv() => match event {
                Ok(BusEvent::Status(status)) => {
                    let device = status.device.as_str();
                    let mut body = status.to_json();
                    mqtt.send_latest(mqtt.topics.status(device, status.service), body.to_string().into_bytes()).await;
                    // The device-wide "last action" only needs outcomes.
                    if status.state != CallState::Executing {
                        body["service"] = json!(status.service);
                        mqtt.send_latest(mqtt.topics.last_status(device), body.to_string().into_bytes()).await;
                    }
                }
                Ok(BusEvent::State(state)) => {
                    let topic = mqtt.topics.state(state.device.as_str(), state.service);
                    mqtt.send_changed(topic, state.state.to_string().into_bytes()).await;
                    mqtt.learn_volume_steps(state.device.as_str(), state.service, &state.state).await;
                }
                Ok(BusEvent::PhoneEvent { device, kind, data }) => {
                    mqtt.send_json(mqtt.topics.device_event(device.as_str(), kind), &data, false).await;
                }
                Err(RecvError::Lagged(n)) => tracing::warn!(missed = n, "status publisher fell behind"),
                Err(RecvError::Closed) => return,
            },
            event = devices.recv() => match event {
                Ok(DeviceEvent::Availability { device, online, .. }) => {
                    mqtt.publish_availability(device.as_str(), online).await;
                    mqtt.publish_discovery(device.as_str()).await;
                }
                Ok(DeviceEvent::Removed { device }) => mqtt.remove_discovery(device.as_str()).await,
                Err(RecvError::Lagged(_)) => {
                    for info in mqtt.hub.registry().list() {
                        mqtt.publish_availability(info.name.as_str(), info.online).await;
                    }
                }
                Err(RecvError::Closed) => return,
            },
            notice = async {
                match notices.as_mut() {
                    Some(rx) => rx.recv().await,
                    None => std::future::pending().await,
                }
            } => match notice {
                Ok(notice) => mqtt.publish_notice(notice).await,
                Err(RecvError::Lagged(n)) => tracing::warn!(missed = n, "agent event publisher fell behind"),
                Err(RecvError::Closed) => notices = None,
            },
        }
    }
}

impl Mqtt {
    /// Approval requests still open from before a restart: their retained
    /// topics (an embedded broker starts empty).
    async fn publish_pending_approvals(&self) {
        let Some(assistant) = &self.assistant else {
            return;
        };
        match assistant.pending_approvals().await {
            Ok(pending) => {
                for approval in pending {
                    let topic = self.topics.approval(&approval.approval_id);
                    self.send_json(topic, &json!(approval), true).await;
                }
            }
            Err(e) => tracing::warn!(error = %e.message, "cannot list pending approvals"),
        }
    }

    async fn publish_notice(&self, notice: Notice) {
        match notice {
            Notice::Event(event) => {
                if let droidwarden_agent::EventKind::ApprovalRequested { approval } = &event.kind {
                    let topic = self.topics.approval(&approval.approval_id);
                    self.send_json(topic, &json!(approval), true).await;
                }
                let topic = self.topics.session_events(&event.session_id);
                self.send_json(topic, &json!(*event), false).await;
            }
            Notice::ApprovalClosed { approval_id } => {
                self.send(self.topics.approval(&approval_id), Vec::new(), true)
                    .await;
            }
            Notice::ResumedRunFinished { origin, result } => match Origin::parse(&origin) {
                Some(Origin::Mqtt(id)) => {
                    let reply = match result {
                        Ok(answer) => api::ok_reply(Some(&id), &answer.to_json()),
                        Err(error) => api::error_reply(Some(&id), &error),
                    };
                    self.send_json(self.topics.reply(&id), &reply, false).await;
                }
                None => tracing::debug!(origin, "a resumed run finished; no MQTT reply owed"),
            },
        }
    }

    async fn publish_availability(&self, device: &str, online: bool) {
        let payload = if online { "online" } else { "offline" };
        self.send(
            self.topics.device_availability(device),
            payload.as_bytes().to_vec(),
            true,
        )
        .await;
    }

    async fn publish_discovery(&self, device: &str) {
        let Some(ha_prefix) = self.settings.discovery.clone() else {
            return;
        };
        let Some(handle) = self.hub.registry().get(device) else {
            return;
        };
        let info = handle.info();
        let newly = self
            .discovered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(device.to_owned());
        // Re-announce when the model becomes known, so the device card is right.
        if !newly && info.model.is_none() {
            return;
        }
        let volume_max = self.volume_max(device);
        for (topic, body) in discovery::configs(&ha_prefix, &self.topics, &info, volume_max) {
            self.send_json(topic, &body, true).await;
        }
        if newly {
            self.save_discovered().await;
        }
    }

    fn volume_max(&self, device: &str) -> Option<u64> {
        self.volume_steps
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(device)
            .copied()
    }

    /// A music volume read tells the phone's number of steps; when it is
    /// new, announce the device again so the slider uses them.
    async fn learn_volume_steps(&self, device: &str, service: &str, state: &Value) {
        if service != "audio_automation" || state["stream"] != "music" {
            return;
        }
        let Some(max) = state["max"].as_u64().filter(|m| (1..=100).contains(m)) else {
            return;
        };
        let changed = self
            .volume_steps
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(device.to_owned(), max)
            != Some(max);
        if changed {
            self.publish_discovery_again(device).await;
        }
    }

    /// Publish a known device's discovery configs again (something they
    /// show changed).
    async fn publish_discovery_again(&self, device: &str) {
        let Some(ha_prefix) = self.settings.discovery.clone() else {
            return;
        };
        let Some(handle) = self.hub.registry().get(device) else {
            return;
        };
        let known = self
            .discovered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(device);
        if !known {
            return;
        }
        let volume_max = self.volume_max(device);
        for (topic, body) in
            discovery::configs(&ha_prefix, &self.topics, &handle.info(), volume_max)
        {
            self.send_json(topic, &body, true).await;
        }
    }

    async fn remove_discovery(&self, device: &str) {
        self.clear_device(device).await;
        self.discovered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(device);
        self.save_discovered().await;
    }

    /// Devices announced by an earlier run that are no longer known: clear
    /// their discovery configs so Home Assistant drops them.
    async fn clear_removed_devices(&self) {
        let previous: Vec<String> = tokio::fs::read(&self.discovery_file)
            .await
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        let current: BTreeSet<String> = self
            .hub
            .registry()
            .list()
            .into_iter()
            .map(|d| d.name.to_string())
            .collect();
        for device in previous.iter().filter(|d| !current.contains(*d)) {
            tracing::info!(
                device,
                "removing the Home Assistant entries of a device no longer configured"
            );
            self.clear_device(device).await;
        }
        self.save_discovered().await;
    }

    /// Clear every retained topic of a device that is gone: its discovery
    /// configs, availability, last status, and each service's status and
    /// state, so nothing stale stays on the broker.
    async fn clear_device(&self, device: &str) {
        let mut topics = vec![
            self.topics.device_availability(device),
            self.topics.last_status(device),
        ];
        for service in droidwarden_services::Catalogue::get().services() {
            topics.push(self.topics.status(device, service.id));
            topics.push(self.topics.state(device, service.id));
        }
        if let Some(ha_prefix) = self.settings.discovery.clone() {
            topics.extend(discovery::config_topics(&ha_prefix, &self.topics, device));
        }
        for topic in topics {
            self.send(topic, Vec::new(), true).await;
        }
    }

    async fn save_discovered(&self) {
        let names: Vec<String> = self
            .discovered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect();
        let file = self.discovery_file.clone();
        let write = async move {
            if let Some(dir) = file.parent() {
                tokio::fs::create_dir_all(dir).await?;
            }
            let tmp = file.with_extension("json.tmp");
            tokio::fs::write(&tmp, serde_json::to_vec(&names).unwrap_or_default()).await?;
            tokio::fs::rename(&tmp, &file).await
        };
        if let Err(e) = write.await {
            tracing::warn!(file = %self.discovery_file.display(), error = %e, "cannot record discovered devices");
        }
    }
}
