//! droidwarden's agent runtime: a language model that reads and controls
//! Android phones through the service catalogue, safely.
//!
//! * [`provider`] — the [`Provider`] trait and OpenAI-compatible, Anthropic
//!   and Gemini implementations (timeouts, retries with backoff honouring
//!   `Retry-After`, streaming, clear errors for bad keys and unknown models).
//! * [`tools`] — the catalogue as tools (toolkit or direct mode), schemas
//!   rendered per provider, validation of tool calls, `current_time` and
//!   `calculator`.
//! * [`graph`] — the agent graph as a pure state machine
//!   (`step(&mut RunState, Input) -> Vec<Action>`), tested without a runtime.
//! * `limit` — the bound on runs at once and runs waiting (`busy` beyond it).
//! * [`skills`] — Agent Skills (`SKILL.md`): the loader, the built-in
//!   skills and the `allowed-tools` rules a skill's run is held to.
//! * [`plan`] — plan-and-execute mode: planner, executors, refinery,
//!   synthesizer, as more states of the same graph.
//! * [`topology`] — the graph's nodes and edges, checked against the
//!   machine, rendered as Mermaid or DOT.
//! * [`policy`] — approval policy: risk threshold, allow and deny lists.
//! * [`Store`] — SQLite (WAL) on its own thread: checkpoints, sessions,
//!   approvals, and FTS5 memory of archived turns.
//! * [`Agent`] / [`Run`] — the handle the daemon uses and the thin async
//!   driver that performs the machine's actions.
//! * [`testing`] (feature `testing`) — a scripted LLM HTTP server, an
//!   in-process scripted model and a fake tool host.
//!
//! Architecture invariant: this crate knows the catalogue and language
//! models, not MQTT, D-Bus, transports or configuration files. It spawns no
//! tasks (the daemon spawns [`Run::drive`]); its only thread is the SQLite
//! store's. See `docs/agent.md`.
#![deny(missing_docs)]

mod agent;
pub mod clock;
pub mod config;
pub mod delegation;
mod error;
pub mod events;
pub mod grant;
pub mod graph;
mod host;
mod ids;
pub mod images;
mod limit;
mod markdown;
pub mod message;
pub mod plan;
pub mod policy;
pub mod provider;
pub mod recover;
mod secret;
pub mod skills;
mod store;
pub mod tools;
pub mod topology;

#[cfg(feature = "testing")]
pub mod testing;

pub use agent::external::{ExternalAnswer, ExternalRequest};
pub use agent::{Agent, AskRequest, Delegation, MAX_PROMPT_CHARS, Run, RunEvents};
pub use config::{AgentConfig, LlmConfig, ProviderKind, RawAgentConfig, RawLlmConfig};
pub use error::{AgentError, ModelFeature, TimeoutKind};
pub use events::{AgentEvent, ApprovalOutcome, EventKind, PendingApproval, StopReason};
pub use grant::{ApprovalDecision, GRANT_CEILING, Grant};
pub use graph::{RunOutcome, ToolStep};
pub use host::{BoxFuture, DeviceSummary, ToolFuture, ToolHost};
pub use message::{Message, ModelReply, ToolCall, Usage};
pub use plan::RunMode;
pub use policy::ApprovalPolicy;
pub use provider::{ChatRequest, Provider};
pub use secret::{KeySource, Secret};
pub use store::{Durability, RunInfo, SessionSummary, Store, Task, TaskStatus, check_id};
pub use tools::ToolMode;
