//! What the three providers share: the HTTP client (rustls with the `ring`
//! provider passed explicitly, so no process-wide default is needed and
//! aws-lc is never built), the progress limits, the retry loop, error
//! classification and SSE reading.
//!
//! Limits follow progress, not total time: a model on a slow CPU reads a
//! long prompt for minutes before its first byte (`first_byte_timeout_s`),
//! then sends a piece at least every `idle_timeout_s`; `request_timeout_s`
//! is an optional overall cap. A first-byte timeout is not retried: the
//! retry would read the whole prompt again.
//!
//! Retries: on 408, 409, 429, 5xx (and Anthropic's 529), connection errors,
//! idle timeouts and streams cut, as long as no answer text was shown. The
//! wait is the provider's `Retry-After` (or `retry-after-ms`) when given —
//! a longer one than `max_retry_wait` fails at once with the hint kept in
//! the error — otherwise capped exponential backoff (0.5 s, 1 s, 2 s …
//! 30 s) with jitter. A failure after text was streamed is not retried:
//! the text would be shown twice. Refusals no retry can change (no image
//! or tool support, a context window too small, any other 4xx) fail at
//! once, and a refused image turns images off for the provider's lifetime.

use super::config::{LlmConfig, Vision};
use super::sse::{SseEvent, SseParser};
use super::{ChatRequest, Provider, ReplyFuture, TextSink};
use crate::clock;
use crate::error::{AgentError, ModelFeature, TimeoutKind};
use crate::images::Image;
use crate::message::{Message, ModelReply};
use crate::secret::Secret;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::time::Duration;
use tokio::time::Instant;

/// Builds a reply from a stream, one SSE event at a time.
pub(crate) trait StreamDecoder: Send {
    /// Handle one event; `Ok(true)` when the stream is complete.
    ///
    /// # Errors
    /// A message when the event is an error or cannot be parsed.
    fn event(&mut self, event: &SseEvent, on_text: &dyn Fn(&str)) -> Result<bool, Fail>;

    /// The stream ended (or completed): the reply, or why it is incomplete.
    ///
    /// # Errors
    /// [`Fail::Cut`] when the stream ended before the answer was complete.
    fn finish(&mut self, completed: bool) -> Result<ModelReply, Fail>;
}

/// Why one attempt failed.
#[derive(Debug)]
pub(crate) enum Fail {
    /// An HTTP error status.
    Status {
        status: u16,
        retry_after: Option<Duration>,
        message: String,
    },
    /// The provider refused what no retry changes (not retried).
    Refused {
        /// What it refused.
        refusal: Refusal,
        /// The provider's message.
        message: String,
    },
    /// Connecting or sending failed.
    Connect(String),
    /// A limit was reached.
    Timeout(TimeoutKind, String),
    /// The stream ended early.
    Cut(String),
    /// The answer cannot be understood (not retried).
    Bad(String),
}

/// A refusal no retry can change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The model or server cannot do this.
    Unsupported(ModelFeature),
    /// The request does not fit the context window.
    Context,
}

