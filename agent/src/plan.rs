//! Plan-and-execute mode: the parts of the graph a plan adds, pure like
//! [`crate::graph`].
//!
//! ```text
//!  Start ─► planner ──(valid JSON plan; a bad one is re-asked once)──► step 1
//!             │                                                        │
//!             └─(bad twice)─► Finish(error)                            ▼
//!   ┌──────────────► executor: a ReAct loop (agent step ↔ tool step) for this
//!   │                step only, at most max_executor_steps model calls
//!   │                                   │ the step's answer is its finding
//!   │                                   ▼
//!   │    refinery: {"decision": "continue" | "replan" (+ steps) | "finish"}
//!   └── continue / replan                │ finish, no step left, or
//!                                        ▼ max_iterations steps run
//!                         synthesizer: the answer from the findings ─► Finish
//! ```
//!
//! Three bounds: `max_iterations` (steps executed, the outer loop),
//! `max_executor_steps` (model calls per step) and `max_model_calls` (every
//! model call of the run: planner, executors, refinery, synthesizer). The
//! plan lives in [`crate::graph::RunState`], so a plan survives a restart
//! like every run. [`view`] is what each stage sends to the model.

use crate::message::Message;
use droidwarden_services::schema::NotAnObject;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt::Write as _;

/// Longest step description kept, in characters.
pub const MAX_TASK_CHARS: usize = 500;
/// Longest finding kept per step, in characters.
pub const MAX_FINDING_CHARS: usize = 4000;

/// How a run is carried out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunMode {
    /// One ReAct loop (the default).
    #[default]
    React,
    /// Plan, execute each step, refine, synthesize.
    Plan,
}

impl RunMode {
    /// The mode a request names (`"react"` or `"plan"`); `None` when it
    /// names none (the configured default applies).
    ///
    /// # Errors
    /// Any other name, in a message that says which are valid.
    pub fn named(mode: Option<&str>) -> Result<Option<Self>, String> {
        match mode {
            None => Ok(None),
            Some("react") => Ok(Some(Self::React)),
            Some("plan") => Ok(Some(Self::Plan)),
            Some(other) => Err(format!(
                "mode {:?} must be \"react\" or \"plan\"",
                other.chars().take(40).collect::<String>()
            )),
        }
    }
}

/// The bounds of a plan run (from `[agent]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanLimits {
    /// Most steps a plan may have.
    pub max_plan_steps: u32,
    /// Model calls per executed step.
    pub max_executor_steps: u32,
    /// Model calls in the whole run.
    pub max_model_calls: u32,
    /// Replans allowed.
    pub max_replans: u32,
    /// Steps executed, in total (the outer loop: `max_iterations`).
    pub max_executed: u32,
}

/// Where a plan run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Waiting for (or about to ask) the planner.
    Planning,
    /// Running step `current`.
    Executing,
    /// Deciding what follows a step.
    Refining,
    /// Writing the answer.
    Synthesizing,
}

/// One step's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    /// Not started.
    Pending,
    /// Being executed.
    Running,
    /// Done; see its finding.
    Done,
    /// Stopped at its limit; its finding says so.
    Incomplete,
    /// Dropped by a replan.
    Dropped,
}

/// One step of the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanStep {
    /// What to do.
    pub task: String,
    /// Where it is.
    pub status: StepStatus,
    /// What it found (its executor's answer).
    pub finding: Option<String>,
}

/// The plan part of a run's state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanState {
    /// The stage.
    pub stage: Stage,
    /// The steps, dropped ones included (a replan appends).
    pub steps: Vec<PlanStep>,
    /// The step being executed (or last executed).
    pub current: usize,
    /// Index in the run's messages where the current step's own messages
    /// begin (the executor sees only those).
    pub step_start: usize,
    /// Model calls of the current step.
    pub step_calls: u32,
    /// Steps executed so far.
    pub executed: u32,
    /// Replans so far.
    pub replans: u32,
    /// Why the last plan was refused (it is re-asked once).
    pub rejected: Option<String>,
    /// Bounds.
    pub limits: PlanLimits,
}

impl PlanState {
    /// A plan run about to ask the planner.
    pub fn new(limits: PlanLimits) -> Self {
        Self {
            stage: Stage::Planning,
            steps: Vec::new(),
            current: 0,
            step_start: 0,
            step_calls: 0,
            executed: 0,
            replans: 0,
            rejected: None,
            limits,
        }
    }

