//! MQTT pieces of the harness: a real mosquitto broker, the daemon as a
//! process, and a probe client that records what it sees.

use crate::{AdbServer, binary, free_port, wait_for};
use rumqttc::{Client, Event, MqttOptions, Outgoing, Packet, QoS};
use serde_json::Value;
use std::io::Write;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A real mosquitto broker on a free loopback port: one of the test's own
/// ([`Mosquitto::start`] and the others, killed on drop) or the run's
/// shared one under a topic level of the test's own ([`Mosquitto::shared`]).
#[derive(Debug)]
pub struct Mosquitto {
    /// Its port on 127.0.0.1.
    pub port: u16,
    child: Option<Child>,
    /// The configuration's directory; `None` on the shared broker.
    dir: Option<tempfile::TempDir>,
    /// The password and ACL files of a secured broker.
    secrets: Option<tempfile::TempDir>,
    /// The test's topic level on the shared broker.
    mount: Option<String>,
}

/// The run's shared mosquitto: one listener, anonymous, no persistence,
/// stopped when the test process ends.
#[derive(Debug)]
struct SharedBroker {
    port: u16,
    _reaper: crate::Reaper,
}

impl SharedBroker {
    /// The shared broker, started by the first test that asks.
    fn get() -> &'static Self {
        static SHARED: std::sync::OnceLock<SharedBroker> = std::sync::OnceLock::new();
        SHARED.get_or_init(|| {
            let mut broker = Mosquitto::start();
            let child = broker.child.take().expect("a broker of its own");
            let dir = broker.dir.take().expect("its configuration").keep();
            // Killed when this process ends, not when a test does.
            let reaper = crate::Reaper::spawn(
                r#"kill "$1"; rm -rf "$2""#,
                &[&child.id().to_string(), &dir.to_string_lossy()],
                &[],
            );
            // Never waited for: it runs until the reaper stops it.
            std::mem::forget(child);
            Self {
                port: broker.port,
                _reaper: reaper,
            }
        })
    }
}

/// The settings every test broker has, shared or not.
const COMMON: &str = "persistence false\nmax_packet_size 2000000\nset_tcp_nodelay true\n";

/// Where mosquitto is: `/usr/sbin`, off most users' `PATH`.
fn mosquitto_program() -> &'static str {
    ["/usr/sbin/mosquitto", "mosquitto"]
        .into_iter()
        .find(|p| !p.starts_with('/') || std::path::Path::new(p).exists())
        .unwrap_or("mosquitto")
}

impl Mosquitto {
    /// Start a broker (anonymous, no persistence) and wait until it accepts.
    ///
    /// # Panics
    /// When mosquitto is not installed or does not come up.
    pub fn start() -> Self {
        Self::start_on(free_port())
    }

    /// The run's shared broker, under a topic level of the test's own
    /// ([`Mosquitto::mount`]): a daemon configured with
    /// [`Mosquitto::mqtt_keys`] and a probe from [`Probe::connect_to`] see
    /// only each other's topics and retained messages, as on a broker of
    /// their own. Mosquitto's own `mount_point` would do this in the broker,
    /// but Debian 12's mosquitto 2.0.11 does not take it off the messages it
    /// delivers (fixed in 2.0.12). A test that stops or restarts the broker,
    /// secures it, has a client whose id is fixed (a companion app: client
    /// ids are the broker's, not the level's), or uses topics outside the
    /// prefix (Home Assistant discovery, an automation's MQTT trigger)
    /// starts its own ([`Mosquitto::start`]).
    ///
    /// # Panics
    /// When mosquitto is not installed or does not come up.
    pub fn shared() -> Self {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Self {
            port: SharedBroker::get().port,
            child: None,
            dir: None,
            secrets: None,
            mount: Some(format!("t{n}/")),
        }
    }

    /// The topic level (`t7/`) a shared broker's test keeps to; `None` on
    /// a broker of the test's own.
    pub fn mount(&self) -> Option<&str> {
        self.mount.as_deref()
    }

    /// `[mqtt]` keys for a daemon on this broker: on the shared one, its
    /// topics under the test's level (Home Assistant's are not used there)
    /// and a client id of its own, since client ids are the broker's.
    pub fn mqtt_keys(&self) -> String {
        match &self.mount {
            Some(mount) => format!(
                "client_id = \"droidwarden-{}\"\ntopic_prefix = \"{mount}{}\"\n",
                mount.trim_end_matches('/'),
                crate::P
            ),
            None => String::new(),
        }
    }

