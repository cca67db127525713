//! The end-to-end harness: real components on free loopback ports.
//!
//! - [`AdbServer`]: the Debian `adb` server, the run's shared one (each
//!   daemon on it serving only the phones it names) or one of the test's
//!   own with an isolated `HOME` and port, killed on drop.
//! - [`Sim`]: a `droidwarden-sim` process (an emulated phone) with its
//!   control port, killed on drop.
//! - [`Droidwarden`]: runs the `droidwarden` binary against them;
//!   [`local_phone`] and [`local_phone_with`]: a phone and a runner for
//!   `droidwarden call` without a daemon.
//! - [`KillOnDrop`], [`wait_exit`], [`terminate`], [`send_signal`]: child
//!   processes, bounded and never left running.
//! - [`mqtt`]: mosquitto (the run's shared one, each test under a topic
//!   level of its own, or the test's own), the daemon as a process, and a
//!   probe client;
//!   [`systemd`]: a notify socket and the daemon run as a service would be;
//!   [`npm`]: the MCP programs from npm (reference server, Inspector CLI);
//!   [`phone_rig`] and [`agent_rig`]: the daemon with its world, for the
//!   one-phone and the agent tests; [`eval`]: the home eval's tasks, runner
//!   and report (the `eval` bench and e2e test); [`adb_bench`]: a phone behind the adb
//!   server and an in-process ADB transport, for the benchmarks.
//!
//! Every wait polls for readiness with a deadline; nothing sleeps a fixed
//! time hoping something is ready. The binaries are found next to the test
//! executable (`target/<profile>/`); `scripts/test` builds them first.
#![deny(missing_docs)]

/// The daemon's default MQTT topic prefix, which every harness config keeps.
pub const P: &str = "droidwarden";
/// How long a test waits for what the daemon does: generous, since a
/// loaded two-core CI machine runs several daemons at once.
pub const WAIT: Duration = Duration::from_secs(30);

pub mod adb36;
pub mod adb_bench;
pub mod agent_rig;
pub mod dbus;
pub mod eval;
pub mod mqtt;
pub mod npm;
pub mod phone_rig;
pub mod systemd;
pub mod termux;

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read as _, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The code block that follows the marker `<!-- {marker}` in
/// `docs/{doc}`: configuration the tests check exactly as documented.
///
/// # Panics
/// When the file, the marker or the block is missing.
pub fn documented_block(doc: &str, marker: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../docs")
        .join(doc);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let (_, after) = text
        .split_once(&format!("<!-- {marker}"))
        .unwrap_or_else(|| panic!("docs/{doc} has no marker {marker}"));
    let (_, block) = after
        .split_once("```\n")
        .expect("a code block after the marker");
    let (body, _) = block.split_once("```").expect("the end of the block");
    body.to_owned()
}

/// `droidwarden --config <config> daemon`, pointed at the test's adb server
/// (never starting one of its own), logging at `$DAEMON_LOG` (default
/// `info`).
pub fn daemon_command(adb: &AdbServer, config: &Path) -> Command {
    let mut cmd = Command::new(binary("droidwarden"));
    cmd.arg("--config").arg(config).arg("daemon");
    adb.client_env(&mut cmd).env(
        "RUST_LOG",
        std::env::var("DAEMON_LOG").unwrap_or_else(|_| "info".into()),
    );
    cmd
}

/// Spawn a `droidwarden daemon` command with no input, its output
/// discarded and its log (standard error) going to `log_file`.
///
/// # Panics
/// When it cannot be spawned.
pub(crate) fn spawn_daemon(cmd: &mut Command, log_file: std::fs::File) -> Child {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log_file)
        .spawn()
        .expect("spawn droidwarden daemon")
}

/// Point a `droidwarden` command at the adb server on `port` whose keys
/// are under `home` ([`adb_client_vars`]).
fn adb_client_env<'a>(
    cmd: &'a mut Command,
    home: &Path,
    port: u16,
    shared: bool,
) -> &'a mut Command {
    cmd.envs(adb_client_vars(home, port, shared))
}

