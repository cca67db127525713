//! The `battery` service.

use super::*;

actions!(
    /// `battery` actions.
    BatteryAction {
        Status = "status" (Low, reads)
            "Read the battery: level in percent, charging status, plug type, health, temperature and voltage."
        -> BatteryStatus,
    }
);

records! {
    /// What `battery.status` answers, read from `dumpsys battery`.
    BatteryStatus {
        /// Charge in percent: `level * 100 / scale`, clamped to 0–100.
        level_percent: u8 = Schema::integer("", Some(0), Some(100)),
        /// The raw `level` value.
        level: i64,
        /// The raw `scale` value (the level of a full battery, usually 100).
        scale: i64,
        /// `charging`, `discharging`, `not_charging`, `full` or `unknown`.
        status: String = Schema::enumeration(
            "charging status",
            &["charging", "discharging", "not_charging", "full", "unknown"],
        ),
        /// `good`, `overheat`, `dead`, `over_voltage`, `failure`, `cold` or `unknown`.
        health: String = Schema::enumeration(
            "battery health",
            &["good", "overheat", "dead", "over_voltage", "failure", "cold", "unknown"],
        ),
        /// The power source: `ac`, `usb`, `wireless` or `dock`; null on battery.
        plugged: Option<String> = Schema::enumeration("", &["ac", "usb", "wireless", "dock"]),
        /// Whether the battery status is `charging`.
        charging: bool,
        /// Whether a battery is present.
        present: bool,
        /// Battery temperature in °C (Android prints tenths of a degree).
        temperature_c: Option<f64>,
        /// Battery voltage in millivolts.
        voltage_mv: Option<i64>,
        /// Battery chemistry, e.g. `Li-ion`.
        technology: Option<String>,
        /// Whether these values were forced with `dumpsys battery set` or
        /// `unplug` (Android stops its real updates until `dumpsys battery
        /// reset`): they describe a test setup, not the battery.
        simulated: bool,
    }
}

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
