//! The app's side of one exchange: a request payload in, a response
//! payload out (`docs/companion-protocol.md`, "Requests" and "Responses").
//!
//! [`check`] reads a request with the bridge's `decode_request` (the
//! protocol version, the deadline, the parameters through the catalogue,
//! exactly as the daemon validated them); the emulated phone reads requests
//! with the same function. A payload without a usable `id` cannot be
//! answered and is reported for the log instead.

use droidwarden_bridge::companion::{Request, decode_request};
use droidwarden_services::Command;

/// The response payload for request `id` (the bridge's encoder).
pub use droidwarden_bridge::companion::encode_response as response;

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
    /// Publish this answer at once, performing nothing (another protocol
    /// version, the deadline passed, invalid parameters).
    Answer(Vec<u8>),
}

/// Read a request payload received at `now_ms` (Unix epoch ms), with the
/// bridge's [`decode_request`]: the same reading as the emulated phone's.
///
/// # Errors
/// Why the payload cannot be answered: too large, not a JSON object, or no
/// usable `id`.
pub fn check(payload: &[u8], now_ms: u64) -> Result<Checked, String> {
    Ok(match decode_request(payload, now_ms).map_err(|e| e.0)? {
        Request::Perform { id, command } => Checked::Perform { id, command },
        Request::Refuse { id, error } => Checked::Answer(response(&id, Err(error))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use droidwarden_bridge::companion::{Reply, decode_response, encode_request};
    use droidwarden_services::{Catalogue, ErrorCode, WireError};
    use serde_json::{Value, json};

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
