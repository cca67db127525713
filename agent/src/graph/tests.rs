//! The state machine, without a runtime: table-like scenarios that feed
//! inputs and check the actions.

use super::*;
use crate::host::DeviceSummary;
use crate::testing::full_device;
use crate::tools::ToolMode;
use droidwarden_services::Risk;
use serde_json::json;

fn devices() -> Vec<DeviceSummary> {
    vec![full_device("kitchen"), full_device("bedroom")]
}

struct Fixture {
    toolset: Toolset,
    policy: ApprovalPolicy,
    state: RunState,
}

fn limits() -> RunLimits {
    RunLimits {
        max_iterations: 5,
        max_steps: 20,
        max_result_chars: 300,
        approval_timeout_ms: 1000,
        tools_enabled: true,
        text_calls: true,
        tool_nudge: true,
    }
}

impl Fixture {
    fn new() -> Self {
        Self {
            toolset: Toolset::new(ToolMode::Toolkit, &devices(), true),
            policy: ApprovalPolicy::default(),
            state: RunState::new(
                "r1".into(),
                "s1".into(),
                "hi".into(),
                Vec::new(),
                Vec::new(),
                limits(),
                0,
            ),
        }
    }

    fn step(&mut self, input: Input) -> Vec<Action> {
        let env = StepEnv {
            toolset: &self.toolset,
            policy: &self.policy,
            grants: &[],
        };
        step(&mut self.state, &env, input)
    }
}

fn call(id: &str, args: serde_json::Value) -> ToolCall {
    ToolCall::new(id, "android_device", args.to_string())
}

fn reply_calls(calls: Vec<ToolCall>) -> Input {
    Input::ModelReplied {
        reply: ModelReply::with_calls(calls),
        now_ms: 10,
    }
}

/// The outcome of `actions`, which must be the run's end alone.
fn finished(actions: &[Action]) -> &RunOutcome {
    let [Action::Finish(out)] = actions else {
        panic!("{actions:?}")
    };
    out
}

fn kinds(actions: &[Action]) -> Vec<&'static str> {
    actions
        .iter()
        .map(|a| match a {
            Action::CallModel => "call_model",
            Action::Checkpoint { .. } => "checkpoint",
            Action::AwaitApproval { .. } => "await_approval",
            Action::Execute { .. } => "execute",
            Action::Emit(EventKind::ToolCall { .. }) => "tool_call",
            Action::Emit(EventKind::ToolResult { .. }) => "tool_result",
            Action::Emit(EventKind::ApprovalRequested { .. }) => "approval_requested",
            Action::Emit(EventKind::ApprovalAnswered { .. }) => "approval_answered",
            Action::Emit(_) => "emit",
            Action::Finish(_) => "finish",
        })
        .collect()
}

#[test]
fn final_answer_after_one_tool_round() {
    let mut f = Fixture::new();
    assert_eq!(kinds(&f.step(Input::Start { now_ms: 0 })), ["call_model"]);
    let a = f.step(reply_calls(vec![call(
        "c1",
        json!({"device": "kitchen", "service_id": "battery", "action": "status"}),
    )]));
    // A read needs no checkpoint before it runs: after a crash it is run again.
    assert_eq!(kinds(&a), ["tool_call", "execute"]);
    assert_eq!(f.state.phase, Phase::RunningTools);
    let mut g = Fixture::new();
    g.step(Input::Start { now_ms: 0 });
    let a = g.step(reply_calls(vec![call(
        "c1",
        json!({"device": "kitchen", "service_id": "screen_control", "action": "wake"}),
    )]));
    // A change is checkpointed as executing before it starts: at most once.
    assert_eq!(kinds(&a), ["tool_call", "checkpoint", "execute"]);
    assert_eq!(g.state.calls[0].status, CallStatus::Executing);
    let a = f.step(Input::ToolFinished {
        call_id: "c1".into(),
        result: Ok(json!({"level_percent": 80})),
        now_ms: 20,
    });
    assert_eq!(kinds(&a), ["tool_result", "checkpoint", "call_model"]);
    assert!(
        matches!(&f.state.messages.last().unwrap().message, Message::Tool { content, .. } if content.contains("80"))
    );
    let a = f.step(Input::ModelReplied {
        reply: ModelReply::text("80 %"),
        now_ms: 30,
    });
    let out = finished(&a);
    assert_eq!(
        (out.text.as_str(), out.stop_reason),
        ("80 %", StopReason::FinalAnswer)
    );
    assert_eq!(f.state.phase, Phase::Finished);
    assert_eq!(f.state.iteration, 2);
}

