//! Small string helpers shared by the parsers.
//!
//! Android prints its state as `key: value`, `key=value` or `key value` lines,
//! indented to show nesting. These helpers find such values without regular
//! expressions and never index into a string at a position they did not get
//! from a search, so multi-byte text cannot make them panic.
//!
//! Every integer read out of dump-like text goes through [`split_int`]
//! ([`leading_int`], [`grouped_int`], [`grouped_uint`]): digits grouped by
//! thousands (`5,745`) are read whole, and text that may be a decimal
//! fraction or another grouping (`5,74`, `5.745`) is refused, never cut
//! at its separator.

use super::device_error::{DeviceFailure, FailureKind, classify_device_error};
use super::error::ParseError;

/// The value of the first `key: value` line (surrounding space trimmed).
///
/// The key must be the whole text before the first `:` of the trimmed line, so
/// `voltage` does not match `Max charging voltage: 0`.
pub(crate) fn colon_field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines().find_map(|line| colon_value(line, key))
}

/// The value of `line` if it reads `key: value` (after trimming).
pub(crate) fn colon_value<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let (k, v) = colon_pair(line)?;
    (k == key).then_some(v)
}

/// `line` as a trimmed `(key, value)` pair split at its first `:`.
fn colon_pair(line: &str) -> Option<(&str, &str)> {
    let (k, v) = line.trim().split_once(':')?;
    Some((k.trim_end(), v.trim()))
}

/// Every `key: value` line of a text, split once, for parsers that look up
/// many keys: [`ColonFields::get`] answers as [`colon_field`] does, without
/// a scan of the whole text per key (eleven scans were a quarter of a
/// `battery.status` call's own time; `docs/benchmarks.md`).
pub(crate) struct ColonFields<'a>(Vec<(&'a str, &'a str)>);

impl<'a> ColonFields<'a> {
    /// The `key: value` lines of `text`, in order.
    pub(crate) fn of(text: &'a str) -> Self {
        Self(text.lines().filter_map(colon_pair).collect())
    }

    /// The value of the first line whose key is `key`.
    pub(crate) fn get(&self, key: &str) -> Option<&'a str> {
        self.0.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
    }
}

/// The first whitespace-delimited token after `key` where `key` starts a word.
///
/// A word starts at the beginning of the line or after a character that is not
/// alphanumeric, so `mRotation=` does not match inside `mDisplayRotation=`.
pub(crate) fn token_after<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let mut from = 0;
    while let Some(pos) = line.get(from..)?.find(key) {
        let at = from + pos;
        let boundary = line[..at]
            .chars()
            .next_back()
            .is_none_or(|c| !c.is_alphanumeric());
        let rest = &line[at + key.len()..];
        if boundary {
            return rest.split_whitespace().next();
        }
        from = at + key.len();
    }
    None
}

/// The value of the first `key=value` or `key: value` line (trimmed line start).
///
/// `dumpsys power` mixes both separators (Samsung prints some fields with `: `).
pub(crate) fn assigned_field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines().find_map(|line| {
        let rest = line.trim_start().strip_prefix(key)?;
        let value = rest.strip_prefix('=').or_else(|| rest.strip_prefix(':'))?;
        value.split_whitespace().next()
    })
}

/// Reads `true` / `false` (any case).
pub(crate) fn parse_bool(value: &str) -> Option<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    }
}

/// The integer `value` starts with, for values with a unit glued on, such
/// as `433Mbps` or `5180MHz` ([`split_int`] says how digits are read).
pub(crate) fn leading_int(value: &str) -> Option<i64> {
    split_int(value.trim()).map(|(n, _)| n)
}

/// `value` (trimmed) as a whole integer, written as [`split_int`] reads
/// one: `4200`, `-45`, `4,200`; `None` for anything else.
pub(crate) fn grouped_int(value: &str) -> Option<i64> {
    match split_int(value.trim()) {
        Some((n, "")) => Some(n),
        _ => None,
    }
}

