//! The companion protocol's payloads (see `docs/companion-protocol.md`):
//! encoding requests, decoding responses, presence and events.
//!
//! Pure functions: no I/O, no clock, no topics. Everything a phone sends is
//! untrusted; decoding never panics and says what was wrong, so the caller
//! can log it and carry on.

use droidwarden_services::schema::{Property, Schema};
use droidwarden_services::{Catalogue, Command, ErrorCode, WireError};
use serde::Serialize;
use serde_json::{Map, Value};
use std::fmt;

/// The protocol version this daemon speaks (`"v"` in every payload).
pub const PROTOCOL_VERSION: u64 = 1;

/// The largest response or event payload accepted, in bytes. The largest
/// result in the catalogue (`app_list.list` with system apps) is a few tens
/// of KiB; anything bigger than this is a broken or hostile phone.
pub const MAX_PAYLOAD: usize = 1024 * 1024;

/// The longest request id accepted back from a phone. Ours are shorter.
const MAX_ID_LEN: usize = 128;

/// How much of an untrusted string ends up in an error message or log line.
const MAX_ECHO: usize = 500;

/// A request as it goes to the phone.
#[derive(Serialize)]
struct RequestBody<'a> {
    v: u64,
    id: &'a str,
    service: &'a str,
    action: &'a str,
    params: Value,
    deadline_ms: u64,
}

/// The JSON of a request for `command`, correlated by `id`, that the phone
/// should not perform after `deadline_ms` (Unix epoch milliseconds).
pub fn encode_request(id: &str, command: &Command, deadline_ms: u64) -> Vec<u8> {
    let body = RequestBody {
        v: PROTOCOL_VERSION,
        id,
        service: command.service_id(),
        action: command.action_name(),
        params: command.params_json(),
        deadline_ms,
    };
    // A struct of strings, integers and a JSON value always serialises.
    serde_json::to_vec(&body).unwrap_or_default()
}

/// A request as the phone's app reads it ([`decode_request`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// Perform `command` and answer request `id` ([`encode_response`]).
    Perform {
        /// The request id, for the response.
        id: String,
        /// The command, checked with the catalogue as the daemon checked it.
        command: Command,
    },
    /// Answer request `id` with `error` at once and perform nothing:
    /// another protocol version, no deadline or one already past (the
    /// daemon has stopped waiting), or parameters the catalogue refuses.
    Refuse {
        /// The request id, for the response.
        id: String,
        /// The answer.
        error: WireError,
    },
}

/// The app's side: read a request payload received at `now_ms` (Unix epoch
/// milliseconds). The emulated phone and the Termux companion both read
/// requests with this, so the two cannot drift from each other or from
/// [`encode_request`].
///
/// # Errors
/// [`Unreadable`] when the payload cannot be answered at all: too large,
/// not a JSON object, or no usable `id` (nothing would correlate an
/// answer).
pub fn decode_request(payload: &[u8], now_ms: u64) -> Result<Request, Unreadable> {
    let map = object(payload, "request")?;
    let id = match map.get("id") {
        Some(Value::String(id)) if !id.is_empty() && id.len() <= MAX_ID_LEN => id.clone(),
        _ => return Err(Unreadable("request has no usable id".into())),
    };
    let refuse = |error: WireError| {
        Ok(Request::Refuse {
            id: id.clone(),
            error,
        })
    };
    let invalid = |message: String| WireError::new(ErrorCode::InvalidRequest, message);
    match map.get("v").and_then(Value::as_u64) {
        Some(PROTOCOL_VERSION) => {}
        Some(v) => {
            return refuse(invalid(format!(
                "unsupported protocol version {v}; this app speaks {PROTOCOL_VERSION}"
            )));
        }
        None => return refuse(invalid("request has no protocol version \"v\"".into())),
    }
    let Some(deadline) = map.get("deadline_ms").and_then(Value::as_u64) else {
        return refuse(invalid("request has no \"deadline_ms\"".into()));
    };
    if deadline < now_ms {
        // The daemon has told its caller the call timed out: do nothing.
        return refuse(WireError::new(
            ErrorCode::Timeout,
            format!(
                "the request's deadline passed {} ms before it arrived; not performed",
                now_ms - deadline
            ),
        ));
    }
    let text = |key: &str| map.get(key).and_then(Value::as_str).unwrap_or_default();
    let params = map.get("params").cloned().unwrap_or(Value::Null);
    match Catalogue::get().parse(text("service"), text("action"), &params) {
        Ok(command) => Ok(Request::Perform { id, command }),
        Err(e) => refuse(WireError::new(e.code(), e.to_string())),
    }
}

