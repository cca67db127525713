//! The agent graph: a small explicit state machine, agent step ↔ tool step.
//!
//! [`step`] takes the run's state and one [`Input`] (a model reply, a tool
//! result, an approval answer …) and returns the [`Action`]s to perform
//! (call the model, execute a tool, checkpoint, emit an event, finish). It
//! does no I/O, reads no clock (times come in the inputs) and is tested
//! without a runtime; [`crate::Run::drive`] performs the actions.
//!
//! ```text
//!   Start ─► agent step ──(no tool calls)──────────────► Finish(final answer)
//!              ▲   │ (tool calls; iteration < max_iterations, steps < max_steps)
//!              │   ▼
//!              │  tool step: for each call
//!              │    validate → policy → approval? → execute → truncate → events
//!              └── all calls done: results appended
//! ```
//!
//! The state is serializable: the driver checkpoints it after every step,
//! and [`Input::Resume`] continues a run loaded from the store. A device
//! action that was executing when the process died is reported to the model
//! as interrupted rather than run again (at most once); one that was waiting
//! for approval waits again.

use crate::events::{EventKind, PendingApproval, StopReason};
use crate::grant::Grant;
use crate::message::{Message, ModelReply, TimedMessage, ToolCall, Usage};
use crate::plan::{self, Decision, PlanState, Stage, StepStatus};
use crate::policy::{ApprovalPolicy, Verdict};
use crate::recover::Recovery;
use crate::tools::{Planned, Toolset};
use droidwarden_services::{ErrorCode, Risk, WireError};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::fmt::Write as _;

/// The pseudo-service under which skills appear to the approval policy
/// (`allow = ["skill.bedtime"]`, `deny = ["skill.*"]`) and in approval
/// requests (`service: "skill"`, `action: <skill name>`).
pub const SKILL_SERVICE: &str = "skill";

/// Limits fixed when the run starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunLimits {
    /// Model calls allowed.
    pub max_iterations: u32,
    /// Agent and tool steps allowed, together.
    pub max_steps: u32,
    /// Longest tool result kept, in characters.
    pub max_result_chars: usize,
    /// How long an approval request waits, milliseconds.
    pub approval_timeout_ms: u64,
    /// Whether the run has tools (without: a single model call).
    pub tools_enabled: bool,
    /// Whether a call the model wrote as text is taken as the call
    /// ([`crate::recover`]); checkpoints from before default to on.
    #[serde(default = "on")]
    pub text_calls: bool,
    /// Whether an answer about the phones given without any tool call is
    /// sent back once with a nudge to use a tool.
    #[serde(default = "on")]
    pub tool_nudge: bool,
}

fn on() -> bool {
    true
}

/// The most nudges a run sends (a model that keeps writing broken calls
/// is answered, not nudged forever).
const MAX_NUDGES: u32 = 2;

/// Where the run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Created; the model has not been called yet.
    Ready,
    /// Waiting for the model.
    AwaitingModel,
    /// Waiting for tool calls (executions and approvals).
    RunningTools,
    /// Done; see [`RunState::outcome`].
    Finished,
}

/// Status of one tool call in the current tool step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum CallStatus {
    /// Waiting for a person.
    AwaitingApproval {
        /// The approval id.
        approval_id: String,
        /// Unix ms after which it counts as denied.
        expires_at: u64,
    },
    /// Handed to the executor (checkpointed before it starts).
    Executing,
    /// Finished; the content is what the model will see.
    Done {
        /// Result text (JSON), truncated.
        content: String,
        /// Whether it is an error.
        is_error: bool,
    },
}

/// One tool call of the current tool step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallSlot {
    /// The call as the model wrote it.
    pub call: ToolCall,
    /// The validated call (absent when validation failed).
    pub planned: Option<Planned>,
    /// Where it is.
    pub status: CallStatus,
    /// The parameters a person edited before approving (they run instead
    /// of the model's; the model is told with the result).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edited_params: Option<Value>,
    /// The highest risk the call is cleared for: what the policy or a
    /// grant lets run, or what a person approved (a screen action the app
    /// in front makes riskier is asked about again, `[phone_services.ui]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleared: Option<Risk>,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunOutcome {
    /// The run.
    pub run_id: String,
    /// Its session.
    pub session_id: String,
    /// The answer (empty when the run failed).
    pub text: String,
    /// Why it stopped.
    pub stop_reason: StopReason,
    /// Tokens used.
    pub usage: Usage,
    /// The failure, when `stop_reason` is `error`.
    pub error: Option<WireError>,
    /// The tool calls the run made, in order, with their results.
    #[serde(default)]
    pub steps: Vec<ToolStep>,
    /// Model calls the run made.
    #[serde(default)]
    pub model_calls: u32,
}

/// One tool call of a finished run, for the caller's record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolStep {
    /// Call id.
    pub call_id: String,
    /// Tool name as the model wrote it.
    pub tool: String,
    /// Arguments (parsed JSON, or the raw text when malformed).
    pub arguments: Value,
    /// Whether it failed (then `result` is a wire error).
    pub is_error: bool,
    /// What the model was shown (parsed JSON, or the text).
    pub result: Value,
}

fn tool_steps(messages: &[TimedMessage]) -> Vec<ToolStep> {
    let parse = |text: &str| {
        serde_json::from_str::<Value>(text).unwrap_or_else(|_| Value::String(text.to_owned()))
    };
    let mut steps: Vec<ToolStep> = Vec::new();
    for m in messages {
        match &m.message {
            Message::Assistant { tool_calls, .. } => {
                steps.extend(tool_calls.iter().map(|c| ToolStep {
                    call_id: c.id.clone(),
                    tool: c.name.clone(),
                    arguments: parse(&c.arguments),
                    is_error: false,
                    result: Value::Null,
                }));
            }
            Message::Tool {
                call_id,
                content,
                is_error,
                ..
            } => {
                if let Some(step) = steps.iter_mut().rev().find(|s| &s.call_id == call_id) {
                    step.is_error = *is_error;
                    step.result = parse(content);
                }
            }
            Message::User { .. } => {}
        }
    }
    steps
}

