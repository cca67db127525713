//! droidwarden's MQTT adapter: the connection to the broker, the command API,
//! the retained availability, status and state topics, Home Assistant
//! discovery and the companion phones' topics. Topics and payloads are
//! documented in `docs/mqtt-api.md`.
//!
//! Two halves, as in rumqttc itself (its `MqttState` computes, its
//! `EventLoop` does the I/O):
//! - the router ([`router`]) decides everything: the topic table (what is
//!   subscribed, what is a command, where each topic goes), the retained
//!   cache republished after every reconnection, the discovery set, the
//!   ids running in this process and the repeats waiting for them, and
//!   where replies go. It takes an input and returns actions, and is
//!   tested without a broker;
//! - this file is the thin driver: it owns the rumqttc client, feeds the
//!   router what happens, and performs its actions (publish, acknowledge,
//!   admit and run a call, ask the agent, hand a message to the companion
//!   transport, write the discovery file), reporting back what came of
//!   them.
//!
//! Tasks (all spawned by the daemon through one tracker):
//! - the event loop ([`run_event_loop`]) polls the rumqttc connection,
//!   reconnects with capped backoff, and hands incoming messages to the
//!   dispatcher. It never publishes: publishing into rumqttc's request
//!   channel from the polling task can deadlock. A (re)connection only
//!   wakes [`run_resync`], which performs the router's resubscription and
//!   republication.
//! - the dispatcher ([`run_dispatch`]) routes each message and performs
//!   the result without ever waiting on a publish: it admits each call to
//!   the hub in arrival order (its place in the device's queue is taken
//!   there, synchronously, before anything is spawned), and runs it on the
//!   call tracker, so shutdown can wait for calls in flight.
//! - [`run_publisher`] turns the event centre's events ([`crate::events`])
//!   into retained topics and discovery configs.
//! - [`run_companion_requests`] publishes the companion transport's
//!   requests.
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

#![warn(missing_docs)]

pub mod api;
mod dedupe;
pub mod discovery;
mod router;
mod settings;
pub mod topics;

// The layers below, under the names the modules use.
use droidwarden_app::{approvals, events, health};
use droidwarden_automations as automations;
use droidwarden_core::{assistant, delivery, hub, private};

use crate::approvals::Approvals;
use crate::assistant::{Assistant, Origin};
use crate::automations::Automations;
use crate::delivery::{DeliveryStore, Interrupted};
use crate::events::{Event, Events, Stream};
use crate::hub::{Admitted, Call, CallRequest, Hub, Ran, Refusal};
use api::Request;
use dedupe::{Decision, Dedupe};
use droidwarden_bridge::backoff::Backoff;
use droidwarden_bridge::companion::{CompanionHub, Outgoing};
use droidwarden_services::WireError;
use futures_util::FutureExt;
use router::{
    Action, CompanionMessage, Discovered, Inbound, Input, Job, Outbound, Reply, ReplyTo, Router,
};
use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::mqttbytes::v5::{
    Filter, LastWill, Packet, Publish, PublishProperties, SubscribeReasonCode,
};
use rumqttc::v5::{AsyncClient, Event as MqttEvent, EventLoop, MqttOptions};
use serde_json::{Value, json};
pub use settings::{BrokerTarget, Credentials, MqttSettings};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, mpsc, watch};
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
pub const INCOMING_CHANNEL: usize = 1024;

/// Largest MQTT packet accepted or sent.
const MAX_PACKET: u32 = 1024 * 1024;

/// Most QoS 1 publishes awaiting the broker's acknowledgement (the broker's
/// own Receive Maximum lowers it; mosquitto's default is 20). rumqttc
/// allocates a slot per packet id up to this limit at once, and its default
/// of 65535 costs 14 MB; a local broker acknowledges in well under a
/// millisecond, so 256 in flight never holds anything back.
const MAX_INFLIGHT: u16 = 256;

/// The daemon's MQTT 5 Receive Maximum: how many QoS 1 messages the broker
/// may send it before their acknowledgements. mosquitto takes a client's
/// Receive Maximum as its window for that client (else its
/// `max_inflight_messages`, 20 by default), the embedded broker the smaller
/// of it and its own 256.
const RECEIVE_MAXIMUM: u16 = 256;

/// Commands held back for one phone: not acknowledged while the phone's
/// queue is full, admitted in order as it drains.
const HOLD_PER_DEVICE: usize = 64;

/// Commands held back in all. The rest of the window, 64 of
/// [`RECEIVE_MAXIMUM`], always stays open for everything else the broker
/// sends: companion phones' responses, which drain their queues, above
/// all, so holding can never stop the queue it waits for.
const HOLD_TOTAL: usize = RECEIVE_MAXIMUM as usize - 64;

/// How long a removed device's Home Assistant entries are cleared again
/// whenever Home Assistant comes online: 30 days.
const REMEMBER_REMOVED_MS: i64 = 30 * 24 * 3600 * 1000;

/// `ha-discovery.json`: the devices announced to Home Assistant, and those
/// removed with when (unix ms). Earlier versions wrote the list of
/// announced devices alone, which still reads.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct DiscoveryFile {
    announced: Vec<String>,
    #[serde(default)]
    removed: BTreeMap<String, i64>,
}

