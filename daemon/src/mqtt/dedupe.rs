//! Repeated command ids: home automation retries, and QoS 1 redelivers, but
//! a phone must not toggle twice. The first request with an id runs; a
//! repeat within the window waits for (or reuses) the first reply.
//!
//! Memory is bounded: at most [`MAX_ENTRIES`] ids are remembered, oldest
//! forgotten first, and a finished reply is kept as its serialized bytes.
//! Under a sustained flood the effective window is therefore the last
//! [`MAX_ENTRIES`] commands, which still covers any retry a client makes.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// How many ids are remembered at most.
pub(crate) const MAX_ENTRIES: usize = 10_000;

/// A reply as sent (serialized JSON), shared between the first request and
/// its repeats; a few hundred bytes where the parsed tree would be kilobytes.
pub(crate) type Reply = Arc<str>;

#[derive(Debug)]
pub(crate) struct Dedupe {
    window: Duration,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    by_id: HashMap<Arc<str>, watch::Receiver<Option<Reply>>>,
    /// Ids in the order they were first seen, for expiry and the cap.
    order: VecDeque<(Instant, Arc<str>)>,
}

/// What to do with a request.
#[derive(Debug)]
pub(crate) enum Admission {
    /// The first time: run it and send the reply through this sender.
    Run(watch::Sender<Option<Reply>>),
    /// A repeat: wait on this for the first request's reply.
    Repeat(watch::Receiver<Option<Reply>>),
}

impl Dedupe {
    pub(crate) fn new(window: Duration) -> Self {
        Self {
            window,
            inner: Mutex::new(Inner::default()),
        }
    }

    pub(crate) fn admit(&self, id: &str) -> Admission {
        let now = Instant::now();
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        while let Some((at, _)) = inner.order.front() {
            if now.duration_since(*at) < self.window && inner.order.len() < MAX_ENTRIES {
                break;
            }
            if let Some((_, old)) = inner.order.pop_front() {
                inner.by_id.remove(&old);
            }
        }
        if let Some(rx) = inner.by_id.get(id) {
            return Admission::Repeat(rx.clone());
        }
        let (tx, rx) = watch::channel(None);
        let id: Arc<str> = Arc::from(id);
        inner.by_id.insert(Arc::clone(&id), rx);
        inner.order.push_back((now, id));
        Admission::Run(tx)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.inner.lock().unwrap().by_id.len()
    }
}

/// Wait for the first request's reply.
pub(crate) async fn first_reply(mut rx: watch::Receiver<Option<Reply>>) -> Option<Reply> {
    let value = rx.wait_for(Option::is_some).await.ok()?;
    value.clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn a_repeat_gets_the_first_reply_and_does_not_run() {
        let d = Dedupe::new(Duration::from_secs(60));
        let Admission::Run(tx) = d.admit("a") else {
            panic!("first must run")
        };
        let Admission::Repeat(rx) = d.admit("a") else {
            panic!("repeat must not run")
        };
        let waiter = tokio::spawn(first_reply(rx));
        tx.send(Some(Arc::from(json!({"ok": true}).to_string())))
            .unwrap();
        assert_eq!(&*waiter.await.unwrap().unwrap(), r#"{"ok":true}"#);
        assert!(matches!(d.admit("b"), Admission::Run(_)));
    }

    #[test]
    fn after_the_window_an_id_runs_again() {
        let d = Dedupe::new(Duration::ZERO);
        assert!(matches!(d.admit("a"), Admission::Run(_)));
        assert!(matches!(d.admit("a"), Admission::Run(_)));
    }

    #[test]
    fn memory_is_bounded_under_a_flood() {
        let d = Dedupe::new(Duration::from_secs(3600));
        for i in 0..(MAX_ENTRIES + 500) {
            let _ = d.admit(&format!("id-{i}"));
        }
        assert_eq!(d.len(), MAX_ENTRIES);
        // The newest are still remembered; the oldest were forgotten.
        assert!(matches!(
            d.admit(&format!("id-{}", MAX_ENTRIES + 499)),
            Admission::Repeat(_)
        ));
        assert!(matches!(d.admit("id-0"), Admission::Run(_)));
    }
}
