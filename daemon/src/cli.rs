//! The command line: argument definitions and the one-shot commands.
//!
//! `devices`, `call`, `status` and the agent's commands (`ask`,
//! `approvals`, `approve`, `deny`, `sessions`, `session show`, in
//! `crate::agent_cli`) ask the running daemon over D-Bus
//! (`crate::dbus::client`), on the bus from `--bus` or `[dbus] bus`; when it
//! is not there they say so and fail. `--local` (for `devices` and `call`)
//! does the work in this process instead, talking to the adb server
//! directly: the way to use droidwarden without a daemon. `services` is the
//! catalogue built into this binary and needs no daemon.

use crate::agent_cli;
use crate::call;
use crate::config::{Config, DbusBus};
use crate::dbus::{Bus, client::Client};
use clap::{Parser, Subcommand};
use droidwarden_bridge::{Registry, TransportKind, adb::AdbTransport};
use droidwarden_services::{Catalogue, ErrorCode, WireError};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

/// Drive Android phones from home automation, the command line or an LLM agent.
#[derive(Debug, Parser)]
#[command(name = "droidwarden", version, about)]
pub(crate) struct Args {
    /// Configuration file (default: /etc/droidwarden/config.toml when present).
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run the daemon: keep devices connected and watched until stopped.
    Daemon,
    /// List the service catalogue: services, actions, parameters and risk.
    Services {
        /// Print JSON with every action's parameter and result schema.
        #[arg(long)]
        json: bool,
    },
    /// List the running daemon's devices: transport, online state, model.
    Devices {
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        target: Target,
    },
    /// Perform one action on a phone through the running daemon and print
    /// its JSON result.
    Call(call::CallArgs),
    /// Show the running daemon's devices, their availability and the last
    /// status of each service.
    Status {
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// The bus the daemon is on (default: [dbus] bus in the configuration).
        #[arg(long, value_enum)]
        bus: Option<Bus>,
    },
    /// Ask the agent, through the running daemon, and print its progress
    /// (tool calls, results, approval requests) and answer.
    Ask {
        /// Continue this session (default: a new one).
        #[arg(long, value_name = "ID")]
        session: Option<String>,
        /// Print every event as a JSON object, one per line.
        #[arg(long)]
        json: bool,
        /// The bus the daemon is on (default: [dbus] bus in the configuration).
        #[arg(long, value_enum)]
        bus: Option<Bus>,
        /// What to ask ("turn wifi off and tell me the battery level").
        #[arg(required = true, num_args = 1.., value_name = "PROMPT")]
        prompt: Vec<String>,
    },
    /// List the agent's actions waiting for approval.
    Approvals {
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// The bus the daemon is on (default: [dbus] bus in the configuration).
        #[arg(long, value_enum)]
        bus: Option<Bus>,
    },
    /// Approve a waiting action: the agent's run goes on and performs it.
    Approve {
        /// The approval id (from `droidwarden approvals`).
        id: String,
        /// The bus the daemon is on (default: [dbus] bus in the configuration).
        #[arg(long, value_enum)]
        bus: Option<Bus>,
    },
    /// Deny a waiting action: the agent is told, with the reason.
    Deny {
        /// The approval id (from `droidwarden approvals`).
        id: String,
        /// Why (the model reads it).
        #[arg(long)]
        reason: Option<String>,
        /// The bus the daemon is on (default: [dbus] bus in the configuration).
        #[arg(long, value_enum)]
        bus: Option<Bus>,
    },
    /// List the agent's sessions, most recent first.
    Sessions {
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// The bus the daemon is on (default: [dbus] bus in the configuration).
        #[arg(long, value_enum)]
        bus: Option<Bus>,
    },
    /// Work with one agent session.
    #[command(subcommand)]
    Session(SessionCommand),
    /// Inspect the configuration.
    #[command(subcommand)]
    Config(ConfigCommand),
}

