//! What each catalogue action runs on the phone over ADB, and how its output
//! becomes the documented result: one module per service, named as the
//! service's module in the catalogue (`services/src/service/`), holding its
//! arms and the parsers only it uses (with their real-output tests).
//! Parsers several services share are in `parse`. The table of device
//! commands is in `docs/adb-commands.md`; these modules are its
//! implementation.
//!
//! Everything here goes through the [`Shell`] trait, so it is tested with a
//! scripted shell, without a phone, and the emulated phone's companion app
//! reuses it over its own shell, so both transports answer alike.
//!
//! Every value a caller gave is one element of an argv, quoted by the
//! transport's shell (`shell::quote`), never spliced into a command string.
//! What the daemon's configuration allows (schemes, directories, numbers,
//! services that are off) is checked before a call reaches a transport
//! (`droidwarden_services::PhonePolicy`, at the hub); the checks that hold
//! whatever the configuration says are repeated in the service modules, so
//! a transport used on its own refuses them too.

use super::parse::{self, DeviceFailure, FailureKind, ParseError};
use super::shell::ShellOutput;
use crate::device::BoxFuture;
use crate::error::BridgeError;
use droidwarden_services::{Command, ErrorCode, Record, WireError};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Mutex;

pub mod airplane_mode;
pub mod alerts;
pub mod app_launcher;
pub mod app_list;
pub mod app_manager;
pub mod audio_automation;
pub mod battery;
pub mod bluetooth_automation;
pub mod camera_control;
pub mod device_state;
pub mod environmental_sensors;
pub mod files;
pub mod intents;
pub mod location;
pub mod media_control;
pub mod motion_detection;
pub mod network;
pub mod notifications;
pub mod screen;
pub mod screen_control;
pub mod shell;
pub mod system_info;
pub mod telephony;
mod transfer;
pub mod ui_control;
pub mod wifi_automation;
pub use files::MAX_PULL_BYTES;
pub use screen::{
    DUMP_PATH, SNAPSHOT_TTL, Screenshot, UiSnapshot, WINDOW_READING_TTL, WindowReading,
    render_screenshot,
};
pub use shell::MAX_SHELL_OUTPUT;
pub use transfer::{INSTALL_TEMP_DIR, PushFile, Pushed, open_host_file};
pub use ui_control::{ADB_IME, ADB_IME_B64_ACTION};

/// Runs one device command (an argv; quoting is the implementation's job).
pub trait Shell: Send + Sync {
    /// The device's name, for error messages.
    fn device_name(&self) -> &str;
    /// Run `argv` and return its output and exit status.
    fn run<'a>(&'a self, argv: &'a [&'a str]) -> BoxFuture<'a, Result<ShellOutput, BridgeError>>;
    /// Run `first` and, only when it exits 0, `then`: the output of both
    /// (standard output and error each in order) and the exit status of
    /// the last one run. A transport that can runs them as one device
    /// command (`first && then`, one round trip); the default runs them
    /// one after the other.
    fn run_then<'a>(
        &'a self,
        first: &'a [&'a str],
        then: &'a [&'a str],
    ) -> BoxFuture<'a, Result<ShellOutput, BridgeError>> {
        Box::pin(async move {
            let mut out = self.run(first).await?;
            if out.exit != 0 {
                return Ok(out);
            }
            let second = self.run(then).await?;
            out.stdout.push_str(&second.stdout);
            out.stderr.push_str(&second.stderr);
            out.exit = second.exit;
            Ok(out)
        })
    }
    /// Volume indexes saved by `mute`, per Android stream number, for `unmute`.
    fn muted_levels(&self) -> &Mutex<HashMap<u8, i64>>;
    /// Run `argv` with its standard output kept as bytes (`adb exec-out`:
    /// no terminal, nothing converted), for images.
    fn run_binary<'a>(
        &'a self,
        argv: &'a [&'a str],
    ) -> BoxFuture<'a, Result<BinaryOutput, BridgeError>>;
    /// The latest `screen.ui_tree` of this phone, for `ui_control.tap {element}`.
    fn ui_snapshot(&self) -> &Mutex<Option<UiSnapshot>>;
    /// Where the latest `dumpsys window displays` is kept for the next UI
    /// action's guard ([`WindowReading`]); `None` (the default): this
    /// transport keeps none, and every guard reads the phone again.
    fn window_reading(&self) -> Option<&Mutex<Option<WindowReading>>> {
        None
    }
    /// Write a file on the phone without a shell (the adb file service),
    /// so its path and bytes never pass a command line. The default: this
    /// transport cannot.
    fn push<'a>(&'a self, file: PushFile<'a>) -> BoxFuture<'a, Result<Pushed, BridgeError>> {
        let _ = file;
        Box::pin(std::future::ready(Err(BridgeError::Refused(
            droidwarden_services::WireError::new(
                droidwarden_services::ErrorCode::UnsupportedAction,
                format!("{}: this transport cannot write files", self.device_name()),
            ),
        ))))
    }
    /// Which files of the daemon's machine may be sent to this phone
    /// (`host_path` parameters); `None`: none, through this transport.
    fn host_files(&self) -> Option<&droidwarden_services::HostFiles> {
        None
    }
    /// Whether a UI action wakes a sleeping screen first instead of
    /// answering `screen_off`. The default: it does not.
    fn wake_for_ui(&self) -> bool {
        false
    }
    /// Run CPU-heavy work (decoding and scaling a screenshot) where it
    /// blocks no async task. The default runs it in place.
    fn offload<'a>(
        &'a self,
        work: Box<dyn FnOnce() -> Result<Value, BridgeError> + Send + 'static>,
    ) -> BoxFuture<'a, Result<Value, BridgeError>> {
        Box::pin(std::future::ready(work()))
    }
    /// One JSON-RPC call to the phone's on-device UI server
    /// (`docs/screen-component.md`), started first if it is not running and
    /// the person allowed it. The default: this transport has none.
    fn ui_rpc<'a>(
        &'a self,
        method: &'a str,
        params: Value,
    ) -> BoxFuture<'a, Result<Value, UiRpcError>> {
        let _ = (method, params);
        Box::pin(std::future::ready(Err(UiRpcError::Unavailable(
            "this transport has no on-device UI server".into(),
        ))))
    }
}

