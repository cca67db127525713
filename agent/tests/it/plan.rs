//! Plan-and-execute mode end to end in the agent crate: a scripted model
//! over real HTTP (OpenAI wire format), the fake tool host, a real SQLite
//! store.

use crate::common::{
    agent, battery_phones, drive_until_approval, process, resume_to_end, run_events, text_step,
};
use droidwarden_agent::config::{
    AgentConfig, LlmConfig, ProviderKind, RawAgentConfig, RawApprovalConfig, RawLlmConfig,
};
use droidwarden_agent::testing::{FakeToolHost, RecordedRequest, ScriptStep, ScriptedLlm};
use droidwarden_agent::{
    Agent, AskRequest, EventKind, ModelReply, Provider, RunMode, StopReason, ToolCall, provider,
};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

fn config(extra: RawAgentConfig) -> AgentConfig {
    AgentConfig::try_from(RawAgentConfig {
        tool_retries: Some(0),
        approval: Some(RawApprovalConfig {
            timeout_s: Some(3600.0),
            ..RawApprovalConfig::default()
        }),
        ..extra
    })
    .unwrap()
}

fn http(server: &ScriptedLlm) -> Arc<dyn Provider> {
    let cfg = LlmConfig::try_from(RawLlmConfig {
        provider: Some(ProviderKind::Openai),
        base_url: Some(server.base_url(ProviderKind::Openai)),
        model: Some("scripted".into()),
        max_retries: Some(0),
        ..RawLlmConfig::default()
    })
    .unwrap();
    provider::from_config(&cfg).unwrap()
}

fn host() -> Arc<FakeToolHost> {
    battery_phones(json!({"level_percent": 77}), json!({"level_percent": 42}))
}

/// An agent in `dir` with the default settings over `server`, and its
/// phones.
async fn default_agent(dir: &std::path::Path, server: &ScriptedLlm) -> (Agent, Arc<FakeToolHost>) {
    let h = host();
    let a = agent(
        dir,
        config(RawAgentConfig::default()),
        http(server),
        h.clone(),
    )
    .await;
    (a, h)
}

fn json_text(v: Value) -> ScriptStep {
    text_step(&v.to_string())
}

fn dev(id: &str, device: &str, service: &str, action: &str, params: Value) -> ScriptStep {
    ScriptStep::Reply(ModelReply {
        tool_calls: vec![ToolCall {
            id: id.into(),
            name: "android_device".into(),
            arguments: json!({"device": device, "service_id": service, "action": action, "parameters": params})
                .to_string(),
            signature: None,
        }],
        ..ModelReply::default()
    })
}

fn has_tools(r: &RecordedRequest) -> bool {
    r.body["tools"].as_array().is_some_and(|t| !t.is_empty())
}

fn tool_messages(r: &RecordedRequest) -> usize {
    r.body["messages"]
        .as_array()
        .map(|m| m.iter().filter(|m| m["role"] == "tool").count())
        .unwrap_or(0)
}

fn plan_ask(prompt: &str) -> AskRequest {
    AskRequest::new(prompt).with_mode(RunMode::Plan)
}

#[tokio::test]
async fn three_steps_across_two_phones_with_one_replan() {
    let server = ScriptedLlm::start([
        // Planner.
        json_text(json!({"steps": ["read the kitchen battery", "read the bedroom battery", "set the bedroom music to 20 %"]})),
        // Step 1.
        dev("a", "kitchen", "battery", "status", json!({})),
        text_step("kitchen at 77 %"),
        // Refinery: the bedroom is low, mute it instead.
        json_text(json!({"decision": "replan", "steps": ["read the bedroom battery", "mute the bedroom music"]})),
        // Step 2.
        dev("b", "bedroom", "battery", "status", json!({})),
        text_step("bedroom at 42 %"),
        json_text(json!({"decision": "continue"})),
        // Step 3.
        dev("c", "bedroom", "audio_automation", "set_volume", json!({"stream": "music", "level": 0})),
        text_step("bedroom music at 0 %"),
        json_text(json!({"decision": "continue"})),
        // Synthesizer.
        text_step("Kitchen 77 %, bedroom 42 %; bedroom music silenced."),
    ])
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (a, h) = default_agent(dir.path(), &server).await;
    let rx = a.subscribe();
    let run = a
        .ask(plan_ask("Check both batteries and quiet the bedroom"))
        .await
        .unwrap();
    let id = run.run_id().to_owned();
    let session = run.session_id().to_owned();
    let out = run.drive(CancellationToken::new()).await.unwrap();
    assert_eq!(
        out.text,
        "Kitchen 77 %, bedroom 42 %; bedroom music silenced."
    );
    assert_eq!(out.stop_reason, StopReason::FinalAnswer);

    let calls: Vec<(String, String, Option<String>)> = h
        .calls()
        .into_iter()
        .map(|c| (c.service, c.action, c.device))
        .collect();
    assert_eq!(
        calls,
        vec![
            ("battery".into(), "status".into(), Some("kitchen".into())),
            ("battery".into(), "status".into(), Some("bedroom".into())),
            (
                "audio_automation".into(),
                "set_volume".into(),
                Some("bedroom".into())
            ),
        ]
    );

    let reqs = server.requests();
    assert_eq!(reqs.len(), 11, "every model call is one of the script's");
    // Planner, refinery and synthesizer get no tools; executors do.
    let tools: Vec<bool> = reqs.iter().map(has_tools).collect();
    assert_eq!(
        tools,
        vec![
            false, true, true, false, true, true, false, true, true, false, false
        ]
    );
    // Each executor sees only its own step's tool messages.
    assert_eq!(tool_messages(&reqs[4]), 0);
    assert_eq!(tool_messages(&reqs[5]), 1);
    // The executor of step 2 sees the plan and step 1's finding.
    let step2 = reqs[4].body["messages"].to_string();
    assert!(
        step2.contains("kitchen at 77 %") && step2.contains("Do step"),
        "{step2}"
    );
    // The synthesizer sees every finding.
    let synth = reqs[10].body["messages"].to_string();
    for f in ["kitchen at 77 %", "bedroom at 42 %", "bedroom music at 0 %"] {
        assert!(synth.contains(f), "{synth}");
    }

    let events = run_events(rx, id.clone()).await;
    let plans: Vec<(usize, bool)> = events
        .iter()
        .filter_map(|e| match e {
            EventKind::Plan { steps, replan } => Some((steps.len(), *replan)),
            _ => None,
        })
        .collect();
    assert_eq!(plans, vec![(3, false), (3, true)]);
    let started = events
        .iter()
        .filter(|e| matches!(e, EventKind::StepStarted { .. }))
        .count();
    let finished: Vec<bool> = events
        .iter()
        .filter_map(|e| match e {
            EventKind::StepFinished { complete, .. } => Some(*complete),
            _ => None,
        })
        .collect();
    assert_eq!(started, 3);
    assert_eq!(finished, vec![true, true, true]);
    // The plan is in the session's record.
    let md = a.session_markdown(&session).await.unwrap();
    assert!(md.contains("mute the bedroom music"), "{md}");
}

