//! The `notifications` service over ADB.
//!
//! `dumpsys notification --noredact`: the notifications currently posted.
//!
//! The dump starts with `Current Notification Manager state:` and lists the
//! posted notifications under `  Notification List:` (Android 7 and later;
//! `Notification List (user=N):` on some builds), one
//! `    NotificationRecord(0x…: pkg=P user=… id=… tag=… … key=K: Notification(…))`
//! header each (Android 6 and earlier print `NotificationRecord(0x… pkg=P
//! …` without the colon), followed by indented lines. Within a record:
//!
//! - `key=K` (also on the header from Android 7 on),
//! - `flags=` as names (`ONGOING_EVENT|NO_CLEAR`, Android 10 and later) or
//!   hexadecimal (`flags=0x62`, earlier),
//! - `when=MS` or `when=MS/MS` (the time the app set, Unix epoch ms),
//! - `mCreationTimeMs=`/`mUpdateTimeMs=` (when it was posted and last
//!   updated, Unix epoch ms; not printed by old releases),
//! - `extras={` … `}` with one `key=Type (value)` line per extra. A text
//!   extra reads `android.title=String (Hello)` (or `SpannableString (…)`,
//!   `SpannedString (…)` for styled text); a value with line breaks goes on
//!   over the following lines, at any indentation, until its `)`. Without
//!   `--noredact`, and on builds where the shell may not see contents, text
//!   reads `String [length=17]` (Android 8 and later) or just `String`: the
//!   contents are redacted.
//!
//! Whatever follows the list (the listeners, snoozed and historical
//! notifications, ranking config) is not read.

use super::*;
use crate::adb::parse::ParseError;
use droidwarden_services::{NotificationDismissed, NotificationList, NotificationsAction};

/// How long `dismiss` snoozes a notification over ADB: 30 days.
pub const DISMISS_SNOOZE_MS: u64 = 30 * 24 * 60 * 60 * 1000;

pub(super) async fn run(
    sh: &dyn Shell,
    action: &NotificationsAction,
) -> Result<Value, BridgeError> {
    match action {
        NotificationsAction::List { package } => {
            let mut list = list(sh).await?;
            if let Some(package) = package {
                list.notifications.retain(|n| n.package == package.as_str());
            }
            answer(NotificationList {
                count: list.notifications.len() as u64,
                redacted: list.redacted,
                notifications: list.notifications,
            })
        }
        NotificationsAction::Dismiss { notification_key } => dismiss(sh, notification_key).await,
        NotificationsAction::Open { .. } => Err(super::unsupported(
            sh,
            &Command::Notifications(action.clone()),
        )),
    }
}

/// `notifications.dismiss` over ADB. Android's shell may not cancel
/// another app's notification (`cmd notification` has no cancel for them,
/// and `service call` numbers change with every release); what it may do
/// from Android 11 on is snooze one by key, which takes it out of the
/// shade. The key is looked up first, since a snooze of an unknown key
/// succeeds silently and would report a dismissal that never happened.
async fn dismiss(sh: &dyn Shell, key: &str) -> Result<Value, BridgeError> {
    let posted = list(sh).await?;
    if !posted.notifications.iter().any(|n| n.key == key) {
        return Err(BridgeError::NotFound {
            message: format!("no notification with the key {key} is posted"),
        });
    }
    let ms = DISMISS_SNOOZE_MS.to_string();
    let out = sh
        .run(&["cmd", "notification", "snooze", "--for", &ms, key])
        .await?;
    let said = format!("{}{}", out.stdout, out.stderr);
    if out.exit != 0 || said.contains("Unknown command") {
        if said.contains("Unknown command") || said.contains("Unknown option") {
            return Err(refused(
                ErrorCode::UnsupportedAction,
                format!(
                    "{}: this phone's `cmd notification` cannot snooze (Android 11 and later can), and the shell may not cancel another app's notification; use the companion app",
                    sh.device_name()
                ),
            ));
        }
        let failure = parse::classify_device_error(&out.stdout, &out.stderr, out.exit).unwrap_or(
            parse::DeviceFailure {
                kind: parse::FailureKind::Other,
                message: format!(
                    "`cmd notification snooze` exited {}: {}",
                    out.exit,
                    said.trim()
                ),
            },
        );
        return Err(super::from_failure(
            sh.device_name(),
            failure,
            Some(out.exit),
        ));
    }
    answer(NotificationDismissed {
        key: key.to_owned(),
        method: "snoozed".to_owned(),
    })
}

