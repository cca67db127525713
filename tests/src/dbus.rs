//! D-Bus pieces of the harness: a private `dbus-daemon` and the standard
//! tools pointed at it (`busctl`, `gdbus`), so that tests see the daemon's
//! D-Bus API exactly as any other client would.
//!
//! Each bus lives in its own temporary directory and is killed on drop;
//! nothing touches the machine's session or system bus.

use crate::{KillOnDrop, wait_for};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The daemon's well-known name.
pub const NAME: &str = "org.droidwarden.Daemon1";
/// Its object path.
pub const PATH: &str = "/org/droidwarden/Daemon1";
/// Its interface.
pub const INTERFACE: &str = "org.droidwarden.Daemon1";

/// An address where no D-Bus is (a path where no socket is): set as a
/// bus address, the daemon and the CLI find no bus there, as on a server
/// without one.
pub const NO_BUS: &str = "unix:path=/nonexistent/droidwarden-test/bus";

/// The daemon's environment with `[dbus] bus = "auto"` and neither bus
/// reachable, so that it serves its API on its private socket only, under
/// `runtime` as `XDG_RUNTIME_DIR`. (The harness cannot remove variables
/// from the daemon's environment; an address where no bus is does the
/// same.)
///
/// # Panics
/// When `runtime` is not UTF-8.
pub fn no_bus_env(runtime: &Path) -> [(&'static str, &str); 4] {
    [
        ("DBUS_SESSION_BUS_ADDRESS", NO_BUS),
        ("DBUS_SYSTEM_BUS_ADDRESS", NO_BUS),
        ("DROIDWARDEN__DBUS__BUS", "auto"),
        (
            "XDG_RUNTIME_DIR",
            runtime.to_str().expect("a UTF-8 runtime dir"),
        ),
    ]
}

/// A CLI command in the environment of a root shell on a fresh server:
/// no session bus, an unusable system bus, no systemd runtime directory,
/// `runtime` as `XDG_RUNTIME_DIR` (where a daemon started with
/// [`no_bus_env`] has its socket).
pub fn without_bus<'a>(cmd: &'a mut Command, runtime: &Path) -> &'a mut Command {
    cmd.env_remove("DBUS_SESSION_BUS_ADDRESS")
        .env_remove("RUNTIME_DIRECTORY")
        .env_remove("DROIDWARDEN__DBUS__BUS")
        .env("DBUS_SYSTEM_BUS_ADDRESS", NO_BUS)
        .env("XDG_RUNTIME_DIR", runtime)
}

/// How long one tool run may take.
const TOOL_LIMIT: Duration = Duration::from_secs(60);

/// A private `dbus-daemon`, killed on drop.
#[derive(Debug)]
pub struct PrivateBus {
    /// The address to give clients (`DBUS_SESSION_BUS_ADDRESS`, `--address`).
    pub address: String,
    _child: KillOnDrop,
    dir: tempfile::TempDir,
}

impl PrivateBus {
    /// A session-type bus where everything is allowed.
    ///
    /// # Panics
    /// When `dbus-daemon` is missing (`apt-get install dbus-daemon`) or
    /// does not come up.
    pub fn session() -> Self {
        Self::start(|dir| {
            format!(
                r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:dir={}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"#,
                dir.display()
            )
        })
    }

