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
    fn getprop_single_fixture() {
        let model = fixture!("getprop-single/aafm-issue23-gt-p7510-ro.product.model.txt");
        assert_eq!(getprop_value(model), Ok(Some("GT-P7510".into())));
        assert_eq!(getprop_value("\n"), Ok(None));
    }
}
