//! The CLI's way to the running daemon: `droidwarden devices | call |
//! status | ask | approvals | approve | deny | sessions | session show`
//! call `org.droidwarden.Daemon1` on the chosen bus and turn the
//! replies, and the bus's own errors, back into [`WireError`]s.
//!
//! The same calls go over the daemon's private socket ([`super::p2p`])
//! when there is no bus to find it on: a peer-to-peer connection, so no
//! destination name and no `NameHasOwner`.
//!
//! A daemon that is not there is said so plainly, naming the bus (and the
//! socket); the CLI never falls back to working in-process on its own
//! (`--local` does that, when asked for).

use super::{Bus, INTERFACE, NAME, PATH, error};
use droidwarden_services::{ErrorCode, WireError};
use serde::Serialize;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;
use zbus::zvariant::DynamicType;

/// How long the bus may take to answer the daemon's own quick methods.
const QUICK: Duration = Duration::from_secs(10);
/// What a call may take beyond the daemon's own bound on it.
const CALL_MARGIN: Duration = Duration::from_secs(5);

/// A connection to the bus the daemon is on.
#[derive(Debug)]
pub(crate) struct Client {
    conn: zbus::Connection,
    bus: Bus,
    /// `Some`: a peer-to-peer connection to the daemon's private socket.
    socket: Option<PathBuf>,
    call_timeout: Duration,
    local_hint: bool,
}

