//! droidwarden's transports: how a [`droidwarden_services::Command`] reaches a
//! phone and comes back as a typed JSON result or a structured error.
//!
//! - [`device`] defines the transport-neutral [`Device`] trait, the
//!   [`DeviceHandle`] that applies timeouts, capability checks and
//!   one-mutation-at-a-time per device, and the [`Registry`] of known devices.
//! - [`adb`] implements devices reached through the adb server:
//!   discovery and connection of network devices with the `adb_client`
//!   crate, shell commands through our own async client of the server's
//!   protocol (a call is a future on the caller's task, not a thread), shell
//!   quoting, and parsers of real Android output.
//!
//! Architecture invariant: this crate knows phones and transports, not MQTT
//! topics, D-Bus paths or configuration files. It exposes futures and
//! handles; the daemon decides what to spawn.
#![deny(missing_docs)]

/// A real device output kept in `android-bridge/fixtures/android/`, by its
/// path there (`SOURCES.md` in that folder says where each comes from).
#[cfg(test)]
macro_rules! fixture {
    ($path:literal) => {
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/fixtures/android/",
            $path
        ))
    };
}

pub mod adb;
pub mod backoff;
pub mod companion;
pub mod device;
mod error;
#[cfg(test)]
mod test_support;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod tls;

pub use device::{
    Capability, Device, DeviceEvent, DeviceHandle, DeviceInfo, Registry, TransportKind, Turn,
    TurnGuard, for_next_action,
};
pub use error::BridgeError;

use droidwarden_services::{ActionSpec, Catalogue, ServiceSpec};
use serde_json::{Value, json};

/// The whole catalogue as JSON, with the transports that can perform each
/// action: `droidwarden services --json` and D-Bus `ListServices()`.
pub fn services_json() -> Vec<Value> {
    Catalogue::get()
        .services()
        .iter()
        .map(service_json)
        .collect()
}

/// One service of [`services_json`]: its catalogue entry, each action with
/// the transports that can perform it.
pub fn service_json(s: &ServiceSpec) -> Value {
    let mut v = s.to_json();
    v["actions"] = s.actions.iter().map(|a| action_json(s, a)).collect();
    v
}

/// One action of [`service_json`]: its catalogue entry and the transports
/// that can perform it.
pub fn action_json(s: &ServiceSpec, action: &ActionSpec) -> Value {
    let mut v = action.to_json();
    v["transports"] = json!(transports(s, action.name));
    v
}

/// The transports that can perform `action` of `service`.
fn transports(service: &ServiceSpec, action: &str) -> Vec<&'static str> {
    [TransportKind::Adb, TransportKind::Companion]
        .into_iter()
        .filter(|t| t.unsupported_reason(service.id, action).is_none())
        .map(TransportKind::as_str)
        .collect()
}
