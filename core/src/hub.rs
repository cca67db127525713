//! The one path every call takes, whoever makes it (MQTT, Home Assistant,
//! the CLI through the daemon, the agent), and the in-process bus its
//! transitions go out on.
//!
//! A call is admitted ([`Hub::admit`], synchronous): parsed against the
//! catalogue, its device selected, and a place taken in that device's
//! arrival order ([`crate::sequencer`]). Then ([`Admitted::run`]) it waits
//! for its turn (a change waits for everything before it, a read for the
//! changes before it), is recorded as in flight in the delivery store,
//! `executing` is announced, the call made, and `success` or `error`
//! announced. The caller has its answer then. A successful read of a
//! service's state announces the new state; a successful change to a
//! service that has state is followed by a fresh read of it, in the
//! background, whose result is announced. Consumers (the MQTT publisher,
//! D-Bus) subscribe to [`Bus`].
//!
//! A call is parsed once, at the edge, into a typed [`Call`]
//! ([`CallRequest::parse`] for names and JSON from MQTT or D-Bus); nothing
//! after that handles strings. Callers that know their arrival order (the
//! MQTT dispatcher) admit in that order and run later; the others call
//! [`Hub::call`], which does both.

use crate::delivery::{self, DeliveryStore};
use crate::foreground::Foreground;
use crate::sequencer::{Sequencer, Ticket};
use droidwarden_bridge::{DeviceHandle, Registry};
use droidwarden_services::{Catalogue, Command, DeviceName, ErrorCode, Risk, WireError, time};
use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::broadcast;

/// Where a call is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallState {
    /// Sent to the phone; no answer yet.
    Executing,
    /// The phone answered and the result parsed.
    Success,
    /// Refused, failed, or timed out (its [`StatusEvent::error`] says which).
    Error,
}

impl CallState {
    /// `executing`, `success` or `error`, as the status topics spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Executing => "executing",
            Self::Success => "success",
            Self::Error => "error",
        }
    }
}

/// One transition of a call on a (device, service).
#[derive(Debug, Clone)]
pub struct StatusEvent {
    /// The device the call is on.
    pub device: DeviceName,
    /// The service id.
    pub service: &'static str,
    /// The action.
    pub action: &'static str,
    /// Where the call is.
    pub state: CallState,
    /// When the call started (its `executing`).
    pub started_at: SystemTime,
    /// When it ended; `None` while executing.
    pub finished_at: Option<SystemTime>,
    /// How long it took; `None` while executing.
    pub duration: Option<Duration>,
    /// Why it failed, for [`CallState::Error`].
    pub error: Option<WireError>,
}

/// The status payload as serialized: fields in the order a JSON object of
/// them would list them (sorted), `error` and `service` only when set.
#[derive(Serialize)]
struct StatusBody<'a> {
    action: &'static str,
    duration_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a WireError>,
    finished_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    service: Option<&'static str>,
    started_at: String,
    state: &'static str,
}

impl StatusEvent {
    fn body(&self, with_service: bool) -> StatusBody<'_> {
        StatusBody {
            action: self.action,
            duration_ms: self.duration.map(|d| d.as_millis() as u64),
            error: self.error.as_ref(),
            finished_at: self.finished_at.map(rfc3339),
            service: with_service.then_some(self.service),
            started_at: rfc3339(self.started_at),
            state: self.state.as_str(),
        }
    }

    /// The retained status payload.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self.body(false)).unwrap_or(Value::Null)
    }

    /// The retained status payload, serialized; with `with_service`, the
    /// device-wide "last status" payload (which names the service too).
    pub fn to_payload(&self, with_service: bool) -> Vec<u8> {
        serde_json::to_vec(&self.body(with_service)).unwrap_or_default()
    }
}

/// The latest known state of a (device, service).
#[derive(Debug, Clone)]
pub struct StateEvent {
    /// The device.
    pub device: DeviceName,
    /// The service id whose state this is.
    pub service: &'static str,
    /// Shared: every subscriber of the bus gets the event, not a copy of
    /// the state.
    pub state: Arc<Value>,
}