/// The environment that points `droidwarden` at the adb server on `port`
/// whose keys are under `home`, never starting a server of its own;
/// serving only the phones its configuration names when the server is
/// `shared`.
fn adb_client_vars(home: &Path, port: u16, shared: bool) -> Vec<(&'static str, String)> {
    let mut vars = vec![
        ("HOME", home.to_string_lossy().into_owned()),
        ("DROIDWARDEN__ADB__SERVER", format!("127.0.0.1:{port}")),
        ("DROIDWARDEN__ADB__START_SERVER", "false".to_owned()),
    ];
    if shared {
        vars.push(("DROIDWARDEN__ADB__ONLY_NAMED", "true".to_owned()));
    }
    vars
}

/// Hostile text: shell metacharacters, quotes, newlines, NUL, option
/// look-alikes, Unicode and bidirectional overrides. Every parameter that
/// reaches a phone must refuse each one or pass it as one literal argument.
pub const HOSTILE: &[&str] = &[
    "a;reboot",
    "a && reboot",
    "a || reboot",
    "a | reboot",
    "$(reboot)",
    "${IFS}reboot",
    "a > /sdcard/x",
    "`reboot`",
    "a'b",
    "a\"b",
    "a\nreboot",
    "a\rb",
    "a\u{0}b",
    "a b",
    "\\",
    "-e reboot",
    "ünïcødé 日本 👋",
    "%s %n",
    "\u{202e}txt.exe",
    "*",
];

/// A port that was free a moment ago on 127.0.0.1.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind an ephemeral loopback port")
}

/// Poll `check` every 20 ms until it returns `Some` or `deadline` passes.
///
/// # Panics
/// When the deadline passes, naming `what`.
pub fn wait_for<T>(what: &str, deadline: Duration, check: impl FnMut() -> Option<T>) -> T {
    poll_until(deadline, check)
        .unwrap_or_else(|| panic!("timed out after {deadline:?} waiting for {what}"))
}

/// The readiness poller every wait of the harness uses: `check` every
/// 20 ms until it gives a value, or `None` once `deadline` has passed.
pub fn poll_until<T>(deadline: Duration, mut check: impl FnMut() -> Option<T>) -> Option<T> {
    let start = Instant::now();
    loop {
        if let Some(value) = check() {
            return Some(value);
        }
        if start.elapsed() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A benchmark size from the environment variable `name`, else `default`.
pub fn env_size(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A process's resident memory in KiB (`VmRSS` of `/proc/<pid>/status`),
/// 0 when it cannot be read.
pub fn rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS")
}

/// The anonymous part of a process's resident memory in KiB (`RssAnon`:
/// heap and stacks, without the mapped executable and libraries, whose
/// pages the kernel shares and can drop), 0 when it cannot be read.
pub fn rss_anon_kib(pid: u32) -> u64 {
    status_kib(pid, "RssAnon")
}

/// CPU time (user + system) a process has used so far (`utime` and
/// `stime` of `/proc/<pid>/stat`), zero when it cannot be read.
pub fn cpu_time(pid: u32) -> Duration {
    let ticks = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let after = s.rsplit_once(')')?.1.split_whitespace().collect::<Vec<_>>();
            Some(after.get(11)?.parse::<u64>().ok()? + after.get(12)?.parse::<u64>().ok()?)
        })
        .unwrap_or(0);
    Duration::from_millis(ticks * 10) // USER_HZ is 100 on Linux
}

fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.split(':').next() == Some(field))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

/// Whether the tests run as root (some checks need another user, or only
/// make sense without root's rights).
pub fn is_root() -> bool {
    own_uid() == Some(0)
}

/// The tests' effective uid: `/proc/self` belongs to the process's
/// effective user.
pub fn own_uid() -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").ok().map(|m| m.uid())
}