#[derive(Debug, Subcommand)]
pub(crate) enum SessionCommand {
    /// Print the conversation as markdown: turns with timestamps, tool
    /// calls and results, and runs still going.
    Show {
        /// The session id (from `droidwarden sessions`).
        id: String,
        /// The bus the daemon is on (default: [dbus] bus in the configuration).
        #[arg(long, value_enum)]
        bus: Option<Bus>,
    },
}

/// Where a command is carried out: the daemon on a bus, or this process.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Target {
    /// The bus the daemon is on (default: [dbus] bus in the configuration).
    #[arg(long, value_enum, conflicts_with = "local")]
    pub(crate) bus: Option<Bus>,
    /// Work in this process, without the daemon: talk to the adb server
    /// directly (ADB phones only).
    #[arg(long)]
    pub(crate) local: bool,
}

/// The bus to look for the daemon on: `--bus`, else `[dbus] bus`.
///
/// # Errors
/// D-Bus is off in the configuration and no `--bus` was given.
pub(crate) fn daemon_bus(flag: Option<Bus>, config: DbusBus) -> Result<Bus, WireError> {
    match (flag, config) {
        (Some(bus), _) => Ok(bus),
        (None, DbusBus::Auto | DbusBus::Session) => Ok(Bus::Session),
        (None, DbusBus::System) => Ok(Bus::System),
        (None, DbusBus::Off) => Err(WireError::new(
            ErrorCode::InvalidRequest,
            "the D-Bus API is off in the configuration ([dbus] bus = \"none\"), so the daemon cannot be asked; use --local, or --bus session|system",
        )),
    }
}

/// Connect to the daemon for a command.
pub(crate) async fn daemon(
    flag: Option<Bus>,
    config: &Config,
    local_hint: bool,
) -> Result<Client, WireError> {
    let bus = daemon_bus(flag, config.dbus)?;
    // The longest a call can take by this configuration: an ADB action, or
    // a companion phone's queue and answer deadline. The daemon's own
    // figure (`CallTimeout`) wins when it gives one.
    let bound = config
        .adb
        .call_timeout
        .max(droidwarden_bridge::companion::handle_timeout(
            &config.companion,
        ));
    Client::connect(bus, bound, local_hint).await
}

#[derive(Debug, Subcommand)]
pub(crate) enum ConfigCommand {
    /// Print the built-in default configuration.
    PrintDefault,
    /// Load and validate the configuration, then print the effective settings.
    Check,
}

pub(crate) async fn run(command: Command, config: Config) -> ExitCode {
    match command {
        Command::Services { json } => {
            print_services(json);
            ExitCode::SUCCESS
        }
        Command::Daemon => crate::daemon::run(config).await,
        Command::Devices { json, target } if target.local => devices_local(config, json).await,
        Command::Devices { json, target } => devices(config, target.bus, json).await,
        Command::Call(args) => call::run(args, config).await,
        Command::Status { json, bus } => status(config, bus, json).await,
        Command::Ask {
            session,
            json,
            bus,
            prompt,
        } => agent_cli::ask(&config, bus, session, &prompt.join(" "), json).await,
        Command::Approvals { json, bus } => agent_cli::approvals(&config, bus, json).await,
        Command::Approve { id, bus } => agent_cli::answer(&config, bus, &id, None).await,
        Command::Deny { id, reason, bus } => {
            agent_cli::answer(&config, bus, &id, Some(reason.as_deref().unwrap_or(""))).await
        }
        Command::Sessions { json, bus } => agent_cli::sessions(&config, bus, json).await,
        Command::Session(SessionCommand::Show { id, bus }) => {
            agent_cli::show_session(&config, bus, &id).await
        }
        Command::Config(ConfigCommand::Check) => {
            println!("configuration is valid");
            println!("adb server: {}", config.adb.server);
            println!("state dir:  {}", config.state_dir.display());
            println!("D-Bus:      {}", config.dbus.as_str());
            for (serial, name) in &config.adb.names {
                println!("device {name}: adb serial {serial}");
            }
            ExitCode::SUCCESS
        }
        Command::Config(ConfigCommand::PrintDefault) => ExitCode::SUCCESS,
    }
}