/// [`grouped_int`], for counts that cannot be negative.
pub(crate) fn grouped_uint(value: &str) -> Option<u64> {
    let value = value.trim();
    if value.starts_with('-') {
        return None;
    }
    grouped_int(value).and_then(|n| u64::try_from(n).ok())
}

/// The integer at the start of `text` and what follows it.
///
/// An optional sign, then digits, plain (`5745`) or grouped by thousands
/// with commas (`5,745`, `1,024,000`): a first group of one to three
/// digits, then groups of exactly three. Android's own dumps print plain
/// digits, but a vendor's or a locale's formatting groups them, and
/// reading up to the first comma would give 5 for 5,745.
///
/// `None` when there is no digit or the digits are ambiguous: a comma
/// that does not start a group of three (`5,74`, `5745,5`, `1,000,0`: a
/// decimal comma, or grouping of another kind) or a decimal part (`5.745`,
/// `12.5`, `1,234.5`: a fraction, or a dot used for grouping). A value
/// refused is unknown; a value cut at its separator would be wrong.
pub(crate) fn split_int(text: &str) -> Option<(i64, &str)> {
    let bytes = text.as_bytes();
    let digits_from = |at: usize| {
        bytes
            .get(at..)
            .map_or(0, |b| b.iter().take_while(|c| c.is_ascii_digit()).count())
    };
    let negative = bytes.first() == Some(&b'-');
    let mut at = usize::from(matches!(bytes.first(), Some(b'-' | b'+')));
    let first = digits_from(at);
    if first == 0 {
        return None;
    }
    let mut digits = String::from(&text[at..at + first]);
    at += first;
    let digit_after = |at: usize| bytes.get(at + 1).is_some_and(u8::is_ascii_digit);
    while bytes.get(at) == Some(&b',') && digit_after(at) {
        if first > 3 || digits_from(at + 1) != 3 {
            return None;
        }
        digits.push_str(&text[at + 1..at + 4]);
        at += 4;
    }
    if matches!(bytes.get(at), Some(b'.' | b',')) && digit_after(at) {
        return None;
    }
    let n: i64 = digits.parse().ok()?;
    Some((if negative { -n } else { n }, &text[at..]))
}

/// Removes one pair of surrounding double quotes, if both are there.
pub(crate) fn unquote(value: &str) -> &str {
    value
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .unwrap_or(value)
}

/// `None` for an empty value or one of Android's "nothing here" spellings.
pub(crate) fn non_placeholder(value: &str) -> Option<String> {
    let value = value.trim();
    let empty = value.is_empty()
        || matches!(
            value,
            "null" | "<none>" | "<unknown ssid>" | "<unknown>" | "unknown ssid"
        );
    (!empty).then(|| value.to_owned())
}

/// Number of leading space or tab characters.
pub(crate) fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// Fails with the device's own error when the output carries one.
///
/// A "not found" message becomes [`ParseError::NotFound`], any other
/// recognised message [`ParseError::Device`]. The whole output is checked,
/// with the rules that hold even when the exit status is 0
/// ([`classify_device_error`]): only a line that starts at column 0 with an
/// error marker counts. A service may print a header before its denial
/// (`Current Notification Manager state:` then `Permission Denial: …`),
/// which must not read as an empty dump; a dump's own indented text may
/// mention such words without having failed.
pub(crate) fn reject_device_error(output: &str) -> Result<(), ParseError> {
    match classify_device_error(output, "", 0) {
        Some(failure) if failure.kind != FailureKind::Other => Err(failure_error(failure)),
        _ => Ok(()),
    }
}

/// A listing: one item per line that `line` reads, other lines skipped.
/// No output is an empty list; output of which no line reads is malformed
/// (`expected` says what `command` prints), and so is the device's own
/// error message ([`reject_device_error`]).
pub(crate) fn listing<T>(
    output: &str,
    command: &'static str,
    expected: &str,
    line: impl FnMut(&str) -> Option<T>,
) -> Result<Vec<T>, ParseError> {
    reject_device_error(output)?;
    let items: Vec<T> = output.lines().filter_map(line).collect();
    if items.is_empty() && !output.trim().is_empty() {
        return Err(ParseError::malformed(command, expected, output));
    }
    Ok(items)
}

