//! The device side of issue #13's phone services: `dumpsys notification`,
//! `stat` and `base64` over the phone's files, `pm install|uninstall|clear`,
//! and where `SEND`, `SENDTO sms:` and `CALL tel:` intents go. What `am
//! start` delivered is recorded in `PhoneState::content.intents`, extras
//! and all, so tests can check every value arrived as it was sent.

use super::activity::{Intent, Resolved};
use super::{CommandResult, done, fail, ok_text};
use crate::content::{PostedNotification, StartedIntent};
use crate::shell::Output;
use crate::state::PhoneState;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use std::fmt::Write as _;

/// The messaging app `SENDTO sms:` opens.
pub(crate) const MESSAGING: (&str, &str) = (
    "com.google.android.apps.messaging",
    "com.google.android.apps.messaging.ui.conversation.LaunchConversationActivity",
);
/// Where `CALL tel:` goes.
pub(crate) const TELECOM: (&str, &str) = (
    "com.android.server.telecom",
    "com.android.server.telecom.components.UserCallActivity",
);
/// What a `SEND` with several handlers shows: the system's chooser.
const RESOLVER: (&str, &str) = ("android", "com.android.internal.app.ResolverActivity");

/// Where the intents of issue #13 go, when they are one of those.
pub(crate) fn resolve(intent: &Intent) -> Option<Resolved> {
    let scheme = intent
        .data
        .as_deref()
        .and_then(|d| d.split_once(':'))
        .map(|(s, _)| s.to_ascii_lowercase());
    let to = |(p, c): (&str, &str)| Some(Resolved::Activity(p.to_owned(), c.to_owned()));
    match (intent.action.as_deref(), scheme.as_deref()) {
        (Some("android.intent.action.SEND"), None) if intent.mime.is_some() => to(RESOLVER),
        (Some("android.intent.action.SENDTO"), Some("sms" | "smsto")) => to(MESSAGING),
        (Some("android.intent.action.CALL"), Some("tel")) => to(TELECOM),
        _ => None,
    }
}

/// Records a delivered intent.
pub(crate) fn record(st: &mut PhoneState, intent: &Intent, component: &str) {
    st.content.intents.push(StartedIntent {
        action: intent.action.clone(),
        data: intent.data.clone(),
        mime: intent.mime.clone(),
        categories: intent.categories.clone(),
        component: component.to_owned(),
        extras: intent.extras.clone(),
    });
}

/// `dumpsys notification [--noredact]`, in the Android 14 layout.
pub(crate) fn dumpsys_notification(st: &PhoneState, args: &[String]) -> String {
    let noredact = args.iter().any(|a| a == "--noredact");
    let mut out = String::from("Current Notification Manager state:\n  Notification List:\n");
    for n in &st.content.notifications {
        record_dump(&mut out, n, noredact);
    }
    out.push_str("  Notification listeners:\n    Live components (1):\n      ComponentInfo{com.android.systemui/com.android.systemui.statusbar.notification.NotificationListener}\n");
    out
}

/// `cmd notification snooze --for MS KEY` (Android 11+'s
/// `NotificationShellCmd`): the notification leaves the shade. Other
/// subcommands are not emulated.
pub(crate) fn cmd_notification(st: &mut PhoneState, args: &[String]) -> CommandResult {
    const USAGE: &str =
        "usage: cmd notification snooze (--for <msec> | --context <snooze-criterion-id>) <key>\n";
    match args.first().map(String::as_str) {
        Some("snooze") => {}
        Some(other) => return fail("", &format!("Unknown command: {other}\n"), 255),
        None => return fail("", "cmd notification: no command\n", 255),
    }
    let (Some(flag), Some(ms), Some(key)) = (args.get(1), args.get(2), args.get(3)) else {
        return fail(USAGE, "", 1);
    };
    let Ok(ms) = ms.parse::<u64>() else {
        return super::java_exception(
            "snooze",
            &format!("java.lang.NumberFormatException: For input string: \"{ms}\""),
        );
    };
    if !matches!(flag.as_str(), "--for" | "--until" | "--duration") || ms == 0 {
        return fail(USAGE, "", 1);
    }
    // An unknown key is snoozed silently, as on a phone.
    st.content.notifications.retain(|n| n.key() != *key);
    ok_text(format!(
        "snoozing <{key}> until time: {}\n",
        st.boot_epoch_ms + st.uptime_ms() + ms
    ))
}

fn record_dump(out: &mut String, n: &PostedNotification, noredact: bool) {
    let flags = if n.ongoing {
        "ONGOING_EVENT|NO_CLEAR"
    } else {
        "AUTO_CANCEL"
    };
    let key = n.key();
    let _ = writeln!(
        out,
        "    NotificationRecord(0x{:08x}: pkg={} user=UserHandle{{0}} id={} tag=null importance=3 key={key}: Notification(channel=default shortcut=null contentView=null vibrate=null sound=null defaults=0 flags={flags} color=0x00000000 vis=PRIVATE))",
        n.posted_ms as u32 ^ n.id,
        n.package,
        n.id
    );
    let _ = writeln!(out, "      uid={} userId=0", n.uid);
    let _ = writeln!(out, "      opPkg={}", n.package);
    let _ = writeln!(out, "      flags={flags}");
    let _ = writeln!(out, "      key={key}");
    out.push_str("      notification=\n");
    let _ = writeln!(out, "            when={0}/{0}", n.posted_ms);
    out.push_str("            extras={\n");
    let text = |v: &Option<String>| match v {
        None => "null".to_owned(),
        Some(s) if noredact => format!("String ({s})"),
        Some(s) => format!("String [length={}]", s.chars().count()),
    };
    let _ = writeln!(out, "                android.title={}", text(&n.title));
    out.push_str("                android.reduced.images=Boolean (true)\n");
    let _ = writeln!(out, "                android.text={}", text(&n.text));
    out.push_str("            }\n      publicNotification=\n            None\n");
    let _ = writeln!(out, "      mCreationTimeMs={}", n.posted_ms);
    let _ = writeln!(out, "      mUpdateTimeMs={}", n.posted_ms);
}

