//! Phones reached through the droidwarden companion app, which speaks the
//! JSON protocol of `docs/companion-protocol.md` over MQTT.
//!
//! This module owns the protocol, not the connection: the daemon owns the
//! MQTT client, knows the topic prefix and feeds what arrives into the
//! [`CompanionHub`] (`on_presence`, `on_response`, `on_event`); the hub hands
//! back the requests to publish through a bounded channel of [`Outgoing`].
//! So the hub does no I/O and spawns nothing: every request is driven by the
//! caller's own future ([`DeviceHandle::call`]).
//!
//! Each companion id is a device in the shared [`Registry`]. A call on it:
//! 1. waits, if the phone is offline, in a bounded queue for up to
//!    [`CompanionConfig::queue_ttl`] (then `device_offline`); the
//!    [`Device::queues_while_offline`] flag tells [`DeviceHandle`] not to
//!    refuse it up front;
//! 2. hands the request to the daemon, opening it in the pending table
//!    (`pending.rs`, a state machine without I/O) with an answer deadline of
//!    [`CompanionConfig::request_timeout`];
//! 3. takes the first response in time with that id from that phone, checks
//!    a result against the catalogue's result schema (a mismatch is
//!    `unexpected output`) and maps a phone error to
//!    [`BridgeError::Companion`]. Duplicate, late, foreign and malformed
//!    responses are logged and ignored.
//!
//! A request already sent stays open when the phone drops: it may still be
//! performed (the broker can deliver it later), so the call waits for its
//! answer until its deadline rather than guessing.
//!
//! The configured names can change while running
//! ([`CompanionHub::set_names`]); a renamed phone keeps its presence.

mod pending;
mod protocol;
#[cfg(test)]
mod tests;

pub use pending::ResponseDisposition;
pub use protocol::{
    EventKind, MAX_PAYLOAD, PROTOCOL_VERSION, Reply, Request, Unreadable, decode_request,
    decode_response, encode_request, encode_response, presence_from_payload,
};

use crate::device::{
    BoxFuture, Device, DeviceEvent, DeviceHandle, DeviceInfo, Registry, TransportKind, Turn,
};
use crate::error::BridgeError;
use droidwarden_services::time::epoch_ms;
use droidwarden_services::{Command, DeviceName};
use pending::Pending;
use protocol::clip;
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};
use tokio::sync::{broadcast, mpsc, watch};
use tokio::time::Instant;

/// How many calls one phone may have waiting unsent — for the phone to come
/// back online, or behind earlier changes to it (one change at a time);
/// further calls fail at once (`device_offline` when the phone is offline,
/// `busy` when it is online) instead of piling up behind a phone that may
/// not come back.
const QUEUE_LIMIT: usize = 64;

/// The request channel's capacity. A request is small (under 1 KiB) and the
/// daemon only has to publish it, so a full channel means the MQTT side is
/// stuck; 64 covers a burst of concurrent calls to every phone, and beyond
/// it callers wait (each bounded by its own deadline) instead of memory
/// growing without limit.
const OUTGOING_CAPACITY: usize = 64;

/// Event subscribers that fall this far behind are told how many they
/// missed. Battery and Wi-Fi events are rare, location at most every 10 s
/// per phone; 1024 covers a burst of notifications from every phone.
const EVENT_CAPACITY: usize = 1024;

/// Added to `queue_ttl + request_timeout` for the device handle's overall
/// timeout, so the hub's own, more precise errors (`device_offline` after
/// the queue, `timeout` after the answer deadline) fire first.
const HANDLE_MARGIN: Duration = Duration::from_secs(1);

/// The device handle's overall bound on one call: the longest a call can
/// wait unsent (`max(queue_ttl, request_timeout)`), then the answer
/// deadline, plus one second. The companion's own errors always
/// come first; this only catches a bug.
pub fn handle_timeout(config: &CompanionConfig) -> Duration {
    config.queue_ttl.max(config.request_timeout) + config.request_timeout + HANDLE_MARGIN
}

/// The shortest time between two warnings about ignored presences; the
/// ones in between are counted and reported with the next.
pub const WARN_EVERY: Duration = Duration::from_secs(10);

