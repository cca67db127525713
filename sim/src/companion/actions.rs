//! What the emulated companion app does for each catalogue action.
//!
//! The app works on the same phone state as the ADB side and answers with
//! the very code the ADB transport uses: `droidwarden_bridge::adb::actions`
//! runs over a [`Shell`] whose commands go to `SimHandle::execute` in-process
//! (so they appear in the command log). An ADB call and a companion call on
//! one phone therefore agree by construction. The actions only the app can
//! do (tracking, photos) keep their state in [`Companion`].
//!
//! A real app would use Android APIs instead of shell commands; what matters
//! to the daemon is the result shape, which the tests check against the
//! catalogue for every action.

use droidwarden_bridge::BridgeError;
use droidwarden_bridge::adb::actions::{self as adb_actions, Shell};
use droidwarden_bridge::adb::{ShellOutput as AdbOutput, parse, quote};
use droidwarden_bridge::device::BoxFuture;
use droidwarden_services::{
    AlertsAction, CameraAction, CameraPhoto, ClipboardSet, ClipboardText, Command, ErrorCode,
    FIND_DEFAULT_S, FindingPhone, LocationAction, NotificationDismissed, NotificationOpened,
    NotificationsAction, Record, Spoken, TorchState, TrackingStarted, TrackingStopped,
    UiControlAction, WireError,
};
use serde_json::Value;
use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};

use super::Companion;
use crate::clock;
use crate::sim::SimHandle;

/// `start_tracking` without an interval: once a minute.
const DEFAULT_TRACKING_S: u32 = 60;

type Outcome<T> = Result<T, WireError>;

/// The app's shell: device commands run in-process on the sim.
struct AppShell<'a> {
    sim: &'a SimHandle,
    app: &'a Companion,
}

impl Shell for AppShell<'_> {
    fn device_name(&self) -> &str {
        &self.app.settings.id
    }

    fn run<'b>(&'b self, argv: &'b [&'b str]) -> BoxFuture<'b, Result<AdbOutput, BridgeError>> {
        let line: Vec<String> = argv.iter().map(|a| quote(a)).collect();
        let out = self.sim.execute(&line.join(" "));
        Box::pin(std::future::ready(Ok(AdbOutput {
            stdout: out.stdout_text().into_owned(),
            stderr: out.stderr_text().into_owned(),
            exit: i32::from(out.exit),
        })))
    }

    fn muted_levels(&self) -> &Mutex<HashMap<u8, i64>> {
        &self.app.muted
    }

    fn run_binary<'b>(
        &'b self,
        argv: &'b [&'b str],
    ) -> BoxFuture<'b, Result<adb_actions::BinaryOutput, BridgeError>> {
        let line: Vec<String> = argv.iter().map(|a| quote(a)).collect();
        let out = self.sim.execute(&line.join(" "));
        let stderr = out.stderr_text().into_owned();
        Box::pin(std::future::ready(Ok(adb_actions::BinaryOutput {
            stdout: out.stdout,
            stderr,
            exit: i32::from(out.exit),
        })))
    }

    fn ui_snapshot(&self) -> &Mutex<Option<adb_actions::UiSnapshot>> {
        &self.app.ui_tree
    }

    /// The app writes the file itself (a real app: `FileOutputStream` in
    /// shared storage). Files of the daemon's machine never reach it:
    /// [`Shell::host_files`] stays `None`, so `host_path` is refused.
    fn push<'b>(
        &'b self,
        file: adb_actions::PushFile<'b>,
    ) -> BoxFuture<'b, Result<adb_actions::Pushed, BridgeError>> {
        Box::pin(async move {
            use tokio::io::AsyncReadExt as _;
            let mut bytes = Vec::new();
            let limit = file.max.saturating_add(1);
            (&mut *file.data)
                .take(limit)
                .read_to_end(&mut bytes)
                .await
                .map_err(|e| BridgeError::Internal(e.to_string()))?;
            if bytes.len() as u64 > file.max {
                return Err(BridgeError::Refused(WireError::new(
                    ErrorCode::Denied,
                    format!("the content is over {} bytes", file.max),
                )));
            }
            let len = bytes.len() as u64;
            match self.sim.write_file(file.remote, bytes, file.replace) {
                Ok(Ok(replaced)) => Ok(adb_actions::Pushed::Written {
                    bytes: len,
                    replaced,
                }),
                Ok(Err(is_dir)) => Ok(adb_actions::Pushed::Exists { is_dir }),
                Err(why) => Err(BridgeError::Device {
                    message: format!("{}: couldn't create file: {why}", file.remote),
                    exit: None,
                }),
            }
        })
    }
}

