//! A [`ModelReply`] rendered in each provider's wire format, whole or as
//! stream events, the way the providers document them. Tool-call arguments
//! are sent as the raw text in the reply, so malformed JSON can be scripted.

use crate::message::ModelReply;
use serde_json::{Value, json};

fn pieces(text: &str) -> Vec<String> {
    // Split after spaces so deltas look like a real stream.
    let mut out = Vec::new();
    let mut cur = String::new();
    for c in text.chars() {
        cur.push(c);
        if c == ' ' && cur.len() >= 8 {
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// The stop reason to send: the scripted one (e.g. `length`, to script an
/// answer cut off at the token limit), else `plain` or, with tool calls,
/// `with_calls`.
fn stop<'a>(r: &'a ModelReply, plain: &'a str, with_calls: &'a str) -> &'a str {
    match &r.stop_reason {
        Some(s) => s,
        None if r.tool_calls.is_empty() => plain,
        None => with_calls,
    }
}

fn args_object(raw: &str) -> Value {
    match serde_json::from_str::<Value>(raw) {
        Ok(v @ Value::Object(_)) => v,
        _ => json!({}),
    }
}

/// OpenAI: a whole `chat.completion` object.
pub fn openai_response(r: &ModelReply) -> Value {
    let mut message = json!({
        "role": "assistant",
        "content": if r.text.is_empty() { Value::Null } else { json!(r.text) },
        "refusal": null,
    });
    if !r.tool_calls.is_empty() {
        message["tool_calls"] = r
            .tool_calls
            .iter()
            .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
            .collect();
    }
    json!({
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "scripted",
        "choices": [{
            "index": 0,
            "message": message,
            "logprobs": null,
            "finish_reason": stop(r, "stop", "tool_calls"),
        }],
        "usage": {
            "prompt_tokens": r.usage.input_tokens,
            "completion_tokens": r.usage.output_tokens,
            "total_tokens": r.usage.input_tokens + r.usage.output_tokens,
        },
    })
}

/// OpenAI: `chat.completion.chunk` events (data payloads), `[DONE]` last.
pub fn openai_chunks(r: &ModelReply) -> Vec<(Option<&'static str>, String)> {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 1_700_000_000,
               "model": "scripted", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        .to_string()
    };
    let mut out = vec![(
        None,
        chunk(json!({"role": "assistant", "content": ""}), Value::Null),
    )];
    for t in &r.thinking {
        out.push((
            None,
            chunk(json!({"reasoning_content": t.text}), Value::Null),
        ));
    }
    for p in pieces(&r.text) {
        out.push((None, chunk(json!({"content": p}), Value::Null)));
    }
    for (i, c) in r.tool_calls.iter().enumerate() {
        out.push((
            None,
            chunk(
                json!({"tool_calls": [{"index": i, "id": c.id, "type": "function",
            "function": {"name": c.name, "arguments": ""}}]}),
                Value::Null,
            ),
        ));
        let mid = c
            .arguments
            .char_indices()
            .nth(c.arguments.chars().count() / 2)
            .map_or(0, |(i, _)| i);
        for part in [&c.arguments[..mid], &c.arguments[mid..]] {
            out.push((
                None,
                chunk(
                    json!({"tool_calls": [{"index": i, "function": {"arguments": part}}]}),
                    Value::Null,
                ),
            ));
        }
    }
    out.push((None, chunk(json!({}), json!(stop(r, "stop", "tool_calls")))));
    out.push((None, json!({"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 1_700_000_000,
        "model": "scripted", "choices": [], "usage": {"prompt_tokens": r.usage.input_tokens,
        "completion_tokens": r.usage.output_tokens, "total_tokens": r.usage.input_tokens + r.usage.output_tokens}}).to_string()));
    out.push((None, "[DONE]".to_owned()));
    out
}

fn anthropic_blocks(r: &ModelReply) -> Vec<Value> {
    let mut content = Vec::new();
    for t in &r.thinking {
        content.push(json!({"type": "thinking", "thinking": t.text, "signature": t.signature.clone().unwrap_or_else(|| "sig".into())}));
    }
    if !r.text.is_empty() {
        content.push(json!({"type": "text", "text": r.text}));
    }
    for c in &r.tool_calls {
        content.push(json!({"type": "tool_use", "id": c.id, "name": c.name, "input": args_object(&c.arguments)}));
    }
    content
}

/// Anthropic: a whole `message` object.
pub fn anthropic_response(r: &ModelReply) -> Value {
    json!({
        "id": "msg_scripted",
        "type": "message",
        "role": "assistant",
        "model": "scripted",
        "content": anthropic_blocks(r),
        "stop_reason": stop(r, "end_turn", "tool_use"),
        "stop_sequence": null,
        "usage": {"input_tokens": r.usage.input_tokens, "output_tokens": r.usage.output_tokens},
    })
}