/// The app's response to request `id`: its result, or the error.
pub fn encode_response(id: &str, outcome: Result<Value, WireError>) -> Vec<u8> {
    let body = match outcome {
        Ok(result) => {
            serde_json::json!({"v": PROTOCOL_VERSION, "id": id, "ok": true, "result": result})
        }
        Err(error) => {
            serde_json::json!({"v": PROTOCOL_VERSION, "id": id, "ok": false, "error": error})
        }
    };
    body.to_string().into_bytes()
}

/// What a response tells the waiting call.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// `ok: true` with its `result` (not yet checked against the catalogue).
    Ok(Value),
    /// `ok: false` with the phone's error, its code mapped onto ours.
    Err(WireError),
    /// The response names the request but cannot be used (wrong version,
    /// missing fields): the call fails instead of waiting for its timeout.
    Invalid(String),
}

/// Why a payload could not be used at all (it does not name a request).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable(pub String);

impl fmt::Display for Unreadable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Truncate an untrusted string for messages and logs.
pub(crate) fn clip(s: &str) -> String {
    if s.chars().count() <= MAX_ECHO {
        s.to_owned()
    } else {
        let mut out: String = s.chars().take(MAX_ECHO).collect();
        out.push('…');
        out
    }
}

fn object(payload: &[u8], what: &str) -> Result<Map<String, Value>, Unreadable> {
    if payload.len() > MAX_PAYLOAD {
        return Err(Unreadable(format!(
            "{what} of {} bytes is larger than {MAX_PAYLOAD}",
            payload.len()
        )));
    }
    droidwarden_services::schema::object_from_slice(payload)
        .map_err(|e| Unreadable(format!("{what} {e}")))
}

/// Decode a response: the request id it answers and what it says.
///
/// # Errors
/// [`Unreadable`] when the payload is too large, not a JSON object, or has
/// no usable `id`. A response that names an id but is otherwise wrong is an
/// `Ok` with [`Reply::Invalid`], so the waiting call can fail at once.
pub fn decode_response(payload: &[u8]) -> Result<(String, Reply), Unreadable> {
    let map = object(payload, "response")?;
    let id = match map.get("id") {
        Some(Value::String(id)) if !id.is_empty() && id.len() <= MAX_ID_LEN => id.clone(),
        Some(Value::String(_)) => {
            return Err(Unreadable(format!(
                "response id is empty or longer than {MAX_ID_LEN} bytes"
            )));
        }
        Some(other) => {
            return Err(Unreadable(format!(
                "response id is {} instead of a string",
                droidwarden_services::schema::json_type(other)
            )));
        }
        None => return Err(Unreadable("response has no id".into())),
    };
    Ok((id, reply(&map)))
}

fn reply(map: &Map<String, Value>) -> Reply {
    match map.get("v").and_then(Value::as_u64) {
        Some(PROTOCOL_VERSION) => {}
        Some(v) => {
            return Reply::Invalid(format!(
                "the companion app speaks protocol version {v}; this daemon speaks {PROTOCOL_VERSION}"
            ));
        }
        None => return Reply::Invalid("response has no protocol version \"v\"".into()),
    }
    match map.get("ok") {
        Some(Value::Bool(true)) => match map.get("result") {
            Some(result) => Reply::Ok(result.clone()),
            None => Reply::Invalid("response has \"ok\": true but no \"result\"".into()),
        },
        Some(Value::Bool(false)) => match map.get("error") {
            Some(Value::Object(error)) => phone_error(error),
            _ => Reply::Invalid("response has \"ok\": false but no \"error\" object".into()),
        },
        _ => Reply::Invalid("response has no boolean \"ok\"".into()),
    }
}

