//! Recognising the error messages Android commands print.
//!
//! Whatever command ran, the shell, `cmd`, `dumpsys` and `am` report the same
//! few failures in recognisable words: a permission denial, a system service
//! the phone lacks, a command the phone lacks, or a missing activity. This
//! module turns a command's stdout, stderr and exit status into one of those
//! kinds. Mapping a kind to a wire error code is left to the caller.
//!
//! `am` prints some errors with exit status 0 on older Android, so messages are
//! recognised even when the status says success, but then only on lines that
//! *start* with an error marker: a long dump that merely mentions
//! "SecurityException" somewhere has not failed.

use serde::Serialize;

/// What kind of failure a device command reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// `Permission Denial`, `SecurityException`, `not allowed to`, `do not
    /// have permission`, `Permission denied`.
    PermissionDenied,
    /// `Can't find service: X`: the phone has no system service `X`.
    MissingService(String),
    /// `sh: X: not found` with exit status 127: the phone has no command `X`.
    CommandNotFound(String),
    /// An activity, intent target or other named thing does not exist; carries
    /// what the device named (a component, an intent, or `activity`).
    NotFound(String),
    /// Any other non-zero exit status.
    Other,
}

/// A failure reported by a device command, with the line that says so.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeviceFailure {
    /// The kind of failure.
    pub kind: FailureKind,
    /// The device's own words: the matching line, or the first meaningful one.
    pub message: String,
}

/// Classifies a device command's outcome; `None` when nothing failed.
///
/// Rules, first match wins: permission errors; `Can't find service: X`
/// (also `cmd: Can't find service: X`); `sh: X: not found` with exit status
/// 127; `am`/`monkey`/`pm` "not found" messages (`unable to resolve Intent`,
/// `does not exist`, `No activities found`, `No activity found`); otherwise a
/// non-zero exit status is [`FailureKind::Other`] carrying the first
/// meaningful line.
pub fn classify_device_error(stdout: &str, stderr: &str, exit: i32) -> Option<DeviceFailure> {
    let lines = candidate_lines(stdout, stderr, exit);
    let kinded = lines
        .iter()
        .find_map(|l| permission(l))
        .or_else(|| lines.iter().find_map(|l| missing_service(l)))
        .or_else(|| {
            (exit == 127)
                .then(|| lines.iter().find_map(|l| command_not_found(l)))
                .flatten()
        })
        .or_else(|| lines.iter().find_map(|l| not_found(l)));
    if let Some((kind, line)) = kinded {
        return Some(DeviceFailure {
            kind,
            message: excerpt(line),
        });
    }
    (exit != 0).then(|| DeviceFailure {
        kind: FailureKind::Other,
        message: first_meaningful_line(stdout, stderr, exit),
    })
}

/// The denial a service prints in place of its dump to a caller without
/// `android.permission.DUMP` (`Permission Denial: can't dump …`, or the
/// `SecurityException` itself), on any line of `stdout` that starts with
/// it: a service may print its header first.
///
/// For dumps whose text is the apps' own words (`dumpsys notification`),
/// which may start a line with anything else ("Error: card declined")
/// without having failed, so [`classify_device_error`]'s wider rules are
/// not applied to them.
pub fn dump_denial(stdout: &str) -> Option<DeviceFailure> {
    stdout
        .lines()
        .find(|l| {
            l.starts_with("Permission Denial") || l.starts_with("java.lang.SecurityException")
        })
        .map(|line| DeviceFailure {
            kind: FailureKind::PermissionDenied,
            message: line.trim().to_owned(),
        })
}

/// Lines that may carry an error: all of stderr, all of stdout on failure,
/// and otherwise only stdout lines that start with an error marker.
///
/// A successful, whole answer (exit status 0, stdout ending with its line
/// end) is not failed by a shell's `…: Permission denied` on stderr (a
/// profile script, a vendor wrapper, a file the tool skipped): that is
/// noise beside the answer, not the answer. Without an answer, with half
/// of one, or with a failed exit, the same line is the failure; and what
/// Android itself reports on stderr (`Permission Denial`,
/// `SecurityException`, `Error: …`) always counts.
fn candidate_lines<'a>(stdout: &'a str, stderr: &'a str, exit: i32) -> Vec<&'a str> {
    let answered = exit == 0 && !stdout.trim().is_empty() && stdout.ends_with('\n');
    let out = stdout
        .lines()
        .filter(|l| exit != 0 || starts_with_error_marker(l));
    stderr
        .lines()
        .filter(|l| !(answered && is_errno_noise(l)))
        .chain(out)
        .filter(|l| !l.trim().is_empty())
        .collect()
}