/// The catalogue as JSON, with the transports that can perform each
/// action: `droidwarden services --json` and D-Bus `ListServices()`.
pub(crate) fn services_json() -> Vec<Value> {
    Catalogue::get()
        .services()
        .iter()
        .map(|s| {
            let mut v = s.to_json();
            if let Some(actions) = v["actions"].as_array_mut() {
                for a in actions {
                    let name = a["name"].as_str().unwrap_or_default().to_owned();
                    let transports: Vec<&str> = [TransportKind::Adb, TransportKind::Companion]
                        .into_iter()
                        .filter(|t| t.unsupported_reason(s.id, &name).is_none())
                        .map(TransportKind::as_str)
                        .collect();
                    a["transports"] = json!(transports);
                }
            }
            v
        })
        .collect()
}

fn print_services(as_json: bool) {
    let catalogue = Catalogue::get();
    if as_json {
        let services = services_json();
        println!(
            "{}",
            serde_json::to_string_pretty(&services).unwrap_or_default()
        );
        return;
    }
    for s in catalogue.services() {
        println!("{} ({}) — {}", s.id, s.node_type, s.description);
        for a in &s.actions {
            let params: Vec<String> = a
                .params
                .iter()
                .map(|p| {
                    if p.required {
                        p.name.to_owned()
                    } else {
                        format!("{}?", p.name)
                    }
                })
                .collect();
            let adb = match TransportKind::Adb.unsupported_reason(s.id, a.name) {
                Some(_) => " [companion only]",
                None => "",
            };
            println!(
                "  {:<20} {:<6} {}{}{}",
                a.name,
                a.risk.as_str(),
                if params.is_empty() {
                    String::new()
                } else {
                    format!("{{{}}} ", params.join(", "))
                },
                a.description,
                adb
            );
        }
    }
}

/// `devices --local`: list what the adb server sees, in this process.
async fn devices_local(config: Config, as_json: bool) -> ExitCode {
    let registry = Arc::new(Registry::new());
    let adb = AdbTransport::new(config.adb, Arc::clone(&registry));
    let refreshed = adb.refresh().await.map_err(|e| e.to_wire());
    let list = serde_json::to_value(registry.list()).unwrap_or_else(|_| json!([]));
    print_devices(&list, refreshed.err(), as_json)
}

/// `devices`: the daemon's list.
async fn devices(config: Config, bus: Option<Bus>, as_json: bool) -> ExitCode {
    let list = match daemon(bus, &config, true).await {
        Ok(client) => client.list_devices().await,
        Err(e) => Err(e),
    };
    match list {
        Ok(list) => print_devices(&list, None, as_json),
        Err(e) => print_devices(&json!([]), Some(e), as_json),
    }
}

/// Report a failed command on standard error.
pub(crate) fn fail(e: &WireError) -> ExitCode {
    eprintln!("droidwarden: {}", e.message);
    ExitCode::FAILURE
}

