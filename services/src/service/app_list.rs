//! The `app_list` service.

use super::*;

actions!(
    /// `app_list` actions.
    AppListAction {
        /// List installed packages.
        List = "list" {
            /// Include system packages.
            include_system: Option<bool>,
            /// Include disabled packages.
            include_disabled: Option<bool>,
        },
    }
);

pub(super) fn spec() -> ServiceSpec {
    ServiceSpec {
        node_type: "appList",
        id: "app_list",
        description: "Installed apps.",
        actions: vec![
            action(
                "list",
                Risk::Low,
                false,
                "List installed packages; user apps only unless include_system is true.",
            )
            .param(
                "include_system",
                false,
                Schema::boolean("include system packages (default false)"),
            )
            .param(
                "include_disabled",
                false,
                Schema::boolean("include disabled packages (default false)"),
            )
            .returns(vec![
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
            .example(json!({"include_system": false})),
        ],
        state: None,
        home_assistant: Vec::new(),
        companion_event: None,
    }
}
