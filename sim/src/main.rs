//! The `droidwarden-sim` binary: one emulated phone on a TCP port, and/or
//! its companion app on an MQTT broker.
//!
//! Prints exactly one line on stdout when ready,
//! `droidwarden-sim ready adb=IP:PORT control=IP:PORT` (`adb=-` without ADB,
//! `control=-` without a control port), with ` companion=ID` appended in
//! companion mode once the app's MQTT session is up; then runs until SIGINT
//! or SIGTERM. Logs go to stderr, filtered by `RUST_LOG` (default `info`).

use std::io::{IsTerminal, Write};
use std::net::IpAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::{ArgGroup, Parser};
use droidwarden_sim::{CompanionSettings, Sim, SimConfig};

/// An emulated Android phone that the real adb server accepts over TCP.
#[derive(Debug, Parser)]
#[command(name = "droidwarden-sim", version, about)]
#[command(group(ArgGroup::new("serve").required(true).multiple(true).args(["adb_port", "mqtt"])))]
struct Args {
    /// ADB port to listen on (0 picks a free port).
    #[arg(long)]
    adb_port: Option<u16>,
    /// Run the companion app against this MQTT broker:
    /// mqtt://[USER:PASSWORD@]HOST:PORT.
    #[arg(long, value_name = "URL", requires = "companion_id")]
    mqtt: Option<String>,
    /// The companion id (topic level and MQTT client id).
    #[arg(long, value_name = "ID", requires = "mqtt")]
    companion_id: Option<String>,
    /// The companion protocol's topic prefix.
    #[arg(long, value_name = "PREFIX", default_value = "droidwarden")]
    topic_prefix: String,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    bind: IpAddr,
    /// ro.serialno reported by getprop.
    #[arg(long)]
    serial: Option<String>,
    /// ro.product.model reported by getprop and the ADB banner.
    #[arg(long)]
    model: Option<String>,
    /// Android release (5 to 17, e.g. 14); sets the matching SDK level too.
    /// Before 7 the phone offers no shell protocol v2, as real ones did not.
    #[arg(long = "android")]
    android_version: Option<String>,
    /// Answer the commands in DIR/index.json from recorded files.
    #[arg(long, value_name = "DIR")]
    replay: Option<PathBuf>,
    /// Append every executed command to FILE as a JSON line.
    #[arg(long, value_name = "FILE")]
    command_log: Option<PathBuf>,
    /// Loopback JSON control port (0 picks a free port).
    #[arg(long)]
    control_port: Option<u16>,
    /// Ask the adb host to authenticate (any signature is accepted).
    #[arg(long)]
    auth: bool,
    /// Ask the adb host to authenticate and never accept its key, as a
    /// phone whose user has not answered the "Allow USB debugging?"
    /// prompt: adb lists it `unauthorized`.
    #[arg(long)]
    auth_prompt: bool,
    /// Announce the ADB port over mDNS as `_adb-tls-connect._tcp` under
    /// NAME (`adb-SERIAL-xxxxxx`), as a phone with wireless debugging on.
    #[arg(long, value_name = "NAME")]
    mdns_instance: Option<String>,
}

async fn terminated() -> anyhow::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("cannot watch SIGTERM")?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r.context("cannot watch SIGINT"),
        _ = term.recv() => Ok(()),
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    match run().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // `{:#}` prints the whole cause chain on one line, without a
            // backtrace even when RUST_BACKTRACE is set.
            eprintln!("droidwarden-sim: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let args = Args::parse();
    let companion = match (&args.mqtt, &args.companion_id) {
        (Some(url), Some(id)) => Some(CompanionSettings::new(url, id, &args.topic_prefix)?),
        _ => None,
    };
    let config = SimConfig {
        bind: args.bind,
        adb: args.adb_port.is_some(),
        adb_port: args.adb_port.unwrap_or(0),
        control_port: args.control_port,
        serial: args.serial,
        model: args.model,
        android_version: args.android_version,
        auth: args.auth,
        auth_prompt: args.auth_prompt,
        mdns_instance: args.mdns_instance,
        replay_dir: args.replay,
        command_log: args.command_log,
        initial_state: None,
        companion,
    };
    let sim = Sim::start(config)
        .await
        .context("cannot start the emulated phone")?;
    let control = sim
        .control_addr()
        .map_or_else(|| "-".to_owned(), |a| a.to_string());
    let adb = sim
        .adb_addr()
        .map_or_else(|| "-".to_owned(), |a| a.to_string());
    let companion = match sim.companion_id() {
        Some(id) => {
            // A phone waits for its broker as long as it takes; so does this
            // line (callers bound their wait for it).
            tokio::select! {
                r = sim.companion_connected() => r.context("the companion app never connected")?,
                r = terminated() => {
                    sim.shutdown().await;
                    return r;
                }
            }
            format!(" companion={id}")
        }
        None => String::new(),
    };
    {
        let mut stdout = std::io::stdout().lock();
        writeln!(
            stdout,
            "droidwarden-sim ready adb={adb} control={control}{companion}"
        )?;
        stdout.flush()?;
    }
    let waited = terminated().await;
    tracing::info!("shutting down");
    sim.shutdown().await;
    waited
}