#[tokio::test]
async fn a_bad_plan_is_asked_again_once_then_the_run_fails_cleanly() {
    let huge = json!({"steps": vec!["do it"; 10_000]});
    let server = ScriptedLlm::start([json_text(huge), text_step("no plan, sorry")])
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (a, h) = default_agent(dir.path(), &server).await;
    let out = a
        .ask(plan_ask("do everything"))
        .await
        .unwrap()
        .drive(CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.stop_reason, StopReason::Error);
    let err = out.error.expect("error");
    assert!(err.message.contains("valid plan"), "{}", err.message);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    // The second ask says what was wrong with the first plan.
    assert!(
        reqs[1].body["messages"]
            .to_string()
            .contains("10000 steps; at most 8"),
        "{}",
        reqs[1].body["messages"]
    );
    assert!(h.calls().is_empty());
}

#[tokio::test]
async fn executor_steps_and_model_calls_are_bounded() {
    // A model that always asks for the battery: each executor stops at its
    // limit, and the run stops at the cap on model calls.
    let server = ScriptedLlm::start([json_text(json!({"steps": ["a", "b", "c"]}))])
        .await
        .unwrap();
    server.set_fallback(dev("x", "kitchen", "battery", "status", json!({})));
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(RawAgentConfig {
        max_executor_steps: Some(2),
        max_model_calls: Some(6),
        ..RawAgentConfig::default()
    });
    let a = agent(dir.path(), cfg, http(&server), host()).await;
    let out = tokio::time::timeout(
        Duration::from_secs(20),
        a.ask(plan_ask("loop"))
            .await
            .unwrap()
            .drive(CancellationToken::new()),
    )
    .await
    .expect("ends")
    .unwrap();
    assert_eq!(out.stop_reason, StopReason::MaxIterations);
    assert!(
        out.text.contains("Stopped after 6 model calls"),
        "{}",
        out.text
    );
    assert_eq!(server.requests().len(), 6);
}

/// A plan run stopped mid-plan (waiting for an approval in step 2) goes on
/// after a restart from its checkpoint: step 1 is not run again.
#[test]
fn a_plan_survives_a_restart_mid_plan() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_owned();
    let first_host = host();
    let rt = process();
    let run_id = rt.block_on(async {
        let server = ScriptedLlm::start([
            json_text(json!({"steps": ["read the kitchen battery", "turn the kitchen Wi-Fi off"]})),
            dev("a", "kitchen", "battery", "status", json!({})),
            text_step("kitchen at 77 %"),
            json_text(json!({"decision": "continue"})),
            dev("w", "kitchen", "wifi_automation", "disable", json!({})),
        ])
        .await
        .unwrap();
        let a = agent(
            &path,
            config(RawAgentConfig::default()),
            http(&server),
            first_host.clone(),
        )
        .await;
        let run = a.ask(plan_ask("battery, then Wi-Fi off")).await.unwrap();
        let id = run.run_id().to_owned();
        let (_driving, _) = drive_until_approval(run, CancellationToken::new()).await;
        id
    });
    drop(rt);
    assert_eq!(first_host.count("battery", "status"), 1);

    let rt = process();
    rt.block_on(async {
        let server = ScriptedLlm::start([
            text_step("Wi-Fi off"),
            json_text(json!({"decision": "finish"})),
            text_step("Kitchen at 77 %, Wi-Fi off."),
        ])
        .await
        .unwrap();
        let (a, h) = default_agent(&path, &server).await;
        let approval = a.pending_approvals().await.unwrap().remove(0);
        a.approve(&approval.approval_id, "test").await.unwrap();
        let out = resume_to_end(&a, &run_id).await;
        assert_eq!(out.text, "Kitchen at 77 %, Wi-Fi off.");
        assert_eq!(h.count("battery", "status"), 0, "step 1 is not run again");
        assert_eq!(h.count("wifi_automation", "disable"), 1);
        // The synthesizer still has step 1's finding from before the restart.
        let synth = server.requests()[2].body["messages"].to_string();
        assert!(synth.contains("kitchen at 77 %"), "{synth}");
    });
}
