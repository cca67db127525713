//! The one error type of the parsers.
//!
//! A parser fails in one of a few ways: a value every device prints is absent
//! (usually a fragment, or the wrong command's output), a value is there but
//! unreadable, the device says the thing asked for does not exist, the
//! output is a device error message rather than the command's normal answer,
//! or the output was cut short (a `dumpsys` that timed out) so nothing in it
//! can be trusted.
//! The data a caller needs to map the failure to a wire code is kept in the
//! variant; `Display` text is for logs.

use super::device_error::DeviceFailure;

/// Why a device command's output could not be turned into a typed result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// A value that every device prints for this command was not in the output.
    #[error("`{command}` output has no `{field}`")]
    MissingField {
        /// The device command whose output was parsed, e.g. `dumpsys battery`.
        command: &'static str,
        /// The line or key that was looked for.
        field: &'static str,
    },
    /// The value was present but could not be read.
    #[error("`{command}` output is malformed: {detail}")]
    Malformed {
        /// The device command whose output was parsed.
        command: &'static str,
        /// What was wrong, quoting the offending text (shortened).
        detail: String,
    },
    /// The device reported that the requested thing does not exist.
    #[error("not found: {what}")]
    NotFound {
        /// What was not found, as the device named it.
        what: String,
    },
    /// The output is a device error message (permission, missing service or
    /// command) instead of the command's normal answer.
    #[error("device error: {}", .0.message)]
    Device(DeviceFailure),
    /// The output was cut short on the phone (a `dumpsys` timeout marker, a
    /// service lost mid-dump, a last line without its end), although the
    /// command reported success. Nothing may be read from it; the same
    /// command may well succeed when run again.
    #[error("output cut short: {detail}")]
    Incomplete {
        /// What showed the output was cut short, quoting it (shortened).
        detail: String,
    },
}

impl ParseError {
    /// A [`ParseError::Malformed`] quoting at most 120 characters of `text`
    /// (escaped as a Rust string literal: no control character goes out raw).
    pub(crate) fn malformed(command: &'static str, what: &str, text: &str) -> Self {
        let quoted: String = text.trim().chars().take(120).collect();
        Self::Malformed {
            command,
            detail: format!("{what}: {quoted:?}"),
        }
    }
}

/// Which way a parse failed, as a short name (`ok` when it did not), so
/// tests can list inputs and the failure each must give.
#[cfg(test)]
pub(crate) fn failure<T>(result: Result<T, ParseError>) -> &'static str {
    match result {
        Ok(_) => "ok",
        Err(ParseError::MissingField { .. }) => "missing_field",
        Err(ParseError::Malformed { .. }) => "malformed",
        Err(ParseError::NotFound { .. }) => "not_found",
        Err(ParseError::Device(_)) => "device",
        Err(ParseError::Incomplete { .. }) => "incomplete",
    }
}