#[test]
fn invalid_calls_become_readable_tool_errors_and_the_run_continues() {
    let mut f = Fixture::new();
    f.step(Input::Start { now_ms: 0 });
    let bad_json = ToolCall::new("c1", "android_device", "{\"service_id\": ");
    let unknown = ToolCall::new("c2", "rm_rf", "{}");
    let a = f.step(reply_calls(vec![bad_json, unknown]));
    assert_eq!(
        kinds(&a),
        [
            "tool_call",
            "tool_result",
            "tool_call",
            "tool_result",
            "checkpoint",
            "call_model"
        ]
    );
    let texts: Vec<String> = f
        .state
        .messages
        .iter()
        .filter_map(|m| match &m.message {
            Message::Tool {
                content,
                is_error: true,
                ..
            } => Some(content.clone()),
            _ => None,
        })
        .collect();
    assert!(
        texts[0].contains("not valid JSON") && texts[0].contains("invalid_params"),
        "{texts:?}"
    );
    assert!(texts[1].contains("unknown tool"), "{texts:?}");
    assert_eq!(f.state.phase, Phase::AwaitingModel);
}

/// Malformed arguments are never kept in the conversation (llama.cpp
/// rejects a whole request whose history has one): the call is kept with
/// `{}`, and its result says what was wrong and what was expected.
#[test]
fn malformed_arguments_stay_out_of_the_conversation() {
    let mut f = Fixture::new();
    f.state.limits.max_result_chars = 2000;
    f.step(Input::Start { now_ms: 0 });
    let bad = "{\"service_id\": \"battery\", \"action\": ";
    f.step(reply_calls(vec![
        ToolCall::new("c1", "android_device", bad),
        ToolCall::new("c2", "current_time", ""),
        ToolCall::new("c3", "android_device", "[1, 2]"),
    ]));
    f.step(Input::ToolFinished {
        call_id: "c2".into(),
        result: Ok(json!({"now": "12:00"})),
        now_ms: 20,
    });
    let Message::Assistant { tool_calls, .. } = &f.state.messages[1].message else {
        panic!("{:?}", f.state.messages)
    };
    let args: Vec<&str> = tool_calls.iter().map(|c| c.arguments.as_str()).collect();
    assert_eq!(args, ["{}", "{}", "{}"]);
    let result = |id: &str| {
        f.state
            .messages
            .iter()
            .find_map(|m| match &m.message {
                Message::Tool {
                    call_id, content, ..
                } if call_id == id => Some(content.clone()),
                _ => None,
            })
            .unwrap()
    };
    let first = result("c1");
    for needle in [
        "not valid JSON",
        "invalid_params",
        "expected",
        "service_id",
        "\\\"action\\\": ",
    ] {
        assert!(first.contains(needle), "{needle} missing from {first}");
    }
    assert!(result("c3").contains("must be a JSON object"));
}

/// An answer cut off at the token limit is not an answer.
#[test]
fn a_reply_cut_off_at_the_token_limit_ends_the_run_as_cut_off() {
    for reason in ["length", "max_tokens", "MAX_TOKENS"] {
        let mut f = Fixture::new();
        f.step(Input::Start { now_ms: 0 });
        let a = f.step(Input::ModelReplied {
            reply: ModelReply {
                stop_reason: Some(reason.into()),
                ..ModelReply::text("The kitchen phone is at")
            },
            now_ms: 10,
        });
        let out = finished(&a);
        assert_eq!(out.stop_reason, StopReason::CutOff, "{reason}");
        assert_eq!(out.text, "");
        let error = out.error.as_ref().unwrap();
        assert!(
            error.message.contains("cut off") && error.message.contains(reason),
            "{error:?}"
        );
        assert!(!error.retryable);
    }
    // A cut-off tool call is not run either.
    let mut f = Fixture::new();
    f.step(Input::Start { now_ms: 0 });
    let a = f.step(Input::ModelReplied {
        reply: ModelReply {
            stop_reason: Some("length".into()),
            ..ModelReply::with_calls(vec![call(
                "c1",
                json!({"device": "kitchen", "service_id": "battery", "action": "status"}),
            )])
        },
        now_ms: 10,
    });
    assert_eq!(finished(&a).stop_reason, StopReason::CutOff);
}

