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

/// Link schemes that call, text or dial: an intent or link with one of
/// these reaches the phone's telephony whatever the action names, so it
/// passes the `telephony` rules (on, and every number allowlisted).
const TELEPHONY_SCHEMES: &[&str] = &[
    "tel",
    "sms",
    "smsto",
    "mms",
    "mmsto",
    "voicemail",
    "sip",
    "sips",
];

/// Intent actions that call, dial or text, with or without a data URI.
const TELEPHONY_ACTIONS: &[&str] = &[
    "android.intent.action.CALL",
    "android.intent.action.CALL_PRIVILEGED",
    "android.intent.action.CALL_EMERGENCY",
    "android.intent.action.DIAL",
    "android.intent.action.SENDTO",
    "android.intent.action.CALL_BUTTON",
    "android.intent.action.RESPOND_VIA_MESSAGE",
    "android.intent.action.VOICE_COMMAND",
];

/// Apps whose activities place calls or send messages when started
/// directly (by component): the telephony stack, dialers and messaging
/// apps of AOSP, Google and the largest vendors.
const TELEPHONY_PACKAGES: &[&str] = &[
    "com.android.server.telecom",
    "com.android.phone",
    "com.android.dialer",
    "com.google.android.dialer",
    "com.samsung.android.dialer",
    "com.samsung.android.incallui",
    "com.android.incallui",
    "com.android.mms",
    "com.android.messaging",
    "com.google.android.apps.messaging",
    "com.samsung.android.messaging",
    "com.android.contacts",
    "com.google.android.contacts",
    "com.samsung.android.app.contacts",
];

/// What a link or an intent would reach of the phone's telephony.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Telephony {
    /// Nothing: no telephony scheme, action or app.
    None,
    /// Calls or texts these numbers (as written, decoded).
    Numbers(Vec<String>),
    /// Reaches telephony with no number this daemon can check (a dialer
    /// started by component, `tel:` with a code, `SENDTO` without data).
    Unchecked(String),
}

/// `%XX` escapes to bytes (`%23` → `#`); `None` for a broken escape or
/// text that is not UTF-8 once decoded. The one decoder of the workspace
/// (the daemon's MQTT URLs use it too).
pub fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The telephony a data URI or link reaches: its numbers for a telephony
/// scheme (`tel:+1 900…`, `smsto:a,b?body=…`, `sms://a`), else nothing.
fn telephony_of_uri(uri: &str) -> Telephony {
    let Some(scheme) = url_scheme(uri) else {
        return Telephony::None;
    };
    if !TELEPHONY_SCHEMES.contains(&scheme.as_str()) {
        return Telephony::None;
    }
    let rest = &uri[scheme.len() + 1..];
    let rest = rest.strip_prefix("//").unwrap_or(rest);
    // Decoded first: `%3F` must not hide a `?` from the cut below, nor
    // `%2C` a second recipient.
    let Some(decoded) = percent_decode(rest) else {
        return Telephony::Unchecked(format!("a {scheme}: link with a broken escape"));
    };
    let recipients = decoded.split(['?', ';']).next().unwrap_or_default();
    let numbers: Vec<String> = recipients
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(str::to_owned)
        .collect();
    if numbers.is_empty() {
        Telephony::Unchecked(format!("a {scheme}: link without a number"))
    } else {
        Telephony::Numbers(numbers)
    }
}

/// The telephony an intent reaches, by its data URI, its action or the
/// app its component names.
fn telephony_of_intent(
    component: Option<&str>,
    action: Option<&str>,
    data: Option<&str>,
) -> Telephony {
    if let Some(data) = data {
        let by_data = telephony_of_uri(data);
        if by_data != Telephony::None {
            return by_data;
        }
    }
    if let Some(action) = action
        && TELEPHONY_ACTIONS
            .iter()
            .any(|a| a.eq_ignore_ascii_case(action))
    {
        return Telephony::Unchecked(format!("the intent action {action}"));
    }
    if let Some(component) = component {
        let package = component.split('/').next().unwrap_or_default();
        if TELEPHONY_PACKAGES.contains(&package) {
            return Telephony::Unchecked(format!("an activity of {package}"));
        }
    }
    Telephony::None
}

/// `[phone_services]` as written in the configuration.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPhoneServices {
    url_schemes: Option<Vec<String>>,
    pull_dirs: Option<Vec<String>>,
    push_dirs: Option<Vec<String>>,
    apk_dirs: Option<Vec<String>>,
    host_dirs: Option<Vec<String>>,
    max_push_bytes: Option<u64>,
    max_apk_bytes: Option<u64>,
    telephony: Option<RawSwitch>,
    shell: Option<RawSwitch>,
    ui: Option<ui::RawUiPolicy>,
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

/// The largest `max_push_bytes` / `max_apk_bytes` the configuration may set.
pub const MAX_CONFIGURABLE_BYTES: u64 = 4 * 1024 * 1024 * 1024;