/// What goes on the bus.
#[derive(Debug, Clone)]
pub enum BusEvent {
    /// A call's status changed.
    Status(StatusEvent),
    /// A service's state was read.
    State(StateEvent),
    /// Something a phone pushed (a notification, a battery change …).
    PhoneEvent {
        /// The device that pushed it.
        device: DeviceName,
        /// Its kind, e.g. `notification_posted`.
        kind: &'static str,
        /// Shared, as [`StateEvent::state`].
        data: Arc<Value>,
    },
}

/// Broadcast of [`BusEvent`]s.
pub type Bus = broadcast::Sender<BusEvent>;

/// `t` in RFC 3339 with milliseconds, UTC (`2026-11-28T04:33:18.123Z`):
/// the one format of every timestamp the daemon publishes.
pub fn rfc3339(t: SystemTime) -> String {
    droidwarden_services::time::rfc3339_millis(droidwarden_services::time::epoch_ms(t))
}

/// The read that gives a service's state, for services that have one
/// (declared by the service: [`droidwarden_services::ServiceSpec::state`]).
pub fn state_read(service: &str) -> Option<Command> {
    let read = Catalogue::get().service(service).ok()?.state?;
    Some(read())
}

/// A request to perform one action as the edges receive it (MQTT payloads,
/// D-Bus arguments): names and JSON parameters, not yet checked.
#[derive(Debug, Clone, PartialEq)]
pub struct CallRequest {
    /// The device's name; `None`: the only device, or the default one.
    pub device: Option<String>,
    /// A service id or node type.
    pub service: String,
    /// One of its actions.
    pub action: String,
    /// The parameters, checked against the action's schema by
    /// [`CallRequest::parse`].
    pub params: Value,
}

impl CallRequest {
    /// Check the request against the catalogue, once: the typed call every
    /// layer after the edge works with.
    ///
    /// # Errors
    /// An unknown service or action, or invalid parameters.
    pub fn parse(&self) -> Result<Call, WireError> {
        let command = Catalogue::get()
            .parse(&self.service, &self.action, &self.params)
            .map_err(WireError::from)?;
        Ok(Call {
            device: self.device.clone(),
            command,
        })
    }
}

/// Why [`Hub::try_admit`] did not admit a call. Nothing was sent either
/// way.
#[derive(Debug, Clone)]
pub enum Refusal {
    /// The device is online and already has its most calls queued; the
    /// call may be admitted once one of them finishes.
    Full {
        /// The device's name.
        device: DeviceName,
        /// The `busy` answer, should the caller not wait.
        error: WireError,
    },
    /// Anything else [`Hub::admit`] refuses (unknown device or action,
    /// invalid parameters, the phone-services policy, a phone away).
    Refused(WireError),
}

impl Refusal {
    /// The answer to give for it.
    pub fn into_error(self) -> WireError {
        match self {
            Self::Full { error, .. } | Self::Refused(error) => error,
        }
    }
}

/// A checked call: a typed command and the device it is for (`None`: the
/// only device, or the default one).
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// The device's name; `None`: the only device, or the default one.
    pub device: Option<String>,
    /// The checked command.
    pub command: Command,
}

