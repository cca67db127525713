//! The skills commands: `droidwarden skills [--json]`, `skills show NAME`
//! (read locally, from the configuration's skill directories and the
//! built-in skills: no daemon needed, and the files that fail to load are
//! shown with the reason) and `skill run NAME [--device D] [k=v …]`
//! (through the running daemon's D-Bus `RunSkill`, printing the run's
//! events like `droidwarden ask`). See `docs/skills.md`. Also `droidwarden
//! agent graph`, the agent's graph as Mermaid or DOT (`docs/agent.md`).

use crate::agent_cli::{Start, ask_inner};
use crate::client::{fail, fail_as, print_json};
use crate::config::Config;
use crate::dbus::Bus;
use droidwarden_agent::RunMode;
use droidwarden_agent::skills::{SkillSet, SkillSource};
use droidwarden_agent::topology;
use droidwarden_services::{ErrorCode, WireError};
use serde_json::{Map, Value, json};
use std::process::ExitCode;

/// `droidwarden skills …`.
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct SkillsArgs {
    #[command(subcommand)]
    command: Option<SkillsCommand>,
    /// Print JSON: `{"skills": [...], "problems": [...]}`.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Subcommand)]
enum SkillsCommand {
    /// Print one skill: what it declares and its instructions.
    Show {
        /// The skill's name.
        name: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `droidwarden skill …`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum SkillCommand {
    /// Run a skill through the running daemon's agent and print its
    /// progress and answer. A skill above the approval threshold waits for
    /// `droidwarden approve` first.
    Run {
        /// The skill's name (from `droidwarden skills`).
        name: String,
        /// The phone (sets the input's `device`).
        #[arg(long, value_name = "D")]
        device: Option<String>,
        /// Continue this session (default: a new one).
        #[arg(long, value_name = "ID")]
        session: Option<String>,
        /// Print every event as a JSON object, one per line.
        #[arg(long)]
        json: bool,
        /// The bus the daemon is on (default: the configuration's dbus.bus).
        #[arg(long, value_parser = crate::client::bus_arg())]
        bus: Option<Bus>,
        /// Input as key=value (a value that parses as JSON is taken as
        /// JSON: level=20 is a number, on=true a boolean).
        #[arg(value_name = "KEY=VALUE")]
        input: Vec<String>,
    },
}

/// `droidwarden agent …`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum AgentCommand {
    /// Print the agent's graph (nodes and edges checked against the state
    /// machine by its tests), with a node per enabled skill.
    Graph {
        /// Which graph: the ReAct loop or plan-and-execute (default:
        /// `[agent] mode`).
        #[arg(long, value_enum)]
        mode: Option<GraphMode>,
        /// Mermaid (default) or Graphviz DOT.
        #[arg(long, value_enum, default_value = "mermaid")]
        format: GraphFormat,
    },
}

/// `--mode` of `agent graph`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum GraphMode {
    React,
    Plan,
}

/// `--format` of `agent graph`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum GraphFormat {
    Mermaid,
    Dot,
}

/// `droidwarden agent graph`.
pub(crate) async fn agent(command: AgentCommand, config: Config) -> ExitCode {
    let AgentCommand::Graph { mode, format } = command;
    let mode = match mode {
        Some(GraphMode::React) => RunMode::React,
        Some(GraphMode::Plan) => RunMode::Plan,
        None => config.agent.mode,
    };
    let set = load(&config).await;
    let skills: Vec<String> = set.enabled().map(|s| s.name.clone()).collect();
    let agents: Vec<_> = config
        .agent
        .agents
        .iter()
        .map(|a| (a.name.clone(), a.mode))
        .collect();
    out!(
        "{}",
        match format {
            GraphFormat::Mermaid => topology::mermaid_with_agents(mode, &skills, &agents),
            GraphFormat::Dot => topology::dot_with_agents(mode, &skills, &agents),
        }
    );
    ExitCode::SUCCESS
}

async fn load(config: &Config) -> SkillSet {
    crate::assistant::load_skills(&config.agent.skills, &config.state_dir).await
}

