//! Starting, steering and stopping the emulated phone.
//!
//! `Sim::start` builds the phone from a `SimConfig`, binds the ADB port
//! (and optionally the control port) and returns a cloneable `SimHandle`.
//! Every task is spawned on a `TaskTracker` and stops when the handle's
//! `CancellationToken` is cancelled (`SimHandle::shutdown`). ADB connections
//! belong to a *listening generation*: `set_listening(false)` cancels the
//! generation, waits for its tasks and closes the port; `set_listening(true)`
//! binds the same port again. ADB can be switched off entirely for a phone
//! that is only reached through its companion app; companion mode (an MQTT
//! client, see `companion`) runs on the same tracker and phone state.

use std::borrow::Cow;
use std::fs::OpenOptions;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::companion::{Companion, CompanionSettings, Link};
use crate::error::SimError;
use crate::fault::{Fault, Faults, OneShot};
use crate::log::LogEntry;
use crate::phone::Phone;
use crate::replay::Replay;
use crate::shell::Fd;
use crate::state::{PhoneState, sdk_for_release};

/// How long shutdown and `set_listening(false)` wait for tasks to finish.
const STOP_WAIT: Duration = Duration::from_secs(5);

/// Configuration of one emulated phone.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Address to listen on (default `127.0.0.1`).
    pub bind: IpAddr,
    /// Whether to serve ADB (default true); false for a phone reached only
    /// through its companion app.
    pub adb: bool,
    /// ADB port; 0 picks a free one.
    pub adb_port: u16,
    /// Control port: `None` for none, `Some(0)` for a free one.
    pub control_port: Option<u16>,
    /// Overrides `ro.serialno`.
    pub serial: Option<String>,
    /// Overrides `ro.product.model`.
    pub model: Option<String>,
    /// Overrides `ro.build.version.release` (and the matching SDK level).
    pub android_version: Option<String>,
    /// Ask the host to authenticate (any signature is accepted).
    pub auth: bool,
    /// Ask the host to authenticate and never accept: the phone's key
    /// prompt waits for a user who does not answer (adb lists the phone
    /// `unauthorized`).
    pub auth_prompt: bool,
    /// Announce the ADB port over mDNS as `_adb-tls-connect._tcp` under
    /// this instance name (`adb-SERIAL-xxxxxx`), as a phone with wireless
    /// debugging on does.
    pub mdns_instance: Option<String>,
    /// Answer commands listed in `DIR/index.json` from recorded files.
    pub replay_dir: Option<PathBuf>,
    /// Append each command-log entry to this file as a JSON line.
    pub command_log: Option<PathBuf>,
    /// Initial state (default: `PhoneState::default()`).
    pub initial_state: Option<PhoneState>,
    /// Run the companion app against this MQTT broker (default: no).
    pub companion: Option<CompanionSettings>,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
            adb: true,
            adb_port: 0,
            control_port: None,
            serial: None,
            model: None,
            android_version: None,
            auth: false,
            auth_prompt: false,
            mdns_instance: None,
            replay_dir: None,
            command_log: None,
            initial_state: None,
            companion: None,
        }
    }
}

/// What a command line printed and its exit status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellOutput {
    /// Standard output.
    pub stdout: Vec<u8>,
    /// Standard error.
    pub stderr: Vec<u8>,
    /// Exit status.
    pub exit: u8,
}

impl ShellOutput {
    /// Standard output as text (lossy).
    pub fn stdout_text(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(&self.stdout)
    }

    /// Standard error as text (lossy).
    pub fn stderr_text(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(&self.stderr)
    }
}

/// State shared by every task of one simulator.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) phone: Phone,
    faults: Mutex<Faults>,
    pub(crate) auth: bool,
    /// The key prompt is never answered ([`SimConfig::auth_prompt`]).
    pub(crate) auth_prompt: bool,
    /// Frozen ([`Fault::Freeze`]): shell requests wait for this to be false.
    frozen: tokio::sync::watch::Sender<bool>,
    /// The on-device UI servers running (`phone::ui_server`), by port: each
    /// lives until its token is cancelled (its shell stream closed, its
    /// connection gone, or a crash).
    pub(crate) ui_servers: Mutex<std::collections::HashMap<u16, CancellationToken>>,
}

