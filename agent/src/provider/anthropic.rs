//! Anthropic Messages: `POST {base_url}/v1/messages` with `x-api-key` and
//! `anthropic-version: 2023-06-01`. Tool use as `tool_use` / `tool_result`
//! blocks; thinking blocks (with their signatures) are kept apart from the
//! answer and sent back unchanged, as the API requires when tools and
//! extended thinking are combined. Streaming uses the typed SSE events
//! (`message_start`, `content_block_*`, `message_delta`, `message_stop`).

use super::config::LlmConfig;
use super::http::{self, Endpoint, Fail, StreamDecoder, bad};
use super::sse::SseEvent;
use super::{ChatRequest, arguments_object};
use crate::error::AgentError;
use crate::message::{Message, ModelReply, Thinking, ToolCall, Usage};
use crate::secret::Secret;
use crate::tools::schema::Dialect;
use serde_json::{Value, json};

/// The API version header we speak.
pub(crate) const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The Anthropic provider.
#[derive(Debug, Clone)]
pub struct Anthropic {
    api: Endpoint,
    thinking_budget: Option<u32>,
}

impl Anthropic {
    /// A provider for `cfg`, with an optional API key.
    ///
    /// # Errors
    /// [`AgentError::Client`] when TLS cannot be set up.
    pub fn new(cfg: &LlmConfig, key: Option<Secret>) -> Result<Self, AgentError> {
        Ok(Self {
            api: Endpoint::new(cfg, key, "anthropic")?,
            thinking_budget: cfg.thinking_budget,
        })
    }

    /// The JSON body sent for `request`.
    pub fn request_body(&self, request: &ChatRequest) -> Value {
        let mut messages: Vec<Value> = Vec::new();
        let images = self.api.images(&request.messages);
        for m in &request.messages {
            let (role, blocks): (&str, Vec<Value>) = match m {
                Message::User { text } => ("user", vec![json!({"type": "text", "text": text})]),
                Message::Assistant {
                    text,
                    thinking,
                    tool_calls,
                } => {
                    let mut blocks = Vec::new();
                    for t in thinking {
                        if let Some(sig) = &t.signature {
                            blocks.push(
                                json!({"type": "thinking", "thinking": t.text, "signature": sig}),
                            );
                        }
                    }
                    if !text.is_empty() {
                        blocks.push(json!({"type": "text", "text": text}));
                    }
                    for c in tool_calls {
                        blocks.push(json!({"type": "tool_use", "id": c.id, "name": c.name,
                                           "input": arguments_object(&c.arguments)}));
                    }
                    ("assistant", blocks)
                }
                Message::Tool {
                    call_id,
                    content,
                    is_error,
                    ..
                } => {
                    // An image goes inside its tool result, after the text.
                    let content = match images.get(call_id) {
                        Some(image) => json!([
                            {"type": "text", "text": content},
                            {"type": "image", "source": {"type": "base64",
                                "media_type": image.mime_type, "data": &*image.data_base64}},
                        ]),
                        None => json!(content),
                    };
                    (
                        "user",
                        vec![json!({"type": "tool_result", "tool_use_id": call_id,
                                    "content": content, "is_error": is_error})],
                    )
                }
            };
            if blocks.is_empty() {
                continue;
            }
            // Consecutive messages of one role become one message (tool
            // results of one step belong together).
            match messages.last_mut() {
                Some(last) if last["role"] == role => {
                    if let Some(content) = last["content"].as_array_mut() {
                        content.extend(blocks);
                    }
                }
                _ => messages.push(json!({"role": role, "content": blocks})),
            }
        }
        let mut body = json!({
            "model": self.api.model,
            "max_tokens": self.api.max_tokens,
            "messages": messages,
        });
        if !request.system.is_empty() {
            body["system"] = json!(request.system);
        }
        if !request.tools.is_empty() {
            body["tools"] = request
                .tools
                .iter()
                .map(|t| {
                    json!({
                        "name": t.name,
                        "description": t.description,
                        "input_schema": t.parameters_for(Dialect::Anthropic),
                    })
                })
                .collect();
        }
        // Extended thinking allows only `auto`.
        if request.require_tool && !request.tools.is_empty() && self.thinking_budget.is_none() {
            body["tool_choice"] = json!({"type": "any"});
        }
        if let Some(t) = self.api.temperature {
            body["temperature"] = json!(t);
        }
        if let Some(budget) = self.thinking_budget {
            body["thinking"] = json!({"type": "enabled", "budget_tokens": budget});
        }
        if self.api.stream {
            body["stream"] = json!(true);
        }
        body
    }

    /// Parse a non-streamed response body.
    ///
    /// # Errors
    /// [`AgentError::BadResponse`] when it has no `content` array.
    pub fn parse_response(body: Value) -> Result<ModelReply, AgentError> {
        http::parse_whole("anthropic", body, parse_full)
    }
}

