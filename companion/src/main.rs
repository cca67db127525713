//! `droidwarden-companion`: parse arguments, read the configuration and
//! the password file, run the session until a signal.

use anyhow::Context;
use clap::{Parser, Subcommand};
use droidwarden_companion::{config, session, termux};
use std::path::PathBuf;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The droidwarden companion for Termux: answers the home server's requests
/// over MQTT with Termux:API commands.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// The configuration file (default ~/.config/droidwarden-companion/config.toml).
    #[arg(long, env = "DROIDWARDEN_COMPANION_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Cmd>,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Connect and answer requests (the default).
    Run,
    /// List the catalogue actions this companion offers and their commands.
    Actions,
    /// Print an example configuration file.
    ExampleConfig,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    match args.command.unwrap_or(Cmd::Run) {
        Cmd::Actions => {
            for (action, command) in termux::OFFERED {
                println!("{action:32} {command}");
            }
            Ok(())
        }
        Cmd::ExampleConfig => {
            print!("{}", config::EXAMPLE);
            Ok(())
        }
        Cmd::Run => run(args.config),
    }
}

fn run(path: Option<PathBuf>) -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("DROIDWARDEN_COMPANION_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let home = std::env::var("HOME").ok();
    let path = match path {
        Some(p) => p,
        None => {
            let base = std::env::var_os("XDG_CONFIG_HOME")
                .map(PathBuf::from)
                .or_else(|| home.as_ref().map(|h| PathBuf::from(h).join(".config")))
                .context("neither HOME nor XDG_CONFIG_HOME is set; pass --config")?;
            base.join("droidwarden-companion/config.toml")
        }
    };
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let config = config::Config::parse(&text, home.as_deref())
        .with_context(|| format!("in {}", path.display()))?;
    // The password is read once and never logged.
    let password = match &config.password_file {
        Some(file) => Some(
            std::fs::read_to_string(file)
                .with_context(|| format!("cannot read the password file {}", file.display()))?
                .lines()
                .next()
                .unwrap_or_default()
                .to_owned(),
        ),
        None => None,
    };
    let runtime = tokio::runtime::Runtime::new().context("cannot start the runtime")?;
    runtime.block_on(async move {
        let shutdown = CancellationToken::new();
        let signals = shutdown.clone();
        tokio::spawn(async move {
            wait_for_signal().await;
            signals.cancel();
        });
        tracing::info!(
            broker = %config.broker.host,
            port = config.broker.port,
            tls = config.broker.tls.is_some(),
            id = %config.companion_id,
            "starting"
        );
        session::run(Arc::new(config), password, shutdown).await
    })?;
    Ok(())
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }
        _ => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