/// A warning that is logged at most once per [`WARN_EVERY`], with the number
/// of occurrences it stood for. Costs the same whatever the flood.
#[derive(Debug, Default)]
struct RateLimited {
    last: Mutex<Option<Instant>>,
    suppressed: AtomicU64,
}

impl RateLimited {
    /// `Some(n)` when a warning is due now, `n` being the occurrences since
    /// the last one (this one included); `None` when it is suppressed.
    fn due(&self, now: Instant) -> Option<u64> {
        let mut last = lock(&self.last);
        if last.is_some_and(|at| now.saturating_duration_since(at) < WARN_EVERY) {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        *last = Some(now);
        Some(self.suppressed.swap(0, Ordering::Relaxed) + 1)
    }
}

/// Settings of the companion transport.
///
/// A call waits at most `queue_ttl` for an offline phone (and at most
/// `max(queue_ttl, request_timeout)` for its turn behind earlier changes),
/// then at most `request_timeout` for the answer once the request is handed
/// over; see [`handle_timeout`].
#[derive(Debug, Clone)]
pub struct CompanionConfig {
    /// How long the phone has to answer a request once it is sent.
    pub request_timeout: Duration,
    /// How long a request waits for an offline phone to come back.
    pub queue_ttl: Duration,
    /// Whether an unknown companion id that announces itself becomes a
    /// device named by its id; when false such phones are ignored.
    pub auto_register: bool,
    /// With `auto_register`, the most devices registered that way; further
    /// unknown ids are ignored (with a warning at most every
    /// [`WARN_EVERY`]), so a flood of made-up presences cannot grow the
    /// registry, the Home Assistant entities or memory.
    pub max_auto_devices: usize,
    /// Device names for companion ids. These are registered (offline) at
    /// once, so calls queue for them before the phone is first seen.
    pub names: BTreeMap<String, DeviceName>,
}

/// A request the daemon must publish, QoS 1, on the companion's request
/// topic (`<prefix>/companion/<companion_id>/request`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outgoing {
    /// The companion id (the topic level).
    pub companion_id: String,
    /// The JSON request.
    pub payload: Vec<u8>,
}

/// An event a phone pushed, checked against its kind's schema.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompanionEvent {
    /// The device it came from.
    pub device: DeviceName,
    /// The companion id.
    pub companion_id: String,
    /// What happened.
    pub kind: EventKind,
    /// The body: for state events, the shape of the matching action's result
    /// (see [`EventKind::service`]).
    pub data: Value,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section is a short map operation that cannot leave the
    // data half-changed; a poisoned lock still holds a valid table.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What every companion device shares with the hub.
#[derive(Debug)]
struct Shared {
    config: CompanionConfig,
    outgoing: mpsc::Sender<Outgoing>,
    pending: Mutex<Pending>,
    /// Distinguishes this hub's request ids from a previous run's, so a
    /// late answer to a request sent before a restart is never taken for a
    /// new one.
    instance: u64,
    next_id: AtomicU64,
}

impl Shared {
    fn new_id(&self) -> String {
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        format!("{:x}-{n}", self.instance)
    }
}

/// One phone with the companion app.
struct CompanionDevice {
    name: DeviceName,
    companion_id: String,
    shared: Arc<Shared>,
    /// Whether the phone is online; calls waiting in the queue watch it.
    /// Shared with the device that replaces this one when the phone is
    /// renamed, so calls queued under the old name still go out when the
    /// phone comes back.
    online: Arc<watch::Sender<bool>>,
    /// Why it is offline, for [`DeviceInfo::state_detail`].
    detail: Mutex<Option<String>>,
    /// Calls not sent yet: waiting for the phone to come back or for their
    /// turn behind earlier changes.
    queued: AtomicUsize,
    /// Registered by `auto_register` (counts against `max_auto_devices`).
    auto: bool,
}

impl fmt::Debug for CompanionDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompanionDevice")
            .field("name", &self.name)
            .field("companion_id", &self.companion_id)
            .field("online", &*self.online.borrow())
            .finish()
    }
}

