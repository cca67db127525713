//! Delegation to specialised agents (`[[agents]]`).
//!
//! An entry names a specialised agent: its own system prompt, a subset of
//! the tools, its own iteration and time limits, a default mode, and
//! optionally its own model settings. The main agent gets one tool per
//! entry, `delegate_to_<name> {task, context?, mode?}`, and
//! `delegation_status {task_id}`. Calling a delegate tool runs the agent
//! as a child run of the same graph (the machinery `invoke_skill` uses),
//! isolated from the parent's conversation: it sees only the task and the
//! context. In wait mode its answer is the tool result and its failure,
//! including hitting its limits, a tool error; in background mode the
//! call returns a task id at once and the task is stored and reported by
//! `delegation_status` (`agent/background.rs`). A child has no delegate
//! tools, so delegation is one level deep; skills it may invoke are
//! bounded by the skill depth limit.
//!
//! ```toml
//! [[agents]]
//! name = "battery-doctor"
//! description = "Diagnoses battery drain on a phone."
//! system_prompt = "You diagnose battery problems. Read, never change."
//! tools = ["battery", "system.info", "skill:phone-health-report"]
//! max_iterations = 6
//! mode = "background"
//! model = "qwen2.5:14b"
//! ```

use crate::error::AgentError;
use crate::provider::Provider;
use crate::provider::config::{LlmConfig, ProviderKind};
use crate::secret::KeySource;
use crate::skills::AllowedTools;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// Prefix of the delegate tools.
pub const DELEGATE_PREFIX: &str = "delegate_to_";
/// The tool that reports a background delegation.
pub const STATUS_TOOL: &str = "delegation_status";
/// `tools` entries naming a skill start with this.
pub const SKILL_PREFIX: &str = "skill:";
/// Longest agent name.
pub const MAX_NAME_LEN: usize = 48;
/// Longest `task` or `context`, in characters.
pub const MAX_TASK_CHARS: usize = 16_000;

/// One `[[agents]]` entry as written.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDelegateConfig {
    /// Lowercase letters, digits, `-` and `_`.
    pub name: Option<String>,
    /// What the agent is for (shown to the main model).
    pub description: Option<String>,
    /// The agent's system prompt.
    pub system_prompt: Option<String>,
    /// Its tools: a service id (`battery`), `service.action`, `service.*`,
    /// `current_time`, `calculator`, or `skill:<name>`.
    pub tools: Option<Vec<String>>,
    /// Model calls per delegated task (default: `[agent] max_iterations`).
    pub max_iterations: Option<u32>,
    /// `wait` (default: the answer is the tool result) or `background`
    /// (the call returns a task id at once); a call may ask for the other.
    pub mode: Option<String>,
    /// A delegated task's time limit (default: `[agent.skills] timeout_s`).
    pub timeout_s: Option<f64>,
    /// Its own wire protocol (default: `[llm] provider`). Set, the agent
    /// inherits neither `[llm] base_url` nor its key.
    pub provider: Option<String>,
    /// Its own model (default: `[llm] model`).
    pub model: Option<String>,
    /// Its own endpoint (default: `[llm] base_url`, or the provider's
    /// public endpoint when `provider` is set).
    pub base_url: Option<String>,
    /// The environment variable holding its key (with `provider`).
    pub api_key_env: Option<String>,
    /// The file holding its key (with `provider`).
    pub api_key_file: Option<std::path::PathBuf>,
}

/// How a delegated task runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DelegateMode {
    /// The parent's tool call waits for the answer.
    #[default]
    Wait,
    /// The call returns `{status: "delegated", task_id}` at once; the task
    /// runs on its own and `delegation_status` reports it.
    Background,
}

impl DelegateMode {
    /// The mode's name, as in the configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Wait => "wait",
            Self::Background => "background",
        }
    }

    /// Parse `wait` or `background`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "wait" => Some(Self::Wait),
            "background" => Some(Self::Background),
            _ => None,
        }
    }
}

