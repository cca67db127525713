//! Elicitation: an MCP call that waits for approval asks the person in the
//! MCP client itself, and the answer is recorded as the daemon approval's
//! decision (the same `Approve`/`Deny` path as `droidwarden approve`), so
//! the daemon keeps the one record of who approved what.
//!
//! Two protocol eras:
//!
//! * clients of 2025-11-25 and earlier that declared `elicitation` (form
//!   mode): an `elicitation/create` request during the `tools/call`
//!   ([`Mode::Request`]); an error or a timeout falls back to waiting for
//!   an answer elsewhere;
//! * clients of 2026-07-28, which forbids server-to-client requests: the
//!   call returns an `InputRequiredResult` holding the elicitation and an
//!   opaque `requestState` ([`Mode::Input`]); the retry carries the answer.
//!   The state stays here ([`Pending`]): the handle is 256 random bits,
//!   single-use, bound to the tool, its arguments and the client, and
//!   forgotten once the approval would have expired.
//!
//! An approval answered elsewhere first wins: the client's answer is then
//! refused by the daemon as already answered, and ignored.
//!
//! The daemon's side of D-Bus `CallCheckedTicket`, which tells
//! `droidwarden mcp` the approval id of its call, is
//! `droidwarden_core::gate::ticketed_call`.

use droidwarden_services::{ErrorCode, WireError};
use rmcp::model::{
    CallToolResult, ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationSchema, InputRequest, InputRequests, JsonObject, ProtocolVersion,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

/// Who is named as having decided, in the daemon's log and a denial's
/// reason, when the client did not give its name.
pub const DECIDER: &str = "mcp client (elicitation)";

/// Who is recorded as having answered an elicitation: the person the
/// daemon knows the client to be (`elicitor`: the owner of the HTTP
/// endpoint's token), then the MCP client by the name it introduced
/// itself with (its own word, quoted as given).
pub fn decider(context: &RequestContext<RoleServer>, elicitor: Option<&str>) -> String {
    let client = match context
        .client_info()
        .map(|info| info.name)
        .filter(|name| !name.trim().is_empty())
    {
        Some(name) => format!("MCP client {name:?} (elicitation)"),
        None => DECIDER.to_owned(),
    };
    match elicitor {
        Some(person) => format!("{person} via {client}"),
        None => client,
    }
}

/// Whether an approval of `command` may be answered inside the client
/// that asked for it. A client answering its own request is the
/// requester approving itself, so this holds only where the daemon knows
/// the client is a person who may approve (see `PhoneServer::with_elicitation`),
/// and never for `critical` actions: those wait for an answer given
/// elsewhere (`droidwarden approve`, D-Bus, MQTT), whoever asks.
pub fn may_elicit(command: &droidwarden_services::Command) -> bool {
    command.spec().risk < droidwarden_services::Risk::Critical
}
/// The key of the one input request in an `InputRequiredResult`.
pub const INPUT_KEY: &str = "approval";
/// The structured error code of a bad `requestState`.
pub const BAD_STATE: &str = "invalid_request_state";
/// The most calls kept waiting for a retry at once (per endpoint).
const MAX_PENDING: usize = 256;
/// How long past the approval's own timeout a handle is kept.
const KEEP_MARGIN: Duration = Duration::from_secs(60);

/// How a call asks the client, if at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `elicitation/create` during the call (protocol before 2026-07-28).
    Request,
    /// An `InputRequiredResult`, answered by a retry (2026-07-28 on).
    Input,
}

/// Whether and how to ask the client of this request: it must have
/// declared form elicitation (at `initialize`, or in the request's
/// `_meta` from 2026-07-28).
pub fn mode(context: &RequestContext<RoleServer>) -> Option<Mode> {
    let capability = context.client_capabilities()?.elicitation?;
    // A capability without modes is form mode (2025-06-18).
    if capability.form.is_none() && capability.url.is_some() {
        return None;
    }
    let modern = context
        .protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str());
    Some(if modern { Mode::Input } else { Mode::Request })
}

/// What the person is asked about.
#[derive(Debug, Clone)]
pub struct Question {
    /// The daemon's approval request.
    pub approval_id: String,
    /// The phone, when named.
    pub device: Option<String>,
    /// `service.action`.
    pub action: String,
    /// Its risk.
    pub risk: &'static str,
    /// Its parameters.
    pub params: Value,
}

