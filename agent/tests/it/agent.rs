//! The agent end to end: scripted models (over HTTP and in process), the
//! fake tool host, a real SQLite store in a temporary directory.

use crate::common::{
    agent, all_events, answer, assert_contains_all, battery_phones, call_step, calls, dev,
    device_call, drain, drive_until_approval, process, resume_to_end, run_events, tc, text_step,
};
use droidwarden_agent::config::{
    AgentConfig, LlmConfig, ProviderKind, RawAgentConfig, RawApprovalConfig, RawLlmConfig,
};
use droidwarden_agent::provider;
use droidwarden_agent::testing::{FakeToolHost, ScriptStep, ScriptedLlm, ScriptedModel};
use droidwarden_agent::{
    Agent, AgentError, AskRequest, EventKind, Message, ModelReply, Provider, StopReason, ToolCall,
    ToolMode,
};
use droidwarden_services::{ErrorCode, WireError};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

fn agent_config(mode: ToolMode, approval: RawApprovalConfig) -> AgentConfig {
    AgentConfig::try_from(RawAgentConfig {
        tool_mode: Some(mode),
        approval: Some(approval),
        tool_retries: Some(1),
        ..RawAgentConfig::default()
    })
    .unwrap()
}

/// An agent in `dir` in tool `mode`, with default approvals, over the
/// scripted server as provider `kind` (streaming or not), and its phones.
async fn http_agent(
    dir: &std::path::Path,
    mode: ToolMode,
    (kind, server, stream): (ProviderKind, &ScriptedLlm, bool),
) -> (Agent, Arc<FakeToolHost>) {
    let host = battery_host();
    let config = agent_config(mode, RawApprovalConfig::default());
    let a = agent(
        dir,
        config,
        http_provider(kind, server, stream),
        host.clone(),
    )
    .await;
    (a, host)
}

fn http_provider(kind: ProviderKind, server: &ScriptedLlm, stream: bool) -> Arc<dyn Provider> {
    let cfg = LlmConfig::try_from(RawLlmConfig {
        provider: Some(kind),
        base_url: Some(server.base_url(kind)),
        model: Some("scripted-model".into()),
        stream: Some(stream),
        max_retries: Some(1),
        ..RawLlmConfig::default()
    })
    .unwrap();
    provider::from_config(&cfg).unwrap()
}

fn battery_host() -> Arc<FakeToolHost> {
    battery_phones(
        json!({"level_percent": 81, "charging": true}),
        json!({"level_percent": 42, "charging": false}),
    )
}

