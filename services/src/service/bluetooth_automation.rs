//! The `bluetooth_automation` service.

use super::*;

actions!(
    /// `bluetooth_automation` actions.
    BluetoothAction {
        Status = "status" (Low, reads)
            "Read Bluetooth: on or off, adapter state, name and address."
        returns(vec![
            req("enabled", Schema::boolean("")),
            req("state", Schema::string("ON, OFF, TURNING_ON, TURNING_OFF")),
            opt("name", Schema::string("")),
            opt("address", Schema::string("")),
        ]),
        Enable = "enable" (Medium, changes) "Turn Bluetooth on."
        returns(toggle_result(IS_ON)),
        Disable = "disable" (Medium, changes) "Turn Bluetooth off."
        returns(toggle_result(IS_ON)),
        PairedDevices = "paired_devices" (Low, reads) "List bonded (paired) Bluetooth devices."
        returns(vec![list_of(
            "devices",
            "",
            vec![
                req("address", Schema::string("")),
                opt("name", Schema::string("null when the phone has no name for it")),
            ],
        )]),
    }
);

/// What `enabled` means in the switch actions' results.
const IS_ON: &str = "Bluetooth is on";

pub(super) fn spec() -> ServiceSpec {
    ServiceSpec {
        node_type: "bluetoothAutomation",
        id: "bluetooth_automation",
        description: "Bluetooth state and bonded devices.",
        actions: BluetoothAction::specs(),
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
