//! What a real llama.cpp server (OpenAI-compatible, SSE) with a small
//! local model on a slow CPU does to the agent, scripted: malformed
//! arguments, slow prompt processing, stalls after text, text-only models
//! sent a screenshot, answers cut off at the token limit, refusals that no
//! retry can fix, and the odd shapes its streams take.

use crate::common::complete;
use crate::common::{agent, all_events, call_step, dev, drain, tc, text_step};
use droidwarden_agent::config::{
    AgentConfig, LlmConfig, ProviderKind, RawAgentConfig, RawApprovalConfig, RawLlmConfig,
};
use droidwarden_agent::message::Message;
use droidwarden_agent::provider::{self, ChatRequest, OpenAi, Provider};
use droidwarden_agent::skills::SkillSet;
use droidwarden_agent::testing::{FakeToolHost, ScriptStep, ScriptedLlm, ScriptedModel};
use droidwarden_agent::tools::ToolSpec;
use droidwarden_agent::tools::schema::{Property, Schema};
use droidwarden_agent::{
    AgentError, EventKind, ModelReply, StopReason, TimeoutKind, ToolCall, Usage,
};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// `[llm]` for the scripted server as a llama.cpp endpoint: OpenAI wire
/// format, streamed, `retries` retries, and `tune` applied last.
fn llama(server: &ScriptedLlm, retries: u32, tune: impl FnOnce(&mut RawLlmConfig)) -> LlmConfig {
    let mut raw = RawLlmConfig {
        provider: Some(ProviderKind::Openai),
        base_url: Some(server.base_url(ProviderKind::Openai)),
        model: Some("qwen2.5-1.5b-instruct-q4_k_m".into()),
        stream: Some(true),
        max_retries: Some(retries),
        ..RawLlmConfig::default()
    };
    tune(&mut raw);
    LlmConfig::try_from(raw).unwrap()
}

fn llama_provider(
    server: &ScriptedLlm,
    retries: u32,
    tune: impl FnOnce(&mut RawLlmConfig),
) -> Arc<dyn Provider> {
    provider::from_config(&llama(server, retries, tune)).unwrap()
}

fn weather_tool() -> ToolSpec {
    ToolSpec {
        name: "get_weather".into(),
        description: "Get the current weather in a given location".into(),
        parameters: Schema::object(
            "",
            vec![Property::required(
                "location",
                Schema::string("The city, e.g. Paris"),
            )],
        )
        .into(),
    }
}

fn hello() -> ChatRequest {
    ChatRequest {
        system: String::new(),
        messages: vec![Message::User { text: "hi".into() }],
        tools: Arc::from(vec![weather_tool()]),
        require_tool: false,
        reply_schema: None,
    }
}

fn status(status: u16, body: &str) -> ScriptStep {
    ScriptStep::Status {
        status,
        retry_after: None,
        body: body.into(),
    }
}

/// A recorded llama.cpp stream: `data:` lines, `[DONE]` last.
fn sse(chunks: &[Value]) -> ScriptStep {
    let mut body = String::new();
    for c in chunks {
        body.push_str(&format!("data: {c}\n\n"));
    }
    body.push_str("data: [DONE]\n\n");
    ScriptStep::Raw {
        content_type: "text/event-stream".into(),
        body,
    }
}

fn chunk(delta: Value, finish: Value) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1_700_000_000,
           "model": "qwen", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
}

/// Approvals up to `medium` (a screenshot is a medium-risk read).
fn medium_config() -> AgentConfig {
    AgentConfig::try_from(RawAgentConfig {
        tool_retries: Some(0),
        approval: Some(RawApprovalConfig {
            auto_approve_up_to: Some(serde_json::from_value(json!("medium")).unwrap()),
            ..RawApprovalConfig::default()
        }),
        ..RawAgentConfig::default()
    })
    .unwrap()
}

// ---------------------------------------------------------------------------
// 1. Malformed arguments

