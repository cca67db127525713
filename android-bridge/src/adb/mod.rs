//! Devices reached through the adb server, with the `adb_client` crate.
//!
//! [`AdbTransport`] lists what the adb server sees, connects configured
//! network devices (`host:port`), asks the server to reconnect offline ones,
//! and keeps each device's availability in the [`Registry`]. Each device is
//! an [`AdbDevice`]; every action is an argv built from validated parameters
//! ([`actions`]), quoted for the device shell (`shell`), sent through the
//! adb server (`exchange`) and parsed from real Android output ([`parse`]).
//!
//! `adb_client` 3.2 lists devices and connects network ones; shell commands,
//! the call path, go through `exchange`, our own async client of the adb
//! server's protocol on tokio sockets: a call waiting on a phone is a
//! future, not a thread, and a caller that gives up closes its connection
//! at once. At most [`AdbConfig::workers_per_device`] commands per device
//! are in flight (a semaphore, not threads). Workarounds for `adb_client`
//! 3.2 (each covered by a test):
//! - Its `shell_command` blocks a thread, opens a second connection before
//!   every command to ask for the device's features, and drops the exit
//!   status it has read: `exchange` is async, asks for the features once
//!   per device and reads the exit status from the shell v2 packet.
//!   Devices without shell v2 (before Android 7) get a trailer that carries
//!   it (`shell::split_trailer`); its absence means the output was cut
//!   short.
//! - `ADBServer` runs `adb start-server` from `PATH` on every loopback
//!   request, without the configured port: we hand it a no-op program and
//!   start the server ourselves, with the right port, whenever it is needed
//!   and absent (killed, or adb installed after the daemon started), with
//!   backoff between attempts ([`AdbConfig::start_server`], `ServerStart`).
//! - The direct-TCP client spins forever when a device drops mid-command:
//!   it is not offered; every call goes through the adb server.
//! - It blocks and has no read timeouts: its few host requests (list,
//!   connect, reconnect offline: one every refresh, never one per call) run
//!   on tokio's blocking threads (`spawn_blocking`) with a timeout on the
//!   async side, and at most `MAX_HOST_REQUESTS` (4) of those threads may
//!   still be waiting on a hung server; `exchange` puts a deadline on the
//!   whole of every shell command.
//!
//! Names, the `connect` list and the refresh interval can change while the
//! transport runs ([`AdbTransport::reconfigure`],
//! [`AdbTransport::set_poll_interval`]); a device whose name changes is
//! removed from the registry and registered again under its new name.

pub mod actions;
mod exchange;
pub mod host;
pub mod parse;
mod shell;
mod sync;
pub mod ui_server;
pub mod wire;

use crate::device::{
    BoxFuture, Device, DeviceEvent, DeviceHandle, DeviceInfo, Registry, TransportKind,
};
use crate::error::BridgeError;
use adb_client::RustADBError;
use adb_client::server::{ADBServer, DeviceLong, DeviceState};
use droidwarden_services::{Command, DeviceName};
use exchange::{Dialer, ExchangeError, Protocol};
use host::HostError;
use serde_json::Value;
pub use shell::{ShellOutput, quote};
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddrV4;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;

/// This transport's name among the registry's problems.
const TRANSPORT: &str = "adb";

/// The program handed to `adb_client` as "adb": it runs it before every
/// server request on loopback, and we do not want that (see module docs).
const NO_OP_PROGRAM: &str = "true";

/// How much longer than its caller's timeout a shell exchange may run. The
/// device handle drops a call at its timeout, closing the connection, and
/// reports `timeout`; the exchange's own deadline, a little later, only
/// bounds callers without a timeout of their own.
const EXCHANGE_GRACE: Duration = Duration::from_secs(1);

/// How long one server-level request (list, connect) may take.
const SERVER_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Most `adb_client` requests whose blocking thread has not returned. The
/// client has no read timeouts: against a server that accepted the
/// connection and then hangs, its thread waits until the server closes the
/// connection, long after [`SERVER_REQUEST_TIMEOUT`] gave up on it. Past
/// this many such threads, requests are refused at once rather than adding
/// a thread every refresh. Refreshes are sequential, so in normal use one
/// request at a time is in flight.
const MAX_HOST_REQUESTS: usize = 4;

/// Settings of the ADB transport.
#[derive(Debug, Clone)]
pub struct AdbConfig {
    /// The adb server's address.
    pub server: SocketAddrV4,
    /// Network devices to connect (`adb connect`), as `host:port`.
    pub connect: Vec<String>,
    /// Names for serials; other devices are named by their serial.
    pub names: BTreeMap<String, DeviceName>,
    /// Serve only the devices named in `names`, ignoring the others the
    /// adb server lists (`[adb] only_named`): for an adb server shared with
    /// Android Studio, another program or another daemon.
    pub only_named: bool,
    /// Upper bound of every call on a device.
    pub call_timeout: Duration,
    /// How often the device list is refreshed.
    pub poll_interval: Duration,
    /// Most shell commands in flight per device, each one connection to the
    /// adb server (a semaphore: a command waiting for its turn or for the
    /// phone holds no thread). At least 1.
    pub workers_per_device: usize,
    /// Start the adb server (with the configured port) when it is not
    /// running and the address is on this machine.
    pub start_server: bool,
    /// The `adb` program used to start the server.
    pub adb_program: PathBuf,
    /// Which files of this machine `host_path` parameters may send
    /// (`[phone_services]`; by default none).
    pub host_files: droidwarden_services::HostFiles,
    /// Wake a sleeping screen before a UI action instead of answering
    /// `screen_off` (`[adb] wake_for_ui`). A lock screen still answers
    /// `locked`.
    pub wake_for_ui: bool,
    /// The uiautomator2 project's `u2.jar` on this machine: naming it is
    /// the person's consent to send it to each phone and run it there as
    /// the on-device UI server ([`ui_server`]). `None` (the default): off.
    pub ui_server_jar: Option<PathBuf>,
}

impl Default for AdbConfig {
    fn default() -> Self {
        Self {
            server: SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, 5037),
            connect: Vec::new(),
            names: BTreeMap::new(),
            only_named: false,
            call_timeout: Duration::from_secs(15),
            poll_interval: Duration::from_secs(3),
            workers_per_device: 4,
            start_server: true,
            adb_program: PathBuf::from("adb"),
            host_files: droidwarden_services::HostFiles::default(),
            wake_for_ui: false,
            ui_server_jar: None,
        }
    }
}