/// The posted notifications, from `dumpsys notification --noredact`.
async fn list(sh: &dyn Shell) -> Result<NotificationDump, BridgeError> {
    let argv = ["dumpsys", "notification", "--noredact"];
    let out = sh.run(&argv).await?;
    // Notification texts are the apps' words and may span lines that start
    // at column 0 with anything ("Error: payment failed"): only a failed
    // exit, stderr, or the service's denial (after its header or not,
    // `parse::dump_denial`) is an error.
    if out.exit != 0 {
        let failure = parse::classify_device_error("", &out.stderr, out.exit).unwrap_or(
            parse::DeviceFailure {
                kind: parse::FailureKind::Other,
                message: format!("`dumpsys notification` exited {}", out.exit),
            },
        );
        return Err(super::from_failure(
            sh.device_name(),
            failure,
            Some(out.exit),
        ));
    }
    if let Some(denial) = parse::dump_denial(&out.stdout) {
        return Err(super::from_failure(sh.device_name(), denial, Some(0)));
    }
    parsed(
        sh.device_name(),
        &argv,
        parse::dump_complete(&argv.join(" "), &out.stdout, &out.stderr),
    )?;
    parsed(sh.device_name(), &argv, notifications(&out.stdout))
}

pub use droidwarden_services::Notification;

/// The notification list and whether the phone hid any contents. The
/// result of `notifications.list` is built from it
/// ([`droidwarden_services::NotificationList`], with the count, after an
/// optional filter by package).
#[derive(Debug, Clone, PartialEq)]
pub struct NotificationDump {
    /// The notifications, newest first.
    pub notifications: Vec<Notification>,
    /// Some title or text was redacted.
    pub redacted: bool,
}

const COMMAND: &str = "dumpsys notification --noredact";

/// `ONGOING_EVENT` in `Notification.flags`.
const FLAG_ONGOING_EVENT: u64 = 0x2;

/// A text extra's value as the dump shows it.
#[derive(Debug, PartialEq, Eq)]
enum TextValue {
    Absent,
    Shown(String),
    Redacted,
}

#[derive(Default)]
struct Record {
    key: Option<String>,
    package: String,
    title: Option<TextValue>,
    text: Option<TextValue>,
    big_text: Option<TextValue>,
    creation_ms: Option<u64>,
    update_ms: Option<u64>,
    when_ms: Option<u64>,
    ongoing: bool,
}

