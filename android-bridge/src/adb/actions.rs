//! What each catalogue action runs on the phone over ADB, and how its output
//! becomes the documented result. The table of device commands is in
//! `docs/adb-commands.md`; this file is its implementation.
//!
//! Everything here goes through the [`Shell`] trait, so it is tested with a
//! scripted shell, without a phone, and the emulated phone's companion app
//! reuses it over its own shell, so both transports answer alike.

use super::parse::{self, DeviceFailure, FailureKind, ParseError};
use super::shell::ShellOutput;
use crate::device::BoxFuture;
use crate::error::BridgeError;
use droidwarden_services::{
    AirplaneModeAction, AirplaneToggle, AppLaunch, AppLauncherAction, AppListAction, AppStopped,
    AudioAction, AudioMute, AudioVolume, AutoBrightness, BatteryAction, BluetoothAction,
    BluetoothAdapter, BluetoothDevice, BluetoothToggle, CameraAction, CameraList, Command,
    DeviceStateAction, EnvironmentAction, InstalledApps, LocationAction, MediaAction, MediaKey,
    MediaStatus, MotionAction, NetworkAction, NetworkStatus, PairedDevices, PlayUrl, PowerSave,
    PowerStatus, Record, Ringer, RingerMode, ScreenAction, ScreenBrightness, ScreenPower,
    ScreenStatus, ScreenTimeout, Storage, Stream, SystemInfo, SystemInfoAction, WifiAction,
    WifiScan, WifiToggle,
};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Mutex;

mod screen;
mod transfer;
pub use screen::{
    ADB_IME, ADB_IME_B64_ACTION, DUMP_PATH, SNAPSHOT_TTL, Screenshot, UiSnapshot, render_screenshot,
};
pub use transfer::{INSTALL_TEMP_DIR, PushFile, Pushed, open_host_file};

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
    /// Run CPU-heavy work (decoding and scaling a screenshot) where it
    /// blocks no async task. The default runs it in place.
    fn offload<'a>(
        &'a self,
        work: Box<dyn FnOnce() -> Result<Value, BridgeError> + Send + 'static>,
    ) -> BoxFuture<'a, Result<Value, BridgeError>> {
        Box::pin(std::future::ready(work()))
    }
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

async fn put_setting(sh: &dyn Shell, key: &str, value: &str) -> Result<(), BridgeError> {
    ok(sh, &["settings", "put", "system", key, value])
        .await
        .map(drop)
}

