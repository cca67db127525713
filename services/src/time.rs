//! Wall-clock time as every crate writes it: Unix milliseconds, and UTC
//! calendar dates without a date library (Howard Hinnant's
//! `civil_from_days` / `days_from_civil`, exact for every date a `u64` of
//! milliseconds can hold after 1970). One implementation, so the time the
//! daemon stores, the one the agent renders and the one the emulated phone
//! prints cannot disagree.
//!
//! Reading the clock is the only thing here that is not pure computation,
//! and it is a value, not I/O.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch of `at`: 0 before 1970, saturated
/// past `u64::MAX`.
pub fn epoch_ms(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> u64 {
    epoch_ms(SystemTime::now())
}

/// A UTC calendar date and time of day.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Civil {
    /// The year, e.g. 2026.
    pub year: i64,
    /// 1 to 12.
    pub month: u32,
    /// 1 to 31.
    pub day: u32,
    /// 0 to 23.
    pub hour: u32,
    /// 0 to 59.
    pub minute: u32,
    /// 0 to 59.
    pub second: u32,
    /// 0 to 999.
    pub milli: u32,
}

const DAY_MS: u64 = 86_400_000;

/// The UTC calendar time of `epoch_ms`.
pub fn civil(epoch_ms: u64) -> Civil {
    // A u64 of milliseconds holds about 2.1e8 days: an i64 without loss.
    let z = (epoch_ms / DAY_MS) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    // The remainder of a day fits a u32 (86,400,000 ms).
    let of_day = (epoch_ms % DAY_MS) as u32;
    Civil {
        year: yoe + era * 400 + i64::from(month <= 2),
        month,
        day: (doy - (153 * mp + 2) / 5 + 1) as u32,
        hour: of_day / 3_600_000,
        minute: of_day / 60_000 % 60,
        second: of_day / 1000 % 60,
        milli: of_day % 1000,
    }
}

/// Days from 1970-01-01 to a calendar date (negative before it); `month`
/// 1 to 12, `day` 1 to 31.
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `2026-11-22T11:44:28.123Z`: RFC 3339 with milliseconds, UTC — the one
/// format of every timestamp the daemon publishes (MQTT, D-Bus, JSON
/// output), always three digits.
pub fn rfc3339_millis(epoch_ms: u64) -> String {
    let c = civil(epoch_ms);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        c.year, c.month, c.day, c.hour, c.minute, c.second, c.milli
    )
}

/// `2026-11-22T11:44:28Z`: RFC 3339, seconds precision, UTC — for people
/// and the model (histories, tables, the clock tool).
pub fn rfc3339(epoch_ms: u64) -> String {
    let c = civil(epoch_ms);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        c.year, c.month, c.day, c.hour, c.minute, c.second
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn civil_time_of_known_instants() {
        // 2024-02-29T13:45:06.789Z: a leap day.
        let c = civil(1_709_214_306_789);
        assert_eq!(
            (c.year, c.month, c.day, c.hour, c.minute, c.second, c.milli),
            (2024, 2, 29, 13, 45, 6, 789)
        );
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(784_111_777_000), "1994-11-06T08:49:37Z");
        assert_eq!(rfc3339(1_795_347_868_000), "2026-11-22T11:44:28Z");
        assert_eq!(rfc3339(951_825_599_999), "2000-02-29T11:59:59Z");
        assert_eq!(rfc3339(4_102_444_799_000), "2099-12-31T23:59:59Z");
        assert_eq!(rfc3339_millis(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            rfc3339_millis(1_795_347_868_120),
            "2026-11-22T11:44:28.120Z"
        );
        assert_eq!(rfc3339_millis(951_825_599_999), "2000-02-29T11:59:59.999Z");
    }

    #[test]
    fn days_and_dates_agree_for_every_day_of_four_centuries() {
        for days in 0..146_097_i64 {
            let c = civil(days as u64 * DAY_MS);
            assert_eq!(days_from_civil(c.year, c.month, c.day), days);
        }
        assert_eq!(days_from_civil(1969, 12, 31), -1);
    }

    #[test]
    fn a_time_before_1970_is_zero() {
        assert_eq!(epoch_ms(UNIX_EPOCH - Duration::from_secs(1)), 0);
        assert_eq!(epoch_ms(UNIX_EPOCH + Duration::from_millis(1234)), 1234);
    }
}
