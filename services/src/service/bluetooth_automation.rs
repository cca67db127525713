//! The `bluetooth_automation` service.

use super::*;

actions!(
    /// `bluetooth_automation` actions.
    BluetoothAction {
        /// Bluetooth state.
        Status = "status",
        /// Turn Bluetooth on.
        Enable = "enable",
        /// Turn Bluetooth off.
        Disable = "disable",
        /// Bonded devices.
        PairedDevices = "paired_devices",
    }
);

pub(super) fn spec() -> ServiceSpec {
    ServiceSpec {
        node_type: "bluetoothAutomation",
        id: "bluetooth_automation",
        description: "Bluetooth state and bonded devices.",
        actions: vec![
            action(
                "status",
                Risk::Low,
                false,
                "Read Bluetooth: on or off, adapter state, name and address.",
            )
            .returns(vec![
                req("enabled", Schema::boolean("")),
                req("state", Schema::string("ON, OFF, TURNING_ON, TURNING_OFF")),
                opt("name", Schema::string("")),
                opt("address", Schema::string("")),
            ]),
            action("enable", Risk::Medium, true, "Turn Bluetooth on.")
                .returns(toggle_result("Bluetooth is on")),
            action("disable", Risk::Medium, true, "Turn Bluetooth off.")
                .returns(toggle_result("Bluetooth is on")),
            action(
                "paired_devices",
                Risk::Low,
                false,
                "List bonded (paired) Bluetooth devices.",
            )
            .returns(vec![req(
                "devices",
                Schema::array(
                    "",
                    Schema::object(
                        "",
                        vec![
                            req("address", Schema::string("")),
                            opt(
                                "name",
                                Schema::string("null when the phone has no name for it"),
                            ),
                        ],
                    ),
                ),
            )]),
        ],
        state: Some(|| Command::Bluetooth(BluetoothAction::Status)),
        home_assistant: vec![
            HaEntity {
                object_id: "bluetooth_on",
                name: "Bluetooth on",
                kind: HaKind::BinarySensor {
                    field: "enabled",
                    device_class: None,
                },
            },
            ha_switch(
                "bluetooth",
                "Bluetooth",
                || Command::Bluetooth(BluetoothAction::Enable),
                || Command::Bluetooth(BluetoothAction::Disable),
            ),
        ],
        companion_event: Some("bluetooth"),
    }
}
