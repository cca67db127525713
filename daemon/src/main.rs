//! `droidwarden`: the binary. It owns every piece of wiring — configuration,
//! logging, the command line — and nothing else owns any.

mod agent_cli;
mod assistant; // The LLM agent in the daemon (docs/agent.md).
mod broker;
mod call;
mod cli;
mod config;
mod daemon;
mod dbus; // The D-Bus API (docs/dbus-api.md).
mod delivery; // Durable command ids and calls in flight (docs/mqtt-api.md).
mod hub;
mod mqtt;
mod poll;
mod reload;
mod sequencer; // Arrival order per device.
mod systemd;

use clap::Parser;
use std::process::ExitCode;

/// Exit status for a configuration error (`EX_CONFIG` from sysexits.h);
/// systemd is told not to restart on it.
const EXIT_CONFIG: u8 = 78;

fn main() -> ExitCode {
    let args = cli::Args::parse();
    // The daemon reports what it does; one-shot commands stay quiet.
    init_logging(if matches!(args.command, cli::Command::Daemon) {
        "info"
    } else {
        "warn"
    });
    if let cli::Command::Config(cli::ConfigCommand::PrintDefault) = args.command {
        print!("{}", config::DEFAULT_TOML);
        return ExitCode::SUCCESS;
    }
    let config = match config::load(args.config.as_deref()) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("droidwarden: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("droidwarden")
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("droidwarden: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(cli::run(args.command, config))
}

/// Log to the journal, with structured fields, when standard error is the
/// journal (a systemd service); to standard error otherwise. Without a
/// journal socket (a container), the journal stream gets plain lines
/// without colours or timestamps, which it adds itself.
fn init_logging(default_level: &str) {
    use tracing_subscriber::EnvFilter;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level));
    if !systemd::stderr_is_journal() {
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .init();
        return;
    }
    match tracing_journald::layer() {
        Ok(journal) => {
            // Our field names (device, service, action, session, error …)
            // become DEVICE=, SERVICE= … as they are: none is a journal
            // field, and `journalctl DEVICE=kitchen-tablet` reads well.
            let journal = journal
                .with_field_prefix(None)
                .with_syslog_identifier("droidwarden".into());
            tracing_subscriber::registry()
                .with(filter)
                .with(journal)
                .init();
        }
        Err(e) => {
            tracing_subscriber::fmt()
                .with_env_filter(filter)
                .with_writer(std::io::stderr)
                .with_ansi(false)
                .without_time()
                .init();
            tracing::warn!(error = %e, "standard error is the journal but its socket cannot be reached; logging plain lines");
        }
    }
}
