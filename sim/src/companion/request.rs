//! One request in, one response out: the app's side of the companion
//! protocol (`docs/companion-protocol.md`), without MQTT.
//!
//! `respond` reads a request payload, checks the protocol version, the
//! deadline and the parameters (with the catalogue, as the real app would),
//! has the action performed and builds the response. A payload without a
//! usable `id` cannot be answered (nothing would correlate the answer) and
//! is reported back for logging instead.

use droidwarden_services::{Catalogue, Command, ErrorCode, WireError};
use serde_json::{Map, Value, json};

/// The protocol version the app speaks.
pub(crate) const PROTOCOL_VERSION: u64 = 1;

/// The longest request payload the app reads. Requests are small; anything
/// larger is not from the daemon.
const MAX_REQUEST: usize = 64 * 1024;

/// The response to a request payload received at `now_ms` (Unix epoch ms),
/// or why it cannot be answered. `perform` runs only for a valid request
/// whose deadline has not passed.
pub(crate) fn respond(
    payload: &[u8],
    now_ms: u64,
    perform: impl FnOnce(&Command) -> Result<Value, WireError>,
) -> Result<Vec<u8>, String> {
    if payload.len() > MAX_REQUEST {
        return Err(format!(
            "request of {} bytes is larger than {MAX_REQUEST}",
            payload.len()
        ));
    }
    let map = droidwarden_services::schema::object_from_slice(payload)
        .map_err(|e| format!("request {e}"))?;
    let id = match map.get("id") {
        Some(Value::String(id)) if !id.is_empty() && id.len() <= 128 => id.clone(),
        _ => return Err("request has no usable id".into()),
    };
    let outcome = check(&map, now_ms).and_then(|command| perform(&command));
    let body = match outcome {
        Ok(result) => json!({ "v": PROTOCOL_VERSION, "id": id, "ok": true, "result": result }),
        Err(error) => json!({ "v": PROTOCOL_VERSION, "id": id, "ok": false, "error": error }),
    };
    Ok(body.to_string().into_bytes())
}

