//! `cmd SERVICE …`, `svc` and `input`: the system-service shell commands
//! that change radios, audio, media and power state.
//!
//! Formats follow each service's `ShellCommand` in AOSP: no output on
//! success for setters, `Unknown command: X` for unknown subcommands (exit
//! 255), `cmd: Can't find service: X` (exit 20) for unknown services.
//! Deliberate deviation: where AOSP prints an error but still exits 0
//! (`media_session volume` with a bad index), this phone exits 255 so a
//! failure is never mistaken for success; the text is AOSP's.

use crate::clock;
use crate::shell::{CommandResult, Output};
use crate::state::{PhoneState, PlaybackState, RingerMode, STREAMS};

use super::{activity, done, dumpsys, fail, ok_text, package, settings, tools};

/// `cmd [-l] SERVICE [ARGS…]`.
pub(crate) fn cmd(st: &mut PhoneState, args: &[String]) -> CommandResult {
    let Some(service) = args.first() else {
        return fail(
            "",
            "cmd: No service specified; use -l to list all running services. Use -w to start and wait for a service.\n",
            20,
        );
    };
    let rest = &args[1..];
    match service.as_str() {
        "-l" => {
            let mut out = String::from("Currently running services:\n");
            for name in dumpsys::SERVICES {
                wl!(out, "  {name}");
            }
            ok_text(out)
        }
        "connectivity" => connectivity(st, rest),
        "bluetooth_manager" => bluetooth_manager(st, rest),
        "media_session" => media_session(st, rest),
        "wifi" => wifi(st, rest),
        "audio" => audio(st, rest),
        "power" => power(st, rest),
        "package" => package::pm(st, rest),
        "activity" => activity::am(st, rest),
        "settings" => settings::run(st, rest),
        "input" => input(st, rest),
        "window" => tools::wm(st, rest),
        "notification" => super::content::cmd_notification(st, rest),
        // Android 12 (API 31) split the vibrator service.
        "vibrator_manager" if st.props.sdk >= 31 => vibrator_manager(st, rest),
        "vibrator" if st.props.sdk < 31 => vibrator(st, rest),
        other => fail("", &format!("cmd: Can't find service: {other}\n"), 20),
    }
}

fn unknown(sub: &str) -> CommandResult {
    fail(&format!("Unknown command: {sub}\n"), "", 255)
}

/// Turns Wi-Fi on or off; turning it on reconnects to the saved network.
pub(crate) fn set_wifi(st: &mut PhoneState, on: bool) {
    st.wifi.enabled = on;
    st.wifi.connected = on && !st.wifi.ssid.is_empty();
    if on {
        st.wifi.last_scan_epoch_ms = clock::now_ms();
    }
}

/// Turns Bluetooth on or off.
pub(crate) fn set_bluetooth(st: &mut PhoneState, on: bool) {
    if st.bluetooth.enabled != on {
        st.bluetooth.enabled = on;
        st.bluetooth.enabled_since_epoch_ms = clock::now_ms();
    }
}

/// Airplane mode: radios off (remembering them) or restored.
pub(crate) fn set_airplane(st: &mut PhoneState, on: bool) {
    if on && !st.airplane_mode {
        st.airplane_saved = Some(crate::state::SavedRadios {
            wifi: st.wifi.enabled,
            bluetooth: st.bluetooth.enabled,
        });
        set_wifi(st, false);
        set_bluetooth(st, false);
    } else if !on
        && st.airplane_mode
        && let Some(saved) = st.airplane_saved.take()
    {
        set_wifi(st, saved.wifi);
        set_bluetooth(st, saved.bluetooth);
    }
    st.airplane_mode = on;
}

const SVC_HELP: &str = "Available commands:\n    help     Show information about the subcommands\n    power    Control the power manager\n    data     Control mobile data connectivity\n    wifi     Control the Wi-Fi manager\n    usb      Control Usb state\n    nfc      Control NFC functions\n    bluetooth Control Bluetooth service\n";

/// `svc wifi|bluetooth enable|disable`.
pub(crate) fn svc(st: &mut PhoneState, args: &[String]) -> CommandResult {
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    match words.as_slice() {
        ["wifi", "enable"] => set_wifi(st, true),
        ["wifi", "disable"] => set_wifi(st, false),
        ["bluetooth", "enable"] => set_bluetooth(st, true),
        ["bluetooth", "disable"] => set_bluetooth(st, false),
        ["wifi", ..] => {
            return fail(
                "Control the Wi-Fi manager\n\nusage: svc wifi [enable|disable]\n         Turn Wi-Fi on or off.\n\n",
                "",
                1,
            );
        }
        ["bluetooth", ..] => {
            return fail(
                "Control the Bluetooth manager\n\nusage: svc bluetooth [enable|disable]\n         Turn Bluetooth on or off.\n\n",
                "",
                1,
            );
        }
        ["help"] => return ok_text(SVC_HELP),
        _ => return fail(SVC_HELP, "", 1),
    }
    ok_text("")
}

