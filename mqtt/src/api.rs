//! The MQTT command API's payloads: parsing commands (with an error that
//! names the problem for every kind of bad input) and building replies.
//! Pure: no I/O, unit-tested below. `docs/mqtt-api.md` documents the same
//! shapes with JSON Schemas.

use crate::hub::CallRequest;
use droidwarden_services::{ErrorCode, WireError};
use serde_json::{Map, Value, json};

/// Command ids appear in reply topics, so they are restricted to characters
/// that are safe in a topic level.
const MAX_ID_LEN: usize = 128;

/// A parsed `cmd/call` or `cmd/devices` request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Request {
    Call {
        id: Option<String>,
        call: CallRequest,
    },
    Devices {
        id: Option<String>,
    },
    /// `cmd/ask`: a prompt for the agent.
    Ask {
        id: Option<String>,
        prompt: String,
        session: Option<String>,
        /// `"react"` or `"plan"`; `None`: `[agent] mode`.
        mode: Option<droidwarden_agent::RunMode>,
        /// The login that published it, as for `Approve`: it may not
        /// approve the run's requests.
        login: Option<String>,
    },
    /// `cmd/skill`: run one skill through the agent.
    Skill {
        id: Option<String>,
        skill: String,
        input: Value,
        session: Option<String>,
        /// The login that published it, as for `Ask`.
        login: Option<String>,
    },
    /// `cmd/automation`: manage automations (docs/automations.md).
    Automation {
        id: Option<String>,
        op: crate::automations::Op,
    },
    /// `cmd/approve`: a person's answer to an approval request.
    Approve {
        id: Option<String>,
        approval_id: String,
        /// Approve (once, for the run, with edits) or deny (with the reason).
        decision: crate::approvals::Decision,
        /// Who answered, as the sender says: recorded as `…, as "…"`.
        by: Option<String>,
        /// The login that published it, when the daemon's own broker
        /// vouches for it ([`super::router::Inbound::publisher`]).
        login: Option<String>,
    },
    /// `cmd/approve` with `decision: "revoke"`: revoke a grant for a run.
    RevokeGrant {
        id: Option<String>,
        grant_id: String,
        /// Who revoked it, as the sender says.
        by: Option<String>,
        /// The login that published it, as for `Approve`.
        login: Option<String>,
    },
}

impl Request {
    /// The same request published by `login` (as the daemon's own broker
    /// vouches for it), for the requests whose answer depends on who sent
    /// them: an agent run and an added automation (their asker may not
    /// approve their requests) and an approval's answer.
    pub(crate) fn published_by(mut self, publisher: Option<&str>) -> Self {
        match &mut self {
            Self::Ask { login, .. }
            | Self::Skill { login, .. }
            | Self::Approve { login, .. }
            | Self::RevokeGrant { login, .. } => *login = publisher.map(str::to_owned),
            Self::Automation {
                op: crate::automations::Op::Add { account, .. },
                ..
            } => *account = super::mqtt_account(publisher),
            Self::Call { .. } | Self::Devices { .. } | Self::Automation { .. } => {}
        }
        self
    }

    pub(crate) fn id(&self) -> Option<&str> {
        match self {
            Self::Call { id, .. }
            | Self::Devices { id }
            | Self::Ask { id, .. }
            | Self::Skill { id, .. }
            | Self::Automation { id, .. }
            | Self::Approve { id, .. }
            | Self::RevokeGrant { id, .. } => id.as_deref(),
        }
    }
}

/// A request that could not be parsed: the id, when it could be read, and why.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Rejected {
    pub(crate) id: Option<String>,
    pub(crate) error: WireError,
}

fn invalid(id: Option<String>, message: impl Into<String>) -> Rejected {
    Rejected {
        id,
        error: WireError::new(ErrorCode::InvalidRequest, message),
    }
}

/// Whether `id` may be used as a topic level.
pub(crate) fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b))
}

/// Which command a `cmd/<name>` topic carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Call,
    Devices,
    Ask,
    Skill,
    Approve,
    Automation,
}

impl Kind {
    /// The kind a `cmd/<name>` topic carries.
    pub(crate) fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "call" => Self::Call,
            "devices" => Self::Devices,
            "ask" => Self::Ask,
            "skill" => Self::Skill,
            "approve" => Self::Approve,
            "automation" => Self::Automation,
            _ => return None,
        })
    }

    /// Every command name, for error messages.
    pub(crate) const NAMES: &'static str = "call, devices, ask, skill, approve, automation";
}