/// Which files of the daemon's machine may be sent to a phone
/// (`files.push {host_path}`, `app_manager.install {host_path}`), and how
/// large they may be. Also handed to the ADB transport, which checks the
/// file itself when it opens it (symbolic links resolved, the size read
/// from the open file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostFiles {
    /// Absolute host directories (no trailing `/`); empty: no host file
    /// may be sent.
    pub dirs: Vec<String>,
    /// The largest file `files.push` sends (from the host or inline).
    pub max_push_bytes: u64,
    /// The largest APK `app_manager.install {host_path}` sends.
    pub max_apk_bytes: u64,
}

impl Default for HostFiles {
    fn default() -> Self {
        Self {
            dirs: Vec::new(),
            max_push_bytes: 16 * 1024 * 1024,
            max_apk_bytes: 256 * 1024 * 1024,
        }
    }
}

impl HostFiles {
    /// Whether `path` is a plain absolute path strictly inside one of the
    /// host directories (as text; the transport resolves links).
    pub fn allows(&self, path: &str) -> bool {
        inside(path, &self.dirs)
    }
}

/// The validated policy. [`Default`] is the built-in configuration:
/// http and https links, pulls and pushes in `/sdcard/Download`, APKs from
/// `/data/local/tmp`, no host files, telephony and shell off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhonePolicy {
    /// Lower-case schemes `intents.open_url` may open.
    pub url_schemes: BTreeSet<String>,
    /// Directories (absolute, no trailing `/`) `files.pull` may read under.
    pub pull_dirs: Vec<String>,
    /// Directories `files.push` may write under.
    pub push_dirs: Vec<String>,
    /// Directories `app_manager.install` may install APKs from.
    pub apk_dirs: Vec<String>,
    /// Host files `files.push` and `app_manager.install` may send.
    pub host_files: HostFiles,
    /// Whether `telephony` is on.
    pub telephony: bool,
    /// Numbers `telephony` may text or call (digits and a leading `+`).
    pub allowed_numbers: BTreeSet<String>,
    /// Whether `shell` is on.
    pub shell: bool,
    /// What the app in front makes of a screen action (`[phone_services.ui]`).
    pub ui: ui::UiPolicy,
}

