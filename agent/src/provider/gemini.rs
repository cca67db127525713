//! Google Gemini: `POST {base_url}/v1beta/models/{model}:generateContent`
//! (or `:streamGenerateContent?alt=sse`) with `x-goog-api-key`. Function
//! calling through `functionDeclarations`, `functionCall` and
//! `functionResponse` parts; parts marked `thought` are thinking, kept
//! apart; thought signatures are sent back with their calls. Gemini gives
//! calls no id in older models: we number them.

use super::config::LlmConfig;
use super::http::{self, Endpoint, Fail, StreamDecoder, bad};
use super::sse::SseEvent;
use super::{ChatRequest, arguments_object};
use crate::error::AgentError;
use crate::message::{Message, ModelReply, Thinking, ToolCall, Usage};
use crate::secret::Secret;
use crate::tools::schema::Dialect;
use serde_json::{Value, json};

/// The Gemini provider.
#[derive(Debug, Clone)]
pub struct Gemini {
    api: Endpoint,
}

impl Gemini {
    /// A provider for `cfg`, with an optional API key.
    ///
    /// # Errors
    /// [`AgentError::Client`] when TLS cannot be set up.
    pub fn new(cfg: &LlmConfig, key: Option<Secret>) -> Result<Self, AgentError> {
        Ok(Self {
            api: Endpoint::new(cfg, key, "gemini")?,
        })
    }

    /// The JSON body sent for `request`.
    pub fn request_body(&self, request: &ChatRequest) -> Value {
        let mut contents: Vec<Value> = Vec::new();
        let images = self.api.images(&request.messages);
        for m in &request.messages {
            let (role, parts): (&str, Vec<Value>) = match m {
                Message::User { text } => ("user", vec![json!({"text": text})]),
                Message::Assistant {
                    text, tool_calls, ..
                } => {
                    let mut parts = Vec::new();
                    if !text.is_empty() {
                        parts.push(json!({"text": text}));
                    }
                    for c in tool_calls {
                        let mut p = json!({"functionCall": {"name": c.name, "args": arguments_object(&c.arguments)}});
                        if let Some(sig) = &c.signature {
                            p["thoughtSignature"] = json!(sig);
                        }
                        parts.push(p);
                    }
                    ("model", parts)
                }
                Message::Tool {
                    call_id,
                    name,
                    content,
                    is_error,
                } => {
                    let value = serde_json::from_str::<Value>(content)
                        .unwrap_or_else(|_| Value::String(content.clone()));
                    let response = if *is_error {
                        json!({"error": value.get("error").cloned().unwrap_or(value)})
                    } else {
                        json!({"output": value})
                    };
                    let mut parts =
                        vec![json!({"functionResponse": {"name": name, "response": response}})];
                    // The image follows its function response in the same turn.
                    if let Some(image) = images.get(call_id) {
                        parts.push(json!({"inline_data": {
                            "mime_type": image.mime_type, "data": &*image.data_base64}}));
                    }
                    ("user", parts)
                }
            };
            if parts.is_empty() {
                continue;
            }
            match contents.last_mut() {
                Some(last) if last["role"] == role => {
                    if let Some(p) = last["parts"].as_array_mut() {
                        p.extend(parts);
                    }
                }
                _ => contents.push(json!({"role": role, "parts": parts})),
            }
        }
        let mut generation = json!({"maxOutputTokens": self.api.max_tokens});
        if let Some(t) = self.api.temperature {
            generation["temperature"] = json!(t);
        }
        let mut body = json!({"contents": contents, "generationConfig": generation});
        if !request.system.is_empty() {
            body["systemInstruction"] = json!({"parts": [{"text": request.system}]});
        }
        if !request.tools.is_empty() {
            let decls: Vec<Value> = request
                .tools
                .iter()
                .map(|t| {
                    let mut d = json!({"name": t.name, "description": t.description});
                    if let Some(p) = t.parameters_for(Dialect::Gemini) {
                        d["parameters"] = p;
                    }
                    d
                })
                .collect();
            body["tools"] = json!([{"functionDeclarations": decls}]);
            if request.require_tool {
                body["toolConfig"] = json!({"functionCallingConfig": {"mode": "ANY"}});
            }
        }
        body
    }

    /// Parse a non-streamed response body.
    ///
    /// # Errors
    /// [`AgentError::BadResponse`] when it has no candidate or the prompt
    /// was blocked.
    pub fn parse_response(body: Value) -> Result<ModelReply, AgentError> {
        http::parse_whole("gemini", body, parse_full)
    }
}

