//! Running a `delegate_to_<agent>` call: the agent's `[[agents]]` entry
//! becomes a child run of the same graph (see [`super::drive_child`],
//! shared with skills), with its system prompt, only its tools, its
//! iteration and time limits and its own provider when it has one, under
//! the parent's approval policy (no grant: every action the child takes is
//! decided as if the parent took it). The child sees the task and the
//! context, never the parent's conversation, and has no delegate tools.
//! Wait mode runs it in the parent's slot and returns its answer;
//! background mode hands it to [`super::background`].

use super::{Agent, Child, Slots, Tag, Within, background, child_limits, run_child};
use crate::clock::now_ms;
use crate::delegation::DelegateMode;
use crate::graph::{Input, RunState};
use crate::host::BoxFuture;
use crate::policy::ApprovalPolicy;
use crate::store;
use crate::tools::{SkillScope, Toolset};
use droidwarden_services::{ErrorCode, WireError};
use std::sync::Arc;

/// A `delegate_to_<agent>` call, validated by the tool pipeline.
pub(super) struct DelegateCall {
    pub(super) agent: String,
    pub(super) task: String,
    pub(super) context: Option<String>,
    /// The mode the call asked for (`None`: the agent's own).
    pub(super) mode: Option<DelegateMode>,
}

/// Start the delegated agent's run. In wait mode its answer or failure is
/// the parent's tool result for `call_id`; in background mode the result
/// is the task id, and the task is handed to the background driver.
pub(super) fn delegate(
    agent: &Agent,
    parent: &RunState,
    parent_tools: &Toolset,
    policy: &ApprovalPolicy,
    call_id: String,
    call: DelegateCall,
    within: Within<'_>,
) -> BoxFuture<'static, Input> {
    let Within { paces, shutdown } = within;
    let cfg = &agent.inner.config;
    let set = parent_tools
        .delegate_set()
        .cloned()
        .unwrap_or_else(|| agent.agents());
    let Some(spec) = set.get(&call.agent) else {
        let message = format!("unknown agent {:?}", call.agent);
        return Box::pin(async move {
            Input::ToolFinished {
                call_id,
                result: Err(WireError::new(ErrorCode::NotFound, message)),
                now_ms: now_ms(),
            }
        });
    };
    let mode = call.mode.unwrap_or(spec.mode);
    let provider = set
        .providers
        .get(&spec.name)
        .cloned()
        .unwrap_or_else(|| agent.inner.provider.clone());
    let skills = parent_tools
        .skills()
        .cloned()
        .unwrap_or_else(|| agent.skills());
    let toolset = Toolset::for_child(
        cfg.tool_mode,
        parent_tools.devices(),
        Arc::new(skills.subset(&spec.skills)),
        SkillScope::agent(&spec.name, spec.allowed.clone()),
        1,
        parent_tools.max_depth(),
    )
    .with_schemas(cfg.tool_schemas);
    let limits = child_limits(cfg, spec.max_iterations, policy, &toolset);
    let prompt = match &call.context {
        Some(context) => format!("{}\n\nContext:\n{context}", call.task),
        None => call.task.clone(),
    };
    // Isolated: no history, no recalled turns, only the task. A background
    // task's run id is its task id.
    let run_id = match mode {
        DelegateMode::Wait => store::new_id("k-"),
        DelegateMode::Background => store::new_id("t-"),
    };
    let state = RunState {
        // The account that asked the parent asked this too.
        asked_by: parent.asked_by.clone(),
        ..RunState::new(
            run_id,
            parent.session_id.clone(),
            prompt,
            Vec::new(),
            Vec::new(),
            limits,
            now_ms(),
        )
    };
    let mut system = format!(
        "{}\n\nYou are the specialised agent \"{}\", working for droidwarden's main agent, which controls the user's Android phones. Use only the tools you are given; a tool you are not given is not allowed. If a tool returns an error, read it and fix the call or report the problem. Finish with a short answer for the main agent.",
        spec.system_prompt.trim(),
        spec.name
    );
    if toolset.has_invoke()
        && let Some(skills) = toolset.skills()
    {
        system.push_str("\n\n");
        system.push_str(&skills.registry_prompt());
    }
    let tag = Tag {
        skill: Some(format!("agent:{}", spec.name)),
        parent_run: Some(parent.run_id.clone()),
    };
    let input = serde_json::json!({ "task": call.task, "context": call.context });
    let child = Child {
        state,
        toolset,
        policy: policy.clone(),
        system,
        timeout: spec.timeout.unwrap_or(cfg.skills.timeout),
        tag,
        kind: "agent",
        name: spec.name.clone(),
        depth: 1,
        input,
        limits_fail: true,
        provider,
        // A background task outlives the call: it takes a slot of its own.
        slots: match mode {
            DelegateMode::Wait => Slots::Child,
            DelegateMode::Background => Slots::Top {
                admission: None,
                slot: None,
            },
        },
        // A background task's time is its own, not the caller's.
        paces: match mode {
            DelegateMode::Wait => paces.to_vec(),
            DelegateMode::Background => Vec::new(),
        },
    };
    match mode {
        DelegateMode::Wait => run_child(agent.clone(), call_id, child, shutdown),
        DelegateMode::Background => background::start(agent, call_id, child, call.task),
    }
}