impl DiscoveryFile {
    /// The file's content; an unreadable one is empty (the worst outcome
    /// is a removed device's entities kept in Home Assistant).
    fn parse(bytes: &[u8]) -> Self {
        serde_json::from_slice(bytes)
            .or_else(|_| {
                serde_json::from_slice::<Vec<String>>(bytes).map(|announced| Self {
                    announced,
                    removed: BTreeMap::new(),
                })
            })
            .unwrap_or_default()
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The MQTT side of the daemon: the driver around the [`Router`].
#[derive(Debug)]
pub struct Mqtt {
    client: AsyncClient,
    /// Every decision; locked only for a step, never across an await.
    router: Mutex<Router>,
    hub: Hub,
    companion: CompanionHub,
    /// The agent, when a language model is configured.
    assistant: Option<Assistant>,
    /// Automations: `cmd/automation`, their approvals and MQTT triggers.
    automations: Automations,
    dedupe: Dedupe,
    /// Command handlers in flight.
    calls: TaskTracker,
    discovery_file: PathBuf,
    /// When each device remembered as removed was removed (unix ms), as
    /// the discovery file keeps it.
    removed_since: Mutex<BTreeMap<String, i64>>,
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
    /// The broker is the daemon's embedded one, logged in to with the
    /// daemon's account: it says who published each command
    /// (`droidwarden_broker::Policy::vouch_to`). Another broker cannot be
    /// trusted to, so its user properties are never read as such.
    told_publishers: bool,
    /// The broker is on this host: reconnect quickly (a local broker that
    /// went away comes back in moments, and while we are away a broker
    /// without persistence drops the commands sent to us).
    local_broker: bool,
    /// Commands held back, unacknowledged, while their phone's queue is
    /// full ([`Mqtt::run_job`]).
    held: Mutex<Held>,
    /// Cancelled when the daemon stops taking commands: held ones are left
    /// unacknowledged, for the broker to deliver to the next process.
    stopping: CancellationToken,
}

/// Commands with an id whose phone's queue was full when they arrived:
/// their PUBACK is withheld (the broker sends no more than its window, so
/// a backlog waits at the broker, which holds its publishers back in
/// turn), and they are admitted in arrival order as the queue drains. One
/// line per phone; a command for a phone with a line joins it, so nothing
/// overtakes a held command.
#[derive(Debug, Default)]
struct Held {
    lines: HashMap<droidwarden_services::DeviceName, VecDeque<HeldJob>>,
    total: usize,
}

#[derive(Debug)]
struct HeldJob {
    job: Job,
    publish: Publish,
    /// The `busy` answer it gets if it waits too long.
    busy: WireError,
    since: Instant,
}

/// Create the client; the returned event loop must be driven by
/// [`run_event_loop`].
///
/// `interrupted` are the calls a previous process left in flight: their
/// `error` status is published with the first retained topics, before any
/// command is served.
#[allow(
    clippy::too_many_arguments,
    reason = "each is a handle the MQTT side keeps; a struct of them would be unpacked again at once"
)]
pub fn connect(
    settings: MqttSettings,
    hub: Hub,
    companion: CompanionHub,
    assistant: Option<Assistant>,
    automations: Automations,
    state_dir: PathBuf,
    delivery: DeliveryStore,
    interrupted: &[Interrupted],
) -> Result<(Arc<Mqtt>, EventLoop), String> {
    let topics = Topics::new(&settings.prefix);
    let (host, port) = match &settings.broker {
        BrokerTarget::External { host, port, .. } => (host.clone(), *port),
        BrokerTarget::Embedded { listen, .. } => (listen.ip().to_string(), listen.port()),
    };
    let local_broker = host
        .parse::<std::net::IpAddr>()
        .map_or(host == "localhost", |ip| ip.to_canonical().is_loopback());
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
        .set_receive_maximum(Some(RECEIVE_MAXIMUM))
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
            rumqttc::TlsConfiguration::Rustls(Arc::new(droidwarden_bridge::tls::client_config(
                ca.as_deref(),
            )?)),
        ));
    }
    let (client, eventloop) = AsyncClient::new(options, REQUEST_CHANNEL);
    let router = Router::new(
        router::Settings {
            prefix: settings.prefix.clone(),
            discovery: settings.discovery.clone(),
            max_payload: settings.max_payload,
            automation_topics: automations.mqtt_topics().clone(),
        },
        interrupted,
        std::time::SystemTime::now(),
    );
    let mqtt = Arc::new(Mqtt {
        client,
        router: Mutex::new(router),
        dedupe: Dedupe::new(delivery),
        hub,
        companion,
        assistant,
        automations,
        calls: TaskTracker::new(),
        discovery_file: state_dir.join("ha-discovery.json"),
        removed_since: Mutex::new(BTreeMap::new()),
        resync: Notify::new(),
        ready: watch::channel(false).0,
        subscribed: watch::channel(false).0,
        told_publishers: matches!(settings.broker, BrokerTarget::Embedded { .. })
            && settings.credentials.is_some(),
        local_broker,
        held: Mutex::default(),
        stopping: CancellationToken::new(),
    });
    Ok((mqtt, eventloop))
}

