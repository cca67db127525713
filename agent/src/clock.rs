//! Wall-clock helpers of the agent: the weekday the model is told and
//! `Retry-After` HTTP-date parsing, over the workspace's one calendar
//! ([`droidwarden_services::time`], whose `now_ms` and `rfc3339` this
//! module re-exports).

use droidwarden_services::time::days_from_civil;
pub use droidwarden_services::time::{now_ms, rfc3339};

/// The weekday of a unix-millisecond time, in English.
pub fn weekday(ms: u64) -> &'static str {
    const DAYS: [&str; 7] = [
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
        "Monday",
        "Tuesday",
        "Wednesday",
    ];
    DAYS[((ms / 1000 / 86_400) % 7) as usize]
}

/// Parse an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`) into unix ms.
pub fn parse_http_date(s: &str) -> Option<u64> {
    let parts: Vec<&str> = s.split_whitespace().collect();
    let [_, day, month, year, time, "GMT"] = parts.as_slice() else {
        return None;
    };
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let m = MONTHS.iter().position(|x| x == month)? as u32 + 1;
    let d: u32 = day.parse().ok()?;
    let y: i64 = year.parse().ok()?;
    let hms: Vec<u64> = time.split(':').filter_map(|p| p.parse().ok()).collect();
    let [h, mi, se] = hms.as_slice() else {
        return None;
    };
    let days = u64::try_from(days_from_civil(y, m, d)).ok()?;
    Some((days * 86_400 + h * 3600 + mi * 60 + se) * 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The calendar itself is tested in `droidwarden_services::time`.
    #[test]
    fn http_dates_and_weekdays() {
        assert_eq!(
            parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(784_111_777_000)
        );
        assert_eq!(weekday(784_111_777_000), "Sunday");
        assert_eq!(weekday(1_795_347_868_000), "Sunday");
        assert_eq!(parse_http_date("yesterday"), None);
    }
}
