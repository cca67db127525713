//! The drawing is checked against the machine: every path below is driven
//! through `graph::step`, and the node transitions it makes must be
//! exactly the edges of the table for its mode.

use super::*;
use crate::graph::{Input, RunLimits, StepEnv, step};
use crate::message::{ModelReply, ToolCall};
use crate::plan::{PlanLimits, PlanState};
use crate::policy::ApprovalPolicy;
use crate::skills::SkillSet;
use crate::testing::full_device;
use crate::tools::{ToolMode, Toolset};
use droidwarden_services::{ErrorCode, WireError};
use serde_json::json;
use std::collections::BTreeSet;
use std::sync::Arc;

fn toolset() -> Toolset {
    let devices = vec![full_device("kitchen")];
    Toolset::with_skills(
        ToolMode::Toolkit,
        &devices,
        true,
        Arc::new(SkillSet::builtin()),
        3,
    )
}

fn state(mode: RunMode, max_steps: u32) -> RunState {
    let mut s = RunState::new(
        "r".into(),
        "s".into(),
        "hi".into(),
        Vec::new(),
        Vec::new(),
        RunLimits {
            max_iterations: 10,
            max_steps,
            max_result_chars: 1000,
            approval_timeout_ms: 1000,
            tools_enabled: true,
            text_calls: true,
            tool_nudge: true,
        },
        0,
    );
    if mode == RunMode::Plan {
        s.plan = Some(PlanState::new(PlanLimits {
            max_plan_steps: 5,
            max_executor_steps: 2,
            max_model_calls: 100,
            max_replans: 2,
            max_executed: 10,
        }));
    }
    s
}

fn device(id: &str, service: &str, action: &str) -> ToolCall {
    ToolCall::new(
        id,
        "android_device",
        json!({"service_id": service, "action": action}).to_string(),
    )
}

fn skill(id: &str, name: &str) -> ToolCall {
    ToolCall::new(
        id,
        "invoke_skill",
        json!({"skill": name, "input": {}}).to_string(),
    )
}

fn calls(list: Vec<ToolCall>) -> Input {
    Input::ModelReplied {
        reply: ModelReply::with_calls(list),
        now_ms: 1,
    }
}

fn text(t: &str) -> Input {
    Input::ModelReplied {
        reply: ModelReply::text(t),
        now_ms: 1,
    }
}

fn done(id: &str) -> Input {
    Input::ToolFinished {
        call_id: id.into(),
        result: Ok(json!({"ok": true})),
        now_ms: 1,
    }
}

fn answer(id: &str, approved: bool) -> Input {
    Input::ApprovalAnswered {
        call_id: id.into(),
        approved,
        reason: None,
        by: Some("test".into()),
        edits: None,
        grant: None,
        now_ms: 1,
    }
}

/// Drive `inputs` and record every transition.
fn walk(mode: RunMode, max_steps: u32, inputs: Vec<Input>, seen: &mut BTreeSet<(Node, Node)>) {
    let tools = toolset();
    let policy = ApprovalPolicy::default();
    let env = StepEnv {
        toolset: &tools,
        policy: &policy,
        grants: &[],
    };
    let mut s = state(mode, max_steps);
    for input in std::iter::once(Input::Start { now_ms: 0 }).chain(inputs) {
        let before = node_of(&s);
        step(&mut s, &env, input);
        seen.insert((before, node_of(&s)));
    }
}

fn check(mode: RunMode, seen: &BTreeSet<(Node, Node)>) {
    let drawn: BTreeSet<(Node, Node)> = edges(mode).iter().map(|e| (e.0, e.1)).collect();
    assert_eq!(
        seen.difference(&drawn).collect::<Vec<_>>(),
        Vec::<&(Node, Node)>::new(),
        "transitions the machine makes that the drawing lacks"
    );
    assert_eq!(
        drawn.difference(seen).collect::<Vec<_>>(),
        Vec::<&(Node, Node)>::new(),
        "edges drawn that no path took"
    );
}

#[test]
fn the_react_drawing_is_the_machine() {
    let mut seen = BTreeSet::new();
    let read = || device("c1", "battery", "status");
    // Answer at once; a model error.
    walk(RunMode::React, 40, vec![text("hi")], &mut seen);
    walk(
        RunMode::React,
        40,
        vec![Input::ModelFailed {
            error: WireError::new(ErrorCode::Internal, "down"),
            now_ms: 1,
        }],
        &mut seen,
    );
    // A reply cut off at the token limit.
    walk(
        RunMode::React,
        40,
        vec![Input::ModelReplied {
            reply: ModelReply {
                stop_reason: Some("length".into()),
                ..ModelReply::text("The kitchen")
            },
            now_ms: 1,
        }],
        &mut seen,
    );
    // A read, two reads, an invalid call.
    walk(
        RunMode::React,
        40,
        vec![calls(vec![read()]), done("c1"), text("ok")],
        &mut seen,
    );
    walk(
        RunMode::React,
        40,
        vec![
            calls(vec![read(), device("c2", "battery", "status")]),
            done("c1"),
            done("c2"),
            text("ok"),
        ],
        &mut seen,
    );
    walk(
        RunMode::React,
        40,
        vec![calls(vec![device("c1", "nope", "x")]), text("sorry")],
        &mut seen,
    );
    // Approval: approved, denied.
    let risky = || device("w", "wifi_automation", "disable");
    walk(
        RunMode::React,
        40,
        vec![
            calls(vec![risky()]),
            answer("w", true),
            done("w"),
            text("ok"),
        ],
        &mut seen,
    );
    walk(
        RunMode::React,
        40,
        vec![calls(vec![risky()]), answer("w", false), text("ok")],
        &mut seen,
    );
    // A skill, approved first (bedtime is medium, above "low").
    walk(
        RunMode::React,
        40,
        vec![
            calls(vec![skill("k", "phone-health-report")]),
            done("k"),
            text("ok"),
        ],
        &mut seen,
    );
    walk(
        RunMode::React,
        40,
        vec![
            calls(vec![skill("k", "bedtime")]),
            answer("k", true),
            done("k"),
            text("ok"),
        ],
        &mut seen,
    );
    // The step limit right after the tools.
    walk(
        RunMode::React,
        2,
        vec![calls(vec![read()]), done("c1")],
        &mut seen,
    );
    check(RunMode::React, &seen);
}

