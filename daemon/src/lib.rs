//! `droidwarden`, the daemon as a library: [`daemon::Daemon::start`] runs
//! the whole daemon — the hub, the phones' transports, the embedded broker,
//! MQTT, D-Bus, MCP, metrics, the agent and the automations — under one
//! shutdown token, and [`main`] is the command line the binary runs. The
//! binary (`main.rs`) is one call to [`main`]; tests start the daemon
//! in-process with [`daemon::Daemon::start`].

/// `println!` for the command line's output. A closed pipe
/// (`droidwarden services | head`) ends the process quietly with status
/// 141, as it would end a shell tool, instead of a panic.
macro_rules! outln {
    () => {
        $crate::output::write(|o| std::io::Write::write_all(o, b"\n"))
    };
    ($($arg:tt)*) => {
        $crate::output::write(|o| {
            std::io::Write::write_fmt(o, format_args!($($arg)*))?;
            std::io::Write::write_all(o, b"\n")
        })
    };
}

/// `print!` with [`outln!`]'s handling of a closed pipe.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::output::write(|o| std::io::Write::write_fmt(o, format_args!($($arg)*)))
    };
}

mod output {
    use std::io::{ErrorKind, StdoutLock};

    /// Write to standard output; see [`outln!`].
    pub(crate) fn write(f: impl FnOnce(&mut StdoutLock<'static>) -> std::io::Result<()>) {
        let mut out = std::io::stdout().lock();
        match f(&mut out).and_then(|()| std::io::Write::flush(&mut out)) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::BrokenPipe => std::process::exit(141),
            Err(e) => {
                // A full disk or a closed terminal: say so, and fail as
                // `echo` would (exit status 74, EX_IOERR), without a panic.
                eprintln!("droidwarden: cannot write to standard output: {e}");
                std::process::exit(74);
            }
        }
    }
}

mod adb_reach; // Whether other local users can reach the adb server (`status`, as root).
mod agent_cli;
mod automations_cli; // `droidwarden automations` (docs/automations.md).
mod broker;
mod call;
mod cli;
mod client; // How a command reaches the daemon, and the output every command shares.
pub mod config; // Layered configuration: defaults, file, environment (docs/configuration.md).
pub mod daemon; // `Daemon::start`: the daemon in-process; its start-up and ordered shutdown.
// The core: the call hub, each device's order, the delivery store, polling.
use droidwarden_core::{accept, assistant, delivery, hub, poll, private};
// Schedules and triggers that run calls or the agent (docs/automations.md).
use droidwarden_automations as automations;
// MCP, both ways (docs/mcp.md): the adapter crate.
use droidwarden_mcp as mcp;
// The event centre, one approval list, the health report, wireless pairing.
use droidwarden_app::{approvals, events, health, wireless};
// The MQTT adapter (docs/mqtt-api.md).
use droidwarden_mqtt as mqtt;
// The D-Bus adapter (docs/dbus-api.md).
use droidwarden_dbus as dbus;
mod logging;
mod man; // `droidwarden man`: the manual page.
mod mcp_stdio; // `droidwarden mcp`: the MCP server on stdio (docs/mcp.md).
mod metrics;
mod mqtt_users; // The embedded broker's users (docs/mqtt-access.md).
mod pair_cli; // `droidwarden pair`, `discover`: wireless debugging set-up (the CLI side).
mod reload;
mod services_cli; // `droidwarden services [SERVICE [ACTION]]`.
mod skills_cli; // `droidwarden skills`, `skill run` (docs/skills.md).
mod systemd;

use clap::Parser;
use std::process::ExitCode;

/// Exit status for a configuration error (`EX_CONFIG` from sysexits.h);
/// systemd is told not to restart on it (`RestartPreventExitStatus=78`):
/// only an edited file helps.
pub(crate) const EXIT_CONFIG: u8 = 78;

/// Exit status when the state directory or a file in it cannot be created
/// (`EX_CANTCREAT`): read-only or full file system, a file where the
/// directory should be, missing permissions. Not a configuration error:
/// freeing the disk or fixing the mount is enough, so systemd restarts.
pub(crate) const EXIT_CANTCREAT: u8 = 73;

/// Exit status for an I/O error on the state (`EX_IOERR`): the session
/// store cannot be read or written. systemd restarts.
pub(crate) const EXIT_IOERR: u8 = 74;

/// The command line: parse the arguments, set up logging and the runtime,
/// and run the command (`droidwarden --help`). Returns the exit status.
pub fn main() -> ExitCode {
    // Before anything can create a file: whatever we write is ours alone.
    private::restrict_umask();
    let args = cli::Args::parse();
    // The daemon reports what it does; one-shot commands stay quiet.
    // `mcp` speaks JSON-RPC on stdout; logs go to stderr as always.
    logging::init(if matches!(args.command, cli::Command::Daemon) {
        "info"
    } else {
        "warn"
    });
    if let Some(code) = cli::print_generated(&args.command) {
        return code;
    }
    if let cli::Command::Config(cli::ConfigCommand::PrintDefault) = args.command {
        out!("{}", config::DEFAULT_TOML);
        return ExitCode::SUCCESS;
    }
    let config = match config::load(args.config.as_deref()) {
        Ok(config) => config::Config {
            api_socket: args.socket.clone(),
            ..config
        },
        Err(e) => {
            eprintln!("droidwarden: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    // Only the daemon serves many callers at once. Every other command is
    // one client doing one thing at a time (`mcp` serves one client, one
    // request after another), and one thread that drives its own I/O saves
    // a hand-off between threads at every wait: a `call --local` of
    // `battery.status` takes about 8 % less time than one awaited from
    // outside two worker threads
    // (`docs/benchmarks.md`, "adb_call").
    let mut builder = if matches!(args.command, cli::Command::Daemon) {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    let runtime = match builder.enable_all().thread_name("droidwarden").build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("droidwarden: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(cli::run(args.command, config))
}