/// Runs a future that cannot wait: every await in the bridge's actions is on
/// [`AppShell::run`], which answers synchronously, so the first poll
/// finishes it. This keeps the request path synchronous like the rest of
/// the sim's shell.
fn finish_now<F: Future>(future: F) -> Option<F::Output> {
    let mut future = std::pin::pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(output) => Some(output),
        Poll::Pending => None,
    }
}

/// Performs `command` on the phone behind `sim` as the companion app.
pub(crate) fn perform(sim: &SimHandle, app: &Companion, command: &Command) -> Outcome<Value> {
    match command {
        Command::Location(LocationAction::StartTracking { interval_s }) => {
            let interval = interval_s.unwrap_or(DEFAULT_TRACKING_S);
            app.tracking.send_replace(Some(interval));
            answer(TrackingStarted {
                tracking: true,
                interval_s: Some(interval),
            })
        }
        Command::Location(LocationAction::StopTracking) => {
            app.tracking.send_replace(None);
            answer(TrackingStopped { tracking: false })
        }
        Command::Camera(CameraAction::TakePhoto { filename }) => take_photo(sim, app, filename),
        Command::Notifications(NotificationsAction::Dismiss { notification_key }) => {
            take_notification(sim, notification_key)?;
            answer(NotificationDismissed {
                key: notification_key.clone(),
                method: "dismissed".to_owned(),
            })
        }
        Command::Notifications(NotificationsAction::Open { notification_key }) => {
            open_notification(sim, notification_key)
        }
        // The app has Android's ClipboardManager; no shell is involved.
        Command::UiControl(UiControlAction::GetClipboard) => answer(ClipboardText {
            text: sim.read_state(|st| st.ui.clipboard.clone()),
            via: Some("companion".to_owned()),
        }),
        Command::UiControl(UiControlAction::SetClipboard { text }) => {
            sim.update_state(|st| st.ui.clipboard = Some(text.clone()));
            answer(ClipboardSet {
                length: text.chars().count() as u64,
                via: Some("companion".to_owned()),
            })
        }
        // The app has CameraManager and TextToSpeech: the torch and speech
        // are app state (vibration goes through the shell, as over ADB).
        Command::Alerts(AlertsAction::Torch { on }) => {
            sim.update_state(|st| st.alerts.torch = *on);
            answer(TorchState { torch: *on })
        }
        Command::Alerts(AlertsAction::Speak { text }) => {
            sim.update_state(|st| st.alerts.spoken.push(text.clone()));
            answer(Spoken {
                length: text.chars().count() as u64,
            })
        }
        Command::Alerts(AlertsAction::FindMyPhone { seconds }) => find_my_phone(sim, *seconds),
        other => {
            let shell = AppShell { sim, app };
            finish_now(adb_actions::execute(&shell, other))
                .unwrap_or_else(|| {
                    Err(BridgeError::Internal(
                        "the action waited on a synchronous shell".into(),
                    ))
                })
                .map_err(|e| e.to_wire())
        }
    }
}

/// Cancels the notification `key` (as a notification listener's
/// `cancelNotification` does): its package, or `not_found`.
fn take_notification(sim: &SimHandle, key: &str) -> Outcome<String> {
    sim.update_state(|st| {
        let at = st
            .content
            .notifications
            .iter()
            .position(|n| n.key() == key)?;
        Some(st.content.notifications.remove(at).package)
    })
    .ok_or_else(|| {
        WireError::new(
            ErrorCode::NotFound,
            format!("no notification with the key {key} is posted"),
        )
    })
}

/// Sends the notification's content intent: here, as an app's usual one
/// does, its launcher activity comes to the front, and the notification
/// (auto-cancel) goes.
fn open_notification(sim: &SimHandle, key: &str) -> Outcome<Value> {
    let package = take_notification(sim, key)?;
    sim.update_state(|st| {
        let activity = st
            .packages
            .iter()
            .find(|p| p.package == package)
            .and_then(|p| p.launcher_activity.clone());
        if let Some(activity) = activity {
            st.foreground = format!("{package}/{activity}");
        }
    });
    answer(NotificationOpened {
        key: key.to_owned(),
    })
}