    /// Start on a given port (to restart a broker where clients expect it).
    pub fn start_on(port: u16) -> Self {
        Self::start_with(port, "")
    }

    /// Start with extra configuration lines appended (more listeners…);
    /// each listener's settings apply to it alone.
    pub fn start_with(port: u16, extra: &str) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(
            dir.path().join("mosquitto.conf"),
            format!(
                "per_listener_settings true\n{COMMON}listener {port} 127.0.0.1\nallow_anonymous true\n{extra}"
            ),
        )
        .expect("write mosquitto.conf");
        let mut broker = Self {
            port,
            child: None,
            dir: Some(dir),
            secrets: None,
            mount: None,
        };
        broker.spawn();
        broker
    }

    fn spawn(&mut self) {
        let conf = self
            .dir
            .as_ref()
            .expect("the shared broker cannot be stopped or started: use Mosquitto::start")
            .path()
            .join("mosquitto.conf");
        let child = Command::new(mosquitto_program())
            .arg("-c")
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn mosquitto (apt-get install mosquitto)");
        self.child = Some(child);
        let port = self.port;
        wait_for(
            "mosquitto to accept connections",
            Duration::from_secs(10),
            || TcpStream::connect(("127.0.0.1", port)).ok(),
        );
    }

    /// Start a broker on a free port that admits only `users` (name,
    /// password), each confined by the mosquitto ACL file `acl`.
    ///
    /// # Panics
    /// When `mosquitto_passwd` fails or the broker does not come up.
    pub fn secured(users: &[(&str, &str)], acl: &str) -> Self {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("temp dir");
        let passwd = dir.path().join("passwd");
        for (i, (user, password)) in users.iter().enumerate() {
            let mut cmd = Command::new("mosquitto_passwd");
            if i == 0 {
                cmd.arg("-c");
            }
            cmd.arg("-b").arg(&passwd).args([user, password]);
            let out = crate::run_with_timeout(cmd, Duration::from_secs(10));
            assert!(out.status.success(), "mosquitto_passwd: {out:?}");
        }
        let acl_file = dir.path().join("acl");
        std::fs::write(&acl_file, acl).expect("write the ACL");
        // Started as root, mosquitto reads these files after switching to
        // its own user.
        for path in [dir.path(), &passwd, &acl_file] {
            let mode = if path == dir.path() { 0o755 } else { 0o644 };
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        }
        let mut broker = Self::start_with(
            free_port(),
            &format!(
                "allow_anonymous false\nuse_username_as_clientid true\npassword_file {}\nacl_file {}\n",
                passwd.display(),
                acl_file.display()
            ),
        );
        broker.secrets = Some(dir);
        broker
    }

    /// Its address as an MQTT URL.
    pub fn url(&self) -> String {
        format!("mqtt://127.0.0.1:{}", self.port)
    }

    /// The broker's process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Kill the broker (abruptly, like a crash).
    ///
    /// # Panics
    /// On the shared broker, which cannot be stopped.
    pub fn kill(&mut self) {
        self.own_process();
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Start it again on the same port.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// Stop the broker as a service manager does (SIGTERM, then wait): a
    /// broker with persistence saves its sessions and queued messages.
    pub fn stop(&mut self) {
        self.own_process();
        if let Some(child) = self.child.take() {
            crate::send_signal(child.id(), "TERM");
            let mut child = crate::KillOnDrop::from(child);
            crate::wait_exit(&mut child, Duration::from_secs(10));
        }
    }

    /// Start it again after [`Mosquitto::stop`] or [`Mosquitto::kill`].
    pub fn resume(&mut self) {
        if self.child.is_none() {
            self.spawn();
        }
    }

    /// Start a broker with persistence on (its database in a directory of
    /// its own, saved at every stop and each second): sessions and their
    /// queued QoS 1 messages survive a restart.
    pub fn start_persistent(port: u16) -> Self {
        use std::os::unix::fs::PermissionsExt;
        let store = tempfile::tempdir().expect("temp dir");
        // Started as root, mosquitto writes as its own user.
        std::fs::set_permissions(store.path(), std::fs::Permissions::from_mode(0o777))
            .expect("chmod");
        let mut broker = Self::start_with(
            port,
            &format!(
                "persistence true\npersistence_location {}/\nautosave_interval 1\nmax_queued_messages 100000\n",
                store.path().display()
            ),
        );
        broker.secrets = Some(store);
        broker
    }
}

