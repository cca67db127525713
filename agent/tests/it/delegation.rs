//! Delegation to `[[agents]]` end to end in the agent crate: a scripted
//! model over real HTTP (OpenAI wire format), the fake tool host's call log
//! as the "phone", and a real SQLite store.

use crate::common::*;
use droidwarden_agent::delegation::RawDelegateConfig;
use droidwarden_agent::testing::{FakeToolHost, Responder, ScriptStep, ScriptedLlm};
use droidwarden_agent::{Agent, AskRequest, StopReason};
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

fn delegate(
    name: &str,
    prompt: &str,
    tools: &[&str],
    max_iterations: Option<u32>,
) -> RawDelegateConfig {
    RawDelegateConfig {
        name: Some(name.into()),
        description: Some(format!("The {name} specialist.")),
        system_prompt: Some(prompt.into()),
        tools: Some(tools.iter().map(|s| (*s).to_owned()).collect()),
        max_iterations,
        ..RawDelegateConfig::default()
    }
}

/// An agent that may delegate to `delegate`, on the scripted model and a
/// fresh fake phone host.
async fn with_delegate(
    dir: &Path,
    server: &ScriptedLlm,
    delegate: RawDelegateConfig,
) -> (Agent, Arc<FakeToolHost>) {
    let h = host();
    let cfg = delegating_config(vec![delegate], None);
    (agent(dir, cfg, http(server), h.clone()).await, h)
}

#[tokio::test]
async fn a_delegate_uses_only_its_tools_sees_only_its_task_and_answers() {
    let dir = tempfile::tempdir().unwrap();
    let server = ScriptedLlm::start([
        // The user's run delegates.
        call_step(tc(
            "d",
            "delegate_to_battery-doctor",
            json!({"task": "Read the kitchen phone's battery.", "context": "The user charges it at night.", "mode": "wait"}),
        )),
        // The delegate: an allowed read, then a change it may not make.
        call_step(dev("c1", "kitchen", "battery", "status")),
        call_step(dev("c2", "kitchen", "wifi_automation", "disable")),
        text_step("Kitchen battery at 77 %, not charging."),
        // The user's run again.
        text_step("The kitchen phone is at 77 %."),
    ])
    .await
    .unwrap();
    let (a, h) = with_delegate(
        dir.path(),
        &server,
        delegate(
            "battery-doctor",
            "DOCTOR-PROMPT: you diagnose batteries.",
            &["battery"],
            None,
        ),
    )
    .await;
    let mut events = all_events(&a);
    let run = a
        .ask(AskRequest::new(
            "PARENT-MARKER How is the kitchen phone's battery?",
        ))
        .await
        .unwrap();
    let parent = run.run_id().to_owned();
    let session = run.session_id().to_owned();
    let out = run.drive(CancellationToken::new()).await.unwrap();
    // Only the allowed read reached the phone.
    assert_one_battery_read(&out, &h);

    let reqs = server.requests();
    assert_eq!(reqs.len(), 5);
    let parent_tools = reqs[0].tool_names();
    assert!(
        parent_tools.contains(&"delegate_to_battery-doctor".to_owned()),
        "{parent_tools:?}"
    );
    // The delegate: its own prompt, only its tools, no delegate tool, and
    // only the task and context (not the user's conversation).
    let child_sys = reqs[1].system_prompt();
    assert!(child_sys.starts_with("DOCTOR-PROMPT"), "{child_sys}");
    // Its device tool and describe_action (the catalogue's schemas of
    // what it may use).
    assert_eq!(
        reqs[1].tool_names(),
        vec!["android_device".to_owned(), "describe_action".to_owned()]
    );
    let desc = reqs[1].body["tools"][0]["function"]["description"].to_string();
    assert!(
        desc.contains("battery") && !desc.contains("wifi_automation"),
        "{desc}"
    );
    let child_msgs = reqs[1].body["messages"].to_string();
    assert!(child_msgs.contains("Read the kitchen phone's battery."));
    assert!(child_msgs.contains("charges it at night"));
    assert!(!child_msgs.contains("PARENT-MARKER"), "{child_msgs}");
    // The refusal is what the delegate's model read.
    let refusal = reqs[3].last_message();
    assert!(
        refusal.contains("permission_denied") && refusal.contains("tools of agent battery-doctor"),
        "{refusal}"
    );
    // Its answer is the user's run's tool result.
    let result = reqs[4].last_message();
    assert!(
        result.contains("Kitchen battery at 77") && result.contains("battery-doctor"),
        "{result}"
    );

    let evs = drain(&mut events).await;
    child_events(&evs, "agent:battery-doctor", &parent);

    // `session show`: the child's own calls, under the parent's turn.
    let md = a.session_markdown(&session).await.unwrap();
    let child = md.find("> **Agent battery-doctor** (run `k-").expect(&md);
    assert!(child > md.find("## Turn 1").unwrap(), "{md}");
    let block = &md[child..];
    assert!(
        block.contains("> **Tool call** `android_device` (`c1`)")
            && block.contains("level_percent")
            && block.contains("> **Tool error**")
            && block.contains("> Kitchen battery at 77 %, not charging."),
        "{md}"
    );
}

