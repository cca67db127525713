//! Single values: `settings get NAMESPACE KEY` and `getprop KEY`.
//!
//! Both print the value on one line; `settings` prints `null` for a key that
//! was never set and `getprop` prints an empty line for an unknown property.

use super::error::ParseError;
use super::text::reject_device_error;

/// Parses `settings get …`: the trimmed value, `None` for `null` or nothing.
///
/// # Errors
/// [`ParseError::Device`] when the output is a device error message.
pub fn setting_value(output: &str) -> Result<Option<String>, ParseError> {
    reject_device_error(output)?;
    let value = output.trim();
    Ok((!value.is_empty() && value != "null").then(|| value.to_owned()))
}

/// Parses `settings get NAMESPACE KEY` for a setting that holds a whole
/// number (`screen_brightness`, `screen_off_timeout`): `None` when it is
/// unset, else the number.
///
/// # Errors
/// [`ParseError::Malformed`] for a value that is not a whole number (the
/// caller's answer would otherwise be a `null` that means "unset"),
/// quoting a short excerpt of it; [`ParseError::Device`] for a device
/// error message.
pub fn setting_number(output: &str) -> Result<Option<i64>, ParseError> {
    let Some(value) = setting_value(output)? else {
        return Ok(None);
    };
    value
        .parse()
        .map(Some)
        .map_err(|_| ParseError::malformed("settings get", "not a whole number", &value))
}

/// Parses `getprop KEY`: the trimmed value, `None` when it is empty.
///
/// # Errors
/// [`ParseError::Device`] when the output is a device error message.
pub fn getprop_value(output: &str) -> Result<Option<String>, ParseError> {
    reject_device_error(output)?;
    let value = output.trim();
    Ok((!value.is_empty()).then(|| value.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setting_values() {
        let cases = [
            ("1\n", Some("1")),
            ("  0.39763778 \r\n", Some("0.39763778")),
            ("null\n", None),
            ("", None),
            ("\n", None),
        ];
        for (input, expected) in cases {
            assert_eq!(
                setting_value(input),
                Ok(expected.map(str::to_owned)),
                "{input:?}"
            );
        }
        assert!(setting_value("cmd: Can't find service: settings\n").is_err());
    }

    #[test]
    fn a_number_setting_is_a_number_or_unset_and_garbage_is_malformed() {
        assert_eq!(setting_number("128\n"), Ok(Some(128)));
        assert_eq!(setting_number("null\n"), Ok(None));
        assert_eq!(setting_number(""), Ok(None));
        let garbage = format!("\u{1b}]0;pwned\u{7}{}", "\u{fffd}".repeat(400));
        let error = setting_number(&garbage).unwrap_err();
        assert_eq!(
            crate::adb::parse::failure(Err::<(), _>(error.clone())),
            "malformed"
        );
        let text = error.to_string();
        assert!(text.chars().count() < 200, "{text}");
        assert!(!text.chars().any(char::is_control), "{text:?}");
        assert!(setting_number("cmd: Can't find service: settings\n").is_err());
    }

    #[test]
    fn getprop_single_fixture() {
        let model = fixture!("getprop-single/aafm-issue23-gt-p7510-ro.product.model.txt");
        assert_eq!(getprop_value(model), Ok(Some("GT-P7510".into())));
        assert_eq!(getprop_value("\n"), Ok(None));
    }
}
