//! What the emulated companion app does for each catalogue action.
//!
//! The app works on the same phone state as the ADB side, through the same
//! device commands the ADB transport runs (`docs/adb-commands.md`), executed
//! in-process with `SimHandle::execute` (so they appear in the command log),
//! and turns their output into the catalogue's result shapes with the
//! bridge's own parsers. So an ADB call and a companion call on one phone
//! agree by construction. The actions only the app can do (tracking, photos)
//! keep their state in [`Companion`].
//!
//! A real app would use Android APIs instead of shell commands; what matters
//! to the daemon is the result shape, which the tests check against the
//! catalogue for every action.

use droidwarden_bridge::adb::parse::{self, DeviceFailure, FailureKind, ParseError};
use droidwarden_services::{
    AirplaneModeAction, AppLauncherAction, AppListAction, AudioAction, BatteryAction,
    BluetoothAction, CameraAction, Command, DeviceStateAction, EnvironmentAction, ErrorCode,
    LocationAction, MediaAction, MotionAction, NetworkAction, RingerMode, ScreenAction, Stream,
    SystemInfoAction, WifiAction, WireError,
};
use serde::Serialize;
use serde_json::{Value, json};

use super::Companion;
use crate::clock;
use crate::sim::{ShellOutput, SimHandle};

/// `start_tracking` without an interval: once a minute.
const DEFAULT_TRACKING_S: u32 = 60;

type Outcome<T> = Result<T, WireError>;

/// Quotes one argument for the device shell, as the ADB transport does.
fn quote(arg: &str) -> String {
    format!("'{}'", arg.replace('\'', r"'\''"))
}

/// How a device failure reads on the wire (the ADB transport's mapping).
fn failure(f: DeviceFailure) -> WireError {
    let code = match f.kind {
        FailureKind::PermissionDenied => ErrorCode::PermissionDenied,
        FailureKind::MissingService(_) | FailureKind::CommandNotFound(_) => {
            ErrorCode::UnsupportedAction
        }
        FailureKind::NotFound(_) => ErrorCode::NotFound,
        _ => ErrorCode::DeviceError,
    };
    WireError::new(code, f.message)
}

fn parsed<T>(argv: &[&str], result: Result<T, ParseError>) -> Outcome<T> {
    result.map_err(|e| match e {
        ParseError::NotFound { what } => WireError::new(ErrorCode::NotFound, what),
        ParseError::Device(f) => failure(f),
        other => WireError::new(
            ErrorCode::DeviceError,
            format!("unexpected output from `{}`: {other}", argv.join(" ")),
        ),
    })
}

fn to_json(value: impl Serialize) -> Outcome<Value> {
    serde_json::to_value(value).map_err(|e| WireError::new(ErrorCode::Internal, e.to_string()))
}

/// The app's view of the phone: runs device commands and keeps app state.
struct App<'a> {
    sim: &'a SimHandle,
    app: &'a Companion,
}

impl App<'_> {
    fn run(&self, argv: &[&str]) -> ShellOutput {
        let line: Vec<String> = argv.iter().map(|a| quote(a)).collect();
        self.sim.execute(&line.join(" "))
    }

    /// Runs `argv`; a failure the phone reports becomes a wire error.
    fn ok(&self, argv: &[&str]) -> Outcome<String> {
        let out = self.run(argv);
        let (stdout, stderr) = (out.stdout_text(), out.stderr_text());
        match parse::classify_device_error(&stdout, &stderr, i32::from(out.exit)) {
            None => Ok(stdout.into_owned()),
            Some(f) => Err(failure(f)),
        }
    }

    fn read<T>(
        &self,
        argv: &[&str],
        parser: impl FnOnce(&str) -> Result<T, ParseError>,
    ) -> Outcome<T> {
        let out = self.ok(argv)?;
        parsed(argv, parser(&out))
    }

    fn setting(&self, namespace: &str, key: &str) -> Outcome<Option<String>> {
        self.read(&["settings", "get", namespace, key], parse::setting_value)
    }

    fn put_setting(&self, key: &str, value: &str) -> Outcome<()> {
        self.ok(&["settings", "put", "system", key, value])
            .map(drop)
    }

    fn keyevent(&self, key: &str) -> Outcome<()> {
        self.ok(&["input", "keyevent", key]).map(drop)
    }
}