/// Print a device list (JSON objects as in `ListDevices`) and the error
/// that came with it, if any; failure when there was one.
fn print_devices(list: &Value, error: Option<WireError>, as_json: bool) -> ExitCode {
    let empty = Vec::new();
    let devices = list.as_array().unwrap_or(&empty);
    if as_json {
        let mut out = json!({ "devices": devices });
        if let Some(e) = &error {
            out["error"] = json!(e);
        }
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
    } else {
        if let Some(e) = &error {
            eprintln!("droidwarden: {}", e.message);
        }
        if devices.is_empty() && error.is_none() {
            println!("no devices");
        }
        for d in devices {
            println!("{}", device_line(d));
        }
    }
    if error.is_none() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn device_line(d: &Value) -> String {
    let text = |key: &str| d[key].as_str().map(str::to_owned);
    format!(
        "{:<24} {:<10} {:<8} {:<24} {}",
        text("name").unwrap_or_default(),
        text("transport").unwrap_or_default(),
        if d["online"] == true {
            "online"
        } else {
            "offline"
        },
        text("model").unwrap_or_else(|| "-".into()),
        text("state_detail")
            .or_else(|| text("serial"))
            .unwrap_or_default()
    )
}

/// `status`: devices, availability and the last status of each service.
async fn status(config: Config, bus: Option<Bus>, as_json: bool) -> ExitCode {
    let status = match daemon(bus, &config, false).await {
        Ok(client) => client.status().await,
        Err(e) => Err(e),
    };
    let status = match status {
        Ok(status) => status,
        Err(e) => {
            if as_json {
                println!("{}", json!({ "error": e }));
            } else {
                eprintln!("droidwarden: {}", e.message);
            }
            return ExitCode::FAILURE;
        }
    };
    if as_json {
        println!(
            "{}",
            serde_json::to_string_pretty(&status).unwrap_or_default()
        );
        return ExitCode::SUCCESS;
    }
    let empty = Vec::new();
    let devices = status["devices"].as_array().unwrap_or(&empty);
    if devices.is_empty() {
        println!("no devices");
    }
    for d in devices {
        println!("{}", device_line(d));
        let services = d["services"].as_object().filter(|s| !s.is_empty());
        let Some(services) = services else {
            println!("  (no calls since the daemon started)");
            continue;
        };
        for (service, s) in services {
            let when = s["finished_at"]
                .as_str()
                .or_else(|| s["started_at"].as_str())
                .unwrap_or("-");
            let outcome = match (&s["error"], s["duration_ms"].as_u64()) {
                (Value::Object(e), _) => format!(
                    "{}: {}",
                    e.get("code").and_then(Value::as_str).unwrap_or("error"),
                    e.get("message").and_then(Value::as_str).unwrap_or("")
                ),
                (_, Some(ms)) => format!("{ms} ms"),
                _ => String::new(),
            };
            println!(
                "  {:<22} {:<10} {:<16} {:<26} {}",
                service,
                s["state"].as_str().unwrap_or("-"),
                s["action"].as_str().unwrap_or("-"),
                when,
                outcome
            );
        }
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_daemon_is_looked_for_on_the_flag_then_the_configured_bus() {
        let check = |flag, config, expected: Option<Bus>| {
            assert_eq!(
                daemon_bus(flag, config).ok(),
                expected,
                "{flag:?} {config:?}"
            );
        };
        check(None, DbusBus::Auto, Some(Bus::Session));
        check(None, DbusBus::Session, Some(Bus::Session));
        check(None, DbusBus::System, Some(Bus::System));
        check(Some(Bus::System), DbusBus::Auto, Some(Bus::System));
        check(Some(Bus::Session), DbusBus::Off, Some(Bus::Session));
        let err = daemon_bus(None, DbusBus::Off).unwrap_err();
        assert!(err.message.contains("--local"), "{err}");
    }

    #[test]
    fn local_and_bus_are_for_devices_and_call_and_exclude_each_other() {
        let parse = |words: &[&str]| Args::try_parse_from([&["droidwarden"], words].concat());
        for words in [
            &["call", "--local", "battery", "status"][..],
            &["call", "--bus", "system", "battery", "status"][..],
            &["devices", "--local", "--json"][..],
            &["status", "--bus", "session"][..],
        ] {
            assert!(parse(words).is_ok(), "{words:?}");
        }
        for words in [
            &["call", "--local", "--bus", "system", "battery", "status"][..],
            &["devices", "--local", "--bus", "session"][..],
            &["status", "--local"][..],
            &["services", "--local"][..],
            &["call", "--bus", "user", "battery", "status"][..],
        ] {
            assert!(parse(words).is_err(), "{words:?}");
        }
    }
}
