//! OpenAI-compatible Chat Completions: `POST {base_url}/chat/completions`.
//! Works with OpenAI, Ollama, llama.cpp, vLLM and OpenRouter. Tools are sent
//! with `strict: true` and strict-mode schemas (configurable); streaming
//! uses SSE with `stream_options.include_usage`. `reasoning_content` (vLLM,
//! DeepSeek, llama.cpp) is kept as thinking, apart from the answer.
//!
//! What local servers send is taken as it comes: tool-call arguments as a
//! JSON object instead of a string, tool-call indexes with gaps, errors
//! inside the stream. A stream with nothing in it is an error, not an empty
//! answer.

use super::ChatRequest;
use super::config::LlmConfig;
use super::config::ProviderKind;
use super::http::{self, Endpoint, Fail, StreamDecoder, bad};
use super::sse::SseEvent;
use crate::error::AgentError;
use crate::message::{Message, ModelReply, Thinking, ToolCall, Usage};
use crate::secret::Secret;
use crate::tools::schema::{Dialect, Parameters};
use serde_json::{Value, json};

/// The OpenAI-compatible provider.
#[derive(Debug, Clone)]
pub struct OpenAi {
    api: Endpoint,
    strict: bool,
}

impl OpenAi {
    /// A provider for `cfg`, with an optional API key.
    ///
    /// # Errors
    /// [`AgentError::Client`] when TLS cannot be set up.
    pub fn new(cfg: &LlmConfig, key: Option<Secret>) -> Result<Self, AgentError> {
        Ok(Self {
            api: Endpoint::new(cfg, key, "openai")?,
            strict: cfg.strict_tools,
        })
    }

    /// The JSON body sent for `request`.
    pub fn request_body(&self, request: &ChatRequest) -> Value {
        let mut messages = Vec::new();
        if !request.system.is_empty() {
            messages.push(json!({"role": "system", "content": request.system}));
        }
        let images = self.api.images(&request.messages);
        // Tool messages cannot carry images: each step's images follow its
        // tool messages as one user message of `image_url` data URLs.
        let mut pending: Vec<Value> = Vec::new();
        for m in &request.messages {
            if !matches!(m, Message::Tool { .. }) && !pending.is_empty() {
                messages.push(json!({"role": "user", "content": std::mem::take(&mut pending)}));
            }
            if let Message::Tool { call_id, .. } = m
                && let Some(image) = images.get(call_id)
            {
                pending.push(
                    json!({"type": "text", "text": format!("The image from tool call {call_id}:")}),
                );
                pending.push(json!({"type": "image_url", "image_url": {
                    "url": format!("data:{};base64,{}", image.mime_type, image.data_base64)}}));
            }
            messages.push(match m {
                Message::User { text } => json!({"role": "user", "content": text}),
                Message::Assistant {
                    text, tool_calls, ..
                } => {
                    let mut v = json!({
                        "role": "assistant",
                        "content": if text.is_empty() && !tool_calls.is_empty() { Value::Null } else { json!(text) },
                    });
                    if !tool_calls.is_empty() {
                        v["tool_calls"] = tool_calls
                            .iter()
                            .map(|c| {
                                json!({"id": c.id, "type": "function",
                                       "function": {"name": c.name, "arguments": sent_arguments(&c.arguments)}})
                            })
                            .collect();
                    }
                    v
                }
                Message::Tool {
                    call_id, content, ..
                } => json!({"role": "tool", "tool_call_id": call_id, "content": content}),
            });
        }
        if !pending.is_empty() {
            messages.push(json!({"role": "user", "content": pending}));
        }
        let mut body = json!({"model": self.api.model, "messages": messages});
        if !request.tools.is_empty() {
            let dialect = if self.strict {
                Dialect::OpenAiStrict
            } else {
                Dialect::Anthropic
            };
            body["tools"] = request
                .tools
                .iter()
                .map(|t| {
                    let mut f = json!({
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters_for(dialect),
                    });
                    // A raw schema (an MCP server's) is not strict-mode shaped.
                    if self.strict && !matches!(t.parameters, Parameters::Raw(_)) {
                        f["strict"] = json!(true);
                    }
                    json!({"type": "function", "function": f})
                })
                .collect();
        }
        if request.require_tool && !request.tools.is_empty() {
            body["tool_choice"] = json!("required");
        }

        // OpenAI's own API wants `max_completion_tokens` (its reasoning
        // models refuse `max_tokens`); llama.cpp, Ollama, vLLM and
        // OpenRouter read `max_tokens`.
        let cap = if self.official() {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        body[cap] = json!(self.api.max_tokens);
        if let Some(t) = self.api.temperature {
            body["temperature"] = json!(t);
        }
        if self.api.stream {
            body["stream"] = json!(true);
            body["stream_options"] = json!({"include_usage": true});
        }
        body
    }

    /// Whether this is OpenAI's own API (not a compatible server).
    fn official(&self) -> bool {
        self.api.base_url == ProviderKind::Openai.default_base_url()
    }

    /// Parse a non-streamed response body.
    ///
    /// # Errors
    /// [`AgentError::BadResponse`] when it has no `choices[0].message`.
    pub fn parse_response(body: Value) -> Result<ModelReply, AgentError> {
        http::parse_whole("openai", body, parse_full)
    }
}

fn parse_full(body: Value) -> Result<ModelReply, Fail> {
    let choice = body
        .pointer("/choices/0")
        .ok_or_else(|| bad("no choices in the response"))?;
    let msg = choice
        .get("message")
        .ok_or_else(|| bad("no message in choices[0]"))?;
    let mut reply = ModelReply {
        text: msg
            .get("content")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        stop_reason: choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .map(str::to_owned),
        usage: usage(&body),
        ..ModelReply::default()
    };
    if let Some(r) = reasoning(msg).filter(|r| !r.is_empty()) {
        reply.thinking.push(Thinking {
            text: r.to_owned(),
            signature: None,
        });
    }
    for (i, c) in msg
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let f = c.get("function").unwrap_or(&Value::Null);
        reply.tool_calls.push(ToolCall {
            id: c
                .get("id")
                .and_then(Value::as_str)
                .map_or_else(|| format!("call_{i}"), str::to_owned),
            name: f
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            arguments: arguments_text(f.get("arguments")).unwrap_or_default(),
            signature: None,
        });
    }
    Ok(reply)
}

