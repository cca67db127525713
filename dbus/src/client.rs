//! The CLI's way to the running daemon: `droidwarden devices | call |
//! status | ask | approvals | approve | deny | sessions | session show`
//! call `org.droidwarden.Daemon1` on the chosen bus and turn the
//! replies, and the bus's own errors, back into [`WireError`]s.
//!
//! Every call goes through [`Daemon1Proxy`], which zbus generates from the
//! daemon's own interface (`super::Daemon1`): the method names, argument
//! types and reply types are the server's, so a method renamed there does
//! not compile here, and a JSON reply arrives as its type
//! ([`super::json`]). This module adds what the proxy does not know: a
//! time limit on every call, the daemon's bound on a `Call`, what a missing
//! daemon or a bus's refusal means to the user, and the fallback to
//! `CallChecked` for a daemon without `CallCheckedTicket`. The signals it
//! waits for are subscribed by match rules (the proxy's own streams need a
//! bus to resolve the daemon's name) and read with the proxy's signal types.
//!
//! The same calls go over the daemon's private socket ([`super::p2p`])
//! when there is no bus to find it on: a peer-to-peer connection, so no
//! `NameHasOwner` (and the destination the proxy sends is ignored there).
//!
//! A daemon that is not there is said so plainly, naming the bus (and the
//! socket); the CLI never falls back to working in-process on its own
//! (`--local` does that, when asked for).

use super::json::{AutomationRequest, AutomationSummary, StatusReport};
use super::{Bus, CallAwaitsApproval, Daemon1Proxy, INTERFACE, NAME, PATH, error};
use droidwarden_agent::{ApprovalOutcome, PendingApproval, SessionSummary};
use droidwarden_bridge::DeviceInfo;
use droidwarden_services::{ErrorCode, WireError};
use error::DbusError;
use serde_json::Value;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long the bus may take to answer the daemon's own quick methods.
const QUICK: Duration = Duration::from_secs(10);
/// What a call may take beyond the daemon's own bound on it.
const CALL_MARGIN: Duration = Duration::from_secs(5);
/// The D-Bus name of the signal `CallCheckedTicket` waits for, for its
/// match rule (checked against the interface by a test).
pub(super) const CALL_AWAITS_APPROVAL: &str = "CallAwaitsApproval";
/// The D-Bus name of the agent's event signal, for its match rule.
pub(super) const SESSION_EVENT: &str = "SessionEvent";

/// A connection to the bus the daemon is on.
#[derive(Debug)]
pub struct Client {
    conn: zbus::Connection,
    /// The daemon's object, through the proxy generated from its interface.
    daemon: Daemon1Proxy<'static>,
    bus: Bus,
    /// `Some`: a peer-to-peer connection to the daemon's private socket.
    socket: Option<PathBuf>,
    call_timeout: Duration,
    local_hint: bool,
}

impl Client {
    /// The client on `conn`: the proxy for the daemon's object on it,
    /// without a property cache (which would ask the bus for the name's
    /// owner and subscribe to changes: nothing here reads a property).
    async fn on(
        conn: zbus::Connection,
        bus: Bus,
        socket: Option<PathBuf>,
        call_timeout: Duration,
        local_hint: bool,
    ) -> zbus::Result<Self> {
        let daemon = Daemon1Proxy::builder(&conn)
            .cache_properties(zbus::proxy::CacheProperties::No)
            .build()
            .await?;
        Ok(Self {
            conn,
            daemon,
            bus,
            socket,
            call_timeout,
            local_hint,
        })
    }

    /// Connect to `bus` and check that the daemon is there. `call_timeout`
    /// is the bound on one action this process's configuration gives, used
    /// when the daemon cannot say its own (`CallTimeout`);
    /// `local_hint` says whether the command has `--local` to suggest.
    ///
    /// # Errors
    /// No bus, or no daemon on it, with a message that says which.
    pub async fn connect(
        bus: Bus,
        call_timeout: Duration,
        local_hint: bool,
    ) -> Result<Self, WireError> {
        let unreachable = |e: &dyn std::fmt::Display| {
            let mut error = WireError::new(
                ErrorCode::Internal,
                format!(
                    "cannot reach the droidwarden daemon: {e}; if it runs on the other bus, say so with --bus{}",
                    if local_hint {
                        ", or use --local to work without it"
                    } else {
                        ""
                    },
                ),
            );
            error.retryable = true;
            error
        };
        let conn = bus.connect(Ok).await.map_err(|e| unreachable(&e))?;
        let client = Self::on(conn, bus, None, call_timeout, local_hint)
            .await
            .map_err(|e| unreachable(&e))?;
        if client.name_has_owner().await? {
            Ok(client)
        } else {
            Err(client.not_running())
        }
    }