/// `droidwarden skills [--json]` and `skills show NAME`.
pub(crate) async fn skills(args: SkillsArgs, config: Config) -> ExitCode {
    let set = load(&config).await;
    match args.command {
        None if args.json => {
            print_json(&crate::assistant::skills_json(&set));
            ExitCode::SUCCESS
        }
        None => {
            for s in set.all() {
                let risk = s.resolve_tools().map(|allowed| s.risk(&allowed));
                outln!(
                    "{:<24} {:<6} {:<8} {:<8} {}",
                    s.name,
                    risk.map_or("?", |r| r.as_str()),
                    if s.enabled { "enabled" } else { "disabled" },
                    if s.source == SkillSource::Builtin {
                        "built-in"
                    } else {
                        "file"
                    },
                    s.description
                );
            }
            for p in set.problems() {
                eprintln!("skipped {}: {}", p.path.display(), p.reason);
            }
            ExitCode::SUCCESS
        }
        Some(SkillsCommand::Show { name, json }) => {
            let Some(skill) = set.get(&name) else {
                let e = WireError::new(
                    ErrorCode::NotFound,
                    format!(
                        "no skill {name:?}; skills: {}",
                        set.all()
                            .map(|s| s.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                );
                return fail_as(&e, json);
            };
            if json {
                print_json(&json!(skill.as_ref()));
                return ExitCode::SUCCESS;
            }
            outln!("name:          {}", skill.name);
            outln!("description:   {}", skill.description);
            outln!("allowed-tools: {}", skill.allowed_tools.join(" "));
            match skill.resolve_tools() {
                Ok(allowed) => outln!("risk:          {}", skill.risk(&allowed).as_str()),
                Err(unknown) => outln!(
                    "risk:          ? (unknown tools: {}; the skill fails when run)",
                    unknown.join(", ")
                ),
            }
            if let Some(p) = &skill.parameters {
                outln!("parameters:    {p}");
            }
            outln!(
                "source:        {}",
                match &skill.source {
                    SkillSource::Builtin => "built-in".to_owned(),
                    SkillSource::File(p) => p.display().to_string(),
                }
            );
            if !skill.enabled {
                outln!("enabled:       no ([agent.skills] enabled)");
            }
            if !skill.references.is_empty() {
                outln!("references:    {}", skill.references.join(", "));
            }
            outln!("\n{}", skill.body);
            ExitCode::SUCCESS
        }
    }
}

/// Parse `key=value` arguments into a JSON object.
fn input_of(pairs: &[String], device: Option<String>) -> Result<Value, WireError> {
    let mut obj = Map::new();
    for pair in pairs {
        let Some((k, v)) = pair.split_once('=') else {
            return Err(WireError::new(
                ErrorCode::InvalidParams,
                format!("{pair:?} must be KEY=VALUE"),
            ));
        };
        if k.is_empty() {
            return Err(WireError::new(
                ErrorCode::InvalidParams,
                format!("{pair:?} has an empty key"),
            ));
        }
        let value = serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.to_owned()));
        obj.insert(k.to_owned(), value);
    }
    if let Some(d) = device {
        obj.insert("device".into(), Value::String(d));
    }
    Ok(Value::Object(obj))
}

/// `droidwarden skill run …`.
pub(crate) async fn skill(command: SkillCommand, config: Config) -> ExitCode {
    let SkillCommand::Run {
        name,
        device,
        session,
        json,
        bus,
        input,
    } = command;
    let input = match input_of(&input, device) {
        Ok(i) => i.to_string(),
        Err(e) => return fail(&e),
    };
    match ask_inner(
        &config,
        bus,
        session.as_deref(),
        Start::Skill(&name, &input),
        json,
    )
    .await
    {
        Ok(code) => code,
        Err(e) => fail_as(&e, json),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_value_input() {
        let v = input_of(
            &[
                "level=20".into(),
                "on=true".into(),
                "name=kitchen tv".into(),
            ],
            Some("k".into()),
        )
        .unwrap();
        assert_eq!(
            v,
            json!({"level": 20, "on": true, "name": "kitchen tv", "device": "k"})
        );
        assert!(input_of(&["novalue".into()], None).is_err());
        assert!(input_of(&["=1".into()], None).is_err());
    }
}