impl Shared {
    /// Wait while the phone is frozen (not cancellable: a frozen adbd
    /// keeps what it was sent, whether or not the client still waits).
    pub(crate) async fn thawed(&self) {
        let _ = self.frozen.subscribe().wait_for(|frozen| !frozen).await;
    }

    /// The delay in force and the one-shot fault for the next request.
    pub(crate) fn take_faults(&self) -> (Option<Duration>, Option<OneShot>) {
        self.faults
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take_for_request()
    }
}

#[derive(Debug)]
struct Generation {
    cancel: CancellationToken,
    tracker: TaskTracker,
}

#[derive(Debug)]
struct Inner {
    shared: Arc<Shared>,
    /// Where ADB listens; changes when the phone moves ([`SimHandle::move_adb`]).
    adb_addr: std::sync::Mutex<Option<SocketAddr>>,
    /// The mDNS announcement of the ADB port, when asked for.
    mdns: std::sync::Mutex<Option<crate::mdns::Announcer>>,
    control_addr: Option<SocketAddr>,
    companion: Option<Arc<Companion>>,
    shutdown: CancellationToken,
    tracker: TaskTracker,
    listening: tokio::sync::Mutex<Option<Generation>>,
}

/// The emulated phone's entry point.
#[derive(Debug)]
pub struct Sim;

/// A running emulated phone. Cheap to clone; every clone steers the same phone.
#[derive(Debug, Clone)]
pub struct SimHandle {
    inner: Arc<Inner>,
}

fn bind_listener(addr: SocketAddr) -> Result<TcpListener, SimError> {
    let err = |source| SimError::Bind { addr, source };
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()
    } else {
        TcpSocket::new_v6()
    }
    .map_err(err)?;
    // Rebinding the same port after `set_listening(false)` must not wait
    // for old connections' TIME_WAIT.
    socket.set_reuseaddr(true).map_err(err)?;
    socket.bind(addr).map_err(err)?;
    socket.listen(128).map_err(err)
}

async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    generation: CancellationToken,
    tracker: TaskTracker,
) {
    accept_until(&listener, &generation, "adb", |stream, _| {
        tracker.spawn(crate::adb::serve_connection(
            stream,
            Arc::clone(&shared),
            tracker.clone(),
            generation.clone(),
        ));
    })
    .await;
}