/// A shell's or tool's errno message, `[WHO: ]Permission denied`: what
/// `strerror(EACCES)` reads, as opposed to Android's own denials.
fn is_errno_noise(line: &str) -> bool {
    let line = line.trim();
    line.ends_with("Permission denied")
        && !["Error", "Exception", "java.lang.", "Security exception"]
            .iter()
            .any(|m| line.starts_with(m))
        && !line.contains("Permission Denial")
        && !line.contains("SecurityException")
}

/// Line starts (at column 0) that only error messages have.
const ERROR_MARKERS: &[&str] = &[
    "Error",
    "Exception",
    "java.lang.",
    "Security exception",
    "Permission Denial",
    "Can't find service",
    "cmd: Can't find service",
    "No activity found",
    "** No activities found",
    "/system/bin/sh:",
    "sh:",
];

fn starts_with_error_marker(line: &str) -> bool {
    ERROR_MARKERS.iter().any(|m| line.starts_with(m))
}

fn permission(line: &str) -> Option<(FailureKind, &str)> {
    let lower = line.to_ascii_lowercase();
    let hit = line.contains("Permission Denial")
        || line.contains("SecurityException")
        || lower.contains("not allowed to")
        || lower.contains("do not have permission")
        || lower.contains("permission denied");
    hit.then_some((FailureKind::PermissionDenied, line))
}

fn missing_service(line: &str) -> Option<(FailureKind, &str)> {
    const KEY: &str = "Can't find service:";
    let at = line.find(KEY)?;
    let name = line[at + KEY.len()..].split_whitespace().next()?;
    Some((FailureKind::MissingService(name.to_owned()), line))
}

/// `/system/bin/sh: X: not found`, mksh's `X: inaccessible or not found`, and
/// dash's `sh: 1: X: not found`.
fn command_not_found(line: &str) -> Option<(FailureKind, &str)> {
    let trimmed = line.trim();
    if !trimmed.ends_with("not found") {
        return None;
    }
    let at = trimmed.find("sh: ")?;
    let parts: Vec<&str> = trimmed[at + 4..].split(": ").collect();
    let (_, before) = parts.split_last()?;
    let name = before
        .iter()
        .rev()
        .find(|p| !p.trim().is_empty() && !p.trim().chars().all(|c| c.is_ascii_digit()))?;
    Some((FailureKind::CommandNotFound(name.trim().to_owned()), line))
}

fn not_found(line: &str) -> Option<(FailureKind, &str)> {
    let subject = if let Some(at) = line.find("unable to resolve Intent") {
        line[at + "unable to resolve ".len()..].trim().to_owned()
    } else if let Some(at) = line.find(" does not exist") {
        does_not_exist_subject(&line[..at])
    } else if line.contains("No activities found") || line.contains("No activity found") {
        "activity".to_owned()
    } else {
        return None;
    };
    Some((FailureKind::NotFound(subject), line))
}

/// `Error: Activity class {pkg/cls} does not exist.` → `pkg/cls`;
/// `Device "wlan0" does not exist.` → `Device "wlan0"`.
fn does_not_exist_subject(before: &str) -> String {
    let before = before.trim();
    let before = before.strip_prefix("Error:").unwrap_or(before).trim();
    match (before.find('{'), before.rfind('}')) {
        (Some(open), Some(close)) if open < close => before[open + 1..close].trim().to_owned(),
        _ => before.to_owned(),
    }
}

/// The line most likely to explain a generic failure.
///
/// `monkey` echoes its arguments (`args:`, ` arg:`, `data=`, `bash arg:`)
/// before the line that matters, so those are skipped; a line that looks like
/// an error is preferred over the first one; stderr is preferred over stdout.
fn first_meaningful_line(stdout: &str, stderr: &str, exit: i32) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .chain(stdout.lines())
        .map(str::trim)
        .filter(|l| !l.is_empty() && !is_echo_noise(l))
        .collect();
    lines
        .iter()
        .find(|l| looks_like_error(l))
        .or_else(|| lines.first())
        .map_or_else(|| format!("exit status {exit}"), |l| excerpt(l))
}

/// Most characters of a device's line quoted in an error message.
const EXCERPT: usize = 120;