/// The call path and the bus.
#[derive(Debug, Clone)]
pub struct Hub {
    registry: Arc<Registry>,
    bus: Bus,
    /// Each device's arrival order, created on its first call. Devices are
    /// few (the configured ones), so entries are never removed.
    sequencers: Arc<Mutex<HashMap<DeviceName, Arc<Sequencer>>>>,
    /// Where calls in flight are recorded, so that a killed process's
    /// `executing` can be corrected at the next start.
    delivery: Option<DeliveryStore>,
    /// Keys of the calls recorded in flight.
    next_key: Arc<AtomicU64>,
    /// What the phone services may do (`[phone_services]`), checked before
    /// a call takes its place.
    phone_policy: Arc<droidwarden_services::PhonePolicy>,
    /// State reads waiting for their turn, by device and service: one is
    /// enough (it runs after everything admitted before it), so a burst of
    /// changes to one service is followed by one refresh, not one each,
    /// and refreshes stay out of the callers' [`MAX_WAITING`].
    refreshing: Arc<Mutex<std::collections::HashSet<(DeviceName, &'static str)>>>,
    /// The last notifications read on each ADB phone, for their events
    /// ([`Hub::poll_notifications`]).
    notifications: Arc<Mutex<crate::notification_events::NotificationWatch>>,
    /// The app in front of each device, read before screen actions
    /// ([`crate::foreground`]).
    foreground: Arc<Foreground>,
}

/// A call admitted in arrival order, waiting to [`run`](Admitted::run).
/// Dropping it gives its place up.
#[derive(Debug)]
pub struct Admitted {
    hub: Hub,
    device: DeviceHandle,
    command: Command,
    ticket: Ticket,
    /// The command id it runs for ([`Admitted::for_id`]).
    id: Option<String>,
    /// The highest risk the caller cleared it for ([`Admitted::cleared_up_to`]).
    cleared: Option<Risk>,
}

/// What came of a call run for a command id ([`Admitted::run_reporting`]).
#[derive(Debug)]
pub struct Ran {
    /// The call's answer.
    pub result: Result<Value, WireError>,
    /// Whether the call is a change that may have reached the phone. False
    /// for a read, for a call that never got its turn, and for one the
    /// phone's transport refused before sending (`busy`, `device_offline`
    /// while the phone was away, `adb_missing`): none of those changed
    /// anything.
    pub reached: bool,
}

impl Hub {
    /// The hub; `delivery` records calls in flight (the daemon has one; unit
    /// tests may go without).
    pub fn new(registry: Arc<Registry>, delivery: Option<DeliveryStore>) -> Self {
        // Every call produces two or three events; 4096 absorbs bursts of
        // a thousand calls while a slow subscriber catches up. A subscriber
        // that lags is told how many it missed.
        let (bus, _) = broadcast::channel(4096);
        Self {
            registry,
            bus,
            sequencers: Arc::default(),
            delivery,
            next_key: Arc::new(AtomicU64::new(1)),
            phone_policy: Arc::default(),
            refreshing: Arc::default(),
            notifications: Arc::default(),
            foreground: Arc::default(),
        }
    }

    /// Whether the phone-services policy lets the service `id` be used.
    pub fn service_enabled(&self, id: &str) -> bool {
        self.phone_policy.service_enabled(id)
    }

    /// Whether the phone-services policy allows `command` (the check every
    /// call admitted here meets first; a caller may ask it early, before
    /// doing any work for a call that would be refused).
    ///
    /// # Errors
    /// The policy's refusal (`permission_denied` …).
    pub fn check_policy(&self, command: &Command) -> Result<(), WireError> {
        self.phone_policy.check(command)
    }

    /// The hub with `policy` for the phone services (the default policy
    /// until this is called: telephony and shell off).
    pub fn with_phone_policy(mut self, policy: droidwarden_services::PhonePolicy) -> Self {
        self.phone_policy = Arc::new(policy);
        self
    }

    /// The devices.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// Every status, state and phone event from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<BusEvent> {
        self.bus.subscribe()
    }

    /// Announce a service's state learnt some other way (a phone's event).
    pub fn announce_state(&self, device: DeviceName, service: &'static str, state: Value) {
        self.announce(BusEvent::State(StateEvent {
            device,
            service,
            state: Arc::new(state),
        }));
    }

    /// Announce an event a phone pushed.
    pub fn announce_event(&self, device: DeviceName, kind: &'static str, data: Value) {
        self.announce(BusEvent::PhoneEvent {
            device,
            kind,
            data: Arc::new(data),
        });
    }

    fn announce(&self, event: BusEvent) {
        // No subscriber (the CLI) is fine.
        let _ = self.bus.send(event);
    }

    /// Perform a call, announcing its transitions: [`Hub::admit_call`] then
    /// [`Admitted::run`].
    ///
    /// # Errors
    /// The call's error, in wire form.
    pub async fn call(&self, call: Call) -> Result<Value, WireError> {
        self.admit_call(call)?.run().await
    }

