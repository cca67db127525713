//! The `app_manager` service: install, uninstall and reset apps.

use super::*;

actions!(
    /// `app_manager` actions.
    AppManagerAction {
        Install = "install" (High, changes)
            "Install or update an app from an APK file. Give exactly one of: apk_path, an .apk already on the phone in a directory the daemon allows (by default /data/local/tmp); or host_path, an .apk on the daemon's machine under the host directories the daemon allows (none by default), which is copied to the phone, installed and removed from the phone again."
        {
            /// The APK's absolute path on the phone.
            apk_path: Option<String> = phone_path_param("absolute path of the .apk on the phone"),
            /// The APK's absolute path on the daemon's machine.
            host_path: Option<String> =
                host_path_param("absolute path of the .apk on the daemon's machine"),
        }
        -> AppInstalled
        example(Self::Install { apk_path: Some("/data/local/tmp/game.apk".into()), host_path: None }),
        Uninstall = "uninstall" (High, changes) "Uninstall an app and delete its data." {
            /// The package to remove.
            package: PackageName,
        }
        -> AppUninstalled
        example(Self::Uninstall { package: "com.example.game".try_into()? }),
        ClearData = "clear_data" (High, changes)
            "Erase all of an app's data (accounts, settings, caches), as a fresh install."
        {
            /// The package whose data is erased.
            package: PackageName,
        }
        -> AppDataCleared
        example(Self::ClearData { package: "com.example.notes".try_into()? }),
    }
);

records! {
    /// What `app_manager.install` answers.
    AppInstalled {
        /// The path given: `apk_path` on the phone, or `host_path` on the
        /// daemon's machine.
        apk_path: String,
        /// Whether the APK came from the daemon's machine (`host_path`).
        from_host: bool,
        /// Whether the app is installed (always `true`: a failure is an error).
        installed: bool,
    }

    /// What `app_manager.uninstall` answers.
    AppUninstalled {
        /// The package removed.
        package: String,
        /// Whether it was uninstalled (always `true`: a failure is an error).
        uninstalled: bool,
    }

    /// What `app_manager.clear_data` answers.
    AppDataCleared {
        /// The package whose data was erased.
        package: String,
        /// Whether its data was erased (always `true`: a failure is an error).
        cleared: bool,
    }
}

pub(super) fn spec() -> ServiceSpec {
    ServiceSpec {
        node_type: "appManager",
        id: "app_manager",
        description: "Install, uninstall and reset apps.",
        actions: AppManagerAction::specs(),
        state: None,
        home_assistant: Vec::new(),
        companion_event: None,
    }
}
