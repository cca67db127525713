//! Wall-clock helpers and the Android-style time formats the outputs need.
//!
//! The emulated phone runs in UTC (`persist.sys.timezone` says `Etc/UTC`), so
//! civil time is the workspace's UTC calendar
//! ([`droidwarden_services::time`]) without a time-zone database. This
//! module owns only formatting; it never sleeps or schedules.

pub(crate) use droidwarden_services::time::{civil, now_ms};

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
