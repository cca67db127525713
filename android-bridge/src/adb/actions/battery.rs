//! The `battery` service over ADB.
//!
//! `dumpsys battery`: charge level, charging state and health.
//!
//! Every Android release prints `key: value` lines under `Current Battery
//! Service state:`; newer ones add lines (`Dock powered`, `Charging state`,
//! one-space-indented broadcast times) that are ignored here.
//!
//! `dumpsys battery set|unplug` forces values and stops the real updates
//! until `dumpsys battery reset`; BatteryService then prints `(UPDATES
//! STOPPED -- use 'reset' to restart)` under its header (Android 5 and
//! later). Such values are reported, flagged `simulated`.

use super::*;
use crate::adb::parse::ParseError;
use crate::adb::parse::text::{ColonFields, grouped_int, parse_bool, reject_device_error};
use droidwarden_services::BatteryAction;

pub(super) async fn run(sh: &dyn Shell, action: &BatteryAction) -> Result<Value, BridgeError> {
    let BatteryAction::Status = action;
    answer(read(sh, &["dumpsys", "battery"], battery).await?)
}

pub use droidwarden_services::BatteryStatus;

const COMMAND: &str = "dumpsys battery";

/// Parses `dumpsys battery`.
///
/// # Errors
/// [`ParseError::MissingField`] when `level`, `scale`, `status`, `health` or
/// `present` is absent, [`ParseError::Malformed`] when one of them is not a
/// number (or boolean) or `scale` is not positive, and
/// [`ParseError::Device`] when the output is a device error message.
pub fn battery(output: &str) -> Result<BatteryStatus, ParseError> {
    reject_device_error(output)?;
    let fields = ColonFields::of(output);
    let level = int_field(&fields, "level")?;
    let scale = int_field(&fields, "scale")?;
    if scale <= 0 {
        return Err(ParseError::malformed(
            COMMAND,
            "scale is not positive",
            &scale.to_string(),
        ));
    }
    let status_code = int_field(&fields, "status")?;
    let present = fields
        .get("present")
        .ok_or(ParseError::MissingField {
            command: COMMAND,
            field: "present",
        })
        .and_then(|v| parse_bool(v).ok_or_else(|| ParseError::malformed(COMMAND, "present", v)))?;
    Ok(BatteryStatus {
        level_percent: percent(level, scale),
        level,
        scale,
        status: status_name(status_code).to_owned(),
        health: health_name(int_field(&fields, "health")?).to_owned(),
        plugged: plugged(&fields),
        charging: status_code == 2,
        present,
        temperature_c: optional_int(&fields, "temperature").map(|t| t as f64 / 10.0),
        voltage_mv: optional_int(&fields, "voltage"),
        technology: fields
            .get("technology")
            .filter(|t| !t.is_empty())
            .map(str::to_owned),
        simulated: simulated(output),
    })
}

/// BatteryService's mark of values forced with `dumpsys battery set` or
/// `unplug`, on its own line under the header.
fn simulated(output: &str) -> bool {
    output
        .lines()
        .any(|l| l.trim_start().starts_with("(UPDATES STOPPED"))
}

fn int_field(fields: &ColonFields<'_>, field: &'static str) -> Result<i64, ParseError> {
    let value = fields.get(field).ok_or(ParseError::MissingField {
        command: COMMAND,
        field,
    })?;
    grouped_int(value).ok_or_else(|| ParseError::malformed(COMMAND, field, value))
}

fn optional_int(fields: &ColonFields<'_>, field: &str) -> Option<i64> {
    grouped_int(fields.get(field)?)
}

fn percent(level: i64, scale: i64) -> u8 {
    let pct = (i128::from(level) * 100 / i128::from(scale)).clamp(0, 100);
    u8::try_from(pct).unwrap_or(100)
}

/// `BatteryManager.BATTERY_STATUS_*`.
fn status_name(code: i64) -> &'static str {
    match code {
        2 => "charging",
        3 => "discharging",
        4 => "not_charging",
        5 => "full",
        _ => "unknown",
    }
}

