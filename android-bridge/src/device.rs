//! The transport-neutral device abstraction.
//!
//! A transport implements [`Device`] (execute one typed command, report its
//! state). Everything that must hold for every transport lives here instead:
//! [`DeviceHandle::call`] checks the transport's capability table, refuses
//! offline devices, runs state-changing actions on one device one at a time
//! (reads run alongside) and bounds every call with a timeout. A phone
//! whose call timed out is *stalled* until a probe read answers: nothing
//! else is sent into it meanwhile (a frozen phone's adbd runs the shell
//! streams it buffered all at once when it resumes, out of order), and it
//! is announced offline, "not answering", until then. The
//! [`Registry`] names devices, selects one for a request and broadcasts
//! availability changes.

use crate::error::BridgeError;
use droidwarden_services::{Catalogue, Command, DeviceName};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;
use tokio::sync::broadcast;

/// A boxed, sendable future, so [`Device`] can be used as a trait object.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

tokio::task_local! {
    /// Set while the daemon reads a phone's state for the action it runs
    /// next on that phone ([`for_next_action`]).
    static FOR_NEXT_ACTION: ();
}

/// Runs `read` (a call on a phone) as the reading for the action the
/// caller runs next on the same phone, in the same turn: a transport may
/// keep what it read for that action's own checks, so the action costs
/// one reading (ADB keeps its `dumpsys window displays`, which names the
/// app in front and the lock state, for the UI action's lock guard). What
/// is kept serves the very next command only, and only for a moment.
pub async fn for_next_action<F: Future>(read: F) -> F::Output {
    FOR_NEXT_ACTION.scope((), read).await
}

/// Whether the running call is a [`for_next_action`] reading.
pub(crate) fn reading_for_next_action() -> bool {
    FOR_NEXT_ACTION.try_with(|()| ()).is_ok()
}

/// How a device is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TransportKind {
    /// Through the adb server.
    Adb,
    /// Over MQTT to the companion app on the phone.
    Companion,
}

/// Actions the ADB transport cannot perform, with the reason.
const ADB_UNSUPPORTED: &[(&str, &str, &str)] = &[
    (
        "location",
        "start_tracking",
        "continuous tracking needs the companion app on the phone",
    ),
    (
        "location",
        "stop_tracking",
        "continuous tracking needs the companion app on the phone",
    ),
    (
        "camera_control",
        "take_photo",
        "taking a photo needs the companion app on the phone",
    ),
    (
        "notifications",
        "open",
        "a notification's content intent is a PendingIntent only the system UI or a notification listener can send, and no adb shell command reaches it; use the companion app, or open the shade (ui_control.key notifications) and tap it",
    ),
    (
        "alerts",
        "torch",
        "the torch is an app API (CameraManager.setTorchMode) and Android's shell has no command for it (cmd media.camera has none); use the companion app",
    ),
    (
        "alerts",
        "speak",
        "text-to-speech is an app API (TextToSpeech) and no system service offers it as a shell command; use the companion app",
    ),
    (
        "alerts",
        "find_my_phone",
        "finding the phone needs speech and the torch, which only an app can use; over adb, alerts.vibrate works; use the companion app",
    ),
];

/// Actions the companion transport cannot perform: none, the app implements
/// the whole catalogue (an older app answers `unknown_action`, which callers
/// see as `unsupported_action`).
const COMPANION_UNSUPPORTED: &[(&str, &str, &str)] = &[];

impl TransportKind {
    /// The transport's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Adb => "adb",
            Self::Companion => "companion",
        }
    }

    /// Actions this transport cannot perform, with the reason. Everything
    /// else in the catalogue it can.
    fn unsupported(self) -> &'static [(&'static str, &'static str, &'static str)] {
        match self {
            Self::Adb => ADB_UNSUPPORTED,
            Self::Companion => COMPANION_UNSUPPORTED,
        }
    }

    /// Why this transport cannot perform `service.action`, if it cannot.
    pub fn unsupported_reason(self, service: &str, action: &str) -> Option<&'static str> {
        self.unsupported()
            .iter()
            .find(|(s, a, _)| *s == service && *a == action)
            .map(|(_, _, reason)| *reason)
    }

    /// The capability table: every catalogue action and whether this
    /// transport supports it.
    pub fn capabilities(self) -> Vec<Capability> {
        Catalogue::get()
            .services()
            .iter()
            .flat_map(|s| s.actions.iter().map(move |a| (s.id, a.name)))
            .map(|(service, action)| {
                let reason = self.unsupported_reason(service, action);
                Capability {
                    service,
                    action,
                    supported: reason.is_none(),
                    note: reason,
                }
            })
            .collect()
    }
}