/// The ADB transport: discovery and availability of every device the adb
/// server sees.
#[derive(Debug)]
pub struct AdbTransport {
    /// The settings fixed for the transport's life. Its `names`, `connect`
    /// and `poll_interval` are moved into [`Live`] at construction (they are
    /// empty here) because they can change; so is `only_named`.
    config: AdbConfig,
    registry: Arc<Registry>,
    /// Devices and the settings that name and find them, under one lock so
    /// a device is always created under the name in force.
    live: Mutex<Live>,
    /// Woken when a call notices a device dropped, or the settings change,
    /// to refresh at once.
    wake: Arc<Notify>,
    /// When the adb server may be started next, and why it last could not.
    server_start: Mutex<ServerStart>,
    /// Set while the adb program cannot be found; shared with every device
    /// so that their calls say so instead of "offline".
    adb_missing: Arc<AtomicBool>,
    /// `adb_client` requests whose blocking thread has not returned yet
    /// (see [`MAX_HOST_REQUESTS`]).
    host_requests: Arc<AtomicUsize>,
    /// The adb server every device's exchanges go to (one spare connection
    /// for them all).
    dialer: Arc<Dialer>,
}

/// Attempts to start the adb server: at once the first time it is found
/// absent, then after 1 s, 2 s, 4 s … at most [`ServerStart::MAX_WAIT`]
/// apart while it keeps failing; the count starts again once the server
/// answers, so a server killed hours later is started again at once.
#[derive(Debug, Default)]
struct ServerStart {
    failures: u32,
    next: Option<std::time::Instant>,
    /// The last failure's reason, logged as a warning when it changes and
    /// at debug level while it repeats.
    last_error: Option<String>,
}

impl ServerStart {
    const MAX_WAIT: Duration = Duration::from_secs(60);

    fn due(&self, now: std::time::Instant) -> bool {
        self.next.is_none_or(|next| now >= next)
    }

    fn failed(&mut self, now: std::time::Instant, reason: &str) -> bool {
        self.failures = self.failures.saturating_add(1);
        let wait = crate::backoff::Backoff {
            first: Duration::from_secs(1),
            max: Self::MAX_WAIT,
        }
        .delay(self.failures - 1);
        self.next = Some(now + wait);
        let new = self.last_error.as_deref() != Some(reason);
        self.last_error = Some(reason.to_owned());
        new
    }

    fn answered(&mut self) {
        *self = Self::default();
    }
}

/// What [`AdbTransport::reconfigure`] and [`AdbTransport::set_poll_interval`]
/// change, with the devices they apply to. Only held for map operations,
/// never across an await.
#[derive(Debug)]
struct Live {
    devices: BTreeMap<String, Arc<AdbDevice>>,
    names: BTreeMap<String, DeviceName>,
    connect: Vec<String>,
    only_named: bool,
    poll_interval: Duration,
}

/// What a [`AdbTransport::reconfigure`] changed, by device name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reconfigured {
    /// Devices registered under a new name: (old name, new name).
    pub renamed: Vec<(DeviceName, DeviceName)>,
    /// Devices that left the registry.
    pub removed: Vec<DeviceName>,
    /// Newly named devices, registered (offline until seen).
    pub added: Vec<DeviceName>,
}

impl Reconfigured {
    /// Whether nothing changed in the registry.
    pub fn is_empty(&self) -> bool {
        self.renamed.is_empty() && self.removed.is_empty() && self.added.is_empty()
    }
}

impl AdbTransport {
    /// A transport that registers its devices in `registry`. Devices named in
    /// the configuration are registered at once, offline until seen.
    pub fn new(mut config: AdbConfig, registry: Arc<Registry>) -> Self {
        let live = Live {
            devices: BTreeMap::new(),
            names: std::mem::take(&mut config.names),
            connect: std::mem::take(&mut config.connect),
            only_named: config.only_named,
            poll_interval: config.poll_interval,
        };
        let dialer = Dialer::new(config.server);
        let transport = Self {
            config,
            registry,
            live: Mutex::new(live),
            wake: Arc::new(Notify::new()),
            server_start: Mutex::new(ServerStart::default()),
            adb_missing: Arc::new(AtomicBool::new(false)),
            host_requests: Arc::new(AtomicUsize::new(0)),
            dialer,
        };
        let named: Vec<String> = transport.live().names.keys().cloned().collect();
        for serial in named {
            transport.device_for(&serial);
        }
        transport
    }

    fn live(&self) -> std::sync::MutexGuard<'_, Live> {
        // Every critical section is a map operation that cannot leave the
        // state half-changed; a poisoned lock still holds valid maps.
        self.live.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Change the device names (serial → name), the network devices to
    /// keep connected and whether only named devices are served, while
    /// running.
    ///
    /// A device whose name changes leaves the registry under its old name
    /// (announced offline, then [`DeviceEvent::Removed`]) and is registered
    /// under the new one with its current state (announced with a
    /// [`DeviceEvent::Availability`]). A device no longer named keeps
    /// serving under its serial while the adb server lists it, and leaves
    /// the registry otherwise; with `only_named`, every device not named
    /// leaves it. A newly named serial is registered at once,
    /// offline until the adb server lists it. Calls already running on a
    /// renamed device finish on it. Targets dropped from `connect` are no
    /// longer connected but are not disconnected: the adb server is shared
    /// and something else may use them. A refresh follows at once.
    pub fn reconfigure(
        &self,
        names: BTreeMap<String, DeviceName>,
        connect: Vec<String>,
        only_named: bool,
    ) -> Reconfigured {
        let mut outcome = Reconfigured::default();
        let mut announce = Vec::new();
        {
            let mut live = self.live();
            live.names = names;
            live.connect = connect;
            live.only_named = only_named;
            let mut replaced = Vec::new();
            let serials: Vec<String> = live.devices.keys().cloned().collect();
            for serial in serials {
                let Some(device) = live.devices.get(&serial) else {
                    continue;
                };
                let by_serial = name_from_serial(&serial);
                let target = match live.names.get(&serial) {
                    Some(name) => Some(name.clone()),
                    None if only_named => None,
                    // Never named: a reload has nothing to say about it.
                    None if device.name == by_serial => continue,
                    None if device.status().listed => Some(by_serial),
                    None => None,
                };
                if target.as_ref() == Some(&device.name) {
                    continue;
                }
                if let Some(old) = live.devices.remove(&serial) {
                    let status = old.status().clone();
                    replaced.push((old, target, status));
                }
            }
            // Every old name goes first, so that two devices can swap names.
            for (old, target, _) in &replaced {
                let reason = match target {
                    Some(name) => format!("renamed to {name}"),
                    None => "removed from the configuration".to_owned(),
                };
                self.set(old, false, Some(reason), None);
                self.registry.remove(&old.name);
                if target.is_none() {
                    tracing::info!(device = %old.name, serial = %old.serial, "device removed");
                    outcome.removed.push(old.name.clone());
                }
            }
            for (old, target, status) in replaced {
                if let Some(name) = target {
                    tracing::info!(device = %name, from = %old.name, serial = %old.serial, "device renamed");
                    outcome.renamed.push((old.name.clone(), name.clone()));
                    announce.push(self.insert_device(&mut live, &old.serial, name, status));
                }
            }
            let unknown: Vec<(String, DeviceName)> = live
                .names
                .iter()
                .filter(|(serial, _)| !live.devices.contains_key(*serial))
                .map(|(serial, name)| (serial.clone(), name.clone()))
                .collect();
            for (serial, name) in unknown {
                tracing::info!(device = %name, %serial, "device added");
                outcome.added.push(name.clone());
                announce.push(self.insert_device(&mut live, &serial, name, Status::unseen()));
            }
        }
        // Outside the lock: subscribers learn the new names with their state.
        for device in announce {
            let info = device.info();
            self.registry.publish(DeviceEvent::Availability {
                device: info.name,
                online: info.online,
                detail: info.state_detail,
            });
        }
        self.wake.notify_one();
        outcome
    }

