//! The catalogue actions this companion offers, each performed by a
//! Termux:API command, and the parsers of those commands' JSON.
//!
//! Every command line is an argv built from typed, validated parameters;
//! nothing passes through a shell, so a parameter is always one argument.
//! The parsers are pure and tested against real outputs kept in
//! `fixtures/termux/` (see `SOURCES.md` there).

use crate::exec::{self, ExecError, Output};
use droidwarden_services::{
    AlertsAction, AudioAction, AudioVolume, BatteryAction, BatteryStatus, CallPlaced, CameraAction,
    CameraPhoto, ClipboardSet, ClipboardText, Command, ErrorCode, FIND_DEFAULT_S, FindingPhone,
    IntentsAction, LocationAction, LocationFix, Notification, NotificationList,
    NotificationsAction, ScreenAction, ScreenBrightness, SmsComposed, Spoken, Stream,
    TelephonyAction, TorchState, UiControlAction, UrlOpened, VIBRATE_DEFAULT_MS, Vibrated,
    WifiAction, WifiStatus, WifiToggle, WireError,
};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Every action this slice offers, as `service.action`, with the command
/// behind it (printed by `droidwarden-companion actions`).
pub const OFFERED: &[(&str, &str)] = &[
    ("battery.status", "termux-battery-status"),
    ("audio_automation.get_volume", "termux-volume"),
    ("audio_automation.set_volume", "termux-volume STREAM INDEX"),
    ("screen_control.set_brightness", "termux-brightness LEVEL"),
    ("notifications.list", "termux-notification-list"),
    ("intents.open_url", "termux-open-url URL"),
    ("wifi_automation.status", "termux-wifi-connectioninfo"),
    (
        "wifi_automation.enable / disable",
        "termux-wifi-enable true|false (Android 9 and older)",
    ),
    ("location.current", "termux-location -p network -r last"),
    (
        "camera_control.take_photo",
        "termux-camera-photo -c 0 PHOTO_DIR/FILE",
    ),
    (
        "telephony.sms_send",
        "termux-sms-send -n NUMBER (the text on standard input)",
    ),
    ("telephony.dial", "termux-telephony-call NUMBER"),
    ("ui_control.get_clipboard", "termux-clipboard-get"),
    (
        "ui_control.set_clipboard",
        "termux-clipboard-set (the text on standard input)",
    ),
    ("alerts.torch", "termux-torch on|off"),
    (
        "alerts.speak",
        "termux-tts-speak (the text on standard input)",
    ),
    ("alerts.vibrate", "termux-vibrate -f -d MS"),
    (
        "alerts.find_my_phone",
        "termux-volume alarm MAX, termux-torch on, termux-vibrate -f -d 1000 every 2 s, termux-tts-speak -s ALARM; then the torch off and the volume back",
    ),
];

/// Every Termux:API command this companion may run, with the Android
/// permission Termux:API needs for it (checked by `droidwarden-companion
/// check`).
pub const COMMANDS: &[(&str, &str)] = &[
    ("termux-battery-status", "none"),
    ("termux-volume", "none"),
    ("termux-brightness", "Modify system settings"),
    ("termux-notification-list", "Notification access"),
    ("termux-open-url", "none"),
    (
        "termux-wifi-connectioninfo",
        "Location (for the network's name)",
    ),
    ("termux-wifi-enable", "none (Android 9 and older only)"),
    ("termux-location", "Location"),
    ("termux-camera-photo", "Camera"),
    ("termux-sms-send", "SMS"),
    ("termux-telephony-call", "Phone"),
    ("termux-clipboard-get", "none"),
    ("termux-clipboard-set", "none"),
    ("termux-torch", "none"),
    ("termux-tts-speak", "none (a text-to-speech engine)"),
    ("termux-vibrate", "none"),
    ("termux-wake-lock", "none"),
    ("termux-wake-unlock", "none"),
];

/// The first Android API level on which apps may no longer switch Wi-Fi
/// (Android 10, API 29: `WifiManager.setWifiEnabled` fails for apps
/// targeting it).
pub const WIFI_TOGGLE_REMOVED_API: u32 = 29;

/// An offered action with its parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Offered {
    /// `battery.status`.
    Battery,
    /// `audio_automation.get_volume`: the catalogue's stream and Termux's name of it.
    GetVolume(Stream, &'static str),
    /// `audio_automation.set_volume`: stream, Termux's name, level in percent.
    SetVolume(Stream, &'static str, u8),
    /// `screen_control.set_brightness`: 0–255.
    SetBrightness(u8),
    /// `notifications.list`, optionally of one package.
    Notifications(Option<String>),
    /// `intents.open_url` (its scheme already allowed by the policy).
    OpenUrl(String),
    /// `wifi_automation.status`.
    WifiStatus,
    /// `wifi_automation.enable` (`true`) or `disable` (`false`).
    WifiToggle(bool),
    /// `location.current`.
    Location,
    /// `camera_control.take_photo`, with its file name if given.
    Photo(Option<String>),
    /// `telephony.sms_send` (the number already allowed by the policy).
    Sms {
        /// The recipient.
        number: String,
        /// The message (never logged).
        text: String,
    },
    /// `telephony.dial` (the number already allowed by the policy).
    Dial(String),
    /// `ui_control.get_clipboard`.
    GetClipboard,
    /// `ui_control.set_clipboard` (the text is never logged).
    SetClipboard(String),
    /// `alerts.torch`: on (`true`) or off.
    Torch(bool),
    /// `alerts.speak` (the text is never logged).
    Speak(String),
    /// `alerts.vibrate`, in milliseconds.
    Vibrate(u32),
    /// `alerts.find_my_phone`, for this many seconds.
    FindMyPhone(u8),
}

/// Termux's name of a stream (`termux-volume` knows alarm, music,
/// notification, ring, system and call); `None` for the others.
pub fn termux_stream(stream: Stream) -> Option<&'static str> {
    match stream {
        Stream::Music => Some("music"),
        Stream::Ring => Some("ring"),
        Stream::Alarm => Some("alarm"),
        Stream::Notification => Some("notification"),
        Stream::VoiceCall => Some("call"),
        Stream::System => Some("system"),
        Stream::Dtmf | Stream::Accessibility => None,
    }
}