fn parse_full(body: Value) -> Result<ModelReply, Fail> {
    let content = body
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("no content array in the response"))?;
    let mut d = Decoder::default();
    for block in content {
        d.start_block(block);
    }
    d.reply.stop_reason = body
        .get("stop_reason")
        .and_then(Value::as_str)
        .map(str::to_owned);
    d.reply.usage = Usage {
        input_tokens: body
            .pointer("/usage/input_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(0),
        output_tokens: body
            .pointer("/usage/output_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(0),
    };
    d.finish(true)
}

#[derive(Debug)]
enum Block {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        json: String,
    },
    Thinking {
        text: String,
        signature: Option<String>,
    },
    Other,
}

#[derive(Debug, Default)]
pub(crate) struct Decoder {
    blocks: Vec<Block>,
    reply: ModelReply,
    stopped: bool,
}

impl Decoder {
    fn start_block(&mut self, b: &Value) {
        let s = |k: &str| {
            b.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let block = match b.get("type").and_then(Value::as_str) {
            Some("text") => Block::Text(s("text")),
            Some("tool_use") => Block::ToolUse {
                id: s("id"),
                name: s("name"),
                // A streamed block starts with `input: {}` and grows through
                // `input_json_delta`; a whole one carries its input.
                json: match b.get("input") {
                    Some(Value::Object(m)) if !m.is_empty() => Value::Object(m.clone()).to_string(),
                    _ => String::new(),
                },
            },
            Some("thinking") => Block::Thinking {
                text: s("thinking"),
                signature: b
                    .get("signature")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned),
            },
            _ => Block::Other,
        };
        self.blocks.push(block);
    }
}

impl StreamDecoder for Decoder {
    fn event(&mut self, event: &SseEvent, on_text: &dyn Fn(&str)) -> Result<bool, Fail> {
        let v: Value =
            serde_json::from_str(&event.data).map_err(|e| bad(format!("bad stream event: {e}")))?;
        let kind = v
            .get("type")
            .and_then(Value::as_str)
            .or(event.event.as_deref())
            .unwrap_or_default();
        match kind {
            "message_start" => {
                self.reply.usage.input_tokens = v
                    .pointer("/message/usage/input_tokens")
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
            }
            "content_block_start" => {
                if let Some(b) = v.get("content_block") {
                    self.start_block(b);
                }
            }
            "content_block_delta" => {
                let index = v.get("index").and_then(Value::as_u64).unwrap_or(0) as usize;
                let delta = v.get("delta").unwrap_or(&Value::Null);
                let piece = |k: &str| delta.get(k).and_then(Value::as_str).unwrap_or_default();
                match (
                    self.blocks.get_mut(index),
                    delta.get("type").and_then(Value::as_str),
                ) {
                    (Some(Block::Text(t)), Some("text_delta")) => {
                        let p = piece("text");
                        t.push_str(p);
                        if !p.is_empty() {
                            on_text(p);
                        }
                    }
                    (Some(Block::ToolUse { json, .. }), Some("input_json_delta")) => {
                        json.push_str(piece("partial_json"));
                    }
                    (Some(Block::Thinking { text, .. }), Some("thinking_delta")) => {
                        text.push_str(piece("thinking"));
                    }
                    (Some(Block::Thinking { signature, .. }), Some("signature_delta")) => {
                        signature
                            .get_or_insert_with(String::new)
                            .push_str(piece("signature"));
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(r) = v.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.reply.stop_reason = Some(r.to_owned());
                }
                if let Some(n) = v.pointer("/usage/output_tokens").and_then(Value::as_u64) {
                    self.reply.usage.output_tokens = n;
                }
            }
            "message_stop" => {
                self.stopped = true;
                return Ok(true);
            }
            "error" => {
                return Err(http::stream_error(v.get("error").unwrap_or(&v)));
            }
            _ => {}
        }
        Ok(false)
    }

    fn finish(&mut self, completed: bool) -> Result<ModelReply, Fail> {
        if !completed && !self.stopped {
            return Err(Fail::Cut("the stream ended before message_stop".into()));
        }
        let mut reply = std::mem::take(&mut self.reply);
        for block in self.blocks.drain(..) {
            match block {
                Block::Text(t) => reply.text.push_str(&t),
                Block::ToolUse { id, name, json } => reply.tool_calls.push(ToolCall {
                    id,
                    name,
                    arguments: if json.is_empty() { "{}".into() } else { json },
                    signature: None,
                }),
                Block::Thinking { text, signature } => {
                    reply.thinking.push(Thinking { text, signature });
                }
                Block::Other => {}
            }
        }
        Ok(reply)
    }
}

impl http::Wire for Anthropic {
    type Decoder = Decoder;
    const PARSE: fn(Value) -> Result<ModelReply, Fail> = parse_full;

    fn endpoint(&self) -> &Endpoint {
        &self.api
    }

    fn url(&self) -> String {
        format!("{}/v1/messages", self.api.base_url)
    }

    fn headers(key: Option<&str>) -> Vec<(&'static str, String)> {
        let version = ("anthropic-version", ANTHROPIC_VERSION.to_owned());
        let key = key.map(|k| ("x-api-key", k.to_owned()));
        std::iter::once(version).chain(key).collect()
    }

    fn body(&self, request: &ChatRequest) -> Value {
        self.request_body(request)
    }
}