    /// Change how often the device list is refreshed; takes effect after
    /// the refresh that follows at once.
    pub fn set_poll_interval(&self, every: Duration) {
        self.live().poll_interval = every;
        self.wake.notify_one();
    }

    /// The registry the devices are in.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// Refresh once: connect configured network devices, list what the adb
    /// server sees, and update every device's availability. Returns the
    /// number of online devices.
    ///
    /// # Errors
    /// `device_offline` when the adb server cannot be reached (every device
    /// is then marked offline).
    pub async fn refresh(&self) -> Result<usize, BridgeError> {
        let listed = match self.list().await {
            Ok(listed) => listed,
            Err(e) => {
                self.mark_all_offline(&e.to_string());
                self.registry.set_problem(TRANSPORT, Some(e.clone()));
                return Err(e);
            }
        };
        self.registry.set_problem(TRANSPORT, None);
        let listed = if self.connect_missing(&listed).await {
            self.list().await?
        } else {
            listed
        };
        Ok(self.apply(&listed))
    }

    /// The adb server this transport talks to.
    pub fn server(&self) -> std::net::SocketAddrV4 {
        self.config.server
    }

    /// The `adb` program that starts the server (`[adb] program`).
    pub fn program(&self) -> &std::path::Path {
        &self.config.adb_program
    }

    /// The adb server's version (`1.0.41`), asked now (bounded like every
    /// host request).
    ///
    /// # Errors
    /// The server does not answer (`device_offline`, or `adb_missing` when
    /// the program is not installed and so no server runs).
    pub async fn server_version(&self) -> Result<String, BridgeError> {
        match self.server_request(|s| s.version()).await {
            Ok(v) => {
                // It answers: whatever the last refresh found is past.
                self.registry.set_problem(TRANSPORT, None);
                Ok(format!("{}.{}.{}", v.major, v.minor, v.revision))
            }
            Err(_) if self.adb_missing.load(Ordering::Relaxed) => Err(BridgeError::AdbMissing {
                program: self.config.adb_program.display().to_string(),
            }),
            Err(e) => Err(e),
        }
    }

