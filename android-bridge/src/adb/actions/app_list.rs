//! The `app_list` service over ADB: `pm list packages`.

use super::*;
use droidwarden_services::{AppListAction, InstalledApps};

pub(super) async fn run(sh: &dyn Shell, action: &AppListAction) -> Result<Value, BridgeError> {
    let AppListAction::List {
        include_system,
        include_disabled,
    } = action;
    let mut argv = vec!["pm", "list", "packages", "-f"];
    if !include_system.unwrap_or(false) {
        argv.push("-3");
    }
    if !include_disabled.unwrap_or(false) {
        argv.push("-e");
    }
    let packages = read(sh, &argv, parse::package_list).await?;
    answer(InstalledApps {
        count: packages.len() as u64,
        packages,
    })
}
