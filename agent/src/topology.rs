//! The agent graph as a picture: its nodes, the edges between them, and
//! Mermaid and Graphviz renderings (`droidwarden agent graph`).
//!
//! [`node_of`] reads which node a [`RunState`] is at; the edge tables are
//! checked against the machine by the tests below, which drive
//! [`crate::graph::step`] through every path and require that the
//! transitions it makes are exactly the edges drawn — a drawing that drifts
//! from the code fails the build's tests.

use crate::delegation::{DelegateMode, STATUS_TOOL};
use crate::graph::{CallStatus, Phase, RunState};
use crate::plan::{RunMode, Stage};
use crate::tools::Planned;
use std::fmt::Write as _;

/// A node of the agent graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Node {
    /// A new run.
    Start,
    /// The model, with the tools (ReAct).
    Agent,
    /// Tool calls executing.
    Tools,
    /// Tool calls waiting for a person.
    Approval,
    /// A skill running as a child run of this graph.
    Skill,
    /// Plan mode: the planner.
    Planner,
    /// Plan mode: a step's executor (the model, with the tools).
    Executor,
    /// Plan mode: the refinery's decision.
    Refinery,
    /// Plan mode: the answer from the findings.
    Synthesizer,
    /// Done.
    Finish,
}

impl Node {
    /// Identifier in the drawings.
    pub fn id(self) -> &'static str {
        match self {
            Self::Start => "start",
            Self::Agent => "agent",
            Self::Tools => "tools",
            Self::Approval => "approval",
            Self::Skill => "skill",
            Self::Planner => "planner",
            Self::Executor => "executor",
            Self::Refinery => "refinery",
            Self::Synthesizer => "synthesizer",
            Self::Finish => "finish",
        }
    }

    /// Label in the drawings.
    pub fn label(self) -> &'static str {
        match self {
            Self::Start => "start",
            Self::Agent => "agent (model + tools)",
            Self::Tools => "tools: validate, policy, execute",
            Self::Approval => "approval (a person)",
            Self::Skill => "invoke_skill: child run",
            Self::Planner => "planner",
            Self::Executor => "executor (ReAct, one step)",
            Self::Refinery => "refinery: continue / replan / finish",
            Self::Synthesizer => "synthesizer",
            Self::Finish => "finish",
        }
    }
}

/// The node a run is at.
pub fn node_of(state: &RunState) -> Node {
    match state.phase {
        Phase::Finished => Node::Finish,
        Phase::Ready if state.iteration == 0 => Node::Start,
        Phase::Ready | Phase::AwaitingModel => match state.plan.as_ref().map(|p| p.stage) {
            None => Node::Agent,
            Some(Stage::Planning) => Node::Planner,
            Some(Stage::Executing) => Node::Executor,
            Some(Stage::Refining) => Node::Refinery,
            Some(Stage::Synthesizing) => Node::Synthesizer,
        },
        Phase::RunningTools => {
            let waiting = |f: &dyn Fn(&crate::graph::CallSlot) -> bool| state.calls.iter().any(f);
            if waiting(&|s| matches!(s.status, CallStatus::AwaitingApproval { .. })) {
                Node::Approval
            } else if waiting(&|s| {
                s.status == CallStatus::Executing
                    && matches!(s.planned, Some(Planned::InvokeSkill { .. }))
            }) {
                Node::Skill
            } else {
                Node::Tools
            }
        }
    }
}

/// An edge: from, to, what makes the run take it.
pub type Edge = (Node, Node, &'static str);

const REACT: &[Edge] = &[
    (Node::Start, Node::Agent, "ask"),
    (Node::Agent, Node::Tools, "tool calls"),
    (Node::Agent, Node::Approval, "a call above the threshold"),
    (Node::Agent, Node::Skill, "invoke_skill"),
    (Node::Agent, Node::Agent, "every call refused or invalid"),
    (
        Node::Agent,
        Node::Finish,
        "answer, limit, cut-off reply or model error",
    ),
    (Node::Tools, Node::Agent, "results"),
    (Node::Tools, Node::Tools, "one of several calls done"),
    (Node::Approval, Node::Tools, "approved"),
    (Node::Approval, Node::Agent, "denied or expired"),
    (Node::Approval, Node::Skill, "skill approved"),
    (Node::Tools, Node::Finish, "step limit"),
    (Node::Skill, Node::Agent, "the skill's result"),
];

const PLAN: &[Edge] = &[
    (Node::Start, Node::Planner, "ask, mode plan"),
    (
        Node::Planner,
        Node::Planner,
        "invalid plan: asked again once",
    ),
    (Node::Planner, Node::Executor, "plan"),
    (Node::Planner, Node::Finish, "invalid plan twice"),
    (Node::Executor, Node::Tools, "tool calls"),
    (Node::Executor, Node::Approval, "a call above the threshold"),
    (Node::Executor, Node::Skill, "invoke_skill"),
    (Node::Executor, Node::Refinery, "the step's finding"),
    (Node::Tools, Node::Executor, "results"),
    (Node::Tools, Node::Refinery, "max_executor_steps reached"),
    (Node::Approval, Node::Tools, "approved"),
    (Node::Approval, Node::Executor, "denied or expired"),
    (Node::Approval, Node::Skill, "skill approved"),
    (Node::Skill, Node::Executor, "the skill's result"),
    (Node::Skill, Node::Refinery, "max_executor_steps reached"),
    (Node::Refinery, Node::Executor, "continue or replan"),
    (Node::Refinery, Node::Synthesizer, "finish, or no step left"),
    (Node::Synthesizer, Node::Finish, "answer"),
];

/// The edges of the graph in `mode`.
pub fn edges(mode: RunMode) -> &'static [Edge] {
    match mode {
        RunMode::React => REACT,
        RunMode::Plan => PLAN,
    }
}