fn parse_full(body: Value) -> Result<ModelReply, Fail> {
    let mut d = Decoder::default();
    d.chunk(&body, &|_| {})?;
    if d.reply.stop_reason.is_none() && d.reply.tool_calls.is_empty() && d.reply.text.is_empty() {
        return Err(bad("no candidate in the response"));
    }
    d.finish(true)
}

#[derive(Debug, Default)]
pub(crate) struct Decoder {
    reply: ModelReply,
    thinking: String,
    thinking_signature: Option<String>,
}

impl Decoder {
    fn chunk(&mut self, v: &Value, on_text: &dyn Fn(&str)) -> Result<(), Fail> {
        if let Some(reason) = v
            .pointer("/promptFeedback/blockReason")
            .and_then(Value::as_str)
        {
            return Err(bad(format!("the prompt was blocked: {reason}")));
        }
        if let Some(u) = v.get("usageMetadata") {
            let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
            self.reply.usage = Usage {
                input_tokens: n("promptTokenCount"),
                output_tokens: n("candidatesTokenCount") + n("thoughtsTokenCount"),
            };
        }
        let Some(cand) = v.pointer("/candidates/0") else {
            return Ok(());
        };
        for part in cand
            .pointer("/content/parts")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let signature = part
                .get("thoughtSignature")
                .and_then(Value::as_str)
                .map(str::to_owned);
            if let Some(fc) = part.get("functionCall") {
                let n = self.reply.tool_calls.len();
                self.reply.tool_calls.push(ToolCall {
                    id: fc
                        .get("id")
                        .and_then(Value::as_str)
                        .map_or_else(|| format!("gemini_call_{n}"), str::to_owned),
                    name: fc
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    arguments: fc.get("args").map_or_else(|| "{}".into(), Value::to_string),
                    signature,
                });
            } else if let Some(t) = part.get("text").and_then(Value::as_str) {
                if part.get("thought").and_then(Value::as_bool) == Some(true) {
                    self.thinking.push_str(t);
                    if signature.is_some() {
                        self.thinking_signature = signature;
                    }
                } else if !t.is_empty() {
                    self.reply.text.push_str(t);
                    on_text(t);
                }
            }
        }
        if let Some(r) = cand.get("finishReason").and_then(Value::as_str) {
            self.reply.stop_reason = Some(r.to_owned());
        }
        Ok(())
    }
}

impl StreamDecoder for Decoder {
    fn event(&mut self, event: &SseEvent, on_text: &dyn Fn(&str)) -> Result<bool, Fail> {
        let v: Value =
            serde_json::from_str(&event.data).map_err(|e| bad(format!("bad stream chunk: {e}")))?;
        if let Some(err) = v.get("error") {
            return Err(http::stream_error(err));
        }
        self.chunk(&v, on_text)?;
        // The stream has no end marker: the chunk with finishReason is the
        // last; keep reading until the server closes (usage may follow).
        Ok(false)
    }

    fn finish(&mut self, _completed: bool) -> Result<ModelReply, Fail> {
        if self.reply.stop_reason.is_none() {
            return Err(Fail::Cut("the stream ended without a finishReason".into()));
        }
        let mut reply = std::mem::take(&mut self.reply);
        if !self.thinking.is_empty() {
            reply.thinking.push(Thinking {
                text: std::mem::take(&mut self.thinking),
                signature: self.thinking_signature.take(),
            });
        }
        Ok(reply)
    }
}

impl http::Wire for Gemini {
    type Decoder = Decoder;
    const PARSE: fn(Value) -> Result<ModelReply, Fail> = parse_full;

    fn endpoint(&self) -> &Endpoint {
        &self.api
    }

    fn url(&self) -> String {
        if self.api.stream {
            format!(
                "{}/v1beta/models/{}:streamGenerateContent?alt=sse",
                self.api.base_url, self.api.model
            )
        } else {
            format!(
                "{}/v1beta/models/{}:generateContent",
                self.api.base_url, self.api.model
            )
        }
    }

    fn headers(key: Option<&str>) -> Vec<(&'static str, String)> {
        key.map(|k| ("x-goog-api-key", k.to_owned()))
            .into_iter()
            .collect()
    }

    fn body(&self, request: &ChatRequest) -> Value {
        self.request_body(request)
    }
}
