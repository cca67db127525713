//! droidwarden's D-Bus adapter: the `org.droidwarden.Daemon1` service the
//! daemon offers (this file), the client the CLI uses to reach it
//! ([`client`]), the error names ([`error`]), the typed JSON its replies
//! and signals carry ([`json`]) and the in-memory status table behind
//! `Status()` ([`status`]). The interface is written once, below; zbus
//! generates the client's proxy ([`Daemon1Proxy`]) from it, so the two
//! cannot drift apart. The interface is documented in
//! `docs/dbus-api.md`; the system-bus policy is
//! `systemd/dbus/org.droidwarden.Daemon1.conf`. The same object is also
//! served peer-to-peer on a private Unix socket ([`p2p`]), with or without
//! a bus, so the CLI reaches the daemon on a machine that has none; every
//! signal goes to the bus and to each socket connection.
//!
//! Calls go through [`Hub::call`] like every other caller's, so a call made
//! over D-Bus announces its status on MQTT too. Signals come from the
//! event centre ([`crate::events`]), subscribed before the name is
//! requested, so nothing that happens once a client can see us is missed:
//! the hub's bus (status transitions), the registry's events
//! (availability, removal) and the agent's notices (`ApprovalRequested`,
//! `SessionEvent`). The agent's methods (`Ask`,
//! `ListApprovals`, `Approve`, `Deny`, `ListSessions`, `ShowSession`) fail
//! with `InvalidRequest` when no language model is configured.
//! `CallTimeout` tells a client how long a `Call` on a device may take (the
//! device's own bound), so the CLI waits for the daemon's answer.

#![warn(missing_docs)]

pub mod client;
pub mod error;
mod interface;
pub mod json;
pub mod p2p;
mod status;

use interface::{CallAwaitsApproval, Daemon1Proxy};

// The layers below, under the names the modules use.
use droidwarden_app::{approvals, events, health, wireless};
use droidwarden_automations as automations;
use droidwarden_core::{assistant, gate, hub};

use crate::approvals::{Approvals, Decision};
use crate::assistant::{Assistant, Notice};
use crate::automations::Automations;
use crate::events::{Centre, Event, Events, Stream, Streams};
use crate::hub::{BusEvent, CallRequest, Hub};
use droidwarden_agent::{AgentEvent, ApprovalOutcome, PendingApproval, SessionSummary};
use droidwarden_bridge::{DeviceEvent, DeviceInfo};
use droidwarden_services::{ErrorCode, WireError};
use error::DbusError;
use json::{Json, ServiceStatus, StatusReport, TransportProblem};
use serde_json::Value;
use status::StatusTable;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use zbus::object_server::SignalEmitter;

/// The well-known bus name.
pub const NAME: &str = "org.droidwarden.Daemon1";
/// The one object.
pub const PATH: &str = "/org/droidwarden/Daemon1";
/// The interface.
pub const INTERFACE: &str = "org.droidwarden.Daemon1";

/// How long connecting to a bus (and requesting the name) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one signal may take to be sent on one connection: a client
/// that reads nothing must not hold up the others.
const EMIT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long shutdown waits for D-Bus calls in flight (as for MQTT's).
const CALL_GRACE: Duration = Duration::from_secs(20);

/// Which message bus the D-Bus API (`org.droidwarden.Daemon1`) is on:
/// `[dbus] bus`. The CLI talks to the daemon on the same bus.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DbusBus {
    /// `"auto"`, the default: the session bus when there is one. A machine
    /// without one (a fresh server, a container) gets a warning and no
    /// D-Bus API rather than a daemon that will not start.
    Auto,
    /// `"session"`: the session bus, or the daemon does not start.
    Session,
    /// `"system"`: the system bus (needs the policy file in
    /// `systemd/dbus/`), or the daemon does not start.
    System,
    /// `"socket"`: the private socket alone, on no bus (a container, a
    /// test, or an API kept off every bus).
    Socket,
    /// `"none"`: no D-Bus API.
    Off,
}

impl DbusBus {
    /// Every setting, in the order the documentation lists them.
    pub const ALL: [Self; 5] = [
        Self::Auto,
        Self::Session,
        Self::System,
        Self::Socket,
        Self::Off,
    ];