/// Accepts connections on `listener` and hands each to `serve` until
/// `cancel` is cancelled; `what` names the server in log messages.
///
/// A failed accept is logged and followed by a short pause: such failures
/// (e.g. running out of file descriptors) usually persist for a while, and
/// retrying at once would spin the CPU and flood the log.
pub(crate) async fn accept_until(
    listener: &TcpListener,
    cancel: &CancellationToken,
    what: &'static str,
    mut serve: impl FnMut(TcpStream, SocketAddr),
) {
    loop {
        let accepted = tokio::select! {
            () = cancel.cancelled() => return,
            r = listener.accept() => r,
        };
        match accepted {
            Ok((stream, peer)) => serve(stream, peer),
            Err(e) => {
                tracing::warn!(server = what, error = %e, "accept failed");
                // Back off briefly (e.g. out of file descriptors) instead of spinning.
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

async fn wait_bounded(tracker: &TaskTracker, what: &str) {
    tracker.close();
    if tokio::time::timeout(STOP_WAIT, tracker.wait())
        .await
        .is_err()
    {
        tracing::warn!("{what}: tasks still running after {STOP_WAIT:?}");
    }
}

impl Sim {
    /// Builds the phone and starts listening.
    ///
    /// # Errors
    ///
    /// `SimError::Config` for an unknown Android version or when neither ADB
    /// nor the companion app is on, `SimError::Replay`
    /// for a bad replay index, `SimError::CommandLog` when the log file cannot
    /// be opened, `SimError::Bind` when a port cannot be bound.
    pub async fn start(config: SimConfig) -> Result<SimHandle, SimError> {
        if !config.adb && config.companion.is_none() {
            return Err(SimError::Config(
                "nothing to serve: turn on ADB or the companion app".into(),
            ));
        }
        let mut state = config.initial_state.clone().unwrap_or_default();
        if let Some(serial) = &config.serial {
            state.props.serial.clone_from(serial);
        }
        if let Some(model) = &config.model {
            state.props.model.clone_from(model);
            state.bluetooth.name.clone_from(model);
            state
                .settings
                .global
                .insert("device_name".to_owned(), model.clone());
        }
        if let Some(version) = &config.android_version {
            let sdk = sdk_for_release(version).ok_or_else(|| {
                SimError::Config(format!(
                    "unknown Android version {version:?} (known: 5, 6, 7, 8, 9, 10, 11, 12, 12L, 13, 14, 15, 16, 17)"
                ))
            })?;
            state.props.android_version.clone_from(version);
            state.props.sdk = sdk;
        }
        let replay = match &config.replay_dir {
            Some(dir) => {
                let replay = Replay::load(dir)?;
                tracing::info!(dir = %dir.display(), commands = replay.len(), "replay index loaded");
                Some(replay)
            }
            None => None,
        };
        let log_file = match &config.command_log {
            Some(path) => Some(
                OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .map_err(|source| SimError::CommandLog {
                        path: path.clone(),
                        source,
                    })?,
            ),
            None => None,
        };
        let shared = Arc::new(Shared {
            phone: Phone::new(state, replay, log_file),
            faults: Mutex::new(Faults::default()),
            frozen: tokio::sync::watch::channel(false).0,
            auth: config.auth,
            auth_prompt: config.auth_prompt,
            ui_servers: Mutex::default(),
        });

        let adb_listener = if config.adb {
            Some(bind_listener(SocketAddr::new(
                config.bind,
                config.adb_port,
            ))?)
        } else {
            None
        };
        let adb_addr = match &adb_listener {
            Some(l) => Some(l.local_addr().map_err(|source| SimError::Bind {
                addr: SocketAddr::new(config.bind, config.adb_port),
                source,
            })?),
            None => None,
        };
        let control_listener = match config.control_port {
            Some(port) => Some(bind_listener(SocketAddr::new(config.bind, port))?),
            None => None,
        };
        let control_addr = match &control_listener {
            Some(l) => Some(l.local_addr().map_err(|source| SimError::Bind {
                addr: SocketAddr::new(config.bind, config.control_port.unwrap_or(0)),
                source,
            })?),
            None => None,
        };

        // Before any task is spawned: a bad name stops the start cleanly.
        let mdns = match (&config.mdns_instance, adb_addr) {
            (Some(instance), Some(addr)) => Some(crate::mdns::Announcer::start(instance, addr)?),
            (Some(_), None) => {
                return Err(SimError::Config(
                    "an mDNS announcement needs the ADB port".into(),
                ));
            }
            (None, _) => None,
        };
        let shutdown = CancellationToken::new();
        let tracker = TaskTracker::new();
        let generation = adb_listener.map(|listener| {
            let generation = Generation {
                cancel: shutdown.child_token(),
                tracker: TaskTracker::new(),
            };
            generation.tracker.spawn(accept_loop(
                listener,
                Arc::clone(&shared),
                generation.cancel.clone(),
                generation.tracker.clone(),
            ));
            generation
        });
        let companion = config
            .companion
            .clone()
            .map(|settings| Arc::new(Companion::new(settings)));
        let handle = SimHandle {
            inner: Arc::new(Inner {
                shared,
                adb_addr: std::sync::Mutex::new(adb_addr),
                mdns: std::sync::Mutex::new(mdns),
                control_addr,
                companion: companion.clone(),
                shutdown: shutdown.clone(),
                tracker: tracker.clone(),
                listening: tokio::sync::Mutex::new(generation),
            }),
        };
        if let Some(companion) = companion {
            tracker.spawn(crate::companion::run(
                handle.clone(),
                companion,
                shutdown.clone(),
                tracker.clone(),
            ));
        }
        if let Some(listener) = control_listener {
            tracker.spawn(crate::control::serve(
                listener,
                handle.clone(),
                shutdown.clone(),
                tracker.clone(),
            ));
        }
        tracing::info!(adb = ?adb_addr, control = ?control_addr, companion = ?config.companion.as_ref().map(|c| &c.id), "emulated phone started");
        Ok(handle)
    }
}

impl SimHandle {
    /// The ADB address (`adb connect` to it); `None` when ADB is off.
    pub fn adb_addr(&self) -> Option<SocketAddr> {
        *self
            .inner
            .adb_addr
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Move ADB to `port` on the same address (0: a free one), as a phone
    /// whose wireless debugging was turned off and on: connections to the
    /// old port close, and the mDNS announcement follows. Returns the new
    /// address.
    ///
    /// # Errors
    /// `SimError::Config` when this phone has no ADB port; `SimError::Bind`
    /// when the new port cannot be bound (the phone stays where it was).
    pub async fn move_adb(&self, port: u16) -> Result<SocketAddr, SimError> {
        let mut slot = self.inner.listening.lock().await;
        if self.inner.shutdown.is_cancelled() {
            return Err(SimError::ShutDown);
        }
        let Some(old) = self.adb_addr() else {
            return Err(SimError::Config("this phone has no ADB port".into()));
        };
        let wanted = SocketAddr::new(old.ip(), port);
        let listener = bind_listener(wanted)?;
        let new = listener.local_addr().map_err(|source| SimError::Bind {
            addr: wanted,
            source,
        })?;
        if let Some(generation) = slot.take() {
            generation.cancel.cancel();
            wait_bounded(&generation.tracker, "move").await;
        }
        let generation = Generation {
            cancel: self.inner.shutdown.child_token(),
            tracker: TaskTracker::new(),
        };
        generation.tracker.spawn(accept_loop(
            listener,
            Arc::clone(&self.inner.shared),
            generation.cancel.clone(),
            generation.tracker.clone(),
        ));
        *slot = Some(generation);
        *self
            .inner
            .adb_addr
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(new);
        if let Some(announcer) = self
            .inner
            .mdns
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_mut()
        {
            announcer.announce(new)?;
        }
        tracing::info!(from = %old, to = %new, "ADB moved");
        Ok(new)
    }

    /// The control-port address, if one was configured.
    pub fn control_addr(&self) -> Option<SocketAddr> {
        self.inner.control_addr
    }

    /// A snapshot of the phone's state.
    pub fn state(&self) -> PhoneState {
        self.inner.shared.phone.state()
    }

    /// Reads part of the state; `f` runs under the state lock, so keep it
    /// short.
    pub(crate) fn read_state<R>(&self, f: impl FnOnce(&PhoneState) -> R) -> R {
        self.inner.shared.phone.read(f)
    }

    /// Changes the state; `f` runs under the state lock, so keep it short.
    pub fn update_state<R>(&self, f: impl FnOnce(&mut PhoneState) -> R) -> R {
        self.inner.shared.phone.update(f)
    }

    /// Sets one value by dotted path into the state's JSON form, e.g.
    /// `battery.level` or `packages.3.enabled`. The change is all or nothing.
    ///
    /// # Errors
    ///
    /// `SimError::Control` when the path does not exist or the value does not
    /// fit the field.
    pub fn set_path(&self, path: &str, value: serde_json::Value) -> Result<(), SimError> {
        self.inner.shared.phone.update(|st| {
            let mut json =
                serde_json::to_value(&*st).map_err(|e| SimError::Control(e.to_string()))?;
            let segments: Vec<&str> = path.split('.').collect();
            if path.is_empty() || segments.iter().any(|s| s.is_empty()) {
                return Err(SimError::Control(format!("bad path {path:?}")));
            }
            let (last, parents) = segments.split_last().unwrap_or((&"", &[]));
            let mut node = &mut json;
            for seg in parents {
                node = match node {
                    serde_json::Value::Object(map) => map.get_mut(*seg),
                    serde_json::Value::Array(items) => {
                        seg.parse::<usize>().ok().and_then(|i| items.get_mut(i))
                    }
                    _ => None,
                }
                .ok_or_else(|| SimError::Control(format!("no such path {path:?} (at {seg:?})")))?;
            }
            match node {
                serde_json::Value::Object(map) => {
                    map.insert((*last).to_owned(), value);
                }
                serde_json::Value::Array(items) => {
                    let slot = last
                        .parse::<usize>()
                        .ok()
                        .and_then(|i| items.get_mut(i))
                        .ok_or_else(|| {
                            SimError::Control(format!("no such path {path:?} (at {last:?})"))
                        })?;
                    *slot = value;
                }
                _ => return Err(SimError::Control(format!("no such path {path:?}"))),
            }
            let new: PhoneState = serde_json::from_value(json)
                .map_err(|e| SimError::Control(format!("cannot set {path}: {e}")))?;
            *st = new;
            Ok(())
        })
    }

    /// The command log, oldest first.
    pub fn command_log(&self) -> Vec<LogEntry> {
        self.inner.shared.phone.log_entries()
    }

    /// Empties the command log.
    pub fn clear_command_log(&self) {
        self.inner.shared.phone.clear_log();
    }

    /// Injects (or clears) a fault.
    pub fn set_fault(&self, fault: Fault) {
        tracing::info!(?fault, "fault");
        let shared = &self.inner.shared;
        match fault {
            Fault::Freeze => {
                shared.frozen.send_replace(true);
            }
            Fault::Thaw | Fault::Clear => {
                shared.frozen.send_replace(false);
            }
            _ => {}
        }
        shared
            .faults
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .apply(fault);
    }

    /// The delay in force and the one-shot fault for the next request (ADB
    /// or companion; whichever comes first consumes the one-shot).
    pub(crate) fn take_faults(&self) -> (Option<Duration>, Option<OneShot>) {
        self.inner.shared.take_faults()
    }

    /// Runs one read-only command against a copy of the state, unlogged.
    pub(crate) fn peek(&self, argv: &[&str]) -> ShellOutput {
        let result = self.inner.shared.phone.peek(argv);
        ShellOutput {
            stdout: result.output.stream(Fd::Stdout),
            stderr: result.output.stream(Fd::Stderr),
            exit: result.status,
        }
    }

    /// A receiver woken after every state update or command line.
    pub(crate) fn state_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.shared.phone.watch_changes()
    }

    /// Runs a command line in-process, as the device shell would (logged like
    /// ADB commands; faults and `sleep` delays do not apply).
    pub fn execute(&self, command: &str) -> ShellOutput {
        let outcome = self.inner.shared.phone.run(command);
        ShellOutput {
            stdout: outcome.output.stream(Fd::Stdout),
            stderr: outcome.output.stream(Fd::Stderr),
            exit: outcome.status,
        }
    }

    /// Write a file as the adb file service does (`STAT`, then `SEND` …
    /// `DONE`; logged the same way), for the companion app's `files.push`.
    /// `Ok(None)`: nothing written, the path exists (a directory when the
    /// flag is set); `Ok(Some(replaced))`: written.
    ///
    /// # Errors
    /// Why the phone refuses the file (`Read-only file system`, …).
    pub fn write_file(
        &self,
        path: &str,
        bytes: Vec<u8>,
        replace: bool,
    ) -> Result<Result<bool, bool>, String> {
        let phone = &self.inner.shared.phone;
        let before = phone.sync_stat(path);
        if let Some((mode, _, _)) = before {
            let is_dir = mode & 0o170_000 == 0o040_000;
            if is_dir || !replace {
                return Ok(Err(is_dir));
            }
        }
        phone.sync_check_create(path)?;
        if bytes.len() > crate::phone::MAX_FILE {
            return Err("No space left on device".into());
        }
        phone.sync_write(path, bytes)?;
        Ok(Ok(before.is_some()))
    }

    /// Whether the ADB port is open.
    pub async fn is_listening(&self) -> bool {
        self.inner.listening.lock().await.is_some()
    }

    /// Makes the phone disappear (`false`: close the port and every ADB
    /// connection, waiting until they are closed) or come back on the same
    /// port (`true`).
    ///
    /// # Errors
    ///
    /// `SimError::ShutDown` after shutdown; `SimError::Bind` when the port
    /// was taken in the meantime; `SimError::Config` when ADB is off.
    pub async fn set_listening(&self, on: bool) -> Result<(), SimError> {
        let mut slot = self.inner.listening.lock().await;
        if self.inner.shutdown.is_cancelled() {
            return Err(SimError::ShutDown);
        }
        let Some(adb_addr) = self.adb_addr() else {
            return Err(SimError::Config("this phone has no ADB port".into()));
        };
        match (on, slot.is_some()) {
            (true, false) => {
                let listener = bind_listener(adb_addr)?;
                let generation = Generation {
                    cancel: self.inner.shutdown.child_token(),
                    tracker: TaskTracker::new(),
                };
                generation.tracker.spawn(accept_loop(
                    listener,
                    Arc::clone(&self.inner.shared),
                    generation.cancel.clone(),
                    generation.tracker.clone(),
                ));
                *slot = Some(generation);
                tracing::info!(adb = %adb_addr, "listening again");
            }
            (false, true) => {
                if let Some(generation) = slot.take() {
                    generation.cancel.cancel();
                    wait_bounded(&generation.tracker, "stop listening").await;
                }
                tracing::info!(adb = %adb_addr, "stopped listening; connections closed");
            }
            _ => {}
        }
        Ok(())
    }

    fn companion(&self) -> Result<&Arc<Companion>, SimError> {
        self.inner
            .companion
            .as_ref()
            .ok_or_else(|| SimError::Config("companion mode is off".into()))
    }

    /// The companion id, in companion mode.
    pub fn companion_id(&self) -> Option<&str> {
        self.inner
            .companion
            .as_ref()
            .map(|c| c.settings.id.as_str())
    }

    /// Whether the companion app's MQTT session is up (subscribed and
    /// announced `online`).
    pub fn is_companion_connected(&self) -> bool {
        self.inner
            .companion
            .as_ref()
            .is_some_and(|c| *c.connected.borrow())
    }

    /// Waits until the companion app's MQTT session is up. Unbounded (a
    /// phone waits for its broker): bound it with a timeout.
    ///
    /// # Errors
    ///
    /// `SimError::Config` without companion mode, `SimError::ShutDown` when
    /// the simulator stops first.
    pub async fn companion_connected(&self) -> Result<(), SimError> {
        let mut connected = self.companion()?.connected.subscribe();
        tokio::select! {
            () = self.inner.shutdown.cancelled() => Err(SimError::ShutDown),
            r = connected.wait_for(|up| *up) => r.map(drop).map_err(|_| SimError::ShutDown),
        }
    }

    /// Takes the companion app offline (`online` false: cleanly, publishing
    /// `offline` and disconnecting; with `abrupt`, by dropping the connection
    /// so the broker publishes the last will) or back online. Waits (at most
    /// five seconds) until the session is in that state and returns whether
    /// it is connected.
    ///
    /// # Errors
    ///
    /// `SimError::Config` without companion mode.
    pub async fn set_companion_online(&self, online: bool, abrupt: bool) -> Result<bool, SimError> {
        let companion = self.companion()?;
        let link = match (online, abrupt) {
            (true, _) => Link::Up,
            (false, false) => Link::Down,
            (false, true) => Link::Dropped,
        };
        companion.link.send_if_modified(|current| {
            let changed = *current != link;
            *current = link;
            changed
        });
        let mut connected = companion.connected.subscribe();
        let _ = tokio::time::timeout(STOP_WAIT, connected.wait_for(|up| *up == online)).await;
        let now = *connected.borrow();
        Ok(now)
    }

    /// Makes the companion app send every response twice (or once again).
    ///
    /// # Errors
    ///
    /// `SimError::Config` without companion mode.
    pub fn set_companion_duplicates(&self, enabled: bool) -> Result<(), SimError> {
        self.companion()?
            .duplicates
            .store(enabled, std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }

    /// The companion app's state: connected, duplicates, tracking interval,
    /// photos taken.
    ///
    /// # Errors
    ///
    /// `SimError::Config` without companion mode.
    pub fn companion_status(&self) -> Result<serde_json::Value, SimError> {
        let c = self.companion()?;
        Ok(serde_json::json!({
            "id": c.settings.id,
            "connected": *c.connected.borrow(),
            "duplicates": c.duplicates.load(std::sync::atomic::Ordering::SeqCst),
            "tracking_interval_s": *c.tracking.borrow(),
            "photos": *c.photos(),
        }))
    }

    /// A token cancelled when the simulator shuts down.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.inner.shutdown.clone()
    }

    /// Stops every task and closes every socket (bounded wait).
    pub async fn shutdown(&self) {
        self.inner.shutdown.cancel();
        // The mDNS responder stops, saying goodbye.
        drop(
            self.inner
                .mdns
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
        if let Some(generation) = self.inner.listening.lock().await.take() {
            wait_bounded(&generation.tracker, "shutdown (adb)").await;
        }
        wait_bounded(&self.inner.tracker, "shutdown (control)").await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn config_overrides_identity() {
        let sim = Sim::start(SimConfig {
            serial: Some("S1".to_owned()),
            model: Some("Phone X".to_owned()),
            android_version: Some("12".to_owned()),
            ..SimConfig::default()
        })
        .await
        .expect("start");
        assert_eq!(sim.execute("getprop ro.serialno").stdout_text(), "S1\n");
        assert_eq!(
            sim.execute("getprop ro.product.model").stdout_text(),
            "Phone X\n"
        );
        assert_eq!(
            sim.execute("getprop ro.build.version.sdk").stdout_text(),
            "31\n"
        );
        assert!(sim.adb_addr().expect("adb on").port() != 0);
        sim.shutdown().await;
        let bad = Sim::start(SimConfig {
            android_version: Some("4.4".to_owned()),
            ..SimConfig::default()
        })
        .await;
        assert!(matches!(bad, Err(SimError::Config(_))));
    }

    #[tokio::test]
    async fn set_path_patches_or_refuses() {
        let sim = Sim::start(SimConfig::default()).await.expect("start");
        sim.set_path("battery.level", serde_json::json!(42))
            .expect("set");
        assert_eq!(sim.state().battery.level, 42);
        sim.set_path("packages.0.enabled", serde_json::json!(false))
            .expect("array index");
        assert!(!sim.state().packages[0].enabled);
        sim.set_path("settings.global.my_key", serde_json::json!("v"))
            .expect("map insert");
        assert_eq!(
            sim.execute("settings get global my_key").stdout_text(),
            "v\n"
        );
        for (path, value) in [
            ("battery.levle", serde_json::json!(1)),
            ("battery.level", serde_json::json!("high")),
            ("nope.level", serde_json::json!(1)),
            ("battery..level", serde_json::json!(1)),
            ("packages.999.enabled", serde_json::json!(true)),
        ] {
            assert!(sim.set_path(path, value).is_err(), "{path}");
        }
        assert_eq!(sim.state().battery.level, 42);
        sim.shutdown().await;
    }

    #[tokio::test]
    async fn listening_can_be_switched_off_and_on_on_the_same_port() {
        let sim = Sim::start(SimConfig::default()).await.expect("start");
        let addr = sim.adb_addr().expect("adb on");
        tokio::net::TcpStream::connect(addr)
            .await
            .expect("listening");
        sim.set_listening(false).await.expect("off");
        assert!(!sim.is_listening().await);
        assert!(tokio::net::TcpStream::connect(addr).await.is_err());
        sim.set_listening(true).await.expect("on");
        tokio::net::TcpStream::connect(addr)
            .await
            .expect("listening again");
        sim.shutdown().await;
        assert!(matches!(
            sim.set_listening(true).await,
            Err(SimError::ShutDown)
        ));
    }
}
