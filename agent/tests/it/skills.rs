//! Skills end to end in the agent crate: skills from a temporary
//! directory, a scripted model over real HTTP (OpenAI wire format), the
//! fake tool host's call log as the "phone", and a real SQLite store.

use crate::common::*;
use droidwarden_agent::config::{AgentConfig, RawAgentConfig, RawApprovalConfig};
use droidwarden_agent::skills::SkillSet;
use droidwarden_agent::testing::{FakeToolHost, Responder, ScriptStep, ScriptedLlm};
use droidwarden_agent::{
    Agent, AgentError, AskRequest, EventKind, ModelReply, Provider, StopReason,
};
use droidwarden_services::ErrorCode;
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

fn config(auto_approve_up_to: &str) -> AgentConfig {
    AgentConfig::try_from(RawAgentConfig {
        tool_retries: Some(0),
        approval: Some(RawApprovalConfig {
            auto_approve_up_to: Some(serde_json::from_value(json!(auto_approve_up_to)).unwrap()),
            timeout_s: Some(3600.0),
            ..RawApprovalConfig::default()
        }),
        ..RawAgentConfig::default()
    })
    .unwrap()
}

/// An agent with the skills of `dir/skills`.
async fn skilled_agent(
    dir: &Path,
    cfg: AgentConfig,
    p: Arc<dyn Provider>,
    h: Arc<FakeToolHost>,
) -> Agent {
    let a = agent(dir, cfg, p, h).await;
    a.set_skills(SkillSet::load(&[dir.join("skills")], &["*".into()]));
    a
}

fn write_skill(dir: &Path, name: &str, front: &str, body: &str) {
    let d = dir.join("skills").join(name);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(
        d.join("SKILL.md"),
        format!("---\nname: {name}\n{front}\n---\n{body}\n"),
    )
    .unwrap();
}

#[tokio::test]
async fn a_user_skill_is_listed_read_and_run_with_only_its_allowed_tools() {
    let dir = tempfile::tempdir().unwrap();
    write_skill(
        dir.path(),
        "battery-check",
        "description: Read the kitchen phone's battery.\nallowed-tools: battery.status\nmax_iterations: 4",
        "SECRET-BODY-MARKER: read battery.status on the kitchen phone and report the level.",
    );
    let server = ScriptedLlm::start([
        // The user's run: list, read, then invoke.
        call_step(tc("l", "list_skills", json!({}))),
        call_step(tc("r", "read_skill", json!({"skill": "battery-check"}))),
        call_step(tc(
            "i",
            "invoke_skill",
            json!({"skill": "battery-check", "input": {"device": "kitchen"}}),
        )),
        // The skill's run: an allowed read, then a change it may not make.
        call_step(dev("c1", "kitchen", "battery", "status")),
        call_step(dev("c2", "kitchen", "wifi_automation", "disable")),
        text_step("Kitchen battery at 77 %; Wi-Fi was not mine to touch."),
        // The user's run again.
        text_step("The kitchen phone is at 77 %."),
    ])
    .await
    .unwrap();
    let h = host();
    let a = skilled_agent(dir.path(), config("low"), http(&server), h.clone()).await;
    let mut events = all_events(&a);
    let run = a
        .ask(AskRequest::new("How is the kitchen phone's battery?"))
        .await
        .unwrap();
    let parent = run.run_id().to_owned();
    let out = run.drive(CancellationToken::new()).await.unwrap();
    // Nothing outside allowed-tools reached the phone.
    assert_one_battery_read(&out, &h);

    let reqs = server.requests();
    assert_eq!(reqs.len(), 7);
    // Progressive disclosure: the registry, not the body, in the user's run.
    let sys = reqs[0].system_prompt();
    assert!(sys.contains("## Available skills"), "{sys}");
    assert!(sys.contains("- battery-check: Read the kitchen phone's battery."));
    assert!(sys.contains("- bedtime: "), "built-ins are listed too");
    assert!(!sys.contains("SECRET-BODY-MARKER"));
    assert!(reqs[0].tool_names().contains(&"invoke_skill".to_owned()));
    // list_skills and read_skill answered.
    assert!(reqs[1].last_message().contains("battery-check"));
    assert!(reqs[2].last_message().contains("SECRET-BODY-MARKER"));
    // The skill's run: its body as the system prompt, only its tools.
    let child_sys = reqs[3].system_prompt();
    assert!(child_sys.contains("SECRET-BODY-MARKER"), "{child_sys}");
    // Its device tool and describe_action (the catalogue's schemas of
    // what it may use).
    assert_eq!(
        reqs[3].tool_names(),
        vec!["android_device".to_owned(), "describe_action".to_owned()]
    );
    let desc = reqs[3].body["tools"][0]["function"]["description"].to_string();
    assert!(
        desc.contains("battery") && !desc.contains("wifi_automation"),
        "{desc}"
    );
    assert!(reqs[3].body["messages"].to_string().contains("kitchen"));
    // The refusal is what the skill's model read.
    let refusal = reqs[5].last_message();
    assert!(
        refusal.contains("permission_denied")
            && refusal.contains("allowed-tools of skill battery-check"),
        "{refusal}"
    );
    // The skill's answer is the user's run's tool result.
    assert!(reqs[6].last_message().contains("Kitchen battery at 77"));

    // Events: the skill's are tagged and in the same session.
    let evs = drain(&mut events).await;
    let tagged = child_events(&evs, "battery-check", &parent);
    assert!(tagged.iter().all(|e| e.session_id == out.session_id));
    assert!(matches!(
        tagged.first().map(|e| &e.kind),
        Some(EventKind::SkillStarted { depth: 1, .. })
    ));
    assert!(matches!(
        tagged.last().map(|e| &e.kind),
        Some(EventKind::SkillFinished {
            is_error: false,
            stop_reason: StopReason::FinalAnswer,
            ..
        })
    ));
    assert!(
        tagged
            .iter()
            .any(|e| matches!(&e.kind, EventKind::ToolResult { is_error: true, .. }))
    );
    // One final event: the user's run's.
    assert_eq!(
        evs.iter()
            .filter(|e| matches!(e.kind, EventKind::Final { .. }))
            .count(),
        1
    );
}

