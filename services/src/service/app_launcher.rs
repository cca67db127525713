//! The `app_launcher` service.

use super::*;

actions!(
    /// `app_launcher` actions.
    AppLauncherAction {
        Launch = "launch" (Medium, changes)
            "Start an installed app by package name, optionally a specific activity."
        {
            /// The package to start.
            package: PackageName,
            /// Activity class, e.g. `.MainActivity`.
            activity: Option<String> = Schema::pattern("", ACTIVITY_PATTERN, 255),
        }
        -> AppLaunch
        example(Self::Launch { package: "org.videolan.vlc".try_into()?, activity: None }),
        Stop = "stop" (Medium, changes) "Force-stop an app by package name." {
            /// The package to stop.
            package: PackageName,
        }
        -> AppStopped
        example(Self::Stop { package: "org.videolan.vlc".try_into()? }),
    }
);

records! {
    /// What `app_launcher.launch` answers, from `am start -W`.
    AppLaunch {
        /// The package started.
        package: String,
        /// The component started, `package/activity`.
        component: String,
        /// `ok`, `timeout`, or whatever `am start` printed as `Status:`.
        status: String,
        /// `LaunchState:` as printed, e.g. `COLD`, `WARM`, `HOT`.
        launch_state: Option<String>,
        /// `TotalTime:` in milliseconds.
        total_time_ms: Option<u64>,
    }

    /// What `app_launcher.stop` answers.
    AppStopped {
        /// The package stopped.
        package: String,
        /// Whether it was stopped (`true`).
        stopped: bool,
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
