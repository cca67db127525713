//! The `app_list` service.

use super::*;

actions!(
    /// `app_list` actions.
    AppListAction {
        List = "list" (Low, reads)
            "List installed packages; user apps only unless include_system is true."
        {
            /// Include system packages.
            include_system: Option<bool> =
                Schema::boolean("include system packages (default false)"),
            /// Include disabled packages.
            include_disabled: Option<bool> =
                Schema::boolean("include disabled packages (default false)"),
        }
        -> InstalledApps
        example(Self::List { include_system: Some(false), include_disabled: None }),
    }
);

records! {
    /// What `app_list.list` answers.
    InstalledApps {
        /// How many packages are listed.
        count: u64 = Schema::integer("", Some(0), None),
        /// The packages, as `pm list packages -f` lists them.
        packages: Vec<InstalledPackage> = list::<InstalledPackage>(""),
    }

    /// One line of `pm list packages [-f]`.
    InstalledPackage {
        /// The package name.
        package: String = Schema::string(""),
        /// The base APK path (only with `-f`).
        path: Option<String> = Schema::string("APK path"),
        /// The APK lives on a system partition. Always `false` without `-f`,
        /// since the listing does not say.
        system_app: bool = Schema::boolean(""),
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