/// An agent's own model settings (`provider`, `model`, `base_url`, key),
/// applied over `[llm]` with [`LlmOverride::apply`].
#[derive(Debug, Clone, PartialEq)]
pub struct LlmOverride {
    /// Another wire protocol.
    pub provider: Option<ProviderKind>,
    /// Another model.
    pub model: Option<String>,
    /// Another endpoint.
    pub base_url: Option<String>,
    /// Another key (only with `provider` or `base_url`).
    pub api_key: Option<KeySource>,
}

impl LlmOverride {
    /// `[llm]` with this override: `model` replaces the model; `provider`
    /// changes the protocol and, unless given here, resets the endpoint to
    /// the provider's public one; an endpoint other than `[llm]`'s gets
    /// no key unless this override gives one (a key meant for one
    /// endpoint is never sent to another).
    pub fn apply(&self, llm: &LlmConfig) -> LlmConfig {
        let mut out = llm.clone();
        if let Some(m) = &self.model {
            out.model.clone_from(m);
        }
        if let Some(p) = self.provider
            && p != llm.provider
        {
            out.provider = p;
            out.base_url = p.default_base_url().to_owned();
            out.api_key = KeySource::None;
            if p != ProviderKind::Anthropic {
                out.thinking_budget = None;
            }
        }
        if let Some(u) = &self.base_url {
            out.base_url.clone_from(u);
        }
        if out.base_url != llm.base_url {
            out.api_key = KeySource::None;
        }
        if let Some(k) = &self.api_key {
            out.api_key = k.clone();
        }
        out
    }
}

/// A validated `[[agents]]` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct DelegateConfig {
    /// Its name (the tool is `delegate_to_<name>`).
    pub name: String,
    /// What it is for.
    pub description: String,
    /// Its system prompt.
    pub system_prompt: String,
    /// The catalogue actions and built-in tools it may use.
    pub allowed: AllowedTools,
    /// The skills it may read and invoke (may be empty).
    pub skills: Vec<String>,
    /// Its iteration limit (`None`: the agent's).
    pub max_iterations: Option<u32>,
    /// Its default mode (a call may ask for the other).
    pub mode: DelegateMode,
    /// Its time limit per task (`None`: `[agent.skills] timeout_s`).
    pub timeout: Option<Duration>,
    /// Its own model settings (`None`: `[llm]` as is).
    pub llm: Option<LlmOverride>,
}

impl DelegateConfig {
    /// The tool the main agent calls.
    pub fn tool_name(&self) -> String {
        format!("{DELEGATE_PREFIX}{}", self.name)
    }
}

/// Whether `name` may name an agent: 1 to 48 of `a-z`, `0-9`, `-`, `_`,
/// starting with a letter.
///
/// ```
/// use droidwarden_agent::delegation::valid_name;
/// assert!(valid_name("battery-doctor"));
/// assert!(valid_name("net_2"));
/// assert!(!valid_name("Bad"));
/// assert!(!valid_name("../x"));
/// ```
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

fn err(key: String, reason: impl Into<String>) -> AgentError {
    AgentError::Config {
        key,
        reason: reason.into(),
    }
}

