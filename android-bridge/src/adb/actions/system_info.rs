//! The `system_info` service over ADB.
//!
//! System information: `getprop`, `/proc/meminfo`, `/proc/uptime` and `uptime`.

use super::*;
use crate::adb::parse::ParseError;
use crate::adb::parse::text::reject_device_error;
use droidwarden_services::{SystemInfo, SystemInfoAction};
use serde::Serialize;
use std::collections::BTreeMap;

pub(super) async fn run(sh: &dyn Shell, action: &SystemInfoAction) -> Result<Value, BridgeError> {
    let SystemInfoAction::Info = action;
    let props = read(sh, &["getprop"], getprop).await?;
    let facts = parsed(sh.device_name(), &["getprop"], device_props(&props))?;
    // Some vendors restrict /proc; the facts above are still worth returning.
    let memory = read(sh, &["cat", "/proc/meminfo"], meminfo).await.ok();
    let uptime = read(sh, &["cat", "/proc/uptime"], uptime_seconds)
        .await
        .ok();
    answer(SystemInfo {
        model: facts.model,
        manufacturer: facts.manufacturer,
        brand: facts.brand,
        device: facts.device,
        android_version: facts.android_version,
        sdk: facts.sdk,
        build_id: facts.build_id,
        serial: facts.serial,
        memory_total_kb: memory.as_ref().map(|m| m.total_kb),
        memory_available_kb: memory.and_then(|m| m.available_kb),
        uptime_s: uptime,
    })
}

/// Identity of the phone, from system properties.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceProps {
    /// `ro.product.model`, e.g. `Pixel 8`.
    pub model: String,
    /// `ro.product.manufacturer`.
    pub manufacturer: String,
    /// `ro.product.brand`.
    pub brand: String,
    /// `ro.product.device` (the device code name).
    pub device: String,
    /// `ro.build.version.release`, e.g. `14`.
    pub android_version: String,
    /// `ro.build.version.sdk`, e.g. 34.
    pub sdk: Option<u32>,
    /// `ro.build.id`.
    pub build_id: String,
    /// `ro.serialno`.
    pub serial: Option<String>,
}

/// Memory totals from `/proc/meminfo`, in kB.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemInfo {
    /// `MemTotal`.
    pub total_kb: u64,
    /// `MemAvailable` (kernels before 3.14 lack it).
    pub available_kb: Option<u64>,
    /// `MemFree`.
    pub free_kb: u64,
}

/// Parses `getprop` (all properties) into a sorted map.
///
/// Lines read `[key]: [value]`; a value may be empty, contain `]`, or (rarely)
/// span several lines, which are joined with `\n`.
///
/// # Errors
/// [`ParseError::Malformed`] when the output has text but no property line,
/// [`ParseError::Device`] for a device error message.
pub fn getprop(output: &str) -> Result<BTreeMap<String, String>, ParseError> {
    reject_device_error(output)?;
    let mut props = BTreeMap::new();
    let mut open: Option<(String, String)> = None;
    for line in output.lines() {
        if let Some((key, value)) = prop_line(line) {
            close(&mut props, open.take());
            match value.strip_suffix(']') {
                Some(done) => {
                    props.insert(key.to_owned(), done.to_owned());
                }
                None => open = Some((key.to_owned(), value.to_owned())),
            }
        } else if let Some((_, value)) = open.as_mut() {
            value.push('\n');
            value.push_str(line);
            if line.ends_with(']') {
                close(&mut props, open.take());
            }
        }
    }
    close(&mut props, open.take());
    if props.is_empty() && !output.trim().is_empty() {
        return Err(ParseError::malformed(
            "getprop",
            "no [key]: [value] line",
            output,
        ));
    }
    Ok(props)
}

/// `[key]: [value…` → (`key`, `value…`), the value still carrying its `]`.
fn prop_line(line: &str) -> Option<(&str, &str)> {
    let rest = line.strip_prefix('[')?;
    let (key, value) = rest.split_once("]: [")?;
    (!key.is_empty() && !key.contains(char::is_whitespace)).then_some((key, value))
}

fn close(props: &mut BTreeMap<String, String>, open: Option<(String, String)>) {
    if let Some((key, value)) = open {
        let value = value.strip_suffix(']').unwrap_or(&value).to_owned();
        props.insert(key, value);
    }
}