    /// [`Hub::call`] for a caller that decides approvals (the agent, the
    /// MCP gate) and cleared the call up to `cleared`: a screen action the
    /// app in front raises above that answers `approval_required`
    /// ([`Admitted::cleared_up_to`]) and is not sent.
    ///
    /// # Errors
    /// As [`Hub::call`], and `approval_required`.
    pub async fn call_cleared(&self, call: Call, cleared: Risk) -> Result<Value, WireError> {
        self.admit_call(call)?.cleared_up_to(cleared).run().await
    }

    /// [`CallRequest::parse`] then [`Hub::admit_call`].
    ///
    /// # Errors
    /// An unknown service, action or device, or invalid parameters.
    pub fn admit(&self, request: &CallRequest) -> Result<Admitted, WireError> {
        self.admit_call(request.parse()?)
    }

    /// [`Hub::admit`], telling a full queue apart from other refusals: a
    /// caller that can hold the call back (an MQTT command whose
    /// acknowledgement it withholds) waits for [`Hub::queue_moved`] and
    /// tries again instead of answering `busy`.
    ///
    /// # Errors
    /// [`Refusal::Full`] when the device's queue is full and the device is
    /// online; [`Refusal::Refused`] for everything else [`Hub::admit`]
    /// refuses.
    pub fn try_admit(&self, request: &CallRequest) -> Result<Admitted, Refusal> {
        self.try_admit_call(request.parse().map_err(Refusal::Refused)?)
    }

    /// [`Hub::admit_call`], telling a full queue apart ([`Hub::try_admit`]).
    fn try_admit_call(&self, call: Call) -> Result<Admitted, Refusal> {
        self.check_policy(&call.command).map_err(Refusal::Refused)?;
        let device = self
            .registry
            .select(call.device.as_deref())
            .map_err(|e| Refusal::Refused(e.to_wire()))?;
        let ticket = match self.ticket(&device, &call.command, true) {
            Ok(ticket) => ticket,
            Err(error) if error.code == ErrorCode::Busy => {
                return Err(Refusal::Full {
                    device: device.info().name,
                    error,
                });
            }
            Err(error) => return Err(Refusal::Refused(error)),
        };
        Ok(Admitted {
            hub: self.clone(),
            device,
            command: call.command,
            ticket,
            id: None,
            cleared: None,
        })
    }

    /// Changes whenever a call on `device` finishes (its queue moved): a
    /// held call may find room then.
    pub fn queue_moved(&self, device: &DeviceName) -> tokio::sync::watch::Receiver<u64> {
        let mut map = self.sequencers.lock().unwrap_or_else(|e| e.into_inner());
        map.entry(device.clone()).or_default().moved()
    }

    /// The name of the device a call for `device` (`None`: the only or
    /// default one) would go to, if there is one.
    pub fn device_name(&self, device: Option<&str>) -> Option<DeviceName> {
        let handle = self.registry.select(device).ok()?;
        Some(handle.info().name)
    }

    /// How long a call on the device named `device` may take in all
    /// ([`call_bound`]); `None` for an unknown device.
    pub fn call_bound_of(&self, device: &DeviceName) -> Option<Duration> {
        self.registry
            .get(device.as_str())
            .map(|handle| call_bound(&handle))
    }

    /// Select a call's device and take its place in the device's arrival
    /// order. Synchronous, so that the order of calls to this is the order
    /// calls start in. A call that fails here takes no place.
    ///
    /// # Errors
    /// A call the phone-services policy refuses (`disabled`, `denied`), an
    /// unknown device, or a device with too many calls waiting.
    pub fn admit_call(&self, call: Call) -> Result<Admitted, WireError> {
        self.try_admit_call(call).map_err(Refusal::into_error)
    }