/// Arguments as they are sent back in the conversation: always a JSON
/// object's text. A server that renders the history (llama.cpp's chat
/// templates) rejects the whole request for one malformed call; the call
/// itself was answered with an error that quotes it.
fn sent_arguments(text: &str) -> String {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(_)) => text.to_owned(),
        _ => "{}".to_owned(),
    }
}

/// Tool-call arguments as text: a string as it is, an object (some
/// servers send one) as its JSON.
fn arguments_text(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(s.clone()),
        Value::Null => None,
        other => Some(other.to_string()),
    }
}

fn reasoning(v: &Value) -> Option<&str> {
    v.get("reasoning_content")
        .or_else(|| v.get("reasoning"))
        .and_then(Value::as_str)
}

fn usage(body: &Value) -> Usage {
    let n = |k: &str| body.pointer(k).and_then(Value::as_u64).unwrap_or(0);
    Usage {
        input_tokens: n("/usage/prompt_tokens"),
        output_tokens: n("/usage/completion_tokens"),
    }
}

#[derive(Debug, Default)]
pub(crate) struct Decoder {
    reply: ModelReply,
    reasoning: String,
    done: bool,
    /// The stream's own index of each call in `reply.tool_calls`, in
    /// order: servers may skip indexes (0, then 2).
    indexes: Vec<u64>,
}