/// Performs `command` on the phone behind `sim` as the companion app.
pub(crate) fn perform(sim: &SimHandle, app: &Companion, command: &Command) -> Outcome<Value> {
    let app = App { sim, app };
    match command {
        Command::Battery(BatteryAction::Status) => {
            to_json(app.read(&["dumpsys", "battery"], parse::battery)?)
        }
        Command::Network(NetworkAction::Status) => network_status(&app),
        Command::SystemInfo(SystemInfoAction::Info) => system_info(&app),
        Command::Location(action) => location(&app, action),
        Command::AppLauncher(AppLauncherAction::Launch { package, activity }) => {
            launch(&app, package.as_str(), activity.as_deref())
        }
        Command::AppLauncher(AppLauncherAction::Stop { package }) => {
            let package = package.as_str();
            let out = app.run(&["pm", "path", package]);
            let paths = parse::pm_path(&out.stdout_text()).unwrap_or_default();
            if out.exit != 0 || paths.is_empty() {
                return Err(WireError::new(
                    ErrorCode::NotFound,
                    format!("package {package} is not installed"),
                ));
            }
            app.ok(&["am", "force-stop", package])?;
            Ok(json!({ "package": package, "stopped": true }))
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
            let packages = app.read(&argv, parse::package_list)?;
            Ok(json!({ "count": packages.len(), "packages": to_json(packages)? }))
        }
        Command::Wifi(action) => wifi(&app, action),
        Command::Bluetooth(action) => bluetooth(&app, action),
        Command::Audio(action) => audio(&app, action),
        Command::DeviceState(action) => device_state(&app, action),
        Command::Screen(action) => screen(&app, action),
        Command::AirplaneMode(action) => {
            let argv: &[&str] = match action {
                AirplaneModeAction::Status => &["cmd", "connectivity", "airplane-mode"],
                AirplaneModeAction::Enable => &["cmd", "connectivity", "airplane-mode", "enable"],
                AirplaneModeAction::Disable => &["cmd", "connectivity", "airplane-mode", "disable"],
            };
            let out = app.ok(argv)?;
            let enabled = match action {
                AirplaneModeAction::Status => parsed(argv, parse::airplane_mode(&out))?,
                AirplaneModeAction::Enable => true,
                AirplaneModeAction::Disable => false,
            };
            Ok(json!({ "enabled": enabled }))
        }
        Command::Motion(MotionAction::CurrentMotion) => {
            let dump = app.read(&["dumpsys", "sensorservice"], parse::sensors)?;
            to_json(parse::motion(&dump))
        }
        Command::Motion(MotionAction::Orientation) => {
            to_json(app.read(&["dumpsys", "window", "displays"], parse::rotation)?)
        }
        Command::Environment(action) => {
            let dump = app.read(&["dumpsys", "sensorservice"], parse::sensors)?;
            match action {
                EnvironmentAction::AmbientConditions => to_json(parse::ambient(&dump)),
                EnvironmentAction::Proximity => to_json(parse::proximity(&dump)),
            }
        }
        Command::Camera(CameraAction::CameraInfo) => {
            let cameras = app.read(&["dumpsys", "media.camera"], parse::cameras)?;
            Ok(json!({ "count": cameras.len(), "cameras": to_json(cameras)? }))
        }
        Command::Camera(CameraAction::TakePhoto { filename }) => take_photo(&app, filename),
        Command::Media(action) => media(&app, action),
    }
}

fn network_status(app: &App<'_>) -> Outcome<Value> {
    let link = app.read(&["ip", "addr", "show", "wlan0"], parse::ip_addr)?;
    let routes = app.read(&["ip", "route"], parse::ip_route)?;
    let airplane = app.setting("global", "airplane_mode_on")?;
    let gateway = routes
        .iter()
        .find(|r| r.destination == "default")
        .and_then(|r| r.gateway.clone());
    Ok(json!({
        "wifi": to_json(link)?,
        "routes": to_json(routes)?,
        "default_gateway": gateway,
        "airplane_mode": airplane.as_deref() == Some("1"),
    }))
}

fn system_info(app: &App<'_>) -> Outcome<Value> {
    let props = app.read(&["getprop"], parse::getprop)?;
    let facts = parsed(&["getprop"], parse::device_props(&props))?;
    let memory = app.read(&["cat", "/proc/meminfo"], parse::meminfo).ok();
    let uptime = app
        .read(&["cat", "/proc/uptime"], parse::uptime_seconds)
        .ok();
    let mut out = to_json(facts)?;
    out["memory_total_kb"] = json!(memory.as_ref().map(|m| m.total_kb));
    out["memory_available_kb"] = json!(memory.and_then(|m| m.available_kb));
    out["uptime_s"] = json!(uptime);
    Ok(out)
}