    /// A place in the device's order, unless `capped` and [`MAX_WAITING`]
    /// calls already wait for it: then the call is refused at once and
    /// nothing is sent (`device_offline` for a phone that is away, else
    /// `busy`). State reads are not capped: at most one per service waits
    /// ([`Hub::poll_state`]).
    fn ticket(
        &self,
        device: &DeviceHandle,
        command: &Command,
        capped: bool,
    ) -> Result<Ticket, WireError> {
        let write = command.mutates();
        let sequencer = {
            let mut map = self.sequencers.lock().unwrap_or_else(|e| e.into_inner());
            Arc::clone(map.entry(device.info().name).or_default())
        };
        if capped
            && sequencer
                .open()
                .saturating_sub(self.refreshes_waiting(device))
                >= MAX_WAITING
        {
            return Err(not_sent(
                device,
                format!(
                    "{MAX_WAITING} calls are already queued for it; this one was refused and not sent"
                ),
            ));
        }
        Ok(sequencer.ticket(write))
    }

    /// State reads of `device` waiting for their turn.
    fn refreshes_waiting(&self, device: &DeviceHandle) -> usize {
        let name = device.info().name;
        self.refreshing
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|(d, _)| *d == name)
            .count()
    }

    /// Claim the one waiting state read of `service` on `device`: false
    /// when one already waits (it will run after everything admitted
    /// before it, so another is not needed). Synchronous, so a change that
    /// finishes just as the waiting read gets its turn claims a new one.
    fn claim_refresh(&self, device: &DeviceHandle, service: &'static str) -> bool {
        self.refreshing
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert((device.info().name, service))
    }

    /// Read a service's state without status announcements (polling, and
    /// the refresh after a change). It takes a place in the device's order
    /// like any read; while one waits for its turn, another for the same
    /// service is not needed and is skipped.
    pub async fn poll_state(&self, device: &DeviceHandle, service: &'static str) {
        if self.claim_refresh(device, service) {
            self.poll_claimed(device, service).await;
        }
    }

    /// Read a phone's notifications (`notifications.list`, in the device's
    /// order like any read, without status announcements) and announce
    /// what was posted or removed since the last read as phone events, the
    /// events a companion phone pushes itself
    /// ([`crate::notification_events`]). Only ADB phones are read: a
    /// companion phone's own events are already on the bus. The first read
    /// after a start or a reconnect is the baseline.
    pub async fn poll_notifications(&self, device: &DeviceHandle) {
        let info = device.info();
        if info.transport != droidwarden_bridge::TransportKind::Adb
            || !self.claim_refresh(device, "notifications")
        {
            return;
        }
        let key = (info.name.clone(), "notifications");
        let command = Command::Notifications(droidwarden_services::NotificationsAction::List {
            package: None,
        });
        let ticket = self.ticket(device, &command, false);
        let turn = match &ticket {
            Ok(ticket) => wait_turn(device, ticket).await.map_err(|e| e.to_string()),
            Err(_) => Err("no place in the device's order".to_owned()),
        };
        self.refreshing
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key);
        if let Err(e) = turn {
            tracing::debug!(device = %info.name, error = %e, "notification poll gave up waiting");
            return;
        }
        let list = match device
            .call(&command)
            .await
            .map(serde_json::from_value::<droidwarden_services::NotificationList>)
        {
            Ok(Ok(list)) => list,
            Ok(Err(e)) => {
                tracing::debug!(device = %info.name, error = %e, "notification poll: unreadable list");
                return;
            }
            Err(e) => {
                tracing::debug!(device = %info.name, error = %e, "notification poll failed");
                return;
            }
        };
        let events = self
            .notifications
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .observe(&info.name, &list.notifications, time::now_ms());
        for (kind, body) in events {
            self.announce_event(info.name.clone(), kind, body);
        }
    }

    /// Forget a phone's last notifications (it is offline): its next read
    /// is a new baseline, so a reconnect announces nothing old.
    pub fn forget_notifications(&self, device: &DeviceName) {
        self.notifications
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .forget(device);
    }

    /// [`Hub::poll_state`] once the read is claimed.
    async fn poll_claimed(&self, device: &DeviceHandle, service: &'static str) {
        let key = (device.info().name, service);
        let Some(command) = state_read(service) else {
            self.refreshing
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&key);
            return;
        };
        let Ok(ticket) = self.ticket(device, &command, false) else {
            self.refreshing
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&key);
            return;
        };
        let turn = wait_turn(device, &ticket).await;
        // From here a later change needs a read of its own.
        self.refreshing
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key);
        if let Err(e) = turn {
            tracing::debug!(device = %device.info().name, service, error = %e, "state poll gave up waiting");
            return;
        }
        match device.call(&command).await {
            Ok(state) => {
                if matches!(command, Command::ScreenReader(_)) {
                    self.foreground.note(&device.info().name, &state);
                }
                self.announce_state(device.info().name, service, state)
            }
            Err(e) => {
                tracing::debug!(device = %device.info().name, service, error = %e, "state poll failed")
            }
        }
    }

    /// Perform a call on its turn, announcing `executing` and then `success`
    /// or `error`, and recording it in flight meanwhile. A change made for
    /// command `id` marks the id started in the delivery store, committed
    /// before the call goes out; a read does not (running it again after
    /// a crash changes nothing, so it is never "may have run").
    async fn execute(&self, device: &DeviceHandle, command: &Command, id: Option<&str>) -> Ran {
        let info = device.info();
        let name = info.name;
        let service = command.service_id();
        let action = command.action_name();
        let started_at = SystemTime::now();
        let start = Instant::now();
        let id = id.filter(|_| command.mutates());
        let key = self
            .begin_in_flight(&name, service, action, started_at, id)
            .await;
        if key.is_some() && command.mutates() {
            // A change is on disk before it is announced or sent: whoever
            // saw its `executing` will see it corrected if the process is
            // killed, and a repeat of its id after that is told it may
            // have run. Reads skip the wait (their rows are best effort: a
            // read that begins and ends within one batch writes nothing).
            self.commit_in_flight().await;
        }
        self.announce(BusEvent::Status(StatusEvent {
            device: name.clone(),
            service,
            action,
            state: CallState::Executing,
            started_at,
            finished_at: None,
            duration: None,
            error: None,
        }));
        let result = device.call(command).await.map_err(|e| e.to_wire());
        let duration = start.elapsed();
        match &result {
            Ok(_) => {
                tracing::debug!(device = %name, service, action, ms = duration.as_millis() as u64, "call succeeded")
            }
            Err(e) => {
                tracing::warn!(device = %name, service, action, code = %e.code, error = %e.message, "call failed")
            }
        }
        if let Some(key) = key {
            self.end_in_flight(key).await;
        }
        self.announce(BusEvent::Status(StatusEvent {
            device: name,
            service,
            action,
            state: if result.is_ok() {
                CallState::Success
            } else {
                CallState::Error
            },
            started_at,
            finished_at: Some(SystemTime::now()),
            duration: Some(duration),
            error: result.as_ref().err().cloned(),
        }));
        let reached = command.mutates()
            && match &result {
                Ok(_) => true,
                Err(e) => match e.code {
                    ErrorCode::Busy | ErrorCode::AdbMissing => false,
                    // Refused up front for a phone that was away; one that was
                    // online may have dropped mid-call, after the command went.
                    ErrorCode::DeviceOffline => info.online,
                    _ => true,
                },
            };
        Ran { result, reached }
    }

    /// Record a call as in flight (queued for the store's next batch, which
    /// commits within a fraction of a millisecond, in order with the
    /// call's end): a process killed during the call leaves a row the next
    /// start turns into an `error` status. A store that cannot be written
    /// costs only that correction, so the call goes on (with a warning).
    async fn begin_in_flight(
        &self,
        device: &DeviceName,
        service: &'static str,
        action: &str,
        started_at: SystemTime,
        id: Option<&str>,
    ) -> Option<u64> {
        let store = self.delivery.as_ref()?;
        let key = self.next_key.fetch_add(1, Ordering::Relaxed);
        let call = delivery::Interrupted {
            device: device.to_string(),
            service: service.to_owned(),
            action: action.to_owned(),
            started_ms: i64::try_from(time::epoch_ms(started_at)).unwrap_or(i64::MAX),
        };
        match store.begin(key, call, id).await {
            Ok(()) => Some(key),
            Err(e) => {
                tracing::warn!(%device, service, error = %e, "cannot record a call in flight");
                None
            }
        }
    }

    /// Wait until the calls recorded in flight so far are committed.
    async fn commit_in_flight(&self) {
        if let Some(store) = &self.delivery
            && let Err(e) = store.flush().await
        {
            tracing::warn!(error = %e, "cannot commit a call in flight");
        }
    }

    /// The call recorded with `key` is over (queued before its outcome is
    /// announced).
    async fn end_in_flight(&self, key: u64) {
        if let Some(store) = &self.delivery
            && let Err(e) = store.end(key).await
        {
            tracing::warn!(error = %e, "cannot record the end of a call");
        }
    }

    /// Keep the state topic true after a call: a state read is the state;
    /// a change to a service with a state is followed by a fresh read, in
    /// the background (the caller has its answer already) and in the
    /// device's order after whatever was admitted meanwhile.
    fn after_success(&self, device: &DeviceHandle, command: &Command, result: &Value) {
        let service = command.service_id();
        if command.is_state_read() && matches!(command, Command::ScreenReader(_)) {
            self.foreground.note(&device.info().name, result);
        }
        if command.is_state_read() {
            self.announce_state(device.info().name, service, result.clone());
        } else if command.mutates()
            && command.service().state.is_some()
            && self.claim_refresh(device, service)
        {
            let (hub, device) = (self.clone(), device.clone());
            // Bounded: the wait for its turn and the read each by the
            // device's call timeout.
            tokio::spawn(async move { hub.poll_claimed(&device, service).await });
        }
    }
}