/// Picks the identity properties out of a [`getprop`] map.
///
/// Android 10+ devices may leave `ro.product.X` unset and only fill the
/// partition-specific `ro.product.vendor.X`, `ro.product.odm.X` or
/// `ro.product.system.X`; those are used, in that order, as fallbacks.
///
/// # Errors
/// [`ParseError::MissingField`] naming the first identity property that is
/// absent or empty (SDK and serial number are optional).
pub fn device_props(props: &BTreeMap<String, String>) -> Result<DeviceProps, ParseError> {
    let get = |key: &'static str| -> Result<String, ParseError> {
        lookup(props, key).ok_or(ParseError::MissingField {
            command: "getprop",
            field: key,
        })
    };
    Ok(DeviceProps {
        model: get("ro.product.model")?,
        manufacturer: get("ro.product.manufacturer")?,
        brand: get("ro.product.brand")?,
        device: get("ro.product.device")?,
        android_version: get("ro.build.version.release")?,
        sdk: lookup(props, "ro.build.version.sdk").and_then(|s| s.parse().ok()),
        build_id: get("ro.build.id")?,
        serial: lookup(props, "ro.serialno"),
    })
}

fn lookup(props: &BTreeMap<String, String>, key: &str) -> Option<String> {
    let non_empty = |k: &str| props.get(k).map(|v| v.trim()).filter(|v| !v.is_empty());
    if let Some(v) = non_empty(key) {
        return Some(v.to_owned());
    }
    let suffix = key.strip_prefix("ro.product.")?;
    ["vendor", "odm", "system"]
        .iter()
        .find_map(|part| non_empty(&format!("ro.product.{part}.{suffix}")))
        .map(str::to_owned)
}

/// Parses `cat /proc/meminfo`.
///
/// # Errors
/// [`ParseError::MissingField`] without `MemTotal` or `MemFree`,
/// [`ParseError::Device`] for a device error message.
pub fn meminfo(output: &str) -> Result<MemInfo, ParseError> {
    reject_device_error(output)?;
    let kb = |key: &'static str| -> Option<u64> {
        output.lines().find_map(|line| {
            let (k, v) = line.split_once(':')?;
            (k.trim() == key).then(|| v.split_whitespace().next()?.parse().ok())?
        })
    };
    let required = |key: &'static str| {
        kb(key).ok_or(ParseError::MissingField {
            command: "cat /proc/meminfo",
            field: key,
        })
    };
    Ok(MemInfo {
        total_kb: required("MemTotal")?,
        available_kb: kb("MemAvailable"),
        free_kb: required("MemFree")?,
    })
}

/// Parses the time since boot, in seconds.
///
/// Accepts `/proc/uptime` (`12345.67 23456.78`, the first number) and, with
/// minute precision, the `uptime` command (` 08:15:28 up 12:45,  load
/// average: …`, `up 3 days,  2:05`, `up 5 min`).
///
/// # Errors
/// [`ParseError::Malformed`] when neither form is recognised,
/// [`ParseError::Device`] for a device error message.
pub fn uptime_seconds(output: &str) -> Result<f64, ParseError> {
    reject_device_error(output)?;
    let first = output.split_whitespace().next().unwrap_or("");
    if let Ok(secs) = first.parse::<f64>()
        && secs.is_finite()
        && secs >= 0.0
    {
        return Ok(secs);
    }
    uptime_command(output).ok_or_else(|| ParseError::malformed("uptime", "no uptime", output))
}

/// The `up …` part of the `uptime` command, up to `load average` or `user`.
fn uptime_command(output: &str) -> Option<f64> {
    let (_, after) = output.split_once(" up ")?;
    let mut secs = 0u64;
    let mut seen = false;
    for part in after.split(',').map(str::trim) {
        if part.starts_with("load average") || part.contains("user") {
            break;
        }
        secs = secs.checked_add(uptime_part(part)?)?;
        seen = true;
    }
    seen.then_some(secs as f64)
}

