//! The JSON the D-Bus API carries inside strings, typed, in one place.
//!
//! Several replies and signal arguments of `org.droidwarden.Daemon1` are
//! JSON inside a D-Bus string (`s`): the same shapes as the CLI's `--json`
//! output and the MQTT API, so that other clients need no second set of
//! types (docs/dbus-api.md). [`Json<T>`] is such a string: to D-Bus it is
//! an `s`, to Rust a `T`. The interface declares its methods and signals
//! with it (`ListDevices() -> Json<Vec<DeviceInfo>>`), and the proxy the
//! client calls is generated from that same interface, so the daemon
//! serialises each value here and the client parses it here, with the
//! same type: neither side reads or writes the JSON by hand.
//!
//! The types are those of the payloads, listed here: the registry's
//! [`DeviceInfo`] and the agent's [`PendingApproval`], [`ApprovalOutcome`],
//! [`SessionSummary`] and [`AgentEvent`] (the MQTT payloads too); the
//! daemon's health ([`HealthReport`], kept with `crate::health`, which
//! builds it), the wireless debugging reports ([`PairReport`],
//! [`DiscoverReport`], kept with `crate::wireless`, which `droidwarden
//! pair --json` and `discover --json` print too) and the automations' requests and list
//! ([`AutomationRequest`], [`AutomationSummary`], kept with the
//! automations, whose MQTT API reads the same JSON); and, defined here,
//! the status report of `Status()` ([`StatusReport`]) and the status
//! object of `ServiceStatusChanged` ([`ServiceStatus`]). What has no fixed shape stays a
//! [`serde_json::Value`]: an action's result (one schema per action), the
//! catalogue, the skills list, the other answers of `Automation` and an
//! automation's run record.

use droidwarden_agent::{AgentEvent, ApprovalOutcome, PendingApproval, SessionSummary};
use droidwarden_bridge::DeviceInfo;
use droidwarden_services::WireError;
use serde::de::{DeserializeOwned, Error as _};
use serde::ser::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use std::collections::BTreeMap;

pub use crate::automations::api::{AutomationRequest, AutomationSummary};
pub use crate::health::HealthReport;
pub use crate::wireless::{DiscoverReport, PairReport};

/// A value carried as JSON in a D-Bus string (signature `s`).
#[derive(Debug, Clone, PartialEq)]
pub struct Json<T>(pub(crate) T);

/// A type that may travel as [`Json`].
pub trait Payload: Serialize + DeserializeOwned {
    /// Whether its objects' keys go out sorted. The replies that the
    /// daemon built as `serde_json::Value` before they had a type (whose
    /// objects sort their keys) keep that order, so the text other
    /// clients receive does not change; the others keep their fields'
    /// order, as they always had.
    const SORTED_KEYS: bool = false;

    /// The JSON text.
    ///
    /// # Errors
    /// A value serde_json cannot write (a map with keys that are not
    /// strings: none of ours).
    fn to_json(&self) -> serde_json::Result<String> {
        if Self::SORTED_KEYS {
            serde_json::to_value(self).map(|v| v.to_string())
        } else {
            serde_json::to_string(self)
        }
    }
}

impl<T: Payload> Payload for Vec<T> {
    const SORTED_KEYS: bool = T::SORTED_KEYS;
}

impl Payload for Value {}
impl Payload for DeviceInfo {}
impl Payload for PendingApproval {}
impl Payload for ApprovalOutcome {}
impl Payload for droidwarden_agent::Grant {}
impl Payload for SessionSummary {}
impl Payload for AgentEvent {}
impl Payload for ServiceStatus {}
impl Payload for PairReport {}
impl Payload for DiscoverReport {}
impl Payload for StatusReport {
    const SORTED_KEYS: bool = true;
}

impl<T> zbus::zvariant::Type for Json<T> {
    const SIGNATURE: &'static zbus::zvariant::Signature = &zbus::zvariant::Signature::Str;
}

impl<T: Payload> Serialize for Json<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let text = self.0.to_json().map_err(S::Error::custom)?;
        serializer.serialize_str(&text)
    }
}

impl<'de, T: Payload> Deserialize<'de> for Json<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        serde_json::from_str(&text)
            .map(Json)
            .map_err(|e| D::Error::custom(format!("the daemon answered with invalid JSON: {e}")))
    }
}

/// `Status()`: every device (as `ListDevices`, so availability is current)
/// with the last status of each service called since the daemon started,
/// why a transport reaches no phone, and the daemon's own health.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusReport {
    /// The devices.
    pub devices: Vec<DeviceStatus>,
    /// A transport that reaches no phone, and why; left out when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<TransportProblem>,
    /// The daemon's own health.
    pub daemon: HealthReport,
}

/// A device of [`StatusReport`]: its record and its services' last status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceStatus {
    /// What `ListDevices` says of it.
    #[serde(flatten)]
    pub device: DeviceInfo,
    /// Service id → the last status of a call on it.
    pub services: BTreeMap<String, ServiceStatus>,
}

/// The status of a call on a (device, service): `details_json` of
/// `ServiceStatusChanged`, an entry of `Status()`, and the payload of the
/// MQTT status topics (fields in that payload's order: sorted).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServiceStatus {
    /// The action called.
    pub action: String,
    /// How long it took, once finished.
    pub duration_ms: Option<u64>,
    /// Why it failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<WireError>,
    /// When it finished (RFC 3339), once it has.
    pub finished_at: Option<String>,
    /// When it started (RFC 3339).
    pub started_at: String,
    /// `executing`, `success` or `error`.
    pub state: String,
}