/// Validate the `[[agents]]` entries. Errors name the key
/// (`agents[1].tools`) and the offending value.
///
/// # Errors
/// [`AgentError::Config`] for a missing or invalid name, description or
/// system prompt, a duplicate name, a tool entry that names no service,
/// action or valid skill name, or `max_iterations` outside 1 to 1000.
pub fn validate(raw: Vec<RawDelegateConfig>) -> Result<Vec<DelegateConfig>, AgentError> {
    let mut out: Vec<DelegateConfig> = Vec::new();
    for (i, r) in raw.into_iter().enumerate() {
        let key = |k: &str| format!("agents[{i}].{k}");
        let name = r.name.ok_or_else(|| err(key("name"), "is required"))?;
        if !valid_name(&name) {
            return Err(err(
                key("name"),
                format!(
                    "{:?} must be 1 to {MAX_NAME_LEN} of a-z, 0-9, - and _, starting with a letter",
                    name.chars().take(64).collect::<String>()
                ),
            ));
        }
        if out.iter().any(|d| d.name == name) {
            return Err(err(key("name"), format!("{name:?} is defined twice")));
        }
        let description = r
            .description
            .filter(|d| !d.trim().is_empty())
            .ok_or_else(|| err(key("description"), "is required"))?;
        let system_prompt = r
            .system_prompt
            .filter(|d| !d.trim().is_empty())
            .ok_or_else(|| err(key("system_prompt"), "is required"))?;
        let tools = r.tools.unwrap_or_default();
        let mut skills = Vec::new();
        let mut entries = Vec::new();
        for t in tools {
            match t.strip_prefix(SKILL_PREFIX) {
                Some(skill) => {
                    // Skills load later (and on reload): only the form is
                    // checked here; an unknown one is refused when invoked.
                    if !crate::skills::valid_name(skill) {
                        return Err(err(
                            key("tools"),
                            format!("{t:?}: {skill:?} is not a valid skill name"),
                        ));
                    }
                    skills.push(skill.to_owned());
                }
                None => entries.push(t),
            }
        }
        let mut allowed = AllowedTools::resolve(&entries).map_err(|unknown| {
            err(
                key("tools"),
                format!(
                    "unknown service or action: {} (use a service id, service.action, service.*, current_time, calculator or skill:<name>)",
                    unknown.join(", ")
                ),
            )
        })?;
        if !skills.is_empty() {
            allowed.read_skills = true;
            allowed.invoke_skill = true;
        }
        if let Some(m) = r.max_iterations
            && !(1..=1000).contains(&m)
        {
            return Err(err(key("max_iterations"), "must be 1 to 1000"));
        }
        let mode = match r.mode.as_deref() {
            None => DelegateMode::Wait,
            Some(m) => DelegateMode::parse(m).ok_or_else(|| {
                err(
                    key("mode"),
                    format!("{:?} must be \"wait\" or \"background\"", truncate(m)),
                )
            })?,
        };
        let timeout = match r.timeout_s {
            None => None,
            Some(t) if t > 0.0 && t <= 86_400.0 => Some(Duration::from_secs_f64(t)),
            Some(t) => {
                return Err(err(
                    key("timeout_s"),
                    format!("must be more than 0 and at most 86400 seconds, got {t}"),
                ));
            }
        };
        let llm = llm_override(
            &key,
            r.provider,
            r.model,
            r.base_url,
            r.api_key_env,
            r.api_key_file,
        )?;
        out.push(DelegateConfig {
            name,
            description,
            system_prompt,
            allowed,
            skills,
            max_iterations: r.max_iterations,
            mode,
            timeout,
            llm,
        });
    }
    Ok(out)
}

fn truncate(s: &str) -> String {
    s.chars().take(64).collect()
}