/// The phone's error with its code mapped onto the daemon's codes.
///
/// Codes about routing inside the daemon mean nothing coming from a phone,
/// and an app that does not know a service or action cannot perform it:
/// those become `unsupported_action` or `device_error`. Unknown codes (a
/// newer app) become `device_error` with the code kept in the message.
fn phone_error(error: &Map<String, Value>) -> Reply {
    let Some(code_str) = error.get("code").and_then(Value::as_str) else {
        return Reply::Invalid("error has no string \"code\"".into());
    };
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .map(clip)
        .unwrap_or_default();
    let parsed = serde_json::from_value::<ErrorCode>(Value::String(code_str.to_owned())).ok();
    let (code, message) = match parsed {
        Some(ErrorCode::UnknownService | ErrorCode::UnknownAction) => {
            (ErrorCode::UnsupportedAction, message)
        }
        Some(
            ErrorCode::DeviceNotFound | ErrorCode::DeviceAmbiguous | ErrorCode::InvalidRequest,
        ) => (ErrorCode::DeviceError, format!("{code_str}: {message}")),
        Some(code) => (code, message),
        None => (
            ErrorCode::DeviceError,
            format!("{}: {message}", clip(code_str)),
        ),
    };
    let retryable = error
        .get("retryable")
        .and_then(Value::as_bool)
        .unwrap_or_else(|| code.default_retryable());
    Reply::Err(WireError {
        code,
        message,
        retryable,
        details: None,
    })
}

/// The presence a payload on a companion's `online` topic announces:
/// `online` → `Some(true)`, `offline` or an empty payload (the retained
/// presence was cleared) → `Some(false)`, anything else → `None`.
pub fn presence_from_payload(payload: &[u8]) -> Option<bool> {
    match std::str::from_utf8(payload).map(str::trim) {
        Ok("online") => Some(true),
        Ok("offline" | "") => Some(false),
        _ => None,
    }
}

/// The kinds of event a phone pushes, each with a JSON body of a fixed shape.
///
/// State events come from the catalogue: a service that declares a
/// `companion_event` gets one, whose body is that service's state (the
/// result of its state read).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// A service's state changed.
    State {
        /// The event's name, the last topic level (`event/<name>`).
        event: &'static str,
        /// The service whose state the body is.
        service: &'static str,
    },
    /// A notification was posted: `{key, package, title, text, posted_ms}`.
    NotificationPosted,
    /// A notification was removed (dismissed, cancelled by its app, or its
    /// app uninstalled): `{key, package, removed_ms}`.
    NotificationRemoved,
}

impl EventKind {
    /// Every kind: the catalogue's state events, then the others.
    pub fn all() -> Vec<EventKind> {
        Catalogue::get()
            .services()
            .iter()
            .filter_map(|s| {
                s.companion_event.map(|event| Self::State {
                    event,
                    service: s.id,
                })
            })
            .chain([Self::NotificationPosted, Self::NotificationRemoved])
            .collect()
    }

    /// The kind's name, the last topic level (`event/<kind>`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::State { event, .. } => event,
            Self::NotificationPosted => "notification_posted",
            Self::NotificationRemoved => "notification_removed",
        }
    }

    /// The kind called `name`, if there is one.
    pub fn from_name(name: &str) -> Option<Self> {
        for kind in [Self::NotificationPosted, Self::NotificationRemoved] {
            if name == kind.as_str() {
                return Some(kind);
            }
        }
        Catalogue::get().services().iter().find_map(|s| {
            (s.companion_event == Some(name)).then_some(Self::State {
                event: s.companion_event?,
                service: s.id,
            })
        })
    }

    /// The service whose state the event reports; `None` for events that
    /// are not service state (notifications).
    pub fn service(self) -> Option<&'static str> {
        match self {
            Self::State { service, .. } => Some(service),
            Self::NotificationPosted | Self::NotificationRemoved => None,
        }
    }

    /// The schema an event body must match.
    pub fn schema(self) -> Schema {
        let state = self
            .service()
            .and_then(|id| Catalogue::get().service(id).ok())
            .and_then(|spec| spec.state);
        match (state, self) {
            (Some(read), _) => read().spec().result.clone(),
            (None, Self::NotificationRemoved) => removed_schema(),
            (None, _) => notification_schema(),
        }
    }
}

