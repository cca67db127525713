//! `droidwarden automations list | show | run | enable | disable | approve |
//! deny | add | remove`: through the running daemon's D-Bus `Automation`
//! method (on the bus or the private socket, like the agent's commands).

use crate::automations::api::{AutomationRequest as R, AutomationSummary};
use crate::client::{daemon, fail_as, print_json};
use crate::config::Config;
use crate::dbus::Bus;
use clap::Subcommand;
use droidwarden_services::{ErrorCode, WireError};
use serde_json::Value;
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
        #[arg(long, value_parser = crate::client::bus_arg())]
        bus: Option<Bus>,
    },
    /// Show one automation: its definition, record and last outcome (JSON).
    Show {
        name: String,
        #[arg(long, value_parser = crate::client::bus_arg())]
        bus: Option<Bus>,
    },
    /// Run an automation now (its conditions are not checked; the rate
    /// limit and approval policy are).
    Run {
        name: String,
        #[arg(long, value_parser = crate::client::bus_arg())]
        bus: Option<Bus>,
    },
    /// Enable an automation (kept across restarts).
    Enable {
        name: String,
        #[arg(long, value_parser = crate::client::bus_arg())]
        bus: Option<Bus>,
    },
    /// Disable an automation (kept across restarts).
    Disable {
        name: String,
        #[arg(long, value_parser = crate::client::bus_arg())]
        bus: Option<Bus>,
    },
    /// Approve an automation's call that waits for approval.
    Approve {
        name: String,
        #[arg(long, value_parser = crate::client::bus_arg())]
        bus: Option<Bus>,
    },
    /// Deny an automation's call that waits for approval.
    Deny {
        name: String,
        #[arg(long, value_parser = crate::client::bus_arg())]
        bus: Option<Bus>,
    },
    /// Add an automation at run time from a file (`-`: standard input)
    /// holding one `[[automations]]` table's keys, as TOML or JSON.
    Add {
        #[arg(value_name = "FILE")]
        file: PathBuf,
        #[arg(long, value_parser = crate::client::bus_arg())]
        bus: Option<Bus>,
    },
    /// Remove an automation added at run time.
    Remove {
        name: String,
        #[arg(long, value_parser = crate::client::bus_arg())]
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
    let (request, bus) = match command {
        C::List { json, bus } => return list(config, bus, json).await,
        C::Show { name, bus } => (Ok(R::Show { name }), bus),
        C::Run { name, bus } => (Ok(R::Run { name }), bus),
        C::Enable { name, bus } => (Ok(R::Enable { name }), bus),
        C::Disable { name, bus } => (Ok(R::Disable { name }), bus),
        C::Approve { name, bus } => (Ok(R::Approve { name }), bus),
        C::Deny { name, bus } => (Ok(R::Deny { name }), bus),
        C::Remove { name, bus } => (Ok(R::Remove { name }), bus),
        C::Add { file, bus } => (
            read_definition(&file).map(|definition| R::Add { definition }),
            bus,
        ),
    };
    // These commands print the JSON answer, and their errors as text on
    // standard error.
    let answer = async {
        let request = request?;
        daemon(bus, config, false).await?.automation(&request).await
    };
    match answer.await {
        Err(e) => fail_as(&e, false),
        Ok(answer) => {
            print_json(&answer);
            ExitCode::SUCCESS
        }
    }
}

/// `automations list [--json]` (errors as JSON with `--json`).
async fn list(config: &Config, bus: Option<Bus>, json: bool) -> ExitCode {
    let listed = async { daemon(bus, config, false).await?.automations().await };
    let items = match listed.await {
        Err(e) => return fail_as(&e, json),
        Ok(items) => items,
    };
    if json {
        print_json(&serde_json::json!(items));
        return ExitCode::SUCCESS;
    }
    if items.is_empty() {
        outln!(
            "no automations (add [[automations]] to the configuration; see docs/automations.md)"
        );
        return ExitCode::SUCCESS;
    }
    outln!("NAME  ENABLED  TRIGGER  ACTION  RUNS  NEXT  LAST");
    for a in &items {
        outln!("{}", line(a));
    }
    ExitCode::SUCCESS
}

/// One automation as `automations list` prints it.
fn line(a: &AutomationSummary) -> String {
    let last = match &a.last {
        None => "-".to_owned(),
        Some(l) => format!("{} {}", l.outcome.status.as_str(), l.at),
    };
    format!(
        "{}  {}  {}  {}  {}  {}  {}",
        a.name,
        if a.enabled { "yes" } else { "no" },
        a.trigger,
        a.action,
        a.runs,
        a.next_due.as_deref().unwrap_or("-"),
        last,
    )
}