/// The last known fix, as `location.current` returns it (and the `location`
/// event carries it). Unlogged reads leave the command log alone.
pub(crate) fn current_fix(sim: &SimHandle, logged: bool) -> Outcome<Value> {
    let argv = ["dumpsys", "location"];
    let out = if logged {
        sim.execute("dumpsys location")
    } else {
        sim.peek(&argv)
    };
    let text = out.stdout_text();
    if let Some(f) = parse::classify_device_error(&text, &out.stderr_text(), i32::from(out.exit)) {
        return Err(WireError::new(ErrorCode::DeviceError, f.message));
    }
    let fix = adb_actions::location::location(&text)
        .map_err(|e| WireError::new(ErrorCode::DeviceError, e.to_string()))?
        .ok_or_else(|| {
            WireError::new(
                ErrorCode::NotFound,
                "the phone has no last known location (is location turned off?)",
            )
        })?;
    serde_json::to_value(fix).map_err(|e| WireError::new(ErrorCode::Internal, e.to_string()))
}

/// The battery as `battery.status` returns it (and the `battery` event
/// carries it), read without logging a device command.
pub(crate) fn battery_snapshot(sim: &SimHandle) -> Outcome<Value> {
    let out = sim.peek(&["dumpsys", "battery"]);
    let battery = adb_actions::battery::battery(&out.stdout_text())
        .map_err(|e| WireError::new(ErrorCode::DeviceError, e.to_string()))?;
    serde_json::to_value(battery).map_err(|e| WireError::new(ErrorCode::Internal, e.to_string()))
}