    /// The value as written in the configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Session => "session",
            Self::System => "system",
            Self::Socket => "socket",
            Self::Off => "none",
        }
    }
}

/// A message bus.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bus {
    /// The user's session bus (`DBUS_SESSION_BUS_ADDRESS`).
    Session,
    /// The system bus.
    System,
}

impl Bus {
    /// Its name: `session` or `system`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Session => "session",
            Self::System => "system",
        }
    }

    fn builder(self) -> zbus::Result<zbus::connection::Builder<'static>> {
        match self {
            Self::Session => zbus::connection::Builder::session(),
            Self::System => zbus::connection::Builder::system(),
        }
    }

    /// Connect, bounded by [`CONNECT_TIMEOUT`].
    async fn connect(
        self,
        builder: impl FnOnce(
            zbus::connection::Builder<'static>,
        ) -> zbus::Result<zbus::connection::Builder<'static>>,
    ) -> Result<zbus::Connection, ConnectError> {
        let build = async { builder(self.builder()?)?.build().await };
        match tokio::time::timeout(CONNECT_TIMEOUT, build).await {
            Ok(Ok(conn)) => Ok(conn),
            Ok(Err(zbus::Error::NameTaken)) => Err(ConnectError::NameTaken(format!(
                "{NAME} is already owned on the {} bus: is another droidwarden daemon running?",
                self.as_str()
            ))),
            Ok(Err(e)) => Err(ConnectError::NoBus(format!(
                "cannot connect to the {} bus: {e}",
                self.as_str()
            ))),
            Err(_) => Err(ConnectError::NoBus(format!(
                "the {} bus did not answer within {CONNECT_TIMEOUT:?}",
                self.as_str()
            ))),
        }
    }
}

/// Why [`Bus::connect`] failed: no usable bus, or our name is taken (by
/// another daemon), which no setting excuses.
#[derive(Debug)]
pub enum ConnectError {
    /// No usable bus: none is there, or it did not answer.
    NoBus(String),
    /// Another process owns our name.
    NameTaken(String),
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NoBus(m) | Self::NameTaken(m) => f.write_str(m),
        }
    }
}

/// The service, on its socket and (when there is one) named on the bus,
/// ready for [`run`].
#[derive(Debug)]
pub struct Service {
    /// `None`: `auto` found no bus; the socket alone serves.
    conn: Option<zbus::Connection>,
    bus: Bus,
    socket: p2p::Server,
    /// For `PropertiesChanged` on the socket's connections.
    iface: Daemon1,
    hub: Hub,
    table: Arc<Mutex<StatusTable>>,
    device_count: Arc<AtomicU32>,
    calls: TaskTracker,
    /// The event centre's statuses, devices and agent notices.
    events: Events,
}