const CONNECTIVITY_HELP: &str = "Connectivity service commands:\n  help\n    Print this help text.\n  airplane-mode [enable|disable]\n    Turn airplane mode on or off.\n  airplane-mode\n    Get airplane mode.\n";

fn connectivity(st: &mut PhoneState, args: &[String]) -> CommandResult {
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    match words.as_slice() {
        ["airplane-mode"] => ok_text(if st.airplane_mode {
            "enabled\n"
        } else {
            "disabled\n"
        }),
        ["airplane-mode", "enable", ..] => {
            set_airplane(st, true);
            ok_text("")
        }
        ["airplane-mode", "disable", ..] => {
            set_airplane(st, false);
            ok_text("")
        }
        [] | ["help" | "-h"] => ok_text(CONNECTIVITY_HELP),
        ["airplane-mode", ..] => fail(CONNECTIVITY_HELP, "", 255),
        [other, ..] => unknown(other),
    }
}

const BLUETOOTH_HELP: &str = "Bluetooth Manager Commands:\n  help or -h\n    Print this help text.\n  enable\n    Enable Bluetooth on this device.\n  disable\n    Disable Bluetooth on this device.\n  wait-for-state:<STATE>\n    Wait until the adapter state is STATE.\n";

fn bluetooth_manager(st: &mut PhoneState, args: &[String]) -> CommandResult {
    let Some(sub) = args.first().map(String::as_str) else {
        return ok_text(BLUETOOTH_HELP);
    };
    match sub {
        "enable" | "disable" => {
            set_bluetooth(st, sub == "enable");
            ok_text(format!("ShellCommand: Exec {sub}\n{sub}: Success\n"))
        }
        "wait-for-state:STATE_ON" | "wait-for-state:STATE_OFF" => {
            let want = sub.ends_with("ON");
            if st.bluetooth.enabled == want {
                ok_text(format!("ShellCommand: Exec {sub}\n{sub}: Success\n"))
            } else {
                fail(
                    &format!("ShellCommand: Exec {sub}\n"),
                    &format!("{sub}: Failed\n"),
                    255,
                )
            }
        }
        "help" | "-h" => ok_text(BLUETOOTH_HELP),
        other => unknown(other),
    }
}

const MEDIA_HELP: &str = "usage: media_session [subcommand] [options]\n       media_session dispatch KEY\n       media_session list-sessions\n       media_session monitor <tag>\n       media_session volume [options]\n\nmedia_session dispatch: dispatch a media key to the system.\n                KEY may be: play, pause, play-pause, mute, headsethook,\n                stop, next, previous, rewind, record, fast-forword.\nmedia_session list-sessions: print a list of the current sessions.\nmedia_session monitor: monitor updates to the specified session.\n                       Use the tag from list-sessions.\nmedia_session volume:  the options are as follows: \n\t\t--stream STREAM selects the stream to control, see AudioManager.STREAM_*\n\t\t                controls AudioManager.STREAM_MUSIC if no stream is specified\n\t\t--set INDEX     sets the volume index value\n\t\t--adj DIRECTION adjusts the volume, use raise|same|lower for the direction\n\t\t--get           outputs the current volume\n\t\t--show          shows the UI during the volume change\n\texamples:\n\t\tadb shell media volume --show --stream 3 --set 11\n\t\tadb shell media volume --stream 0 --adj lower\n\t\tadb shell media volume --stream 3 --get\n\n";

/// `MediaShellCommand.showError`: help on stdout, the message on stderr.
fn media_error(out: &mut Output, message: &str) -> CommandResult {
    out.out(MEDIA_HELP);
    out.errln(message);
    done(std::mem::take(out), 255)
}

/// Applies a media key to the active session.
pub(crate) fn media_key(st: &mut PhoneState, key: &str) {
    let Some(m) = st.media.as_mut() else { return };
    match key {
        "play" => m.state = PlaybackState::Playing,
        "pause" => m.state = PlaybackState::Paused,
        "play-pause" | "headsethook" => {
            m.state = if m.state == PlaybackState::Playing {
                PlaybackState::Paused
            } else {
                PlaybackState::Playing
            };
        }
        "stop" => {
            m.state = PlaybackState::Stopped;
            m.position_ms = 0;
        }
        "next" | "previous" => {
            if !m.queue.is_empty() {
                let len = m.queue.len();
                let current = m.queue.iter().position(|t| t.title == m.title).unwrap_or(0);
                let target = if key == "next" {
                    (current + 1) % len
                } else {
                    (current + len - 1) % len
                };
                m.title = m.queue[target].title.clone();
                m.artist = m.queue[target].artist.clone();
            }
            m.position_ms = 0;
        }
        _ => {}
    }
}

