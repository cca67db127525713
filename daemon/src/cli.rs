//! The command line: argument definitions and the one-shot commands.
//!
//! `devices`, `call`, `status` and the agent's commands (`ask`,
//! `approvals`, `approve`, `deny`, `sessions`, `session show`, in
//! `crate::agent_cli`) ask the running daemon over D-Bus
//! (`crate::dbus::client`), on the bus from `--bus` or `[dbus] bus`; with
//! `auto` and no daemon on a bus, over the daemon's private socket
//! (`crate::dbus::p2p`). When it is not there they say so, naming where
//! they looked, and fail. `--local` (for `devices` and `call`)
//! does the work in this process instead, talking to the adb server
//! directly: the way to use droidwarden without a daemon. `services` is the
//! catalogue built into this binary and needs no daemon.

use crate::agent_cli;
use crate::call;
use crate::client::{Target, daemon, fail, fail_as, print_json};
use crate::config::{Config, DbusBus};
use crate::dbus::Bus;
use clap::{Parser, Subcommand};
use droidwarden_bridge::DeviceInfo;
use droidwarden_services::WireError;
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;

/// Drive Android phones from home automation, the command line or an LLM agent.
#[derive(Debug, Parser)]
#[command(name = "droidwarden", version, about)]
pub(crate) struct Args {
    /// Configuration file (default: /etc/droidwarden/config.toml when present).
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// The daemon's private API socket: where `daemon` listens (unless the
    /// D-Bus API is off, bus = "none"), and where the other commands ask it
    /// instead of on a bus (default: $RUNTIME_DIRECTORY/api.sock under
    /// systemd, else api.sock in the state directory).
    #[arg(long, global = true, value_name = "PATH")]
    pub(crate) socket: Option<PathBuf>,
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run the daemon: keep devices connected and watched until stopped.
    Daemon,
    /// List the service catalogue: services, actions, parameters and risk;
    /// with a service (and an action), each action in full: parameters,
    /// result fields and an example call.
    Services {
        /// A service id or node type, e.g. `battery` or `batteryMonitor`.
        service: Option<String>,
        /// One of its actions, e.g. `status`.
        action: Option<String>,
        /// Print JSON with the parameter and result schemas.
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
    /// Serve the phones to an MCP client (Claude Desktop, Claude Code, VS
    /// Code, …) over stdio, through the running daemon or, with --local,
    /// straight to the adb server (docs/mcp.md).
    Mcp(crate::mcp_stdio::McpArgs),
    /// Show the running daemon's devices, their availability and the last
    /// status of each service.
    Status {
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// The bus the daemon is on (default: the configuration's dbus.bus).
        #[arg(long, value_parser = crate::client::bus_arg())]
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
        /// Plan first, then carry out the plan step by step
        /// (plan-and-execute; default: `[agent] mode`).
        #[arg(long)]
        plan: bool,
        /// The bus the daemon is on (default: the configuration's dbus.bus).
        #[arg(long, value_parser = crate::client::bus_arg())]
        bus: Option<Bus>,
        /// What to ask ("turn wifi off and tell me the battery level").
        #[arg(required = true, num_args = 1.., value_name = "PROMPT")]
        prompt: Vec<String>,
    },
    /// List the actions waiting for approval: the agent's and the
    /// automations' (`automation:<name>`).
    Approvals {
        /// `revoke GRANT`: end a grant for a run.
        #[command(subcommand)]
        command: Option<ApprovalsCommand>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// The requests answered (or expired) last instead, with who
        /// answered and when.
        #[arg(long)]
        history: bool,
        /// How many answered requests `--history` shows (most recent first).
        #[arg(long, default_value_t = 20, requires = "history", value_parser = clap::value_parser!(u32).range(1..=1000))]
        limit: u32,
        /// The bus the daemon is on (default: the configuration's dbus.bus).
        #[arg(long, value_parser = crate::client::bus_arg())]
        bus: Option<Bus>,
    },
    /// Approve a waiting action: the agent's run (or the automation,
    /// `automation:<name>`) goes on and performs it.
    Approve {
        /// The approval id (from `droidwarden approvals`).
        id: String,
        /// Also let the rest of this run do actions on the same device up
        /// to --up-to without asking: a grant, listed by `droidwarden
        /// approvals` and revocable (`droidwarden approvals revoke GRANT`).
        #[arg(long)]
        for_run: bool,
        /// The highest risk the grant covers.
        #[arg(long, requires = "for_run", value_parser = ["low", "medium"], default_value = "medium")]
        up_to: String,
        /// Run it with this parameter changed (KEY=VALUE, as `droidwarden
        /// call` reads them; repeatable). The action, the device and the
        /// risk cannot change.
        #[arg(long = "edit", value_name = "KEY=VALUE", conflicts_with = "for_run")]
        edits: Vec<String>,
        /// Also allow the app in front of this screen action on its device
        /// for MINUTES (1–1440): its screen actions are then of their own
        /// risk, for every run and MCP call, until it expires or is
        /// revoked. Only for a request that names an app of at most medium
        /// risk.
        #[arg(long, value_name = "MINUTES", conflicts_with_all = ["for_run", "edits"],
              value_parser = clap::value_parser!(u32).range(1..=1440))]
        for_app: Option<u32>,
        /// The bus the daemon is on (default: the configuration's dbus.bus).
        #[arg(long, value_parser = crate::client::bus_arg())]
        bus: Option<Bus>,
    },
    /// Deny a waiting action: the agent is told, with the reason.
    Deny {
        /// The approval id (from `droidwarden approvals`).
        id: String,
        /// Why (the model reads it).
        #[arg(long)]
        reason: Option<String>,
        /// The bus the daemon is on (default: the configuration's dbus.bus).
        #[arg(long, value_parser = crate::client::bus_arg())]
        bus: Option<Bus>,
    },
    /// List the agent's sessions, most recent first.
    Sessions {
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// The bus the daemon is on (default: the configuration's dbus.bus).
        #[arg(long, value_parser = crate::client::bus_arg())]
        bus: Option<Bus>,
    },
    /// Work with one agent session.
    #[command(subcommand)]
    Session(SessionCommand),
    /// List the agent's skills (built-in and from the skill directories),
    /// or show one: `droidwarden skills show NAME`.
    Skills(crate::skills_cli::SkillsArgs),
    /// Run a skill through the running daemon.
    #[command(subcommand)]
    Skill(crate::skills_cli::SkillCommand),
    /// Automations: schedules and triggers that run calls or the agent
    /// (docs/automations.md).
    #[command(subcommand)]
    Automations(crate::automations_cli::AutomationsCommand),
    /// The agent itself: `droidwarden agent graph`.
    #[command(subcommand)]
    Agent(crate::skills_cli::AgentCommand),
    /// Inspect the configuration.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Print a shell completion script: `droidwarden completions bash >
    /// /usr/share/bash-completion/completions/droidwarden`.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff): `droidwarden man | man -l -`.
    Man,
    /// Pair a phone for wireless debugging (Android 11+) through the adb
    /// server: HOST:PORT and CODE from the phone's "Pair device with
    /// pairing code" (needs an adb server from platform-tools 30 or newer).
    Pair(crate::pair_cli::PairArgs),
    /// List the phones the adb server sees over mDNS (wireless debugging's
    /// pairing and connect ports), and whether each is connected.
    Discover(crate::pair_cli::DiscoverArgs),
    /// Manage the users of the embedded MQTT broker (in
    /// mqtt-users.json in the state directory; the running daemon picks changes up at
    /// the next connection or SIGHUP).
    #[command(subcommand, name = "mqtt-user")]
    MqttUser(crate::mqtt_users::MqttUserCommand),
}