#[test]
fn approval_flow_approve_and_deny() {
    let mut f = Fixture::new();
    f.step(Input::Start { now_ms: 0 });
    // wifi disable is high risk: approval; battery is low: runs at once.
    let a = f.step(reply_calls(vec![
        call(
            "c1",
            json!({"device": "kitchen", "service_id": "wifi_automation", "action": "disable"}),
        ),
        call(
            "c2",
            json!({"device": "bedroom", "service_id": "battery", "action": "status"}),
        ),
        call(
            "c3",
            json!({"device": "bedroom", "service_id": "airplane_mode", "action": "enable"}),
        ),
    ]));
    assert_eq!(
        kinds(&a),
        [
            "tool_call",
            "tool_call",
            "tool_call",
            "checkpoint",
            "approval_requested",
            "await_approval",
            "approval_requested",
            "await_approval",
            "execute"
        ]
    );
    let Action::Checkpoint { approvals } = &a[3] else {
        panic!()
    };
    assert_eq!(approvals.len(), 2);
    assert_eq!(approvals[0].approval_id, "r1-a1");
    assert_eq!(approvals[0].risk, Risk::High);
    assert_eq!(approvals[0].expires_at, 1010);
    assert_eq!(approvals[0].device.as_deref(), Some("kitchen"));
    let a = f.step(Input::ApprovalAnswered {
        call_id: "c1".into(),
        approved: true,
        reason: None,
        by: Some("D-Bus uid 1000".into()),
        edits: None,
        grant: None,
        now_ms: 50,
    });
    assert_eq!(kinds(&a), ["approval_answered", "checkpoint", "execute"]);
    assert!(
        matches!(&a[0], Action::Emit(EventKind::ApprovalAnswered { approval_id, call_id, approved: true, by: Some(by), reason: None, .. })
            if approval_id == "r1-a1" && call_id == "c1" && by == "D-Bus uid 1000"),
        "{:?}",
        a[0]
    );
    let a = f.step(Input::ApprovalAnswered {
        call_id: "c3".into(),
        approved: false,
        reason: Some("not now".into()),
        by: Some("MQTT".into()),
        edits: None,
        grant: None,
        now_ms: 60,
    });
    assert_eq!(
        kinds(&a),
        ["approval_answered", "tool_result", "checkpoint"]
    );
    assert!(
        matches!(&a[0], Action::Emit(EventKind::ApprovalAnswered { approved: false, by: Some(by), reason: Some(reason), .. })
            if by == "MQTT" && reason == "not now"),
        "{:?}",
        a[0]
    );
    // A second answer for the same call is ignored.
    assert!(
        f.step(Input::ApprovalAnswered {
            call_id: "c3".into(),
            approved: true,
            reason: None,
            by: Some("MQTT".into()),
            edits: None,
            grant: None,
            now_ms: 61
        })
        .is_empty()
    );
    f.step(Input::ToolFinished {
        call_id: "c2".into(),
        result: Ok(json!({})),
        now_ms: 70,
    });
    let a = f.step(Input::ToolFinished {
        call_id: "c1".into(),
        result: Ok(json!({"enabled": false})),
        now_ms: 80,
    });
    assert_eq!(kinds(&a), ["tool_result", "checkpoint", "call_model"]);
    let denied = f.state.messages.iter().find_map(|m| match &m.message {
        Message::Tool {
            call_id, content, ..
        } if call_id == "c3" => Some(content.clone()),
        _ => None,
    });
    assert!(denied.unwrap().contains("\"denied\""));
}