fn tool_messages(messages: &[Value]) -> String {
    messages
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

async fn multi_step(kind: ProviderKind, mode: ToolMode, stream: bool) {
    let server = ScriptedLlm::start([
        ScriptStep::Reply(calls(vec![
            device_call(mode, "c1", "kitchen", "battery", "status", json!({})),
            device_call(mode, "c2", "bedroom", "battery", "status", json!({})),
        ])),
        ScriptStep::Reply(calls(vec![
            device_call(
                mode,
                "c3",
                "bedroom",
                "audio_automation",
                "set_volume",
                json!({"stream": "music", "level": 20}),
            ),
            tc("c4", "calculator", json!({"expression": "81 - 42"})),
        ])),
        text_step(
            "Kitchen is at 81 %, bedroom at 42 % (39 points apart); bedroom music set to 20 %.",
        ),
    ])
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (a, host) = http_agent(dir.path(), mode, (kind, &server, stream)).await;
    let run = a
        .ask(AskRequest::new(
            "Compare the batteries, then turn the bedroom music down to 20 %.",
        ))
        .await
        .unwrap();
    let events = tokio::spawn(run_events(a.subscribe(), run.run_id().to_owned()));
    let outcome = run.drive(CancellationToken::new()).await.unwrap();
    let label = format!("{kind:?}/{mode:?}/stream={stream}");
    assert_eq!(outcome.stop_reason, StopReason::FinalAnswer, "{label}");
    assert!(
        outcome.text.contains("81 %") && outcome.text.contains("42 %"),
        "{label}"
    );
    assert_eq!(host.calls().len(), 3, "{label}");
    assert_eq!(host.count("audio_automation", "set_volume"), 1, "{label}");

    // The model saw the tool results before its answer.
    let reqs = server.requests();
    assert_eq!(reqs.len(), 3, "{label}");
    let third = tool_messages(match kind {
        ProviderKind::Gemini => reqs[2].body["contents"].as_array().unwrap(),
        _ => reqs[2].body["messages"].as_array().unwrap(),
    });
    assert_contains_all(&label, &third, &["81", "42", "39.0", "set_volume"]);

    // Events: each once.
    let events = events.await.unwrap();
    let count = |f: &dyn Fn(&EventKind) -> bool| events.iter().filter(|e| f(e)).count();
    assert_eq!(
        count(&|e| matches!(e, EventKind::ToolCall { .. })),
        4,
        "{label}"
    );
    assert_eq!(
        count(&|e| matches!(e, EventKind::ToolResult { .. })),
        4,
        "{label}"
    );
    assert_eq!(
        count(&|e| matches!(e, EventKind::Final { .. })),
        1,
        "{label}"
    );
    let mut ids: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            EventKind::ToolResult {
                call_id, is_error, ..
            } => {
                assert!(!is_error, "{label}: {e:?}");
                Some(call_id.as_str())
            }
            _ => None,
        })
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(
        ids.len(),
        4,
        "{label}: call ids are unique in a run: {ids:?}"
    );
    if kind != ProviderKind::Gemini {
        assert_eq!(ids, ["c1", "c2", "c3", "c4"], "{label}");
    }
    let deltas: String = events
        .iter()
        .filter_map(|e| match e {
            EventKind::TextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(deltas, outcome.text, "{label}");
}

#[tokio::test]
async fn multi_step_two_devices_toolkit_openai_streaming() {
    multi_step(ProviderKind::Openai, ToolMode::Toolkit, true).await;
}

#[tokio::test]
async fn multi_step_two_devices_direct_anthropic_streaming() {
    multi_step(ProviderKind::Anthropic, ToolMode::Direct, true).await;
}

#[tokio::test]
async fn multi_step_two_devices_gemini_both_modes() {
    multi_step(ProviderKind::Gemini, ToolMode::Direct, false).await;
    multi_step(ProviderKind::Gemini, ToolMode::Toolkit, true).await;
}

#[tokio::test]
async fn malformed_calls_are_answered_with_errors_the_model_corrects() {
    let server = ScriptedLlm::start([
        ScriptStep::Reply(ModelReply {
            tool_calls: vec![
                ToolCall { id: "bad".into(), name: "android_device".into(), arguments: r#"{"service_id": "battery", "action": "#.into(), signature: None },
                tc("ghost", "android_teleporter", json!({})),
                tc("missing", "android_device", json!({"device": "kitchen", "service_id": "audio_automation", "action": "set_volume", "parameters": {"stream": "music"}})),
            ],
            ..ModelReply::default()
        }),
        call_step(dev("good", "kitchen", "battery", "status")),
        text_step("Kitchen battery: 81 %."),
    ])
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (a, host) = http_agent(
        dir.path(),
        ToolMode::Toolkit,
        (ProviderKind::Openai, &server, true),
    )
    .await;
    let outcome = answer(&a, "Kitchen battery?").await;
    assert_eq!(outcome.text, "Kitchen battery: 81 %.");
    assert_eq!(host.calls().len(), 1, "only the corrected call ran");
    let second = tool_messages(server.requests()[1].body["messages"].as_array().unwrap());
    assert_contains_all(
        "the second request's tool results",
        &second,
        &[
            "not valid JSON",
            "unknown tool",
            "requires parameter",
            "invalid_params",
        ],
    );
}

#[tokio::test]
async fn retryable_device_errors_are_retried() {
    let dir = tempfile::tempdir().unwrap();
    let host = battery_host();
    host.fail_next(
        "battery",
        "status",
        WireError::new(ErrorCode::DeviceOffline, "kitchen is offline"),
    );
    host.fail_next(
        "audio_automation",
        "set_volume",
        WireError::new(ErrorCode::Timeout, "slow"),
    );
    let model = Arc::new(ScriptedModel::new([
        calls(vec![
            dev("c1", "kitchen", "battery", "status"),
            device_call(
                ToolMode::Toolkit,
                "c2",
                "bedroom",
                "audio_automation",
                "set_volume",
                json!({"stream": "music", "level": 5}),
            ),
        ]),
        ModelReply::text("done"),
    ]));
    let a = agent(
        dir.path(),
        agent_config(ToolMode::Toolkit, RawApprovalConfig::default()),
        model.clone(),
        host.clone(),
    )
    .await;
    answer(&a, "go").await;
    // A read is retried; a change that timed out is not repeated (it may have run).
    assert_eq!(host.count("battery", "status"), 2);
    assert_eq!(host.count("audio_automation", "set_volume"), 1);
    let msgs = &model.requests()[1].messages;
    assert!(msgs.iter().any(|m| matches!(m, Message::Tool { call_id, is_error: true, content, .. } if call_id == "c2" && content.contains("timeout"))));
    assert!(
        msgs.iter().any(
            |m| matches!(m, Message::Tool { call_id, is_error: false, .. } if call_id == "c1")
        )
    );
}

#[tokio::test]
async fn calls_run_concurrently_across_devices_and_one_at_a_time_per_device() {
    let dir = tempfile::tempdir().unwrap();
    let host = Arc::new(FakeToolHost::two_phones().with_delay(Duration::from_millis(60)));
    let model = Arc::new(ScriptedModel::new([
        calls(vec![
            dev("k1", "kitchen", "battery", "status"),
            dev("k2", "kitchen", "wifi_automation", "status"),
            dev("b1", "bedroom", "battery", "status"),
            dev("b2", "bedroom", "wifi_automation", "status"),
        ]),
        ModelReply::text("done"),
    ]));
    let a = agent(
        dir.path(),
        agent_config(ToolMode::Toolkit, RawApprovalConfig::default()),
        model,
        host.clone(),
    )
    .await;
    let start = std::time::Instant::now();
    answer(&a, "status of everything").await;
    assert_eq!(host.calls().len(), 4);
    assert_eq!(host.max_in_flight(), 2);
    assert_eq!(host.max_in_flight_per_device(), 1);
    // Two calls per device, one at a time: at least two delays in a row.
    let took = start.elapsed();
    assert!(took >= Duration::from_millis(120), "{took:?}");
}

#[tokio::test]
async fn without_tools_a_single_model_call() {
    let dir = tempfile::tempdir().unwrap();
    let host = Arc::new(FakeToolHost::new(Vec::new()));
    let model = Arc::new(ScriptedModel::texts(["Hello!"]));
    let cfg = AgentConfig {
        builtin_tools: false,
        ..agent_config(ToolMode::Toolkit, RawApprovalConfig::default())
    };
    let a = agent(dir.path(), cfg, model.clone(), host).await;
    let out = answer(&a, "hi").await;
    assert_eq!(out.text, "Hello!");
    assert_eq!(model.requests().len(), 1);
    assert!(model.requests()[0].tools.is_empty());
}

#[tokio::test]
async fn a_failing_model_ends_the_run_with_an_error_event() {
    let dir = tempfile::tempdir().unwrap();
    let model = Arc::new(ScriptedModel::new([]));
    model.push_failure(401);
    let a = agent(dir.path(), AgentConfig::default(), model, battery_host()).await;
    let run = a.ask(AskRequest::new("hi")).await.unwrap();
    let events = tokio::spawn(run_events(a.subscribe(), run.run_id().to_owned()));
    let out = run.drive(CancellationToken::new()).await.unwrap();
    assert_eq!(out.stop_reason, StopReason::Error);
    assert!(out.error.is_some());
    let events = events.await.unwrap();
    assert!(
        matches!(events.last(), Some(EventKind::Error { .. })),
        "{events:?}"
    );
    assert!(!events.iter().any(|e| matches!(e, EventKind::Final { .. })));
}

// ---------------------------------------------------------------------------
// Approvals

fn approval_cfg(timeout_s: f64) -> AgentConfig {
    agent_config(
        ToolMode::Toolkit,
        RawApprovalConfig {
            timeout_s: Some(timeout_s),
            ..RawApprovalConfig::default()
        },
    )
}

/// A model that makes one toolkit call `id` on the kitchen phone, then
/// answers `texts` in turn.
fn kitchen_call_model(
    id: &str,
    (service, action, params): (&str, &str, Value),
    texts: &[&str],
) -> Arc<ScriptedModel> {
    let call = device_call(ToolMode::Toolkit, id, "kitchen", service, action, params);
    let answers = texts.iter().map(|t| ModelReply::text(*t));
    Arc::new(ScriptedModel::new(
        std::iter::once(calls(vec![call])).chain(answers),
    ))
}

fn wifi_off_model(final_text: &str) -> Arc<ScriptedModel> {
    kitchen_call_model(
        "w",
        ("wifi_automation", "disable", json!({})),
        &[final_text],
    )
}

/// Ask `a` to turn off the kitchen Wi-Fi (a high-risk action).
async fn ask_wifi_off(a: &Agent) -> droidwarden_agent::Run {
    a.ask(AskRequest::new("Turn off the kitchen Wi-Fi"))
        .await
        .unwrap()
}

/// An agent whose model turns the kitchen Wi-Fi off, then answers
/// `final_text`; approvals time out after `timeout_s`. With its phones and
/// model.
async fn wifi_off_agent(
    dir: &std::path::Path,
    final_text: &str,
    timeout_s: f64,
) -> (Agent, Arc<FakeToolHost>, Arc<ScriptedModel>) {
    let host = battery_host();
    let model = wifi_off_model(final_text);
    let a = agent(dir, approval_cfg(timeout_s), model.clone(), host.clone()).await;
    (a, host, model)
}

fn tool_result_of(model: &ScriptedModel, call: &str) -> (bool, String) {
    model
        .requests()
        .last()
        .unwrap()
        .messages
        .iter()
        .find_map(|m| match m {
            Message::Tool {
                call_id,
                content,
                is_error,
                ..
            } if call_id == call => Some((*is_error, content.clone())),
            _ => None,
        })
        .expect("tool result sent to the model")
}

#[tokio::test]
async fn approved_actions_run_once() {
    let dir = tempfile::tempdir().unwrap();
    let (a, host, model) = wifi_off_agent(dir.path(), "Wi-Fi is off.", 300.0).await;
    let mut events = all_events(&a);
    let (driving, id) =
        drive_until_approval(ask_wifi_off(&a).await, CancellationToken::new()).await;
    let pending = a.pending_approvals().await.unwrap();
    assert_eq!(pending.len(), 1);
    let p = &pending[0];
    assert_eq!(
        (p.service.as_str(), p.action.as_str(), p.device.as_deref()),
        ("wifi_automation", "disable", Some("kitchen"))
    );
    assert_eq!(p.risk, droidwarden_services::Risk::High);
    assert!(p.expires_at > p.requested_at);
    assert_eq!(host.calls().len(), 0, "nothing runs before approval");
    // Who answered is cleaned of control characters before it is kept.
    a.approve(&id, " D-Bus uid 1000\n\u{1b}[2J").await.unwrap();
    let out = driving.await.unwrap().unwrap();
    assert_eq!(out.text, "Wi-Fi is off.");
    let answered = drain(&mut events)
        .await
        .into_iter()
        .find_map(|e| match e.kind {
            EventKind::ApprovalAnswered {
                approval_id,
                approved,
                by,
                ..
            } => Some((approval_id, approved, by)),
            _ => None,
        });
    assert_eq!(
        answered,
        Some((id.clone(), true, Some("D-Bus uid 1000[2J".to_owned())))
    );
    let history = a.session_markdown(&out.session_id).await.unwrap();
    assert!(
        history.contains(&format!(
            "**Approval** `{id}`: approved by D-Bus uid 1000[2J · "
        )),
        "{history}"
    );
    let answered = a.approval_history(10).await.unwrap();
    assert_eq!(answered.len(), 1, "{answered:?}");
    let last = &answered[0];
    assert_eq!(
        (
            last.request.approval_id.as_str(),
            last.status.as_str(),
            last.decided_by.as_deref()
        ),
        (id.as_str(), "approved", Some("D-Bus uid 1000[2J"))
    );
    assert!(
        last.decided_at
            .is_some_and(|at| at >= last.request.requested_at)
    );
    assert_eq!(host.count("wifi_automation", "disable"), 1);
    assert!(!tool_result_of(&model, "w").0);
    assert!(matches!(
        a.approve(&id, "test").await,
        Err(AgentError::ApprovalClosed { .. })
    ));
    assert!(a.pending_approvals().await.unwrap().is_empty());
}

#[tokio::test]
async fn denied_actions_reach_the_model_as_the_result() {
    let dir = tempfile::tempdir().unwrap();
    let (a, host, model) =
        wifi_off_agent(dir.path(), "I did not turn it off: you declined.", 300.0).await;
    let (driving, id) =
        drive_until_approval(ask_wifi_off(&a).await, CancellationToken::new()).await;
    a.deny(&id, "not during the video call", "MQTT")
        .await
        .unwrap();
    let out = driving.await.unwrap().unwrap();
    assert_eq!(out.stop_reason, StopReason::FinalAnswer);
    let history = a.session_markdown(&out.session_id).await.unwrap();
    let line = history
        .lines()
        .find(|l| l.starts_with(&format!("**Approval** `{id}`")))
        .unwrap_or_else(|| panic!("no approval line in {history}"));
    assert!(
        line.starts_with(&format!("**Approval** `{id}`: denied by MQTT · "))
            && line.ends_with(" — not during the video call"),
        "{line}"
    );
    assert_eq!(host.calls().len(), 0);
    let (is_error, content) = tool_result_of(&model, "w");
    assert!(
        is_error && content.contains("denied") && content.contains("video call"),
        "{content}"
    );
}

#[tokio::test(start_paused = true)]
async fn unanswered_approvals_expire_as_denials() {
    let dir = tempfile::tempdir().unwrap();
    let (a, host, model) = wifi_off_agent(dir.path(), "The request expired.", 120.0).await;
    let run = ask_wifi_off(&a).await;
    let before = tokio::time::Instant::now();
    let out = run.drive(CancellationToken::new()).await.unwrap();
    let waited = before.elapsed();
    assert!(
        waited >= Duration::from_secs(119),
        "waited for the expiry: {waited:?}"
    );
    assert_eq!(out.text, "The request expired.");
    assert_eq!(host.calls().len(), 0);
    let (is_error, content) = tool_result_of(&model, "w");
    assert!(is_error && content.contains("expired"), "{content}");
    assert!(a.pending_approvals().await.unwrap().is_empty());
}

#[test]
fn a_run_interrupted_while_waiting_for_approval_resumes_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_owned();

    // First process: the run asks for approval, then the process dies.
    let rt = process();
    let (run_id, approval_id, first_host) = rt.block_on(async {
        let (a, host, _) = wifi_off_agent(&path, "unused", 3600.0).await;
        let run = ask_wifi_off(&a).await;
        let run_id = run.run_id().to_owned();
        // Driven and never awaited: dropped with the runtime, like a kill.
        let (_driving, id) = drive_until_approval(run, CancellationToken::new()).await;
        (run_id, id, host)
    });
    drop(rt);
    assert_eq!(first_host.calls().len(), 0);

    // Second process: a fresh runtime, store, model and host.
    let rt = process();
    rt.block_on(async {
        let host = battery_host();
        let model = Arc::new(ScriptedModel::texts(["Wi-Fi is off now."]));
        let a = agent(&path, approval_cfg(3600.0), model.clone(), host.clone()).await;
        let interrupted = a.interrupted_runs().await.unwrap();
        assert_eq!(interrupted.len(), 1);
        assert_eq!(interrupted[0].run_id, run_id);
        let pending = a.pending_approvals().await.unwrap();
        assert_eq!(pending[0].approval_id, approval_id);
        let md = a.session_markdown(&pending[0].session).await.unwrap();
        assert!(md.contains("waiting for approval"), "{md}");

        let run = a.resume(&run_id).await.unwrap();
        assert!(matches!(
            a.resume(&run_id).await,
            Err(AgentError::RunBusy(_))
        ));
        let driving = tokio::spawn(run.drive(CancellationToken::new()));
        a.approve(&approval_id, "test").await.unwrap();
        let out = driving.await.unwrap().unwrap();
        assert_eq!(out.text, "Wi-Fi is off now.");
        assert_eq!(
            host.count("wifi_automation", "disable"),
            1,
            "executed exactly once"
        );
        assert_eq!(
            model.requests().len(),
            1,
            "the first model call is not repeated"
        );
        assert!(!tool_result_of(&model, "w").0);
        assert!(a.interrupted_runs().await.unwrap().is_empty());
    });
    drop(rt);

    // Third process: nothing left to do, nothing runs again.
    let rt = process();
    rt.block_on(async {
        let host = battery_host();
        let a = agent(
            &path,
            approval_cfg(3600.0),
            Arc::new(ScriptedModel::new([])),
            host.clone(),
        )
        .await;
        assert!(a.interrupted_runs().await.unwrap().is_empty());
        assert!(matches!(
            a.resume(&run_id).await,
            Err(AgentError::UnknownRun(_))
        ));
        assert_eq!(host.calls().len(), 0);
    });
}

#[test]
fn an_approval_given_while_the_daemon_is_down_is_honoured_on_resume() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_owned();
    let rt = process();
    let (run_id, approval_id) = rt.block_on(async {
        let (a, _, _) = wifi_off_agent(&path, "unused", 3600.0).await;
        let run = ask_wifi_off(&a).await;
        let run_id = run.run_id().to_owned();
        let token = CancellationToken::new();
        let (driving, id) = drive_until_approval(run, token.clone()).await;
        // A clean shutdown this time.
        token.cancel();
        assert!(matches!(
            driving.await.unwrap(),
            Err(AgentError::Interrupted { .. })
        ));
        (run_id, id)
    });
    drop(rt);
    let rt = process();
    rt.block_on(async {
        let host = battery_host();
        let model = Arc::new(ScriptedModel::texts(["Done."]));
        let a = agent(&path, approval_cfg(3600.0), model, host.clone()).await;
        // The CLI answers before the run is resumed.
        a.approve(&approval_id, "test").await.unwrap();
        let out = resume_to_end(&a, &run_id).await;
        assert_eq!(out.text, "Done.");
        assert_eq!(host.count("wifi_automation", "disable"), 1);
    });
}

