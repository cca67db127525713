//! The on-device UI server: the uiautomator2 project's `u2.jar`, started on
//! the phone with `app_process` and spoken to over HTTP JSON-RPC through
//! the adb server (`docs/screen-component.md` says why this component).
//!
//! Nothing here runs unless the person allowed it by naming the jar
//! (`[adb] ui_server_jar`, [`super::AdbConfig::ui_server_jar`]). Then the
//! first call that wants the server:
//!
//! 1. sends the jar to `/data/local/tmp/u2.jar` with the file service
//!    (`sync:`), unless a file of the same size is already there;
//! 2. runs `CLASSPATH=/data/local/tmp/u2.jar app_process /
//!    com.wetest.uia2.Main -p 9008` on a shell stream that it keeps open —
//!    as the official Python client does, the server lives as long as that
//!    stream, so dropping it (the device removed, the daemon stopped) stops
//!    the server;
//! 3. waits for `GET /ping` to answer `pong`.
//!
//! Each call then opens the device's `tcp:9008` through the adb server
//! (what `adb forward` would open, without a host port that other local
//! users could reach), sends one `POST /jsonrpc/0` with `Connection:
//! close`, and reads the answer to the end. A server that died (its shell
//! stream closed, or a call cut off without an answer) is forgotten and
//! started again by the next call; a start that fails is not tried again
//! for [`RETRY_AFTER`], so a phone where it cannot run does not pay for a
//! start at every call. Callers fall back to `uiautomator dump` and
//! `input` whenever [`UiRpcError`] says the request never reached the
//! server.
//!
//! Values passed (text typed, the clipboard) are never logged.

use super::exchange::{self, Conn, ExchangeError, bounded};
use super::{AdbDevice, sync};
use crate::adb::actions::UiRpcError;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

/// Where the jar goes on the phone (the path the official client uses, so
/// either client finds the other's copy).
pub const UI_SERVER_JAR_REMOTE: &str = "/data/local/tmp/u2.jar";

/// The port the server listens on, on the phone.
pub const UI_SERVER_PORT: u16 = 9008;

/// How long a failed start keeps the server from being started again.
pub const RETRY_AFTER: Duration = Duration::from_secs(60);

/// The most a start (push, launch, first `pong`) may take. A real phone
/// answers within one to three seconds (the official client allows 30).
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// The most one request may take when the device's call timeout is larger.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest answer read (a hierarchy dump of a busy screen is a few
/// hundred kilobytes).
const MAX_RESPONSE: usize = 8 * 1024 * 1024;

/// How often `/ping` is tried while the server starts.
const PING_EVERY: Duration = Duration::from_millis(200);

/// The server's state on one phone.
#[derive(Debug, Default)]
pub(crate) struct UiServer {
    /// The jar on this machine; `None`: the person did not allow the server.
    jar: Option<PathBuf>,
    state: tokio::sync::Mutex<State>,
}

#[derive(Debug, Default)]
enum State {
    /// Not running; when a start failed, when and why.
    #[default]
    Stopped,
    /// A start failed at this time, for this reason.
    Failed(Instant, String),
    /// Running: the shell stream that keeps it alive.
    Running(Conn),
}

impl UiServer {
    /// The server of one phone: off without a jar.
    pub(crate) fn new(jar: Option<PathBuf>) -> Self {
        Self {
            jar,
            state: tokio::sync::Mutex::default(),
        }
    }
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Conn")
    }
}

/// Whether the shell stream that keeps the server alive is still open: a
/// read that would block means it is; end of stream or an error means the
/// server exited. Output the server printed is read and dropped.
fn alive(conn: &Conn) -> bool {
    let mut buf = [0u8; 1024];
    loop {
        match conn.stream.get_ref().try_read(&mut buf) {
            Ok(0) => return false,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return true,
            Err(_) => return false,
        }
    }
}

impl AdbDevice {
    /// One JSON-RPC call, starting the server first when it is allowed and
    /// not running (see the module's documentation).
    pub(super) async fn ui_rpc(&self, method: &str, params: Value) -> Result<Value, UiRpcError> {
        let Some(jar) = self.ui_server.jar.as_ref() else {
            return Err(UiRpcError::Unavailable(
                "it is off: name the uiautomator2 jar in [adb] ui_server_jar to allow it (docs/screen-component.md)".into(),
            ));
        };
        let budget = self.call_timeout.min(REQUEST_TIMEOUT);
        let mut state = self.ui_server.state.lock().await;
        if !matches!(&*state, State::Running(conn) if alive(conn)) {
            if let State::Failed(at, why) = &*state
                && at.elapsed() < RETRY_AFTER
            {
                return Err(UiRpcError::Unavailable(format!(
                    "it could not be started {} s ago ({why}); the next try is after {} s",
                    at.elapsed().as_secs(),
                    RETRY_AFTER.as_secs()
                )));
            }
            let deadline = Instant::now() + self.call_timeout.min(START_TIMEOUT);
            match self.start_ui_server(jar, deadline).await {
                Ok(conn) => *state = State::Running(conn),
                Err(why) => {
                    tracing::info!(device = %self.name, reason = %why, "the on-device UI server did not start");
                    *state = State::Failed(Instant::now(), why.clone());
                    return Err(UiRpcError::Unavailable(why));
                }
            }
        }
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let request = http_request("POST", "/jsonrpc/0", Some(&body.to_string()));
        let deadline = Instant::now() + budget;
        tracing::debug!(device = %self.name, method, "ui server call");
        match self.http(&request, deadline).await {
            Ok((200, body)) => rpc_result(&body),
            Ok((status, _)) => Err(UiRpcError::Rpc {
                code: i64::from(status),
                message: format!("HTTP status {status}"),
            }),
            Err(e) => {
                // Whatever happened, the next call starts from a clean slate.
                *state = State::Stopped;
                tracing::info!(device = %self.name, method, error = %e, "the on-device UI server is gone");
                Err(e)
            }
        }
    }

