//! What the MCP SDK would answer wrongly, answered here first, on both
//! transports: a message that is not JSON gets `-32700 Parse error` (the
//! SDK drops it on stdio and answers a plain-text 415 over HTTP), and
//! `tools/call` arguments that are not an object get `-32602 Invalid
//! params` (the SDK answers `-32601 Method not found`).
//!
//! And one thing the SDK adds to what it sends, taken out on the way to
//! the client ([`outbound`]): the `_meta.progressToken` it puts on every
//! request, which on the server's `elicitation/create` would offer the
//! client a progress channel for a request that has none.

use serde_json::{Value, json};
use tokio::io::{
    AsyncBufReadExt as _, AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _, BufReader,
};
use tokio::sync::mpsc;

/// A message refused before the SDK sees it, and the JSON-RPC error to
/// answer it with.
#[derive(Debug)]
pub struct Refusal {
    /// The message was not JSON at all.
    pub parse_error: bool,
    /// The JSON-RPC error response.
    pub body: Value,
}

/// The JSON-RPC error for `message`, if the SDK would answer it wrongly.
pub fn check(message: &[u8]) -> Option<Refusal> {
    let (parse_error, id, code, text) = match serde_json::from_slice::<Value>(message) {
        Err(e) => (true, Value::Null, -32700, format!("Parse error: {e}")),
        Ok(message) => {
            let arguments = message
                .get("params")
                .and_then(|p| p.get("arguments"))
                .filter(|a| !a.is_null());
            if message.get("method").and_then(Value::as_str) == Some("tools/call")
                && arguments.is_some_and(|a| !a.is_object())
            {
                (
                    false,
                    message.get("id").cloned().unwrap_or_default(),
                    -32602,
                    "Invalid params: tools/call arguments must be an object".to_owned(),
                )
            } else {
                return None;
            }
        }
    };
    Some(Refusal {
        parse_error,
        body: json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": text}}),
    })
}

/// `message` (one JSON-RPC message the SDK sends) without the
/// `_meta.progressToken` the SDK puts on an `elicitation/create` request;
/// `None` when there is nothing to take out.
pub fn outbound(message: &str) -> Option<String> {
    if !message.contains("elicitation/create") {
        return None;
    }
    let mut message: Value = serde_json::from_str(message).ok()?;
    if message.get("method").and_then(Value::as_str) != Some("elicitation/create") {
        return None;
    }
    let params = message.get_mut("params")?.as_object_mut()?;
    let meta = params.get_mut("_meta")?.as_object_mut()?;
    meta.remove("progressToken")?;
    if meta.is_empty() {
        params.remove("_meta");
    }
    Some(message.to_string())
}

/// A chunk of a server-sent event stream with [`outbound`] applied to each
/// `data:` line; `None` when nothing changed (a chunk that ends inside a
/// line leaves that line as it is: only whole JSON messages are read).
pub fn outbound_sse(chunk: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(chunk).ok()?;
    if !text.contains("elicitation/create") {
        return None;
    }
    let mut changed = false;
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches(['\n', '\r']);
        let rewritten = body
            .strip_prefix("data:")
            .and_then(|data| outbound(data.trim_start()));
        match rewritten {
            Some(data) if body.len() < line.len() => {
                changed = true;
                out.push_str("data: ");
                out.push_str(&data);
                out.push_str(&line[body.len()..]);
            }
            _ => out.push_str(line),
        }
    }
    changed.then(|| out.into_bytes())
}

/// The largest line read from the client (a message bigger than this is
/// answered as unparseable and skipped).
const MAX_LINE: usize = 16 * 1024 * 1024;

