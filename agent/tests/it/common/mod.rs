//! Helpers shared by the agent crate's end-to-end tests of child runs
//! (skills, delegation): tool calls for the scripted model, and reading
//! the recorded requests and the event stream.

// reason: each test file uses its own subset of these helpers.
#![allow(dead_code)]

use droidwarden_agent::config::{
    AgentConfig, LlmConfig, ProviderKind, RawAgentConfig, RawApprovalConfig, RawLlmConfig,
};
use droidwarden_agent::delegation::{RawDelegateConfig, validate};
use droidwarden_agent::testing::{FakeToolHost, ScriptStep, ScriptedLlm};
use droidwarden_agent::{
    Agent, AgentEvent, AskRequest, Durability, EventKind, ModelReply, PendingApproval, Provider,
    RunOutcome, StopReason, Store, ToolCall, ToolMode, provider,
};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// `[llm]` for the scripted model (OpenAI wire format, streamed, no
/// retries).
pub(crate) fn scripted_llm(server: &ScriptedLlm) -> LlmConfig {
    LlmConfig::try_from(RawLlmConfig {
        provider: Some(ProviderKind::Openai),
        base_url: Some(server.base_url(ProviderKind::Openai)),
        model: Some("scripted".into()),
        stream: Some(true),
        max_retries: Some(0),
        ..RawLlmConfig::default()
    })
    .unwrap()
}

/// An agent configuration for delegation tests: `agents`, no tool
/// retries, 4 iterations, actions up to low risk approved, at most
/// `max_background` background tasks (`None`: the default).
pub(crate) fn delegating_config(
    agents: Vec<RawDelegateConfig>,
    max_background: Option<usize>,
) -> AgentConfig {
    let mut cfg = AgentConfig::try_from(RawAgentConfig {
        tool_retries: Some(0),
        max_iterations: Some(4),
        max_background_tasks: max_background,
        approval: Some(RawApprovalConfig {
            auto_approve_up_to: Some(serde_json::from_value(json!("low")).unwrap()),
            timeout_s: Some(3600.0),
            ..RawApprovalConfig::default()
        }),
        ..RawAgentConfig::default()
    })
    .unwrap();
    cfg.agents = validate(agents).unwrap();
    cfg
}

/// The provider for the scripted model.
pub(crate) fn http(server: &ScriptedLlm) -> Arc<dyn Provider> {
    provider::from_config(&scripted_llm(server)).unwrap()
}

/// Two fake phones: the battery reads 77 %, anything else succeeds.
pub(crate) fn host() -> Arc<FakeToolHost> {
    Arc::new(
        FakeToolHost::two_phones().with_handler(|c| match c.service.as_str() {
            "battery" => Ok(json!({"level_percent": 77, "charging": false})),
            _ => Ok(json!({"ok": true})),
        }),
    )
}

/// Two fake phones whose batteries read `kitchen` and `bedroom`; anything
/// else succeeds.
pub(crate) fn battery_phones(kitchen: Value, bedroom: Value) -> Arc<FakeToolHost> {
    Arc::new(FakeToolHost::two_phones().with_handler(move |c| {
        match (c.service.as_str(), c.device.as_deref()) {
            ("battery", Some("kitchen")) => Ok(kitchen.clone()),
            ("battery", Some("bedroom")) => Ok(bedroom.clone()),
            _ => Ok(json!({"ok": true})),
        }
    }))
}

/// The event kinds of run `run` up to its final or error event (waiting
/// 10 s at most for each).
pub(crate) async fn run_events(
    mut rx: tokio::sync::broadcast::Receiver<AgentEvent>,
    run: String,
) -> Vec<EventKind> {
    let mut out = Vec::new();
    while let Ok(Ok(ev)) = tokio::time::timeout(Duration::from_secs(10), rx.recv()).await {
        if ev.run_id != run {
            continue;
        }
        let last = matches!(ev.kind, EventKind::Final { .. } | EventKind::Error { .. });
        out.push(ev.kind);
        if last {
            break;
        }
    }
    out
}

/// An agent over a real SQLite store in `dir`.
pub(crate) async fn agent(
    dir: &Path,
    cfg: AgentConfig,
    p: Arc<dyn Provider>,
    h: Arc<FakeToolHost>,
) -> Agent {
    let store = Store::open(dir.join("store"), Durability::Process)
        .await
        .unwrap();
    Agent::new(cfg, p, h, store)
}

pub(crate) fn tc(id: &str, name: &str, args: Value) -> ToolCall {
    ToolCall::new(id, name, args.to_string())
}

pub(crate) fn calls(list: Vec<ToolCall>) -> ModelReply {
    ModelReply::with_calls(list)
}

/// A scripted model step that makes one tool call.
pub(crate) fn call_step(call: ToolCall) -> ScriptStep {
    ScriptStep::Reply(calls(vec![call]))
}

/// A scripted model step that answers `text`.
pub(crate) fn text_step(text: &str) -> ScriptStep {
    ScriptStep::Reply(ModelReply::text(text))
}

/// A toolkit call of `service.action` on `device`, without parameters.
pub(crate) fn dev(id: &str, device: &str, service: &str, action: &str) -> ToolCall {
    device_call(ToolMode::Toolkit, id, device, service, action, json!({}))
}

/// A call of `service.action` on `device` with `params`, in the tool
/// `mode`.
pub(crate) fn device_call(
    mode: ToolMode,
    id: &str,
    device: &str,
    service: &str,
    action: &str,
    params: Value,
) -> ToolCall {
    match mode {
        ToolMode::Toolkit => tc(
            id,
            "android_device",
            json!({"device": device, "service_id": service, "action": action, "parameters": params}),
        ),
        _ => tc(
            id,
            &format!("android_{service}"),
            json!({"device": device, "action": action, "parameters": params}),
        ),
    }
}