// ---------------------------------------------------------------------------
// Sessions and memory

#[tokio::test]
async fn memory_retrieves_an_early_fact_beyond_the_window() {
    let dir = tempfile::tempdir().unwrap();
    let model = Arc::new(ScriptedModel::texts([
        "Noted: the garage door code is 4711.",
        "Music is at 40 %.",
        "It is sunny.",
        "Bedroom battery is at 42 %.",
        "Screen brightness is 128.",
        "The garage door code is 4711.",
    ]));
    let cfg = AgentConfig {
        memory_turns: 2,
        memory_recall: 2,
        ..AgentConfig::default()
    };
    let a = agent(dir.path(), cfg, model.clone(), battery_host()).await;
    let prompts = [
        "Please remember that the garage door code is 4711.",
        "What volume is the music at?",
        "How is the weather?",
        "Bedroom battery level?",
        "How bright is the screen?",
        "What is the code for the garage door?",
    ];
    for p in prompts {
        a.ask(AskRequest::new(p).in_session("house"))
            .await
            .unwrap()
            .drive(CancellationToken::new())
            .await
            .unwrap();
    }
    let reqs = model.requests();
    let last = reqs.last().unwrap();
    // The window holds the last two turns only …
    let window: Vec<&str> = last
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::User { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(window, [prompts[3], prompts[4], prompts[5]]);
    // … and the early fact comes back through full-text search.
    assert!(last.system.contains("4711"), "{}", last.system);
    assert!(
        !reqs[1].system.contains("4711"),
        "not recalled while still in the window"
    );

    let sessions = a.sessions().await.unwrap();
    assert_eq!(sessions.len(), 1);
    assert_eq!((sessions[0].id.as_str(), sessions[0].turns), ("house", 6));
    let md = a.session_markdown("house").await.unwrap();
    assert!(md.starts_with("# Session house"), "{md}");
    assert_eq!(md.matches("## Turn ").count(), 6);
    assert!(md.contains("**User** · 20") && md.contains("4711"), "{md}");
    assert!(matches!(
        a.session_markdown("nope").await,
        Err(AgentError::UnknownSession(_))
    ));
}

#[tokio::test]
async fn markdown_shows_tool_calls_and_results() {
    let dir = tempfile::tempdir().unwrap();
    let model = kitchen_call_model("c1", ("battery", "status", json!({})), &["81 %"]);
    let a = agent(dir.path(), AgentConfig::default(), model, battery_host()).await;
    let out = answer(&a, "Kitchen battery?").await;
    let md = a.session_markdown(&out.session_id).await.unwrap();
    assert_contains_all(
        "the session's markdown",
        &md,
        &[
            "**Tool call** `android_device` (`c1`)",
            "\"service_id\": \"battery\"",
            "**Tool result** `android_device`",
            "\"level_percent\": 81",
            "**Assistant** ·",
            "81 %",
        ],
    );
}

#[tokio::test]
async fn bad_requests_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let a = agent(
        dir.path(),
        AgentConfig::default(),
        Arc::new(ScriptedModel::new([])),
        battery_host(),
    )
    .await;
    assert!(matches!(
        a.ask(AskRequest::new("  ")).await,
        Err(AgentError::InvalidPrompt(_))
    ));
    assert!(matches!(
        a.ask(AskRequest::new("x").in_session("a/b")).await,
        Err(AgentError::InvalidId(_))
    ));
    assert!(matches!(
        a.approve("nope", "test").await,
        Err(AgentError::UnknownApproval(_))
    ));
}

