//! `am` (activity manager): `start` and `force-stop`, and the intent model
//! that `am start` and `cmd package resolve-activity` / `query-activities`
//! share.
//!
//! Output follows `ActivityManagerShellCommand`: `Starting: Intent { … }`
//! first, errors on stdout with `-W` and on stderr without, and, as on real
//! phones, exit status 0 even when the activity could not be started (the
//! caller has to read the text).

use crate::shell::{CommandResult, Output};
use crate::state::{MediaSession, PhoneState, PlaybackState};

use super::{arg_expected, done, fail, java_exception, ok_text, short_component, split_component};

pub(crate) const ACTION_MAIN: &str = "android.intent.action.MAIN";
const ACTION_VIEW: &str = "android.intent.action.VIEW";
pub(crate) const CATEGORY_LAUNCHER: &str = "android.intent.category.LAUNCHER";
const FLAG_ACTIVITY_NEW_TASK: u32 = 0x1000_0000;

/// An intent as built from command-line options.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Intent {
    pub(crate) action: Option<String>,
    pub(crate) categories: Vec<String>,
    pub(crate) data: Option<String>,
    pub(crate) mime: Option<String>,
    pub(crate) package: Option<String>,
    pub(crate) component: Option<(String, String)>,
    pub(crate) flags: u32,
    pub(crate) has_extras: bool,
    /// Extras as given: option, key, value (`--esn`: no value).
    pub(crate) extras: Vec<(String, String, String)>,
}

/// Options that are not part of the intent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct IntentOptions {
    pub(crate) wait: bool,
    pub(crate) stop_first: bool,
    pub(crate) brief: bool,
    pub(crate) components: bool,
}

/// `Uri.toSafeString()`: web URIs keep only scheme and host.
fn safe_uri(uri: &str) -> String {
    let Some((scheme, rest)) = uri.split_once(':') else {
        return uri.to_owned();
    };
    let lower = scheme.to_ascii_lowercase();
    if ["http", "https", "ftp", "rtsp"].contains(&lower.as_str()) {
        let authority = rest
            .trim_start_matches('/')
            .split(['/', '?', '#'])
            .next()
            .unwrap_or_default();
        let host = authority.rsplit('@').next().unwrap_or_default();
        return format!("{scheme}://{host}/...");
    }
    if ["tel", "sip", "sms", "smsto", "mailto", "nfc"].contains(&lower.as_str()) {
        let masked: String = rest
            .chars()
            .map(|c| if matches!(c, '-' | '@' | '.') { c } else { 'x' })
            .collect();
        return format!("{scheme}:{masked}");
    }
    // Other schemes: the scheme-specific part without query or fragment.
    let ssp = rest.split(['?', '#']).next().unwrap_or_default();
    format!("{scheme}:{ssp}")
}

impl Intent {
    /// `Intent.toShortString` inside `Intent { … }`.
    pub(crate) fn describe(&self, with_flags: bool) -> String {
        let mut parts = Vec::new();
        if let Some(a) = &self.action {
            parts.push(format!("act={a}"));
        }
        if !self.categories.is_empty() {
            parts.push(format!("cat=[{}]", self.categories.join(",")));
        }
        if let Some(d) = &self.data {
            parts.push(format!("dat={}", safe_uri(d)));
        }
        if let Some(t) = &self.mime {
            parts.push(format!("typ={t}"));
        }
        let flags = if with_flags {
            self.flags | FLAG_ACTIVITY_NEW_TASK
        } else {
            self.flags
        };
        if flags != 0 {
            parts.push(format!("flg={flags:#x}"));
        }
        if let Some(p) = &self.package {
            parts.push(format!("pkg={p}"));
        }
        if let Some((p, c)) = &self.component {
            parts.push(format!("cmp={}", short_component(p, c)));
        }
        if self.has_extras {
            parts.push("(has extras)".to_owned());
        }
        format!("Intent {{ {} }}", parts.join(" "))
    }

