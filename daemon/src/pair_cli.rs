//! `droidwarden pair HOST:PORT [CODE]` and `droidwarden discover`: setting
//! up a phone for wireless debugging (Android 11+) through the adb server
//! the rest of droidwarden uses (`[adb] server`, started with `[adb]
//! program` when it is not running, as `devices --local` does).
//!
//! Both ask the server's host services (`droidwarden_bridge::adb::host`),
//! which only platform-tools 30 and newer have. Against an older server
//! (Debian 12's adb 29.0.6) they say which adb is running — the program
//! behind the server's port when this user can see it, else the
//! configured program — and what to install, instead of the server's
//! "unknown host service".
//!
//! The pairing code is a secret: read from the argument, or from the
//! terminal without echo, or from standard input; it goes only into the
//! request to the server and is never logged or passed to a program.

use crate::client::{fail_as, print_json};
use crate::config::Config;
use droidwarden_bridge::adb::AdbTransport;
use droidwarden_bridge::adb::host::{
    self, HostError, MdnsCheck, MdnsService, PairingCode, PhoneAddress, ServiceKind,
};
use droidwarden_bridge::{DeviceInfo, Registry};
use droidwarden_services::{ErrorCode, WireError};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// How long the mDNS requests and the look for the server's program may
/// take: the server answers them from memory.
const QUICK: Duration = Duration::from_secs(5);

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
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(100..=120_000))]
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
    let (server, _) = match server_up(&config).await {
        Ok(up) => up,
        Err(e) => return fail_as(&e, as_json),
    };
    let timeout = Duration::from_millis(args.timeout_ms);
    let paired = match host::pair(server, &target, &code, timeout).await {
        Ok(paired) => paired,
        Err(e) => return fail_as(&explain(e, &config).await, as_json),
    };
    drop(code);
    // Where the phone's connect port is now, if the server sees it.
    let connect = match &paired.guid {
        Some(guid) => host::mdns_services(server, QUICK)
            .await
            .ok()
            .and_then(|all| {
                all.into_iter()
                    .find(|s| s.kind == ServiceKind::Connect && &s.instance == guid)
            }),
        None => None,
    };
    let next = next_step(&target, connect.as_ref());
    if as_json {
        print_json(&json!({
            "paired": target.to_string(),
            "guid": paired.guid,
            "message": paired.message,
            "connect": connect.as_ref().map(|s| &s.address),
            "next": next,
        }));
    } else {
        outln!("{}", paired.message);
        outln!("{next}");
    }
    ExitCode::SUCCESS
}

/// What to do once paired: connect, on the connect port.
fn next_step(target: &PhoneAddress, connect: Option<&MdnsService>) -> String {
    let address = match connect {
        Some(s) => s.address.clone(),
        None => format!("{}:CONNECTPORT", target.host()),
    };
    let found = match connect {
        Some(s) => format!(
            "The adb server sees its connect port at {} ({}), and connects a paired phone it sees over mDNS by itself, as {}. ",
            s.address,
            s.service,
            s.serial()
        ),
        None => "The connect port is the one under \"IP address & Port\" at the top of the phone's Wireless debugging screen, not the pairing port. ".into(),
    };
    format!(
        "Next: connect. {found}To keep it connected, add it to the configuration, [adb] connect = [\"{address}\"] \
         (or `adb connect {address}` once). The connect port changes when the phone restarts or wireless debugging \
         is turned off and on: update it then (`droidwarden discover` shows it), and give the phone a fixed address \
         (a DHCP reservation)."
    )
}

