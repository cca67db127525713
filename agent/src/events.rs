//! What a run announces while it works. The daemon maps these to MQTT and
//! D-Bus; the CLI prints them. Each event of a run is sent once, on the
//! agent's broadcast channel ([`crate::Agent::subscribe`]); a run's
//! [`crate::RunOutcome`] repeats the final answer, so a receiver that lagged
//! loses nothing that matters.

use crate::message::Usage;
use droidwarden_services::{Risk, WireError};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One event of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentEvent {
    /// The run.
    pub run_id: String,
    /// Its session.
    pub session_id: String,
    /// For an event of a skill's run: the skill (the run is then a child
    /// of [`AgentEvent::parent_run`], in the same session).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skill: Option<String>,
    /// For an event of a skill's run: the run that invoked the skill.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_run: Option<String>,
    /// What happened.
    #[serde(flatten)]
    pub kind: EventKind,
}

/// Why a run stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model answered without calling tools.
    FinalAnswer,
    /// `max_iterations` model calls were made.
    MaxIterations,
    /// The hard step limit was reached.
    StepLimit,
    /// The model call failed (see the `error` event).
    Error,
    /// The model's reply was cut off at its token limit (`[llm]
    /// max_tokens`, or the context window): no answer (see the `error`
    /// event).
    CutOff,
}

fn error_stop() -> StopReason {
    StopReason::Error
}

impl StopReason {
    /// The reason's name, as serialized (`final_answer`, `cut_off` …).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::FinalAnswer => "final_answer",
            Self::MaxIterations => "max_iterations",
            Self::StepLimit => "step_limit",
            Self::Error => "error",
            Self::CutOff => "cut_off",
        }
    }
}

/// Where a background task is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Delegated and not finished (waiting for a slot, or working).
    Running,
    /// The agent answered.
    Succeeded,
    /// The agent failed (a model error, its time limit, its limits).
    Failed,
    /// The daemon stopped (or was killed) while it ran.
    Interrupted,
}

impl TaskStatus {
    /// The status's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Interrupted => "interrupted",
        }
    }
}

/// A device action waiting for a person's answer. Persisted; survives a
/// restart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingApproval {
    /// Id to pass to [`crate::Agent::approve`] / [`crate::Agent::deny`].
    pub approval_id: String,
    /// The waiting run.
    pub run_id: String,
    /// Its session.
    pub session: String,
    /// The tool call it belongs to.
    pub call_id: String,
    /// Target device, if named.
    pub device: Option<String>,
    /// Service id.
    pub service: String,
    /// Action.
    pub action: String,
    /// Validated parameters.
    pub params: Value,
    /// The action's risk (for a screen action asked about again, its risk
    /// with [`PendingApproval::app`] in front).
    pub risk: Risk,
    /// The app in front, for a screen action the app made riskier
    /// (`[phone_services.ui]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app: Option<String>,
    /// The account that asked for the run, when a way in vouches for one
    /// (`MQTT user "ha"`): it may deny this request but not approve it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asked_by: Option<String>,
    /// When it was requested, unix milliseconds.
    pub requested_at: u64,
    /// When it counts as denied, unix milliseconds.
    pub expires_at: u64,
}

/// An approval request and how it ended, for the record: who answered
/// and when.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalOutcome {
    /// The request.
    #[serde(flatten)]
    pub request: PendingApproval,
    /// `pending`, `approved`, `denied` or `expired`.
    pub status: String,
    /// Why it was denied.
    pub reason: Option<String>,
    /// When it was answered or expired, unix milliseconds.
    pub decided_at: Option<u64>,
    /// Who answered ([`crate::Agent::approve`]); `None` while pending, when
    /// it expired, or for answers stored before this was recorded.
    pub decided_by: Option<String>,
    /// The parameters the person edited, when approved with edits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edited_params: Option<Value>,
    /// The grant the answer gave, when approved for the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<crate::grant::Grant>,
}