/// Parse a command payload. `id_optional` is true when an MQTT 5 response
/// topic is present (the reply goes there, so no id is needed to route it).
pub(crate) fn parse(
    kind: Kind,
    payload: &[u8],
    max: usize,
    id_optional: bool,
) -> Result<Request, Rejected> {
    let value: Value = serde_json::from_slice(payload)
        .map_err(|e| invalid(None, format!("payload is not valid JSON: {e}")))?;
    let Value::Object(mut obj) = value else {
        return Err(invalid(None, "payload must be a JSON object"));
    };
    let id = match obj.remove("id") {
        Some(Value::String(id)) if valid_id(&id) => Some(id),
        Some(Value::String(id)) => {
            return Err(invalid(
                None,
                format!(
                    "id {:?} must be 1 to {MAX_ID_LEN} characters of letters, digits, '-', '_', '.', ':'",
                    id.chars().take(40).collect::<String>()
                ),
            ));
        }
        Some(other) => {
            return Err(invalid(
                None,
                format!("id must be a string, got {}", kind_of(&other)),
            ));
        }
        // An approval needs no reply: its effect is seen on the
        // approvals and session topics.
        None if id_optional || kind == Kind::Approve => None,
        None => return Err(invalid(None, "id is required")),
    };
    if payload.len() > max {
        return Err(invalid(
            id,
            format!("payload is {} bytes; the limit is {max}", payload.len()),
        ));
    }
    match kind {
        Kind::Devices => {
            if let Some(key) = obj.keys().next() {
                return Err(invalid(
                    id,
                    format!("unknown field {key:?}; cmd/devices takes only id"),
                ));
            }
            Ok(Request::Devices { id })
        }
        Kind::Call => parse_call(id, obj),
        Kind::Ask => parse_ask(id, obj),
        Kind::Skill => parse_skill(id, obj),
        Kind::Approve => parse_approve(id, obj),
        Kind::Automation => parse_automation(id, obj),
    }
}

/// Take a string field: `Ok(None)` when absent or null and not required.
fn text_field(
    obj: &mut Map<String, Value>,
    key: &str,
    required: bool,
) -> Result<Option<String>, String> {
    match obj.remove(key) {
        Some(Value::String(s)) => Ok(Some(s)),
        Some(Value::Null) | None if !required => Ok(None),
        None | Some(Value::Null) => Err(format!("{key} is required")),
        Some(other) => Err(format!("{key} must be a string, got {}", kind_of(&other))),
    }
}

fn no_more_fields(obj: &Map<String, Value>, command: &str, takes: &str) -> Result<(), String> {
    match obj.keys().next() {
        Some(key) => Err(format!(
            "unknown field {key:?}; cmd/{command} takes {takes}"
        )),
        None => Ok(()),
    }
}

fn parse_ask(id: Option<String>, mut obj: Map<String, Value>) -> Result<Request, Rejected> {
    let fields = (|| -> Result<Request, String> {
        let prompt = text_field(&mut obj, "prompt", true)?.unwrap_or_default();
        if prompt.trim().is_empty() {
            return Err("prompt must not be empty".into());
        }
        let session = text_field(&mut obj, "session", false)?;
        let mode =
            droidwarden_agent::RunMode::named(text_field(&mut obj, "mode", false)?.as_deref())?;
        no_more_fields(&obj, "ask", "id, prompt, session, mode")?;
        Ok(Request::Ask {
            id: id.clone(),
            prompt,
            session,
            mode,
            login: None,
        })
    })();
    fields.map_err(|message| invalid(id, message))
}

fn parse_skill(id: Option<String>, mut obj: Map<String, Value>) -> Result<Request, Rejected> {
    let fields = (|| -> Result<Request, String> {
        let skill = text_field(&mut obj, "skill", true)?.unwrap_or_default();
        if skill.trim().is_empty() {
            return Err("skill must not be empty".into());
        }
        let input = match obj.remove("input") {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(i @ Value::Object(_)) => i,
            Some(other) => {
                return Err(format!("input must be an object, got {}", kind_of(&other)));
            }
        };
        let session = text_field(&mut obj, "session", false)?;
        no_more_fields(&obj, "skill", "id, skill, input, session")?;
        Ok(Request::Skill {
            id: id.clone(),
            skill,
            input,
            session,
            login: None,
        })
    })();
    fields.map_err(|message| invalid(id, message))
}