/// Listen on the private socket at `socket` ([`p2p`]), connect to the
/// configured bus and own [`NAME`].
///
/// `Ok(None)` when D-Bus is off (`none`: no socket either). With `auto`
/// and no session bus to be on, the socket alone serves (logged).
///
/// # Errors
/// Another daemon answers on the socket; a bus chosen explicitly
/// (`session`, `system`) that cannot be reached, or whose name is taken:
/// the daemon should not start half-configured.
pub async fn start(
    setting: DbusBus,
    hub: &Hub,
    assistant: Option<Assistant>,
    automations: Automations,
    centre: &Centre,
    socket: PathBuf,
    health: Arc<crate::health::Health>,
) -> Result<Option<Service>, String> {
    let bus = match setting {
        DbusBus::Off => {
            tracing::info!("D-Bus API off ([dbus] bus = \"none\")");
            return Ok(None);
        }
        DbusBus::Auto | DbusBus::Session | DbusBus::Socket => Bus::Session,
        DbusBus::System => Bus::System,
    };
    // Subscribe before the name is visible, so that no event a client could
    // already care about is missed.
    let events = centre.subscribe(
        "D-Bus",
        Streams {
            activity: false,
            ..Streams::ALL
        },
    );
    let table = Arc::new(Mutex::new(StatusTable::default()));
    let device_count = Arc::new(AtomicU32::new(count(hub)));
    let calls = TaskTracker::new();
    let iface = Daemon1 {
        hub: hub.clone(),
        table: Arc::clone(&table),
        device_count: Arc::clone(&device_count),
        calls: calls.clone(),
        assistant,
        automations,
        health,
    };
    // The socket first: a second daemon finds the first one there even
    // without a bus.
    let socket = p2p::bind(socket, iface.clone()).await?;
    // zbus asks for the name with AllowReplacement and ReplaceExisting by
    // default: a second daemon would silently take the name from the first.
    let connected = match setting {
        // The socket alone: no bus is asked.
        DbusBus::Socket => None,
        _ => Some(
            bus.connect(|b| {
                Ok(b.serve_at(PATH, iface.clone())?
                    .name(NAME)?
                    .allow_name_replacements(false)
                    .replace_existing_names(false))
            })
            .await,
        ),
    };
    let conn = match (connected, setting) {
        (None, _) => None,
        (Some(Ok(conn)), _) => Some(conn),
        // A second daemon fails whatever the setting: two daemons would
        // fight over the same phones, and the CLI would reach only one.
        (Some(Err(e @ ConnectError::NoBus(_))), DbusBus::Auto) => {
            tracing::info!(
                error = %e,
                socket = %socket.path().display(),
                "D-Bus API on the private socket only: [dbus] bus = \"auto\" found no usable session bus (set it to \"session\" or \"system\" to require one)"
            );
            None
        }
        (Some(Err(e)), _) => return Err(e.to_string()),
    };
    if conn.is_some() {
        tracing::info!(bus = bus.as_str(), name = NAME, socket = %socket.path().display(), "D-Bus API ready");
    } else {
        tracing::info!(socket = %socket.path().display(), "D-Bus API ready (socket only)");
    }
    Ok(Some(Service {
        conn,
        bus,
        socket,
        iface,
        hub: hub.clone(),
        table,
        device_count,
        calls,
        events,
    }))
}

fn count(hub: &Hub) -> u32 {
    u32::try_from(hub.registry().list().len()).unwrap_or(u32::MAX)
}

/// Serve the socket, turn bus and registry events into signals (on the
/// bus and on every socket connection) and keep the status table, until
/// `shutdown`; then release the name, close the socket and let calls in
/// flight finish (bounded).
pub async fn run(service: Option<Service>, shutdown: CancellationToken) {
    let Some(service) = service else { return };
    let Service {
        conn,
        bus,
        socket,
        iface,
        hub,
        table,
        device_count,
        calls,
        mut events,
    } = service;
    let peers = socket.peers();
    let bus_emitter = conn.as_ref().and_then(|c| SignalEmitter::new(c, PATH).ok());
    // Every connection a signal goes to, for this one signal.
    let targets = || {
        let mut all = peers.targets();
        all.extend(bus_emitter.clone().map(|emitter| p2p::Target {
            emitter,
            peer: None,
        }));
        all
    };
    let signals = async {
        loop {
            let event = tokio::select! {
                () = shutdown.cancelled() => break,
                event = events.next() => match event {
                    Some(event) => event,
                    None => break,
                },
            };
            match event {
                Event::Bus(BusEvent::Status(status)) => {
                    let details = ServiceStatus::from(&status);
                    lock(&table).record(&status, details.clone());
                    let (device, service, state, details) = (
                        status.device.as_str(),
                        status.service,
                        status.state.as_str(),
                        &details,
                    );
                    emit_all(
                        targets(),
                        &peers,
                        "ServiceStatusChanged",
                        move |e| async move {
                            Daemon1::service_status_changed(
                                &e,
                                device,
                                service,
                                state,
                                Json(details.clone()),
                            )
                            .await
                        },
                    )
                    .await;
                }
                Event::Device(device_event) => {
                    match device_event {
                        DeviceEvent::Availability { device, online, .. } => {
                            let device = device.as_str();
                            emit_all(
                                targets(),
                                &peers,
                                "DeviceAvailabilityChanged",
                                move |e| async move {
                                    Daemon1::device_availability_changed(&e, device, online).await
                                },
                            )
                            .await;
                        }
                        DeviceEvent::Removed { device } => lock(&table).forget(&device),
                    }
                    device_count_changed(&hub, &device_count, &iface, &targets, &peers).await;
                }
                Event::Lagged {
                    stream: Stream::Devices,
                    ..
                } => device_count_changed(&hub, &device_count, &iface, &targets, &peers).await,
                Event::Notice(notice) => {
                    let notice = &notice;
                    emit_all(targets(), &peers, "an agent signal", move |e| async move {
                        emit_notice(&e, notice).await
                    })
                    .await;
                }
                Event::Automation(automations::AutomationEvent::Run(run)) => {
                    let (name, outcome) = (run.name.as_str(), &run.to_json());
                    emit_all(targets(), &peers, "AutomationRun", move |e| async move {
                        Daemon1::automation_run(&e, name, Json(outcome.clone())).await
                    })
                    .await;
                }
                Event::Automation(automations::AutomationEvent::ApprovalRequested(request)) => {
                    let (id, details) = (request.approval_id.as_str(), &*request);
                    emit_all(
                        targets(),
                        &peers,
                        "ApprovalRequested",
                        move |e| async move {
                            Daemon1::approval_requested(&e, id, Json(details.clone())).await
                        },
                    )
                    .await;
                }
                Event::Bus(_)
                | Event::Activity(_)
                | Event::Lagged { .. }
                | Event::Automation(
                    automations::AutomationEvent::Listed(_)
                    | automations::AutomationEvent::ApprovalClosed { .. },
                ) => {}
            }
        }
        // Stop being found by name first, so no new call arrives, then let
        // the calls already running finish.
        if let Some(conn) = &conn
            && let Err(e) = conn.release_name(NAME).await
        {
            tracing::debug!(error = %e, "cannot release the D-Bus name");
        }
        calls.close();
        if tokio::time::timeout(CALL_GRACE, calls.wait())
            .await
            .is_err()
        {
            tracing::warn!("D-Bus calls still running after {CALL_GRACE:?}; stopping anyway");
        }
    };
    // The socket stops accepting at `shutdown` too, and closes each
    // connection once the calls are done.
    tokio::join!(signals, socket.serve(shutdown.clone()));
    // Every clone of the connection must be gone for it to close.
    drop(bus_emitter);
    drop(iface);
    if let Some(conn) = conn
        && tokio::time::timeout(CONNECT_TIMEOUT, conn.graceful_shutdown())
            .await
            .is_err()
    {
        tracing::debug!("the D-Bus connection did not close in time");
    }
    tracing::debug!(bus = bus.as_str(), "D-Bus API stopped");
}

