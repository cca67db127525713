//! The `app_launcher` service over ADB: `am start` of a package's launcher
//! activity (or a named one) and `am force-stop`.

use super::*;
use droidwarden_services::{AppLaunch, AppLauncherAction, AppStopped};

pub(super) async fn run(sh: &dyn Shell, action: &AppLauncherAction) -> Result<Value, BridgeError> {
    match action {
        AppLauncherAction::Launch { package, activity } => {
            launch(sh, package.as_str(), activity.as_deref()).await
        }
        AppLauncherAction::Stop { package } => {
            let package = package.as_str();
            installed(sh, package).await?;
            ok(sh, &["am", "force-stop", package]).await?;
            answer(AppStopped {
                package: package.to_owned(),
                stopped: true,
            })
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