fn media_session(st: &mut PhoneState, args: &[String]) -> CommandResult {
    let mut out = Output::default();
    let Some(sub) = args.first().map(String::as_str) else {
        return ok_text(MEDIA_HELP);
    };
    match sub {
        "dispatch" => {
            let Some(key) = args.get(1) else {
                return media_error(
                    &mut out,
                    "java.lang.IllegalArgumentException: Argument expected after \"dispatch\"",
                );
            };
            const KEYS: [&str; 11] = [
                "play",
                "pause",
                "play-pause",
                "mute",
                "headsethook",
                "stop",
                "next",
                "previous",
                "rewind",
                "record",
                "fast-forward",
            ];
            if !KEYS.contains(&key.as_str()) {
                return media_error(&mut out, &format!("Error: unknown dispatch code '{key}'"));
            }
            media_key(st, key);
            done(out, 0)
        }
        "list-sessions" => {
            out.outln("Sessions:");
            if let Some(m) = &st.media {
                let tag = format!(
                    "{} media session",
                    m.package.rsplit('.').next().unwrap_or("app")
                );
                out.outln(format!("  tag={tag}, package={}", m.package));
            }
            done(out, 0)
        }
        "volume" => volume(st, &args[1..]),
        "help" | "-h" => ok_text(MEDIA_HELP),
        other => media_error(&mut out, &format!("Error: unknown command '{other}'")),
    }
}

fn stream_name(n: i64) -> &'static str {
    const NAMES: [&str; 12] = [
        "STREAM_VOICE_CALL",
        "STREAM_SYSTEM",
        "STREAM_RING",
        "STREAM_MUSIC",
        "STREAM_ALARM",
        "STREAM_NOTIFICATION",
        "STREAM_BLUETOOTH_SCO",
        "STREAM_SYSTEM_ENFORCED",
        "STREAM_DTMF",
        "STREAM_TTS",
        "STREAM_ACCESSIBILITY",
        "STREAM_ASSISTANT",
    ];
    usize::try_from(n)
        .ok()
        .and_then(|i| NAMES.get(i))
        .copied()
        .unwrap_or("invalid stream")
}

/// Java's `Integer.decode`.
fn java_decode(s: &str) -> Option<i64> {
    let (neg, body) = match s.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let v = if let Some(h) = body
        .strip_prefix("0x")
        .or_else(|| body.strip_prefix("0X"))
        .or_else(|| body.strip_prefix('#'))
    {
        i64::from_str_radix(h, 16).ok()?
    } else if body.len() > 1 && body.starts_with('0') {
        i64::from_str_radix(&body[1..], 8).ok()?
    } else {
        body.parse().ok()?
    };
    Some(if neg { -v } else { v })
}