/// llama.cpp parses every assistant tool call's `arguments` when it
/// renders the chat template, and answers HTTP 500 for the whole request
/// when one is not JSON: a malformed call is sent back as `{}`, and the
/// tool result says what was wrong and what was expected.
#[tokio::test]
async fn malformed_arguments_are_never_sent_back_to_the_model() {
    let bad = r#"{"device": "kitchen", "service_id": "battery", "action": "#;
    let server = ScriptedLlm::start([
        ScriptStep::Reply(ModelReply::with_calls(vec![ToolCall::new(
            "bad",
            "android_device",
            bad,
        )])),
        call_step(dev("good", "kitchen", "battery", "status")),
        text_step("Kitchen battery: 77 %."),
    ])
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let a = agent(
        dir.path(),
        AgentConfig::default(),
        llama_provider(&server, 0, |_| {}),
        crate::common::host(),
    )
    .await;
    let out = crate::common::answer(&a, "Kitchen battery?").await;
    assert_eq!(out.text, "Kitchen battery: 77 %.");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 3);
    for (i, req) in reqs.iter().enumerate().skip(1) {
        for m in req.body["messages"].as_array().unwrap() {
            for call in m["tool_calls"].as_array().into_iter().flatten() {
                let args = call["function"]["arguments"].as_str().unwrap();
                assert!(
                    serde_json::from_str::<Value>(args).is_ok_and(|v| v.is_object()),
                    "request {i} echoes arguments that are not a JSON object: {args}"
                );
            }
        }
    }
    let messages = reqs[1].body["messages"].as_array().unwrap();
    let assistant = messages.iter().find(|m| m["role"] == "assistant").unwrap();
    assert_eq!(assistant["tool_calls"][0]["function"]["arguments"], "{}");
    let result = messages.iter().find(|m| m["role"] == "tool").unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    for needle in ["not valid JSON", "expected", "service_id", "invalid_params"] {
        assert!(result.contains(needle), "{needle} missing from {result}");
    }
}

// ---------------------------------------------------------------------------
// 2. Nothing streamed is shown twice

/// A model that stalls after it began to answer: the idle limit ends the
/// attempt, and it is not tried again (the user has seen the beginning).
#[tokio::test]
async fn a_stall_after_text_is_not_retried_and_nothing_is_shown_twice() {
    let long =
        ModelReply::text("The weather in Paris is mild and sunny today, with a light breeze.");
    let server = ScriptedLlm::start([
        ScriptStep::Stall {
            reply: long.clone(),
            events: 3,
            pause: Duration::from_secs(4),
        },
        ScriptStep::Reply(long.clone()),
        ScriptStep::Reply(long),
    ])
    .await
    .unwrap();
    let p = llama_provider(&server, 2, |r| r.read_timeout_s = Some(1.0));
    let (result, streamed) = complete(&p, &hello()).await;
    let err = result.unwrap_err();
    assert_eq!(server.requests().len(), 1, "not retried: {err}");
    assert_eq!(
        streamed.matches("The weather").count(),
        1,
        "shown once: {streamed:?}"
    );
    assert!(err.to_string().contains("already streamed"), "{err}");
}

// ---------------------------------------------------------------------------
// 3. Progress limits, not total time

/// A cold prompt on a slow CPU: minutes before the first byte, then a
/// steady trickle. The idle limit does not apply before the first byte.
#[tokio::test]
async fn a_slow_prefill_is_not_cut_by_the_idle_limit() {
    let server = ScriptedLlm::start([text_step("Done thinking.")])
        .await
        .unwrap();
    server.set_delay(Duration::from_millis(2500));
    let p = llama_provider(&server, 0, |r| r.read_timeout_s = Some(1.0));
    let (result, streamed) = complete(&p, &hello()).await;
    assert_eq!(result.unwrap().text, "Done thinking.");
    assert_eq!(streamed, "Done thinking.");
    assert_eq!(server.requests().len(), 1);
}