impl Mosquitto {
    /// Stop a test that would stop or restart the shared broker.
    fn own_process(&self) {
        assert!(
            self.dir.is_some(),
            "the shared broker cannot be stopped or restarted: use Mosquitto::start"
        );
    }
}

impl Drop for Mosquitto {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `[broker]` configuration for an embedded broker on a loopback port of
/// the kernel's choosing; [`Daemon::embedded_broker_port`] tells which.
pub const ANY_BROKER_PORT: &str = "[broker]\nlisten = \"127.0.0.1:0\"\n";

/// What a CLI run ended with and printed.
#[derive(Debug, Clone)]
pub struct CliRun {
    /// Its exit code (-1: killed by a signal).
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

/// `droidwarden daemon` as a process, stopped with SIGTERM on drop.
#[derive(Debug)]
pub struct Daemon {
    child: Child,
    _config: tempfile::NamedTempFile,
    /// The daemon's state directory.
    pub state_dir: tempfile::TempDir,
    log: PathBuf,
}

impl Daemon {
    /// Start the daemon with `config_toml` (its `[state] dir` is set to a
    /// temporary directory) against `adb`.
    pub fn start(adb: &AdbServer, config_toml: &str) -> Self {
        Self::start_with_state(adb, config_toml, tempfile::tempdir().expect("state dir"))
    }

    /// Stop this daemon and start another with `config_toml` on the same
    /// state directory (a restart after the configuration changed).
    pub fn restart_with(mut self, adb: &AdbServer, config_toml: &str) -> Self {
        self.terminate();
        let state_dir =
            std::mem::replace(&mut self.state_dir, tempfile::tempdir().expect("state dir"));
        Self::start_with_state(adb, config_toml, state_dir)
    }

    /// Start the daemon on an existing state directory.
    pub fn start_with_state(
        adb: &AdbServer,
        config_toml: &str,
        state_dir: tempfile::TempDir,
    ) -> Self {
        Self::start_with_env(adb, config_toml, state_dir, &[])
    }

    /// Start the daemon with `[dbus] bus = "auto"` and no bus reachable
    /// ([`no_bus_env`](crate::dbus::no_bus_env)): it serves its API on its
    /// private socket only, under `runtime` as `XDG_RUNTIME_DIR`.
    pub fn start_without_bus(adb: &AdbServer, config_toml: &str, runtime: &Path) -> Self {
        Self::start_with_env(
            adb,
            config_toml,
            tempfile::tempdir().expect("state dir"),
            &crate::dbus::no_bus_env(runtime),
        )
    }

    /// Start the daemon with extra environment variables, e.g.
    /// `DBUS_SESSION_BUS_ADDRESS` and `DROIDWARDEN__DBUS__BUS=session`.
    /// Without them the daemon runs with `[dbus] bus = "none"`, so that no
    /// test daemon ever appears on a developer's own session bus.
    pub fn start_with_env(
        adb: &AdbServer,
        config_toml: &str,
        state_dir: tempfile::TempDir,
        env: &[(&str, &str)],
    ) -> Self {
        let mut config = tempfile::NamedTempFile::new().expect("config");
        write!(
            config,
            "{config_toml}\n[state]\ndir = \"{}\"\n",
            state_dir.path().display()
        )
        .expect("write config");
        let log = state_dir.path().join("daemon.log");
        let log_file = std::fs::File::create(&log).expect("log file");
        let child = crate::spawn_daemon(
            crate::daemon_command(adb, config.path())
                .env("DROIDWARDEN__DBUS__BUS", "none")
                .envs(env.iter().copied()),
            log_file,
        );
        Self {
            child,
            _config: config,
            state_dir,
            log,
        }
    }

    /// The configuration file the daemon runs with.
    pub fn config_path(&self) -> &std::path::Path {
        self._config.path()
    }

