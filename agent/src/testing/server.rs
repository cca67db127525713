//! [`ScriptedLlm`]: a scripted language-model HTTP server on loopback.

use super::wire;
use crate::config::ProviderKind;
use crate::message::ModelReply;
use serde_json::Value;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// What the server does with the next request.
#[derive(Debug, Clone)]
pub enum ScriptStep {
    /// Answer with this reply in the request's wire format, streamed when
    /// the request asked for a stream.
    Reply(ModelReply),
    /// Answer with an HTTP error status, an optional `Retry-After` value and
    /// a body.
    Status {
        /// HTTP status.
        status: u16,
        /// `Retry-After` header value.
        retry_after: Option<String>,
        /// Body (JSON text).
        body: String,
    },
    /// Send this body verbatim with status 200 and this content type (for
    /// recorded payloads, e.g. an SSE transcript).
    Raw {
        /// `Content-Type`.
        content_type: String,
        /// The body.
        body: String,
    },
    /// Stream the first `events` events of this reply, then drop the
    /// connection without ending the chunked body.
    Cut {
        /// The reply to start.
        reply: ModelReply,
        /// Events sent before the cut.
        events: usize,
    },
    /// Answer with the reply this function builds from the request (a
    /// model that reads the tool results it was sent).
    Compute(Responder),
    /// Stream the first `events` events of this reply, go silent for
    /// `pause` (a model that stalls mid-answer), then send the rest (if
    /// the client is still there).
    Stall {
        /// The reply to stream.
        reply: ModelReply,
        /// Events sent before the pause.
        events: usize,
        /// How long nothing is sent.
        pause: std::time::Duration,
    },
}

/// A function from a request to a reply, for [`ScriptStep::Compute`].
#[derive(Clone)]
pub struct Responder(pub Arc<dyn Fn(&RecordedRequest) -> ModelReply + Send + Sync>);

impl Responder {
    /// Wrap a function.
    pub fn new(f: impl Fn(&RecordedRequest) -> ModelReply + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }
}

impl std::fmt::Debug for Responder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Responder(..)")
    }
}

/// A request the server received.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    /// Method.
    pub method: String,
    /// Path with query.
    pub path: String,
    /// Headers, names lowercased.
    pub headers: Vec<(String, String)>,
    /// The body as JSON (`Null` if it was not JSON).
    pub body: Value,
    /// The body as sent (its key order, which `body` does not keep).
    pub raw_body: Vec<u8>,
    /// When it arrived.
    pub at: Instant,
}

