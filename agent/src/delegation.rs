//! Delegation to specialised agents (`[[agents]]`).
//!
//! An entry names a specialised agent: its own system prompt, a subset of
//! the tools and its own iteration limit. The main agent gets one tool per
//! entry, `delegate_to_<name> {task, context?, mode?}`; calling it runs the
//! agent as a child run of the same graph (the machinery `invoke_skill`
//! uses), isolated from the parent's conversation: it sees only the task
//! and the context. Its answer is the tool result; its failure, including
//! hitting its limits, is a tool error. A child has no delegate tools, so
//! delegation is one level deep; skills it may invoke are bounded by the
//! skill depth limit.
//!
//! ```toml
//! [[agents]]
//! name = "battery-doctor"
//! description = "Diagnoses battery drain on a phone."
//! system_prompt = "You diagnose battery problems. Read, never change."
//! tools = ["battery", "system.info", "skill:phone-health-report"]
//! max_iterations = 6
//! ```

use crate::error::AgentError;
use crate::skills::AllowedTools;
use serde::{Deserialize, Serialize};

/// Prefix of the delegate tools.
pub const DELEGATE_PREFIX: &str = "delegate_to_";
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
        out.push(DelegateConfig {
            name,
            description,
            system_prompt,
            allowed,
            skills,
            max_iterations: r.max_iterations,
        });
    }
    Ok(out)
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
            max_iterations: None,
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
        ] {
            assert_eq!(key_of(validate(vec![r]).expect_err(k)).0, k);
        }
        let (key, reason) = key_of(validate(vec![raw("a", &[]), raw("a", &[])]).expect_err("dup"));
        assert_eq!(key, "agents[1].name");
        assert!(reason.contains("twice"));
    }
}
