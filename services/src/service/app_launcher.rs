//! The `app_launcher` service.

use super::*;

actions!(
    /// `app_launcher` actions.
    AppLauncherAction {
        Launch = "launch" (Medium, changes)
            "Start an installed app by package name, optionally a specific activity."
        {
            /// The package to start.
            package: PackageName = package_param(),
            /// A specific activity (`.Main` or a full class name).
            activity: Option<String> =
                Schema::pattern("activity class, e.g. .MainActivity", ACTIVITY_PATTERN, 255),
        }
        returns(vec![
            req("package", Schema::string("")),
            req("component", Schema::string("the started package/activity")),
            req("status", Schema::string("ok or timeout")),
            opt("launch_state", Schema::string("COLD, WARM or HOT")),
            opt("total_time_ms", Schema::integer("", Some(0), None)),
        ])
        example(Self::Launch { package: "org.videolan.vlc".try_into()?, activity: None }),
        Stop = "stop" (Medium, changes) "Force-stop an app by package name." {
            /// The package to stop.
            package: PackageName = package_param(),
        }
        returns(package_done("stopped"))
        example(Self::Stop { package: "org.videolan.vlc".try_into()? }),
    }
);

pub(super) fn spec() -> ServiceSpec {
    ServiceSpec {
        node_type: "appLauncher",
        id: "app_launcher",
        description: "Start and stop apps.",
        actions: AppLauncherAction::specs(),
        state: None,
        home_assistant: Vec::new(),
        companion_event: None,
    }
}