/// Everything about a run; checkpointed as JSON after every step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunState {
    /// Run id.
    pub run_id: String,
    /// Session id.
    pub session_id: String,
    /// Where the run is.
    pub phase: Phase,
    /// Model calls made.
    pub iteration: u32,
    /// Steps taken (agent and tool steps).
    pub steps: u32,
    /// Limits.
    pub limits: RunLimits,
    /// Earlier turns of the session, as they go into the prompt.
    pub history: Vec<Message>,
    /// Archived turns retrieved for this prompt.
    pub recalled: Vec<String>,
    /// This run's messages, the user's prompt first.
    pub messages: Vec<TimedMessage>,
    /// The current tool step's calls.
    pub calls: Vec<CallSlot>,
    /// Tokens used so far.
    pub usage: Usage,
    /// Set when finished.
    pub outcome: Option<RunOutcome>,
    /// Approval requests issued (for ids).
    pub approvals_issued: u32,
    /// Set for a run that runs one skill directly (`droidwarden skill
    /// run`, `cmd/skill`): its first step is this `invoke_skill` call
    /// instead of a model call, and its answer is the skill's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skill_call: Option<ToolCall>,
    /// Set for a plan-and-execute run (see [`crate::plan`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<PlanState>,
    /// Nudges sent: a reply that tried to call a tool and failed, or an
    /// answer about the phones without any tool call.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub nudges: u32,
    /// Whether the nudge to use a tool was sent (once per run).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tool_nudged: bool,
    /// The account that asked for the run, as the way in vouches for it
    /// ([`crate::AskRequest::asked_by`]); a child run has its parent's.
    /// Its approval requests carry it, and that account may not approve
    /// them ([`crate::Agent::answer_as`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asked_by: Option<String>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// What happened, fed to [`step`].
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// Begin a new run.
    Start {
        /// Now, unix ms.
        now_ms: u64,
    },
    /// Continue a run loaded from a checkpoint.
    Resume {
        /// Now, unix ms.
        now_ms: u64,
    },
    /// The model answered.
    ModelReplied {
        /// The answer.
        reply: ModelReply,
        /// Now, unix ms.
        now_ms: u64,
    },
    /// The model call failed for good (after the provider's retries).
    ModelFailed {
        /// What went wrong.
        error: WireError,
        /// Now, unix ms.
        now_ms: u64,
    },
    /// A person answered an approval request (or it expired: `approved`
    /// false with a reason).
    ApprovalAnswered {
        /// The call.
        call_id: String,
        /// Whether it may run.
        approved: bool,
        /// Why not, for the model.
        reason: Option<String>,
        /// Who answered; `None` when it expired.
        by: Option<String>,
        /// Parameters the person edited (merged over the model's), when
        /// approved with edits.
        edits: Option<Map<String, Value>>,
        /// The grant the answer made, when approved for the run.
        grant: Option<Box<Grant>>,
        /// Now, unix ms.
        now_ms: u64,
    },
    /// A tool finished.
    ToolFinished {
        /// The call.
        call_id: String,
        /// Its result.
        result: Result<Value, WireError>,
        /// Now, unix ms.
        now_ms: u64,
    },
}

/// What the driver must do, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Call the model with the conversation in the state.
    CallModel,
    /// Persist the state (and these new approval requests) durably, before
    /// the actions that follow.
    Checkpoint {
        /// Approval requests to persist in the same transaction.
        approvals: Vec<PendingApproval>,
    },
    /// Wait for the answer to an approval request.
    AwaitApproval {
        /// The call.
        call_id: String,
        /// The approval.
        approval_id: String,
        /// Unix ms after which it counts as denied.
        expires_at: u64,
    },
    /// Execute a validated, allowed call.
    Execute {
        /// The call.
        call_id: String,
        /// What to run.
        planned: Planned,
        /// The highest risk it is cleared for: the daemon stops a screen
        /// action the app in front makes riskier (`approval_required`).
        cleared: Risk,
    },
    /// Send an event.
    Emit(EventKind),
    /// The run is over: persist the outcome and the turn, then announce
    /// `final` or `error`.
    Finish(RunOutcome),
}

/// What [`step`] needs besides the state: the tools and the policy.
#[derive(Debug, Clone, Copy)]
pub struct StepEnv<'a> {
    /// The run's tools.
    pub toolset: &'a Toolset,
    /// The approval policy.
    pub policy: &'a ApprovalPolicy,
    /// The run's active grants ([`crate::grant`]): a device action one of
    /// them covers runs without asking.
    pub grants: &'a [Grant],
}

impl RunState {
    /// A new run: `prompt` is the user's message.
    pub fn new(
        run_id: String,
        session_id: String,
        prompt: String,
        history: Vec<Message>,
        recalled: Vec<String>,
        limits: RunLimits,
        now_ms: u64,
    ) -> Self {
        Self {
            run_id,
            session_id,
            phase: Phase::Ready,
            iteration: 0,
            steps: 0,
            limits,
            history,
            recalled,
            messages: vec![TimedMessage {
                at_ms: now_ms,
                message: Message::User { text: prompt },
            }],
            calls: Vec::new(),
            usage: Usage::default(),
            outcome: None,
            approvals_issued: 0,
            skill_call: None,
            plan: None,
            nudges: 0,
            tool_nudged: false,
            asked_by: None,
        }
    }