/// Stdio for the SDK with [`check`] in front: returns the reader and
/// writer to serve on. Lines from `input` that pass go to the SDK; the
/// others are answered on `output` between the SDK's own lines (whole
/// lines only, so nothing interleaves). Ends when `input` closes (the SDK
/// then sees its end) and the SDK's writer is dropped.
pub fn checked<R, W>(input: R, mut output: W) -> (tokio::io::DuplexStream, tokio::io::DuplexStream)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (to_sdk, sdk_reads) = tokio::io::duplex(64 * 1024);
    let (sdk_writes, from_sdk) = tokio::io::duplex(64 * 1024);
    let (errors, mut refused) = mpsc::channel::<String>(64);
    tokio::spawn(async move {
        let mut to_sdk = to_sdk;
        let mut lines = BufReader::new(input);
        let mut line = Vec::new();
        loop {
            line.clear();
            match (&mut lines)
                .take(MAX_LINE as u64)
                .read_until(b'\n', &mut line)
                .await
            {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let text = line.strip_suffix(b"\n").unwrap_or(&line);
            let text = text.strip_suffix(b"\r").unwrap_or(text);
            if text.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match check(text) {
                Some(refusal) => {
                    if errors.send(refusal.body.to_string()).await.is_err() {
                        break;
                    }
                    if !line.ends_with(b"\n") {
                        // Over MAX_LINE: skip the rest of it.
                        let mut rest = Vec::new();
                        if lines.read_until(b'\n', &mut rest).await.unwrap_or(0) == 0 {
                            break;
                        }
                    }
                }
                None => {
                    if to_sdk.write_all(&line).await.is_err() {
                        break;
                    }
                    if !line.ends_with(b"\n") && to_sdk.write_all(b"\n").await.is_err() {
                        break;
                    }
                }
            }
        }
        let _ = to_sdk.shutdown().await;
    });
    tokio::spawn(async move {
        let mut from_sdk = BufReader::new(from_sdk).lines();
        let (mut sdk_open, mut refusals_open) = (true, true);
        while sdk_open || refusals_open {
            let line = tokio::select! {
                line = from_sdk.next_line(), if sdk_open => match line {
                    Ok(Some(line)) => line,
                    _ => {
                        sdk_open = false;
                        continue;
                    }
                },
                refusal = refused.recv(), if refusals_open => match refusal {
                    Some(refusal) => refusal,
                    None => {
                        refusals_open = false;
                        continue;
                    }
                },
            };
            let line = outbound(&line).unwrap_or(line);
            if output.write_all(line.as_bytes()).await.is_err()
                || output.write_all(b"\n").await.is_err()
                || output.flush().await.is_err()
            {
                break;
            }
        }
    });
    (sdk_reads, sdk_writes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_progress_token_of_an_elicitation_request_is_taken_out() {
        let asked = r#"{"jsonrpc":"2.0","id":3,"method":"elicitation/create","params":{"_meta":{"progressToken":7},"message":"Approve?","requestedSchema":{"type":"object","properties":{}}}}"#;
        let sent: Value = serde_json::from_str(&outbound(asked).unwrap()).unwrap();
        assert_eq!(sent["params"].get("_meta"), None, "{sent}");
        assert_eq!(sent["params"]["message"], "Approve?");
        assert_eq!(sent["id"], 3);
        // Other metadata stays; other messages pass untouched.
        let other_meta = asked.replace(r#""progressToken":7"#, r#""progressToken":7,"x":1"#);
        let sent: Value = serde_json::from_str(&outbound(&other_meta).unwrap()).unwrap();
        assert_eq!(sent["params"]["_meta"], json!({"x": 1}));
        for untouched in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":1}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"text":"elicitation/create"}}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"elicitation/create","params":{"message":"x"}}"#,
        ] {
            assert_eq!(outbound(untouched), None, "{untouched}");
        }
        // The same inside an event stream, line endings kept.
        let event = format!("event: message\r\ndata: {asked}\r\nid: 0/4\r\n\r\n");
        let rewritten = String::from_utf8(outbound_sse(event.as_bytes()).unwrap()).unwrap();
        assert!(!rewritten.contains("progressToken"), "{rewritten}");
        assert!(
            rewritten.starts_with("event: message\r\ndata: {"),
            "{rewritten}"
        );
        assert!(rewritten.ends_with("}\r\nid: 0/4\r\n\r\n"), "{rewritten}");
        // A chunk cut inside the message is left as it is.
        let cut = &event.as_bytes()[..event.len() - 20];
        assert_eq!(outbound_sse(cut), None);
    }

    #[test]
    fn what_the_sdk_would_answer_wrongly_is_refused_here() {
        let parse = check(b"{not json").unwrap();
        assert!(parse.parse_error);
        assert_eq!(parse.body["error"]["code"], -32700);
        assert_eq!(parse.body["id"], Value::Null);
        let args = check(
            br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","arguments":[1]}}"#,
        )
        .unwrap();
        assert!(!args.parse_error);
        assert_eq!(args.body["error"]["code"], -32602);
        assert_eq!(args.body["id"], 7);
        for fine in [
            &br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","arguments":{}}}"#[..],
            br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x"}}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#,
        ] {
            assert!(check(fine).is_none());
        }
    }

    /// Good lines reach the SDK's reader in order; a bad one is answered
    /// on the output between whole lines of the SDK's.
    #[tokio::test]
    async fn stdio_answers_bad_lines_and_passes_the_rest() {
        let (mut client, input) = tokio::io::duplex(4096);
        let (output, mut client_reads) = tokio::io::duplex(4096);
        let (mut sdk_reads, mut sdk_writes) = checked(input, output);
        client
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\nnot json at all\n\n{\"id\":2}\n")
            .await
            .unwrap();
        drop(client);
        let mut seen = String::new();
        sdk_reads.read_to_string(&mut seen).await.unwrap();
        assert_eq!(
            seen,
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n{\"id\":2}\n"
        );
        sdk_writes
            .write_all(b"{\"id\":1,\"result\":{}}\n")
            .await
            .unwrap();
        drop(sdk_writes);
        let mut out = String::new();
        client_reads.read_to_string(&mut out).await.unwrap();
        let lines: Vec<Value> = out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2, "{out}");
        assert!(lines.iter().any(|l| l["error"]["code"] == -32700), "{out}");
        assert!(
            lines
                .iter()
                .any(|l| l["id"] == 1 && l["result"].is_object()),
            "{out}"
        );
    }
}