// Limits (issue #10): `max_concurrent_runs` and `max_queued`.

/// A model that holds every request until the test lets one through, and
/// counts how many wait at once.
#[derive(Debug)]
struct GatedModel {
    gate: tokio::sync::Semaphore,
    in_flight: std::sync::atomic::AtomicUsize,
    max_in_flight: std::sync::atomic::AtomicUsize,
    /// The last user message of each request, in arrival order.
    prompts: std::sync::Mutex<Vec<String>>,
}

impl Default for GatedModel {
    fn default() -> Self {
        Self {
            gate: tokio::sync::Semaphore::new(0),
            in_flight: Default::default(),
            max_in_flight: Default::default(),
            prompts: Default::default(),
        }
    }
}

impl GatedModel {
    fn in_flight(&self) -> usize {
        self.in_flight.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn max_in_flight(&self) -> usize {
        self.max_in_flight.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn prompts(&self) -> Vec<String> {
        self.prompts.lock().unwrap().clone()
    }
}

impl Provider for GatedModel {
    fn name(&self) -> &'static str {
        "gated"
    }

    fn complete<'a>(
        &'a self,
        request: &'a droidwarden_agent::ChatRequest,
        _on_text: &'a (dyn Fn(&str) + Send + Sync),
    ) -> droidwarden_agent::provider::ReplyFuture<'a> {
        use std::sync::atomic::Ordering::SeqCst;
        Box::pin(async move {
            let prompt = request
                .messages
                .iter()
                .rev()
                .find_map(|m| match m {
                    Message::User { text } => Some(text.clone()),
                    _ => None,
                })
                .unwrap_or_default();
            self.prompts.lock().unwrap().push(prompt.clone());
            let now = self.in_flight.fetch_add(1, SeqCst) + 1;
            self.max_in_flight.fetch_max(now, SeqCst);
            let permit = self.gate.acquire().await;
            permit.expect("gate open").forget();
            self.in_flight.fetch_sub(1, SeqCst);
            Ok(ModelReply::text(format!("done: {prompt}")))
        })
    }
}