    /// The next pending step after the current one.
    pub fn next_pending(&self) -> Option<usize> {
        self.steps
            .iter()
            .enumerate()
            .find(|(_, s)| s.status == StepStatus::Pending)
            .map(|(i, _)| i)
    }

    /// The steps still in the plan (not dropped), as text.
    fn outline(&self) -> String {
        let mut s = String::new();
        for (n, step) in self
            .steps
            .iter()
            .filter(|s| s.status != StepStatus::Dropped)
            .enumerate()
        {
            let status = match step.status {
                StepStatus::Pending => "to do",
                StepStatus::Running => "in progress",
                StepStatus::Done => "done",
                StepStatus::Incomplete => "incomplete",
                StepStatus::Dropped => "dropped",
            };
            let _ = write!(s, "\n{}. [{status}] {}", n + 1, step.task);
        }
        s
    }

    /// The findings so far, as text.
    pub fn findings(&self) -> String {
        let mut s = String::new();
        for step in &self.steps {
            if let Some(f) = &step.finding {
                let _ = write!(s, "\n- {}: {}", step.task, f);
            }
        }
        if s.is_empty() {
            s.push_str("\n(none yet)");
        }
        s
    }
}

/// What a refinery decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Run the next step.
    Continue,
    /// Replace the remaining steps.
    Replan(Vec<String>),
    /// Write the answer now.
    Finish,
}

/// The JSON object in a model's text: the whole text, or the span from its
/// first `{` to its last `}` (models like to wrap JSON in prose or fences).
fn json_object(text: &str) -> Result<serde_json::Map<String, Value>, String> {
    let trimmed = text.trim();
    let span = match (trimmed.find('{'), trimmed.rfind('}')) {
        (Some(a), Some(b)) if a < b => &trimmed[a..=b],
        _ => return Err("the answer holds no JSON object".into()),
    };
    droidwarden_services::schema::object_from_slice(span.as_bytes()).map_err(|e| match e {
        NotAnObject::Other(_) => "the answer is not a JSON object".into(),
        NotAnObject::NotJson(e) => format!("the JSON does not parse: {e}"),
    })
}

/// Validate a list of steps: 1 to `max` non-empty strings (or objects with
/// a `task` string), each at most [`MAX_TASK_CHARS`].
fn steps_of(value: Option<&Value>, max: u32) -> Result<Vec<String>, String> {
    let Some(Value::Array(items)) = value else {
        return Err("\"steps\" must be an array of step descriptions".into());
    };
    if items.is_empty() {
        return Err("the plan has no steps".into());
    }
    if items.len() > max as usize {
        return Err(format!(
            "the plan has {} steps; at most {max} are allowed — merge steps",
            items.len()
        ));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let text = match item {
                Value::String(s) => s.as_str(),
                Value::Object(o) => o.get("task").and_then(Value::as_str).unwrap_or_default(),
                _ => "",
            }
            .trim();
            if text.is_empty() {
                return Err(format!(
                    "step {} must be a non-empty string (or an object with \"task\")",
                    i + 1
                ));
            }
            if text.chars().count() > MAX_TASK_CHARS {
                return Err(format!(
                    "step {} is longer than {MAX_TASK_CHARS} characters",
                    i + 1
                ));
            }
            Ok(text.to_owned())
        })
        .collect()
}

/// Parse a planner's answer: `{"steps": [...]}`.
///
/// # Errors
/// Why it is not a valid plan (the planner is told, once).
pub fn parse_plan(text: &str, max_steps: u32) -> Result<Vec<String>, String> {
    let obj = json_object(text)?;
    steps_of(obj.get("steps"), max_steps)
}

/// Parse a refinery's answer. Anything unreadable counts as `continue`:
/// the plan goes on rather than the run failing on a formality.
pub fn parse_decision(text: &str, max_steps: u32) -> Decision {
    let Ok(obj) = json_object(text) else {
        return Decision::Continue;
    };
    match obj.get("decision").and_then(Value::as_str) {
        Some("finish") => Decision::Finish,
        Some("replan") => match steps_of(obj.get("steps"), max_steps) {
            Ok(steps) => Decision::Replan(steps),
            Err(_) => Decision::Continue,
        },
        _ => Decision::Continue,
    }
}

/// What one model call of a plan run sends: text for the system prompt,
/// the messages, and whether the tools are offered.
#[derive(Debug, Clone, PartialEq)]
pub struct View {
    /// Appended to the system prompt.
    pub system: String,
    /// The conversation.
    pub messages: Vec<Message>,
    /// Whether the tools are offered (only to executors).
    pub tools: bool,
}