/// `text` contains every one of `needles`; `label` names it in a failure.
pub(crate) fn assert_contains_all(label: &str, text: &str, needles: &[&str]) {
    for needle in needles {
        assert!(
            text.contains(needle),
            "{label}: {needle} missing from\n{text}"
        );
    }
}

/// The run answered from the kitchen phone's battery (77 %), and that one
/// read is all that reached the phones.
pub(crate) fn assert_one_battery_read(out: &RunOutcome, h: &FakeToolHost) {
    assert_eq!(out.text, "The kitchen phone is at 77 %.");
    assert_eq!(out.stop_reason, StopReason::FinalAnswer);
    assert_eq!(h.count("battery", "status"), 1);
    assert_eq!(h.count("wifi_automation", "disable"), 0);
    assert_eq!(h.calls().len(), 1);
}

/// The events of child runs (skills, delegated agents) in `evs`: at least
/// one, every one tagged `tag` under the run `parent`, and the last a
/// child run's successful end.
pub(crate) fn child_events<'a>(
    evs: &'a [AgentEvent],
    tag: &str,
    parent: &str,
) -> Vec<&'a AgentEvent> {
    let tagged: Vec<&AgentEvent> = evs.iter().filter(|e| e.skill.is_some()).collect();
    assert!(!tagged.is_empty());
    assert!(
        tagged
            .iter()
            .all(|e| e.skill.as_deref() == Some(tag) && e.parent_run.as_deref() == Some(parent)),
        "{tagged:#?}"
    );
    assert!(matches!(
        tagged.last().map(|e| &e.kind),
        Some(EventKind::SkillFinished {
            is_error: false,
            ..
        })
    ));
    tagged
}

/// Ask `a` `prompt` and drive the run to its end.
pub(crate) async fn answer(a: &Agent, prompt: &str) -> RunOutcome {
    a.ask(AskRequest::new(prompt))
        .await
        .unwrap()
        .drive(CancellationToken::new())
        .await
        .unwrap()
}

/// Resume run `run_id` of `a` and drive it to its end.
pub(crate) async fn resume_to_end(a: &Agent, run_id: &str) -> RunOutcome {
    a.resume(run_id)
        .await
        .unwrap()
        .drive(CancellationToken::new())
        .await
        .unwrap()
}

/// A runtime of its own: one "process" of a test that restarts the agent.
pub(crate) fn process() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A stream of agent events: one run's, or every run's ([`all_events`]).
pub(crate) trait EventSource {
    /// The next event; `None` once the stream has ended.
    async fn next_event(&mut self) -> Option<AgentEvent>;
}

impl EventSource for droidwarden_agent::RunEvents {
    async fn next_event(&mut self) -> Option<AgentEvent> {
        self.recv().await
    }
}

impl EventSource for tokio::sync::mpsc::UnboundedReceiver<AgentEvent> {
    async fn next_event(&mut self) -> Option<AgentEvent> {
        self.recv().await
    }
}

/// The next approval request among `events` (10 s at most for each
/// event), and the skill or agent (`agent:<name>`) whose run asks.
pub(crate) async fn next_approval(
    events: &mut impl EventSource,
) -> (PendingApproval, Option<String>) {
    loop {
        let ev = tokio::time::timeout(Duration::from_secs(10), events.next_event())
            .await
            .expect("approval requested in time")
            .expect("open");
        if let EventKind::ApprovalRequested { approval } = ev.kind {
            return (approval, ev.skill);
        }
    }
}

/// The id of the next approval run `events` asks for (10 s at most for
/// each event).
pub(crate) async fn wait_for_approval(events: &mut droidwarden_agent::RunEvents) -> String {
    next_approval(events).await.0.approval_id
}

/// Drive `run` in a task of its own, stopped by `token`, until it asks
/// for an approval: the task and the approval's id.
pub(crate) async fn drive_until_approval(
    run: droidwarden_agent::Run,
    token: CancellationToken,
) -> (
    tokio::task::JoinHandle<Result<RunOutcome, droidwarden_agent::AgentError>>,
    String,
) {
    let mut events = run.events();
    let driving = tokio::spawn(run.drive(token));
    (driving, wait_for_approval(&mut events).await)
}

pub(crate) fn all_events(a: &Agent) -> tokio::sync::mpsc::UnboundedReceiver<AgentEvent> {
    let mut rx = a.subscribe();
    let (tx, out) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok(ev) = rx.recv().await {
            if tx.send(ev).is_err() {
                return;
            }
        }
    });
    out
}

/// Every event up to and including the first `final` or `error` of a run
/// that is not a skill's.
pub(crate) async fn drain(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<AgentEvent>,
) -> Vec<AgentEvent> {
    let mut out = Vec::new();
    while let Ok(Some(ev)) = tokio::time::timeout(Duration::from_secs(10), rx.recv()).await {
        let last = ev.skill.is_none()
            && matches!(ev.kind, EventKind::Final { .. } | EventKind::Error { .. });
        out.push(ev);
        if last {
            break;
        }
    }
    out
}

/// Call `p` with `req`: the result and the text it streamed.
pub(crate) async fn complete(
    p: &Arc<dyn Provider>,
    req: &droidwarden_agent::provider::ChatRequest,
) -> (Result<ModelReply, droidwarden_agent::AgentError>, String) {
    let streamed = Arc::new(std::sync::Mutex::new(String::new()));
    let s = streamed.clone();
    let sink = move |t: &str| s.lock().unwrap().push_str(t);
    let r = p.complete(req, &sink).await;
    let text = streamed.lock().unwrap().clone();
    (r, text)
}