impl fmt::Display for TransportKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One row of a transport's capability table.
#[derive(Debug, Clone, Serialize)]
pub struct Capability {
    /// The service id.
    pub service: &'static str,
    /// The action name.
    pub action: &'static str,
    /// Whether the transport can perform it.
    pub supported: bool,
    /// Why not, when it cannot.
    pub note: Option<&'static str>,
}

/// What is known about a device right now (also what the daemon's D-Bus
/// `ListDevices` and `devices --json` list, read back by its CLI).
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct DeviceInfo {
    /// The device's name (configured, or its serial).
    pub name: DeviceName,
    /// How it is reached.
    pub transport: TransportKind,
    /// Whether it can take calls now.
    pub online: bool,
    /// The transport's identifier (adb serial, companion id).
    pub serial: String,
    /// Model, when known.
    pub model: Option<String>,
    /// Why it is offline, when it is.
    pub state_detail: Option<String>,
}

/// A phone reached through one transport.
pub trait Device: Send + Sync + fmt::Debug {
    /// The device's current state.
    fn info(&self) -> DeviceInfo;

    /// Perform one command. Capability, online state, timeout and mutation
    /// ordering are handled by [`DeviceHandle`]; implementations only do the
    /// work.
    fn execute<'a>(&'a self, command: &'a Command) -> BoxFuture<'a, Result<Value, BridgeError>>;

    /// Whether the device accepts calls while offline and holds them until
    /// it returns (the companion transport's queue). When true,
    /// [`DeviceHandle::call`] does not refuse an offline device up front;
    /// the device itself decides, within the call's timeout.
    fn queues_while_offline(&self) -> bool {
        false
    }

    /// The error a call meets while the device is offline (and does not
    /// queue): `device_offline` with the transport's reason, unless the
    /// transport knows better (adb is not installed at all).
    fn offline_error(&self, info: DeviceInfo) -> BridgeError {
        BridgeError::DeviceOffline {
            device: info.name.to_string(),
            reason: info.state_detail.unwrap_or_else(|| "not connected".into()),
        }
    }

    /// A cheap read that shows the phone answers commands again, sent after
    /// a call on it timed out and before anything else is sent (see
    /// [`DeviceHandle::call`]). `None` (the default): the transport has no
    /// such read, and a timeout holds nothing back.
    fn probe(&self) -> Option<BoxFuture<'_, Result<(), BridgeError>>> {
        None
    }

    /// Perform one command once it has its [`Turn`] (for a state-changing
    /// command, the phone's one-change-at-a-time lock). The default takes
    /// the turn first, then calls [`Device::execute`]. A transport that
    /// queues calls overrides it to count and bound the wait for the turn
    /// as part of its queue, so that a call which never got its turn is
    /// reported as never sent rather than as a timeout.
    fn execute_in_turn<'a>(
        &'a self,
        command: &'a Command,
        turn: Turn<'a>,
    ) -> BoxFuture<'a, Result<Value, BridgeError>> {
        Box::pin(async move {
            let _turn = turn.take().await;
            self.execute(command).await
        })
    }
}

/// A call's right to go to the phone: for a state-changing action, the
/// device's mutation lock (one change at a time); for a read, nothing to
/// wait for.
#[derive(Debug)]
pub struct Turn<'a> {
    lock: Option<&'a tokio::sync::Mutex<()>>,
}

/// A taken [`Turn`]; the next change may go when it is dropped.
#[derive(Debug)]
pub struct TurnGuard<'a> {
    _guard: Option<tokio::sync::MutexGuard<'a, ()>>,
}

impl<'a> Turn<'a> {
    /// A turn that waits for nothing (a read).
    pub fn free() -> Self {
        Self { lock: None }
    }

    /// Whether taking this turn may wait (a state-changing action).
    pub fn is_exclusive(&self) -> bool {
        self.lock.is_some()
    }