/// The last known fix, as `location.current` returns it (and the `location`
/// event carries it).
pub(crate) fn current_fix(sim: &SimHandle, logged: bool) -> Outcome<Value> {
    let argv = ["dumpsys", "location"];
    let out = if logged {
        sim.execute("'dumpsys' 'location'")
    } else {
        sim.peek(&argv)
    };
    let text = out.stdout_text();
    if let Some(f) = parse::classify_device_error(&text, &out.stderr_text(), i32::from(out.exit)) {
        return Err(failure(f));
    }
    let fix = parsed(&argv, parse::location(&text))?.ok_or_else(|| {
        WireError::new(
            ErrorCode::NotFound,
            "the phone has no last known location (is location turned off?)",
        )
    })?;
    to_json(fix)
}

/// The battery as `battery.status` returns it (and the `battery` event
/// carries it), read without logging a device command.
pub(crate) fn battery_snapshot(sim: &SimHandle) -> Outcome<Value> {
    let argv = ["dumpsys", "battery"];
    let out = sim.peek(&argv);
    to_json(parsed(&argv, parse::battery(&out.stdout_text()))?)
}

fn location(app: &App<'_>, action: &LocationAction) -> Outcome<Value> {
    match action {
        LocationAction::Current => current_fix(app.sim, true),
        LocationAction::StartTracking { interval_s } => {
            let interval = interval_s.unwrap_or(DEFAULT_TRACKING_S);
            app.app.tracking.send_replace(Some(interval));
            Ok(json!({ "tracking": true, "interval_s": interval }))
        }
        LocationAction::StopTracking => {
            app.app.tracking.send_replace(None);
            Ok(json!({ "tracking": false }))
        }
    }
}

/// `pkg/.Main` for `.Main` or `Main`; a fully qualified class stays as it is.
fn component(package: &str, activity: &str) -> String {
    if activity.starts_with('.') || activity.contains('.') {
        format!("{package}/{activity}")
    } else {
        format!("{package}/.{activity}")
    }
}

fn launch(app: &App<'_>, package: &str, activity: Option<&str>) -> Outcome<Value> {
    let component = match activity {
        Some(activity) => component(package, activity),
        None => {
            let argv = [
                "cmd",
                "package",
                "resolve-activity",
                "--brief",
                "-c",
                "android.intent.category.LAUNCHER",
                package,
            ];
            app.read(&argv, parse::resolve_activity_brief)
                .map_err(|e| match e.code {
                    ErrorCode::NotFound => WireError::new(
                        ErrorCode::NotFound,
                        format!("package {package} is not installed or has no launcher activity"),
                    ),
                    _ => e,
                })?
        }
    };
    let started = app.read(&["am", "start", "-W", "-n", &component], parse::am_start)?;
    Ok(json!({
        "package": package,
        "component": component,
        "status": started.status,
        "launch_state": started.launch_state,
        "total_time_ms": started.total_time_ms,
    }))
}

fn wifi(app: &App<'_>, action: &WifiAction) -> Outcome<Value> {
    match action {
        WifiAction::Status => to_json(app.read(&["dumpsys", "wifi"], parse::wifi)?),
        WifiAction::Enable | WifiAction::Disable => {
            let enable = matches!(action, WifiAction::Enable);
            app.ok(&["svc", "wifi", if enable { "enable" } else { "disable" }])?;
            Ok(json!({ "enabled": enable }))
        }
        WifiAction::Scan => {
            app.ok(&["cmd", "wifi", "start-scan"])?;
            let networks = app.read(&["cmd", "wifi", "list-scan-results"], parse::wifi_scan)?;
            Ok(json!({ "networks": networks }))
        }
    }
}