/// Drive the connection until `stop` is cancelled; reconnect with capped,
/// jittered backoff.
pub async fn run_event_loop(
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
            Ok(MqttEvent::Incoming(Packet::ConnAck(_))) => {
                if failures > 0 {
                    tracing::info!("reconnected to the MQTT broker");
                } else {
                    tracing::info!("connected to the MQTT broker");
                }
                failures = 0;
                mqtt.resync.notify_one();
            }
            Ok(MqttEvent::Incoming(Packet::SubAck(ack))) => {
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
            Ok(MqttEvent::Incoming(Packet::Publish(publish))) => {
                // A dispatcher that has stopped (shutdown) leaves the
                // message unacknowledged: the broker keeps it for the next
                // process. Polling goes on, so the goodbye still goes out.
                let _ = incoming.send(publish).await;
            }
            Ok(MqttEvent::Outgoing(rumqttc::Outgoing::Disconnect)) => {
                tracing::debug!("disconnect sent");
                await_close(&mut eventloop).await;
                return;
            }
            Ok(_) => {}
            Err(e) => {
                mqtt.ready.send_replace(false);
                mqtt.step(Input::Disconnected);
                if failures == 0 {
                    // Companion phones are reached only through the broker:
                    // while we cannot reach it they are offline to us, and a
                    // change for one waits in its queue, unsent, instead of
                    // sitting in the MQTT client's queue as if sent. Their
                    // retained presence comes back with our subscriptions.
                    mqtt.companion
                        .connection_lost("the daemon's connection to the MQTT broker is down");
                }
                failures = failures.saturating_add(1);
                let delay = backoff(failures, mqtt.local_broker);
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

/// After our DISCONNECT, read until the broker closes the connection
/// (bounded by [`CLOSE_WAIT`]). Dropping the socket at once, with the
/// broker's acknowledgements still unread in it, makes the kernel reset the
/// connection, and a reset can discard what the broker had not read yet:
/// the last replies, written just before the DISCONNECT. Messages that
/// arrive meanwhile stay unacknowledged, for the next process.
async fn await_close(eventloop: &mut EventLoop) {
    let closed = async { while eventloop.poll().await.is_ok() {} };
    if tokio::time::timeout(CLOSE_WAIT, closed).await.is_err() {
        tracing::debug!("the broker did not close the connection within {CLOSE_WAIT:?}");
    }
}

/// How long [`await_close`] waits for the broker to close the connection.
const CLOSE_WAIT: Duration = Duration::from_secs(1);

/// 100 ms doubling to 10 s (1 s for a broker on this host, which costs
/// nothing to ask and whose absence loses commands on a broker without
/// persistence), with up to 25 % jitter so that many daemons do not
/// reconnect in lockstep.
fn backoff(attempt: u32, local: bool) -> Duration {
    const RECONNECT: Backoff = Backoff {
        first: Duration::from_millis(100),
        max: Duration::from_secs(10),
    };
    const RECONNECT_LOCAL: Backoff = Backoff {
        first: Duration::from_millis(100),
        max: Duration::from_secs(1),
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    if local {
        RECONNECT_LOCAL.delay_with_jitter(attempt, nanos)
    } else {
        RECONNECT.delay_with_jitter(attempt, nanos)
    }
}

/// After every (re)connection: subscribe, then republish retained topics.
pub async fn run_resync(mqtt: Arc<Mqtt>, shutdown: CancellationToken) {
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = mqtt.resync.notified() => {}
        }
        let actions = mqtt.step(Input::Connected);
        mqtt.perform(actions).await;
    }
}

/// Parse and run commands until `shutdown`; after it, until `stop`, keep
/// taking what phones send (responses to calls still draining) but leave
/// commands unacknowledged and unrun, for the next process.
pub async fn run_dispatch(
    mqtt: Arc<Mqtt>,
    mut incoming: mpsc::Receiver<Publish>,
    shutdown: CancellationToken,
    stop: CancellationToken,
) {
    let mut taking_commands = true;
    loop {
        let publish = tokio::select! {
            () = stop.cancelled() => return,
            p = incoming.recv() => match p { Some(p) => p, None => return },
        };
        if taking_commands && shutdown.is_cancelled() {
            taking_commands = false;
            mqtt.step(Input::StopCommands);
        }
        let inbound = inbound(&publish, mqtt.told_publishers);
        let actions = mqtt.step(Input::Inbound(&inbound));
        mqtt.perform_routed(actions, &publish);
    }
}

/// The router's view of a publish. `told_publisher`: the broker is the
/// daemon's own, which tells who published each command.
fn inbound(publish: &Publish, told_publisher: bool) -> Inbound {
    let properties = publish.properties.as_ref();
    let publisher = properties.filter(|_| told_publisher).and_then(|p| {
        p.user_properties
            .iter()
            .find(|(name, _)| name == droidwarden_broker::PUBLISHER_PROPERTY)
            .map(|(_, user)| user.clone())
    });
    Inbound {
        topic: String::from_utf8_lossy(&publish.topic).into_owned(),
        payload: publish.payload.clone(),
        retain: publish.retain,
        response_topic: properties.and_then(|p| p.response_topic.clone()),
        correlation: properties.and_then(|p| p.correlation_data.clone()),
        publisher,
    }
}

/// Publish the event centre's events (statuses, states, phone events,
/// availability, agent notices) as topics, and discovery configs for every
/// device, until `stop`. `events` is subscribed before the daemon resumes
/// anything, so nothing is missed.
pub async fn run_publisher(mqtt: Arc<Mqtt>, mut events: Events, stop: CancellationToken) {
    let approvals = mqtt.pending_approvals().await;
    let previous = mqtt.load_discovered().await;
    let devices = mqtt.devices();
    let actions = mqtt.step(Input::Start {
        approvals,
        previous,
        devices: &devices,
    });
    mqtt.perform(actions).await;
    loop {
        let event = tokio::select! {
            () = stop.cancelled() => {
                // What is already on the streams goes out before the
                // goodbye: the statuses of the calls that shutdown let finish.
                while let Some(Some(event)) =
                    tokio::task::unconstrained(events.next()).now_or_never()
                {
                    publish_event(&mqtt, &event).await;
                }
                return;
            }
            event = events.next() => match event { Some(e) => e, None => return },
        };
        publish_event(&mqtt, &event).await;
    }
}

/// Publish what one event of the centre says.
async fn publish_event(mqtt: &Mqtt, event: &Event) {
    let actions = match event {
        // Every device's availability again: some change was missed.
        Event::Lagged {
            stream: Stream::Devices,
            ..
        } => mqtt.step(Input::Devices(&mqtt.devices())),
        event => {
            let info = Router::wants_info(event)
                .and_then(|device| mqtt.hub.registry().get(device.as_str()))
                .map(|handle| handle.info());
            mqtt.step(Input::Event { event, info })
        }
    };
    mqtt.perform(actions).await;
}

/// How often the health report is read for `<prefix>/health`: a change
/// goes out within this, and nothing goes out while nothing changes (the
/// report's parts are bounded, and the model's probe is cached, so a
/// reading costs the adb server two answers from memory).
const HEALTH_EVERY: Duration = Duration::from_secs(15);

/// Publish the daemon's health, retained, when it changes, until `stop`.
pub async fn run_health(
    mqtt: Arc<Mqtt>,
    health: Arc<crate::health::Health>,
    stop: CancellationToken,
) {
    let approvals = mqtt.approvals();
    loop {
        let report = tokio::select! {
            () = stop.cancelled() => return,
            report = health.report(&approvals, &mqtt.automations) => report,
        };
        let actions = mqtt.step(Input::Health(&report));
        mqtt.perform(actions).await;
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(HEALTH_EVERY) => {}
        }
    }
}

/// Publish the companion hub's requests until `stop`.
pub async fn run_companion_requests(
    mqtt: Arc<Mqtt>,
    mut requests: mpsc::Receiver<Outgoing>,
    stop: CancellationToken,
) {
    loop {
        let request = tokio::select! {
            () = stop.cancelled() => return,
            r = requests.recv() => match r { Some(r) => r, None => return },
        };
        let actions = mqtt.step(Input::CompanionRequest {
            companion_id: &request.companion_id,
            payload: request.payload,
        });
        mqtt.perform(actions).await;
    }
}

/// The reply to an agent run once it ends; `None` when the daemon's
/// shutdown interrupted it (it resumes at the next start and replies then).
/// The origin of an agent run a request with this id starts: its reply
/// goes to the request's reply topic.
fn origin(id: Option<&str>) -> Option<Origin> {
    id.map(|id| Origin::Mqtt(id.to_owned()))
}

async fn run_reply(
    id: Option<&str>,
    started: Result<assistant::Started, WireError>,
) -> Option<Answered> {
    Some(match started {
        // Refused before the run started (`busy` beyond the agent's limits
        // is not final).
        Err(error) => Answered {
            reply: api::error_reply(id, &error),
            is_final: dedupe::is_final(&error, false),
        },
        Ok(started) => match started.done.await {
            Ok(Ok(answer)) => Answered::kept(api::ok_reply(id, &answer.to_json())),
            Ok(Err(error)) => Answered::kept(api::error_reply(id, &error)),
            Err(_) => return None,
        },
    })
}

/// A request's reply, and whether it is final for the request's id
/// ([`dedupe::is_final`]): recorded and replayed to repeats, or forgotten
/// so the same id may run later.
struct Answered {
    reply: Value,
    is_final: bool,
}

impl Answered {
    /// A reply that is final for its id.
    fn kept(reply: Value) -> Self {
        Self {
            reply,
            is_final: true,
        }
    }
}

impl Mqtt {
    /// The agent, or the error of a daemon without one.
    fn assistant(&self) -> Result<&Assistant, WireError> {
        self.assistant.as_ref().ok_or_else(assistant::disabled)
    }

    /// Becomes true when the broker first acknowledges our subscriptions
    /// (start-up readiness: commands can reach us).
    pub fn subscribed(&self) -> watch::Receiver<bool> {
        self.subscribed.subscribe()
    }

    /// One step of the router (a short lock, no await).
    fn step(&self, input: Input<'_>) -> Vec<Action> {
        self.router
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .step(input)
    }

    fn devices(&self) -> Vec<droidwarden_bridge::DeviceInfo> {
        self.hub.registry().list()
    }

    /// The one place the MQTT side hands a call to the hub: admitted now,
    /// in arrival order, run later.
    fn admit(&self, call: Call) -> Result<Admitted, WireError> {
        self.hub.admit_call(call)
    }

    /// The same for a `cmd/call` request, checked against the catalogue
    /// first.
    fn admit_request(&self, request: &CallRequest) -> Result<Admitted, WireError> {
        self.hub.admit(request)
    }

    /// Perform actions that need no incoming message, in order, waiting on
    /// each publish.
    async fn perform(&self, actions: Vec<Action>) {
        for action in actions {
            match action {
                Action::Subscribe(subscriptions) => {
                    let filters = subscriptions.into_iter().map(|s| {
                        let mut filter = Filter::new(s.filter, QoS::AtLeastOnce);
                        filter.nolocal = true;
                        filter.retain_forward_rule = s.retained;
                        filter
                    });
                    if let Err(e) = self.client.subscribe_many(filters).await {
                        tracing::warn!(error = %e, "subscribe failed");
                    }
                }
                Action::Ready => {
                    self.ready.send_replace(true);
                }
                Action::Publish(outbound) => self.publish(outbound).await,
                Action::SaveDiscovered(discovered) => self.save_discovered(discovered).await,
                Action::Ack
                | Action::Run(_)
                | Action::HaCall { .. }
                | Action::Companion(_)
                | Action::AutomationTrigger { .. }
                | Action::AutomationControl { .. } => {
                    tracing::error!(?action, "an action for an incoming message without one");
                }
            }
        }
    }

    /// Perform the actions of routing `publish`, from the dispatcher, which
    /// never waits: publishes go out from tasks on the call tracker.
    fn perform_routed(self: &Arc<Self>, actions: Vec<Action>, publish: &Publish) {
        for action in actions {
            match action {
                Action::Ack => self.ack_now(publish),
                Action::Publish(outbound) => {
                    let mqtt = Arc::clone(self);
                    self.calls
                        .spawn(async move { mqtt.publish(outbound).await });
                }
                Action::Run(job) => self.run_job(job, publish),
                Action::HaCall {
                    device,
                    object,
                    call,
                } => match self.admit(call) {
                    Ok(admitted) => {
                        self.calls.spawn(async move {
                            if let Err(e) = admitted.run().await {
                                tracing::warn!(device, object, error = %e, "Home Assistant command failed");
                            }
                        });
                    }
                    Err(error) => {
                        tracing::warn!(device, object, message = %error.message, "rejected a Home Assistant command");
                        let refused = self.step(Input::Refused {
                            to: ReplyTo::default(),
                            error,
                        });
                        self.perform_routed(refused, publish);
                    }
                },
                Action::Companion(message) => self.companion_message(message),
                Action::AutomationTrigger { topic } => self.automations.mqtt_trigger(topic),
                Action::AutomationControl {
                    name,
                    control,
                    payload,
                } => {
                    let op = match (control.as_str(), payload.as_str()) {
                        ("set", "ON") => Some(crate::automations::Op::Enable(name.clone())),
                        ("set", "OFF") => Some(crate::automations::Op::Disable(name.clone())),
                        ("run", "PRESS") => Some(crate::automations::Op::Run(name.clone())),
                        _ => None,
                    };
                    match op {
                        Some(op) => {
                            let automations = self.automations.clone();
                            self.calls.spawn(async move {
                                if let Err(e) = automations.request(op).await {
                                    tracing::warn!(automation = name, control, error = %e.message, "Home Assistant automation control refused");
                                }
                            });
                        }
                        None => {
                            tracing::warn!(
                                automation = name,
                                control,
                                "an automation control expects ON/OFF on set and PRESS on run"
                            );
                        }
                    }
                }
                Action::Subscribe(_) | Action::Ready | Action::SaveDiscovered(_) => {
                    tracing::error!(?action, "an action out of place for an incoming message");
                }
            }
        }
    }

    /// Admit a job's call (in arrival order, before anything is spawned; a
    /// call that fails validation takes no place) and spawn its handler. A
    /// refused call that owns its id goes to its handler too, which asks
    /// the store before it answers: a repeat of an id that already ran gets
    /// that run's reply, not this refusal.
    ///
    /// A command with an id delivered with QoS 1 whose phone's queue is
    /// full is held back instead of refused ([`Held`]), within the hold
    /// budget; beyond it, `busy`.
    fn run_job(self: &Arc<Self>, job: Job, publish: &Publish) {
        let admitted = match &job.request {
            Request::Call { call, .. } => match self.admit_or_hold(call, &job, publish) {
                None => return,
                Some(Ok(admitted)) => Some(Ok(admitted)),
                Some(Err(error)) if job.owns_id => {
                    tracing::debug!(id = job.to.id, error = %error, "call refused");
                    Some(Err(error))
                }
                Some(Err(error)) => {
                    tracing::debug!(id = job.to.id, error = %error, "call refused");
                    let refused = self.step(Input::Refused { to: job.to, error });
                    self.perform_routed(refused, publish);
                    return;
                }
            },
            _ => None,
        };
        // A job that owns its id is acknowledged once the id is recorded
        // (in `handle`); the others were acknowledged already.
        let delivery = job.owns_id.then(|| publish.clone());
        let mqtt = Arc::clone(self);
        self.calls
            .spawn(async move { mqtt.handle(job, admitted, delivery).await });
    }

    /// Admit a call now, or hold it back: `None` when it was held (or
    /// joined a line), else the admission or the refusal to answer.
    fn admit_or_hold(
        self: &Arc<Self>,
        call: &CallRequest,
        job: &Job,
        publish: &Publish,
    ) -> Option<Result<Admitted, WireError>> {
        // Only a command the broker keeps until we acknowledge it can wait
        // there: one with an id (acknowledged once recorded) and QoS 1.
        let holdable = job.owns_id && publish.qos == QoS::AtLeastOnce && publish.pkid != 0;
        if !holdable {
            return Some(self.admit_request(call));
        }
        let mut held = lock(&self.held);
        // Behind the commands already held for its phone, never before.
        let line = self
            .hub
            .device_name(call.device.as_deref())
            .filter(|device| held.lines.contains_key(device));
        let (device, busy) = match line {
            Some(device) => {
                let busy = held.lines[&device]
                    .front()
                    .map(|first| first.busy.clone())
                    .unwrap_or_else(|| {
                        WireError::new(droidwarden_services::ErrorCode::Busy, "device is busy")
                    });
                (device, busy)
            }
            None => match self.hub.try_admit(call) {
                Ok(admitted) => return Some(Ok(admitted)),
                Err(Refusal::Full { device, error }) => (device, error),
                Err(Refusal::Refused(error)) => return Some(Err(error)),
            },
        };
        let waiting = held.lines.get(&device).map_or(0, VecDeque::len);
        if waiting >= HOLD_PER_DEVICE || held.total >= HOLD_TOTAL {
            let mut busy = busy;
            busy.message = format!(
                "{}; {waiting} more wait for it unacknowledged ({} held in all)",
                busy.message, held.total
            );
            return Some(Err(busy));
        }
        tracing::debug!(id = job.to.id, %device, waiting, "queue full: command held back");
        held.total += 1;
        let line = held.lines.entry(device.clone()).or_default();
        line.push_back(HeldJob {
            job: job.clone(),
            publish: publish.clone(),
            busy,
            since: Instant::now(),
        });
        let first = line.len() == 1;
        if let Some(id) = job.to.id.clone() {
            // A repeat of an id that already ran needs no place: answered
            // from the store at once, if it is still held by then.
            let mqtt = Arc::clone(self);
            let device = device.clone();
            self.calls
                .spawn(async move { mqtt.answer_held_repeat(device, id).await });
        }
        if first {
            let mqtt = Arc::clone(self);
            self.calls
                .spawn(async move { mqtt.drain_held(device).await });
        }
        None
    }

    /// If the held command `id` has a recorded answer, take it out of its
    /// line and answer it from the store (and acknowledge it).
    async fn answer_held_repeat(
        self: Arc<Self>,
        device: droidwarden_services::DeviceName,
        id: String,
    ) {
        let error_reply = |error: &WireError| api::error_reply(Some(&id), error).to_string();
        let Some(reply) = self.dedupe.recorded(&id, error_reply).await else {
            return;
        };
        let taken = {
            let mut held = lock(&self.held);
            let taken = held.lines.get_mut(&device).and_then(|line| {
                let at = line
                    .iter()
                    .position(|h| h.job.to.id.as_deref() == Some(id.as_str()))?;
                line.remove(at)
            });
            if taken.is_some() {
                held.total = held.total.saturating_sub(1);
            }
            taken
        };
        // Already admitted: its handler answers it from the store too.
        let Some(HeldJob { job, publish, .. }) = taken else {
            return;
        };
        tracing::info!(id, "repeated command id: sending the recorded reply again");
        self.ack(&publish).await;
        let finish = Finish {
            mqtt: Arc::clone(&self),
            id: Some(id),
        };
        finish.done(Some(reply.clone())).await;
        self.reply(&job.to, reply.as_bytes().to_vec()).await;
    }

    /// Admit `device`'s held commands in order as its queue drains; one
    /// that waited longer than the phone's call bound is answered `busy`.
    /// Ends when the line is empty, or when the daemon stops taking
    /// commands (what is still held stays unacknowledged, for the broker
    /// to deliver to the next process).
    async fn drain_held(self: Arc<Self>, device: droidwarden_services::DeviceName) {
        let mut moved = self.hub.queue_moved(&device);
        let limit = self
            .hub
            .call_bound_of(&device)
            .unwrap_or(Duration::from_secs(30));
        loop {
            let wake = {
                let mut held = lock(&self.held);
                loop {
                    let Some(head) = held.lines.get(&device).and_then(VecDeque::front) else {
                        held.lines.remove(&device);
                        return;
                    };
                    let Request::Call { call, .. } = &head.job.request else {
                        // Only calls are held.
                        break None;
                    };
                    let expired = head.since.elapsed() >= limit;
                    let admitted = match self.hub.try_admit(call) {
                        Ok(admitted) => Ok(admitted),
                        Err(Refusal::Full { .. }) if !expired => break Some(head.since + limit),
                        Err(Refusal::Full { mut error, .. }) => {
                            error.message = format!(
                                "{}; it waited {} s for a place, unacknowledged",
                                error.message,
                                limit.as_secs()
                            );
                            Err(error)
                        }
                        Err(Refusal::Refused(error)) => Err(error),
                    };
                    let Some(HeldJob { job, publish, .. }) =
                        held.lines.get_mut(&device).and_then(VecDeque::pop_front)
                    else {
                        break None;
                    };
                    held.total = held.total.saturating_sub(1);
                    let mqtt = Arc::clone(&self);
                    self.calls.spawn(async move {
                        mqtt.handle(job, Some(admitted), Some(publish)).await;
                    });
                }
            };
            let Some(wake) = wake else {
                lock(&self.held).lines.remove(&device);
                return;
            };
            tokio::select! {
                () = self.stopping.cancelled() => return,
                changed = moved.changed() => if changed.is_err() { return },
                () = tokio::time::sleep_until(wake.into()) => {}
            }
        }
    }

    /// Acknowledge a QoS 1 delivery (acknowledgements are manual).
    async fn ack(&self, publish: &Publish) {
        if let Err(e) = self.client.ack(publish).await {
            tracing::warn!(error = %e, "acknowledgement failed");
        }
    }

    /// Acknowledge from the dispatcher, which never waits: at once when
    /// rumqttc's request channel has room, else from a task.
    fn ack_now(self: &Arc<Self>, publish: &Publish) {
        if self.client.try_ack(publish).is_err() {
            let mqtt = Arc::clone(self);
            let publish = publish.clone();
            self.calls.spawn(async move { mqtt.ack(&publish).await });
        }
    }

    /// Publish. Retained topics are republished after every connection
    /// anyway, so they need not wait for one; everything else does.
    async fn publish(&self, outbound: Outbound) {
        let Outbound {
            topic,
            payload,
            retain,
            qos,
            response,
        } = outbound;
        if !retain {
            let _ = self.ready.subscribe().wait_for(|ready| *ready).await;
        }
        let sent = match response {
            Some(correlation) => {
                let properties = PublishProperties {
                    correlation_data: correlation,
                    content_type: Some("application/json".into()),
                    ..PublishProperties::default()
                };
                self.client
                    .publish_with_properties(topic, qos, retain, payload, properties)
                    .await
            }
            None => self.client.publish(topic, qos, retain, payload).await,
        };
        if let Err(e) = sent {
            tracing::warn!(error = %e, "publish failed");
        }
    }

    /// Send a reply where the request asked for it.
    async fn reply(&self, to: &ReplyTo, payload: Vec<u8>) {
        let action = self
            .router
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .reply(to, payload);
        self.perform(vec![action]).await;
    }

    /// Hand a companion phone's message to the companion transport; an
    /// event it pushed goes on the hub's bus (and a state it tells, too).
    /// The transport ignores (and logs) anything malformed.
    fn companion_message(&self, message: CompanionMessage) {
        match message {
            CompanionMessage::Presence { id, online } => self.companion.on_presence(&id, online),
            CompanionMessage::Response { id, payload } => {
                let disposition = self.companion.on_response(&id, &payload);
                tracing::debug!(companion = id, ?disposition, "companion response");
            }
            CompanionMessage::Event { id, kind, payload } => {
                if let Some(event) = self.companion.on_event(&id, &kind, &payload) {
                    let kind = event.kind;
                    if let Some(service) = kind.service() {
                        self.hub
                            .announce_state(event.device.clone(), service, event.data.clone());
                    }
                    self.hub
                        .announce_event(event.device, kind.as_str(), event.data);
                }
            }
        }
    }

    /// Run a command and reply. `delivery`, when given, is acknowledged
    /// once the command's id is recorded (or known). `admitted` is a call's
    /// admission: its place in the device's order, or why it was refused.
    async fn handle(
        self: Arc<Self>,
        job: Job,
        admitted: Option<Result<Admitted, WireError>>,
        delivery: Option<Publish>,
    ) {
        let Job {
            request,
            to,
            owns_id,
        } = job;
        let key = match (&to.id, owns_id) {
            (Some(id), true) => id.clone(),
            _ => {
                let approval = matches!(request, Request::Approve { .. });
                let admitted = admitted.and_then(Result::ok);
                let reply = self
                    .execute(to.id.as_deref(), request, admitted)
                    .await
                    .map(|answered| answered.reply);
                // An approval needs no reply unless it asked for one or was
                // refused.
                let reply = reply.filter(|reply| {
                    !approval || to.id.is_some() || to.response.is_some() || reply["ok"] == false
                });
                if let Some(reply) = reply {
                    self.reply(&to, reply.to_string().into_bytes()).await;
                }
                return;
            }
        };
        // Repeats waiting in the router get this one's reply, or are told
        // it did not complete, however this ends.
        let finish = Finish {
            mqtt: Arc::clone(&self),
            id: Some(key.clone()),
        };
        let error_reply = |error: &WireError| api::error_reply(Some(&key), error).to_string();
        let admitted = match admitted {
            Some(Err(error)) => {
                // Refused before it ran; the store is asked first.
                let reply = self.dedupe.refused(&key, &error, error_reply).await;
                if let Some(publish) = &delivery {
                    self.ack(publish).await;
                }
                finish.done(Some(reply.clone())).await;
                self.reply(&to, reply.as_bytes().to_vec()).await;
                return;
            }
            Some(Ok(admitted)) => Some(admitted),
            None => None,
        };
        // A call (or a device list) is admitted to wait for its turn and
        // marked started when it goes to the phone; anything else takes
        // effect as soon as it runs.
        let started = !matches!(request, Request::Call { .. } | Request::Devices { .. });
        let decision = self.dedupe.check(&key, started, error_reply).await;
        // Recorded (or known): a redelivery is answered from the store.
        if let Some(publish) = &delivery {
            self.ack(publish).await;
        }
        let reply: Option<Reply> = match decision {
            Decision::Answer(reply) => {
                // Not run: its place in the device's order is given up.
                drop(admitted);
                Some(reply)
            }
            Decision::Run => match self.execute(Some(&key), request, admitted).await {
                Some(answered) => {
                    let reply: Reply = answered.reply.to_string().into();
                    // Settled before the router forgets the id, so a later
                    // repeat finds it in the store (or runs, when it is
                    // forgotten).
                    self.dedupe.settle(&key, &reply, answered.is_final).await;
                    Some(reply)
                }
                None => None,
            },
        };
        finish.done(reply.clone()).await;
        if let Some(reply) = reply {
            self.reply(&to, reply.as_bytes().to_vec()).await;
        }
    }

    /// Run a request; `None` when there is no reply to send now (an agent
    /// run that the daemon's shutdown interrupted: it resumes at the next
    /// start and replies then). A call comes admitted (its place in the
    /// device's order taken by the dispatcher); with an `id`, it runs for
    /// that id ([`Admitted::for_id`]).
    async fn execute(
        &self,
        id: Option<&str>,
        request: Request,
        admitted: Option<Admitted>,
    ) -> Option<Answered> {
        Some(match request {
            Request::Devices { .. } => Answered::kept(api::ok_reply(
                id,
                &json!({ "devices": self.hub.registry().list() }),
            )),
            Request::Call { call, .. } => {
                let admitted = match admitted {
                    Some(admitted) => Ok(admitted),
                    None => self.admit_request(&call),
                };
                let ran = match admitted {
                    Ok(admitted) => {
                        let admitted = match id {
                            Some(id) => admitted.for_id(id),
                            None => admitted,
                        };
                        admitted.run_reporting().await
                    }
                    Err(error) => Ran {
                        result: Err(error),
                        reached: false,
                    },
                };
                match ran.result {
                    Ok(result) => Answered::kept(api::ok_reply(id, &result)),
                    Err(error) => Answered {
                        reply: api::error_reply(id, &error),
                        is_final: dedupe::is_final(&error, ran.reached),
                    },
                }
            }
            Request::Ask {
                prompt,
                session,
                mode,
                login,
                ..
            } => {
                let started = async {
                    let assistant = self.assistant()?;
                    let account = mqtt_account(login.as_deref());
                    assistant
                        .ask(&prompt, session, origin(id), mode, account)
                        .await
                };
                return run_reply(id, started.await).await;
            }
            Request::Skill {
                skill,
                input,
                session,
                login,
                ..
            } => {
                let started = async {
                    let assistant = self.assistant()?;
                    let account = mqtt_account(login.as_deref());
                    assistant
                        .run_skill(&skill, input, session, origin(id), account)
                        .await
                };
                return run_reply(id, started.await).await;
            }
            Request::Approve {
                approval_id,
                decision,
                by,
                login,
                ..
            } => {
                let account = mqtt_account(login.as_deref());
                let by = mqtt_decider(login.as_deref(), by.as_deref());
                let answered = answer_approval(self, id, &approval_id, decision, by, account).await;
                Answered::kept(answered)
            }
            Request::RevokeGrant {
                grant_id,
                by,
                login,
                ..
            } => {
                let by = mqtt_decider(login.as_deref(), by.as_deref());
                Answered::kept(revoke_grant(self, id, &grant_id, by).await)
            }
            Request::Automation { op, .. } => match self.automations.request(op).await {
                Ok(answer) => Answered::kept(api::ok_reply(id, &answer)),
                Err(error) => Answered {
                    reply: api::error_reply(id, &error),
                    is_final: dedupe::is_final(&error, false),
                },
            },
        })
    }

    /// Every approval request (the agent's and the automations').
    fn approvals(&self) -> Approvals {
        Approvals::new(self.assistant.clone(), self.automations.clone())
    }

    /// Approval requests still open from before a restart, for their
    /// retained topics (an embedded broker starts empty).
    async fn pending_approvals(&self) -> Vec<(String, Value)> {
        match self.approvals().pending().await {
            Ok(pending) => pending
                .into_iter()
                .map(|approval| (approval.approval_id.clone(), json!(approval)))
                .collect(),
            Err(e) => {
                tracing::warn!(error = %e.message, "cannot list pending approvals");
                Vec::new()
            }
        }
    }

    /// What an earlier run announced to Home Assistant, and the devices
    /// removed since (those removed longer ago than [`REMEMBER_REMOVED`]
    /// are forgotten).
    async fn load_discovered(&self) -> Discovered {
        let file = tokio::fs::read(&self.discovery_file)
            .await
            .ok()
            .map(|bytes| DiscoveryFile::parse(&bytes))
            .unwrap_or_default();
        let mut removed = lock(&self.removed_since);
        *removed = file.removed;
        removed.retain(|_, at| now_ms().saturating_sub(*at) < REMEMBER_REMOVED_MS);
        Discovered {
            announced: file.announced,
            removed: removed.keys().cloned().collect(),
        }
    }

    async fn save_discovered(&self, discovered: Discovered) {
        let removed = {
            let mut since = lock(&self.removed_since);
            let now = now_ms();
            let kept: BTreeMap<String, i64> = discovered
                .removed
                .into_iter()
                .map(|d| {
                    let at = since.get(&d).copied().unwrap_or(now);
                    (d, at)
                })
                .filter(|(_, at)| now.saturating_sub(*at) < REMEMBER_REMOVED_MS)
                .collect();
            since.clone_from(&kept);
            kept
        };
        let record = DiscoveryFile {
            announced: discovered.announced,
            removed,
        };
        let file = self.discovery_file.clone();
        let write = async move {
            if let Some(dir) = file.parent() {
                tokio::fs::create_dir_all(dir).await?;
            }
            let bytes = serde_json::to_vec(&record).unwrap_or_default();
            tokio::task::spawn_blocking(move || crate::private::write_file(&file, &bytes))
                .await
                .map_err(std::io::Error::other)?
        };
        if let Err(e) = write.await {
            tracing::warn!(file = %self.discovery_file.display(), error = %e, "cannot record discovered devices");
        }
    }

    /// Stop taking commands and let calls in flight finish (bounded by
    /// `grace`); their replies are queued for the broker when this returns.
    ///
    /// The command subscriptions are kept: with a persistent session the
    /// broker queues the commands published while the daemon is stopped,
    /// and the dispatcher leaves those arriving during the shutdown
    /// unacknowledged, for the next process.
    pub async fn finish_calls(&self, grace: Duration) {
        self.stopping.cancel();
        self.calls.close();
        if tokio::time::timeout(grace, self.calls.wait())
            .await
            .is_err()
        {
            tracing::warn!("calls still running after {grace:?}; stopping anyway");
        }
    }

    /// Say goodbye: `offline` on the availability topic and a clean
    /// disconnect (which suppresses the will). Call it after
    /// [`Mqtt::finish_calls`] and once [`run_publisher`] has drained, so the
    /// last calls' statuses go out before it.
    pub async fn goodbye(&self) {
        let actions = self.step(Input::Goodbye);
        self.perform(actions).await;
        let _ = self.client.disconnect().await;
    }
}

/// A job's hold on its id in the router: [`Finish::done`] hands the reply
/// to the repeats waiting there; dropped without it (a handler that
/// panicked), they are told the first request did not complete.
struct Finish {
    mqtt: Arc<Mqtt>,
    id: Option<String>,
}

impl Finish {
    async fn done(mut self, reply: Option<Reply>) {
        if let Some(id) = self.id.take() {
            let actions = self.mqtt.step(Input::Finished { id, reply });
            self.mqtt.perform(actions).await;
        }
    }
}

impl Drop for Finish {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            let actions = self.mqtt.step(Input::Finished { id, reply: None });
            if !actions.is_empty() {
                let mqtt = Arc::clone(&self.mqtt);
                self.mqtt
                    .calls
                    .spawn(async move { mqtt.perform(actions).await });
            }
        }
    }
}