    /// Push the jar when needed, launch the server and wait for its `pong`.
    async fn start_ui_server(&self, jar: &Path, deadline: Instant) -> Result<Conn, String> {
        let size = tokio::fs::metadata(jar)
            .await
            .map_err(|e| format!("cannot read {}: {e}", jar.display()))?
            .len();
        let there = sync::stat(&self.server, &self.serial, UI_SERVER_JAR_REMOTE, deadline)
            .await
            .map_err(|e| format!("cannot look at {UI_SERVER_JAR_REMOTE}: {e}"))?;
        if there.is_none_or(|st| u64::from(st.size) != size) {
            tracing::info!(device = %self.name, jar = %jar.display(), "sending the on-device UI server");
            let mut file = tokio::fs::File::open(jar)
                .await
                .map_err(|e| format!("cannot open {}: {e}", jar.display()))?;
            sync::send(
                &self.server,
                &self.serial,
                sync::Outgoing {
                    remote: UI_SERVER_JAR_REMOTE,
                    permissions: 0o644,
                    mtime: 0,
                    data: &mut file,
                    max: size,
                    replace: true,
                },
                deadline,
            )
            .await
            .map_err(|e| format!("cannot send the jar to {UI_SERVER_JAR_REMOTE}: {e}"))?;
        }
        let line = format!(
            "CLASSPATH={UI_SERVER_JAR_REMOTE} app_process / com.wetest.uia2.Main -p {UI_SERVER_PORT}"
        );
        let known = self.status().protocol;
        let protocol = match known {
            Some(p) => p,
            None => exchange::protocol_for(
                &exchange::features(&self.server, &self.serial, deadline)
                    .await
                    .map_err(|e| e.to_string())?,
            ),
        };
        let service = match protocol {
            exchange::Protocol::V2 => format!("shell,v2,raw:{line}"),
            exchange::Protocol::V1 => format!("shell:{line}"),
        };
        tracing::info!(device = %self.name, "starting the on-device UI server");
        let launch = bounded(deadline, async {
            let mut conn = Conn::to_device(&self.server, &self.serial).await?;
            conn.request(&service).await?;
            Ok(conn)
        })
        .await
        .map_err(|e| format!("cannot launch it: {e}"))?;
        let ping = http_request("GET", "/ping", None);
        loop {
            if !alive(&launch) {
                return Err("it exited at once (app_process could not run it)".into());
            }
            let attempt = Instant::now() + PING_EVERY.max(Duration::from_millis(500));
            if let Ok((200, body)) = self.http(&ping, attempt.min(deadline)).await
                && body == b"pong"
            {
                return Ok(launch);
            }
            if Instant::now() + PING_EVERY >= deadline {
                return Err(format!(
                    "it did not answer /ping within {} s",
                    START_TIMEOUT.as_secs()
                ));
            }
            tokio::time::sleep(PING_EVERY).await;
        }
    }

    /// One HTTP exchange with the server: the status and the body.
    async fn http(&self, request: &[u8], deadline: Instant) -> Result<(u16, Vec<u8>), UiRpcError> {
        let opened = bounded(deadline, async {
            let mut conn = Conn::to_device(&self.server, &self.serial).await?;
            conn.request(&format!("tcp:{UI_SERVER_PORT}")).await?;
            Ok(conn)
        })
        .await;
        let mut conn = opened.map_err(|e| match e {
            ExchangeError::Refused(m) => {
                UiRpcError::Unavailable(format!("tcp:{UI_SERVER_PORT}: {m}"))
            }
            other => UiRpcError::Unavailable(other.to_string()),
        })?;
        let answer = bounded(deadline, async {
            conn.stream.write_all(request).await?;
            let mut raw = Vec::new();
            (&mut conn.stream)
                .take(MAX_RESPONSE as u64 + 1)
                .read_to_end(&mut raw)
                .await?;
            Ok(raw)
        })
        .await
        .map_err(|e| UiRpcError::Lost(e.to_string()))?;
        if answer.is_empty() {
            return Err(UiRpcError::Lost(
                "the connection closed without an answer".into(),
            ));
        }
        if answer.len() > MAX_RESPONSE {
            return Err(UiRpcError::Lost(format!(
                "an answer over {MAX_RESPONSE} bytes"
            )));
        }
        parse_response(&answer).map_err(UiRpcError::Lost)
    }
}