    /// Connect to `bus` and check that the daemon is there, as
    /// [`Client::connect`], but say only what was found when it is not
    /// (for a message that names every place looked at).
    ///
    /// # Errors
    /// No bus, or no daemon on it: why, in a few words.
    pub async fn probe(bus: Bus, call_timeout: Duration, local_hint: bool) -> Result<Self, String> {
        let conn = bus.connect(Ok).await.map_err(|e| e.to_string())?;
        let client = Self::on(conn, bus, None, call_timeout, local_hint)
            .await
            .map_err(|e| e.to_string())?;
        match client.name_has_owner().await {
            Ok(true) => Ok(client),
            Ok(false) => Err(format!("{NAME} has no owner")),
            Err(e) => Err(e.message),
        }
    }

    /// Connect to the daemon's private socket at `path` (peer to peer).
    ///
    /// # Errors
    /// Nothing listens there, or the handshake fails: why, in a few words.
    pub async fn over_socket(
        path: &Path,
        call_timeout: Duration,
        local_hint: bool,
    ) -> Result<Self, String> {
        let connect = async {
            let stream = tokio::net::UnixStream::connect(path)
                .await
                .map_err(|e| e.to_string())?;
            let conn = zbus::connection::Builder::unix_stream(stream)
                .p2p()
                .build()
                .await
                .map_err(|e| e.to_string())?;
            Self::on(
                conn,
                Bus::Session,
                Some(path.to_owned()),
                call_timeout,
                local_hint,
            )
            .await
            .map_err(|e| e.to_string())
        };
        match tokio::time::timeout(QUICK, connect).await {
            Ok(result) => result,
            Err(_) => Err(format!("no answer within {QUICK:?}")),
        }
    }

    /// Where the daemon was reached: "the session bus", "the socket PATH".
    fn place(&self) -> String {
        match &self.socket {
            Some(path) => format!("the socket {}", path.display()),
            None => format!("the {} bus", self.bus.as_str()),
        }
    }

    /// `ListDevices()`.
    pub async fn list_devices(&self) -> Result<Vec<DeviceInfo>, WireError> {
        let reply = self.within("ListDevices", QUICK, self.daemon.list_devices());
        Ok(reply.await?.0)
    }

    /// `Status()`.
    pub async fn status(&self) -> Result<StatusReport, WireError> {
        Ok(self.within("Status", QUICK, self.daemon.status()).await?.0)
    }

    /// The daemon's own bound on a call on `device` (`CallTimeout`), or,
    /// from a daemon without that method or for an unknown device, the
    /// bound this process's configuration gives.
    pub async fn call_bound(&self, device: Option<&str>) -> Duration {
        let asked = self.daemon.call_timeout(device.unwrap_or(""));
        match self.within("CallTimeout", QUICK, asked).await {
            Ok(ms) if ms > 0 => Duration::from_millis(ms),
            Ok(_) => self.call_timeout,
            Err(e) => {
                tracing::debug!(error = %e, "no CallTimeout from the daemon; using the local bound");
                self.call_timeout
            }
        }
    }

    /// `Call(device, service, action, params_json)`: the action's result.
    /// Waits as long
    /// as the daemon may take to answer — its own bound on this call
    /// (`CallTimeout`; for a companion phone that includes the offline
    /// queue) plus a margin — so the daemon's answer (`device_offline`
    /// for a change that was never sent, `timeout` for one that may have
    /// run) is what the user sees. Should even that pass, the error says
    /// that the call may still run.
    pub async fn call(
        &self,
        device: Option<&str>,
        service: &str,
        action: &str,
        params: &Value,
    ) -> Result<Value, WireError> {
        let bound = self.call_bound(device).await;
        let limit = bound + CALL_MARGIN;
        let params = params.to_string();
        let call = self
            .daemon
            .call(device.unwrap_or(""), service, action, &params);
        // The inner limit is set beyond ours, so that ours, with its
        // precise message, fires first.
        let reply = self.within("Call", limit + CALL_MARGIN, call);
        match tokio::time::timeout(limit, reply).await {
            Ok(result) => Ok(result?.0),
            Err(_) => {
                let mut error = WireError::new(
                    ErrorCode::Timeout,
                    format!(
                        "the droidwarden daemon did not answer Call within {:.1} s, longer than its own bound on this call ({:.1} s); the CLI gave up waiting but the call was not cancelled: it may still run in the daemon, and a change may still take effect (check `droidwarden status`)",
                        limit.as_secs_f64(),
                        bound.as_secs_f64()
                    ),
                );
                // Not to be repeated blindly: it may still run.
                error.retryable = false;
                Err(error)
            }
        }
    }