/// The `provider`, `model`, `base_url` and key keys of one entry.
fn llm_override(
    key: &dyn Fn(&str) -> String,
    provider: Option<String>,
    model: Option<String>,
    base_url: Option<String>,
    api_key_env: Option<String>,
    api_key_file: Option<std::path::PathBuf>,
) -> Result<Option<LlmOverride>, AgentError> {
    let provider = match provider.as_deref() {
        None => None,
        Some("openai") => Some(ProviderKind::Openai),
        Some("anthropic") => Some(ProviderKind::Anthropic),
        Some("gemini") => Some(ProviderKind::Gemini),
        Some(p) => {
            return Err(err(
                key("provider"),
                format!("{:?} must be openai, anthropic or gemini", truncate(p)),
            ));
        }
    };
    if let Some(m) = &model
        && (m.trim().is_empty()
            || m.len() > 200
            || m.chars().any(|c| c.is_whitespace() || c.is_control()))
    {
        return Err(err(key("model"), "must be a model name without spaces"));
    }
    let base_url = match base_url {
        None => None,
        Some(u) if u.starts_with("http://") || u.starts_with("https://") => {
            Some(u.trim_end_matches('/').to_owned())
        }
        Some(_) => {
            return Err(err(key("base_url"), "must start with http:// or https://"));
        }
    };
    let api_key = match (api_key_env, api_key_file) {
        (Some(_), Some(_)) => {
            return Err(err(
                key("api_key_env"),
                "set api_key_env or api_key_file, not both",
            ));
        }
        (Some(e), None) if e.is_empty() => {
            return Err(err(key("api_key_env"), "must not be empty"));
        }
        (Some(e), None) => Some(KeySource::Env(e)),
        (None, Some(f)) => Some(KeySource::File(f)),
        (None, None) => None,
    };
    if api_key.is_some() && provider.is_none() && base_url.is_none() {
        return Err(err(
            key("api_key_env"),
            "an agent's own key needs its own provider or base_url (otherwise it uses [llm]'s)",
        ));
    }
    if provider.is_none() && model.is_none() && base_url.is_none() {
        return Ok(None);
    }
    Ok(Some(LlmOverride {
        provider,
        model,
        base_url,
        api_key,
    }))
}

/// The agents runs may delegate to, with the providers of those that have
/// their own model settings. Replaced as a whole on reload
/// ([`crate::Agent::set_agents`]); a run keeps the set it started with.
#[derive(Debug, Clone, Default)]
pub struct Delegates {
    /// The agents, in configuration order.
    pub agents: Vec<DelegateConfig>,
    /// Providers by agent name; an agent not listed uses the main one.
    pub providers: HashMap<String, Arc<dyn Provider>>,
}

impl Delegates {
    /// The agents, all on the main provider.
    pub fn new(agents: Vec<DelegateConfig>) -> Self {
        Self {
            agents,
            providers: HashMap::new(),
        }
    }

    /// Give agent `name` its own provider.
    #[must_use]
    pub fn with_provider(mut self, name: &str, provider: Arc<dyn Provider>) -> Self {
        self.providers.insert(name.to_owned(), provider);
        self
    }