    /// Parses `am start` / `resolve-activity` arguments.
    ///
    /// `Err` holds the exception text a real phone prints.
    pub(crate) fn parse(args: &[String]) -> Result<(Self, IntentOptions), String> {
        let mut intent = Self::default();
        let mut opts = IntentOptions::default();
        let mut positional: Option<String> = None;
        let mut i = 0;
        let next = |i: &mut usize, opt: &str| -> Result<String, String> {
            let v = args.get(*i).cloned().ok_or_else(|| {
                format!("java.lang.IllegalArgumentException: Argument expected after \"{opt}\"")
            })?;
            *i += 1;
            Ok(v)
        };
        while i < args.len() {
            let a = args[i].clone();
            i += 1;
            match a.as_str() {
                "-a" => intent.action = Some(next(&mut i, &a)?),
                "-d" => intent.data = Some(next(&mut i, &a)?),
                "-t" => intent.mime = Some(next(&mut i, &a)?),
                "-c" => intent.categories.push(next(&mut i, &a)?),
                "-p" => intent.package = Some(next(&mut i, &a)?),
                "-n" => {
                    let v = next(&mut i, &a)?;
                    intent.component = Some(split_component(&v).ok_or_else(|| {
                        format!("java.lang.IllegalArgumentException: Bad component name: {v}")
                    })?);
                }
                "-f" => {
                    let v = next(&mut i, &a)?;
                    let parsed = match v.strip_prefix("0x") {
                        Some(hex) => u32::from_str_radix(hex, 16).ok(),
                        None => v.parse().ok(),
                    };
                    intent.flags = parsed.ok_or_else(|| {
                        format!("java.lang.NumberFormatException: For input string: \"{v}\"")
                    })?;
                }
                "-e" | "--es" | "--ei" | "--ez" | "--el" | "--ef" | "--ed" | "--eu" | "--ecn"
                | "--eia" | "--ela" | "--efa" | "--esa" => {
                    let key = next(&mut i, &a)?;
                    let value = next(&mut i, &a)?;
                    extra_value(&a, &value)?;
                    intent.extras.push((a.clone(), key, value));
                    intent.has_extras = true;
                }
                "--esn" => {
                    let key = next(&mut i, &a)?;
                    intent.extras.push((a.clone(), key, String::new()));
                    intent.has_extras = true;
                }
                "--user"
                | "--display"
                | "--windowingMode"
                | "--activityType"
                | "--task"
                | "-R"
                | "-P"
                | "--start-profiler"
                | "--sampling"
                | "--attach-agent"
                | "--receiver-permission" => {
                    next(&mut i, &a)?;
                }
                "-W" => opts.wait = true,
                "-S" => opts.stop_first = true,
                "--brief" => opts.brief = true,
                "--components" => opts.components = true,
                "-D"
                | "-N"
                | "--streaming"
                | "--track-allocation"
                | "--task-overlay"
                | "--lock-task"
                | "--allow-background-activity-starts" => {}
                flag if flag.starts_with("--activity-")
                    || flag.starts_with("--grant-")
                    || flag == "--exclude-stopped-packages"
                    || flag == "--include-stopped-packages"
                    || flag == "--debug-log-resolution"
                    || flag == "--receiver-registered-only"
                    || flag == "--receiver-replace-pending"
                    || flag == "--receiver-foreground"
                    || flag == "--receiver-no-abort" => {}
                other if other.starts_with('-') && other.len() > 1 => {
                    return Err(format!(
                        "java.lang.IllegalArgumentException: Unknown option: {other}"
                    ));
                }
                _ => {
                    if positional.is_some() {
                        return Err(format!(
                            "java.lang.IllegalArgumentException: Unknown option: {a}"
                        ));
                    }
                    positional = Some(a);
                }
            }
        }
        if let Some(arg) = positional {
            if arg.contains(':') {
                if intent.action.is_none() {
                    intent.action = Some(ACTION_VIEW.to_owned());
                }
                if intent.data.is_none() {
                    intent.data = Some(arg);
                }
            } else {
                if intent.action.is_none() {
                    intent.action = Some(ACTION_MAIN.to_owned());
                }
                if !intent.categories.iter().any(|c| c == CATEGORY_LAUNCHER) {
                    intent.categories.push(CATEGORY_LAUNCHER.to_owned());
                }
                if arg.contains('/') {
                    if intent.component.is_none() {
                        intent.component = Some(split_component(&arg).ok_or_else(|| {
                            format!("java.lang.IllegalArgumentException: Bad component name: {arg}")
                        })?);
                    }
                } else if intent.package.is_none() {
                    intent.package = Some(arg);
                }
            }
        }
        Ok((intent, opts))
    }
}