/// Parse `dumpsys notification --noredact`.
///
/// # Errors
/// [`ParseError::Device`] when the service denied the dump (a `Permission
/// Denial` line, also after the manager's header: never an empty list),
/// [`ParseError::MissingField`] when the output is not a notification
/// manager dump (no `Notification List` and no record), and
/// [`ParseError::Malformed`] for a record header without a package.
pub fn notifications(out: &str) -> Result<NotificationDump, ParseError> {
    if let Some(denial) = crate::adb::parse::dump_denial(out) {
        return Err(ParseError::Device(denial));
    }
    let lines: Vec<&str> = out.lines().collect();
    let Some(start) = lines.iter().position(|l| {
        let t = l.trim();
        t.starts_with("Notification List") && t.ends_with(':')
    }) else {
        if out.contains("Current Notification Manager state") || out.contains("NotificationRecord(")
        {
            // A manager dump without a list section: nothing posted
            // (old releases print no header when the list is empty).
            if !out.contains("NotificationRecord(") {
                return Ok(NotificationDump {
                    notifications: Vec::new(),
                    redacted: false,
                });
            }
        } else {
            return Err(ParseError::MissingField {
                command: COMMAND,
                field: "Notification List",
            });
        }
        return parse_records(&lines, 0);
    };
    parse_records(&lines, start + 1)
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

fn parse_records(lines: &[&str], from: usize) -> Result<NotificationDump, ParseError> {
    let list_indent = from
        .checked_sub(1)
        .and_then(|i| lines.get(i))
        .map(|l| indent(l))
        .unwrap_or(0);
    let mut records: Vec<Record> = Vec::new();
    let mut i = from;
    let mut in_extras = false;
    while i < lines.len() {
        let line = lines[i];
        let trimmed = line.trim();
        i += 1;
        if trimmed.is_empty() {
            continue;
        }
        if trimmed.starts_with("NotificationRecord(") {
            records.push(header(trimmed)?);
            in_extras = false;
            continue;
        }
        // The list ends where a line is no deeper than its header (the
        // next section); inside extras such a line is a value's own text.
        if from > 0 && !in_extras && indent(line) <= list_indent {
            break;
        }
        let Some(record) = records.last_mut() else {
            continue;
        };
        if in_extras {
            if trimmed == "}" {
                in_extras = false;
                continue;
            }
            let Some((name, raw)) = trimmed.split_once('=') else {
                continue;
            };
            let slot = match name {
                "android.title" => &mut record.title,
                "android.text" => &mut record.text,
                "android.bigText" => &mut record.big_text,
                _ => {
                    // Skip the rest of a multi-line value of another extra.
                    if opens_value(raw) {
                        i = value_end(lines, i - 1, raw).1;
                    }
                    continue;
                }
            };
            let (value, next) = text_value(lines, i - 1, raw);
            i = next;
            *slot = Some(value);
            continue;
        }
        if trimmed == "extras={" {
            in_extras = true;
        } else if let Some(v) = trimmed.strip_prefix("key=") {
            record.key.get_or_insert_with(|| v.to_owned());
        } else if let Some(v) = trimmed.strip_prefix("flags=") {
            record.ongoing |= ongoing(v);
        } else if trimmed.starts_with("defaults=") {
            // Android 7: `defaults=0x00000000 flags=0x00000062`.
            if let Some(v) = trimmed
                .split_whitespace()
                .find_map(|w| w.strip_prefix("flags="))
            {
                record.ongoing |= ongoing(v);
            }
        } else if let Some(v) = trimmed.strip_prefix("when=") {
            record.when_ms = first_number(v);
        } else if let Some(v) = trimmed.strip_prefix("mCreationTimeMs=") {
            record.creation_ms = first_number(v);
        } else if let Some(v) = trimmed.strip_prefix("mUpdateTimeMs=") {
            record.update_ms = first_number(v);
        }
    }
    let mut redacted = false;
    let mut notifications: Vec<Notification> = records
        .into_iter()
        .map(|r| {
            let mut shown = |v: Option<TextValue>| match v {
                Some(TextValue::Shown(s)) => Some(s),
                Some(TextValue::Redacted) => {
                    redacted = true;
                    None
                }
                _ => None,
            };
            let title = shown(r.title);
            let text = shown(r.text).or_else(|| shown(r.big_text));
            Notification {
                key: r.key.unwrap_or_default(),
                package: r.package,
                title,
                text,
                posted_ms: r
                    .update_ms
                    .or(r.creation_ms)
                    .or(r.when_ms)
                    .filter(|ms| *ms > 0),
                ongoing: r.ongoing,
            }
        })
        .collect();
    // Newest first; the dump's own order (ranking) breaks ties.
    notifications.sort_by_key(|n| std::cmp::Reverse(n.posted_ms));
    Ok(NotificationDump {
        notifications,
        redacted,
    })
}

/// `NotificationRecord(0x…: pkg=P user=… key=K: Notification(…))`.
fn header(line: &str) -> Result<Record, ParseError> {
    let word = |name: &str| {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(name))
            .map(|v| v.trim_end_matches(':').to_owned())
    };
    let package = word("pkg=")
        .filter(|p| !p.is_empty())
        .ok_or_else(|| ParseError::malformed(COMMAND, "a record without pkg=", line))?;
    Ok(Record {
        key: word("key="),
        package,
        ongoing: word("flags=").is_some_and(|f| ongoing(&f)),
        ..Record::default()
    })
}

