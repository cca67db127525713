//! OpenAI-compatible Chat Completions: `POST {base_url}/chat/completions`.
//! Works with OpenAI, Ollama, llama.cpp, vLLM and OpenRouter. Tools are sent
//! with `strict: true` and strict-mode schemas (configurable); streaming
//! uses SSE with `stream_options.include_usage`. `reasoning_content` (vLLM,
//! DeepSeek, llama.cpp) is kept as thinking, apart from the answer.

use super::ChatRequest;
use super::config::LlmConfig;
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
                                       "function": {"name": c.name, "arguments": c.arguments}})
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
        if let Some(t) = self.api.temperature {
            body["temperature"] = json!(t);
        }
        if self.api.stream {
            body["stream"] = json!(true);
            body["stream_options"] = json!({"include_usage": true});
        }
        body
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
            arguments: match f.get("arguments") {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => String::new(),
                // Some servers send an object instead of a string.
                Some(other) => other.to_string(),
            },
            signature: None,
        });
    }
    Ok(reply)
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
            return Err(Fail::Cut(format!("error in stream: {err}")));
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
            let index = tc
                .get("index")
                .and_then(Value::as_u64)
                .unwrap_or(self.reply.tool_calls.len() as u64) as usize;
            while self.reply.tool_calls.len() <= index {
                let n = self.reply.tool_calls.len();
                self.reply.tool_calls.push(ToolCall::new(
                    format!("call_{n}"),
                    String::new(),
                    String::new(),
                ));
            }
            let call = &mut self.reply.tool_calls[index];
            if let Some(id) = tc.get("id").and_then(Value::as_str) {
                call.id = id.to_owned();
            }
            if let Some(name) = tc.pointer("/function/name").and_then(Value::as_str)
                && call.name.is_empty()
            {
                call.name = name.to_owned();
            }
            if let Some(args) = tc.pointer("/function/arguments").and_then(Value::as_str) {
                call.arguments.push_str(args);
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
}
