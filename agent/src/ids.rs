//! The ids callers give for sessions, runs and tasks, checked in one place
//! (the store keys its rows by them; tools take them from the model).

use crate::error::AgentError;

/// Check a caller-supplied id: 1–64 of `[A-Za-z0-9_-]`.
///
/// # Errors
/// [`AgentError::InvalidId`].
pub fn check_id(id: &str) -> Result<(), AgentError> {
    if !id.is_empty()
        && id.len() <= 64
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        Ok(())
    } else {
        Err(AgentError::InvalidId(id.chars().take(80).collect()))
    }
}
