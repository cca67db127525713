//! The last status of every (device, service), kept in memory for
//! `Status()`: fed by the hub's bus, forgotten when a device is removed.
//! Nothing here survives a restart; MQTT's retained status topics are the
//! durable record.

use crate::hub::StatusEvent;
use droidwarden_bridge::DeviceInfo;
use droidwarden_services::DeviceName;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// Last status per (device, service).
#[derive(Debug, Default)]
pub(crate) struct StatusTable {
    last: BTreeMap<(DeviceName, &'static str), Value>,
}

impl StatusTable {
    /// Remember a transition (it replaces the one before).
    pub(crate) fn record(&mut self, event: &StatusEvent) {
        self.last
            .insert((event.device.clone(), event.service), event.to_json());
    }

    /// Forget a device that is no longer known.
    pub(crate) fn forget(&mut self, device: &DeviceName) {
        self.last.retain(|(d, _), _| d != device);
    }

    /// `{"devices": [{…device…, "services": {service: status}}]}` for the
    /// devices given (the registry's list, so availability is current).
    pub(crate) fn to_json(&self, devices: &[DeviceInfo]) -> Value {
        let devices: Vec<Value> = devices
            .iter()
            .map(|info| {
                let services: Map<String, Value> = self
                    .last
                    .iter()
                    .filter(|((d, _), _)| *d == info.name)
                    .map(|((_, service), status)| ((*service).to_owned(), status.clone()))
                    .collect();
                let mut device = serde_json::to_value(info).unwrap_or_else(|_| json!({}));
                device["services"] = Value::Object(services);
                device
            })
            .collect();
        json!({ "devices": devices })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hub::CallState;
    use droidwarden_bridge::TransportKind;
    use std::time::{Duration, SystemTime};

    fn name(n: &str) -> DeviceName {
        DeviceName::try_from(n).unwrap()
    }

    fn info(n: &str, online: bool) -> DeviceInfo {
        DeviceInfo {
            name: name(n),
            transport: TransportKind::Adb,
            online,
            serial: format!("{n}-serial"),
            model: None,
            state_detail: None,
        }
    }

    fn event(device: &str, service: &'static str, state: CallState) -> StatusEvent {
        StatusEvent {
            device: name(device),
            service,
            action: "status",
            state,
            started_at: SystemTime::UNIX_EPOCH,
            finished_at: (state != CallState::Executing).then_some(SystemTime::UNIX_EPOCH),
            duration: (state != CallState::Executing).then_some(Duration::from_millis(7)),
            error: None,
        }
    }

    #[test]
    fn the_last_status_of_each_service_is_kept_per_device() {
        let mut table = StatusTable::default();
        table.record(&event("a", "battery", CallState::Executing));
        table.record(&event("a", "battery", CallState::Success));
        table.record(&event("a", "network", CallState::Error));
        table.record(&event("b", "battery", CallState::Executing));
        let v = table.to_json(&[info("a", true), info("b", false), info("c", true)]);
        let devices = v["devices"].as_array().unwrap();
        assert_eq!(devices.len(), 3);
        assert_eq!(devices[0]["name"], "a");
        assert_eq!(devices[0]["online"], true);
        assert_eq!(devices[0]["services"]["battery"]["state"], "success");
        assert_eq!(devices[0]["services"]["battery"]["duration_ms"], 7);
        assert_eq!(devices[0]["services"]["network"]["state"], "error");
        assert_eq!(devices[1]["online"], false);
        assert_eq!(devices[1]["services"]["battery"]["state"], "executing");
        assert_eq!(devices[2]["services"], json!({}));

        table.forget(&name("a"));
        let v = table.to_json(&[info("a", true), info("b", false)]);
        assert_eq!(v["devices"][0]["services"], json!({}));
        assert_eq!(v["devices"][1]["services"]["battery"]["state"], "executing");
    }
}