/// `PropertiesChanged` for `DeviceCount` when the number of devices changed.
async fn device_count_changed(
    hub: &Hub,
    device_count: &AtomicU32,
    iface: &Daemon1,
    targets: &impl Fn() -> Vec<p2p::Target>,
    peers: &p2p::Peers,
) {
    let now = count(hub);
    if device_count.swap(now, Ordering::Relaxed) != now {
        emit_all(targets(), peers, "PropertiesChanged", move |e| async move {
            iface.device_count_changed(&e).await
        })
        .await;
    }
}

/// Who made a call, as an approval's record names them: on a bus, the
/// caller's uid as the bus daemon vouches for it, with its unique name
/// (`D-Bus uid 1000 (:1.42)`); on the private socket, the peer's uid from
/// the kernel (`API socket uid 1000`). What cannot be learned within a
/// second is said so, not guessed.
async fn caller(connection: &zbus::Connection, header: &zbus::message::Header<'_>) -> String {
    const ASK: Duration = Duration::from_secs(1);
    if connection.unique_name().is_none() {
        // Peer to peer: no bus, no names; the socket knows the peer.
        return match tokio::time::timeout(ASK, connection.peer_creds()).await {
            Ok(Ok(credentials)) => match credentials.unix_user_id() {
                Some(uid) => format!("API socket uid {uid}"),
                None => "API socket, uid unknown".into(),
            },
            _ => "API socket, uid unknown".into(),
        };
    }
    let Some(sender) = header.sender() else {
        return "D-Bus, sender unknown".into();
    };
    let uid = tokio::time::timeout(ASK, async {
        let bus = zbus::fdo::DBusProxy::new(connection).await.ok()?;
        bus.get_connection_unix_user(sender.clone().into())
            .await
            .ok()
    })
    .await
    .ok()
    .flatten();
    match uid {
        Some(uid) => format!("D-Bus uid {uid} ({sender})"),
        None => format!("D-Bus {sender}, uid unknown"),
    }
}