    /// `CallChecked(device, service, action, params_json)`: a call
    /// under the approval policy, which may wait up to `approval_wait` for
    /// a person before it runs, then take up to `bound` (the daemon's
    /// [`Client::call_bound`] for the device).
    pub async fn call_checked(
        &self,
        device: Option<&str>,
        command: &droidwarden_services::Command,
        approval_wait: Duration,
        bound: Duration,
    ) -> Result<Value, WireError> {
        let limit = approval_wait + bound + CALL_MARGIN;
        let params = command.params_json().to_string();
        let call = self.daemon.call_checked(
            device.unwrap_or(""),
            command.service_id(),
            command.action_name(),
            &params,
        );
        let reply = self.within("CallChecked", limit + CALL_MARGIN, call);
        match tokio::time::timeout(limit, reply).await {
            Ok(result) => Ok(result?.0),
            Err(_) => Err(not_answered("CallChecked", limit)),
        }
    }

    /// `CallCheckedTicket`: [`Client::call_checked`], sending the approval
    /// id to `on_approval` as soon as the call waits for a person (the
    /// `CallAwaitsApproval` signal for a random ticket of this call), so
    /// the caller can ask for the answer itself. A daemon without the
    /// method gets `CallChecked` (and `on_approval` never hears).
    pub async fn call_checked_ticket(
        &self,
        device: Option<&str>,
        command: &droidwarden_services::Command,
        approval_wait: Duration,
        bound: Duration,
        on_approval: tokio::sync::oneshot::Sender<String>,
    ) -> Result<Value, WireError> {
        use futures_util::StreamExt as _;
        let ticket = ticket();
        let mut signals = self
            .stream(self.signal_rule(CALL_AWAITS_APPROVAL, Some(&ticket))?, 16)
            .await?;
        let limit = approval_wait + bound + CALL_MARGIN;
        let params = command.params_json().to_string();
        let call = self.daemon.call_checked_ticket(
            device.unwrap_or(""),
            command.service_id(),
            command.action_name(),
            &params,
            &ticket,
        );
        // Not through `within`: an unknown method is an answer here.
        let reply = tokio::time::timeout(limit + CALL_MARGIN, call);
        let watch = async {
            let mut on_approval = Some(on_approval);
            while let Some(message) = signals.next().await {
                let Some(signal) = message.ok().and_then(CallAwaitsApproval::from_message) else {
                    continue;
                };
                let Ok(args) = signal.args() else { continue };
                if *args.ticket() == ticket
                    && let Some(tx) = on_approval.take()
                {
                    let _ = tx.send((*args.approval_id()).to_owned());
                }
            }
            std::future::pending::<()>().await;
        };
        let answered = tokio::select! {
            answered = tokio::time::timeout(limit, reply) => answered,
            () = watch => return Err(WireError::new(ErrorCode::Internal, "signal watch ended")),
        };
        match answered {
            Ok(Ok(Ok(result))) => Ok(result.0),
            Ok(Ok(Err(e))) if is_unknown_method(&e) => {
                tracing::debug!("the daemon has no CallCheckedTicket; using CallChecked");
                self.call_checked(device, command, approval_wait, bound)
                    .await
            }
            Ok(Ok(Err(e))) => Err(self.to_wire("CallCheckedTicket", e)),
            Ok(Err(_)) | Err(_) => Err(not_answered("CallCheckedTicket", limit)),
        }
    }