/// `droidwarden discover`: the phones the adb server sees over mDNS.
pub(crate) async fn discover(args: DiscoverArgs, config: Config) -> ExitCode {
    let as_json = args.json;
    let (server, devices) = match server_up(&config).await {
        Ok(up) => up,
        Err(e) => return fail_as(&e, as_json),
    };
    let check = match host::mdns_check(server, QUICK).await {
        Ok(check) => check,
        Err(e) => return fail_as(&explain(e, &config).await, as_json),
    };
    let services = match host::mdns_services(server, QUICK).await {
        Ok(services) => services,
        Err(e) => return fail_as(&explain(e, &config).await, as_json),
    };
    let rows: Vec<(MdnsService, Option<&DeviceInfo>)> = services
        .into_iter()
        .map(|s| {
            let device = connected_as(&s, &devices);
            (s, device)
        })
        .collect();
    let (running, mdns) = match &check {
        MdnsCheck::Running(text) => (true, text.clone()),
        MdnsCheck::Disabled(text) => (false, text.clone()),
    };
    if as_json {
        let list: Vec<_> = rows
            .iter()
            .map(|(s, d)| {
                json!({
                    "instance": s.instance,
                    "service": s.service,
                    "kind": s.kind,
                    "address": s.address,
                    "connected": d.is_some_and(|d| d.online),
                    "device": d.map(|d| d.name.as_str()),
                    "state": d.map(state_of),
                })
            })
            .collect();
        print_json(&json!({
            "adb_server": server.to_string(),
            "mdns": { "running": running, "check": mdns },
            "services": list,
        }));
        return ExitCode::SUCCESS;
    }
    if !running {
        eprintln!(
            "droidwarden: the adb server at {server} does not discover phones over mDNS ({mdns}): it was started with ADB_MDNS=0, or mDNS is off"
        );
    }
    if rows.is_empty() {
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
    for (s, d) in &rows {
        let connected = match d {
            Some(d) => format!("{} ({})", d.name.as_str(), state_of(d)),
            None if s.kind == ServiceKind::Pairing => {
                "-  (pair: droidwarden pair ADDRESS CODE)".into()
            }
            None => "no".into(),
        };
        outln!(
            "{:<8} {:<36} {:<22} {:<24} {}",
            s.kind.as_str(),
            s.instance,
            s.address,
            s.service,
            connected
        );
    }
    ExitCode::SUCCESS
}

/// The device the adb server lists for this service, if any: by its
/// address (`adb connect IP:PORT`) or by its mDNS name (a server that
/// connected it by itself names it `INSTANCE._adb-tls-connect._tcp`).
fn connected_as<'a>(service: &MdnsService, devices: &'a [DeviceInfo]) -> Option<&'a DeviceInfo> {
    let by_name = format!("{}.", service.instance);
    devices
        .iter()
        .find(|d| d.serial == service.address || d.serial.starts_with(&by_name))
}

fn state_of(d: &DeviceInfo) -> String {
    if d.online {
        "online".into()
    } else {
        d.state_detail.clone().unwrap_or_else(|| "offline".into())
    }
}

/// The adb server's address once it answers, started if needed as every
/// local command starts it, with the devices it lists.
async fn server_up(
    config: &Config,
) -> Result<(std::net::SocketAddrV4, Vec<DeviceInfo>), WireError> {
    let registry = Arc::new(Registry::new());
    let adb = AdbTransport::new(config.adb.clone(), Arc::clone(&registry));
    adb.refresh().await.map_err(|e| e.to_wire())?;
    Ok((adb.server(), registry.list()))
}

/// A host error as the user's error; for a server too old for the
/// service, which adb it is and what to install.
async fn explain(e: HostError, config: &Config) -> WireError {
    let HostError::Unsupported {
        server, service, ..
    } = &e
    else {
        return e.to_wire();
    };
    let running = which_adb(*server, &config.adb.adb_program).await;
    WireError::new(
        ErrorCode::UnsupportedAction,
        format!(
            "the adb server at {server} is {running}, which has no {service}: pairing and mDNS discovery need \
             platform-tools 30 or newer (Debian 12's adb is 29.0.6). Install a newer adb — Google's platform-tools \
             (https://developer.android.com/tools/releases/platform-tools), or the adb in the PyPI adbutils wheel \
             (`pip install adbutils`: adbutils/binaries/adb in its site-packages) — set [adb] program to it, stop the \
             old server (`adb kill-server`) and run this again: droidwarden starts the new one"
        ),
    )
}