impl Question {
    /// The form: a message that says what would run, and `approve` (a
    /// boolean) with an optional `reason`.
    pub fn params(&self) -> ElicitRequestParams {
        let mut params = self.params.to_string();
        if params.chars().count() > 1000 {
            params = params.chars().take(1000).collect::<String>() + "…";
        }
        let message = format!(
            "Approve {} ({} risk) on {}? Parameters: {}. Approval {} (also answerable with droidwarden approve/deny).",
            self.action,
            self.risk,
            self.device.as_deref().unwrap_or("the default phone"),
            params,
            self.approval_id,
        );
        let schema = json!({
            "type": "object",
            "title": "droidwarden approval",
            "properties": {
                "approve": {
                    "type": "boolean",
                    "title": "Approve",
                    "description": "run this action on the phone"
                },
                "reason": {
                    "type": "string",
                    "title": "Reason",
                    "description": "optional: why not (reaches the model)",
                    "maxLength": 500
                }
            },
            "required": ["approve"]
        });
        let requested_schema = match schema {
            Value::Object(map) => ElicitationSchema::from_json_schema(map).unwrap_or_else(|_| {
                ElicitationSchema::builder()
                    .required_bool("approve")
                    .build_unchecked()
            }),
            _ => ElicitationSchema::builder()
                .required_bool("approve")
                .build_unchecked(),
        };
        ElicitRequestParams::FormElicitationParams {
            meta: None,
            message,
            requested_schema,
        }
    }

    /// The same form as an `InputRequiredResult`'s one input request.
    pub fn input_requests(&self) -> InputRequests {
        let mut requests = InputRequests::new();
        requests.insert(
            INPUT_KEY.to_owned(),
            InputRequest::Elicitation(ElicitRequest::new(self.params())),
        );
        requests
    }
}

/// The person's answer (the same type every way to the phones records).
pub use droidwarden_core::phones::Answer;

/// Read the client's answer: accepted with `approve: true` approves;
/// anything else (declined, cancelled, `approve: false`, no content)
/// denies, with the person's reason when given.
pub fn read(result: &ElicitResult) -> Answer {
    let content = result.content.as_ref();
    let reason = content
        .and_then(|c| c.get("reason"))
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .map(|r| r.chars().take(400).collect::<String>());
    let approved = content
        .and_then(|c| c.get("approve"))
        .and_then(Value::as_bool)
        == Some(true);
    let how = match result.action {
        ElicitationAction::Accept if approved => return Answer::Approve,
        ElicitationAction::Accept => "denied",
        ElicitationAction::Decline => "declined",
        ElicitationAction::Cancel => "cancelled",
        _ => "not approved",
    };
    Answer::Deny(match reason {
        Some(reason) => format!("{how} in the MCP client (elicitation): {reason}"),
        None => format!("{how} in the MCP client (elicitation)"),
    })
}

/// Read the answer in a retry's `inputResponses` (`None`: none given,
/// which denies).
pub fn read_response(responses: Option<&rmcp::model::InputResponses>) -> Answer {
    let given = responses
        .and_then(|r| r.get(INPUT_KEY))
        .and_then(|v| serde_json::from_value::<ElicitResult>(v.clone()).ok());
    match given {
        Some(result) => read(&result),
        None => Answer::Deny(
            "the MCP client retried the call without an answer to the approval (elicitation)"
                .into(),
        ),
    }
}

/// A call waiting in the daemon, its approval asked in the client.
#[derive(Debug)]
pub struct Waiting {
    /// The daemon's approval request.
    pub approval_id: String,
    /// The call, running (waiting for the approval, then on the phone).
    pub task: Running,
    /// What the result is wrapped in: device, service, action.
    pub device: Option<String>,
    pub service: &'static str,
    pub action: &'static str,
}

/// What binds a `requestState` handle to its call.
#[derive(Debug, Clone, PartialEq)]
pub struct Binding {
    /// The tool's name.
    pub tool: String,
    /// Its arguments.
    pub arguments: JsonObject,
    /// The client, as far as the transport tells it.
    pub client: String,
}

