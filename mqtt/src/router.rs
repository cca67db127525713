//! The MQTT router: everything the MQTT side decides, as a state machine
//! with no I/O and no awaiting (the split rumqttc uses between its
//! `MqttState` and its `EventLoop`). The driver (`lib.rs`) feeds it an
//! [`Input`] — a connection came up, a message arrived, an event happened,
//! a command finished — and performs the [`Action`]s it returns: publish,
//! acknowledge, run a command, hand a message to the companion transport,
//! save the discovery set.
//!
//! The router owns:
//! - the topic table ([`RULES`]): which filters are subscribed (and with
//!   which retain handling), which topics carry commands, and how each
//!   topic is routed. Subscriptions, the "is this a command" check (retained
//!   commands refused, commands left for the next process at shutdown) and
//!   dispatch all come from that one table;
//! - the retained cache: every retained topic we own and its payload,
//!   republished after every (re)connection, and the "unchanged state"
//!   check;
//! - the discovery set (devices whose Home Assistant configs were
//!   published) and each phone's volume steps;
//! - the in-memory half of dedupe: the command ids running in this process
//!   and the repeats waiting for their first reply (the durable half, the
//!   delivery store, is asked by the driver);
//! - reply routing: MQTT 5 response topics only under
//!   `<prefix>/responses/`, else `reply/<id>`, else the errors topic.
//!
//! It does not admit calls, run them, talk to the store, the companion hub
//! or the agent: those are the driver's, which reports back what came of
//! them ([`Input::Refused`], [`Input::Finished`]).

use super::api::{self, Kind, Request};
use super::discovery;
use super::topics::Topics;
use crate::assistant::{Notice, Origin};
use crate::automations::{AutomationEvent, Listing};
use crate::delivery::Interrupted;
use crate::events::Event;
use crate::hub::{BusEvent, Call, CallRequest, CallState};
use bytes::Bytes;
use droidwarden_bridge::companion::presence_from_payload;
use droidwarden_bridge::{DeviceEvent, DeviceInfo};
use droidwarden_services::{DeviceName, ErrorCode, WireError};
use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::mqttbytes::v5::RetainForwardRule;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, SystemTime};

/// A reply as sent (serialized JSON), shared between the first request and
/// its repeats.
pub(crate) type Reply = std::sync::Arc<str>;

/// What the router needs to know of the configuration.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// The topic prefix.
    pub(crate) prefix: String,
    /// Home Assistant's discovery prefix, when discovery is on.
    pub(crate) discovery: Option<String>,
    /// Largest command payload accepted.
    pub(crate) max_payload: usize,
    /// The topics automations are triggered by (`kind = "mqtt"`):
    /// subscribed after every connection, without retained messages.
    pub(crate) automation_topics: BTreeSet<String>,
}

/// What `ha-discovery.json` keeps of Home Assistant discovery across
/// restarts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Discovered {
    /// Devices whose configs are published.
    pub(crate) announced: Vec<String>,
    /// Devices removed since, cleared again whenever Home Assistant comes
    /// online (forgotten after a while by the file's keeper).
    pub(crate) removed: Vec<String>,
}

/// A topic, parsed by the rule that matched it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route<'a> {
    /// `<prefix>/cmd/<name>`.
    Command { name: &'a str },
    /// `<prefix>/devices/<device>/ha/<object>/set`.
    HaCommand { device: &'a str, object: &'a str },
    /// `<prefix>/companion/<id>/<rest>`.
    Companion { id: &'a str, rest: &'a str },
    /// `<discovery prefix>/status`: Home Assistant's birth (`online`) or
    /// will (`offline`).
    HaStatus,
    /// `<prefix>/automations/<name>/set` or `…/run` (Home Assistant's
    /// switch and button).
    AutomationControl { name: &'a str, control: &'a str },
}

/// One kind of topic we subscribe to.
#[derive(Debug)]
pub(crate) struct Rule {
    /// The filter subscribed after every connection (`None`: not in this
    /// configuration).
    pub(crate) filter: fn(&Topics) -> Option<String>,
    /// Whether the broker sends retained messages on subscribing.
    pub(crate) retained: RetainForwardRule,
    /// A command: a retained one is refused, and during shutdown one is
    /// left unacknowledged for the next process.
    pub(crate) command: bool,
    /// The topic's route, when it is of this kind.
    pub(crate) route: for<'a> fn(&Topics, &'a str) -> Option<Route<'a>>,
}

/// Every topic kind the daemon subscribes to. A new kind is a row here, a
/// [`Route`] variant, and its arm in [`Router::inbound`].
pub(crate) const RULES: &[Rule] = &[
    // Retain Handling 2 on command filters: a retained command is never
    // sent to us (it would run again at every start).
    Rule {
        filter: |t| Some(t.commands_filter()),
        retained: RetainForwardRule::Never,
        command: true,
        route: |t, topic| t.command_name(topic).map(|name| Route::Command { name }),
    },
    Rule {
        filter: |t| Some(t.ha_commands_filter()),
        retained: RetainForwardRule::Never,
        command: true,
        route: |t, topic| {
            t.parse_ha_command(topic)
                .map(|(device, object)| Route::HaCommand { device, object })
        },
    },
    Rule {
        filter: |t| Some(t.automation_controls_filter()),
        retained: RetainForwardRule::Never,
        command: true,
        route: |t, topic| {
            t.parse_automation_control(topic)
                .map(|(name, control)| Route::AutomationControl { name, control })
        },
    },
    // Companion topics keep retained delivery: a phone's presence is
    // retained.
    Rule {
        filter: |t| Some(t.companion_filter()),
        retained: RetainForwardRule::OnEverySubscribe,
        command: false,
        route: |t, topic| {
            t.parse_companion(topic)
                .map(|(id, rest)| Route::Companion { id, rest })
        },
    },
    // Home Assistant's birth message: removed devices are cleared again
    // for a Home Assistant that was away when they were removed. A
    // retained birth (some set-ups keep it) is taken like a live one.
    Rule {
        filter: Topics::ha_status,
        retained: RetainForwardRule::OnEverySubscribe,
        command: false,
        route: |t, topic| t.is_ha_status(topic).then_some(Route::HaStatus),
    },
];

/// A subscription: a filter and its retain handling. Every filter is QoS 1
/// and No-Local (our own requests to phones need not come back to us).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Subscription {
    pub(crate) filter: String,
    pub(crate) retained: RetainForwardRule,
}

/// An incoming publish, as the router sees it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Inbound {
    pub(crate) topic: String,
    pub(crate) payload: Bytes,
    pub(crate) retain: bool,
    /// The MQTT 5 response topic, when the request named one.
    pub(crate) response_topic: Option<String>,
    /// The MQTT 5 correlation data.
    pub(crate) correlation: Option<Bytes>,
    /// The login it was published with, as the daemon's own embedded
    /// broker vouches for it (`droidwarden_broker::PUBLISHER_PROPERTY`);
    /// `None` when the broker is another one, which the daemon cannot
    /// trust to say.
    pub(crate) publisher: Option<String>,
}

/// Something to publish.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Outbound {
    pub(crate) topic: String,
    pub(crate) payload: Vec<u8>,
    pub(crate) retain: bool,
    pub(crate) qos: QoS,
    /// An MQTT 5 reply: sent with this correlation data and a JSON content
    /// type.
    pub(crate) response: Option<Option<Bytes>>,
}

/// An MQTT 5 response topic and correlation data.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ResponseTo {
    pub(crate) topic: String,
    pub(crate) correlation: Option<Bytes>,
}

/// Where a command's reply goes.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ReplyTo {
    /// The command's id: `reply/<id>`.
    pub(crate) id: Option<String>,
    /// Its MQTT 5 response topic, which takes precedence.
    pub(crate) response: Option<ResponseTo>,
}

/// A command to run, handed to the driver.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Job {
    pub(crate) request: Request,
    pub(crate) to: ReplyTo,
    /// The job owns its id in this process (it was not running here): the
    /// driver asks the delivery store, acknowledges the delivery once the
    /// id is recorded, and reports [`Input::Finished`]. Otherwise the
    /// delivery was acknowledged already.
    pub(crate) owns_id: bool,
}

/// A companion phone's message, for the companion transport.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum CompanionMessage {
    /// It came online or went away.
    Presence { id: String, online: bool },
    /// A response to one of our requests.
    Response { id: String, payload: Bytes },
    /// Something it pushed.
    Event {
        id: String,
        kind: String,
        payload: Bytes,
    },
}

