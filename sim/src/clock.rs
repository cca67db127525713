//! Wall-clock helpers and the Android-style time formats the outputs need.
//!
//! The emulated phone runs in UTC (`persist.sys.timezone` says `Etc/UTC`), so
//! civil time is computed here from the Unix epoch without a time-zone
//! database. This module owns only formatting; it never sleeps or schedules.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch, now.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// A UTC calendar date and time of day.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Civil {
    pub(crate) year: i64,
    pub(crate) month: u32,
    pub(crate) day: u32,
    pub(crate) hour: u32,
    pub(crate) minute: u32,
    pub(crate) second: u32,
    pub(crate) milli: u32,
}

/// Converts epoch milliseconds to a UTC calendar time (Howard Hinnant's
/// `civil_from_days`, exact for every date the phone can show).
pub(crate) fn civil(epoch_ms: u64) -> Civil {
    let secs = epoch_ms / 1000;
    let milli = (epoch_ms % 1000) as u32;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    Civil {
        year,
        month,
        day,
        hour: (rem / 3600) as u32,
        minute: ((rem % 3600) / 60) as u32,
        second: (rem % 60) as u32,
        milli,
    }
}

/// `HH:MM:SS.mmm`, as sensor and media logs print wall time.
pub(crate) fn hms_millis(epoch_ms: u64) -> String {
    let c = civil(epoch_ms);
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        c.hour, c.minute, c.second, c.milli
    )
}

/// `MM-DD HH:MM:SS.mmm`, the prefix of Android event logs.
pub(crate) fn log_stamp(epoch_ms: u64) -> String {
    let c = civil(epoch_ms);
    format!("{:02}-{:02} {}", c.month, c.day, hms_millis(epoch_ms))
}

/// Android's `TimeUtils.formatDuration`: `+5m15s101ms`, `+1h0m0s0ms`, `0`.
///
/// The largest non-zero unit starts the string and every smaller unit
/// follows, even when zero, which is what `dumpsys` prints.
pub(crate) fn android_duration(ms: i64) -> String {
    if ms == 0 {
        return "0".to_owned();
    }
    let sign = if ms < 0 { '-' } else { '+' };
    let mut rest = ms.unsigned_abs();
    let millis = rest % 1000;
    rest /= 1000;
    let seconds = rest % 60;
    rest /= 60;
    let minutes = rest % 60;
    rest /= 60;
    let hours = rest % 24;
    let days = rest / 24;
    let mut out = String::new();
    out.push(sign);
    let units = [(days, "d"), (hours, "h"), (minutes, "m"), (seconds, "s")];
    let mut started = false;
    for (value, unit) in units {
        if value != 0 || started {
            out.push_str(&format!("{value}{unit}"));
            started = true;
        }
    }
    out.push_str(&format!("{millis}ms"));
    out
}

/// Formats a float the way Java's `Float.toString` does for ordinary
/// magnitudes: shortest round-trip digits, always with a fractional part.
pub(crate) fn java_float(v: f64) -> String {
    if v.is_nan() {
        return "NaN".to_owned();
    }
    if v.is_infinite() {
        return if v > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    let s = format!("{}", v as f32);
    if s.contains('.') || s.contains('e') {
        s
    } else {
        format!("{s}.0")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_time_of_known_instants() {
        // 2024-02-29T13:45:06.789Z
        let c = civil(1_709_214_306_789);
        assert_eq!(
            (c.year, c.month, c.day, c.hour, c.minute, c.second, c.milli),
            (2024, 2, 29, 13, 45, 6, 789)
        );
        assert_eq!(civil(0).year, 1970);
    }

    #[test]
    fn android_durations() {
        assert_eq!(android_duration(315_101), "+5m15s101ms");
        assert_eq!(android_duration(3_600_000), "+1h0m0s0ms");
        assert_eq!(android_duration(2_307), "+2s307ms");
        assert_eq!(android_duration(0), "0");
        assert_eq!(android_duration(-36_508), "-36s508ms");
    }

    #[test]
    fn java_floats() {
        assert_eq!(java_float(5.0), "5.0");
        assert_eq!(java_float(0.5), "0.5");
        assert_eq!(java_float(1013.25), "1013.25");
    }
}