/// Print completions or the manual page, generated from the definitions
/// above; neither needs a configuration.
pub(crate) fn print_generated(command: &Command) -> Option<ExitCode> {
    use clap::CommandFactory as _;
    let mut cli = Args::command();
    match command {
        Command::Completions { shell } => {
            clap_complete::generate(*shell, &mut cli, "droidwarden", &mut std::io::stdout());
        }
        Command::Man => {
            if let Err(e) = crate::man::render(cli, &mut std::io::stdout()) {
                eprintln!("droidwarden: cannot write the manual page: {e}");
                return Some(ExitCode::FAILURE);
            }
        }
        _ => return None,
    }
    Some(ExitCode::SUCCESS)
}

#[derive(Debug, Subcommand)]
pub(crate) enum ApprovalsCommand {
    /// End a grant for a run (from `droidwarden approvals`): the run's next
    /// action it covered asks again.
    Revoke {
        /// The grant id (`g…`).
        grant: String,
        /// The bus the daemon is on (default: the configuration's dbus.bus).
        #[arg(long, value_parser = crate::client::bus_arg())]
        bus: Option<Bus>,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum SessionCommand {
    /// Print the conversation as markdown: turns with timestamps, tool
    /// calls and results, and runs still going.
    Show {
        /// The session id (from `droidwarden sessions`).
        id: String,
        /// The bus the daemon is on (default: the configuration's dbus.bus).
        #[arg(long, value_parser = crate::client::bus_arg())]
        bus: Option<Bus>,
    },
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
        Command::Services {
            service,
            action,
            json,
        } => match crate::services_cli::render(service.as_deref(), action.as_deref(), json) {
            Ok(text) => {
                out!("{text}");
                ExitCode::SUCCESS
            }
            Err(e) => fail(&e),
        },
        Command::Daemon => crate::daemon::run(config).await,
        Command::Devices { json, target } if target.local => devices_local(config, json).await,
        Command::Devices { json, target } => devices(config, target.bus, json).await,
        Command::Call(args) => call::run(args, config).await,
        Command::Mcp(args) => crate::mcp_stdio::run(args, config).await,
        Command::Status { json, bus } => status(config, bus, json).await,
        Command::Ask {
            session,
            json,
            plan,
            bus,
            prompt,
        } => agent_cli::ask(&config, bus, session, &prompt.join(" "), json, plan).await,
        Command::Approvals {
            command: Some(ApprovalsCommand::Revoke { grant, bus }),
            ..
        } => agent_cli::revoke(&config, bus, &grant).await,
        Command::Approvals {
            command: None,
            json,
            history,
            limit,
            bus,
        } => {
            if history {
                agent_cli::approval_history(&config, bus, json, limit).await
            } else {
                agent_cli::approvals(&config, bus, json).await
            }
        }
        Command::Approve {
            id,
            for_run: false,
            edits,
            for_app: None,
            bus,
            ..
        } if edits.is_empty() => agent_cli::answer(&config, bus, &id, None).await,
        Command::Approve {
            id,
            for_run,
            up_to,
            edits,
            for_app,
            bus,
        } => {
            let scope = match (for_run, for_app) {
                (true, _) => agent_cli::Scope::Run(&up_to),
                (false, Some(minutes)) => agent_cli::Scope::App(minutes),
                (false, None) => agent_cli::Scope::Edits(&edits),
            };
            agent_cli::answer_with(&config, bus, &id, scope).await
        }
        Command::Deny { id, reason, bus } => {
            agent_cli::answer(&config, bus, &id, Some(reason.as_deref().unwrap_or(""))).await
        }
        Command::Sessions { json, bus } => agent_cli::sessions(&config, bus, json).await,
        Command::Skills(args) => crate::skills_cli::skills(args, config).await,
        Command::Skill(command) => crate::skills_cli::skill(command, config).await,
        Command::Agent(command) => crate::skills_cli::agent(command, config).await,
        Command::Session(SessionCommand::Show { id, bus }) => {
            agent_cli::show_session(&config, bus, &id).await
        }
        Command::Automations(command) => crate::automations_cli::run(&config, command).await,
        Command::Config(ConfigCommand::Check) => {
            print_config_summary(&config);
            ExitCode::SUCCESS
        }
        Command::Config(ConfigCommand::PrintDefault)
        | Command::Completions { .. }
        | Command::Man => ExitCode::SUCCESS,
        Command::Pair(args) => crate::pair_cli::pair(args, config).await,
        Command::Discover(args) => crate::pair_cli::discover(args, config).await,
        Command::MqttUser(command) => {
            let state_dir = config.state_dir.clone();
            let done =
                tokio::task::spawn_blocking(move || crate::mqtt_users::run(command, &state_dir))
                    .await;
            match done {
                Ok(Ok(())) => ExitCode::SUCCESS,
                Ok(Err(e)) => {
                    eprintln!("droidwarden: {e:#}");
                    ExitCode::FAILURE
                }
                Err(e) => {
                    eprintln!("droidwarden: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}

/// `devices --local`: list what the adb server sees, in this process.
async fn devices_local(config: Config, as_json: bool) -> ExitCode {
    let phones = droidwarden_core::phones::Local::new(
        config.adb,
        config.phone_services,
        config.agent.approval,
    );
    let (list, error) = phones.refreshed().await;
    print_devices(&list, error.map(|e| e.to_wire()), as_json)
}

/// `devices`: the daemon's list.
async fn devices(config: Config, bus: Option<Bus>, as_json: bool) -> ExitCode {
    let list = match daemon(bus, &config, true).await {
        Ok(client) => client.list_devices().await,
        Err(e) => Err(e),
    };
    match list {
        Ok(list) => print_devices(&list, None, as_json),
        Err(e) => print_devices(&[], Some(e), as_json),
    }
}

/// Print a device list (as `ListDevices` gives it) and the error that
/// came with it, if any; failure when there was one.
fn print_devices(devices: &[DeviceInfo], error: Option<WireError>, as_json: bool) -> ExitCode {
    if as_json {
        let mut out = json!({ "devices": devices });
        if let Some(e) = &error {
            out["error"] = json!(e);
        }
        print_json(&out);
    } else {
        if let Some(e) = &error {
            eprintln!("droidwarden: {}", e.message);
        }
        if devices.is_empty() && error.is_none() {
            outln!("no devices");
        } else if !devices.is_empty() {
            outln!("{}", device_header());
        }
        for d in devices {
            outln!("{}", device_line(d));
        }
    }
    if error.is_none() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn device_header() -> String {
    format!(
        "{:<24} {:<10} {:<8} {:<24} DETAIL",
        "NAME", "TRANSPORT", "STATE", "MODEL"
    )
}

fn device_line(d: &DeviceInfo) -> String {
    format!(
        "{:<24} {:<10} {:<8} {:<24} {}",
        d.name.as_str(),
        d.transport.as_str(),
        if d.online { "online" } else { "offline" },
        d.model.as_deref().unwrap_or("-"),
        d.state_detail.as_deref().unwrap_or(&d.serial)
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
        Err(e) => return fail_as(&e, as_json),
    };
    let server = config.adb.server;
    let reach = crate::adb_reach::other_users(server).await;
    if as_json {
        let mut adb = json!(reach);
        adb["address"] = json!(server.to_string());
        let mut out = json!(status);
        out["adb_server"] = adb;
        print_json(&out);
        return ExitCode::SUCCESS;
    }
    if status.devices.is_empty() {
        outln!("no devices");
    } else {
        outln!("{}", device_header());
        outln!(
            "  {:<22} {:<10} {:<16} {:<26} OUTCOME",
            "SERVICE",
            "STATE",
            "ACTION",
            "WHEN"
        );
    }
    for d in &status.devices {
        outln!("{}", device_line(&d.device));
        if d.services.is_empty() {
            outln!("  (no calls since the daemon started)");
            continue;
        }
        for (service, s) in &d.services {
            let when = s.finished_at.as_deref().unwrap_or(&s.started_at);
            let outcome = match (&s.error, s.duration_ms) {
                (Some(e), _) => format!("{}: {}", e.code.as_str(), e.message),
                (None, Some(ms)) => format!("{ms} ms"),
                (None, None) => String::new(),
            };
            outln!(
                "  {:<22} {:<10} {:<16} {:<26} {}",
                service,
                s.state,
                s.action,
                when,
                outcome
            );
        }
    }
    for line in crate::health::lines(&status.daemon) {
        outln!("{line}");
    }
    for problem in &status.problems {
        outln!("{}: {}", problem.transport, problem.error.message);
    }
    if let Some(line) = reach.line(server) {
        outln!("{line}");
    }
    ExitCode::SUCCESS
}

/// `droidwarden config check`: what the daemon would run with, secrets
/// left out (only whether a password or key is set).
fn print_config_summary(config: &Config) {
    use crate::config::BrokerTarget;
    outln!("configuration is valid");
    outln!("state dir:  {}", config.state_dir.display());
    outln!("adb server: {}", config.adb.server);
    let mqtt = &config.mqtt;
    match &mqtt.broker {
        BrokerTarget::Embedded { listen, .. } => {
            outln!(
                "MQTT:       embedded broker on {listen}, prefix {}",
                mqtt.prefix
            );
        }
        BrokerTarget::External { host, port, tls } => outln!(
            "MQTT:       {}://{host}:{port}{}, prefix {}",
            if tls.is_some() { "mqtts" } else { "mqtt" },
            match &mqtt.credentials {
                Some(c) => format!(" as {} (password set)", c.username),
                None => String::new(),
            },
            mqtt.prefix
        ),
    }
    match &mqtt.discovery {
        Some(prefix) => outln!("Home Assistant discovery: on, prefix {prefix}"),
        None => outln!("Home Assistant discovery: off"),
    }
    outln!("D-Bus:      {}", config.dbus.as_str());
    if config.dbus != DbusBus::Off {
        let socket = config
            .api_socket
            .clone()
            .unwrap_or_else(|| crate::dbus::p2p::daemon_path(&config.state_dir));
        outln!("API socket: {}", socket.display());
    }
    match &config.llm {
        Some(llm) => outln!(
            "agent:      {} model {} at {} ({} mode, approval above {})",
            llm.provider.as_str(),
            llm.model,
            llm.base_url,
            match config.agent.tool_mode {
                droidwarden_agent::ToolMode::Toolkit => "toolkit",
                droidwarden_agent::ToolMode::Direct => "direct",
            },
            config.agent.approval.auto_approve_up_to.as_str()
        ),
        None => outln!("agent:      off (no [llm] provider)"),
    }
    for (serial, name) in &config.adb.names {
        outln!("device {name}: adb serial {serial}");
    }
    for (id, name) in &config.companion.names {
        outln!("device {name}: companion id {id}");
    }
    if config.companion.auto_register {
        outln!("companion phones with unknown ids: registered by their id");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