/// Which adb runs the server at `server`: the program behind its port when
/// this user can see it, else what the configured program says it is.
async fn which_adb(server: std::net::SocketAddrV4, configured: &Path) -> String {
    let port = server.port();
    let behind = if server.ip().is_loopback() {
        tokio::time::timeout(
            QUICK,
            tokio::task::spawn_blocking(move || listener_program(port)),
        )
        .await
        .ok()
        .and_then(Result::ok)
        .flatten()
    } else {
        None
    };
    match behind {
        Some(exe) => match adb_version(&exe).await {
            Some(v) => format!("adb {v} ({})", exe.display()),
            None => format!("{} (version unknown)", exe.display()),
        },
        None => match adb_version(configured).await {
            Some(v) => format!(
                "an adb older than platform-tools 30 (its program is not visible to this user; `{}` is adb {v})",
                configured.display()
            ),
            None => "an adb older than platform-tools 30".into(),
        },
    }
}

/// `PROGRAM version`'s version line (`29.0.6-debian`), within [`QUICK`].
async fn adb_version(program: &Path) -> Option<String> {
    let mut cmd = tokio::process::Command::new(program);
    cmd.arg("version")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    let out = tokio::time::timeout(QUICK, cmd.output()).await.ok()?.ok()?;
    version_line(&String::from_utf8_lossy(&out.stdout))
}

/// The version in `adb version`'s output: `Version 29.0.6-debian`.
fn version_line(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.trim().strip_prefix("Version "))
        .map(|v| v.trim().to_owned())
}

/// The executable of the process listening on TCP `port` on this host,
/// from `/proc` (Linux; only processes this user may inspect). Blocking.
fn listener_program(port: u16) -> Option<PathBuf> {
    let inodes: Vec<String> = ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .flat_map(|table| listening_inodes(&table, port))
        .collect();
    if inodes.is_empty() {
        return None;
    }
    let wanted: Vec<String> = inodes.iter().map(|i| format!("socket:[{i}]")).collect();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let pid = entry.file_name();
        if !pid.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if let Ok(link) = std::fs::read_link(fd.path())
                && wanted.iter().any(|w| link.as_os_str() == w.as_str())
            {
                return std::fs::read_link(entry.path().join("exe")).ok();
            }
        }
    }
    None
}

/// The inodes of sockets listening on `port` in a `/proc/net/tcp` table.
fn listening_inodes(table: &str, port: u16) -> Vec<String> {
    let port = format!(":{port:04X}");
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            // local_address is field 1, st field 3 (0A: LISTEN), inode 9.
            (f.len() > 9 && f[1].ends_with(&port) && f[3] == "0A").then(|| f[9].to_owned())
        })
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listening_socket_is_found_by_port() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 0100007F:13AD 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 100 0 0 10 0\n\
   1: 0100007F:13AD 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 4343 1 0000000000000000 20 4 30 10 -1\n";
        assert_eq!(listening_inodes(table, 5037), vec!["4242"]);
        assert!(listening_inodes(table, 5038).is_empty());
    }

    #[test]
    fn the_version_line_is_read() {
        let text = "Android Debug Bridge version 1.0.41\nVersion 29.0.6-debian\nInstalled as /usr/lib/android-sdk/platform-tools/adb\n";
        assert_eq!(version_line(text).as_deref(), Some("29.0.6-debian"));
        assert_eq!(version_line("nothing"), None);
    }

    #[test]
    fn the_next_step_names_the_connect_port_when_known() {
        let target = PhoneAddress::try_from("192.168.1.40:37123").unwrap();
        let none = next_step(&target, None);
        assert!(none.contains("192.168.1.40:CONNECTPORT"), "{none}");
        assert!(none.contains("not the pairing port"), "{none}");
        let seen = host::parse_services("adb-X-1\t_adb-tls-connect._tcp\t192.168.1.40:41000\n");
        let some = next_step(&target, seen.first());
        assert!(
            some.contains("[adb] connect = [\"192.168.1.40:41000\"]"),
            "{some}"
        );
        assert!(some.contains("adb-X-1._adb-tls-connect._tcp"), "{some}");
    }
}
