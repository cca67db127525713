//! The `battery` service.

use super::*;

actions!(
    /// `battery` actions.
    BatteryAction {
        Status = "status" (Low, reads)
            "Read the battery: level in percent, charging status, plug type, health, temperature and voltage."
        returns(vec![
            req("level_percent", Schema::integer("charge in percent", Some(0), Some(100))),
            req("level", Schema::integer("raw level", None, None)),
            req("scale", Schema::integer("raw scale", None, None)),
            req("status", Schema::enumeration("charging status", &["charging", "discharging", "not_charging", "full", "unknown"])),
            req("health", Schema::enumeration("battery health", &["good", "overheat", "dead", "over_voltage", "failure", "cold", "unknown"])),
            opt("plugged", Schema::enumeration("power source", &["ac", "usb", "wireless", "dock"])),
            req("charging", Schema::boolean("whether it is charging")),
            req("present", Schema::boolean("whether a battery is present")),
            opt("temperature_c", Schema::number("temperature in °C")),
            opt("voltage_mv", Schema::integer("voltage in mV", None, None)),
            opt("technology", Schema::string("battery chemistry")),
        ]),
    }
);

pub(super) fn spec() -> ServiceSpec {
    ServiceSpec {
        node_type: "batteryMonitor",
        id: "battery",
        description: "Battery level, charging state and health.",
        actions: BatteryAction::specs(),
        state: Some(|| Command::Battery(BatteryAction::Status)),
        home_assistant: vec![
            ha_sensor(
                "battery",
                "Battery",
                "level_percent",
                Some("battery"),
                Some("%"),
            ),
            ha_binary("charging", "Charging", "charging", Some("battery_charging")),
        ],
        companion_event: Some("battery"),
    }
}
