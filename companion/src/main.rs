//! `droidwarden-companion`: parse arguments, read the configuration and
//! the password file, run the session until a signal.

use anyhow::Context;
use clap::{Parser, Subcommand};
use droidwarden_companion::{check, config, session, status, termux};
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
    /// First run: check the configuration, every Termux:API command the
    /// companion needs, and which Android permission is missing.
    Check,
    /// Print one line saying what the running companion is doing.
    Status,
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
        Cmd::Check => check_command(args.config),
        Cmd::Status => {
            let (config, _) = load(args.config)?;
            let snapshot = status::read(&config.status_file);
            let alive = snapshot.as_ref().is_some_and(|s| status::alive(s.pid));
            let now = droidwarden_services::time::epoch_ms(std::time::SystemTime::now());
            println!("{}", status::line(snapshot.as_ref(), alive, now));
            if !alive {
                std::process::exit(3);
            }
            Ok(())
        }
    }
}

/// The log: standard error and the log file (appended; moved to
/// `companion.log.1` at start when it passed 1 MiB).
fn init_logging(file: &std::path::Path) -> anyhow::Result<()> {
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    if std::fs::metadata(file).is_ok_and(|m| m.len() > 1024 * 1024) {
        let _ = std::fs::rename(file, file.with_extension("log.1"));
    }
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(file)
        .with_context(|| format!("cannot open the log file {}", file.display()))?;
    let filter = || {
        tracing_subscriber::EnvFilter::try_from_env("DROIDWARDEN_COMPANION_LOG")
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"))
    };
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_filter(filter()),
        )
        .with(
            // Small appends to a local file; the lock is held per line.
            tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_writer(std::sync::Mutex::new(log))
                .with_filter(filter()),
        )
        .init();
    Ok(())
}

fn config_path(path: Option<PathBuf>, home: Option<&str>) -> anyhow::Result<PathBuf> {
    Ok(match path {
        Some(p) => p,
        None => {
            let base = std::env::var_os("XDG_CONFIG_HOME")
                .map(PathBuf::from)
                .or_else(|| home.map(|h| PathBuf::from(h).join(".config")))
                .context("neither HOME nor XDG_CONFIG_HOME is set; pass --config")?;
            base.join("droidwarden-companion/config.toml")
        }
    })
}

/// Read the configuration and the password.
fn load(path: Option<PathBuf>) -> anyhow::Result<(config::Config, Option<String>)> {
    let home = std::env::var("HOME").ok();
    let path = config_path(path, home.as_deref())?;
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
    Ok((config, password))
}

fn check_command(path: Option<PathBuf>) -> anyhow::Result<()> {
    let (config, password) = match load(path) {
        Ok(loaded) => loaded,
        Err(e) => {
            println!("CONFIG      {e:#}");
            println!("            (droidwarden-companion example-config prints an annotated one)");
            std::process::exit(1);
        }
    };
    println!(
        "ok          configuration: {}:{} as {} ({}), password {}",
        config.broker.host,
        config.broker.port,
        config.user,
        if config.broker.tls.is_some() {
            "TLS"
        } else {
            "no TLS"
        },
        if password.is_some() { "read" } else { "none" }
    );
    if let Some(file) = &config.password_file {
        use std::os::unix::fs::PermissionsExt;
        if std::fs::metadata(file).is_ok_and(|m| m.permissions().mode() & 0o077 != 0) {
            println!(
                "WARNING     {} can be read by others: chmod 600 it",
                file.display()
            );
        }
    }
    let runtime = tokio::runtime::Runtime::new().context("cannot start the runtime")?;
    let path_var = std::env::var("PATH").unwrap_or_default();
    let (findings, android) = runtime.block_on(async {
        (
            check::run(&path_var, config.command_timeout).await,
            check::android(config.command_timeout).await,
        )
    });
    println!("            {android}");
    for f in &findings {
        println!("{}", f.line());
    }
    let problems = findings.iter().filter(|f| f.is_problem()).count();
    if problems > 0 {
        println!("{problems} problem(s): the actions that need them answer an error until fixed");
        std::process::exit(2);
    }
    println!("all commands present; grant the permissions listed for the actions you use");
    Ok(())
}

fn run(path: Option<PathBuf>) -> anyhow::Result<()> {
    let (config, password) = load(path)?;
    init_logging(&config.log_file)?;
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
