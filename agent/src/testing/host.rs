//! [`FakeToolHost`]: devices and results without phones.

use crate::host::{DeviceSummary, ToolFuture, ToolHost};
use droidwarden_services::{Catalogue, Command, PhonePolicy, Risk, WireError, ui};
use serde_json::{Value, json};
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// One call the fake host received.
#[derive(Debug, Clone, PartialEq)]
pub struct FakeCall {
    /// Device, as passed.
    pub device: Option<String>,
    /// Service id.
    pub service: String,
    /// Action.
    pub action: String,
    /// Parameters.
    pub params: Value,
}

type Handler = Box<dyn Fn(&FakeCall) -> Result<Value, WireError> + Send + Sync>;

#[derive(Debug, Default)]
struct Counters {
    in_flight: HashMap<String, usize>,
    max_per_device: usize,
    total: usize,
    max_total: usize,
}

/// A tool host with fake devices.
pub struct FakeToolHost {
    devices: Vec<DeviceSummary>,
    handler: Handler,
    delay: Duration,
    call_limit: Option<Duration>,
    record: bool,
    calls: Mutex<Vec<FakeCall>>,
    failures: Mutex<HashMap<(String, String), VecDeque<WireError>>>,
    counters: Mutex<Counters>,
    /// The policy the daemon's hub applies to screen actions.
    screen_policy: PhonePolicy,
    /// The app in front of each device (default [`FAKE_APP`]).
    apps: Mutex<HashMap<String, String>>,
}

/// The app in front of a fake device until [`FakeToolHost::set_app`]
/// says otherwise: an app no policy lists (`medium` by default).
pub const FAKE_APP: &str = "com.example.app";

impl fmt::Debug for FakeToolHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FakeToolHost")
            .field("devices", &self.devices)
            .field("delay", &self.delay)
            .finish_non_exhaustive()
    }
}

/// A device offering every catalogue service.
pub fn full_device(name: &str) -> DeviceSummary {
    DeviceSummary {
        name: name.to_owned(),
        services: Catalogue::get()
            .services()
            .iter()
            .map(|s| s.id.to_owned())
            .collect(),
        online: true,
    }
}

impl FakeToolHost {
    /// A host with these devices; every call answers
    /// `{"device", "service", "action", "params", "ok": true}`.
    pub fn new(devices: Vec<DeviceSummary>) -> Self {
        Self {
            devices,
            handler: Box::new(|c| {
                Ok(
                    json!({"device": c.device, "service": c.service, "action": c.action,
                          "params": c.params, "ok": true}),
                )
            }),
            delay: Duration::ZERO,
            call_limit: None,
            record: true,
            calls: Mutex::new(Vec::new()),
            failures: Mutex::new(HashMap::new()),
            counters: Mutex::new(Counters::default()),
            screen_policy: PhonePolicy::default(),
            apps: Mutex::new(HashMap::new()),
        }
    }

    /// Apply `policy` to screen actions, as the daemon's hub does
    /// ([`ToolHost::call_cleared`]): its UI rules with the app in front,
    /// and `approval_required` above the call's clearance.
    pub fn with_screen_policy(mut self, policy: PhonePolicy) -> Self {
        self.screen_policy = policy;
        self
    }

    /// Bring `app` to the front of `device`.
    pub fn set_app(&self, device: &str, app: &str) {
        self.apps
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(device.to_owned(), app.to_owned());
    }

    /// The app in front of `device`.
    pub fn app(&self, device: Option<&str>) -> String {
        self.apps
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(device.unwrap_or_default())
            .cloned()
            .unwrap_or_else(|| FAKE_APP.to_owned())
    }

    /// One device, `phone`, offering every service.
    pub fn one_phone() -> Self {
        Self::new(vec![full_device("phone")])
    }

    /// Two devices, `kitchen` and `bedroom`, offering every service.
    pub fn two_phones() -> Self {
        Self::new(vec![full_device("kitchen"), full_device("bedroom")])
    }

