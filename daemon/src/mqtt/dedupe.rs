//! Repeated command ids: home automation retries, QoS 1 redelivers (also
//! after a restart, from a persistent session), but a phone must not toggle
//! twice. The first request with an id runs; a repeat within the window
//! gets the first reply, waiting for it if the first is still running.
//!
//! Two layers:
//! - in memory, only the ids *in flight* in this process: a repeat of one
//!   waits on its first request's reply. An entry is removed once the reply
//!   is recorded, so memory holds no more than the calls running.
//! - the delivery store ([`crate::delivery`]): every id accepted within the
//!   window, recorded (committed) before its command runs, with its reply
//!   once known. It answers repeats after the first finished, across
//!   restarts, and enforces the per-window cap (`busy`) that keeps a junk
//!   flood from evicting real ids.

use crate::delivery::{Admit, DeliveryStore};
use droidwarden_services::{ErrorCode, WireError};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

/// A reply as sent (serialized JSON), shared between the first request and
/// its repeats; a few hundred bytes where the parsed tree would be kilobytes.
pub(crate) type Reply = Arc<str>;

#[derive(Debug)]
pub(crate) struct Dedupe {
    store: DeliveryStore,
    in_flight: Mutex<HashMap<Arc<str>, watch::Receiver<Option<Reply>>>>,
}

/// What to do with a request.
#[derive(Debug)]
pub(crate) enum Admission<'a> {
    /// This process has not seen the id running: ask the store
    /// ([`Owner::check`]), then run or answer, and [`Owner::finish`].
    Owner(Owner<'a>),
    /// The id is in flight here: wait on this for its first reply.
    Repeat(watch::Receiver<Option<Reply>>),
}

/// The request that owns an id in this process. Dropping it (finished or
/// abandoned) forgets the id in memory; repeats waiting on an abandoned one
/// are told it did not complete.
#[derive(Debug)]
pub(crate) struct Owner<'a> {
    dedupe: &'a Dedupe,
    id: Arc<str>,
    tx: watch::Sender<Option<Reply>>,
}

/// What the store decided for an owner.
#[derive(Debug)]
pub(crate) enum Decision {
    /// New: run the command.
    Run,
    /// Not to be run; send this reply.
    Answer(Reply),
}

impl Dedupe {
    pub(crate) fn new(store: DeliveryStore) -> Self {
        Self {
            store,
            in_flight: Mutex::default(),
        }
    }

    fn in_flight(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, watch::Receiver<Option<Reply>>>> {
        self.in_flight.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Synchronous first step: a repeat of an id running here, or the owner.
    pub(crate) fn admit(&self, id: &str) -> Admission<'_> {
        let mut in_flight = self.in_flight();
        if let Some(rx) = in_flight.get(id) {
            return Admission::Repeat(rx.clone());
        }
        let (tx, rx) = watch::channel(None);
        let id: Arc<str> = Arc::from(id);
        in_flight.insert(Arc::clone(&id), rx);
        Admission::Owner(Owner {
            dedupe: self,
            id,
            tx,
        })
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.in_flight().len()
    }
}

impl Owner<'_> {
    /// Ask the store: a new id is recorded (committed) and must be run;
    /// a known one is answered with its recorded reply, or with an error
    /// when its first run was interrupted, or when the window is full.
    pub(crate) async fn check(&self, error_reply: impl Fn(&WireError) -> String) -> Decision {
        let answer = |error: WireError| Decision::Answer(Reply::from(error_reply(&error)));
        match self.dedupe.store.admit(&self.id).await {
            Ok(Admit::New) => Decision::Run,
            Ok(Admit::Done(reply)) => {
                tracing::info!(
                    id = &*self.id,
                    "repeated command id: sending the recorded reply again"
                );
                Decision::Answer(Reply::from(reply))
            }
            Ok(Admit::Interrupted) => {
                tracing::warn!(
                    id = &*self.id,
                    "repeated command id whose first run was interrupted: not run again"
                );
                answer(WireError::new(
                    ErrorCode::Internal,
                    "the first request with this id was interrupted (the daemon stopped while it was being handled) and may have run; it is not run again: check the device's state, then send a new id",
                ))
            }
            Ok(Admit::Busy) => {
                tracing::warn!(
                    id = &*self.id,
                    "too many new command ids within the dedupe window: refused"
                );
                answer(WireError::new(
                    ErrorCode::Busy,
                    "too many new command ids within the dedupe window ([mqtt] max_ids_per_window); not run: try again later",
                ))
            }
            Err(e) => {
                tracing::error!(id = &*self.id, error = %e, "cannot record a command id: not run");
                let mut error = WireError::new(
                    ErrorCode::Internal,
                    format!("the command id could not be recorded ({e}); not run"),
                );
                error.retryable = true;
                answer(error)
            }
        }
    }

    /// Hand the reply to repeats waiting here; when the command ran
    /// (`ran`), record the reply in the store so later repeats get it too.
    pub(crate) async fn finish(self, reply: &Reply, ran: bool) {
        self.tx.send_replace(Some(reply.clone()));
        if ran {
            self.dedupe.store.record_reply(&self.id, reply).await;
        }
    }
}

impl Drop for Owner<'_> {
    fn drop(&mut self) {
        self.dedupe.in_flight().remove(&self.id);
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
    use crate::delivery::Limits;
    use std::time::Duration;

    async fn dedupe(dir: &std::path::Path) -> Dedupe {
        let limits = Limits {
            window: Duration::from_secs(600),
            max_ids: 1000,
        };
        let (store, _) = DeliveryStore::open(dir, limits).await.unwrap();
        Dedupe::new(store)
    }

    fn error_reply(e: &WireError) -> String {
        serde_json::json!({"ok": false, "error": e}).to_string()
    }

    #[tokio::test]
    async fn a_repeat_gets_the_first_reply_and_does_not_run() {
        let dir = tempfile::tempdir().unwrap();
        let d = dedupe(dir.path()).await;
        let Admission::Owner(owner) = d.admit("a") else {
            panic!("first must own")
        };
        assert!(matches!(owner.check(error_reply).await, Decision::Run));
        let Admission::Repeat(rx) = d.admit("a") else {
            panic!("repeat must not run")
        };
        let waiter = tokio::spawn(first_reply(rx));
        owner.finish(&Reply::from(r#"{"ok":true}"#), true).await;
        assert_eq!(&*waiter.await.unwrap().unwrap(), r#"{"ok":true}"#);
        // Memory holds only what is in flight; the store answers now.
        assert_eq!(d.len(), 0);
        let Admission::Owner(again) = d.admit("a") else {
            panic!("nothing in flight")
        };
        match again.check(error_reply).await {
            Decision::Answer(reply) => assert_eq!(&*reply, r#"{"ok":true}"#),
            Decision::Run => panic!("a repeat must not run"),
        }
    }

    #[tokio::test]
    async fn an_abandoned_first_request_is_not_run_again() {
        let dir = tempfile::tempdir().unwrap();
        let d = dedupe(dir.path()).await;
        let Admission::Owner(owner) = d.admit("a") else {
            panic!()
        };
        assert!(matches!(owner.check(error_reply).await, Decision::Run));
        drop(owner);
        let Admission::Owner(again) = d.admit("a") else {
            panic!()
        };
        match again.check(error_reply).await {
            Decision::Answer(reply) => assert!(reply.contains("interrupted"), "{reply}"),
            Decision::Run => panic!("an interrupted id must not run again"),
        }
    }
}