/// `cmd media_session volume [--stream N] [--set I | --adj DIR] [--get] [--show]`
/// (AOSP `VolumeCtrl`, plus `mute`/`unmute` adjustments as the daemon uses them).
fn volume(st: &mut PhoneState, args: &[String]) -> CommandResult {
    let mut out = Output::default();
    let mut stream: i64 = 3;
    let mut set: Option<i64> = None;
    let mut adjust: Option<String> = None;
    let mut get = false;
    let mut i = 0;
    let log = |out: &mut Output, msg: String| out.outln(format!("[V] {msg}"));
    while i < args.len() {
        let opt = args[i].as_str();
        i += 1;
        let mut value = || -> Result<String, String> {
            let v = args.get(i).cloned().ok_or_else(|| {
                format!("java.lang.IllegalArgumentException: Argument expected after \"{opt}\"")
            })?;
            i += 1;
            Ok(v)
        };
        let decoded = |v: String| {
            java_decode(&v).ok_or(format!(
                "java.lang.NumberFormatException: For input string: \"{v}\""
            ))
        };
        match opt {
            "--show" => {}
            "--get" => {
                get = true;
                log(&mut out, "will get volume".to_owned());
            }
            "--stream" => match value().and_then(decoded) {
                Ok(n) => {
                    stream = n;
                    log(
                        &mut out,
                        format!("will control stream={n} ({})", stream_name(n)),
                    );
                }
                Err(e) => return media_error(&mut out, &e),
            },
            "--set" => match value().and_then(decoded) {
                Ok(n) => {
                    set = Some(n);
                    adjust = None;
                    log(&mut out, format!("will set volume to index={n}"));
                }
                Err(e) => return media_error(&mut out, &e),
            },
            "--adj" => match value() {
                Ok(v) => {
                    adjust = Some(v);
                    set = None;
                    log(&mut out, "will adjust volume".to_owned());
                }
                Err(e) => return media_error(&mut out, &e),
            },
            other => {
                return media_error(
                    &mut out,
                    &format!("java.lang.IllegalArgumentException: Unknown argument {other}"),
                );
            }
        }
    }
    const ADJUSTMENTS: [&str; 5] = ["lower", "same", "raise", "mute", "unmute"];
    if let Some(a) = &adjust
        && !ADJUSTMENTS.contains(&a.as_str())
    {
        return media_error(
            &mut out,
            &format!(
                "Error: no valid volume adjustment, was {a}, expected lower|same|raise|mute|unmute"
            ),
        );
    }
    log(&mut out, "Connecting to AudioService".to_owned());
    let modelled = u32::try_from(stream)
        .ok()
        .filter(|n| STREAMS.iter().any(|(s, _)| s == n));
    let Some(v) = modelled.and_then(|n| st.audio.volumes.get_mut(n)) else {
        return media_error(
            &mut out,
            &format!("java.lang.IllegalArgumentException: Bad stream type {stream}"),
        );
    };
    if let Some(index) = set {
        if index < i64::from(v.min) || index > i64::from(v.max) {
            let (min, max) = (v.min, v.max);
            return media_error(
                &mut out,
                &format!(
                    "Error: invalid volume index {index} for stream {stream} (should be in [{min}..{max}])"
                ),
            );
        }
        v.index = index as u32;
    }
    match adjust.as_deref() {
        Some("raise") => {
            v.muted = false;
            v.index = (v.index + 1).min(v.max);
        }
        Some("lower") => v.index = v.index.saturating_sub(1).max(v.min),
        Some("mute") => v.muted = true,
        Some("unmute") => v.muted = false,
        _ => {}
    }
    if get {
        log(
            &mut out,
            format!("volume is {} in range [{}..{}]", v.index, v.min, v.max),
        );
    }
    done(out, 0)
}

fn wifi(st: &mut PhoneState, args: &[String]) -> CommandResult {
    let Some(sub) = args.first().map(String::as_str) else {
        return ok_text(
            "Wi-Fi (wifi) commands:\n  help or -h\n    Print this help text.\n  set-wifi-enabled enabled|disabled\n    Enables/disables Wifi on this device.\n  list-scan-results\n    Lists the latest scan results\n  start-scan\n    Start a new scan\n  status\n    Current wifi status\n",
        );
    };
    match sub {
        "set-wifi-enabled" => match args.get(1).map(String::as_str) {
            Some("enabled") => {
                set_wifi(st, true);
                ok_text("")
            }
            Some("disabled") => {
                set_wifi(st, false);
                ok_text("")
            }
            Some(other) => fail(
                &format!(
                    "Invalid args for set-wifi-enabled: java.lang.IllegalArgumentException: Expected 'enabled' or 'disabled' as next arg but got '{other}'\n"
                ),
                "",
                255,
            ),
            None => fail(
                "Invalid args for set-wifi-enabled: java.lang.IllegalArgumentException: Argument expected after \"set-wifi-enabled\"\n",
                "",
                255,
            ),
        },
        "start-scan" => {
            if st.wifi.enabled {
                st.wifi.last_scan_epoch_ms = clock::now_ms();
            }
            ok_text("")
        }
        "list-scan-results" => {
            if !st.wifi.enabled || st.wifi.scan_results.is_empty() {
                ok_text("No scan results\n")
            } else {
                ok_text(dumpsys::scan_table(st))
            }
        }
        "status" => {
            let w = &st.wifi;
            let mut s = format!(
                "Wifi is {}\n",
                if w.enabled { "enabled" } else { "disabled" }
            );
            wl!(s, "Wifi scanning is only available when wifi is enabled");
            if w.enabled {
                wl!(s, "==== Primary ClientModeManager instance ====");
                if w.connected {
                    wl!(s, "Wifi is connected to \"{}\"", w.ssid);
                    wl!(s, "WifiInfo: {}", dumpsys::wifi_info(st));
                } else {
                    wl!(s, "Wifi is not connected");
                }
            }
            ok_text(s)
        }
        other => unknown(other),
    }
}