async fn until(what: &str, mut check: impl FnMut() -> bool) {
    tokio::time::timeout(Duration::from_secs(10), async {
        while !check() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("timed out waiting for {what}"));
}

#[tokio::test]
async fn asks_beyond_running_and_queued_are_busy_and_queued_runs_start_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let model = Arc::new(GatedModel::default());
    let cfg = AgentConfig {
        max_concurrent_runs: 2,
        max_queued: 2,
        ..AgentConfig::default()
    };
    let a = agent(
        dir.path(),
        cfg,
        model.clone(),
        Arc::new(FakeToolHost::one_phone()),
    )
    .await;
    let mut runs = Vec::new();
    for i in 0..4 {
        runs.push(a.ask(AskRequest::new(format!("ask {i}"))).await.unwrap());
    }
    let busy = a.ask(AskRequest::new("one too many")).await.unwrap_err();
    let wire = busy.to_wire();
    assert_eq!(wire.code, ErrorCode::Busy, "{wire:?}");
    assert!(wire.retryable);
    assert!(wire.message.contains("max_concurrent_runs = 2"), "{wire:?}");
    assert_eq!(
        a.sessions().await.unwrap().len(),
        4,
        "nothing stored for it"
    );
    let drives: Vec<_> = runs
        .into_iter()
        .map(|run| tokio::spawn(run.drive(CancellationToken::new())))
        .collect();
    until("two model calls", || model.in_flight() == 2).await;
    assert_eq!(a.load(), (2, 2));
    // Let them through one at a time: the waiting ones start in order.
    for done in 1..=4 {
        model.gate.add_permits(1);
        until("the next run", || {
            model.prompts().len() == (done + 2).min(4) && model.in_flight() == 2.min(4 - done)
        })
        .await;
    }
    for drive in drives {
        assert_eq!(
            drive.await.unwrap().unwrap().stop_reason,
            StopReason::FinalAnswer
        );
    }
    assert_eq!(model.max_in_flight(), 2);
    assert_eq!(model.prompts(), ["ask 0", "ask 1", "ask 2", "ask 3"]);
    assert_eq!(a.load(), (0, 0));
    // Room again.
    let run = a.ask(AskRequest::new("later")).await.unwrap();
    model.gate.add_permits(1);
    run.drive(CancellationToken::new()).await.unwrap();
}