/// A device failure as a parse error: "not found" keeps its own variant.
pub(crate) fn failure_error(failure: DeviceFailure) -> ParseError {
    match failure.kind {
        FailureKind::NotFound(what) => ParseError::NotFound { what },
        _ => ParseError::Device(failure),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colon_field_needs_the_whole_key() {
        let text = "  Max charging voltage: 0\n  voltage: 4200\n";
        assert_eq!(colon_field(text, "voltage"), Some("4200"));
        assert_eq!(colon_field(text, "volt"), None);
    }

    #[test]
    fn colon_fields_answer_as_colon_field_does() {
        let text = "state:\n  voltage : 4200 \n  Max charging voltage: 0\nvoltage: 1\nno colon\n";
        let fields = ColonFields::of(text);
        for key in [
            "voltage",
            "Max charging voltage",
            "state",
            "volt",
            "no colon",
            "",
        ] {
            assert_eq!(fields.get(key), colon_field(text, key), "{key:?}");
        }
    }

    #[test]
    fn a_denial_after_a_header_is_the_device_error() {
        // Synthetic: the header `dumpsys notification` prints, then the
        // denial DumpUtils prints for a caller without android.permission.DUMP.
        let text = "Current Notification Manager state:\nPermission Denial: can't dump NotificationManager from from pid=4242, uid=2000 due to missing android.permission.DUMP permission\n";
        match reject_device_error(text) {
            Err(ParseError::Device(f)) => assert_eq!(f.kind, FailureKind::PermissionDenied),
            other => panic!("{other:?}"),
        }
        // A dump whose indented text merely mentions a denial did not fail.
        assert_eq!(
            reject_device_error("Recent:\n  Permission Denial: uid 10042 (earlier)\n"),
            Ok(())
        );
    }

    #[test]
    fn token_after_respects_word_starts() {
        let line = "mDisplayRotation=ROTATION_90 mRotation=ROTATION_0}";
        assert_eq!(token_after(line, "mRotation="), Some("ROTATION_0}"));
        assert_eq!(token_after("xmRotation=1", "mRotation="), None);
        assert_eq!(token_after("é mRotation=2", "mRotation="), Some("2"));
    }

    #[test]
    fn leading_int_stops_at_the_unit() {
        for (input, expected) in [
            ("433Mbps", Some(433)),
            ("-1MHz", Some(-1)),
            ("", None),
            ("Mbps", None),
            ("-", None),
        ] {
            assert_eq!(leading_int(input), expected, "{input:?}");
        }
    }

    #[test]
    fn leading_int_reads_grouped_digits_and_refuses_ambiguous_text() {
        // Hostile, synthetic values: Android's own dumps print plain
        // digits, but a vendor's or a locale's formatting groups them, and
        // reading up to the first comma gave 5 for 5,745.
        for (input, expected) in [
            ("5,745MHz", Some(5745)),
            ("5,745 MHz", Some(5745)),
            ("1,024,000", Some(1_024_000)),
            ("-1,234dBm", Some(-1234)),
            ("433, Tx Link speed", Some(433)),
            // Not thousands groups: a decimal comma or point, a group of
            // the wrong size, a first group too long. Refused, not cut.
            ("5,74MHz", None),
            ("5,7450", None),
            ("5745,5", None),
            ("1,000,0", None),
            ("5.745MHz", None),
            ("12.5Mbps", None),
            ("1,234.5", None),
        ] {
            assert_eq!(leading_int(input), expected, "{input:?}");
        }
    }

    #[test]
    fn assigned_field_takes_either_separator() {
        let text = "  mWakefulness=Awake\n  mUltraPowerSavingModeEnabled: false\n";
        assert_eq!(assigned_field(text, "mWakefulness"), Some("Awake"));
        assert_eq!(
            assigned_field(text, "mUltraPowerSavingModeEnabled"),
            Some("false")
        );
        assert_eq!(assigned_field(text, "mWake"), None);
    }
}