    /// Keep availability fresh until `shutdown` is cancelled.
    pub async fn run(&self, shutdown: CancellationToken) {
        // A failure is a warning when it is new, and debug while it repeats
        // every poll (a missing adb must not fill the journal).
        let mut last_error: Option<String> = None;
        loop {
            match self.refresh().await {
                Ok(_) => {
                    if last_error.take().is_some() {
                        tracing::info!("the adb server answers again");
                    }
                }
                Err(e) => {
                    let text = e.to_string();
                    if last_error.as_deref() == Some(text.as_str()) {
                        tracing::debug!(error = %e, "adb refresh failed");
                    } else {
                        tracing::warn!(error = %e, "adb refresh failed");
                        last_error = Some(text);
                    }
                }
            }
            let every = self.live().poll_interval;
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(every) => {}
                () = self.wake.notified() => {}
            }
        }
    }

    async fn list(&self) -> Result<Vec<DeviceLong>, BridgeError> {
        let listed = match self.server_request(|s| s.devices_long()).await {
            Err(BridgeError::DeviceOffline { reason, .. })
                if self.may_start_server() && reason.contains("refused") =>
            {
                match self.start_server().await {
                    Ok(()) => self.server_request(|s| s.devices_long()).await,
                    Err(e) => {
                        let now = std::time::Instant::now();
                        let new = self.start_state().failed(now, &e.to_string());
                        if new {
                            tracing::warn!(error = %e, "cannot start the adb server; will try again");
                        } else {
                            tracing::debug!(error = %e, "cannot start the adb server");
                        }
                        Err(e)
                    }
                }
            }
            Err(BridgeError::DeviceOffline { reason, .. })
                if self.adb_missing.load(Ordering::Relaxed) =>
            {
                // Between attempts the cause is still the missing program.
                tracing::debug!(reason, "adb server unreachable");
                Err(BridgeError::AdbMissing {
                    program: self.config.adb_program.display().to_string(),
                })
            }
            other => other,
        };
        if listed.is_ok() {
            self.start_state().answered();
            self.adb_missing.store(false, Ordering::Relaxed);
        }
        listed
    }

    fn start_state(&self) -> std::sync::MutexGuard<'_, ServerStart> {
        self.server_start.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn may_start_server(&self) -> bool {
        self.config.start_server
            && self.config.server.ip().is_loopback()
            && self.start_state().due(std::time::Instant::now())
    }

    async fn start_server(&self) -> Result<(), BridgeError> {
        let port = self.config.server.port().to_string();
        tracing::info!(program = %self.config.adb_program.display(), port, "starting the adb server");
        let mut cmd = tokio::process::Command::new(&self.config.adb_program);
        cmd.args(["-P", &port, "start-server"])
            .env("ANDROID_ADB_SERVER_PORT", &port)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        let offline = |reason: String| BridgeError::DeviceOffline {
            device: "adb server".into(),
            reason,
        };
        match tokio::time::timeout(Duration::from_secs(20), cmd.output()).await {
            Ok(Ok(out)) if out.status.success() => {
                self.adb_missing.store(false, Ordering::Relaxed);
                Ok(())
            }
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                self.adb_missing.store(true, Ordering::Relaxed);
                Err(BridgeError::AdbMissing {
                    program: self.config.adb_program.display().to_string(),
                })
            }
            Ok(Ok(out)) => Err(offline(format!(
                "`adb start-server` failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ))),
            Ok(Err(e)) => Err(offline(format!(
                "cannot run {}: {e}",
                self.config.adb_program.display()
            ))),
            Err(_) => Err(offline(
                "`adb start-server` did not finish within 20 s".into(),
            )),
        }
    }

    /// Connect configured network devices the server does not have online.
    /// Returns whether anything was asked of the server.
    async fn connect_missing(&self, listed: &[DeviceLong]) -> bool {
        let mut asked = false;
        let mut offline_seen = false;
        let connect = self.live().connect.clone();
        for target in &connect {
            let by_name = host::is_service_name(target);
            match listed.iter().find(|d| &d.identifier == target) {
                Some(d) if d.state == DeviceState::Device => {}
                // Waiting for a person to accept the key prompt: asking the
                // server to reconnect would only show the prompt again.
                Some(d)
                    if matches!(
                        d.state,
                        DeviceState::Unauthorized | DeviceState::Authorizing
                    ) => {}
                // A phone connected by its mDNS name that stopped
                // answering has likely moved to another port (wireless
                // debugging toggled, the phone restarted): dropped and
                // connected by name again, at the address announced now.
                Some(d) if by_name && d.state == DeviceState::Offline => {
                    asked = true;
                    self.connect_by_name(target, true).await;
                }
                Some(_) => offline_seen = true,
                None if by_name => {
                    asked = true;
                    self.connect_by_name(target, false).await;
                }
                None => {
                    asked = true;
                    let Some(addr) = resolve(target).await else {
                        tracing::warn!(target, "cannot resolve the address of a device to connect");
                        continue;
                    };
                    if let Err(e) = self.server_request(move |s| s.connect_device(addr)).await {
                        tracing::debug!(target, error = %e, "adb connect failed");
                    }
                }
            }
        }
        if offline_seen {
            asked = true;
            // The server retries offline network devices by itself, slowly;
            // asking it speeds up recovery after a phone comes back.
            if let Err(e) = self.server_request(|s| s.reconnect_offline()).await {
                tracing::debug!(error = %e, "adb reconnect-offline failed");
            }
        }
        asked
    }

    /// Connect the phone whose mDNS service name is `name` (`host:connect`,
    /// which an adb server of platform-tools 30+ resolves from what it sees
    /// announced), dropping a stale connection first when `again`. Failures
    /// are logged: the next refresh tries again.
    async fn connect_by_name(&self, name: &str, again: bool) {
        let server = self.config.server;
        if again {
            tracing::info!(
                target = name,
                "a phone connected by its mDNS name is offline: connecting it again where it is announced now"
            );
            if let Err(e) = host::disconnect(server, name, SERVER_REQUEST_TIMEOUT).await {
                tracing::debug!(target = name, error = %e, "adb disconnect failed");
            }
        }
        match host::connect(server, name, SERVER_REQUEST_TIMEOUT).await {
            Ok(words) => tracing::debug!(target = name, words, "adb connect by mDNS name"),
            Err(HostError::Unsupported { .. }) => {
                tracing::debug!(
                    target = name,
                    "the adb server is too old to connect by mDNS name"
                )
            }
            Err(e) => tracing::debug!(target = name, error = %e, "adb connect by mDNS name failed"),
        }
    }

    async fn server_request<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut ADBServer) -> Result<T, RustADBError> + Send + 'static,
    ) -> Result<T, BridgeError> {
        let addr = self.config.server;
        let offline = |reason: String| BridgeError::DeviceOffline {
            device: "adb server".into(),
            reason,
        };
        let Some(slot) = HostRequest::take(&self.host_requests) else {
            return Err(offline(format!(
                "adb server at {addr}: {MAX_HOST_REQUESTS} earlier requests are still waiting for its answer"
            )));
        };
        let task = tokio::task::spawn_blocking(move || {
            let _slot = slot;
            let mut server = ADBServer::new_from_path(addr, Some(NO_OP_PROGRAM.into()));
            f(&mut server)
        });
        match tokio::time::timeout(SERVER_REQUEST_TIMEOUT, task).await {
            Ok(Ok(Ok(value))) => Ok(value),
            Ok(Ok(Err(e))) => Err(offline(format!("adb server at {addr}: {e}"))),
            Ok(Err(join)) => Err(BridgeError::Internal(join.to_string())),
            Err(_) => Err(offline(format!(
                "adb server at {addr} did not answer in time"
            ))),
        }
    }

    /// The device of `serial`, registered now if it is new; `None` for a
    /// device that is not named while only named devices are served.
    fn device_for(&self, serial: &str) -> Option<Arc<AdbDevice>> {
        let mut live = self.live();
        if let Some(d) = live.devices.get(serial) {
            return Some(Arc::clone(d));
        }
        let name = match live.names.get(serial) {
            Some(name) => name.clone(),
            None if live.only_named => return None,
            None => name_from_serial(serial),
        };
        Some(self.insert_device(&mut live, serial, name, Status::unseen()))
    }

    /// Create a device and register it (replacing any of the same name).
    fn insert_device(
        &self,
        live: &mut Live,
        serial: &str,
        name: DeviceName,
        status: Status,
    ) -> Arc<AdbDevice> {
        let device = Arc::new(AdbDevice {
            name: name.clone(),
            serial: serial.to_owned(),
            server: Arc::clone(&self.dialer),
            call_timeout: self.config.call_timeout,
            status: Mutex::new(status),
            slots: Semaphore::new(self.config.workers_per_device.max(1)),
            wake: Arc::clone(&self.wake),
            muted_levels: Mutex::new(HashMap::new()),
            ui_snapshot: Mutex::new(None),
            window_reading: Mutex::new(None),
            adb_missing: Arc::clone(&self.adb_missing),
            adb_program: self.config.adb_program.clone(),
            host_files: Arc::new(self.config.host_files.clone()),
            wake_for_ui: self.config.wake_for_ui,
            ui_server: ui_server::UiServer::new(self.config.ui_server_jar.clone()),
        });
        live.devices.insert(serial.to_owned(), Arc::clone(&device));
        self.registry.insert(DeviceHandle::new(
            Arc::clone(&device) as Arc<dyn Device>,
            self.config.call_timeout,
        ));
        device
    }

    fn known(&self) -> Vec<Arc<AdbDevice>> {
        self.live().devices.values().cloned().collect()
    }

    fn apply(&self, listed: &[DeviceLong]) -> usize {
        let mut online = 0;
        for d in listed {
            let Some(device) = self.device_for(&d.identifier) else {
                continue;
            };
            let is_online = d.state == DeviceState::Device;
            online += usize::from(is_online);
            let detail = (!is_online).then(|| describe_state(&d.state));
            let model = (!d.model.is_empty()).then(|| d.model.replace('_', " "));
            device.status().listed = true;
            self.set(&device, is_online, detail, model);
        }
        for device in self.known() {
            if !listed.iter().any(|d| d.identifier == device.serial) {
                device.status().listed = false;
                self.set(
                    &device,
                    false,
                    Some("not seen by the adb server".into()),
                    None,
                );
            }
        }
        online
    }

    fn mark_all_offline(&self, reason: &str) {
        for device in self.known() {
            self.set(&device, false, Some(reason.to_owned()), None);
        }
    }

    fn set(&self, device: &AdbDevice, online: bool, detail: Option<String>, model: Option<String>) {
        let changed = {
            let mut status = device.status();
            let changed = status.online != online;
            status.online = online;
            if !online {
                status.protocol = None;
            }
            status.detail = detail.clone();
            if model.is_some() {
                status.model = model;
            }
            changed
        };
        if changed {
            tracing::info!(device = %device.name, online, detail, "device availability changed");
            self.registry.publish(DeviceEvent::Availability {
                device: device.name.clone(),
                online,
                detail,
            });
        }
    }
}

