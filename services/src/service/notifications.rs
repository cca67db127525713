//! The `notifications` service: what the phone's notification shade shows.

use super::*;

actions!(
    /// `notifications` actions.
    NotificationsAction {
        List = "list" (Medium, reads)
            "List the posted notifications, newest first: app package, title, text, when it was posted and its key. Title and text are null when the app posted none or the phone redacted them (then `redacted` is true)."
        {
            /// Only this app's notifications.
            package: Option<PackageName> = package_param(),
        }
        returns(vec![
            req("count", Schema::integer("", Some(0), None)),
            req(
                "redacted",
                Schema::boolean("the phone hid the contents of some notifications"),
            ),
            req(
                "notifications",
                Schema::array(
                    "posted notifications, newest first",
                    Schema::object(
                        "a notification",
                        vec![
                            req("key", Schema::string("the notification's key")),
                            req("package", Schema::string("the posting app")),
                            opt("title", Schema::string("")),
                            opt("text", Schema::string("")),
                            opt(
                                "posted_ms",
                                Schema::integer("when it was posted, Unix epoch ms", Some(0), None),
                            ),
                            req("ongoing", Schema::boolean("cannot be swiped away")),
                        ],
                    ),
                ),
            ),
        ])
        example(Self::List { package: Some("com.example.bank".try_into()?) }),
    }
);

pub(super) fn spec() -> ServiceSpec {
    ServiceSpec {
        node_type: "notificationReader",
        id: "notifications",
        description: "Read the notifications currently posted on the phone.",
        actions: NotificationsAction::specs(),
        state: None,
        home_assistant: Vec::new(),
        companion_event: None,
    }
}
