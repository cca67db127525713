//! The last status of every (device, service), kept in memory for
//! `Status()`: fed by the hub's bus, forgotten when a device is removed.
//! Nothing here survives a restart; MQTT's retained status topics are the
//! durable record.

use super::json::{DeviceStatus, ServiceStatus};
use crate::hub::StatusEvent;
use droidwarden_bridge::DeviceInfo;
use droidwarden_services::DeviceName;
use std::collections::BTreeMap;

/// Last status per (device, service).
#[derive(Debug, Default)]
pub(crate) struct StatusTable {
    last: BTreeMap<(DeviceName, &'static str), ServiceStatus>,
}

impl StatusTable {
    /// Remember a transition, `status` being its payload (it replaces the
    /// one before).
    pub(crate) fn record(&mut self, event: &StatusEvent, status: ServiceStatus) {
        self.last
            .insert((event.device.clone(), event.service), status);
    }

    /// Forget a device that is no longer known.
    pub(crate) fn forget(&mut self, device: &DeviceName) {
        self.last.retain(|(d, _), _| d != device);
    }

    /// The devices given (the registry's list, so availability is
    /// current), each with the last status of its services.
    pub(crate) fn devices(&self, devices: Vec<DeviceInfo>) -> Vec<DeviceStatus> {
        devices
            .into_iter()
            .map(|device| {
                let services = self
                    .last
                    .iter()
                    .filter(|((d, _), _)| *d == device.name)
                    .map(|((_, service), status)| ((*service).to_owned(), status.clone()))
                    .collect();
                DeviceStatus { device, services }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hub::CallState;
    use droidwarden_bridge::TransportKind;
    use serde_json::json;
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
        let record = |table: &mut StatusTable, e: StatusEvent| {
            table.record(&e, ServiceStatus::from(&e));
        };
        record(&mut table, event("a", "battery", CallState::Executing));
        record(&mut table, event("a", "battery", CallState::Success));
        record(&mut table, event("a", "network", CallState::Error));
        record(&mut table, event("b", "battery", CallState::Executing));
        let json = |devices: Vec<DeviceStatus>| serde_json::to_value(devices).unwrap();
        let devices = json(table.devices(vec![info("a", true), info("b", false), info("c", true)]));
        let devices = devices.as_array().unwrap();
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
        let v = json(table.devices(vec![info("a", true), info("b", false)]));
        assert_eq!(v[0]["services"], json!({}));
        assert_eq!(v[1]["services"]["battery"]["state"], "executing");
    }
}
