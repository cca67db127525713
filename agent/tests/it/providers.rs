//! Providers against the scripted LLM server over real HTTP, and their
//! request and response shapes against recorded example payloads in
//! `fixtures/` (modelled on each provider's public documentation).

use crate::common::complete;
use droidwarden_agent::config::{LlmConfig, ProviderKind, RawLlmConfig};
use droidwarden_agent::message::{Message, Thinking};
use droidwarden_agent::provider::{Anthropic, ChatRequest, Gemini, OpenAi, Provider};
use droidwarden_agent::testing::{ScriptStep, ScriptedLlm};
use droidwarden_agent::tools::ToolSpec;
use droidwarden_agent::tools::schema::{Property, Schema};
use droidwarden_agent::{AgentError, ModelReply, Secret, ToolCall, Usage};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn fixture(name: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/tests/fixtures/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn fixture_json(name: &str) -> Value {
    serde_json::from_str(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn config(kind: ProviderKind, base_url: &str, model: &str, stream: bool) -> LlmConfig {
    LlmConfig::try_from(RawLlmConfig {
        provider: Some(kind),
        base_url: Some(base_url.into()),
        model: Some(model.into()),
        stream: Some(stream),
        max_tokens: Some(1024),
        max_retries: Some(2),
        connect_timeout_s: Some(2.0),
        read_timeout_s: Some(5.0),
        request_timeout_s: Some(10.0),
        ..RawLlmConfig::default()
    })
    .unwrap()
}

/// The model each provider's fixtures were recorded with.
fn model_of(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::Openai => "gpt-4o-mini",
        ProviderKind::Anthropic => "claude-sonnet-4-5",
        ProviderKind::Gemini => "gemini-2.5-flash",
    }
}

/// The provider of `kind` for the scripted server.
fn scripted_provider(server: &ScriptedLlm, kind: ProviderKind, stream: bool) -> Arc<dyn Provider> {
    provider(kind, &server.base_url(kind), stream)
}

fn provider(kind: ProviderKind, base_url: &str, stream: bool) -> Arc<dyn Provider> {
    let key = Some(Secret::new("test-key"));
    let cfg = config(kind, base_url, model_of(kind), stream);
    match kind {
        ProviderKind::Openai => Arc::new(OpenAi::new(&cfg, key).unwrap()),
        ProviderKind::Anthropic => Arc::new(Anthropic::new(&cfg, key).unwrap()),
        ProviderKind::Gemini => Arc::new(Gemini::new(&cfg, key).unwrap()),
    }
}

fn weather_tool() -> ToolSpec {
    ToolSpec {
        name: "get_weather".into(),
        description: "Get the current weather in a given location".into(),
        parameters: Schema::object(
            "",
            vec![
                Property::required(
                    "location",
                    Schema::string("The city and state, e.g. San Francisco, CA"),
                ),
                Property::optional(
                    "unit",
                    Schema::enumeration("The unit of temperature", &["celsius", "fahrenheit"]),
                ),
            ],
        )
        .into(),
    }
}

fn weather_call() -> ToolCall {
    ToolCall::new(
        "toolu_01A09q90qw90lq917835lq9",
        "get_weather",
        r#"{"location":"San Francisco, CA","unit":"celsius"}"#,
    )
}

fn conversation() -> ChatRequest {
    ChatRequest {
        system: "You are a test.".into(),
        messages: vec![
            Message::User {
                text: "What's the weather like in San Francisco?".into(),
            },
            Message::Assistant {
                text: "I'll check the current weather in San Francisco for you.".into(),
                thinking: vec![Thinking {
                    text: "The user wants the weather; I should call get_weather.".into(),
                    signature: Some("EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds".into()),
                }],
                tool_calls: vec![weather_call()],
            },
            Message::Tool {
                call_id: "toolu_01A09q90qw90lq917835lq9".into(),
                name: "get_weather".into(),
                content: r#"{"temperature_c":15}"#.into(),
                is_error: false,
            },
        ],
        tools: Arc::from(vec![weather_tool()]),
        require_tool: false,
        reply_schema: None,
    }
}

fn simple_request() -> ChatRequest {
    ChatRequest {
        system: String::new(),
        messages: vec![Message::User { text: "hi".into() }],
        tools: Arc::from(vec![weather_tool()]),
        require_tool: false,
        reply_schema: None,
    }
}

#[test]
fn request_bodies_match_the_documented_shapes() {
    for (kind, file) in [
        (ProviderKind::Anthropic, "anthropic_request.json"),
        (ProviderKind::Gemini, "gemini_request.json"),
        (ProviderKind::Openai, "openai_request.json"),
    ] {
        let mut cfg = config(kind, "http://127.0.0.1:9", model_of(kind), false);
        // The fixture is OpenAI's own API's shape: strict schemas (the
        // default there; a compatible server at this URL gets plain ones).
        cfg.strict_tools = true;
        let body = match kind {
            ProviderKind::Openai => OpenAi::new(&cfg, None)
                .unwrap()
                .request_body(&conversation()),
            ProviderKind::Anthropic => Anthropic::new(&cfg, None)
                .unwrap()
                .request_body(&conversation()),
            ProviderKind::Gemini => Gemini::new(&cfg, None)
                .unwrap()
                .request_body(&conversation()),
        };
        assert_eq!(body, fixture_json(file), "{kind:?}");
    }
}

/// The usage the recorded weather responses report.
const RECORDED_USAGE: Usage = Usage {
    input_tokens: 472,
    output_tokens: 89,
};

fn check_weather(reply: &ModelReply, id: &str) {
    assert_eq!(
        reply.text, "I'll check the current weather in San Francisco for you.",
        "thinking must stay out of the answer"
    );
    assert_eq!(reply.tool_calls.len(), 1);
    assert_eq!(reply.tool_calls[0].name, "get_weather");
    assert_eq!(reply.tool_calls[0].id, id);
    let args: Value = serde_json::from_str(&reply.tool_calls[0].arguments).unwrap();
    assert_eq!(
        args,
        json!({"location": "San Francisco, CA", "unit": "celsius"})
    );
}

#[test]
fn responses_parse_from_the_documented_shapes() {
    let r = Anthropic::parse_response(fixture_json("anthropic_response.json")).unwrap();
    check_weather(&r, "toolu_01A09q90qw90lq917835lq9");
    assert_eq!(
        r.thinking[0].text,
        "The user wants the weather; I should call get_weather."
    );
    assert!(r.thinking[0].signature.is_some());
    assert_eq!(r.usage, RECORDED_USAGE);
    assert_eq!(r.stop_reason.as_deref(), Some("tool_use"));

    let r = Gemini::parse_response(fixture_json("gemini_response.json")).unwrap();
    check_weather(&r, "gemini_call_0");
    assert_eq!(r.thinking.len(), 1);
    assert_eq!(r.tool_calls[0].signature.as_deref(), Some("CiwBVKhc7vB2"));
    assert_eq!(r.usage, RECORDED_USAGE);

    let r = OpenAi::parse_response(fixture_json("openai_response.json")).unwrap();
    check_weather(&r, "call_abc123");
    assert_eq!(r.stop_reason.as_deref(), Some("tool_calls"));
}

#[test]
fn an_unusable_response_names_the_provider_and_what_is_missing() {
    let cases = [
        (
            OpenAi::parse_response(json!({"id": "x"})),
            "openai",
            "no choices in the response",
        ),
        (
            Anthropic::parse_response(json!({"id": "x"})),
            "anthropic",
            "no content array in the response",
        ),
        (
            Gemini::parse_response(json!({"candidates": []})),
            "gemini",
            "no candidate in the response",
        ),
    ];
    for (result, name, expected) in cases {
        match result {
            Err(AgentError::BadResponse { provider, message }) => {
                assert_eq!((provider, message.as_str()), (name, expected));
            }
            other => panic!("{name}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn recorded_streams_parse_for_each_provider() {
    for (kind, file, id) in [
        (
            ProviderKind::Anthropic,
            "anthropic_stream.txt",
            "toolu_01A09q90qw90lq917835lq9",
        ),
        (ProviderKind::Gemini, "gemini_stream.txt", "gemini_call_0"),
        (ProviderKind::Openai, "openai_stream.txt", "call_abc123"),
    ] {
        let server = ScriptedLlm::start([ScriptStep::Raw {
            content_type: "text/event-stream".into(),
            body: fixture(file),
        }])
        .await
        .unwrap();
        let p = scripted_provider(&server, kind, true);
        let (reply, streamed) = complete(&p, &simple_request()).await;
        let reply = reply.unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        check_weather(&reply, id);
        assert_eq!(
            streamed, reply.text,
            "{kind:?}: text deltas add up to the answer"
        );
        assert_eq!(reply.usage.input_tokens, 472, "{kind:?}");
        if kind == ProviderKind::Anthropic {
            assert_eq!(
                reply.thinking[0].text,
                "The user wants the weather; I should call get_weather."
            );
            assert!(
                reply.thinking[0]
                    .signature
                    .as_deref()
                    .unwrap()
                    .starts_with("EqQB")
            );
        }
    }
}

#[tokio::test]
async fn each_provider_round_trips_through_the_scripted_server() {
    let scripted = ModelReply {
        text: "Looking it up.".into(),
        thinking: Vec::new(),
        tool_calls: vec![ToolCall {
            id: "call_7".into(),
            ..weather_call()
        }],
        usage: Usage {
            input_tokens: 11,
            output_tokens: 7,
        },
        stop_reason: None,
    };
    for kind in [
        ProviderKind::Openai,
        ProviderKind::Anthropic,
        ProviderKind::Gemini,
    ] {
        for stream in [false, true] {
            let server = ScriptedLlm::start([ScriptStep::Reply(scripted.clone())])
                .await
                .unwrap();
            let p = scripted_provider(&server, kind, stream);
            let (reply, streamed) = complete(&p, &simple_request()).await;
            let reply = reply.unwrap_or_else(|e| panic!("{kind:?} stream={stream}: {e}"));
            assert_eq!(reply.text, "Looking it up.", "{kind:?} {stream}");
            assert_eq!(streamed, "Looking it up.", "{kind:?} {stream}");
            assert_eq!(reply.tool_calls.len(), 1, "{kind:?} {stream}");
            assert_eq!(reply.usage, scripted.usage, "{kind:?} {stream}");
            let req = &server.requests()[0];
            match kind {
                ProviderKind::Openai => {
                    assert_eq!(req.path, "/v1/chat/completions");
                    assert_eq!(req.header("authorization"), Some("Bearer test-key"));
                    // A compatible server (not OpenAI's own API) gets plain
                    // schemas unless `strict_tools` is set.
                    assert!(req.body["tools"][0]["function"].get("strict").is_none());
                    assert_eq!(req.body["stream"] == true, stream);
                }
                ProviderKind::Anthropic => {
                    assert_eq!(req.path, "/v1/messages");
                    assert_eq!(req.header("x-api-key"), Some("test-key"));
                    assert_eq!(req.header("anthropic-version"), Some("2023-06-01"));
                }
                _ => {
                    let want = if stream {
                        "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
                    } else {
                        "/v1beta/models/gemini-2.5-flash:generateContent"
                    };
                    assert_eq!(req.path, want);
                    assert_eq!(req.header("x-goog-api-key"), Some("test-key"));
                }
            }
        }
    }
}

fn status(status: u16, retry_after: Option<&str>, body: &str) -> ScriptStep {
    ScriptStep::Status {
        status,
        retry_after: retry_after.map(str::to_owned),
        body: body.into(),
    }
}

#[tokio::test]
async fn rate_limit_then_success_honours_retry_after() {
    let server = ScriptedLlm::start([
        status(
            429,
            Some("1"),
            r#"{"error":{"message":"Rate limit reached","type":"requests"}}"#,
        ),
        ScriptStep::Reply(ModelReply::text("ok")),
    ])
    .await
    .unwrap();
    let p = scripted_provider(&server, ProviderKind::Openai, true);
    let (reply, _) = complete(&p, &simple_request()).await;
    assert_eq!(reply.unwrap().text, "ok");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    let gap = reqs[1].at.duration_since(reqs[0].at);
    assert!(gap >= Duration::from_millis(950), "waited only {gap:?}");
}

#[tokio::test]
async fn server_errors_are_retried_with_backoff() {
    let server = ScriptedLlm::start([
        status(
            529,
            None,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        ),
        ScriptStep::Reply(ModelReply::text("fine")),
    ])
    .await
    .unwrap();
    let p = scripted_provider(&server, ProviderKind::Anthropic, false);
    assert_eq!(
        complete(&p, &simple_request()).await.0.unwrap().text,
        "fine"
    );
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn bad_keys_and_unknown_models_fail_at_once_with_clear_errors() {
    let cases = [
        (
            ProviderKind::Openai,
            status(
                401,
                None,
                r#"{"error":{"message":"Incorrect API key provided: sk-...","type":"invalid_request_error","code":"invalid_api_key"}}"#,
            ),
            "rejected the API key",
        ),
        (
            ProviderKind::Anthropic,
            status(
                403,
                None,
                r#"{"type":"error","error":{"type":"permission_error","message":"Your API key does not have permission"}}"#,
            ),
            "rejected the API key",
        ),
        (
            ProviderKind::Gemini,
            status(
                400,
                None,
                r#"{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT"}}"#,
            ),
            "rejected the API key",
        ),
        (
            ProviderKind::Openai,
            status(404, None, r#"{"error":"model 'llama9' not found"}"#),
            "does not know model",
        ),
        (
            ProviderKind::Gemini,
            status(
                404,
                None,
                r#"{"error":{"code":404,"message":"models/x is not found","status":"NOT_FOUND"}}"#,
            ),
            "does not know model",
        ),
    ];
    for (kind, step, needle) in cases {
        let server = ScriptedLlm::start([step]).await.unwrap();
        let p = scripted_provider(&server, kind, false);
        assert!(
            !format!("{p:?}").contains("test-key"),
            "the key never prints"
        );
        let err = complete(&p, &simple_request()).await.0.unwrap_err();
        assert!(err.to_string().contains(needle), "{kind:?}: {err}");
        assert!(
            !err.to_string().contains("test-key"),
            "the key never appears"
        );
        assert!(!err.to_wire().retryable);
        assert_eq!(server.requests().len(), 1, "{kind:?}: not retried");
    }
}

#[tokio::test]
async fn a_retry_after_beyond_the_limit_is_reported_not_waited() {
    let server = ScriptedLlm::start([status(429, Some("3600"), "{}")])
        .await
        .unwrap();
    let p = scripted_provider(&server, ProviderKind::Openai, false);
    let start = Instant::now();
    let err = complete(&p, &simple_request()).await.0.unwrap_err();
    assert!(
        matches!(err, AgentError::RateLimited { retry_after: Some(d), .. } if d == Duration::from_secs(3600)),
        "{err}"
    );
    assert!(start.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn a_stream_cut_before_any_text_is_retried() {
    let calls = ModelReply::tool_calls([("get_weather", r#"{"location":"Paris"}"#)]);
    for kind in [ProviderKind::Openai, ProviderKind::Anthropic] {
        let server = ScriptedLlm::start([
            ScriptStep::Cut {
                reply: calls.clone(),
                events: 3,
            },
            ScriptStep::Reply(calls.clone()),
        ])
        .await
        .unwrap();
        let p = scripted_provider(&server, kind, true);
        let reply = complete(&p, &simple_request()).await.0.unwrap();
        assert_eq!(
            reply.tool_calls[0].arguments, r#"{"location":"Paris"}"#,
            "{kind:?}"
        );
        assert_eq!(server.requests().len(), 2, "{kind:?}");
    }
}

#[tokio::test]
async fn a_stream_cut_after_text_is_reported_not_repeated() {
    let long =
        ModelReply::text("The weather in Paris is mild and sunny today, with a light breeze.");
    let server = ScriptedLlm::start([
        ScriptStep::Cut {
            reply: long.clone(),
            events: 3,
        },
        ScriptStep::Reply(long),
    ])
    .await
    .unwrap();
    let p = scripted_provider(&server, ProviderKind::Openai, true);
    let (err, streamed) = complete(&p, &simple_request()).await;
    let err = err.unwrap_err();
    assert!(
        matches!(err, AgentError::StreamCut { partial: true, .. }),
        "{err}"
    );
    assert!(!streamed.is_empty());
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn unreachable_endpoint_is_a_connect_error_after_retries() {
    // Bind and drop to find a port with nothing listening.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let p = provider(
        ProviderKind::Gemini,
        &format!("http://127.0.0.1:{port}"),
        false,
    );
    let err = complete(&p, &simple_request()).await.0.unwrap_err();
    assert!(
        matches!(err, AgentError::Connect { attempts: 3, .. }),
        "{err}"
    );
    assert!(err.to_wire().retryable);
}

/// The scripted server as a slow model with a standing answer: every
/// request is held back, answered with the fallback once the script is
/// used up, and counted while in flight.
#[tokio::test]
async fn the_scripted_server_can_be_slow_and_counts_requests_in_flight() {
    let server = ScriptedLlm::start([ScriptStep::Reply(ModelReply::text("first"))])
        .await
        .unwrap();
    server.set_fallback(ScriptStep::Reply(ModelReply::text("again")));
    server.set_delay(Duration::from_millis(300));
    let p = scripted_provider(&server, ProviderKind::Openai, false);
    let started = Instant::now();
    let request = simple_request();
    let sink = |_: &str| {};
    let (a, b, c) = tokio::join!(
        p.complete(&request, &sink),
        p.complete(&request, &sink),
        p.complete(&request, &sink)
    );
    assert!(started.elapsed() >= Duration::from_millis(300));
    let mut texts = [a.unwrap().text, b.unwrap().text, c.unwrap().text];
    texts.sort();
    assert_eq!(texts, ["again", "again", "first"]);
    assert_eq!(server.max_in_flight(), 3);
    assert_eq!(server.in_flight(), 0);
}
