//! The control port: newline-delimited JSON for other processes.
//!
//! One request per line, one JSON reply line each:
//!
//! | request | reply |
//! |---|---|
//! | `{"op":"state"}` | `{"ok":true,"state":{…}}` |
//! | `{"op":"set","path":"battery.level","value":42}` | `{"ok":true}` |
//! | `{"op":"set","path":"ui.locked","value":true}` (lock; `false` unlocks) | `{"ok":true}` |
//! | `{"op":"set","path":"content.notifications","value":[…]}` (post and remove notifications) | `{"ok":true}` |
//! | `{"op":"log"}` | `{"ok":true,"log":[{"seq":1,"ts_ms":…,"argv":[…]}]}` |
//! | `{"op":"clear_log"}` | `{"ok":true}` |
//! | `{"op":"fault","kind":"delay","ms":500}` | `{"ok":true}` |
//! | `{"op":"fault","kind":"drop"}` | `{"ok":true}` |
//! | `{"op":"fault","kind":"fail","exit":1,"stderr":"boom"}` | `{"ok":true}` |
//! | `{"op":"fault","kind":"freeze"}` / `"thaw"` | `{"ok":true}` |
//! | `{"op":"fault","kind":"clear"}` | `{"ok":true}` |
//! | `{"op":"listen","enabled":false}` | `{"ok":true,"listening":false}` |
//! | `{"op":"move","port":0}` (0: a free port) | `{"ok":true,"adb":"127.0.0.1:41234"}` |
//! | `{"op":"companion","online":false}` (`"abrupt":true` to skip the goodbye) | `{"ok":true,"connected":false}` |
//! | `{"op":"companion_duplicates","enabled":true}` | `{"ok":true}` |
//! | `{"op":"companion_status"}` | `{"ok":true,"companion":{"id":…,"connected":…,"duplicates":…,"tracking_interval_s":…,"photos":[…]}}` |
//!
//! Faults apply to companion requests too: a delay holds every answer, a
//! one-shot `fail` answers the next request with `device_error` without
//! performing it, a one-shot `drop` leaves it unanswered.
//!
//! Any problem (malformed JSON, unknown op, bad path) is answered with
//! `{"ok":false,"error":"…"}` and the connection stays usable. The request
//! parsing (`handle_line`) is separate from the socket loop so it is tested
//! without one.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::fault::Fault;
use crate::sim::SimHandle;

/// The longest request line accepted; longer lines get an error reply and
/// the connection is closed (the rest of the line cannot be skipped safely).
const MAX_LINE: usize = 1024 * 1024;

#[derive(Debug, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
enum Request {
    // Unit variants would not reject unknown fields; empty struct variants do.
    State {},
    Set {
        path: String,
        value: Value,
    },
    Log {},
    ClearLog {},
    Fault {
        kind: FaultKind,
        #[serde(default)]
        ms: Option<u64>,
        #[serde(default)]
        exit: Option<u8>,
        #[serde(default)]
        stderr: Option<String>,
    },
    Listen {
        enabled: bool,
    },
    Move {
        port: u16,
    },
    Companion {
        online: bool,
        #[serde(default)]
        abrupt: bool,
    },
    CompanionDuplicates {
        enabled: bool,
    },
    CompanionStatus {},
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case")]
enum FaultKind {
    Delay,
    Drop,
    Fail,
    Freeze,
    Thaw,
    Clear,
}

fn error(message: impl std::fmt::Display) -> Value {
    json!({ "ok": false, "error": message.to_string() })
}

/// Answers one request line.
pub(crate) async fn handle_line(handle: &SimHandle, line: &str) -> Value {
    let request: Request = match serde_json::from_str(line) {
        Ok(r) => r,
        Err(e) => return error(format!("invalid request: {e}")),
    };
    match request {
        Request::State {} => json!({ "ok": true, "state": handle.state() }),
        Request::Set { path, value } => match handle.set_path(&path, value) {
            Ok(()) => json!({ "ok": true }),
            Err(e) => error(e),
        },
        Request::Log {} => json!({ "ok": true, "log": handle.command_log() }),
        Request::ClearLog {} => {
            handle.clear_command_log();
            json!({ "ok": true })
        }
        Request::Fault {
            kind,
            ms,
            exit,
            stderr,
        } => {
            let fault = match kind {
                FaultKind::Delay => match ms {
                    Some(ms) => Fault::Delay(Duration::from_millis(ms)),
                    None => return error("fault delay needs \"ms\""),
                },
                FaultKind::Drop => Fault::Drop,
                FaultKind::Fail => Fault::Fail {
                    exit: exit.unwrap_or(1),
                    stderr: stderr.unwrap_or_default(),
                },
                FaultKind::Freeze => Fault::Freeze,
                FaultKind::Thaw => Fault::Thaw,
                FaultKind::Clear => Fault::Clear,
            };
            handle.set_fault(fault);
            json!({ "ok": true })
        }
        Request::Listen { enabled } => match handle.set_listening(enabled).await {
            Ok(()) => json!({ "ok": true, "listening": enabled }),
            Err(e) => error(e),
        },
        Request::Move { port } => match handle.move_adb(port).await {
            Ok(addr) => json!({ "ok": true, "adb": addr.to_string() }),
            Err(e) => error(e),
        },
        Request::Companion { online, abrupt } => {
            match handle.set_companion_online(online, abrupt).await {
                Ok(connected) => json!({ "ok": true, "connected": connected }),
                Err(e) => error(e),
            }
        }
        Request::CompanionDuplicates { enabled } => {
            match handle.set_companion_duplicates(enabled) {
                Ok(()) => json!({ "ok": true }),
                Err(e) => error(e),
            }
        }
        Request::CompanionStatus {} => match handle.companion_status() {
            Ok(status) => json!({ "ok": true, "companion": status }),
            Err(e) => error(e),
        },
    }
}

/// Reads one line of at most `MAX_LINE` bytes; `Ok(None)` at end of input,
/// `Err` when the line is too long or not UTF-8.
async fn read_line(
    reader: &mut BufReader<tokio::net::tcp::OwnedReadHalf>,
) -> std::io::Result<Option<Result<String, String>>> {
    let mut buf = Vec::new();
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(if buf.is_empty() {
                None
            } else {
                Some(String::from_utf8(buf).map_err(|e| e.to_string()))
            });
        }
        if let Some(pos) = available.iter().position(|b| *b == b'\n') {
            buf.extend_from_slice(&available[..pos]);
            reader.consume(pos + 1);
            return Ok(Some(
                String::from_utf8(buf).map_err(|e| format!("request is not UTF-8: {e}")),
            ));
        }
        let n = available.len();
        buf.extend_from_slice(available);
        reader.consume(n);
        if buf.len() > MAX_LINE {
            return Ok(Some(Err(format!(
                "request line longer than {MAX_LINE} bytes"
            ))));
        }
    }
}