impl Admitted {
    /// The call runs for command `id`: when it is a change, the id is
    /// marked started in the delivery store (committed) just before the
    /// call goes to the phone, so that after a crash a repeat of an id
    /// that only waited runs, and one that went out is "may have run".
    pub fn for_id(mut self, id: &str) -> Self {
        self.id = Some(id.to_owned());
        self
    }

    /// The caller decided this call's approval and cleared it up to
    /// `risk`: a screen action whose app in front makes it riskier
    /// (`[phone_services.ui]`) answers `approval_required` and is not
    /// sent. Without this (MQTT, D-Bus and CLI calls, automations, which
    /// have no approvals) only the UI rules that refuse apply.
    pub fn cleared_up_to(mut self, risk: Risk) -> Self {
        self.cleared = Some(risk);
        self
    }

    /// Wait for this call's turn on its device (bounded by the device's
    /// call timeout), then perform it, announcing its transitions.
    ///
    /// # Errors
    /// `device_offline` or `busy` (not sent) when earlier calls on the
    /// device kept it waiting too long; otherwise the call's error, in wire
    /// form.
    pub async fn run(self) -> Result<Value, WireError> {
        self.run_reporting().await.result
    }

    /// [`Admitted::run`], saying also whether the call is a change that may
    /// have reached the phone.
    pub async fn run_reporting(self) -> Ran {
        let Self {
            hub,
            device,
            command,
            ticket,
            id,
            cleared,
        } = self;
        if let Err(error) = wait_turn(&device, &ticket).await {
            return Ran {
                result: Err(error),
                reached: false,
            };
        }
        // In the turn, so the app checked is the app the action meets.
        if let Err(error) = hub
            .foreground
            .gate(&hub.phone_policy, &device, &command, cleared)
            .await
        {
            tracing::info!(device = %device.info().name, service = command.service_id(), action = command.action_name(), code = %error.code, error = %error.message, "screen action stopped by the app in front");
            return Ran {
                result: Err(error),
                reached: false,
            };
        }
        let name = device.info().name;
        if command.mutates() {
            hub.foreground.forget(&name);
        }
        let ran = hub.execute(&device, &command, id.as_deref()).await;
        if command.mutates() {
            hub.foreground.forget(&name);
        }
        // The next call may start; the state refresh is a read of its own.
        drop(ticket);
        if let Ok(value) = &ran.result {
            hub.after_success(&device, &command, value);
        }
        ran
    }
}

