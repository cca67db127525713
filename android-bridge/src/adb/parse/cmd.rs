//! The acknowledgement of `cmd SERVICE VERB` commands.
//!
//! Shell commands built on `ShellCommand` print `VERB: Success` (newer
//! releases first echo `ShellCommand: Exec VERB`); failures print a reason.

use super::error::ParseError;
use super::text::reject_device_error;

/// Checks the output of a `cmd … enable`-style command for `Success`.
///
/// # Errors
/// [`ParseError::Device`] for a device error message, [`ParseError::Malformed`]
/// quoting a line that reports a failure, and [`ParseError::MissingField`]
/// when no line says `Success`.
pub fn cmd_success(output: &str) -> Result<(), ParseError> {
    reject_device_error(output)?;
    let success = output
        .lines()
        .map(str::trim)
        .any(|l| l == "Success" || l.ends_with(": Success") || l.starts_with("Success:"));
    if success {
        return Ok(());
    }
    let failure = output.lines().map(str::trim).find(|l| {
        let lower = l.to_ascii_lowercase();
        lower.contains("fail") || lower.contains("error")
    });
    match failure {
        Some(line) => Err(ParseError::malformed("cmd", "command failed", line)),
        None => Err(ParseError::MissingField {
            command: "cmd",
            field: "Success",
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adb::parse::failure;

    #[test]
    fn bluetooth_enable_fixture() {
        let text = fixture!("cmd-bluetooth_manager-enable/adbjsoncli-emulator-17.txt");
        assert_eq!(cmd_success(text), Ok(()));
    }

    #[test]
    fn other_outcomes() {
        assert_eq!(cmd_success("disable: Success\n"), Ok(()));
        assert_eq!(
            failure(cmd_success("enable: Failed (bluetooth is restricted)\n")),
            "malformed"
        );
        assert_eq!(failure(cmd_success("")), "missing_field");
        assert_eq!(
            failure(cmd_success("cmd: Can't find service: bluetooth_manager\n")),
            "device"
        );
    }
}