    /// What the next model call sends: the system prompt's addition, the
    /// messages and whether tools are offered. A ReAct run sends its whole
    /// conversation; a plan run what its stage needs ([`plan::view`]).
    pub fn model_view(&self) -> plan::View {
        match &self.plan {
            None => plan::View {
                system: String::new(),
                messages: self.conversation(),
                tools: self.limits.tools_enabled,
            },
            Some(p) => {
                let step: Vec<Message> = self
                    .messages
                    .iter()
                    .skip(p.step_start)
                    .map(|m| m.message.clone())
                    .collect();
                let mut v = plan::view(p, &self.history, self.prompt(), &step);
                v.tools &= self.limits.tools_enabled;
                v
            }
        }
    }

    /// The conversation to send to the model: earlier turns, then this run.
    pub fn conversation(&self) -> Vec<Message> {
        self.history
            .iter()
            .cloned()
            .chain(self.messages.iter().map(|m| m.message.clone()))
            .collect()
    }

    /// The user's prompt of this run.
    pub fn prompt(&self) -> &str {
        match self.messages.first().map(|m| &m.message) {
            Some(Message::User { text }) => text,
            _ => "",
        }
    }
}

/// Advance the run by one input. See the module documentation.
pub fn step(state: &mut RunState, env: &StepEnv<'_>, input: Input) -> Vec<Action> {
    if state.phase == Phase::Finished {
        return state
            .outcome
            .clone()
            .map(Action::Finish)
            .into_iter()
            .collect();
    }
    match input {
        Input::Start { now_ms } => match (state.phase, state.skill_call.clone()) {
            (Phase::Ready, Some(call)) if state.steps == 0 => {
                // A direct skill run: the skill call stands in for the
                // first model reply; no model call is made or counted.
                state.phase = Phase::AwaitingModel;
                let reply = ModelReply::with_calls(vec![call]);
                model_replied(state, env, reply, now_ms)
            }
            (Phase::Ready, _) => agent_step(state, false),
            _ => Vec::new(),
        },
        Input::Resume { now_ms } => resume(state, now_ms),
        Input::ModelReplied { reply, now_ms } if state.phase == Phase::AwaitingModel => {
            model_replied(state, env, reply, now_ms)
        }
        Input::ModelFailed { error, .. } if state.phase == Phase::AwaitingModel => {
            finish(state, StopReason::Error, String::new(), Some(error))
        }
        Input::ApprovalAnswered {
            call_id,
            approved,
            reason,
            by,
            edits,
            grant,
            now_ms,
        } => {
            let Some((i, approval_id)) = state.calls.iter().enumerate().find_map(|(i, s)| match &s
                .status
            {
                CallStatus::AwaitingApproval { approval_id, .. } if s.call.id == call_id => {
                    Some((i, approval_id.clone()))
                }
                _ => None,
            }) else {
                return Vec::new();
            };
            // Edits are checked again here, against the run's own tools and
            // policy (the answer was checked when given; a checkpoint or a
            // reload may have changed either since).
            let edited = match (&edits, approved) {
                (Some(edits), true) => Some(grants::plan_edited(
                    env.toolset,
                    env.policy,
                    &state.calls[i],
                    edits,
                )),
                _ => None,
            };
            let original = state.calls[i].planned.as_ref().and_then(|p| match p {
                Planned::Device { call, .. } => Some(call.0.params_json()),
                _ => None,
            });
            let edited_params = match &edited {
                Some(Ok(Planned::Device { call, .. })) => Some(call.0.params_json()),
                _ => None,
            };
            state.calls[i].edited_params.clone_from(&edited_params);
            let answered = Action::Emit(EventKind::ApprovalAnswered {
                approval_id,
                call_id: call_id.clone(),
                approved,
                by,
                reason: reason.clone(),
                grant: grant.clone(),
                original_params: edits.as_ref().and(original),
                edited_params,
            });
            let outcome = match edited {
                Some(Ok(planned)) => {
                    state.calls[i].planned = Some(planned.clone());
                    Ok(planned)
                }
                Some(Err(error)) => Err(error),
                None if approved => {
                    // Only validated calls ask for approval; a checkpoint that
                    // says otherwise is answered with an error, not trusted.
                    state.calls[i].planned.clone().ok_or_else(|| {
                        WireError::new(
                            ErrorCode::Internal,
                            "this call has no validated form to run; ask for it again",
                        )
                    })
                }
                None => {
                    let reason = reason.unwrap_or_else(|| "denied by the user".into());
                    Err(WireError::new(
                        ErrorCode::Denied,
                        format!("the user did not approve this action: {reason}"),
                    ))
                }
            };
            match outcome {
                Ok(planned) => {
                    state.calls[i].status = CallStatus::Executing;
                    // What the person was asked about (the app's risk for a
                    // screen action asked about again), and what the run may
                    // do anyway (a grant this answer made counts).
                    let asked = state.calls[i].cleared.unwrap_or(Risk::Low);
                    let cleared = asked.max(clearance(env, &planned)).max(
                        grant
                            .as_ref()
                            .map_or(Risk::Low, |g| g.up_to.min(crate::grant::GRANT_CEILING)),
                    );
                    state.calls[i].cleared = Some(cleared);
                    vec![
                        answered,
                        Action::Checkpoint {
                            approvals: Vec::new(),
                        },
                        Action::Execute {
                            call_id,
                            planned,
                            cleared,
                        },
                    ]
                }
                Err(error) => {
                    let mut out = vec![answered, complete_call(state, i, Err(error))];
                    out.extend(after_result(state, now_ms));
                    out
                }
            }
        }
        Input::ToolFinished {
            call_id,
            result,
            now_ms,
        } => {
            let Some(i) = state
                .calls
                .iter()
                .position(|s| s.call.id == call_id && s.status == CallStatus::Executing)
            else {
                return Vec::new();
            };
            if let Err(error) = &result
                && let Some((app, risk)) = droidwarden_services::ui::required(error)
            {
                return again_for_app(state, env, i, app, risk, now_ms);
            }
            // The model asked for other parameters than what ran: say so,
            // or it may try its own again.
            let result = match (&state.calls[i].edited_params, result) {
                (Some(edited), Ok(value)) => Ok(serde_json::json!({
                    "note": "the user edited the parameters before approving; the action ran with these",
                    "parameters": edited,
                    "result": value,
                })),
                (_, result) => result,
            };
            let mut out = vec![complete_call(state, i, result)];
            out.extend(after_result(state, now_ms));
            out
        }
        // A reply or failure for a phase we have left: stale, ignore.
        Input::ModelReplied { .. } | Input::ModelFailed { .. } => Vec::new(),
    }
}