/// One request to send.
#[derive(Debug)]
pub(crate) struct Request {
    pub(crate) url: String,
    pub(crate) headers: Vec<(&'static str, String)>,
    pub(crate) body: Value,
    /// Members of the body already serialized, appended after `body`'s:
    /// their key order matters (a JSON schema a server turns into a
    /// grammar has its properties written in the order given, and
    /// `Value` sorts keys).
    pub(crate) raw: Vec<(&'static str, String)>,
    pub(crate) stream: bool,
}

impl Request {
    /// The body's bytes: `body`, then the `raw` members.
    fn bytes(&self) -> Result<Vec<u8>, serde_json::Error> {
        let mut bytes = serde_json::to_vec(&self.body)?;
        if self.raw.is_empty() || bytes.last() != Some(&b'}') {
            return Ok(bytes);
        }
        bytes.pop();
        let mut empty = bytes.last() == Some(&b'{');
        for (key, value) in &self.raw {
            if !empty {
                bytes.push(b',');
            }
            empty = false;
            bytes.extend(serde_json::to_vec(key)?);
            bytes.push(b':');
            bytes.extend(value.as_bytes());
        }
        bytes.push(b'}');
        Ok(bytes)
    }
}

/// The shared HTTP side of a provider.
#[derive(Debug, Clone)]
pub(crate) struct Http {
    client: reqwest::Client,
    provider: &'static str,
    model: String,
    max_retries: u32,
    max_retry_wait: Duration,
    first_byte: Duration,
    idle: Duration,
    total: Option<Duration>,
}

/// What an endpoint knows about images, shared by its clones for the
/// provider's lifetime: what `[llm] vision` says, what llama.cpp's
/// `/props` said, and whether the model refused an image.
#[derive(Debug)]
struct VisionState {
    setting: Vision,
    /// [`UNKNOWN`], [`TAKES_IMAGES`] or [`NO_IMAGES`].
    known: AtomicU8,
    /// Whether `/props` was asked already.
    probed: AtomicBool,
}

const UNKNOWN: u8 = 0;
const TAKES_IMAGES: u8 = 1;
const NO_IMAGES: u8 = 2;

/// How long asking llama.cpp's `/props` may take (it answers at once, even
/// while a prompt is being processed).
const PROBE_LIMIT: Duration = Duration::from_secs(10);

/// What every provider takes from `[llm]` (where, which model, the key, how
/// to ask) and the sending they share.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    http: Http,
    /// The provider's base URL, without a trailing path.
    pub(crate) base_url: String,
    /// The model asked.
    pub(crate) model: String,
    key: Option<Secret>,
    /// Whether answers are streamed (SSE).
    pub(crate) stream: bool,
    /// The cap on output tokens.
    pub(crate) max_tokens: u32,
    /// Sampling temperature, when set.
    pub(crate) temperature: Option<f64>,
    /// Whether the first model call of a run must call a tool.
    pub(crate) tool_choice: super::config::ToolChoice,
    vision: Arc<VisionState>,
    max_image_bytes: usize,
}

impl Endpoint {
    /// The endpoint of `provider` as `cfg` describes it.
    ///
    /// # Errors
    /// [`AgentError::Client`] when TLS cannot be set up.
    pub(crate) fn new(
        cfg: &LlmConfig,
        key: Option<Secret>,
        provider: &'static str,
    ) -> Result<Self, AgentError> {
        Ok(Self {
            http: Http::new(cfg, provider)?,
            base_url: cfg.base_url.clone(),
            model: cfg.model.clone(),
            key,
            stream: cfg.stream,
            max_tokens: cfg.max_tokens,
            temperature: cfg.temperature,
            tool_choice: cfg.tool_choice,
            vision: Arc::new(VisionState {
                setting: cfg.vision,
                known: AtomicU8::new(UNKNOWN),
                probed: AtomicBool::new(false),
            }),
            max_image_bytes: cfg.max_image_bytes,
        })
    }

    /// Whether images are sent: not with `vision = false`, nor once the
    /// model refused one or llama.cpp's `/props` said it takes none.
    pub(crate) fn takes_images(&self) -> bool {
        self.vision.setting != Vision::Off && self.vision.known.load(Ordering::Relaxed) != NO_IMAGES
    }