/// `cmd/automation`: `op`, `name`, `definition`. Approving an automation's
/// call is not an op here: it goes through `cmd/approve` (with the
/// approval id `automation:<name>`), whose access rules decide who may.
fn parse_automation(id: Option<String>, obj: Map<String, Value>) -> Result<Request, Rejected> {
    if let Some(key) = obj
        .keys()
        .find(|k| !["op", "name", "definition"].contains(&k.as_str()))
    {
        return Err(invalid(
            id,
            format!("unknown field {key:?}; cmd/automation takes id, op, name, definition"),
        ));
    }
    let mut op = crate::automations::Op::parse(&Value::Object(obj), super::MQTT_DECIDER).map_err(
        |error| Rejected {
            id: id.clone(),
            error,
        },
    )?;
    if let crate::automations::Op::Add { over_mqtt, .. } = &mut op {
        *over_mqtt = true;
    }
    if matches!(op, crate::automations::Op::Answer { .. }) {
        return Err(invalid(
            id,
            "approve and deny go to cmd/approve, with approval_id \"automation:<name>\"",
        ));
    }
    Ok(Request::Automation { id, op })
}

/// Longest `by` of `cmd/approve`, in characters.
const MAX_BY_CHARS: usize = 100;

fn parse_approve(id: Option<String>, mut obj: Map<String, Value>) -> Result<Request, Rejected> {
    let fields = (|| -> Result<Request, String> {
        let decision = text_field(&mut obj, "decision", true)?
            .ok_or_else(|| "decision is required".to_owned())?;
        let by = text_field(&mut obj, "by", false)?.filter(|by| !by.trim().is_empty());
        if by
            .as_ref()
            .is_some_and(|by| by.chars().count() > MAX_BY_CHARS)
        {
            return Err(format!("by is longer than {MAX_BY_CHARS} characters"));
        }
        if decision == "revoke" {
            let grant_id = text_field(&mut obj, "grant_id", true)?.unwrap_or_default();
            no_more_fields(&obj, "approve", "id, decision, grant_id, by")?;
            return Ok(Request::RevokeGrant {
                id: id.clone(),
                grant_id,
                by,
                login: None,
            });
        }
        let approval_id = text_field(&mut obj, "approval_id", true)?.unwrap_or_default();
        let reason = text_field(&mut obj, "reason", false)?;
        let scope = text_field(&mut obj, "scope", false)?;
        let up_to = text_field(&mut obj, "up_to", false)?;
        let minutes = match obj.remove("minutes") {
            None | Some(Value::Null) => None,
            Some(Value::Number(n)) => Some(
                n.as_u64()
                    .ok_or("minutes must be a whole number of minutes")?,
            ),
            Some(_) => return Err("minutes must be a number".into()),
        };
        let params = match obj.remove("params") {
            None | Some(Value::Null) => None,
            Some(Value::Object(m)) => Some(m),
            Some(_) => return Err("params must be an object".into()),
        };
        no_more_fields(
            &obj,
            "approve",
            "id, approval_id, decision, reason, scope, up_to, minutes, params, by",
        )?;
        let decision = crate::approvals::decision_of(
            &decision,
            scope.as_deref(),
            up_to.as_deref(),
            minutes,
            params,
            reason,
        )?;
        Ok(Request::Approve {
            id: id.clone(),
            approval_id,
            decision,
            by,
            login: None,
        })
    })();
    fields.map_err(|message| invalid(id, message))
}

fn parse_call(id: Option<String>, mut obj: Map<String, Value>) -> Result<Request, Rejected> {
    let text = text_field;
    let fields = (|| -> Result<CallRequest, String> {
        let device = text(&mut obj, "device", false)?;
        let service = text(&mut obj, "service", true)?.unwrap_or_default();
        let action = text(&mut obj, "action", true)?.unwrap_or_default();
        let params = match obj.remove("params") {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(p @ Value::Object(_)) => p,
            Some(other) => {
                return Err(format!("params must be an object, got {}", kind_of(&other)));
            }
        };
        no_more_fields(&obj, "call", "id, device, service, action, params")?;
        Ok(super::router::call_request(device, service, action, params))
    })();
    match fields {
        Ok(call) => Ok(Request::Call { id, call }),
        Err(message) => Err(invalid(id, message)),
    }
}

fn kind_of(v: &Value) -> &'static str {
    droidwarden_services::schema::json_type(v)
}

/// `{"id", "ok": true, "result"}`.
pub(crate) fn ok_reply(id: Option<&str>, result: &Value) -> Value {
    json!({ "id": id, "ok": true, "result": result })
}