/// The typed command of a request that may be performed now.
fn check(map: &Map<String, Value>, now_ms: u64) -> Result<Command, WireError> {
    let invalid = |message: String| WireError::new(ErrorCode::InvalidRequest, message);
    match map.get("v").and_then(Value::as_u64) {
        Some(PROTOCOL_VERSION) => {}
        Some(v) => {
            return Err(invalid(format!(
                "unsupported protocol version {v}; this app speaks {PROTOCOL_VERSION}"
            )));
        }
        None => return Err(invalid("request has no protocol version \"v\"".into())),
    }
    let Some(deadline) = map.get("deadline_ms").and_then(Value::as_u64) else {
        return Err(invalid("request has no \"deadline_ms\"".into()));
    };
    if deadline < now_ms {
        // Not performed: the daemon has stopped waiting for it.
        return Err(WireError::new(
            ErrorCode::Timeout,
            format!(
                "the request's deadline passed {} ms before it arrived; not performed",
                now_ms - deadline
            ),
        ));
    }
    let text = |key: &str| map.get(key).and_then(Value::as_str).unwrap_or_default();
    let params = map.get("params").cloned().unwrap_or(Value::Null);
    Catalogue::get()
        .parse(text("service"), text("action"), &params)
        .map_err(|e| WireError::new(e.code(), e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_700_000_000_000;

    fn request(body: Value) -> Vec<u8> {
        body.to_string().into_bytes()
    }

    /// Runs `respond` with a `perform` that records the command and answers `{"done": true}`.
    fn check_case(body: Value, expected: Value) {
        let mut performed = None;
        let out = respond(&request(body.clone()), NOW, |c| {
            performed = Some(c.clone());
            Ok(json!({"done": true}))
        })
        .expect("answerable");
        let got: Value = serde_json::from_slice(&out).expect("JSON");
        assert_eq!(got, expected, "{body}");
        assert_eq!(performed.is_some(), expected["ok"] == true, "{body}");
    }

    fn error(code: &str, retryable: bool) -> Value {
        json!({"v": 1, "id": "r", "ok": false, "error": {"code": code, "retryable": retryable}})
    }

    /// `check_case`, comparing the error without its message, which must contain `text`.
    fn check_error(body: Value, code: &str, retryable: bool, text: &str) {
        let out = respond(&request(body.clone()), NOW, |_| panic!("not performed")).unwrap();
        let mut got: Value = serde_json::from_slice(&out).unwrap();
        let message = got["error"]["message"].take();
        got["error"].as_object_mut().unwrap().remove("message");
        assert_eq!(got, error(code, retryable), "{body}");
        assert!(
            message.as_str().unwrap().contains(text),
            "{body}: {message}"
        );
    }

    #[test]
    fn a_valid_request_is_performed_and_answered_with_its_id() {
        check_case(
            json!({"v": 1, "id": "r", "service": "battery", "action": "status", "params": {}, "deadline_ms": NOW + 1}),
            json!({"v": 1, "id": "r", "ok": true, "result": {"done": true}}),
        );
        // Node types are accepted as well as service ids, and params may be absent.
        check_case(
            json!({"v": 1, "id": "r", "service": "batteryMonitor", "action": "status", "deadline_ms": NOW}),
            json!({"v": 1, "id": "r", "ok": true, "result": {"done": true}}),
        );
    }

    #[test]
    fn the_performers_error_is_the_answer() {
        let out = respond(
            &request(json!({"v": 1, "id": "r", "service": "battery", "action": "status", "deadline_ms": NOW})),
            NOW,
            |_| Err(WireError::new(ErrorCode::PermissionDenied, "nope")),
        )
        .unwrap();
        assert_eq!(
            serde_json::from_slice::<Value>(&out).unwrap(),
            json!({"v": 1, "id": "r", "ok": false, "error": {"code": "permission_denied", "message": "nope", "retryable": false}})
        );
    }

    #[test]
    fn bad_requests_are_refused_without_performing() {
        let base = json!({"v": 1, "id": "r", "service": "audio_automation", "action": "set_volume",
                          "params": {"stream": "music", "level": 40}, "deadline_ms": NOW});
        let with = |key: &str, value: Value| {
            let mut body = base.clone();
            body[key] = value;
            body
        };
        check_error(with("v", json!(2)), "invalid_request", false, "version 2");
        check_error(
            {
                let mut b = base.clone();
                b.as_object_mut().unwrap().remove("v");
                b
            },
            "invalid_request",
            false,
            "no protocol version",
        );
        check_error(
            with("deadline_ms", json!(NOW - 5)),
            "timeout",
            true,
            "passed 5 ms",
        );
        check_error(
            with("deadline_ms", json!("soon")),
            "invalid_request",
            false,
            "deadline_ms",
        );
        check_error(
            with("service", json!("toaster")),
            "unknown_service",
            false,
            "toaster",
        );
        check_error(
            with("action", json!("explode")),
            "unknown_action",
            false,
            "explode",
        );
        check_error(
            with("params", json!({"stream": "music", "level": 400})),
            "invalid_params",
            false,
            "level",
        );
        check_error(
            with("params", json!({"stream": "music", "level": 1, "x": 1})),
            "invalid_params",
            false,
            "x",
        );
    }

    #[test]
    fn garbage_cannot_be_answered() {
        for payload in [
            &b""[..],
            b"\xff",
            b"[]",
            b"{}",
            br#"{"id": 5}"#,
            br#"{"id": ""}"#,
        ] {
            assert!(
                respond(payload, NOW, |_| panic!("not performed")).is_err(),
                "{payload:?}"
            );
        }
        let huge = vec![b' '; MAX_REQUEST + 1];
        assert!(respond(&huge, NOW, |_| panic!("not performed")).is_err());
    }
}
