//! Repeated command ids: home automation retries, and QoS 1 redelivers, but
//! a phone must not toggle twice. The first request with an id runs; a
//! repeat within the window waits for (or reuses) the first reply.

use serde_json::Value;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// At most this many ids are remembered; the oldest are forgotten first
/// once the window has passed for them, which bounds memory under a flood.
const MAX_ENTRIES: usize = 100_000;

/// When an id was first seen, and where its reply will appear.
type Seen = (Instant, watch::Receiver<Option<Value>>);

#[derive(Debug)]
pub(crate) struct Dedupe {
    window: Duration,
    entries: Mutex<HashMap<String, Seen>>,
}

/// What to do with a request.
#[derive(Debug)]
pub(crate) enum Admission {
    /// The first time: run it and send the reply through this sender.
    Run(watch::Sender<Option<Value>>),
    /// A repeat: wait on this for the first request's reply.
    Repeat(watch::Receiver<Option<Value>>),
}

impl Dedupe {
    pub(crate) fn new(window: Duration) -> Self {
        Self {
            window,
            entries: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn admit(&self, id: &str) -> Admission {
        let now = Instant::now();
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((at, rx)) = entries.get(id)
            && now.duration_since(*at) < self.window
        {
            return Admission::Repeat(rx.clone());
        }
        if entries.len() >= MAX_ENTRIES {
            let window = self.window;
            entries.retain(|_, (at, _)| now.duration_since(*at) < window);
        }
        let (tx, rx) = watch::channel(None);
        entries.insert(id.to_owned(), (now, rx));
        Admission::Run(tx)
    }
}

/// Wait for the first request's reply.
pub(crate) async fn first_reply(mut rx: watch::Receiver<Option<Value>>) -> Option<Value> {
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
        tx.send(Some(json!({"ok": true}))).unwrap();
        assert_eq!(waiter.await.unwrap(), Some(json!({"ok": true})));
        assert!(matches!(d.admit("b"), Admission::Run(_)));
    }

    #[test]
    fn after_the_window_an_id_runs_again() {
        let d = Dedupe::new(Duration::ZERO);
        assert!(matches!(d.admit("a"), Admission::Run(_)));
        assert!(matches!(d.admit("a"), Admission::Run(_)));
    }
}