/// What the driver does, in order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Action {
    /// Subscribe to these filters.
    Subscribe(Vec<Subscription>),
    /// The subscriptions of this connection are requested: publishes that
    /// are not retained may go from now on.
    Ready,
    /// Publish.
    Publish(Outbound),
    /// Acknowledge the delivery being routed.
    Ack,
    /// Run a command: admit its call, if it is one, and spawn its handler.
    Run(Job),
    /// Admit and run a Home Assistant control's call (no reply: its effect
    /// is on the status and state topics).
    HaCall {
        device: String,
        object: String,
        call: Call,
    },
    /// Hand a companion phone's message to the companion transport.
    Companion(CompanionMessage),
    /// Record the devices whose discovery configs are published, and
    /// those removed whose configs are cleared again when Home Assistant
    /// comes online.
    SaveDiscovered(Discovered),
    /// A message on an automation's trigger topic.
    AutomationTrigger { topic: String },
    /// Home Assistant's switch (`set`: `ON`/`OFF`) or button (`run`:
    /// `PRESS`) of an automation.
    AutomationControl {
        name: String,
        control: String,
        payload: String,
    },
}

/// What happened, for the router to decide on.
#[derive(Debug)]
pub(crate) enum Input<'a> {
    /// The connection came up (the first time or again).
    Connected,
    /// The connection was lost.
    Disconnected,
    /// A message arrived.
    Inbound(&'a Inbound),
    /// An event of the centre. `info` is the device's, when
    /// [`Router::wants_info`] asked for it.
    Event {
        event: &'a Event,
        info: Option<DeviceInfo>,
    },
    /// Every device as it is now (at start after the steps of
    /// [`Input::Start`], and after missed device events).
    Devices(&'a [DeviceInfo]),
    /// Start-up: the approvals still open (id, body), what an earlier run
    /// announced to Home Assistant (and removed), and every device now.
    Start {
        approvals: Vec<(String, Value)>,
        previous: Discovered,
        devices: &'a [DeviceInfo],
    },
    /// A job that does not own an id, or a Home Assistant call, that the
    /// driver could not admit. (A job that owns its id ends with
    /// [`Input::Finished`] whatever happens: its handler asks the delivery
    /// store before it answers a refusal.)
    Refused { to: ReplyTo, error: WireError },
    /// A job that owned `id` is done: its reply (also recorded in the
    /// store), or `None` when it ended without one.
    Finished { id: String, reply: Option<Reply> },
    /// The companion transport has a request for a phone.
    CompanionRequest {
        companion_id: &'a str,
        payload: Vec<u8>,
    },
    /// Shutdown has begun: commands are left for the next process.
    StopCommands,
    /// Say goodbye: the daemon's availability goes `offline`.
    Goodbye,
    /// The daemon's health report, read now.
    Health(&'a crate::health::HealthReport),
}

/// The MQTT side's state. See the module documentation.
#[derive(Debug)]
pub(crate) struct Router {
    topics: Topics,
    settings: Settings,
    /// Topic → payload of everything published retained.
    retained: BTreeMap<String, Vec<u8>>,
    /// Devices whose discovery configs were published.
    discovered: BTreeSet<String>,
    /// Devices removed from the configuration whose configs are cleared
    /// again each time Home Assistant says it is online: a Home Assistant
    /// that was not connected when they were removed (an embedded broker
    /// restarts empty, so the clearing reached nobody) keeps their entities
    /// until it sees them go.
    removed: BTreeSet<String>,
    /// Each device's number of music volume steps, once a read told it:
    /// Home Assistant's volume slider moves in those steps.
    volume_steps: BTreeMap<String, u64>,
    /// Command ids running in this process, each with the repeats waiting
    /// for its reply (where each wants it).
    in_flight: HashMap<String, Vec<Option<ResponseTo>>>,
    /// False once shutdown has begun.
    taking_commands: bool,
    /// Whether the connection is up ([`Input::Connected`] came and no
    /// [`Input::Disconnected`] since). While it is down, a retained value
    /// is only kept: the replay at the next connection sends it, once.
    connected: bool,
    /// Automations whose topics (and discovery configs) are published.
    automations_known: BTreeSet<String>,
    /// The last health report sent, without its uptime: the next goes out
    /// only when something else changed.
    health_sent: Option<String>,
}

impl Router {
    /// A router whose retained cache starts with the `error` statuses that
    /// replace the `executing` a killed process left for `interrupted`
    /// (published with the first retained topics, before any command is
    /// served).
    pub(crate) fn new(settings: Settings, interrupted: &[Interrupted], now: SystemTime) -> Self {
        let topics = Topics::new(&settings.prefix).with_discovery(settings.discovery.as_deref());
        Self {
            retained: stale_statuses(&topics, interrupted, now),
            topics,
            settings,
            discovered: BTreeSet::new(),
            removed: BTreeSet::new(),
            volume_steps: BTreeMap::new(),
            in_flight: HashMap::new(),
            taking_commands: true,
            connected: false,
            automations_known: BTreeSet::new(),
            health_sent: None,
        }
    }

    /// The topic names.
    #[cfg(test)]
    fn topics(&self) -> &Topics {
        &self.topics
    }

    /// The device whose info [`Input::Event`] needs for this event, if any.
    pub(crate) fn wants_info(event: &Event) -> Option<&DeviceName> {
        match event {
            Event::Device(DeviceEvent::Availability { device, .. }) => Some(device),
            Event::Bus(BusEvent::State(state)) if state.service == VOLUME_SERVICE => {
                Some(&state.device)
            }
            _ => None,
        }
    }

    /// Decide what `input` calls for.
    pub(crate) fn step(&mut self, input: Input<'_>) -> Vec<Action> {
        let mut out = Vec::new();
        match input {
            Input::Connected => self.connected(&mut out),
            Input::Disconnected => self.connected = false,
            Input::Inbound(inbound) => self.inbound(inbound, &mut out),
            Input::Event { event, info } => self.event(event, info, &mut out),
            Input::Devices(devices) => {
                for info in devices {
                    self.availability(info.name.as_str(), info.online, &mut out);
                }
            }
            Input::Start {
                approvals,
                previous,
                devices,
            } => self.start(approvals, previous, devices, &mut out),
            Input::Refused { to, error } => {
                // Its delivery was acknowledged when it was routed.
                let reply = api::error_reply(to.id.as_deref(), &error);
                out.push(self.reply(&to, reply.to_string().into_bytes()));
            }
            Input::Finished { id, reply } => self.finished(&id, reply, &mut out),
            Input::CompanionRequest {
                companion_id,
                payload,
            } => {
                let topic = self.topics.companion_request(companion_id);
                self.send(topic, payload, false, &mut out);
            }
            Input::Health(report) => self.health(report, &mut out),
            Input::StopCommands => self.taking_commands = false,
            Input::Goodbye => {
                self.send(
                    self.topics.availability(),
                    b"offline".to_vec(),
                    true,
                    &mut out,
                );
            }
        }
        out
    }

    /// The daemon's health, retained on `<prefix>/health` (QoS 1) when
    /// anything but its uptime changed since the last one sent; a
    /// reconnection republishes it with every retained topic.
    fn health(&mut self, report: &crate::health::HealthReport, out: &mut Vec<Action>) {
        let key = crate::health::HealthReport {
            uptime_s: 0,
            ..report.clone()
        };
        let (Ok(key), Ok(payload)) = (serde_json::to_string(&key), serde_json::to_vec(report))
        else {
            return;
        };
        if self.health_sent.as_deref() == Some(key.as_str()) {
            return;
        }
        self.health_sent = Some(key);
        self.send(self.topics.health(), payload, true, out);
    }

    /// After every (re)connection: subscribe before anything else, then say
    /// `online` and republish every retained topic (an embedded or
    /// restarted broker keeps nothing).
    fn connected(&mut self, out: &mut Vec<Action>) {
        self.connected = true;
        out.push(Action::Subscribe(
            RULES
                .iter()
                .filter_map(|rule| {
                    Some(Subscription {
                        filter: (rule.filter)(&self.topics)?,
                        retained: rule.retained.clone(),
                    })
                })
                // A retained trigger would fire at every start.
                .chain(
                    self.settings
                        .automation_topics
                        .iter()
                        .map(|t| Subscription {
                            filter: t.clone(),
                            retained: RetainForwardRule::Never,
                        }),
                )
                .collect(),
        ));
        out.push(Action::Ready);
        let availability = self.topics.availability();
        self.send(availability.clone(), b"online".to_vec(), true, out);
        for (topic, payload) in &self.retained {
            if *topic == availability {
                continue;
            }
            out.push(Action::Publish(Outbound {
                topic: topic.clone(),
                payload: payload.clone(),
                retain: true,
                qos: QoS::AtLeastOnce,
                response: None,
            }));
        }
    }

    /// Route an incoming message.
    fn inbound(&mut self, m: &Inbound, out: &mut Vec<Action>) {
        let topic = m.topic.as_str();
        let Some((rule, route)) = RULES
            .iter()
            .find_map(|rule| (rule.route)(&self.topics, topic).map(|route| (rule, route)))
        else {
            out.push(Action::Ack);
            if self.settings.automation_topics.contains(topic) && !m.retain {
                out.push(Action::AutomationTrigger {
                    topic: topic.to_owned(),
                });
            } else {
                tracing::debug!(topic, "ignoring a message on an unexpected topic");
            }
            return;
        };
        if rule.command && !self.taking_commands {
            tracing::debug!("shutting down: a command is left to the next process");
            return;
        }
        if rule.command && m.retain {
            // Retain Handling 2 keeps brokers that honour it from sending
            // these; this catches the others. A retained command would run
            // again at every start.
            tracing::info!(topic, "ignoring a retained command");
            out.push(Action::Ack);
            let error = WireError::new(
                ErrorCode::InvalidRequest,
                format!(
                    "{topic}: retained commands are ignored (one would run again at every start); publish without the retain flag, and clear this one with an empty retained message"
                ),
            );
            self.reject(ReplyTo::default(), &error, out);
            return;
        }
        match route {
            Route::Command { name } => self.command(topic, name, m, out),
            Route::AutomationControl { name, control } => {
                out.push(Action::Ack);
                out.push(Action::AutomationControl {
                    name: name.to_owned(),
                    control: control.to_owned(),
                    payload: String::from_utf8_lossy(&m.payload).trim().to_owned(),
                });
            }
            Route::HaCommand { device, object } => {
                out.push(Action::Ack);
                match ha_call(device, object, &String::from_utf8_lossy(&m.payload)) {
                    Ok(call) => out.push(Action::HaCall {
                        device: device.to_owned(),
                        object: object.to_owned(),
                        call,
                    }),
                    Err(error) => {
                        tracing::warn!(device, object, message = %error.message, "rejected a Home Assistant command");
                        self.reject(ReplyTo::default(), &error, out);
                    }
                }
            }
            Route::Companion { id, rest } => {
                out.push(Action::Ack);
                if let Some(message) = companion_message(id, rest, &m.payload) {
                    out.push(Action::Companion(message));
                }
            }
            Route::HaStatus => {
                out.push(Action::Ack);
                if m.payload.as_ref() == b"online" {
                    self.home_assistant_online(out);
                }
            }
        }
    }

    /// Home Assistant (re)connected: tell it again that the removed
    /// devices are gone. It removes an entity on an empty config only when
    /// it discovered that entity since it started, so each config goes out
    /// once more (not retained) before its clearing: a Home Assistant that
    /// restarted too then drops the entities it kept.
    fn home_assistant_online(&mut self, out: &mut Vec<Action>) {
        let Some(ha_prefix) = self.settings.discovery.clone() else {
            return;
        };
        for device in self.removed.clone() {
            let Ok(name) = droidwarden_services::DeviceName::try_from(device.as_str()) else {
                continue;
            };
            tracing::info!(
                device,
                "Home Assistant is online: clearing the entries of a removed device again"
            );
            let info = DeviceInfo {
                name,
                transport: droidwarden_bridge::TransportKind::Adb,
                online: false,
                serial: String::new(),
                model: None,
                state_detail: None,
            };
            for (topic, body) in discovery::configs(&ha_prefix, &self.topics, &info, None) {
                self.send_json(topic.clone(), &body, false, out);
                self.send(topic, Vec::new(), true, out);
            }
        }
    }

    /// A `cmd/<name>` message: parse it, settle where its reply goes, and
    /// decide whether it runs (the in-memory half of dedupe).
    fn command(&mut self, topic: &str, name: &str, m: &Inbound, out: &mut Vec<Action>) {
        let Some(kind) = Kind::from_name(name) else {
            let error = WireError::new(
                ErrorCode::InvalidRequest,
                format!("unknown command topic {name:?}; valid: {}", Kind::NAMES),
            );
            tracing::warn!(topic, "{}", error.message);
            out.push(Action::Ack);
            let to = ReplyTo {
                id: None,
                response: self.response_to(m).ok().flatten(),
            };
            self.reject(to, &error, out);
            return;
        };
        let max = self.settings.max_payload;
        let response = match self.response_to(m) {
            Ok(response) => response,
            Err(error) => {
                // Not run, and not answered on the topic it named: only the
                // id (when it can be read) tells the caller where to look.
                let id = match api::parse(kind, &m.payload, max, false) {
                    Ok(request) => request.id().map(str::to_owned),
                    Err(rejected) => rejected.id,
                };
                tracing::warn!(topic, id, "{}", error.message);
                out.push(Action::Ack);
                self.reject(ReplyTo { id, response: None }, &error, out);
                return;
            }
        };
        let request = match api::parse(kind, &m.payload, max, response.is_some()) {
            Ok(request) => request.published_by(m.publisher.as_deref()),
            Err(rejected) => {
                tracing::warn!(topic, id = rejected.id.as_deref(), error = %rejected.error.message, "rejected a command");
                out.push(Action::Ack);
                let to = ReplyTo {
                    id: rejected.id,
                    response,
                };
                self.reject(to, &rejected.error, out);
                return;
            }
        };
        let to = ReplyTo {
            id: request.id().map(str::to_owned),
            response,
        };
        // Answering an approval twice is harmless (the second is refused
        // as already answered), so approvals skip dedupe; a command without
        // an id has nothing to dedupe on.
        let id = match (&request, &to.id) {
            (Request::Approve { .. }, _) | (_, None) => {
                out.push(Action::Ack);
                out.push(Action::Run(Job {
                    request,
                    to,
                    owns_id: false,
                }));
                return;
            }
            (_, Some(id)) => id.clone(),
        };
        if let Some(waiting) = self.in_flight.get_mut(&id) {
            // Running here: not run again; it gets the first one's reply.
            tracing::info!(id, "repeated command id: sending the first reply again");
            waiting.push(to.response);
            out.push(Action::Ack);
            return;
        }
        self.in_flight.insert(id, Vec::new());
        out.push(Action::Run(Job {
            request,
            to,
            owns_id: true,
        }));
    }

    /// A job that owned `id` is done: its repeats get its reply.
    fn finished(&mut self, id: &str, reply: Option<Reply>, out: &mut Vec<Action>) {
        let Some(waiting) = self.in_flight.remove(id) else {
            return;
        };
        let payload = match reply {
            Some(reply) => reply.as_bytes().to_vec(),
            None => {
                let error = WireError::new(
                    ErrorCode::Internal,
                    "the first request with this id did not complete",
                );
                api::error_reply(Some(id), &error).to_string().into_bytes()
            }
        };
        for response in waiting {
            let to = ReplyTo {
                id: Some(id.to_owned()),
                response,
            };
            out.push(self.reply(&to, payload.clone()));
        }
    }

    /// Whether `id` runs in this process now.
    #[cfg(test)]
    fn running(&self, id: &str) -> bool {
        self.in_flight.contains_key(id)
    }

    /// The reply to send, as a publish: to the request's MQTT 5 response
    /// topic, else `reply/<id>`, else the errors topic.
    pub(crate) fn reply(&self, to: &ReplyTo, payload: Vec<u8>) -> Action {
        if let Some(response) = &to.response {
            return Action::Publish(Outbound {
                topic: response.topic.clone(),
                payload,
                retain: false,
                qos: QoS::AtLeastOnce,
                response: Some(response.correlation.clone()),
            });
        }
        let topic = match &to.id {
            Some(id) => self.topics.reply(id),
            None => self.topics.errors(),
        };
        Action::Publish(Outbound {
            topic,
            payload,
            retain: false,
            qos: QoS::AtLeastOnce,
            response: None,
        })
    }

    fn reject(&self, to: ReplyTo, error: &WireError, out: &mut Vec<Action>) {
        let reply = api::error_reply(to.id.as_deref(), error);
        out.push(self.reply(&to, reply.to_string().into_bytes()));
    }

    /// The request's MQTT 5 response topic, when it has one. Only topics
    /// under `<prefix>/responses/` are honoured: anywhere else a client
    /// could make the daemon publish on a topic it does not own (a phone's
    /// request topic, a command topic).
    ///
    /// # Errors
    /// `invalid_request` for a response topic outside that prefix.
    fn response_to(&self, m: &Inbound) -> Result<Option<ResponseTo>, WireError> {
        let Some(topic) = m.response_topic.as_ref() else {
            return Ok(None);
        };
        let allowed = self.topics.responses_prefix();
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
            correlation: m.correlation.clone(),
        }))
    }

    /// Publish with QoS 1; a retained topic is remembered for resync (an
    /// empty retained payload clears the topic and is forgotten).
    fn send(&mut self, topic: String, payload: Vec<u8>, retain: bool, out: &mut Vec<Action>) {
        self.publish(topic, payload, retain, QoS::AtLeastOnce, out);
    }

    /// Publish a retained "latest value" topic (call status, read state)
    /// with QoS 0. These change with every call, and a value lost with a
    /// dropped connection is restored by the resync after the reconnect;
    /// QoS 1 would only add two acknowledgements per message at the broker.
    fn send_latest(&mut self, topic: String, payload: Vec<u8>, out: &mut Vec<Action>) {
        self.publish(topic, payload, true, QoS::AtMostOnce, out);
    }

    fn publish(
        &mut self,
        topic: String,
        payload: Vec<u8>,
        retain: bool,
        qos: QoS,
        out: &mut Vec<Action>,
    ) {
        if retain {
            if payload.is_empty() {
                // A clearing goes out even while disconnected (queued by
                // the client): the replay cannot say what to remove.
                self.retained.remove(&topic);
            } else {
                self.retained.insert(topic.clone(), payload.clone());
                if !self.connected {
                    return;
                }
            }
        }
        out.push(Action::Publish(Outbound {
            topic,
            payload,
            retain,
            qos,
            response: None,
        }));
    }

    fn send_json(&mut self, topic: String, value: &Value, retain: bool, out: &mut Vec<Action>) {
        self.send(topic, value.to_string().into_bytes(), retain, out);
    }

    /// Start-up: open approvals (an embedded broker starts empty), clear
    /// devices an earlier run announced that are gone, then every device's
    /// availability and discovery.
    fn start(
        &mut self,
        approvals: Vec<(String, Value)>,
        previous: Discovered,
        devices: &[DeviceInfo],
        out: &mut Vec<Action>,
    ) {
        for (approval_id, body) in approvals {
            self.send_json(self.topics.approval(&approval_id), &body, true, out);
        }
        let current: BTreeSet<&str> = devices.iter().map(|d| d.name.as_str()).collect();
        for device in previous
            .announced
            .iter()
            .filter(|d| !current.contains(d.as_str()))
        {
            tracing::info!(
                device,
                "removing the Home Assistant entries of a device no longer configured"
            );
            self.clear_device(device, out);
            self.removed.insert(device.clone());
        }
        self.removed.extend(
            previous
                .removed
                .into_iter()
                .filter(|d| !current.contains(d.as_str())),
        );
        for info in devices {
            self.availability(info.name.as_str(), info.online, out);
            self.discovery(info, out);
        }
        out.push(self.save_discovered());
    }

    fn event(&mut self, event: &Event, info: Option<DeviceInfo>, out: &mut Vec<Action>) {
        match event {
            Event::Bus(BusEvent::Status(status)) => {
                let device = status.device.as_str();
                let topic = self.topics.status(device, status.service);
                self.send_latest(topic, status.to_payload(false), out);
                // The device-wide "last action" only needs outcomes.
                if status.state != CallState::Executing {
                    let topic = self.topics.last_status(device);
                    self.send_latest(topic, status.to_payload(true), out);
                }
            }
            Event::Bus(BusEvent::State(state)) => {
                let topic = self.topics.state(state.device.as_str(), state.service);
                let payload = state.state.to_string().into_bytes();
                // A read that found nothing new publishes nothing.
                if self.retained.get(&topic) != Some(&payload) {
                    self.send_latest(topic, payload, out);
                }
                if let Some(info) = info {
                    self.learn_volume_steps(&info, state.service, &state.state, out);
                }
            }
            Event::Bus(BusEvent::PhoneEvent { device, kind, data }) => {
                let topic = self.topics.device_event(device.as_str(), kind);
                self.send_json(topic, data, false, out);
            }
            Event::Device(DeviceEvent::Availability { device, online, .. }) => {
                self.availability(device.as_str(), *online, out);
                if let Some(info) = info
                    && self.discovery(&info, out)
                {
                    out.push(self.save_discovered());
                }
            }
            Event::Device(DeviceEvent::Removed { device }) => {
                self.clear_device(device.as_str(), out);
                if self.discovered.remove(device.as_str()) {
                    self.removed.insert(device.as_str().to_owned());
                }
                out.push(self.save_discovered());
            }
            Event::Notice(notice) => self.notice(notice, out),
            Event::Automation(AutomationEvent::Run(run)) => {
                let body = run.to_json();
                self.send_json(self.topics.automation_runs(&run.name), &body, true, out);
                if let Some(topic) = run.notify.clone().filter(|_| run.is_final()) {
                    self.send_json(topic, &body, false, out);
                }
            }
            Event::Automation(AutomationEvent::Listed(list)) => self.automations(list, out),
            // An automation's approval request: the same retained topic as
            // the agent's, cleared when it closes.
            Event::Automation(AutomationEvent::ApprovalRequested(request)) => {
                let topic = self.topics.approval(&request.approval_id);
                self.send_json(topic, &json!(**request), true, out);
            }
            Event::Automation(AutomationEvent::ApprovalClosed { approval_id }) => {
                self.send(self.topics.approval(approval_id), Vec::new(), true, out);
            }
            // Lagging devices are answered with `Input::Devices`; the other
            // streams leave nothing stale here (the next status or state
            // replaces the topic).
            Event::Activity(_) | Event::Lagged { .. } => {}
        }
    }

    /// The automations' enabled states and, with discovery, their Home
    /// Assistant switch and button; those gone are cleared.
    fn automations(&mut self, list: &[Listing], out: &mut Vec<Action>) {
        let now: BTreeSet<String> = list.iter().map(|l| l.name.clone()).collect();
        let ha_prefix = self.settings.discovery.clone();
        for gone in self
            .automations_known
            .difference(&now)
            .cloned()
            .collect::<Vec<_>>()
        {
            self.send_latest(self.topics.automation_enabled(&gone), Vec::new(), out);
            self.send_latest(self.topics.automation_runs(&gone), Vec::new(), out);
            if let Some(ha) = &ha_prefix {
                for (topic, _) in discovery::automation_configs(ha, &self.topics, &gone) {
                    self.send_latest(topic, Vec::new(), out);
                }
            }
        }
        for l in list {
            let state = if l.enabled { "ON" } else { "OFF" };
            self.send_latest(
                self.topics.automation_enabled(&l.name),
                state.as_bytes().to_vec(),
                out,
            );
            if let Some(ha) = &ha_prefix
                && !self.automations_known.contains(&l.name)
            {
                for (topic, body) in discovery::automation_configs(ha, &self.topics, &l.name) {
                    self.send_json(topic, &body, true, out);
                }
            }
        }
        self.automations_known = now;
    }

    fn notice(&mut self, notice: &Notice, out: &mut Vec<Action>) {
        match notice {
            Notice::Event(event) => {
                if let droidwarden_agent::EventKind::ApprovalRequested { approval } = &event.kind {
                    let topic = self.topics.approval(&approval.approval_id);
                    self.send_json(topic, &json!(approval), true, out);
                }
                let topic = self.topics.session_events(&event.session_id);
                self.send_json(topic, &json!(**event), false, out);
            }
            Notice::ApprovalClosed { approval_id } => {
                self.send(self.topics.approval(approval_id), Vec::new(), true, out);
            }
            Notice::ResumedRunFinished { origin, result } => match Origin::parse(origin) {
                Some(Origin::Mqtt(id)) => {
                    let reply = match result {
                        Ok(answer) => api::ok_reply(Some(&id), &answer.to_json()),
                        Err(error) => api::error_reply(Some(&id), error),
                    };
                    self.send_json(self.topics.reply(&id), &reply, false, out);
                }
                None => tracing::debug!(origin, "a resumed run finished; no MQTT reply owed"),
            },
        }
    }

    fn availability(&mut self, device: &str, online: bool, out: &mut Vec<Action>) {
        let payload = if online { "online" } else { "offline" };
        let topic = self.topics.device_availability(device);
        self.send(topic, payload.as_bytes().to_vec(), true, out);
    }

    /// Publish a device's discovery configs when it is new, or again when
    /// its model is known (so the device card is right). True when the
    /// device is new to the discovery set (to be saved).
    fn discovery(&mut self, info: &DeviceInfo, out: &mut Vec<Action>) -> bool {
        let Some(ha_prefix) = self.settings.discovery.clone() else {
            return false;
        };
        let device = info.name.as_str();
        let newly = self.discovered.insert(device.to_owned());
        self.removed.remove(device);
        if !newly && info.model.is_none() {
            return false;
        }
        self.discovery_configs(&ha_prefix, info, out);
        newly
    }

    fn discovery_configs(&mut self, ha_prefix: &str, info: &DeviceInfo, out: &mut Vec<Action>) {
        let volume_max = self.volume_steps.get(info.name.as_str()).copied();
        for (topic, body) in discovery::configs(ha_prefix, &self.topics, info, volume_max) {
            self.send_json(topic, &body, true, out);
        }
    }

    /// A music volume read tells the phone's number of steps; when it is
    /// new, a known device's configs go out again so the slider uses them.
    fn learn_volume_steps(
        &mut self,
        info: &DeviceInfo,
        service: &str,
        state: &Value,
        out: &mut Vec<Action>,
    ) {
        if service != VOLUME_SERVICE || state["stream"] != "music" {
            return;
        }
        let Some(max) = state["max"].as_u64().filter(|m| (1..=100).contains(m)) else {
            return;
        };
        let device = info.name.as_str();
        let changed = self.volume_steps.insert(device.to_owned(), max) != Some(max);
        if let Some(ha_prefix) = self.settings.discovery.clone()
            && changed
            && self.discovered.contains(device)
        {
            self.discovery_configs(&ha_prefix, info, out);
        }
    }

    /// Clear every retained topic of a device that is gone: its discovery
    /// configs, availability, last status, and each service's status and
    /// state, so nothing stale stays on the broker.
    fn clear_device(&mut self, device: &str, out: &mut Vec<Action>) {
        let mut topics = vec![
            self.topics.device_availability(device),
            self.topics.last_status(device),
        ];
        for service in droidwarden_services::Catalogue::get().services() {
            topics.push(self.topics.status(device, service.id));
            topics.push(self.topics.state(device, service.id));
        }
        if let Some(ha_prefix) = &self.settings.discovery {
            topics.extend(discovery::config_topics(ha_prefix, &self.topics, device));
        }
        for topic in topics {
            self.send(topic, Vec::new(), true, out);
        }
    }

    fn save_discovered(&self) -> Action {
        Action::SaveDiscovered(Discovered {
            announced: self.discovered.iter().cloned().collect(),
            removed: self.removed.iter().cloned().collect(),
        })
    }
}

