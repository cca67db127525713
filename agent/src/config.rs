//! Configuration in two stages: raw serde structs that reject unknown keys
//! and do no I/O ([`RawLlmConfig`], [`RawAgentConfig`]), turned by
//! `TryFrom` into validated structs ([`LlmConfig`], [`AgentConfig`]) whose
//! errors name the key. The daemon parses the file; this crate owns the
//! shapes and the rules.
//!
//! ```toml
//! [llm]
//! provider = "openai"            # "openai" | "anthropic" | "gemini"
//! base_url = "http://127.0.0.1:11434/v1"   # optional; default per provider
//! model = "qwen2.5:7b"
//! api_key_env = "OPENAI_API_KEY" # or api_key_file = "/run/credentials/…/llm"
//! connect_timeout_s = 10
//! first_byte_timeout_s = 600     # the prompt is read before the first byte
//! idle_timeout_s = 120           # silence once the answer began
//! # request_timeout_s = 3600     # optional cap on a whole request
//! max_tokens = 1024
//! vision = "auto"                # or true / false
//!
//! [agent]
//! tool_mode = "toolkit"          # or "direct"
//! max_iterations = 10
//! memory_turns = 10
//! memory_recall = 3
//! [agent.approval]
//! auto_approve_up_to = "low"
//! allow = ["audio_automation.mute"]
//! deny = ["airplane_mode.enable"]
//! timeout_s = 300
//! ```

use crate::error::AgentError;
use crate::policy::ApprovalPolicy;
use crate::tools::ToolMode;
use droidwarden_services::{Catalogue, Risk};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

pub use crate::provider::config::{LlmConfig, ProviderKind, RawLlmConfig, Vision};
use crate::provider::config::{config_err, secs};

/// `[agent.approval]` as written.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawApprovalConfig {
    /// `low` (default), `medium` or `high`.
    pub auto_approve_up_to: Option<Risk>,
    /// `service.action` or `service.*` that always run.
    pub allow: Option<Vec<String>>,
    /// `service.action` or `service.*` that never run.
    pub deny: Option<Vec<String>>,
    /// Seconds an approval request waits (default 300).
    pub timeout_s: Option<f64>,
}

/// `[agent]` as written.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAgentConfig {
    /// `toolkit` (default) or `direct`.
    pub tool_mode: Option<ToolMode>,
    /// `index` (default: a compact index, an action's schema on demand) or
    /// `full` (every schema in the tools).
    pub tool_schemas: Option<crate::tools::ToolSchemas>,
    /// Model calls per run (default 10).
    pub max_iterations: Option<u32>,
    /// Hard limit on graph steps, agent and tool steps together (default 4 × max_iterations + 4).
    pub max_steps: Option<u32>,
    /// Replaces the built-in system prompt.
    pub system_prompt: Option<String>,
    /// Recent turns kept verbatim in the prompt (default 10).
    pub memory_turns: Option<u32>,
    /// Archived turns retrieved by full-text search per prompt (default 3; 0 turns it off).
    pub memory_recall: Option<u32>,
    /// Bound on one device action, seconds (default 60).
    pub tool_timeout_s: Option<f64>,
    /// Retries of a device action on retryable errors (default 2).
    pub tool_retries: Option<u32>,
    /// Longest tool result shown to the model, characters (default 16000).
    pub max_result_chars: Option<usize>,
    /// Offer `current_time` and `calculator` (default true).
    pub builtin_tools: Option<bool>,
    /// Take a tool call the model wrote as text (`{"name": …, "arguments":
    /// …}`, `<tool_call>…</tool_call>` …) as the call (default true).
    pub text_tool_calls: Option<bool>,
    /// Send an answer about the phones given without any tool call back
    /// once, asking the model to use a tool (default true).
    pub tool_nudge: Option<bool>,
    /// Broadcast channel capacity for events (default 1024).
    pub event_capacity: Option<usize>,
    /// `process` (default: survives a killed process) or `power` (also
    /// power loss; one fsync per commit). Pass to [`crate::Store::open`].
    pub durability: Option<crate::store::Durability>,
    /// Runs talking to the model and the phones at once (default 4).
    pub max_concurrent_runs: Option<usize>,
    /// Further runs waiting for one of those slots (default 32); an ask
    /// beyond both is refused with `busy`.
    pub max_queued: Option<usize>,
    /// Background delegations delegated and not finished, at most (default
    /// 8; 0 turns background mode off). They run in the same slots as runs.
    pub max_background_tasks: Option<usize>,
    /// Approval policy.
    pub approval: Option<RawApprovalConfig>,
    /// Skills.
    pub skills: Option<RawSkillsConfig>,
    /// `react` (default) or `plan` (plan-and-execute; per request too).
    pub mode: Option<crate::plan::RunMode>,
    /// Plan mode: model calls per executed step (default 5).
    pub max_executor_steps: Option<u32>,
    /// Plan mode: most steps in a plan (default 8).
    pub max_plan_steps: Option<u32>,
    /// Plan mode: model calls in a whole run, every stage counted
    /// (default 4 × max_iterations + 10).
    pub max_model_calls: Option<u32>,
}