async fn keyevent(sh: &dyn Shell, key: &str) -> Result<(), BridgeError> {
    ok(sh, &["input", "keyevent", key]).await.map(drop)
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
        Command::Battery(BatteryAction::Status) => {
            answer(read(sh, &["dumpsys", "battery"], parse::battery).await?)
        }
        Command::Network(NetworkAction::Status) => network_status(sh).await,
        Command::SystemInfo(SystemInfoAction::Info) => system_info(sh).await,
        Command::Location(LocationAction::Current) => {
            let fix = read(sh, &["dumpsys", "location"], parse::location).await?;
            let fix = fix.ok_or_else(|| BridgeError::NotFound {
                message: "the phone has no last known location (is location turned off?)".into(),
            })?;
            answer(fix)
        }
        Command::Location(LocationAction::StartTracking { .. } | LocationAction::StopTracking)
        | Command::Camera(CameraAction::TakePhoto { .. }) => Err(unsupported(sh, command)),
        Command::AppLauncher(AppLauncherAction::Launch { package, activity }) => {
            launch(sh, package.as_str(), activity.as_deref()).await
        }
        Command::AppLauncher(AppLauncherAction::Stop { package }) => {
            let package = package.as_str();
            let out = sh.run(&["pm", "path", package]).await?;
            let paths = parse::pm_path(&out.stdout).unwrap_or_default();
            if out.exit != 0 || paths.is_empty() {
                return Err(BridgeError::NotFound {
                    message: format!("package {package} is not installed"),
                });
            }
            ok(sh, &["am", "force-stop", package]).await?;
            answer(AppStopped {
                package: package.to_owned(),
                stopped: true,
            })
        }
        Command::AppList(AppListAction::List {
            include_system,
            include_disabled,
        }) => {
            let mut argv = vec!["pm", "list", "packages", "-f"];
            if !include_system.unwrap_or(false) {
                argv.push("-3");
            }
            if !include_disabled.unwrap_or(false) {
                argv.push("-e");
            }
            let packages = read(sh, &argv, parse::package_list).await?;
            answer(InstalledApps {
                count: packages.len() as u64,
                packages,
            })
        }
        Command::Wifi(action) => wifi(sh, action).await,
        Command::Bluetooth(action) => bluetooth(sh, action).await,
        Command::Audio(action) => audio(sh, action).await,
        Command::DeviceState(action) => device_state(sh, action).await,
        Command::Screen(action) => screen(sh, action).await,
        Command::ScreenReader(action) => screen::screen_reader(sh, action).await,
        Command::UiControl(action) => screen::ui_control(sh, action).await,
        Command::AirplaneMode(action) => {
            let argv: &[&str] = match action {
                AirplaneModeAction::Status => &["cmd", "connectivity", "airplane-mode"],
                AirplaneModeAction::Enable => &["cmd", "connectivity", "airplane-mode", "enable"],
                AirplaneModeAction::Disable => &["cmd", "connectivity", "airplane-mode", "disable"],
            };
            let out = ok(sh, argv).await?;
            let enabled = match action {
                AirplaneModeAction::Status => {
                    parsed(sh.device_name(), argv, parse::airplane_mode(&out))?
                }
                AirplaneModeAction::Enable => true,
                AirplaneModeAction::Disable => false,
            };
            answer(AirplaneToggle { enabled })
        }
        Command::Motion(MotionAction::CurrentMotion) => {
            let dump = read(sh, &["dumpsys", "sensorservice"], parse::sensors).await?;
            answer(parse::motion(&dump))
        }
        Command::Motion(MotionAction::Orientation) => {
            answer(read(sh, &["dumpsys", "window", "displays"], parse::rotation).await?)
        }
        Command::Environment(action) => {
            let dump = read(sh, &["dumpsys", "sensorservice"], parse::sensors).await?;
            match action {
                EnvironmentAction::AmbientConditions => answer(parse::ambient(&dump)),
                EnvironmentAction::Proximity => answer(parse::proximity(&dump)),
            }
        }
        Command::Camera(CameraAction::CameraInfo) => {
            let cameras = read(sh, &["dumpsys", "media.camera"], parse::cameras).await?;
            answer(CameraList {
                count: cameras.len() as u64,
                cameras,
            })
        }
        Command::Media(action) => media(sh, action).await,
        Command::Notifications(action) => phone::notifications(sh, action).await,
        Command::Intents(action) => phone::intents(sh, action).await,
        Command::Files(action) => phone::files(sh, action).await,
        Command::AppManager(action) => phone::app_manager(sh, action).await,
        Command::Telephony(action) => phone::telephony(sh, action).await,
        Command::Shell(action) => phone::shell(sh, action).await,
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

/// An address no route is asked *for*: `ip route get` only looks the route
/// up, nothing is sent. Any public IPv4 address gives the default route.
const ROUTE_PROBE: &str = "8.8.8.8";

/// The link that carries the phone's traffic (named by the default route,
/// not assumed to be `wlan0`), the main routing table, the default gateway
/// and airplane mode.
async fn network_status(sh: &dyn Shell) -> Result<Value, BridgeError> {
    let routes = read(sh, &["ip", "route"], parse::ip_route).await?;
    let default = match routes.iter().find(|r| r.destination == "default") {
        Some(route) => Some(route.clone()),
        // Android 5+ keeps default routes in per-network tables.
        None => default_route(sh).await?,
    };
    let links = read(sh, &["ip", "addr", "show"], parse::ip_addrs).await?;
    let interface = default.as_ref().and_then(|r| r.interface.as_deref());
    let link = parse::uplink(&links, interface).ok_or_else(|| BridgeError::UnexpectedOutput {
        command: "ip addr show".into(),
        detail: "no network interface other than loopback".into(),
    })?;
    let airplane = setting(sh, "global", "airplane_mode_on").await?;
    answer(NetworkStatus {
        wifi: link.clone(),
        routes,
        default_gateway: default.and_then(|r| r.gateway),
        airplane_mode: airplane.as_deref() == Some("1"),
    })
}

/// The route the phone would use to reach the internet, from `ip route get`
/// (policy rules included); `None` when there is none (offline: `Network is
/// unreachable`, a non-zero exit) or the phone will not say.
async fn default_route(sh: &dyn Shell) -> Result<Option<parse::NetworkRoute>, BridgeError> {
    match read(
        sh,
        &["ip", "route", "get", ROUTE_PROBE],
        parse::ip_route_get,
    )
    .await
    {
        Ok(route) => Ok(Some(route)),
        // No route, an `unreachable` one, or an answer we cannot read: the
        // status is still worth reporting, without a default interface.
        Err(
            BridgeError::Device { .. }
            | BridgeError::NotFound { .. }
            | BridgeError::PermissionDenied { .. }
            | BridgeError::UnexpectedOutput { .. },
        ) => Ok(None),
        Err(other) => Err(other),
    }
}

async fn system_info(sh: &dyn Shell) -> Result<Value, BridgeError> {
    let props = read(sh, &["getprop"], parse::getprop).await?;
    let facts = parsed(sh.device_name(), &["getprop"], parse::device_props(&props))?;
    // Some vendors restrict /proc; the facts above are still worth returning.
    let memory = read(sh, &["cat", "/proc/meminfo"], parse::meminfo)
        .await
        .ok();
    let uptime = read(sh, &["cat", "/proc/uptime"], parse::uptime_seconds)
        .await
        .ok();
    answer(SystemInfo {
        model: facts.model,
        manufacturer: facts.manufacturer,
        brand: facts.brand,
        device: facts.device,
        android_version: facts.android_version,
        sdk: facts.sdk,
        build_id: facts.build_id,
        serial: facts.serial,
        memory_total_kb: memory.as_ref().map(|m| m.total_kb),
        memory_available_kb: memory.and_then(|m| m.available_kb),
        uptime_s: uptime,
    })
}

/// `pkg/.Main` for `.Main` or `Main`; a fully qualified class stays as it is.
fn component(package: &str, activity: &str) -> String {
    if activity.starts_with('.') || activity.contains('.') {
        format!("{package}/{activity}")
    } else {
        format!("{package}/.{activity}")
    }
}

/// Launch `package`: its `activity` when given, else its launcher activity.
///
/// The launcher activity is the first `MAIN`/`LAUNCHER` activity of the
/// package in the phone's own order, as `PackageManager.
/// getLaunchIntentForPackage` picks it. `resolve-activity` is not used: when
/// an app has several launcher activities it names the system chooser, and
/// starting that would show a dialog and report success. Whatever `am start`
/// then reports on top must belong to the package, or the launch failed.
async fn launch(
    sh: &dyn Shell,
    package: &str,
    activity: Option<&str>,
) -> Result<Value, BridgeError> {
    let component = match activity {
        Some(activity) => component(package, activity),
        None => launcher_activity(sh, package).await?,
    };
    let started = read(
        sh,
        &["am", "start", "-W", "-n", &component],
        parse::am_start,
    )
    .await?;
    if let Some(top) = started.activity.as_deref()
        && parse::component_package(top) != Some(package)
    {
        return Err(BridgeError::Device {
            message: format!(
                "`am start -n {component}` left {top} on top, not an activity of {package} \
                 (the app closed at once, or handed over to another app or to the system chooser)"
            ),
            exit: None,
        });
    }
    answer(AppLaunch {
        package: package.to_owned(),
        component,
        status: started.status,
        launch_state: started.launch_state,
        total_time_ms: started.total_time_ms,
    })
}

/// The first launcher activity of `package`, from `cmd package
/// query-activities --brief -a MAIN -c LAUNCHER PACKAGE`.
async fn launcher_activity(sh: &dyn Shell, package: &str) -> Result<String, BridgeError> {
    let not_found = || BridgeError::NotFound {
        message: format!("package {package} is not installed or has no launcher activity"),
    };
    let argv = [
        "cmd",
        "package",
        "query-activities",
        "--brief",
        "-a",
        "android.intent.action.MAIN",
        "-c",
        "android.intent.category.LAUNCHER",
        package,
    ];
    let found = read(sh, &argv, parse::launcher_activities)
        .await
        .map_err(|e| match e {
            BridgeError::NotFound { .. } => not_found(),
            other => other,
        })?;
    // The package argument already restricts the query; an activity of
    // another package is never launched in this one's name.
    found
        .into_iter()
        .find(|c| parse::component_package(c) == Some(package))
        .ok_or_else(not_found)
}

async fn wifi(sh: &dyn Shell, action: &WifiAction) -> Result<Value, BridgeError> {
    match action {
        WifiAction::Status => answer(read(sh, &["dumpsys", "wifi"], parse::wifi).await?),
        WifiAction::Enable | WifiAction::Disable => {
            let enable = matches!(action, WifiAction::Enable);
            ok(
                sh,
                &["svc", "wifi", if enable { "enable" } else { "disable" }],
            )
            .await?;
            answer(WifiToggle { enabled: enable })
        }
        WifiAction::Scan => {
            ok(sh, &["cmd", "wifi", "start-scan"]).await?;
            let networks =
                read(sh, &["cmd", "wifi", "list-scan-results"], parse::wifi_scan).await?;
            answer(WifiScan { networks })
        }
    }
}

async fn bluetooth(sh: &dyn Shell, action: &BluetoothAction) -> Result<Value, BridgeError> {
    let dump = || read(sh, &["dumpsys", "bluetooth_manager"], parse::bluetooth);
    match action {
        BluetoothAction::Status => {
            let bt = dump().await?;
            answer(BluetoothAdapter {
                enabled: bt.enabled,
                state: bt.state,
                name: bt.name,
                address: bt.address,
            })
        }
        BluetoothAction::PairedDevices => {
            let bt = dump().await?;
            let devices = bt
                .bonded
                .into_iter()
                .map(|d| BluetoothDevice {
                    address: d.address,
                    name: d.name,
                })
                .collect();
            answer(PairedDevices { devices })
        }
        BluetoothAction::Enable | BluetoothAction::Disable => {
            let enable = matches!(action, BluetoothAction::Enable);
            let verb = if enable { "enable" } else { "disable" };
            read(sh, &["cmd", "bluetooth_manager", verb], parse::cmd_success).await?;
            answer(BluetoothToggle { enabled: enable })
        }
    }
}

fn percent(index: i64, min: i64, max: i64) -> i64 {
    if max <= min {
        return 0;
    }
    (((index - min) * 100) as f64 / (max - min) as f64).round() as i64
}

fn index_for(level: u8, min: i64, max: i64) -> i64 {
    min + ((i64::from(level) * (max - min)) as f64 / 100.0).round() as i64
}

async fn volume(sh: &dyn Shell, stream: Stream) -> Result<AudioVolume, BridgeError> {
    let v = read(sh, &["dumpsys", "audio"], |out| {
        parse::audio_stream(out, stream.dumpsys_name())
    })
    .await?;
    Ok(AudioVolume {
        stream,
        level: percent(v.index, v.min, v.max),
        index: v.index,
        min: v.min,
        max: v.max,
        muted: v.muted,
    })
}

async fn audio(sh: &dyn Shell, action: &AudioAction) -> Result<Value, BridgeError> {
    match action {
        AudioAction::GetVolume { stream } => answer(volume(sh, *stream).await?),
        AudioAction::SetVolume { stream, level } => {
            let current = volume(sh, *stream).await?;
            set_volume(sh, *stream, index_for(*level, current.min, current.max)).await?;
            answer(volume(sh, *stream).await?)
        }
        AudioAction::Mute { stream } | AudioAction::Unmute { stream } => {
            let stream = stream.unwrap_or(Stream::Music);
            let mute = matches!(action, AudioAction::Mute { .. });
            answer(mute_stream(sh, stream, mute).await?)
        }
        AudioAction::RingerMode { mode } => {
            let arg = match mode {
                RingerMode::Normal => "NORMAL",
                RingerMode::Vibrate => "VIBRATE",
                RingerMode::Silent => "SILENT",
            };
            ok(sh, &["cmd", "audio", "set-ringer-mode", arg]).await?;
            answer(Ringer { mode: *mode })
        }
    }
}

/// Set `stream`'s volume index (between its min and max).
async fn set_volume(sh: &dyn Shell, stream: Stream, index: i64) -> Result<(), BridgeError> {
    let (id, index) = (stream.android_id().to_string(), index.to_string());
    let argv = [
        "cmd",
        "media_session",
        "volume",
        "--stream",
        &id,
        "--set",
        &index,
    ];
    ok(sh, &argv).await.map(drop)
}

/// Android's shell volume tool only knows `--adj raise|same|lower` (it
/// rejects `mute`), so muting sets the stream to its minimum and remembers
/// the level it had; unmuting restores that level, or half the range when
/// nothing was remembered (the daemon was restarted, or the phone was muted
/// by hand).
async fn mute_stream(sh: &dyn Shell, stream: Stream, mute: bool) -> Result<AudioMute, BridgeError> {
    let AudioVolume {
        index, min, max, ..
    } = volume(sh, stream).await?;
    let id = stream.android_id();
    let target = {
        let mut saved = sh.muted_levels().lock().unwrap_or_else(|e| e.into_inner());
        if mute {
            if index > min {
                saved.insert(id, index);
            }
            Some(min)
        } else {
            match saved.remove(&id) {
                Some(level) => Some(level),
                None if index <= min => Some(index_for(50, min, max)),
                None => None,
            }
        }
    };
    if let Some(target) = target.filter(|t| *t != index) {
        set_volume(sh, stream, target).await?;
    }
    let after = volume(sh, stream).await?;
    Ok(AudioMute {
        stream: after.stream,
        muted: mute,
        level: after.level,
    })
}

async fn device_state(sh: &dyn Shell, action: &DeviceStateAction) -> Result<Value, BridgeError> {
    match action {
        DeviceStateAction::Status => {
            let power = read(sh, &["dumpsys", "power"], parse::power).await?;
            let low_power = setting(sh, "global", "low_power").await?;
            let power_save = low_power.map(|v| v == "1").or(power.battery_saver);
            answer(PowerStatus {
                screen_on: power.screen_on,
                wakefulness: power.wakefulness,
                plugged: power.plugged,
                power_save,
                battery_level: power.battery_level,
            })
        }
        DeviceStateAction::ScreenOn => {
            keyevent(sh, "KEYCODE_WAKEUP").await?;
            answer(ScreenPower { screen_on: true })
        }
        DeviceStateAction::ScreenOff => {
            keyevent(sh, "KEYCODE_SLEEP").await?;
            answer(ScreenPower { screen_on: false })
        }
        DeviceStateAction::PowerSave { enabled } => {
            ok(
                sh,
                &["cmd", "power", "set-mode", if *enabled { "1" } else { "0" }],
            )
            .await?;
            answer(PowerSave {
                power_save: *enabled,
            })
        }
        DeviceStateAction::Storage => {
            let all = read(sh, &["df"], parse::df).await?;
            let (data, external) = parse::storage_volumes(&all);
            answer(Storage {
                data: data.cloned(),
                external: external.cloned(),
            })
        }
    }
}

async fn screen(sh: &dyn Shell, action: &ScreenAction) -> Result<Value, BridgeError> {
    match action {
        ScreenAction::Status => {
            let int = |v: Option<String>| v.and_then(|v| v.parse::<i64>().ok());
            let brightness = int(setting(sh, "system", "screen_brightness").await?);
            let mode = setting(sh, "system", "screen_brightness_mode").await?;
            let timeout = int(setting(sh, "system", "screen_off_timeout").await?);
            let power = read(sh, &["dumpsys", "power"], parse::power).await?;
            answer(ScreenStatus {
                brightness,
                auto_brightness: mode.as_deref() == Some("1"),
                timeout_ms: timeout,
                screen_on: power.screen_on,
            })
        }
        ScreenAction::SetBrightness { level } => {
            put_setting(sh, "screen_brightness", &level.to_string()).await?;
            answer(ScreenBrightness { brightness: *level })
        }
        ScreenAction::AutoBrightness { enabled } => {
            put_setting(
                sh,
                "screen_brightness_mode",
                if *enabled { "1" } else { "0" },
            )
            .await?;
            answer(AutoBrightness {
                auto_brightness: *enabled,
            })
        }
        ScreenAction::SetTimeout { ms } => {
            put_setting(sh, "screen_off_timeout", &ms.to_string()).await?;
            answer(ScreenTimeout { timeout_ms: *ms })
        }
        ScreenAction::Wake => {
            keyevent(sh, "KEYCODE_WAKEUP").await?;
            answer(ScreenPower { screen_on: true })
        }
    }
}

/// Start the activity that views `url` (of `category`, when given) and
/// wait for it to be shown.
async fn view(
    sh: &dyn Shell,
    url: &str,
    category: Option<&str>,
) -> Result<parse::AmStart, BridgeError> {
    let mut argv = vec!["am", "start", "-W", "-a", "android.intent.action.VIEW"];
    if let Some(category) = category {
        argv.extend(["-c", category]);
    }
    argv.extend(["-d", url]);
    read(sh, &argv, parse::am_start).await
}

async fn media(sh: &dyn Shell, action: &MediaAction) -> Result<Value, BridgeError> {
    let key = match action {
        MediaAction::Status => {
            let sessions = read(sh, &["dumpsys", "media_session"], parse::media_sessions).await?;
            let playing = sessions.iter().any(|s| s.state == "playing");
            return answer(MediaStatus { sessions, playing });
        }
        MediaAction::PlayUrl { url } => {
            let started = view(sh, url, None).await?;
            return answer(PlayUrl {
                url: url.clone(),
                status: started.status,
            });
        }
        MediaAction::Play => "play",
        MediaAction::Pause => "pause",
        MediaAction::Next => "next",
        MediaAction::Previous => "previous",
        MediaAction::Stop => "stop",
    };
    ok(sh, &["cmd", "media_session", "dispatch", key]).await?;
    answer(MediaKey {
        dispatched: key.to_owned(),
    })
}

mod phone;
pub use phone::{MAX_PULL_BYTES, MAX_SHELL_OUTPUT};

#[cfg(test)]
mod phone_tests;
#[cfg(test)]
mod tests;
