//! The `bluetooth_automation` service over ADB; switching uses
//! `cmd bluetooth_manager enable|disable`.
//!
//! Bluetooth: `dumpsys bluetooth_manager`.
//!
//! The dump opens with a `Bluetooth Status` block (`enabled:`, `state:`,
//! `address:`, `name:`); the adapter's own dump further down has an
//! `AdapterProperties` block whose `Bonded devices:` list reads
//! `ADDRESS [ TYPE ] NAME`, one device per line.

use super::*;
use crate::adb::parse::ParseError;
use crate::adb::parse::text::{
    colon_field, indent, non_placeholder, parse_bool, reject_device_error,
};
use droidwarden_services::{
    BluetoothAction, BluetoothAdapter, BluetoothDevice, BluetoothToggle, PairedDevices,
};
use serde::Serialize;

pub(super) async fn run(sh: &dyn Shell, action: &BluetoothAction) -> Result<Value, BridgeError> {
    let dump = || read(sh, &["dumpsys", "bluetooth_manager"], bluetooth);
    match action {
        BluetoothAction::Status => {
            let bt = dump().await?;
            answer(BluetoothAdapter {
                enabled: bt.enabled,
                state: bt.state,
                name: bt.name,
                address: bt.address,
            })
        }
        BluetoothAction::PairedDevices => {
            let bt = dump().await?;
            let devices = bt
                .bonded
                .into_iter()
                .map(|d| BluetoothDevice {
                    address: d.address,
                    name: d.name,
                })
                .collect();
            answer(PairedDevices { devices })
        }
        BluetoothAction::Enable | BluetoothAction::Disable => {
            let enable = matches!(action, BluetoothAction::Enable);
            let verb = if enable { "enable" } else { "disable" };
            read(sh, &["cmd", "bluetooth_manager", verb], parse::cmd_success).await?;
            answer(BluetoothToggle { enabled: enable })
        }
    }
}

const COMMAND: &str = "dumpsys bluetooth_manager";

/// Bluetooth adapter state and bonded (paired) devices.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BluetoothStatus {
    /// Bluetooth is switched on.
    pub enabled: bool,
    /// Adapter state as printed: `ON`, `OFF`, `TURNING_ON`, `TURNING_OFF`, `BLE_ON`, …
    pub state: String,
    /// The adapter's advertised name.
    pub name: Option<String>,
    /// The adapter's hardware address (vendors may mask part of it).
    pub address: Option<String>,
    /// Paired devices.
    pub bonded: Vec<BondedDevice>,
}

/// A paired Bluetooth device.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BondedDevice {
    /// The device's hardware address.
    pub address: String,
    /// The device's name, when known.
    pub name: Option<String>,
    /// Transport type as printed: `DUAL`, `LE`, `BR/EDR`, …
    pub kind: Option<String>,
}

/// Parses `dumpsys bluetooth_manager`.
///
/// # Errors
/// [`ParseError::MissingField`] when neither `enabled:` nor `state:` is
/// present, [`ParseError::Malformed`] when `enabled:` is not a boolean, and
/// [`ParseError::Device`] for a device error message.
pub fn bluetooth(output: &str) -> Result<BluetoothStatus, ParseError> {
    reject_device_error(output)?;
    let state = colon_field(output, "state")
        .or_else(|| colon_field(output, "State"))
        .map(str::to_owned);
    let enabled = match colon_field(output, "enabled") {
        Some(v) => parse_bool(v).ok_or_else(|| ParseError::malformed(COMMAND, "enabled", v))?,
        None => state
            .as_deref()
            .map(|s| s == "ON")
            .ok_or(ParseError::MissingField {
                command: COMMAND,
                field: "enabled",
            })?,
    };
    Ok(BluetoothStatus {
        enabled,
        state: state.unwrap_or_else(|| "UNKNOWN".to_owned()),
        name: first_value(output, &["name", "Name"]),
        address: first_value(output, &["address", "Address"]),
        bonded: bonded_devices(output),
    })
}