/// One of the [`MAX_HOST_REQUESTS`] slots, given back when the blocking
/// request (or the closure that would have run it) is dropped.
#[derive(Debug)]
struct HostRequest(Arc<AtomicUsize>);

impl HostRequest {
    fn take(count: &Arc<AtomicUsize>) -> Option<Self> {
        count
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < MAX_HOST_REQUESTS).then_some(n + 1)
            })
            .ok()
            .map(|_| Self(Arc::clone(count)))
    }
}

impl Drop for HostRequest {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

async fn resolve(target: &str) -> Option<SocketAddrV4> {
    let addrs = tokio::time::timeout(SERVER_REQUEST_TIMEOUT, tokio::net::lookup_host(target))
        .await
        .ok()?
        .ok()?;
    addrs.into_iter().find_map(|a| match a {
        std::net::SocketAddr::V4(v4) => Some(v4),
        std::net::SocketAddr::V6(_) => None,
    })
}

/// A serial is usually a valid device name; anything else is made one.
fn name_from_serial(serial: &str) -> DeviceName {
    DeviceName::try_from(serial).unwrap_or_else(|_| {
        let cleaned: String = serial
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || ".-_:".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .take(64)
            .collect();
        DeviceName::try_from(format!("d{cleaned}").chars().take(64).collect::<String>())
            .unwrap_or_else(|_| DeviceName::try_from("unnamed").expect("a valid literal name"))
    })
}

fn describe_state(state: &DeviceState) -> String {
    match state {
        DeviceState::Unauthorized => {
            "unauthorized: accept the USB debugging prompt on the phone".into()
        }
        DeviceState::Authorizing => {
            "authorizing: the phone is asking whether to allow debugging; accept the prompt on it"
                .into()
        }
        DeviceState::Offline => "offline: adb sees the phone but it does not answer; unlock it, \
            then unplug and replug the cable (USB) or turn wireless debugging off and on"
            .into(),
        DeviceState::NoPerm => "no permissions: this user may not open the USB device; add a udev \
            rule for the phone and the user to the plugdev group (README, \"A real phone\")"
            .into(),
        other => format!("adb reports the device as {other}"),
    }
}

#[derive(Debug, Clone)]
struct Status {
    online: bool,
    model: Option<String>,
    detail: Option<String>,
    /// Whether the adb server's last listing had the device (in any
    /// state): such a device keeps serving under its serial when the
    /// configuration stops naming it.
    listed: bool,
    /// The shell protocol the device speaks, learned from its features at
    /// the first call and forgotten when it goes offline (the address may
    /// be another phone when it comes back).
    protocol: Option<Protocol>,
}

impl Status {
    fn unseen() -> Self {
        Self {
            online: false,
            model: None,
            detail: Some("not seen by the adb server yet".into()),
            listed: false,
            protocol: None,
        }
    }
}

/// One phone behind the adb server.
#[derive(Debug)]
pub struct AdbDevice {
    name: DeviceName,
    serial: String,
    server: Arc<Dialer>,
    call_timeout: Duration,
    /// Written by the transport's refresh and by calls that see the device
    /// drop; only held for field updates, never across an await.
    status: Mutex<Status>,
    /// One permit per shell command in flight ([`AdbConfig::workers_per_device`]).
    slots: Semaphore,
    wake: Arc<Notify>,
    /// Levels saved by `mute` for `unmute` (see `actions::mute_stream`).
    muted_levels: Mutex<HashMap<u8, i64>>,
    /// The latest `screen.ui_tree`, for `ui_control.tap {element}`.
    ui_snapshot: Mutex<Option<actions::UiSnapshot>>,
    /// The latest window reading, for the next UI action's guard.
    window_reading: Mutex<Option<actions::WindowReading>>,
    /// The transport's "adb cannot be found" flag, and the program looked for.
    adb_missing: Arc<AtomicBool>,
    adb_program: PathBuf,
    /// The transport's [`AdbConfig::host_files`].
    host_files: Arc<droidwarden_services::HostFiles>,
    /// The transport's [`AdbConfig::wake_for_ui`].
    wake_for_ui: bool,
    /// The on-device UI server of this phone.
    ui_server: ui_server::UiServer,
}

impl AdbDevice {
    /// Write one file through the device's file service (`sync:`).
    async fn push(&self, file: actions::PushFile<'_>) -> Result<actions::Pushed, BridgeError> {
        let deadline = tokio::time::Instant::now() + self.call_timeout + EXCHANGE_GRACE;
        tracing::debug!(device = %self.name, path = %file.remote, "adb sync send");
        let _slot = self.slot(deadline).await?;
        let mtime = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u32::try_from(d.as_secs()).unwrap_or(u32::MAX));
        let remote = file.remote;
        let sent = sync::send(
            &self.server,
            &self.serial,
            sync::Outgoing {
                remote,
                permissions: file.permissions,
                mtime,
                data: file.data,
                max: file.max,
                replace: file.replace,
            },
            deadline,
        )
        .await
        .map_err(|e| match e {
            ExchangeError::SyncFailed(message) => BridgeError::Device {
                message: format!("{remote}: {message}"),
                exit: None,
            },
            ExchangeError::TooLarge => BridgeError::Refused(droidwarden_services::WireError::new(
                droidwarden_services::ErrorCode::Denied,
                format!(
                    "the file grew past {} bytes while it was sent; nothing was kept",
                    file.max
                ),
            )),
            other => self.exchange_error(other),
        })?;
        Ok(match sent {
            sync::Sent::Written { bytes, replaced } => actions::Pushed::Written { bytes, replaced },
            sync::Sent::Exists(st) => actions::Pushed::Exists {
                is_dir: st.is_dir(),
            },
        })
    }