/// Why a call to the on-device UI server ([`Shell::ui_rpc`]) gave no result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UiRpcError {
    /// The request never reached the server: it is off (not allowed, no
    /// jar), could not be started, or is not listening. Nothing was done on
    /// the phone, so another path may be tried.
    #[error("the on-device UI server is unavailable: {0}")]
    Unavailable(String),
    /// The request was sent but no answer came (the server died or the
    /// link dropped mid-call): whether it acted is unknown.
    #[error("the on-device UI server stopped answering: {0}")]
    Lost(String),
    /// The server answered with a JSON-RPC error.
    #[error("the on-device UI server answered error {code}: {message}")]
    Rpc {
        /// The JSON-RPC error code.
        code: i64,
        /// Its message.
        message: String,
    },
}

/// The result of a device command whose output is binary.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BinaryOutput {
    /// Standard output, as the command wrote it.
    pub stdout: Vec<u8>,
    /// Standard error.
    pub stderr: String,
    /// The exit status (0 when the device cannot report one).
    pub exit: i32,
}

/// Run `argv`; a failure the phone reports becomes a structured error.
///
/// This is the one place every device command's output passes through, so
/// it is also where a `dumpsys` run that exited 0 with a dump that cannot be
/// trusted (timed out, service lost, stopped mid-line: retryable; empty: a
/// device error) is stopped before any parser reads values out of it.
async fn ok(sh: &dyn Shell, argv: &[&str]) -> Result<String, BridgeError> {
    let out = sh.run(argv).await?;
    if let Some(failure) = parse::classify_device_error(&out.stdout, &out.stderr, out.exit) {
        return Err(from_failure(sh.device_name(), failure, Some(out.exit)));
    }
    if argv.first() == Some(&"dumpsys") {
        let command = argv.join(" ");
        let verdict = parse::dump_complete(&command, &out.stdout, &out.stderr);
        parsed(sh.device_name(), argv, verdict)?;
    }
    Ok(out.stdout)
}

fn from_failure(device: &str, failure: DeviceFailure, exit: Option<i32>) -> BridgeError {
    match failure.kind {
        FailureKind::PermissionDenied => BridgeError::PermissionDenied {
            message: failure.message,
        },
        FailureKind::MissingService(_) | FailureKind::CommandNotFound(_) => {
            BridgeError::MissingOnPhone {
                device: device.to_owned(),
                message: failure.message,
            }
        }
        FailureKind::NotFound(_) => BridgeError::NotFound {
            message: failure.message,
        },
        FailureKind::Other => BridgeError::Device {
            message: failure.message,
            exit,
        },
    }
}

/// Map a parser's verdict on the output of `argv`.
fn parsed<T>(device: &str, argv: &[&str], result: Result<T, ParseError>) -> Result<T, BridgeError> {
    result.map_err(|e| match e {
        ParseError::NotFound { what } => BridgeError::NotFound { message: what },
        ParseError::Device(failure) => from_failure(device, failure, None),
        ParseError::Incomplete { detail } => BridgeError::IncompleteOutput {
            command: argv.join(" "),
            detail,
        },
        other => BridgeError::UnexpectedOutput {
            command: argv.join(" "),
            detail: other.to_string(),
        },
    })
}