async fn serve_client(stream: TcpStream, handle: SimHandle, cancel: CancellationToken) {
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    loop {
        let line = tokio::select! {
            () = cancel.cancelled() => return,
            r = read_line(&mut reader) => r,
        };
        let (reply, close) = match line {
            Ok(None) | Err(_) => return,
            Ok(Some(Ok(text))) if text.trim().is_empty() => continue,
            Ok(Some(Ok(text))) => (
                handle_line(&handle, text.trim_end_matches('\r')).await,
                false,
            ),
            Ok(Some(Err(problem))) => (error(problem), true),
        };
        let mut bytes = reply.to_string().into_bytes();
        bytes.push(b'\n');
        if write.write_all(&bytes).await.is_err() || close {
            return;
        }
    }
}

/// Accepts control clients until `cancel`.
pub(crate) async fn serve(
    listener: TcpListener,
    handle: SimHandle,
    cancel: CancellationToken,
    tracker: TaskTracker,
) {
    crate::sim::accept_until(&listener, &cancel, "control", |stream, peer| {
        tracing::debug!(%peer, "control client");
        tracker.spawn(serve_client(stream, handle.clone(), cancel.clone()));
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::{Sim, SimConfig};

    async fn check(handle: &SimHandle, line: &str) -> Value {
        handle_line(handle, line).await
    }

    #[tokio::test]
    async fn requests_and_errors() {
        let sim = Sim::start(SimConfig::default()).await.expect("start");
        let r = check(&sim, r#"{"op":"state"}"#).await;
        assert_eq!(r["ok"], true);
        assert_eq!(r["state"]["battery"]["level"], 85);
        assert_eq!(
            check(&sim, r#"{"op":"set","path":"battery.level","value":42}"#).await,
            json!({"ok":true})
        );
        assert_eq!(sim.state().battery.level, 42);
        let bad = check(&sim, r#"{"op":"set","path":"battery.nope","value":1}"#).await;
        assert_eq!(bad["ok"], false);
        assert!(
            bad["error"]
                .as_str()
                .is_some_and(|e| e.contains("battery.nope"))
        );
        sim.execute("echo hi");
        let log = check(&sim, r#"{"op":"log"}"#).await;
        assert_eq!(log["log"][0]["argv"], json!(["echo", "hi"]));
        assert_eq!(
            check(&sim, r#"{"op":"clear_log"}"#).await,
            json!({"ok":true})
        );
        assert!(sim.command_log().is_empty());
        assert_eq!(
            check(&sim, r#"{"op":"fault","kind":"delay","ms":5}"#).await,
            json!({"ok":true})
        );
        assert_eq!(
            check(
                &sim,
                r#"{"op":"fault","kind":"fail","exit":3,"stderr":"x"}"#
            )
            .await,
            json!({"ok":true})
        );
        assert_eq!(
            check(&sim, r#"{"op":"fault","kind":"clear"}"#).await,
            json!({"ok":true})
        );
        assert_eq!(
            check(&sim, r#"{"op":"fault","kind":"delay"}"#).await["ok"],
            false
        );
        assert_eq!(
            check(&sim, r#"{"op":"fault","kind":"explode"}"#).await["ok"],
            false
        );
        assert_eq!(check(&sim, "not json").await["ok"], false);
        assert_eq!(check(&sim, r#"{"op":"reboot"}"#).await["ok"], false);
        assert_eq!(
            check(&sim, r#"{"op":"state","extra":1}"#).await["ok"],
            false
        );
        assert_eq!(
            check(&sim, r#"{"op":"listen","enabled":false}"#).await,
            json!({"ok":true,"listening":false})
        );
        assert!(!sim.is_listening().await);
        assert_eq!(
            check(&sim, r#"{"op":"listen","enabled":true}"#).await["ok"],
            true
        );
        // Without companion mode the companion ops are refused, not ignored.
        for op in [
            r#"{"op":"companion","online":false}"#,
            r#"{"op":"companion_duplicates","enabled":true}"#,
            r#"{"op":"companion_status"}"#,
        ] {
            let r = check(&sim, op).await;
            assert_eq!(r["ok"], false, "{op}");
            assert!(
                r["error"].as_str().is_some_and(|e| e.contains("companion")),
                "{op}"
            );
        }
        assert_eq!(check(&sim, r#"{"op":"companion"}"#).await["ok"], false);
        sim.shutdown().await;
    }
}
