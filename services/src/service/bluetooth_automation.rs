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
    let [enable, disable] = switch_actions(
        "Bluetooth is on",
        (Risk::Medium, "Turn Bluetooth on."),
        (Risk::Medium, "Turn Bluetooth off."),
    );
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
            enable,
            disable,
            action(
                "paired_devices",
                Risk::Low,
                false,
                "List bonded (paired) Bluetooth devices.",
            )
            .returns(vec![list_of(
                "devices",
                "",
                vec![
                    req("address", Schema::string("")),
                    opt(
                        "name",
                        Schema::string("null when the phone has no name for it"),
                    ),
                ],
            )]),
        ],
        state: Some(|| Command::Bluetooth(BluetoothAction::Status)),
        home_assistant: vec![
            ha_binary("bluetooth_on", "Bluetooth on", "enabled", None),
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