/// Run `argv` and parse its output with `parser`.
async fn read<T>(
    sh: &dyn Shell,
    argv: &[&str],
    parser: impl FnOnce(&str) -> Result<T, ParseError>,
) -> Result<T, BridgeError> {
    let out = ok(sh, argv).await?;
    parsed(sh.device_name(), argv, parser(&out))
}

/// An action's result: a record of the catalogue, so its fields are the
/// ones the catalogue documents.
pub(super) fn answer(result: impl Record) -> Result<Value, BridgeError> {
    serde_json::to_value(result).map_err(|e| BridgeError::Internal(e.to_string()))
}

async fn setting(
    sh: &dyn Shell,
    namespace: &str,
    key: &str,
) -> Result<Option<String>, BridgeError> {
    read(
        sh,
        &["settings", "get", namespace, key],
        parse::setting_value,
    )
    .await
}

/// A setting that holds a whole number: `None` when unset; anything else
/// is unexpected output (`device_error`), never a `null` that would read as
/// "unset".
async fn number_setting(
    sh: &dyn Shell,
    namespace: &str,
    key: &str,
) -> Result<Option<i64>, BridgeError> {
    read(
        sh,
        &["settings", "get", namespace, key],
        parse::setting_number,
    )
    .await
}

async fn put_setting(sh: &dyn Shell, key: &str, value: &str) -> Result<(), BridgeError> {
    ok(sh, &["settings", "put", "system", key, value])
        .await
        .map(drop)
}

/// `package` is installed (`pm path` names its APK), or `not_found`.
async fn installed(sh: &dyn Shell, package: &str) -> Result<(), BridgeError> {
    let out = sh.run(&["pm", "path", package]).await?;
    let paths = parse::pm_path(&out.stdout).unwrap_or_default();
    if out.exit != 0 || paths.is_empty() {
        return Err(BridgeError::NotFound {
            message: format!("package {package} is not installed"),
        });
    }
    Ok(())
}

async fn keyevent(sh: &dyn Shell, key: &str) -> Result<(), BridgeError> {
    ok(sh, &["input", "keyevent", key]).await.map(drop)
}

fn refused(code: ErrorCode, message: impl Into<String>) -> BridgeError {
    BridgeError::Refused(WireError::new(code, message))
}

fn wire(e: WireError) -> BridgeError {
    BridgeError::Refused(e)
}

/// Perform `command` on the phone behind `sh`: the device commands of
/// `docs/adb-commands.md`, parsed into the catalogue's result shape.
///
/// # Errors
/// What the phone reports (permission, missing service or command, not
/// found, other failures), unexpected output, and `unsupported_action` for
/// actions that need the companion app.
pub async fn execute(sh: &dyn Shell, command: &Command) -> Result<Value, BridgeError> {
    screen::forget_tree(sh, command);
    match command {
        Command::Battery(action) => battery::run(sh, action).await,
        Command::Network(action) => network::run(sh, action).await,
        Command::SystemInfo(action) => system_info::run(sh, action).await,
        Command::Location(action) => location::run(sh, action).await,
        Command::AppLauncher(action) => app_launcher::run(sh, action).await,
        Command::AppList(action) => app_list::run(sh, action).await,
        Command::Wifi(action) => wifi_automation::run(sh, action).await,
        Command::Bluetooth(action) => bluetooth_automation::run(sh, action).await,
        Command::Audio(action) => audio_automation::run(sh, action).await,
        Command::DeviceState(action) => device_state::run(sh, action).await,
        Command::Screen(action) => screen_control::run(sh, action).await,
        Command::AirplaneMode(action) => airplane_mode::run(sh, action).await,
        Command::Motion(action) => motion_detection::run(sh, action).await,
        Command::Environment(action) => environmental_sensors::run(sh, action).await,
        Command::Camera(action) => camera_control::run(sh, action).await,
        Command::Media(action) => media_control::run(sh, action).await,
        Command::Notifications(action) => notifications::run(sh, action).await,
        Command::Intents(action) => intents::run(sh, action).await,
        Command::Files(action) => files::run(sh, action).await,
        Command::AppManager(action) => app_manager::run(sh, action).await,
        Command::Telephony(action) => telephony::run(sh, action).await,
        Command::Shell(action) => shell::run(sh, action).await,
        Command::ScreenReader(action) => screen::run(sh, action).await,
        Command::UiControl(action) => ui_control::run(sh, action).await,
        Command::Alerts(action) => alerts::run(sh, action).await,
    }
}

fn unsupported(sh: &dyn Shell, command: &Command) -> BridgeError {
    let action = command.action_name();
    let reason = crate::TransportKind::Adb
        .unsupported_reason(command.service_id(), action)
        .unwrap_or("not available over adb");
    BridgeError::Unsupported {
        device: sh.device_name().to_owned(),
        service: command.service_id().to_owned(),
        action,
        transport: "adb",
        reason: reason.to_owned(),
    }
}

#[cfg(test)]
mod phone_tests;
#[cfg(test)]
mod tests;
