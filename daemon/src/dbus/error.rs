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

/// Code ↔ D-Bus error name. The names never change once released.
const NAMES: &[(ErrorCode, &str)] = &[
    (
        ErrorCode::InvalidParams,
        "org.droidwarden.Error.InvalidParams",
    ),
    (
        ErrorCode::InvalidRequest,
        "org.droidwarden.Error.InvalidRequest",
    ),
    (
        ErrorCode::UnknownService,
        "org.droidwarden.Error.UnknownService",
    ),
    (
        ErrorCode::UnknownAction,
        "org.droidwarden.Error.UnknownAction",
    ),
    (
        ErrorCode::UnsupportedAction,
        "org.droidwarden.Error.UnsupportedAction",
    ),
    (
        ErrorCode::DeviceNotFound,
        "org.droidwarden.Error.DeviceNotFound",
    ),
    (
        ErrorCode::DeviceOffline,
        "org.droidwarden.Error.DeviceOffline",
    ),
    (ErrorCode::AdbMissing, "org.droidwarden.Error.AdbMissing"),
    (
        ErrorCode::DeviceAmbiguous,
        "org.droidwarden.Error.DeviceAmbiguous",
    ),
    (ErrorCode::Timeout, "org.droidwarden.Error.Timeout"),
    (
        ErrorCode::PermissionDenied,
        "org.droidwarden.Error.PermissionDenied",
    ),
    (ErrorCode::NotFound, "org.droidwarden.Error.NotFound"),
    (ErrorCode::DeviceError, "org.droidwarden.Error.DeviceError"),
    (ErrorCode::Denied, "org.droidwarden.Error.Denied"),
    (ErrorCode::Internal, "org.droidwarden.Error.Internal"),
    (ErrorCode::Busy, "org.droidwarden.Error.Busy"),
    (ErrorCode::Disabled, "org.droidwarden.Error.Disabled"),
];

/// The D-Bus error name of a code. A code added to the catalogue but not
/// yet here goes out as `Internal` (the unit test below catches that).
pub(crate) fn error_name(code: ErrorCode) -> &'static str {
    NAMES
        .iter()
        .find(|(c, _)| *c == code)
        .map(|(_, name)| *name)
        .unwrap_or("org.droidwarden.Error.Internal")
}

/// The code of one of our D-Bus error names.
pub(crate) fn code_of(name: &str) -> Option<ErrorCode> {
    NAMES.iter().find(|(_, n)| *n == name).map(|(c, _)| *c)
}

/// A [`WireError`] as a D-Bus method's error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DbusError(pub(crate) WireError);

impl From<WireError> for DbusError {
    fn from(error: WireError) -> Self {
        Self(error)
    }
}

impl zbus::DBusError for DbusError {
    fn create_reply(&self, call: &Header<'_>) -> zbus::Result<Message> {
        Message::error(call, self.name())?.build(&(self.0.message.as_str(),))
    }

    fn name(&self) -> ErrorName<'_> {
        ErrorName::from_static_str_unchecked(error_name(self.0.code))
    }

    fn description(&self) -> Option<&str> {
        Some(&self.0.message)
    }
}

/// Turn an error reply of ours back into the wire error it carried: the
/// name gives the code, the body the message. `None` for names that are
/// not ours (the bus's own errors).
pub(crate) fn from_reply(name: &str, reply: &Message) -> Option<WireError> {
    let code = code_of(name)?;
    let message = reply.body().deserialize::<String>().unwrap_or_default();
    Some(WireError::new(code, message))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every error name's prefix.
    const PREFIX: &str = "org.droidwarden.Error";

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

    #[test]
    fn every_code_has_a_valid_name_spelled_after_its_wire_code() {
        // The 17 codes of droidwarden_services::ErrorCode today; a new code
        // must be added to NAMES (and to docs/dbus-api.md).
        assert_eq!(NAMES.len(), 17);
        for (code, name) in NAMES {
            assert_eq!(*name, format!("{PREFIX}.{}", camel(code.as_str())));
            assert!(ErrorName::try_from(*name).is_ok(), "{name}");
            assert_eq!(error_name(*code), *name);
            assert_eq!(code_of(name), Some(*code));
        }
        assert_eq!(code_of("org.freedesktop.DBus.Error.ServiceUnknown"), None);
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
            zbus::DBusError::create_reply(&DbusError(wire.clone()), &call.header()).unwrap();
        let name = reply.header().error_name().unwrap().to_string();
        assert_eq!(name, "org.droidwarden.Error.DeviceOffline");
        assert_eq!(reply.body().signature().to_string(), "s");
        assert_eq!(from_reply(&name, &reply), Some(wire));
    }
}
