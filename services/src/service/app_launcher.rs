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
        -> AppLaunch
        example(Self::Launch { package: "org.videolan.vlc".try_into()?, activity: None }),
        Stop = "stop" (Medium, changes) "Force-stop an app by package name." {
            /// The package to stop.
            package: PackageName = package_param(),
        }
        -> AppStopped
        example(Self::Stop { package: "org.videolan.vlc".try_into()? }),
    }
);

records! {
    /// What `app_launcher.launch` answers, from `am start -W`.
    AppLaunch {
        /// The package started.
        package: String = Schema::string(""),
        /// The component started, `package/activity`.
        component: String = Schema::string("the started package/activity"),
        /// `ok`, `timeout`, or whatever `am start` printed as `Status:`.
        status: String = Schema::string("ok or timeout"),
        /// `LaunchState:` as printed, e.g. `COLD`, `WARM`, `HOT`.
        launch_state: Option<String> = Schema::string("COLD, WARM or HOT"),
        /// `TotalTime:` in milliseconds.
        total_time_ms: Option<u64> = Schema::integer("", Some(0), None),
    }

    /// What `app_launcher.stop` answers.
    AppStopped {
        /// The package stopped.
        package: String = Schema::string(""),
        /// Whether it was stopped (`true`).
        stopped: bool = Schema::boolean(""),
    }
}

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