/// Anthropic: the typed stream events `(event name, data)`.
pub fn anthropic_events(r: &ModelReply) -> Vec<(Option<&'static str>, String)> {
    let mut out = vec![(Some("message_start"), json!({"type": "message_start", "message": {
        "id": "msg_scripted", "type": "message", "role": "assistant", "model": "scripted", "content": [],
        "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": r.usage.input_tokens, "output_tokens": 1}}}).to_string())];
    out.push((Some("ping"), json!({"type": "ping"}).to_string()));
    let mut index = 0;
    let mut block =
        |out: &mut Vec<(Option<&'static str>, String)>, start: Value, deltas: Vec<Value>| {
            out.push((
                Some("content_block_start"),
                json!({"type": "content_block_start", "index": index, "content_block": start})
                    .to_string(),
            ));
            for d in deltas {
                out.push((
                    Some("content_block_delta"),
                    json!({"type": "content_block_delta", "index": index, "delta": d}).to_string(),
                ));
            }
            out.push((
                Some("content_block_stop"),
                json!({"type": "content_block_stop", "index": index}).to_string(),
            ));
            index += 1;
        };
    for t in &r.thinking {
        block(
            &mut out,
            json!({"type": "thinking", "thinking": ""}),
            vec![
                json!({"type": "thinking_delta", "thinking": t.text}),
                json!({"type": "signature_delta", "signature": t.signature.clone().unwrap_or_else(|| "sig".into())}),
            ],
        );
    }
    if !r.text.is_empty() {
        block(
            &mut out,
            json!({"type": "text", "text": ""}),
            pieces(&r.text)
                .into_iter()
                .map(|p| json!({"type": "text_delta", "text": p}))
                .collect(),
        );
    }
    for c in &r.tool_calls {
        let mid = c
            .arguments
            .char_indices()
            .nth(c.arguments.chars().count() / 2)
            .map_or(0, |(i, _)| i);
        block(
            &mut out,
            json!({"type": "tool_use", "id": c.id, "name": c.name, "input": {}}),
            vec![
                json!({"type": "input_json_delta", "partial_json": &c.arguments[..mid]}),
                json!({"type": "input_json_delta", "partial_json": &c.arguments[mid..]}),
            ],
        );
    }
    out.push((
        Some("message_delta"),
        json!({"type": "message_delta",
        "delta": {"stop_reason": stop(r, "end_turn", "tool_use"), "stop_sequence": null},
        "usage": {"output_tokens": r.usage.output_tokens}})
        .to_string(),
    ));
    out.push((
        Some("message_stop"),
        json!({"type": "message_stop"}).to_string(),
    ));
    out
}

fn gemini_parts(r: &ModelReply, text: Option<&str>, calls: bool) -> Vec<Value> {
    let mut parts = Vec::new();
    if let Some(t) = text.filter(|t| !t.is_empty()) {
        parts.push(json!({"text": t}));
    }
    if calls {
        for c in &r.tool_calls {
            let mut p =
                json!({"functionCall": {"name": c.name, "args": args_object(&c.arguments)}});
            if let Some(s) = &c.signature {
                p["thoughtSignature"] = json!(s);
            }
            parts.push(p);
        }
    }
    parts
}

fn gemini_usage(r: &ModelReply) -> Value {
    json!({"promptTokenCount": r.usage.input_tokens, "candidatesTokenCount": r.usage.output_tokens,
           "totalTokenCount": r.usage.input_tokens + r.usage.output_tokens})
}

/// Gemini: a whole `GenerateContentResponse`.
pub fn gemini_response(r: &ModelReply) -> Value {
    let mut parts: Vec<Value> = r
        .thinking
        .iter()
        .map(|t| json!({"text": t.text, "thought": true}))
        .collect();
    parts.extend(gemini_parts(r, Some(&r.text), true));
    json!({
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": stop(r, "STOP", "STOP"), "index": 0}],
        "usageMetadata": gemini_usage(r),
        "modelVersion": "scripted",
    })
}

/// Gemini: stream chunks (each a `GenerateContentResponse`); the last one
/// carries the function calls and `finishReason`.
pub fn gemini_chunks(r: &ModelReply) -> Vec<(Option<&'static str>, String)> {
    let mut out = Vec::new();
    for p in pieces(&r.text) {
        out.push((None, json!({"candidates": [{"content": {"role": "model", "parts": [{"text": p}]}, "index": 0}],
            "modelVersion": "scripted"}).to_string()));
    }
    out.push((None, json!({"candidates": [{"content": {"role": "model", "parts": gemini_parts(r, None, true)},
        "finishReason": stop(r, "STOP", "STOP"), "index": 0}], "usageMetadata": gemini_usage(r), "modelVersion": "scripted"}).to_string()));
    out
}