/// No first byte in time: not retried, since the retry would read the
/// whole prompt again; the error names the key to raise.
#[tokio::test]
async fn a_first_byte_timeout_is_not_retried() {
    let server = ScriptedLlm::start([text_step("late"), text_step("late")])
        .await
        .unwrap();
    server.set_delay(Duration::from_secs(3));
    let p = llama_provider(&server, 2, |r| r.first_byte_timeout_s = Some(1.0));
    let started = Instant::now();
    let err = complete(&p, &hello()).await.0.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(3), "{err}");
    assert!(
        matches!(
            err,
            AgentError::Timeout {
                kind: TimeoutKind::FirstByte,
                attempts: 1,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("first_byte_timeout_s"), "{err}");
    let wire = err.to_wire();
    assert_eq!((wire.code.as_str(), wire.retryable), ("timeout", false));
    assert_eq!(server.requests().len(), 1);
}

/// A stall before anything was shown (the model was writing a tool call)
/// is retried; an overall cap, when set, ends a request that keeps going.
#[tokio::test]
async fn a_stall_before_any_text_is_retried_and_the_overall_cap_is_optional() {
    let call = ModelReply::tool_calls([("get_weather", r#"{"location":"Paris"}"#)]);
    let server = ScriptedLlm::start([
        ScriptStep::Stall {
            reply: call.clone(),
            events: 2,
            pause: Duration::from_secs(3),
        },
        ScriptStep::Reply(call),
    ])
    .await
    .unwrap();
    let p = llama_provider(&server, 1, |r| r.idle_timeout_s = Some(1.0));
    let reply = complete(&p, &hello()).await.0.unwrap();
    assert_eq!(reply.tool_calls[0].arguments, r#"{"location":"Paris"}"#);
    assert_eq!(server.requests().len(), 2);

    let server = ScriptedLlm::start([text_step("slow"), text_step("slow")])
        .await
        .unwrap();
    server.set_delay(Duration::from_secs(2));
    let p = llama_provider(&server, 1, |r| r.request_timeout_s = Some(1.0));
    let err = complete(&p, &hello()).await.0.unwrap_err();
    assert!(
        matches!(
            err,
            AgentError::Timeout {
                kind: TimeoutKind::Total,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("request_timeout_s"), "{err}");
    assert_eq!(server.requests().len(), 1);
}

// ---------------------------------------------------------------------------
// 4. Text-only models

fn screen_host() -> Arc<FakeToolHost> {
    Arc::new(FakeToolHost::two_phones().with_handler(|c| {
        match (c.service.as_str(), c.action.as_str()) {
            ("screen", "screenshot") => Ok(json!({
                "mime_type": "image/png", "data_base64": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAAB",
                "width": 1, "height": 1})),
            ("screen", "ui_tree") => Ok(json!({"nodes": [{"text": "Settings"}]})),
            _ => Ok(json!({"ok": true})),
        }
    }))
}

fn screenshot(id: &str) -> ScriptStep {
    call_step(tc(
        id,
        "android_device",
        json!({"device": "kitchen", "service_id": "screen", "action": "screenshot"}),
    ))
}

/// llama.cpp without a projector answers HTTP 500 "image input is not
/// supported" to any request with an image: the agent stops sending
/// images, and screenshots become UI trees, for this run and the next.
#[tokio::test]
async fn a_model_that_refuses_images_gets_the_ui_tree_from_then_on() {
    let server = ScriptedLlm::start([
        screenshot("s1"),
        status(
            500,
            r#"{"error":{"code":500,"message":"image input is not supported - hint: if this is unexpected, you may need to provide the mmproj","type":"server_error"}}"#,
        ),
        screenshot("s2"),
        text_step("The screen shows Settings."),
        // The next run: the provider remembers.
        screenshot("s3"),
        text_step("Still Settings."),
    ])
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let host = screen_host();
    let a = agent(
        dir.path(),
        medium_config(),
        llama_provider(&server, 2, |_| {}),
        host.clone(),
    )
    .await;
    let out = crate::common::answer(&a, "What is on the kitchen screen?").await;
    assert_eq!(out.text, "The screen shows Settings.", "{out:?}");
    assert_eq!(out.stop_reason, StopReason::FinalAnswer);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 4, "the refusal is not retried as it was");
    assert!(reqs[1].body.to_string().contains("image_url"));
    for r in &reqs[2..] {
        assert!(!r.body.to_string().contains("image_url"), "{}", r.body);
    }
    assert_eq!(host.count("screen", "screenshot"), 1);
    assert_eq!(host.count("screen", "ui_tree"), 1);

    let out = crate::common::answer(&a, "And now?").await;
    assert_eq!(out.text, "Still Settings.");
    assert_eq!(host.count("screen", "screenshot"), 1);
    assert_eq!(host.count("screen", "ui_tree"), 2);
    assert_eq!(server.requests().len(), 6);
}

/// llama.cpp says what it takes at `GET /props`: a text-only model gets
/// the UI tree from the first screenshot on, and never an image.
#[tokio::test]
async fn llama_cpp_props_without_vision_mean_no_images_from_the_start() {
    let server = ScriptedLlm::start([screenshot("s1"), text_step("Settings.")])
        .await
        .unwrap();
    server.set_props(
        json!({"model_path": "qwen.gguf", "modalities": {"vision": false, "audio": false}}),
    );
    let dir = tempfile::tempdir().unwrap();
    let host = screen_host();
    let a = agent(
        dir.path(),
        medium_config(),
        llama_provider(&server, 0, |_| {}),
        host.clone(),
    )
    .await;
    let out = crate::common::answer(&a, "What is on the kitchen screen?").await;
    assert_eq!(out.text, "Settings.");
    assert_eq!(host.count("screen", "screenshot"), 0);
    assert_eq!(host.count("screen", "ui_tree"), 1);
    assert_eq!(server.props_requests(), 1);
    assert!(!server.requests()[1].body.to_string().contains("image_url"));
}

// ---------------------------------------------------------------------------
// 5. max_tokens

#[tokio::test]
async fn max_tokens_is_sent_to_openai_compatible_endpoints() {
    let server = ScriptedLlm::start([text_step("ok"), text_step("ok")])
        .await
        .unwrap();
    let p = llama_provider(&server, 0, |_| {});
    complete(&p, &hello()).await.0.unwrap();
    assert_eq!(server.requests()[0].body["max_tokens"], 1024);
    let p = llama_provider(&server, 0, |r| r.max_tokens = Some(300));
    complete(&p, &hello()).await.0.unwrap();
    assert_eq!(server.requests()[1].body["max_tokens"], 300);
    // OpenAI's own API takes the newer name (its reasoning models refuse
    // the old one).
    let official = LlmConfig::try_from(RawLlmConfig {
        provider: Some(ProviderKind::Openai),
        model: Some("gpt-4o-mini".into()),
        ..RawLlmConfig::default()
    })
    .unwrap();
    let body = OpenAi::new(&official, None).unwrap().request_body(&hello());
    assert_eq!(body["max_completion_tokens"], 1024);
    assert!(body.get("max_tokens").is_none());
}

// ---------------------------------------------------------------------------
// 6. Every run's end says how it went

#[tokio::test]
async fn every_run_end_carries_its_stop_reason_duration_calls_and_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let usage = Usage {
        input_tokens: 100,
        output_tokens: 10,
    };
    let model = Arc::new(ScriptedModel::new([
        ModelReply {
            usage,
            ..ModelReply::with_calls(vec![dev("c1", "kitchen", "battery", "status")])
        },
        ModelReply {
            usage,
            ..ModelReply::text("77 %.")
        },
    ]));
    model.push_failure(400);
    let a = agent(
        dir.path(),
        AgentConfig::default(),
        model,
        crate::common::host(),
    )
    .await;
    let mut events = all_events(&a);
    crate::common::answer(&a, "battery?").await;
    let end = serde_json::to_value(drain(&mut events).await.pop().unwrap()).unwrap();
    assert_eq!(end["event"], "final", "{end}");
    assert_eq!(end["stop_reason"], "final_answer", "{end}");
    assert_eq!(end["model_calls"], 2, "{end}");
    assert!(end["duration_ms"].is_u64(), "{end}");
    assert_eq!(end["usage"]["input_tokens"], 200, "{end}");
    assert_eq!(end["usage"]["output_tokens"], 20, "{end}");

    crate::common::answer(&a, "again?").await;
    let end = serde_json::to_value(drain(&mut events).await.pop().unwrap()).unwrap();
    assert_eq!(end["event"], "error", "{end}");
    assert_eq!(end["stop_reason"], "error", "{end}");
    assert_eq!(end["model_calls"], 1, "{end}");
    assert!(end["duration_ms"].is_u64(), "{end}");
    assert_eq!(end["usage"]["input_tokens"], 0, "{end}");
}

// ---------------------------------------------------------------------------
// 7. Skill time limits follow the model's pace

/// A skill with a 1 s limit whose model needs 0.8 s per answer: its two
/// model calls take longer than the limit, but the model kept making
/// progress, so the skill finishes.
#[tokio::test]
async fn a_skills_time_limit_follows_a_slow_models_pace() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("skills").join("slow-check");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(
        d.join("SKILL.md"),
        "---\nname: slow-check\ndescription: Read the kitchen battery.\nallowed-tools: battery.status\ntimeout_s: 1\n---\nRead battery.status on the kitchen phone.\n",
    )
    .unwrap();
    let server = ScriptedLlm::start([
        call_step(dev("c1", "kitchen", "battery", "status")),
        text_step("Kitchen at 77 %."),
    ])
    .await
    .unwrap();
    server.set_delay(Duration::from_millis(800));
    let a = agent(
        dir.path(),
        AgentConfig::default(),
        llama_provider(&server, 0, |_| {}),
        crate::common::host(),
    )
    .await;
    a.set_skills(SkillSet::load(&[dir.path().join("skills")], &["*".into()]));
    let started = Instant::now();
    let out = a
        .run_skill("slow-check", json!({}), None, None, None)
        .await
        .unwrap()
        .drive(CancellationToken::new())
        .await
        .unwrap();
    assert!(started.elapsed() > Duration::from_secs(1));
    assert_eq!(out.error, None, "{out:?}");
    assert_eq!(out.text, "Kitchen at 77 %.");
}

// ---------------------------------------------------------------------------
// 8. Cut off at the token limit

#[tokio::test]
async fn an_answer_cut_off_at_the_token_limit_is_reported_not_given() {
    for (kind, reason) in [
        (ProviderKind::Openai, "length"),
        (ProviderKind::Anthropic, "max_tokens"),
        (ProviderKind::Gemini, "MAX_TOKENS"),
    ] {
        let server = ScriptedLlm::start([ScriptStep::Reply(ModelReply {
            stop_reason: Some(reason.into()),
            ..ModelReply::text("The kitchen phone is at 77 % and the bedroom phone is")
        })])
        .await
        .unwrap();
        let cfg = LlmConfig::try_from(RawLlmConfig {
            provider: Some(kind),
            base_url: Some(server.base_url(kind)),
            model: Some("m".into()),
            max_retries: Some(0),
            ..RawLlmConfig::default()
        })
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let a = agent(
            dir.path(),
            AgentConfig::default(),
            provider::from_config(&cfg).unwrap(),
            crate::common::host(),
        )
        .await;
        let mut events = all_events(&a);
        let out = crate::common::answer(&a, "Batteries?").await;
        assert_eq!(
            serde_json::to_value(out.stop_reason).unwrap(),
            "cut_off",
            "{kind:?}: {out:?}"
        );
        assert_eq!(out.text, "", "{kind:?}: not given as the answer");
        let error = out.error.expect("an error");
        assert!(error.message.contains("cut off"), "{kind:?}: {error:?}");
        assert!(error.message.contains("max_tokens"), "{kind:?}: {error:?}");
        let end = drain(&mut events).await.pop().unwrap();
        assert!(
            matches!(end.kind, EventKind::Error { .. }),
            "{kind:?}: {end:?}"
        );
    }
}

// ---------------------------------------------------------------------------
// 9. Smaller stream faults

/// Refusals no retry can change: not retried, and labelled with a precise
/// code that says so.
#[tokio::test]
async fn refusals_that_no_retry_can_change_are_not_retried() {
    let cases = [
        (
            500,
            r#"{"error":{"code":500,"message":"image input is not supported - hint: if this is unexpected, you may need to provide the mmproj","type":"server_error"}}"#,
            "unsupported_action",
        ),
        (
            500,
            r#"{"error":{"code":500,"message":"tools param requires --jinja flag","type":"server_error"}}"#,
            "unsupported_action",
        ),
        (
            400,
            r#"{"error":"registry.ollama.ai/library/gemma:2b does not support tools"}"#,
            "unsupported_action",
        ),
        (
            400,
            r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":5600,"n_ctx":4096}}"#,
            "invalid_request",
        ),
        (
            400,
            r#"{"error":{"code":400,"message":"Invalid 'messages[2].tool_calls[0].function.arguments'","type":"invalid_request_error"}}"#,
            "invalid_request",
        ),
    ];
    for (code, body, expected) in cases {
        let server =
            ScriptedLlm::start([status(code, body), status(code, body), status(code, body)])
                .await
                .unwrap();
        let p = llama_provider(&server, 2, |_| {});
        let err = complete(&p, &hello()).await.0.unwrap_err();
        let wire = err.to_wire();
        assert_eq!(server.requests().len(), 1, "{body}: not retried ({err})");
        assert_eq!(wire.code.as_str(), expected, "{body}: {err}");
        assert!(!wire.retryable, "{body}");
    }
}

#[tokio::test]
async fn tool_call_arguments_streamed_as_an_object_are_kept() {
    let server = ScriptedLlm::start([sse(&[
        chunk(json!({"role": "assistant", "content": null}), Value::Null),
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "c1", "type": "function",
                   "function": {"name": "get_weather", "arguments": {"location": "Paris"}}}]}),
            Value::Null,
        ),
        chunk(json!({}), json!("tool_calls")),
    ])])
    .await
    .unwrap();
    let p = llama_provider(&server, 0, |_| {});
    let reply = complete(&p, &hello()).await.0.unwrap();
    assert_eq!(reply.tool_calls.len(), 1);
    let args: Value = serde_json::from_str(&reply.tool_calls[0].arguments).unwrap();
    assert_eq!(args, json!({"location": "Paris"}));
}

