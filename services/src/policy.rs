//! What the daemon lets the phone services of issue #13 do, whoever asks:
//! which link schemes `intents.open_url` opens, which directories `files`
//! and `app_manager.install` reach, whether `telephony` and `shell` are on
//! at all and which numbers `telephony` may reach.
//!
//! The daemon reads `[phone_services]` into a [`RawPhoneServices`], turns it
//! into a [`PhonePolicy`] and checks every call against it at the hub's edge
//! (`Hub::admit_call`), before a call takes a place in a phone's queue, so
//! MQTT, D-Bus, the CLI and the agent are refused alike. A service that is
//! off answers [`ErrorCode::Disabled`]; a value outside an allowlist
//! answers [`ErrorCode::Denied`]. The checks that hold whatever the
//! configuration says (schemes that are never opened, paths with `..`) are
//! also public functions here, so transports repeat them.

use crate::wire::{ErrorCode, WireError};
use crate::{AppManagerAction, Command, FilesAction, IntentsAction, ShellAction, TelephonyAction};
use serde::Deserialize;
use std::collections::BTreeSet;

/// Link schemes no action ever opens: they run code, reach private files or
/// smuggle another intent.
pub const REFUSED_SCHEMES: &[&str] = &[
    "javascript",
    "vbscript",
    "file",
    "content",
    "intent",
    "android-app",
    "data",
    "about",
    "jar",
];

/// `[phone_services]` as written in the configuration.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPhoneServices {
    url_schemes: Option<Vec<String>>,
    pull_dirs: Option<Vec<String>>,
    apk_dirs: Option<Vec<String>>,
    telephony: Option<RawSwitch>,
    shell: Option<RawSwitch>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSwitch {
    enabled: Option<bool>,
    allowed_numbers: Option<Vec<String>>,
}

/// A problem in `[phone_services]`, naming its key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {reason}")]
pub struct PolicyConfigError {
    /// The full key, e.g. `phone_services.url_schemes`.
    pub key: String,
    /// What is wrong with it.
    pub reason: String,
}

fn config_err(key: &str, reason: impl Into<String>) -> PolicyConfigError {
    PolicyConfigError {
        key: format!("phone_services.{key}"),
        reason: reason.into(),
    }
}

/// The validated policy. [`Default`] is the built-in configuration:
/// http and https links, pulls from `/sdcard/Download`, APKs from
/// `/data/local/tmp`, telephony and shell off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhonePolicy {
    /// Lower-case schemes `intents.open_url` may open.
    pub url_schemes: BTreeSet<String>,
    /// Directories (absolute, no trailing `/`) `files.pull` may read under.
    pub pull_dirs: Vec<String>,
    /// Directories `app_manager.install` may install APKs from.
    pub apk_dirs: Vec<String>,
    /// Whether `telephony` is on.
    pub telephony: bool,
    /// Numbers `telephony` may text or call (digits and a leading `+`).
    pub allowed_numbers: BTreeSet<String>,
    /// Whether `shell` is on.
    pub shell: bool,
}

impl Default for PhonePolicy {
    fn default() -> Self {
        Self {
            url_schemes: ["http", "https"].map(String::from).into(),
            pull_dirs: vec!["/sdcard/Download".into()],
            apk_dirs: vec!["/data/local/tmp".into()],
            telephony: false,
            allowed_numbers: BTreeSet::new(),
            shell: false,
        }
    }
}

impl TryFrom<RawPhoneServices> for PhonePolicy {
    type Error = PolicyConfigError;