/// `[agent.skills]` as written.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSkillsConfig {
    /// Directories of skills (default: `/etc/droidwarden/skills` and
    /// `$STATE/skills`, filled in by the daemon, which knows the state
    /// directory).
    pub dirs: Option<Vec<PathBuf>>,
    /// Skills the agent may use: names, or `"*"` (default) for all.
    pub enabled: Option<Vec<String>>,
    /// Deepest chain of skills invoking skills (default 3).
    pub max_depth: Option<u32>,
    /// A skill run's time limit when its `SKILL.md` gives none, seconds
    /// (default 300).
    pub timeout_s: Option<f64>,
}

/// The validated `[agent.skills]` section.
#[derive(Debug, Clone, PartialEq)]
pub struct SkillsConfig {
    /// Directories to load, in order (later ones override earlier ones and
    /// the built-in skills); `None`: the daemon's defaults.
    pub dirs: Option<Vec<PathBuf>>,
    /// Enabled skill names, or `"*"`.
    pub enabled: Vec<String>,
    /// Deepest chain of skills invoking skills.
    pub max_depth: u32,
    /// Default time limit of a skill run.
    pub timeout: Duration,
}

impl TryFrom<RawSkillsConfig> for SkillsConfig {
    type Error = AgentError;

    fn try_from(raw: RawSkillsConfig) -> Result<Self, AgentError> {
        let enabled = raw.enabled.unwrap_or_else(|| vec!["*".to_owned()]);
        if let Some(bad) = enabled
            .iter()
            .find(|e| *e != "*" && !crate::skills::valid_name(e))
        {
            return Err(config_err(
                "agent.skills.enabled",
                format!(
                    "{bad:?} is not a skill name (lowercase letters, digits, hyphens) or \"*\""
                ),
            ));
        }
        let max_depth = raw
            .max_depth
            .unwrap_or(crate::tools::DEFAULT_MAX_SKILL_DEPTH);
        if !(1..=10).contains(&max_depth) {
            return Err(config_err("agent.skills.max_depth", "must be 1 to 10"));
        }
        Ok(Self {
            dirs: raw.dirs,
            enabled,
            max_depth,
            timeout: secs("agent.skills.timeout_s", raw.timeout_s, 300.0, 3600.0)?,
        })
    }
}

/// The validated `[agent]` section.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentConfig {
    /// Tool mode.
    pub tool_mode: ToolMode,
    /// How much of the schemas the tools carry.
    pub tool_schemas: crate::tools::ToolSchemas,
    /// Model calls per run.
    pub max_iterations: u32,
    /// Hard step limit.
    pub max_steps: u32,
    /// System prompt.
    pub system_prompt: String,
    /// Recent turns in the prompt.
    pub memory_turns: u32,
    /// Archived turns retrieved per prompt.
    pub memory_recall: u32,
    /// Bound on one device action.
    pub tool_timeout: Duration,
    /// Retries on retryable device errors.
    pub tool_retries: u32,
    /// Longest tool result.
    pub max_result_chars: usize,
    /// Offer the built-in tools.
    pub builtin_tools: bool,
    /// Take tool calls written as text.
    pub text_tool_calls: bool,
    /// Nudge an answer about the phones without any tool call, once.
    pub tool_nudge: bool,
    /// Event channel capacity.
    pub event_capacity: usize,
    /// Checkpoint after every step (always on in production; the benchmark
    /// turns it off to measure the loop alone).
    pub checkpoint_steps: bool,
    /// How durable store commits are.
    pub durability: crate::store::Durability,
    /// Runs driven at once (model calls and device work); see `limit.rs`.
    pub max_concurrent_runs: usize,
    /// Runs admitted beyond those, waiting in order for a slot.
    pub max_queued: usize,
    /// Background delegations not finished, at most.
    pub max_background_tasks: usize,
    /// Approval policy.
    pub approval: ApprovalPolicy,
    /// Skills.
    pub skills: SkillsConfig,
    /// The default run mode.
    pub mode: crate::plan::RunMode,
    /// Plan mode's bounds (`max_executed` is `max_iterations`).
    pub plan: crate::plan::PlanLimits,
    /// Specialised agents the main agent may delegate to (`[[agents]]`,
    /// validated with [`crate::delegation::validate`]).
    pub agents: Vec<crate::delegation::DelegateConfig>,
}