/// Removes a request from the pending table when its call stops waiting,
/// however it stops (answer, timeout, or the caller dropping the future).
struct Abandon<'a> {
    shared: &'a Shared,
    id: &'a str,
}

impl Drop for Abandon<'_> {
    fn drop(&mut self) {
        lock(&self.shared.pending).abandon(self.id);
    }
}

/// Counts a call in the offline queue while it waits.
struct QueueSlot<'a>(&'a AtomicUsize);

impl Drop for QueueSlot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl CompanionDevice {
    fn offline(&self, reason: impl Into<String>) -> BridgeError {
        BridgeError::DeviceOffline {
            device: self.name.to_string(),
            reason: reason.into(),
        }
    }

    fn busy(&self, reason: impl Into<String>) -> BridgeError {
        BridgeError::Busy {
            device: self.name.to_string(),
            reason: reason.into(),
        }
    }

    fn is_online(&self) -> bool {
        *self.online.borrow()
    }

    /// Count a call in this phone's queue of unsent calls, or refuse it
    /// when [`QUEUE_LIMIT`] are already waiting (changes behind the phone's
    /// one-change-at-a-time turn included).
    fn enter_queue(&self) -> Result<QueueSlot<'_>, BridgeError> {
        let waiting = self.queued.fetch_add(1, Ordering::SeqCst);
        let slot = QueueSlot(&self.queued);
        if waiting >= QUEUE_LIMIT {
            let why = format!(
                "{QUEUE_LIMIT} requests are already queued for it; this one was refused and not sent"
            );
            return Err(if self.is_online() {
                self.busy(why)
            } else {
                self.offline(format!("the companion app is offline and {why}"))
            });
        }
        Ok(slot)
    }

    /// The error of a call that was still unsent at its queue deadline: it
    /// never reached the phone, so it did not run.
    fn not_sent(&self, waited: Duration, behind_changes: bool) -> BridgeError {
        let ms = waited.as_millis();
        if !self.is_online() {
            self.offline(format!(
                "the companion app stayed offline; the request waited {ms} ms in the queue and was not sent (it did not run)"
            ))
        } else if behind_changes {
            self.busy(format!(
                "the request waited {ms} ms behind earlier changes to this phone and was not sent (it did not run)"
            ))
        } else {
            self.offline(format!(
                "the request waited {ms} ms in the queue and was not sent (it did not run)"
            ))
        }
    }

    /// Wait until the phone is online, at most until `deadline`.
    async fn wait_online(&self, deadline: Instant, started: Instant) -> Result<(), BridgeError> {
        let mut online = self.online.subscribe();
        if *online.borrow_and_update() {
            return Ok(());
        }
        match tokio::time::timeout_at(deadline, online.wait_for(|on| *on)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(_)) => Err(self.offline("the companion transport stopped")),
            Err(_) => Err(self.not_sent(started.elapsed(), false)),
        }
    }

    /// One call, from the queue to the answer. Until it is handed over for
    /// publishing, the call is *queued*: it counts against [`QUEUE_LIMIT`],
    /// waits for its turn (changes go one at a time) at most until
    /// `max(queue_ttl, request_timeout)` after it started and for the phone
    /// at most until `queue_ttl` after it started, and fails as never sent
    /// (`device_offline`, or `busy` when the phone is online and earlier
    /// changes held it up). Once handed over it may reach the phone, so
    /// only then can it end in `timeout`. The whole call therefore lasts at
    /// most `max(queue_ttl, request_timeout) + request_timeout`, which the
    /// device handle's own timeout exceeds.
    async fn run(&self, command: &Command, turn: Turn<'_>) -> Result<Value, BridgeError> {
        let service = command.service_id();
        let action = command.action_name();
        if names_host_file(command) {
            return Err(BridgeError::Refused(droidwarden_services::WireError::new(
                droidwarden_services::ErrorCode::UnsupportedAction,
                format!(
                    "{}: files of the daemon's machine (host_path) are not sent to companion phones; give the content in the parameters (files.push text or content_base64), or install over adb",
                    self.name
                ),
            )));
        }
        let what = format!("{service}.{action}");
        let id = self.shared.new_id();
        let reply = lock(&self.shared.pending).open(id.clone(), &self.companion_id);
        let _abandon = Abandon {
            shared: &self.shared,
            id: &id,
        };
        let started = Instant::now();
        let config = &self.shared.config;
        let queue = self.enter_queue()?;
        let exclusive = turn.is_exclusive();
        let turn_deadline = started + config.queue_ttl.max(config.request_timeout);
        let Ok(_turn) = tokio::time::timeout_at(turn_deadline, turn.take()).await else {
            return Err(self.not_sent(started.elapsed(), exclusive));
        };
        self.wait_online(started + config.queue_ttl, started)
            .await?;
        drop(queue);

        let timeout = self.shared.config.request_timeout;
        let deadline = Instant::now() + timeout;
        let payload = protocol::encode_request(&id, command, epoch_ms(SystemTime::now() + timeout));
        if payload.len() > MAX_REQUEST_BYTES {
            // The daemon's MQTT client sends at most 1 MiB per message.
            return Err(BridgeError::Refused(droidwarden_services::WireError::new(
                droidwarden_services::ErrorCode::Denied,
                format!(
                    "{what}: the request has {} bytes; a companion phone takes at most {MAX_REQUEST_BYTES} per message (send less content)",
                    payload.len()
                ),
            )));
        }
        let timed_out = || BridgeError::Timeout {
            device: self.name.to_string(),
            what: what.clone(),
            after: timeout,
        };
        lock(&self.shared.pending).sent(&id, deadline);
        let outgoing = Outgoing {
            companion_id: self.companion_id.clone(),
            payload,
        };
        match tokio::time::timeout_at(deadline, self.shared.outgoing.send(outgoing)).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return Err(self.offline("the companion transport stopped")),
            // The daemon's MQTT side never took it: not sent, did not run.
            Err(_) => {
                return Err(self.busy(format!(
                    "the daemon's MQTT side did not take the request within {} ms; it was not sent (it did not run)",
                    timeout.as_millis()
                )));
            }
        }
        tracing::debug!(device = %self.name, %id, %what, "companion request handed over");

        let reply = match tokio::time::timeout_at(deadline, reply).await {
            Ok(Ok(reply)) => reply,
            // Closed: the table judged an answer late and dropped the sender.
            Ok(Err(_)) | Err(_) => return Err(timed_out()),
        };
        match reply {
            Reply::Ok(result) => {
                command.spec().result.validate(&result).map_err(|v| {
                    BridgeError::UnexpectedOutput {
                        command: format!("companion {what}"),
                        detail: format!(
                            "the result does not match the catalogue at {:?}: {}",
                            v.path, v.reason
                        ),
                    }
                })?;
                Ok(result)
            }
            Reply::Err(error) => Err(BridgeError::Companion {
                device: self.name.to_string(),
                error,
            }),
            Reply::Invalid(detail) => Err(BridgeError::UnexpectedOutput {
                command: format!("companion {what}"),
                detail,
            }),
        }
    }

    /// Set the presence; true when it changed.
    fn set_online(&self, online: bool, detail: Option<String>) -> bool {
        *lock(&self.detail) = detail;
        self.online.send_if_modified(|current| {
            let changed = *current != online;
            *current = online;
            changed
        })
    }
}