#[test]
fn an_approved_call_without_a_validated_form_is_answered_with_an_error() {
    let mut f = Fixture::new();
    f.step(Input::Start { now_ms: 0 });
    f.step(reply_calls(vec![call(
        "c1",
        json!({"device": "kitchen", "service_id": "wifi_automation", "action": "disable"}),
    )]));
    // As a damaged checkpoint could have it.
    f.state.calls[0].planned = None;
    let a = f.step(Input::ApprovalAnswered {
        call_id: "c1".into(),
        approved: true,
        reason: None,
        by: None,
        edits: None,
        grant: None,
        now_ms: 50,
    });
    assert_eq!(
        kinds(&a),
        [
            "approval_answered",
            "tool_result",
            "checkpoint",
            "call_model"
        ]
    );
    let answered = f.state.messages.iter().find_map(|m| match &m.message {
        Message::Tool {
            call_id,
            content,
            is_error,
            ..
        } if call_id == "c1" => Some((*is_error, content.clone())),
        _ => None,
    });
    assert!(
        answered
            .as_ref()
            .is_some_and(|(is_error, content)| *is_error && content.contains("no validated form")),
        "{answered:?}"
    );
}

#[test]
fn deny_list_refuses_without_asking() {
    let mut f = Fixture::new();
    f.policy.deny.insert("battery.*".into());
    f.step(Input::Start { now_ms: 0 });
    let a = f.step(reply_calls(vec![call(
        "c1",
        json!({"device": "kitchen", "service_id": "battery", "action": "status"}),
    )]));
    assert_eq!(
        kinds(&a),
        ["tool_call", "tool_result", "checkpoint", "call_model"]
    );
}

#[test]
fn limits_stop_the_run_with_the_reason_recorded() {
    let mut f = Fixture::new();
    f.state.limits.max_iterations = 2;
    f.step(Input::Start { now_ms: 0 });
    let c = || reply_calls(vec![ToolCall::new("t", "current_time", "{}")]);
    f.step(c());
    f.step(Input::ToolFinished {
        call_id: "t".into(),
        result: Ok(json!({})),
        now_ms: 1,
    });
    let a = f.step(c());
    let out = finished(&a);
    assert_eq!(out.stop_reason, StopReason::MaxIterations);

    let mut f = Fixture::new();
    f.state.limits.max_steps = 3;
    f.step(Input::Start { now_ms: 0 });
    f.step(c());
    let a = f.step(Input::ToolFinished {
        call_id: "t".into(),
        result: Ok(json!({})),
        now_ms: 1,
    });
    assert_eq!(kinds(&a), ["tool_result", "checkpoint", "call_model"]);
    let a = f.step(c());
    let out = finished(&a);
    assert_eq!(out.stop_reason, StopReason::StepLimit);
}

#[test]
fn without_tools_a_single_model_call() {
    let mut f = Fixture::new();
    f.state.limits.tools_enabled = false;
    f.step(Input::Start { now_ms: 0 });
    let a = f.step(reply_calls(vec![call("c1", json!({}))]));
    let out = finished(&a);
    assert_eq!(out.stop_reason, StopReason::FinalAnswer);
}

#[test]
fn model_failure_finishes_with_the_error() {
    let mut f = Fixture::new();
    f.step(Input::Start { now_ms: 0 });
    let a = f.step(Input::ModelFailed {
        error: WireError::new(ErrorCode::Timeout, "slow"),
        now_ms: 5,
    });
    let out = finished(&a);
    assert_eq!(out.stop_reason, StopReason::Error);
    assert_eq!(out.error.as_ref().unwrap().code, ErrorCode::Timeout);
}

#[test]
fn large_results_are_truncated() {
    let mut f = Fixture::new();
    f.step(Input::Start { now_ms: 0 });
    f.step(reply_calls(vec![call(
        "c1",
        json!({"device": "kitchen", "service_id": "app_list", "action": "list"}),
    )]));
    f.step(Input::ToolFinished {
        call_id: "c1".into(),
        result: Ok(json!({"blob": "x".repeat(5000)})),
        now_ms: 1,
    });
    let content = f
        .state
        .messages
        .iter()
        .find_map(|m| match &m.message {
            Message::Tool { content, .. } => Some(content.clone()),
            _ => None,
        })
        .unwrap();
    assert!(content.chars().count() <= 300, "{}", content.len());
    assert!(
        content.contains("[truncated: 236 of 5011 characters shown]"),
        "{content}"
    );
}

