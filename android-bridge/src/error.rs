//! The bridge's error type. Every variant maps to a stable wire code
//! ([`droidwarden_services::ErrorCode`]) and a retryable flag; the message
//! keeps what a caller needs to understand or recover.

use droidwarden_services::{CatalogueError, ErrorCode, WireError};
use std::time::Duration;

/// Why a call on a device failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum BridgeError {
    /// The request did not pass the catalogue (unknown service, action or bad parameters).
    #[error(transparent)]
    Catalogue(#[from] CatalogueError),
    /// No device has that name.
    #[error("no device named {name:?}; known devices: {}", list(known))]
    DeviceNotFound {
        /// The requested name.
        name: String,
        /// Every known device.
        known: Vec<String>,
    },
    /// No device was named and several are online.
    #[error(
        "several devices are online ({}); say which one (--device NAME on the command line, \"device\" in MQTT and tool calls)",
        online.join(", ")
    )]
    DeviceAmbiguous {
        /// The online devices.
        online: Vec<String>,
    },
    /// No device was named and none is online.
    #[error("no device is online{}", if known.is_empty() { String::new() } else { format!(" (known: {})", known.join(", ")) })]
    NoDeviceOnline {
        /// The known, offline devices.
        known: Vec<String>,
    },
    /// The device is known but cannot be reached now.
    #[error("device {device} is offline: {reason}")]
    DeviceOffline {
        /// The device.
        device: String,
        /// What the transport saw.
        reason: String,
    },
    /// The adb program cannot be run: it is not installed (or not where
    /// `[adb] program` says), so no ADB phone can be reached.
    #[error(
        "adb is not installed: {program} was not found; install it with `sudo apt-get install adb` (Debian, Ubuntu), or name the program in [adb] program"
    )]
    AdbMissing {
        /// The program that was looked for.
        program: String,
    },
    /// Too many calls already wait for this phone; this one was refused, or
    /// waited its whole time behind earlier changes, and was never sent: it
    /// did not run.
    #[error("device {device} is busy: {reason}")]
    Busy {
        /// The device.
        device: String,
        /// What the call waited behind.
        reason: String,
    },
    /// The call did not finish in time.
    #[error("{device}: {what} did not finish within {} ms", after.as_millis())]
    Timeout {
        /// The device.
        device: String,
        /// What was running (service.action).
        what: String,
        /// The limit that passed.
        after: Duration,
    },
    /// The transport or the phone cannot perform this action.
    #[error("{device} cannot perform {service}.{action} over {transport}: {reason}")]
    Unsupported {
        /// The device.
        device: String,
        /// The service id.
        service: String,
        /// The action name.
        action: &'static str,
        /// The transport.
        transport: &'static str,
        /// Why not.
        reason: String,
    },
    /// The phone lacks the system service or command an action needs.
    #[error("{device} cannot do this: {message}")]
    MissingOnPhone {
        /// The device.
        device: String,
        /// Android's own words (`Can't find service: …`, `…: not found`).
        message: String,
    },
    /// Android refused the action.
    #[error("permission denied: {message}")]
    PermissionDenied {
        /// Android's own words.
        message: String,
    },
    /// What the action names does not exist on the phone.
    #[error("{message}")]
    NotFound {
        /// What was not found, in Android's words where possible.
        message: String,
    },
    /// Android reported an error.
    #[error("device error: {message}")]
    Device {
        /// Android's own message.
        message: String,
        /// The shell exit status, when known.
        exit: Option<i32>,
    },
    /// The phone answered in a form the parser did not understand.
    #[error("unexpected output from `{command}`: {detail}")]
    UnexpectedOutput {
        /// The device command.
        command: String,
        /// What the parser expected.
        detail: String,
    },
    /// The phone's answer was cut short although the command reported
    /// success: a `dumpsys` that hit its own timeout, lost its service
    /// mid-dump, or stopped mid-line. Nothing was read from it; the same
    /// call may succeed when tried again, so it is retryable.
    #[error("incomplete output from `{command}`: {detail}")]
    IncompleteOutput {
        /// The device command.
        command: String,
        /// What showed the output was cut short.
        detail: String,
    },
    /// The companion app on the phone reported an error. `error` keeps its
    /// code (mapped onto the daemon's codes), message and retryable flag.
    #[error("{device}: the companion app reported {}: {}", error.code, error.message)]
    Companion {
        /// The device.
        device: String,
        /// What the phone said.
        error: WireError,
    },
    /// The bridge refused the call before anything ran on the phone (a
    /// link scheme never opened, a path with `..`, a file over the size
    /// limit); the error carries its code and message.
    #[error("{}", .0.message)]
    Refused(WireError),
    /// A bug or unexpected condition inside the bridge.
    #[error("internal error: {0}")]
    Internal(String),
}

fn list(items: &[String]) -> String {
    if items.is_empty() {
        "none".to_owned()
    } else {
        items.join(", ")
    }
}

impl BridgeError {
    /// The stable wire code.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Catalogue(e) => e.code(),
            Self::DeviceNotFound { .. } | Self::NoDeviceOnline { .. } => ErrorCode::DeviceNotFound,
            Self::DeviceAmbiguous { .. } => ErrorCode::DeviceAmbiguous,
            Self::DeviceOffline { .. } => ErrorCode::DeviceOffline,
            Self::AdbMissing { .. } => ErrorCode::AdbMissing,
            Self::Timeout { .. } => ErrorCode::Timeout,
            Self::Busy { .. } => ErrorCode::Busy,
            Self::Unsupported { .. } | Self::MissingOnPhone { .. } => ErrorCode::UnsupportedAction,
            Self::PermissionDenied { .. } => ErrorCode::PermissionDenied,
            Self::NotFound { .. } => ErrorCode::NotFound,
            Self::Device { .. } | Self::UnexpectedOutput { .. } | Self::IncompleteOutput { .. } => {
                ErrorCode::DeviceError
            }
            Self::Companion { error, .. } | Self::Refused(error) => error.code,
            Self::Internal(_) => ErrorCode::Internal,
        }
    }

    /// Whether the same call may succeed later without changes.
    pub fn retryable(&self) -> bool {
        match self {
            Self::NoDeviceOnline { .. } | Self::IncompleteOutput { .. } => true,
            Self::Companion { error, .. } | Self::Refused(error) => error.retryable,
            other => other.code().default_retryable(),
        }
    }

    /// The error as callers see it.
    pub fn to_wire(&self) -> WireError {
        WireError {
            code: self.code(),
            message: self.to_string(),
            retryable: self.retryable(),
            details: None,
        }
    }
}

impl From<&BridgeError> for WireError {
    fn from(err: &BridgeError) -> Self {
        err.to_wire()
    }
}

impl From<BridgeError> for WireError {
    fn from(err: BridgeError) -> Self {
        err.to_wire()
    }
}