    fn status(&self) -> std::sync::MutexGuard<'_, Status> {
        self.status.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Run one device command with binary output, on the caller's task:
    /// shell protocol v2 (raw, no terminal) where the device has it, else
    /// the `exec:` service.
    async fn run_binary(&self, argv: &[&str]) -> Result<actions::BinaryOutput, BridgeError> {
        let known = self.status().protocol;
        if known != Some(Protocol::V1) {
            // The first call learns the protocol; a v1 device answers
            // through a terminal, which `parse::screencap_png` repairs.
            let (stdout, stderr, exit) = self.exchange(argv).await?;
            return Ok(actions::BinaryOutput {
                stdout,
                stderr,
                exit,
            });
        }
        let line = shell::command_line(argv);
        let deadline = tokio::time::Instant::now() + self.call_timeout + EXCHANGE_GRACE;
        tracing::debug!(device = %self.name, command = %line, "adb exec-out");
        let _slot = self.slot(deadline).await?;
        let out = exchange::exec(&self.server, &self.serial, &line, deadline)
            .await
            .map_err(|e| self.exchange_error(e))?;
        Ok(actions::BinaryOutput {
            stdout: out.stdout,
            stderr: String::new(),
            exit: 0,
        })
    }

    async fn slot(
        &self,
        deadline: tokio::time::Instant,
    ) -> Result<tokio::sync::SemaphorePermit<'_>, BridgeError> {
        match tokio::time::timeout_at(deadline, self.slots.acquire()).await {
            Ok(Ok(permit)) => Ok(permit),
            // The semaphore is never closed.
            Ok(Err(closed)) => Err(BridgeError::Internal(closed.to_string())),
            Err(_) => Err(BridgeError::Busy {
                device: self.name.to_string(),
                reason: "every adb slot of the device stayed taken".into(),
            }),
        }
    }

    /// Run one device command, on the caller's task.
    async fn run(&self, argv: &[&str]) -> Result<ShellOutput, BridgeError> {
        let (stdout, stderr, exit) = self.exchange(argv).await?;
        Ok(ShellOutput {
            stdout: utf8(stdout),
            stderr,
            exit,
        })
    }

    /// `first && then` in one exchange (see [`actions::Shell::run_then`]).
    async fn run_then(&self, first: &[&str], then: &[&str]) -> Result<ShellOutput, BridgeError> {
        let line = format!(
            "{} && {}",
            shell::command_line(first),
            shell::command_line(then)
        );
        let (stdout, stderr, exit) = self.exchange_line(line).await?;
        Ok(ShellOutput {
            stdout: utf8(stdout),
            stderr,
            exit,
        })
    }

    /// One shell exchange: stdout bytes (without the trailer), stderr, exit.
    async fn exchange(&self, argv: &[&str]) -> Result<(Vec<u8>, String, i32), BridgeError> {
        self.exchange_line(shell::command_line(argv)).await
    }

    /// [`Self::exchange`] of a quoted command line.
    async fn exchange_line(&self, line: String) -> Result<(Vec<u8>, String, i32), BridgeError> {
        let deadline = tokio::time::Instant::now() + self.call_timeout + EXCHANGE_GRACE;
        let known = self.status().protocol;
        tracing::debug!(device = %self.name, command = %line, "adb shell");
        let _slot = self.slot(deadline).await?;
        let (protocol, out) = exchange::run(&self.server, &self.serial, line, known, deadline)
            .await
            .map_err(|e| self.exchange_error(e))?;
        if known.is_none() {
            tracing::debug!(device = %self.name, ?protocol, "shell protocol");
            self.status().protocol = Some(protocol);
        }
        let (stdout, exit) = match out.exit {
            Some(exit) => (out.stdout, i32::from(exit)),
            None => shell::split_trailer_bytes(out.stdout).ok_or_else(|| {
                self.dropped("the connection closed before the command finished".into())
            })?,
        };
        Ok((stdout, utf8(out.stderr), exit))
    }

    fn exchange_error(&self, e: ExchangeError) -> BridgeError {
        match e {
            ExchangeError::Refused(msg) if msg.contains("unauthorized") => {
                BridgeError::PermissionDenied {
                    message: format!("{}: {msg}", self.name),
                }
            }
            ExchangeError::Refused(msg) => self.dropped(msg),
            ExchangeError::Io(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                self.dropped("the connection closed before the command finished".into())
            }
            ExchangeError::Io(e) => self.dropped(e.to_string()),
            e @ (ExchangeError::Protocol(_)
            | ExchangeError::TooLarge
            | ExchangeError::SyncFailed(_)) => BridgeError::Device {
                message: e.to_string(),
                exit: None,
            },
        }
    }

    /// The device stopped answering: have the transport refresh at once
    /// rather than at the next poll, so availability (and its event) follows.
    fn dropped(&self, reason: String) -> BridgeError {
        self.wake.notify_one();
        BridgeError::DeviceOffline {
            device: self.name.to_string(),
            reason,
        }
    }
}

/// `bytes` as text, without a copy when they are valid UTF-8 (as a
/// command's output almost always is); invalid sequences become U+FFFD.
fn utf8(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes)
        .unwrap_or_else(|invalid| String::from_utf8_lossy(invalid.as_bytes()).into_owned())
}

impl Device for AdbDevice {
    fn info(&self) -> DeviceInfo {
        let status = self.status();
        DeviceInfo {
            name: self.name.clone(),
            transport: TransportKind::Adb,
            online: status.online,
            serial: self.serial.clone(),
            model: status.model.clone(),
            state_detail: status.detail.clone(),
        }
    }

    fn execute<'a>(&'a self, command: &'a Command) -> BoxFuture<'a, Result<Value, BridgeError>> {
        Box::pin(actions::execute(self, command))
    }