/// Most calls that may wait in one device's order; beyond, new ones are
/// refused at once (the companion transport's own queue has the same size).
const MAX_WAITING: usize = 64;

/// The longest a call on `device` takes from its admission to its answer,
/// decided here once: its turn in the device's order (at most the device's
/// call timeout, [`wait_turn`]) and then the call itself (at most the call
/// timeout again, turn behind another change and a stalled phone's check
/// included, [`DeviceHandle::call`]). Every caller that waits on the
/// daemon — D-Bus `CallTimeout` and so the CLI, the agent's tool timeout —
/// waits at least this long, so none reports a `timeout` of its own for a
/// call that can still run.
pub fn call_bound(device: &DeviceHandle) -> Duration {
    // The turn, the reading of the app in front before a screen action
    // (crate::foreground), the call.
    device
        .timeout()
        .saturating_mul(2)
        .saturating_add(crate::foreground::read_limit(device))
}

/// Wait for `ticket`'s turn, at most the device's call timeout. A call that
/// never got its turn was never sent, so it is not a `timeout` ("may have
/// run") but `device_offline` or `busy` ("did not run").
async fn wait_turn(device: &DeviceHandle, ticket: &Ticket) -> Result<(), WireError> {
    let limit = device.timeout();
    tokio::time::timeout(limit, ticket.turn())
        .await
        .map_err(|_| {
            not_sent(
                device,
                format!(
                    "it waited {} ms behind earlier calls; this one was not sent",
                    limit.as_millis()
                ),
            )
        })
}