fn audio(st: &mut PhoneState, args: &[String]) -> CommandResult {
    match args.first().map(String::as_str) {
        Some("set-ringer-mode") => {
            let mode = match args.get(1).map(String::as_str) {
                None => return fail("", "Error: no ringer mode specified\n", 1),
                Some("NORMAL") => RingerMode::Normal,
                Some("VIBRATE") => RingerMode::Vibrate,
                Some("SILENT") => RingerMode::Silent,
                Some(_) => {
                    return fail(
                        "",
                        "Error: invalid value of ringerMode, should be one of NORMAL|SILENT|VIBRATE\n",
                        1,
                    );
                }
            };
            st.audio.ringer_mode = mode;
            ok_text("")
        }
        None | Some("help" | "-h") => ok_text(
            "Audio manager commands:\n  help\n    Print this help text.\n  set-ringer-mode NORMAL|SILENT|VIBRATE\n    Sets the Ringer mode to one of NORMAL|SILENT|VIBRATE\n",
        ),
        Some(other) => unknown(other),
    }
}

fn power(st: &mut PhoneState, args: &[String]) -> CommandResult {
    match args.first().map(String::as_str) {
        Some("set-mode") => {
            let Some(arg) = args.get(1) else {
                return fail(
                    "Error: java.lang.IllegalArgumentException: Argument expected after \"set-mode\"\n",
                    "",
                    255,
                );
            };
            match arg.parse::<i32>() {
                Ok(mode) => {
                    st.power_save = mode == 1;
                    ok_text("")
                }
                Err(_) => fail(
                    &format!(
                        "Error: java.lang.NumberFormatException: For input string: \"{arg}\"\n"
                    ),
                    "",
                    255,
                ),
            }
        }
        None | Some("help" | "-h") => ok_text(
            "Power manager (power) commands:\n  help\n    Print this help text.\n\n  set-adaptive-power-saver-enabled [true|false]\n    enables or disables adaptive power saver.\n  set-mode MODE\n    sets the power mode of the device to MODE.\n    1 turns low power mode on and 0 turns low power mode off.\n",
        ),
        Some(other) => unknown(other),
    }
}

/// `KeyEvent` names and codes the phone reacts to or accepts.
const KEYCODES: [(&str, u32); 32] = [
    ("HOME", 3),
    ("BACK", 4),
    ("CALL", 5),
    ("ENDCALL", 6),
    ("DPAD_UP", 19),
    ("DPAD_DOWN", 20),
    ("DPAD_LEFT", 21),
    ("DPAD_RIGHT", 22),
    ("DPAD_CENTER", 23),
    ("VOLUME_UP", 24),
    ("VOLUME_DOWN", 25),
    ("POWER", 26),
    ("CAMERA", 27),
    ("TAB", 61),
    ("SPACE", 62),
    ("ENTER", 66),
    ("DEL", 67),
    ("HEADSETHOOK", 79),
    ("MENU", 82),
    ("MEDIA_PLAY_PAUSE", 85),
    ("MEDIA_STOP", 86),
    ("MEDIA_NEXT", 87),
    ("MEDIA_PREVIOUS", 88),
    ("MEDIA_REWIND", 89),
    ("MEDIA_FAST_FORWARD", 90),
    ("MUTE", 91),
    ("MEDIA_PLAY", 126),
    ("MEDIA_PAUSE", 127),
    ("VOLUME_MUTE", 164),
    ("APP_SWITCH", 187),
    ("SLEEP", 223),
    ("WAKEUP", 224),
];

fn keycode(arg: &str) -> Option<u32> {
    if let Ok(n) = arg.parse::<u32>() {
        return Some(n);
    }
    let name = arg.strip_prefix("KEYCODE_").unwrap_or(arg);
    KEYCODES
        .iter()
        .chain(super::screen::MORE_KEYCODES.iter())
        .find(|(n, _)| *n == name)
        .map(|(_, c)| *c)
}

