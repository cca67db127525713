//! droidwarden's D-Bus side: the `org.droidwarden.Daemon1` service the
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

pub(crate) mod client;
pub(crate) mod error;
pub(crate) mod json;
pub(crate) mod p2p;
mod status;

use crate::approvals::{Approvals, Decision};
use crate::assistant::{self, Assistant, Notice};
use crate::automations::{self, Automations};
use crate::config::DbusBus;
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
pub(crate) const NAME: &str = "org.droidwarden.Daemon1";
/// The one object.
pub(crate) const PATH: &str = "/org/droidwarden/Daemon1";
/// The interface.
pub(crate) const INTERFACE: &str = "org.droidwarden.Daemon1";

/// How long connecting to a bus (and requesting the name) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one signal may take to be sent on one connection: a client
/// that reads nothing must not hold up the others.
const EMIT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long shutdown waits for D-Bus calls in flight (as for MQTT's).
const CALL_GRACE: Duration = Duration::from_secs(20);

/// A message bus.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Bus {
    /// The user's session bus (`DBUS_SESSION_BUS_ADDRESS`).
    Session,
    /// The system bus.
    System,
}

impl Bus {
    pub(crate) fn as_str(self) -> &'static str {
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
pub(crate) enum ConnectError {
    NoBus(String),
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
pub(crate) struct Service {
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
pub(crate) async fn start(
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
pub(crate) async fn run(service: Option<Service>, shutdown: CancellationToken) {
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

/// The interface, and with it the client's proxy: zbus generates
/// `Daemon1Proxy` from this very block (`proxy(…)`), a method for each
/// method, signal and property here, with the same D-Bus names, argument
/// types and reply types ([`Json`] for the JSON ones). A method renamed or
/// changed here is renamed or changed in the proxy, and every call the
/// client makes through the old one fails to compile; no name is spelled
/// twice. The D-Bus names are `CamelCase` of the Rust ones, as
/// documented in docs/dbus-api.md (checked by a test against that page).
#[zbus::interface(
    name = "org.droidwarden.Daemon1",
    proxy(
        default_service = "org.droidwarden.Daemon1",
        default_path = "/org/droidwarden/Daemon1",
        visibility = "pub(crate)"
    )
)]
impl Daemon1 {
    /// Every device as a JSON array: name, transport, online, serial,
    /// model, state_detail (the objects of `droidwarden devices --json`).
    #[zbus(out_args("devices_json"))]
    async fn list_devices(&self) -> Json<Vec<DeviceInfo>> {
        Json(self.hub.registry().list())
    }

    /// The service catalogue as JSON (the output of
    /// `droidwarden services --json`).
    #[zbus(out_args("services_json"))]
    async fn list_services(&self) -> Json<Value> {
        Json(Value::Array(droidwarden_bridge::services_json()))
    }

    /// Perform one action. `device` empty: the only online device.
    /// `params_json`: a JSON object (empty string: no parameters). Returns
    /// the JSON result; failures are `org.droidwarden.Error.*` errors.
    #[zbus(out_args("result_json"))]
    async fn call(
        &self,
        device: &str,
        service: &str,
        action: &str,
        params_json: &str,
    ) -> Result<Json<Value>, DbusError> {
        let call = parse_call(device, service, action, params_json)?;
        let result = self.calls.track_future(self.hub.call(call)).await?;
        Ok(Json(result))
    }

    /// Perform one action as `Call` does, under the agent's approval policy
    /// (`[agent.approval]`): an action above the threshold waits for a
    /// person (an approval request, as the agent's, answered by `Approve`
    /// or `Deny`; expiry denies), a listed one is refused. For clients that
    /// act for a model, such as `droidwarden mcp` (docs/mcp.md).
    #[zbus(out_args("result_json"))]
    async fn call_checked(
        &self,
        device: &str,
        service: &str,
        action: &str,
        params_json: &str,
    ) -> Result<Json<Value>, DbusError> {
        let call = parse_call(device, service, action, params_json)?;
        let result = self
            .calls
            .track_future(crate::gate::call_checked(
                &self.hub,
                self.assistant.as_ref(),
                call,
            ))
            .await?;
        Ok(Json(result))
    }

