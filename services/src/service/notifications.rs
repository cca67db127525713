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
        -> NotificationList
        example(Self::List { package: Some("com.example.bank".try_into()?) }),
    }
);

records! {
    /// What `notifications.list` answers.
    NotificationList {
        /// How many notifications are listed.
        count: u64 = Schema::integer("", Some(0), None),
        /// Whether the phone hid the contents of some notifications.
        redacted: bool = Schema::boolean("the phone hid the contents of some notifications"),
        /// The notifications, newest first.
        notifications: Vec<Notification> = Schema::array(
            "posted notifications, newest first",
            Notification::schema("a notification"),
        ),
    }

    /// One posted notification.
    Notification {
        /// The notification's key, `user|package|id|tag|uid`.
        key: String = Schema::string("the notification's key"),
        /// The posting app.
        package: String = Schema::string("the posting app"),
        /// `android.title`, when the app set one and the phone showed it.
        title: Option<String> = Schema::string(""),
        /// `android.text` (else `android.bigText`), when present and shown.
        text: Option<String> = Schema::string(""),
        /// When it was posted or last updated, Unix epoch ms.
        posted_ms: Option<u64> =
            Schema::integer("when it was posted, Unix epoch ms", Some(0), None),
        /// Whether it cannot be swiped away (`ONGOING_EVENT`).
        ongoing: bool = Schema::boolean("cannot be swiped away"),
    }
}

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