#[tokio::test]
async fn a_sparse_tool_call_index_makes_no_phantom_calls() {
    let server = ScriptedLlm::start([sse(&[
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "a", "type": "function",
                   "function": {"name": "get_weather", "arguments": "{\"location\":"}}]}),
            Value::Null,
        ),
        chunk(
            json!({"tool_calls": [{"index": 2, "id": "b", "type": "function",
                   "function": {"name": "get_weather", "arguments": "{\"location\":\"Oslo\"}"}}]}),
            Value::Null,
        ),
        chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "\"Paris\"}"}}]}),
            Value::Null,
        ),
        chunk(json!({}), json!("tool_calls")),
    ])])
    .await
    .unwrap();
    let p = llama_provider(&server, 0, |_| {});
    let reply = complete(&p, &hello()).await.0.unwrap();
    let got: Vec<(&str, &str)> = reply
        .tool_calls
        .iter()
        .map(|c| (c.id.as_str(), c.arguments.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("a", r#"{"location":"Paris"}"#),
            ("b", r#"{"location":"Oslo"}"#)
        ]
    );
}

#[tokio::test]
async fn a_stream_of_only_done_is_an_empty_response_error() {
    let server = ScriptedLlm::start([sse(&[])]).await.unwrap();
    let p = llama_provider(&server, 0, |_| {});
    let err = complete(&p, &hello()).await.0.unwrap_err();
    assert!(err.to_string().contains("empty"), "{err}");
}

/// A file recorded from a real llama.cpp server by
/// `agent/tests/fixtures/llamacpp/record.py` (Qwen2.5-Coder-0.5B-Instruct,
/// `-c 8192 --jinja`; the requests are in `requests.json` beside it).
fn recorded(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/llamacpp")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn recorded_stream(name: &str) -> ScriptStep {
    ScriptStep::Raw {
        content_type: "text/event-stream".into(),
        body: recorded(name),
    }
}

/// The streams a real llama.cpp server sent, replayed byte for byte: the
/// model's calls written as text are read as calls (or as failed calls,
/// for tools that do not exist), the schema-held reply is the call, a
/// reply cut at the token limit says so, and the server's refusals are
/// not retried.
#[tokio::test]
async fn recorded_llama_cpp_answers_replay_as_the_server_sent_them() {
    use droidwarden_agent::recover::{Recovery, recover};
    let offered = ["android_device"];
    let read = |name: &str| {
        let name = name.to_owned();
        async move {
            let server = ScriptedLlm::start([recorded_stream(&name)]).await.unwrap();
            let p = llama_provider(&server, 2, |_| {});
            let (reply, _) = complete(&p, &hello()).await;
            reply.unwrap_or_else(|e| panic!("{name}: {e}"))
        }
    };
    for (name, wanted) in [
        ("tool_wifi_off.sse", Some(("wifi_automation", "disable"))),
        ("schema_wifi_off.sse", Some(("wifi_automation", "disable"))),
        // Tools the model made up (`hall_phone_battery_level`,
        // `set_brightness`): a failed call, answered with how to call.
        ("tool_battery.sse", None),
        ("tool_brightness.sse", None),
    ] {
        let reply = read(name).await;
        assert!(
            reply.tool_calls.is_empty(),
            "{name}: the model wrote its call as text"
        );
        assert_eq!(reply.stop_reason.as_deref(), Some("stop"), "{name}");
        match (
            recover(&reply.text, &offered, Some("android_device")),
            wanted,
        ) {
            (Recovery::Calls { calls, .. }, Some((service, action))) => {
                assert_eq!(calls.len(), 1, "{name}");
                let args: Value = serde_json::from_str(&calls[0].arguments).unwrap();
                assert_eq!(
                    (&args["service_id"], &args["action"], &args["device"]),
                    (&json!(service), &json!(action), &json!("kitchen")),
                    "{name}"
                );
            }
            (Recovery::Failed(why), None) => assert!(!why.is_empty(), "{name}"),
            (other, _) => panic!("{name}: {other:?}"),
        }
    }
    let cut = read("cut_at_max_tokens.sse").await;
    assert_eq!(cut.stop_reason.as_deref(), Some("length"));
    assert!(cut.text.starts_with("Once upon a time"), "{}", cut.text);
    let statuses: Value = serde_json::from_str(&recorded("status.json")).unwrap();
    for (name, expected) in [
        ("context_exceeded.json", "invalid_request"),
        ("image_refused.json", "unsupported_action"),
    ] {
        let code = u16::try_from(statuses[name].as_u64().unwrap()).unwrap();
        let body = recorded(name);
        let server = ScriptedLlm::start([status(code, &body), status(code, &body)])
            .await
            .unwrap();
        let p = llama_provider(&server, 2, |_| {});
        let err = complete(&p, &hello()).await.0.unwrap_err();
        assert_eq!(server.requests().len(), 1, "{name}: not retried ({err})");
        assert_eq!(err.to_wire().code.as_str(), expected, "{name}: {err}");
    }
}