/// What an intent resolves to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Resolved {
    /// An activity: package and fully-qualified class.
    Activity(String, String),
    /// No activity matches (`START_INTENT_NOT_RESOLVED`).
    Unresolved,
    /// An explicit component that does not exist (`START_CLASS_NOT_FOUND`).
    ClassNotFound,
}

const MEDIA_EXTENSIONS: [&str; 15] = [
    "mp3", "mp4", "m4a", "aac", "ogg", "opus", "flac", "wav", "mkv", "webm", "m3u8", "m3u", "mpd",
    "avi", "mov",
];

fn is_media(intent: &Intent) -> bool {
    if intent
        .mime
        .as_deref()
        .is_some_and(|t| t.starts_with("audio/") || t.starts_with("video/"))
    {
        return true;
    }
    let Some(data) = &intent.data else {
        return false;
    };
    let path = data.split(['?', '#']).next().unwrap_or_default();
    path.rsplit_once('.')
        .is_some_and(|(_, ext)| MEDIA_EXTENSIONS.contains(&ext.to_ascii_lowercase().as_str()))
}

/// What `am` says of a typed extra's value it cannot read, as a real
/// phone does (`Integer.valueOf`, `Long.valueOf`, `Float.valueOf`; `--ez`
/// takes `true`/`false`, `t`/`f` and numbers).
fn extra_value(option: &str, value: &str) -> Result<(), String> {
    let ok = match option {
        "--ei" => value.parse::<i32>().is_ok(),
        "--el" => value.parse::<i64>().is_ok(),
        "--ef" | "--ed" => value.parse::<f64>().is_ok(),
        "--ez" => {
            matches!(
                value.to_ascii_lowercase().as_str(),
                "true" | "t" | "false" | "f"
            ) || value.parse::<i64>().is_ok()
        }
        _ => true,
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "java.lang.NumberFormatException: For input string: \"{value}\""
        ))
    }
}