impl Device for CompanionDevice {
    fn info(&self) -> DeviceInfo {
        let online = *self.online.borrow();
        DeviceInfo {
            name: self.name.clone(),
            transport: TransportKind::Companion,
            online,
            serial: self.companion_id.clone(),
            model: None,
            state_detail: if online {
                None
            } else {
                lock(&self.detail).clone()
            },
        }
    }

    fn execute<'a>(&'a self, command: &'a Command) -> BoxFuture<'a, Result<Value, BridgeError>> {
        Box::pin(self.run(command, Turn::free()))
    }

    fn execute_in_turn<'a>(
        &'a self,
        command: &'a Command,
        turn: Turn<'a>,
    ) -> BoxFuture<'a, Result<Value, BridgeError>> {
        Box::pin(self.run(command, turn))
    }

    fn queues_while_offline(&self) -> bool {
        true
    }
}

/// The largest request published to a phone: the daemon's MQTT client
/// sends packets of at most 1 MiB, and the topic and header need room.
pub const MAX_REQUEST_BYTES: usize = 1024 * 1024 - 4096;

/// Whether `command` names a file of the daemon's machine (`host_path`):
/// the phone cannot read it, and the daemon does not stream files through
/// MQTT, so such a call is refused before anything is published.
fn names_host_file(command: &Command) -> bool {
    use droidwarden_services::{AppManagerAction, FilesAction};
    matches!(
        command,
        Command::Files(FilesAction::Push {
            host_path: Some(_),
            ..
        }) | Command::AppManager(AppManagerAction::Install {
            host_path: Some(_),
            ..
        })
    )
}