    fn try_from(raw: RawPhoneServices) -> Result<Self, PolicyConfigError> {
        let mut policy = Self::default();
        if let Some(schemes) = raw.url_schemes {
            policy.url_schemes = BTreeSet::new();
            for s in schemes {
                let lower = s.to_ascii_lowercase();
                let valid = lower.chars().next().is_some_and(|c| c.is_ascii_lowercase())
                    && lower
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '.' | '-'));
                if !valid {
                    return Err(config_err(
                        "url_schemes",
                        format!("{s:?} is not a URL scheme"),
                    ));
                }
                if REFUSED_SCHEMES.contains(&lower.as_str()) {
                    return Err(config_err(
                        "url_schemes",
                        format!(
                            "{lower} links are never opened (they run code or reach private files)"
                        ),
                    ));
                }
                policy.url_schemes.insert(lower);
            }
        }
        if let Some(dirs) = raw.pull_dirs {
            policy.pull_dirs = directories("pull_dirs", dirs)?;
        }
        if let Some(dirs) = raw.apk_dirs {
            policy.apk_dirs = directories("apk_dirs", dirs)?;
        }
        if let Some(shell) = raw.shell {
            if shell.allowed_numbers.is_some() {
                return Err(config_err(
                    "shell.allowed_numbers",
                    "unknown key (only telephony has numbers)",
                ));
            }
            policy.shell = shell.enabled.unwrap_or(false);
        }
        if let Some(tel) = raw.telephony {
            policy.telephony = tel.enabled.unwrap_or(false);
            for n in tel.allowed_numbers.unwrap_or_default() {
                let normal = normalize_number(&n).ok_or_else(|| {
                    config_err(
                        "telephony.allowed_numbers",
                        format!("{n:?} is not a phone number (digits, an optional leading +, spaces, - and parentheses)"),
                    )
                })?;
                policy.allowed_numbers.insert(normal);
            }
        }
        Ok(policy)
    }
}

fn directories(key: &str, dirs: Vec<String>) -> Result<Vec<String>, PolicyConfigError> {
    dirs.into_iter()
        .map(|d| {
            let trimmed = d.trim_end_matches('/');
            if trimmed.is_empty() || !plain_absolute_path(trimmed) {
                return Err(config_err(
                    key,
                    format!("{d:?} must be an absolute directory without . or .. and not /"),
                ));
            }
            Ok(trimmed.to_owned())
        })
        .collect()
}

/// A number as the allowlist compares it: digits and a leading `+`, with
/// spaces, `-`, `.` and parentheses dropped; `None` if it is no number.
pub fn normalize_number(number: &str) -> Option<String> {
    let kept: String = number
        .chars()
        .filter(|c| !matches!(c, ' ' | '-' | '.' | '(' | ')'))
        .collect();
    let digits = kept.strip_prefix('+').unwrap_or(&kept);
    (digits.len() >= 2 && digits.len() <= 20 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then_some(kept)
}

/// A URI's scheme, lower-cased (`None` without one).
pub fn url_scheme(url: &str) -> Option<String> {
    let (scheme, _) = url.split_once(':')?;
    let ok = scheme
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '.' | '-'));
    ok.then(|| scheme.to_ascii_lowercase())
}

/// The refusal of a URI whose scheme is never opened, whatever the
/// configuration says.
///
/// # Errors
/// [`ErrorCode::Denied`] naming the scheme.
pub fn refuse_dangerous_scheme(url: &str) -> Result<(), WireError> {
    match url_scheme(url) {
        None => Err(WireError::new(
            ErrorCode::InvalidParams,
            "the link has no scheme (such as https:)",
        )),
        Some(s) if REFUSED_SCHEMES.contains(&s.as_str()) => Err(WireError::new(
            ErrorCode::Denied,
            format!(
                "{s}: links are never opened: they run code, reach private files or carry another intent"
            ),
        )),
        Some(_) => Ok(()),
    }
}

/// Whether `path` is absolute and free of empty, `.` and `..` segments, so
/// that it names exactly the file its text shows.
pub fn plain_absolute_path(path: &str) -> bool {
    path.strip_prefix('/').is_some_and(|rest| {
        rest.split('/')
            .all(|seg| !seg.is_empty() && seg != "." && seg != "..")
    })
}

/// Whether `path` is a plain absolute path strictly inside one of `dirs`.
fn inside(path: &str, dirs: &[String]) -> bool {
    plain_absolute_path(path)
        && dirs.iter().any(|d| {
            path.strip_prefix(d.as_str())
                .is_some_and(|rest| rest.len() > 1 && rest.starts_with('/'))
        })
}

