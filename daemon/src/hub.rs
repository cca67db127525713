//! The one path every call takes, whoever makes it (MQTT, Home Assistant,
//! the CLI through the daemon, the agent), and the in-process bus its
//! transitions go out on.
//!
//! A call is parsed against the catalogue, its device selected, and then
//! `executing` is announced, the call made, and `success` or `error`
//! announced. A successful read of a service's state, or a successful change
//! to a service that has state, also announces the new state. Consumers (the
//! MQTT publisher today, D-Bus and metrics later) subscribe to [`Bus`].

use droidwarden_bridge::{DeviceHandle, Registry};
use droidwarden_services::{Catalogue, Command, DeviceName, WireError};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::broadcast;

/// Where a call is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CallState {
    Executing,
    Success,
    Error,
}

impl CallState {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Executing => "executing",
            Self::Success => "success",
            Self::Error => "error",
        }
    }
}

/// One transition of a call on a (device, service).
#[derive(Debug, Clone)]
pub(crate) struct StatusEvent {
    pub(crate) device: DeviceName,
    pub(crate) service: &'static str,
    pub(crate) action: String,
    pub(crate) state: CallState,
    pub(crate) started_at: SystemTime,
    pub(crate) finished_at: Option<SystemTime>,
    pub(crate) duration: Option<Duration>,
    pub(crate) error: Option<WireError>,
}

impl StatusEvent {
    /// The retained status payload.
    pub(crate) fn to_json(&self) -> Value {
        let mut v = json!({
            "state": self.state.as_str(),
            "action": self.action,
            "started_at": rfc3339(self.started_at),
            "finished_at": self.finished_at.map(rfc3339),
            "duration_ms": self.duration.map(|d| d.as_millis() as u64),
        });
        if let Some(error) = &self.error {
            v["error"] = json!(error);
        }
        v
    }
}

/// The latest known state of a (device, service).
#[derive(Debug, Clone)]
pub(crate) struct StateEvent {
    pub(crate) device: DeviceName,
    pub(crate) service: &'static str,
    pub(crate) state: Value,
}

/// What goes on the bus.
#[derive(Debug, Clone)]
pub(crate) enum BusEvent {
    Status(StatusEvent),
    State(StateEvent),
    /// Something a phone pushed (a notification, a battery change …).
    PhoneEvent {
        device: DeviceName,
        kind: &'static str,
        data: Value,
    },
}

/// Broadcast of [`BusEvent`]s.
pub(crate) type Bus = broadcast::Sender<BusEvent>;

pub(crate) fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}

/// The read that gives a service's state, for services that have one.
pub(crate) fn state_action(service: &str) -> Option<(&'static str, Value)> {
    Some(match service {
        "battery" => ("status", json!({})),
        "network" => ("status", json!({})),
        "wifi_automation" => ("status", json!({})),
        "bluetooth_automation" => ("status", json!({})),
        "airplane_mode" => ("status", json!({})),
        "audio_automation" => ("get_volume", json!({"stream": "music"})),
        "screen_control" => ("status", json!({})),
        "device_state" => ("status", json!({})),
        "media_control" => ("status", json!({})),
        _ => return None,
    })
}

/// A request to perform one action, as every caller expresses it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CallRequest {
    pub(crate) device: Option<String>,
    pub(crate) service: String,
    pub(crate) action: String,
    pub(crate) params: Value,
}

/// The call path and the bus.
#[derive(Debug, Clone)]
pub(crate) struct Hub {
    registry: Arc<Registry>,
    bus: Bus,
}

impl Hub {
    pub(crate) fn new(registry: Arc<Registry>) -> Self {
        // Every call produces two or three events; 4096 absorbs bursts of
        // a thousand calls while a slow subscriber catches up. A subscriber
        // that lags is told how many it missed.
        let (bus, _) = broadcast::channel(4096);
        Self { registry, bus }
    }

    pub(crate) fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    pub(crate) fn subscribe(&self) -> broadcast::Receiver<BusEvent> {
        self.bus.subscribe()
    }

    /// Announce a service's state learnt some other way (a phone's event).
    pub(crate) fn announce_state(&self, device: DeviceName, service: &'static str, state: Value) {
        self.announce(BusEvent::State(StateEvent {
            device,
            service,
            state,
        }));
    }

    /// Announce an event a phone pushed.
    pub(crate) fn announce_event(&self, device: DeviceName, kind: &'static str, data: Value) {
        self.announce(BusEvent::PhoneEvent { device, kind, data });
    }

    fn announce(&self, event: BusEvent) {
        // No subscriber (the CLI) is fine.
        let _ = self.bus.send(event);
    }

    /// Perform a call, announcing its transitions.
    ///
    /// # Errors
    /// The call's error, in wire form.
    pub(crate) async fn call(&self, request: &CallRequest) -> Result<Value, WireError> {
        let command = Catalogue::get()
            .parse(&request.service, &request.action, &request.params)
            .map_err(WireError::from)?;
        let device = self
            .registry
            .select(request.device.as_deref())
            .map_err(|e| e.to_wire())?;
        let result = self.run(&device, &command, true).await;
        if result.is_ok() {
            self.after_success(&device, &command, result.as_ref().ok())
                .await;
        }
        result
    }

    /// Read a service's state without status announcements (polling).
    pub(crate) async fn poll_state(&self, device: &DeviceHandle, service: &'static str) {
        let Some((action, params)) = state_action(service) else {
            return;
        };
        let Ok(command) = Catalogue::get().parse(service, action, &params) else {
            return;
        };
        match self.run(device, &command, false).await {
            Ok(state) => self.announce(BusEvent::State(StateEvent {
                device: device.info().name,
                service,
                state,
            })),
            Err(e) => {
                tracing::debug!(device = %device.info().name, service, error = %e, "state poll failed")
            }
        }
    }

    async fn run(
        &self,
        device: &DeviceHandle,
        command: &Command,
        announce: bool,
    ) -> Result<Value, WireError> {
        let name = device.info().name;
        let service = command.service_id();
        let action = command.action_name();
        let started_at = SystemTime::now();
        let start = Instant::now();
        if announce {
            self.announce(BusEvent::Status(StatusEvent {
                device: name.clone(),
                service,
                action: action.clone(),
                state: CallState::Executing,
                started_at,
                finished_at: None,
                duration: None,
                error: None,
            }));
        }
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
        if announce {
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
        }
        result
    }

    /// Keep the state topic true after a call: a state read is the state; a
    /// change is followed by a fresh read.
    async fn after_success(
        &self,
        device: &DeviceHandle,
        command: &Command,
        result: Option<&Value>,
    ) {
        let service = command.service_id();
        let Some((state_action, state_params)) = state_action(service) else {
            return;
        };
        let is_state_read =
            command.action_name() == state_action && command.params_json() == state_params;
        if is_state_read {
            if let Some(state) = result {
                self.announce(BusEvent::State(StateEvent {
                    device: device.info().name,
                    service,
                    state: state.clone(),
                }));
            }
            return;
        }
        let mutates = Catalogue::get()
            .action(service, &command.action_name())
            .map(|(_, a)| a.mutates)
            .unwrap_or(false);
        if mutates {
            self.poll_state(device, service).await;
        }
    }
}