    /// Wait for the turn, in arrival order. Not bounded here: callers
    /// bound it with their own deadline.
    pub async fn take(self) -> TurnGuard<'a> {
        TurnGuard {
            _guard: match self.lock {
                Some(lock) => Some(lock.lock().await),
                None => None,
            },
        }
    }
}

/// A cloneable handle to a device that applies the rules every transport
/// shares. Cheap to clone.
#[derive(Clone)]
pub struct DeviceHandle {
    inner: Arc<HandleInner>,
}

struct HandleInner {
    device: Arc<dyn Device>,
    /// Held while a state-changing action runs, so two changes to one phone
    /// never interleave (a volume read-modify-write, a toggle). Reads do not
    /// take it. A tokio mutex because it is held across the call's awaits.
    mutation: tokio::sync::Mutex<()>,
    timeout: Duration,
    /// A call sent to the phone timed out, and no probe has answered since:
    /// nothing more is sent until one does.
    stalled: AtomicBool,
    /// Where availability changes are announced (the registry's channel,
    /// set when the handle is inserted).
    events: OnceLock<broadcast::Sender<DeviceEvent>>,
    /// Whether the transport offers [`Device::probe`] (asked once).
    probes: bool,
}

/// The longest a probe of a stalled phone may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

impl fmt::Debug for DeviceHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceHandle")
            .field("device", &self.inner.device)
            .field("timeout", &self.inner.timeout)
            .finish()
    }
}

impl DeviceHandle {
    /// Wrap a device; every call on it is bounded by `timeout`.
    pub fn new(device: Arc<dyn Device>, timeout: Duration) -> Self {
        let probes = device.probe().is_some();
        Self {
            inner: Arc::new(HandleInner {
                probes,
                device,
                mutation: tokio::sync::Mutex::new(()),
                timeout,
                stalled: AtomicBool::new(false),
                events: OnceLock::new(),
            }),
        }
    }

    /// The device's current state (offline, "not answering", while
    /// stalled).
    pub fn info(&self) -> DeviceInfo {
        let mut info = self.inner.device.info();
        if info.online && self.inner.stalled.load(Ordering::Acquire) {
            info.online = false;
            info.state_detail = Some(STALLED.to_owned());
        }
        info
    }

    /// The per-call timeout.
    pub fn timeout(&self) -> Duration {
        self.inner.timeout
    }

    /// Perform `command` on the device.
    ///
    /// # Errors
    /// `unsupported_action` when the transport cannot do it, `device_offline`
    /// when the device is not reachable (unless it queues while offline),
    /// `timeout` when the call (including waiting behind another change to
    /// the same phone) exceeds the limit, and whatever the device reports.
    pub async fn call(&self, command: &Command) -> Result<Value, BridgeError> {
        let info = self.info();
        let service = command.service_id();
        let action = command.action_name();
        if let Some(reason) = info.transport.unsupported_reason(service, action) {
            return Err(BridgeError::Unsupported {
                device: info.name.to_string(),
                service: service.to_owned(),
                action,
                transport: info.transport.as_str(),
                reason: reason.to_owned(),
            });
        }
        let stalled = self.inner.stalled.load(Ordering::Acquire);
        if !info.online && !stalled && !self.inner.device.queues_while_offline() {
            return Err(self.inner.device.offline_error(info));
        }
        let turn = Turn {
            lock: command.mutates().then_some(&self.inner.mutation),
        };
        // Whether the call reached the phone: a timeout before that (its
        // turn behind a slow change, a probe) sent nothing.
        let sent = AtomicBool::new(false);
        let work = async {
            if !self.inner.probes {
                sent.store(true, Ordering::Release);
                return self.inner.device.execute_in_turn(command, turn).await;
            }
            let _turn = turn.take().await;
            // Checked once the turn is ours: a change that waited behind
            // the one that timed out must not follow it into the phone.
            self.unstall(&info).await?;
            sent.store(true, Ordering::Release);
            self.inner.device.execute(command).await
        };
        match tokio::time::timeout(self.inner.timeout, work).await {
            Ok(result) => result,
            Err(_) if !sent.load(Ordering::Acquire) => Err(BridgeError::Busy {
                device: info.name.to_string(),
                reason: format!(
                    "{service}.{action} did not get its turn within {} ms; it was not sent",
                    self.inner.timeout.as_millis()
                ),
            }),
            Err(_) => {
                if self.inner.probes && !self.inner.stalled.swap(true, Ordering::AcqRel) {
                    tracing::warn!(
                        device = %info.name,
                        what = %format_args!("{service}.{action}"),
                        "a command timed out; nothing more is sent to this phone until it answers a check"
                    );
                    self.announce(&info, false, Some(STALLED.to_owned()));
                }
                Err(BridgeError::Timeout {
                    device: info.name.to_string(),
                    what: format!("{service}.{action}"),
                    after: self.inner.timeout,
                })
            }
        }
    }