#[test]
fn resume_after_a_crash() {
    let mut f = Fixture::new();
    f.step(Input::Start { now_ms: 0 });
    f.step(reply_calls(vec![
        call("c1", json!({"device": "kitchen", "service_id": "wifi_automation", "action": "disable"})),
        call("c2", json!({"device": "bedroom", "service_id": "audio_automation", "action": "set_volume", "parameters": {"stream": "music", "level": 3}})),
        ToolCall { id: "c3".into(), name: "calculator".into(), arguments: r#"{"expression":"2*3"}"#.into(), signature: None },
        call("c4", json!({"device": "kitchen", "service_id": "battery", "action": "status"})),
    ]));
    // The checkpoint went to disk; the process died. Reload it.
    let saved = serde_json::to_string(&f.state).unwrap();
    f.state = serde_json::from_str(&saved).unwrap();
    let a = f.step(Input::Resume { now_ms: 100 });
    // The device action that was running is reported, not repeated; the
    // local tool runs again; the approval is awaited again.
    assert_eq!(
        kinds(&a),
        [
            "tool_result",
            "checkpoint",
            "await_approval",
            "execute",
            "execute"
        ]
    );
    let Action::Emit(EventKind::ToolResult {
        call_id,
        is_error: true,
        ..
    }) = &a[0]
    else {
        panic!("{a:?}")
    };
    assert_eq!(call_id, "c2");
    let Action::Execute {
        planned: Planned::Calculator { .. },
        ..
    } = &a[3]
    else {
        panic!("{a:?}")
    };
    let Action::Execute {
        planned: Planned::Device { mutates: false, .. },
        ..
    } = &a[4]
    else {
        panic!("{a:?}")
    };
}

#[test]
fn stale_inputs_are_ignored() {
    let mut f = Fixture::new();
    f.step(Input::Start { now_ms: 0 });
    assert!(
        f.step(Input::ToolFinished {
            call_id: "nope".into(),
            result: Ok(json!({})),
            now_ms: 1
        })
        .is_empty()
    );
    assert!(f.step(Input::Start { now_ms: 0 }).is_empty());
}

#[test]
fn truncate_keeps_short_text() {
    assert_eq!(truncate("abc".into(), 300), "abc");
}

#[test]
fn a_grant_answers_for_its_device_up_to_its_ceiling_and_never_above_medium() {
    let mut f = Fixture::new();
    f.step(Input::Start { now_ms: 0 });
    let grant = |device: &str, up_to| Grant {
        grant_id: "g1".into(),
        run_id: "r1".into(),
        session_id: "s1".into(),
        device: device.into(),
        up_to,
        granted_by: "Alice".into(),
        granted_at: 0,
        approval_id: "r1-a0".into(),
        revoked_at: None,
        revoked_by: None,
        ended_at: None,
        app: None,
        expires_at: None,
    };
    let grants = [grant("kitchen", Risk::Medium)];
    let env = StepEnv {
        toolset: &f.toolset,
        policy: &f.policy,
        grants: &grants,
    };
    // A medium action (a tap is low by itself: the app in front raises it).
    let tap = |id: &str, device: &str| {
        call(
            id,
            json!({"device": device, "service_id": "audio_automation", "action": "mute", "parameters": {}}),
        )
    };
    let a = step(
        &mut f.state,
        &env,
        reply_calls(vec![
            // Covered: kitchen, medium.
            tap("c1", "kitchen"),
            // Another device: asks.
            tap("c2", "bedroom"),
            // High: asks, whatever the grant.
            call(
                "c3",
                json!({"device": "kitchen", "service_id": "ui_control", "action": "power"}),
            ),
        ]),
    );
    let asked: Vec<&str> = a
        .iter()
        .filter_map(|x| match x {
            Action::AwaitApproval { call_id, .. } => Some(call_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(asked, ["c2", "c3"]);
    assert!(
        a.iter()
            .any(|x| matches!(x, Action::Execute { call_id, .. } if call_id == "c1"))
    );
    // A revoked grant, or one whose ceiling is below the risk, covers nothing.
    let mut revoked = grant("kitchen", Risk::Medium);
    revoked.revoked_at = Some(1);
    for g in [revoked, grant("kitchen", Risk::Low)] {
        assert!(
            crate::graph::grants::covered(&[g], &f.toolset.plan(&tap("c9", "kitchen")).unwrap())
                .is_none()
        );
    }
    // Even a grant claiming `high` (never given) does not cover a high action.
    let high = grant("kitchen", Risk::High);
    let power = call(
        "c8",
        json!({"device": "kitchen", "service_id": "ui_control", "action": "power"}),
    );
    assert!(crate::graph::grants::covered(&[high], &f.toolset.plan(&power).unwrap()).is_none());
}

// ---------------------------------------------------------------------------
// Screen actions and the app in front (`[phone_services.ui]`): the daemon
// answers `approval_required` when the app raises a call above its
// clearance; the graph asks a person (or a grant answers) and runs it again.

fn tap(id: &str) -> ToolCall {
    call(
        id,
        json!({"device": "kitchen", "service_id": "ui_control", "action": "tap", "parameters": {"x": 1, "y": 2}}),
    )
}

fn grant(id: &str, up_to: Risk, app: Option<&str>) -> Grant {
    Grant {
        grant_id: id.into(),
        run_id: "r1".into(),
        session_id: "s1".into(),
        device: "kitchen".into(),
        up_to,
        granted_by: "Alice".into(),
        granted_at: 0,
        approval_id: "r1-a1".into(),
        revoked_at: None,
        revoked_by: None,
        ended_at: None,
        app: app.map(str::to_owned),
        expires_at: app.map(|_| 1_000),
    }
}

/// The clearance each `execute` of `actions` carries, by call id.
fn executed(actions: &[Action]) -> Vec<(&str, Risk)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Execute {
                call_id, cleared, ..
            } => Some((call_id.as_str(), *cleared)),
            _ => None,
        })
        .collect()
}

fn stopped_in(app: &str, risk: Risk) -> Input {
    let command = droidwarden_services::Catalogue::get()
        .parse("ui_control", "tap", &json!({"x": 1, "y": 2}))
        .unwrap();
    Input::ToolFinished {
        call_id: "c1".into(),
        result: Err(droidwarden_services::ui::approval_required(
            &command,
            Some(app),
            risk,
            Risk::Low,
        )),
        now_ms: 20,
    }
}

#[test]
fn a_screen_action_runs_at_the_policys_clearance_then_asks_with_the_app_in_front() {
    let mut f = Fixture::new();
    f.step(Input::Start { now_ms: 0 });
    let a = f.step(reply_calls(vec![tap("c1")]));
    // Low by itself: it runs, cleared up to the threshold (low).
    assert_eq!(executed(&a), [("c1", Risk::Low)]);
    // The daemon stopped it: the app in front makes it medium.
    let a = f.step(stopped_in("com.example.mail", Risk::Medium));
    assert_eq!(
        kinds(&a),
        ["checkpoint", "approval_requested", "await_approval"]
    );
    let Action::Checkpoint { approvals } = &a[0] else {
        panic!("{a:?}")
    };
    assert_eq!(approvals[0].risk, Risk::Medium);
    assert_eq!(approvals[0].app.as_deref(), Some("com.example.mail"));
    assert_eq!(
        (approvals[0].service.as_str(), approvals[0].action.as_str()),
        ("ui_control", "tap")
    );
    // Approved once: it runs again, cleared up to what the person saw.
    let a = f.step(Input::ApprovalAnswered {
        call_id: "c1".into(),
        approved: true,
        reason: None,
        by: Some("Alice".into()),
        edits: None,
        grant: None,
        now_ms: 30,
    });
    assert_eq!(executed(&a), [("c1", Risk::Medium)]);
    // The app changed again, to a high one: asked again, not looped.
    let a = f.step(stopped_in("com.android.settings", Risk::High));
    assert_eq!(
        kinds(&a),
        ["checkpoint", "approval_requested", "await_approval"]
    );
    // Denied: the model is told, nothing ran.
    let a = f.step(Input::ApprovalAnswered {
        call_id: "c1".into(),
        approved: false,
        reason: Some("not in settings".into()),
        by: Some("Alice".into()),
        edits: None,
        grant: None,
        now_ms: 40,
    });
    assert!(executed(&a).is_empty(), "{a:?}");
    assert!(a.iter().any(|x| matches!(x, Action::CallModel)), "{a:?}");
}

#[test]
fn a_grant_for_the_run_or_an_allowed_app_answers_without_asking() {
    let check = |grants: &[Grant], app: &str, risk: Risk, want: Option<Risk>| {
        let mut f = Fixture::new();
        f.step(Input::Start { now_ms: 0 });
        f.step(reply_calls(vec![tap("c1")]));
        let env = StepEnv {
            toolset: &f.toolset,
            policy: &f.policy,
            grants,
        };
        let a = step(&mut f.state, &env, stopped_in(app, risk));
        match want {
            Some(cleared) => assert_eq!(executed(&a), [("c1", cleared)], "{app} {risk:?}"),
            None => assert_eq!(
                kinds(&a),
                ["checkpoint", "approval_requested", "await_approval"],
                "{app} {risk:?}"
            ),
        }
    };
    let mail = "com.example.mail";
    // A grant for the run up to medium covers a medium app, not a high one.
    check(
        &[grant("g1", Risk::Medium, None)],
        mail,
        Risk::Medium,
        Some(Risk::Medium),
    );
    check(
        &[grant("g1", Risk::Medium, None)],
        "com.android.settings",
        Risk::High,
        None,
    );
    check(&[grant("g1", Risk::Low, None)], mail, Risk::Medium, None);
    // An app grant covers its app (before it expires at 1000), no other.
    check(
        &[grant("g2", Risk::Medium, Some(mail))],
        mail,
        Risk::Medium,
        Some(Risk::Medium),
    );
    check(
        &[grant("g2", Risk::Medium, Some(mail))],
        "com.example.other",
        Risk::Medium,
        None,
    );
    let mut expired = grant("g3", Risk::Medium, Some(mail));
    expired.expires_at = Some(5);
    check(&[expired], mail, Risk::Medium, None);
    let mut revoked = grant("g4", Risk::Medium, Some(mail));
    revoked.revoked_at = Some(1);
    check(&[revoked], mail, Risk::Medium, None);
    // An app grant is not a grant for the run: at plan time it covers
    // nothing (a medium action still asks).
    let mute = call(
        "c9",
        json!({"device": "kitchen", "service_id": "audio_automation", "action": "mute"}),
    );
    let f = Fixture::new();
    let planned = f.toolset.plan(&mute).unwrap();
    assert!(grants::covered(&[grant("g2", Risk::Medium, Some(mail))], &planned).is_none());
    assert!(grants::covered(&[grant("g1", Risk::Medium, None)], &planned).is_some());
}

#[test]
fn a_grant_answers_the_other_requests_it_covers() {
    let request = |run: &str, device: &str, risk: Risk, app: Option<&str>| PendingApproval {
        approval_id: "x".into(),
        run_id: run.into(),
        session: "s1".into(),
        call_id: "c".into(),
        device: Some(device.into()),
        service: "ui_control".into(),
        action: "tap".into(),
        params: json!({}),
        risk,
        app: app.map(str::to_owned),
        asked_by: None,
        requested_at: 0,
        expires_at: 10,
    };
    let run = grant("g1", Risk::Medium, None);
    let mail = "com.example.mail";
    let app = grant("g2", Risk::Medium, Some(mail));
    let answers = |g: &Grant, r: &PendingApproval| grants::answers(g, r, 100);
    assert!(answers(
        &run,
        &request("r1", "kitchen", Risk::Medium, Some(mail))
    ));
    assert!(answers(&run, &request("r1", "kitchen", Risk::Low, None)));
    assert!(
        !answers(&run, &request("r2", "kitchen", Risk::Medium, None)),
        "another run"
    );
    assert!(
        !answers(&run, &request("r1", "bedroom", Risk::Medium, None)),
        "another device"
    );
    assert!(
        !answers(&run, &request("r1", "kitchen", Risk::High, None)),
        "high"
    );
    let mut skill = request("r1", "kitchen", Risk::Low, None);
    skill.service = SKILL_SERVICE.into();
    assert!(!answers(&run, &skill), "a skill");
    // An app grant: any run or caller, its device and app, up to its risk.
    assert!(answers(
        &app,
        &request("ext-9", "kitchen", Risk::Medium, Some(mail))
    ));
    assert!(!answers(
        &app,
        &request("r1", "kitchen", Risk::Medium, Some("com.x.y"))
    ));
    assert!(!answers(
        &app,
        &request("r1", "kitchen", Risk::Medium, None)
    ));
    assert!(!answers(
        &app,
        &request("r1", "kitchen", Risk::High, Some(mail))
    ));
    assert!(
        !grants::answers(
            &app,
            &request("r1", "kitchen", Risk::Medium, Some(mail)),
            1_000
        ),
        "expired"
    );
}