fn press(st: &mut PhoneState, code: u32) {
    if super::screen::key(st, code) {
        return;
    }
    let playing = st
        .media
        .as_ref()
        .is_some_and(|m| m.state == PlaybackState::Playing);
    let volume_stream = if playing { 3 } else { 2 };
    match code {
        3 | 4 => st.foreground = PhoneState::HOME.to_owned(),
        24 | 25 => {
            if let Some(v) = st.audio.volumes.get_mut(volume_stream) {
                if code == 24 {
                    v.muted = false;
                    v.index = (v.index + 1).min(v.max);
                } else {
                    v.index = v.index.saturating_sub(1).max(v.min);
                }
            }
        }
        164 => {
            if let Some(v) = st.audio.volumes.get_mut(volume_stream) {
                v.muted = !v.muted;
            }
        }
        26 => st.display.screen_on = !st.display.screen_on,
        223 => st.display.screen_on = false,
        224 => st.display.screen_on = true,
        85 => media_key(st, "play-pause"),
        79 => media_key(st, "headsethook"),
        86 => media_key(st, "stop"),
        87 => media_key(st, "next"),
        88 => media_key(st, "previous"),
        126 => media_key(st, "play"),
        127 => media_key(st, "pause"),
        _ => {}
    }
}

const INPUT_USAGE: &str = "Usage: input [<source>] [-d DISPLAY_ID] <command> [<arg>...]\n\nThe sources are: \n      keyboard\n      touchscreen\n      dpad\n\nThe commands and default sources are:\n      text <string> (Default: keyboard)\n      keyevent [--longpress|--duration <duration to hold key down in ms>] [--doubletap] [--async] [--delay <duration between keycodes in ms>] <key code number or name> ... (Default: keyboard)\n      tap <x> <y> (Default: touchscreen)\n      swipe <x1> <y1> <x2> <y2> [duration(ms)] (Default: touchscreen)\n";

/// `input [SOURCE] keyevent|tap|swipe|text …`.
pub(crate) fn input(st: &mut PhoneState, args: &[String]) -> CommandResult {
    const SOURCES: [&str; 10] = [
        "keyboard",
        "touchscreen",
        "dpad",
        "gamepad",
        "touchpad",
        "mouse",
        "stylus",
        "trackball",
        "joystick",
        "touchnavigation",
    ];
    let mut rest = args;
    if rest.first().is_some_and(|s| SOURCES.contains(&s.as_str())) {
        rest = &rest[1..];
    }
    if rest.first().map(String::as_str) == Some("-d") {
        rest = rest.get(2..).unwrap_or_default();
    }
    let Some(command) = rest.first() else {
        return fail(INPUT_USAGE, "", 1);
    };
    let params = &rest[1..];
    match command.as_str() {
        "keyevent" => {
            let keys: Vec<&String> = params.iter().filter(|a| !a.starts_with("--")).collect();
            if keys.is_empty() {
                return fail(INPUT_USAGE, "", 1);
            }
            let mut codes = Vec::new();
            for k in keys {
                match keycode(k) {
                    Some(c) => codes.push(c),
                    None => {
                        return super::java_exception(
                            "keyevent",
                            &format!("java.lang.IllegalArgumentException: Unknown keycode: {k}"),
                        );
                    }
                }
            }
            for c in codes {
                press(st, c);
            }
            ok_text("")
        }
        "tap" | "swipe" => {
            let nums: Option<Vec<i32>> = params
                .iter()
                .map(|p| p.parse::<f32>().ok().map(|f| f as i32))
                .collect();
            match (command.as_str(), nums.as_deref()) {
                ("tap", Some([x, y])) => super::screen::tap(st, *x, *y),
                ("swipe", Some([x1, y1, x2, y2] | [x1, y1, x2, y2, _])) => {
                    super::screen::swipe(st, (*x1, *y1), (*x2, *y2));
                }
                _ => {
                    return super::java_exception(
                        command,
                        &format!(
                            "java.lang.NumberFormatException: For input string: \"{}\"",
                            params.join(" ")
                        ),
                    );
                }
            }
            ok_text("")
        }
        "draganddrop" | "roll" | "motionevent" | "press" => ok_text(""),
        "text" if !params.is_empty() => {
            super::screen::text(st, &params.join(" "));
            ok_text("")
        }
        _ => fail(INPUT_USAGE, "", 1),
    }
}

/// A vibration duration argument (`Long.parseLong` in AOSP).
fn vibration_ms(arg: Option<&String>) -> Result<u32, CommandResult> {
    let Some(arg) = arg else {
        return Err(fail(
            "",
            "Error: java.lang.IllegalArgumentException: Argument expected after \"oneshot\"\n",
            255,
        ));
    };
    arg.parse::<u32>().map_err(|_| {
        fail(
            "",
            &format!("Error: java.lang.NumberFormatException: For input string: \"{arg}\"\n"),
            255,
        )
    })
}

/// Options before the effect (`-f`, `-d DESCRIPTION`), then the rest.
fn vibration_options(args: &[String]) -> &[String] {
    let mut rest = args;
    while let Some(first) = rest.first() {
        match first.as_str() {
            "-f" => rest = &rest[1..],
            "-d" => rest = rest.get(2..).unwrap_or_default(),
            _ => break,
        }
    }
    rest
}