    /// The match rule for the daemon's signal `member` (and, with `arg0`,
    /// only those whose first argument is that). On the socket there is no
    /// bus name to match the sender by.
    fn signal_rule<'m>(
        &self,
        member: &'m str,
        arg0: Option<&'m str>,
    ) -> Result<zbus::MatchRule<'m>, WireError> {
        let mut rule = zbus::MatchRule::builder().msg_type(zbus::message::Type::Signal);
        if self.socket.is_none() {
            rule = rule.sender(NAME).map_err(bad_rule)?;
        }
        rule = rule
            .path(PATH)
            .and_then(|b| b.interface(INTERFACE))
            .and_then(|b| b.member(member))
            .map_err(bad_rule)?;
        if let Some(arg0) = arg0 {
            rule = rule.arg(0, arg0).map_err(bad_rule)?;
        }
        Ok(rule.build())
    }

    /// The messages matching `rule` (at most `capacity` queued), once the
    /// bus or the daemon accepted the rule.
    async fn stream(
        &self,
        rule: zbus::MatchRule<'_>,
        capacity: usize,
    ) -> Result<zbus::MessageStream, WireError> {
        let stream = zbus::MessageStream::for_match_rule(rule, &self.conn, Some(capacity));
        match tokio::time::timeout(QUICK, stream).await {
            Ok(Ok(stream)) => Ok(stream),
            Ok(Err(e)) => Err(self.to_wire("AddMatch", e.into())),
            Err(_) => Err(WireError::new(
                ErrorCode::Timeout,
                format!(
                    "{} did not accept a match rule within {QUICK:?}",
                    self.place()
                ),
            )),
        }
    }

    /// Subscribe to `SessionEvent` signals (all sessions: a new session's
    /// id is only known once `Ask` returns). Subscribe before calling
    /// [`Client::ask`] so that no event is missed. Each message is a
    /// `SessionEvent` (`super::SessionEvent::from_message` reads it).
    pub async fn session_events(&self) -> Result<zbus::MessageStream, WireError> {
        self.stream(self.signal_rule(SESSION_EVENT, None)?, 1024)
            .await
    }

    /// `Ask(session, prompt)`: the session id.
    pub async fn ask(&self, session: Option<&str>, prompt: &str) -> Result<String, WireError> {
        let asked = self.daemon.ask(session.unwrap_or(""), prompt);
        self.within("Ask", QUICK, asked).await
    }

    /// `AskWith(session, prompt, options_json)`: the session id.
    pub async fn ask_with(
        &self,
        session: Option<&str>,
        prompt: &str,
        options_json: &str,
    ) -> Result<String, WireError> {
        let asked = self
            .daemon
            .ask_with(session.unwrap_or(""), prompt, options_json);
        self.within("AskWith", QUICK, asked).await
    }

    /// `RunSkill(session, skill, input_json)`: the session id.
    pub async fn run_skill(
        &self,
        session: Option<&str>,
        skill: &str,
        input_json: &str,
    ) -> Result<String, WireError> {
        let started = self
            .daemon
            .run_skill(session.unwrap_or(""), skill, input_json);
        self.within("RunSkill", QUICK, started).await
    }

    /// `ListApprovals()`.
    pub async fn list_approvals(&self) -> Result<Vec<PendingApproval>, WireError> {
        let listed = self.within("ListApprovals", QUICK, self.daemon.list_approvals());
        Ok(listed.await?.0)
    }

    /// `ApprovalHistory(limit)`.
    pub async fn approval_history(&self, limit: u32) -> Result<Vec<ApprovalOutcome>, WireError> {
        let listed = self.daemon.approval_history(limit);
        Ok(self.within("ApprovalHistory", QUICK, listed).await?.0)
    }

    /// `ListGrants()`.
    pub async fn list_grants(&self) -> Result<Vec<droidwarden_agent::Grant>, WireError> {
        let listed = self.within("ListGrants", QUICK, self.daemon.list_grants());
        Ok(listed.await?.0)
    }

    /// `Approve(id)`.
    pub async fn approve(&self, approval_id: &str) -> Result<(), WireError> {
        self.within("Approve", QUICK, self.daemon.approve(approval_id))
            .await
    }

    /// `AnswerApproval(id, options)`: an answer beyond yes or no (a grant
    /// for the run, edited parameters), the options as
    /// docs/dbus-api.md gives them.
    pub async fn answer_approval(
        &self,
        approval_id: &str,
        options: &Value,
    ) -> Result<(), WireError> {
        let options = options.to_string();
        let answered = self.daemon.answer_approval(approval_id, &options);
        self.within("AnswerApproval", QUICK, answered).await
    }

    /// `RevokeGrant(grant)`.
    pub async fn revoke_grant(&self, grant_id: &str) -> Result<(), WireError> {
        self.within("RevokeGrant", QUICK, self.daemon.revoke_grant(grant_id))
            .await
    }

    /// `Deny(id, reason)`.
    pub async fn deny(&self, approval_id: &str, reason: &str) -> Result<(), WireError> {
        self.within("Deny", QUICK, self.daemon.deny(approval_id, reason))
            .await
    }

    /// `ListSessions()`.
    pub async fn list_sessions(&self) -> Result<Vec<SessionSummary>, WireError> {
        let listed = self.within("ListSessions", QUICK, self.daemon.list_sessions());
        Ok(listed.await?.0)
    }

    /// `Automation(request)`: the answer, whose shape depends on the
    /// request (docs/automations.md).
    pub async fn automation(&self, request: &AutomationRequest) -> Result<Value, WireError> {
        let request = request.to_json();
        let answer = self.daemon.automation(&request);
        Ok(self.within("Automation", QUICK, answer).await?.0)
    }

    /// `Automation({"op": "list"})`: every automation.
    pub async fn automations(&self) -> Result<Vec<AutomationSummary>, WireError> {
        let listed = self.automation(&AutomationRequest::List).await?;
        serde_json::from_value(listed).map_err(|e| {
            WireError::new(
                ErrorCode::Internal,
                format!("unexpected reply to Automation: {e}"),
            )
        })
    }

    /// `ShowSession(id)`: markdown.
    pub async fn show_session(&self, session: &str) -> Result<String, WireError> {
        self.within("ShowSession", QUICK, self.daemon.show_session(session))
            .await
    }

    /// Whether the daemon still owns its name (over the socket: still
    /// answers a `Ping`).
    pub async fn daemon_running(&self) -> bool {
        if self.socket.is_some() {
            let ping = async {
                let peer = zbus::fdo::PeerProxy::builder(&self.conn)
                    .destination(NAME)?
                    .path(PATH)?
                    .cache_properties(zbus::proxy::CacheProperties::No)
                    .build()
                    .await?;
                peer.ping().await
            };
            return matches!(tokio::time::timeout(QUICK, ping).await, Ok(Ok(())));
        }
        self.name_has_owner().await.unwrap_or(false)
    }

    /// Whether the daemon owns its name on the bus (`NameHasOwner`).
    async fn name_has_owner(&self) -> Result<bool, WireError> {
        let asked = async {
            let bus = zbus::fdo::DBusProxy::builder(&self.conn)
                .cache_properties(zbus::proxy::CacheProperties::No)
                .build()
                .await?;
            let name = zbus::names::BusName::from_static_str(NAME)?;
            bus.name_has_owner(name).await.map_err(zbus::Error::from)
        };
        self.within("NameHasOwner", QUICK, asked).await
    }

    /// One call through the proxy, within `limit`, its failure said as a
    /// wire error (`method`, the D-Bus name, names it in messages only).
    async fn within<T, E: Into<DbusError>>(
        &self,
        method: &str,
        limit: Duration,
        call: impl Future<Output = Result<T, E>>,
    ) -> Result<T, WireError> {
        match tokio::time::timeout(limit, call).await {
            Err(_) => Err(WireError::new(
                ErrorCode::Timeout,
                format!(
                    "the droidwarden daemon did not answer {method} within {limit:?} on {}",
                    self.place()
                ),
            )),
            Ok(Err(e)) => Err(self.to_wire(method, e.into())),
            Ok(Ok(reply)) => Ok(reply),
        }
    }

    fn not_running(&self) -> WireError {
        let mut error = WireError::new(
            ErrorCode::Internal,
            format!(
                "droidwarden daemon is not running on the {} bus ({NAME} has no owner); start it{}",
                self.bus.as_str(),
                if self.local_hint {
                    ", or use --local"
                } else {
                    " (droidwarden daemon)"
                }
            ),
        );
        error.retryable = true;
        error
    }

    fn to_wire(&self, method: &str, e: DbusError) -> WireError {
        let e = match e {
            DbusError::Wire(e) => return e,
            DbusError::Zbus(e) => e,
        };
        let zbus::Error::MethodError(name, description, reply) = &e else {
            if let zbus::Error::Variant(e) = &e {
                // A reply that is not what the interface says (a JSON
                // reply that does not parse as its type).
                return WireError::new(
                    ErrorCode::Internal,
                    format!("unexpected reply to {method}: {e}"),
                );
            }
            return WireError::new(ErrorCode::Internal, format!("D-Bus {method}: {e}"));
        };
        if let Some(ours) = error::from_reply(name.as_str(), reply) {
            return ours;
        }
        let description = description.as_deref().unwrap_or("");
        match name.as_str() {
            "org.freedesktop.DBus.Error.ServiceUnknown"
            | "org.freedesktop.DBus.Error.NameHasNoOwner" => self.not_running(),
            "org.freedesktop.DBus.Error.AccessDenied" => WireError::new(
                ErrorCode::Denied,
                format!(
                    "{} refused {method}: {description} (on the system bus only root and the droidwarden group may call Call)",
                    self.place()
                ),
            ),
            "org.freedesktop.DBus.Error.NoReply" | "org.freedesktop.DBus.Error.Timeout" => {
                WireError::new(
                    ErrorCode::Timeout,
                    format!("no reply to {method}: {description}"),
                )
            }
            other => WireError::new(
                ErrorCode::Internal,
                format!("D-Bus {method}: {other}: {description}"),
            ),
        }
    }
}

