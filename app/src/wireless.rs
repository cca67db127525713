//! Wireless debugging set-up through the adb server (Android 11+): pairing
//! a phone and the phones the server sees over mDNS. One code path for
//! every way in: `droidwarden pair` and `discover` (`pair_cli.rs`, which
//! reads the arguments and renders) and D-Bus `Pair` and `Discover`
//! (the D-Bus adapter, on the daemon's own ADB transport) both call
//! [`pair`] and [`discover`] and get the same typed reports.
//!
//! Both ask the server's host services (`droidwarden_bridge::adb::host`),
//! which only platform-tools 30 and newer have. Against an older server
//! (Debian 12's adb 29.0.6) the error says which adb is running — the
//! program behind the server's port when this user can see it, else the
//! configured program — and what to install, instead of the server's
//! "unknown host service".

use droidwarden_bridge::DeviceInfo;
use droidwarden_bridge::adb::AdbTransport;
use droidwarden_bridge::adb::host::{
    self, HostError, MdnsCheck, MdnsService, PairingCode, PhoneAddress, ServiceKind,
};
use droidwarden_services::{ErrorCode, WireError};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long the mDNS requests and the look for the server's program may
/// take: the server answers them from memory.
const QUICK: Duration = Duration::from_secs(5);

/// The default and the bounds of the time a pairing may take, in
/// milliseconds: the phone answers within seconds, or never.
pub const PAIR_TIMEOUT_MS: u64 = 20_000;
/// The shortest pairing time allowed.
pub const PAIR_TIMEOUT_MIN_MS: u64 = 100;
/// The longest pairing time allowed.
pub const PAIR_TIMEOUT_MAX_MS: u64 = 120_000;

/// What a successful pairing answered (`droidwarden pair --json`, D-Bus
/// `Pair`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PairReport {
    /// The pairing address given (`192.168.1.40:37123`).
    pub paired: String,
    /// The phone's wireless debugging id (`adb-SERIAL-xxxxxx`), when the
    /// server said it.
    pub guid: Option<String>,
    /// The server's words (`Successfully paired to …`).
    pub message: String,
    /// The phone's connect address, when the server sees it over mDNS.
    pub connect: Option<String>,
    /// What to do next, for people.
    pub next: String,
}

/// What the adb server sees over mDNS (`droidwarden discover --json`,
/// D-Bus `Discover`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiscoverReport {
    /// The adb server asked (`127.0.0.1:5037`).
    pub adb_server: String,
    /// Whether its mDNS discovery runs.
    pub mdns: MdnsState,
    /// Every service it sees.
    pub services: Vec<Discovered>,
}

/// Whether the server's mDNS discovery runs, and its words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MdnsState {
    /// Whether discovery runs.
    pub running: bool,
    /// The server's answer to `host:mdns:check`.
    pub check: String,
}

/// One service the server sees over mDNS, and the device it is, if any.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Discovered {
    /// The instance name (`adb-SERIAL-xxxxxx`).
    pub instance: String,
    /// The service type (`_adb-tls-connect._tcp`).
    pub service: String,
    /// `pairing`, `connect`, `legacy` or `other`.
    pub kind: String,
    /// Where it listens: `IPV4:PORT`.
    pub address: String,
    /// Whether the device it is is online.
    pub connected: bool,
    /// The device's name, when the server lists it.
    pub device: Option<String>,
    /// `online`, or why not (`unauthorized: accept …`).
    pub state: Option<String>,
}

/// Pair the phone whose pairing port is `target` with `code`, within
/// `timeout`, through `adb`'s server.
///
/// # Errors
/// `unsupported_action` from a server older than platform-tools 30 (with
/// which adb it is and what to install); the server's own answer when the
/// phone does not accept (`device_error`); `timeout`, `device_offline`.
pub async fn pair(
    adb: &AdbTransport,
    target: &PhoneAddress,
    code: &PairingCode,
    timeout: Duration,
) -> Result<PairReport, WireError> {
    let server = adb.server();
    let paired = match host::pair(server, target, code, timeout).await {
        Ok(paired) => paired,
        Err(e) => return Err(explain(e, adb.program()).await),
    };
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
    Ok(PairReport {
        paired: target.to_string(),
        guid: paired.guid,
        message: paired.message,
        connect: connect.as_ref().map(|s| s.address.clone()),
        next: next_step(target, connect.as_ref()),
    })
}

/// The phones `adb`'s server sees over mDNS, each with the device it is
/// among `devices` (the registry's list).
///
/// # Errors
/// As [`pair`], for a server too old or unreachable.
pub async fn discover(
    adb: &AdbTransport,
    devices: &[DeviceInfo],
) -> Result<DiscoverReport, WireError> {
    let server = adb.server();
    let check = match host::mdns_check(server, QUICK).await {
        Ok(check) => check,
        Err(e) => return Err(explain(e, adb.program()).await),
    };
    let services = match host::mdns_services(server, QUICK).await {
        Ok(services) => services,
        Err(e) => return Err(explain(e, adb.program()).await),
    };
    let services = services
        .into_iter()
        .map(|s| {
            let device = connected_as(&s, devices);
            Discovered {
                kind: s.kind.as_str().to_owned(),
                connected: device.is_some_and(|d| d.online),
                device: device.map(|d| d.name.as_str().to_owned()),
                state: device.map(state_of),
                instance: s.instance,
                service: s.service,
                address: s.address,
            }
        })
        .collect();
    let mdns = match check {
        MdnsCheck::Running(check) => MdnsState {
            running: true,
            check,
        },
        MdnsCheck::Disabled(check) => MdnsState {
            running: false,
            check,
        },
    };
    Ok(DiscoverReport {
        adb_server: server.to_string(),
        mdns,
        services,
    })
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

/// A host error as the user's error; for a server too old for the
/// service, which adb it is and what to install.
async fn explain(e: HostError, configured: &Path) -> WireError {
    let HostError::Unsupported {
        server, service, ..
    } = &e
    else {
        return e.to_wire();
    };
    let running = which_adb(*server, configured).await;
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