/// Resolves an intent against the installed packages.
pub(crate) fn resolve(st: &PhoneState, intent: &Intent) -> Resolved {
    if let Some(resolved) = super::content::resolve(intent) {
        return resolved;
    }
    let usable = |pkg: &str| st.package(pkg).filter(|p| p.enabled);
    if let Some((pkg, class)) = &intent.component {
        return match usable(pkg) {
            Some(p) if p.has_activity(class) => Resolved::Activity(pkg.clone(), class.clone()),
            _ => Resolved::ClassNotFound,
        };
    }
    let allowed = |pkg: &str| intent.package.as_deref().is_none_or(|p| p == pkg);
    let action = intent.action.as_deref();
    if let Some(data) = &intent.data {
        let scheme = data.split_once(':').map(|(s, _)| s.to_ascii_lowercase());
        let web = matches!(scheme.as_deref(), Some("http" | "https"));
        if web && matches!(action, None | Some(ACTION_VIEW)) {
            let mut candidates = Vec::new();
            if is_media(intent) {
                candidates.push((
                    "org.videolan.vlc",
                    "org.videolan.vlc.gui.video.VideoPlayerActivity",
                ));
            }
            candidates.push(("com.android.chrome", "com.google.android.apps.chrome.Main"));
            for (pkg, class) in candidates {
                if allowed(pkg) && usable(pkg).is_some_and(|p| p.has_activity(class)) {
                    return Resolved::Activity(pkg.to_owned(), class.to_owned());
                }
            }
        }
        return Resolved::Unresolved;
    }
    if action == Some("android.settings.SETTINGS")
        && allowed("com.android.settings")
        && let Some(class) =
            usable("com.android.settings").and_then(|p| p.launcher_activity.clone())
    {
        return Resolved::Activity("com.android.settings".to_owned(), class);
    }
    let launcherish = matches!(action, None | Some(ACTION_MAIN))
        && intent
            .categories
            .iter()
            .all(|c| c == CATEGORY_LAUNCHER || c == "android.intent.category.DEFAULT");
    if launcherish
        && let Some(pkg) = &intent.package
        && let Some(class) = usable(pkg).and_then(|p| p.launcher_activity.clone())
    {
        return Resolved::Activity(pkg.clone(), class);
    }
    Resolved::Unresolved
}