fn is_dir(st: &PhoneState, path: &str) -> bool {
    st.content.is_dir(path)
}

/// toybox `stat [-L] -c FORMAT FILE…` (`%s`, `%F`, `%n`, `%%`).
pub(crate) fn stat(st: &PhoneState, args: &[String]) -> CommandResult {
    let mut format = None;
    let mut files = Vec::new();
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "-L" => {}
            "-c" => {
                i += 1;
                format = args.get(i).cloned();
            }
            other => files.push(other.to_owned()),
        }
        i += 1;
    }
    let mut out = Output::default();
    let mut status = 0;
    for f in files {
        let (size, kind) = match st.content.file_size(&f) {
            Some(size) => (size, "regular file"),
            None if is_dir(st, &f) => (4096, "directory"),
            None => {
                out.errln(format!("stat: '{f}': No such file or directory"));
                status = 1;
                continue;
            }
        };
        let fmt = format.clone().unwrap_or_else(|| "%n %s %F".to_owned());
        let line = fmt
            .replace("%%", "\u{0}")
            .replace("%s", &size.to_string())
            .replace("%F", kind)
            .replace("%n", &f)
            .replace('\u{0}', "%");
        out.outln(line);
    }
    done(out, status)
}

/// toybox `base64 [-w COLUMNS] FILE` (encode only; 76 columns by default).
pub(crate) fn base64(st: &PhoneState, args: &[String]) -> CommandResult {
    let mut wrap = 76usize;
    let mut file = None;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "-w" => {
                i += 1;
                wrap = args.get(i).and_then(|w| w.parse().ok()).unwrap_or(76);
            }
            "-d" => return fail("", "base64: decoding is not emulated\n", 1),
            other => file = Some(other.to_owned()),
        }
        i += 1;
    }
    let Some(file) = file else {
        return fail("", "base64: needs a file\n", 1);
    };
    let Some(bytes) = st.content.file(&file) else {
        let why = if is_dir(st, &file) {
            "Is a directory"
        } else {
            "No such file or directory"
        };
        return fail("", &format!("base64: {file}: {why}\n"), 1);
    };
    let encoded = STANDARD.encode(&bytes);
    let mut text = String::new();
    if wrap == 0 {
        text.push_str(&encoded);
    } else {
        for line in encoded.as_bytes().chunks(wrap) {
            text.push_str(std::str::from_utf8(line).unwrap_or_default());
            text.push('\n');
        }
    }
    if wrap == 0 {
        text.push('\n');
    }
    ok_text(text)
}

/// `pm install [-r] [-d] [-g] PATH`: the sim's APKs are text files naming
/// the package they install.
pub(crate) fn pm_install(st: &mut PhoneState, args: &[String]) -> CommandResult {
    let Some(path) = args.iter().rfind(|a| !a.starts_with('-')) else {
        return fail(
            "",
            "Error: must either specify a package size or an APK file\n",
            1,
        );
    };
    let Some(bytes) = st.content.files.get(path) else {
        return fail(
            "",
            &format!(
                "Error: Can't open file: {path}\nException occurred while executing 'install':\njava.lang.IllegalArgumentException: Error: Can't open file: {path}\n"
            ),
            255,
        );
    };
    let name = String::from_utf8_lossy(bytes).trim().to_owned();
    let valid = !path.is_empty()
        && path.ends_with(".apk")
        && name.contains('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_');
    if !valid {
        return fail(
            &format!(
                "Failure [INSTALL_PARSE_FAILED_NOT_APK: Failed to parse {path}: Failed to load asset path {path}]\n"
            ),
            "",
            1,
        );
    }
    if st.package(&name).is_none() {
        let uid = 10_300 + st.packages.len() as u32;
        let mut p = crate::state::user_pkg(&name, "~~Zq4Wx8Ec2Rv6Tb0Yn3Um7A==", None, uid);
        p.launcher_activity = Some(format!("{name}.MainActivity"));
        st.packages.push(p);
        st.packages.sort_by(|a, b| a.package.cmp(&b.package));
    }
    ok_text("Performing Streamed Install\nSuccess\n")
}

/// `pm uninstall [-k] PACKAGE`.
pub(crate) fn pm_uninstall(st: &mut PhoneState, args: &[String]) -> CommandResult {
    let Some(pkg) = args.iter().rfind(|a| !a.starts_with('-')).cloned() else {
        return fail("", "Error: package name not specified\n", 1);
    };
    let before = st.packages.len();
    st.packages.retain(|p| p.package != pkg);
    if st.packages.len() == before {
        return fail("Failure [DELETE_FAILED_INTERNAL_ERROR]\n", "", 1);
    }
    st.content.notifications.retain(|n| n.package != pkg);
    if st.foreground_package() == pkg {
        st.foreground = PhoneState::HOME.to_owned();
    }
    ok_text("Success\n")
}

/// `pm clear PACKAGE`.
pub(crate) fn pm_clear(st: &mut PhoneState, args: &[String]) -> CommandResult {
    let Some(pkg) = args.iter().rfind(|a| !a.starts_with('-')).cloned() else {
        return fail("", "Error: no package specified\n", 1);
    };
    if st.package(&pkg).is_none() {
        return fail("Failed\n", "", 1);
    }
    super::activity::force_stop(st, &pkg);
    st.content.notifications.retain(|n| n.package != pkg);
    st.content.cleared.push(pkg);
    ok_text("Success\n")
}
