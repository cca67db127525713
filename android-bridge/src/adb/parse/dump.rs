//! Whether a `dumpsys` run delivered a whole dump.
//!
//! `dumpsys SERVICE` exits 0 even when what it printed cannot be trusted:
//!
//! - It gives every service a deadline (10 s unless `-t`/`-T` says otherwise)
//!   and, when it passes, stops reading, prints a marker and exits 0. The
//!   dump before the marker is cut wherever the service had got to, often in
//!   the middle of a line. Android has printed three forms of the marker:
//!   `*** SERVICE DUMP TIMEOUT EXPIRED ***` (7.0),
//!   `*** SERVICE 'wifi' DUMP TIMEOUT (10s) EXPIRED ***` (7.1 and 8.0) and
//!   `*** SERVICE 'wifi' DUMP TIMEOUT (10000ms) EXPIRED ***` (8.1 on, where it
//!   is printed twice: once into the dump, once by `dumpsys` itself).
//! - When the service dies or the pipe breaks mid-dump, `dumpsys` says so on
//!   stderr (`Error with service 'wifi' while dumping: DEAD_OBJECT`, `Failed
//!   to read while dumping service wifi: …`; before 7.0 `Error dumping
//!   service info: (…) wifi`) and still exits 0.
//! - A service that answers nothing at all leaves stdout empty, with exit 0.
//!   Every service the bridge reads prints at least a header when it works,
//!   so an empty dump is a failure, never "nothing there".
//!
//! Reading values out of such text would report whatever the cut-off part
//! happened to say (or "not found" for what was cut off) as the phone's
//! state. [`dump_complete`] is applied to every `dumpsys` run before its
//! parser, in one place (`adb::actions`), so no parser has to repeat it.

use super::device_error::{DeviceFailure, FailureKind};
use super::error::ParseError;

/// What `dumpsys` prints on stderr (stdout on phones that merge the two)
/// when it lost the service part-way through a dump.
const DUMP_ERRORS: &[&str] = &[
    "Error with service '",
    "Error dumping service info",
    "Error in poll while dumping service",
    "Failed to read while dumping service",
    "Failed to write while dumping service",
    "Failed to create pipe to dump service info",
];

/// Checks that `command` (e.g. `dumpsys wifi`) printed a whole dump.
///
/// # Errors
/// [`ParseError::Incomplete`] when the dump was cut short: a timeout marker
/// in any form, a `dumpsys` error about losing the service mid-dump, or
/// output that stops in the middle of a line. [`ParseError::Device`] (kind
/// [`FailureKind::Other`]) when the dump is empty.
pub fn dump_complete(command: &str, stdout: &str, stderr: &str) -> Result<(), ParseError> {
    let marker = stdout
        .lines()
        .chain(stderr.lines())
        .map(str::trim)
        .find(|l| is_timeout_marker(l));
    if let Some(marker) = marker {
        return Err(ParseError::Incomplete {
            detail: format!(
                "the phone's dump timed out part-way (`{}`)",
                shorten(marker)
            ),
        });
    }
    // On stdout (phones before Android 7 merge stderr into it) only at the
    // start of a line: a dump's own indented text may quote anything.
    let dump_error = |l: &&str| DUMP_ERRORS.iter().any(|e| l.starts_with(e));
    let error = stderr
        .lines()
        .map(str::trim)
        .find(dump_error)
        .or_else(|| stdout.lines().find(dump_error));
    if let Some(error) = error {
        return Err(ParseError::Incomplete {
            detail: format!("the phone lost the service mid-dump (`{}`)", shorten(error)),
        });
    }
    if stdout.trim().is_empty() {
        return Err(ParseError::Device(DeviceFailure {
            kind: FailureKind::Other,
            message: format!("`{command}` printed nothing (the service gave no dump)"),
        }));
    }
    if !stdout.ends_with('\n') {
        let last = stdout.lines().next_back().unwrap_or_default();
        return Err(ParseError::Incomplete {
            detail: format!("the dump stops mid-line (`{}`)", shorten(last)),
        });
    }
    Ok(())
}

/// Any of the three forms, with or without the service name and the limit,
/// anywhere in the line (a vendor build may prefix its own words).
fn is_timeout_marker(line: &str) -> bool {
    line.contains("***")
        && line
            .find("DUMP TIMEOUT")
            .is_some_and(|at| line[at..].contains("EXPIRED"))
}

