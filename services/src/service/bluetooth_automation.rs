//! The `bluetooth_automation` service.

use super::*;

actions!(
    /// `bluetooth_automation` actions.
    BluetoothAction {
        Status = "status" (Low, reads)
            "Read Bluetooth: on or off, adapter state, name and address."
        -> BluetoothAdapter,
        Enable = "enable" (Medium, changes) "Turn Bluetooth on."
        -> BluetoothToggle,
        Disable = "disable" (Medium, changes) "Turn Bluetooth off."
        -> BluetoothToggle,
        PairedDevices = "paired_devices" (Low, reads) "List bonded (paired) Bluetooth devices."
        -> PairedDevices,
    }
);

records! {
    /// What `bluetooth_automation.status` answers: the adapter's state.
    BluetoothAdapter {
        /// Bluetooth is switched on.
        enabled: bool,
        /// Adapter state as printed: `ON`, `OFF`, `TURNING_ON`, `TURNING_OFF`, `BLE_ON`, …
        state: String,
        /// The adapter's advertised name.
        name: Option<String>,
        /// The adapter's hardware address (vendors may mask part of it).
        address: Option<String>,
    }

    /// What turning Bluetooth on or off answers.
    BluetoothToggle {
        /// Whether Bluetooth is now on.
        enabled: bool,
    }

    /// What `bluetooth_automation.paired_devices` answers.
    PairedDevices {
        /// The bonded devices.
        devices: Vec<BluetoothDevice>,
    }

    /// A paired Bluetooth device.
    BluetoothDevice {
        /// The device's hardware address.
        address: String,
        /// The device's name, when known.
        name: Option<String>,
    }
}

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