impl PhonePolicy {
    /// Whether the service `id` may be used at all (`telephony` and `shell`
    /// are off unless enabled): a service that is off is not offered to
    /// the agent, and every call of it answers `disabled`.
    pub fn service_enabled(&self, id: &str) -> bool {
        match id {
            "telephony" => self.telephony,
            "shell" => self.shell,
            _ => true,
        }
    }

    /// Check `command` against the policy. Commands of other services pass.
    ///
    /// # Errors
    /// [`ErrorCode::Disabled`] for a service that is off,
    /// [`ErrorCode::Denied`] for a value outside an allowlist or a scheme
    /// never opened, [`ErrorCode::InvalidParams`] for a path with `..`.
    pub fn check(&self, command: &Command) -> Result<(), WireError> {
        match command {
            Command::Intents(IntentsAction::OpenUrl { url }) => {
                refuse_dangerous_scheme(url)?;
                let scheme = url_scheme(url).unwrap_or_default();
                if !self.url_schemes.contains(&scheme) {
                    return Err(WireError::new(
                        ErrorCode::Denied,
                        format!(
                            "{scheme}: links are not allowed; this daemon opens {} links ([phone_services] url_schemes)",
                            self.url_schemes
                                .iter()
                                .cloned()
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    ));
                }
                Ok(())
            }
            Command::Intents(IntentsAction::StartActivity {
                component,
                action,
                data,
                ..
            }) => {
                if component.is_none() && action.is_none() {
                    return Err(WireError::new(
                        ErrorCode::InvalidParams,
                        "start_activity needs a component or an action",
                    ));
                }
                match data {
                    Some(data) => refuse_dangerous_scheme(data),
                    None => Ok(()),
                }
            }
            Command::Files(FilesAction::Pull { path }) => {
                self.check_path(path, &self.pull_dirs, "pull_dirs")
            }
            Command::AppManager(AppManagerAction::Install { apk_path }) => {
                if !apk_path.ends_with(".apk") {
                    return Err(WireError::new(
                        ErrorCode::InvalidParams,
                        "apk_path must name an .apk file",
                    ));
                }
                self.check_path(apk_path, &self.apk_dirs, "apk_dirs")
            }
            Command::Telephony(action) => {
                if !self.telephony {
                    return Err(disabled(
                        "telephony",
                        "[phone_services.telephony] enabled = true",
                    ));
                }
                let number = match action {
                    TelephonyAction::SmsSend { number, .. } => number,
                    TelephonyAction::Dial { number } => number,
                };
                let normal = normalize_number(number).unwrap_or_default();
                if !self.allowed_numbers.contains(&normal) {
                    return Err(WireError::new(
                        ErrorCode::Denied,
                        format!(
                            "{number} is not on this daemon's list of allowed numbers ([phone_services.telephony] allowed_numbers)"
                        ),
                    ));
                }
                Ok(())
            }
            Command::Shell(ShellAction::Run { .. }) => {
                if self.shell {
                    Ok(())
                } else {
                    Err(disabled("shell", "[phone_services.shell] enabled = true"))
                }
            }
            _ => Ok(()),
        }
    }

    fn check_path(&self, path: &str, dirs: &[String], key: &str) -> Result<(), WireError> {
        if !plain_absolute_path(path) {
            return Err(WireError::new(
                ErrorCode::InvalidParams,
                format!("{path:?}: paths must be absolute, without empty, . or .. parts"),
            ));
        }
        if !inside(path, dirs) {
            return Err(WireError::new(
                ErrorCode::Denied,
                format!(
                    "{path} is outside the directories this daemon allows: {} ([phone_services] {key})",
                    dirs.join(", ")
                ),
            ));
        }
        Ok(())
    }
}

fn disabled(service: &str, how: &str) -> WireError {
    WireError::new(
        ErrorCode::Disabled,
        format!(
            "the {service} service is off on this daemon; turn it on with {how} in its configuration"
        ),
    )
}

#[cfg(test)]
mod tests;