impl Client {
    /// Connect to `bus` and check that the daemon is there. `call_timeout`
    /// is the bound on one action this process's configuration gives, used
    /// when the daemon cannot say its own (`CallTimeout`);
    /// `local_hint` says whether the command has `--local` to suggest.
    ///
    /// # Errors
    /// No bus, or no daemon on it, with a message that says which.
    pub(crate) async fn connect(
        bus: Bus,
        call_timeout: Duration,
        local_hint: bool,
    ) -> Result<Self, WireError> {
        let conn = bus.connect(Ok).await.map_err(|e| {
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
        })?;
        let client = Self {
            conn,
            bus,
            socket: None,
            call_timeout,
            local_hint,
        };
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
    pub(crate) async fn probe(
        bus: Bus,
        call_timeout: Duration,
        local_hint: bool,
    ) -> Result<Self, String> {
        let conn = bus.connect(Ok).await.map_err(|e| e.to_string())?;
        let client = Self {
            conn,
            bus,
            socket: None,
            call_timeout,
            local_hint,
        };
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
    pub(crate) async fn over_socket(
        path: &Path,
        call_timeout: Duration,
        local_hint: bool,
    ) -> Result<Self, String> {
        let connect = async {
            let stream = tokio::net::UnixStream::connect(path)
                .await
                .map_err(|e| e.to_string())?;
            zbus::connection::Builder::unix_stream(stream)
                .p2p()
                .build()
                .await
                .map_err(|e| e.to_string())
        };
        let conn = match tokio::time::timeout(QUICK, connect).await {
            Ok(Ok(conn)) => conn,
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err(format!("no answer within {QUICK:?}")),
        };
        Ok(Self {
            conn,
            bus: Bus::Session,
            socket: Some(path.to_owned()),
            call_timeout,
            local_hint,
        })
    }

    /// Where the daemon was reached: "the session bus", "the socket PATH".
    fn place(&self) -> String {
        match &self.socket {
            Some(path) => format!("the socket {}", path.display()),
            None => format!("the {} bus", self.bus.as_str()),
        }
    }

    /// `ListDevices()`, parsed.
    pub(crate) async fn list_devices(&self) -> Result<Value, WireError> {
        let text: String = self.invoke("ListDevices", &(), QUICK).await?;
        parse(&text)
    }

    /// `Status()`, parsed.
    pub(crate) async fn status(&self) -> Result<Value, WireError> {
        let text: String = self.invoke("Status", &(), QUICK).await?;
        parse(&text)
    }

    /// The daemon's own bound on a call on `device` (`CallTimeout`), or,
    /// from a daemon without that method or for an unknown device, the
    /// bound this process's configuration gives.
    pub(crate) async fn call_bound(&self, device: Option<&str>) -> Duration {
        match self
            .invoke::<_, u64>("CallTimeout", &(device.unwrap_or(""),), QUICK)
            .await
        {
            Ok(ms) if ms > 0 => Duration::from_millis(ms),
            Ok(_) => self.call_timeout,
            Err(e) => {
                tracing::debug!(error = %e, "no CallTimeout from the daemon; using the local bound");
                self.call_timeout
            }
        }
    }

    /// `Call(device, service, action, params_json)`, parsed. Waits as long
    /// as the daemon may take to answer — its own bound on this call
    /// (`CallTimeout`; for a companion phone that includes the offline
    /// queue) plus a margin — so the daemon's answer (`device_offline`
    /// for a change that was never sent, `timeout` for one that may have
    /// run) is what the user sees. Should even that pass, the error says
    /// that the call may still run.
    pub(crate) async fn call(
        &self,
        device: Option<&str>,
        service: &str,
        action: &str,
        params: &Value,
    ) -> Result<Value, WireError> {
        let bound = self.call_bound(device).await;
        let limit = bound + CALL_MARGIN;
        let params = params.to_string();
        let body = (device.unwrap_or(""), service, action, params.as_str());
        // The bus's own reply timeout is set beyond ours, so that ours,
        // with its precise message, fires first.
        let reply = self.invoke::<_, String>("Call", &body, limit + CALL_MARGIN);
        let text = match tokio::time::timeout(limit, reply).await {
            Ok(result) => result?,
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
                return Err(error);
            }
        };
        parse(&text)
    }

    /// `CallChecked(device, service, action, params_json)`, parsed: a call
    /// under the approval policy, which may wait up to `approval_wait` for
    /// a person before it runs, then take up to `bound` (the daemon's
    /// [`Client::call_bound`] for the device).
    pub(crate) async fn call_checked(
        &self,
        device: Option<&str>,
        command: &droidwarden_services::Command,
        approval_wait: Duration,
        bound: Duration,
    ) -> Result<Value, WireError> {
        let limit = approval_wait + bound + CALL_MARGIN;
        let params = command.params_json().to_string();
        let body = call_args(device, command, &params);
        let reply = self.invoke::<_, String>("CallChecked", &body, limit + CALL_MARGIN);
        match tokio::time::timeout(limit, reply).await {
            Ok(result) => parse(&result?),
            Err(_) => Err(not_answered("CallChecked", limit)),
        }
    }

    /// `CallCheckedTicket`: [`Client::call_checked`], sending the approval
    /// id to `on_approval` as soon as the call waits for a person (the
    /// `CallAwaitsApproval` signal for a random ticket of this call), so
    /// the caller can ask for the answer itself. A daemon without the
    /// method gets `CallChecked` (and `on_approval` never hears).
    pub(crate) async fn call_checked_ticket(
        &self,
        device: Option<&str>,
        command: &droidwarden_services::Command,
        approval_wait: Duration,
        bound: Duration,
        on_approval: tokio::sync::oneshot::Sender<String>,
    ) -> Result<Value, WireError> {
        use futures_util::StreamExt as _;
        let ticket = ticket();
        let mut signals = self.signals("CallAwaitsApproval", &ticket).await?;
        let limit = approval_wait + bound + CALL_MARGIN;
        let params = command.params_json().to_string();
        let (device_arg, service, action, params_arg) = call_args(device, command, &params);
        let body = (device_arg, service, action, params_arg, ticket.as_str());
        let reply = self.invoke::<_, String>("CallCheckedTicket", &body, limit + CALL_MARGIN);
        let watch = async {
            let mut on_approval = Some(on_approval);
            while let Some(message) = signals.next().await {
                let Ok(message) = message else { continue };
                let Ok((for_ticket, id)) = message.body().deserialize::<(String, String)>() else {
                    continue;
                };
                if for_ticket == ticket
                    && let Some(tx) = on_approval.take()
                {
                    let _ = tx.send(id);
                }
            }
            std::future::pending::<()>().await;
        };
        let answered = tokio::select! {
            answered = tokio::time::timeout(limit, reply) => answered,
            () = watch => return Err(WireError::new(ErrorCode::Internal, "signal watch ended")),
        };
        match answered {
            Ok(Ok(text)) => parse(&text),
            Ok(Err(e)) if e.message.contains("UnknownMethod") => {
                tracing::debug!("the daemon has no CallCheckedTicket; using CallChecked");
                self.call_checked(device, command, approval_wait, bound)
                    .await
            }
            Ok(Err(e)) => Err(e),
            Err(_) => Err(not_answered("CallCheckedTicket", limit)),
        }
    }

    /// The daemon's signal `member` whose first argument is `arg0`.
    async fn signals(&self, member: &str, arg0: &str) -> Result<zbus::MessageStream, WireError> {
        self.stream(self.signal_rule(member, Some(arg0))?, 16).await
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
            Ok(Err(e)) => Err(self.to_wire("AddMatch", e)),
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
    /// [`Client::ask`] so that no event is missed.
    pub(crate) async fn session_events(&self) -> Result<zbus::MessageStream, WireError> {
        self.stream(self.signal_rule("SessionEvent", None)?, 1024)
            .await
    }

    /// `Ask(session, prompt)`: the session id.
    pub(crate) async fn ask(
        &self,
        session: Option<&str>,
        prompt: &str,
    ) -> Result<String, WireError> {
        self.invoke("Ask", &(session.unwrap_or(""), prompt), QUICK)
            .await
    }

    /// `AskWith(session, prompt, options_json)`: the session id.
    pub(crate) async fn ask_with(
        &self,
        session: Option<&str>,
        prompt: &str,
        options_json: &str,
    ) -> Result<String, WireError> {
        self.invoke(
            "AskWith",
            &(session.unwrap_or(""), prompt, options_json),
            QUICK,
        )
        .await
    }

    /// `RunSkill(session, skill, input_json)`: the session id.
    pub(crate) async fn run_skill(
        &self,
        session: Option<&str>,
        skill: &str,
        input_json: &str,
    ) -> Result<String, WireError> {
        self.invoke(
            "RunSkill",
            &(session.unwrap_or(""), skill, input_json),
            QUICK,
        )
        .await
    }

    /// `ListApprovals()`, parsed.
    pub(crate) async fn list_approvals(&self) -> Result<Value, WireError> {
        let text: String = self.invoke("ListApprovals", &(), QUICK).await?;
        parse(&text)
    }

    /// `ApprovalHistory(limit)`, parsed.
    pub(crate) async fn approval_history(&self, limit: u32) -> Result<Value, WireError> {
        let text: String = self.invoke("ApprovalHistory", &(limit,), QUICK).await?;
        parse(&text)
    }

    /// `Approve(id)`.
    pub(crate) async fn approve(&self, approval_id: &str) -> Result<(), WireError> {
        self.invoke("Approve", &(approval_id,), QUICK).await
    }

    /// `Deny(id, reason)`.
    pub(crate) async fn deny(&self, approval_id: &str, reason: &str) -> Result<(), WireError> {
        self.invoke("Deny", &(approval_id, reason), QUICK).await
    }

    /// `ListSessions()`, parsed.
    pub(crate) async fn list_sessions(&self) -> Result<Value, WireError> {
        let text: String = self.invoke("ListSessions", &(), QUICK).await?;
        parse(&text)
    }

    /// `Automation(request)`, parsed (docs/automations.md).
    pub(crate) async fn automation(&self, request_json: &str) -> Result<Value, WireError> {
        let text: String = self.invoke("Automation", &(request_json,), QUICK).await?;
        parse(&text)
    }

    /// `ShowSession(id)`: markdown.
    pub(crate) async fn show_session(&self, session: &str) -> Result<String, WireError> {
        self.invoke("ShowSession", &(session,), QUICK).await
    }

    /// Whether the daemon still owns its name (over the socket: still
    /// answers a `Ping`).
    pub(crate) async fn daemon_running(&self) -> bool {
        if self.socket.is_some() {
            return self
                .invoke_at::<_, ()>(None, PATH, "org.freedesktop.DBus.Peer", "Ping", &(), QUICK)
                .await
                .is_ok();
        }
        self.name_has_owner().await.unwrap_or(false)
    }

    async fn name_has_owner(&self) -> Result<bool, WireError> {
        self.invoke_at(
            Some("org.freedesktop.DBus"),
            "/org/freedesktop/DBus",
            "org.freedesktop.DBus",
            "NameHasOwner",
            &(NAME,),
            QUICK,
        )
        .await
    }

    async fn invoke<B, R>(&self, method: &str, body: &B, limit: Duration) -> Result<R, WireError>
    where
        B: Serialize + DynamicType,
        R: for<'d> serde::Deserialize<'d> + zbus::zvariant::Type,
    {
        // A peer-to-peer connection has no names: the peer is the daemon.
        let destination = self.socket.is_none().then_some(NAME);
        self.invoke_at(destination, PATH, INTERFACE, method, body, limit)
            .await
    }

    async fn invoke_at<B, R>(
        &self,
        destination: Option<&str>,
        path: &str,
        interface: &str,
        method: &str,
        body: &B,
        limit: Duration,
    ) -> Result<R, WireError>
    where
        B: Serialize + DynamicType,
        R: for<'d> serde::Deserialize<'d> + zbus::zvariant::Type,
    {
        let call = self
            .conn
            .call_method(destination, path, Some(interface), method, body);
        let reply = match tokio::time::timeout(limit, call).await {
            Err(_) => {
                return Err(WireError::new(
                    ErrorCode::Timeout,
                    format!(
                        "the droidwarden daemon did not answer {method} within {limit:?} on {}",
                        self.place()
                    ),
                ));
            }
            Ok(Err(e)) => return Err(self.to_wire(method, e)),
            Ok(Ok(reply)) => reply,
        };
        reply.body().deserialize::<R>().map_err(|e| {
            WireError::new(
                ErrorCode::Internal,
                format!("unexpected reply to {method}: {e}"),
            )
        })
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

    fn to_wire(&self, method: &str, e: zbus::Error) -> WireError {
        let zbus::Error::MethodError(name, description, reply) = &e else {
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

fn parse(text: &str) -> Result<Value, WireError> {
    serde_json::from_str(text).map_err(|e| {
        WireError::new(
            ErrorCode::Internal,
            format!("the daemon answered with invalid JSON: {e}"),
        )
    })
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

/// The arguments of `CallChecked`: device (empty for the only one),
/// service, action, parameters as JSON.
fn call_args<'a>(
    device: Option<&'a str>,
    command: &droidwarden_services::Command,
    params: &'a str,
) -> (&'a str, &'static str, &'static str, &'a str) {
    (
        device.unwrap_or(""),
        command.service_id(),
        command.action_name(),
        params,
    )
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