    fn probe(&self) -> Option<BoxFuture<'_, Result<(), BridgeError>>> {
        // A shell round trip that changes nothing: the phone's adbd runs
        // commands again.
        Some(Box::pin(async move {
            actions::Shell::run(self, &["echo", "droidwarden-probe"])
                .await
                .map(|_| ())
        }))
    }

    fn offline_error(&self, info: DeviceInfo) -> BridgeError {
        if self.adb_missing.load(Ordering::Relaxed) {
            // Not "offline, try again": nothing changes until adb is installed.
            return BridgeError::AdbMissing {
                program: self.adb_program.display().to_string(),
            };
        }
        BridgeError::DeviceOffline {
            device: info.name.to_string(),
            reason: info.state_detail.unwrap_or_else(|| "not connected".into()),
        }
    }
}

impl actions::Shell for AdbDevice {
    fn device_name(&self) -> &str {
        self.name.as_str()
    }

    fn muted_levels(&self) -> &Mutex<HashMap<u8, i64>> {
        &self.muted_levels
    }

    fn run<'a>(&'a self, argv: &'a [&'a str]) -> BoxFuture<'a, Result<ShellOutput, BridgeError>> {
        Box::pin(AdbDevice::run(self, argv))
    }

    fn run_binary<'a>(
        &'a self,
        argv: &'a [&'a str],
    ) -> BoxFuture<'a, Result<actions::BinaryOutput, BridgeError>> {
        Box::pin(AdbDevice::run_binary(self, argv))
    }

    fn run_then<'a>(
        &'a self,
        first: &'a [&'a str],
        then: &'a [&'a str],
    ) -> BoxFuture<'a, Result<ShellOutput, BridgeError>> {
        Box::pin(AdbDevice::run_then(self, first, then))
    }

    fn ui_snapshot(&self) -> &Mutex<Option<actions::UiSnapshot>> {
        &self.ui_snapshot
    }

    fn window_reading(&self) -> Option<&Mutex<Option<actions::WindowReading>>> {
        Some(&self.window_reading)
    }

    fn push<'a>(
        &'a self,
        file: actions::PushFile<'a>,
    ) -> BoxFuture<'a, Result<actions::Pushed, BridgeError>> {
        Box::pin(AdbDevice::push(self, file))
    }

    fn host_files(&self) -> Option<&droidwarden_services::HostFiles> {
        Some(&self.host_files)
    }

    fn wake_for_ui(&self) -> bool {
        self.wake_for_ui
    }

    fn ui_rpc<'a>(
        &'a self,
        method: &'a str,
        params: Value,
    ) -> BoxFuture<'a, Result<Value, actions::UiRpcError>> {
        Box::pin(AdbDevice::ui_rpc(self, method, params))
    }

    fn offload<'a>(
        &'a self,
        work: Box<dyn FnOnce() -> Result<Value, BridgeError> + Send + 'static>,
    ) -> BoxFuture<'a, Result<Value, BridgeError>> {
        Box::pin(async move {
            tokio::task::spawn_blocking(work)
                .await
                .map_err(|e| BridgeError::Internal(format!("image work failed: {e}")))?
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{self, drain, name, names, renamed};

    fn transport(names: &[(&str, &str)]) -> (AdbTransport, Arc<Registry>) {
        let registry = Arc::new(Registry::new());
        let config = AdbConfig {
            names: map(names),
            ..AdbConfig::default()
        };
        (AdbTransport::new(config, Arc::clone(&registry)), registry)
    }

    fn listed(serials: &[&str]) -> Vec<DeviceLong> {
        serials
            .iter()
            .map(|s| DeviceLong {
                identifier: (*s).to_owned(),
                state: DeviceState::Device,
                usb: String::new(),
                product: String::new(),
                model: "Pixel_8".into(),
                device: String::new(),
                transport_id: 1,
            })
            .collect()
    }

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, DeviceName> {
        pairs
            .iter()
            .map(|(s, n)| ((*s).to_owned(), name(n)))
            .collect()
    }

    #[test]
    fn a_renamed_device_leaves_under_its_old_name_and_keeps_its_state() {
        let (adb, registry) = transport(&[("s1", "kitchen")]);
        adb.apply(&listed(&["s1"]));
        let mut events = registry.subscribe();
        let outcome = adb.reconfigure(map(&[("s1", "hall")]), Vec::new(), false);
        assert_eq!(outcome.renamed, vec![(name("kitchen"), name("hall"))]);
        assert_eq!(names(&registry), vec![("hall".to_owned(), true)]);
        let info = registry.get("hall").unwrap().info();
        assert_eq!(info.model.as_deref(), Some("Pixel 8"));
        assert_eq!(drain(&mut events), renamed("kitchen", "hall"));
        // The next listing keeps it online under the new name, quietly.
        adb.apply(&listed(&["s1"]));
        assert!(drain(&mut events).is_empty());
    }

    #[test]
    fn a_device_no_longer_named_stays_by_serial_while_listed_and_leaves_otherwise() {
        let (adb, registry) = transport(&[("s1", "kitchen"), ("s2", "hall")]);
        adb.apply(&listed(&["s1"]));
        let outcome = adb.reconfigure(BTreeMap::new(), Vec::new(), false);
        assert_eq!(outcome.renamed, vec![(name("kitchen"), name("s1"))]);
        assert_eq!(outcome.removed, vec![name("hall")]);
        assert_eq!(names(&registry), vec![("s1".to_owned(), true)]);
    }

    #[test]
    fn two_devices_can_swap_names() {
        let (adb, registry) = transport(&[("s1", "a"), ("s2", "b")]);
        adb.apply(&listed(&["s1", "s2"]));
        adb.reconfigure(map(&[("s1", "b"), ("s2", "a")]), Vec::new(), false);
        let serial_of = |n: &str| registry.get(n).unwrap().info().serial;
        assert_eq!(serial_of("a"), "s2");
        assert_eq!(serial_of("b"), "s1");
        assert_eq!(registry.list().len(), 2);
        assert!(registry.list().iter().all(|d| d.online));
    }

    #[test]
    fn a_newly_named_serial_is_registered_offline_and_announced() {
        let (adb, registry) = transport(&[]);
        let mut events = registry.subscribe();
        let outcome = adb.reconfigure(
            map(&[("s9", "garage")]),
            vec!["10.0.0.9:5555".into()],
            false,
        );
        assert_eq!(outcome.added, vec![name("garage")]);
        assert_eq!(names(&registry), vec![("garage".to_owned(), false)]);
        assert!(matches!(
            drain(&mut events).as_slice(),
            [DeviceEvent::Availability { online: false, .. }]
        ));
        assert_eq!(adb.live().connect, vec!["10.0.0.9:5555"]);
        adb.apply(&listed(&["s9"]));
        assert_eq!(names(&registry), vec![("garage".to_owned(), true)]);
    }

    #[test]
    fn devices_that_were_never_named_are_left_alone() {
        let (adb, registry) = transport(&[("s1", "kitchen")]);
        adb.apply(&listed(&["s1", "s2"]));
        adb.apply(&listed(&["s1"]));
        let mut events = registry.subscribe();
        let outcome = adb.reconfigure(map(&[("s1", "kitchen")]), Vec::new(), false);
        assert!(outcome.is_empty(), "{outcome:?}");
        assert!(drain(&mut events).is_empty());
        assert_eq!(
            names(&registry),
            vec![("kitchen".to_owned(), true), ("s2".to_owned(), false)]
        );
    }

    /// `only_named`: the devices of a shared adb server that are not named
    /// are never registered, and turning it on by a reload removes those
    /// that were.
    #[test]
    fn only_named_devices_are_served_when_asked() {
        let registry = Arc::new(Registry::new());
        let config = AdbConfig {
            names: map(&[("s1", "kitchen")]),
            only_named: true,
            ..AdbConfig::default()
        };
        let adb = AdbTransport::new(config, Arc::clone(&registry));
        assert_eq!(adb.apply(&listed(&["s1", "s2", "s3"])), 1);
        assert_eq!(names(&registry), vec![("kitchen".to_owned(), true)]);

        let (adb, registry) = transport(&[("s1", "kitchen")]);
        adb.apply(&listed(&["s1", "s2"]));
        assert_eq!(names(&registry).len(), 2);
        let outcome = adb.reconfigure(map(&[("s1", "kitchen")]), Vec::new(), true);
        assert_eq!(outcome.removed, vec![name("s2")]);
        assert_eq!(names(&registry), vec![("kitchen".to_owned(), true)]);
        adb.apply(&listed(&["s1", "s2"]));
        assert_eq!(names(&registry), vec![("kitchen".to_owned(), true)]);
        // Off again: the unnamed device is served under its serial.
        adb.reconfigure(map(&[("s1", "kitchen")]), Vec::new(), false);
        adb.apply(&listed(&["s1", "s2"]));
        assert_eq!(names(&registry).len(), 2);
    }

    /// `workers_per_device` caps the commands in flight on one phone; the
    /// others wait for a slot (on no thread) and then run.
    #[tokio::test]
    async fn commands_beyond_the_devices_slots_wait_for_one() {
        use std::sync::atomic::AtomicUsize;
        use tokio::io::AsyncWriteExt;

        let (listener, server) = test_support::loopback().await;
        let active = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let (count, peak) = (Arc::clone(&active), Arc::clone(&most));
        tokio::spawn(async move {
            loop {
                let (mut conn, _) = listener.accept().await.unwrap();
                let (count, peak) = (Arc::clone(&count), Arc::clone(&peak));
                tokio::spawn(async move {
                    // A command is in flight once its requests came: a
                    // connection opened ahead of need sends none yet.
                    test_support::accept_requests(&mut conn, 2).await;
                    let now = count.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    count.fetch_sub(1, Ordering::SeqCst);
                    // stdout "ok", then exit status 0.
                    conn.write_all(b"\x01\x02\0\0\0ok\x03\x01\0\0\0\0")
                        .await
                        .unwrap();
                });
            }
        });
        let registry = Arc::new(Registry::new());
        let adb = AdbTransport::new(
            AdbConfig {
                server,
                workers_per_device: 2,
                names: map(&[("emu-1", "kitchen")]),
                ..AdbConfig::default()
            },
            registry,
        );
        let device = adb.device_for("emu-1").expect("served");
        device.status().protocol = Some(Protocol::V2);
        let mut calls = tokio::task::JoinSet::new();
        for _ in 0..5 {
            let device = Arc::clone(&device);
            calls.spawn(async move { device.run(&["echo", "ok"]).await });
        }
        for out in calls.join_all().await {
            assert_eq!(out.unwrap().stdout, "ok");
        }
        assert_eq!(most.load(Ordering::SeqCst), 2);
    }

    /// A hung adb server must not cost a thread per refresh: `adb_client`
    /// cannot be interrupted, so past [`MAX_HOST_REQUESTS`] threads still
    /// waiting on it, requests are refused without a new thread; a slot
    /// comes back when its request returns.
    #[tokio::test]
    async fn threads_stuck_on_a_hung_adb_server_are_bounded() {
        let (adb, _registry) = transport(&[]);
        let held: Vec<HostRequest> = (0..MAX_HOST_REQUESTS)
            .map(|_| HostRequest::take(&adb.host_requests).expect("a free slot"))
            .collect();
        let err = adb.list().await.unwrap_err();
        assert!(
            err.to_string().contains("still waiting for its answer"),
            "{err}"
        );
        drop(held);
        assert_eq!(adb.host_requests.load(Ordering::SeqCst), 0);
        // A request that runs gives its slot back, whatever its outcome.
        let closed = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0)).unwrap();
        let std::net::SocketAddr::V4(addr) = closed.local_addr().unwrap() else {
            unreachable!("bound to IPv4")
        };
        drop(closed);
        let adb = AdbTransport::new(
            AdbConfig {
                server: addr,
                start_server: false,
                ..AdbConfig::default()
            },
            Arc::new(Registry::new()),
        );
        assert!(adb.list().await.is_err(), "nothing listens there");
        assert_eq!(adb.host_requests.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn the_poll_interval_can_change() {
        let (adb, _registry) = transport(&[]);
        adb.set_poll_interval(Duration::from_millis(250));
        assert_eq!(adb.live().poll_interval, Duration::from_millis(250));
    }
}

#[cfg(test)]
mod server_start_tests {
    use super::ServerStart;
    use std::time::{Duration, Instant};

    #[test]
    fn starts_are_retried_with_growing_gaps_and_at_once_after_the_server_answered() {
        let t0 = Instant::now();
        let mut s = ServerStart::default();
        assert!(s.due(t0), "the first start is at once");
        assert!(s.failed(t0, "adb is not installed"), "a new reason is news");
        assert!(!s.due(t0 + Duration::from_millis(999)));
        assert!(s.due(t0 + Duration::from_secs(1)));
        assert!(
            !s.failed(t0, "adb is not installed"),
            "the same reason is not"
        );
        assert!(!s.due(t0 + Duration::from_millis(1999)));
        assert!(s.due(t0 + Duration::from_secs(2)));
        for _ in 0..20 {
            s.failed(t0, "x");
        }
        assert!(s.due(t0 + ServerStart::MAX_WAIT), "the gap is capped");
        s.answered();
        assert!(s.due(t0), "a server killed later is started again at once");
    }
}