impl StreamDecoder for Decoder {
    fn event(&mut self, event: &SseEvent, on_text: &dyn Fn(&str)) -> Result<bool, Fail> {
        let data = event.data.trim();
        if data == "[DONE]" {
            self.done = true;
            return Ok(true);
        }
        let v: Value =
            serde_json::from_str(data).map_err(|e| bad(format!("bad stream chunk: {e}")))?;
        if let Some(err) = v.get("error") {
            return Err(http::stream_error(err));
        }
        if v.get("usage").is_some_and(Value::is_object) {
            self.reply.usage = usage(&v);
        }
        let Some(choice) = v.pointer("/choices/0") else {
            return Ok(false);
        };
        if let Some(r) = choice.get("finish_reason").and_then(Value::as_str) {
            self.reply.stop_reason = Some(r.to_owned());
        }
        let Some(delta) = choice.get("delta") else {
            return Ok(false);
        };
        if let Some(t) = delta.get("content").and_then(Value::as_str)
            && !t.is_empty()
        {
            self.reply.text.push_str(t);
            on_text(t);
        }
        if let Some(r) = reasoning(delta) {
            self.reasoning.push_str(r);
        }
        for tc in delta
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            // A delta without an index continues the last call (or
            // starts the first).
            let index = tc
                .get("index")
                .and_then(Value::as_u64)
                .or_else(|| self.indexes.last().copied())
                .unwrap_or(0);
            let at = match self.indexes.iter().position(|&i| i == index) {
                Some(at) => at,
                None => {
                    let n = self.reply.tool_calls.len();
                    self.indexes.push(index);
                    self.reply.tool_calls.push(ToolCall::new(
                        format!("call_{n}"),
                        String::new(),
                        String::new(),
                    ));
                    n
                }
            };
            let call = &mut self.reply.tool_calls[at];
            if let Some(id) = tc.get("id").and_then(Value::as_str) {
                call.id = id.to_owned();
            }
            if let Some(name) = tc.pointer("/function/name").and_then(Value::as_str)
                && call.name.is_empty()
            {
                call.name = name.to_owned();
            }
            if let Some(args) = arguments_text(tc.pointer("/function/arguments")) {
                call.arguments.push_str(&args);
            }
        }
        Ok(false)
    }

    fn finish(&mut self, completed: bool) -> Result<ModelReply, Fail> {
        if !completed && !self.done && self.reply.stop_reason.is_none() {
            return Err(Fail::Cut(
                "the stream ended before finish_reason and [DONE]".into(),
            ));
        }
        if self.reply.text.is_empty()
            && self.reply.tool_calls.is_empty()
            && self.reasoning.is_empty()
            && self.reply.stop_reason.is_none()
        {
            // Not retried: a server that answered nothing (llama.cpp
            // sends a lone [DONE] after an internal failure) will likely
            // do it again, and each attempt reads the prompt again.
            return Err(bad(
                "empty response: the stream ended without text, a tool call or a finish_reason",
            ));
        }
        let mut reply = std::mem::take(&mut self.reply);
        if !self.reasoning.is_empty() {
            reply.thinking.push(Thinking {
                text: std::mem::take(&mut self.reasoning),
                signature: None,
            });
        }
        Ok(reply)
    }
}

impl http::Wire for OpenAi {
    type Decoder = Decoder;
    const PARSE: fn(Value) -> Result<ModelReply, Fail> = parse_full;

    fn endpoint(&self) -> &Endpoint {
        &self.api
    }

    fn url(&self) -> String {
        format!("{}/chat/completions", self.api.base_url)
    }

    fn headers(key: Option<&str>) -> Vec<(&'static str, String)> {
        key.map(|k| ("authorization", format!("Bearer {k}")))
            .into_iter()
            .collect()
    }

    fn body(&self, request: &ChatRequest) -> Value {
        self.request_body(request)
    }

    /// `response_format` with the reply's JSON schema (`[llm] tool_choice
    /// = "schema"`), its keys in the order the reply writes them: a server
    /// that turns the schema into a grammar has the model write the
    /// properties in the order given, so the service comes before the
    /// action it constrains.
    fn raw_members(&self, request: &ChatRequest) -> Vec<(&'static str, String)> {
        request
            .reply_schema
            .as_ref()
            .map(|schema| {
                let format = format!(
                    r#"{{"type":"json_schema","json_schema":{{"name":"reply","schema":{schema}}}}}"#
                );
                ("response_format", format)
            })
            .into_iter()
            .collect()
    }

    /// llama.cpp's `/props`, at the server's root (`base_url` without
    /// `/v1`); not asked of OpenAI's own API.
    fn props_url(&self) -> Option<String> {
        if self.official() {
            return None;
        }
        let root = self
            .api
            .base_url
            .strip_suffix("/v1")
            .unwrap_or(&self.api.base_url);
        Some(format!("{root}/props"))
    }
}
