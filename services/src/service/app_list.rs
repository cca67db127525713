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
        returns(vec![
            req("count", Schema::integer("", Some(0), None)),
            list_of(
                "packages",
                "",
                vec![
                    req("package", Schema::string("")),
                    opt("path", Schema::string("APK path")),
                    req("system_app", Schema::boolean("")),
                ],
            ),
        ])
        example(Self::List { include_system: Some(false), include_disabled: None }),
    }
);

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