/// The built-in system prompt.
pub const DEFAULT_SYSTEM_PROMPT: &str = "You are droidwarden, an assistant that reads and controls the user's Android phones through tools. Use the tools to find facts instead of guessing, and base your answer on their results. If a tool returns an error, read it, fix the call and try again, or explain the problem. If an action was denied, say so and do not try to get around it. Answer briefly.";

impl Default for AgentConfig {
    fn default() -> Self {
        Self::try_from(RawAgentConfig::default()).expect("the defaults are valid")
    }
}

fn check_entries(
    key: &str,
    entries: Vec<String>,
) -> Result<std::collections::BTreeSet<String>, AgentError> {
    let catalogue = Catalogue::get();
    let mut out = std::collections::BTreeSet::new();
    for e in entries {
        let Some((service, action)) = e.split_once('.') else {
            return Err(config_err(
                key,
                format!("{e:?} must be service.action or service.*"),
            ));
        };
        if service == crate::graph::SKILL_SERVICE {
            // `skill.<name>` or `skill.*`: skills load later and may be
            // added on reload, so only the name's form is checked here.
            if action != "*" && !crate::skills::valid_name(action) {
                return Err(config_err(
                    key,
                    format!("{e:?}: {action:?} is not a valid skill name"),
                ));
            }
            out.insert(e);
            continue;
        }
        let spec = catalogue
            .service(service)
            .map_err(|err| config_err(key, err.to_string()))?;
        if action != "*" {
            catalogue
                .action(spec.id, action)
                .map_err(|err| config_err(key, err.to_string()))?;
        }
        out.insert(format!("{}.{action}", spec.id));
    }
    Ok(out)
}

impl TryFrom<RawAgentConfig> for AgentConfig {
    type Error = AgentError;

