//! The app's side of one exchange: a request payload in, a response
//! payload out (`docs/companion-protocol.md`, "Requests" and "Responses").
//!
//! [`check`] reads a request: the protocol version, the deadline and the
//! parameters (with the catalogue's [`Catalogue::parse`], exactly as the
//! daemon validated them). A payload without a usable `id` cannot be
//! answered and is reported for the log instead.

use droidwarden_bridge::companion::{MAX_PAYLOAD, PROTOCOL_VERSION};
use droidwarden_services::{Catalogue, Command, ErrorCode, WireError};
use serde_json::{Value, json};

/// The longest request id the daemon sends.
const MAX_ID_LEN: usize = 128;

/// What to do with a request.
#[derive(Debug)]
pub enum Checked {
    /// Perform `command` and answer request `id`.
    Perform {
        /// The request id.
        id: String,
        /// The validated command.
        command: Command,
    },
    /// Answer at once, without performing anything (wrong version, deadline
    /// passed, invalid parameters).
    Answer(Vec<u8>),
}

/// Read a request payload received at `now_ms` (Unix epoch ms).
///
/// # Errors
/// Why the payload cannot be answered: too large, not a JSON object, or no
/// usable `id`.
pub fn check(payload: &[u8], now_ms: u64) -> Result<Checked, String> {
    // Requests carry at most a file's content (files.push), under the
    // daemon's 1 MiB packet limit.
    if payload.len() > MAX_PAYLOAD {
        return Err(format!(
            "request of {} bytes is larger than {MAX_PAYLOAD}",
            payload.len()
        ));
    }
    let map = droidwarden_services::schema::object_from_slice(payload)
        .map_err(|e| format!("request {e}"))?;
    let id = match map.get("id") {
        Some(Value::String(id)) if !id.is_empty() && id.len() <= MAX_ID_LEN => id.clone(),
        _ => return Err("request has no usable id".into()),
    };
    let refuse = |error: WireError| Ok(Checked::Answer(response(&id, Err(error))));
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
        Ok(command) => Ok(Checked::Perform { id, command }),
        Err(e) => refuse(WireError::new(e.code(), e.to_string())),
    }
}

/// The response payload for request `id`.
pub fn response(id: &str, outcome: Result<Value, WireError>) -> Vec<u8> {
    let body = match outcome {
        Ok(result) => json!({"v": PROTOCOL_VERSION, "id": id, "ok": true, "result": result}),
        Err(error) => json!({"v": PROTOCOL_VERSION, "id": id, "ok": false, "error": error}),
    };
    body.to_string().into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use droidwarden_bridge::companion::{Reply, decode_response, encode_request};

    const NOW: u64 = 1_700_000_000_000;

    /// The daemon's own encoder and decoder around this side: what the
    /// daemon sends is read, and what this side answers is what the daemon
    /// accepts.
    #[test]
    fn round_trip_with_the_daemons_encoder_and_decoder() {
        let command = Catalogue::get()
            .parse(
                "audio_automation",
                "set_volume",
                &json!({"stream": "music", "level": 40}),
            )
            .unwrap();
        let payload = encode_request("r-1", &command, NOW + 1000);
        let Checked::Perform { id, command: got } = check(&payload, NOW).unwrap() else {
            panic!("performed");
        };
        assert_eq!((id.as_str(), &got), ("r-1", &command));
        let result = json!({"stream": "music", "level": 40, "index": 6, "min": 0, "max": 15, "muted": false});
        let (id, reply) = decode_response(&response("r-1", Ok(result.clone()))).unwrap();
        assert_eq!((id.as_str(), reply), ("r-1", Reply::Ok(result)));
        let error = WireError::new(ErrorCode::UnsupportedAction, "not offered");
        let (_, reply) = decode_response(&response("r-1", Err(error.clone()))).unwrap();
        assert_eq!(reply, Reply::Err(error));
    }

    fn answer(body: Value) -> Value {
        match check(body.to_string().as_bytes(), NOW).unwrap() {
            Checked::Answer(payload) => serde_json::from_slice(&payload).unwrap(),
            Checked::Perform { .. } => panic!("{body} must not be performed"),
        }
    }

    #[test]
    fn bad_requests_are_answered_without_performing() {
        let base = json!({"v": 1, "id": "r", "service": "battery", "action": "status", "params": {}, "deadline_ms": NOW});
        let with = |key: &str, value: Value| {
            let mut b = base.clone();
            b[key] = value;
            b
        };
        for (body, code) in [
            (with("v", json!(2)), "invalid_request"),
            (with("deadline_ms", json!(NOW - 1)), "timeout"),
            (with("deadline_ms", json!("soon")), "invalid_request"),
            (with("service", json!("toaster")), "unknown_service"),
            (with("action", json!("explode")), "unknown_action"),
            (with("params", json!({"x": 1})), "invalid_params"),
        ] {
            let got = answer(body.clone());
            assert_eq!(got["error"]["code"], code, "{body}: {got}");
            assert_eq!(got["id"], "r");
        }
        for payload in [&b""[..], b"[]", b"{}", br#"{"id": 5}"#] {
            assert!(check(payload, NOW).is_err(), "{payload:?}");
        }
    }
}