/// The directory holding the workspace's binaries (`target/debug`).
pub fn bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("DROIDWARDEN_BIN_DIR") {
        return PathBuf::from(dir);
    }
    let exe = std::env::current_exe().expect("the test executable's path");
    // target/debug/deps/<test> or target/debug/<bench> → target/debug
    let mut dir = exe.parent().expect("a parent directory").to_path_buf();
    if dir.ends_with("deps") {
        dir.pop();
    }
    dir
}

/// Path of a workspace binary, checked to exist.
///
/// # Panics
/// When the binary has not been built (run `scripts/test`, or
/// `cargo build --workspace --bins` first).
pub fn binary(name: &str) -> PathBuf {
    let path = bin_dir().join(name);
    assert!(
        path.is_file(),
        "{} is missing: build the binaries first (`cargo build --workspace --bins`, done by scripts/test)",
        path.display()
    );
    path
}

/// Send the signal `name` (`HUP`, `TERM`, `INT`) to process `pid`.
///
/// # Panics
/// When `kill` fails.
pub fn send_signal(pid: u32, name: &str) {
    let status = Command::new("kill")
        .args(["-s", name, &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -s {name} {pid} failed");
}

/// Run `cmd` with no stdin, collecting its output; kill it and panic if it
/// runs longer than `limit`.
///
/// # Panics
/// When it cannot be spawned or overruns `limit`.
pub fn run_with_timeout(mut cmd: Command, limit: Duration) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    // Drain both pipes while waiting: a child with more to say than a pipe
    // holds (64 KiB) would otherwise block on its write and never exit.
    // What was read is shared, so that a grandchild that keeps the pipe
    // open (a daemon the command started) cannot hold the result back.
    let drain = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        let bytes = Arc::new(Mutex::new(Vec::new()));
        let (done_tx, done) = std::sync::mpsc::channel::<()>();
        let sink = Arc::clone(&bytes);
        std::thread::spawn(move || {
            if let Some(mut pipe) = pipe {
                let mut chunk = [0u8; 8192];
                while let Ok(n) = pipe.read(&mut chunk) {
                    if n == 0 {
                        break;
                    }
                    sink.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .extend_from_slice(&chunk[..n]);
                }
            }
            let _ = done_tx.send(());
        });
        move || {
            let _ = done.recv_timeout(Duration::from_secs(2));
            std::mem::take(&mut *bytes.lock().unwrap_or_else(|e| e.into_inner()))
        }
    };
    let stdout = drain(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr = drain(child.stderr.take().map(|p| Box::new(p) as _));
    let Some(status) = wait_exit(&mut child, limit) else {
        let _ = child.kill();
        let _ = child.wait();
        let stderr = stderr();
        panic!(
            "{cmd:?} did not finish within {limit:?}; stderr: {}",
            String::from_utf8_lossy(&stderr)
        );
    };
    Output {
        status,
        stdout: stdout(),
        stderr: stderr(),
    }
}

/// The first line `child` writes on its piped standard output (its
/// readiness line), read on a thread so that the wait is bounded by
/// `limit`; `None` when none came in time.
///
/// # Panics
/// When the child's standard output is not piped.
pub fn first_stdout_line(child: &mut Child, limit: Duration) -> Option<String> {
    let stdout = child.stdout.take().expect("a piped standard output");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    rx.recv_timeout(limit).ok()
}

/// Wait (bounded, with [`poll_until`]) for `child` to exit: its status,
/// or `None` when it still runs at `deadline`.
pub fn wait_exit(child: &mut Child, deadline: Duration) -> Option<ExitStatus> {
    poll_until(deadline, || child.try_wait().ok().flatten())
}

/// Send SIGTERM to `child` and wait (bounded) for its exit status; when it
/// overruns `deadline`, kill it and return `None`.
pub fn terminate(child: &mut Child, deadline: Duration) -> Option<ExitStatus> {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let status = wait_exit(child, deadline);
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    status
}

/// A child process that is killed and reaped when dropped (an emulated
/// phone, a bus, a client under test), so that a failing test leaves
/// nothing running; it derefs to the [`Child`].
#[derive(Debug)]
pub struct KillOnDrop(Child);

impl From<Child> for KillOnDrop {
    fn from(child: Child) -> Self {
        Self(child)
    }
}

impl KillOnDrop {
    /// Its exit code once it exits by itself (-1 when a signal ended it).
    ///
    /// # Panics
    /// When it still runs after `deadline`, naming `what`.
    pub fn exit_code(&mut self, what: &str, deadline: Duration) -> i32 {
        wait_exit(&mut self.0, deadline)
            .unwrap_or_else(|| panic!("{what} did not exit within {deadline:?}"))
            .code()
            .unwrap_or(-1)
    }
}

impl std::ops::Deref for KillOnDrop {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for KillOnDrop {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The real adb server: one of the test's own ([`AdbServer::start`], its
/// own `HOME` for keys and its own port, killed on drop) or the run's
/// shared one ([`AdbServer::shared`]).
#[derive(Debug)]
pub struct AdbServer {
    /// Its port on 127.0.0.1.
    pub port: u16,
    home: PathBuf,
    /// The test's own server's `HOME`, removed on drop; `None` for the
    /// shared server, which outlives every test.
    own: Option<tempfile::TempDir>,
}

/// Keeps a server that outlives the tests until this test process ends,
/// however it ends: a `sh` that ignores the terminal's signals, waits for
/// its standard input to close (the kernel closes it when this process
/// exits, even when killed) and then runs its cleanup.
#[derive(Debug)]
pub(crate) struct Reaper {
    _child: Child,
    _stdin: std::process::ChildStdin,
}

impl Reaper {
    /// A reaper that runs `cleanup` (a `sh` script whose positional
    /// parameters are `args`) when this process is gone.
    pub(crate) fn spawn(cleanup: &str, args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(format!("trap '' INT TERM HUP; read _; {cleanup}"))
            .arg("reaper")
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn sh");
        let stdin = child.stdin.take().expect("the reaper's stdin");
        Self {
            _child: child,
            _stdin: stdin,
        }
    }
}

impl AdbServer {
    /// Start a server and wait until it accepts connections.
    ///
    /// A port [`free_port`] found free can be taken by another test's
    /// process before adb binds it (the tests run in parallel), so a start
    /// that fails is tried again on another port, three times in all.
    ///
    /// # Panics
    /// When `adb` is not installed or the server does not come up.
    pub fn start() -> Self {
        let mut failures = Vec::new();
        for _ in 0..3 {
            let (home, port) = (tempfile::tempdir().expect("temp HOME"), free_port());
            // Not a `Self` until it started: dropping one sends
            // `kill-server` to its port, which may be another test's now.
            let start = adb_command(home.path(), port, &["start-server"]);
            let out = run_with_timeout(start, Duration::from_secs(20));
            if out.status.success() {
                wait_for("the adb server", Duration::from_secs(10), || {
                    TcpStream::connect(("127.0.0.1", port)).ok()
                });
                return Self {
                    port,
                    home: home.path().to_path_buf(),
                    own: Some(home),
                };
            }
            failures.push(format!(
                "port {port}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        panic!("adb start-server failed three times: {failures:#?}");
    }

    /// The run's shared adb server, started by the first test that asks
    /// and stopped when the test process ends.
    ///
    /// Every test's phones are on it, so whatever it points at the server
    /// serves only the phones its configuration names (`[adb] only_named`,
    /// set by [`AdbServer::client_env`]). A test that stops the server,
    /// lists what it sees, or serves a phone it does not name needs its own
    /// ([`AdbServer::start`]).
    ///
    /// # Panics
    /// When `adb` is not installed or the server does not come up.
    pub fn shared() -> Self {
        static SHARED: std::sync::OnceLock<(u16, PathBuf, Reaper)> = std::sync::OnceLock::new();
        let (port, home, _) = SHARED.get_or_init(|| {
            let mut server = Self::start();
            // No longer its own: dropping `server` leaves it running.
            let home = server.own.take().expect("a server of its own").keep();
            let reaper = Reaper::spawn(
                r#"adb -P "$1" kill-server; rm -rf "$2""#,
                &[&server.port.to_string(), &home.to_string_lossy()],
                &[("HOME", &home.to_string_lossy())],
            );
            (server.port, home, reaper)
        });
        Self {
            port: *port,
            home: home.clone(),
            own: None,
        }
    }

    /// Whether this is the run's shared server.
    pub fn is_shared(&self) -> bool {
        self.own.is_none()
    }

    /// A `Command` for the `adb` client talking to this server.
    pub fn adb(&self, args: &[&str]) -> Command {
        adb_command(&self.home, self.port, args)
    }

    /// Run `adb args…` and return stdout.
    pub fn run(&self, args: &[&str]) -> String {
        let out = run_with_timeout(self.adb(args), Duration::from_secs(30));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The server's `HOME`, to share with other clients of this server.
    pub fn home(&self) -> &Path {
        &self.home
    }

    /// Point a `droidwarden` command at this server (its `HOME` and port),
    /// never starting a server of its own; on the shared server, serving
    /// only the phones its configuration names.
    pub fn client_env<'a>(&self, cmd: &'a mut Command) -> &'a mut Command {
        adb_client_env(cmd, self.home(), self.port, self.is_shared())
    }

    /// The environment [`AdbServer::client_env`] sets, for a program
    /// started some other way.
    pub fn client_vars(&self) -> Vec<(&'static str, String)> {
        adb_client_vars(self.home(), self.port, self.is_shared())
    }

    /// `droidwarden --config CONFIG mcp --local` against this server, its
    /// standard input and output piped (JSON-RPC lines), its errors
    /// dropped.
    ///
    /// # Panics
    /// When the binary cannot be started.
    pub fn mcp_local(&self, config: &Path) -> std::process::Child {
        let mut cmd = Command::new(binary("droidwarden"));
        cmd.arg("--config").arg(config).args(["mcp", "--local"]);
        self.client_env(&mut cmd)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("droidwarden mcp --local")
    }

    /// Start an emulated phone as `options` say and wait until this server
    /// lists it as a `device`.
    ///
    /// # Panics
    /// When the sim does not start or does not come online.
    pub fn phone(&self, options: SimOptions) -> Sim {
        let mut sim = Sim::start(options);
        self.connect(&sim.serial());
        if self.is_shared() {
            // Gone from the shared server's list with the test.
            sim.disconnect = Some(self.adb(&["disconnect", &sim.serial()]));
        }
        sim
    }

    /// `adb connect` to `serial` (`127.0.0.1:PORT`) and wait until it is a
    /// `device`.
    pub fn connect(&self, serial: &str) {
        wait_for(
            &format!("{serial} to be online"),
            Duration::from_secs(20),
            || {
                if self.lists_device(serial) {
                    return Some(());
                }
                self.run(&["connect", serial]);
                None
            },
        );
    }

    /// Wait until the server no longer lists `serial` as a `device`.
    pub fn wait_gone(&self, serial: &str) {
        wait_for(
            &format!("{serial} to go offline"),
            Duration::from_secs(20),
            || (!self.lists_device(serial)).then_some(()),
        );
    }

    /// Whether `adb devices` lists `serial` as a `device`.
    fn lists_device(&self, serial: &str) -> bool {
        self.run(&["devices"])
            .lines()
            .any(|l| l.starts_with(serial) && l.ends_with("\tdevice"))
    }
}

/// `adb args…` for the server on `port` with keys in `home`.
fn adb_command(home: &Path, port: u16, args: &[&str]) -> Command {
    let mut cmd = Command::new("adb");
    cmd.env("HOME", home)
        .env("ANDROID_ADB_SERVER_PORT", port.to_string())
        .args(["-P", &port.to_string()])
        .args(args);
    cmd
}

impl Drop for AdbServer {
    fn drop(&mut self) {
        if self.is_shared() {
            return;
        }
        if let Ok(child) = self
            .adb(&["kill-server"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
        {
            // Killed on drop if it overruns.
            let mut child = KillOnDrop::from(child);
            wait_exit(&mut child, Duration::from_secs(5));
        }
    }
}

/// Options for an emulated phone.
#[derive(Debug, Clone, Default)]
pub struct SimOptions {
    /// `ro.serialno`.
    pub serial: Option<String>,
    /// `ro.product.model`.
    pub model: Option<String>,
    /// Android release version.
    pub android: Option<String>,
    /// A replay directory.
    pub replay: Option<PathBuf>,
    /// A fixed ADB port (to come back on the same port after a restart).
    pub adb_port: Option<u16>,
    /// Companion mode: the MQTT broker's port on 127.0.0.1 and the id.
    pub companion: Option<(u16, String)>,
    /// Companion mode: the user name and password to log in with.
    pub mqtt_login: Option<(String, String)>,
    /// Serve no ADB (a companion-only phone).
    pub no_adb: bool,
    /// More arguments for `droidwarden-sim` (`--auth-prompt`,
    /// `--mdns-instance NAME`).
    pub extra_args: Vec<String>,
}

/// A running `droidwarden-sim` process.
#[derive(Debug)]
pub struct Sim {
    /// Its ADB port on 127.0.0.1.
    pub adb_port: u16,
    /// Its control port on 127.0.0.1.
    pub control_port: u16,
    child: KillOnDrop,
    _log_dir: tempfile::TempDir,
    /// The file the sim appends its command log to.
    pub log_file: PathBuf,
    /// `adb disconnect` from the shared server, run on drop.
    disconnect: Option<Command>,
}

impl Drop for Sim {
    fn drop(&mut self) {
        if let Some(cmd) = self.disconnect.take() {
            let _ = self.child.kill();
            let _ = self.child.wait();
            run_with_timeout(cmd, Duration::from_secs(10));
        }
    }
}

impl Sim {
    /// Start a sim and wait for its ready line.
    ///
    /// # Panics
    /// When the sim does not start.
    pub fn start(options: SimOptions) -> Self {
        let log_dir = tempfile::tempdir().expect("temp dir");
        let log_file = log_dir.path().join("commands.jsonl");
        let mut cmd = Command::new(binary("droidwarden-sim"));
        cmd.args(["--control-port", "0"])
            .arg("--command-log")
            .arg(&log_file);
        if !options.no_adb {
            cmd.args(["--adb-port", &options.adb_port.unwrap_or(0).to_string()]);
        }
        if let Some((port, id)) = &options.companion {
            let login = options
                .mqtt_login
                .as_ref()
                .map(|(user, password)| format!("{user}:{password}@"))
                .unwrap_or_default();
            cmd.args([
                "--mqtt",
                &format!("mqtt://{login}127.0.0.1:{port}"),
                "--companion-id",
                id,
            ]);
        }
        if let Some(serial) = &options.serial {
            cmd.args(["--serial", serial]);
        }
        if let Some(model) = &options.model {
            cmd.args(["--model", model]);
        }
        if let Some(android) = &options.android {
            cmd.args(["--android", android]);
        }
        if let Some(replay) = &options.replay {
            cmd.arg("--replay").arg(replay);
        }
        cmd.args(&options.extra_args);
        let mut child = cmd
            .env(
                "RUST_LOG",
                std::env::var("SIM_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn droidwarden-sim");
        let line = first_stdout_line(&mut child, Duration::from_secs(20))
            .expect("the sim's ready line within 20 s");
        let port_of = |key: &str| -> u16 {
            let addr = line
                .split_whitespace()
                .find_map(|w| w.strip_prefix(key))
                .unwrap_or_else(|| panic!("no {key} in the sim's ready line {line:?}"));
            if addr == "-" {
                return 0;
            }
            addr.rsplit(':')
                .next()
                .and_then(|p| p.parse().ok())
                .unwrap_or_else(|| panic!("no {key} port in the sim's ready line {line:?}"))
        };
        Self {
            adb_port: port_of("adb="),
            control_port: port_of("control="),
            child: child.into(),
            _log_dir: log_dir,
            log_file,
            disconnect: None,
        }
    }

    /// The sim's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The serial the adb server knows this sim by.
    pub fn serial(&self) -> String {
        format!("127.0.0.1:{}", self.adb_port)
    }

    /// Send one control request and return the reply.
    ///
    /// # Panics
    /// When the control port does not answer or the reply is not JSON.
    pub fn control(&self, request: Value) -> Value {
        let mut stream =
            TcpStream::connect(("127.0.0.1", self.control_port)).expect("sim control port");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("read timeout");
        writeln!(stream, "{request}").expect("send control request");
        let mut line = String::new();
        BufReader::new(stream)
            .read_line(&mut line)
            .expect("control reply");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("control reply {line:?}: {e}"))
    }

    /// The phone's state.
    pub fn state(&self) -> Value {
        let reply = self.control(json!({"op": "state"}));
        reply.get("state").cloned().unwrap_or(reply)
    }

    /// Every command the phone ran, as argv lists, in order (the trailer
    /// `echo __dw_rc=…` that carries exit statuses left out).
    pub fn commands(&self) -> Vec<Vec<String>> {
        let reply = self.control(json!({"op": "log"}));
        let entries = reply
            .get("log")
            .or_else(|| reply.get("entries"))
            .cloned()
            .unwrap_or(reply);
        entries
            .as_array()
            .map(|a| a.as_slice())
            .unwrap_or_default()
            .iter()
            .filter_map(|e| {
                let argv: Vec<String> = e["argv"]
                    .as_array()?
                    .iter()
                    .filter_map(|a| a.as_str().map(str::to_owned))
                    .collect();
                let trailer = argv.first().is_some_and(|a| a == "echo")
                    && argv.get(1).is_some_and(|a| a.starts_with("__dw_rc="));
                (!trailer).then_some(argv)
            })
            .collect()
    }

    /// Forget the command log.
    pub fn clear_log(&self) {
        self.control(json!({"op": "clear_log"}));
    }
}

/// Runs the `droidwarden` binary against a given adb server.
#[derive(Debug)]
pub struct Droidwarden {
    adb_port: u16,
    home: PathBuf,
    shared_adb: bool,
    config: tempfile::NamedTempFile,
}

/// What one `droidwarden` run returned.
#[derive(Debug)]
pub struct Run {
    /// Exit status code.
    pub code: i32,
    /// Standard output parsed as JSON (`Value::Null` when it is not JSON).
    pub json: Value,
    /// Standard output as text.
    pub stdout: String,
    /// Standard error as text.
    pub stderr: String,
}

impl Run {
    /// The error code of a failed call, `(success)` for a result.
    pub fn error_code(&self) -> &str {
        self.json["error"]["code"].as_str().unwrap_or("(success)")
    }

    /// The error message of a failed call, empty for a result.
    pub fn error_message(&self) -> &str {
        self.json["error"]["message"].as_str().unwrap_or("")
    }

    /// The call failed with `code` and a message containing `part`.
    #[track_caller]
    pub fn assert_error(&self, code: &str, part: &str) {
        assert_eq!(self.error_code(), code, "{}", self.stdout);
        assert!(self.error_message().contains(part), "{}", self.stdout);
    }
}

/// One emulated phone named `phone` (serial `serial`) behind the real adb
/// server, and a runner of `droidwarden` whose configuration has `extra`
/// sections: for `droidwarden call`, no daemon.
pub fn local_phone(serial: &str, extra: &str) -> (AdbServer, Sim, Droidwarden) {
    local_phone_with(
        SimOptions {
            serial: Some(serial.into()),
            ..SimOptions::default()
        },
        extra,
    )
}

/// [`local_phone`] with an emulated phone as `options` say.
pub fn local_phone_with(options: SimOptions, extra: &str) -> (AdbServer, Sim, Droidwarden) {
    let adb = AdbServer::shared();
    let sim = adb.phone(options);
    let config = format!(
        "[adb]\nconnect = [\"{serial}\"]\n{extra}\n[[devices]]\nname = \"phone\"\ntransport = \"adb\"\nserial = \"{serial}\"\n",
        serial = sim.serial()
    );
    let dw = Droidwarden::new(&adb, &config);
    (adb, sim, dw)
}

impl Droidwarden {
    /// A runner for `server`, with `config_toml` as its configuration file.
    pub fn new(server: &AdbServer, config_toml: &str) -> Self {
        let mut config = tempfile::NamedTempFile::new().expect("temp config");
        config
            .write_all(config_toml.as_bytes())
            .expect("write config");
        Self {
            adb_port: server.port,
            home: server.home().to_path_buf(),
            shared_adb: server.is_shared(),
            config,
        }
    }

    /// Run `droidwarden args…` without a daemon: `call` and `devices` get
    /// `--local` (they would otherwise ask a daemon over D-Bus).
    pub fn run(&self, args: &[&str]) -> Run {
        let mut args = args.to_vec();
        if matches!(args.first(), Some(&"call" | &"devices")) {
            args.insert(1, "--local");
        }
        self.run_with(&args, &[])
    }

    /// Run `droidwarden args…` as given, against the daemon on the session
    /// bus at `bus_address` (a private `dbus-daemon`).
    pub fn run_on_bus(&self, bus_address: &str, args: &[&str]) -> Run {
        self.run_with(args, &[("DBUS_SESSION_BUS_ADDRESS", bus_address)])
    }

    fn run_with(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        let mut cmd = Command::new(binary("droidwarden"));
        cmd.arg("--config")
            .arg(self.config.path())
            .args(args)
            .envs(env.iter().copied());
        adb_client_env(&mut cmd, &self.home, self.adb_port, self.shared_adb).env_remove("RUST_LOG");
        let out = run_with_timeout(cmd, Duration::from_secs(60));
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        Run {
            code: out.status.code().unwrap_or(-1),
            json: serde_json::from_str(&stdout).unwrap_or(Value::Null),
            stdout,
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// `droidwarden call --device D SERVICE ACTION --params JSON`.
    pub fn call(&self, device: &str, service: &str, action: &str, params: Value) -> Run {
        let params = params.to_string();
        self.run(&[
            "call", "--device", device, service, action, "--params", &params,
        ])
    }
}

/// `[llm]` for the scripted model `llm`, speaking `kind`'s wire format.
pub fn scripted_llm_config(
    llm: &droidwarden_agent::testing::ScriptedLlm,
    kind: droidwarden_agent::ProviderKind,
) -> String {
    format!(
        "[llm]\nprovider = \"{}\"\nbase_url = \"{}\"\nmodel = \"scripted\"\nmax_retry_wait_s = 5\n",
        kind.as_str(),
        llm.base_url(kind)
    )
}

/// The scripted model server (`droidwarden_agent::testing::ScriptedLlm`) on
/// a runtime of its own, for the synchronous tests: keep the runtime as
/// long as the server is needed.
///
/// # Panics
/// When the server cannot start.
pub fn scripted_model() -> (
    tokio::runtime::Runtime,
    droidwarden_agent::testing::ScriptedLlm,
) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let llm = rt
        .block_on(droidwarden_agent::testing::ScriptedLlm::start(Vec::new()))
        .expect("scripted model");
    (rt, llm)
}