impl Serialize for EventKind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

fn notification_schema() -> Schema {
    Schema::object(
        "a posted notification",
        vec![
            Property::required("key", Schema::string("the notification's key")),
            Property::required("package", Schema::string("the posting app")),
            Property::required("title", Schema::string("").or_null()),
            Property::required("text", Schema::string("").or_null()),
            Property::required(
                "posted_ms",
                Schema::integer("when it was posted, Unix epoch ms", Some(0), None),
            ),
        ],
    )
}

fn removed_schema() -> Schema {
    Schema::object(
        "a removed notification",
        vec![
            Property::required("key", Schema::string("the notification's key")),
            Property::required("package", Schema::string("the posting app")),
            Property::required(
                "removed_ms",
                Schema::integer("when it was removed, Unix epoch ms", Some(0), None),
            ),
        ],
    )
}

/// Decode an event body of `kind`.
///
/// # Errors
/// [`Unreadable`] when the payload is too large, not a JSON object, or does
/// not match the kind's schema.
pub(crate) fn decode_event(kind: EventKind, payload: &[u8]) -> Result<Value, Unreadable> {
    let value = Value::Object(object(payload, "event")?);
    kind.schema().validate(&value).map_err(|v| {
        Unreadable(format!(
            "{kind} event body does not match its schema at {:?}: {}",
            v.path, v.reason
        ))
    })?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(payload: &str, expected: Result<(&str, Reply), &str>) {
        let got = decode_response(payload.as_bytes());
        match (got, expected) {
            (Ok((id, reply)), Ok((want_id, want))) => {
                assert_eq!(id, want_id, "{payload}");
                assert_eq!(reply, want, "{payload}");
            }
            (Err(Unreadable(reason)), Err(want)) => {
                assert!(reason.contains(want), "{payload}: {reason}");
            }
            (got, want) => panic!("{payload}: got {got:?}, expected {want:?}"),
        }
    }

    fn invalid(containing: &str) -> Reply {
        Reply::Invalid(containing.to_owned())
    }

    #[test]
    fn requests_carry_version_id_service_action_params_and_deadline() {
        let command = Catalogue::get()
            .parse(
                "audio_automation",
                "set_volume",
                &json!({"stream": "music", "level": 40}),
            )
            .unwrap();
        let body: Value = serde_json::from_slice(&encode_request("r1", &command, 1234)).unwrap();
        assert_eq!(
            body,
            json!({"v": 1, "id": "r1", "service": "audio_automation", "action": "set_volume",
                   "params": {"stream": "music", "level": 40}, "deadline_ms": 1234})
        );
        let command = Catalogue::get()
            .parse("battery", "status", &Value::Null)
            .unwrap();
        let body: Value = serde_json::from_slice(&encode_request("r2", &command, 1)).unwrap();
        assert_eq!(body["params"], json!({}));
    }

    #[test]
    fn responses() {
        check(
            r#"{"v":1,"id":"a","ok":true,"result":{"x":1}}"#,
            Ok(("a", Reply::Ok(json!({"x": 1})))),
        );
        check(
            r#"{"v":1,"id":"a","ok":true,"result":{},"extra":"ignored"}"#,
            Ok(("a", Reply::Ok(json!({})))),
        );
        check(
            r#"{"v":1,"id":"a","ok":false,"error":{"code":"permission_denied","message":"no","retryable":false}}"#,
            Ok((
                "a",
                Reply::Err(WireError {
                    code: ErrorCode::PermissionDenied,
                    message: "no".into(),
                    retryable: false,
                    details: None,
                }),
            )),
        );
        // retryable defaults to the code's default.
        check(
            r#"{"v":1,"id":"a","ok":false,"error":{"code":"timeout","message":"slow"}}"#,
            Ok(("a", Reply::Err(WireError::new(ErrorCode::Timeout, "slow")))),
        );
        check(
            r#"{"v":1,"id":"a","ok":false,"error":{"code":"unknown_action","message":"old app","retryable":false}}"#,
            Ok((
                "a",
                Reply::Err(WireError {
                    code: ErrorCode::UnsupportedAction,
                    message: "old app".into(),
                    retryable: false,
                    details: None,
                }),
            )),
        );
        check(
            r#"{"v":1,"id":"a","ok":false,"error":{"code":"battery_on_fire","message":"hot","retryable":false}}"#,
            Ok((
                "a",
                Reply::Err(WireError {
                    code: ErrorCode::DeviceError,
                    message: "battery_on_fire: hot".into(),
                    retryable: false,
                    details: None,
                }),
            )),
        );
        check(
            r#"{"v":2,"id":"a","ok":true,"result":{}}"#,
            Ok((
                "a",
                invalid("the companion app speaks protocol version 2; this daemon speaks 1"),
            )),
        );
        check(
            r#"{"id":"a","ok":true,"result":{}}"#,
            Ok(("a", invalid("response has no protocol version \"v\""))),
        );
        check(
            r#"{"v":1,"id":"a","ok":true}"#,
            Ok(("a", invalid("response has \"ok\": true but no \"result\""))),
        );
        check(
            r#"{"v":1,"id":"a","ok":false,"error":"boom"}"#,
            Ok((
                "a",
                invalid("response has \"ok\": false but no \"error\" object"),
            )),
        );
        check(
            r#"{"v":1,"id":"a","ok":false,"error":{"message":"x"}}"#,
            Ok(("a", invalid("error has no string \"code\""))),
        );
        check(
            r#"{"v":1,"id":"a","ok":"yes"}"#,
            Ok(("a", invalid("response has no boolean \"ok\""))),
        );
        check("", Err("not JSON"));
        check("\u{0}\u{1}garbage", Err("not JSON"));
        check("[1,2]", Err("instead of an object"));
        check(r#"{"v":1,"ok":true}"#, Err("no id"));
        check(r#"{"v":1,"id":7,"ok":true}"#, Err("instead of a string"));
        check(r#"{"v":1,"id":"","ok":true}"#, Err("empty"));
        let long = format!(r#"{{"v":1,"id":"{}","ok":true}}"#, "x".repeat(200));
        check(&long, Err("longer than"));
        let huge = format!(r#"{{"pad":"{}"}}"#, "x".repeat(MAX_PAYLOAD));
        check(&huge, Err("larger than"));
    }

    #[test]
    fn presence_payloads() {
        for (payload, want) in [
            ("online", Some(true)),
            (" online\n", Some(true)),
            ("offline", Some(false)),
            ("", Some(false)),
            ("ONLINE", None),
            ("1", None),
        ] {
            assert_eq!(
                presence_from_payload(payload.as_bytes()),
                want,
                "{payload:?}"
            );
        }
        assert_eq!(presence_from_payload(&[0xff, 0xfe]), None);
    }

    #[test]
    fn every_event_kind_has_a_schema_and_a_name_that_round_trips() {
        for kind in EventKind::all() {
            assert_eq!(EventKind::from_name(kind.as_str()), Some(kind));
            if let Some(service) = kind.service() {
                assert!(Catalogue::get().service(service).is_ok(), "{kind}");
            }
            assert!(kind.schema().to_json().is_object());
        }
        assert_eq!(EventKind::from_name("nope"), None);
    }

    #[test]
    fn events_are_checked_against_their_schema() {
        let ok =
            json!({"key": "k", "package": "com.a", "title": null, "text": "hi", "posted_ms": 5});
        assert_eq!(
            decode_event(EventKind::NotificationPosted, ok.to_string().as_bytes()).unwrap(),
            ok
        );
        let err = decode_event(EventKind::NotificationPosted, br#"{"key":"k"}"#).unwrap_err();
        assert!(err.0.contains("does not match"), "{err}");
        let removed = json!({"key": "k", "package": "com.a", "removed_ms": 7});
        assert_eq!(
            decode_event(
                EventKind::NotificationRemoved,
                removed.to_string().as_bytes()
            )
            .unwrap(),
            removed
        );
        let err =
            decode_event(EventKind::NotificationRemoved, ok.to_string().as_bytes()).unwrap_err();
        assert!(err.0.contains("does not match"), "{err}");
        let err = decode_event(EventKind::from_name("battery").unwrap(), b"not json").unwrap_err();
        assert!(err.0.contains("not JSON"), "{err}");
    }
}
