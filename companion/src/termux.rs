//! The catalogue actions this companion offers, each performed by a
//! Termux:API command, and the parsers of those commands' JSON.
//!
//! Every command line is an argv built from typed, validated parameters;
//! nothing passes through a shell, so a parameter is always one argument.
//! The parsers are pure and tested against real outputs kept in
//! `fixtures/termux/` (see `SOURCES.md` there).

use crate::exec::{self, ExecError, Output};
use droidwarden_services::{
    AudioAction, AudioVolume, BatteryAction, BatteryStatus, Command, ErrorCode, IntentsAction,
    Notification, NotificationList, NotificationsAction, ScreenAction, ScreenBrightness, Stream,
    UrlOpened, WireError,
};
use serde_json::Value;
use std::time::Duration;

/// Every action this slice offers, as `service.action`, with the command
/// behind it (printed by `droidwarden-companion actions`).
pub const OFFERED: &[(&str, &str)] = &[
    ("battery.status", "termux-battery-status"),
    ("audio_automation.get_volume", "termux-volume"),
    ("audio_automation.set_volume", "termux-volume STREAM INDEX"),
    ("screen_control.set_brightness", "termux-brightness LEVEL"),
    ("notifications.list", "termux-notification-list"),
    ("intents.open_url", "termux-open-url URL"),
];

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

/// Perform an offered action, each command limited to `limit`, and give
/// its result as JSON (the catalogue's result record).
///
/// # Errors
/// The answer to send when a command fails or prints something unusable.
pub async fn perform(action: &Offered, limit: Duration) -> Result<Value, WireError> {
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
    };
    Ok(value)
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
    let message = value.get("error")?.as_str()?;
    let lower = message.to_lowercase();
    let code = if lower.contains("permission") || lower.contains("permitted") {
        ErrorCode::PermissionDenied
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
        let e = offered(&parse("wifi_automation", "disable", json!({}))).unwrap_err();
        assert_eq!(e.code, ErrorCode::UnsupportedAction);
        assert!(
            e.message.contains("wifi_automation.disable"),
            "{}",
            e.message
        );
    }
}