    /// `CallChecked` for a client that asks the person itself (MCP
    /// elicitation, docs/mcp.md): when the call waits for approval, the
    /// signal `CallAwaitsApproval(ticket, approval_id)` goes to this
    /// connection, so the client can answer it with `Approve` or `Deny`.
    /// `ticket`: the client's own random tag for this call (1–128 chars).
    #[zbus(out_args("result_json"))]
    async fn call_checked_ticket(
        &self,
        #[zbus(signal_emitter)] emitter: SignalEmitter<'_>,
        device: &str,
        service: &str,
        action: &str,
        params_json: &str,
        ticket: &str,
    ) -> Result<Json<Value>, DbusError> {
        let call = parse_call(device, service, action, params_json)?;
        let run = crate::gate::ticketed_call(
            &self.hub,
            self.assistant.as_ref(),
            call,
            ticket,
            |id| async move {
                let sent = Self::call_awaits_approval(&emitter, ticket, &id);
                if !matches!(tokio::time::timeout(EMIT_TIMEOUT, sent).await, Ok(Ok(()))) {
                    tracing::debug!(approval = id, "CallAwaitsApproval not sent");
                }
            },
        );
        let result = self.calls.track_future(run).await?;
        Ok(Json(result))
    }

    /// A `CallCheckedTicket` call waits for approval `approval_id`; sent
    /// to the caller's connection only on the socket, on the bus to all.
    #[zbus(signal)]
    async fn call_awaits_approval(
        emitter: &SignalEmitter<'_>,
        ticket: &str,
        approval_id: &str,
    ) -> zbus::Result<()>;

