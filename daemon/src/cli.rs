//! The command line: argument definitions and the commands that run in
//! this process (`services`, `devices`, `call`, `config`).

use crate::call;
use crate::config::Config;
use clap::{Parser, Subcommand};
use droidwarden_bridge::{Registry, TransportKind, adb::AdbTransport};
use droidwarden_services::Catalogue;
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
    /// List devices: transport, online state, model.
    Devices {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Perform one action on a phone and print its JSON result.
    Call(call::CallArgs),
    /// Inspect the configuration.
    #[command(subcommand)]
    Config(ConfigCommand),
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
        Command::Devices { json } => devices(config, json).await,
        Command::Call(args) => call::run(args, config).await,
        Command::Config(ConfigCommand::Check) => {
            println!("configuration is valid");
            println!("adb server: {}", config.adb.server);
            println!("state dir:  {}", config.state_dir.display());
            for (serial, name) in &config.adb.names {
                println!("device {name}: adb serial {serial}");
            }
            ExitCode::SUCCESS
        }
        Command::Config(ConfigCommand::PrintDefault) => ExitCode::SUCCESS,
    }
}

fn print_services(as_json: bool) {
    let catalogue = Catalogue::get();
    if as_json {
        let services: Vec<Value> = catalogue
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
            .collect();
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

async fn devices(config: Config, as_json: bool) -> ExitCode {
    let registry = Arc::new(Registry::new());
    let adb = AdbTransport::new(config.adb, Arc::clone(&registry));
    let refreshed = adb.refresh().await;
    let list = registry.list();
    if as_json {
        let mut out = json!({ "devices": list });
        if let Err(e) = &refreshed {
            out["error"] = json!(e.to_wire());
        }
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
    } else {
        if let Err(e) = &refreshed {
            eprintln!("droidwarden: {e}");
        }
        if list.is_empty() {
            println!("no devices");
        }
        for d in &list {
            println!(
                "{:<24} {:<10} {:<8} {:<24} {}",
                d.name,
                d.transport.as_str(),
                if d.online { "online" } else { "offline" },
                d.model.as_deref().unwrap_or("-"),
                d.state_detail.as_deref().unwrap_or(&d.serial)
            );
        }
    }
    if refreshed.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
