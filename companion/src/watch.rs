//! Notification events: the notification list read at a bounded pace and
//! compared with the previous reading, so what appeared is pushed as
//! `event/notification_posted` and what went away as
//! `event/notification_removed` (`docs/companion-protocol.md`, "Events").
//!
//! The first reading is the baseline: what is already showing when the
//! companion starts is not announced (no storm at start).

use droidwarden_services::Notification;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// The most events one reading may produce; more (a phone that just
/// cleared or received dozens) are counted and dropped, so one reading
/// cannot flood the broker.
pub const MAX_EVENTS_PER_READING: usize = 32;

/// What changed between two readings.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Changes {
    /// `(kind, body)` events in order: removals first, then postings.
    pub events: Vec<(&'static str, Value)>,
    /// Changes beyond [`MAX_EVENTS_PER_READING`], not sent.
    pub dropped: usize,
}

/// The notifications seen last, by key.
#[derive(Debug, Default)]
pub struct Watcher {
    seen: Option<BTreeMap<String, Notification>>,
}

impl Watcher {
    /// A watcher without a baseline yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Take a reading made at `now_ms` (Unix epoch ms). The first one only
    /// sets the baseline. A notification whose title or text changed
    /// under the same key (an update) is posted again.
    pub fn reading(&mut self, list: Vec<Notification>, now_ms: u64) -> Changes {
        let current: BTreeMap<String, Notification> =
            list.into_iter().map(|n| (n.key.clone(), n)).collect();
        let Some(previous) = self.seen.replace(current) else {
            return Changes::default();
        };
        let current = self.seen.as_ref().map_or_else(BTreeMap::new, Clone::clone);
        let mut events = Vec::new();
        for (key, n) in &previous {
            if !current.contains_key(key) {
                events.push((
                    "notification_removed",
                    json!({"key": key, "package": n.package, "removed_ms": now_ms}),
                ));
            }
        }
        for (key, n) in &current {
            let changed = previous
                .get(key)
                .is_none_or(|old| old.title != n.title || old.text != n.text);
            if changed {
                events.push((
                    "notification_posted",
                    json!({
                        "key": key,
                        "package": n.package,
                        "title": n.title,
                        "text": n.text,
                        // Termux prints a local time without a zone: the
                        // time it was first seen stands in.
                        "posted_ms": n.posted_ms.unwrap_or(now_ms),
                    }),
                ));
            }
        }
        let dropped = events.len().saturating_sub(MAX_EVENTS_PER_READING);
        events.truncate(MAX_EVENTS_PER_READING);
        Changes { events, dropped }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(key: &str, text: &str) -> Notification {
        Notification {
            key: key.into(),
            package: "com.example.app".into(),
            title: Some("t".into()),
            text: Some(text.into()),
            posted_ms: None,
            ongoing: false,
        }
    }

    #[test]
    fn the_first_reading_is_only_the_baseline() {
        let mut w = Watcher::new();
        let many: Vec<_> = (0..100).map(|i| n(&format!("k{i}"), "x")).collect();
        assert_eq!(w.reading(many.clone(), 1), Changes::default());
        assert_eq!(w.reading(many, 2), Changes::default(), "nothing changed");
    }

    #[test]
    fn posted_updated_and_removed() {
        let mut w = Watcher::new();
        w.reading(vec![n("a", "1"), n("b", "1")], 1);
        let c = w.reading(vec![n("b", "2"), n("c", "1")], 7);
        let kinds: Vec<_> = c
            .events
            .iter()
            .map(|(k, b)| (*k, b["key"].as_str().unwrap().to_owned()))
            .collect();
        assert_eq!(
            kinds,
            [
                ("notification_removed", "a".to_owned()),
                ("notification_posted", "b".to_owned()),
                ("notification_posted", "c".to_owned())
            ]
        );
        assert_eq!(c.events[0].1["removed_ms"], 7);
        assert_eq!(c.events[2].1["posted_ms"], 7);
        for (kind, body) in &c.events {
            let kind = droidwarden_bridge::companion::EventKind::from_name(kind).unwrap();
            kind.schema().validate(body).unwrap();
        }
    }

    #[test]
    fn a_burst_is_bounded() {
        let mut w = Watcher::new();
        w.reading(Vec::new(), 1);
        let c = w.reading((0..50).map(|i| n(&format!("k{i}"), "x")).collect(), 2);
        assert_eq!((c.events.len(), c.dropped), (MAX_EVENTS_PER_READING, 18));
    }
}