fn first_value(output: &str, keys: &[&str]) -> Option<String> {
    keys.iter()
        .find_map(|k| colon_field(output, k).and_then(non_placeholder))
}

/// The lines under `Bonded devices:`, up to a blank or less indented line.
fn bonded_devices(output: &str) -> Vec<BondedDevice> {
    let mut lines = output.lines();
    let Some(header) = lines.by_ref().find(|l| l.trim() == "Bonded devices:") else {
        return Vec::new();
    };
    let depth = indent(header);
    lines
        .take_while(|l| !l.trim().is_empty() && indent(l) > depth)
        .filter_map(bonded_line)
        .collect()
}

/// `41:42:B2:14:0C:C4 [ DUAL ] AirPods Pro` (older releases omit the type).
fn bonded_line(line: &str) -> Option<BondedDevice> {
    let line = line.trim();
    let (address, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    if address.matches(':').count() != 5 {
        return None;
    }
    let rest = rest.trim_start();
    let (kind, name) = match rest.strip_prefix('[').and_then(|r| r.split_once(']')) {
        Some((kind, name)) => (non_placeholder(kind), name),
        None => (None, rest),
    };
    Some(BondedDevice {
        address: address.to_owned(),
        name: non_placeholder(name),
        kind,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adb::parse::failure;

    #[test]
    fn redmi_fixture() {
        let text = fixture!("dumpsys-bluetooth_manager/redmi10a-lineage20-13.txt");
        assert_eq!(
            bluetooth(text),
            Ok(BluetoothStatus {
                enabled: true,
                state: "ON".into(),
                name: Some("Redmi 10A".into()),
                address: Some("00:C3:0A:36:F3:FF".into()),
                bonded: vec![BondedDevice {
                    address: "41:42:B2:14:0C:C4".into(),
                    name: Some("AirPods Pro".into()),
                    kind: Some("DUAL".into()),
                }],
            })
        );
    }

    #[test]
    fn oneplus_fixture_turning_off() {
        let text = fixture!("dumpsys-bluetooth_manager/oneplus12-turning-off-head6-unknown.txt");
        assert_eq!(
            bluetooth(text),
            Ok(BluetoothStatus {
                enabled: false,
                state: "TURNING_OFF".into(),
                name: Some("一加 12".into()),
                address: Some("XX:XX:XX:XX:0A:FA".into()),
                bonded: vec![],
            })
        );
    }

    #[test]
    fn bonded_variants_and_errors() {
        let text = "\
Bluetooth Status
  enabled: true
  state: ON
AdapterProperties
  Bonded devices:
    AA:BB:CC:DD:EE:01 [ LE ] Galaxy Buds2 (4C1A) LE
    AA:BB:CC:DD:EE:02 Car Kit
    AA:BB:CC:DD:EE:03 [ BR/EDR ] null
  Scan Mode Changes:
";
        let status = bluetooth(text).expect("parses");
        assert_eq!(
            status.bonded,
            vec![
                BondedDevice {
                    address: "AA:BB:CC:DD:EE:01".into(),
                    name: Some("Galaxy Buds2 (4C1A) LE".into()),
                    kind: Some("LE".into()),
                },
                BondedDevice {
                    address: "AA:BB:CC:DD:EE:02".into(),
                    name: Some("Car Kit".into()),
                    kind: None
                },
                BondedDevice {
                    address: "AA:BB:CC:DD:EE:03".into(),
                    name: None,
                    kind: Some("BR/EDR".into())
                },
            ]
        );
        assert_eq!((status.name, status.address), (None, None));
        assert_eq!(failure(bluetooth("")), "missing_field");
    }

    #[test]
    fn reads_any_text_without_panicking() {
        crate::adb::parse::tests::each_sample(|text| {
            let _ = bluetooth(text);
        });
    }
}