    /// Before sending anything to a stalled phone: a probe read. It
    /// answers: the phone is back (announced online). It does not: the
    /// call is refused, not sent.
    async fn unstall(&self, info: &DeviceInfo) -> Result<(), BridgeError> {
        if !self.inner.stalled.load(Ordering::Acquire) {
            return Ok(());
        }
        let Some(probe) = self.inner.device.probe() else {
            return Ok(());
        };
        let limit = PROBE_TIMEOUT.min(self.inner.timeout);
        match tokio::time::timeout(limit, probe).await {
            Ok(Ok(())) => {
                if self.inner.stalled.swap(false, Ordering::AcqRel) {
                    tracing::info!(device = %info.name, "the phone answers again");
                    let now = self.inner.device.info();
                    self.announce(&now, now.online, now.state_detail.clone());
                }
                Ok(())
            }
            // The transport knows better (unplugged, adb gone): its word.
            Ok(Err(e @ (BridgeError::DeviceOffline { .. } | BridgeError::AdbMissing { .. }))) => {
                Err(e)
            }
            _ => Err(BridgeError::DeviceOffline {
                device: info.name.to_string(),
                reason: format!(
                    "{STALLED}: an earlier command timed out and a check did not answer within {} ms; nothing was sent",
                    limit.as_millis()
                ),
            }),
        }
    }

    fn announce(&self, info: &DeviceInfo, online: bool, detail: Option<String>) {
        if let Some(events) = self.inner.events.get() {
            let _ = events.send(DeviceEvent::Availability {
                device: info.name.clone(),
                online,
                detail,
            });
        }
    }
}

/// Why a stalled phone is offline.
const STALLED: &str = "not answering";

/// A change in a device's availability.
#[derive(Debug, Clone, PartialEq)]
pub enum DeviceEvent {
    /// The device came online or went offline.
    Availability {
        /// The device.
        device: DeviceName,
        /// Whether it is online now.
        online: bool,
        /// Why it went offline, when it did.
        detail: Option<String>,
    },
    /// The device is no longer known (removed from the configuration).
    Removed {
        /// The device.
        device: DeviceName,
    },
}

