//! Errors as the outside world sees them: a stable code, a message and a
//! retryable flag. MQTT replies, D-Bus errors, CLI output and tool results all
//! carry this shape; internal error types convert into it.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A stable, machine-readable error code. The string forms never change once
/// released: automations match on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// Parameters are missing, unknown, of the wrong type or out of bounds.
    InvalidParams,
    /// The request itself is malformed (not JSON, wrong shape, too large).
    InvalidRequest,
    /// No service with that node type or service id exists.
    UnknownService,
    /// The service exists but has no action of that name.
    UnknownAction,
    /// The action exists, but this device or transport cannot perform it.
    UnsupportedAction,
    /// No device of that name is configured or visible.
    DeviceNotFound,
    /// The device is known but not reachable right now.
    DeviceOffline,
    /// The adb program is not installed on the machine the daemon runs on:
    /// no ADB phone can be reached until it is (`apt-get install adb`).
    AdbMissing,
    /// Several devices are online and the request did not say which one.
    DeviceAmbiguous,
    /// The call did not finish in time.
    Timeout,
    /// Android refused the action (a "Permission Denial" or security exception).
    PermissionDenied,
    /// The thing acted on does not exist on the phone (an app, an activity).
    NotFound,
    /// Android reported an error; the message carries its own words.
    DeviceError,
    /// The action was refused by policy or by a person.
    Denied,
    /// A bug or an unexpected condition inside the daemon.
    Internal,
    /// The daemon is at a limit on new work (agent runs, calls queued for
    /// one phone, new command ids per window); the request was refused at
    /// once and nothing ran. Retry later.
    Busy,
    /// The service is turned off in the daemon's configuration (telephony,
    /// shell); the message names the key that turns it on.
    Disabled,
    /// The phone's lock screen is showing: a UI action would only touch
    /// the lock screen. A person unlocks it (droidwarden types no PIN).
    Locked,
    /// The phone's screen is off (asleep, dozing or dreaming): a UI action
    /// would touch nothing. `screen_control.wake` turns it on, or
    /// `[adb] wake_for_ui` wakes it first.
    ScreenOff,
    /// The action needs a person's approval at a higher risk than it was
    /// cleared for: the app in front raises a screen action's risk
    /// (`[phone_services.ui]`). Nothing ran; `details` says the app and
    /// the risk. The agent and the MCP gate ask a person and try again.
    ApprovalRequired,
}

impl ErrorCode {
    /// The code's wire string, e.g. `"device_offline"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidParams => "invalid_params",
            Self::InvalidRequest => "invalid_request",
            Self::UnknownService => "unknown_service",
            Self::UnknownAction => "unknown_action",
            Self::UnsupportedAction => "unsupported_action",
            Self::DeviceNotFound => "device_not_found",
            Self::DeviceOffline => "device_offline",
            Self::AdbMissing => "adb_missing",
            Self::DeviceAmbiguous => "device_ambiguous",
            Self::Timeout => "timeout",
            Self::PermissionDenied => "permission_denied",
            Self::NotFound => "not_found",
            Self::DeviceError => "device_error",
            Self::Denied => "denied",
            Self::Internal => "internal",
            Self::Busy => "busy",
            Self::Disabled => "disabled",
            Self::Locked => "locked",
            Self::ScreenOff => "screen_off",
            Self::ApprovalRequired => "approval_required",
        }
    }

    /// Whether the same call may succeed if simply tried again later.
    pub fn default_retryable(self) -> bool {
        matches!(self, Self::DeviceOffline | Self::Timeout | Self::Busy)
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error shape every caller sees:
/// `{"code": "...", "message": "...", "retryable": bool}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireError {
    /// Stable machine-readable code.
    pub code: ErrorCode,
    /// Human-readable explanation, naming the offending parameter or device.
    pub message: String,
    /// Whether retrying the same call later may succeed.
    pub retryable: bool,
    /// Data a caller needs to act on the error, for the codes that have
    /// some (`approval_required`: `{"app", "risk", "cleared"}`); absent
    /// otherwise. Boxed: errors travel in `Result`s everywhere, and most
    /// have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Box<serde_json::Value>>,
}

impl WireError {
    /// An error with the code's default retryable flag.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            retryable: code.default_retryable(),
            details: None,
        }
    }
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for WireError {}
