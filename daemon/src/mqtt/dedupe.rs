//! Repeated command ids: home automation retries, QoS 1 redelivers (also
//! after a restart, from a persistent session), but a phone must not toggle
//! twice. The first request with an id runs; a repeat within the window
//! gets the first reply, waiting for it if the first is still running.
//!
//! Two layers:
//! - in memory, only the ids *in flight* in this process: the router
//!   ([`super::router`]) keeps them, with the repeats waiting for each
//!   one's reply, and forgets an id once its reply is recorded, so memory
//!   holds no more than the calls running.
//! - the delivery store ([`crate::delivery`]), asked from here: every id
//!   accepted within the window, recorded (committed) before its command
//!   runs, with its reply once known. It answers repeats after the first
//!   finished, across restarts, and enforces the per-window cap (`busy`)
//!   that keeps a junk flood from evicting real ids.

use super::router::Reply;
use crate::delivery::{Admit, DeliveryStore};
use droidwarden_services::{ErrorCode, WireError};

/// The durable half of dedupe: the delivery store's answers.
#[derive(Debug, Clone)]
pub(crate) struct Dedupe {
    store: DeliveryStore,
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
        Self { store }
    }
}

impl Dedupe {
    /// Ask the store: a new id is recorded (committed) and must be run;
    /// a known one is answered with its recorded reply, or with an error
    /// when its first run was interrupted, or when the window is full.
    pub(crate) async fn check(
        &self,
        id: &str,
        error_reply: impl Fn(&WireError) -> String,
    ) -> Decision {
        let answer = |error: WireError| Decision::Answer(Reply::from(error_reply(&error)));
        match self.store.admit(id).await {
            Ok(Admit::New) => Decision::Run,
            Ok(Admit::Done(reply)) => {
                tracing::info!(id, "repeated command id: sending the recorded reply again");
                Decision::Answer(Reply::from(reply))
            }
            Ok(Admit::Interrupted) => {
                tracing::warn!(
                    id,
                    "repeated command id whose first run was interrupted: not run again"
                );
                answer(WireError::new(
                    ErrorCode::Internal,
                    "the first request with this id was interrupted (the daemon stopped while it was being handled) and may have run; it is not run again: check the device's state, then send a new id",
                ))
            }
            Ok(Admit::Busy) => {
                tracing::warn!(
                    id,
                    "too many new command ids within the dedupe window: refused"
                );
                answer(WireError::new(
                    ErrorCode::Busy,
                    "too many new command ids within the dedupe window ([mqtt] max_ids_per_window); not run: try again later",
                ))
            }
            Err(e) => {
                tracing::error!(id, error = %e, "cannot record a command id: not run");
                let mut error = WireError::new(
                    ErrorCode::Internal,
                    format!("the command id could not be recorded ({e}); not run"),
                );
                error.retryable = true;
                answer(error)
            }
        }
    }

    /// Record the reply of a command that ran, so later repeats get it,
    /// even after a kill (committed before this returns).
    pub(crate) async fn record(&self, id: &str, reply: &Reply) {
        self.store.record_reply(id, reply).await;
    }
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
    async fn a_recorded_id_is_answered_with_its_reply_and_not_run() {
        let dir = tempfile::tempdir().unwrap();
        let d = dedupe(dir.path()).await;
        assert!(matches!(d.check("a", error_reply).await, Decision::Run));
        d.record("a", &Reply::from(r#"{"ok":true}"#)).await;
        match d.check("a", error_reply).await {
            Decision::Answer(reply) => assert_eq!(&*reply, r#"{"ok":true}"#),
            Decision::Run => panic!("a repeat must not run"),
        }
    }

    #[tokio::test]
    async fn an_id_whose_first_run_left_no_reply_is_not_run_again() {
        let dir = tempfile::tempdir().unwrap();
        let d = dedupe(dir.path()).await;
        assert!(matches!(d.check("a", error_reply).await, Decision::Run));
        match d.check("a", error_reply).await {
            Decision::Answer(reply) => assert!(reply.contains("interrupted"), "{reply}"),
            Decision::Run => panic!("an interrupted id must not run again"),
        }
    }
}
