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
        count: u64,
        /// Whether the phone hid the contents of some notifications.
        redacted: bool,
        /// The posted notifications, newest first.
        notifications: Vec<Notification>,
    }

    /// One posted notification.
    Notification {
        /// The notification's key, `user|package|id|tag|uid`.
        key: String,
        /// The posting app.
        package: String,
        /// `android.title`, when the app set one and the phone showed it.
        title: Option<String>,
        /// `android.text` (else `android.bigText`), when present and shown.
        text: Option<String>,
        /// When it was posted or last updated, Unix epoch ms.
        posted_ms: Option<u64>,
        /// Whether it cannot be swiped away (`ONGOING_EVENT`).
        ongoing: bool,
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