/// The count of milliseconds `v` starts with (`1716200500000/…`), grouped
/// digits read whole.
fn first_number(v: &str) -> Option<u64> {
    let (n, _) = crate::adb::parse::text::split_int(v)?;
    u64::try_from(n).ok()
}

/// `flags=ONGOING_EVENT|NO_CLEAR` or `flags=0x62`.
fn ongoing(v: &str) -> bool {
    let v = v.split_whitespace().next().unwrap_or("");
    match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).is_ok_and(|f| f & FLAG_ONGOING_EVENT != 0),
        None => v.split('|').any(|f| f == "ONGOING_EVENT"),
    }
}

/// Whether an extra's raw value opens a parenthesised value: `Type (…`.
fn opens_value(raw: &str) -> bool {
    raw.split_once(' ')
        .is_some_and(|(ty, rest)| !ty.is_empty() && !ty.contains('(') && rest.starts_with('('))
}

/// Whether `line` starts the next extra (`name=…` at the extras'
/// indentation `depth`) or closes the extras (`}`): what may follow the
/// last line of a value.
fn ends_value(line: &str, depth: usize) -> bool {
    let t = line.trim();
    if t == "}" {
        return true;
    }
    indent(line) == depth
        && t.split_once('=').is_some_and(|(name, _)| {
            name.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '$' | ':' | '-'))
        })
}

/// The parenthesised value that starts on line `at` (raw text `raw` after
/// `name=`), possibly going on over the following lines, and the index of
/// the line after it. A value's text may itself hold `)` at a line's end,
/// so it ends at a `)` only where the next line starts the next extra or
/// closes the extras; a value that never closes ends at the extras' `}`.
fn value_end(lines: &[&str], at: usize, raw: &str) -> (String, usize) {
    let depth = lines.get(at).map_or(0, |l| indent(l));
    let open = raw.find('(').map_or(raw.len(), |p| p + 1);
    let mut value = raw[open..].to_owned();
    let mut next = at + 1;
    let closes = |value: &str, next: usize| {
        value.ends_with(')') && lines.get(next).is_none_or(|l| ends_value(l, depth))
    };
    if closes(&value, next) {
        value.pop();
        return (value, next);
    }
    while next < lines.len() {
        let line = lines[next];
        if line.trim() == "}" {
            break;
        }
        next += 1;
        value.push('\n');
        value.push_str(line);
        if closes(&value, next) {
            value.pop();
            break;
        }
    }
    (value, next)
}