#[tokio::test]
async fn skills_invoking_skills_stop_at_the_depth_limit() {
    let dir = tempfile::tempdir().unwrap();
    write_skill(
        dir.path(),
        "recurse",
        "description: Calls itself.\nallowed-tools: invoke_skill",
        "Invoke the skill recurse again.",
    );
    let server = ScriptedLlm::start([]).await.unwrap();
    // A model that always invokes the skill again, until the tool result it
    // reads says why it cannot; then it answers.
    server.set_fallback(ScriptStep::Compute(Responder::new(|r| {
        let last = r.last_message();
        if last.contains("depth limit") {
            ModelReply::text("depth limit reached")
        } else if last.contains("\"role\":\"tool\"") {
            ModelReply::text("inner skill done")
        } else {
            calls(vec![tc(
                "again",
                "invoke_skill",
                json!({"skill": "recurse"}),
            )])
        }
    })));
    let a = skilled_agent(dir.path(), config("low"), http(&server), host()).await;
    let mut events = all_events(&a);
    let run = a.ask(AskRequest::new("go")).await.unwrap();
    let out = tokio::time::timeout(Duration::from_secs(30), run.drive(CancellationToken::new()))
        .await
        .expect("finishes")
        .unwrap();
    assert_eq!(out.stop_reason, StopReason::FinalAnswer);
    let evs = drain(&mut events).await;
    let depths: Vec<u32> = evs
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::SkillStarted { depth, .. } => Some(depth),
            _ => None,
        })
        .collect();
    assert_eq!(depths, vec![1, 2, 3], "three levels, no fourth");
    let refused = evs.iter().any(|e| {
        matches!(&e.kind, EventKind::ToolResult { is_error: true, content, .. }
            if content.to_string().contains("skill depth limit reached"))
    });
    assert!(refused);
}

#[tokio::test]
async fn a_skill_naming_unknown_tools_fails_at_invocation_with_the_names() {
    let dir = tempfile::tempdir().unwrap();
    write_skill(
        dir.path(),
        "typo",
        "description: Broken tools.\nallowed-tools: battery.status teleport.now",
        "Do it.",
    );
    let server = ScriptedLlm::start([]).await.unwrap();
    let a = skilled_agent(dir.path(), config("low"), http(&server), host()).await;
    // Listed (the skill file itself is valid) …
    assert!(a.skills().get("typo").is_some());
    // … but refused when run, naming the missing tool.
    let err = a
        .run_skill("typo", json!({}), None, None, None)
        .await
        .map(|_| ())
        .unwrap_err();
    let wire = err.to_wire();
    assert_eq!(wire.code, ErrorCode::InvalidRequest);
    assert!(wire.message.contains("teleport.now"), "{}", wire.message);
    assert!(matches!(
        a.run_skill("nope", json!({}), None, None, None).await.map(|_| ()),
        Err(AgentError::Skill(e)) if e.code == ErrorCode::NotFound
    ));
    assert!(matches!(
        a.run_skill("typo", json!([1]), None, None, None).await.map(|_| ()),
        Err(AgentError::Skill(e)) if e.code == ErrorCode::InvalidParams
    ));
    assert!(server.requests().is_empty());
}