impl Binding {
    /// The binding of this request.
    pub fn of(tool: &str, arguments: &JsonObject, context: &RequestContext<RoleServer>) -> Self {
        let session = context
            .extensions
            .get::<hyper::http::request::Parts>()
            .and_then(|p| p.headers.get("mcp-session-id"))
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let name = context.client_info().map(|i| i.name).unwrap_or_default();
        Self {
            tool: tool.to_owned(),
            arguments: arguments.clone(),
            client: format!("{name}\n{session}"),
        }
    }
}

#[derive(Debug)]
struct Entry {
    binding: Binding,
    until: Instant,
    waiting: Waiting,
}

/// Why a `requestState` was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Never issued here, already used, or expired.
    Unknown,
    /// Issued for another call (tool, arguments or client).
    Mismatch,
}

/// The calls waiting for a 2026-07-28 client's retry, by handle.
#[derive(Debug, Default)]
pub struct Pending {
    entries: Mutex<HashMap<String, Entry>>,
}

impl Pending {
    /// Keep `waiting` until the retry (at most `keep` plus a margin) and
    /// give its handle.
    ///
    /// # Errors
    /// No random bytes, or too many calls waiting.
    // The error hands the waiting call back (a rare path); at the lint's
    // limit since wire errors carry optional details.
    #[allow(clippy::result_large_err)]
    pub fn insert(
        &self,
        binding: Binding,
        waiting: Waiting,
        keep: Duration,
    ) -> Result<String, (WireError, Waiting)> {
        let Some(handle) = random_handle() else {
            return Err((
                WireError::new(ErrorCode::Internal, "no random bytes for a request state"),
                waiting,
            ));
        };
        let Ok(mut entries) = self.entries.lock() else {
            return Err((
                WireError::new(ErrorCode::Internal, "the request state table is unusable"),
                waiting,
            ));
        };
        let now = Instant::now();
        entries.retain(|_, e| e.until > now);
        if entries.len() >= MAX_PENDING {
            let mut busy = WireError::new(
                ErrorCode::Busy,
                format!("{MAX_PENDING} MCP calls already wait for an answer in their clients"),
            );
            busy.retryable = true;
            return Err((busy, waiting));
        }
        entries.insert(
            handle.clone(),
            Entry {
                binding,
                until: now + keep + KEEP_MARGIN,
                waiting,
            },
        );
        Ok(handle)
    }

    /// Take the call `handle` names, once: refused when it is unknown,
    /// used or expired, or bound to another call (which keeps it for its
    /// own retry).
    pub fn take(&self, handle: &str, binding: &Binding) -> Result<Waiting, Refused> {
        let Ok(mut entries) = self.entries.lock() else {
            return Err(Refused::Unknown);
        };
        let now = Instant::now();
        entries.retain(|_, e| e.until > now);
        match entries.get(handle) {
            None => Err(Refused::Unknown),
            Some(entry) if &entry.binding != binding => Err(Refused::Mismatch),
            Some(_) => entries
                .remove(handle)
                .map(|e| e.waiting)
                .ok_or(Refused::Unknown),
        }
    }

    /// How many calls wait.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.lock().map(|e| e.len()).unwrap_or(0)
    }
}

/// The tool result for a refused `requestState`: nothing was approved.
pub fn refused(why: Refused) -> CallToolResult {
    let message = match why {
        Refused::Unknown => {
            "requestState is not one this server issued, or it was already used or has expired; nothing was approved: call the tool again"
        }
        Refused::Mismatch => {
            "requestState was issued for another call (tool, arguments or client); nothing was approved"
        }
    };
    CallToolResult::structured_error(json!({
        "error": {"code": BAD_STATE, "message": message, "retryable": false}
    }))
}