/// The graph in Mermaid (`flowchart TD`). `skills` adds one node per skill
/// under the skill node (each runs the same graph as a child).
pub fn mermaid(mode: RunMode, skills: &[String]) -> String {
    mermaid_with_agents(mode, skills, &[])
}

/// The node that calls tools, where delegations start.
fn tool_caller(mode: RunMode) -> Node {
    match mode {
        RunMode::React => Node::Agent,
        RunMode::Plan => Node::Executor,
    }
}

/// As [`mermaid`], plus one node per `[[agents]]` entry (name and default
/// mode), reached from the node that calls tools by its
/// `delegate_to_<name>` tool. Each runs the same graph as a child; in wait
/// mode it answers back, in background mode its result goes to the stored
/// tasks, which the caller reads with `delegation_status`.
pub fn mermaid_with_agents(
    mode: RunMode,
    skills: &[String],
    agents: &[(String, DelegateMode)],
) -> String {
    let mut s = String::from("flowchart TD\n");
    for n in &nodes(mode) {
        let _ = writeln!(s, "    {}[\"{}\"]", n.id(), n.label());
    }
    for (from, to, label) in edges(mode) {
        let _ = writeln!(s, "    {} -->|{}| {}", from.id(), label, to.id());
    }
    for (i, name) in skills.iter().enumerate() {
        let _ = writeln!(s, "    skill_{i}[\"skill: {name}\"]");
        let _ = writeln!(s, "    skill -.->|{name}| skill_{i}");
    }
    let caller = tool_caller(mode).id();
    for (i, (name, how)) in agents.iter().enumerate() {
        let _ = writeln!(s, "    delegate_{i}[\"agent: {name}\"]");
        match how {
            DelegateMode::Wait => {
                let _ = writeln!(s, "    {caller} -.->|delegate_to_{name}| delegate_{i}");
                let _ = writeln!(s, "    delegate_{i} -.->|the agent's answer| {caller}");
            }
            DelegateMode::Background => {
                let _ = writeln!(
                    s,
                    "    {caller} -.->|delegate_to_{name} background| delegate_{i}"
                );
                let _ = writeln!(s, "    delegate_{i} -.->|task result| {TASKS}");
            }
        }
    }
    if !agents.is_empty() {
        let _ = writeln!(s, "    {TASKS}[(\"background tasks\")]");
        let _ = writeln!(s, "    {caller} -.->|{STATUS_TOOL}| {TASKS}");
    }
    s
}

/// The nodes the edges of `mode` join, each once, in order.
fn nodes(mode: RunMode) -> Vec<Node> {
    let mut nodes: Vec<Node> = edges(mode).iter().flat_map(|e| [e.0, e.1]).collect();
    nodes.sort();
    nodes.dedup();
    nodes
}

/// The node of the stored background tasks.
const TASKS: &str = "tasks";

/// The graph in Graphviz DOT.
pub fn dot(mode: RunMode, skills: &[String]) -> String {
    dot_with_agents(mode, skills, &[])
}

/// As [`dot`], with the delegation edges of [`mermaid_with_agents`].
pub fn dot_with_agents(
    mode: RunMode,
    skills: &[String],
    agents: &[(String, DelegateMode)],
) -> String {
    let mut s = String::from("digraph agent {\n    rankdir=TB;\n");
    for n in &nodes(mode) {
        let _ = writeln!(s, "    {} [label=\"{}\"];", n.id(), n.label());
    }
    for (from, to, label) in edges(mode) {
        let _ = writeln!(s, "    {} -> {} [label=\"{}\"];", from.id(), to.id(), label);
    }
    for (i, name) in skills.iter().enumerate() {
        let _ = writeln!(
            s,
            "    skill_{i} [label=\"skill: {}\"];\n    skill -> skill_{i} [style=dashed];",
            name.replace('"', "'")
        );
    }
    let caller = tool_caller(mode).id();
    for (i, (name, how)) in agents.iter().enumerate() {
        match how {
            DelegateMode::Wait => {
                let _ = writeln!(
                    s,
                    "    delegate_{i} [label=\"agent: {name}\"];\n    {caller} -> delegate_{i} [style=dashed, label=\"delegate_to_{name}\"];\n    delegate_{i} -> {caller} [style=dashed];"
                );
            }
            DelegateMode::Background => {
                let _ = writeln!(
                    s,
                    "    delegate_{i} [label=\"agent: {name}\"];\n    {caller} -> delegate_{i} [style=dashed, label=\"delegate_to_{name} background\"];\n    delegate_{i} -> {TASKS} [style=dashed, label=\"task result\"];"
                );
            }
        }
    }
    if !agents.is_empty() {
        let _ = writeln!(
            s,
            "    {TASKS} [label=\"background tasks\", shape=cylinder];\n    {caller} -> {TASKS} [style=dashed, label=\"{STATUS_TOOL}\"];"
        );
    }
    s.push_str("}\n");
    s
}

#[cfg(test)]
mod tests;