/// A call refused or given up before it was sent: the phone is away
/// (`device_offline`) or taken by earlier calls (`busy`); both retryable,
/// and neither ran.
fn not_sent(device: &DeviceHandle, why: String) -> WireError {
    let info = device.info();
    if info.online {
        WireError::new(
            ErrorCode::Busy,
            format!("device {} is busy: {why}", info.name),
        )
    } else {
        WireError::new(
            ErrorCode::DeviceOffline,
            format!("device {} is offline and {why}", info.name),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use droidwarden_bridge::testing::FakePhone;
    use serde_json::json;

    fn hub(delay_ms: u64) -> (Hub, Arc<FakePhone>) {
        let registry = Arc::new(Registry::new());
        let phone = FakePhone::new("phone", Duration::from_millis(delay_ms));
        registry.insert(DeviceHandle::new(phone.clone(), Duration::from_secs(600)));
        (Hub::new(registry, None), phone)
    }

    fn change(level: i64) -> Call {
        Call {
            device: Some("phone".into()),
            command: Catalogue::get()
                .parse(
                    "screen_control",
                    "set_brightness",
                    &json!({ "level": level }),
                )
                .unwrap(),
        }
    }

    /// The refresh that follows each successful change takes no caller's
    /// place: with changes completing while others wait, a device still
    /// admits [`MAX_WAITING`] waiting calls, and a burst of changes to one
    /// service is followed by one refresh at a time, not one each.
    #[tokio::test(start_paused = true)]
    async fn refreshes_after_changes_neither_take_callers_places_nor_pile_up() {
        let (hub, phone) = hub(100);
        let mut runs = Vec::new();
        for level in 0..MAX_WAITING {
            let admitted = hub.admit_call(change(level as i64)).expect("room for it");
            runs.push(tokio::spawn(admitted.run()));
        }
        // Ten changes done, each followed by a refresh request.
        tokio::time::sleep(Duration::from_millis(1_050)).await;
        // As many calls wait as there were places freed: all admitted.
        for level in 0..10 {
            let admitted = hub
                .admit_call(change(100 + level))
                .unwrap_or_else(|e| panic!("refused with {} waiting: {e}", MAX_WAITING));
            runs.push(tokio::spawn(admitted.run()));
        }
        for run in runs {
            run.await.unwrap().unwrap();
        }
        // Let the last refresh run.
        tokio::time::sleep(Duration::from_secs(5)).await;
        let log = phone.log();
        let changes = log.iter().filter(|l| l.ends_with("set_brightness")).count();
        let reads = log.len() - changes;
        assert_eq!(changes, MAX_WAITING + 10);
        assert!(
            (1..=2).contains(&reads),
            "one refresh waiting at a time, and the last after the burst: {reads} reads in {log:?}"
        );
        assert!(
            !log.last().unwrap().ends_with("set_brightness"),
            "the state is read after the last change: {log:?}"
        );
    }
}
