//! `droidwarden automations list | show | run | enable | disable | approve |
//! deny | add | remove`: through the running daemon's D-Bus `Automation`
//! method (on the bus or the private socket, like the agent's commands).

use crate::client::{daemon, fail_as, print_json};
use crate::config::Config;
use crate::dbus::Bus;
use clap::Subcommand;
use droidwarden_services::{ErrorCode, WireError};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::ExitCode;

/// `droidwarden automations …`.
#[derive(Debug, Subcommand)]
pub(crate) enum AutomationsCommand {
    /// List the automations: trigger, action, enabled, runs, next time,
    /// last outcome.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// The bus the daemon is on (default: the configuration's dbus.bus).
        #[arg(long, value_enum)]
        bus: Option<Bus>,
    },
    /// Show one automation: its definition, record and last outcome (JSON).
    Show {
        name: String,
        #[arg(long, value_enum)]
        bus: Option<Bus>,
    },
    /// Run an automation now (its conditions are not checked; the rate
    /// limit and approval policy are).
    Run {
        name: String,
        #[arg(long, value_enum)]
        bus: Option<Bus>,
    },
    /// Enable an automation (kept across restarts).
    Enable {
        name: String,
        #[arg(long, value_enum)]
        bus: Option<Bus>,
    },
    /// Disable an automation (kept across restarts).
    Disable {
        name: String,
        #[arg(long, value_enum)]
        bus: Option<Bus>,
    },
    /// Approve an automation's call that waits for approval.
    Approve {
        name: String,
        #[arg(long, value_enum)]
        bus: Option<Bus>,
    },
    /// Deny an automation's call that waits for approval.
    Deny {
        name: String,
        #[arg(long, value_enum)]
        bus: Option<Bus>,
    },
    /// Add an automation at run time from a file (`-`: standard input)
    /// holding one `[[automations]]` table's keys, as TOML or JSON.
    Add {
        #[arg(value_name = "FILE")]
        file: PathBuf,
        #[arg(long, value_enum)]
        bus: Option<Bus>,
    },
    /// Remove an automation added at run time.
    Remove {
        name: String,
        #[arg(long, value_enum)]
        bus: Option<Bus>,
    },
}

/// Read a definition: JSON, or else TOML.
fn read_definition(file: &PathBuf) -> Result<Value, WireError> {
    let bad = |m: String| WireError::new(ErrorCode::InvalidRequest, m);
    let text = if file.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin()).map_err(|e| bad(format!("stdin: {e}")))?
    } else {
        std::fs::read_to_string(file).map_err(|e| bad(format!("{}: {e}", file.display())))?
    };
    if let Ok(v) = serde_json::from_str::<Value>(&text) {
        return Ok(v);
    }
    use config::{Config as Layers, File, FileFormat};
    Layers::builder()
        .add_source(File::from_str(&text, FileFormat::Toml))
        .build()
        .and_then(|c| c.try_deserialize::<Value>())
        .map_err(|e| bad(format!("{}: neither JSON nor TOML: {e}", file.display())))
}

/// Run the command.
pub(crate) async fn run(config: &Config, command: AutomationsCommand) -> ExitCode {
    use AutomationsCommand as C;
    let (request, bus, list_json) = match command {
        C::List { json, bus } => (Ok(json!({"op": "list"})), bus, Some(json)),
        C::Show { name, bus } => (Ok(json!({"op": "show", "name": name})), bus, None),
        C::Run { name, bus } => (Ok(json!({"op": "run", "name": name})), bus, None),
        C::Enable { name, bus } => (Ok(json!({"op": "enable", "name": name})), bus, None),
        C::Disable { name, bus } => (Ok(json!({"op": "disable", "name": name})), bus, None),
        C::Approve { name, bus } => (Ok(json!({"op": "approve", "name": name})), bus, None),
        C::Deny { name, bus } => (Ok(json!({"op": "deny", "name": name})), bus, None),
        C::Remove { name, bus } => (Ok(json!({"op": "remove", "name": name})), bus, None),
        C::Add { file, bus } => (
            read_definition(&file).map(|d| json!({"op": "add", "definition": d})),
            bus,
            None,
        ),
    };
    // Errors as JSON only for `list --json`; the other commands print JSON
    // answers and their errors as text on standard error.
    let json = list_json == Some(true);
    let answer = async {
        let request = request?;
        daemon(bus, config, false)
            .await?
            .automation(&request.to_string())
            .await
    };
    match answer.await {
        Err(e) => fail_as(&e, json),
        Ok(list) if list_json == Some(false) => {
            let items = list.as_array().cloned().unwrap_or_default();
            if items.is_empty() {
                outln!(
                    "no automations (add [[automations]] to the configuration; see docs/automations.md)"
                );
                return ExitCode::SUCCESS;
            }
            outln!("NAME  ENABLED  TRIGGER  ACTION  RUNS  NEXT  LAST");
            for a in &items {
                let last = match &a["last"] {
                    Value::Null => "-".to_owned(),
                    l => format!(
                        "{} {}",
                        l["status"].as_str().unwrap_or_default(),
                        l["at"].as_str().unwrap_or_default()
                    ),
                };
                outln!(
                    "{}  {}  {}  {}  {}  {}  {}",
                    a["name"].as_str().unwrap_or_default(),
                    if a["enabled"] == true { "yes" } else { "no" },
                    a["trigger"].as_str().unwrap_or_default(),
                    a["action"].as_str().unwrap_or_default(),
                    a["runs"],
                    a["next_due"].as_str().unwrap_or("-"),
                    last,
                );
            }
            ExitCode::SUCCESS
        }
        Ok(answer) => {
            print_json(&answer);
            ExitCode::SUCCESS
        }
    }
}