/// The kinds of event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum EventKind {
    /// The model asked for a tool.
    ToolCall {
        /// Call id.
        call_id: String,
        /// Tool name as written by the model.
        tool: String,
        /// The arguments (parsed JSON, or the raw text as a string if malformed).
        arguments: Value,
        /// Set when the model wrote the call as text instead of a native
        /// tool call ([`crate::recover`]): how it was written
        /// (`tool_call_tag`, `fenced_json`, `json` …).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        recovered_from: Option<String>,
    },
    /// A tool call finished (executed, refused, denied or invalid).
    ToolResult {
        /// Call id.
        call_id: String,
        /// Tool name.
        tool: String,
        /// Whether it failed.
        is_error: bool,
        /// The result or wire error (as sent to the model, truncated).
        content: Value,
    },
    /// A device action waits for approval.
    ApprovalRequested {
        /// The request.
        approval: PendingApproval,
    },
    /// An approval request was answered, or it expired.
    ApprovalAnswered {
        /// The request.
        approval_id: String,
        /// The tool call it was for.
        call_id: String,
        /// Whether the call may run.
        approved: bool,
        /// Who answered, as the way in that carried the answer names them
        /// (e.g. `D-Bus uid 1000`, `MQTT`); `None` when it expired.
        by: Option<String>,
        /// Why not, when it was denied or expired.
        reason: Option<String>,
        /// The grant this answer gave for the rest of the run, when
        /// approved for the run ([`crate::grant`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        grant: Option<Box<crate::grant::Grant>>,
        /// The model's parameters, when the person edited them.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        original_params: Option<Value>,
        /// The parameters that run instead, when the person edited them
        /// and the edit was accepted.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        edited_params: Option<Value>,
    },
    /// A grant given for the run was revoked: the next action it covered
    /// asks a person again.
    GrantRevoked {
        /// The grant.
        grant_id: String,
        /// Who revoked it.
        by: String,
    },
    /// A piece of the answer text, as streamed.
    TextDelta {
        /// The text.
        text: String,
    },
    /// The run finished with an answer (which may be empty, or stop at a
    /// limit: see `stop_reason`).
    Final {
        /// The answer.
        text: String,
        /// Why it stopped.
        stop_reason: StopReason,
        /// Tokens used by the run.
        usage: Usage,
        /// Model calls the run made.
        #[serde(default)]
        model_calls: u32,
        /// How long the run took, from the ask to its end (a run resumed
        /// after a restart counts the time the daemon was down).
        #[serde(default)]
        duration_ms: u64,
    },
    /// The run failed.
    Error {
        /// What went wrong.
        error: WireError,
        /// Why it stopped: `error`, or `cut_off` (the reply was cut off
        /// at the token limit).
        #[serde(default = "error_stop")]
        stop_reason: StopReason,
        /// Tokens used by the run.
        #[serde(default)]
        usage: Usage,
        /// Model calls the run made.
        #[serde(default)]
        model_calls: u32,
        /// How long the run took.
        #[serde(default)]
        duration_ms: u64,
    },
    /// A plan run's plan (again with `replan: true` after a replan: the
    /// steps still in the plan, done ones included).
    Plan {
        /// The steps, in order.
        steps: Vec<String>,
        /// Whether this replaces an earlier plan.
        replan: bool,
    },
    /// A plan step started.
    StepStarted {
        /// Its index in the run's list of steps.
        index: u32,
        /// What it does.
        task: String,
    },
    /// A plan step ended.
    StepFinished {
        /// Its index.
        index: u32,
        /// What it did.
        task: String,
        /// What it found (its executor's answer).
        finding: String,
        /// False when it stopped at `max_executor_steps`.
        complete: bool,
    },
    /// A skill's run started (sent with the child run's id, tagged with
    /// the skill and the parent run).
    SkillStarted {
        /// The parent's `invoke_skill` call.
        call_id: String,
        /// How deep in skills (1: invoked by the user's run).
        depth: u32,
        /// The input.
        input: Value,
    },
    /// A skill's run ended; its result is the parent's tool result.
    SkillFinished {
        /// The parent's `invoke_skill` call.
        call_id: String,
        /// Why it stopped (`error` for a failure or a time-out).
        stop_reason: StopReason,
        /// Whether it failed.
        is_error: bool,
    },
    /// A background delegation was accepted (sent with the task's id as
    /// `run_id`, tagged `agent:<name>` with the parent run); the task runs
    /// on its own from now on.
    DelegationStarted {
        /// The parent's `delegate_to_<agent>` call.
        call_id: String,
        /// The task (`delegation_status {task_id}`).
        task_id: String,
        /// The agent.
        agent: String,
        /// What it was asked.
        task: String,
    },
    /// A background delegation ended (stored before this is sent).
    DelegationFinished {
        /// The parent's call.
        call_id: String,
        /// The task.
        task_id: String,
        /// The agent.
        agent: String,
        /// `succeeded`, `failed` or `interrupted`.
        status: TaskStatus,
        /// Its answer, when it succeeded.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
        /// Why it failed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<WireError>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_serialize_flat_with_an_event_tag() {
        let ev = AgentEvent {
            run_id: "r1".into(),
            session_id: "s1".into(),
            skill: None,
            parent_run: None,
            kind: EventKind::TextDelta { text: "Hi".into() },
        };
        assert_eq!(
            serde_json::to_value(&ev).unwrap(),
            json!({"run_id": "r1", "session_id": "s1", "event": "text_delta", "text": "Hi"})
        );
        let ev = AgentEvent {
            run_id: "r1".into(),
            session_id: "s1".into(),
            skill: None,
            parent_run: None,
            kind: EventKind::Final {
                text: "done".into(),
                stop_reason: StopReason::MaxIterations,
                usage: Usage::default(),
                model_calls: 10,
                duration_ms: 1200,
            },
        };
        let v = serde_json::to_value(&ev).unwrap();
        assert_eq!(v["event"], "final");
        assert_eq!(v["stop_reason"], "max_iterations");
        assert_eq!(v["model_calls"], 10);
        assert_eq!(v["duration_ms"], 1200);
        let back: AgentEvent = serde_json::from_value(v).unwrap();
        assert_eq!(back, ev);
        for reason in [
            StopReason::FinalAnswer,
            StopReason::MaxIterations,
            StopReason::StepLimit,
            StopReason::Error,
            StopReason::CutOff,
        ] {
            assert_eq!(serde_json::to_value(reason).unwrap(), reason.as_str());
        }
        // An error event stored before these fields existed still reads.
        let old: EventKind = serde_json::from_value(
            json!({"event": "error", "error": {"code": "internal", "message": "x", "retryable": false}}),
        )
        .unwrap();
        assert!(matches!(
            old,
            EventKind::Error {
                stop_reason: StopReason::Error,
                model_calls: 0,
                ..
            }
        ));
    }
}