/// `3 days`, `1 day`, `2:05`, `5 min` → seconds.
fn uptime_part(part: &str) -> Option<u64> {
    if let Some((h, m)) = part.split_once(':') {
        let h: u64 = h.trim().parse().ok()?;
        let m: u64 = m.trim().parse().ok()?;
        return h.checked_mul(3600)?.checked_add(m.checked_mul(60)?);
    }
    let mut words = part.split_whitespace();
    let n: u64 = words.next()?.parse().ok()?;
    let unit = match words.next()? {
        w if w.starts_with("day") => 86_400,
        w if w.starts_with("min") => 60,
        w if w.starts_with("sec") => 1,
        _ => return None,
    };
    n.checked_mul(unit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn getprop_fixture() {
        let text = fixture!("getprop/adbjsoncli-emulator-17.txt");
        let props = getprop(text).expect("parses");
        assert_eq!(props.len(), 100);
        let get = |k: &str| props.get(k).map(String::as_str);
        assert_eq!(get("apex.all.ready"), Some("true"));
        assert_eq!(get("bluetooth.device.class_of_device"), Some("90,2,12"));
        assert_eq!(get("debug.tracing.device_state"), Some("0:DEFAULT"));
        assert_eq!(get("dev.mnt.dev.vendor"), Some("dm-4"));
        // The fragment stops before the ro.* properties: no guessing.
        assert_eq!(
            device_props(&props),
            Err(ParseError::MissingField {
                command: "getprop",
                field: "ro.product.model"
            })
        );
    }

    #[test]
    fn getprop_odd_values() {
        let text =
            "[a.empty]: []\n[a.bracket]: [x]y]\n[a.multi]: [line one\nline two]\n[ro.x]: [1]\n";
        let props = getprop(text).expect("parses");
        assert_eq!(props["a.empty"], "");
        assert_eq!(props["a.bracket"], "x]y");
        assert_eq!(props["a.multi"], "line one\nline two");
        assert_eq!(props["ro.x"], "1");
        assert!(getprop("not props\n").is_err());
        assert_eq!(getprop(""), Ok(BTreeMap::new()));
    }

    #[test]
    fn device_props_with_fallbacks() {
        let text = "\
[ro.product.model]: [sdk_gphone16k_arm64]
[ro.product.manufacturer]: [Google]
[ro.product.brand]: []
[ro.product.vendor.brand]: [google]
[ro.product.system.device]: [emu64a16k]
[ro.build.version.release]: [17]
[ro.build.version.sdk]: [37]
[ro.build.id]: [CP21.260330.005]
[ro.serialno]: [EMULATOR36X1X1X0]
";
        let props = getprop(text).expect("parses");
        assert_eq!(
            device_props(&props),
            Ok(DeviceProps {
                model: "sdk_gphone16k_arm64".into(),
                manufacturer: "Google".into(),
                brand: "google".into(),
                device: "emu64a16k".into(),
                android_version: "17".into(),
                sdk: Some(37),
                build_id: "CP21.260330.005".into(),
                serial: Some("EMULATOR36X1X1X0".into()),
            })
        );
    }

    #[test]
    fn meminfo_fixture() {
        let text = fixture!("proc-meminfo/rockchip-tvbox-perf-report-meminfo-unknown.txt");
        assert_eq!(
            meminfo(text),
            Ok(MemInfo {
                total_kb: 1_979_400,
                available_kb: Some(647_704),
                free_kb: 42_048
            })
        );
        assert_eq!(
            meminfo("MemTotal: 100 kB\nMemFree: 5 kB\n"),
            Ok(MemInfo {
                total_kb: 100,
                available_kb: None,
                free_kb: 5
            })
        );
        assert!(meminfo("MemFree: 5 kB\n").is_err());
    }

    #[test]
    fn uptime_forms() {
        let fixture = fixture!("uptime/oneplus12-incident-report-unknown.txt");
        let cases = [
            ("12345.67 23456.78\n", Some(12345.67)),
            (fixture, Some(45_900.0)),
            (
                " 10:01:02 up 3 days,  2:05,  0 users,  load average: 0.00, 0.01, 0.05\n",
                Some(266_700.0),
            ),
            (
                " 10:01:02 up 1 day, 5 min,  load average: 1.00, 1.00, 1.00\n",
                Some(86_700.0),
            ),
            (" 10:01:02 up 5 min,  load average: 1.00\n", Some(300.0)),
            ("", None),
            ("up and away", None),
            ("-5 3", None),
        ];
        for (input, expected) in cases {
            assert_eq!(uptime_seconds(input).ok(), expected, "{input:?}");
        }
    }

    #[test]
    fn reads_any_text_without_panicking() {
        crate::adb::parse::tests::each_sample(|text| {
            if let Ok(props) = getprop(text) {
                let _ = device_props(&props);
            }
            let _ = meminfo(text);
            let _ = uptime_seconds(text);
        });
    }
}