fn bluetooth(app: &App<'_>, action: &BluetoothAction) -> Outcome<Value> {
    let dump = || app.read(&["dumpsys", "bluetooth_manager"], parse::bluetooth);
    match action {
        BluetoothAction::Status => {
            let bt = dump()?;
            Ok(
                json!({ "enabled": bt.enabled, "state": bt.state, "name": bt.name, "address": bt.address }),
            )
        }
        BluetoothAction::PairedDevices => {
            let bt = dump()?;
            let devices: Vec<Value> = bt
                .bonded
                .iter()
                .map(|d| json!({ "address": d.address, "name": d.name }))
                .collect();
            Ok(json!({ "devices": devices }))
        }
        BluetoothAction::Enable | BluetoothAction::Disable => {
            let enable = matches!(action, BluetoothAction::Enable);
            let verb = if enable { "enable" } else { "disable" };
            app.read(&["cmd", "bluetooth_manager", verb], parse::cmd_success)?;
            Ok(json!({ "enabled": enable }))
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

struct Volume {
    index: i64,
    min: i64,
    max: i64,
    muted: bool,
}

impl Volume {
    fn json(&self, stream: Stream) -> Value {
        json!({
            "stream": stream.as_str(),
            "level": percent(self.index, self.min, self.max),
            "index": self.index,
            "min": self.min,
            "max": self.max,
            "muted": self.muted,
        })
    }
}

fn volume(app: &App<'_>, stream: Stream) -> Outcome<Volume> {
    let v = app.read(&["dumpsys", "audio"], |out| {
        parse::audio_stream(out, stream.dumpsys_name())
    })?;
    Ok(Volume {
        index: v.index,
        min: v.min,
        max: v.max,
        muted: v.muted,
    })
}

fn set_index(app: &App<'_>, stream: Stream, index: i64) -> Outcome<()> {
    let (id, index) = (stream.android_id().to_string(), index.to_string());
    app.ok(&[
        "cmd",
        "media_session",
        "volume",
        "--stream",
        &id,
        "--set",
        &index,
    ])
    .map(drop)
}

fn audio(app: &App<'_>, action: &AudioAction) -> Outcome<Value> {
    match action {
        AudioAction::GetVolume { stream } => Ok(volume(app, *stream)?.json(*stream)),
        AudioAction::SetVolume { stream, level } => {
            let current = volume(app, *stream)?;
            set_index(app, *stream, index_for(*level, current.min, current.max))?;
            Ok(volume(app, *stream)?.json(*stream))
        }
        AudioAction::Mute { stream } | AudioAction::Unmute { stream } => {
            let stream = stream.unwrap_or(Stream::Music);
            let mute = matches!(action, AudioAction::Mute { .. });
            let current = volume(app, stream)?;
            let id = stream.android_id();
            // The shell volume tool has no mute: like the ADB transport,
            // mute sets the minimum and remembers the level for unmute.
            let target = {
                let mut saved = app.app.muted();
                if mute {
                    if current.index > current.min {
                        saved.insert(id, current.index);
                    }
                    Some(current.min)
                } else {
                    match saved.remove(&id) {
                        Some(level) => Some(level),
                        None if current.index <= current.min => {
                            Some(index_for(50, current.min, current.max))
                        }
                        None => None,
                    }
                }
            };
            if let Some(target) = target.filter(|t| *t != current.index) {
                set_index(app, stream, target)?;
            }
            let after = volume(app, stream)?;
            Ok(json!({
                "stream": stream.as_str(),
                "muted": mute,
                "level": percent(after.index, after.min, after.max),
            }))
        }
        AudioAction::RingerMode { mode } => {
            let arg = match mode {
                RingerMode::Normal => "NORMAL",
                RingerMode::Vibrate => "VIBRATE",
                RingerMode::Silent => "SILENT",
            };
            app.ok(&["cmd", "audio", "set-ringer-mode", arg])?;
            Ok(json!({ "mode": mode.as_str() }))
        }
    }
}

fn device_state(app: &App<'_>, action: &DeviceStateAction) -> Outcome<Value> {
    match action {
        DeviceStateAction::Status => {
            let power = app.read(&["dumpsys", "power"], parse::power)?;
            let low_power = app.setting("global", "low_power")?;
            let power_save = low_power.map(|v| v == "1").or(power.battery_saver);
            Ok(json!({
                "screen_on": power.screen_on,
                "wakefulness": power.wakefulness,
                "plugged": power.plugged,
                "power_save": power_save,
                "battery_level": power.battery_level,
            }))
        }
        DeviceStateAction::ScreenOn => {
            app.keyevent("KEYCODE_WAKEUP")?;
            Ok(json!({ "screen_on": true }))
        }
        DeviceStateAction::ScreenOff => {
            app.keyevent("KEYCODE_SLEEP")?;
            Ok(json!({ "screen_on": false }))
        }
        DeviceStateAction::PowerSave { enabled } => {
            app.ok(&["cmd", "power", "set-mode", if *enabled { "1" } else { "0" }])?;
            Ok(json!({ "power_save": enabled }))
        }
    }
}

fn screen(app: &App<'_>, action: &ScreenAction) -> Outcome<Value> {
    match action {
        ScreenAction::Status => {
            let int = |v: Option<String>| v.and_then(|v| v.parse::<i64>().ok());
            let brightness = int(app.setting("system", "screen_brightness")?);
            let mode = app.setting("system", "screen_brightness_mode")?;
            let timeout = int(app.setting("system", "screen_off_timeout")?);
            let power = app.read(&["dumpsys", "power"], parse::power)?;
            Ok(json!({
                "brightness": brightness,
                "auto_brightness": mode.as_deref() == Some("1"),
                "timeout_ms": timeout,
                "screen_on": power.screen_on,
            }))
        }
        ScreenAction::SetBrightness { level } => {
            app.put_setting("screen_brightness", &level.to_string())?;
            Ok(json!({ "brightness": level }))
        }
        ScreenAction::AutoBrightness { enabled } => {
            app.put_setting("screen_brightness_mode", if *enabled { "1" } else { "0" })?;
            Ok(json!({ "auto_brightness": enabled }))
        }
        ScreenAction::SetTimeout { ms } => {
            app.put_setting("screen_off_timeout", &ms.to_string())?;
            Ok(json!({ "timeout_ms": ms }))
        }
        ScreenAction::Wake => {
            app.keyevent("KEYCODE_WAKEUP")?;
            Ok(json!({ "screen_on": true }))
        }
    }
}

fn media(app: &App<'_>, action: &MediaAction) -> Outcome<Value> {
    let key = match action {
        MediaAction::Status => {
            let sessions = app.read(&["dumpsys", "media_session"], parse::media_sessions)?;
            let playing = sessions.iter().any(|s| s.state == "playing");
            return Ok(json!({ "sessions": to_json(sessions)?, "playing": playing }));
        }
        MediaAction::PlayUrl { url } => {
            let argv = [
                "am",
                "start",
                "-W",
                "-a",
                "android.intent.action.VIEW",
                "-d",
                url.as_str(),
            ];
            let started = app.read(&argv, parse::am_start)?;
            return Ok(json!({ "url": url, "status": started.status }));
        }
        MediaAction::Play => "play",
        MediaAction::Pause => "pause",
        MediaAction::Next => "next",
        MediaAction::Previous => "previous",
        MediaAction::Stop => "stop",
    };
    app.ok(&["cmd", "media_session", "dispatch", key])?;
    Ok(json!({ "dispatched": key }))
}

/// Stores a "photo" under `/sdcard/DCIM/Camera/`: the path is remembered
/// (and reported by the control port), no file is written.
fn take_photo(app: &App<'_>, filename: &Option<String>) -> Outcome<Value> {
    if app.sim.state().cameras.is_empty() {
        return Err(WireError::new(
            ErrorCode::UnsupportedAction,
            "this phone has no camera",
        ));
    }
    let name = match filename {
        // The catalogue's pattern already limits the name to a safe file name.
        Some(name) => name.clone(),
        None => {
            let c = clock::civil(clock::now_ms());
            format!(
                "IMG_{:04}{:02}{:02}_{:02}{:02}{:02}{:03}.jpg",
                c.year, c.month, c.day, c.hour, c.minute, c.second, c.milli
            )
        }
    };
    let path = format!("/sdcard/DCIM/Camera/{name}");
    app.app.photos().push(path.clone());
    Ok(json!({ "path": path }))
}

/// Every action's result over a default phone, by `service.action`, for the
/// tests; kept here so the list of examples stays next to the code.
#[cfg(test)]
pub(crate) fn examples() -> std::collections::BTreeMap<String, Command> {
    use droidwarden_services::Catalogue;
    let mut out = std::collections::BTreeMap::new();
    for service in Catalogue::get().services() {
        for action in &service.actions {
            let command = Catalogue::get()
                .parse(service.id, action.name, &action.example)
                .expect("catalogue examples are valid");
            out.insert(format!("{}.{}", service.id, action.name), command);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::{Sim, SimConfig};
    use droidwarden_services::Catalogue;

    async fn sim() -> (SimHandle, Companion) {
        let sim = Sim::start(SimConfig::default()).await.expect("start");
        (sim, Companion::for_tests())
    }

    #[tokio::test]
    async fn every_catalogue_action_answers_in_its_documented_shape() {
        let (sim, app) = sim().await;
        for (name, command) in examples() {
            let (service, action) = name.split_once('.').expect("service.action");
            let (_, spec) = Catalogue::get()
                .action(service, action)
                .expect("in catalogue");
            let result = perform(&sim, &app, &command)
                .unwrap_or_else(|e| panic!("{name} failed on a default phone: {e}"));
            if let Err(v) = spec.result.validate(&result) {
                panic!(
                    "{name}: result {result} does not match at {:?}: {}",
                    v.path, v.reason
                );
            }
        }
        sim.shutdown().await;
    }

    #[tokio::test]
    async fn companion_and_adb_views_of_the_state_agree() {
        let (sim, app) = sim().await;
        let parse = |service: &str, action: &str, params: Value| {
            Catalogue::get()
                .parse(service, action, &params)
                .expect("valid")
        };
        let set = parse(
            "audio_automation",
            "set_volume",
            json!({"stream": "music", "level": 40}),
        );
        let result = perform(&sim, &app, &set).expect("set_volume");
        // The ADB side sees the same change, through the same command.
        let music = sim.state().audio.volumes.music;
        assert_eq!(i64::from(music.index), result["index"].as_i64().unwrap());
        assert_eq!(result["level"], 40);
        assert!(sim.command_log().iter().any(|e| e.argv
            == [
                "cmd",
                "media_session",
                "volume",
                "--stream",
                "3",
                "--set",
                &music.index.to_string()
            ]));

        sim.update_state(|s| s.battery.level = 12);
        let battery = perform(&sim, &app, &parse("battery", "status", json!({}))).unwrap();
        assert_eq!(battery["level_percent"], 12);

        let muted = perform(&sim, &app, &parse("audio_automation", "mute", json!({}))).unwrap();
        assert_eq!(muted["level"], 0);
        let unmuted = perform(&sim, &app, &parse("audio_automation", "unmute", json!({}))).unwrap();
        assert_eq!(unmuted["level"], 40, "unmute restores the level mute saved");
        sim.shutdown().await;
    }

    #[tokio::test]
    async fn phone_failures_become_wire_errors() {
        let (sim, app) = sim().await;
        let stop = Catalogue::get()
            .parse(
                "app_launcher",
                "stop",
                &json!({"package": "com.not.installed"}),
            )
            .unwrap();
        assert_eq!(
            perform(&sim, &app, &stop).unwrap_err().code,
            ErrorCode::NotFound
        );
        let launch = Catalogue::get()
            .parse(
                "app_launcher",
                "launch",
                &json!({"package": "com.not.installed"}),
            )
            .unwrap();
        assert_eq!(
            perform(&sim, &app, &launch).unwrap_err().code,
            ErrorCode::NotFound
        );
        sim.update_state(|s| s.cameras.clear());
        let photo = Catalogue::get()
            .parse("camera_control", "take_photo", &json!({}))
            .unwrap();
        assert_eq!(
            perform(&sim, &app, &photo).unwrap_err().code,
            ErrorCode::UnsupportedAction
        );
        sim.shutdown().await;
    }

    #[tokio::test]
    async fn tracking_and_photos_are_app_state() {
        let (sim, app) = sim().await;
        let start = Catalogue::get()
            .parse("location", "start_tracking", &json!({"interval_s": 15}))
            .unwrap();
        assert_eq!(
            perform(&sim, &app, &start).unwrap(),
            json!({"tracking": true, "interval_s": 15})
        );
        assert_eq!(*app.tracking.borrow(), Some(15));
        let stop = Catalogue::get()
            .parse("location", "stop_tracking", &Value::Null)
            .unwrap();
        assert_eq!(
            perform(&sim, &app, &stop).unwrap(),
            json!({"tracking": false})
        );
        assert_eq!(*app.tracking.borrow(), None);

        let photo = Catalogue::get()
            .parse("camera_control", "take_photo", &json!({}))
            .unwrap();
        let path = perform(&sim, &app, &photo).unwrap()["path"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(
            path.starts_with("/sdcard/DCIM/Camera/IMG_") && path.ends_with(".jpg"),
            "{path}"
        );
        assert_eq!(app.photos().as_slice(), [path]);
        sim.shutdown().await;
    }
}
