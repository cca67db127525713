//! Parameter schemas shared by the phone services of issue #13 (intents,
//! files, apps, telephony, shell).

use crate::schema::Schema;

/// Any URI with a scheme: printable ASCII without spaces. Which schemes may
/// be opened is the daemon's policy ([`crate::PhonePolicy`]), not the schema's.
pub(crate) const ANY_URL_PATTERN: &str = r"^[A-Za-z][A-Za-z0-9+.\-]{0,31}:[!-~]+$";
/// `package/.Activity` or `package/full.ClassName`.
pub(crate) const COMPONENT_PATTERN: &str = r"^[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z][A-Za-z0-9_]*)+/\.?[A-Za-z_][A-Za-z0-9_$]*(\.[A-Za-z_][A-Za-z0-9_$]*)*$";
/// An intent action such as `android.intent.action.VIEW`.
pub(crate) const INTENT_ACTION_PATTERN: &str =
    r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$";
/// An extra's key: letters, digits, `_`, `.` and `-`.
pub(crate) const EXTRA_KEY_PATTERN: &str = r"^[A-Za-z_][A-Za-z0-9_.\-]*$";
/// A phone number: digits with an optional leading `+`.
pub(crate) const PHONE_NUMBER_PATTERN: &str = r"^\+?[0-9]{2,20}$";
/// Text without NUL (which no command line can carry); anything else,
/// quotes and newlines included, is passed as one quoted argument.
pub(crate) const TEXT_PATTERN: &str = r"^[^\x00]*$";
/// An absolute path on the phone without control characters. Where it may
/// point is the daemon's policy ([`crate::PhonePolicy`]).
pub(crate) const PHONE_PATH_PATTERN: &str = r"^/[^\x00-\x1f\x7f]*$";

/// Free text of at most `max` characters.
pub(crate) fn text_param(description: &'static str, max: usize) -> Schema {
    Schema::pattern(description, TEXT_PATTERN, max)
}

/// An absolute path on the phone.
pub(crate) fn phone_path_param(description: &'static str) -> Schema {
    Schema::pattern(description, PHONE_PATH_PATTERN, 1024)
}

/// A path on the daemon's machine: absolute, without control characters.
/// Where it may point is the daemon's policy ([`crate::PhonePolicy`]).
pub(crate) const HOST_PATH_PATTERN: &str = r"^/[^\x00-\x1f\x7f]*$";

/// A file on the daemon's machine.
pub(crate) fn host_path_param(description: &'static str) -> Schema {
    Schema::pattern(description, HOST_PATH_PATTERN, 4096)
}
