//! The device commands of the phone services of issue #13: notifications,
//! intents, files, app management, telephony and the shell. The table is in
//! `docs/adb-commands.md`; `docs/phone-services.md` explains the choices.
//!
//! Every value a caller gave is one element of an argv, quoted by the
//! transport's shell (`shell::quote`), never spliced into a command string.
//! What the daemon's configuration allows (schemes, directories, numbers,
//! services that are off) is checked before a call reaches a transport
//! (`droidwarden_services::PhonePolicy`, at the hub); the checks that hold
//! whatever the configuration says are repeated here, so a transport used
//! on its own refuses them too.

use super::{Shell, answer, ok, parsed, read};
use crate::adb::parse;
use crate::error::BridgeError;
use droidwarden_services::{
    ActivityStarted, AppDataCleared, AppInstalled, AppManagerAction, AppUninstalled, CallPlaced,
    ErrorCode, FilePulled, FilesAction, IntentsAction, NotificationList, NotificationsAction,
    ShellAction, ShellRun, SmsComposed, TelephonyAction, TextShared, UrlOpened, WireError,
    plain_absolute_path, refuse_dangerous_scheme,
};
use serde_json::Value;

/// The largest file `files.pull` returns (before base64).
pub const MAX_PULL_BYTES: u64 = 1024 * 1024;
/// The most output `shell.run` returns per stream.
pub const MAX_SHELL_OUTPUT: usize = 64 * 1024;

fn refused(code: ErrorCode, message: impl Into<String>) -> BridgeError {
    BridgeError::Refused(WireError::new(code, message))
}

pub(super) async fn notifications(
    sh: &dyn Shell,
    action: &NotificationsAction,
) -> Result<Value, BridgeError> {
    let NotificationsAction::List { package } = action;
    let argv = ["dumpsys", "notification", "--noredact"];
    let out = sh.run(&argv).await?;
    // Notification texts are the apps' words and may span lines that start
    // at column 0 with anything ("Error: payment failed"): only a failed
    // exit, stderr, or a denial in place of the dump's header is an error.
    let denied = out
        .stdout
        .lines()
        .find(|l| !l.trim().is_empty())
        .is_some_and(|l| l.starts_with("Permission Denial"));
    if out.exit != 0 || denied {
        let stdout = if denied { out.stdout.as_str() } else { "" };
        let failure =
            parse::classify_device_error(stdout, &out.stderr, out.exit.max(i32::from(denied)))
                .unwrap_or(parse::DeviceFailure {
                    kind: parse::FailureKind::Other,
                    message: format!("`dumpsys notification` exited {}", out.exit),
                });
        return Err(super::from_failure(
            sh.device_name(),
            failure,
            Some(out.exit),
        ));
    }
    parsed(
        sh.device_name(),
        &argv,
        parse::dump_complete(&argv.join(" "), &out.stdout, &out.stderr),
    )?;
    let mut list = parsed(sh.device_name(), &argv, parse::notifications(&out.stdout))?;
    if let Some(package) = package {
        list.notifications.retain(|n| n.package == package.as_str());
    }
    answer(NotificationList {
        count: list.notifications.len() as u64,
        redacted: list.redacted,
        notifications: list.notifications,
    })
}

async fn am_start(sh: &dyn Shell, argv: &[&str]) -> Result<parse::AmStart, BridgeError> {
    read(sh, argv, parse::am_start).await
}

fn wire(e: WireError) -> BridgeError {
    BridgeError::Refused(e)
}

pub(super) async fn intents(sh: &dyn Shell, action: &IntentsAction) -> Result<Value, BridgeError> {
    match action {
        IntentsAction::OpenUrl { url } => {
            refuse_dangerous_scheme(url).map_err(wire)?;
            // BROWSABLE: only activities that accept links from a browser.
            let started = super::view(sh, url, Some("android.intent.category.BROWSABLE")).await?;
            answer(UrlOpened {
                url: url.clone(),
                status: started.status,
                activity: started.activity,
            })
        }
        IntentsAction::ShareText { text } => {
            let argv = [
                "am",
                "start",
                "-W",
                "-a",
                "android.intent.action.SEND",
                "-t",
                "text/plain",
                "--es",
                "android.intent.extra.TEXT",
                text.as_str(),
            ];
            am_start(sh, &argv).await?;
            answer(TextShared {
                shared: true,
                length: text.chars().count() as u64,
            })
        }
        IntentsAction::StartActivity {
            component,
            action,
            data,
            extras,
        } => {
            if component.is_none() && action.is_none() {
                return Err(refused(
                    ErrorCode::InvalidParams,
                    "start_activity needs a component or an action",
                ));
            }
            if let Some(data) = data {
                refuse_dangerous_scheme(data).map_err(wire)?;
            }
            let mut argv: Vec<&str> = vec!["am", "start", "-W"];
            if let Some(c) = component {
                argv.extend(["-n", c.as_str()]);
            }
            if let Some(a) = action {
                argv.extend(["-a", a.as_str()]);
            }
            if let Some(d) = data {
                argv.extend(["-d", d.as_str()]);
            }
            for extra in extras.iter().flatten() {
                argv.extend([extra.kind().am_option(), extra.key(), extra.value()]);
            }
            let started = am_start(sh, &argv).await?;
            let asked = component.as_deref().or(action.as_deref()).unwrap_or("");
            answer(ActivityStarted {
                component: asked.to_owned(),
                status: started.status,
                activity: started.activity,
            })
        }
    }
}