/// 32 random bytes, hex.
fn random_handle() -> Option<String> {
    use ring::rand::SecureRandom as _;
    let mut bytes = [0u8; 32];
    ring::rand::SystemRandom::new().fill(&mut bytes).ok()?;
    Some(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// A spawned call, aborted when dropped before it was awaited (the MCP
/// request was cancelled, or its handle forgotten).
#[derive(Debug)]
pub struct Running(Option<JoinHandle<Result<Value, WireError>>>);

impl Running {
    /// Run `call` on its own task.
    pub fn spawn(
        call: impl std::future::Future<Output = Result<Value, WireError>> + Send + 'static,
    ) -> Self {
        Self(Some(tokio::spawn(call)))
    }

    /// Its result.
    pub async fn result(&mut self) -> Result<Value, WireError> {
        let Some(handle) = self.0.as_mut() else {
            return Err(WireError::new(
                ErrorCode::Internal,
                "the call was already awaited",
            ));
        };
        let joined = handle.await;
        self.0 = None;
        joined.unwrap_or_else(|e| {
            Err(WireError::new(
                ErrorCode::Internal,
                format!("the call's task failed: {e}"),
            ))
        })
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(handle) = self.0.take() {
            handle.abort();
        }
    }
}

/// Record `answer` as approval `approval_id`'s decision through `apply`
/// (the daemon's Approve or Deny); refused (answered elsewhere first,
/// expired) is logged and otherwise ignored.
pub async fn record<F, Fut>(approval_id: &str, answer: &Answer, by: &str, apply: F)
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Result<(), WireError>>,
{
    match apply().await {
        Ok(()) => tracing::info!(
            approval = approval_id,
            approved = *answer == Answer::Approve,
            by,
            "approval answered in the MCP client"
        ),
        Err(e) => tracing::info!(
            approval = approval_id,
            error = %e,
            "the MCP client's answer was not recorded (answered elsewhere first, or expired)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn elicit_result(action: ElicitationAction, content: Option<Value>) -> ElicitResult {
        let mut r = ElicitResult::new(action);
        r.content = content;
        r
    }

    #[test]
    fn only_an_accepted_approve_approves() {
        let yes = elicit_result(ElicitationAction::Accept, Some(json!({"approve": true})));
        assert_eq!(read(&yes), Answer::Approve);
        let no = elicit_result(
            ElicitationAction::Accept,
            Some(json!({"approve": false, "reason": "not now"})),
        );
        assert_eq!(
            read(&no),
            Answer::Deny("denied in the MCP client (elicitation): not now".into())
        );
        let declined = elicit_result(ElicitationAction::Decline, Some(json!({"approve": true})));
        assert!(matches!(read(&declined), Answer::Deny(r) if r.starts_with("declined")));
        let cancelled = elicit_result(ElicitationAction::Cancel, None);
        assert!(matches!(read(&cancelled), Answer::Deny(r) if r.starts_with("cancelled")));
        let empty = elicit_result(ElicitationAction::Accept, None);
        assert!(matches!(read(&empty), Answer::Deny(_)));
        assert!(matches!(read_response(None), Answer::Deny(_)));
    }

    #[test]
    fn the_form_names_the_action_and_the_approval() {
        let q = Question {
            approval_id: "ap-1".into(),
            device: Some("pixel".into()),
            action: "shell.run".into(),
            risk: "high",
            params: json!({"command": "reboot"}),
        };
        let ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } = q.params()
        else {
            panic!("a form")
        };
        for part in ["shell.run", "high", "pixel", "reboot", "ap-1"] {
            assert!(message.contains(part), "{message}");
        }
        let schema = serde_json::to_value(requested_schema).unwrap();
        assert_eq!(schema["properties"]["approve"]["type"], "boolean");
        assert_eq!(schema["required"], json!(["approve"]));
    }

    fn binding(tool: &str) -> Binding {
        Binding {
            tool: tool.into(),
            arguments: JsonObject::new(),
            client: "c".into(),
        }
    }

    fn waiting() -> Waiting {
        Waiting {
            approval_id: "ap-1".into(),
            task: Running(None),
            device: None,
            service: "shell",
            action: "run",
        }
    }

    #[test]
    fn handles_are_random_single_use_and_bound() {
        let pending = Pending::default();
        let handle = pending
            .insert(binding("t"), waiting(), Duration::from_secs(60))
            .unwrap();
        assert_eq!(handle.len(), 64);
        let other = pending
            .insert(binding("t"), waiting(), Duration::from_secs(60))
            .unwrap();
        assert_ne!(handle, other);
        assert_eq!(
            pending.take("forged", &binding("t")).unwrap_err(),
            Refused::Unknown
        );
        assert_eq!(
            pending.take(&handle, &binding("u")).unwrap_err(),
            Refused::Mismatch
        );
        // The mismatch kept it for its own call.
        assert_eq!(
            pending.take(&handle, &binding("t")).unwrap().approval_id,
            "ap-1"
        );
        assert_eq!(
            pending.take(&handle, &binding("t")).unwrap_err(),
            Refused::Unknown
        );
        assert_eq!(pending.len(), 1);
    }
}
