//! The `app_launcher` service.

use super::*;

actions!(
    /// `app_launcher` actions.
    AppLauncherAction {
        /// Start an app.
        Launch = "launch" {
            /// The package to start.
            package: PackageName,
            /// A specific activity (`.Main` or a full class name).
            activity: Option<String>,
        },
        /// Force-stop an app.
        Stop = "stop" {
            /// The package to stop.
            package: PackageName,
        },
    }
);

pub(super) fn spec() -> ServiceSpec {
    ServiceSpec {
        node_type: "appLauncher",
        id: "app_launcher",
        description: "Start and stop apps.",
        actions: vec![
            action(
                "launch",
                Risk::Medium,
                true,
                "Start an installed app by package name, optionally a specific activity.",
            )
            .param("package", true, package_param())
            .param(
                "activity",
                false,
                Schema::pattern("activity class, e.g. .MainActivity", ACTIVITY_PATTERN, 255),
            )
            .returns(vec![
                req("package", Schema::string("")),
                req("component", Schema::string("the started package/activity")),
                req("status", Schema::string("ok or timeout")),
                opt("launch_state", Schema::string("COLD, WARM or HOT")),
                opt("total_time_ms", Schema::integer("", Some(0), None)),
            ])
            .example(json!({"package": "org.videolan.vlc"})),
            package_action(
                "stop",
                Risk::Medium,
                "Force-stop an app by package name.",
                "stopped",
                "org.videolan.vlc",
            ),
        ],
        state: None,
        home_assistant: Vec::new(),
        companion_event: None,
    }
}