/// The most unregistered companion ids whose presence is remembered.
const MAX_UNKNOWN_PRESENCES: usize = 64;

/// The companion transport: every companion device, fed by the daemon's
/// MQTT connection. Cheap to clone; clones share everything.
///
/// ```
/// # use droidwarden_bridge::Registry;
/// # use droidwarden_bridge::companion::{CompanionConfig, CompanionHub};
/// # use std::{sync::Arc, time::Duration};
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let registry = Arc::new(Registry::new());
/// let config = CompanionConfig {
///     request_timeout: Duration::from_secs(10),
///     queue_ttl: Duration::from_secs(60),
///     auto_register: true,
///     max_auto_devices: 16,
///     names: Default::default(),
/// };
/// let (hub, mut requests) = CompanionHub::new(config, registry.clone());
/// hub.on_presence("pixel-7", true);
/// assert!(registry.get("pixel-7").unwrap().info().online);
/// // The daemon publishes each `requests.recv().await` on the phone's
/// // request topic and passes what arrives on its response topic to
/// // `hub.on_response(id, payload)`.
/// # drop(requests.try_recv());
/// # }
/// ```
#[derive(Clone)]
pub struct CompanionHub {
    inner: Arc<HubInner>,
}

struct HubInner {
    shared: Arc<Shared>,
    registry: Arc<Registry>,
    companions: Mutex<HashMap<String, Arc<CompanionDevice>>>,
    events: broadcast::Sender<CompanionEvent>,
    /// Presences of unknown ids that were ignored.
    ignored: RateLimited,
    /// The last presence of ids that are not registered (at most
    /// [`MAX_UNKNOWN_PRESENCES`], oldest dropped): a phone named in the
    /// configuration by a reload while it is online starts online, as its
    /// retained `online` message is not sent again.
    unknown: Mutex<std::collections::VecDeque<(String, bool)>>,
}

