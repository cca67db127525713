//! The `airplane_mode` service over ADB: `cmd connectivity airplane-mode`.

use super::*;
use crate::adb::parse::ParseError;
use crate::adb::parse::text::reject_device_error;
use droidwarden_services::{AirplaneModeAction, AirplaneToggle};

pub(super) async fn run(sh: &dyn Shell, action: &AirplaneModeAction) -> Result<Value, BridgeError> {
    let argv: &[&str] = match action {
        AirplaneModeAction::Status => &["cmd", "connectivity", "airplane-mode"],
        AirplaneModeAction::Enable => &["cmd", "connectivity", "airplane-mode", "enable"],
        AirplaneModeAction::Disable => &["cmd", "connectivity", "airplane-mode", "disable"],
    };
    let out = ok(sh, argv).await?;
    let enabled = match action {
        AirplaneModeAction::Status => parsed(sh.device_name(), argv, airplane_mode(&out))?,
        AirplaneModeAction::Enable => true,
        AirplaneModeAction::Disable => false,
    };
    answer(AirplaneToggle { enabled })
}

/// Parses airplane mode: `enabled`/`disabled` from `cmd connectivity
/// airplane-mode`, or `1`/`0` from `settings get global airplane_mode_on`.
///
/// # Errors
/// [`ParseError::Malformed`] for any other text, [`ParseError::Device`] for a
/// device error message.
pub fn airplane_mode(output: &str) -> Result<bool, ParseError> {
    reject_device_error(output)?;
    match output.trim() {
        "enabled" | "1" => Ok(true),
        "disabled" | "0" => Ok(false),
        other => Err(ParseError::malformed(
            "cmd connectivity airplane-mode",
            "expected enabled/disabled",
            other,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn airplane_mode_fixture_and_forms() {
        let fixture = fixture!("cmd-connectivity-airplane-mode/adbjsoncli-emulator-17.txt");
        assert_eq!(airplane_mode(fixture), Ok(false));
        for (input, expected) in [
            ("enabled\n", Some(true)),
            ("1", Some(true)),
            ("0\n", Some(false)),
            ("maybe", None),
        ] {
            assert_eq!(airplane_mode(input).ok(), expected, "{input:?}");
        }
    }

    #[test]
    fn reads_any_text_without_panicking() {
        crate::adb::parse::tests::each_sample(|text| {
            let _ = airplane_mode(text);
        });
    }
}