#[test]
fn the_plan_drawing_is_the_machine() {
    let mut seen = BTreeSet::new();
    let plan = |n: usize| {
        text(&json!({"steps": (0..n).map(|i| format!("step {i}")).collect::<Vec<_>>()}).to_string())
    };
    let go_on = || text(r#"{"decision": "continue"}"#);
    let read = || device("c1", "battery", "status");
    // Two steps, one with a read, then the answer.
    walk(
        RunMode::Plan,
        40,
        vec![
            plan(2),
            calls(vec![read()]),
            done("c1"),
            text("found"),
            go_on(),
            text("found too"),
            go_on(),
            text("answer"),
        ],
        &mut seen,
    );
    // An executor that reaches max_executor_steps (2) on a tool round.
    walk(
        RunMode::Plan,
        40,
        vec![
            plan(1),
            calls(vec![read()]),
            done("c1"),
            calls(vec![device("c2", "battery", "status")]),
            done("c2"),
            go_on(),
            text("answer"),
        ],
        &mut seen,
    );
    // A bad plan twice.
    walk(RunMode::Plan, 40, vec![text("?"), text("??")], &mut seen);
    // Approval approved and denied, a skill approved, the executor's limit.
    let risky = || device("w", "wifi_automation", "disable");
    walk(
        RunMode::Plan,
        40,
        vec![
            plan(3),
            calls(vec![risky()]),
            answer("w", true),
            done("w"),
            text("off"),
            go_on(),
            calls(vec![device("w2", "wifi_automation", "disable")]),
            answer("w2", false),
            text("denied"),
            text(r#"{"decision": "replan", "steps": ["check"]}"#),
            calls(vec![skill("k", "bedtime")]),
            answer("k", true),
            done("k"),
            calls(vec![skill("k2", "phone-health-report")]),
            done("k2"),
            text(r#"{"decision": "finish"}"#),
            text("answer"),
        ],
        &mut seen,
    );
    check(RunMode::Plan, &seen);
}

#[test]
fn renderings_have_every_node_and_edge() {
    let skills = vec!["bedtime".to_owned()];
    for mode in [RunMode::React, RunMode::Plan] {
        let m = mermaid(mode, &skills);
        assert!(m.starts_with("flowchart TD\n"));
        for (from, to, label) in edges(mode) {
            assert!(
                m.contains(&format!("{} -->|{label}| {}", from.id(), to.id())),
                "{m}"
            );
        }
        assert!(m.contains("skill -.->|bedtime| skill_0"));
        let d = dot(mode, &skills);
        assert!(d.starts_with("digraph agent {") && d.trim_end().ends_with('}'));
        assert_eq!(d.matches(" -> ").count(), edges(mode).len() + 1);
    }
}

#[test]
fn delegates_are_drawn_from_the_node_that_calls_tools() {
    let agents = vec![("battery-doctor".to_owned(), DelegateMode::Wait)];
    let m = mermaid_with_agents(RunMode::React, &[], &agents);
    assert!(m.contains("delegate_0[\"agent: battery-doctor\"]"), "{m}");
    assert!(
        m.contains("agent -.->|delegate_to_battery-doctor| delegate_0"),
        "{m}"
    );
    assert!(
        m.contains("delegate_0 -.->|the agent's answer| agent"),
        "{m}"
    );
    let p = mermaid_with_agents(RunMode::Plan, &[], &agents);
    assert!(
        p.contains("executor -.->|delegate_to_battery-doctor| delegate_0"),
        "{p}"
    );
    let d = dot_with_agents(RunMode::React, &[], &agents);
    // The agent's two edges and the caller's delegation_status edge.
    assert_eq!(
        d.matches(" -> ").count(),
        edges(RunMode::React).len() + 3,
        "{d}"
    );
    assert_eq!(
        mermaid(RunMode::React, &[]),
        mermaid_with_agents(RunMode::React, &[], &[])
    );
}

#[test]
fn background_agents_report_to_the_task_store() {
    let agents = vec![
        ("netcheck".to_owned(), DelegateMode::Background),
        ("doctor".to_owned(), DelegateMode::Wait),
    ];
    let m = mermaid_with_agents(RunMode::React, &[], &agents);
    assert!(
        m.contains("agent -.->|delegate_to_netcheck background| delegate_0"),
        "{m}"
    );
    assert!(m.contains("delegate_0 -.->|task result| tasks"), "{m}");
    assert!(!m.contains("delegate_0 -.->|the agent's answer|"), "{m}");
    assert!(
        m.contains("delegate_1 -.->|the agent's answer| agent"),
        "{m}"
    );
    assert!(m.contains("tasks[(\"background tasks\")]"), "{m}");
    assert!(m.contains("agent -.->|delegation_status| tasks"), "{m}");
    let d = dot_with_agents(RunMode::Plan, &[], &agents);
    assert!(d.contains("delegate_0 -> tasks"), "{d}");
    assert!(
        d.contains("executor -> tasks [style=dashed, label=\"delegation_status\"]"),
        "{d}"
    );
}
