//! The `app_list` service.

use super::*;

actions!(
    /// `app_list` actions.
    AppListAction {
        List = "list" (Low, reads)
            "List installed packages; user apps only unless include_system is true."
        {
            /// Include system packages (default false).
            include_system: Option<bool>,
            /// Include disabled packages (default false).
            include_disabled: Option<bool>,
        }
        -> InstalledApps
        example(Self::List { include_system: Some(false), include_disabled: None }),
    }
);

records! {
    /// What `app_list.list` answers.
    InstalledApps {
        /// How many packages are listed.
        count: u64,
        /// The packages, as `pm list packages -f` lists them.
        packages: Vec<InstalledPackage>,
    }

    /// One line of `pm list packages [-f]`.
    InstalledPackage {
        /// The package name.
        package: String,
        /// The base APK path, when the listing gives it (`pm list packages -f`).
        path: Option<String>,
        /// The APK lives on a system partition. Always `false` without `-f`,
        /// since the listing does not say.
        system_app: bool,
    }
}

pub(super) fn spec() -> ServiceSpec {
    ServiceSpec {
        node_type: "appList",
        id: "app_list",
        description: "Installed apps.",
        actions: AppListAction::specs(),
        state: None,
        home_assistant: Vec::new(),
        companion_event: None,
    }
}