/// Stores a "photo" under `/sdcard/DCIM/Camera/`: the path is remembered
/// (and reported by the control port), no file is written.
fn take_photo(sim: &SimHandle, app: &Companion, filename: &Option<String>) -> Outcome<Value> {
    if sim.state().cameras.is_empty() {
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
    app.photos().push(path.clone());
    answer(CameraPhoto { path })
}

/// Rings to be found: the ring's end is recorded (`alerts.find_until_ms`)
/// with its vibration; the emulation plays no sound and leaves the torch
/// as it was, so nothing needs restoring when the time is up. While a ring
/// is on, another is `busy`, as in the Termux companion.
fn find_my_phone(sim: &SimHandle, seconds: Option<u8>) -> Outcome<Value> {
    let seconds = seconds.unwrap_or(FIND_DEFAULT_S);
    let now = clock::now_ms();
    let until_ms = now + u64::from(seconds) * 1_000;
    sim.update_state(|st| {
        if let Some(until) = st.alerts.find_until_ms.filter(|until| *until > now) {
            return Err(WireError::new(
                ErrorCode::Busy,
                format!(
                    "the phone is already ringing to be found, for {} s more",
                    (until - now).div_ceil(1_000)
                ),
            ));
        }
        st.alerts.find_until_ms = Some(until_ms);
        st.alerts.vibrations.push(u32::from(seconds) * 1_000);
        Ok(())
    })?;
    answer(FindingPhone { seconds, until_ms })
}

/// An action's result: a record of the catalogue, so its fields are the
/// ones the catalogue documents.
fn answer(result: impl Record) -> Outcome<Value> {
    serde_json::to_value(result).map_err(|e| WireError::new(ErrorCode::Internal, e.to_string()))
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
    use serde_json::json;

    /// The typed command of `service.action` with `params`.
    fn command(service: &str, action: &str, params: Value) -> Command {
        Catalogue::get()
            .parse(service, action, &params)
            .expect("a valid call")
    }

    async fn sim() -> (SimHandle, Companion) {
        let sim = Sim::start(SimConfig::default()).await.expect("start");
        (sim, Companion::for_tests())
    }

    #[tokio::test]
    async fn every_catalogue_action_answers_in_its_documented_shape() {
        // A default phone per action, so that no example's change takes
        // another's ground away (data cleared takes its notifications, the
        // power key puts the screen to sleep); app_manager's examples build
        // on each other (install, then uninstall) and share one.
        let mut phone: Option<(String, SimHandle, Companion)> = None;
        for (name, command) in examples() {
            let (service, _) = name.split_once('.').expect("service.action");
            let ground = if service == "app_manager" {
                service
            } else {
                name.as_str()
            };
            if phone.as_ref().is_none_or(|(s, _, _)| s != ground) {
                if let Some((_, sim, _)) = phone.take() {
                    sim.shutdown().await;
                }
                let (sim, app) = sim().await;
                phone = Some((ground.to_owned(), sim, app));
            }
            let Some((_, sim, app)) = phone.as_ref() else {
                unreachable!("a phone was just started");
            };
            let (service, action) = name.split_once('.').expect("service.action");
            let (_, spec) = Catalogue::get()
                .action(service, action)
                .expect("in catalogue");
            let result = perform(sim, app, &command)
                .unwrap_or_else(|e| panic!("{name} failed on a default phone: {e}"));
            if let Err(v) = spec.result.validate(&result) {
                panic!(
                    "{name}: result {result} does not match at {:?}: {}",
                    v.path, v.reason
                );
            }
        }
        if let Some((_, sim, _)) = phone {
            sim.shutdown().await;
        }
    }

    #[tokio::test]
    async fn companion_and_adb_views_of_the_state_agree() {
        let (sim, app) = sim().await;
        let set = command(
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
        let battery = perform(&sim, &app, &command("battery", "status", json!({}))).unwrap();
        assert_eq!(battery["level_percent"], 12);

        let muted = perform(&sim, &app, &command("audio_automation", "mute", json!({}))).unwrap();
        assert_eq!(muted["level"], 0);
        let unmuted = perform(
            &sim,
            &app,
            &command("audio_automation", "unmute", json!({})),
        )
        .unwrap();
        assert_eq!(unmuted["level"], 40, "unmute restores the level mute saved");
        sim.shutdown().await;
    }

    #[tokio::test]
    async fn phone_failures_become_wire_errors() {
        let (sim, app) = sim().await;
        let stop = command(
            "app_launcher",
            "stop",
            json!({"package": "com.not.installed"}),
        );
        assert_eq!(
            perform(&sim, &app, &stop).unwrap_err().code,
            ErrorCode::NotFound
        );
        let launch = command(
            "app_launcher",
            "launch",
            json!({"package": "com.not.installed"}),
        );
        assert_eq!(
            perform(&sim, &app, &launch).unwrap_err().code,
            ErrorCode::NotFound
        );
        sim.update_state(|s| s.cameras.clear());
        let photo = command("camera_control", "take_photo", json!({}));
        assert_eq!(
            perform(&sim, &app, &photo).unwrap_err().code,
            ErrorCode::UnsupportedAction
        );
        sim.shutdown().await;
    }

    #[tokio::test]
    async fn alerts_change_the_phone_and_vibration_goes_through_the_shell() {
        let (sim, app) = sim().await;
        let torch = command("alerts", "torch", json!({"on": true}));
        assert_eq!(perform(&sim, &app, &torch).unwrap(), json!({"torch": true}));
        let speak = command(
            "alerts",
            "speak",
            json!({"text": "Dinner; $(id) \"is\" ready"}),
        );
        assert_eq!(perform(&sim, &app, &speak).unwrap(), json!({"length": 24}));
        let vibrate = command("alerts", "vibrate", json!({"ms": 700}));
        assert_eq!(perform(&sim, &app, &vibrate).unwrap(), json!({"ms": 700}));
        let find = command("alerts", "find_my_phone", json!({}));
        let found = perform(&sim, &app, &find).unwrap();
        assert_eq!(found["seconds"], 30);
        let alerts = sim.state().alerts;
        assert!(alerts.torch);
        assert_eq!(alerts.spoken, ["Dinner; $(id) \"is\" ready"]);
        assert_eq!(alerts.vibrations, [700, 30_000]);
        assert_eq!(alerts.find_until_ms, found["until_ms"].as_u64());
        let again = perform(&sim, &app, &find).unwrap_err();
        assert_eq!(again.code, ErrorCode::Busy, "{again:?}");
        assert!(
            sim.command_log()
                .iter()
                .any(|e| e.argv == ["cmd", "vibrator_manager", "synced", "-f", "oneshot", "700"])
        );
        sim.shutdown().await;
    }

    #[tokio::test]
    async fn tracking_and_photos_are_app_state() {
        let (sim, app) = sim().await;
        let start = command("location", "start_tracking", json!({"interval_s": 15}));
        assert_eq!(
            perform(&sim, &app, &start).unwrap(),
            json!({"tracking": true, "interval_s": 15})
        );
        assert_eq!(*app.tracking.borrow(), Some(15));
        let stop = command("location", "stop_tracking", Value::Null);
        assert_eq!(
            perform(&sim, &app, &stop).unwrap(),
            json!({"tracking": false})
        );
        assert_eq!(*app.tracking.borrow(), None);

        let photo = command("camera_control", "take_photo", json!({}));
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