/// A device's line as an error message quotes it: trimmed, at most
/// [`EXCERPT`] characters (then `…`), with control and format characters
/// escaped (`\u{1b}`), so garbage output never reaches a reply raw or at
/// length.
pub(crate) fn excerpt(line: &str) -> String {
    let line = line.trim();
    let mut out = String::new();
    for (n, c) in line.chars().enumerate() {
        if n == EXCERPT {
            out.push('…');
            break;
        }
        if c.is_control() || is_format(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

/// Unicode format characters that can reorder or hide text (bidi
/// controls, zero-width characters, the byte-order mark).
fn is_format(c: char) -> bool {
    matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2069}' | '\u{feff}' | '\u{ad}')
}

fn is_echo_noise(line: &str) -> bool {
    ["args:", "arg:", "data=", "bash arg:"]
        .iter()
        .any(|p| line.starts_with(p))
}

fn looks_like_error(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    line.starts_with("**")
        || [
            "error",
            "exception",
            "fail",
            "abort",
            "denied",
            "invalid",
            "unknown",
        ]
        .iter()
        .any(|w| lower.contains(w))
}

#[cfg(test)]
mod tests {
    use super::super::tests::AM_START_ERRORS;
    use super::*;

    #[test]
    fn a_garbage_line_is_quoted_short_and_escaped() {
        let garbage = format!("\u{1b}[31m{}\u{202e}\u{7}", "x".repeat(5000));
        let failure = classify_device_error(&garbage, "", 1).expect("a failure");
        assert!(
            failure.message.chars().count() <= 130,
            "{}",
            failure.message
        );
        assert!(failure.message.ends_with('…'), "{}", failure.message);
        assert!(
            !failure.message.chars().any(char::is_control),
            "{:?}",
            failure.message
        );
        assert!(
            failure.message.starts_with("\\u{1b}"),
            "{}",
            failure.message
        );
        let denied =
            classify_device_error("", "Permission denied\u{7}\u{202e}", 1).expect("a failure");
        assert_eq!(denied.message, "Permission denied\\u{7}\\u{202e}");
    }

    fn kind(stdout: &str, stderr: &str, exit: i32) -> Option<FailureKind> {
        classify_device_error(stdout, stderr, exit).map(|f| f.kind)
    }

    #[test]
    fn table_of_rules() {
        use FailureKind::*;
        let cases: &[(&str, &str, i32, Option<FailureKind>)] = &[
            ("", "", 0, None),
            ("Success", "", 0, None),
            (
                "",
                "java.lang.SecurityException: Permission Denial: broadcast asks to run as user -1",
                255,
                Some(PermissionDenied),
            ),
            (
                "Security exception: Not allowed to start service Intent { }",
                "",
                0,
                Some(PermissionDenied),
            ),
            (
                "cat: /proc/kmsg: Permission denied",
                "",
                1,
                Some(PermissionDenied),
            ),
            (
                "Can't find service: media.camera",
                "",
                0,
                Some(MissingService("media.camera".into())),
            ),
            (
                "",
                "/system/bin/sh: svc: not found",
                127,
                Some(CommandNotFound("svc".into())),
            ),
            (
                "",
                "/system/bin/sh: cmd: inaccessible or not found",
                127,
                Some(CommandNotFound("cmd".into())),
            ),
            (
                "",
                "sh: 1: wm: not found",
                127,
                Some(CommandNotFound("wm".into())),
            ),
            // "not found" without status 127 is not a missing command.
            ("", "sh: wm: not found", 1, Some(Other)),
            (
                "No activity found",
                "",
                0,
                Some(NotFound("activity".into())),
            ),
            (
                "Device \"wlan0\" does not exist.",
                "",
                1,
                Some(NotFound("Device \"wlan0\"".into())),
            ),
            ("", "Killed", 137, Some(Other)),
            ("", "", 1, Some(Other)),
            // A dump mentioning an exception in an indented line did not fail.
            (
                "Recent activity:\n  java.lang.SecurityException thrown by uid 10042\n",
                "",
                0,
                None,
            ),
            // A warning on stderr with exit 0 is not a failure.
            ("ok", "WARNING: linker: text relocations", 0, None),
        ];
        for (stdout, stderr, exit, expected) in cases {
            assert_eq!(
                kind(stdout, stderr, *exit),
                *expected,
                "{stdout:?} / {stderr:?} / {exit}"
            );
        }
    }

    #[test]
    fn stderr_noise_does_not_fail_a_complete_answer() {
        use FailureKind::*;
        // Synthetic: a shell's errno message on stderr (a profile script,
        // a vendor wrapper) beside a whole answer with exit status 0.
        for noise in [
            "Permission denied\n",
            "/system/bin/sh: /data/local/tmp/.profile: Permission denied\n",
        ] {
            assert_eq!(kind("1\n", noise, 0), None, "{noise:?}");
            assert_eq!(
                kind("Current Battery Service state:\n  level: 5\n", noise, 0),
                None
            );
            // No answer, half an answer, or a failed exit: still the denial.
            assert_eq!(kind("", noise, 0), Some(PermissionDenied));
            assert_eq!(kind("  level: 5", noise, 0), Some(PermissionDenied));
            assert_eq!(kind("1\n", noise, 1), Some(PermissionDenied));
        }
        // What Android itself reports on stderr is no noise.
        assert_eq!(
            kind(
                "Starting: Intent { cmp=com.a/.Main }\n",
                "java.lang.SecurityException: Permission Denial: starting Intent { cmp=com.a/.Main } not exported\n",
                0
            ),
            Some(PermissionDenied)
        );
        assert_eq!(
            kind(
                "Starting: Intent { cmp=com.a/.Main }\n",
                "Error type 3\nError: Activity class {com.a/com.a.Main} does not exist.\n",
                0
            ),
            Some(NotFound("com.a/com.a.Main".into()))
        );
    }

    #[test]
    fn other_failures_carry_the_first_meaningful_line() {
        let f = classify_device_error("", "", 3).expect("failure");
        assert_eq!(f.message, "exit status 3");
        let f = classify_device_error("line one\n", "\nboom: bad thing\n", 2).expect("failure");
        assert_eq!(f.message, "boom: bad thing");
    }

    #[test]
    fn am_start_error_fixtures_are_not_found() {
        for &(text, subject) in AM_START_ERRORS {
            // `am` exits 0 on some releases and 1 on others: both must be caught.
            for exit in [0, 1] {
                let f = classify_device_error(text, "", exit).expect("failure");
                assert_eq!(f.kind, FailureKind::NotFound(subject.to_owned()));
                assert!(f.message.starts_with("Error: Activity"), "{}", f.message);
            }
        }
    }

    #[test]
    fn missing_service_fixtures() {
        let install = fixture!("errors/adb-root-issue6-cmd-cant-find-service-package-9.txt");
        let f = classify_device_error(install, "", 1).expect("failure");
        assert_eq!(f.kind, FailureKind::MissingService("package".into()));
        assert_eq!(
            f.message,
            "adb: failed to install .apk: cmd: Can't find service: package"
        );
        let dumpsys =
            fixture!("errors/dumpsys-cant-find-service-telephony-adbjsoncli-emulator-17.txt");
        for exit in [0, 1] {
            let f = classify_device_error(dumpsys, "", exit).expect("failure");
            assert_eq!(f.kind, FailureKind::MissingService("telephony".into()));
            assert_eq!(f.message, "Can't find service: telephony");
        }
    }

    #[test]
    fn monkey_fixtures() {
        let syskeys_out = fixture!("monkey-launch/airtest-wzry-syskeys-stdout-unknown.txt");
        let syskeys_err = fixture!("monkey-launch/airtest-wzry-syskeys-stderr-unknown.txt");
        let f = classify_device_error(syskeys_out, syskeys_err, 1).expect("failure");
        assert_eq!(f.kind, FailureKind::Other);
        assert_eq!(
            f.message,
            "** SYS_KEYS has no physical keys but with factor 2.0%."
        );

        let missing = fixture!("monkey-launch/ftandroid-test-not-installed-emulator-unknown.txt");
        for exit in [0, 252] {
            let f = classify_device_error(missing, "", exit).expect("failure");
            assert_eq!(f.kind, FailureKind::NotFound("activity".into()));
            assert_eq!(f.message, "** No activities found to run, monkey aborted.");
        }

        let ok = fixture!("monkey-launch/react-native-owl-log-unknown.txt");
        assert_eq!(classify_device_error(ok, "", 0), None);
        assert_eq!(classify_device_error(syskeys_out, "", 0), None);
    }

    #[test]
    fn serialises_kind_in_snake_case() {
        let f = DeviceFailure {
            kind: FailureKind::MissingService("wifi".into()),
            message: "Can't find service: wifi".into(),
        };
        let json = serde_json::to_string(&f).expect("json");
        assert_eq!(
            json,
            r#"{"kind":{"missing_service":"wifi"},"message":"Can't find service: wifi"}"#
        );
    }
}