    /// The longest a `Call` on `device` can take before the daemon answers
    /// it, in milliseconds: its turn behind earlier calls on the device,
    /// then the call, each bounded by the device's own bound (`[calls]
    /// timeout_ms` for an ADB phone; for a companion phone its queue time,
    /// its turn behind earlier changes and the answer deadline). `device`
    /// empty: the longest over every device. 0 when there is no such
    /// device. Clients wait that long, plus a margin, for `Call`'s reply.
    #[zbus(out_args("timeout_ms"))]
    async fn call_timeout(&self, device: &str) -> u64 {
        let registry = self.hub.registry();
        let bound = if device.is_empty() {
            registry
                .list()
                .iter()
                .filter_map(|info| registry.get(info.name.as_str()))
                .map(|handle| crate::hub::call_bound(&handle))
                .max()
        } else {
            registry
                .get(device)
                .map(|handle| crate::hub::call_bound(&handle))
        };
        bound.map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    /// Devices, their availability, and the last status of each (device,
    /// service) since the daemon started, as JSON.
    #[zbus(out_args("status_json"))]
    async fn status(&self) -> Json<StatusReport> {
        let registry = self.hub.registry();
        let devices = lock(&self.table).devices(registry.list());
        let problems = registry
            .problems()
            .into_iter()
            .map(|(transport, e)| TransportProblem {
                transport: transport.to_owned(),
                error: e.to_wire(),
            })
            .collect();
        let daemon = self
            .health
            .report(&self.approvals(), &self.automations)
            .await;
        Json(StatusReport {
            devices,
            problems,
            daemon,
        })
    }

    /// Pair a phone for wireless debugging (Android 11+) through the adb
    /// server, as `droidwarden pair` does: `address` is the phone's
    /// pairing address (HOST:PORT under Wireless debugging > Pair device
    /// with pairing code), `code` its six digits, `timeout_ms` how long to
    /// wait for the phone (0: 20 s; 100 to 120000). Returns the object of
    /// `droidwarden pair --json`; an adb server older than platform-tools
    /// 30 is `UnsupportedAction`, the phone's refusal `DeviceError` with
    /// the server's words.
    #[zbus(out_args("paired_json"))]
    async fn pair(
        &self,
        address: &str,
        code: &str,
        timeout_ms: u32,
    ) -> Result<Json<crate::wireless::PairReport>, DbusError> {
        use droidwarden_bridge::adb::host::{PairingCode, PhoneAddress};
        let target = PhoneAddress::try_from(address).map_err(|e| e.to_wire())?;
        let code = PairingCode::try_from(code.to_owned()).map_err(|e| e.to_wire())?;
        let timeout_ms = match u64::from(timeout_ms) {
            0 => crate::wireless::PAIR_TIMEOUT_MS,
            ms @ crate::wireless::PAIR_TIMEOUT_MIN_MS..=crate::wireless::PAIR_TIMEOUT_MAX_MS => ms,
            _ => {
                return Err(WireError::new(
                    ErrorCode::InvalidParams,
                    "timeout_ms must be 0 (20 s) or from 100 to 120000",
                )
                .into());
            }
        };
        let adb = self.adb()?;
        let paired =
            crate::wireless::pair(adb, &target, &code, Duration::from_millis(timeout_ms)).await?;
        tracing::info!(address = %target, guid = paired.guid.as_deref(), "paired over D-Bus Pair");
        Ok(Json(paired))
    }

    /// The phones the adb server sees over mDNS, as `droidwarden discover
    /// --json`: `adb_server`, `mdns` (`running`, `check`) and `services`,
    /// each with the device it is when the server lists it.
    #[zbus(out_args("discovered_json"))]
    async fn discover(&self) -> Result<Json<crate::wireless::DiscoverReport>, DbusError> {
        let adb = self.adb()?;
        let devices = self.hub.registry().list();
        Ok(Json(crate::wireless::discover(adb, &devices).await?))
    }

    /// Ask the agent. `session` empty: a new session. Returns the session
    /// id at once; the run's progress comes as `SessionEvent` signals for
    /// that session, ending with a `final` or `error` event.
    #[zbus(out_args("session"))]
    async fn ask(&self, session: &str, prompt: &str) -> Result<String, DbusError> {
        let session = optional(session);
        let started = self
            .assistant()?
            .ask(prompt, session, None, None, None)
            .await?;
        tracing::debug!(session = started.session, run = started.run, "D-Bus Ask");
        Ok(started.session)
    }

    /// `Ask` with options: `options_json` is a JSON object (empty string:
    /// none) with `"mode": "react" | "plan"` (plan-and-execute; default
    /// `[agent] mode`).
    #[zbus(out_args("session"))]
    async fn ask_with(
        &self,
        session: &str,
        prompt: &str,
        options_json: &str,
    ) -> Result<String, DbusError> {
        let bad = |m: String| WireError::new(ErrorCode::InvalidParams, m);
        let Value::Object(mut options) = json_arg("options_json", options_json)? else {
            return Err(bad("options_json must be a JSON object".into()).into());
        };
        let mode = match options.remove("mode") {
            None | Some(Value::Null) => None,
            Some(Value::String(m)) => droidwarden_agent::RunMode::named(Some(&m)).map_err(bad)?,
            Some(_) => return Err(bad("mode must be a string".into()).into()),
        };
        if let Some(key) = options.keys().next() {
            return Err(bad(format!("unknown option {key:?}; options: mode")).into());
        }
        let session = optional(session);
        let started = self
            .assistant()?
            .ask(prompt, session, None, mode, None)
            .await?;
        tracing::debug!(
            session = started.session,
            run = started.run,
            "D-Bus AskWith"
        );
        Ok(started.session)
    }

    /// The skills as JSON (`droidwarden skills --json`): `skills`, each
    /// with name, description, allowed_tools, risk, enabled, builtin and
    /// source, and `problems`, the files that failed to load and why.
    #[zbus(out_args("skills_json"))]
    async fn list_skills(&self) -> Result<Json<Value>, DbusError> {
        Ok(Json(crate::assistant::skills_json(
            &self.assistant()?.skills(),
        )))
    }

    /// Run a skill through the agent. `session` empty: a new session;
    /// `input_json`: a JSON object (empty string: `{}`). Returns the
    /// session id at once; progress comes as `SessionEvent` signals (the
    /// skill's own events tagged with `skill`), ending with `final` or
    /// `error`.
    #[zbus(out_args("session"))]
    async fn run_skill(
        &self,
        session: &str,
        skill: &str,
        input_json: &str,
    ) -> Result<String, DbusError> {
        let input = json_arg("input_json", input_json)?;
        let session = optional(session);
        let started = self
            .assistant()?
            .run_skill(skill, input, session, None, None)
            .await?;
        tracing::debug!(
            session = started.session,
            run = started.run,
            skill,
            "D-Bus RunSkill"
        );
        Ok(started.session)
    }

    /// Approval requests waiting for an answer, the agent's and the
    /// automations' (`automation:<name>`), oldest first, as a JSON array
    /// (the payloads of the MQTT `approvals/<id>` topics).
    #[zbus(out_args("approvals_json"))]
    async fn list_approvals(&self) -> Result<Json<Vec<PendingApproval>>, DbusError> {
        Ok(Json(self.approvals().pending().await?))
    }

    /// The `limit` approval requests answered (or expired) last, the most
    /// recent first, as a JSON array: each request's fields with `status`,
    /// `reason`, `decided_at` and `decided_by` (who answered). `limit` 0
    /// means 50; at most 1,000.
    #[zbus(out_args("history_json"))]
    async fn approval_history(&self, limit: u32) -> Result<Json<Vec<ApprovalOutcome>>, DbusError> {
        let limit = match limit {
            0 => 50,
            n => usize::try_from(n).unwrap_or(usize::MAX).min(1000),
        };
        Ok(Json(self.assistant()?.approval_history(limit).await?))
    }

    /// Approve a pending request: the waiting run goes on. The caller's
    /// uid is recorded as who answered.
    async fn approve(
        &self,
        approval_id: &str,
        #[zbus(connection)] connection: &zbus::Connection,
        #[zbus(header)] header: zbus::message::Header<'_>,
    ) -> Result<(), DbusError> {
        let by = caller(connection, &header).await;
        self.approvals()
            .answer(approval_id, Decision::Approve, &by)
            .await?;
        Ok(())
    }

    /// Answer a pending request with options, as a JSON object: `decision`
    /// (`approve` or `deny`), then `scope` (`once`, the default, or `run`:
    /// a grant for the rest of the run, same device, actions up to
    /// `up_to`, `low` or `medium`, default `medium`; or `app`: the app in
    /// front of a screen action allowed on its device for `minutes`,
    /// default 30), or `params` (edited
    /// parameters, approved once), or `reason` for a denial
    /// (docs/agent.md, "Answers beyond yes or no"). The caller's uid is
    /// recorded as who answered. Approve and Deny remain for yes and no.
    async fn answer_approval(
        &self,
        approval_id: &str,
        options_json: &str,
        #[zbus(connection)] connection: &zbus::Connection,
        #[zbus(header)] header: zbus::message::Header<'_>,
    ) -> Result<(), DbusError> {
        let decision = answer_options(options_json)?;
        let by = caller(connection, &header).await;
        self.approvals().answer(approval_id, decision, &by).await?;
        Ok(())
    }

    /// The grants for a run that still hold, oldest first, as a JSON
    /// array: `grant_id`, `run_id`, `session_id`, `device`, `up_to`,
    /// `granted_by`, `granted_at`, `approval_id`.
    #[zbus(out_args("grants_json"))]
    async fn list_grants(&self) -> Result<Json<Vec<droidwarden_agent::Grant>>, DbusError> {
        Ok(Json(self.approvals().grants().await?))
    }

    /// Revoke a grant: the next action it covered asks again. The caller's
    /// uid is recorded as who revoked it.
    async fn revoke_grant(
        &self,
        grant_id: &str,
        #[zbus(connection)] connection: &zbus::Connection,
        #[zbus(header)] header: zbus::message::Header<'_>,
    ) -> Result<(), DbusError> {
        let by = caller(connection, &header).await;
        self.approvals().revoke(grant_id, &by).await?;
        Ok(())
    }

    /// Deny a pending request; `reason` (may be empty) reaches the model.
    /// The caller's uid is recorded as who answered.
    async fn deny(
        &self,
        approval_id: &str,
        reason: &str,
        #[zbus(connection)] connection: &zbus::Connection,
        #[zbus(header)] header: zbus::message::Header<'_>,
    ) -> Result<(), DbusError> {
        let by = caller(connection, &header).await;
        let decision = Decision::Deny {
            reason: reason.to_owned(),
        };
        self.approvals().answer(approval_id, decision, &by).await?;
        Ok(())
    }

    /// Every agent session, most recent first, as a JSON array.
    #[zbus(out_args("sessions_json"))]
    async fn list_sessions(&self) -> Result<Json<Vec<SessionSummary>>, DbusError> {
        Ok(Json(self.assistant()?.sessions().await?))
    }

    /// Manage automations: `request_json` is `{"op": "list" | "show" |
    /// "run" | "enable" | "disable" | "approve" | "deny" | "add" |
    /// "remove", "name": …, "definition": {…}}` (docs/automations.md); the
    /// answer is JSON.
    /// The caller is recorded as who answered an approval.
    #[zbus(out_args("answer_json"))]
    async fn automation(
        &self,
        request_json: &str,
        #[zbus(connection)] connection: &zbus::Connection,
        #[zbus(header)] header: zbus::message::Header<'_>,
    ) -> Result<Json<Value>, DbusError> {
        let body: Value = serde_json::from_str(request_json).map_err(|e| {
            DbusError::Wire(WireError::new(
                ErrorCode::InvalidRequest,
                format!("the request is not JSON: {e}"),
            ))
        })?;
        // Only an answer to an approval records who sent it: the bus is
        // asked for the caller's uid then, not on every request.
        let answers = matches!(
            body.get("op").and_then(Value::as_str),
            Some("approve" | "deny")
        );
        let by = if answers {
            caller(connection, &header).await
        } else {
            String::new()
        };
        let op = automations::Op::parse(&body, &by)?;
        Ok(Json(self.automations.request(op).await?))
    }

    /// An automation's run started, waits, ended, or was skipped or
    /// missed: its name and the outcome (as on MQTT
    /// `automations/<name>/runs`).
    #[zbus(signal)]
    async fn automation_run(
        emitter: &SignalEmitter<'_>,
        name: &str,
        outcome_json: Json<Value>,
    ) -> zbus::Result<()>;

    /// A session as markdown: the conversation with timestamps, tool calls
    /// and results.
    #[zbus(out_args("markdown"))]
    async fn show_session(&self, session: &str) -> Result<String, DbusError> {
        Ok(self.assistant()?.session_markdown(session).await?)
    }

    /// An agent action waits for a person's answer. `details_json`:
    /// approval_id, session, device, service, action, params, risk,
    /// requested_at, expires_at (unix ms).
    #[zbus(signal)]
    async fn approval_requested(
        emitter: &SignalEmitter<'_>,
        approval_id: &str,
        details_json: Json<PendingApproval>,
    ) -> zbus::Result<()>;

    /// An event of an agent run in `session`: tool_call, tool_result,
    /// approval_requested, text_delta, final or error (docs/agent.md).
    #[zbus(signal)]
    async fn session_event(
        emitter: &SignalEmitter<'_>,
        session: &str,
        event_json: Json<AgentEvent>,
    ) -> zbus::Result<()>;

    /// A call on (device, service) changed state: `executing`, then
    /// `success` or `error`. `details_json` is the status object of the
    /// MQTT status topic (action, times, duration, error).
    #[zbus(signal)]
    async fn service_status_changed(
        emitter: &SignalEmitter<'_>,
        device: &str,
        service: &str,
        state: &str,
        details_json: Json<ServiceStatus>,
    ) -> zbus::Result<()>;

    /// A device came online or went offline.
    #[zbus(signal)]
    async fn device_availability_changed(
        emitter: &SignalEmitter<'_>,
        device: &str,
        online: bool,
    ) -> zbus::Result<()>;

    /// The daemon's version.
    #[zbus(property(emits_changed_signal = "const"))]
    async fn version(&self) -> String {
        env!("CARGO_PKG_VERSION").to_owned()
    }

    /// How many devices the daemon knows (online or not), as `ListDevices`.
    #[zbus(property)]
    async fn device_count(&self) -> u32 {
        self.device_count.load(Ordering::Relaxed)
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
pub(super) mod tests {
    use super::*;
    use droidwarden_bridge::Registry;

    /// The interface over an empty registry, without the agent, with
    /// automations whose driver never runs.
    pub(in crate::dbus) fn iface() -> Daemon1 {
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
        let page = include_str!("../../../docs/dbus-api.md");
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