pub(super) async fn files(sh: &dyn Shell, action: &FilesAction) -> Result<Value, BridgeError> {
    let path = match action {
        FilesAction::Pull { path } => path,
        push @ FilesAction::Push { .. } => return super::transfer::push(sh, push).await,
    };
    if !plain_absolute_path(path) {
        return Err(refused(
            ErrorCode::InvalidParams,
            format!("{path:?}: paths must be absolute, without empty, . or .. parts"),
        ));
    }
    let stat = ["stat", "-L", "-c", "%s %F", path.as_str()];
    let out = ok(sh, &stat).await.map_err(|e| match e {
        BridgeError::Device { message, .. } if message.contains("No such file") => {
            BridgeError::NotFound {
                message: format!("{path}: no such file on the phone"),
            }
        }
        other => other,
    })?;
    let (size, kind) = out.trim().split_once(' ').unwrap_or((out.trim(), ""));
    let size: u64 = size.parse().map_err(|_| BridgeError::UnexpectedOutput {
        command: stat.join(" "),
        detail: format!("not a size: {:?}", out.trim()),
    })?;
    if !kind.starts_with("regular") {
        return Err(refused(
            ErrorCode::InvalidParams,
            format!("{path} is a {kind}, not a regular file"),
        ));
    }
    if size > MAX_PULL_BYTES {
        return Err(refused(
            ErrorCode::Denied,
            format!("{path} has {size} bytes; files.pull returns at most {MAX_PULL_BYTES}"),
        ));
    }
    let argv = ["base64", "-w", "0", path.as_str()];
    let encoded: String = ok(sh, &argv)
        .await?
        .chars()
        .filter(|c| !c.is_ascii_whitespace())
        .collect();
    let decoded = parsed(sh.device_name(), &argv, base64_len(&encoded))?;
    if decoded as u64 > MAX_PULL_BYTES {
        return Err(refused(
            ErrorCode::Denied,
            format!("{path} grew past {MAX_PULL_BYTES} bytes while it was read"),
        ));
    }
    answer(FilePulled {
        path: path.clone(),
        size_bytes: decoded as u64,
        content_base64: encoded,
    })
}

/// The number of bytes a standard base64 text encodes.
fn base64_len(text: &str) -> Result<usize, parse::ParseError> {
    let valid = text.len().is_multiple_of(4)
        && text
            .trim_end_matches('=')
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
        && text.len() - text.trim_end_matches('=').len() <= 2;
    if !valid {
        return Err(parse::ParseError::Malformed {
            command: "base64",
            detail: "the output is not standard base64".into(),
        });
    }
    let pad = text.len() - text.trim_end_matches('=').len();
    Ok(text.len() / 4 * 3 - pad)
}

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

async fn pm(sh: &dyn Shell, command: &'static str, argv: &[&str]) -> Result<(), BridgeError> {
    let out = sh.run(argv).await?;
    pm_result(sh, command, argv, &out)
}

/// The verdict of a `pm` command's output.
pub(super) fn pm_result(
    sh: &dyn Shell,
    command: &'static str,
    argv: &[&str],
    out: &super::ShellOutput,
) -> Result<(), BridgeError> {
    // `pm` prints `Failure [...]` with a non-zero exit on newer releases
    // and exit 0 on older ones: its own words are the error either way.
    match parse::pm_outcome(command, &out.stdout) {
        Ok(()) => Ok(()),
        Err(parse::ParseError::Malformed { detail, .. })
            if !detail.is_empty() && out.stderr.trim().is_empty() =>
        {
            Err(BridgeError::Device {
                message: format!("`{command}`: {detail}"),
                exit: Some(out.exit),
            })
        }
        Err(e) => {
            if let Some(f) = parse::classify_device_error(&out.stdout, &out.stderr, out.exit.max(1))
            {
                return Err(super::from_failure(sh.device_name(), f, Some(out.exit)));
            }
            Err(BridgeError::UnexpectedOutput {
                command: argv.join(" "),
                detail: e.to_string(),
            })
        }
    }
}

