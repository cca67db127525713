//! Answers beyond yes/no (`crate::grant`): approve for the rest of the run
//! (a grant: one run, one device, up to a risk ceiling, revocable) and
//! approve with edited parameters (validated like the model's). The model
//! is the scripted LLM server over HTTP; the phones are the fake host.

use crate::common::{agent, all_events, device_call, next_approval, text_step};
use droidwarden_agent::config::{
    AgentConfig, LlmConfig, ProviderKind, RawAgentConfig, RawApprovalConfig, RawLlmConfig,
};
use droidwarden_agent::testing::{FakeToolHost, ScriptStep, ScriptedLlm};
use droidwarden_agent::{
    Agent, AgentError, ApprovalDecision, AskRequest, EventKind, ModelReply, Provider, StopReason,
    ToolCall, ToolMode, provider,
};
use droidwarden_services::Risk;
use serde_json::{Map, Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

fn config() -> AgentConfig {
    AgentConfig::try_from(RawAgentConfig {
        tool_mode: Some(ToolMode::Toolkit),
        approval: Some(RawApprovalConfig::default()),
        tool_retries: Some(1),
        ..RawAgentConfig::default()
    })
    .unwrap()
}

fn http_provider(server: &ScriptedLlm) -> Arc<dyn Provider> {
    let kind = ProviderKind::Openai;
    let cfg = LlmConfig::try_from(RawLlmConfig {
        provider: Some(kind),
        base_url: Some(server.base_url(kind)),
        model: Some("scripted-model".into()),
        stream: Some(false),
        max_retries: Some(1),
        ..RawLlmConfig::default()
    })
    .unwrap();
    provider::from_config(&cfg).unwrap()
}

/// One toolkit call `id` of `ui_control.action` on `device`.
fn ui(id: &str, device: &str, action: &str, params: Value) -> ToolCall {
    device_call(ToolMode::Toolkit, id, device, "ui_control", action, params)
}

fn step(call: ToolCall) -> ScriptStep {
    ScriptStep::Reply(ModelReply::with_calls(vec![call]))
}

/// An agent over a scripted server playing `script`, with two phones whose
/// every call takes `delay`.
async fn setup(
    dir: &std::path::Path,
    script: Vec<ScriptStep>,
    delay: Duration,
) -> (Agent, Arc<FakeToolHost>, ScriptedLlm) {
    let server = ScriptedLlm::start(script).await.unwrap();
    let host = Arc::new(FakeToolHost::two_phones().with_delay(delay));
    let a = agent(dir, config(), http_provider(&server), host.clone()).await;
    (a, host, server)
}

fn for_run(up_to: Risk) -> ApprovalDecision {
    ApprovalDecision::ApproveForRun { up_to }
}

#[tokio::test]
async fn approved_for_the_run_asks_once_then_again_above_the_ceiling_and_not_in_another_session() {
    let dir = tempfile::tempdir().unwrap();
    let script = vec![
        step(ui("t1", "kitchen", "tap", json!({"x": 10, "y": 20}))),
        step(ui("t2", "kitchen", "tap", json!({"x": 30, "y": 40}))),
        step(ui("t3", "kitchen", "type_text", json!({"text": "milk"}))),
        // On the other phone: the grant is for the kitchen only.
        step(ui("t4", "bedroom", "tap", json!({"x": 1, "y": 1}))),
        // High risk: above every grant's ceiling.
        step(ui("t5", "kitchen", "power", json!({}))),
        text_step("Done."),
        // The second session.
        step(ui("s1", "kitchen", "tap", json!({"x": 5, "y": 5}))),
        text_step("Tapped."),
    ];
    let (a, host, _server) = setup(dir.path(), script, Duration::ZERO).await;
    let mut events = all_events(&a);
    let run = a
        .ask(AskRequest::new("Add milk to the list"))
        .await
        .unwrap();
    let run_id = run.run_id().to_owned();
    let driving = tokio::spawn(run.drive(CancellationToken::new()));

    let (first, _) = next_approval(&mut events).await;
    assert_eq!(first.call_id, "t1");
    // Above the ceiling a grant is refused, and the request still waits.
    assert!(matches!(
        a.answer(&first.approval_id, for_run(Risk::High), "Alice")
            .await,
        Err(AgentError::InvalidAnswer(_))
    ));
    a.answer(&first.approval_id, for_run(Risk::Medium), "Alice")
        .await
        .unwrap();
    let grants = a.grants().await.unwrap();
    assert_eq!(grants.len(), 1, "{grants:?}");
    let g = &grants[0];
    assert_eq!(
        (
            g.device.as_str(),
            g.up_to,
            g.granted_by.as_str(),
            g.run_id.as_str()
        ),
        ("kitchen", Risk::Medium, "Alice", run_id.as_str())
    );

    let (bedroom, _) = next_approval(&mut events).await;
    assert_eq!(bedroom.call_id, "t4", "t2 and t3 ran under the grant");
    a.approve(&bedroom.approval_id, "Alice").await.unwrap();
    let (power, _) = next_approval(&mut events).await;
    assert_eq!(power.call_id, "t5");
    assert_eq!(power.risk, Risk::High);
    a.approve(&power.approval_id, "Alice").await.unwrap();
    let out = driving.await.unwrap().unwrap();
    assert_eq!(out.stop_reason, StopReason::FinalAnswer);
    assert_eq!(host.count("ui_control", "tap"), 3);
    assert_eq!(host.count("ui_control", "type_text"), 1);
    assert_eq!(host.count("ui_control", "power"), 1);
    // Three requests in all, for t1, t4 and t5.
    let history = a.session_markdown(&out.session_id).await.unwrap();
    assert_eq!(history.matches("**Approval** `").count(), 3, "{history}");
    assert!(
        history.contains(&format!(
            "for the rest of this run: grant `{}`, kitchen actions up to medium",
            g.grant_id
        )),
        "{history}"
    );
    // The grant ended with its run.
    assert!(a.grants().await.unwrap().is_empty());
    assert!(matches!(
        a.revoke_grant(&g.grant_id, "Alice").await,
        Err(AgentError::GrantClosed(_))
    ));

    // Another session: the same tap asks again.
    let run = a.ask(AskRequest::new("Tap it")).await.unwrap();
    assert_ne!(run.session_id(), out.session_id);
    let run_id = run.run_id().to_owned();
    let driving = tokio::spawn(run.drive(CancellationToken::new()));
    let (again, _) = next_approval(&mut events).await;
    assert_eq!(
        (again.call_id.as_str(), again.run_id.as_str()),
        ("s1", run_id.as_str())
    );
    a.approve(&again.approval_id, "Alice").await.unwrap();
    driving.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_revoked_grant_makes_the_next_step_ask_again() {
    let dir = tempfile::tempdir().unwrap();
    let script = vec![
        step(ui("t1", "kitchen", "tap", json!({"x": 10, "y": 20}))),
        step(ui("t2", "kitchen", "tap", json!({"x": 30, "y": 40}))),
        step(ui("t3", "kitchen", "tap", json!({"x": 50, "y": 60}))),
        text_step("Done."),
    ];
    // Every phone call takes a while: long enough to revoke the grant
    // after t2 is planned and before t3 is.
    let (a, host, _server) = setup(dir.path(), script, Duration::from_millis(700)).await;
    let mut events = all_events(&a);
    let run = a.ask(AskRequest::new("Tap three times")).await.unwrap();
    let run_id = run.run_id().to_owned();
    let driving = tokio::spawn(run.drive(CancellationToken::new()));
    let (first, _) = next_approval(&mut events).await;
    a.answer(&first.approval_id, for_run(Risk::Medium), "Alice")
        .await
        .unwrap();
    let grant = a.grants().await.unwrap().pop().expect("a grant");
    // t2 is planned (and runs) under the grant.
    loop {
        let ev = tokio::time::timeout(Duration::from_secs(10), events.recv())
            .await
            .expect("in time")
            .expect("open");
        match ev.kind {
            EventKind::ToolCall { call_id, .. } if call_id == "t2" => break,
            EventKind::ApprovalRequested { approval } => {
                panic!("{} asked under the grant", approval.call_id)
            }
            _ => {}
        }
    }
    let revoked = a.revoke_grant(&grant.grant_id, "Bob").await.unwrap();
    assert_eq!(revoked.revoked_by.as_deref(), Some("Bob"));
    assert!(a.grants().await.unwrap().is_empty());
    let mut seen = Vec::new();
    let third = loop {
        let ev = tokio::time::timeout(Duration::from_secs(10), events.recv())
            .await
            .expect("in time")
            .expect("open");
        match ev.kind {
            EventKind::GrantRevoked { grant_id, by } => seen.push((ev.run_id, grant_id, by)),
            EventKind::ApprovalRequested { approval } => break approval,
            _ => {}
        }
    };
    assert_eq!(seen, [(run_id, grant.grant_id.clone(), "Bob".to_owned())]);
    assert_eq!(third.call_id, "t3");
    a.deny(&third.approval_id, "enough", "Bob").await.unwrap();
    let out = driving.await.unwrap().unwrap();
    assert_eq!(host.count("ui_control", "tap"), 2);
    let history = a.session_markdown(&out.session_id).await.unwrap();
    assert!(history.contains("; revoked by Bob · "), "{history}");
}

fn edits(v: Value) -> ApprovalDecision {
    let Value::Object(params) = v else {
        panic!("an object")
    };
    ApprovalDecision::ApproveWithEdits { params }
}

#[tokio::test]
async fn approved_with_edits_runs_the_edited_value_after_refusing_bad_edits() {
    let dir = tempfile::tempdir().unwrap();
    let script = vec![
        step(ui(
            "t1",
            "kitchen",
            "type_text",
            json!({"text": "helo wrold"}),
        )),
        text_step("Typed."),
    ];
    let (a, host, server) = setup(dir.path(), script, Duration::ZERO).await;
    let mut events = all_events(&a);
    let run = a.ask(AskRequest::new("Type hello world")).await.unwrap();
    let run_id = run.run_id().to_owned();
    let driving = tokio::spawn(run.drive(CancellationToken::new()));
    let (req, _) = next_approval(&mut events).await;
    // Refused, each leaving the request waiting: a value the catalogue
    // refuses (a control character), a parameter the action does not have
    // (an attempt to change what runs), a grant for an action that is not
    // a device's is tested elsewhere.
    for bad in [
        json!({"text": "a\u{0}b"}),
        json!({"text": 7}),
        json!({"action": "power"}),
        json!({"command": "reboot"}),
    ] {
        let got = a
            .answer(&req.approval_id, edits(bad.clone()), "Alice")
            .await;
        assert!(
            matches!(&got, Err(AgentError::InvalidAnswer(_))),
            "{bad}: {got:?}"
        );
    }
    assert_eq!(a.pending_approvals().await.unwrap().len(), 1);
    assert!(host.calls().is_empty());
    a.answer(
        &req.approval_id,
        edits(json!({"text": "hello world; rm -rf / 'quoted'"})),
        "Alice",
    )
    .await
    .unwrap();
    let out = driving.await.unwrap().unwrap();
    assert_eq!(out.text, "Typed.");
    let calls = host.calls();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(
        calls[0].params,
        json!({"text": "hello world; rm -rf / 'quoted'"})
    );
    // The event and the history show both.
    let mut answered = None;
    while let Ok(Some(ev)) = tokio::time::timeout(Duration::from_millis(200), events.recv()).await {
        if let (
            true,
            EventKind::ApprovalAnswered {
                original_params,
                edited_params,
                ..
            },
        ) = (ev.run_id == run_id, ev.kind)
        {
            answered = Some((original_params, edited_params));
        }
    }
    assert_eq!(
        answered,
        Some((
            Some(json!({"text": "helo wrold"})),
            Some(json!({"text": "hello world; rm -rf / 'quoted'"}))
        ))
    );
    let history = a.session_markdown(&out.session_id).await.unwrap();
    assert!(
        history.contains(r#"with edited parameters {"text":"hello world; rm -rf / 'quoted'"} (the model asked for {"text":"helo wrold"})"#),
        "{history}"
    );
    // The model is told what ran: the tool's result, with the edited text.
    let body = server.requests().pop().unwrap().body;
    let result = body["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(result["tool_call_id"], "t1", "{result}");
    let content: Value = serde_json::from_str(result["content"].as_str().unwrap()).unwrap();
    assert_eq!(
        content["parameters"],
        json!({"text": "hello world; rm -rf / 'quoted'"}),
        "{content}"
    );
    assert!(
        content["note"].as_str().unwrap().contains("edited"),
        "{content}"
    );
}

#[tokio::test]
async fn a_grant_or_edits_for_what_they_cannot_cover_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let script = vec![
        step(device_call(
            ToolMode::Toolkit,
            "w",
            "kitchen",
            "wifi_automation",
            "disable",
            json!({}),
        )),
        text_step("Off."),
    ];
    let (a, host, _server) = setup(dir.path(), script, Duration::ZERO).await;
    let mut events = all_events(&a);
    let run = a.ask(AskRequest::new("Wi-Fi off")).await.unwrap();
    let driving = tokio::spawn(run.drive(CancellationToken::new()));
    let (req, _) = next_approval(&mut events).await;
    assert_eq!(req.risk, Risk::High);
    assert!(matches!(
        a.answer(&req.approval_id, for_run(Risk::Critical), "Alice")
            .await,
        Err(AgentError::InvalidAnswer(_))
    ));
    // A medium grant answering a high request approves it once, and covers
    // nothing above medium.
    a.answer(&req.approval_id, for_run(Risk::Medium), "Alice")
        .await
        .unwrap();
    driving.await.unwrap().unwrap();
    assert_eq!(host.count("wifi_automation", "disable"), 1);
    // Answered requests cannot be answered again in any form.
    for d in [
        ApprovalDecision::Approve,
        for_run(Risk::Low),
        ApprovalDecision::ApproveWithEdits { params: Map::new() },
        ApprovalDecision::Deny {
            reason: "late".into(),
        },
    ] {
        assert!(matches!(
            a.answer(&req.approval_id, d, "Alice").await,
            Err(AgentError::ApprovalClosed { .. })
        ));
    }
}

// ---------------------------------------------------------------------------
// Screen actions and the app in front (`[phone_services.ui]`), with the fake
// host playing the daemon's hub: `com.example.app` (medium) is in front
// unless a test brings another app.

/// One model reply with several calls: one tool step.
fn together(calls: Vec<ToolCall>) -> ScriptStep {
    ScriptStep::Reply(ModelReply::with_calls(calls))
}

#[tokio::test]
async fn a_grant_releases_the_other_waiting_calls_of_its_step() {
    let dir = tempfile::tempdir().unwrap();
    let script = vec![
        together(vec![
            ui("t1", "kitchen", "tap", json!({"x": 1, "y": 1})),
            ui("t2", "kitchen", "tap", json!({"x": 2, "y": 2})),
            ui("t3", "kitchen", "type_text", json!({"text": "milk"})),
            // Another phone: the grant is not for it.
            ui("b1", "bedroom", "tap", json!({"x": 3, "y": 3})),
        ]),
        text_step("Done."),
    ];
    let (a, host, _server) = setup(dir.path(), script, Duration::ZERO).await;
    let mut events = all_events(&a);
    let run = a.ask(AskRequest::new("Tap and type")).await.unwrap();
    let driving = tokio::spawn(run.drive(CancellationToken::new()));
    let mut asked = Vec::new();
    while asked.len() < 4 {
        let (req, _) = next_approval(&mut events).await;
        assert_eq!(
            req.app.as_deref(),
            Some(droidwarden_agent::testing::FAKE_APP)
        );
        assert_eq!(req.risk, Risk::Medium);
        asked.push(req);
    }
    asked.sort_by(|x, y| x.call_id.cmp(&y.call_id));
    let ids: Vec<&str> = asked.iter().map(|r| r.call_id.as_str()).collect();
    assert_eq!(ids, ["b1", "t1", "t2", "t3"]);
    // One answer for the run on the kitchen phone: t2 and t3 go with it.
    a.answer(&asked[1].approval_id, for_run(Risk::Medium), "Alice")
        .await
        .unwrap();
    let pending = a.pending_approvals().await.unwrap();
    let still: Vec<&str> = pending.iter().map(|r| r.call_id.as_str()).collect();
    assert_eq!(still, ["b1"], "only the other phone's call still waits");
    a.deny(&asked[0].approval_id, "not the bedroom", "Alice")
        .await
        .unwrap();
    let out = driving.await.unwrap().unwrap();
    assert_eq!(out.stop_reason, StopReason::FinalAnswer);
    let ran: Vec<(Option<String>, String)> = host
        .calls()
        .into_iter()
        .map(|c| (c.device, c.action))
        .collect();
    assert_eq!(ran.len(), 3, "{ran:?}");
    assert!(
        ran.iter().all(|(d, _)| d.as_deref() == Some("kitchen")),
        "{ran:?}"
    );
    let history = a.approval_history(10).await.unwrap();
    let grant = a.session_markdown(&out.session_id).await.unwrap();
    for call in ["t2", "t3"] {
        let o = history
            .iter()
            .find(|o| o.request.call_id == call)
            .expect("answered");
        assert_eq!(o.status, "approved");
        assert!(
            o.decided_by
                .as_deref()
                .is_some_and(|b| b.starts_with("Alice (grant g")),
            "{o:?}"
        );
    }
    assert!(
        grant.contains("(medium risk in com.example.app)"),
        "{grant}"
    );
}

#[tokio::test]
async fn an_allowed_app_runs_without_asking_and_a_telephony_app_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let raw: droidwarden_services::RawPhoneServices =
        serde_json::from_value(json!({"ui": {"allowed_apps": ["com.example.notes"]}})).unwrap();
    let policy = droidwarden_services::PhonePolicy::try_from(raw).unwrap();
    let host = Arc::new(FakeToolHost::two_phones().with_screen_policy(policy));
    host.set_app("kitchen", "com.example.notes");
    let drifted = host.clone();
    let script = vec![
        step(ui("t1", "kitchen", "tap", json!({"x": 1, "y": 1}))),
        // The tap brought the dialer up.
        ScriptStep::Compute(droidwarden_agent::testing::Responder::new(move |_| {
            drifted.set_app("kitchen", "com.google.android.dialer");
            ModelReply::with_calls(vec![ui("t2", "kitchen", "tap", json!({"x": 2, "y": 2}))])
        })),
        step(ui(
            "t3",
            "kitchen",
            "type_text",
            json!({"text": "+1 900 555 0100"}),
        )),
        text_step("Done."),
    ];
    let server = ScriptedLlm::start(script).await.unwrap();
    let a = agent(dir.path(), config(), http_provider(&server), host.clone()).await;
    let run = a.ask(AskRequest::new("Tap")).await.unwrap();
    let out = run.drive(CancellationToken::new()).await.unwrap();
    assert_eq!(out.stop_reason, StopReason::FinalAnswer);
    assert_eq!(host.calls().len(), 1, "only t1 ran");
    assert!(!out.steps[0].is_error, "{:?}", out.steps[0]);
    assert_eq!(out.steps.len(), 3);
    for s in &out.steps[1..] {
        assert!(s.is_error, "{s:?}");
        assert_eq!(s.result["error"]["code"], "disabled", "{s:?}");
    }
    // Nobody was asked: in the allowed app it was free, in the dialer refused.
    assert!(a.approval_history(10).await.unwrap().is_empty());
}

#[tokio::test]
async fn an_app_grant_covers_its_app_on_its_device_for_every_run_until_revoked() {
    let dir = tempfile::tempdir().unwrap();
    let script = vec![
        step(ui("t1", "kitchen", "tap", json!({"x": 1, "y": 1}))),
        text_step("First."),
        step(ui("t2", "kitchen", "tap", json!({"x": 2, "y": 2}))),
        text_step("Second."),
        step(ui("t3", "kitchen", "tap", json!({"x": 3, "y": 3}))),
        text_step("Third."),
        step(ui("t4", "kitchen", "tap", json!({"x": 4, "y": 4}))),
        text_step("Fourth."),
    ];
    let (a, host, _server) = setup(dir.path(), script, Duration::ZERO).await;
    let mut events = all_events(&a);
    let allow = |minutes| ApprovalDecision::AllowApp { minutes };
    let run = a.ask(AskRequest::new("Tap")).await.unwrap();
    let driving = tokio::spawn(run.drive(CancellationToken::new()));
    let (req, _) = next_approval(&mut events).await;
    for bad in [0, droidwarden_agent::grant::MAX_APP_MINUTES + 1] {
        assert!(matches!(
            a.answer(&req.approval_id, allow(bad), "Alice").await,
            Err(AgentError::InvalidAnswer(_))
        ));
    }
    a.answer(&req.approval_id, allow(10), "Alice")
        .await
        .unwrap();
    driving.await.unwrap().unwrap();
    let grants = a.grants().await.unwrap();
    assert_eq!(grants.len(), 1, "{grants:?}");
    let g = &grants[0];
    assert_eq!(
        (g.app.as_deref(), g.device.as_str(), g.up_to),
        (
            Some(droidwarden_agent::testing::FAKE_APP),
            "kitchen",
            Risk::Medium
        )
    );
    assert_eq!(g.expires_at, Some(g.granted_at + 600_000));
    assert!(
        a.app_allowed("kitchen", droidwarden_agent::testing::FAKE_APP)
            .await
            .unwrap()
    );
    assert!(
        !a.app_allowed("bedroom", droidwarden_agent::testing::FAKE_APP)
            .await
            .unwrap()
    );
    // The next run: allowed, nobody asked; the grant outlives the run.
    let run = a.ask(AskRequest::new("Tap again")).await.unwrap();
    let out = run.drive(CancellationToken::new()).await.unwrap();
    assert_eq!(out.text, "Second.");
    assert_eq!(host.count("ui_control", "tap"), 2);
    assert_eq!(a.grants().await.unwrap().len(), 1);
    // Revoked: asked again.
    a.revoke_grant(&g.grant_id, "Bob").await.unwrap();
    assert!(
        !a.app_allowed("kitchen", droidwarden_agent::testing::FAKE_APP)
            .await
            .unwrap()
    );
    let run = a.ask(AskRequest::new("Tap a third time")).await.unwrap();
    let driving = tokio::spawn(run.drive(CancellationToken::new()));
    let (again, _) = next_approval(&mut events).await;
    assert_eq!(again.call_id, "t3");
    a.deny(&again.approval_id, "no", "Bob").await.unwrap();
    driving.await.unwrap().unwrap();
    assert_eq!(host.count("ui_control", "tap"), 2);
    // A high app is never allowed by a grant: its actions stay one by one.
    host.set_app("kitchen", "com.android.settings");
    let run = a.ask(AskRequest::new("Tap in settings")).await.unwrap();
    let driving = tokio::spawn(run.drive(CancellationToken::new()));
    let (high, _) = next_approval(&mut events).await;
    assert_eq!((high.call_id.as_str(), high.risk), ("t4", Risk::High));
    assert_eq!(high.app.as_deref(), Some("com.android.settings"));
    assert!(matches!(
        a.answer(&high.approval_id, allow(10), "Bob").await,
        Err(AgentError::InvalidAnswer(_))
    ));
    a.approve(&high.approval_id, "Bob").await.unwrap();
    driving.await.unwrap().unwrap();
    assert_eq!(host.count("ui_control", "tap"), 3);
}