/// At most 120 characters of `text`, for an error message.
fn shorten(text: &str) -> String {
    super::device_error::excerpt(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    const WIFI_TIMEOUT: &str = fixture!("dumpsys-wifi/droidwarden-timeout-10000ms-mid-line.txt");
    const BATTERY_TIMEOUT_MS: &str =
        fixture!("dumpsys-battery/droidwarden-timeout-10000ms-mid-line.txt");
    const BATTERY_TIMEOUT_SECONDS: &str =
        fixture!("dumpsys-battery/droidwarden-timeout-10s-android8.txt");
    /// Android 7.0's form, which names neither the service nor the limit.
    const TIMEOUT_ANDROID_7_0: &str = "Current Battery Service state:\n  AC powered: true\n  lev\n*** SERVICE DUMP TIMEOUT EXPIRED ***\n\n";
    const POWER_CUT: &str = fixture!("dumpsys-power/droidwarden-cut-mid-line.txt");

    fn incomplete(stdout: &str, stderr: &str) -> bool {
        matches!(
            dump_complete("dumpsys x", stdout, stderr),
            Err(ParseError::Incomplete { .. })
        )
    }

    #[test]
    fn every_form_of_the_timeout_marker_is_an_incomplete_dump() {
        for text in [
            WIFI_TIMEOUT,
            BATTERY_TIMEOUT_MS,
            BATTERY_TIMEOUT_SECONDS,
            TIMEOUT_ANDROID_7_0,
        ] {
            assert!(incomplete(text, ""), "{text}");
        }
        let Err(ParseError::Incomplete { detail }) =
            dump_complete("dumpsys wifi", WIFI_TIMEOUT, "")
        else {
            panic!("incomplete");
        };
        assert!(
            detail.contains("*** SERVICE 'wifi' DUMP TIMEOUT (10000ms) EXPIRED ***"),
            "{detail}"
        );
        // A vendor build's variant without the service name.
        assert!(incomplete(
            "Layers:\n*** DUMP TIMEOUT (10000ms) EXPIRED ***\n",
            ""
        ));
    }

    #[test]
    fn dumpsys_errors_about_the_service_are_an_incomplete_dump() {
        for stderr in [
            "Error with service 'audio' while dumping: DEAD_OBJECT\n",
            "Error dumping service info: (Broken pipe) audio\n",
            "Failed to read while dumping service audio: Connection reset by peer\n",
        ] {
            assert!(
                incomplete("- STREAM_MUSIC:\n   Min: 0\n", stderr),
                "{stderr}"
            );
            // Merged into stdout (before Android 7).
            assert!(
                incomplete(&format!("- STREAM_MUSIC:\n{stderr}"), ""),
                "{stderr}"
            );
        }
        // A dump quoting such words in its own indented text did not fail.
        assert_eq!(
            dump_complete(
                "dumpsys x",
                "Recent events:\n  Error with service 'foo' while dumping: DEAD_OBJECT\n",
                ""
            ),
            Ok(())
        );
    }

    #[test]
    fn a_dump_cut_mid_line_is_incomplete() {
        assert!(incomplete(POWER_CUT, ""));
        // The same text with its line end is a whole dump.
        assert_eq!(
            dump_complete("dumpsys power", &format!("{POWER_CUT}\n"), ""),
            Ok(())
        );
    }

    #[test]
    fn an_empty_dump_is_a_device_error() {
        for stdout in ["", "\n", "  \r\n"] {
            match dump_complete("dumpsys audio", stdout, "") {
                Err(ParseError::Device(f)) => {
                    assert_eq!(f.kind, FailureKind::Other);
                    assert!(f.message.contains("`dumpsys audio` printed nothing"));
                }
                other => panic!("{stdout:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn whole_real_dumps_pass() {
        for text in [
            fixture!("dumpsys-wifi/adbjsoncli-emulator-17.txt"),
            fixture!("dumpsys-battery/adbjsoncli-emulator-17.txt"),
            fixture!("dumpsys-audio/redroid-rockchip-issue17-streams-fragment.txt"),
            fixture!("dumpsys-power/adbjsoncli-emulator-17.txt"),
        ] {
            assert_eq!(dump_complete("dumpsys x", text, ""), Ok(()));
        }
        // Words that merely mention a timeout are not the marker.
        assert_eq!(
            dump_complete(
                "dumpsys x",
                "mScanTimeout: 10000ms\nDUMP TIMEOUT stats: 0\n",
                ""
            ),
            Ok(())
        );
    }
}
