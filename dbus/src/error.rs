//! Wire errors on D-Bus: one stable error name per [`ErrorCode`]
//! (`org.droidwarden.Error.InvalidParams` …), both ways.
//!
//! The reply body is the usual `(s message)`: gdbus shows the message only
//! when the body is exactly that. The retryable flag is therefore the
//! code's default on D-Bus (`timeout`, `device_offline` and `busy` are retryable);
//! a companion phone's own flag on another code does not cross D-Bus.

use droidwarden_services::{ErrorCode, WireError};
use zbus::message::{Header, Message};
use zbus::names::ErrorName;

/// What every error name of ours starts with.
const PREFIX: &str = "org.droidwarden.Error.";

/// The D-Bus error name of a code: `org.droidwarden.Error.` and the wire
/// code in CamelCase. The names never change once released. The `match`
/// is exhaustive, so a code added to [`ErrorCode`] does not compile until
/// it has its name here (and in docs/dbus-api.md).
pub fn error_name(code: ErrorCode) -> &'static str {
    match code {
        ErrorCode::InvalidParams => "org.droidwarden.Error.InvalidParams",
        ErrorCode::InvalidRequest => "org.droidwarden.Error.InvalidRequest",
        ErrorCode::UnknownService => "org.droidwarden.Error.UnknownService",
        ErrorCode::UnknownAction => "org.droidwarden.Error.UnknownAction",
        ErrorCode::UnsupportedAction => "org.droidwarden.Error.UnsupportedAction",
        ErrorCode::DeviceNotFound => "org.droidwarden.Error.DeviceNotFound",
        ErrorCode::DeviceOffline => "org.droidwarden.Error.DeviceOffline",
        ErrorCode::AdbMissing => "org.droidwarden.Error.AdbMissing",
        ErrorCode::DeviceAmbiguous => "org.droidwarden.Error.DeviceAmbiguous",
        ErrorCode::Timeout => "org.droidwarden.Error.Timeout",
        ErrorCode::PermissionDenied => "org.droidwarden.Error.PermissionDenied",
        ErrorCode::NotFound => "org.droidwarden.Error.NotFound",
        ErrorCode::DeviceError => "org.droidwarden.Error.DeviceError",
        ErrorCode::Denied => "org.droidwarden.Error.Denied",
        ErrorCode::Internal => "org.droidwarden.Error.Internal",
        ErrorCode::Busy => "org.droidwarden.Error.Busy",
        ErrorCode::Disabled => "org.droidwarden.Error.Disabled",
        ErrorCode::Locked => "org.droidwarden.Error.Locked",
        ErrorCode::ScreenOff => "org.droidwarden.Error.ScreenOff",
        ErrorCode::ApprovalRequired => "org.droidwarden.Error.ApprovalRequired",
    }
}

/// The code of one of our D-Bus error names: the wire code its CamelCase
/// spells, when [`error_name`] gives that name back.
pub fn code_of(name: &str) -> Option<ErrorCode> {
    let camel = name.strip_prefix(PREFIX)?;
    let mut snake = String::with_capacity(camel.len() + 4);
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            snake.push('_');
        }
        snake.push(c.to_ascii_lowercase());
    }
    let code: ErrorCode = serde_json::from_value(serde_json::Value::String(snake)).ok()?;
    (error_name(code) == name).then_some(code)
}

/// What a method of `org.droidwarden.Daemon1` fails with, on both sides
/// of the wire: the daemon's methods fail with [`DbusError::Wire`], sent
/// as our error name and message; the proxy the client calls them through
/// (generated from the same interface, so it has the same error type)
/// hands back what zbus reported, [`DbusError::Zbus`], which the client
/// turns into a [`WireError`] naming where it called (its `to_wire`).
#[derive(Debug, Clone, PartialEq)]
pub enum DbusError {
    /// A wire error of ours: `org.droidwarden.Error.<Code>` and its message.
    Wire(WireError),
    /// What the client's zbus reported: an error reply (ours, or the bus's
    /// own), a reply it could not read, or a connection that failed.
    Zbus(zbus::Error),
}