    /// A bus whose configuration is `config(dir)`, where `dir` is the bus's
    /// own directory (world-readable, for tests that switch users).
    ///
    /// # Panics
    /// As [`PrivateBus::session`]; the configuration is what `dbus-daemon`
    /// rejects when it does not start.
    pub fn start(config: impl FnOnce(&Path) -> String) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        set_mode(dir.path(), 0o755);
        let file = dir.path().join("bus.conf");
        std::fs::write(&file, config(dir.path())).expect("write bus.conf");
        let mut child = Command::new("dbus-daemon")
            .arg(format!("--config-file={}", file.display()))
            .args(["--nofork", "--print-address=1"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn dbus-daemon (apt-get install dbus-daemon)");
        let line =
            crate::first_stdout_line(&mut child, Duration::from_secs(20)).unwrap_or_default();
        let address = line.trim().to_owned();
        if address.is_empty() {
            let _ = child.kill();
            let out = child.wait_with_output().expect("dbus-daemon output");
            panic!(
                "dbus-daemon printed no address: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let bus = Self {
            address,
            _child: child.into(),
            dir,
        };
        wait_for("the bus to answer", Duration::from_secs(10), || {
            bus.busctl(&["list"]).status.success().then_some(())
        });
        bus
    }

    /// The bus's directory (its socket and configuration are there).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// `busctl --address=ADDR args…`.
    pub fn busctl(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new("busctl");
        cmd.arg(format!("--address={}", self.address)).args(args);
        run(cmd)
    }

    /// `gdbus call` of one of the daemon's methods, as the current user:
    /// `Ok(stdout)` or `Err(stderr)`.
    pub fn gdbus_call(&self, method: &str, args: &[&str]) -> Result<String, String> {
        self.gdbus_call_as(None, &format!("{INTERFACE}.{method}"), args)
    }

    /// `gdbus call` of `interface.method` on the daemon's object, as
    /// `user` (uid and gid, through `setpriv`; needs root) or as the
    /// current user.
    pub fn gdbus_call_as(
        &self,
        user: Option<u32>,
        method: &str,
        args: &[&str],
    ) -> Result<String, String> {
        let mut cmd = gdbus_as(user);
        cmd.args([
            "call",
            "--address",
            &self.address,
            "--dest",
            NAME,
            "--object-path",
            PATH,
            "--method",
            method,
        ])
        .args(args);
        let out = run(cmd);
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    /// A daemon property as `busctl get-property` prints it (`u 1`).
    pub fn property(&self, name: &str) -> String {
        let out = self.busctl(&["get-property", NAME, PATH, INTERFACE, name]);
        assert!(
            out.status.success(),
            "get-property {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// Whether `name` has an owner on this bus.
    pub fn has_owner(&self, name: &str) -> bool {
        let out = self.busctl(&[
            "call",
            "org.freedesktop.DBus",
            "/org/freedesktop/DBus",
            "org.freedesktop.DBus",
            "NameHasOwner",
            "s",
            name,
        ]);
        String::from_utf8_lossy(&out.stdout).trim() == "b true"
    }

    /// Wait until the daemon owns its name.
    pub fn wait_for_daemon(&self, deadline: Duration) {
        wait_for(&format!("{NAME} on the bus"), deadline, || {
            self.has_owner(NAME).then_some(())
        });
    }

    /// The environment that serves the daemon's D-Bus API on this bus, and
    /// that points a CLI or MCP client at it there.
    pub fn daemon_env(&self) -> [(&'static str, &str); 2] {
        [
            ("DBUS_SESSION_BUS_ADDRESS", self.address.as_str()),
            ("DROIDWARDEN__DBUS__BUS", "session"),
        ]
    }

    /// Watch the daemon's signals with `gdbus monitor`, from now on.
    pub fn monitor(&self) -> Monitor {
        Monitor::start(&self.address)
    }
}

/// `gdbus`, run as `user` (uid and gid, in no supplementary group,
/// through `setpriv`; needs root) or as the current user.
fn gdbus_as(user: Option<u32>) -> Command {
    match user {
        Some(id) => {
            let mut cmd = Command::new("setpriv");
            cmd.args([
                &format!("--reuid={id}"),
                &format!("--regid={id}"),
                "--clear-groups",
                "gdbus",
            ]);
            cmd
        }
        None => Command::new("gdbus"),
    }
}

/// `gdbus monitor --dest org.droidwarden.Daemon1`: every signal the daemon
/// sends, one line each, recorded. Killed on drop.
#[derive(Debug)]
pub struct Monitor {
    _child: KillOnDrop,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Monitor {
    fn start(address: &str) -> Self {
        Self::start_as(address, None)
    }

    /// A monitor run as user `uid` (root: `None`), in no supplementary
    /// group: what that user is allowed to receive.
    pub fn start_as(address: &str, uid: Option<u32>) -> Self {
        let mut child = gdbus_as(uid)
            .args(["monitor", "--address", address, "--dest", NAME])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn gdbus monitor (apt-get install libglib2.0-bin)");
        let stdout = child.stdout.take().expect("gdbus monitor stdout");
        let lines: Arc<Mutex<Vec<String>>> = Arc::default();
        {
            let lines = Arc::clone(&lines);
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { return };
                    lines.lock().unwrap().push(line);
                }
            });
        }
        let monitor = Self {
            _child: child.into(),
            lines,
        };
        // gdbus says who owns the name once its match rules are in place;
        // signals sent after that line are seen.
        monitor.wait("the monitor to be ready", |l| l.contains("is owned by"));
        monitor
    }

    /// Every line so far.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// Signal lines of `member` (e.g. `ServiceStatusChanged`), in order.
    pub fn signals(&self, member: &str) -> Vec<String> {
        let needle = format!(".{member} (");
        self.lines()
            .into_iter()
            .filter(|l| l.contains(&needle))
            .collect()
    }

    /// Wait (30 s at most) for a line matching `pred`, seen or new.
    pub fn wait(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        wait_for(what, Duration::from_secs(30), || {
            self.lines().into_iter().find(|l| pred(l))
        })
    }
}

/// The string argument gdbus prints for a method's reply `('…',)`, with
/// GVariant quoting undone (good enough for our JSON: `\'` and `\\`, and
/// `"…"` when the text holds a `'`).
pub fn gdbus_string(reply: &str) -> String {
    let inner = reply
        .trim()
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(",)"))
        .unwrap_or_else(|| panic!("not a one-string reply: {reply:?}"));
    unquote(inner)
}

fn unquote(text: &str) -> String {
    let quote = text.chars().next().expect("a quoted string");
    let body = text
        .strip_prefix(quote)
        .and_then(|t| t.strip_suffix(quote))
        .unwrap_or_else(|| panic!("not a quoted string: {text:?}"));
    let mut out = String::with_capacity(body.len());
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(next) = chars.next() {
                out.push(next);
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The quoted arguments of a `gdbus monitor` signal line, unquoted:
/// `…ServiceStatusChanged ('phone', 'battery', 'executing', '{…}')`.
pub fn signal_args(line: &str) -> Vec<String> {
    let start = line.find(" (").map(|i| i + 2).expect("signal arguments");
    let body = line[start..].trim_end().trim_end_matches(')');
    let mut args = Vec::new();
    let mut chars = body.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '\'' | '"' => {
                let mut end = i + 1;
                let mut escaped = false;
                for (j, d) in chars.by_ref() {
                    end = j;
                    if escaped {
                        escaped = false;
                    } else if d == '\\' {
                        escaped = true;
                    } else if d == c {
                        break;
                    }
                }
                args.push(unquote(&body[i..=end]));
            }
            't' | 'f' if body[i..].starts_with("true") || body[i..].starts_with("false") => {
                let word = if body[i..].starts_with("true") {
                    "true"
                } else {
                    "false"
                };
                for _ in 1..word.len() {
                    chars.next();
                }
                args.push(word.to_owned());
            }
            _ => {}
        }
    }
    args
}

fn run(cmd: Command) -> Output {
    crate::run_with_timeout(cmd, TOOL_LIMIT)
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gdbus_output_is_unquoted() {
        assert_eq!(gdbus_string("('{\"a\":1}',)\n"), "{\"a\":1}");
        assert_eq!(gdbus_string(r#"("it's",)"#), "it's");
        assert_eq!(gdbus_string(r"('a\\b\'c',)"), r"a\b'c");
        let line = r#"/org/droidwarden/Daemon1: org.droidwarden.Daemon1.ServiceStatusChanged ('phone', 'battery', 'executing', '{"a":"x, y"}')"#;
        assert_eq!(
            signal_args(line),
            ["phone", "battery", "executing", r#"{"a":"x, y"}"#]
        );
        let line = "/org/droidwarden/Daemon1: org.droidwarden.Daemon1.DeviceAvailabilityChanged ('phone', false)";
        assert_eq!(signal_args(line), ["phone", "false"]);
    }
}
