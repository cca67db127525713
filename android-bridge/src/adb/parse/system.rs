//! System information: `getprop`, `/proc/meminfo`, `/proc/uptime`, `uptime` and `df`.

use std::collections::BTreeMap;

pub use droidwarden_services::Filesystem;
use serde::Serialize;

use super::error::ParseError;
use super::text::reject_device_error;

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

/// Parse `df` in the forms Android prints: toybox `df` (`1K-blocks Used
/// Available Use% Mounted on`), toybox `df -h` (sizes such as `1.9G`) and
/// the old toolbox `df` of Android 4 and earlier (`Filesystem Size Used
/// Free Blksize`, the mount point first and sizes such as `362M`).
///
/// # Errors
/// [`ParseError::Malformed`] when no header or no row is recognised,
/// [`ParseError::Device`] for a device error message.
pub fn df(output: &str) -> Result<Vec<Filesystem>, ParseError> {
    reject_device_error(output)?;
    let mut lines = output.lines().filter(|l| !l.trim().is_empty());
    let header = lines
        .next()
        .ok_or_else(|| ParseError::malformed("df", "no output", output))?;
    let columns: Vec<&str> = header.split_whitespace().collect();
    // toolbox: the first column is the mount point and there is no
    // "Mounted on"; toybox: the mount point is last.
    let toolbox = columns.contains(&"Blksize") || !header.contains("Mounted");
    let block_kb = columns.get(1).is_some_and(|c| c.ends_with("-blocks"));
    let mut out = Vec::new();
    for line in lines {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let row = if toolbox {
            toolbox_row(&fields)
        } else {
            toybox_row(&fields, block_kb)
        };
        out.push(row.ok_or_else(|| ParseError::malformed("df", "unreadable row", line))?);
    }
    if out.is_empty() {
        return Err(ParseError::malformed("df", "no filesystem", output));
    }
    Ok(out)
}

/// `/data 27G 19G 8G 4096`.
fn toolbox_row(fields: &[&str]) -> Option<Filesystem> {
    let [mount, size, used, free, ..] = fields else {
        return None;
    };
    let (size, used, free) = (human_bytes(size)?, human_bytes(used)?, human_bytes(free)?);
    Some(Filesystem {
        mount: (*mount).to_owned(),
        filesystem: (*mount).to_owned(),
        size_bytes: size,
        used_bytes: used,
        available_bytes: free,
        use_percent: percent(used, size),
    })
}

/// `/dev/block/dm-5 5000000 1200000 3800000 24% /data` (or with `-h`
/// sizes). The mount point may contain spaces, so it is everything after
/// the percentage.
fn toybox_row(fields: &[&str], block_kb: bool) -> Option<Filesystem> {
    let [filesystem, size, used, available, use_pct, mount @ ..] = fields else {
        return None;
    };
    if mount.is_empty() {
        return None;
    }
    let bytes = |v: &str| {
        if block_kb {
            v.parse::<u64>().ok()?.checked_mul(1024)
        } else {
            human_bytes(v)
        }
    };
    let (size, used) = (bytes(size)?, bytes(used)?);
    let use_percent = match use_pct.strip_suffix('%').map(str::parse::<u8>) {
        Some(Ok(p)) => p.min(100),
        // `-` for a filesystem without a size.
        _ => percent(used, size),
    };
    Some(Filesystem {
        mount: mount.join(" "),
        filesystem: (*filesystem).to_owned(),
        size_bytes: size,
        used_bytes: used,
        available_bytes: bytes(available)?,
        use_percent,
    })
}

/// `362M`, `1.9G`, `0K`, `0`, `512` (bytes): powers of 1024, as `df -h`
/// prints them.
fn human_bytes(text: &str) -> Option<u64> {
    let (number, unit) = match text.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => text.split_at(i),
        None => (text, ""),
    };
    let scale: u64 = match unit {
        "" | "B" => 1,
        "K" | "k" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        "T" => 1 << 40,
        _ => return None,
    };
    let value: f64 = number
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite() && *v >= 0.0)?;
    Some((value * scale as f64).round() as u64)
}

fn percent(used: u64, size: u64) -> u8 {
    if size == 0 {
        0
    } else {
        ((used as f64 * 100.0 / size as f64).round() as u64).min(100) as u8
    }
}

/// The phone's app-data storage and its shared ("external") storage among
/// `df`'s filesystems: `/data` (or the mirror a root manager mounts for
/// it), and `/storage/emulated`, `/sdcard` or `/mnt/sdcard`.
pub fn storage_volumes(all: &[Filesystem]) -> (Option<&Filesystem>, Option<&Filesystem>) {
    let find = |mounts: &[&str]| {
        mounts
            .iter()
            .find_map(|m| all.iter().find(|f| f.mount == *m))
    };
    let data = find(&["/data", "/sbin/.magisk/mirror/data", "/data/media"]);
    let external = find(&[
        "/storage/emulated",
        "/storage/emulated/0",
        "/sdcard",
        "/mnt/sdcard",
        "/storage/self/primary",
    ]);
    (data, external)
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
    fn df_in_every_form_android_prints() {
        let old = df(fixture!("df/aafm-issue30-samsung-android4-old-format.txt")).unwrap();
        assert_eq!(old.len(), 8);
        let (data, external) = storage_volumes(&old);
        let data = data.unwrap();
        assert_eq!(data.size_bytes, 27 << 30);
        assert_eq!(data.used_bytes, 19 << 30);
        assert_eq!(data.available_bytes, 8 << 30);
        assert_eq!(data.use_percent, 70);
        assert_eq!(external.unwrap().mount, "/mnt/sdcard");

        let human = df(fixture!("df/aconf-issue47-atv-a7-madrom-df-h-unknown.txt")).unwrap();
        assert_eq!(human.len(), 13);
        let (data, external) = storage_volumes(&human);
        let data = data.unwrap();
        assert_eq!(data.mount, "/sbin/.magisk/mirror/data");
        assert_eq!(data.size_bytes, (3.8 * (1u64 << 30) as f64).round() as u64);
        assert_eq!(data.use_percent, 40);
        let external = external.unwrap();
        assert_eq!(external.mount, "/storage/emulated");
        assert_eq!(external.filesystem, "/dev/fuse");

        let toybox = "Filesystem     1K-blocks    Used Available Use% Mounted on\n\
                      /dev/block/dm-5  5000000 1200000   3800000  24% /data\n\
                      /dev/fuse        5000000 1200000   3800000  24% /storage/emulated\n";
        let rows = df(toybox).unwrap();
        assert_eq!(rows[0].size_bytes, 5_000_000 * 1024);
        assert_eq!(rows[0].use_percent, 24);
        assert_eq!(storage_volumes(&rows).0.unwrap().mount, "/data");
    }

    #[test]
    fn df_refuses_what_it_cannot_read() {
        assert!(df("").is_err());
        assert!(df("Filesystem 1K-blocks Used Available Use% Mounted on\n").is_err());
        assert!(
            df("Filesystem 1K-blocks Used Available Use% Mounted on\n/dev/x 12 ab 3 1% /d\n")
                .is_err()
        );
        assert_eq!(human_bytes("1.5K"), Some(1536));
        assert_eq!(human_bytes("12X"), None);
        assert_eq!(human_bytes("-1M"), None);
    }
}