fn agent_step(state: &mut RunState, checkpoint: bool) -> Vec<Action> {
    let last_text = if state.plan.is_some() {
        last_assistant_text(state)
    } else {
        String::new()
    };
    if let Some(p) = &mut state.plan {
        if state.iteration >= p.limits.max_model_calls {
            // The hard cap on model calls: answer from what was found.
            let text = format!(
                "Stopped after {} model calls (the limit). Findings so far:{}",
                state.iteration,
                p.findings()
            );
            return finish(state, StopReason::MaxIterations, text, None);
        }
        if p.stage == Stage::Executing {
            if p.step_calls >= p.limits.max_executor_steps {
                let text = format!(
                    "(stopped after {} model calls, this step's limit) {}",
                    p.step_calls, last_text
                );
                return step_done(state, text, false, checkpoint);
            }
            p.step_calls += 1;
        }
    } else if state.steps >= state.limits.max_steps {
        let text = last_assistant_text(state);
        return finish(state, StopReason::StepLimit, text, None);
    }
    state.steps += 1;
    state.iteration += 1;
    state.phase = Phase::AwaitingModel;
    let mut out = Vec::with_capacity(2);
    if checkpoint {
        out.push(Action::Checkpoint {
            approvals: Vec::new(),
        });
    }
    out.push(Action::CallModel);
    out
}

/// Whether a provider's stop reason says the reply was cut off at the
/// token limit: OpenAI-compatible `length`, Anthropic `max_tokens` (or
/// `model_context_window_exceeded`), Gemini `MAX_TOKENS`.
fn cut_off(stop_reason: &str) -> bool {
    matches!(
        stop_reason,
        "length" | "max_tokens" | "MAX_TOKENS" | "model_context_window_exceeded"
    )
}

/// A call as it is kept in the conversation: malformed arguments become
/// `{}` (a server that renders the history, as llama.cpp does, rejects a
/// whole request for one malformed call), empty ones too.
fn sent_call(call: &ToolCall) -> ToolCall {
    if call.arguments.trim().is_empty() || crate::tools::malformed_arguments(&call.arguments) {
        ToolCall {
            arguments: "{}".into(),
            ..call.clone()
        }
    } else {
        call.clone()
    }
}

/// Longest part of malformed arguments quoted back to the model.
const QUOTED_ARGUMENTS: usize = 200;

/// The error for malformed arguments says what the model sent (it is not
/// in the conversation any more) and what the tool expects.
fn explain_arguments(toolset: &Toolset, call: &ToolCall, mut error: WireError) -> WireError {
    if !crate::tools::malformed_arguments(&call.arguments) {
        return error;
    }
    let sent: String = call.arguments.chars().take(QUOTED_ARGUMENTS).collect();
    let more = if call.arguments.chars().count() > QUOTED_ARGUMENTS {
        " …"
    } else {
        ""
    };
    error.message = format!(
        "{}. The arguments you sent were: {sent}{more} (kept in the conversation as {{}}). Send the arguments as one JSON object",
        error.message
    );
    match toolset.expected_arguments(&call.name) {
        Some(expected) => {
            let _ = write!(error.message, "; expected: {expected}");
        }
        None => error.message.push_str(", for a tool you have"),
    }
    error
}

/// What to tell a model whose reply is about to be taken as its answer,
/// if it should be asked again: a reply that tried to call a tool and
/// failed (`attempt`: why) is told what a call looks like; an answer
/// about the phones given without a single tool call is told to use a
/// tool (once per run, `tool_nudge`). `None`: accept the answer. Never
/// beyond the model-call limit or [`MAX_NUDGES`].
fn nudge(state: &RunState, env: &StepEnv<'_>, attempt: Option<&str>) -> Option<(String, bool)> {
    let calls_left = match &state.plan {
        None => {
            state.iteration < state.limits.max_iterations && state.steps < state.limits.max_steps
        }
        Some(p) => {
            p.stage == Stage::Executing
                && p.step_calls < p.limits.max_executor_steps
                && state.iteration < p.limits.max_model_calls
        }
    };
    if !calls_left || state.nudges >= MAX_NUDGES || !state.limits.tools_enabled {
        return None;
    }
    let (tool, example) = env.toolset.example_call()?;
    if let Some(why) = attempt {
        return Some((crate::recover::how_to_call(why, &tool, &example), false));
    }
    let used_tools = state.messages.iter().any(
        |m| matches!(&m.message, Message::Assistant { tool_calls, .. } if !tool_calls.is_empty()),
    );
    if state.plan.is_some()
        || !state.limits.tool_nudge
        || state.tool_nudged
        || used_tools
        || !env.toolset.about_phones(state.prompt())
    {
        return None;
    }
    Some((
        format!(
            "You answered without calling a tool. Facts about the phones must come from the tools, not from memory or guesses: call the tool that reads what was asked now, e.g. {tool} with {example}. If no tool can help, say so."
        ),
        true,
    ))
}