/// `{"id", "ok": false, "error": {"code", "message", "retryable"}}`.
pub(crate) fn error_reply(id: Option<&str>, error: &WireError) -> Value {
    json!({ "id": id, "ok": false, "error": error })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(kind: Kind, payload: &str, expected: Result<(), (Option<&str>, &str)>) {
        let got = parse(kind, payload.as_bytes(), 1024, false);
        match (got, expected) {
            (Ok(_), Ok(())) => {}
            (Err(r), Err((id, needle))) => {
                assert_eq!(r.id.as_deref(), id, "{payload}");
                assert_eq!(r.error.code, ErrorCode::InvalidRequest);
                assert!(
                    r.error.message.contains(needle),
                    "{payload}: {}",
                    r.error.message
                );
            }
            (got, expected) => panic!("{payload}: got {got:?}, expected {expected:?}"),
        }
    }

    #[test]
    fn skill_requests_are_checked() {
        use Kind::{Ask, Skill};
        check(Skill, r#"{"id":"k1","skill":"bedtime"}"#, Ok(()));
        check(
            Skill,
            r#"{"id":"k1","skill":"bedtime","input":{"device":"kitchen"},"session":"s-1"}"#,
            Ok(()),
        );
        check(
            Skill,
            r#"{"id":"k1"}"#,
            Err((Some("k1"), "skill is required")),
        );
        check(
            Skill,
            r#"{"id":"k1","skill":" "}"#,
            Err((Some("k1"), "must not be empty")),
        );
        check(
            Skill,
            r#"{"id":"k1","skill":"x","input":[1]}"#,
            Err((Some("k1"), "input must be an object")),
        );
        check(
            Skill,
            r#"{"id":"k1","skill":"x","prompt":"y"}"#,
            Err((Some("k1"), "cmd/skill takes id, skill, input, session")),
        );
        check(Skill, r#"{"skill":"x"}"#, Err((None, "id is required")));
        check(Ask, r#"{"id":"q","prompt":"p","mode":"plan"}"#, Ok(()));
        check(
            Ask,
            r#"{"id":"q","prompt":"p","mode":"yolo"}"#,
            Err((Some("q"), "must be \"react\" or \"plan\"")),
        );
        let Ok(Request::Skill { input, .. }) = parse(
            Skill,
            br#"{"id":"k","skill":"x","input":null}"#,
            1024,
            false,
        ) else {
            panic!("parsed")
        };
        assert_eq!(input, json!({}));
    }

    #[test]
    fn every_kind_of_bad_input_is_named() {
        use Kind::*;
        check(
            Call,
            r#"{"id":"a1","service":"battery","action":"status"}"#,
            Ok(()),
        );
        check(
            Call,
            r#"{"id":"a1","device":null,"service":"battery","action":"status","params":null}"#,
            Ok(()),
        );
        check(Call, "{", Err((None, "not valid JSON")));
        check(Call, "\u{0}\u{1}garbage", Err((None, "not valid JSON")));
        check(Call, "[1,2]", Err((None, "JSON object")));
        check(
            Call,
            r#"{"service":"battery","action":"status"}"#,
            Err((None, "id is required")),
        );
        check(
            Call,
            r#"{"id":7,"service":"battery"}"#,
            Err((None, "id must be a string")),
        );
        check(
            Call,
            r#"{"id":"a/b","service":"battery"}"#,
            Err((None, "letters, digits")),
        );
        check(
            Call,
            r#"{"id":"a1","action":"status"}"#,
            Err((Some("a1"), "service is required")),
        );
        check(
            Call,
            r#"{"id":"a1","service":5,"action":"status"}"#,
            Err((Some("a1"), "service must be a string")),
        );
        check(
            Call,
            r#"{"id":"a1","service":"battery","action":"status","params":[1]}"#,
            Err((Some("a1"), "params must be an object")),
        );
        check(
            Call,
            r#"{"id":"a1","service":"battery","action":"status","colour":1}"#,
            Err((Some("a1"), "unknown field \"colour\"")),
        );
        check(Ask, r#"{"id":"q1","prompt":"battery?"}"#, Ok(()));
        check(
            Ask,
            r#"{"id":"q1","prompt":"battery?","session":"kitchen"}"#,
            Ok(()),
        );
        check(
            Ask,
            r#"{"id":"q1"}"#,
            Err((Some("q1"), "prompt is required")),
        );
        check(
            Ask,
            r#"{"id":"q1","prompt":"  "}"#,
            Err((Some("q1"), "must not be empty")),
        );
        check(
            Ask,
            r#"{"id":"q1","prompt":"x","session":3}"#,
            Err((Some("q1"), "session must be a string")),
        );
        check(
            Ask,
            r#"{"id":"q1","prompt":"x","model":"gpt"}"#,
            Err((Some("q1"), "unknown field \"model\"")),
        );
        check(
            Approve,
            r#"{"approval_id":"r-1-a1","decision":"approve"}"#,
            Ok(()),
        );
        check(
            Approve,
            r#"{"approval_id":"r-1-a1","decision":"deny","reason":"not now"}"#,
            Ok(()),
        );
        check(
            Approve,
            r#"{"id":"x","approval_id":"r-1-a1","decision":"yes"}"#,
            Err((Some("x"), "must be \"approve\" or \"deny\"")),
        );
        check(
            Approve,
            r#"{"decision":"approve"}"#,
            Err((None, "approval_id is required")),
        );
        check(
            Approve,
            r#"{"approval_id":"r-1-a1","decision":"approve","by":"Alice"}"#,
            Ok(()),
        );
        check(
            Approve,
            r#"{"id":"b","approval_id":"r-1-a1","decision":"approve","by":7}"#,
            Err((Some("b"), "by must be a string")),
        );
        let long_by = format!(
            r#"{{"id":"b","approval_id":"r-1-a1","decision":"approve","by":"{}"}}"#,
            "a".repeat(101)
        );
        check(Approve, &long_by, Err((Some("b"), "by is longer than 100")));
        // Answers beyond yes or no.
        for ok in [
            r#"{"approval_id":"r-1-a1","decision":"approve","scope":"run"}"#,
            r#"{"approval_id":"r-1-a1","decision":"approve","scope":"run","up_to":"low"}"#,
            r#"{"approval_id":"r-1-a1","decision":"approve","scope":"once"}"#,
            r#"{"approval_id":"r-1-a1","decision":"approve","params":{"text":"hi"}}"#,
            r#"{"approval_id":"r-1-a1","decision":"approve","scope":"app"}"#,
            r#"{"approval_id":"r-1-a1","decision":"approve","scope":"app","minutes":1440}"#,
            r#"{"decision":"revoke","grant_id":"g1","by":"Alice"}"#,
        ] {
            check(Approve, ok, Ok(()));
        }
        for (bad, why) in [
            (
                r#"{"id":"g","approval_id":"r-1-a1","decision":"approve","scope":"run","up_to":"high"}"#,
                "must be \"low\" or \"medium\"",
            ),
            (
                r#"{"id":"g","approval_id":"r-1-a1","decision":"approve","up_to":"low"}"#,
                "up_to goes with scope",
            ),
            (
                r#"{"id":"g","approval_id":"r-1-a1","decision":"approve","scope":"forever"}"#,
                "must be \"once\", \"run\" or \"app\"",
            ),
            (
                r#"{"id":"g","approval_id":"r-1-a1","decision":"approve","scope":"app","minutes":0}"#,
                "minutes must be between 1 and 1440",
            ),
            (
                r#"{"id":"g","approval_id":"r-1-a1","decision":"approve","scope":"app","minutes":1441}"#,
                "minutes must be between 1 and 1440",
            ),
            (
                r#"{"id":"g","approval_id":"r-1-a1","decision":"approve","scope":"app","minutes":-1}"#,
                "whole number",
            ),
            (
                r#"{"id":"g","approval_id":"r-1-a1","decision":"approve","scope":"app","minutes":"5"}"#,
                "minutes must be a number",
            ),
            (
                r#"{"id":"g","approval_id":"r-1-a1","decision":"approve","minutes":5}"#,
                "minutes goes with scope \"app\"",
            ),
            (
                r#"{"id":"g","approval_id":"r-1-a1","decision":"deny","scope":"app"}"#,
                "goes with decision \"approve\"",
            ),
            (
                r#"{"id":"g","approval_id":"r-1-a1","decision":"approve","scope":"run","params":{}}"#,
                "not both",
            ),
            (
                r#"{"id":"g","approval_id":"r-1-a1","decision":"deny","params":{}}"#,
                "go with decision",
            ),
            (
                r#"{"id":"g","approval_id":"r-1-a1","decision":"approve","params":"x"}"#,
                "params must be an object",
            ),
            (r#"{"id":"g","decision":"revoke"}"#, "grant_id is required"),
        ] {
            check(Approve, bad, Err((Some("g"), why)));
        }
        check(Devices, r#"{"id":"d1"}"#, Ok(()));
        check(
            Devices,
            r#"{"id":"d1","x":1}"#,
            Err((Some("d1"), "unknown field")),
        );
        let big = format!(
            r#"{{"id":"big","service":"battery","action":"status","params":{{"x":"{}"}}}}"#,
            "a".repeat(2000)
        );
        check(Call, &big, Err((Some("big"), "limit is 1024")));
    }

    #[test]
    fn an_mqtt5_request_may_leave_the_id_out() {
        let r = parse(
            Kind::Call,
            br#"{"service":"battery","action":"status"}"#,
            1024,
            true,
        )
        .unwrap();
        assert_eq!(r.id(), None);
    }
}