fn title_from_uri(uri: &str) -> String {
    let path = uri.split(['?', '#']).next().unwrap_or_default();
    let last = path
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or_default();
    let mut bytes = Vec::new();
    let raw = last.as_bytes();
    let mut i = 0;
    while i < raw.len() {
        if raw[i] == b'%' && i + 2 < raw.len() {
            let hex = std::str::from_utf8(&raw[i + 1..i + 3]).ok();
            if let Some(b) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                bytes.push(b);
                i += 3;
                continue;
            }
        }
        bytes.push(raw[i]);
        i += 1;
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// `am start [options] [INTENT]`.
fn start(st: &mut PhoneState, args: &[String]) -> CommandResult {
    let (intent, opts) = match Intent::parse(args) {
        Ok(v) => v,
        Err(e) => return java_exception("start", &e),
    };
    let mut out = Output::default();
    out.outln(format!("Starting: {}", intent.describe(false)));
    let to_err = !opts.wait;
    let say = |out: &mut Output, line: String| {
        if to_err {
            out.errln(line);
        } else {
            out.outln(line);
        }
    };
    let (pkg, class) = match resolve(st, &intent) {
        Resolved::Unresolved => {
            say(
                &mut out,
                format!(
                    "Error: Activity not started, unable to resolve {}",
                    intent.describe(true)
                ),
            );
            return done(out, 0);
        }
        Resolved::ClassNotFound => {
            let (p, c) = intent.component.clone().unwrap_or_default();
            say(&mut out, "Error type 3".to_owned());
            say(
                &mut out,
                format!("Error: Activity class {{{p}/{c}}} does not exist."),
            );
            return done(out, 0);
        }
        Resolved::Activity(p, c) => (p, c),
    };
    let component = short_component(&pkg, &class);
    super::content::record(st, &intent, &format!("{pkg}/{class}"));
    if opts.stop_first {
        force_stop(st, &pkg);
    }
    let running = st.package(&pkg).is_some_and(|p| p.running);
    let on_top = st.foreground == component;
    let (launch_state, total) = if on_top {
        say(
            &mut out,
            "Warning: Activity not started, intent has been delivered to currently running top-most instance.".to_owned(),
        );
        ("UNKNOWN (0)", None)
    } else if running {
        say(
            &mut out,
            "Warning: Activity not started, its current task has been brought to the front"
                .to_owned(),
        );
        ("HOT", Some(95))
    } else {
        ("COLD", Some(412))
    };
    st.foreground = component.clone();
    if let Some(p) = st.package_mut(&pkg) {
        p.running = true;
    }
    st.display.screen_on = true;
    if pkg == "org.videolan.vlc"
        && let Some(data) = &intent.data
    {
        st.media = Some(MediaSession {
            package: pkg.clone(),
            state: PlaybackState::Playing,
            title: title_from_uri(data),
            artist: String::new(),
            position_ms: 0,
            queue: Vec::new(),
        });
    }
    if opts.wait {
        out.outln("Status: ok");
        out.outln(format!("LaunchState: {launch_state}"));
        out.outln(format!("Activity: {component}"));
        if let Some(t) = total {
            out.outln(format!("TotalTime: {t}"));
        }
        out.outln(format!("WaitTime: {}", total.unwrap_or(5) + 3));
        out.outln("Complete");
    }
    done(out, 0)
}

/// Stops a package's process, closing its media session and activity.
pub(crate) fn force_stop(st: &mut PhoneState, pkg: &str) {
    if let Some(p) = st.package_mut(pkg) {
        p.running = false;
    }
    if st.foreground_package() == pkg {
        st.foreground = PhoneState::HOME.to_owned();
    }
    if st.media.as_ref().is_some_and(|m| m.package == pkg) {
        st.media = None;
    }
}

const HELP: &str = "Activity manager (activity) commands:\n  help\n      Print this help text.\n  start-activity [-D] [-N] [-W] [-P <FILE>] [--start-profiler <FILE>]\n          [--sampling INTERVAL] [--streaming] [-R COUNT] [-S]\n          [--track-allocation] [--user <USER_ID> | current] <INTENT>\n      Start an Activity.  Options are:\n      -W: wait for launch to complete\n      -S: force stop the target app before starting the activity\n  force-stop [--user <USER_ID> | all | current] <PACKAGE>\n      Completely stop the given application package.\n";

/// `am …` (also `cmd activity …`).
pub(crate) fn am(st: &mut PhoneState, args: &[String]) -> CommandResult {
    let Some(sub) = args.first() else {
        return fail(HELP, "", 255);
    };
    let rest = &args[1..];
    match sub.as_str() {
        "start" | "start-activity" => start(st, rest),
        "broadcast" => super::screen::broadcast(st, rest),
        "force-stop" | "kill" => {
            let mut it = rest.iter();
            let mut pkg = None;
            while let Some(a) = it.next() {
                if a == "--user" {
                    it.next();
                } else {
                    pkg = Some(a.clone());
                }
            }
            let Some(pkg) = pkg else {
                return arg_expected(sub, sub);
            };
            if sub == "force-stop" {
                force_stop(st, &pkg);
            } else if st.foreground_package() != pkg {
                // `am kill` only kills background processes.
                if let Some(p) = st.package_mut(&pkg) {
                    p.running = false;
                }
            }
            ok_text("")
        }
        "help" | "-h" => ok_text(HELP),
        other => fail(&format!("Unknown command: {other}\n"), "", 255),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{phone, run};
    use super::*;

    #[test]
    fn start_with_wait_cold() {
        let p = phone();
        let (out, err, status) = run(&p, "am start -W -n com.example.notes/.MainActivity");
        assert_eq!(status, 0);
        assert_eq!(err, "");
        assert_eq!(
            out,
            "Starting: Intent { cmp=com.example.notes/.MainActivity }\nStatus: ok\nLaunchState: COLD\nActivity: com.example.notes/.MainActivity\nTotalTime: 412\nWaitTime: 415\nComplete\n"
        );
        assert_eq!(p.state().foreground, "com.example.notes/.MainActivity");
        // Again: already on top.
        let (out, _, _) = run(&p, "am start -W -n com.example.notes/.MainActivity");
        assert!(out.contains("Warning: Activity not started, intent has been delivered to currently running top-most instance.\nStatus: ok\nLaunchState: UNKNOWN (0)\n"));
    }

    #[test]
    fn unknown_component_is_error_type_3() {
        let p = phone();
        let (out, _, status) = run(&p, "am start -W -n com.nope/.Main");
        assert_eq!(status, 0);
        assert_eq!(
            out,
            "Starting: Intent { cmp=com.nope/.Main }\nError type 3\nError: Activity class {com.nope/com.nope.Main} does not exist.\n"
        );
        // Without -W the error goes to stderr.
        let (out, err, _) = run(&p, "am start -n com.example.notes/.Missing");
        assert_eq!(out, "Starting: Intent { cmp=com.example.notes/.Missing }\n");
        assert!(err.contains("does not exist."));
        // A disabled package cannot be launched.
        assert!(
            run(&p, "am start -W -n com.example.legacy/.HomeActivity")
                .0
                .contains("Error type 3")
        );
    }

    #[test]
    fn package_only_resolves_launcher_or_fails_like_fenix() {
        let p = phone();
        let (out, _, _) = run(&p, "am start -W org.mozilla.fenix");
        assert_eq!(
            out,
            "Starting: Intent { act=android.intent.action.MAIN cat=[android.intent.category.LAUNCHER] pkg=org.mozilla.fenix }\nError: Activity not started, unable to resolve Intent { act=android.intent.action.MAIN cat=[android.intent.category.LAUNCHER] flg=0x10000000 pkg=org.mozilla.fenix }\n"
        );
        assert!(
            run(&p, "am start -W com.spotify.music")
                .0
                .contains("Activity: com.spotify.music/.MainActivity\n")
        );
    }

    #[test]
    fn view_url_opens_browser_or_player() {
        let p = phone();
        let (out, _, _) = run(
            &p,
            "am start -W -a android.intent.action.VIEW -d 'https://example.com/radio/stream.mp3?x=1'",
        );
        assert!(out.starts_with("Starting: Intent { act=android.intent.action.VIEW dat=https://example.com/... }\nStatus: ok\n"));
        assert!(out.contains("Activity: org.videolan.vlc/.gui.video.VideoPlayerActivity\n"));
        let media = p.state().media.expect("a session");
        assert_eq!(
            (media.package.as_str(), media.state, media.title.as_str()),
            ("org.videolan.vlc", PlaybackState::Playing, "stream.mp3")
        );
        let (out, _, _) = run(
            &p,
            "am start -W -a android.intent.action.VIEW -d https://example.com/page",
        );
        assert!(out.contains("Activity: com.android.chrome/com.google.android.apps.chrome.Main\n"));
        let (out, _, _) = run(
            &p,
            "am start -W -a android.intent.action.VIEW -d exp://127.0.0.1:19004/--/x",
        );
        assert!(out.contains("unable to resolve Intent { act=android.intent.action.VIEW dat=exp://127.0.0.1:19004/--/x flg=0x10000000 }"));
    }

    #[test]
    fn force_stop_and_bad_args() {
        let p = phone();
        run(&p, "am start -W -n com.example.notes/.MainActivity");
        assert_eq!(
            run(&p, "am force-stop com.example.notes"),
            (String::new(), String::new(), 0)
        );
        assert_eq!(p.state().foreground, PhoneState::HOME);
        assert_eq!(run(&p, "am force-stop").2, 255);
        assert_eq!(run(&p, "am start --bogus x").2, 255);
        assert_eq!(run(&p, "am frob").0, "Unknown command: frob\n");
    }

    #[test]
    fn extras_and_safe_uris() {
        let (i, _) = Intent::parse(&[
            "-e".to_owned(),
            "k".to_owned(),
            "v".to_owned(),
            "com.a/.B".to_owned(),
        ])
        .expect("parses");
        assert_eq!(
            i.describe(false),
            "Intent { act=android.intent.action.MAIN cat=[android.intent.category.LAUNCHER] cmp=com.a/.B (has extras) }"
        );
        assert_eq!(safe_uri("tel:555-1234"), "tel:xxx-xxxx");
        assert_eq!(
            safe_uri("https://user@host:8080/p?q"),
            "https://host:8080/..."
        );
    }
}
