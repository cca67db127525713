//! The `device_state` service over ADB: power state from `dumpsys power`,
//! the screen's power keys, battery saver, and storage from `df`.

use super::*;
use crate::adb::parse::ParseError;
use crate::adb::parse::text::{grouped_uint, reject_device_error};
use droidwarden_services::{
    DeviceStateAction, Filesystem, PowerSave, PowerStatus, ScreenPower, Storage,
};

pub(super) async fn run(sh: &dyn Shell, action: &DeviceStateAction) -> Result<Value, BridgeError> {
    match action {
        DeviceStateAction::Status => {
            let power = read(sh, &["dumpsys", "power"], parse::power).await?;
            let low_power = setting(sh, "global", "low_power").await?;
            let power_save = low_power.map(|v| v == "1").or(power.battery_saver);
            answer(PowerStatus {
                screen_on: power.screen_on,
                wakefulness: power.wakefulness,
                plugged: power.plugged,
                power_save,
                battery_level: power.battery_level,
            })
        }
        DeviceStateAction::ScreenOn => {
            keyevent(sh, "KEYCODE_WAKEUP").await?;
            answer(ScreenPower { screen_on: true })
        }
        DeviceStateAction::ScreenOff => {
            keyevent(sh, "KEYCODE_SLEEP").await?;
            answer(ScreenPower { screen_on: false })
        }
        DeviceStateAction::PowerSave { enabled } => {
            ok(
                sh,
                &["cmd", "power", "set-mode", if *enabled { "1" } else { "0" }],
            )
            .await?;
            answer(PowerSave {
                power_save: *enabled,
            })
        }
        DeviceStateAction::Storage => {
            let all = read(sh, &["df"], df).await?;
            let (data, external) = storage_volumes(&all);
            answer(Storage {
                data: data.cloned(),
                external: external.cloned(),
            })
        }
    }
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
            grouped_uint(v)?.checked_mul(1024)
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
    fn df_reads_grouped_block_counts() {
        // Synthetic, hostile: a `df` whose block counts are grouped by
        // thousands (a vendor's busybox built with grouping).
        let text = "Filesystem 1K-blocks Used Available Use% Mounted on\n/dev/block/dm-5 5,000,000 1,200,000 3,800,000 24% /data\n";
        let rows = df(text).expect("parses");
        assert_eq!(rows[0].size_bytes, 5_000_000 * 1024);
        assert_eq!(rows[0].used_bytes, 1_200_000 * 1024);
        assert_eq!(rows[0].available_bytes, 3_800_000 * 1024);
        // A count that is no thousands grouping is refused, not cut short.
        assert!(df(&text.replace("5,000,000", "5,00,000")).is_err());
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

    #[test]
    fn reads_any_text_without_panicking() {
        crate::adb::parse::tests::each_sample(|text| {
            if let Ok(all) = df(text) {
                let _ = storage_volumes(&all);
            }
        });
    }
}