/// Send one signal on every target, each bounded by [`EMIT_TIMEOUT`]; a
/// socket client that does not take it in time is disconnected.
async fn emit_all<F, Fut>(targets: Vec<p2p::Target>, peers: &p2p::Peers, what: &str, emit: F)
where
    F: Fn(SignalEmitter<'static>) -> Fut,
    Fut: std::future::Future<Output = zbus::Result<()>>,
{
    for target in targets {
        match tokio::time::timeout(EMIT_TIMEOUT, emit(target.emitter)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::debug!(error = %e, "cannot emit {what}"),
            Err(_) => match target.peer {
                Some(id) => peers.evict(id),
                None => tracing::warn!("the bus did not take {what} within {EMIT_TIMEOUT:?}"),
            },
        }
    }
}

/// `SessionEvent` for every agent event, and `ApprovalRequested` for a
/// new approval request.
async fn emit_notice(emitter: &SignalEmitter<'static>, notice: &Notice) -> zbus::Result<()> {
    let Notice::Event(event) = notice else {
        return Ok(());
    };
    if let droidwarden_agent::EventKind::ApprovalRequested { approval } = &event.kind {
        Daemon1::approval_requested(emitter, &approval.approval_id, Json(approval.clone())).await?;
    }
    Daemon1::session_event(emitter, &event.session_id, Json(AgentEvent::clone(event))).await
}

/// A `Call`'s arguments as a typed call.
fn parse_call(
    device: &str,
    service: &str,
    action: &str,
    params_json: &str,
) -> Result<crate::hub::Call, WireError> {
    let params = json_arg("params_json", params_json)?;
    let request = CallRequest {
        device: optional(device),
        service: service.to_owned(),
        action: action.to_owned(),
        params,
    };
    tracing::debug!(?request, "D-Bus call");
    request.parse()
}

/// A string argument that may be left out: D-Bus has no optional
/// arguments, so the empty string stands for none.
fn optional(arg: &str) -> Option<String> {
    (!arg.is_empty()).then(|| arg.to_owned())
}

/// A method's JSON argument `name`: the text parsed, or `{}` when it is
/// empty (D-Bus has no optional arguments).
fn json_arg(name: &str, text: &str) -> Result<Value, WireError> {
    if text.trim().is_empty() {
        return Ok(Value::Object(serde_json::Map::new()));
    }
    serde_json::from_str(text).map_err(|e| {
        WireError::new(
            ErrorCode::InvalidParams,
            format!("{name} is not valid JSON: {e}"),
        )
    })
}

fn lock(table: &Mutex<StatusTable>) -> std::sync::MutexGuard<'_, StatusTable> {
    table.lock().unwrap_or_else(|e| e.into_inner())
}

/// The `org.droidwarden.Daemon1` interface. Its methods run concurrently
/// (zbus gives each call its own task); nothing in here takes the
/// interface's write lock, so a long `Call` never holds up the others.
/// Cloned for each socket connection: the clones share the status table,
/// the count and the calls.
#[derive(Debug, Clone)]
struct Daemon1 {
    hub: Hub,
    table: Arc<Mutex<StatusTable>>,
    device_count: Arc<AtomicU32>,
    calls: TaskTracker,
    assistant: Option<Assistant>,
    /// Automations' management (`Automation`).
    automations: Automations,
    /// The daemon's own health, for `Status`.
    health: Arc<crate::health::Health>,
}

impl Daemon1 {
    fn assistant(&self) -> Result<&Assistant, DbusError> {
        self.assistant
            .as_ref()
            .ok_or_else(|| DbusError::Wire(assistant::disabled()))
    }

    /// The ADB transport, for `Pair` and `Discover`.
    fn adb(&self) -> Result<&droidwarden_bridge::adb::AdbTransport, DbusError> {
        self.health.adb().map(|adb| adb.as_ref()).ok_or_else(|| {
            DbusError::Wire(WireError::new(
                ErrorCode::UnsupportedAction,
                "the daemon runs without the ADB transport",
            ))
        })
    }

    /// Every approval request: the agent's and the automations'.
    fn approvals(&self) -> Approvals {
        Approvals::new(self.assistant.clone(), self.automations.clone())
    }
}

