//! `resources/subscribe` and `resources/unsubscribe` for clients of
//! protocol 2025-11-25 and earlier (2026-07-28 clients subscribe through
//! `subscriptions/listen`, `server.rs`).
//!
//! Each connection (the stdio server, or one Streamable HTTP session) has
//! one table of subscribed device-state URIs, each with the state last
//! seen, and at most one watcher task: it reads every subscribed state
//! every second (as `subscriptions/listen` does) and sends
//! `notifications/resources/updated` when one changed. The watcher ends
//! with the last unsubscribe, when the connection closes, or at shutdown.
//!
//! A change is checked and announced under the table's lock, which
//! `unsubscribe` also takes: once its answer is sent, no update for that
//! URI follows.

use rmcp::model::ResourceUpdatedNotificationParam;
use rmcp::service::{Peer, RoleServer};
use serde_json::Value;
use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Subscriptions one connection may hold.
pub(crate) const MAX_SUBSCRIPTIONS: usize = 64;

/// How long one update may take to reach the client before it is given up.
const SEND_WITHIN: Duration = Duration::from_secs(10);

/// Why a subscription was refused.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct TooMany;

/// One connection's subscriptions.
#[derive(Debug, Default)]
pub(crate) struct Subscriptions {
    table: tokio::sync::Mutex<Table>,
}

#[derive(Debug, Default)]
struct Table {
    /// URI → the state last seen (`None`: not readable then).
    last: BTreeMap<String, Option<Value>>,
    /// Whether the watcher runs.
    watching: bool,
}

impl Table {
    /// Add `uri` seen as `state`; `Ok(true)` when a watcher must start.
    /// Subscribing again keeps the first subscription.
    fn add(&mut self, uri: &str, state: Option<Value>) -> Result<bool, TooMany> {
        if !self.last.contains_key(uri) {
            if self.last.len() >= MAX_SUBSCRIPTIONS {
                return Err(TooMany);
            }
            self.last.insert(uri.to_owned(), state);
        }
        let start = !self.watching;
        self.watching = true;
        Ok(start)
    }

    /// Record `state` for `uri`: whether it is still subscribed and changed.
    fn changed(&mut self, uri: &str, state: Option<Value>) -> bool {
        match self.last.get_mut(uri) {
            Some(last) if *last != state => {
                *last = state;
                true
            }
            _ => false,
        }
    }

    /// The URIs to read now, or `None` (and the watcher stops) when there
    /// are none.
    fn round(&mut self) -> Option<Vec<String>> {
        if self.last.is_empty() {
            self.watching = false;
            return None;
        }
        Some(self.last.keys().cloned().collect())
    }
}

impl Subscriptions {
    /// Subscribe to `uri`, whose state is `state` now; `Ok(true)` when the
    /// caller must start [`Self::watch`].
    pub(crate) async fn add(&self, uri: &str, state: Option<Value>) -> Result<bool, TooMany> {
        self.table.lock().await.add(uri, state)
    }

    /// Stop watching `uri` (nothing when it was not subscribed).
    pub(crate) async fn remove(&self, uri: &str) {
        self.table.lock().await.last.remove(uri);
    }

    /// Read each subscribed state every `every` through `read`, and tell
    /// `peer` when one changed; until none is left, the connection closes
    /// or `stop`.
    pub(crate) async fn watch<F, Fut>(
        &self,
        peer: Peer<RoleServer>,
        every: Duration,
        stop: CancellationToken,
        read: F,
    ) where
        F: Fn(String) -> Fut,
        Fut: Future<Output = Option<Value>>,
    {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        'watch: loop {
            tokio::select! {
                () = stop.cancelled() => break,
                _ = tick.tick() => {}
            }
            if peer.is_transport_closed() {
                break;
            }
            let Some(uris) = self.table.lock().await.round() else {
                return;
            };
            for uri in uris {
                let state = tokio::select! {
                    () = stop.cancelled() => break 'watch,
                    state = read(uri.clone()) => state,
                };
                let mut table = self.table.lock().await;
                if !table.changed(&uri, state) {
                    continue;
                }
                let sent = tokio::time::timeout(
                    SEND_WITHIN,
                    peer.notify_resource_updated(ResourceUpdatedNotificationParam::new(uri)),
                )
                .await;
                drop(table);
                match sent {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => {
                        tracing::debug!(error = %e, "resource update not sent; watcher ends");
                        break 'watch;
                    }
                    Err(_) => tracing::debug!("resource update not taken in time"),
                }
            }
        }
        self.table.lock().await.watching = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn subscribing_twice_keeps_one_subscription_and_one_watcher() {
        let mut t = Table::default();
        assert_eq!(t.add("a", Some(json!(1))), Ok(true));
        assert_eq!(t.add("a", Some(json!(2))), Ok(false));
        assert_eq!(t.last.len(), 1);
        // The first subscription's state stays the baseline.
        assert!(t.changed("a", Some(json!(2))));
        assert!(!t.changed("a", Some(json!(2))));
    }

    #[test]
    fn unsubscribed_uris_are_not_announced_and_the_watcher_stops_when_none_are_left() {
        let mut t = Table::default();
        assert_eq!(t.add("a", None), Ok(true));
        t.last.remove("a");
        assert!(!t.changed("a", Some(json!(1))));
        assert_eq!(t.round(), None);
        assert!(!t.watching);
        // The next subscription starts a watcher again.
        assert_eq!(t.add("b", None), Ok(true));
        assert_eq!(t.round(), Some(vec!["b".to_owned()]));
    }

    #[test]
    fn subscriptions_are_bounded_per_connection() {
        let mut t = Table::default();
        for n in 0..MAX_SUBSCRIPTIONS {
            assert!(t.add(&format!("u{n}"), None).is_ok());
        }
        assert_eq!(t.add("one more", None), Err(TooMany));
        // One already held may be asked again.
        assert_eq!(t.add("u0", None), Ok(false));
    }
}
