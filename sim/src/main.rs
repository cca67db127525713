//! The `droidwarden-sim` binary: one emulated phone on a TCP port.
//!
//! Prints exactly one line on stdout when listening,
//! `droidwarden-sim ready adb=IP:PORT control=IP:PORT` (`control=-` when the
//! control port is off), then runs until SIGINT or SIGTERM. Logs go to
//! stderr, filtered by `RUST_LOG` (default `info`).

use std::io::{IsTerminal, Write};
use std::net::IpAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use droidwarden_sim::{Sim, SimConfig};

/// An emulated Android phone that the real adb server accepts over TCP.
#[derive(Debug, Parser)]
#[command(name = "droidwarden-sim", version, about)]
struct Args {
    /// ADB port to listen on (0 picks a free port).
    #[arg(long)]
    adb_port: u16,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    bind: IpAddr,
    /// ro.serialno reported by getprop.
    #[arg(long)]
    serial: Option<String>,
    /// ro.product.model reported by getprop and the ADB banner.
    #[arg(long)]
    model: Option<String>,
    /// Android release (e.g. 14); sets the matching SDK level too.
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
}

async fn terminated() -> anyhow::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("cannot watch SIGTERM")?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r.context("cannot watch SIGINT"),
        _ = term.recv() => Ok(()),
    }
}

#[tokio::main]
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
    let config = SimConfig {
        bind: args.bind,
        adb_port: args.adb_port,
        control_port: args.control_port,
        serial: args.serial,
        model: args.model,
        android_version: args.android_version,
        auth: args.auth,
        replay_dir: args.replay,
        command_log: args.command_log,
        initial_state: None,
    };
    let sim = Sim::start(config)
        .await
        .context("cannot start the emulated phone")?;
    let control = sim
        .control_addr()
        .map_or_else(|| "-".to_owned(), |a| a.to_string());
    {
        let mut stdout = std::io::stdout().lock();
        writeln!(
            stdout,
            "droidwarden-sim ready adb={} control={control}",
            sim.adb_addr()
        )?;
        stdout.flush()?;
    }
    let waited = terminated().await;
    tracing::info!("shutting down");
    sim.shutdown().await;
    waited
}