    /// With `vision = "auto"`, ask llama.cpp's `GET {url}` once whether the
    /// model takes images (`modalities.vision`). A server without it (404,
    /// no such field, no answer in time) leaves it unknown: images are sent
    /// until the model refuses one.
    pub(crate) async fn probe_vision(&self, url: Option<String>) {
        let Some(url) = url else { return };
        if self.vision.setting != Vision::Auto || self.vision.probed.swap(true, Ordering::Relaxed) {
            return;
        }
        let ask = async {
            let response = self.http.client.get(&url).send().await.ok()?;
            if !response.status().is_success() {
                return None;
            }
            let body = response.bytes().await.ok()?;
            serde_json::from_slice::<Value>(&body)
                .ok()?
                .pointer("/modalities/vision")
                .and_then(Value::as_bool)
        };
        match tokio::time::timeout(PROBE_LIMIT, ask).await {
            Ok(Some(vision)) => {
                tracing::info!(
                    provider = self.http.provider,
                    model = self.model,
                    vision,
                    "the model server says whether the model takes images"
                );
                let known = if vision { TAKES_IMAGES } else { NO_IMAGES };
                // A refusal seen meanwhile wins.
                let _ = self.vision.known.compare_exchange(
                    UNKNOWN,
                    known,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
            }
            _ => tracing::debug!(url, "no vision answer from the model server's /props"),
        }
    }

    /// The model refused an image: none are sent from now on.
    fn no_images(&self, why: &str) {
        if self.vision.known.swap(NO_IMAGES, Ordering::Relaxed) != NO_IMAGES {
            tracing::warn!(
                provider = self.http.provider,
                model = self.model,
                "the model takes no images ({why}); screenshots are read as the screen's UI tree from now on (set [llm] vision = false to skip the first attempt)"
            );
        }
    }

    /// The images to send with `messages`, within the byte budget (none
    /// without vision).
    pub(crate) fn images(&self, messages: &[Message]) -> HashMap<String, Image> {
        if self.takes_images() {
            crate::images::attached(messages, self.max_image_bytes)
        } else {
            HashMap::new()
        }
    }

    /// POST `body` to `url` with the headers `headers` makes of the key
    /// (`None` without one); decode as [`Http::send`].
    pub(crate) async fn send<D: StreamDecoder>(
        &self,
        url: String,
        headers: impl FnOnce(Option<&str>) -> Vec<(&'static str, String)>,
        (body, raw): (Value, Vec<(&'static str, String)>),
        decoder: impl Fn() -> D,
        parse: impl Fn(Value) -> Result<ModelReply, Fail>,
        on_text: &(dyn Fn(&str) + Send + Sync),
    ) -> Result<ModelReply, AgentError> {
        let request = Request {
            url,
            headers: headers(self.key.as_ref().map(Secret::expose)),
            body,
            raw,
            stream: self.stream,
        };
        let result = self.http.send(&request, decoder, parse, on_text).await;
        if let Err(e @ AgentError::Unsupported { message, .. }) = &result
            && e.refused_images()
        {
            self.no_images(message);
        }
        result
    }
}

/// What one provider's wire format states; the [`Provider`] over HTTP is
/// written once, below, for all of them.
pub(crate) trait Wire: Send + Sync + std::fmt::Debug {
    /// Reads its streamed answers.
    type Decoder: StreamDecoder + Default;
    /// Reads a whole (not streamed) answer.
    const PARSE: fn(Value) -> Result<ModelReply, Fail>;
    /// Its endpoint settings (and its name).
    fn endpoint(&self) -> &Endpoint;
    /// Where a request goes.
    fn url(&self) -> String;
    /// The headers the API key (`None`: without one) makes.
    fn headers(key: Option<&str>) -> Vec<(&'static str, String)>;
    /// The request body.
    fn body(&self, request: &ChatRequest) -> Value;
    /// Members of the body whose key order matters, already serialized
    /// ([`Request::raw`]); none by default.
    fn raw_members(&self, request: &ChatRequest) -> Vec<(&'static str, String)> {
        let _ = request;
        Vec::new()
    }
    /// Where the server says what the model takes (llama.cpp's `/props`),
    /// if this endpoint may have it.
    fn props_url(&self) -> Option<String> {
        None
    }
}

impl<W: Wire> Provider for W {
    fn name(&self) -> &'static str {
        self.endpoint().http.provider
    }

    fn vision(&self) -> bool {
        self.endpoint().takes_images()
    }

    fn requires_first_tool_call(&self) -> bool {
        self.endpoint().tool_choice == super::config::ToolChoice::RequiredFirst
    }

    fn constrains_replies(&self) -> bool {
        self.endpoint().tool_choice == super::config::ToolChoice::Schema
    }

    fn complete<'a>(&'a self, request: &'a ChatRequest, on_text: TextSink<'a>) -> ReplyFuture<'a> {
        Box::pin(async move {
            self.endpoint().probe_vision(self.props_url()).await;
            self.endpoint()
                .send(
                    self.url(),
                    W::headers,
                    (self.body(request), self.raw_members(request)),
                    W::Decoder::default,
                    W::PARSE,
                    on_text,
                )
                .await
        })
    }
}

/// A reqwest client with rustls and the `ring` provider, verifying against
/// the operating system's roots.
///
/// # Errors
/// [`AgentError::Client`] when TLS cannot be set up.
pub(crate) fn client(cfg: &LlmConfig) -> Result<reqwest::Client, AgentError> {
    let crypto = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = rustls_platform_verifier::Verifier::new(crypto.clone())
        .map_err(|e| AgentError::Client(e.to_string()))?;
    let tls = rustls::ClientConfig::builder_with_provider(crypto)
        .with_safe_default_protocol_versions()
        .map_err(|e| AgentError::Client(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    // Only the connect timeout is reqwest's: the others follow progress
    // (first byte, then idle), which `Http::attempt` measures.
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .connect_timeout(cfg.connect_timeout)
        .build()
        .map_err(|e| AgentError::Client(e.to_string()))
}

impl Http {
    pub(crate) fn new(cfg: &LlmConfig, provider: &'static str) -> Result<Self, AgentError> {
        Ok(Self {
            client: client(cfg)?,
            provider,
            model: cfg.model.clone(),
            max_retries: cfg.max_retries,
            max_retry_wait: cfg.max_retry_wait,
            first_byte: cfg.first_byte_timeout,
            idle: cfg.idle_timeout,
            total: cfg.request_timeout,
        })
    }

    /// Send `request` with retries; decode a stream with `decoder()` or a
    /// whole body with `parse`.
    pub(crate) async fn send<D: StreamDecoder>(
        &self,
        request: &Request,
        decoder: impl Fn() -> D,
        parse: impl Fn(Value) -> Result<ModelReply, Fail>,
        on_text: &(dyn Fn(&str) + Send + Sync),
    ) -> Result<ModelReply, AgentError> {
        let emitted = AtomicBool::new(false);
        let body = request.bytes()?;
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let result = self
                .attempt(request, &body, &decoder, &parse, &|t: &str| {
                    emitted.store(true, Ordering::Relaxed);
                    on_text(t);
                })
                .await;
            let fail = match result {
                Ok(reply) => {
                    if !request.stream && !reply.text.is_empty() {
                        on_text(&reply.text);
                    }
                    return Ok(reply);
                }
                Err(f) => f,
            };
            let partial = emitted.load(Ordering::Relaxed);
            let wait = match &fail {
                // Text was shown: a retry would show it again.
                _ if partial => None,
                Fail::Status {
                    status,
                    retry_after,
                    ..
                } if retryable_status(*status) => match retry_after {
                    Some(d) if *d > self.max_retry_wait => None,
                    Some(d) => Some(*d),
                    None => Some(backoff(attempt)),
                },
                Fail::Connect(_)
                | Fail::Timeout(TimeoutKind::Connect | TimeoutKind::Idle, _)
                | Fail::Cut(_) => Some(backoff(attempt)),
                // A first-byte or overall timeout would read the whole
                // prompt again; refusals and bad answers come back the same.
                Fail::Timeout(..) | Fail::Status { .. } | Fail::Refused { .. } | Fail::Bad(_) => {
                    None
                }
            };
            match wait {
                Some(d) if attempt <= self.max_retries => {
                    tracing::warn!(
                        provider = self.provider,
                        attempt,
                        wait_ms = d.as_millis() as u64,
                        "model call failed, retrying: {fail:?}"
                    );
                    tokio::time::sleep(d).await;
                }
                _ => return Err(self.error(fail, attempt, partial)),
            }
        }
    }

    async fn attempt<D: StreamDecoder>(
        &self,
        request: &Request,
        body: &[u8],
        decoder: &impl Fn() -> D,
        parse: &impl Fn(Value) -> Result<ModelReply, Fail>,
        on_text: &(dyn Fn(&str) + Send + Sync),
    ) -> Result<ModelReply, Fail> {
        let mut builder = self
            .client
            .post(&request.url)
            .header("content-type", "application/json")
            .body(body.to_vec());
        for (name, value) in &request.headers {
            builder = builder.header(*name, value);
        }
        if request.stream {
            builder = builder.header("accept", "text/event-stream");
        }
        let mut clock = Progress::new(self);
        let mut response = clock.wait(builder.send()).await?.map_err(transport)?;
        let status = response.status().as_u16();
        if !(200..300).contains(&status) {
            let retry_after = retry_after(response.headers());
            let body = read_body(&mut response, &mut clock).await?;
            let text = String::from_utf8_lossy(&body);
            let message = error_message(&text);
            if let Some(refusal) = refused(status, &text) {
                return Err(Fail::Refused { refusal, message });
            }
            return Err(Fail::Status {
                status,
                retry_after,
                message,
            });
        }
        if !request.stream {
            let bytes = read_body(&mut response, &mut clock).await?;
            let value: Value = serde_json::from_slice(&bytes)
                .map_err(|e| Fail::Bad(format!("the body is not JSON: {e}")))?;
            return parse(value);
        }
        let mut parser = SseParser::default();
        let mut dec = decoder();
        loop {
            match clock.wait(response.chunk()).await? {
                Ok(Some(bytes)) => {
                    clock.progress();
                    for ev in parser.push(&bytes) {
                        if dec.event(&ev, on_text)? {
                            return dec.finish(true);
                        }
                    }
                }
                Ok(None) => {
                    if let Some(ev) = parser.finish()
                        && dec.event(&ev, on_text)?
                    {
                        return dec.finish(true);
                    }
                    return dec.finish(false);
                }
                Err(e) => return Err(Fail::Cut(format!("reading the stream: {e}"))),
            }
        }
    }

    fn error(&self, fail: Fail, attempts: u32, partial: bool) -> AgentError {
        let provider = self.provider;
        match fail {
            Fail::Status {
                status: status @ (401 | 403),
                message,
                ..
            } => AgentError::Auth {
                provider,
                status,
                message,
            },
            Fail::Status {
                status: 400,
                message,
                ..
            } if message.contains("API key") || message.contains("API_KEY") => AgentError::Auth {
                provider,
                status: 400,
                message,
            },
            Fail::Status {
                status: 404,
                message,
                ..
            } => AgentError::ModelNotFound {
                provider,
                model: self.model.clone(),
                message,
            },
            Fail::Status {
                status: 429,
                retry_after,
                ..
            } => AgentError::RateLimited {
                provider,
                attempts,
                retry_after,
            },
            Fail::Status {
                status, message, ..
            } => AgentError::Http {
                provider,
                status,
                attempts,
                message,
            },
            Fail::Connect(message) => AgentError::Connect {
                provider,
                attempts,
                message,
            },
            Fail::Timeout(kind, message) => AgentError::Timeout {
                provider,
                attempts,
                kind,
                partial,
                message,
            },
            Fail::Refused {
                refusal: Refusal::Unsupported(feature),
                message,
            } => AgentError::Unsupported {
                provider,
                feature,
                message,
            },
            Fail::Refused {
                refusal: Refusal::Context,
                message,
            } => AgentError::ContextExceeded { provider, message },
            Fail::Cut(message) => AgentError::StreamCut {
                provider,
                attempts,
                partial,
                message,
            },
            Fail::Bad(message) => AgentError::BadResponse { provider, message },
        }
    }
}

/// The limits of one attempt: the first byte of the answer by
/// `first_byte_at`, then a piece at least every `idle`, all of it by
/// `total_at` when there is an overall cap.
struct Progress {
    first_byte_at: Instant,
    total_at: Option<Instant>,
    idle: Duration,
    began: bool,
    limits: (Duration, Duration, Option<Duration>),
}

impl Progress {
    fn new(http: &Http) -> Self {
        let now = Instant::now();
        Self {
            first_byte_at: now + http.first_byte,
            total_at: http.total.map(|t| now + t),
            idle: http.idle,
            began: false,
            limits: (http.first_byte, http.idle, http.total),
        }
    }

    /// Bytes of the answer arrived.
    fn progress(&mut self) {
        self.began = true;
    }

    /// `fut`, within the limit that applies now.
    async fn wait<T>(&self, fut: impl std::future::Future<Output = T>) -> Result<T, Fail> {
        let (at, kind) = if self.began {
            (Instant::now() + self.idle, TimeoutKind::Idle)
        } else {
            (self.first_byte_at, TimeoutKind::FirstByte)
        };
        let (at, kind) = match self.total_at {
            Some(total) if total <= at => (total, TimeoutKind::Total),
            _ => (at, kind),
        };
        tokio::time::timeout_at(at, fut)
            .await
            .map_err(|_| Fail::Timeout(kind, self.describe(kind)))
    }

    fn describe(&self, kind: TimeoutKind) -> String {
        let (first, idle, total) = self.limits;
        match kind {
            TimeoutKind::FirstByte => format!(
                "no answer began within {} s ([llm] first_byte_timeout_s): the model may still be reading a long prompt on a slow machine, or the server is busy with another request; not retried, since a retry would read the whole prompt again",
                first.as_secs_f64()
            ),
            TimeoutKind::Idle => format!(
                "the answer stopped: nothing came for {} s ([llm] idle_timeout_s)",
                idle.as_secs_f64()
            ),
            _ => format!(
                "the request took longer than {} s ([llm] request_timeout_s)",
                total.unwrap_or_default().as_secs_f64()
            ),
        }
    }
}

/// A whole (not streamed) body, within the progress limits.
async fn read_body(
    response: &mut reqwest::Response,
    clock: &mut Progress,
) -> Result<Vec<u8>, Fail> {
    let mut body = Vec::new();
    while let Some(bytes) = clock.wait(response.chunk()).await?.map_err(transport)? {
        clock.progress();
        body.extend_from_slice(&bytes);
    }
    Ok(body)
}

/// Words by which servers say a model cannot take images (llama.cpp
/// without a projector, Ollama, vLLM, OpenAI-compatible gateways).
const NO_IMAGES_SAID: &[&str] = &[
    "image input is not supported",
    "image input not supported",
    "does not support image",
    "doesn't support image",
    "not support images",
    "images are not supported",
    "image_url is only supported",
    "not a multimodal model",
    "multimodal is not supported",
    "vision is not supported",
    "does not support vision",
    "mmproj",
];

/// Words by which servers say a model or server cannot call tools
/// (llama.cpp without `--jinja`, Ollama, vLLM without a tool parser).
const NO_TOOLS_SAID: &[&str] = &[
    "does not support tools",
    "doesn't support tools",
    "tools param requires",
    "tool calls are not supported",
    "tools are not supported",
    "does not support tool",
    "does not support function",
    "enable-auto-tool-choice",
    "function calling is not",
];

/// Words by which servers say the prompt does not fit the context window.
const NO_ROOM_SAID: &[&str] = &[
    "exceeds the available context size",
    "exceed_context_size",
    "context_length_exceeded",
    "maximum context length",
    "context length",
    "context window",
    "prompt is too long",
    "too many tokens",
    "input is too large",
    "exceeds the context",
];

/// Whether an error answer (`status`, the body `text`) is a refusal no
/// retry can change. Only the statuses servers use for them are read:
/// authentication, rate limits and overload have their own handling.
fn refused(status: u16, text: &str) -> Option<Refusal> {
    if !matches!(status, 400 | 422 | 500 | 501) {
        return None;
    }
    refusal_in(text)
}

/// The refusal `text` states, if any.
pub(crate) fn refusal_in(text: &str) -> Option<Refusal> {
    let text = text.to_lowercase();
    let says = |words: &[&str]| words.iter().any(|w| text.contains(w));
    if says(NO_IMAGES_SAID) {
        Some(Refusal::Unsupported(ModelFeature::Images))
    } else if says(NO_TOOLS_SAID) {
        Some(Refusal::Unsupported(ModelFeature::Tools))
    } else if says(NO_ROOM_SAID) {
        Some(Refusal::Context)
    } else {
        None
    }
}

/// An error sent inside a stream (`{"error": …}`): a refusal, or a cut.
pub(crate) fn stream_error(error: &Value) -> Fail {
    let text = error.to_string();
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .map_or_else(|| text.clone(), str::to_owned);
    match refusal_in(&text) {
        Some(refusal) => Fail::Refused { refusal, message },
        None => Fail::Cut(format!("error in stream: {text}")),
    }
}

fn retryable_status(status: u16) -> bool {
    matches!(status, 408 | 409 | 429 | 500 | 502 | 503 | 504 | 529)
}

/// Capped exponential backoff with jitter: 0.5 s × 2^(attempt-1), at most
/// 30 s, then a random point in its upper half.
fn backoff(attempt: u32) -> Duration {
    let base = Duration::from_millis(500).saturating_mul(1 << attempt.saturating_sub(1).min(6));
    let capped = base.min(Duration::from_secs(30));
    capped / 2 + capped.mul_f64(fastrand::f64() / 2.0)
}

/// `Retry-After` (seconds or an HTTP date) or OpenAI's `retry-after-ms`.
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    if let Some(ms) = headers
        .get("retry-after-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v >= 0.0)
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    let v = headers.get("retry-after")?.to_str().ok()?.trim();
    if let Ok(secs) = v.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let at = clock::parse_http_date(v)?;
    Some(Duration::from_millis(at.saturating_sub(clock::now_ms())))
}

/// The provider's error message: `error.message` (OpenAI, Anthropic,
/// Gemini), `error` as a string (Ollama), or the start of the body.
pub(crate) fn error_message(body: &str) -> String {
    if let Ok(v) = serde_json::from_str::<Value>(body) {
        if let Some(m) = v.pointer("/error/message").and_then(Value::as_str) {
            return m.to_owned();
        }
        if let Some(m) = v.get("error").and_then(Value::as_str) {
            return m.to_owned();
        }
        if let Some(m) = v.get("message").and_then(Value::as_str) {
            return m.to_owned();
        }
    }
    body.chars().take(300).collect()
}

fn transport(e: reqwest::Error) -> Fail {
    if e.is_timeout() {
        // The only timeout reqwest has is the connect timeout.
        Fail::Timeout(TimeoutKind::Connect, e.to_string())
    } else {
        // Walk the source chain: reqwest's own Display is terse.
        let mut message = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            message.push_str(": ");
            message.push_str(&s.to_string());
            source = s.source();
        }
        Fail::Connect(message)
    }
}

/// `Fail::Bad` from a message.
/// Parse a whole (non-streamed) response body with `parse`; a failure is
/// [`AgentError::BadResponse`] from `provider`.
pub(crate) fn parse_whole(
    provider: &'static str,
    body: Value,
    parse: fn(Value) -> Result<ModelReply, Fail>,
) -> Result<ModelReply, AgentError> {
    parse(body).map_err(|f| AgentError::BadResponse {
        provider,
        message: match f {
            Fail::Bad(message) => message,
            other => format!("{other:?}"),
        },
    })
}

pub(crate) fn bad(message: impl Into<String>) -> Fail {
    Fail::Bad(message.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_forms() {
        let mut h = reqwest::header::HeaderMap::new();
        h.insert("retry-after", "2".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(2)));
        h.insert("retry-after-ms", "250".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_millis(250)));
        let mut h = reqwest::header::HeaderMap::new();
        h.insert(
            "retry-after",
            "Sun, 06 Nov 1994 08:49:37 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after(&h), Some(Duration::ZERO));
    }

    #[test]
    fn backoff_is_capped_with_jitter() {
        for attempt in 1..20 {
            let d = backoff(attempt);
            assert!(d <= Duration::from_secs(30), "{attempt}: {d:?}");
            assert!(d >= Duration::from_millis(250), "{attempt}: {d:?}");
        }
    }

    #[test]
    fn error_messages_from_each_provider() {
        assert_eq!(
            error_message(
                r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}"#
            ),
            "Incorrect API key provided"
        );
        assert_eq!(
            error_message(
                r#"{"type":"error","error":{"type":"not_found_error","message":"model: x"}}"#
            ),
            "model: x"
        );
        assert_eq!(
            error_message(r#"{"error":"model 'x' not found"}"#),
            "model 'x' not found"
        );
        assert_eq!(error_message("plain"), "plain");
    }
}