pub(super) async fn app_manager(
    sh: &dyn Shell,
    action: &AppManagerAction,
) -> Result<Value, BridgeError> {
    match action {
        AppManagerAction::Install {
            apk_path: None,
            host_path: Some(host),
        } => super::transfer::install_from_host(sh, host).await,
        AppManagerAction::Install {
            apk_path: Some(apk_path),
            host_path: None,
        } => {
            if !plain_absolute_path(apk_path) {
                return Err(refused(
                    ErrorCode::InvalidParams,
                    format!("{apk_path:?}: paths must be absolute, without empty, . or .. parts"),
                ));
            }
            super::transfer::install(sh, apk_path).await?;
            answer(AppInstalled {
                apk_path: apk_path.clone(),
                from_host: false,
                installed: true,
            })
        }
        AppManagerAction::Install { .. } => Err(refused(
            ErrorCode::InvalidParams,
            "install needs exactly one of apk_path (an APK on the phone) and host_path (an APK on the daemon's machine)",
        )),
        AppManagerAction::Uninstall { package } => {
            installed(sh, package.as_str()).await?;
            pm(sh, "pm uninstall", &["pm", "uninstall", package.as_str()]).await?;
            answer(AppUninstalled {
                package: package.as_str().to_owned(),
                uninstalled: true,
            })
        }
        AppManagerAction::ClearData { package } => {
            installed(sh, package.as_str()).await?;
            pm(sh, "pm clear", &["pm", "clear", package.as_str()]).await?;
            answer(AppDataCleared {
                package: package.as_str().to_owned(),
                cleared: true,
            })
        }
    }
}

pub(super) async fn telephony(
    sh: &dyn Shell,
    action: &TelephonyAction,
) -> Result<Value, BridgeError> {
    match action {
        TelephonyAction::SmsSend { number, text } => {
            let uri = format!("smsto:{number}");
            let argv = [
                "am",
                "start",
                "-W",
                "-a",
                "android.intent.action.SENDTO",
                "-d",
                &uri,
                "--es",
                "sms_body",
                text.as_str(),
                "--ez",
                "exit_on_sent",
                "true",
            ];
            am_start(sh, &argv).await?;
            answer(SmsComposed {
                number: number.clone(),
                status: "composed".into(),
            })
        }
        TelephonyAction::Dial { number } => {
            let uri = format!("tel:{number}");
            let argv = [
                "am",
                "start",
                "-W",
                "-a",
                "android.intent.action.CALL",
                "-d",
                &uri,
            ];
            am_start(sh, &argv).await?;
            answer(CallPlaced {
                number: number.clone(),
                calling: true,
            })
        }
    }
}

/// At most `max` bytes of `text`, cut at a character boundary.
fn bounded(text: &str, max: usize) -> (&str, bool) {
    if text.len() <= max {
        return (text, false);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (&text[..end], true)
}

pub(super) async fn shell(sh: &dyn Shell, action: &ShellAction) -> Result<Value, BridgeError> {
    let ShellAction::Run { argv } = action;
    let argv: Vec<&str> = argv.as_slice().iter().map(String::as_str).collect();
    let out = sh.run(&argv).await?;
    let (stdout, cut_out) = bounded(&out.stdout, MAX_SHELL_OUTPUT);
    let (stderr, cut_err) = bounded(&out.stderr, MAX_SHELL_OUTPUT);
    answer(ShellRun {
        exit: i64::from(out.exit),
        stdout: stdout.to_owned(),
        stderr: stderr.to_owned(),
        truncated: cut_out || cut_err,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_lengths() {
        assert_eq!(base64_len("").unwrap(), 0);
        assert_eq!(base64_len("aGk=").unwrap(), 2);
        assert_eq!(base64_len("aGVsbG8=").unwrap(), 5);
        assert_eq!(base64_len("aGVs").unwrap(), 3);
        assert!(base64_len("aGk").is_err());
        assert!(base64_len("a$k=").is_err());
        assert!(base64_len("a===").is_err());
    }

    #[test]
    fn output_is_cut_at_a_character_boundary() {
        assert_eq!(bounded("héllo", 2), ("h", true));
        assert_eq!(bounded("abc", 3), ("abc", false));
    }
}