    fn try_from(raw: RawAgentConfig) -> Result<Self, AgentError> {
        let max_iterations = raw.max_iterations.unwrap_or(10);
        if !(1..=1000).contains(&max_iterations) {
            return Err(config_err("agent.max_iterations", "must be 1 to 1000"));
        }
        let max_steps = raw.max_steps.unwrap_or(max_iterations * 4 + 4);
        if max_steps < 1 {
            return Err(config_err("agent.max_steps", "must be at least 1"));
        }
        let max_result_chars = raw.max_result_chars.unwrap_or(16_000);
        if max_result_chars < 256 {
            return Err(config_err("agent.max_result_chars", "must be at least 256"));
        }
        let event_capacity = raw.event_capacity.unwrap_or(1024);
        if !(16..=1 << 20).contains(&event_capacity) {
            return Err(config_err("agent.event_capacity", "must be 16 to 1048576"));
        }
        let max_concurrent_runs = raw.max_concurrent_runs.unwrap_or(4);
        if !(1..=1024).contains(&max_concurrent_runs) {
            return Err(config_err("agent.max_concurrent_runs", "must be 1 to 1024"));
        }
        let max_queued = raw.max_queued.unwrap_or(32);
        if max_queued > 100_000 {
            return Err(config_err("agent.max_queued", "must be 0 to 100000"));
        }
        let max_background_tasks = raw.max_background_tasks.unwrap_or(8);
        if max_background_tasks > 1024 {
            return Err(config_err(
                "agent.max_background_tasks",
                "must be 0 to 1024",
            ));
        }
        let approval = raw.approval.unwrap_or_default();
        let skills = SkillsConfig::try_from(raw.skills.unwrap_or_default())?;
        let max_executor_steps = raw.max_executor_steps.unwrap_or(5);
        if !(1..=100).contains(&max_executor_steps) {
            return Err(config_err("agent.max_executor_steps", "must be 1 to 100"));
        }
        let max_plan_steps = raw.max_plan_steps.unwrap_or(8);
        if !(1..=50).contains(&max_plan_steps) {
            return Err(config_err("agent.max_plan_steps", "must be 1 to 50"));
        }
        let max_model_calls = raw
            .max_model_calls
            .unwrap_or(max_iterations.saturating_mul(4).saturating_add(10));
        if !(3..=10_000).contains(&max_model_calls) {
            return Err(config_err("agent.max_model_calls", "must be 3 to 10000"));
        }
        Ok(Self {
            skills,
            agents: Vec::new(),
            mode: raw.mode.unwrap_or_default(),
            plan: crate::plan::PlanLimits {
                max_plan_steps,
                max_executor_steps,
                max_model_calls,
                max_replans: 2,
                max_executed: max_iterations,
            },
            max_concurrent_runs,
            max_queued,
            max_background_tasks,
            tool_mode: raw.tool_mode.unwrap_or(ToolMode::Toolkit),
            tool_schemas: raw.tool_schemas.unwrap_or_default(),
            max_iterations,
            max_steps,
            system_prompt: raw
                .system_prompt
                .unwrap_or_else(|| DEFAULT_SYSTEM_PROMPT.to_owned()),
            memory_turns: raw.memory_turns.unwrap_or(10).min(1000),
            memory_recall: raw.memory_recall.unwrap_or(3).min(50),
            tool_timeout: secs("agent.tool_timeout_s", raw.tool_timeout_s, 60.0, 3600.0)?,
            tool_retries: raw.tool_retries.unwrap_or(2).min(10),
            max_result_chars,
            builtin_tools: raw.builtin_tools.unwrap_or(true),
            text_tool_calls: raw.text_tool_calls.unwrap_or(true),
            tool_nudge: raw.tool_nudge.unwrap_or(true),
            event_capacity,
            checkpoint_steps: true,
            durability: raw.durability.unwrap_or_default(),
            approval: ApprovalPolicy {
                auto_approve_up_to: approval.auto_approve_up_to.unwrap_or(Risk::Low),
                allow: check_entries("agent.approval.allow", approval.allow.unwrap_or_default())?,
                deny: check_entries("agent.approval.deny", approval.deny.unwrap_or_default())?,
                timeout: secs(
                    "agent.approval.timeout_s",
                    approval.timeout_s,
                    300.0,
                    7.0 * 86_400.0,
                )?,
                phone: droidwarden_services::PhonePolicy::default(),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secret::KeySource;

    fn llm(toml_like: serde_json::Value) -> Result<LlmConfig, String> {
        let raw: RawLlmConfig = serde_json::from_value(toml_like).map_err(|e| e.to_string())?;
        LlmConfig::try_from(raw).map_err(|e| e.to_string())
    }

    #[test]
    fn llm_config_validation_names_the_key() {
        let ok = llm(serde_json::json!({"provider": "openai", "model": "gpt-4o-mini", "api_key_env": "OPENAI_API_KEY"})).unwrap();
        assert_eq!(ok.base_url, "https://api.openai.com/v1");
        assert_eq!(ok.api_key, KeySource::Env("OPENAI_API_KEY".into()));
        let local = llm(serde_json::json!({"provider": "openai", "base_url": "http://127.0.0.1:11434/v1/", "model": "qwen2.5"})).unwrap();
        assert_eq!(local.base_url, "http://127.0.0.1:11434/v1");
        assert_eq!(local.api_key, KeySource::None);
        for (input, key) in [
            (serde_json::json!({"model": "m"}), "llm.provider"),
            (serde_json::json!({"provider": "gemini"}), "llm.model"),
            (
                serde_json::json!({"provider": "gemini", "model": "m", "base_url": "ftp://x"}),
                "llm.base_url",
            ),
            (
                serde_json::json!({"provider": "gemini", "model": "m", "api_key_env": "A", "api_key_file": "/k"}),
                "llm.api_key_env",
            ),
            (
                serde_json::json!({"provider": "gemini", "model": "m", "read_timeout_s": 0}),
                "llm.read_timeout_s",
            ),
            (
                serde_json::json!({"provider": "openai", "model": "m", "thinking_budget": 2000}),
                "llm.thinking_budget",
            ),
        ] {
            let err = llm(input.clone()).unwrap_err();
            assert!(err.contains(key), "{input} -> {err}");
        }
        let err = llm(serde_json::json!({"provider": "openai", "model": "m", "apikey": "x"}))
            .unwrap_err();
        assert!(err.contains("unknown field"), "{err}");
    }

    #[test]
    fn llm_limits_follow_progress_and_fit_a_slow_cpu_by_default() {
        use crate::provider::config::Vision;
        let d = llm(serde_json::json!({"provider": "openai", "model": "m"})).unwrap();
        assert_eq!(d.first_byte_timeout, Duration::from_secs(600));
        assert_eq!(d.idle_timeout, Duration::from_secs(120));
        assert_eq!(d.request_timeout, None);
        assert_eq!(d.max_tokens, 1024);
        assert_eq!(d.vision, Vision::Auto);
        let set = llm(serde_json::json!({"provider": "openai", "model": "m",
            "first_byte_timeout_s": 900, "idle_timeout_s": 30, "request_timeout_s": 3600,
            "vision": false, "max_tokens": 512}))
        .unwrap();
        assert_eq!(
            (
                set.first_byte_timeout,
                set.idle_timeout,
                set.request_timeout,
                set.vision,
                set.max_tokens
            ),
            (
                Duration::from_secs(900),
                Duration::from_secs(30),
                Some(Duration::from_secs(3600)),
                Vision::Off,
                512
            )
        );
        // The older name of the idle limit still works, not both at once.
        let old =
            llm(serde_json::json!({"provider": "openai", "model": "m", "read_timeout_s": 45}))
                .unwrap();
        assert_eq!(old.idle_timeout, Duration::from_secs(45));
        let both = llm(serde_json::json!({"provider": "openai", "model": "m",
            "read_timeout_s": 45, "idle_timeout_s": 45}))
        .unwrap_err();
        assert!(both.contains("llm.read_timeout_s"), "{both}");
        for (vision, want) in [
            (serde_json::json!(true), Vision::On),
            (serde_json::json!("auto"), Vision::Auto),
        ] {
            let c = llm(serde_json::json!({"provider": "openai", "model": "m", "vision": vision}))
                .unwrap();
            assert_eq!(c.vision, want);
        }
        let bad = llm(serde_json::json!({"provider": "openai", "model": "m", "vision": "maybe"}))
            .unwrap_err();
        assert!(
            bad.contains("vision must be true, false or \"auto\""),
            "{bad}"
        );
        for (key, value) in [
            ("first_byte_timeout_s", 0.0),
            ("idle_timeout_s", -1.0),
            ("request_timeout_s", 0.0),
        ] {
            let err = llm(serde_json::json!({"provider": "openai", "model": "m", key: value}))
                .unwrap_err();
            assert!(err.contains(&format!("llm.{key}")), "{err}");
        }
        // Room for the thinking budget and an answer.
        let thinking = llm(
            serde_json::json!({"provider": "anthropic", "model": "m", "thinking_budget": 2048}),
        )
        .unwrap();
        assert_eq!(thinking.max_tokens, 3072);
    }

    #[test]
    fn agent_config_checks_policy_entries() {
        let raw: RawAgentConfig = serde_json::from_value(serde_json::json!({
            "approval": {"auto_approve_up_to": "medium", "allow": ["wifiAutomation.disable"], "deny": ["airplane_mode.*"]}
        }))
        .unwrap();
        let cfg = AgentConfig::try_from(raw).unwrap();
        assert!(cfg.approval.allow.contains("wifi_automation.disable"));
        assert_eq!(cfg.approval.auto_approve_up_to, Risk::Medium);
        let raw: RawAgentConfig = serde_json::from_value(serde_json::json!({
            "approval": {"deny": ["battery.explode"]}
        }))
        .unwrap();
        let err = AgentConfig::try_from(raw).unwrap_err().to_string();
        assert!(
            err.contains("agent.approval.deny") && err.contains("explode"),
            "{err}"
        );
        let defaults = AgentConfig::default();
        assert_eq!((defaults.max_concurrent_runs, defaults.max_queued), (4, 32));
        for (input, key) in [
            (
                serde_json::json!({"max_concurrent_runs": 0}),
                "agent.max_concurrent_runs",
            ),
            (
                serde_json::json!({"max_queued": 1_000_000}),
                "agent.max_queued",
            ),
        ] {
            let raw: RawAgentConfig = serde_json::from_value(input).unwrap();
            let err = AgentConfig::try_from(raw).unwrap_err().to_string();
            assert!(err.contains(key), "{err}");
        }
        assert!(
            serde_json::from_value::<RawAgentConfig>(serde_json::json!({"max_iteration": 3}))
                .is_err()
        );
    }
}
