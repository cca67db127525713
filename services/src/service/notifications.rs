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
        Dismiss = "dismiss" (Medium, changes)
            "Remove a notification from the shade by its key (from notifications.list or a notification_posted event). Over ADB (Android 11 and later) it is snoozed for 30 days, which takes it out of the shade without telling its app it was dismissed; the companion app dismisses it as a swipe would."
        {
            /// The notification's key, `user|package|id|tag|uid`.
            notification_key: String = Schema::pattern("", NOTIFICATION_KEY_PATTERN, 512),
        }
        -> NotificationDismissed
        example(Self::Dismiss { notification_key: "0|com.example.notes|7|null|10203".into() }),
        Open = "open" (Medium, changes)
            "Open a notification (send its content intent, as a tap on it would) by its key. Only the companion app can: over ADB the content intent is out of reach (unsupported_action)."
        {
            /// The notification's key, `user|package|id|tag|uid`.
            notification_key: String = Schema::pattern("", NOTIFICATION_KEY_PATTERN, 512),
        }
        -> NotificationOpened
        example(Self::Open { notification_key: "0|com.spotify.music|1|null|10201".into() }),
    }
);

/// A notification key as Android builds it: `user|package|id|tag|uid`
/// (the tag may be anything but a line break; `null` when there is none).
const NOTIFICATION_KEY_PATTERN: &str =
    r"^-?[0-9]+\|[A-Za-z][A-Za-z0-9_.]*\|-?[0-9]+\|[^\n\r]*\|[0-9]+$";

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

    /// What `notifications.dismiss` answers.
    NotificationDismissed {
        /// The notification's key.
        key: String,
        /// How it left the shade: `snoozed` (ADB: `cmd notification
        /// snooze`, back after 30 days or an unsnooze) or `dismissed`
        /// (the companion app).
        method: String,
    }

    /// What `notifications.open` answers.
    NotificationOpened {
        /// The notification's key.
        key: String,
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
        description: "Read the notifications currently posted on the phone, dismiss or open one.",
        actions: NotificationsAction::specs(),
        state: None,
        home_assistant: Vec::new(),
        companion_event: None,
    }
}
