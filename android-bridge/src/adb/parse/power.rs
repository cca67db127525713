//! `dumpsys power`: wakefulness, screen and charger state.
//!
//! The `Power Manager State:` block prints `mWakefulness=Awake`,
//! `mIsPowered=…`, `mBatteryLevel=…`; Samsung adds fields written `key: value`.
//! The display's real state, when the dump gets that far, is the
//! `Display Power: state=ON` line.

use serde::Serialize;

use super::error::ParseError;
use super::text::{assigned_field, parse_bool, reject_device_error, token_after};

const COMMAND: &str = "dumpsys power";

/// Power manager state.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PowerState {
    /// `Awake`, `Asleep`, `Dreaming` or `Dozing`.
    pub wakefulness: String,
    /// The screen is on: `Display Power: state=ON` when printed, otherwise
    /// wakefulness `Awake` or `Dreaming`.
    pub screen_on: bool,
    /// A charger is connected (`mIsPowered`).
    pub plugged: bool,
    /// `mBatteryLevel`.
    pub battery_level: Option<i64>,
    /// Battery saver (`mLowPowerModeEnabled` or `mBatterySaverEnabled`), when printed.
    pub battery_saver: Option<bool>,
}

/// Parses `dumpsys power`.
///
/// # Errors
/// [`ParseError::MissingField`] without `mWakefulness` or `mIsPowered`,
/// [`ParseError::Malformed`] when `mIsPowered` is not a boolean, and
/// [`ParseError::Device`] for a device error message.
pub fn power(output: &str) -> Result<PowerState, ParseError> {
    reject_device_error(output)?;
    let wakefulness = assigned_field(output, "mWakefulness")
        .ok_or(ParseError::MissingField {
            command: COMMAND,
            field: "mWakefulness",
        })?
        .to_owned();
    let powered = assigned_field(output, "mIsPowered").ok_or(ParseError::MissingField {
        command: COMMAND,
        field: "mIsPowered",
    })?;
    let plugged =
        parse_bool(powered).ok_or_else(|| ParseError::malformed(COMMAND, "mIsPowered", powered))?;
    let awake = matches!(wakefulness.as_str(), "Awake" | "Dreaming");
    let screen_on = display_state(output).unwrap_or(awake);
    Ok(PowerState {
        screen_on,
        plugged,
        battery_level: assigned_field(output, "mBatteryLevel").and_then(|v| v.parse().ok()),
        battery_saver: ["mLowPowerModeEnabled", "mBatterySaverEnabled"]
            .iter()
            .find_map(|k| assigned_field(output, k).and_then(parse_bool)),
        wakefulness,
    })
}

/// `Display Power: state=ON` → on; `OFF`, `DOZE`, `DOZE_SUSPEND` → off.
fn display_state(output: &str) -> Option<bool> {
    let line = output
        .lines()
        .find(|l| l.trim_start().starts_with("Display Power:"))?;
    let state = token_after(line, "state=")?;
    Some(matches!(state, "ON" | "ON_SUSPEND" | "VR"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adb::parse::failure;

    #[test]
    fn fixtures() {
        let emulator = fixture!("dumpsys-power/adbjsoncli-emulator-17.txt");
        assert_eq!(
            power(emulator),
            Ok(PowerState {
                wakefulness: "Awake".into(),
                screen_on: true,
                plugged: false,
                battery_level: Some(100),
                battery_saver: None,
            })
        );
        let samsung = fixture!("dumpsys-power/uiautomator2-issue444-samsung-fragment.txt");
        assert_eq!(
            power(samsung),
            Ok(PowerState {
                wakefulness: "Awake".into(),
                screen_on: true,
                plugged: false,
                battery_level: Some(81),
                battery_saver: Some(false),
            })
        );
    }

    #[test]
    fn battery_saver_from_the_state_machine_of_android_10_and_later() {
        // Synthetic: `Power Manager State:` without `mLowPowerModeEnabled`
        // (as in the real Android 17 fixture), then the block that
        // BatterySaverStateMachine.dump prints on Android 10 and later
        // (its field names and indentation, values chosen).
        let tail = "\nBattery saver state machine:\n  Enabled=true\n    full=true\n    adaptive=false\n  mState=2\n  mSettingBatterySaverEnabled=true\n";
        let text = format!("Power Manager State:\n  mWakefulness=Awake\n  mIsPowered=false\n  mBatteryLevel=1,200\n{tail}");
        let state = power(&text).expect("parses");
        assert_eq!(state.battery_saver, Some(true));
        assert_eq!(state.battery_level, Some(1200));
        let off = text.replace("Enabled=true", "Enabled=false");
        assert_eq!(power(&off).expect("parses").battery_saver, Some(false));
        // BatterySavingStats' line, printed since Android 9.
        let stats = "  mWakefulness=Awake\n  mIsPowered=false\nBattery saving stats:\n  Battery Saver is currently: ON\n";
        assert_eq!(power(stats).expect("parses").battery_saver, Some(true));
        // The real Android 17 fragment says nothing about it: unknown.
        let emulator = fixture!("dumpsys-power/adbjsoncli-emulator-17.txt");
        assert_eq!(power(emulator).expect("parses").battery_saver, None);
    }

    #[test]
    fn display_line_and_states() {
        let cases = [
            ("  mWakefulness=Asleep\n  mIsPowered=true\n", false),
            ("  mWakefulness=Dreaming\n  mIsPowered=true\n", true),
            ("  mWakefulness=Dozing\n  mIsPowered=true\n", false),
            (
                "  mWakefulness=Awake\n  mIsPowered=true\nDisplay Power: state=OFF\n",
                false,
            ),
            (
                "  mWakefulness=Asleep\n  mIsPowered=true\nDisplay Power: state=ON\n",
                true,
            ),
        ];
        for (text, screen_on) in cases {
            let state = power(text).expect("parses");
            assert_eq!(state.screen_on, screen_on, "{text:?}");
            assert!(state.plugged);
        }
        assert_eq!(failure(power("mIsPowered=true")), "missing_field");
    }
}