impl fmt::Debug for CompanionHub {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompanionHub")
            .field("config", &self.inner.shared.config)
            .field(
                "companions",
                &lock(&self.inner.companions).keys().collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl CompanionHub {
    /// A hub with the configured companions registered (offline), and the
    /// channel of requests the daemon must publish.
    pub fn new(
        config: CompanionConfig,
        registry: Arc<Registry>,
    ) -> (Self, mpsc::Receiver<Outgoing>) {
        let (outgoing, requests) = mpsc::channel(OUTGOING_CAPACITY);
        let now = SystemTime::now();
        let instance = epoch_ms(now) ^ (u64::from(std::process::id()) << 40);
        let names = config.names.clone();
        let (events, _) = broadcast::channel(EVENT_CAPACITY);
        let hub = Self {
            inner: Arc::new(HubInner {
                shared: Arc::new(Shared {
                    config,
                    outgoing,
                    pending: Mutex::new(Pending::default()),
                    instance,
                    next_id: AtomicU64::new(1),
                }),
                registry,
                companions: Mutex::new(HashMap::new()),
                events,
                ignored: RateLimited::default(),
                unknown: Mutex::default(),
            }),
        };
        for (id, name) in names {
            hub.register(&id, name);
        }
        (hub, requests)
    }

    /// The registry the companions are in.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.inner.registry
    }

    /// Subscribe to the events phones push.
    pub fn subscribe_events(&self) -> broadcast::Receiver<CompanionEvent> {
        self.inner.events.subscribe()
    }

    fn companion(&self, id: &str) -> Option<Arc<CompanionDevice>> {
        lock(&self.inner.companions).get(id).cloned()
    }

    /// The companion `id`, registered under `name` first if it is new and
    /// the name does not belong to a device of another transport.
    fn register(&self, id: &str, name: DeviceName) -> Option<Arc<CompanionDevice>> {
        // Held across the check and the insertion so that two presences of
        // one new phone cannot register it twice. The registry's lock is
        // only ever taken inside this one, never the other way round.
        let mut companions = lock(&self.inner.companions);
        self.register_in(&mut companions, id, name, None, false)
    }

    /// [`register`](Self::register) with the table already locked; a
    /// renamed phone passes its presence on.
    fn register_in(
        &self,
        companions: &mut HashMap<String, Arc<CompanionDevice>>,
        id: &str,
        name: DeviceName,
        presence: Option<(Arc<watch::Sender<bool>>, Option<String>)>,
        auto: bool,
    ) -> Option<Arc<CompanionDevice>> {
        if let Some(device) = companions.get(id) {
            return Some(Arc::clone(device));
        }
        if let Some(existing) = self.inner.registry.get(name.as_str()) {
            let info = existing.info();
            if info.transport != TransportKind::Companion || info.serial != id {
                tracing::warn!(
                    companion = id,
                    device = %name,
                    transport = %info.transport,
                    "a device of that name already exists; companion ignored"
                );
                return None;
            }
        }
        let shared = &self.inner.shared;
        let (online, detail) = presence.unwrap_or_else(|| {
            (
                Arc::new(watch::channel(false).0),
                Some("the companion app has not been seen yet".into()),
            )
        });
        let device = Arc::new(CompanionDevice {
            name,
            companion_id: id.to_owned(),
            shared: Arc::clone(shared),
            online,
            detail: Mutex::new(detail),
            queued: AtomicUsize::new(0),
            auto,
        });
        let timeout = handle_timeout(&shared.config);
        self.inner
            .registry
            .insert(DeviceHandle::new(device.clone(), timeout));
        companions.insert(id.to_owned(), Arc::clone(&device));
        tracing::info!(companion = id, device = %device.name, "companion registered");
        Some(device)
    }

    /// Change the configured names (companion id → device name) while
    /// running.
    ///
    /// A phone whose name changes leaves the registry under its old name
    /// (announced offline if it was online, then [`DeviceEvent::Removed`])
    /// and is registered under the new one with its presence (announced
    /// with a [`DeviceEvent::Availability`]); calls queued under the old
    /// name still go out when the phone comes back. A phone no longer named
    /// stays, named by its id, while it is online and auto-registration is
    /// on, and leaves the registry otherwise. A newly named phone is
    /// registered at once, offline until it announces itself. Returns the
    /// names that changed, as (old, new): `None` for no device.
    pub fn set_names(
        &self,
        names: BTreeMap<String, DeviceName>,
    ) -> Vec<(Option<DeviceName>, Option<DeviceName>)> {
        let auto_register = self.inner.shared.config.auto_register;
        let mut changes = Vec::new();
        let mut announce = Vec::new();
        {
            let mut companions = lock(&self.inner.companions);
            let mut replaced = Vec::new();
            let ids: Vec<String> = companions.keys().cloned().collect();
            for id in ids {
                let Some(device) = companions.get(&id) else {
                    continue;
                };
                let online = *device.online.borrow();
                let target = match names.get(&id) {
                    Some(name) => Some(name.clone()),
                    None if auto_register && online => DeviceName::try_from(id.as_str()).ok(),
                    None => None,
                };
                if target.as_ref() == Some(&device.name) {
                    continue;
                }
                if let Some(old) = companions.remove(&id) {
                    replaced.push((old, target));
                }
            }
            // Every old name goes first, so that two phones can swap names.
            for (old, target) in &replaced {
                if *old.online.borrow() {
                    self.inner.registry.publish(DeviceEvent::Availability {
                        device: old.name.clone(),
                        online: false,
                        detail: Some(match target {
                            Some(name) => format!("renamed to {name}"),
                            None => "removed from the configuration".to_owned(),
                        }),
                    });
                }
                self.inner.registry.remove(&old.name);
                tracing::info!(companion = %old.companion_id, device = %old.name, renamed_to = target.as_ref().map(DeviceName::as_str), "companion unregistered");
            }
            for (old, target) in replaced {
                let presence = (Arc::clone(&old.online), lock(&old.detail).clone());
                let auto = !names.contains_key(&old.companion_id);
                let new = target.and_then(|name| {
                    self.register_in(
                        &mut companions,
                        &old.companion_id,
                        name,
                        Some(presence),
                        auto,
                    )
                });
                changes.push((Some(old.name.clone()), new.as_ref().map(|d| d.name.clone())));
                announce.extend(new);
            }
            for (id, name) in &names {
                if companions.contains_key(id) {
                    continue;
                }
                let presence = self.take_unknown(id);
                if let Some(new) =
                    self.register_in(&mut companions, id, name.clone(), presence, false)
                {
                    changes.push((None, Some(new.name.clone())));
                    announce.push(new);
                }
            }
        }
        for device in announce {
            let info = device.info();
            self.inner.registry.publish(DeviceEvent::Availability {
                device: info.name,
                online: info.online,
                detail: info.state_detail,
            });
        }
        changes
    }

    /// A companion's presence changed (its `online` topic: `online`, or
    /// `offline` from itself or its last will). An unknown id registers a
    /// device when `auto_register` is on and fewer than `max_auto_devices`
    /// were registered that way; otherwise it is ignored, keeping nothing
    /// (the warning is rate-limited).
    pub fn on_presence(&self, companion_id: &str, online: bool) {
        let device = match self.companion(companion_id) {
            Some(device) => device,
            None if !online => {
                self.remember_unknown(companion_id, false);
                return;
            }
            None if !self.inner.shared.config.auto_register => {
                self.remember_unknown(companion_id, true);
                self.ignored(
                    companion_id,
                    "unknown companion announced itself; ignored (auto-registration is off)",
                );
                return;
            }
            None => {
                let Ok(name) = DeviceName::try_from(companion_id) else {
                    self.ignored(
                        companion_id,
                        "companion id is not a valid device name; ignored",
                    );
                    return;
                };
                match self.auto_register(companion_id, name) {
                    Some(device) => device,
                    None => return,
                }
            }
        };
        let detail = (!online).then(|| "the companion app is offline".to_owned());
        if device.set_online(online, detail.clone()) {
            tracing::info!(device = %device.name, online, "companion presence");
            self.inner.registry.publish(DeviceEvent::Availability {
                device: device.name.clone(),
                online,
                detail,
            });
        }
    }

    /// Register an unknown phone by its id, unless `max_auto_devices` are
    /// registered that way already.
    fn auto_register(&self, id: &str, name: DeviceName) -> Option<Arc<CompanionDevice>> {
        let max = self.inner.shared.config.max_auto_devices;
        let mut companions = lock(&self.inner.companions);
        if let Some(device) = companions.get(id) {
            return Some(Arc::clone(device));
        }
        let auto = companions.values().filter(|d| d.auto).count();
        if auto >= max {
            drop(companions);
            self.ignored(
                id,
                &format!(
                    "unknown companion announced itself; ignored: {max} companions are auto-registered already (companion.max_auto_devices)"
                ),
            );
            return None;
        }
        self.register_in(&mut companions, id, name, None, true)
    }

    /// Log an ignored presence, at most once per [`WARN_EVERY`].
    /// The daemon lost its own connection to the broker: every phone is
    /// offline to it until its presence arrives again (its retained
    /// `online` message comes back with the subscriptions), so calls wait
    /// in the phones' queues, unsent, rather than in the MQTT client's.
    pub fn connection_lost(&self, why: &str) {
        let devices: Vec<Arc<CompanionDevice>> =
            lock(&self.inner.companions).values().cloned().collect();
        for device in devices {
            if device.set_online(false, Some(why.to_owned())) {
                tracing::info!(device = %device.name, "companion offline: {why}");
                self.inner.registry.publish(DeviceEvent::Availability {
                    device: device.name.clone(),
                    online: false,
                    detail: Some(why.to_owned()),
                });
            }
        }
    }

    /// Remember an unregistered id's presence (bounded).
    fn remember_unknown(&self, companion_id: &str, online: bool) {
        let mut unknown = lock(&self.inner.unknown);
        unknown.retain(|(id, _)| id != companion_id);
        if online {
            if unknown.len() >= MAX_UNKNOWN_PRESENCES {
                unknown.pop_front();
            }
            unknown.push_back((companion_id.to_owned(), true));
        }
    }

    /// The presence last seen of an id registered just now, if it was
    /// online while unknown.
    fn take_unknown(
        &self,
        companion_id: &str,
    ) -> Option<(Arc<watch::Sender<bool>>, Option<String>)> {
        let mut unknown = lock(&self.inner.unknown);
        let at = unknown.iter().position(|(id, _)| id == companion_id)?;
        let (_, online) = unknown.remove(at)?;
        online.then(|| (Arc::new(watch::channel(true).0), None))
    }

    fn ignored(&self, companion_id: &str, why: &str) {
        if let Some(count) = self.inner.ignored.due(Instant::now()) {
            tracing::warn!(
                companion = %clip(companion_id),
                ignored_since_last_warning = count,
                "{why}"
            );
        }
    }

    /// How many companions are registered (configured and auto-registered).
    pub fn len(&self) -> usize {
        lock(&self.inner.companions).len()
    }

    /// Whether no companion is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A payload arrived on a companion's `response` topic. Never fails:
    /// anything that is not the first timely answer to a request sent to
    /// that phone is logged and ignored; the disposition says which.
    pub fn on_response(&self, companion_id: &str, payload: &[u8]) -> ResponseDisposition {
        if self.companion(companion_id).is_none() {
            tracing::debug!(companion = %clip(companion_id), "response from an unknown companion; ignored");
            return ResponseDisposition::UnknownCompanion;
        }
        let (id, reply) = match protocol::decode_response(payload) {
            Ok(decoded) => decoded,
            Err(problem) => {
                tracing::warn!(companion = %clip(companion_id), %problem, "unreadable companion response; ignored");
                return ResponseDisposition::Malformed;
            }
        };
        let disposition =
            lock(&self.inner.shared.pending).answer(companion_id, &id, reply, Instant::now());
        match disposition {
            ResponseDisposition::Delivered => {}
            ResponseDisposition::Duplicate | ResponseDisposition::Late => {
                tracing::debug!(companion = %clip(companion_id), id = %clip(&id), ?disposition, "companion response ignored");
            }
            _ => {
                tracing::warn!(companion = %clip(companion_id), id = %clip(&id), ?disposition, "companion response ignored");
            }
        }
        disposition
    }

    /// A payload arrived on a companion's `event/<kind>` topic. Returns the
    /// event (also sent to [`subscribe_events`](Self::subscribe_events)), or
    /// `None` when the phone, the kind or the body is not acceptable (logged).
    pub fn on_event(
        &self,
        companion_id: &str,
        kind: &str,
        payload: &[u8],
    ) -> Option<CompanionEvent> {
        let Some(device) = self.companion(companion_id) else {
            tracing::debug!(companion = %clip(companion_id), "event from an unknown companion; ignored");
            return None;
        };
        let Some(kind) = EventKind::from_name(kind) else {
            tracing::debug!(device = %device.name, kind = %clip(kind), "unknown companion event kind; ignored");
            return None;
        };
        let data = match protocol::decode_event(kind, payload) {
            Ok(data) => data,
            Err(problem) => {
                tracing::warn!(device = %device.name, %kind, %problem, "unreadable companion event; ignored");
                return None;
            }
        };
        let event = CompanionEvent {
            device: device.name.clone(),
            companion_id: companion_id.to_owned(),
            kind,
            data,
        };
        // No subscriber is not an error.
        let _ = self.inner.events.send(event.clone());
        Some(event)
    }
}