#[tokio::test]
async fn a_run_waiting_for_approval_holds_no_slot() {
    let dir = tempfile::tempdir().unwrap();
    let model = kitchen_call_model(
        "w",
        ("wifi_automation", "disable", json!({})),
        &["Meanwhile: hello.", "Wi-Fi is off."],
    );
    let cfg = AgentConfig {
        max_concurrent_runs: 1,
        max_queued: 0,
        ..approval_cfg(60.0)
    };
    let host = battery_host();
    let a = agent(dir.path(), cfg, model.clone(), host.clone()).await;
    let (wifi, approval) =
        drive_until_approval(ask_wifi_off(&a).await, CancellationToken::new()).await;
    until("the slot to be given back", || a.load() == (0, 0)).await;
    // The one slot is free: another ask runs to its end meanwhile.
    let other = a.ask(AskRequest::new("say hello")).await.unwrap();
    let out = other.drive(CancellationToken::new()).await.unwrap();
    assert_eq!(out.text, "Meanwhile: hello.");
    a.approve(&approval, "test").await.unwrap();
    let out = wifi.await.unwrap().unwrap();
    assert_eq!(out.text, "Wi-Fi is off.");
    assert_eq!(host.count("wifi_automation", "disable"), 1);
}

#[tokio::test]
async fn resumed_runs_are_never_refused_but_count_against_the_limits() {
    let dir = tempfile::tempdir().unwrap();
    let model = Arc::new(ScriptedModel::texts(["resumed answer", "fresh answer"]));
    let cfg = AgentConfig {
        max_concurrent_runs: 1,
        max_queued: 0,
        ..AgentConfig::default()
    };
    let a = agent(dir.path(), cfg, model, battery_host()).await;
    // A run stored but never driven: what a killed daemon leaves behind.
    let stored = a.ask(AskRequest::new("left unfinished")).await.unwrap();
    let run_id = stored.run_id().to_owned();
    drop(stored);
    assert_eq!(a.interrupted_runs().await.unwrap().len(), 1);
    // Resumed beyond nothing: admitted although the bound is 1 + 0 ...
    let resumed = a.resume(&run_id).await.unwrap();
    // ... and it holds the only place, so a fresh ask is busy meanwhile.
    let busy = a.ask(AskRequest::new("now")).await.unwrap_err();
    assert_eq!(busy.to_wire().code, ErrorCode::Busy);
    let out = resumed.drive(CancellationToken::new()).await.unwrap();
    assert_eq!(out.text, "resumed answer");
    let fresh = a.ask(AskRequest::new("now")).await.unwrap();
    let out = fresh.drive(CancellationToken::new()).await.unwrap();
    assert_eq!(out.text, "fresh answer");
}

