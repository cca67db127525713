//! `droidwarden pair HOST:PORT [CODE]` and `droidwarden discover`: setting
//! up a phone for wireless debugging (Android 11+) through the adb server
//! the rest of droidwarden uses (`[adb] server`, started with `[adb]
//! program` when it is not running, as `devices --local` does).
//!
//! The work is `crate::wireless`'s, which D-Bus `Pair` and `Discover` call
//! too; this module reads the arguments and the code, and renders.
//!
//! The pairing code is a secret: read from the argument, or from the
//! terminal without echo, or from standard input; it goes only into the
//! request to the server and is never logged or passed to a program.

use crate::client::{fail_as, print_json};
use crate::config::Config;
use crate::wireless::{self, PAIR_TIMEOUT_MAX_MS, PAIR_TIMEOUT_MIN_MS, PAIR_TIMEOUT_MS};
use droidwarden_bridge::Registry;
use droidwarden_bridge::adb::AdbTransport;
use droidwarden_bridge::adb::host::{PairingCode, PhoneAddress};
use droidwarden_services::{ErrorCode, WireError};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// How long reading the pairing code may take: a person types it.
const CODE_PROMPT: Duration = Duration::from_secs(300);

/// `droidwarden pair`.
#[derive(Debug, clap::Args)]
pub(crate) struct PairArgs {
    /// The phone's pairing address, shown under Wireless debugging > Pair
    /// device with pairing code (not the connect port): 192.168.1.40:37123.
    #[arg(value_name = "HOST:PORT")]
    address: String,
    /// The six-digit pairing code. Leave it out to type it without echo
    /// (or pipe it on standard input): an argument is visible to other
    /// users of this machine while the command runs.
    #[arg(value_name = "CODE")]
    code: Option<String>,
    /// How long to wait for the phone, in milliseconds.
    #[arg(long, default_value_t = PAIR_TIMEOUT_MS, value_parser = clap::value_parser!(u64).range(PAIR_TIMEOUT_MIN_MS..=PAIR_TIMEOUT_MAX_MS))]
    timeout_ms: u64,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// `droidwarden discover`.
#[derive(Debug, clap::Args)]
pub(crate) struct DiscoverArgs {
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// `droidwarden pair HOST:PORT [CODE]`.
pub(crate) async fn pair(args: PairArgs, config: Config) -> ExitCode {
    let as_json = args.json;
    // Everything given is checked before anything is sent.
    let target = match PhoneAddress::try_from(args.address.as_str()) {
        Ok(t) => t,
        Err(e) => return fail_as(&e.to_wire(), as_json),
    };
    let code = match args.code {
        Some(code) => PairingCode::try_from(code),
        None => match read_code().await {
            Ok(code) => PairingCode::try_from(code),
            Err(e) => return fail_as(&e, as_json),
        },
    };
    let code = match code {
        Ok(code) => code,
        Err(e) => return fail_as(&e.to_wire(), as_json),
    };
    let adb = match server_up(&config).await {
        Ok(adb) => adb,
        Err(e) => return fail_as(&e, as_json),
    };
    let timeout = Duration::from_millis(args.timeout_ms);
    let paired = wireless::pair(&adb, &target, &code, timeout).await;
    drop(code);
    let paired = match paired {
        Ok(paired) => paired,
        Err(e) => return fail_as(&e, as_json),
    };
    if as_json {
        print_json(&serde_json::to_value(&paired).unwrap_or_default());
    } else {
        outln!("{}", paired.message);
        outln!("{}", paired.next);
    }
    ExitCode::SUCCESS
}

/// `droidwarden discover`: the phones the adb server sees over mDNS.
pub(crate) async fn discover(args: DiscoverArgs, config: Config) -> ExitCode {
    let as_json = args.json;
    let adb = match server_up(&config).await {
        Ok(adb) => adb,
        Err(e) => return fail_as(&e, as_json),
    };
    let report = match wireless::discover(&adb, &adb.registry().list()).await {
        Ok(report) => report,
        Err(e) => return fail_as(&e, as_json),
    };
    if as_json {
        print_json(&serde_json::to_value(&report).unwrap_or_default());
        return ExitCode::SUCCESS;
    }
    if !report.mdns.running {
        eprintln!(
            "droidwarden: the adb server at {} does not discover phones over mDNS ({}): it was started with ADB_MDNS=0, or mDNS is off",
            report.adb_server, report.mdns.check
        );
    }
    if report.services.is_empty() {
        outln!(
            "no phones seen over mDNS (a phone announces itself while Wireless debugging is on, on the same network; the pairing port only while \"Pair device with pairing code\" is open)"
        );
        return ExitCode::SUCCESS;
    }
    outln!(
        "{:<8} {:<36} {:<22} {:<24} CONNECTED",
        "KIND",
        "INSTANCE",
        "ADDRESS",
        "SERVICE"
    );
    for s in &report.services {
        let connected = match (&s.device, &s.state) {
            (Some(device), Some(state)) => format!("{device} ({state})"),
            _ if s.kind == "pairing" => "-  (pair: droidwarden pair ADDRESS CODE)".into(),
            _ => "no".into(),
        };
        outln!(
            "{:<8} {:<36} {:<22} {:<24} {}",
            s.kind,
            s.instance,
            s.address,
            s.service,
            connected
        );
    }
    ExitCode::SUCCESS
}

/// The ADB transport on the configured adb server once it answers,
/// started if needed as every local command starts it, its devices listed.
async fn server_up(config: &Config) -> Result<AdbTransport, WireError> {
    let registry = Arc::new(Registry::new());
    let adb = AdbTransport::new(config.adb.clone(), registry);
    adb.refresh().await.map_err(|e| e.to_wire())?;
    Ok(adb)
}

/// Read the pairing code: from the terminal without echo, or a line of
/// standard input when it is not a terminal.
async fn read_code() -> Result<String, WireError> {
    let read = tokio::task::spawn_blocking(read_code_blocking);
    match tokio::time::timeout(CODE_PROMPT, read).await {
        Ok(Ok(Ok(code))) => Ok(code),
        Ok(Ok(Err(e))) => Err(WireError::new(
            ErrorCode::InvalidParams,
            format!("cannot read the pairing code: {e}"),
        )),
        Ok(Err(e)) => Err(WireError::new(ErrorCode::Internal, e.to_string())),
        Err(_) => Err(WireError::new(
            ErrorCode::Timeout,
            "no pairing code typed within 5 minutes",
        )),
    }
}

fn read_code_blocking() -> std::io::Result<String> {
    use std::io::{BufRead as _, IsTerminal as _, Write as _};
    let stdin = std::io::stdin();
    let mut line = String::new();
    if stdin.is_terminal() {
        eprint!("Pairing code (Wireless debugging > Pair device with pairing code): ");
        std::io::stderr().flush()?;
        let _echo = NoEcho::set(&stdin);
        stdin.lock().read_line(&mut line)?;
        eprintln!();
    } else {
        stdin.lock().read_line(&mut line)?;
    }
    if line.trim().is_empty() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "no pairing code given (give it as CODE, type it, or pipe it on standard input)",
        ));
    }
    Ok(line)
}

/// Echo off on the terminal while it lives; restored when dropped.
struct NoEcho<'a> {
    stdin: &'a std::io::Stdin,
    saved: Option<rustix::termios::Termios>,
}

impl<'a> NoEcho<'a> {
    fn set(stdin: &'a std::io::Stdin) -> Self {
        use rustix::termios::{LocalModes, OptionalActions, tcgetattr, tcsetattr};
        let saved = tcgetattr(stdin).ok();
        if let Some(saved) = &saved {
            let mut quiet = saved.clone();
            quiet.local_modes.remove(LocalModes::ECHO);
            // ECHONL keeps the newline visible, so the prompt ends its line.
            quiet.local_modes.insert(LocalModes::ECHONL);
            let _ = tcsetattr(stdin, OptionalActions::Now, &quiet);
        }
        Self { stdin, saved }
    }
}

impl Drop for NoEcho<'_> {
    fn drop(&mut self) {
        if let Some(saved) = &self.saved {
            let _ = rustix::termios::tcsetattr(
                self.stdin,
                rustix::termios::OptionalActions::Now,
                saved,
            );
        }
    }
}