    /// The agent called `name`.
    pub fn get(&self, name: &str) -> Option<&DelegateConfig> {
        self.agents.iter().find(|a| a.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(name: &str, tools: &[&str]) -> RawDelegateConfig {
        RawDelegateConfig {
            name: Some(name.into()),
            description: Some("does things".into()),
            system_prompt: Some("You do things.".into()),
            tools: Some(tools.iter().map(|s| (*s).to_owned()).collect()),
            ..RawDelegateConfig::default()
        }
    }

    fn key_of(e: AgentError) -> (String, String) {
        match e {
            AgentError::Config { key, reason } => (key, reason),
            other => panic!("not a config error: {other:?}"),
        }
    }

    #[test]
    fn resolves_services_actions_and_skills() {
        let d = validate(vec![raw(
            "battery-doctor",
            &["battery", "calculator", "skill:phone-health-report"],
        )])
        .expect("valid");
        let d = &d[0];
        assert_eq!(d.tool_name(), "delegate_to_battery-doctor");
        assert!(d.allowed.allows_service("battery"));
        assert!(!d.allowed.allows_service("wifi"));
        assert!(d.allowed.calculator && !d.allowed.current_time);
        assert!(d.allowed.invoke_skill && d.allowed.read_skills);
        assert_eq!(d.skills, vec!["phone-health-report".to_owned()]);
    }

    #[test]
    fn own_model_settings_never_send_a_key_to_another_endpoint() {
        let llm = LlmConfig::try_from(crate::provider::config::RawLlmConfig {
            provider: Some(ProviderKind::Openai),
            base_url: Some("http://127.0.0.1:11434/v1".into()),
            model: Some("main".into()),
            api_key_env: Some("MAIN_KEY".into()),
            ..crate::provider::config::RawLlmConfig::default()
        })
        .expect("llm");
        let own = |r: RawDelegateConfig| validate(vec![r]).expect("valid")[0].llm.clone();
        // The model alone: same endpoint, same key.
        let m = own(RawDelegateConfig {
            model: Some("small".into()),
            ..raw("a", &[])
        })
        .expect("override")
        .apply(&llm);
        assert_eq!(
            (m.model.as_str(), m.base_url.as_str(), &m.api_key),
            (
                "small",
                "http://127.0.0.1:11434/v1",
                &KeySource::Env("MAIN_KEY".into())
            )
        );
        // Another endpoint: no key unless given.
        let o = own(RawDelegateConfig {
            base_url: Some("http://10.0.0.2:8080/v1/".into()),
            ..raw("a", &[])
        })
        .expect("override")
        .apply(&llm);
        assert_eq!(o.base_url, "http://10.0.0.2:8080/v1");
        assert_eq!(o.api_key, KeySource::None);
        // Another provider: its public endpoint, its own key.
        let p = own(RawDelegateConfig {
            provider: Some("anthropic".into()),
            model: Some("claude".into()),
            api_key_env: Some("ANTHROPIC_KEY".into()),
            ..raw("a", &[])
        })
        .expect("override")
        .apply(&llm);
        assert_eq!(p.provider, ProviderKind::Anthropic);
        assert_eq!(p.base_url, "https://api.anthropic.com");
        assert_eq!(p.api_key, KeySource::Env("ANTHROPIC_KEY".into()));
        // Nothing set: no override.
        assert!(own(raw("a", &[])).is_none());
        // A key without an endpoint of its own is refused, naming the key.
        let e = validate(vec![RawDelegateConfig {
            api_key_env: Some("X".into()),
            ..raw("a", &[])
        }])
        .expect_err("key alone");
        assert_eq!(key_of(e).0, "agents[0].api_key_env");
    }

    #[test]
    fn unknown_service_names_the_key() {
        let e = validate(vec![raw("a", &["battery"]), raw("b", &["teleporter"])])
            .expect_err("unknown service");
        let (key, reason) = key_of(e);
        assert_eq!(key, "agents[1].tools");
        assert!(reason.contains("teleporter"), "{reason}");
    }

    #[test]
    fn bad_entries_are_refused() {
        for (r, k) in [
            (raw("Bad", &[]), "agents[0].name"),
            (raw("../x", &[]), "agents[0].name"),
            (raw("a", &["skill:../etc"]), "agents[0].tools"),
            (
                RawDelegateConfig {
                    description: None,
                    ..raw("a", &[])
                },
                "agents[0].description",
            ),
            (
                RawDelegateConfig {
                    system_prompt: Some("  ".into()),
                    ..raw("a", &[])
                },
                "agents[0].system_prompt",
            ),
            (
                RawDelegateConfig {
                    max_iterations: Some(0),
                    ..raw("a", &[])
                },
                "agents[0].max_iterations",
            ),
            (
                RawDelegateConfig {
                    mode: Some("later".into()),
                    ..raw("a", &[])
                },
                "agents[0].mode",
            ),
            (
                RawDelegateConfig {
                    timeout_s: Some(0.0),
                    ..raw("a", &[])
                },
                "agents[0].timeout_s",
            ),
            (
                RawDelegateConfig {
                    provider: Some("skynet".into()),
                    ..raw("a", &[])
                },
                "agents[0].provider",
            ),
            (
                RawDelegateConfig {
                    model: Some("two words".into()),
                    ..raw("a", &[])
                },
                "agents[0].model",
            ),
            (
                RawDelegateConfig {
                    base_url: Some("ftp://x".into()),
                    ..raw("a", &[])
                },
                "agents[0].base_url",
            ),
        ] {
            assert_eq!(key_of(validate(vec![r]).expect_err(k)).0, k);
        }
        let (key, reason) = key_of(validate(vec![raw("a", &[]), raw("a", &[])]).expect_err("dup"));
        assert_eq!(key, "agents[1].name");
        assert!(reason.contains("twice"));
    }
}