/// The request for the plan's current stage. `history` is the session's
/// earlier turns, `prompt` the user's request, `step_messages` the
/// current step's own messages (executor only).
pub fn view(
    plan: &PlanState,
    history: &[Message],
    prompt: &str,
    step_messages: &[Message],
) -> View {
    let max = plan.limits.max_plan_steps;
    match plan.stage {
        Stage::Planning => {
            let mut text = format!(
                "Request: {prompt}\n\nPlan how to carry out this request with the phone tools."
            );
            if let Some(why) = &plan.rejected {
                let _ = write!(
                    text,
                    "\n\nYour previous plan was not valid: {why}. Answer again with only the JSON object."
                );
            }
            View {
                system: format!(
                    "\n\nYou are the planner. Break the user's request into 1 to {max} concrete steps, each one thing to find out or do on the phones, in order. Do not call tools. Answer with only a JSON object: {{\"steps\": [\"first step\", \"second step\"]}}."
                ),
                messages: history
                    .iter()
                    .cloned()
                    .chain([Message::User { text }])
                    .collect(),
                tools: false,
            }
        }
        Stage::Executing => {
            let task = plan
                .steps
                .get(plan.current)
                .map(|s| s.task.as_str())
                .unwrap_or_default();
            let text = format!(
                "Request: {prompt}\nPlan:{}\nFindings so far:{}\n\nDo step {}: {task}",
                plan.outline(),
                plan.findings(),
                plan.current + 1
            );
            View {
                system: "\n\nYou are executing one step of a plan. Use the tools to do only this step, then answer with a short summary of what you found or did (this is the step's finding). If the step cannot be done, say why.".into(),
                messages: std::iter::once(Message::User { text })
                    .chain(step_messages.iter().cloned())
                    .collect(),
                tools: true,
            }
        }
        Stage::Refining => View {
            system: format!(
                "\n\nYou are reviewing a plan's progress. Do not call tools. Answer with only a JSON object: {{\"decision\": \"continue\"}} to run the next step as planned, {{\"decision\": \"replan\", \"steps\": [\"...\"]}} to replace the steps still to do (at most {max}), or {{\"decision\": \"finish\"}} when the findings already answer the request."
            ),
            messages: vec![Message::User {
                text: format!(
                    "Request: {prompt}\nPlan:{}\nFindings so far:{}",
                    plan.outline(),
                    plan.findings()
                ),
            }],
            tools: false,
        },
        Stage::Synthesizing => View {
            system: "\n\nWrite the answer to the user's request from the findings of the plan's steps. Do not call tools. Answer briefly; say plainly what could not be done.".into(),
            messages: history
                .iter()
                .cloned()
                .chain([Message::User {
                    text: format!(
                        "Request: {prompt}\nFindings:{}",
                        plan.findings()
                    ),
                }])
                .collect(),
            tools: false,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_are_validated() {
        assert_eq!(
            parse_plan(
                "Sure! ```json\n{\"steps\": [\"a\", {\"task\": \"b\"}]}\n```",
                8
            ),
            Ok(vec!["a".to_owned(), "b".to_owned()])
        );
        let check = |text: &str, want: &str| {
            let err = parse_plan(text, 8).unwrap_err();
            assert!(err.contains(want), "{text}: {err}");
        };
        check("no json", "no JSON object");
        check("{\"steps\": 3}", "array");
        check("{\"steps\": []}", "no steps");
        check("{\"steps\": [\"\"]}", "step 1");
        check("{\"steps\": [1]}", "step 1");
        check(
            &format!("{{\"steps\": [\"{}\"]}}", "x".repeat(600)),
            "longer",
        );
        let huge = serde_json::json!({"steps": vec!["do it"; 10_000]}).to_string();
        check(&huge, "10000 steps; at most 8");
        check("{\"steps\": [\"a\"", "no JSON object");
    }

    #[test]
    fn decisions_default_to_continue() {
        assert_eq!(
            parse_decision("{\"decision\": \"finish\"}", 8),
            Decision::Finish
        );
        assert_eq!(
            parse_decision("{\"decision\": \"replan\", \"steps\": [\"x\"]}", 8),
            Decision::Replan(vec!["x".into()])
        );
        assert_eq!(
            parse_decision("{\"decision\": \"replan\"}", 8),
            Decision::Continue
        );
        assert_eq!(parse_decision("whatever", 8), Decision::Continue);
        assert_eq!(
            parse_decision("{\"decision\": \"continue\"}", 8),
            Decision::Continue
        );
    }
}