/// An HTTP/1.1 request that asks the server to close the connection after
/// its answer (and not to compress it: NanoHTTPD's gzip leaks, the official
/// client notes).
fn http_request(method: &str, path: &str, body: Option<&str>) -> Vec<u8> {
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{UI_SERVER_PORT}\r\nUser-Agent: droidwarden\r\nAccept-Encoding: \r\nConnection: close\r\n"
    );
    if let Some(body) = body {
        head.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        ));
    } else {
        head.push_str("\r\n");
    }
    head.into_bytes()
}

/// The status and body of a whole HTTP/1.1 answer (read to the end of the
/// connection): `Content-Length`, chunked, or everything after the head.
fn parse_response(raw: &[u8]) -> Result<(u16, Vec<u8>), String> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut response = httparse::Response::new(&mut headers);
    let head = match response.parse(raw) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Err("the answer ended inside its head".into()),
        Err(e) => return Err(format!("not an HTTP answer: {e}")),
    };
    let status = response.code.unwrap_or(0);
    let header = |name: &str| {
        response
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| String::from_utf8_lossy(h.value).trim().to_ascii_lowercase())
    };
    let rest = &raw[head..];
    if header("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        return dechunk(rest).map(|body| (status, body));
    }
    match header("content-length") {
        Some(len) => {
            let len: usize = len
                .parse()
                .map_err(|_| format!("a bad Content-Length {len:?}"))?;
            if rest.len() < len {
                return Err(format!(
                    "the answer ended after {} of its {len} bytes",
                    rest.len()
                ));
            }
            Ok((status, rest[..len].to_vec()))
        }
        None => Ok((status, rest.to_vec())),
    }
}

/// A chunked body, joined.
fn dechunk(mut rest: &[u8]) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    loop {
        let line_end = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("a chunk without its size line")?;
        let size_text = String::from_utf8_lossy(&rest[..line_end]);
        let size_text = size_text.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| format!("a bad chunk size {size_text:?}"))?;
        rest = &rest[line_end + 2..];
        if size == 0 {
            return Ok(body);
        }
        if rest.len() < size + 2 {
            return Err("the answer ended inside a chunk".into());
        }
        body.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
}

/// The `result` of a JSON-RPC answer, or its `error`.
fn rpc_result(body: &[u8]) -> Result<Value, UiRpcError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| UiRpcError::Lost(format!("the answer is not JSON: {e}")))?;
    if let Some(error) = value.get("error") {
        return Err(UiRpcError::Rpc {
            code: error.get("code").and_then(Value::as_i64).unwrap_or(0),
            message: error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("")
                .chars()
                .take(300)
                .collect(),
        });
    }
    value
        .get("result")
        .cloned()
        .ok_or_else(|| UiRpcError::Lost("a JSON-RPC answer without result or error".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_close_the_connection_and_carry_their_length() {
        let r =
            String::from_utf8(http_request("POST", "/jsonrpc/0", Some("{\"a\":\"ü\"}"))).unwrap();
        assert!(r.starts_with("POST /jsonrpc/0 HTTP/1.1\r\n"));
        assert!(r.contains("Connection: close\r\n"));
        assert!(r.contains("Content-Length: 10\r\n\r\n{\"a\":\"ü\"}"), "{r}");
        let g = String::from_utf8(http_request("GET", "/ping", None)).unwrap();
        assert!(g.ends_with("Connection: close\r\n\r\n"));
    }

    #[test]
    fn answers_by_length_chunks_or_to_the_end() {
        assert_eq!(
            parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\npongXX").unwrap(),
            (200, b"pong".to_vec())
        );
        assert_eq!(
            parse_response(
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\npo\r\n2;x=1\r\nng\r\n0\r\n\r\n"
            )
            .unwrap(),
            (200, b"pong".to_vec())
        );
        assert_eq!(
            parse_response(b"HTTP/1.0 500 Oops\r\n\r\nbad").unwrap(),
            (500, b"bad".to_vec())
        );
        assert!(parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\npong").is_err());
        assert!(parse_response(b"HTTP/1.1 200 OK\r\nContent-").is_err());
        assert!(parse_response(b"\x00\x01garbage").is_err());
        assert!(
            parse_response(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").is_err()
        );
    }

    #[test]
    fn rpc_answers_are_results_or_errors() {
        assert_eq!(
            rpc_result(br#"{"jsonrpc":"2.0","id":1,"result":"x"}"#),
            Ok(json!("x"))
        );
        assert_eq!(
            rpc_result(br#"{"jsonrpc":"2.0","id":1,"result":null}"#),
            Ok(Value::Null)
        );
        assert_eq!(
            rpc_result(
                br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found"}}"#
            ),
            Err(UiRpcError::Rpc {
                code: -32601,
                message: "Method not found".into()
            })
        );
        assert!(matches!(rpc_result(b"{}"), Err(UiRpcError::Lost(_))));
        assert!(matches!(rpc_result(b"<html>"), Err(UiRpcError::Lost(_))));
    }
}