/// Whether a call failed because the daemon has no such method (an older
/// daemon).
fn is_unknown_method(e: &DbusError) -> bool {
    matches!(
        e,
        DbusError::Zbus(zbus::Error::MethodError(name, _, _))
            if name.as_str() == "org.freedesktop.DBus.Error.UnknownMethod"
    )
}

/// A random ticket for `CallCheckedTicket` (16 bytes, hex).
fn ticket() -> String {
    use ring::rand::SecureRandom as _;
    let mut bytes = [0u8; 16];
    if ring::rand::SystemRandom::new().fill(&mut bytes).is_err() {
        // Unique enough within this process's calls: it only pairs a
        // call with its signal.
        return droidwarden_services::unique_suffix();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A match rule zbus refused (a name or path it does not accept).
fn bad_rule(e: zbus::Error) -> WireError {
    WireError::new(ErrorCode::Internal, format!("match rule: {e}"))
}

/// A checked call the daemon did not answer within `limit`.
/// The daemon did not answer within the time it gave itself: the call may
/// still run, so it is not retryable (a blind retry could make a change
/// twice).
fn not_answered(method: &str, limit: Duration) -> WireError {
    let mut error = WireError::new(
        ErrorCode::Timeout,
        format!(
            "the droidwarden daemon did not answer {method} within {:.1} s; the call was not cancelled and may still run (check `droidwarden status`)",
            limit.as_secs_f64()
        ),
    );
    error.retryable = false;
    error
}

/// `droidwarden mcp`'s way to the daemon: each method one D-Bus call.
impl droidwarden_core::phones::DaemonApi for Client {
    fn list_devices(&self) -> droidwarden_agent::BoxFuture<'_, Result<Vec<DeviceInfo>, WireError>> {
        Box::pin(Client::list_devices(self))
    }

    fn device_state<'a>(
        &'a self,
        device: &'a str,
    ) -> droidwarden_agent::BoxFuture<'a, Result<Option<Value>, WireError>> {
        Box::pin(async move {
            self.status()
                .await?
                .devices
                .into_iter()
                .find(|d| d.device.name.as_str() == device)
                .map(serde_json::to_value)
                .transpose()
                .map_err(|e| WireError::new(ErrorCode::Internal, format!("device state: {e}")))
        })
    }

    fn call_bound<'a>(
        &'a self,
        device: Option<&'a str>,
    ) -> droidwarden_agent::BoxFuture<'a, Duration> {
        Box::pin(Client::call_bound(self, device))
    }

    fn call_checked<'a>(
        &'a self,
        device: Option<&'a str>,
        command: &'a droidwarden_services::Command,
        approval_wait: Duration,
        bound: Duration,
        on_approval: Option<tokio::sync::oneshot::Sender<String>>,
    ) -> droidwarden_agent::BoxFuture<'a, Result<Value, WireError>> {
        Box::pin(async move {
            match on_approval {
                None => Client::call_checked(self, device, command, approval_wait, bound).await,
                Some(tell) => {
                    self.call_checked_ticket(device, command, approval_wait, bound, tell)
                        .await
                }
            }
        })
    }

    fn approve<'a>(
        &'a self,
        approval_id: &'a str,
    ) -> droidwarden_agent::BoxFuture<'a, Result<(), WireError>> {
        Box::pin(Client::approve(self, approval_id))
    }

    fn deny<'a>(
        &'a self,
        approval_id: &'a str,
        reason: &'a str,
    ) -> droidwarden_agent::BoxFuture<'a, Result<(), WireError>> {
        Box::pin(Client::deny(self, approval_id, reason))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interface::SessionEvent;
    use crate::{Daemon1, p2p, tests::iface};
    use droidwarden_agent::AgentEvent;
    use futures_util::StreamExt as _;
    use tokio_util::sync::CancellationToken;

    /// The CLI's own way in, end to end in one process: the proxy over
    /// the daemon's socket, the replies as their types, an error of ours
    /// as its wire error, and the signals the client subscribes to by
    /// match rule, read with the proxy's signal types.
    async fn next(stream: &mut zbus::MessageStream) -> zbus::Message {
        let next = tokio::time::timeout(Duration::from_secs(5), stream.next());
        next.await.expect("in time").expect("a signal").unwrap()
    }

    #[tokio::test]
    async fn the_client_calls_the_daemon_on_its_socket_and_hears_its_signals() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(p2p::SOCKET_NAME);
        let server = p2p::bind(path.clone(), iface()).await.expect("bind");
        let peers = server.peers();
        let shutdown = CancellationToken::new();
        let serving = tokio::spawn(server.serve(shutdown.clone()));
        let local_bound = Duration::from_secs(15);
        let client = Client::over_socket(&path, local_bound, false)
            .await
            .expect("connect");

        assert_eq!(client.list_devices().await.unwrap(), Vec::new());
        let status = client.status().await.unwrap();
        assert!(status.devices.is_empty() && status.problems.is_empty());
        assert_eq!(status.daemon.version, env!("CARGO_PKG_VERSION"));
        assert!(!status.daemon.agent.on);
        // No such device: the daemon says 0, so the local bound holds.
        assert_eq!(client.call_bound(Some("nowhere")).await, local_bound);
        let off = client.ask(None, "hello").await.unwrap_err();
        assert_eq!(off.code, ErrorCode::InvalidRequest, "{off}");
        assert!(off.message.contains("agent"), "{off}");
        let bad = client
            .call(None, "no_such_service", "x", &serde_json::json!({}))
            .await
            .unwrap_err();
        assert_eq!(bad.code, ErrorCode::UnknownService, "{bad}");
        assert!(client.daemon_running().await);

        let mut tickets = client
            .stream(
                client
                    .signal_rule(CALL_AWAITS_APPROVAL, Some("t-1"))
                    .unwrap(),
                4,
            )
            .await
            .unwrap();
        let mut events = client.session_events().await.unwrap();
        let event: AgentEvent = serde_json::from_value(serde_json::json!({
            "run_id": "r-1", "session_id": "s-1", "event": "text_delta", "text": "done",
        }))
        .unwrap();
        for target in peers.targets() {
            Daemon1::call_awaits_approval(&target.emitter, "t-1", "a-1")
                .await
                .unwrap();
            Daemon1::session_event(&target.emitter, "s-1", crate::Json(event.clone()))
                .await
                .unwrap();
        }
        let signal = CallAwaitsApproval::from_message(next(&mut tickets).await).unwrap();
        let args = signal.args().unwrap();
        assert_eq!((*args.ticket(), *args.approval_id()), ("t-1", "a-1"));
        let signal = SessionEvent::from_message(next(&mut events).await).unwrap();
        let args = signal.args().unwrap();
        assert_eq!((*args.session(), &args.event_json().0), ("s-1", &event));

        // Gone before the shutdown (which would wait for a connected
        // client's calls).
        drop((tickets, events, client));
        tokio::time::timeout(Duration::from_secs(5), async {
            while !peers.targets().is_empty() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("the client leaves");
        shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(10), serving)
            .await
            .expect("serve stops")
            .unwrap();
    }
}