#[tokio::test]
async fn a_failing_delegate_is_a_tool_error_and_the_parent_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let server = ScriptedLlm::start([
        // 1: the model fails while the delegate works.
        call_step(tc(
            "d1",
            "delegate_to_flaky",
            json!({"task": "Read the battery."}),
        )),
        ScriptStep::Status {
            status: 500,
            retry_after: None,
            body: json!({"error": {"message": "model exploded"}}).to_string(),
        },
        // 2: the delegate never answers and hits its one-call limit.
        call_step(tc(
            "d2",
            "delegate_to_flaky",
            json!({"task": "Read the battery again."}),
        )),
        call_step(dev("c1", "kitchen", "battery", "status")),
        text_step("Delegation failed twice."),
    ])
    .await
    .unwrap();
    let (a, h) = with_delegate(
        dir.path(),
        &server,
        delegate("flaky", "You read batteries.", &["battery.status"], Some(1)),
    )
    .await;
    let run = a.ask(AskRequest::new("Battery?")).await.unwrap();
    let out = tokio::time::timeout(Duration::from_secs(30), run.drive(CancellationToken::new()))
        .await
        .expect("finishes")
        .unwrap();
    assert_eq!(out.stop_reason, StopReason::FinalAnswer);
    assert_eq!(out.text, "Delegation failed twice.");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 5);
    let first = reqs[2].last_message();
    assert!(first.contains("agent flaky failed"), "{first}");
    let second = reqs[4].last_message();
    assert!(
        second.contains("agent flaky stopped before answering")
            && second.contains("max_iterations"),
        "{second}"
    );
    // Both failures reached the model as tool errors.
    assert!(out.steps.iter().all(|s| s.is_error), "{:?}", out.steps);
    // A call made with the last iteration is not executed.
    assert!(h.calls().is_empty());
}

#[tokio::test]
async fn a_model_delegating_in_a_loop_stops_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let server = ScriptedLlm::start([]).await.unwrap();
    // Every model, parent or child, always delegates to the same agent.
    server.set_fallback(ScriptStep::Compute(Responder::new(|_| {
        calls(vec![tc(
            "again",
            "delegate_to_looper",
            json!({"task": "delegate again"}),
        )])
    })));
    let delegate = delegate("looper", "LOOPER", &["battery"], Some(3));
    let (a, h) = with_delegate(dir.path(), &server, delegate).await;
    let run = a.ask(AskRequest::new("loop")).await.unwrap();
    let out = tokio::time::timeout(Duration::from_secs(30), run.drive(CancellationToken::new()))
        .await
        .expect("finishes")
        .unwrap();
    // The parent stops at its own limit; every delegation failed cleanly.
    assert_eq!(out.stop_reason, StopReason::MaxIterations);
    // The last call (made with the last iteration) is not executed.
    let executed: Vec<_> = out.steps.iter().filter(|s| !s.result.is_null()).collect();
    assert_eq!(executed.len(), 3, "{:#?}", out.steps);
    assert!(executed.iter().all(|s| {
        s.is_error
            && s.result
                .to_string()
                .contains("agent looper stopped before answering")
    }));
    let reqs = server.requests();
    // A child never gets a delegate tool, and is refused when it tries.
    for r in reqs
        .iter()
        .filter(|r| r.system_prompt().starts_with("LOOPER"))
    {
        assert!(
            r.tool_names()
                .iter()
                .all(|t| !t.starts_with("delegate_to_"))
        );
    }
    assert!(
        reqs.iter()
            .any(|r| r.last_message().contains("delegation depth limit reached"))
    );
    // Parent: 4 calls; each of its 3 delegations: 3 child calls.
    assert_eq!(reqs.len(), 4 + 3 * 3);
    assert!(h.calls().is_empty());
}

#[tokio::test]
async fn a_run_without_agents_has_no_delegate_tools() {
    let dir = tempfile::tempdir().unwrap();
    let server = ScriptedLlm::start([
        call_step(tc("d", "delegate_to_ghost", json!({"task": "x"}))),
        text_step("ok"),
    ])
    .await
    .unwrap();
    let a = agent(
        dir.path(),
        delegating_config(Vec::new(), None),
        http(&server),
        host(),
    )
    .await;
    let out = answer(&a, "hi").await;
    assert_eq!(out.text, "ok");
    let reqs = server.requests();
    assert!(
        reqs[0]
            .tool_names()
            .iter()
            .all(|t| !t.starts_with("delegate_to_"))
    );
    assert!(reqs[1].last_message().contains("unknown tool"));
}

#[tokio::test]
async fn a_delegates_risky_action_asks_a_person_like_the_parents_would() {
    let dir = tempfile::tempdir().unwrap();
    let server = ScriptedLlm::start([
        call_step(tc(
            "d",
            "delegate_to_radio",
            json!({"task": "Turn off Wi-Fi on the kitchen phone."}),
        )),
        call_step(dev("c1", "kitchen", "wifi_automation", "disable")),
        text_step("The user denied it."),
        text_step("Wi-Fi stays on: you denied it."),
    ])
    .await
    .unwrap();
    let (a, h) = with_delegate(
        dir.path(),
        &server,
        delegate("radio", "You manage radios.", &["wifi_automation"], None),
    )
    .await;
    let mut events = all_events(&a);
    let run = a.ask(AskRequest::new("Wi-Fi off please")).await.unwrap();
    let driven = tokio::spawn(run.drive(CancellationToken::new()));
    let (approval, skill) = next_approval(&mut events).await;
    assert_eq!(skill.as_deref(), Some("agent:radio"));
    assert_eq!(approval.service, "wifi_automation");
    assert_eq!(approval.action, "disable");
    a.deny(&approval.approval_id, "not now", "test")
        .await
        .unwrap();
    let out = tokio::time::timeout(Duration::from_secs(30), driven)
        .await
        .expect("finishes")
        .unwrap()
        .unwrap();
    assert_eq!(out.text, "Wi-Fi stays on: you denied it.");
    assert!(h.calls().is_empty(), "nothing reached the phone");
    let reqs = server.requests();
    let denied = reqs[2].last_message();
    assert!(denied.contains("not now"), "{denied}");
}