/// `cmd vibrator_manager synced [-f] [-d DESC] oneshot MS` (Android 12+,
/// `VibratorManagerShellCommand`): prints nothing; the vibration is recorded.
fn vibrator_manager(st: &mut PhoneState, args: &[String]) -> CommandResult {
    match args.first().map(String::as_str) {
        Some("synced") => {
            let rest = vibration_options(&args[1..]);
            match rest.first().map(String::as_str) {
                Some("oneshot") => match vibration_ms(rest.get(1)) {
                    Ok(ms) => {
                        st.alerts.vibrations.push(ms);
                        ok_text("")
                    }
                    Err(failed) => failed,
                },
                Some(other) => unknown(other),
                None => unknown(""),
            }
        }
        Some("cancel") => ok_text(""),
        Some(other) => unknown(other),
        None => ok_text("Vibrator Manager commands:\n  help\n    Prints this help text.\n"),
    }
}

/// `cmd vibrator vibrate [-f] MS` (Android 11, `VibratorService`).
fn vibrator(st: &mut PhoneState, args: &[String]) -> CommandResult {
    match args.first().map(String::as_str) {
        Some("vibrate") => match vibration_ms(vibration_options(&args[1..]).first()) {
            Ok(ms) => {
                st.alerts.vibrations.push(ms);
                ok_text("")
            }
            Err(failed) => failed,
        },
        Some(other) => unknown(other),
        None => ok_text("Vibrator commands:\n  help\n    Prints this help text.\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{phone, run};
    use crate::state::{PlaybackState, RingerMode};

    #[test]
    fn wifi_toggles() {
        let p = phone();
        assert_eq!(
            run(&p, "svc wifi disable"),
            (String::new(), String::new(), 0)
        );
        assert!(!p.state().wifi.enabled);
        assert_eq!(run(&p, "cmd wifi list-scan-results").0, "No scan results\n");
        run(&p, "cmd wifi set-wifi-enabled enabled");
        assert!(p.state().wifi.enabled && p.state().wifi.connected);
        assert_eq!(run(&p, "svc wifi frob").2, 1);
        assert_eq!(run(&p, "cmd wifi set-wifi-enabled maybe").2, 255);
    }

    #[test]
    fn scan_results_table() {
        let p = phone();
        assert_eq!(
            run(&p, "cmd wifi start-scan"),
            (String::new(), String::new(), 0)
        );
        let (out, _, _) = run(&p, "cmd wifi list-scan-results");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[0],
            "    BSSID              Frequency      RSSI           Age(sec)     SSID                                 Flags"
        );
        assert!(
            lines[1].starts_with("  a4:2b:b0:11:22:33       5180    -55(0:-56/1:-61)     0."),
            "{}",
            lines[1]
        );
        assert!(
            lines[1].ends_with("    HomeNet                           [RSN-PSK-CCMP][ESS]"),
            "{}",
            lines[1]
        );
        assert_eq!(lines.len(), 5);
    }

    #[test]
    fn airplane_mode_saves_and_restores_radios() {
        let p = phone();
        assert_eq!(run(&p, "cmd connectivity airplane-mode").0, "disabled\n");
        run(&p, "cmd connectivity airplane-mode enable");
        let s = p.state();
        assert!(s.airplane_mode && !s.wifi.enabled && !s.bluetooth.enabled);
        assert_eq!(run(&p, "cmd connectivity airplane-mode").0, "enabled\n");
        assert_eq!(run(&p, "settings get global airplane_mode_on").0, "1\n");
        run(&p, "cmd connectivity airplane-mode disable");
        let s = p.state();
        assert!(!s.airplane_mode && s.wifi.enabled && s.bluetooth.enabled);
    }

    #[test]
    fn bluetooth_enable_prints_like_the_fixture() {
        let p = phone();
        run(&p, "cmd bluetooth_manager disable");
        assert!(!p.state().bluetooth.enabled);
        assert_eq!(
            run(&p, "cmd bluetooth_manager enable").0,
            "ShellCommand: Exec enable\nenable: Success\n"
        );
        assert!(p.state().bluetooth.enabled);
    }

    #[test]
    fn volume_control() {
        let p = phone();
        let (out, _, status) = run(&p, "cmd media_session volume --stream 3 --set 11");
        assert_eq!(status, 0);
        assert_eq!(
            out,
            "[V] will control stream=3 (STREAM_MUSIC)\n[V] will set volume to index=11\n[V] Connecting to AudioService\n"
        );
        assert_eq!(p.state().audio.volumes.music.index, 11);
        let (out, _, _) = run(&p, "cmd media_session volume --stream 3 --get");
        assert!(out.ends_with("[V] volume is 11 in range [0..15]\n"));
        run(&p, "cmd media_session volume --stream 2 --adj mute");
        assert!(p.state().audio.volumes.ring.muted);
        run(&p, "cmd media_session volume --stream 2 --adj unmute");
        assert!(!p.state().audio.volumes.ring.muted);
        run(&p, "cmd media_session volume --adj lower");
        assert_eq!(p.state().audio.volumes.music.index, 10);
        let (_, err, status) = run(&p, "cmd media_session volume --stream 3 --set 99");
        assert_eq!(status, 255);
        assert!(
            err.ends_with("Error: invalid volume index 99 for stream 3 (should be in [0..15])\n")
        );
        assert_eq!(run(&p, "cmd media_session volume --stream x --get").2, 255);
        assert_eq!(run(&p, "cmd media_session volume --adj sideways").2, 255);
        assert_eq!(run(&p, "cmd media_session volume --stream 7 --get").2, 255);
    }

    #[test]
    fn media_dispatch() {
        let p = phone();
        let after = |cmd: &str| {
            run(&p, cmd);
            p.state().media.expect("a media session")
        };
        assert_eq!(
            after("cmd media_session dispatch play").state,
            PlaybackState::Playing
        );
        assert_eq!(
            after("cmd media_session dispatch next").title,
            "Clair de Lune"
        );
        assert_eq!(
            after("cmd media_session dispatch previous; cmd media_session dispatch previous").title,
            "Take Five"
        );
        assert_eq!(
            after("cmd media_session dispatch pause").state,
            PlaybackState::Paused
        );
        assert_eq!(
            after("input keyevent KEYCODE_MEDIA_PLAY_PAUSE").state,
            PlaybackState::Playing
        );
        assert_eq!(
            after("cmd media_session dispatch stop").state,
            PlaybackState::Stopped
        );
        assert_eq!(run(&p, "cmd media_session dispatch dance").2, 255);
    }

    #[test]
    fn ringer_and_power_mode() {
        let p = phone();
        run(&p, "cmd audio set-ringer-mode VIBRATE");
        assert_eq!(p.state().audio.ringer_mode, RingerMode::Vibrate);
        assert_eq!(run(&p, "cmd audio set-ringer-mode LOUD").2, 1);
        run(&p, "cmd power set-mode 1");
        assert!(p.state().power_save);
        assert_eq!(run(&p, "settings get global low_power").0, "1\n");
        run(&p, "cmd power set-mode 0");
        assert!(!p.state().power_save);
        assert_eq!(run(&p, "cmd power set-mode x").2, 255);
    }

    #[test]
    fn keyevents() {
        let p = phone();
        run(&p, "input keyevent KEYCODE_SLEEP");
        assert!(!p.state().display.screen_on);
        run(&p, "input keyevent 224");
        assert!(p.state().display.screen_on);
        run(&p, "input keyevent KEYCODE_POWER");
        assert!(!p.state().display.screen_on);
        run(&p, "input keyevent 26");
        assert!(p.state().display.screen_on);
        let (_, err, status) = run(&p, "input keyevent KEYCODE_BOGUS");
        assert_eq!(status, 255);
        assert!(err.contains("Unknown keycode: KEYCODE_BOGUS"));
        assert_eq!(run(&p, "input").2, 1);
    }

    /// Android 12+ has the vibrator manager's command, older phones the
    /// single vibrator's; each records the vibration.
    #[test]
    fn vibrators_by_android_version() {
        let p = phone();
        assert_eq!(
            run(&p, "cmd vibrator_manager synced -f oneshot 700"),
            (String::new(), String::new(), 0)
        );
        assert_eq!(run(&p, "cmd vibrator vibrate -f 10").2, 20);
        assert_eq!(run(&p, "cmd vibrator_manager synced oneshot x").2, 255);
        p.update(|s| s.props.sdk = 30);
        assert_eq!(
            run(&p, "cmd vibrator_manager synced -f oneshot 5").1,
            "cmd: Can't find service: vibrator_manager\n"
        );
        assert_eq!(run(&p, "cmd vibrator vibrate -f 300").2, 0);
        assert_eq!(p.state().alerts.vibrations, [700, 300]);
    }

    #[test]
    fn unknown_cmd_service() {
        assert_eq!(
            run(&phone(), "cmd telephony list"),
            (
                String::new(),
                "cmd: Can't find service: telephony\n".to_owned(),
                20
            )
        );
    }
}