/// A text extra's value: `null`, `String (v)`, `String [length=N]`, `String`.
fn text_value(lines: &[&str], at: usize, raw: &str) -> (TextValue, usize) {
    let raw = raw.trim_end();
    if raw == "null" {
        return (TextValue::Absent, at + 1);
    }
    if opens_value(raw) {
        let (value, next) = value_end(lines, at, raw);
        return (TextValue::Shown(value), next);
    }
    (TextValue::Redacted, at + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adb::parse::failure;

    const REDACTED_17: &str = fixture!("dumpsys-notification/adbjsoncli-emulator-17.txt");
    const NOREDACT_14: &str = fixture!("dumpsys-notification/noredact-composed-14.txt");
    const REDACTED_LENGTH_17: &str =
        fixture!("dumpsys-notification/redacted-length-composed-17.txt");
    const OLD_7: &str = fixture!("dumpsys-notification/noredact-composed-7.txt");
    const EMPTY: &str = fixture!("dumpsys-notification/empty-composed-14.txt");

    #[test]
    fn real_redacted_dump_from_android_17() {
        let list = notifications(REDACTED_17).unwrap();
        assert_eq!(list.notifications.len(), 2);
        let clock = list
            .notifications
            .iter()
            .find(|n| n.package == "com.google.android.deskclock")
            .unwrap();
        assert_eq!(
            clock.key,
            "0|com.google.android.deskclock|2147483642|null|10173"
        );
        assert_eq!(clock.title, None);
        assert_eq!(clock.text, None);
        assert_eq!(clock.posted_ms, Some(1_779_532_067_942));
        assert!(!clock.ongoing);
        // The second record is cut off before its extras: a key and a package.
        let android = list
            .notifications
            .iter()
            .find(|n| n.package == "android")
            .unwrap();
        assert!(android.key.starts_with("0|android|2345|"));
        assert!(!list.redacted);
    }

    #[test]
    fn noredact_dump_reads_titles_texts_and_multi_line_values() {
        let list = notifications(NOREDACT_14).unwrap();
        assert!(!list.redacted);
        let got: Vec<(&str, Option<&str>, Option<&str>, bool)> = list
            .notifications
            .iter()
            .map(|n| {
                (
                    n.package.as_str(),
                    n.title.as_deref(),
                    n.text.as_deref(),
                    n.ongoing,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    "com.example.bank",
                    Some("Payment received"),
                    Some("€42.00 from \"Anna\" (rent)\nRef: 100% done; $HOME"),
                    false
                ),
                (
                    "org.videolan.vlc",
                    Some("Podcast #12"),
                    Some("Episode 12"),
                    true
                ),
                (
                    "com.google.android.apps.messaging",
                    Some("Grüße 👋"),
                    Some("See you at 7?"),
                    false
                ),
            ]
        );
        assert_eq!(list.notifications[0].posted_ms, Some(1_716_200_500_000));
        assert_eq!(
            list.notifications[0].key,
            "0|com.example.bank|17|null|10231"
        );
    }

    #[test]
    fn length_only_values_are_redacted() {
        let list = notifications(REDACTED_LENGTH_17).unwrap();
        assert!(list.redacted);
        let n = &list.notifications[0];
        assert_eq!((n.title.as_deref(), n.text.as_deref()), (None, None));
        assert_eq!(n.package, "android");
    }

    #[test]
    fn android_7_hex_flags_and_when() {
        let list = notifications(OLD_7).unwrap();
        assert_eq!(list.notifications.len(), 2);
        let music = &list.notifications[0];
        assert_eq!(music.package, "com.spotify.music");
        assert!(music.ongoing);
        assert_eq!(music.posted_ms, Some(1_500_000_100_000));
        assert_eq!(music.title.as_deref(), Some("Song"));
        let mail = &list.notifications[1];
        assert!(!mail.ongoing);
        assert_eq!(mail.text.as_deref(), Some("Lunch?"));
        assert_eq!(mail.key, "0|com.google.android.gm|3|null|10090");
    }

    #[test]
    fn an_empty_list_and_other_output() {
        assert!(notifications(EMPTY).unwrap().notifications.is_empty());
        assert_eq!(
            failure(notifications("Battery Service state:\n  level: 5\n")),
            "missing_field"
        );
        assert!(
            notifications("  Notification List:\n    NotificationRecord(0x1: user=0)\n").is_err()
        );
    }

    #[test]
    fn a_denial_after_the_header_is_a_permission_error_not_an_empty_list() {
        // Synthetic: the manager's header, then the denial DumpUtils prints.
        let text = "Current Notification Manager state:\nPermission Denial: can't dump NotificationManager from from pid=4242, uid=2000 due to missing android.permission.DUMP permission\n";
        match notifications(text) {
            Err(ParseError::Device(f)) => {
                assert_eq!(f.kind, crate::adb::parse::FailureKind::PermissionDenied);
            }
            other => panic!("{:?}", other.map(|d| d.notifications.len())),
        }
    }

    #[test]
    fn reads_any_text_without_panicking() {
        crate::adb::parse::tests::each_sample(|text| {
            let _ = notifications(text);
        });
    }
}