/// Every known device, by name.
#[derive(Debug)]
pub struct Registry {
    devices: RwLock<BTreeMap<DeviceName, DeviceHandle>>,
    events: broadcast::Sender<DeviceEvent>,
    /// Why a transport reaches no phone now, by transport (`adb`: the
    /// program is missing, the server does not answer), as it last said.
    problems: RwLock<BTreeMap<&'static str, BridgeError>>,
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        // Availability changes are rare; 256 buffered events cover a burst
        // of every phone flapping at once. A lagging subscriber is told how
        // many it missed and re-reads the registry.
        let (events, _) = broadcast::channel(256);
        Self {
            devices: RwLock::new(BTreeMap::new()),
            events,
            problems: RwLock::new(BTreeMap::new()),
        }
    }

    /// What keeps `transport` from reaching any phone now (`None`: nothing,
    /// it answers). A call that finds no device then gets this error
    /// rather than "no device is online": `adb_missing`, with its advice.
    pub fn set_problem(&self, transport: &'static str, problem: Option<BridgeError>) {
        let mut problems = self.problems.write().unwrap_or_else(|e| e.into_inner());
        match problem {
            Some(problem) => problems.insert(transport, problem),
            None => problems.remove(transport),
        };
    }

    /// Every transport's current problem, by transport.
    pub fn problems(&self) -> Vec<(&'static str, BridgeError)> {
        self.problems
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(t, e)| (*t, e.clone()))
            .collect()
    }

    /// The error that says why no device answers, when a transport has one.
    fn why_none(&self) -> Option<BridgeError> {
        self.problems
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .next()
            .cloned()
    }

    /// Subscribe to availability changes.
    pub fn subscribe(&self) -> broadcast::Receiver<DeviceEvent> {
        self.events.subscribe()
    }

    /// Announce a change (transports call this).
    pub fn publish(&self, event: DeviceEvent) {
        // No subscriber is not an error: the CLI has none.
        let _ = self.events.send(event);
    }

    /// Add or replace a device.
    pub fn insert(&self, handle: DeviceHandle) {
        let _ = handle.inner.events.set(self.events.clone());
        let name = handle.info().name;
        self.write().insert(name, handle);
    }

    /// Remove a device and announce it.
    pub fn remove(&self, name: &DeviceName) -> Option<DeviceHandle> {
        let removed = self.write().remove(name);
        if removed.is_some() {
            self.publish(DeviceEvent::Removed {
                device: name.clone(),
            });
        }
        removed
    }

    /// The device of that name.
    pub fn get(&self, name: &str) -> Option<DeviceHandle> {
        let name = DeviceName::try_from(name).ok()?;
        self.read().get(&name).cloned()
    }

    /// Every device's state, sorted by name.
    pub fn list(&self) -> Vec<DeviceInfo> {
        self.read().values().map(DeviceHandle::info).collect()
    }

    /// Pick the device for a request: the named one, or the only online one.
    ///
    /// # Errors
    /// `device_not_found` for an unknown name or when none is online;
    /// `device_ambiguous` when no name was given and several are online.
    pub fn select(&self, name: Option<&str>) -> Result<DeviceHandle, BridgeError> {
        let devices = self.read();
        let known = || devices.keys().map(ToString::to_string).collect::<Vec<_>>();
        if let Some(name) = name {
            return DeviceName::try_from(name)
                .ok()
                .and_then(|n| devices.get(&n).cloned())
                .ok_or_else(|| {
                    // A phone not seen yet, while a transport reaches none:
                    // that is the reason to give.
                    self.why_none()
                        .unwrap_or_else(|| BridgeError::DeviceNotFound {
                            name: name.chars().take(80).collect(),
                            known: known(),
                        })
                });
        }
        let online: Vec<&DeviceHandle> = devices.values().filter(|d| d.info().online).collect();
        match online.as_slice() {
            [one] => Ok((*one).clone()),
            [] => Err(self
                .why_none()
                .unwrap_or_else(|| BridgeError::NoDeviceOnline { known: known() })),
            many => Err(BridgeError::DeviceAmbiguous {
                online: many.iter().map(|d| d.info().name.to_string()).collect(),
            }),
        }
    }

    // The lock is only held for map operations, never across an await, so a
    // std RwLock is the right tool; a poisoned lock still holds a valid map.
    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<DeviceName, DeviceHandle>> {
        self.devices.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<DeviceName, DeviceHandle>> {
        self.devices.write().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::FakePhone;
    use droidwarden_services::Catalogue;
    use serde_json::json;

    fn cmd(service: &str, action: &str, params: Value) -> Command {
        Catalogue::get().parse(service, action, &params).unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn mutations_on_one_device_run_one_at_a_time_reads_alongside() {
        let dev = FakePhone::new("p", Duration::from_millis(100));
        let handle = DeviceHandle::new(dev.clone(), Duration::from_secs(10));
        let set = cmd("screen_control", "set_brightness", json!({"level": 5}));
        let (a, b) = tokio::join!(handle.call(&set), handle.call(&set));
        a.unwrap();
        b.unwrap();
        assert_eq!(dev.max_running(), 1);

        let read = cmd("battery", "status", json!({}));
        let (a, b, c) = tokio::join!(handle.call(&read), handle.call(&read), handle.call(&set));
        a.unwrap();
        b.unwrap();
        c.unwrap();
        assert_eq!(dev.max_running(), 3);
    }

    /// After a timeout nothing more goes into the phone until a probe read
    /// answers: a change that waited behind the timed-out one is refused
    /// unsent while the phone stays frozen, the phone is announced
    /// offline and back, and the next change goes once it answers.
    #[tokio::test(start_paused = true)]
    async fn a_phone_whose_call_timed_out_gets_nothing_more_until_a_probe_answers() {
        let registry = Registry::new();
        let mut events = registry.subscribe();
        let dev = FakePhone::new("p", Duration::from_millis(10));
        dev.set_probes(true);
        registry.insert(DeviceHandle::new(dev.clone(), Duration::from_secs(10)));
        let handle = registry.get("p").unwrap();
        let set = |level: i64| cmd("screen_control", "set_brightness", json!({"level": level}));
        dev.set_frozen(true);
        let code = |r: Result<Value, BridgeError>| r.unwrap_err().code();
        assert_eq!(
            code(handle.call(&set(1)).await),
            droidwarden_services::ErrorCode::Timeout
        );
        assert!(!handle.info().online);
        assert_eq!(
            events.try_recv().unwrap(),
            DeviceEvent::Availability {
                device: DeviceName::try_from("p").unwrap(),
                online: false,
                detail: Some(STALLED.to_owned())
            }
        );
        // Still frozen: the probe does not answer, so the next change is
        // refused unsent.
        let second = handle.call(&set(2)).await.unwrap_err();
        assert_eq!(
            second.code(),
            droidwarden_services::ErrorCode::DeviceOffline,
            "{second}"
        );
        assert!(second.to_string().contains("nothing was sent"), "{second}");
        // The phone resumes: the next change probes, the probe answers,
        // and it goes (the timed-out change was dropped unsent here; on a
        // real phone adbd may still run it, which is why nothing followed it).
        dev.set_frozen(false);
        handle.call(&set(3)).await.unwrap();
        assert!(handle.info().online);
        assert!(matches!(
            events.try_recv().unwrap(),
            DeviceEvent::Availability { online: true, .. }
        ));
        let log = dev.log();
        assert_eq!(
            log,
            ["probe", "screen_control.set_brightness"],
            "only the third change was sent after the freeze"
        );
    }

    /// A change whose time runs out while it waits for its turn behind a
    /// slow change was never sent: `busy`, not a `timeout` that may have
    /// run.
    #[tokio::test(start_paused = true)]
    async fn a_change_that_never_got_its_turn_is_busy_not_timed_out() {
        let dev = FakePhone::new("p", Duration::from_millis(900));
        dev.set_probes(true);
        let handle = DeviceHandle::new(dev.clone(), Duration::from_secs(1));
        let set = cmd("screen_control", "set_brightness", json!({"level": 5}));
        let (a, b) = tokio::join!(handle.call(&set), async {
            tokio::time::sleep(Duration::from_millis(500)).await;
            handle.call(&set).await
        });
        a.unwrap();
        let b = b.unwrap_err();
        // 500 ms in, it waited 400 ms for the turn and then ran 900 ms:
        // past its 1 s bound while running, so that one is a timeout…
        assert_eq!(b.code(), droidwarden_services::ErrorCode::Timeout, "{b}");
        // … but one that runs out before its turn comes (here: behind a
        // change that timed out on a frozen phone, and a probe that does
        // not answer) was never sent: busy.
        let slow = FakePhone::new("q", Duration::from_millis(3_000));
        slow.set_probes(true);
        slow.set_frozen(true);
        let handle = DeviceHandle::new(slow.clone(), Duration::from_secs(1));
        let (a, b) = tokio::join!(handle.call(&set), async {
            tokio::time::sleep(Duration::from_millis(10)).await;
            handle.call(&set).await
        });
        assert_eq!(
            a.unwrap_err().code(),
            droidwarden_services::ErrorCode::Timeout
        );
        let b = b.unwrap_err();
        assert_eq!(b.code(), droidwarden_services::ErrorCode::Busy, "{b}");
        assert!(b.to_string().contains("it was not sent"), "{b}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_call_times_out() {
        let handle = DeviceHandle::new(
            FakePhone::new("p", Duration::from_millis(5_000)),
            Duration::from_secs(1),
        );
        let err = handle
            .call(&cmd("battery", "status", json!({})))
            .await
            .unwrap_err();
        assert_eq!(err.code(), droidwarden_services::ErrorCode::Timeout);
        assert!(err.retryable());
    }

    #[tokio::test]
    async fn offline_and_unsupported_are_refused_before_the_device_is_touched() {
        let dev = FakePhone::new("p", Duration::from_millis(0));
        let handle = DeviceHandle::new(dev.clone(), Duration::from_secs(1));
        let err = handle
            .call(&cmd("camera_control", "take_photo", json!({})))
            .await
            .unwrap_err();
        assert_eq!(
            err.code(),
            droidwarden_services::ErrorCode::UnsupportedAction
        );
        dev.set_online(false);
        let err = handle
            .call(&cmd("battery", "status", json!({})))
            .await
            .unwrap_err();
        assert_eq!(err.code(), droidwarden_services::ErrorCode::DeviceOffline);
        assert!(dev.log().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_device_that_queues_while_offline_is_called_and_still_bounded_by_the_timeout() {
        let dev = FakePhone::new("p", Duration::from_millis(0));
        dev.set_online(false);
        dev.set_queues_while_offline(true);
        let handle = DeviceHandle::new(dev.clone(), Duration::from_secs(1));
        handle
            .call(&cmd("battery", "status", json!({})))
            .await
            .unwrap();
        assert_eq!(dev.log(), ["battery.status"]);

        let slow = FakePhone::new("q", Duration::from_millis(5_000));
        slow.set_online(false);
        slow.set_queues_while_offline(true);
        let handle = DeviceHandle::new(slow, Duration::from_secs(1));
        let err = handle
            .call(&cmd("battery", "status", json!({})))
            .await
            .unwrap_err();
        assert_eq!(err.code(), droidwarden_services::ErrorCode::Timeout);
    }

    #[test]
    fn selection_needs_a_name_only_when_ambiguous() {
        use droidwarden_services::ErrorCode;
        let reg = Registry::new();
        assert_eq!(
            reg.select(None).unwrap_err().code(),
            ErrorCode::DeviceNotFound
        );
        let a = FakePhone::new("a", Duration::from_millis(0));
        reg.insert(DeviceHandle::new(a.clone(), Duration::from_secs(1)));
        assert_eq!(reg.select(None).unwrap().info().serial, "a");
        let b = FakePhone::new("b", Duration::from_millis(0));
        reg.insert(DeviceHandle::new(b, Duration::from_secs(1)));
        assert_eq!(
            reg.select(None).unwrap_err().code(),
            ErrorCode::DeviceAmbiguous
        );
        assert_eq!(reg.select(Some("b")).unwrap().info().serial, "b");
        let err = reg.select(Some("c")).unwrap_err();
        assert_eq!(err.code(), ErrorCode::DeviceNotFound);
        assert!(err.to_string().contains("a, b"), "{err}");
        a.set_online(false);
        assert_eq!(reg.select(None).unwrap().info().serial, "b");
    }

    /// While a transport reaches no phone, a call that finds none is told
    /// why (adb missing, with its advice), not "no device is online".
    #[test]
    fn a_transport_problem_is_the_reason_no_device_answers() {
        use droidwarden_services::ErrorCode;
        let reg = Registry::new();
        let missing = BridgeError::AdbMissing {
            program: "adb".into(),
        };
        reg.set_problem("adb", Some(missing));
        assert_eq!(reg.select(None).unwrap_err().code(), ErrorCode::AdbMissing);
        assert_eq!(
            reg.select(Some("phone")).unwrap_err().code(),
            ErrorCode::AdbMissing
        );
        assert_eq!(reg.problems().len(), 1);
        // A phone online elsewhere (a companion) still answers.
        let a = FakePhone::new("a", Duration::ZERO);
        reg.insert(DeviceHandle::new(a.clone(), Duration::from_secs(1)));
        assert_eq!(reg.select(None).unwrap().info().serial, "a");
        // Fixed: the usual answers again.
        reg.set_problem("adb", None);
        a.set_online(false);
        assert_eq!(
            reg.select(None).unwrap_err().code(),
            ErrorCode::DeviceNotFound
        );
        assert!(reg.problems().is_empty());
    }

    #[test]
    fn the_capability_table_covers_the_whole_catalogue() {
        let table = TransportKind::Adb.capabilities();
        let total: usize = Catalogue::get()
            .services()
            .iter()
            .map(|s| s.actions.len())
            .sum();
        assert_eq!(table.len(), total);
        assert!(table.iter().any(|c| !c.supported && c.note.is_some()));
        assert!(
            TransportKind::Companion
                .capabilities()
                .iter()
                .all(|c| c.supported)
        );
    }
}