/// The service whose music volume reads tell a phone's volume steps.
const VOLUME_SERVICE: &str = "audio_automation";

/// The one place a call is built from `cmd/call`'s words: the driver
/// checks it against the catalogue ([`CallRequest::parse`]) when it admits
/// it.
pub(crate) fn call_request(
    device: Option<String>,
    service: String,
    action: String,
    params: Value,
) -> CallRequest {
    CallRequest {
        device,
        service,
        action,
        params,
    }
}

/// The call a Home Assistant control's command asks for.
///
/// # Errors
/// An unknown control or a payload it does not take (`invalid_request`).
fn ha_call(device: &str, object: &str, payload: &str) -> Result<Call, WireError> {
    let command = discovery::ha_command(object, payload).map_err(|message| {
        WireError::new(
            ErrorCode::InvalidRequest,
            format!("{device}/{object}: {message}"),
        )
    })?;
    Ok(Call {
        device: Some(device.to_owned()),
        command,
    })
}

/// A message from a companion phone: presence, a response, or an event.
/// A request topic is our own publication echoed back and is skipped.
fn companion_message(id: &str, rest: &str, payload: &Bytes) -> Option<CompanionMessage> {
    let id = id.to_owned();
    match rest {
        "online" => match presence_from_payload(payload) {
            Some(online) => Some(CompanionMessage::Presence { id, online }),
            // An empty retained payload clears presence: the phone is gone.
            None if payload.is_empty() => Some(CompanionMessage::Presence { id, online: false }),
            None => {
                tracing::warn!(companion = id, "unreadable presence payload");
                None
            }
        },
        "response" => Some(CompanionMessage::Response {
            id,
            payload: payload.clone(),
        }),
        "request" => None,
        other => match other.strip_prefix("event/") {
            Some(kind) if !kind.contains('/') => Some(CompanionMessage::Event {
                id,
                kind: kind.to_owned(),
                payload: payload.clone(),
            }),
            _ => {
                tracing::debug!(companion = id, topic = other, "ignoring a companion topic");
                None
            }
        },
    }
}