impl From<WireError> for DbusError {
    fn from(error: WireError) -> Self {
        Self::Wire(error)
    }
}

/// What the generated proxy's methods need: every zbus error becomes one
/// of ours, kept whole for the client to map.
impl From<zbus::Error> for DbusError {
    fn from(error: zbus::Error) -> Self {
        Self::Zbus(error)
    }
}

impl zbus::DBusError for DbusError {
    fn create_reply(&self, call: &Header<'_>) -> zbus::Result<Message> {
        Message::error(call, self.name())?.build(&(self.message(),))
    }

    fn name(&self) -> ErrorName<'_> {
        let code = match self {
            Self::Wire(e) => e.code,
            // The daemon never fails with a zbus error of its own making;
            // should one reach here, it is ours to fix.
            Self::Zbus(_) => ErrorCode::Internal,
        };
        ErrorName::from_static_str_unchecked(error_name(code))
    }

    fn description(&self) -> Option<&str> {
        match self {
            Self::Wire(e) => Some(&e.message),
            Self::Zbus(_) => None,
        }
    }
}

impl DbusError {
    /// The error reply's one string: the wire error's message.
    fn message(&self) -> String {
        match self {
            Self::Wire(e) => e.message.clone(),
            Self::Zbus(e) => e.to_string(),
        }
    }
}

/// Turn an error reply of ours back into the wire error it carried: the
/// name gives the code, the body the message. `None` for names that are
/// not ours (the bus's own errors).
pub fn from_reply(name: &str, reply: &Message) -> Option<WireError> {
    let code = code_of(name)?;
    let message = reply.body().deserialize::<String>().unwrap_or_default();
    Some(WireError::new(code, message))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn camel(snake: &str) -> String {
        snake
            .split('_')
            .map(|w| {
                let mut c = w.chars();
                c.next()
                    .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                    .unwrap_or_default()
            })
            .collect()
    }

    /// Every code, by its wire name (a new code fails to compile in
    /// `error_name` first; add it here to check its spelling).
    fn every_code() -> Vec<ErrorCode> {
        let names = [
            "invalid_params",
            "invalid_request",
            "unknown_service",
            "unknown_action",
            "unsupported_action",
            "device_not_found",
            "device_offline",
            "adb_missing",
            "device_ambiguous",
            "timeout",
            "permission_denied",
            "not_found",
            "device_error",
            "denied",
            "internal",
            "busy",
            "disabled",
            "locked",
            "screen_off",
            "approval_required",
        ];
        names
            .iter()
            .map(|n| serde_json::from_value(serde_json::json!(n)).unwrap())
            .collect()
    }

    #[test]
    fn every_code_has_a_valid_name_spelled_after_its_wire_code() {
        for code in every_code() {
            let name = error_name(code);
            assert_eq!(name, format!("{PREFIX}{}", camel(code.as_str())));
            assert!(ErrorName::try_from(name).is_ok(), "{name}");
            assert_eq!(code_of(name), Some(code), "{name}");
        }
        assert_eq!(code_of("org.freedesktop.DBus.Error.ServiceUnknown"), None);
        assert_eq!(code_of("org.droidwarden.Error.NoSuchThing"), None);
        assert_eq!(code_of("org.droidwarden.Error.invalidParams"), None);
        assert_eq!(code_of("org.droidwarden.Error.Invalid_Params"), None);
    }

    #[test]
    fn an_error_reply_carries_the_message_and_comes_back_the_same() {
        let call = Message::method_call("/org/droidwarden/Daemon1", "Call")
            .unwrap()
            .destination("org.droidwarden.Daemon1")
            .unwrap()
            .build(&())
            .unwrap();
        let wire = WireError::new(ErrorCode::DeviceOffline, "the phone left");
        let reply =
            zbus::DBusError::create_reply(&DbusError::Wire(wire.clone()), &call.header()).unwrap();
        let name = reply.header().error_name().unwrap().to_string();
        assert_eq!(name, "org.droidwarden.Error.DeviceOffline");
        assert_eq!(reply.body().signature().to_string(), "s");
        assert_eq!(from_reply(&name, &reply), Some(wire));
    }
}