    /// Answer calls with `f`.
    pub fn with_handler(
        mut self,
        f: impl Fn(&FakeCall) -> Result<Value, WireError> + Send + Sync + 'static,
    ) -> Self {
        self.handler = Box::new(f);
        self
    }

    /// Take `delay` (tokio time) for every call.
    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// Report `limit` as every device's own bound on a call
    /// ([`ToolHost::call_limit`]), like a phone that queues calls.
    pub fn with_call_limit(mut self, limit: Duration) -> Self {
        self.call_limit = Some(limit);
        self
    }

    /// Do not keep a call log (for benchmarks).
    pub fn without_log(mut self) -> Self {
        self.record = false;
        self
    }

    /// The next call of `service.action` fails with `error` (queued).
    pub fn fail_next(&self, service: &str, action: &str, error: WireError) {
        self.failures
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry((service.to_owned(), action.to_owned()))
            .or_default()
            .push_back(error);
    }

    /// Every call so far, in arrival order.
    pub fn calls(&self) -> Vec<FakeCall> {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// How many times `service.action` was called.
    pub fn count(&self, service: &str, action: &str) -> usize {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|c| c.service == service && c.action == action)
            .count()
    }

    /// The most calls that were in flight at once on one device (tracked
    /// when a delay is set).
    pub fn max_in_flight_per_device(&self) -> usize {
        self.counters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .max_per_device
    }

    /// The most calls that were in flight at once overall (tracked when a
    /// delay is set).
    pub fn max_in_flight(&self) -> usize {
        self.counters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .max_total
    }
}

impl ToolHost for FakeToolHost {
    fn devices(&self) -> Vec<DeviceSummary> {
        self.devices.clone()
    }

    /// The hub's gate before a screen action, with the fake's app in
    /// front: a call it stops is not run (nor logged).
    fn call_cleared<'a>(
        &'a self,
        device: Option<&'a str>,
        command: Command,
        cleared: Risk,
    ) -> ToolFuture<'a> {
        if ui::is_screen_action(&command) {
            let app = self.app(device);
            let app = Some(app.as_str());
            let policy = &self.screen_policy;
            let risk = policy.ui.effective_risk(&command, app);
            let stopped = policy.check_ui(&command, app).err().or_else(|| {
                (risk > cleared).then(|| ui::approval_required(&command, app, risk, cleared))
            });
            if let Some(error) = stopped {
                return Box::pin(async move { Err(error) });
            }
        }
        self.call(device, command)
    }

    fn call_limit(&self, _device: Option<&str>) -> Option<Duration> {
        self.call_limit
    }

    fn call<'a>(&'a self, device: Option<&'a str>, command: Command) -> ToolFuture<'a> {
        Box::pin(async move {
            let (service, action) = (command.service_id(), command.action_name());
            let call = FakeCall {
                device: device.map(str::to_owned),
                service: service.to_owned(),
                action: action.to_owned(),
                params: command.params_json(),
            };
            let key = device.unwrap_or_default().to_owned();
            if !self.delay.is_zero() {
                {
                    let mut c = self.counters.lock().unwrap_or_else(PoisonError::into_inner);
                    let n = c.in_flight.entry(key.clone()).or_default();
                    *n += 1;
                    let n = *n;
                    c.max_per_device = c.max_per_device.max(n);
                    c.total += 1;
                    c.max_total = c.max_total.max(c.total);
                }
                tokio::time::sleep(self.delay).await;
                let mut c = self.counters.lock().unwrap_or_else(PoisonError::into_inner);
                *c.in_flight.entry(key).or_default() -= 1;
                c.total -= 1;
            }
            if self.record {
                self.calls
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(call.clone());
            }
            let injected = self
                .failures
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get_mut(&(call.service.clone(), call.action.clone()))
                .and_then(VecDeque::pop_front);
            match injected {
                Some(e) => Err(e),
                None => (self.handler)(&call),
            }
        })
    }
}
