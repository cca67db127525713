//! What `pm install`, `pm uninstall` and `pm clear` print.
//!
//! Success is a line `Success`. Failure is `Failure [CODE]` or `Failure
//! [CODE: message]` (install, uninstall; Android 5 and later), or `Failed`
//! (clear). Errors before the package manager ran (`Error: Unable to open
//! file: …`, `Exception occurred while executing …`) are the shared device
//! errors, recognised before this parser.

use super::error::ParseError;

/// `Ok(())` for `Success`; the failure line otherwise.
///
/// # Errors
/// [`ParseError::Malformed`] carrying the `Failure […]`/`Failed` line, or
/// the output when it has neither.
pub fn pm_outcome(command: &'static str, out: &str) -> Result<(), ParseError> {
    let lines: Vec<&str> = out
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if lines.contains(&"Success") {
        return Ok(());
    }
    let failure = lines
        .iter()
        .find(|l| l.starts_with("Failure") || l.starts_with("Failed"))
        .copied()
        .unwrap_or_else(|| lines.last().copied().unwrap_or("(no output)"));
    Err(ParseError::Malformed {
        command,
        detail: failure.chars().take(200).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn success_and_failures() {
        assert!(pm_outcome("pm install", "Performing Streamed Install\nSuccess\n").is_ok());
        assert!(pm_outcome("pm clear", "Success\n").is_ok());
        let err = pm_outcome(
            "pm install",
            "Failure [INSTALL_FAILED_UPDATE_INCOMPATIBLE: Package a.b signatures do not match previously installed version; ignoring!]\n",
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("INSTALL_FAILED_UPDATE_INCOMPATIBLE"),
            "{err}"
        );
        let err =
            pm_outcome("pm uninstall", "Failure [DELETE_FAILED_INTERNAL_ERROR]\n").unwrap_err();
        assert!(
            err.to_string().contains("DELETE_FAILED_INTERNAL_ERROR"),
            "{err}"
        );
        assert!(pm_outcome("pm clear", "Failed\n").is_err());
        assert!(pm_outcome("pm clear", "").is_err());
    }
}
