//! One request in, one response out: the app's side of the companion
//! protocol (`docs/companion-protocol.md`), without MQTT.
//!
//! `respond` reads a request payload, checks the protocol version, the
//! deadline and the parameters (with the catalogue, as the real app would),
//! has the action performed and builds the response. A payload without a
//! usable `id` cannot be answered (nothing would correlate the answer) and
//! is reported back for logging instead.

use droidwarden_bridge::companion::{Request, decode_request, encode_response};
use droidwarden_services::{Command, WireError};
use serde_json::Value;

/// The response to a request payload received at `now_ms` (Unix epoch ms),
/// or why it cannot be answered. `perform` runs only for a valid request
/// whose deadline has not passed. Reading and answering are the bridge's
/// ([`decode_request`], [`encode_response`]), shared with the Termux
/// companion.
pub(crate) fn respond(
    payload: &[u8],
    now_ms: u64,
    perform: impl FnOnce(&Command) -> Result<Value, WireError>,
) -> Result<Vec<u8>, String> {
    match decode_request(payload, now_ms).map_err(|e| e.0)? {
        Request::Perform { id, command } => Ok(encode_response(&id, perform(&command))),
        Request::Refuse { id, error } => Ok(encode_response(&id, Err(error))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use droidwarden_services::ErrorCode;
    use serde_json::json;

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
        let huge = vec![b' '; droidwarden_bridge::companion::MAX_PAYLOAD + 1];
        assert!(respond(&huge, NOW, |_| panic!("not performed")).is_err());
    }
}