/// A high-risk skill asks once before it starts; the request survives the
/// process dying; once approved, its high-risk tool runs under the grant.
#[test]
fn a_high_risk_skill_waits_for_approval_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_owned();
    write_skill(
        &path,
        "radio-silence",
        "description: Turn the kitchen Wi-Fi off.\nallowed-tools: wifi_automation.disable\nrisk: high",
        "Turn Wi-Fi off on the kitchen phone.",
    );
    let first_host = host();
    let rt = process();
    let (run_id, approval_id) = rt.block_on(async {
        let server = ScriptedLlm::start([]).await.unwrap();
        let a = skilled_agent(&path, config("low"), http(&server), first_host.clone()).await;
        let run = a
            .run_skill(
                "radio-silence",
                json!({"device": "kitchen"}),
                None,
                None,
                None,
            )
            .await
            .unwrap();
        let run_id = run.run_id().to_owned();
        let mut events = run.events();
        tokio::spawn(run.drive(CancellationToken::new()));
        let (approval, _) = next_approval(&mut events).await;
        assert_eq!(approval.service, "skill");
        assert_eq!(approval.action, "radio-silence");
        assert_eq!(approval.params, json!({"device": "kitchen"}));
        assert!(
            server.requests().is_empty(),
            "nothing runs before the approval"
        );
        (run_id, approval.approval_id)
    });
    drop(rt); // the process dies
    assert!(first_host.calls().is_empty());

    let rt = process();
    rt.block_on(async {
        let server = ScriptedLlm::start([
            call_step(dev("w", "kitchen", "wifi_automation", "disable")),
            text_step("Kitchen Wi-Fi is off."),
        ])
        .await
        .unwrap();
        let h = host();
        let a = skilled_agent(&path, config("low"), http(&server), h.clone()).await;
        let pending = a.pending_approvals().await.unwrap();
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].approval_id, approval_id);
        a.approve(&approval_id, "test").await.unwrap();
        let run = a.resume(&run_id).await.unwrap();
        let mut events = all_events(&a);
        let out = run.drive(CancellationToken::new()).await.unwrap();
        assert_eq!(out.text, "Kitchen Wi-Fi is off.");
        assert_eq!(h.count("wifi_automation", "disable"), 1);
        // No second approval for the skill's own high-risk action.
        let evs = drain(&mut events).await;
        assert!(
            evs.iter()
                .any(|e| matches!(e.kind, EventKind::SkillFinished { .. }))
        );
        assert!(
            !evs.iter()
                .any(|e| matches!(e.kind, EventKind::ApprovalRequested { .. }))
        );
        assert!(a.pending_approvals().await.unwrap().is_empty());
        assert_eq!(server.requests().len(), 2);
    });
}

/// A skill's action riskier than the skill declared asks on its own; if the
/// process dies while it waits, the skill is reported to its parent as
/// interrupted (never run twice) and its orphaned request expires.
#[test]
fn an_action_riskier_than_its_skill_asks_and_a_restart_interrupts_the_skill() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_owned();
    write_skill(
        &path,
        "understated",
        "description: Claims to be harmless.\nallowed-tools: wifi_automation.disable\nrisk: low",
        "Turn Wi-Fi off on the kitchen phone.",
    );
    let first_host = host();
    let rt = process();
    let run_id = rt.block_on(async {
        let server = ScriptedLlm::start([
            call_step(tc("i", "invoke_skill", json!({"skill": "understated"}))),
            call_step(dev("w", "kitchen", "wifi_automation", "disable")),
        ])
        .await
        .unwrap();
        let a = skilled_agent(&path, config("low"), http(&server), first_host.clone()).await;
        let mut events = all_events(&a);
        let run = a.ask(AskRequest::new("go quiet")).await.unwrap();
        let id = run.run_id().to_owned();
        tokio::spawn(run.drive(CancellationToken::new()));
        // The skill's own action, tagged with the skill.
        let (approval, skill) = next_approval(&mut events).await;
        assert_eq!(approval.service, "wifi_automation");
        assert_eq!(skill.as_deref(), Some("understated"));
        id
    });
    drop(rt);

    let rt = process();
    rt.block_on(async {
        let server = ScriptedLlm::start([text_step("The skill was interrupted.")])
            .await
            .unwrap();
        let h = host();
        let a = skilled_agent(&path, config("low"), http(&server), h.clone()).await;
        assert_eq!(a.expire_orphan_approvals().await.unwrap(), 1);
        assert!(a.pending_approvals().await.unwrap().is_empty());
        let out = resume_to_end(&a, &run_id).await;
        assert_eq!(out.text, "The skill was interrupted.");
        assert!(
            server.requests()[0]
                .last_message()
                .contains("daemon stopped")
        );
        assert!(h.calls().is_empty());
    });
    assert!(first_host.calls().is_empty());
}