/// The retained `error` statuses that replace the `executing` a killed
/// process left behind: for each (device, service) call it had in flight,
/// on the service's status topic and the device's last status.
fn stale_statuses(
    topics: &Topics,
    interrupted: &[Interrupted],
    now: SystemTime,
) -> BTreeMap<String, Vec<u8>> {
    let finished = crate::hub::rfc3339(now);
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
            "finished_at": finished,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hub::{StateEvent, StatusEvent};
    use droidwarden_bridge::TransportKind;

    /// A router whose connection is up.
    fn router(discovery: bool) -> Router {
        let mut r = unconnected(discovery);
        r.step(Input::Connected);
        r
    }

    fn unconnected(discovery: bool) -> Router {
        Router::new(
            Settings {
                prefix: "dw".into(),
                discovery: discovery.then(|| "homeassistant".into()),
                max_payload: 1024,
                automation_topics: BTreeSet::new(),
            },
            &[],
            SystemTime::UNIX_EPOCH,
        )
    }

    #[test]
    fn retained_values_set_before_the_connection_go_out_once_with_it() {
        let mut r = unconnected(true);
        let start = published(&r.step(Input::Start {
            approvals: vec![("r-1-a".into(), json!({"approval_id": "r-1-a"}))],
            previous: Discovered {
                announced: vec!["old".into()],
                removed: Vec::new(),
            },
            devices: &[info("kitchen", None)],
        }));
        // Only the clearings of a device gone since the last run go out
        // now: the replay can say what to publish, not what to remove.
        assert!(!start.is_empty());
        assert!(
            start.iter().all(|(t, p, _)| p.is_empty()
                && (t.contains("droidwarden_old/") || t.starts_with("dw/devices/old/"))),
            "{start:?}"
        );
        let connected = published(&r.step(Input::Connected));
        let topics: Vec<&str> = connected.iter().map(|(t, _, _)| t.as_str()).collect();
        assert!(topics.contains(&"dw/approvals/r-1-a"));
        assert!(topics.contains(&"dw/devices/kitchen/availability"));
        assert!(topics.iter().any(|t| t.starts_with("homeassistant/")));
        // Connected: published at once. Lost: kept for the next replay.
        let again = r.step(Input::Devices(&[info("kitchen", None)]));
        assert_eq!(published(&again).len(), 1);
        r.step(Input::Disconnected);
        assert!(r.step(Input::Devices(&[info("kitchen", None)])).is_empty());
    }

    #[test]
    fn the_health_goes_out_retained_when_it_changes_not_when_only_time_passes() {
        use crate::health::{AgentHealth, HealthReport, Part};
        let mut r = router(false);
        let mut report = HealthReport {
            version: "1.0.0".into(),
            uptime_s: 5,
            state_dir: "/var/lib/droidwarden".into(),
            adb: None,
            broker: "embedded, on 127.0.0.1:1883".into(),
            agent: AgentHealth {
                on: false,
                model: None,
                reach: None,
            },
            approvals_waiting: Part::Read(0),
            automations: None,
        };
        let first = published(&r.step(Input::Health(&report)));
        assert_eq!(first.len(), 1, "{first:?}");
        assert_eq!(first[0].0, "dw/health");
        assert!(first[0].2, "retained");
        let sent: Value = serde_json::from_str(&first[0].1).unwrap();
        assert_eq!(sent["uptime_s"], 5);
        report.uptime_s = 20;
        assert!(published(&r.step(Input::Health(&report))).is_empty());
        report.approvals_waiting = Part::Read(1);
        let changed = published(&r.step(Input::Health(&report)));
        assert_eq!(changed.len(), 1, "{changed:?}");
        // Replayed with every retained topic after a reconnection.
        r.step(Input::Disconnected);
        let replay = published(&r.step(Input::Connected));
        assert!(
            replay.iter().any(|(t, _, _)| t == "dw/health"),
            "{replay:?}"
        );
    }

    fn msg(topic: &str, payload: &str) -> Inbound {
        Inbound {
            topic: topic.into(),
            payload: Bytes::from(payload.to_owned()),
            ..Inbound::default()
        }
    }

    fn info(name: &str, model: Option<&str>) -> DeviceInfo {
        DeviceInfo {
            name: DeviceName::try_from(name).unwrap(),
            transport: TransportKind::Companion,
            online: true,
            serial: name.into(),
            model: model.map(str::to_owned),
            state_detail: None,
        }
    }

    /// The publishes among `actions`: (topic, payload as text, retain).
    fn published(actions: &[Action]) -> Vec<(String, String, bool)> {
        actions
            .iter()
            .filter_map(|a| match a {
                Action::Publish(p) => Some((
                    p.topic.clone(),
                    String::from_utf8_lossy(&p.payload).into_owned(),
                    p.retain,
                )),
                _ => None,
            })
            .collect()
    }

    fn error_code(payload: &str) -> String {
        let v: Value = serde_json::from_str(payload).unwrap();
        v["error"]["code"].as_str().unwrap_or_default().to_owned()
    }

    #[test]
    fn subscriptions_come_from_the_topic_table() {
        let mut r = router(false);
        let actions = r.step(Input::Connected);
        let Action::Subscribe(subs) = &actions[0] else {
            panic!("subscribe first: {actions:?}")
        };
        let filters: Vec<(&str, RetainForwardRule)> = subs
            .iter()
            .map(|s| (s.filter.as_str(), s.retained.clone()))
            .collect();
        assert_eq!(
            filters,
            [
                ("dw/cmd/#", RetainForwardRule::Never),
                ("dw/devices/+/ha/+/set", RetainForwardRule::Never),
                ("dw/automations/+/+", RetainForwardRule::Never),
                ("dw/companion/#", RetainForwardRule::OnEverySubscribe),
            ]
        );
        assert_eq!(actions[1], Action::Ready);
        assert_eq!(
            published(&actions[2..]),
            [("dw/availability".into(), "online".into(), true)]
        );
        // Every filter's kind is routed by the same table.
        for (topic, command) in [
            ("dw/cmd/call", true),
            ("dw/devices/kitchen/ha/wifi/set", true),
            ("dw/companion/alice/online", false),
        ] {
            let rule = RULES
                .iter()
                .find(|rule| (rule.route)(r.topics(), topic).is_some())
                .unwrap_or_else(|| panic!("{topic} has no rule"));
            assert_eq!(rule.command, command, "{topic}");
        }
    }

    #[test]
    fn retained_topics_are_republished_after_reconnection_and_cleared_ones_forgotten() {
        let mut r = router(false);
        let kitchen = info("kitchen", None);
        r.step(Input::Devices(std::slice::from_ref(&kitchen)));
        let removed = Event::Device(DeviceEvent::Removed {
            device: DeviceName::try_from("gone").unwrap(),
        });
        r.step(Input::Devices(&[info("gone", None)]));
        r.step(Input::Event {
            event: &removed,
            info: None,
        });
        let again = published(&r.step(Input::Connected));
        assert_eq!(
            again,
            [
                ("dw/availability".into(), "online".into(), true),
                (
                    "dw/devices/kitchen/availability".into(),
                    "online".into(),
                    true
                ),
            ]
        );
    }

    #[test]
    fn a_state_read_that_found_nothing_new_publishes_nothing() {
        let mut r = router(false);
        let event = Event::Bus(BusEvent::State(StateEvent {
            device: DeviceName::try_from("kitchen").unwrap(),
            service: "battery",
            state: std::sync::Arc::new(json!({"level": 50})),
        }));
        let first = r.step(Input::Event {
            event: &event,
            info: None,
        });
        assert_eq!(published(&first).len(), 1);
        let Action::Publish(p) = &first[0] else {
            panic!()
        };
        assert_eq!(p.qos, QoS::AtMostOnce);
        assert!(
            r.step(Input::Event {
                event: &event,
                info: None
            })
            .is_empty()
        );
    }

    #[test]
    fn a_status_goes_to_the_service_and_an_outcome_to_the_device() {
        let mut r = router(false);
        let status = |state| {
            Event::Bus(BusEvent::Status(StatusEvent {
                device: DeviceName::try_from("kitchen").unwrap(),
                service: "battery",
                action: "status",
                state,
                started_at: SystemTime::UNIX_EPOCH,
                finished_at: None,
                duration: None,
                error: None,
            }))
        };
        let executing = published(&r.step(Input::Event {
            event: &status(CallState::Executing),
            info: None,
        }));
        assert_eq!(executing.len(), 1);
        assert_eq!(executing[0].0, "dw/devices/kitchen/services/battery/status");
        let done = published(&r.step(Input::Event {
            event: &status(CallState::Success),
            info: None,
        }));
        assert_eq!(done[1].0, "dw/devices/kitchen/status");
        assert!(done[1].1.contains(r#""service":"battery""#));
    }

    #[test]
    fn a_retained_command_is_refused_and_never_run() {
        let mut r = router(false);
        for topic in ["dw/cmd/call", "dw/devices/kitchen/ha/wifi/set"] {
            let mut m = msg(
                topic,
                r#"{"id":"r1","service":"battery","action":"status"}"#,
            );
            m.retain = true;
            let actions = r.step(Input::Inbound(&m));
            assert_eq!(actions[0], Action::Ack);
            let out = published(&actions);
            assert_eq!(out.len(), 1, "{actions:?}");
            assert_eq!(out[0].0, "dw/errors");
            assert!(out[0].1.contains("retained commands are ignored"));
            assert!(!actions.iter().any(|a| matches!(a, Action::Run(_))));
        }
    }

    #[test]
    fn commands_are_left_for_the_next_process_during_shutdown() {
        let mut r = router(false);
        r.step(Input::StopCommands);
        let call = msg(
            "dw/cmd/call",
            r#"{"id":"a","service":"battery","action":"status"}"#,
        );
        assert!(
            r.step(Input::Inbound(&call)).is_empty(),
            "not even acknowledged"
        );
        // Phones' answers still come in (calls in flight drain).
        let response = msg("dw/companion/alice/response", "{}");
        assert_eq!(
            r.step(Input::Inbound(&response))[0..1],
            [Action::Ack],
            "acknowledged"
        );
    }

    #[test]
    fn response_topics_only_under_the_responses_prefix() {
        let mut r = router(false);
        let mut m = msg(
            "dw/cmd/call",
            r#"{"id":"a","service":"battery","action":"status"}"#,
        );
        m.response_topic = Some("dw/companion/alice/request".into());
        let actions = r.step(Input::Inbound(&m));
        let out = published(&actions);
        assert_eq!(out[0].0, "dw/reply/a", "refused, answered by id");
        assert!(out[0].1.contains("is refused"));
        assert!(!actions.iter().any(|a| matches!(a, Action::Run(_))));
        // Under the prefix: the reply goes there, and no id is needed.
        let mut m = msg("dw/cmd/call", r#"{"service":"battery","action":"status"}"#);
        m.response_topic = Some("dw/responses/me".into());
        m.correlation = Some(Bytes::from_static(b"c1"));
        let actions = r.step(Input::Inbound(&m));
        let Some(Action::Run(job)) = actions.last() else {
            panic!("{actions:?}")
        };
        let Action::Publish(reply) = r.reply(&job.to, b"{}".to_vec()) else {
            panic!()
        };
        assert_eq!(reply.topic, "dw/responses/me");
        assert_eq!(reply.response, Some(Some(Bytes::from_static(b"c1"))));
    }

    #[test]
    fn a_repeat_of_a_running_id_waits_for_the_first_reply() {
        let mut r = router(false);
        let m = msg(
            "dw/cmd/call",
            r#"{"id":"a","service":"battery","action":"status"}"#,
        );
        let first = r.step(Input::Inbound(&m));
        let [Action::Run(job)] = first.as_slice() else {
            panic!("{first:?}")
        };
        assert!(job.owns_id, "acknowledged once recorded, by the driver");
        assert!(r.running("a"));
        // A repeat is acknowledged at once and not run.
        assert_eq!(r.step(Input::Inbound(&m)), [Action::Ack]);
        let mut repeat5 = m.clone();
        repeat5.response_topic = Some("dw/responses/x".into());
        assert_eq!(r.step(Input::Inbound(&repeat5)), [Action::Ack]);
        let reply = Reply::from(r#"{"id":"a","ok":true}"#);
        let done = published(&r.step(Input::Finished {
            id: "a".into(),
            reply: Some(reply),
        }));
        assert_eq!(
            done,
            [
                ("dw/reply/a".into(), r#"{"id":"a","ok":true}"#.into(), false),
                (
                    "dw/responses/x".into(),
                    r#"{"id":"a","ok":true}"#.into(),
                    false
                ),
            ]
        );
        // Memory holds only what is in flight: the next one owns the id
        // again (and the store answers it).
        assert!(!r.running("a"));
        assert!(matches!(
            r.step(Input::Inbound(&m)).as_slice(),
            [Action::Run(Job { owns_id: true, .. })]
        ));
    }

    #[test]
    fn repeats_of_a_first_request_that_did_not_complete_are_told_so() {
        let mut r = router(false);
        let m = msg("dw/cmd/ask", r#"{"id":"q","prompt":"hi"}"#);
        r.step(Input::Inbound(&m));
        r.step(Input::Inbound(&m));
        let out = published(&r.step(Input::Finished {
            id: "q".into(),
            reply: None,
        }));
        assert_eq!(out.len(), 1);
        assert_eq!(error_code(&out[0].1), "internal");
        assert!(out[0].1.contains("did not complete"));
    }

    #[test]
    fn a_refused_call_that_owns_its_id_is_answered_by_its_job() {
        let mut r = router(false);
        let m = msg("dw/cmd/call", r#"{"id":"a","service":"nope","action":"x"}"#);
        let actions = r.step(Input::Inbound(&m));
        let [Action::Run(job)] = actions.as_slice() else {
            panic!()
        };
        assert!(job.owns_id);
        // Its handler asked the store and answers; a repeat meanwhile
        // waits for that answer.
        assert!(r.step(Input::Inbound(&m)) == [Action::Ack]);
        let reply: Reply = r#"{"id":"a","ok":true}"#.into();
        let done = published(&r.step(Input::Finished {
            id: "a".into(),
            reply: Some(reply),
        }));
        assert_eq!(done.len(), 1);
        assert_eq!(done[0].0, "dw/reply/a");
        assert!(!r.running("a"));
        // A delivery acknowledged when routed is not acknowledged twice.
        let mut m = msg("dw/cmd/call", r#"{"service":"nope","action":"x"}"#);
        m.response_topic = Some("dw/responses/me".into());
        let actions = r.step(Input::Inbound(&m));
        let [Action::Ack, Action::Run(job)] = actions.as_slice() else {
            panic!("{actions:?}")
        };
        let refused = r.step(Input::Refused {
            to: job.to.clone(),
            error: WireError::new(ErrorCode::InvalidRequest, "unknown service"),
        });
        assert!(!refused.contains(&Action::Ack), "{refused:?}");
        assert_eq!(published(&refused)[0].0, "dw/responses/me");
    }

    #[test]
    fn approvals_and_commands_without_id_skip_dedupe() {
        let mut r = router(false);
        let approve = msg(
            "dw/cmd/approve",
            r#"{"id":"x","approval_id":"r-1","decision":"approve"}"#,
        );
        for _ in 0..2 {
            assert!(matches!(
                r.step(Input::Inbound(&approve)).as_slice(),
                [Action::Ack, Action::Run(Job { owns_id: false, .. })]
            ));
        }
        assert!(!r.running("x"));
    }

    #[test]
    fn bad_commands_are_answered_where_they_can_be() {
        let mut r = router(false);
        let check = |r: &mut Router, topic: &str, payload: &str, to: &str, code: &str| {
            let actions = r.step(Input::Inbound(&msg(topic, payload)));
            assert_eq!(actions[0], Action::Ack, "{topic} {payload}");
            let out = published(&actions);
            assert_eq!(out[0].0, to, "{topic} {payload}");
            assert_eq!(error_code(&out[0].1), code, "{topic} {payload}");
        };
        check(
            &mut r,
            "dw/cmd/reboot",
            "{}",
            "dw/errors",
            "invalid_request",
        );
        check(&mut r, "dw/cmd/call", "{", "dw/errors", "invalid_request");
        check(
            &mut r,
            "dw/cmd/call",
            r#"{"id":"b","action":"x"}"#,
            "dw/reply/b",
            "invalid_request",
        );
        check(
            &mut r,
            "dw/devices/kitchen/ha/wifi/set",
            "MAYBE",
            "dw/errors",
            "invalid_request",
        );
        check(
            &mut r,
            "dw/devices/kitchen/ha/toaster/set",
            "ON",
            "dw/errors",
            "invalid_request",
        );
        assert_eq!(
            r.step(Input::Inbound(&msg("dw/elsewhere", "x"))),
            [Action::Ack]
        );
    }

    #[test]
    fn home_assistant_controls_become_calls() {
        let mut r = router(true);
        let actions = r.step(Input::Inbound(&msg(
            "dw/devices/kitchen/ha/media_volume/set",
            "40",
        )));
        assert_eq!(
            actions,
            [
                Action::Ack,
                Action::HaCall {
                    device: "kitchen".into(),
                    object: "media_volume".into(),
                    call: call_request(
                        Some("kitchen".into()),
                        "audio_automation".into(),
                        "set_volume".into(),
                        json!({"stream": "music", "level": 40}),
                    )
                    .parse()
                    .unwrap(),
                }
            ]
        );
    }

    #[test]
    fn companion_topics_go_to_the_companion_transport() {
        let mut r = router(false);
        let route = |r: &mut Router, topic: &str, payload: &str| {
            r.step(Input::Inbound(&msg(topic, payload)))
                .into_iter()
                .find_map(|a| match a {
                    Action::Companion(m) => Some(m),
                    _ => None,
                })
        };
        assert_eq!(
            route(&mut r, "dw/companion/alice/online", ""),
            Some(CompanionMessage::Presence {
                id: "alice".into(),
                online: false
            })
        );
        assert!(matches!(
            route(&mut r, "dw/companion/alice/event/battery", "{}"),
            Some(CompanionMessage::Event { kind, .. }) if kind == "battery"
        ));
        assert!(matches!(
            route(&mut r, "dw/companion/alice/response", "{}"),
            Some(CompanionMessage::Response { .. })
        ));
        assert_eq!(route(&mut r, "dw/companion/alice/request", "{}"), None);
        assert_eq!(route(&mut r, "dw/companion/alice/event/a/b", "{}"), None);
    }

    #[test]
    fn discovery_once_per_device_again_for_its_model_and_cleared_on_removal() {
        let mut r = router(true);
        let configs = |actions: &[Action]| {
            published(actions)
                .into_iter()
                .filter(|(t, _, _)| t.starts_with("homeassistant/"))
                .count()
        };
        let saves = |actions: &[Action]| {
            actions
                .iter()
                .filter_map(|a| match a {
                    Action::SaveDiscovered(names) => Some(names.clone()),
                    _ => None,
                })
                .collect::<Vec<_>>()
        };
        let start = r.step(Input::Start {
            approvals: vec![("r-1-a".into(), json!({"approval_id": "r-1-a"}))],
            previous: Discovered {
                announced: vec!["old".into(), "kitchen".into()],
                removed: Vec::new(),
            },
            devices: &[info("kitchen", None)],
        });
        let out = published(&start);
        assert_eq!(out[0].0, "dw/approvals/r-1-a");
        assert!(
            out.iter()
                .any(|(t, p, _)| t == "dw/devices/old/availability" && p.is_empty()),
            "a device gone since the last run is cleared"
        );
        assert!(configs(&start) > 0);
        assert_eq!(
            saves(&start),
            [Discovered {
                announced: vec!["kitchen".to_owned()],
                removed: vec!["old".to_owned()],
            }]
        );
        let online = |model| Input::Event {
            event: &AVAILABLE,
            info: Some(info("kitchen", model)),
        };
        static AVAILABLE: std::sync::LazyLock<Event> = std::sync::LazyLock::new(|| {
            Event::Device(DeviceEvent::Availability {
                device: DeviceName::try_from("kitchen").unwrap(),
                online: true,
                detail: None,
            })
        });
        assert_eq!(configs(&r.step(online(None))), 0, "known, nothing new");
        let with_model = r.step(online(Some("Pixel 8")));
        assert!(configs(&with_model) > 0);
        assert!(saves(&with_model).is_empty(), "already in the set");
        // A music volume read with the phone's steps re-announces it.
        let volume = Event::Bus(BusEvent::State(StateEvent {
            device: DeviceName::try_from("kitchen").unwrap(),
            service: VOLUME_SERVICE,
            state: std::sync::Arc::new(json!({"stream": "music", "level": 5, "max": 15})),
        }));
        assert_eq!(
            Router::wants_info(&volume).map(DeviceName::as_str),
            Some("kitchen")
        );
        let learnt = r.step(Input::Event {
            event: &volume,
            info: Some(info("kitchen", None)),
        });
        assert!(configs(&learnt) > 0);
        let removed = Event::Device(DeviceEvent::Removed {
            device: DeviceName::try_from("kitchen").unwrap(),
        });
        let cleared = r.step(Input::Event {
            event: &removed,
            info: None,
        });
        assert!(
            published(&cleared)
                .iter()
                .all(|(_, payload, retain)| payload.is_empty() && *retain)
        );
        assert!(configs(&cleared) > 0);
        assert_eq!(
            saves(&cleared),
            [Discovered {
                announced: Vec::new(),
                removed: vec!["kitchen".to_owned(), "old".to_owned()],
            }]
        );
    }

    /// Home Assistant, back online, is told again that removed devices
    /// are gone: each config once (not retained, so it can be dropped),
    /// then its clearing; a device that came back is not cleared.
    #[test]
    fn removed_devices_are_cleared_again_when_home_assistant_comes_online() {
        let mut r = router(true);
        r.step(Input::Start {
            approvals: Vec::new(),
            previous: Discovered {
                announced: vec!["kitchen".into(), "old".into()],
                removed: vec!["older".into(), "back".into()],
            },
            devices: &[info("kitchen", None), info("back", None)],
        });
        let subscribed = r.step(Input::Connected);
        let filters: Vec<String> = subscribed
            .iter()
            .filter_map(|a| match a {
                Action::Subscribe(subs) => Some(subs.iter().map(|s| s.filter.clone())),
                _ => None,
            })
            .flatten()
            .collect();
        assert!(
            filters.contains(&"homeassistant/status".to_owned()),
            "{filters:?}"
        );
        let birth = r.step(Input::Inbound(&msg("homeassistant/status", "online")));
        assert!(matches!(birth[0], Action::Ack));
        let out = published(&birth);
        let config_topics =
            |device: &str| discovery::config_topics("homeassistant", r.topics(), device);
        for device in ["old", "older"] {
            for topic in config_topics(device) {
                let sent: Vec<_> = out.iter().filter(|(t, _, _)| *t == topic).collect();
                assert_eq!(sent.len(), 2, "{topic}: {sent:?}");
                assert!(
                    !sent[0].1.is_empty() && !sent[0].2,
                    "the config, not retained"
                );
                assert!(sent[1].1.is_empty() && sent[1].2, "then its clearing");
            }
        }
        for device in ["kitchen", "back"] {
            let topics = config_topics(device);
            assert!(
                !out.iter().any(|(t, _, _)| topics.contains(t)),
                "{device} is configured: not cleared"
            );
        }
        // Its will (`offline`) changes nothing; neither does a router
        // without discovery, which does not subscribe to it.
        assert_eq!(
            published(&r.step(Input::Inbound(&msg("homeassistant/status", "offline")))),
            Vec::new()
        );
        let mut plain = router(false);
        let subscribed = plain.step(Input::Connected);
        assert!(!subscribed.iter().any(|a| matches!(a, Action::Subscribe(subs) if subs.iter().any(|s| s.filter.ends_with("/status")))));
    }

    #[test]
    fn a_killed_process_executing_becomes_an_error_at_start() {
        let interrupted = [Interrupted {
            device: "kitchen".into(),
            service: "wifi_automation".into(),
            action: "enable".into(),
            started_ms: 1000,
        }];
        let mut r = Router::new(
            Settings {
                prefix: "dw".into(),
                discovery: None,
                max_payload: 1024,
                automation_topics: BTreeSet::new(),
            },
            &interrupted,
            SystemTime::UNIX_EPOCH,
        );
        let out = published(&r.step(Input::Connected));
        let topics: Vec<&str> = out.iter().map(|(t, _, _)| t.as_str()).collect();
        assert_eq!(
            topics,
            [
                "dw/availability",
                "dw/devices/kitchen/services/wifi_automation/status",
                "dw/devices/kitchen/status",
            ]
        );
        assert!(out[1].1.contains(r#""state":"error""#));
        assert!(out[2].1.contains(r#""service":"wifi_automation""#));
    }

    #[test]
    fn the_goodbye_is_a_retained_offline() {
        let mut r = router(false);
        let bye = published(&r.step(Input::Goodbye));
        assert_eq!(bye, [("dw/availability".into(), "offline".into(), true)]);
    }

    #[test]
    fn automations_get_topics_and_home_assistant_entities_and_controls() {
        use crate::automations::{AutomationEvent, Listing};
        let mut r = router(true);
        let list = |names: &[(&str, bool)]| {
            Event::Automation(AutomationEvent::Listed(std::sync::Arc::new(
                names
                    .iter()
                    .map(|(n, e)| Listing {
                        name: (*n).to_owned(),
                        enabled: *e,
                    })
                    .collect(),
            )))
        };
        let event = list(&[("a", true), ("b-c", false)]);
        let out = published(&r.step(Input::Event {
            event: &event,
            info: None,
        }));
        assert!(out.contains(&("dw/automations/a/enabled".into(), "ON".into(), true)));
        assert!(out.contains(&("dw/automations/b-c/enabled".into(), "OFF".into(), true)));
        for topic in [
            "homeassistant/switch/droidwarden_automations/a/config",
            "homeassistant/button/droidwarden_automations/b_c_run/config",
        ] {
            assert!(
                out.iter()
                    .any(|(t, p, retain)| t == topic && !p.is_empty() && *retain),
                "{topic}"
            );
        }
        // Listing again publishes the states, not the configs.
        let out = published(&r.step(Input::Event {
            event: &event,
            info: None,
        }));
        assert!(!out.iter().any(|(t, _, _)| t.ends_with("/config")));
        // b-c removed: its topics and configs are cleared.
        let event = list(&[("a", true)]);
        let out = published(&r.step(Input::Event {
            event: &event,
            info: None,
        }));
        for topic in [
            "dw/automations/b-c/enabled",
            "dw/automations/b-c/runs",
            "homeassistant/switch/droidwarden_automations/b_c/config",
            "homeassistant/button/droidwarden_automations/b_c_run/config",
        ] {
            assert!(
                out.contains(&(topic.into(), String::new(), true)),
                "{topic}"
            );
        }
        // The switch and button come back as controls; other topics under
        // automations/ are not.
        let actions = r.step(Input::Inbound(&msg("dw/automations/a/set", "OFF")));
        assert!(actions.contains(&Action::AutomationControl {
            name: "a".into(),
            control: "set".into(),
            payload: "OFF".into(),
        }));
        let actions = r.step(Input::Inbound(&msg("dw/automations/a/runs", "{}")));
        assert!(
            !actions
                .iter()
                .any(|a| matches!(a, Action::AutomationControl { .. }))
        );
        // Subscribed after connecting, with the trigger topics.
        let mut r = Router::new(
            Settings {
                prefix: "dw".into(),
                discovery: None,
                max_payload: 1024,
                automation_topics: ["home/go".to_owned()].into(),
            },
            &[],
            SystemTime::UNIX_EPOCH,
        );
        let subscribed = r.step(Input::Connected);
        let Some(Action::Subscribe(subs)) = subscribed.first() else {
            panic!("subscribe first")
        };
        assert!(subs.iter().any(|s| s.filter == "home/go"));
        assert!(subs.iter().any(|s| s.filter == "dw/automations/+/+"));
        let actions = r.step(Input::Inbound(&msg("home/go", "x")));
        assert!(actions.contains(&Action::AutomationTrigger {
            topic: "home/go".into()
        }));
        let mut retained = msg("home/go", "x");
        retained.retain = true;
        let actions = r.step(Input::Inbound(&retained));
        assert!(
            !actions
                .iter()
                .any(|a| matches!(a, Action::AutomationTrigger { .. }))
        );
    }
}