/// `BatteryManager.BATTERY_HEALTH_*`.
fn health_name(code: i64) -> &'static str {
    match code {
        2 => "good",
        3 => "overheat",
        4 => "dead",
        5 => "over_voltage",
        6 => "failure",
        7 => "cold",
        _ => "unknown",
    }
}

fn plugged(fields: &ColonFields<'_>) -> Option<String> {
    [
        ("AC powered", "ac"),
        ("USB powered", "usb"),
        ("Wireless powered", "wireless"),
        ("Dock powered", "dock"),
    ]
    .into_iter()
    .find(|(key, _)| fields.get(key).and_then(parse_bool) == Some(true))
    .map(|(_, name)| name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adb::parse::failure;

    fn status(
        level_percent: u8,
        status: &str,
        health: &str,
        plugged: Option<&str>,
        temperature_c: f64,
        voltage_mv: i64,
    ) -> BatteryStatus {
        BatteryStatus {
            level_percent,
            level: i64::from(level_percent),
            scale: 100,
            status: status.into(),
            health: health.into(),
            plugged: plugged.map(Into::into),
            charging: status == "charging",
            present: true,
            temperature_c: Some(temperature_c),
            voltage_mv: Some(voltage_mv),
            technology: Some("Li-ion".into()),
            simulated: false,
        }
    }

    #[test]
    fn fixtures() {
        let cases = [
            (
                fixture!("dumpsys-battery/adbjsoncli-emulator-17.txt"),
                status(100, "not_charging", "good", None, 25.0, 5000),
            ),
            (
                fixture!("dumpsys-battery/appium-adb-issue133-unknown.txt"),
                status(89, "charging", "good", Some("ac"), 0.0, 0),
            ),
            (
                fixture!("dumpsys-battery/clusterfuzz-pr4327-unknown.txt"),
                status(80, "not_charging", "overheat", Some("ac"), 18.0, 4200),
            ),
            (
                fixture!("dumpsys-battery/syzkaller-issue79-unknown.txt"),
                status(19, "charging", "good", Some("ac"), 27.5, 3764),
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(battery(text), Ok(expected));
        }
    }

    #[test]
    fn odd_scales_and_negative_temperatures() {
        let text = "  USB powered: true\n  status: 5\n  health: 7\n  present: true\n  level: 1500\n  scale: 1000\n  temperature: -45\n";
        let b = battery(text).expect("parses");
        assert_eq!(b.level_percent, 100);
        assert_eq!((b.status.as_str(), b.health.as_str()), ("full", "cold"));
        assert_eq!(b.plugged.as_deref(), Some("usb"));
        assert_eq!(b.temperature_c, Some(-4.5));
        assert_eq!((b.voltage_mv, b.technology), (None, None));
    }

    #[test]
    fn grouped_numbers_are_read_whole() {
        // Synthetic, hostile: values grouped by thousands. The old reading
        // dropped `voltage` (unreadable) and `level` made the whole read fail.
        let text = "  status: 3\n  health: 2\n  present: true\n  level: 1,500\n  scale: 10,000\n  voltage: 4,200\n";
        let b = battery(text).expect("parses");
        assert_eq!((b.level, b.scale, b.level_percent), (1500, 10_000, 15));
        assert_eq!(b.voltage_mv, Some(4200));
        let ambiguous = text.replace("voltage: 4,200", "voltage: 4,2");
        assert_eq!(battery(&ambiguous).expect("parses").voltage_mv, None);
    }

    #[test]
    fn errors() {
        let zero = "status: 2\nhealth: 2\npresent: true\nlevel: 5\nscale: 0\n";
        assert_eq!(failure(battery(zero)), "malformed");
        assert_eq!(
            battery("status: 2\n"),
            Err(ParseError::MissingField {
                command: COMMAND,
                field: "level"
            })
        );
        assert_eq!(failure(battery("Can't find service: battery\n")), "device");
    }

    #[test]
    fn reads_any_text_without_panicking() {
        crate::adb::parse::tests::each_sample(|text| {
            let _ = battery(text);
        });
    }
}