/// The decision `AnswerApproval`'s JSON options give.
fn answer_options(options_json: &str) -> Result<Decision, DbusError> {
    let invalid =
        |message: String| DbusError::Wire(WireError::new(ErrorCode::InvalidParams, message));
    let Ok(Value::Object(mut o)) = serde_json::from_str::<Value>(options_json) else {
        return Err(invalid("the options are not a JSON object".into()));
    };
    let mut text = |key: &str| -> Result<Option<String>, DbusError> {
        match o.remove(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(invalid(format!("{key} must be a string"))),
        }
    };
    let decision = text("decision")?.ok_or_else(|| invalid("decision is required".into()))?;
    let scope = text("scope")?;
    let up_to = text("up_to")?;
    let reason = text("reason")?;
    let minutes = match o.remove("minutes") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => Some(
            n.as_u64()
                .ok_or_else(|| invalid("minutes must be a whole number of minutes".into()))?,
        ),
        Some(_) => return Err(invalid("minutes must be a number".into())),
    };
    let params = match o.remove("params") {
        None | Some(Value::Null) => None,
        Some(Value::Object(m)) => Some(m),
        Some(_) => return Err(invalid("params must be an object".into())),
    };
    if let Some(key) = o.keys().next() {
        return Err(invalid(format!(
            "unknown option {:?}; options: decision, scope, up_to, minutes, params, reason",
            key.chars().take(40).collect::<String>()
        )));
    }
    crate::approvals::decision_of(
        &decision,
        scope.as_deref(),
        up_to.as_deref(),
        minutes,
        params,
        reason,
    )
    .map_err(invalid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use droidwarden_bridge::Registry;

    /// The interface over an empty registry, without the agent, with
    /// automations whose driver never runs.
    pub(crate) fn iface() -> Daemon1 {
        Daemon1 {
            hub: Hub::new(Arc::new(Registry::new()), None),
            table: Arc::new(Mutex::new(StatusTable::default())),
            device_count: Arc::new(AtomicU32::new(0)),
            calls: TaskTracker::new(),
            assistant: None,
            automations: Automations::new(Default::default()).0,
            health: Arc::new(crate::health::Health::new(
                std::env::temp_dir(),
                None,
                "none".into(),
                None,
            )),
        }
    }

    /// The interface's introspection, as a client on a peer-to-peer
    /// connection to it receives it.
    async fn introspection() -> String {
        let (ours, theirs) = tokio::net::UnixStream::pair().unwrap();
        let server = zbus::connection::Builder::unix_stream(ours)
            .server(zbus::Guid::generate())
            .unwrap()
            .p2p()
            .serve_at(PATH, iface())
            .unwrap()
            .build();
        let client = zbus::connection::Builder::unix_stream(theirs).p2p().build();
        let (server, client) = tokio::join!(server, client);
        let (_server, client) = (server.unwrap(), client.unwrap());
        let introspectable = zbus::fdo::IntrospectableProxy::builder(&client)
            .destination(NAME)
            .unwrap()
            .path(PATH)
            .unwrap()
            .build()
            .await
            .unwrap();
        introspectable.introspect().await.unwrap()
    }

    /// The value of `name="…"` in a tag.
    fn attr<'t>(tag: &'t str, name: &str) -> Option<&'t str> {
        let start = tag.find(&format!(" {name}=\""))? + name.len() + 3;
        let len = tag[start..].find('"')?;
        Some(&tag[start..start + len])
    }

    /// Every member of `interface` in introspection XML, one line each:
    /// `method Call(s device, …) -> s result_json`, `signal …(…)`,
    /// `property DeviceCount u read`.
    fn members_of(xml: &str, interface: &str) -> Vec<String> {
        // Without the comments (the descriptions, which may hold `<`).
        let mut text = String::new();
        let mut rest = xml;
        while let Some(start) = rest.find("<!--") {
            text.push_str(&rest[..start]);
            rest = rest[start..].split_once("-->").map_or("", |(_, r)| r);
        }
        text.push_str(rest);
        let start = text
            .find(&format!("<interface name=\"{interface}\">"))
            .expect("the interface is there");
        let body = &text[start..];
        let body = &body[..body.find("</interface>").expect("closed")];
        let (mut members, mut current) = (Vec::new(), None::<(String, Vec<String>, Vec<String>)>);
        let close = |(head, ins, outs): (String, Vec<String>, Vec<String>)| {
            let outs = if outs.is_empty() {
                String::new()
            } else {
                format!(" -> {}", outs.join(", "))
            };
            format!("{head}({}){outs}", ins.join(", "))
        };
        for tag in body.split('<').skip(1) {
            let tag = tag.split('>').next().unwrap_or_default();
            let name = attr(tag, "name").unwrap_or_default();
            if tag.starts_with("method ") || tag.starts_with("signal ") {
                let kind = &tag[..6];
                current = Some((format!("{kind} {name}"), Vec::new(), Vec::new()));
            } else if tag.starts_with("arg ") {
                let (_, ins, outs) = current.as_mut().expect("an argument of a member");
                let arg = format!("{} {name}", attr(tag, "type").unwrap_or_default());
                match attr(tag, "direction") {
                    Some("out") => outs.push(arg),
                    _ => ins.push(arg),
                }
            } else if tag == "/method" || tag == "/signal" {
                members.push(close(current.take().expect("an open member")));
            } else if tag.starts_with("property ") {
                let (ty, access) = (attr(tag, "type"), attr(tag, "access"));
                members.push(format!(
                    "property {name} {} {}",
                    ty.unwrap_or_default(),
                    access.unwrap_or_default()
                ));
            }
        }
        members.sort();
        members
    }

    /// The members docs/dbus-api.md lists in its summary, in the same form
    /// as [`members_of`].
    fn documented() -> Vec<String> {
        let page = include_str!("../../docs/dbus-api.md");
        let block = page
            .split("```")
            .find(|b| b.trim_start().starts_with("methods"))
            .expect("the summary block");
        let mut kind = "";
        let mut members = Vec::new();
        for line in block.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let mut line = line;
            for (word, k) in [
                ("methods", "method"),
                ("signals", "signal"),
                ("properties", "property"),
            ] {
                if let Some(rest) = line.strip_prefix(word) {
                    (kind, line) = (k, rest.trim());
                }
            }
            if kind == "property" {
                let words: Vec<&str> = line.split_whitespace().take(3).collect();
                members.push(format!("property {}", words.join(" ")));
                continue;
            }
            let (call, out) = line.split_once(" → ").unwrap_or((line, ""));
            let out = if out.is_empty() {
                String::new()
            } else {
                format!(" -> {out}")
            };
            members.push(format!("{kind} {call}{out}"));
        }
        members.sort();
        members
    }

    /// The interface is the one documented (names, signatures, argument
    /// names), and what the client names by hand (its match rules'
    /// signals) is in it. The proxy needs no such check: zbus generates it
    /// from the interface itself.
    #[tokio::test]
    async fn the_interface_is_the_documented_one() {
        let xml = introspection().await;
        let members = members_of(&xml, INTERFACE);
        let documented = documented();
        let served: Vec<&String> = members.iter().filter(|m| !documented.contains(m)).collect();
        let missing: Vec<&String> = documented.iter().filter(|m| !members.contains(m)).collect();
        assert!(
            served.is_empty() && missing.is_empty(),
            "served but not as documented in docs/dbus-api.md: {served:#?}\n\
             documented but not served: {missing:#?}\n{xml}"
        );
        for signal in [client::CALL_AWAITS_APPROVAL, client::SESSION_EVENT] {
            assert!(
                members
                    .iter()
                    .any(|m| m.starts_with(&format!("signal {signal}("))),
                "{signal} is not a signal of {INTERFACE}"
            );
        }
    }

    /// The proxy's defaults are the names the daemon serves under.
    #[test]
    fn the_proxy_asks_for_the_daemons_names() {
        use zbus::proxy::Defaults as _;
        let name = Daemon1Proxy::DESTINATION.as_ref().map(|n| n.to_string());
        assert_eq!(name.as_deref(), Some(NAME));
        let path = Daemon1Proxy::PATH.as_ref().map(|p| p.to_string());
        assert_eq!(path.as_deref(), Some(PATH));
        let interface = Daemon1Proxy::INTERFACE.as_ref().map(|i| i.to_string());
        assert_eq!(interface.as_deref(), Some(INTERFACE));
    }
}