/// Who is recorded as having answered an approval over MQTT when nothing
/// more is known: the way in.
const MQTT_DECIDER: &str = "MQTT";

/// The account a login the daemon's own broker vouches for is
/// (`MQTT user "ha"`): it asks runs and answers approvals under this name,
/// and may not approve a run it asked for. `None` without a login (an
/// external broker, whose ACL alone decides who may publish what).
fn mqtt_account(login: Option<&str>) -> Option<String> {
    login.map(|user| format!("{MQTT_DECIDER} user {user:?}"))
}

/// Who answered over MQTT: the account ([`mqtt_account`]), else only the
/// way in; then the name the sender gave in `by` (its own word, quoted as
/// given: e.g. Home Assistant's user).
fn mqtt_decider(login: Option<&str>, by: Option<&str>) -> String {
    let way_in = mqtt_account(login).unwrap_or_else(|| MQTT_DECIDER.to_owned());
    match by {
        Some(name) => format!("{way_in}, as {name:?}"),
        None => way_in,
    }
}

async fn answer_approval(
    mqtt: &Mqtt,
    id: Option<&str>,
    approval_id: &str,
    decision: approvals::Decision,
    by: String,
    account: Option<String>,
) -> Value {
    let name = decision.name();
    let answered = mqtt
        .approvals()
        .answer_as(approval_id, decision, &by, account.as_deref())
        .await;
    match answered {
        Ok(()) => api::ok_reply(id, &json!({"approval_id": approval_id, "decision": name})),
        Err(error) => {
            tracing::warn!(approval = approval_id, error = %error.message, "approval answer refused");
            api::error_reply(id, &error)
        }
    }
}

async fn revoke_grant(mqtt: &Mqtt, id: Option<&str>, grant_id: &str, by: String) -> Value {
    match mqtt.approvals().revoke(grant_id, &by).await {
        Ok(grant) => api::ok_reply(id, &json!({"grant_id": grant.grant_id, "revoked": true})),
        Err(error) => api::error_reply(id, &error),
    }
}
