//! Notification events for phones that push none (ADB phones): each read
//! of `notifications.list` is compared with the one before, and what
//! appeared or changed becomes `notification_posted`, what went away
//! `notification_removed`, with exactly the bodies a companion phone pushes
//! (`docs/companion-protocol.md`, "Events"), so an automation's event
//! trigger and the MQTT event topics cannot tell the two apart.
//!
//! The first read of a phone, and the first after it was offline, is only a
//! baseline: the notifications already in the shade are not news, so no
//! event storm follows a start or a reconnect. A read that fails leaves the
//! baseline as it was. The state is a plain map, stepped by
//! [`NotificationWatch::observe`] without I/O; the hub's poll drives it.

use droidwarden_services::{DeviceName, Notification};
use serde_json::{Value, json};
use std::collections::HashMap;

/// `notification_posted`.
pub const POSTED: &str = "notification_posted";
/// `notification_removed`.
pub const REMOVED: &str = "notification_removed";

/// What a notification looked like at the last read: an update (new text,
/// a new post time) is posted again, as Android's listeners are told.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    package: String,
    title: Option<String>,
    text: Option<String>,
    posted_ms: Option<u64>,
}

impl From<&Notification> for Seen {
    fn from(n: &Notification) -> Self {
        Self {
            package: n.package.clone(),
            title: n.title.clone(),
            text: n.text.clone(),
            posted_ms: n.posted_ms,
        }
    }
}

/// The last notifications read on each phone.
#[derive(Debug, Default)]
pub struct NotificationWatch {
    phones: HashMap<DeviceName, HashMap<String, Seen>>,
}

impl NotificationWatch {
    /// Compares `list`, read on `device` at `now_ms`, with the last read:
    /// the events to announce, as `(kind, body)`, posted before removed.
    /// The phone's first read answers none.
    pub fn observe(
        &mut self,
        device: &DeviceName,
        list: &[Notification],
        now_ms: u64,
    ) -> Vec<(&'static str, Value)> {
        let current: HashMap<String, Seen> = list
            .iter()
            .map(|n| (n.key.clone(), Seen::from(n)))
            .collect();
        let Some(before) = self.phones.insert(device.clone(), current) else {
            return Vec::new();
        };
        let mut events = Vec::new();
        for n in list {
            if before.get(&n.key) != Some(&Seen::from(n)) {
                events.push((
                    POSTED,
                    json!({
                        "key": n.key,
                        "package": n.package,
                        "title": n.title,
                        "text": n.text,
                        "posted_ms": n.posted_ms.unwrap_or(now_ms),
                    }),
                ));
            }
        }
        let mut gone: Vec<(&String, &Seen)> = before
            .iter()
            .filter(|(key, _)| !list.iter().any(|n| &n.key == *key))
            .collect();
        gone.sort_by(|a, b| a.0.cmp(b.0));
        for (key, seen) in gone {
            events.push((
                REMOVED,
                json!({"key": key, "package": seen.package, "removed_ms": now_ms}),
            ));
        }
        events
    }

    /// Forgets `device`'s last read (it went offline): its next read is a
    /// new baseline.
    pub fn forget(&mut self, device: &DeviceName) {
        self.phones.remove(device);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(key: &str, text: &str, posted_ms: Option<u64>) -> Notification {
        Notification {
            key: key.into(),
            package: "com.example.washer".into(),
            title: Some("Washer".into()),
            text: Some(text.into()),
            posted_ms,
            ongoing: false,
        }
    }

    #[test]
    fn a_baseline_then_posted_updated_and_removed_once_each() {
        let phone = DeviceName::try_from("kitchen").unwrap();
        let mut watch = NotificationWatch::default();
        let a = n("0|com.example.washer|1|null|10100", "Running", Some(1_000));
        // What is already there at the first read is not news.
        assert!(
            watch
                .observe(&phone, std::slice::from_ref(&a), 5_000)
                .is_empty()
        );
        assert!(
            watch
                .observe(&phone, std::slice::from_ref(&a), 6_000)
                .is_empty()
        );
        let b = n("0|com.example.washer|2|null|10100", "Done", None);
        let events = watch.observe(&phone, &[a.clone(), b.clone()], 7_000);
        assert_eq!(
            events,
            vec![(
                POSTED,
                json!({"key": b.key, "package": "com.example.washer", "title": "Washer",
                       "text": "Done", "posted_ms": 7_000})
            )]
        );
        // An update is posted again; a removal names the key and package.
        let a2 = n(&a.key, "Rinsing", Some(8_000));
        let events = watch.observe(&phone, std::slice::from_ref(&a2), 9_000);
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].0, POSTED);
        assert_eq!(events[0].1["text"], "Rinsing");
        assert_eq!(
            events[1],
            (
                REMOVED,
                json!({"key": b.key, "package": "com.example.washer", "removed_ms": 9_000})
            )
        );
        // Offline and back: a new baseline, no storm.
        watch.forget(&phone);
        assert!(
            watch
                .observe(&phone, std::slice::from_ref(&b), 10_000)
                .is_empty()
        );
        // Another phone keeps its own baseline.
        let other = DeviceName::try_from("hall").unwrap();
        assert!(watch.observe(&other, &[], 10_000).is_empty());
        assert_eq!(watch.observe(&other, &[b], 11_000).len(), 1);
    }
}