impl RecordedRequest {
    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The system prompt of an OpenAI request (the first message's text).
    pub fn system_prompt(&self) -> String {
        self.body["messages"][0]["content"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// The tool names an OpenAI request offers, in order.
    pub fn tool_names(&self) -> Vec<String> {
        self.body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
            .collect()
    }

    /// The last user message's content as JSON text (earlier turns of the
    /// session come first); empty when there is none.
    pub fn last_user_message(&self) -> String {
        self.messages()
            .iter()
            .rev()
            .find(|m| m["role"] == "user")
            .map(|m| m["content"].to_string())
            .unwrap_or_default()
    }

    /// The last message as JSON text; empty when there is none.
    pub fn last_message(&self) -> String {
        self.messages()
            .last()
            .map(Value::to_string)
            .unwrap_or_default()
    }

    /// Whether the request carries any tool result (OpenAI `tool` role).
    pub fn has_tool_result(&self) -> bool {
        self.messages().iter().any(|m| m["role"] == "tool")
    }

    fn messages(&self) -> &[Value] {
        self.body["messages"].as_array().map_or(&[], Vec::as_slice)
    }
}

#[derive(Debug, Default)]
struct Shared {
    script: VecDeque<ScriptStep>,
    requests: Vec<RecordedRequest>,
    /// Used when the script is empty (else: HTTP 500 "the script ran out").
    fallback: Option<ScriptStep>,
    /// How long each answer is held back (a slow model).
    delay: std::time::Duration,
    /// Requests being answered now, and the most at once.
    in_flight: usize,
    max_in_flight: usize,
    /// What `GET /props` answers (llama.cpp's server properties); `None`:
    /// 404, as servers other than llama.cpp do.
    props: Option<Value>,
    /// `GET /props` requests received (not in `requests`).
    props_requests: usize,
}

/// The server. Dropping it stops it.
#[derive(Debug)]
pub struct ScriptedLlm {
    addr: SocketAddr,
    shared: Arc<Mutex<Shared>>,
    stop: CancellationToken,
}

impl Drop for ScriptedLlm {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl ScriptedLlm {
    /// Start on a free loopback port with this script.
    ///
    /// # Errors
    /// When no port can be bound.
    pub async fn start(script: impl IntoIterator<Item = ScriptStep>) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Mutex::new(Shared {
            script: script.into_iter().collect(),
            ..Shared::default()
        }));
        let stop = CancellationToken::new();
        let (s, st) = (shared.clone(), stop.clone());
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = st.cancelled() => break,
                    accepted = listener.accept() => {
                        let Ok((stream, _)) = accepted else { continue };
                        let s = s.clone();
                        tokio::spawn(async move {
                            let _ = handle(stream, s).await;
                        });
                    }
                }
            }
        });
        Ok(Self { addr, shared, stop })
    }

    /// The address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The `base_url` for a provider: `http://127.0.0.1:PORT/v1` for
    /// OpenAI, `http://127.0.0.1:PORT` for the others.
    pub fn base_url(&self, kind: ProviderKind) -> String {
        match kind {
            ProviderKind::Openai => format!("http://{}/v1", self.addr),
            _ => format!("http://{}", self.addr),
        }
    }

    /// Append a step.
    pub fn push(&self, step: ScriptStep) {
        self.shared
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .script
            .push_back(step);
    }

    /// Answer with `step` whenever the script is empty (a model that
    /// always says the same), instead of HTTP 500.
    pub fn set_fallback(&self, step: ScriptStep) {
        self.lock().fallback = Some(step);
    }

    /// Hold every answer back for `delay` after the request arrived (a
    /// slow or busy model).
    pub fn set_delay(&self, delay: std::time::Duration) {
        self.lock().delay = delay;
    }

    /// Answer `GET /props` with `props`, as llama.cpp's server does (e.g.
    /// `{"modalities": {"vision": false}}`); without, it is a 404. These
    /// requests are counted by [`ScriptedLlm::props_requests`], not
    /// recorded with the model requests.
    pub fn set_props(&self, props: Value) {
        self.lock().props = Some(props);
    }

    /// `GET /props` requests received so far.
    pub fn props_requests(&self) -> usize {
        self.lock().props_requests
    }

    /// Requests being answered right now.
    pub fn in_flight(&self) -> usize {
        self.lock().in_flight
    }

    /// The most requests answered at once so far.
    pub fn max_in_flight(&self) -> usize {
        self.lock().max_in_flight
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Steps not used yet.
    pub fn remaining(&self) -> usize {
        self.shared
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .script
            .len()
    }

    /// Requests received so far.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .requests
            .clone()
    }
}

/// Counts a request as in flight from its arrival to its answer.
struct InFlight(Arc<Mutex<Shared>>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut s = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        s.in_flight = s.in_flight.saturating_sub(1);
    }
}

