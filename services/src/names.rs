//! Names parsed once into newtypes, so the rest of the code never handles a
//! raw string that has not been checked.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Android package names: dot-separated Java identifiers, two segments or more.
pub(crate) const PACKAGE_PATTERN: &str = r"^[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z][A-Za-z0-9_]*)+$";
/// [`PACKAGE_PATTERN`], compiled once.
static PACKAGE_RE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    regex::Regex::new(PACKAGE_PATTERN).expect("the package pattern is a valid regular expression")
});

/// A name that failed validation, with the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {kind} {value:?}: {reason}")]
pub struct NameError {
    /// Which kind of name ("service id", "device name", …).
    pub kind: &'static str,
    /// The rejected input (truncated to 80 characters).
    pub value: String,
    /// Why it was rejected.
    pub reason: &'static str,
}

impl NameError {
    fn new(kind: &'static str, value: &str, reason: &'static str) -> Self {
        Self {
            kind,
            value: value.chars().take(80).collect(),
            reason,
        }
    }
}

macro_rules! name_type {
    ($(#[$doc:meta])* $name:ident, $kind:literal, $check:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            /// The name as a string slice.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<&str> for $name {
            type Error = NameError;
            fn try_from(value: &str) -> Result<Self, NameError> {
                let check: fn(&str) -> Result<(), &'static str> = $check;
                check(value).map_err(|reason| NameError::new($kind, value, reason))?;
                Ok(Self(value.to_owned()))
            }
        }

        impl TryFrom<String> for $name {
            type Error = NameError;
            fn try_from(value: String) -> Result<Self, NameError> {
                Self::try_from(value.as_str())
            }
        }

        impl From<$name> for String {
            fn from(value: $name) -> String {
                value.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
    };
}

/// Names that are MQTT topic levels (device names, companion ids, MQTT
/// user names): 1 to 64 letters, digits, `.`, `_`, `-` and `:`, starting
/// with a letter or digit.
fn check_topic_level(v: &str) -> Result<(), &'static str> {
    check_len(v, 64)?;
    if !v.chars().next().is_some_and(|c| c.is_ascii_alphanumeric()) {
        return Err("must start with a letter or digit");
    }
    if !v
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':'))
    {
        return Err("only letters, digits, '.', '_', '-' and ':' are allowed");
    }
    Ok(())
}

fn check_len(value: &str, max: usize) -> Result<(), &'static str> {
    if value.is_empty() {
        Err("must not be empty")
    } else if value.len() > max {
        Err("too long")
    } else {
        Ok(())
    }
}

name_type!(
    /// A device name: a configured name or an ADB serial such as
    /// `127.0.0.1:5555` or `emulator-5554`. It appears in MQTT topics, so
    /// `/`, `+`, `#` and spaces are not allowed.
    ///
    /// ```
    /// use droidwarden_services::DeviceName;
    /// assert!(DeviceName::try_from("kitchen-tablet").is_ok());
    /// assert!(DeviceName::try_from("127.0.0.1:5555").is_ok());
    /// assert!(DeviceName::try_from("a/b").is_err());
    /// ```
    DeviceName,
    "device name",
    check_topic_level
);

name_type!(
    /// A companion app's id: the `companion/<id>/…` topic level, and a
    /// phone's MQTT user name. The same rules as a [`DeviceName`], since an
    /// announced companion id becomes one.
    ///
    /// ```
    /// use droidwarden_services::CompanionId;
    /// assert!(CompanionId::try_from("pixel-8").is_ok());
    /// assert!(CompanionId::try_from("+").is_err());
    /// ```
    CompanionId,
    "companion id",
    check_topic_level
);

name_type!(
    /// An Android package name, e.g. `org.videolan.vlc`: dot-separated Java
    /// identifiers, at least two segments.
    ///
    /// ```
    /// use droidwarden_services::PackageName;
    /// assert!(PackageName::try_from("com.spotify.music").is_ok());
    /// assert!(PackageName::try_from("com.x;reboot").is_err());
    /// ```
    PackageName,
    "package name",
    |v| {
        check_len(v, 255)?;
        if PACKAGE_RE.is_match(v) {
            Ok(())
        } else {
            Err("must be dot-separated identifiers such as com.example.app")
        }
    }
);

/// A suffix no other call in this process, and no other process, is given:
/// the process id, the wall clock in nanoseconds and a counter, in hex
/// (`1f3a-18c2b3d4e5f60718-0`). For names of temporary files and of
/// handles that must not collide, not for secrets: it is guessable.
pub fn unique_suffix() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{:x}-{nanos:x}-{n:x}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_serde() {
        let name: DeviceName = serde_json::from_str("\"kitchen\"").unwrap();
        assert_eq!(name.as_str(), "kitchen");
        assert!(serde_json::from_str::<DeviceName>("\"a b\"").is_err());
    }

    #[test]
    fn package_names() {
        for good in ["com.a", "org.videolan.vlc", "com.example_app.x1"] {
            assert!(PackageName::try_from(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "com",
            ".com.a",
            "com..a",
            "com.a;id",
            "com.a b",
            "1com.a",
            "com.a$(id)",
        ] {
            assert!(PackageName::try_from(bad).is_err(), "{bad}");
        }
    }
}