impl From<&crate::hub::StatusEvent> for ServiceStatus {
    fn from(event: &crate::hub::StatusEvent) -> Self {
        Self {
            action: event.action.to_owned(),
            duration_ms: event
                .duration
                .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            error: event.error.clone(),
            finished_at: event.finished_at.map(crate::hub::rfc3339),
            started_at: crate::hub::rfc3339(event.started_at),
            state: event.state.as_str().to_owned(),
        }
    }
}

/// A transport that reaches no phone (adb missing, its server down).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TransportProblem {
    /// `adb`, `companion`.
    pub transport: String,
    /// Why, with its advice.
    pub error: WireError,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::{AgentHealth, AutomationCount, Part, PartError};
    use crate::hub::{CallState, StatusEvent};
    use droidwarden_services::{DeviceName, ErrorCode};
    use serde_json::json;
    use std::time::{Duration, SystemTime};

    /// `value` as [`Json`] text, and back.
    fn round_trip<T: Payload + PartialEq + std::fmt::Debug>(value: T) -> String {
        let text = value.to_json().unwrap();
        let back: T = serde_json::from_str(&text).unwrap();
        assert_eq!(back, value, "{text}");
        text
    }

    #[test]
    fn a_service_status_is_the_mqtt_status_payload() {
        let device = DeviceName::try_from("phone").unwrap();
        let started = SystemTime::UNIX_EPOCH + Duration::from_millis(1_700_000_000_123);
        let executing = StatusEvent {
            device,
            service: "battery",
            action: "status",
            state: CallState::Executing,
            started_at: started,
            finished_at: None,
            duration: None,
            error: None,
        };
        let failed = StatusEvent {
            state: CallState::Error,
            finished_at: Some(started + Duration::from_millis(7)),
            duration: Some(Duration::from_millis(7)),
            error: Some(WireError::new(ErrorCode::DeviceOffline, "gone")),
            ..executing.clone()
        };
        for event in [executing, failed] {
            let status = ServiceStatus::from(&event);
            // The same object, and the same text, as MQTT's.
            assert_eq!(serde_json::to_value(&status).unwrap(), event.to_json());
            assert_eq!(round_trip(status), event.to_json().to_string());
        }
    }

    #[test]
    fn a_status_report_keeps_its_sorted_keys_and_reads_back() {
        let report = StatusReport {
            devices: vec![DeviceStatus {
                device: DeviceInfo {
                    name: DeviceName::try_from("phone").unwrap(),
                    transport: droidwarden_bridge::TransportKind::Adb,
                    online: true,
                    serial: "127.0.0.1:5555".into(),
                    model: Some("Pixel 8".into()),
                    state_detail: None,
                },
                services: BTreeMap::new(),
            }],
            problems: vec![TransportProblem {
                transport: "adb".into(),
                error: WireError::new(ErrorCode::AdbMissing, "adb is not installed"),
            }],
            daemon: HealthReport {
                version: "0.1.0".into(),
                uptime_s: 3,
                state_dir: "/var/lib/droidwarden".into(),
                adb: None,
                broker: "embedded, on 127.0.0.1:1883".into(),
                agent: AgentHealth {
                    on: false,
                    model: None,
                    reach: None,
                },
                approvals_waiting: Part::Failed {
                    error: PartError::Text("no answer in time".into()),
                },
                automations: Some(Part::Read(AutomationCount {
                    count: 2,
                    enabled: 1,
                })),
            },
        };
        let text = round_trip(report.clone());
        // Sorted, as the `Value` it used to be built as.
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(text, value.to_string());
        assert_eq!(value["devices"][0]["services"], json!({}));
        assert_eq!(value["devices"][0]["state_detail"], Value::Null);
        assert_eq!(
            value["daemon"]["automations"],
            json!({"count": 2, "enabled": 1})
        );
        assert_eq!(
            value["daemon"]["approvals_waiting"],
            json!({"error": "no answer in time"})
        );
        // No problem: no `problems` key.
        let quiet = StatusReport {
            problems: Vec::new(),
            ..report
        };
        assert!(!round_trip(quiet).contains("problems"));
    }

    #[test]
    fn health_parts_read_back_whichever_shape_they_have() {
        for (text, part) in [
            ("3", Part::Read(3)),
            (
                r#"{"error":"no answer in time"}"#,
                Part::Failed {
                    error: PartError::Text("no answer in time".into()),
                },
            ),
            (
                r#"{"error":{"code":"internal","message":"m","retryable":false}}"#,
                Part::Failed {
                    error: PartError::Wire(WireError::new(ErrorCode::Internal, "m")),
                },
            ),
        ] {
            assert_eq!(serde_json::from_str::<Part<u64>>(text).unwrap(), part);
            assert_eq!(serde_json::to_string(&part).unwrap(), text);
        }
    }

    #[test]
    fn json_travels_as_a_dbus_string() {
        use zbus::zvariant::{LE, Type, serialized::Context, to_bytes};
        assert_eq!(Json::<StatusReport>::SIGNATURE.to_string(), "s");
        let ctx = Context::new_dbus(LE, 0);
        let value = Json(vec![json!({"b": 1, "a": [true]})]);
        let bytes = to_bytes(ctx, &value).unwrap();
        let (text, _): (String, _) = bytes.deserialize().unwrap();
        assert_eq!(text, r#"[{"a":[true],"b":1}]"#);
        let (back, _): (Json<Vec<Value>>, _) = bytes.deserialize().unwrap();
        assert_eq!(back, value);
        // Not JSON, or not the type: an error that says so.
        let bytes = to_bytes(ctx, &"[{").unwrap();
        let err = bytes.deserialize::<Json<Vec<Value>>>().unwrap_err();
        assert!(err.to_string().contains("invalid JSON"), "{err}");
    }
}
