//! The `app_manager` service: install, uninstall and reset apps.

use super::*;

actions!(
    /// `app_manager` actions.
    AppManagerAction {
        /// Install (or update) an APK on the phone or on the daemon's machine.
        Install = "install" {
            /// The APK's absolute path on the phone.
            apk_path: Option<String>,
            /// The APK's absolute path on the daemon's machine.
            host_path: Option<String>,
        },
        /// Remove an app.
        Uninstall = "uninstall" {
            /// The package to remove.
            package: PackageName,
        },
        /// Erase an app's data.
        ClearData = "clear_data" {
            /// The package whose data is erased.
            package: PackageName,
        },
    }
);

pub(super) fn spec() -> ServiceSpec {
    ServiceSpec {
        node_type: "appManager",
        id: "app_manager",
        description: "Install, uninstall and reset apps.",
        actions: vec![
            action(
                "install",
                Risk::High,
                true,
                "Install or update an app from an APK file. Give exactly one of: apk_path, an .apk already on the phone in a directory the daemon allows (by default /data/local/tmp); or host_path, an .apk on the daemon's machine under the host directories the daemon allows (none by default), which is copied to the phone, installed and removed from the phone again.",
            )
            .param(
                "apk_path",
                false,
                phone_path_param("absolute path of the .apk on the phone"),
            )
            .param(
                "host_path",
                false,
                host_path_param("absolute path of the .apk on the daemon's machine"),
            )
            .returns(vec![
                req("apk_path", Schema::string("the path given (on the phone, or on the daemon's machine with host_path)")),
                req("from_host", Schema::boolean("whether the APK came from the daemon's machine")),
                req("installed", Schema::boolean("")),
            ])
            .example(json!({"apk_path": "/data/local/tmp/game.apk"})),
            package_action("uninstall", Risk::High, "Uninstall an app and delete its data.", "uninstalled", "com.example.game"),
            package_action("clear_data", Risk::High, "Erase all of an app's data (accounts, settings, caches), as a fresh install.", "cleared", "com.example.notes"),
        ],
        state: None,
        home_assistant: Vec::new(),
        companion_event: None,
    }
}