impl Default for PhonePolicy {
    fn default() -> Self {
        Self {
            url_schemes: ["http", "https"].map(String::from).into(),
            pull_dirs: vec!["/sdcard/Download".into()],
            push_dirs: vec!["/sdcard/Download".into()],
            apk_dirs: vec!["/data/local/tmp".into()],
            host_files: HostFiles::default(),
            telephony: false,
            allowed_numbers: BTreeSet::new(),
            shell: false,
            ui: ui::UiPolicy::default(),
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
        if let Some(dirs) = raw.push_dirs {
            policy.push_dirs = directories("push_dirs", dirs)?;
        }
        if let Some(dirs) = raw.apk_dirs {
            policy.apk_dirs = directories("apk_dirs", dirs)?;
        }
        if let Some(dirs) = raw.host_dirs {
            policy.host_files.dirs = directories("host_dirs", dirs)?;
        }
        for (key, value, into) in [
            (
                "max_push_bytes",
                raw.max_push_bytes,
                &mut policy.host_files.max_push_bytes,
            ),
            (
                "max_apk_bytes",
                raw.max_apk_bytes,
                &mut policy.host_files.max_apk_bytes,
            ),
        ] {
            if let Some(v) = value {
                if v == 0 || v > MAX_CONFIGURABLE_BYTES {
                    return Err(config_err(
                        key,
                        format!("must be between 1 and {MAX_CONFIGURABLE_BYTES} (4 GiB)"),
                    ));
                }
                *into = v;
            }
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
        if let Some(raw_ui) = raw.ui {
            policy.ui = ui::UiPolicy::try_from(raw_ui)?;
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
                // The same rules as telephony's own actions, whichever
                // way the link would reach it.
                self.check_telephony(&telephony_of_uri(url))?;
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
                if let Some(data) = data {
                    refuse_dangerous_scheme(data)?;
                }
                self.check_telephony(&telephony_of_intent(
                    component.as_deref(),
                    action.as_deref(),
                    data.as_deref(),
                ))
            }
            Command::Files(FilesAction::Pull { path }) => {
                self.check_path(path, &self.pull_dirs, "pull_dirs")
            }
            Command::Files(push @ FilesAction::Push { .. }) => self.check_push(push),
            Command::AppManager(AppManagerAction::Install {
                apk_path,
                host_path,
            }) => {
                let (path, name) = match (apk_path, host_path) {
                    (Some(p), None) => (p, "apk_path"),
                    (None, Some(p)) => (p, "host_path"),
                    _ => {
                        return Err(WireError::new(
                            ErrorCode::InvalidParams,
                            "install needs exactly one of apk_path (an APK on the phone) and host_path (an APK on the daemon's machine)",
                        ));
                    }
                };
                if !path.ends_with(".apk") {
                    return Err(WireError::new(
                        ErrorCode::InvalidParams,
                        format!("{name} must name an .apk file"),
                    ));
                }
                match host_path {
                    Some(host) => self.check_host_path(host),
                    None => self.check_path(path, &self.apk_dirs, "apk_dirs"),
                }
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
                self.check_number(number)
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

    /// Telephony reached any other way than its own actions: refused while
    /// `telephony` is off; with it on, every number must be allowlisted,
    /// and what has no number to check (a dialer started directly, a code
    /// such as `*#06#`) is refused.
    fn check_telephony(&self, reached: &Telephony) -> Result<(), WireError> {
        let how = match reached {
            Telephony::None => return Ok(()),
            Telephony::Numbers(numbers) => numbers.join(", "),
            Telephony::Unchecked(how) => how.clone(),
        };
        if !self.telephony {
            return Err(WireError::new(
                ErrorCode::Disabled,
                format!(
                    "{how} reaches the phone's calls and messages, and the telephony service is off on this daemon; turn it on with [phone_services.telephony] enabled = true in its configuration"
                ),
            ));
        }
        match reached {
            Telephony::Numbers(numbers) => numbers.iter().try_for_each(|n| self.check_number(n)),
            _ => Err(WireError::new(
                ErrorCode::Denied,
                format!(
                    "{how} reaches the phone's calls and messages with no number this daemon can check; use telephony.dial or telephony.sms_send, or a tel:/sms: link to an allowed number"
                ),
            )),
        }
    }

    /// A number on the allowlist, or `denied`.
    fn check_number(&self, number: &str) -> Result<(), WireError> {
        let normal = normalize_number(number).unwrap_or_default();
        if self.allowed_numbers.contains(&normal) {
            return Ok(());
        }
        Err(WireError::new(
            ErrorCode::Denied,
            format!(
                "{number} is not on this daemon's list of allowed numbers ([phone_services.telephony] allowed_numbers)"
            ),
        ))
    }

    fn check_push(&self, push: &FilesAction) -> Result<(), WireError> {
        let FilesAction::Push {
            path,
            text,
            content_base64,
            host_path,
            ..
        } = push
        else {
            return Ok(());
        };
        check_push_shape(push)?;
        self.check_path(path, &self.push_dirs, "push_dirs")?;
        if let Some(host) = host_path {
            return self.check_host_path(host);
        }
        let size = match (text, content_base64) {
            (Some(t), _) => t.len(),
            (_, Some(b)) => crate::base64_decoded_len(b).unwrap_or(0),
            _ => 0,
        };
        let max = self.host_files.max_push_bytes;
        if size as u64 > max {
            return Err(WireError::new(
                ErrorCode::Denied,
                format!(
                    "the content has {size} bytes; this daemon pushes at most {max} ([phone_services] max_push_bytes)"
                ),
            ));
        }
        Ok(())
    }

    fn check_host_path(&self, path: &str) -> Result<(), WireError> {
        if !plain_absolute_path(path) {
            return Err(WireError::new(
                ErrorCode::InvalidParams,
                format!("{path:?}: host paths must be absolute, without empty, . or .. parts"),
            ));
        }
        if self.host_files.dirs.is_empty() {
            return Err(WireError::new(
                ErrorCode::Denied,
                "this daemon sends no files of its machine to phones; list directories in [phone_services] host_dirs to allow it",
            ));
        }
        if !self.host_files.allows(path) {
            return Err(WireError::new(
                ErrorCode::Denied,
                format!(
                    "{path} is outside the host directories this daemon allows: {} ([phone_services] host_dirs)",
                    self.host_files.dirs.join(", ")
                ),
            ));
        }
        Ok(())
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

/// The checks of a `files.push` that hold whatever the configuration says:
/// exactly one source, and inline content within
/// [`crate::MAX_INLINE_PUSH_BYTES`] and valid base64.
///
/// # Errors
/// [`ErrorCode::InvalidParams`] for no or several sources and bad base64,
/// [`ErrorCode::Denied`] for inline content over the bound.
pub fn check_push_shape(push: &FilesAction) -> Result<(), WireError> {
    let FilesAction::Push {
        text,
        content_base64,
        ..
    } = push
    else {
        return Ok(());
    };
    if push.push_sources() != 1 {
        return Err(WireError::new(
            ErrorCode::InvalidParams,
            "push needs exactly one of text, content_base64 and host_path",
        ));
    }
    let size = match (text, content_base64) {
        (Some(t), _) => t.len(),
        (_, Some(b)) => crate::base64_decoded_len(b).ok_or_else(|| {
            WireError::new(
                ErrorCode::InvalidParams,
                "content_base64 is not standard base64 (its length is not a multiple of 4)",
            )
        })?,
        _ => return Ok(()),
    };
    if size > crate::MAX_INLINE_PUSH_BYTES {
        return Err(WireError::new(
            ErrorCode::Denied,
            format!(
                "the content has {size} bytes; content in the parameters is at most {} bytes (send a file with host_path instead)",
                crate::MAX_INLINE_PUSH_BYTES
            ),
        ));
    }
    Ok(())
}

fn disabled(service: &str, how: &str) -> WireError {
    WireError::new(
        ErrorCode::Disabled,
        format!(
            "the {service} service is off on this daemon; turn it on with {how} in its configuration"
        ),
    )
}

pub mod ui;

#[cfg(test)]
mod tests;