/// A phone that queues calls answers by itself within its own bound, which
/// may exceed the agent's tool timeout: the agent waits for that answer, so
/// the model hears `device_offline` (the change was never sent) instead of
/// the agent's own `timeout` (which would mean "may have run").
#[tokio::test]
async fn the_agent_waits_for_the_phones_own_answer_within_its_call_limit() {
    let dir = tempfile::tempdir().unwrap();
    let host = Arc::new(
        FakeToolHost::two_phones()
            .with_delay(Duration::from_millis(600))
            .with_call_limit(Duration::from_secs(1))
            .with_handler(|_| {
                Err(WireError::new(
                    ErrorCode::DeviceOffline,
                    "the companion app stayed offline; the request was not sent (it did not run)",
                ))
            }),
    );
    let model = kitchen_call_model(
        "b",
        ("screen_control", "set_brightness", json!({"level": 10})),
        &["The kitchen phone is offline."],
    );
    let cfg = AgentConfig::try_from(RawAgentConfig {
        tool_timeout_s: Some(0.2),
        tool_retries: Some(0),
        ..RawAgentConfig::default()
    })
    .unwrap();
    let a = agent(dir.path(), cfg, model.clone(), host).await;
    answer(&a, "Dim the kitchen phone").await;
    let (is_error, content) = tool_result_of(&model, "b");
    assert!(is_error);
    assert!(content.contains("device_offline"), "{content}");
    assert!(!content.contains("timeout"), "{content}");
}