fn unsupported(message: impl Into<String>) -> WireError {
    WireError::new(ErrorCode::UnsupportedAction, message)
}

/// What performs `command`, or `unsupported_action` saying why not.
///
/// # Errors
/// `unsupported_action` for an action this companion does not offer.
pub fn offered(command: &Command) -> Result<Offered, WireError> {
    let name = format!("{}.{}", command.service_id(), command.action_name());
    let volume_stream = |stream: Stream| {
        termux_stream(stream).ok_or_else(|| {
            unsupported(format!(
                "termux-volume has no {} stream (it knows alarm, music, notification, ring, system and call)",
                stream.as_str()
            ))
        })
    };
    Ok(match command {
        Command::Battery(BatteryAction::Status) => Offered::Battery,
        Command::Audio(AudioAction::GetVolume { stream }) => {
            Offered::GetVolume(*stream, volume_stream(*stream)?)
        }
        Command::Audio(AudioAction::SetVolume { stream, level }) => {
            Offered::SetVolume(*stream, volume_stream(*stream)?, *level)
        }
        Command::Screen(ScreenAction::SetBrightness { level }) => Offered::SetBrightness(*level),
        Command::Notifications(NotificationsAction::List { package }) => {
            Offered::Notifications(package.as_ref().map(|p| p.as_str().to_owned()))
        }
        Command::Intents(IntentsAction::OpenUrl { url }) => Offered::OpenUrl(url.clone()),
        Command::Wifi(WifiAction::Status) => Offered::WifiStatus,
        Command::Wifi(WifiAction::Enable) => Offered::WifiToggle(true),
        Command::Wifi(WifiAction::Disable) => Offered::WifiToggle(false),
        Command::Location(LocationAction::Current) => Offered::Location,
        Command::Camera(CameraAction::TakePhoto { filename }) => Offered::Photo(filename.clone()),
        Command::Telephony(TelephonyAction::SmsSend { number, text }) => Offered::Sms {
            number: number.clone(),
            text: text.clone(),
        },
        Command::Telephony(TelephonyAction::Dial { number }) => Offered::Dial(number.clone()),
        Command::UiControl(UiControlAction::GetClipboard) => Offered::GetClipboard,
        Command::UiControl(UiControlAction::SetClipboard { text }) => {
            Offered::SetClipboard(text.clone())
        }
        Command::Alerts(AlertsAction::Torch { on }) => Offered::Torch(*on),
        Command::Alerts(AlertsAction::Speak { text }) => Offered::Speak(text.clone()),
        Command::Alerts(AlertsAction::Vibrate { ms }) => {
            Offered::Vibrate(ms.unwrap_or(VIBRATE_DEFAULT_MS))
        }
        Command::Alerts(AlertsAction::FindMyPhone { seconds }) => {
            Offered::FindMyPhone(seconds.unwrap_or(FIND_DEFAULT_S))
        }
        Command::Audio(AudioAction::RingerMode { .. }) => {
            return Err(unsupported(
                "Termux:API has no command for the ringer mode (termux-volume sets volumes only); \
                 set a stream's volume with audio_automation.set_volume instead",
            ));
        }
        Command::Location(LocationAction::StartTracking { .. } | LocationAction::StopTracking) => {
            return Err(unsupported(
                "droidwarden-companion for Termux does not track the position yet; \
                 read it with location.current",
            ));
        }
        _ => {
            return Err(unsupported(format!(
                "droidwarden-companion for Termux does not offer {name} yet; it offers {}",
                OFFERED
                    .iter()
                    .map(|(a, _)| *a)
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    })
}

fn argv(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| (*s).to_owned()).collect()
}

/// What performing an action needs besides the action.
#[derive(Debug, Clone)]
pub struct Context {
    /// The time limit of one command.
    pub limit: Duration,
    /// Where photos are stored.
    pub photo_dir: PathBuf,
    /// What outlives a request: the end of a `find_my_phone` ring.
    pub background: Background,
}

/// Work that goes on after its request was answered (the end of a
/// `find_my_phone` ring), on the session's tasks and stopped with it.
#[derive(Debug, Clone, Default)]
pub struct Background {
    /// Where it runs (the session waits for these tasks when it stops).
    pub tasks: TaskTracker,
    /// Cancelled when the companion stops: a ring ends at once, restoring
    /// the volume and turning the torch off.
    pub stop: CancellationToken,
    /// Until when the phone rings (Unix epoch ms), while it does.
    ringing: Arc<Mutex<Option<u64>>>,
}

impl Background {
    /// Background work on `tasks`, stopped by `stop`.
    pub fn new(tasks: TaskTracker, stop: CancellationToken) -> Self {
        Self {
            tasks,
            stop,
            ringing: Arc::default(),
        }
    }
}

/// What `find_my_phone` says, one line a second or so (each line is one
/// utterance of `termux-tts-speak`).
pub const FIND_PHRASE: &str = "Here I am!";
/// `find_my_phone` vibrates for this long, in milliseconds ...
const PULSE_MS: u32 = 1_000;
/// ... once every this long.
const PULSE_EVERY: Duration = Duration::from_secs(2);

/// The answer for a Wi-Fi toggle on Android API level `api`: `None` when
/// the platform still lets an app switch Wi-Fi (Android 9 and older).
pub fn wifi_toggle_refusal(api: Option<u32>) -> Option<WireError> {
    match api {
        Some(api) if api < WIFI_TOGGLE_REMOVED_API => None,
        Some(api) => Some(unsupported(format!(
            "Android 10 and later (this phone: API {api}) no longer let an app switch Wi-Fi \
             on or off (WifiManager.setWifiEnabled); use the quick settings, or reach the phone \
             over ADB (`svc wifi`)"
        ))),
        None => Some(unsupported(
            "the Android version is unknown (getprop ro.build.version.sdk gave no number), and \
             Android 10 and later no longer let an app switch Wi-Fi",
        )),
    }
}

/// The phone's Android API level (`getprop ro.build.version.sdk`).
async fn api_level(limit: Duration) -> Option<u32> {
    let out = exec::run(&argv(&["getprop", "ro.build.version.sdk"]), limit)
        .await
        .ok()?;
    out.stdout.trim().parse().ok()
}

/// Perform an offered action and give its result as JSON (the
/// catalogue's result record).
///
/// # Errors
/// The answer to send when a command fails or prints something unusable.
pub async fn perform(action: &Offered, ctx: &Context) -> Result<Value, WireError> {
    let limit = ctx.limit;
    let run = |a: Vec<String>| async move {
        let out = exec::run(&a, limit).await;
        checked(&a[0], out)
    };
    let value = match action {
        Offered::Battery => {
            let out = run(argv(&["termux-battery-status"])).await?;
            to_json(&battery(&json(&out, "termux-battery-status")?)?)
        }
        Offered::GetVolume(stream, name) => {
            let out = run(argv(&["termux-volume"])).await?;
            to_json(&volume(*stream, name, &json(&out, "termux-volume")?)?)
        }
        Offered::SetVolume(stream, name, level) => {
            let out = run(argv(&["termux-volume"])).await?;
            let before = volume(*stream, name, &json(&out, "termux-volume")?)?;
            let index = index_for(*level, before.max);
            let set = run(argv(&["termux-volume", name, &index.to_string()])).await?;
            no_output(&set, "termux-volume")?;
            let out = run(argv(&["termux-volume"])).await?;
            to_json(&volume(*stream, name, &json(&out, "termux-volume")?)?)
        }
        Offered::SetBrightness(level) => {
            let out = run(argv(&["termux-brightness", &level.to_string()])).await?;
            no_output(&out, "termux-brightness")?;
            to_json(&ScreenBrightness { brightness: *level })
        }
        Offered::Notifications(package) => {
            let out = run(argv(&["termux-notification-list"])).await?;
            to_json(&notifications(
                &json(&out, "termux-notification-list")?,
                package.as_deref(),
            )?)
        }
        Offered::OpenUrl(url) => {
            // One argument, whatever the link holds: no shell sees it.
            let out = run(vec!["termux-open-url".to_owned(), url.clone()]).await?;
            no_output(&out, "termux-open-url")?;
            to_json(&UrlOpened {
                url: url.clone(),
                status: "ok".into(),
                activity: None,
                chooser: false,
            })
        }
        Offered::WifiStatus => {
            let out = run(argv(&["termux-wifi-connectioninfo"])).await?;
            to_json(&wifi(&json(&out, "termux-wifi-connectioninfo")?)?)
        }
        Offered::WifiToggle(on) => {
            if let Some(refusal) = wifi_toggle_refusal(api_level(limit).await) {
                return Err(refusal);
            }
            let state = if *on { "true" } else { "false" };
            let out = run(argv(&["termux-wifi-enable", state])).await?;
            no_output(&out, "termux-wifi-enable")?;
            to_json(&WifiToggle { enabled: *on })
        }
        Offered::Location => {
            let out = run(argv(&["termux-location", "-p", "network", "-r", "last"])).await?;
            to_json(&location(&json(&out, "termux-location")?)?)
        }
        Offered::Photo(filename) => {
            let name = filename.clone().unwrap_or_else(|| {
                let now = droidwarden_services::time::epoch_ms(std::time::SystemTime::now());
                format!("photo-{now}.jpg")
            });
            // The catalogue's pattern allows no `/` and no leading `.`: the
            // file stays in the photo directory.
            let path = ctx.photo_dir.join(&name);
            tokio::fs::create_dir_all(&ctx.photo_dir)
                .await
                .map_err(|e| {
                    device_error(format!("cannot create {}: {e}", ctx.photo_dir.display()))
                })?;
            let path_text = path.to_string_lossy().into_owned();
            let out = run(vec![
                "termux-camera-photo".into(),
                "-c".into(),
                "0".into(),
                path_text.clone(),
            ])
            .await?;
            photo_taken(&out, &path).await?;
            to_json(&CameraPhoto { path: path_text })
        }
        Offered::Sms { number, text } => {
            // The text goes on standard input: as arguments, the script
            // would pass it through `echo` (which reads backslashes) and
            // getopts (which reads a leading `-`).
            let a = argv(&["termux-sms-send", "-n", number]);
            let out = exec::run_with_input(&a, text.as_bytes(), limit).await;
            let out = checked("termux-sms-send", out)?;
            no_output(&out, "termux-sms-send")?;
            to_json(&SmsComposed {
                number: number.clone(),
                status: "sent".into(),
            })
        }
        Offered::Dial(number) => {
            let out = run(argv(&["termux-telephony-call", number])).await?;
            no_output(&out, "termux-telephony-call")?;
            to_json(&CallPlaced {
                number: number.clone(),
                calling: true,
            })
        }
        Offered::GetClipboard => {
            // It prints the clipboard's text as it is, nothing when empty.
            let out = run(argv(&["termux-clipboard-get"])).await?;
            to_json(&clipboard_text(&out))
        }
        Offered::Torch(on) => {
            torch(*on, limit).await?;
            to_json(&TorchState { torch: *on })
        }
        Offered::Speak(text) => {
            // On standard input, never an argument: the script would pass
            // arguments through `echo` (which reads backslashes) and
            // getopts (which reads a leading `-`). It answers once the
            // text has been spoken.
            let a = argv(&["termux-tts-speak"]);
            let out = exec::run_with_input(&a, text.as_bytes(), limit).await;
            let out = checked("termux-tts-speak", out)?;
            no_output(&out, "termux-tts-speak")?;
            to_json(&Spoken {
                length: text.chars().count() as u64,
            })
        }
        Offered::Vibrate(ms) => {
            vibrate(*ms, limit).await?;
            to_json(&Vibrated { ms: *ms })
        }
        Offered::FindMyPhone(seconds) => to_json(&find_my_phone(*seconds, ctx).await?),
        Offered::SetClipboard(text) => {
            // On standard input, as the SMS text: an argument would be
            // visible to every process of the phone (`ps`) and read by the
            // script's `echo`.
            let a = argv(&["termux-clipboard-set"]);
            let out = exec::run_with_input(&a, text.as_bytes(), limit).await;
            let out = checked("termux-clipboard-set", out)?;
            no_output(&out, "termux-clipboard-set")?;
            to_json(&ClipboardSet {
                length: text.chars().count() as u64,
                via: Some(VIA.to_owned()),
            })
        }
    };
    Ok(value)
}

/// `termux-torch on|off`, which prints nothing (Termux:API only shows a
/// toast on a phone without a flash).
async fn torch(on: bool, limit: Duration) -> Result<(), WireError> {
    let a = argv(&["termux-torch", if on { "on" } else { "off" }]);
    let out = checked("termux-torch", exec::run(&a, limit).await)?;
    no_output(&out, "termux-torch")
}

/// `termux-vibrate -f -d MS`: also in silent mode (`-f`); it prints nothing
/// and returns while the phone vibrates.
async fn vibrate(ms: u32, limit: Duration) -> Result<(), WireError> {
    let a = argv(&["termux-vibrate", "-f", "-d", &ms.to_string()]);
    let out = checked("termux-vibrate", exec::run(&a, limit).await)?;
    no_output(&out, "termux-vibrate")
}

/// `termux-volume alarm INDEX`.
async fn set_alarm_volume(index: i64, limit: Duration) -> Result<(), WireError> {
    let a = argv(&["termux-volume", "alarm", &index.to_string()]);
    let out = checked("termux-volume", exec::run(&a, limit).await)?;
    no_output(&out, "termux-volume")
}

/// Ring to be found: the alarm stream at its highest index, the torch on,
/// a one-second vibration every two seconds, and [`FIND_PHRASE`] said
/// about once a second on the alarm stream; answered at once. After `seconds` (or when
/// the companion stops) the torch goes off and the alarm volume goes back
/// to what it was. A second request while it rings is `busy`.
///
/// # Errors
/// `busy` while a ring is on; a command's failure at the start (then what
/// was already changed is put back first).
async fn find_my_phone(seconds: u8, ctx: &Context) -> Result<FindingPhone, WireError> {
    let limit = ctx.limit;
    let now = droidwarden_services::time::epoch_ms(SystemTime::now());
    let until_ms = now + u64::from(seconds) * 1_000;
    {
        let mut ringing = ctx
            .background
            .ringing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(until) = ringing.filter(|until| *until > now) {
            return Err(WireError::new(
                ErrorCode::Busy,
                format!(
                    "the phone is already ringing to be found, for {} s more",
                    (until - now).div_ceil(1_000)
                ),
            ));
        }
        *ringing = Some(until_ms);
    }
    let out = checked(
        "termux-volume",
        exec::run(&argv(&["termux-volume"]), limit).await,
    );
    let saved =
        match out.and_then(|out| volume(Stream::Alarm, "alarm", &json(&out, "termux-volume")?)) {
            Ok(saved) => saved,
            Err(e) => {
                clear_ringing(&ctx.background);
                return Err(e);
            }
        };
    let started = async {
        set_alarm_volume(saved.max, limit).await?;
        torch(true, limit).await?;
        vibrate(PULSE_MS, limit).await
    }
    .await;
    if let Err(e) = started {
        ring_ends(saved.index, limit, &ctx.background).await;
        return Err(e);
    }
    let background = ctx.background.clone();
    let lines = format!("{FIND_PHRASE}\n").repeat(usize::from(seconds));
    ctx.background.tasks.spawn(async move {
        let speak = argv(&["termux-tts-speak", "-s", "ALARM"]);
        let speaking = async {
            // Killed when the time is up, if it still speaks.
            match exec::run_with_input(&speak, lines.as_bytes(), remaining(until_ms)).await {
                Ok(out) => {
                    tracing::debug!(status = ?out.status, "find_my_phone: termux-tts-speak ended")
                }
                Err(e) => tracing::debug!(error = %e, "find_my_phone: termux-tts-speak stopped"),
            }
        };
        // Pulses rather than one long vibration: Termux:API cannot cancel
        // a vibration, so a ring that ends early stops within a pulse.
        let pulsing = async {
            loop {
                tokio::time::sleep(remaining(until_ms).min(PULSE_EVERY)).await;
                if remaining(until_ms) < PULSE_EVERY / 2 {
                    break;
                }
                if let Err(e) = vibrate(PULSE_MS, limit).await {
                    tracing::warn!(code = ?e.code, message = %e.message, "find_my_phone: no vibration");
                }
            }
        };
        let ring = async {
            tokio::join!(speaking, pulsing);
            tokio::time::sleep(remaining(until_ms)).await;
        };
        tokio::select! {
            () = background.stop.cancelled() => {}
            () = ring => {}
        }
        ring_ends(saved.index, limit, &background).await;
    });
    Ok(FindingPhone { seconds, until_ms })
}

/// The time left until `until_ms` (Unix epoch ms).
fn remaining(until_ms: u64) -> Duration {
    let now = droidwarden_services::time::epoch_ms(SystemTime::now());
    Duration::from_millis(until_ms.saturating_sub(now))
}

fn clear_ringing(background: &Background) {
    *background
        .ringing
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
}

/// The end of a ring: the torch off and the alarm volume back to `index`;
/// a failure is logged (there is no request left to answer).
async fn ring_ends(index: i64, limit: Duration, background: &Background) {
    if let Err(e) = torch(false, limit).await {
        tracing::warn!(code = ?e.code, message = %e.message, "find_my_phone: the torch could not be turned off");
    }
    if let Err(e) = set_alarm_volume(index, limit).await {
        tracing::warn!(code = ?e.code, message = %e.message, "find_my_phone: the alarm volume could not be restored");
    }
    clear_ringing(background);
    tracing::info!("find_my_phone: the ring ended");
}

/// `via` of the clipboard's answers.
const VIA: &str = "companion";

/// What `termux-clipboard-get` printed: the clipboard's text, `None` when
/// it printed nothing (an empty clipboard, or one holding no text).
pub fn clipboard_text(out: &Output) -> ClipboardText {
    ClipboardText {
        text: (!out.stdout.is_empty()).then(|| out.stdout.clone()),
        via: Some(VIA.to_owned()),
    }
}

/// `termux-camera-photo` prints nothing when it worked and a line
/// starting with `ERROR:` otherwise; a photo is only taken if the file
/// has content.
async fn photo_taken(out: &Output, path: &Path) -> Result<(), WireError> {
    no_output(out, "termux-camera-photo")?;
    match tokio::fs::metadata(path).await {
        Ok(m) if m.len() > 0 => Ok(()),
        _ => Err(WireError::new(
            ErrorCode::PermissionDenied,
            format!(
                "termux-camera-photo wrote no photo to {}; grant Termux:API the Camera permission",
                path.display()
            ),
        )),
    }
}

fn to_json<T: serde::Serialize>(record: &T) -> Value {
    // Records of strings, numbers and booleans always serialise.
    serde_json::to_value(record).unwrap_or(Value::Null)
}

fn device_error(message: String) -> WireError {
    WireError::new(ErrorCode::DeviceError, message)
}

/// A finished command's output, or the answer for a command that did not
/// run or failed.
fn checked(program: &str, out: Result<Output, ExecError>) -> Result<Output, WireError> {
    let out = out.map_err(|e| match e {
        // Killed at its limit: it may have acted.
        ExecError::Timeout { .. } => WireError::new(ErrorCode::Timeout, e.to_string()),
        _ => WireError {
            code: ErrorCode::DeviceError,
            message: e.to_string(),
            retryable: false,
            details: None,
        },
    })?;
    if let Some(error) = termux_error(&out.stdout) {
        return Err(error);
    }
    if out.status != Some(0) {
        return Err(device_error(format!(
            "{program} failed (exit status {:?}): {}",
            out.status,
            clip(out.stderr.trim())
        )));
    }
    Ok(out)
}

/// Termux:API reports refusals as `{"error": "…"}` on standard output.
fn termux_error(stdout: &str) -> Option<WireError> {
    let value: Value = serde_json::from_str(stdout.trim()).ok()?;
    let message = value
        .get("error")
        .or_else(|| value.get("API_ERROR"))?
        .as_str()?;
    let lower = message.to_lowercase();
    let code = if lower.contains("permission") || lower.contains("permitted") {
        ErrorCode::PermissionDenied
    } else if lower.contains("failed to get location") || lower.contains("no current connection") {
        ErrorCode::NotFound
    } else {
        ErrorCode::DeviceError
    };
    Some(WireError {
        code,
        message: format!("Termux:API: {}", clip(message)),
        retryable: false,
        details: None,
    })
}

fn clip(s: &str) -> String {
    s.chars().take(300).collect()
}

fn json(out: &Output, program: &str) -> Result<Value, WireError> {
    serde_json::from_str(out.stdout.trim()).map_err(|e| {
        device_error(format!(
            "unexpected output of {program} ({e}): {}",
            clip(out.stdout.trim())
        ))
    })
}

fn no_output(out: &Output, program: &str) -> Result<(), WireError> {
    match out.stdout.trim() {
        "" => Ok(()),
        other => Err(device_error(format!(
            "unexpected output of {program}: {}",
            clip(other)
        ))),
    }
}

fn unexpected(program: &str, what: &str) -> WireError {
    device_error(format!("unexpected output of {program}: {what}"))
}

/// `termux-battery-status` as the catalogue's `battery.status` record.
///
/// Termux reports `percentage` (so `level` is it and `scale` 100),
/// `health`, `plugged`, `status`, `temperature` and, in newer versions,
/// `voltage`; it does not say whether a battery is present (a phone
/// running Termux has one: `present` is true) and never reports values
/// forced with `dumpsys battery set` (`simulated` is false).
///
/// # Errors
/// `device_error` when the output lacks `percentage` or is not an object.
pub fn battery(value: &Value) -> Result<BatteryStatus, WireError> {
    const P: &str = "termux-battery-status";
    let text = |key: &str| value.get(key).and_then(Value::as_str).unwrap_or_default();
    let percentage = value
        .get("percentage")
        .and_then(Value::as_i64)
        .ok_or_else(|| unexpected(P, "no integer \"percentage\""))?;
    let status = match text("status") {
        "CHARGING" => "charging",
        "DISCHARGING" => "discharging",
        "NOT_CHARGING" => "not_charging",
        "FULL" => "full",
        _ => "unknown",
    };
    let health = match text("health") {
        "GOOD" => "good",
        "OVERHEAT" => "overheat",
        "DEAD" => "dead",
        "OVER_VOLTAGE" => "over_voltage",
        "UNSPECIFIED_FAILURE" => "failure",
        "COLD" => "cold",
        _ => "unknown",
    };
    let plugged = match text("plugged") {
        "PLUGGED_AC" => Some("ac"),
        "PLUGGED_USB" => Some("usb"),
        "PLUGGED_WIRELESS" => Some("wireless"),
        "PLUGGED_DOCK" => Some("dock"),
        _ => None,
    };
    Ok(BatteryStatus {
        level_percent: u8::try_from(percentage.clamp(0, 100)).unwrap_or(0),
        level: percentage,
        scale: 100,
        status: status.into(),
        health: health.into(),
        plugged: plugged.map(str::to_owned),
        charging: status == "charging",
        present: true,
        temperature_c: value.get("temperature").and_then(Value::as_f64),
        voltage_mv: value.get("voltage").and_then(Value::as_i64),
        technology: value
            .get("technology")
            .and_then(Value::as_str)
            .map(str::to_owned),
        simulated: false,
    })
}

/// The volume index for `level` percent of a stream whose highest index is `max`.
pub fn index_for(level: u8, max: i64) -> i64 {
    (i64::from(level) * max + 50) / 100
}

/// One stream of `termux-volume`'s list as the catalogue's volume record.
///
/// Termux gives `volume` (the index) and `max_volume`; it reports neither
/// the lowest index (taken as 0) nor the mute state (a stream at index 0
/// counts as muted).
///
/// # Errors
/// `device_error` when the list lacks the stream or is not a list.
pub fn volume(stream: Stream, name: &str, value: &Value) -> Result<AudioVolume, WireError> {
    const P: &str = "termux-volume";
    let entry = value
        .as_array()
        .ok_or_else(|| unexpected(P, "not a list"))?
        .iter()
        .find(|e| e.get("stream").and_then(Value::as_str) == Some(name))
        .ok_or_else(|| unexpected(P, &format!("no {name} stream")))?;
    let int = |key: &str| {
        entry
            .get(key)
            .and_then(Value::as_i64)
            .ok_or_else(|| unexpected(P, &format!("no integer {key:?} for {name}")))
    };
    let index = int("volume")?;
    let max = int("max_volume")?;
    let level = if max > 0 {
        ((index * 100 + max / 2) / max).clamp(0, 100)
    } else {
        0
    };
    Ok(AudioVolume {
        stream,
        level,
        index,
        min: 0,
        max,
        muted: index == 0,
    })
}

/// What Android reports instead of a value an app may not see (no
/// location permission) or does not know.
fn hidden(value: &str) -> bool {
    matches!(
        value,
        "" | "02:00:00:00:00:00" | "<unknown ssid>" | "0.0.0.0" | "00:00:00:00:00:00"
    )
}

/// `termux-wifi-connectioninfo` as the catalogue's `wifi_automation.status`
/// record.
///
/// Termux prints Android's `WifiInfo`: `bssid`, `frequency_mhz`, `ip`,
/// `link_speed_mbps`, `mac_address`, `network_id`, `rssi`, `ssid`,
/// `ssid_hidden` and `supplicant_state`. Without the location permission
/// Android replaces the SSID, BSSID and MAC address with placeholders
/// (`<unknown ssid>`, `02:00:00:00:00:00`), which become null. It does not
/// say whether Wi-Fi is on: `enabled` is true when the supplicant is in any
/// state but `INTERFACE_DISABLED`/`UNINITIALIZED`, or (no state printed)
/// when the phone has a network id. `connected` is supplicant state
/// `COMPLETED`, or (no state printed) a network id and an address.
///
/// # Errors
/// `device_error` when the output is not an object.
pub fn wifi(value: &Value) -> Result<WifiStatus, WireError> {
    const P: &str = "termux-wifi-connectioninfo";
    if !value.is_object() {
        return Err(unexpected(P, "not an object"));
    }
    let text = |key: &str| {
        value
            .get(key)
            .and_then(Value::as_str)
            .filter(|s| !hidden(s))
            .map(str::to_owned)
    };
    let int = |key: &str| {
        value
            .get(key)
            .and_then(Value::as_i64)
            .and_then(|v| i32::try_from(v).ok())
    };
    let network = int("network_id").is_some_and(|id| id >= 0);
    let ip = text("ip");
    let state = value.get("supplicant_state").and_then(Value::as_str);
    let (enabled, connected) = match state {
        Some(s) => (
            !matches!(s, "INTERFACE_DISABLED" | "UNINITIALIZED"),
            s == "COMPLETED",
        ),
        None => (network, network && ip.is_some()),
    };
    Ok(WifiStatus {
        enabled,
        connected,
        ssid: text("ssid").filter(|_| connected),
        bssid: text("bssid").filter(|_| connected),
        ip: ip.filter(|_| connected),
        // Android's "no signal" value.
        rssi_dbm: int("rssi").filter(|r| connected && *r > -127),
        link_speed_mbps: int("link_speed_mbps").filter(|s| connected && *s >= 0),
        frequency_mhz: int("frequency_mhz").filter(|f| connected && *f > 0),
        mac: text("mac_address"),
    })
}

/// `termux-location` as the catalogue's `location.current` record.
///
/// Termux prints `latitude`, `longitude`, `altitude`, `accuracy`,
/// `vertical_accuracy` (newer versions), `bearing`, `speed`, `elapsedMs`
/// and `provider`; `{"API_ERROR": "Failed to get location"}` when there is
/// no fix (answered `not_found` before this runs).
///
/// # Errors
/// `device_error` when latitude or longitude is missing.
pub fn location(value: &Value) -> Result<LocationFix, WireError> {
    const P: &str = "termux-location";
    let num = |key: &str| value.get(key).and_then(Value::as_f64);
    let (Some(latitude), Some(longitude)) = (num("latitude"), num("longitude")) else {
        return Err(unexpected(P, "no latitude and longitude"));
    };
    Ok(LocationFix {
        provider: value
            .get("provider")
            .and_then(Value::as_str)
            .unwrap_or("unknown")
            .to_owned(),
        latitude,
        longitude,
        altitude_m: num("altitude"),
        accuracy_m: num("accuracy"),
        speed_mps: num("speed"),
        bearing_deg: num("bearing"),
    })
}

/// `termux-notification-list` as the catalogue's `notifications.list`
/// record, only `package`'s when given.
///
/// Termux gives `key`, `packageName`, `title` and `content` (empty strings
/// when absent, which become null); its `when` is a local date without a
/// time zone, so `posted_ms` is null; it does not report the ongoing flag
/// (false) and lists what Android shows it, so nothing is marked redacted.
///
/// # Errors
/// `device_error` when the output is not a list of notifications.
pub fn notifications(value: &Value, package: Option<&str>) -> Result<NotificationList, WireError> {
    const P: &str = "termux-notification-list";
    let list = value
        .as_array()
        .ok_or_else(|| unexpected(P, "not a list"))?;
    let mut out = Vec::new();
    for entry in list {
        let text = |key: &str| entry.get(key).and_then(Value::as_str);
        let non_empty = |key: &str| text(key).filter(|s| !s.is_empty()).map(str::to_owned);
        let (Some(key), Some(pkg)) = (text("key"), text("packageName")) else {
            return Err(unexpected(P, "a notification without key or packageName"));
        };
        if package.is_some_and(|p| p != pkg) {
            continue;
        }
        out.push(Notification {
            key: key.to_owned(),
            package: pkg.to_owned(),
            title: non_empty("title"),
            text: non_empty("content"),
            posted_ms: None,
            ongoing: false,
        });
    }
    Ok(NotificationList {
        count: out.len() as u64,
        redacted: false,
        notifications: out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clipboard_reads_as_printed_and_empty_is_none() {
        let out = |stdout: &str| Output {
            stdout: stdout.to_owned(),
            stderr: String::new(),
            status: Some(0),
        };
        let text = clipboard_text(&out("Grüße, \"quoted\" 100% $HOME; 你好 👋\nline two"));
        assert_eq!(
            text.text.as_deref(),
            Some("Grüße, \"quoted\" 100% $HOME; 你好 👋\nline two")
        );
        assert_eq!(text.via.as_deref(), Some("companion"));
        assert_eq!(clipboard_text(&out("")).text, None);
    }
    use droidwarden_services::Catalogue;
    use serde_json::json;

    macro_rules! fixture {
        ($name:literal) => {
            serde_json::from_str::<Value>(include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/fixtures/termux/",
                $name
            )))
            .expect("fixtures are JSON")
        };
    }

    /// The record must match the catalogue's result schema of `service.action`.
    fn valid(service: &str, action: &str, result: &Value) {
        let spec = Catalogue::get()
            .service(service)
            .unwrap()
            .actions
            .iter()
            .find(|a| a.name == action)
            .unwrap();
        if let Err(v) = spec.result.validate(result) {
            panic!("{service}.{action}: {result} at {:?}: {}", v.path, v.reason);
        }
    }

    #[test]
    fn battery_outputs() {
        let b = battery(&fixture!("battery-status.json")).unwrap();
        assert_eq!(
            (
                b.level_percent,
                b.status.as_str(),
                b.health.as_str(),
                b.plugged.as_deref()
            ),
            (59, "discharging", "good", None)
        );
        assert_eq!(b.temperature_c, Some(27.200000762939453));
        valid("battery", "status", &to_json(&b));
        let b = battery(&fixture!("battery-status-charging-ac.json")).unwrap();
        assert_eq!(
            (
                b.level_percent,
                b.status.as_str(),
                b.health.as_str(),
                b.plugged.as_deref()
            ),
            (71, "charging", "unknown", Some("ac"))
        );
        assert!(b.charging);
        valid("battery", "status", &to_json(&b));
        assert!(battery(&json!({"health": "GOOD"})).is_err());
    }

    #[test]
    fn volume_outputs() {
        let list = fixture!("volume.json");
        let v = volume(Stream::Music, "music", &list).unwrap();
        assert_eq!((v.index, v.max, v.level, v.muted), (7, 15, 47, false));
        valid("audio_automation", "get_volume", &to_json(&v));
        let v = volume(Stream::VoiceCall, "call", &list).unwrap();
        assert_eq!((v.index, v.max, v.level), (5, 5, 100));
        assert!(volume(Stream::Music, "music", &json!({})).is_err());
        assert!(volume(Stream::Music, "music", &json!([])).is_err());
        assert_eq!(index_for(40, 15), 6);
        assert_eq!(index_for(100, 15), 15);
        assert_eq!(index_for(0, 15), 0);
    }

    #[test]
    fn notification_outputs() {
        let list = fixture!("notification-list.json");
        let n = notifications(&list, None).unwrap();
        assert_eq!(n.count, 1);
        assert_eq!(
            n.notifications[0].key,
            "0|com.example_organisation.app_name|-100|null|10151"
        );
        assert_eq!(
            n.notifications[0].text.as_deref(),
            Some("Notification content")
        );
        valid("notifications", "list", &to_json(&n));
        assert_eq!(notifications(&list, Some("com.other")).unwrap().count, 0);
        assert!(notifications(&json!([{"title": "x"}]), None).is_err());
    }

    #[test]
    fn wifi_outputs() {
        let w = wifi(&fixture!("wifi-connectioninfo.json")).unwrap();
        // Without the location permission Android hides the BSSID and MAC.
        assert!(w.enabled && w.connected, "{w:?}");
        assert_eq!(w.bssid, None);
        assert_eq!(w.mac, None);
        assert_eq!(w.ip.as_deref(), Some("192.168.xxx.xxx"));
        assert_eq!(
            (w.rssi_dbm, w.link_speed_mbps, w.frequency_mhz),
            (Some(-42), Some(433), Some(5180))
        );
        valid("wifi_automation", "status", &to_json(&w));
        let off = wifi(&json!({"supplicant_state": "INTERFACE_DISABLED", "network_id": -1, "ip": "0.0.0.0", "ssid": "<unknown ssid>", "rssi": -127})).unwrap();
        assert!(!off.enabled && !off.connected && off.ssid.is_none() && off.rssi_dbm.is_none());
        assert!(wifi(&json!([])).is_err());
    }

    #[test]
    fn location_outputs() {
        let l = location(&fixture!("location.json")).unwrap();
        assert_eq!((l.latitude, l.longitude), (1.3277513, 103.678317));
        assert_eq!(l.provider, "gps");
        assert_eq!(l.accuracy_m, Some(48.46337890625));
        valid("location", "current", &to_json(&l));
        let failed = termux_error(include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/fixtures/termux/location-failed.json"
        )))
        .unwrap();
        assert_eq!(failed.code, ErrorCode::NotFound);
        assert!(location(&json!({"latitude": 1.0})).is_err());
    }

    #[test]
    fn wifi_toggles_only_before_android_10() {
        assert_eq!(wifi_toggle_refusal(Some(28)), None);
        for api in [Some(29), Some(35), None] {
            let e = wifi_toggle_refusal(api).unwrap();
            assert_eq!(e.code, ErrorCode::UnsupportedAction);
            assert!(e.message.contains("Android 10"), "{}", e.message);
        }
    }

    #[test]
    fn termux_errors_are_answers() {
        let e =
            termux_error(r#"{"error": "Sending SMS is no longer permitted by Google"}"#).unwrap();
        assert_eq!(e.code, ErrorCode::PermissionDenied);
        assert!(termux_error("[]").is_none());
        assert!(termux_error("").is_none());
    }

    #[test]
    fn only_offered_actions_are_performed() {
        let parse = |s: &str, a: &str, p: Value| Catalogue::get().parse(s, a, &p).unwrap();
        assert_eq!(
            offered(&parse(
                "audio_automation",
                "set_volume",
                json!({"stream": "voice_call", "level": 5})
            )),
            Ok(Offered::SetVolume(Stream::VoiceCall, "call", 5))
        );
        let e = offered(&parse(
            "audio_automation",
            "get_volume",
            json!({"stream": "dtmf"}),
        ))
        .unwrap_err();
        assert_eq!(e.code, ErrorCode::UnsupportedAction);
        let e = offered(&parse("bluetooth_automation", "disable", json!({}))).unwrap_err();
        assert_eq!(e.code, ErrorCode::UnsupportedAction);
        assert!(
            e.message.contains("bluetooth_automation.disable"),
            "{}",
            e.message
        );
        let e = offered(&parse(
            "audio_automation",
            "ringer_mode",
            json!({"mode": "silent"}),
        ))
        .unwrap_err();
        assert!(e.message.contains("ringer"), "{}", e.message);
        assert_eq!(
            offered(&parse("alerts", "vibrate", json!({}))),
            Ok(Offered::Vibrate(1_000))
        );
        assert_eq!(
            offered(&parse("alerts", "find_my_phone", json!({}))),
            Ok(Offered::FindMyPhone(30))
        );
        assert_eq!(
            offered(&parse("alerts", "torch", json!({"on": false}))),
            Ok(Offered::Torch(false))
        );
    }
}