    /// `droidwarden ARGS` on this daemon's configuration with no bus to
    /// be found (the CLI reaches the daemon on its private socket, as
    /// [`Daemon::start_without_bus`] with the same `runtime` offers it),
    /// pointed at `adb`'s server. Bounded by a minute and a half.
    pub fn cli_without_bus(&self, adb: &AdbServer, runtime: &Path, args: &[&str]) -> CliRun {
        let mut cmd = Command::new(binary("droidwarden"));
        cmd.arg("--config").arg(self.config_path()).args(args);
        adb.client_env(&mut cmd);
        crate::dbus::without_bus(&mut cmd, runtime);
        let out = crate::run_with_timeout(cmd, Duration::from_secs(90));
        CliRun {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Run `droidwarden mqtt-user ARGS` on this daemon's configuration
    /// (and so its state directory), with `stdin` as standard input.
    pub fn mqtt_user(&self, args: &[&str], stdin: &str) -> std::process::Output {
        let mut child = Command::new(binary("droidwarden"))
            .arg("--config")
            .arg(self.config_path())
            .arg("mqtt-user")
            .args(args)
            .env("DROIDWARDEN__DBUS__BUS", "none")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn droidwarden mqtt-user");
        if let Some(mut input) = child.stdin.take() {
            let _ = input.write_all(stdin.as_bytes());
        }
        if crate::wait_exit(&mut child, Duration::from_secs(30)).is_none() {
            let _ = child.kill();
            let _ = child.wait();
            panic!("droidwarden mqtt-user {args:?} did not finish within 30 s");
        }
        child.wait_with_output().expect("mqtt-user output")
    }

    /// Add a user of the embedded broker and return its (generated)
    /// password.
    pub fn add_mqtt_user(&self, args: &[&str]) -> String {
        let out = self.mqtt_user(&[&["add"], args].concat(), "");
        assert!(
            out.status.success(),
            "mqtt-user add {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// The daemon's own password on its embedded broker
    /// (`<state dir>/mqtt-daemon.secret`), once the daemon has written it.
    pub fn mqtt_secret(&self) -> String {
        let path = self.state_dir.path().join("mqtt-daemon.secret");
        wait_for("the daemon's MQTT secret", Duration::from_secs(30), || {
            std::fs::read_to_string(&path)
                .ok()
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
        })
    }

    /// The port the daemon's embedded broker listens on, from its log.
    /// Configure `[broker] listen` with [`ANY_BROKER_PORT`]: the broker
    /// binds a port of the kernel's choosing, which no other test can take
    /// between choosing and binding (as with a port found free first).
    ///
    /// # Panics
    /// When the log does not say within 30 s.
    pub fn embedded_broker_port(&self) -> u16 {
        wait_for(
            "the embedded broker to listen",
            Duration::from_secs(30),
            || {
                let log = self.log();
                let line = log
                    .lines()
                    .find(|l| l.contains("embedded MQTT broker listening"))?;
                let bound = line.split("bound=").nth(1)?.split_whitespace().next()?;
                bound.rsplit(':').next()?.parse().ok()
            },
        )
    }

    /// The daemon's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Send SIGHUP (reload) and wait until the log says `logged` (e.g.
    /// `skills reloaded`).
    pub fn reload(&self, logged: &str, deadline: Duration) {
        crate::send_signal(self.pid(), "HUP");
        wait_for(&format!("{logged:?} in the daemon's log"), deadline, || {
            self.log().contains(logged).then_some(())
        });
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kill the daemon with SIGKILL (no shutdown at all: a crash or the
    /// OOM killer) and wait for it, keeping its state directory, which is
    /// returned for [`Daemon::start_with_state`].
    pub fn kill(mut self) -> tempfile::TempDir {
        let _ = self.child.kill();
        let _ = self.child.wait();
        std::mem::replace(&mut self.state_dir, tempfile::tempdir().expect("state dir"))
    }

    /// Wait (bounded) for the daemon to exit by itself; its exit status, or
    /// `None` if it is still running at the deadline.
    pub fn wait_exit(&mut self, deadline: Duration) -> Option<i32> {
        crate::wait_exit(&mut self.child, deadline).and_then(|s| s.code())
    }

    /// Send SIGTERM and wait (bounded) for the exit status.
    pub fn terminate(&mut self) -> Option<i32> {
        crate::terminate(&mut self.child, Duration::from_secs(30)).and_then(|s| s.code())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.terminate();
        }
        if std::thread::panicking() {
            eprintln!("--- daemon log ---\n{}", self.log());
        }
    }
}

/// One message seen by a [`Probe`].
#[derive(Debug, Clone)]
pub struct Message {
    /// Topic.
    pub topic: String,
    /// Payload as text.
    pub payload: String,
    /// Whether it was delivered as retained.
    pub retain: bool,
}

impl Message {
    /// The payload as JSON (`Null` when it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.payload).unwrap_or(Value::Null)
    }
}

/// A test client: subscribes to everything and records every message.
pub struct Probe {
    client: Client,
    /// The test's topic level on the shared broker (`t7/`), added to what
    /// it publishes and taken off what it receives; empty otherwise.
    mount: String,
    seen: Arc<Mutex<Vec<Message>>>,
    subscribed: Arc<Mutex<bool>>,
    /// Set on drop: the connection thread stops instead of reconnecting.
    closed: Arc<std::sync::atomic::AtomicBool>,
}

impl Drop for Probe {
    /// Disconnects for good. (A probe that reconnected after being dropped
    /// would take its client identifier back from whoever has it now: on a
    /// broker with `use_username_as_clientid`, any later client of the same
    /// user.)
    fn drop(&mut self) {
        self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = self.client.try_disconnect();
    }
}

impl std::fmt::Debug for Probe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Probe")
            .field("seen", &self.seen.lock().map(|s| s.len()).unwrap_or(0))
            .finish()
    }
}

impl Probe {
    /// Connect to the broker on `port` and subscribe to `#`.
    pub fn connect(port: u16) -> Self {
        Self::connect_mounted(port, "")
    }

    /// Connect to `broker` and subscribe to everything there is of the
    /// test's: on the shared broker, every topic under the test's level,
    /// which the probe hides (its topics read as on a broker of its own).
    pub fn connect_to(broker: &Mosquitto) -> Self {
        Self::connect_mounted(broker.port, broker.mount().unwrap_or(""))
    }

    fn connect_mounted(port: u16, mount: &str) -> Self {
        let probe = Self::start(port, None, mount);
        // The subscription is acknowledged asynchronously; a retained
        // message proves it is active.
        let marker = format!("probe/ready/{}", free_port());
        probe.publish_retained(&marker, "1");
        probe.wait(
            &format!("the probe's subscription ({marker})"),
            Duration::from_secs(10),
            |m| m.topic == marker,
        );
        probe.publish_retained(&marker, "");
        probe
    }

    /// Connect as `user` (the embedded broker, which checks passwords and
    /// roles) and subscribe to `#`; returns once the broker acknowledged
    /// the subscription.
    pub fn connect_as(port: u16, user: &str, password: &str) -> Self {
        let probe = Self::start(port, Some((user, password)), "");
        wait_for("the probe's SUBACK", Duration::from_secs(10), || {
            (*probe.subscribed.lock().unwrap()).then_some(())
        });
        probe
    }

    fn start(port: u16, login: Option<(&str, &str)>, mount: &str) -> Self {
        let id = format!("probe-{}-{}", std::process::id(), free_port());
        let mut options = MqttOptions::new(id, "127.0.0.1", port);
        options.set_keep_alive(Duration::from_secs(5));
        options.set_max_packet_size(2 * 1024 * 1024, 2 * 1024 * 1024);
        if let Some((user, password)) = login {
            options.set_credentials(user, password);
        }
        let (client, mut connection) = Client::new(options, 10_000);
        let seen: Arc<Mutex<Vec<Message>>> = Arc::default();
        let closed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let connected = Arc::new(Mutex::new(false));
        let subscribed = Arc::new(Mutex::new(false));
        {
            let mount = mount.to_owned();
            let seen = Arc::clone(&seen);
            let connected = Arc::clone(&connected);
            let subscribed = Arc::clone(&subscribed);
            let client = client.clone();
            let closed = Arc::clone(&closed);
            std::thread::spawn(move || {
                let is_closed = || closed.load(std::sync::atomic::Ordering::SeqCst);
                for event in connection.iter() {
                    match event {
                        // Dropped: our DISCONNECT is out, after everything
                        // published before it; or the connection ended.
                        Ok(Event::Outgoing(Outgoing::Disconnect)) => return,
                        Err(_) if is_closed() => return,
                        Ok(Event::Incoming(Packet::ConnAck(_))) => {
                            let _ = client.try_subscribe(format!("{mount}#"), QoS::AtLeastOnce);
                            *connected.lock().unwrap() = true;
                        }
                        Ok(Event::Incoming(Packet::SubAck(_))) => {
                            *subscribed.lock().unwrap() = true;
                        }
                        Ok(Event::Incoming(Packet::Publish(p))) => {
                            let Some(topic) = p.topic.strip_prefix(mount.as_str()) else {
                                continue;
                            };
                            seen.lock().unwrap().push(Message {
                                topic: topic.to_owned(),
                                payload: String::from_utf8_lossy(&p.payload).into_owned(),
                                retain: p.retain,
                            })
                        }
                        Ok(_) => {}
                        Err(_) => std::thread::sleep(Duration::from_millis(50)),
                    }
                }
            });
        }
        wait_for("the probe to connect", Duration::from_secs(30), || {
            (*connected.lock().unwrap()).then_some(())
        });
        Self {
            client,
            mount: mount.to_owned(),
            seen,
            subscribed,
            closed,
        }
    }

    /// Publish (QoS 1, not retained).
    pub fn publish(&self, topic: &str, payload: impl Into<Vec<u8>>) {
        self.client
            .publish(
                format!("{}{topic}", self.mount),
                QoS::AtLeastOnce,
                false,
                payload,
            )
            .expect("publish");
    }

    /// Publish retained (an empty payload clears).
    pub fn publish_retained(&self, topic: &str, payload: impl Into<Vec<u8>>) {
        self.client
            .publish(
                format!("{}{topic}", self.mount),
                QoS::AtLeastOnce,
                true,
                payload,
            )
            .expect("publish");
    }

    /// Every message seen so far.
    pub fn messages(&self) -> Vec<Message> {
        self.seen.lock().unwrap().clone()
    }

    /// Messages on `topic`, in order.
    pub fn on(&self, topic: &str) -> Vec<Message> {
        self.messages()
            .into_iter()
            .filter(|m| m.topic == topic)
            .collect()
    }

    /// The payloads on `topic` as JSON, in order.
    pub fn on_json(&self, topic: &str) -> Vec<Value> {
        self.on(topic).iter().map(Message::json).collect()
    }

    /// Wait for a message matching `pred` (already seen or new).
    pub fn wait(&self, what: &str, deadline: Duration, pred: impl Fn(&Message) -> bool) -> Message {
        wait_for(what, deadline, || {
            self.seen.lock().unwrap().iter().find(|m| pred(m)).cloned()
        })
    }

    /// Wait until the last message on `topic` matches `pred`.
    pub fn wait_last(
        &self,
        topic: &str,
        deadline: Duration,
        pred: impl Fn(&Message) -> bool,
    ) -> Message {
        wait_for(
            &format!("the latest message on {topic} to match"),
            deadline,
            || self.on(topic).last().filter(|m| pred(m)).cloned(),
        )
    }

    /// Wait until the last message on `topic` is `payload` (an
    /// availability topic saying `online` or `offline`).
    pub fn wait_payload(&self, topic: &str, deadline: Duration, payload: &str) -> Message {
        wait_for(
            &format!("the latest message on {topic} to be {payload:?}"),
            deadline,
            || {
                self.on(topic)
                    .last()
                    .filter(|m| m.payload == payload)
                    .cloned()
            },
        )
    }

    /// The events published so far on the agent session `session`
    /// (`<prefix>/sessions/<session>/events`), as JSON.
    pub fn session_events(&self, prefix: &str, session: &str) -> Vec<Value> {
        self.on_json(&format!("{prefix}/sessions/{session}/events"))
    }

    /// Wait until the agent session `session` has published its `final`
    /// event; every event it published by then.
    pub fn wait_session_end(&self, prefix: &str, session: &str, deadline: Duration) -> Vec<Value> {
        wait_for(
            &format!("the final event of session {session}"),
            deadline,
            || {
                let events = self.session_events(prefix, session);
                events
                    .iter()
                    .any(|e| e["event"] == "final")
                    .then_some(events)
            },
        )
    }

    /// Wait for a pending approval request (under `<prefix>/approvals/`)
    /// whose JSON satisfies `pred`; that JSON.
    pub fn wait_approval(&self, prefix: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let under = format!("{prefix}/approvals/");
        self.wait(what, Duration::from_secs(30), |m| {
            m.topic.starts_with(&under) && !m.payload.is_empty() && pred(&m.json())
        })
        .json()
    }

    /// Whether any approval request satisfying `pred` was seen.
    pub fn saw_approval(&self, prefix: &str, pred: impl Fn(&Value) -> bool) -> bool {
        let under = format!("{prefix}/approvals/");
        self.messages()
            .iter()
            .any(|m| m.topic.starts_with(&under) && !m.payload.is_empty() && pred(&m.json()))
    }

    /// Answer the approval request `id` on `cmd/approve` (`approve` or
    /// `deny`).
    pub fn answer_approval(&self, prefix: &str, id: &str, decision: &str) {
        self.publish(
            &format!("{prefix}/cmd/approve"),
            serde_json::json!({"approval_id": id, "decision": decision}).to_string(),
        );
    }

    /// Wait for the reply to request `id`; its JSON.
    pub fn wait_reply(&self, prefix: &str, id: &str) -> Value {
        let topic = format!("{prefix}/reply/{id}");
        self.wait(
            &format!("a reply on {topic}"),
            Duration::from_secs(30),
            |m| m.topic == topic,
        )
        .json()
    }

    /// `cmd/call` of `action` of `service` on `device` as request `id`
    /// ([`call_request`]), and its reply.
    pub fn call(
        &self,
        prefix: &str,
        id: &str,
        device: &str,
        service: &str,
        action: &str,
        params: Value,
    ) -> Value {
        self.request(
            prefix,
            "call",
            call_request(id, device, service, action, params),
        )
    }

    /// Publish a command and wait for its reply on `<prefix>/reply/<id>`.
    pub fn request(&self, prefix: &str, command: &str, body: Value) -> Value {
        let id = body["id"].as_str().expect("the body has an id").to_owned();
        let reply_topic = format!("{prefix}/reply/{id}");
        let before = self.on(&reply_topic).len();
        self.publish(&format!("{prefix}/cmd/{command}"), body.to_string());
        wait_for(
            &format!("a reply on {reply_topic}"),
            Duration::from_secs(30),
            || self.on(&reply_topic).get(before).map(Message::json),
        )
    }
}

/// The result of a reply that must be a success (of [`Probe::call`] or
/// [`Probe::request`]).
///
/// # Panics
/// When the reply is an error, showing it.
pub fn ok_result(reply: Value) -> Value {
    assert_eq!(reply["ok"], true, "{reply}");
    reply["result"].clone()
}

/// The body of a `cmd/call` request: `action` of `service` on `device`
/// with `params`, answered on `<prefix>/reply/<id>`.
pub fn call_request(id: &str, device: &str, service: &str, action: &str, params: Value) -> Value {
    serde_json::json!({"id": id, "device": device, "service": service, "action": action, "params": params})
}

/// No state polls: a sim's command log holds only what a test asks for,
/// and a one-shot fault meets the test's call, not a poll.
pub const NO_POLLS: &str = "[poll]\nbattery = 0\nwifi_automation = 0\nbluetooth_automation = 0\nairplane_mode = 0\naudio_automation = 0\nscreen_control = 0\ndevice_state = 0\n";

/// A daemon configuration for mosquitto on `broker_port` and one ADB phone
/// named `phone` at `serial`, with `extra` sections added.
pub fn one_phone_config(broker_port: u16, serial: &str, extra: &str) -> String {
    phone_config(broker_port, serial, "phone", extra)
}

/// A daemon configuration for mosquitto on `broker_port` and one ADB phone
/// named `name` at `serial`; `extra` follows the `[mqtt]` URL, so it may
/// start with more `[mqtt]` keys before its own sections.
pub fn phone_config(broker_port: u16, serial: &str, name: &str, extra: &str) -> String {
    format!(
        "[mqtt]\nurl = \"mqtt://127.0.0.1:{broker_port}\"\n{extra}\n[adb]\npoll_interval_ms = 300\nconnect = [\"{serial}\"]\n[[devices]]\nname = \"{name}\"\ntransport = \"adb\"\nserial = \"{serial}\"\n"
    )
}
