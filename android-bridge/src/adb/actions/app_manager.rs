//! The `app_manager` service over ADB: `pm` install (the file itself is
//! sent by `transfer.rs`), uninstall and clear, and the verdict of every
//! `pm` command.

use super::*;
use droidwarden_services::{
    AppDataCleared, AppInstalled, AppManagerAction, AppUninstalled, ErrorCode, plain_absolute_path,
};

pub(super) async fn run(sh: &dyn Shell, action: &AppManagerAction) -> Result<Value, BridgeError> {
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