async fn handle(mut stream: TcpStream, shared: Arc<Mutex<Shared>>) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let mut buf = Vec::new();
    let mut tmp = [0u8; 8192];
    let header_end = loop {
        let n = stream.read(&mut tmp).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&tmp[..n]);
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
        if buf.len() > 1 << 20 {
            return Ok(());
        }
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next().unwrap_or_default().split(' ');
    let method = request_line.next().unwrap_or_default().to_owned();
    let path = request_line.next().unwrap_or_default().to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    while buf.len() < header_end + length {
        let n = stream.read(&mut tmp).await?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&tmp[..n]);
    }
    if method == "GET" && path.split('?').next() == Some("/props") {
        let props = {
            let mut s = shared.lock().unwrap_or_else(PoisonError::into_inner);
            s.props_requests += 1;
            s.props.clone()
        };
        return match props {
            Some(p) => respond(&mut stream, 200, None, &p.to_string()).await,
            None => respond(&mut stream, 404, None, r#"{"error":"not found"}"#).await,
        };
    }
    // The model list a health probe asks for (`provider::probe`): answered
    // without taking a step of the script or being recorded, as a real
    // server answers it beside the conversations.
    if method == "GET"
        && path
            .split('?')
            .next()
            .is_some_and(|p| p.ends_with("/models"))
    {
        return respond(&mut stream, 200, None, r#"{"object":"list","data":[]}"#).await;
    }
    let body: Value = serde_json::from_slice(&buf[header_end..]).unwrap_or(Value::Null);
    let kind = if path.contains("/chat/completions") {
        ProviderKind::Openai
    } else if path.contains("/messages") {
        ProviderKind::Anthropic
    } else {
        ProviderKind::Gemini
    };
    let streaming = match kind {
        ProviderKind::Gemini => path.contains(":streamGenerateContent"),
        _ => body.get("stream").and_then(Value::as_bool) == Some(true),
    };
    let recorded = RecordedRequest {
        method,
        path,
        headers,
        body,
        raw_body: buf[header_end..].to_vec(),
        at: Instant::now(),
    };
    let (step, delay) = {
        let mut s = shared.lock().unwrap_or_else(PoisonError::into_inner);
        s.requests.push(recorded.clone());
        s.in_flight += 1;
        s.max_in_flight = s.max_in_flight.max(s.in_flight);
        let step = s.script.pop_front().or_else(|| s.fallback.clone());
        (step, s.delay)
    };
    let _in_flight = InFlight(Arc::clone(&shared));
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let (reply, cut_after, stall) = match step {
        None => {
            return respond(
                &mut stream,
                500,
                None,
                r#"{"error":{"message":"the script ran out"}}"#,
            )
            .await;
        }
        Some(ScriptStep::Status {
            status,
            retry_after,
            body,
        }) => return respond(&mut stream, status, retry_after.as_deref(), &body).await,
        Some(ScriptStep::Raw { content_type, body }) => {
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            stream.write_all(head.as_bytes()).await?;
            stream.write_all(body.as_bytes()).await?;
            return stream.flush().await;
        }
        Some(ScriptStep::Reply(r)) => (r, None, None),
        Some(ScriptStep::Compute(f)) => ((f.0)(&recorded), None, None),
        Some(ScriptStep::Cut { reply, events }) => (reply, Some(events), None),
        Some(ScriptStep::Stall {
            reply,
            events,
            pause,
        }) => (reply, None, Some((events, pause))),
    };
    if !streaming {
        let v = match kind {
            ProviderKind::Openai => wire::openai_response(&reply),
            ProviderKind::Anthropic => wire::anthropic_response(&reply),
            ProviderKind::Gemini => wire::gemini_response(&reply),
        };
        return respond(&mut stream, 200, None, &v.to_string()).await;
    }
    let events = match kind {
        ProviderKind::Openai => wire::openai_chunks(&reply),
        ProviderKind::Anthropic => wire::anthropic_events(&reply),
        ProviderKind::Gemini => wire::gemini_chunks(&reply),
    };
    stream
        .write_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
        )
        .await?;
    for (i, (name, data)) in events.iter().enumerate() {
        if cut_after == Some(i) {
            stream.flush().await?;
            // Drop the connection mid-body: the client sees an incomplete
            // chunked body.
            return Ok(());
        }
        if let Some((at, pause)) = stall
            && at == i
        {
            stream.flush().await?;
            tokio::time::sleep(pause).await;
        }
        let mut ev = String::new();
        if let Some(n) = name {
            ev.push_str(&format!("event: {n}\n"));
        }
        ev.push_str(&format!("data: {data}\n\n"));
        stream
            .write_all(format!("{:x}\r\n{ev}\r\n", ev.len()).as_bytes())
            .await?;
    }
    stream.write_all(b"0\r\n\r\n").await?;
    stream.flush().await?;
    Ok(())
}

async fn respond(
    stream: &mut TcpStream,
    status: u16,
    retry_after: Option<&str>,
    body: &str,
) -> std::io::Result<()> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        529 => "Overloaded",
        _ => "Status",
    };
    let mut head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if let Some(r) = retry_after {
        head.push_str(&format!("Retry-After: {r}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.flush().await
}