fn last_assistant_text(state: &RunState) -> String {
    state
        .messages
        .iter()
        .rev()
        .find_map(|m| match &m.message {
            Message::Assistant { text, .. } if !text.is_empty() => Some(text.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

fn finish(
    state: &mut RunState,
    stop_reason: StopReason,
    text: String,
    error: Option<WireError>,
) -> Vec<Action> {
    state.phase = Phase::Finished;
    let outcome = RunOutcome {
        run_id: state.run_id.clone(),
        session_id: state.session_id.clone(),
        text,
        stop_reason,
        usage: state.usage,
        error,
        steps: tool_steps(&state.messages),
        model_calls: state.iteration,
    };
    state.outcome = Some(outcome.clone());
    vec![Action::Finish(outcome)]
}

fn model_replied(
    state: &mut RunState,
    env: &StepEnv<'_>,
    reply: ModelReply,
    now_ms: u64,
) -> Vec<Action> {
    state.usage.add(reply.usage);
    let mut calls = if state.limits.tools_enabled {
        reply.tool_calls
    } else {
        Vec::new()
    };
    let stage = state.plan.as_ref().map(|p| p.stage);
    let cut = reply.stop_reason.as_deref().filter(|r| cut_off(r));
    // A call written as text (small local models): taken as the call, with
    // the same validation, policy and approvals. Only the model's own
    // reply text is read, never a tool result.
    let mut text = reply.text;
    // A constrained reply's answer (`[llm] tool_choice = "schema"`).
    if let Some(answer) = crate::tools::reply::answer_of(&text) {
        text = answer;
    }
    let mut recovered = None;
    let mut attempt = None;
    if calls.is_empty()
        && state.limits.tools_enabled
        && state.limits.text_calls
        && cut.is_none()
        && matches!(stage, None | Some(Stage::Executing))
    {
        let offered: Vec<&str> = env
            .toolset
            .specs()
            .iter()
            .map(|s| s.name.as_str())
            .collect();
        let toolkit = offered
            .iter()
            .copied()
            .find(|n| *n == crate::tools::TOOLKIT_TOOL);
        match crate::recover::recover(&text, &offered, toolkit) {
            Recovery::Calls {
                calls: found,
                format,
                rest,
            } => {
                calls = found;
                text = rest;
                recovered = Some(format);
            }
            Recovery::Failed(why) => attempt = Some(why),
            Recovery::Text => {}
        }
    }
    // Call ids must be unique within the run (results and events are
    // matched by id): providers without ids (older Gemini models) or that
    // repeat them get fresh ones.
    for i in 0..calls.len() {
        let id = &calls[i].id;
        let taken = id.is_empty()
            || calls[..i].iter().any(|c| &c.id == id)
            || state.messages.iter().any(|m| {
                matches!(&m.message, Message::Assistant { tool_calls, .. }
                    if tool_calls.iter().any(|c| &c.id == id))
            });
        if taken {
            calls[i].id = format!("call_{}_{i}", state.iteration);
        }
    }
    if cut.is_some()
        || matches!(
            stage,
            Some(Stage::Planning | Stage::Refining | Stage::Synthesizing)
        )
    {
        // Planner, refinery and synthesizer get no tools: their text is
        // what counts (kept in the transcript for `session show`). A call
        // cut off at the token limit is incomplete: never run.
        calls.clear();
    }
    state.messages.push(TimedMessage {
        at_ms: now_ms,
        message: Message::Assistant {
            text: text.clone(),
            thinking: reply.thinking,
            // Only well-formed arguments go back into the conversation.
            tool_calls: calls.iter().map(sent_call).collect(),
        },
    });
    if let Some(reason) = cut {
        return finish(
            state,
            StopReason::CutOff,
            String::new(),
            Some(WireError::new(
                ErrorCode::InvalidRequest,
                format!(
                    "the model's reply was cut off at its token limit (stop reason {reason:?}) after {} characters, so it is not an answer; raise [llm] max_tokens (or the model server's context size), or ask for something shorter",
                    text.chars().count()
                ),
            )),
        );
    }
    if calls.is_empty()
        && let Some((nudge, for_tools)) = nudge(state, env, attempt.as_deref())
    {
        state.nudges += 1;
        state.tool_nudged |= for_tools;
        state.messages.push(TimedMessage {
            at_ms: now_ms,
            message: Message::User { text: nudge },
        });
        return agent_step(state, true);
    }
    match stage {
        Some(Stage::Planning) => return planned(state, &text),
        Some(Stage::Refining) => return refined(state, &text),
        Some(Stage::Synthesizing) => {
            return finish(state, StopReason::FinalAnswer, text, None);
        }
        Some(Stage::Executing) if calls.is_empty() => {
            return step_done(state, text, true, true);
        }
        Some(Stage::Executing) => {}
        None => {
            if calls.is_empty() {
                return finish(state, StopReason::FinalAnswer, text, None);
            }
            if state.iteration >= state.limits.max_iterations {
                return finish(state, StopReason::MaxIterations, text, None);
            }
            if state.steps >= state.limits.max_steps {
                return finish(state, StopReason::StepLimit, text, None);
            }
        }
    }
    state.steps += 1;
    state.phase = Phase::RunningTools;
    state.calls.clear();

    let mut events = Vec::new();
    let mut approvals = Vec::new();
    let mut waits = Vec::new();
    let mut executes = Vec::new();
    for call in calls {
        events.push(Action::Emit(EventKind::ToolCall {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            arguments: serde_json::from_str(&call.arguments)
                .unwrap_or_else(|_| Value::String(call.arguments.clone())),
            recovered_from: recovered.map(str::to_owned),
        }));
        let planned = env
            .toolset
            .plan(&call)
            .map_err(|e| explain_arguments(env.toolset, &call, e));
        let index = state.calls.len();
        state.calls.push(CallSlot {
            call: sent_call(&call),
            planned: planned.as_ref().ok().cloned(),
            status: CallStatus::Executing,
            edited_params: None,
            cleared: None,
        });
        let planned = match planned {
            Ok(p) => p,
            Err(e) => {
                events.push(complete_call(state, index, Err(e)));
                continue;
            }
        };
        let verdict = match &planned {
            Planned::Device { call, risk, .. } => match env.policy.phone.check(&call.0) {
                // Refused whatever a person would say: nobody is asked.
                Err(refusal) => {
                    events.push(complete_call(state, index, Err(refusal)));
                    continue;
                }
                Ok(()) => env
                    .policy
                    .decide(call.0.service_id(), call.0.action_name(), *risk),
            },
            // A skill is approved once, as `skill.<name>` at its risk.
            Planned::InvokeSkill { skill, risk, .. } => {
                env.policy.decide(SKILL_SERVICE, skill, *risk)
            }
            // A host's extra tool is approved as `mcp.<tool>` at its risk.
            Planned::Extra { tool, risk, .. } => {
                env.policy
                    .decide(crate::tools::extra::EXTRA_SERVICE, tool, *risk)
            }
            _ => Verdict::Allow,
        };
        // A grant given earlier in this run answers what a person would
        // be asked (never a refusal, never a high or critical action).
        let verdict = match verdict {
            Verdict::Ask if grants::covered(env.grants, &planned).is_some() => Verdict::Allow,
            v => v,
        };
        match verdict {
            Verdict::Allow => {
                let cleared = clearance(env, &planned);
                state.calls[index].cleared = Some(cleared);
                executes.push(Action::Execute {
                    call_id: call.id.clone(),
                    planned,
                    cleared,
                });
            }
            Verdict::Deny(reason) => {
                events.push(complete_call(
                    state,
                    index,
                    Err(WireError::new(ErrorCode::Denied, reason)),
                ));
            }
            Verdict::Ask => {
                let (approval, asked) = ask(state, index, &planned, None, None, now_ms);
                approvals.push(approval);
                waits.extend(asked);
            }
        }
    }
    let mut out = events;
    if all_done(state) {
        out.extend(complete_tools(state, now_ms));
        return out;
    }
    // Persist first when it matters: actions that change a device are
    // marked executing before they start (at most once across a crash), and
    // approval requests exist before they are announced. Reads and local
    // tools are simply run again after a crash, so they need no checkpoint
    // of their own.
    let mutating = executes.iter().any(|a| {
        matches!(
            a,
            Action::Execute {
                planned: Planned::Device { mutates: true, .. }
                    | Planned::InvokeSkill { .. }
                    | Planned::Delegate { .. }
                    | Planned::Extra { .. },
                ..
            }
        )
    });
    if mutating || !approvals.is_empty() {
        out.push(Action::Checkpoint { approvals });
    }
    out.extend(waits);
    out.extend(executes);
    out
}

/// Ask a person about call `index` (`planned`): at `risk` (default: its
/// own) with `app` in front, when the app raised it. The slot waits; the
/// request is returned to be checkpointed, with the actions that announce
/// and await it.
fn ask(
    state: &mut RunState,
    index: usize,
    planned: &Planned,
    risk: Option<Risk>,
    app: Option<String>,
    now_ms: u64,
) -> (PendingApproval, [Action; 2]) {
    let (device, service, action, params, own) = match planned.clone() {
        Planned::Device {
            device,
            call: command,
            risk,
            ..
        } => (
            device,
            command.0.service_id().to_owned(),
            command.0.action_name().to_owned(),
            command.0.params_json(),
            risk,
        ),
        Planned::InvokeSkill {
            skill, input, risk, ..
        } => (None, SKILL_SERVICE.to_owned(), skill, input, risk),
        Planned::Extra {
            tool,
            arguments,
            risk,
        } => (
            None,
            crate::tools::extra::EXTRA_SERVICE.to_owned(),
            tool,
            arguments,
            risk,
        ),
        // Local tools and delegation never need approval (the policy allows
        // them); asked about anyway, they are shown as what they are.
        other => (
            None,
            "local".to_owned(),
            state.calls[index].call.name.clone(),
            serde_json::to_value(&other).unwrap_or(Value::Null),
            Risk::Low,
        ),
    };
    let risk = risk.unwrap_or(own);
    state.approvals_issued += 1;
    let approval_id = format!("{}-a{}", state.run_id, state.approvals_issued);
    let expires_at = now_ms + state.limits.approval_timeout_ms;
    let call_id = state.calls[index].call.id.clone();
    state.calls[index].status = CallStatus::AwaitingApproval {
        approval_id: approval_id.clone(),
        expires_at,
    };
    state.calls[index].cleared = Some(risk);
    let approval = PendingApproval {
        approval_id: approval_id.clone(),
        run_id: state.run_id.clone(),
        session: state.session_id.clone(),
        call_id: call_id.clone(),
        device,
        service,
        action,
        params,
        risk,
        app,
        asked_by: state.asked_by.clone(),
        requested_at: now_ms,
        expires_at,
    };
    let actions = [
        Action::Emit(EventKind::ApprovalRequested {
            approval: approval.clone(),
        }),
        Action::AwaitApproval {
            call_id,
            approval_id,
            expires_at,
        },
    ];
    (approval, actions)
}

/// The highest risk the run may do `planned` at without asking anyone:
/// its own (the policy allowed it), the policy's threshold, and the run's
/// grants on its device.
fn clearance(env: &StepEnv<'_>, planned: &Planned) -> Risk {
    let own = match planned {
        Planned::Device { risk, .. }
        | Planned::InvokeSkill { risk, .. }
        | Planned::Extra { risk, .. } => *risk,
        _ => Risk::Low,
    };
    let listed = match planned {
        Planned::Device { call, .. } => env
            .policy
            .allowed(call.0.service_id(), call.0.action_name()),
        _ => false,
    };
    let threshold = if listed {
        Risk::High
    } else {
        env.policy.auto_approve_up_to.min(Risk::High)
    };
    let granted = match planned {
        Planned::Device { device, .. } => env
            .grants
            .iter()
            .filter(|g| {
                g.active() && g.run_scoped() && device.as_deref() == Some(g.device.as_str())
            })
            .map(|g| g.up_to.min(crate::grant::GRANT_CEILING))
            .max()
            .unwrap_or(Risk::Low),
        _ => Risk::Low,
    };
    own.max(threshold).max(granted)
}

/// Call `i` was stopped before it ran: `app` in front makes it `risk`,
/// above what it was cleared for. A grant that covers that now (given
/// since, or an app allowed on the device) runs it again; otherwise a
/// person is asked, told the app.
fn again_for_app(
    state: &mut RunState,
    env: &StepEnv<'_>,
    i: usize,
    app: Option<String>,
    risk: Risk,
    now_ms: u64,
) -> Vec<Action> {
    let Some(planned) = state.calls[i].planned.clone() else {
        let mut out = vec![complete_call(
            state,
            i,
            Err(WireError::new(
                ErrorCode::Internal,
                "this call has no validated form to ask about",
            )),
        )];
        out.extend(after_result(state, now_ms));
        return out;
    };
    let ran_with = state.calls[i].cleared.unwrap_or(Risk::Low);
    let device = match &planned {
        Planned::Device { device, .. } => device.clone(),
        _ => None,
    };
    let app_allowed = app.as_deref().is_some_and(|app| {
        risk <= crate::grant::GRANT_CEILING
            && env
                .grants
                .iter()
                .any(|g| g.active() && g.covers_app(device.as_deref(), app, now_ms))
    });
    let mut now = clearance(env, &planned);
    if app_allowed {
        now = now.max(risk);
    }
    if risk <= now && now > ran_with {
        state.calls[i].cleared = Some(now);
        return vec![Action::Execute {
            call_id: state.calls[i].call.id.clone(),
            planned,
            cleared: now,
        }];
    }
    let (approval, asked) = ask(state, i, &planned, Some(risk), app, now_ms);
    let mut out = vec![Action::Checkpoint {
        approvals: vec![approval],
    }];
    out.extend(asked);
    out
}

/// The planner answered: a valid plan starts its first step; an invalid
/// one is re-asked once, then the run fails cleanly.
fn planned(state: &mut RunState, text: &str) -> Vec<Action> {
    let Some(p) = &mut state.plan else {
        return Vec::new();
    };
    match plan::parse_plan(text, p.limits.max_plan_steps) {
        Ok(steps) => {
            p.rejected = None;
            p.steps = steps
                .iter()
                .map(|task| plan::PlanStep {
                    task: task.clone(),
                    status: StepStatus::Pending,
                    finding: None,
                })
                .collect();
            let mut out = vec![Action::Emit(EventKind::Plan {
                steps,
                replan: false,
            })];
            out.extend(next_step(state));
            out
        }
        Err(why) if p.rejected.is_none() => {
            p.rejected = Some(why);
            agent_step(state, true)
        }
        Err(why) => finish(
            state,
            StopReason::Error,
            String::new(),
            Some(WireError::new(
                ErrorCode::InvalidRequest,
                format!("the model did not produce a valid plan (asked twice): {why}"),
            )),
        ),
    }
}

/// The current step ended with `finding` (`complete`: the executor
/// answered; else it hit its limit). Next: the refinery.
fn step_done(
    state: &mut RunState,
    finding: String,
    complete: bool,
    checkpoint: bool,
) -> Vec<Action> {
    let Some(p) = &mut state.plan else {
        return Vec::new();
    };
    let finding = truncate(finding, plan::MAX_FINDING_CHARS);
    let index = p.current;
    let Some(step) = p.steps.get_mut(index) else {
        return Vec::new();
    };
    step.status = if complete {
        StepStatus::Done
    } else {
        StepStatus::Incomplete
    };
    step.finding = Some(finding.clone());
    let task = step.task.clone();
    p.executed += 1;
    p.stage = Stage::Refining;
    let mut out = vec![Action::Emit(EventKind::StepFinished {
        index: index as u32,
        task,
        finding,
        complete,
    })];
    out.extend(agent_step(state, checkpoint));
    out
}

/// The refinery answered: continue, replan or finish.
fn refined(state: &mut RunState, text: &str) -> Vec<Action> {
    let Some(p) = &mut state.plan else {
        return Vec::new();
    };
    let mut out = Vec::new();
    match plan::parse_decision(text, p.limits.max_plan_steps) {
        Decision::Finish => {
            p.stage = Stage::Synthesizing;
            return agent_step(state, true);
        }
        Decision::Replan(steps) if p.replans < p.limits.max_replans => {
            p.replans += 1;
            for s in p
                .steps
                .iter_mut()
                .filter(|s| s.status == StepStatus::Pending)
            {
                s.status = StepStatus::Dropped;
            }
            let room = (p.limits.max_plan_steps as usize).saturating_sub(
                p.steps
                    .iter()
                    .filter(|s| s.status != StepStatus::Dropped)
                    .count(),
            );
            p.steps
                .extend(steps.iter().take(room.max(1)).map(|task| plan::PlanStep {
                    task: task.clone(),
                    status: StepStatus::Pending,
                    finding: None,
                }));
            out.push(Action::Emit(EventKind::Plan {
                steps: p
                    .steps
                    .iter()
                    .filter(|s| s.status != StepStatus::Dropped)
                    .map(|s| s.task.clone())
                    .collect(),
                replan: true,
            }));
        }
        Decision::Replan(_) | Decision::Continue => {}
    }
    out.extend(next_step(state));
    out
}

/// Start the next pending step, or the synthesizer when none is left or
/// `max_iterations` steps have run.
fn next_step(state: &mut RunState) -> Vec<Action> {
    let messages = state.messages.len();
    let Some(p) = &mut state.plan else {
        return Vec::new();
    };
    match p.next_pending() {
        Some(i) if p.executed < p.limits.max_executed => {
            p.current = i;
            p.stage = Stage::Executing;
            p.step_start = messages;
            p.step_calls = 0;
            p.steps[i].status = StepStatus::Running;
            let task = p.steps[i].task.clone();
            let mut out = vec![Action::Emit(EventKind::StepStarted {
                index: i as u32,
                task,
            })];
            out.extend(agent_step(state, true));
            out
        }
        _ => {
            p.stage = Stage::Synthesizing;
            agent_step(state, true)
        }
    }
}

fn all_done(state: &RunState) -> bool {
    state
        .calls
        .iter()
        .all(|s| matches!(s.status, CallStatus::Done { .. }))
}

/// Mark call `i` done with `result` (truncated) and return its event.
fn complete_call(state: &mut RunState, i: usize, result: Result<Value, WireError>) -> Action {
    let is_error = result.is_err();
    let value = match result {
        Ok(v) => v,
        Err(e) => serde_json::json!({ "error": e }),
    };
    let content = truncate(value.to_string(), state.limits.max_result_chars);
    let event_content = if content.len() == value.to_string().len() {
        value
    } else {
        Value::String(content.clone())
    };
    let slot = &mut state.calls[i];
    slot.status = CallStatus::Done { content, is_error };
    Action::Emit(EventKind::ToolResult {
        call_id: slot.call.id.clone(),
        tool: slot.call.name.clone(),
        is_error,
        content: event_content,
    })
}

/// Cut `text` to at most `max` characters, saying so.
pub fn truncate(text: String, max: usize) -> String {
    let total = text.chars().count();
    if total <= max {
        return text;
    }
    let keep = max.saturating_sub(64);
    let mut out: String = text.chars().take(keep).collect();
    out.push_str(&format!(
        " … [truncated: {keep} of {total} characters shown]"
    ));
    out
}

fn after_result(state: &mut RunState, now_ms: u64) -> Vec<Action> {
    if all_done(state) {
        complete_tools(state, now_ms)
    } else {
        vec![Action::Checkpoint {
            approvals: Vec::new(),
        }]
    }
}

/// Every call is done: append the results in call order, then the next
/// agent step (a direct skill run ends with its skill's answer instead).
fn complete_tools(state: &mut RunState, now_ms: u64) -> Vec<Action> {
    if state.skill_call.is_some() {
        let result = state.calls.first().and_then(|slot| match &slot.status {
            CallStatus::Done { content, is_error } => Some((content.clone(), *is_error)),
            _ => None,
        });
        complete_tools_messages(state, now_ms);
        return match result {
            Some((content, false)) => {
                let text = serde_json::from_str::<Value>(&content)
                    .ok()
                    .and_then(|v| v.get("text").and_then(Value::as_str).map(str::to_owned))
                    .unwrap_or(content);
                finish(state, StopReason::FinalAnswer, text, None)
            }
            Some((content, true)) => {
                let error = serde_json::from_str::<Value>(&content)
                    .ok()
                    .and_then(|v| serde_json::from_value::<WireError>(v["error"].clone()).ok())
                    .unwrap_or_else(|| WireError::new(ErrorCode::Internal, content));
                finish(state, StopReason::Error, String::new(), Some(error))
            }
            None => finish(
                state,
                StopReason::Error,
                String::new(),
                Some(WireError::new(
                    ErrorCode::Internal,
                    "the skill gave no result",
                )),
            ),
        };
    }
    complete_tools_messages(state, now_ms);
    state.phase = Phase::Ready;
    agent_step(state, true)
}

/// Append the finished calls' results to the messages, in call order.
fn complete_tools_messages(state: &mut RunState, now_ms: u64) {
    for slot in state.calls.drain(..) {
        let CallStatus::Done { content, is_error } = slot.status else {
            continue;
        };
        state.messages.push(TimedMessage {
            at_ms: now_ms,
            message: Message::Tool {
                call_id: slot.call.id,
                name: slot.call.name,
                content,
                is_error,
            },
        });
    }
}

fn resume(state: &mut RunState, now_ms: u64) -> Vec<Action> {
    match state.phase {
        Phase::Ready => agent_step(state, false),
        Phase::AwaitingModel => vec![Action::CallModel],
        Phase::Finished => state
            .outcome
            .clone()
            .map(Action::Finish)
            .into_iter()
            .collect(),
        Phase::RunningTools => {
            let mut out = Vec::new();
            let mut changed = false;
            let mut again = Vec::new();
            for i in 0..state.calls.len() {
                match state.calls[i].status.clone() {
                    CallStatus::AwaitingApproval {
                        approval_id,
                        expires_at,
                    } => again.push(Action::AwaitApproval {
                        call_id: state.calls[i].call.id.clone(),
                        approval_id,
                        expires_at,
                    }),
                    CallStatus::Executing => match state.calls[i].planned.clone() {
                        // Local tools and reads have no side effects: run
                        // them again.
                        Some(
                            p @ (Planned::Calculator { .. }
                            | Planned::CurrentTime
                            | Planned::ListSkills
                            | Planned::ReadSkill { .. }
                            | Planned::DelegationStatus { .. }
                            | Planned::Device { mutates: false, .. }),
                        ) => {
                            again.push(Action::Execute {
                                call_id: state.calls[i].call.id.clone(),
                                planned: p,
                                cleared: state.calls[i].cleared.unwrap_or(Risk::Low),
                            });
                        }
                        _ => {
                            changed = true;
                            out.push(complete_call(
                                state,
                                i,
                                Err(WireError::new(
                                    ErrorCode::Internal,
                                    "the daemon stopped while this action ran; it may or may not have taken effect. Check the state before trying again.",
                                )),
                            ));
                        }
                    },
                    CallStatus::Done { .. } => {}
                }
            }
            if all_done(state) {
                out.extend(complete_tools(state, now_ms));
                return out;
            }
            if changed {
                out.push(Action::Checkpoint {
                    approvals: Vec::new(),
                });
            }
            out.extend(again);
            out
        }
    }
}

pub(crate) mod grants;
#[cfg(test)]
mod tests;
