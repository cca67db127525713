//! API keys: where they come from and how they are kept out of logs.
//!
//! A key is read from an environment variable or from a file (systemd
//! credentials put one under `$CREDENTIALS_DIRECTORY`). It is held in a
//! [`Secret`], whose `Debug` and `Display` print `[redacted]`, so a key can
//! never reach a log line or an error message by accident.

use crate::error::AgentError;
use std::fmt;
use std::path::PathBuf;

/// A secret string (an API key). `Debug` and `Display` redact it; the only
/// way to the value is [`Secret::expose`], at the point of use.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wrap a value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value itself: call it only where the key goes on the wire.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// Where an API key comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// No key: local endpoints such as Ollama or llama.cpp.
    None,
    /// The named environment variable.
    Env(String),
    /// A file holding the key (trailing whitespace is ignored), e.g. a
    /// systemd credential.
    File(PathBuf),
}

impl KeySource {
    /// Read the key. Blocking I/O (a small file or the environment): call it
    /// once at start-up, not on the async runtime's hot path.
    ///
    /// # Errors
    /// [`AgentError::Secret`] when the variable is unset or empty, or the
    /// file cannot be read or is empty. The message names the variable or
    /// file, never the value.
    pub fn load(&self) -> Result<Option<Secret>, AgentError> {
        match self {
            Self::None => Ok(None),
            Self::Env(name) => match std::env::var(name) {
                Ok(v) if !v.trim().is_empty() => Ok(Some(Secret(v.trim().to_owned()))),
                Ok(_) => Err(AgentError::Secret {
                    source_name: format!("environment variable {name}"),
                    reason: "is empty".into(),
                }),
                Err(_) => Err(AgentError::Secret {
                    source_name: format!("environment variable {name}"),
                    reason: "is not set".into(),
                }),
            },
            Self::File(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| AgentError::Secret {
                    source_name: format!("file {}", path.display()),
                    reason: e.to_string(),
                })?;
                let key = text.trim();
                if key.is_empty() {
                    return Err(AgentError::Secret {
                        source_name: format!("file {}", path.display()),
                        reason: "is empty".into(),
                    });
                }
                Ok(Some(Secret(key.to_owned())))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_print() {
        let s = Secret::new("sk-very-secret");
        assert_eq!(format!("{s}"), "[redacted]");
        assert!(!format!("{s:?}").contains("very"));
        assert_eq!(s.expose(), "sk-very-secret");
    }

    #[test]
    fn key_from_file_is_trimmed_and_errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        std::fs::write(&path, "abc123\n").unwrap();
        let key = KeySource::File(path.clone()).load().unwrap().unwrap();
        assert_eq!(key.expose(), "abc123");
        std::fs::write(&path, "  \n").unwrap();
        let err = KeySource::File(path).load().unwrap_err().to_string();
        assert!(err.contains("is empty"), "{err}");
        let err = KeySource::Env("DW_TEST_UNSET_VARIABLE_X".into())
            .load()
            .unwrap_err()
            .to_string();
        assert!(err.contains("DW_TEST_UNSET_VARIABLE_X"), "{err}");
    }
}
