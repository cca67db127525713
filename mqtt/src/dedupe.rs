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
//!
//! Which answers are final for their id ([`is_final`], docs/mqtt-api.md,
//! "Repeated ids"): a command that ran (or, as a change, may have reached
//! the phone: `ok`, the phone's errors, `timeout`), and a refusal for a
//! reason a retry does not change (invalid parameters, an unknown service,
//! action or device, a policy) keep their answer for the window; it is
//! replayed to every repeat. An answer that says nothing ran for a passing
//! reason (`busy`, `device_offline` for a phone that was away,
//! `adb_missing`) is not recorded, and the id is forgotten, so a client that
//! follows `retryable: true` with the same id gets the command run.

use super::router::Reply;
use crate::delivery::{Admit, DeliveryStore};
use droidwarden_services::{ErrorCode, WireError};

/// Whether an error answer is final for its id: true unless nothing ran
/// (`reached` false: a read, or a change that never went to the phone)
/// and the reason passes (`busy`, `device_offline`, `adb_missing`). An `ok`
/// is always final.
pub(crate) fn is_final(error: &WireError, reached: bool) -> bool {
    reached
        || !matches!(
            error.code,
            ErrorCode::Busy | ErrorCode::DeviceOffline | ErrorCode::AdbMissing
        )
}

/// The answer to a repeat of an id that started but has no reply.
fn interrupted() -> WireError {
    WireError::new(
        ErrorCode::Internal,
        "the first request with this id was interrupted (the daemon stopped while it was being handled) after it was sent, and may have run; it is not run again: check the device's state, then send a new id",
    )
}

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
    /// `started`: the command takes effect as soon as it runs (see
    /// [`DeliveryStore::admit`]).
    pub(crate) async fn check(
        &self,
        id: &str,
        started: bool,
        error_reply: impl Fn(&WireError) -> String,
    ) -> Decision {
        let answer = |error: WireError| Decision::Answer(Reply::from(error_reply(&error)));
        match self.store.admit(id, started).await {
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
                answer(interrupted())
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
                // The store logs the outage once, as an error; each command
                // it refuses is a warning.
                tracing::warn!(id, error = %e, "cannot record a command id: not run");
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

    /// Settle an id once its command answered: a final answer is recorded
    /// ([`Self::record`]); any other one forgets the id, so the same id
    /// may run later (committed before this returns either way).
    pub(crate) async fn settle(&self, id: &str, reply: &Reply, is_final: bool) {
        if is_final {
            self.record(id, reply).await;
        } else {
            tracing::debug!(id, "the command did not run: its id may be used again");
            self.store.forget(id).await;
        }
    }

    /// The answer recorded for `id` (a run that ended, a final refusal, or
    /// "interrupted" for a run a previous process left in flight); `None`
    /// when it has none. Records nothing: for a command held back, whose
    /// repeat of an id that already ran is answered at once instead of
    /// waiting for a place it does not need.
    pub(crate) async fn recorded(
        &self,
        id: &str,
        error_reply: impl Fn(&WireError) -> String,
    ) -> Option<Reply> {
        match self.store.refused(id, None).await {
            Ok(Admit::Done(reply)) => Some(Reply::from(reply)),
            Ok(Admit::Interrupted) => Some(Reply::from(error_reply(&interrupted()))),
            Ok(Admit::New | Admit::Busy) | Err(_) => None,
        }
    }

    /// The answer to a command with this id that was refused before it ran
    /// (`error`): a repeat of an id that ran gets what is known of it (its
    /// reply, or "interrupted"), whatever refused it this time; otherwise
    /// the refusal, recorded first when it is final ([`is_final`]).
    pub(crate) async fn refused(
        &self,
        id: &str,
        error: &WireError,
        error_reply: impl Fn(&WireError) -> String,
    ) -> Reply {
        let refusal = error_reply(error);
        let record = is_final(error, false).then_some(refusal.as_str());
        match self.store.refused(id, record).await {
            Ok(Admit::Done(reply)) => {
                tracing::info!(id, "repeated command id: sending the recorded reply again");
                Reply::from(reply)
            }
            Ok(Admit::Interrupted) => {
                tracing::warn!(
                    id,
                    "repeated command id whose first run was interrupted: not run again"
                );
                Reply::from(error_reply(&interrupted()))
            }
            Ok(Admit::New | Admit::Busy) => Reply::from(refusal),
            Err(e) => {
                // Nothing ran either way: the refusal stands.
                tracing::warn!(id, error = %e, "cannot look a refused command id up");
                Reply::from(refusal)
            }
        }
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
        assert!(matches!(
            d.check("a", false, error_reply).await,
            Decision::Run
        ));
        d.record("a", &Reply::from(r#"{"ok":true}"#)).await;
        match d.check("a", false, error_reply).await {
            Decision::Answer(reply) => assert_eq!(&*reply, r#"{"ok":true}"#),
            Decision::Run => panic!("a repeat must not run"),
        }
    }

    #[tokio::test]
    async fn an_id_whose_first_run_left_no_reply_is_not_run_again() {
        let dir = tempfile::tempdir().unwrap();
        let d = dedupe(dir.path()).await;
        assert!(matches!(
            d.check("a", true, error_reply).await,
            Decision::Run
        ));
        match d.check("a", true, error_reply).await {
            Decision::Answer(reply) => assert!(reply.contains("interrupted"), "{reply}"),
            Decision::Run => panic!("an interrupted id must not run again"),
        }
    }

    fn reply_of(code: ErrorCode) -> (WireError, Reply) {
        let error = WireError::new(code, "refused");
        let reply = Reply::from(error_reply(&error));
        (error, reply)
    }

    #[tokio::test]
    async fn an_answer_that_says_nothing_ran_lets_the_same_id_run_later() {
        let dir = tempfile::tempdir().unwrap();
        let d = dedupe(dir.path()).await;
        for code in [
            ErrorCode::Busy,
            ErrorCode::DeviceOffline,
            ErrorCode::AdbMissing,
        ] {
            let id = code.as_str();
            assert!(matches!(
                d.check(id, false, error_reply).await,
                Decision::Run
            ));
            let (error, reply) = reply_of(code);
            d.settle(id, &reply, is_final(&error, false)).await;
            assert!(
                matches!(d.check(id, false, error_reply).await, Decision::Run),
                "a {id} that did not run does not consume its id"
            );
        }
    }

    #[tokio::test]
    async fn an_answer_for_a_command_that_ran_or_a_final_refusal_is_replayed() {
        let dir = tempfile::tempdir().unwrap();
        let d = dedupe(dir.path()).await;
        let cases = [
            ("ok", None, false),
            ("phone", Some(ErrorCode::DeviceError), true),
            ("timeout", Some(ErrorCode::Timeout), true),
            ("dropped", Some(ErrorCode::DeviceOffline), true),
            ("params", Some(ErrorCode::InvalidParams), false),
            ("device", Some(ErrorCode::DeviceNotFound), false),
            ("policy", Some(ErrorCode::Denied), false),
        ];
        for (id, code, reached) in cases {
            assert!(matches!(
                d.check(id, false, error_reply).await,
                Decision::Run
            ));
            let (reply, keep) = match code {
                None => (Reply::from(r#"{"ok":true}"#), true),
                Some(code) => {
                    let (error, reply) = reply_of(code);
                    (reply, is_final(&error, reached))
                }
            };
            assert!(keep, "{id} is final");
            d.settle(id, &reply, keep).await;
            match d.check(id, false, error_reply).await {
                Decision::Answer(again) => assert_eq!(again, reply, "{id}"),
                Decision::Run => panic!("{id} must not run again"),
            }
        }
    }

    #[tokio::test]
    async fn a_refused_repeat_of_an_id_that_ran_gets_the_recorded_reply() {
        let dir = tempfile::tempdir().unwrap();
        let d = dedupe(dir.path()).await;
        assert!(matches!(
            d.check("ran", false, error_reply).await,
            Decision::Run
        ));
        d.record("ran", &Reply::from(r#"{"ok":true}"#)).await;
        // The phone's queue is full now: the repeat is refused `busy`, but
        // the id already ran.
        let (busy, _) = reply_of(ErrorCode::Busy);
        let answer = d.refused("ran", &busy, error_reply).await;
        assert_eq!(&*answer, r#"{"ok":true}"#);
        // A passing refusal of a new id is sent, not recorded.
        let answer = d.refused("new", &busy, error_reply).await;
        assert!(answer.contains("busy"), "{answer}");
        assert!(matches!(
            d.check("new", false, error_reply).await,
            Decision::Run
        ));
        // A final one is recorded.
        let (invalid, invalid_reply) = reply_of(ErrorCode::InvalidParams);
        assert_eq!(d.refused("bad", &invalid, error_reply).await, invalid_reply);
        match d.check("bad", false, error_reply).await {
            Decision::Answer(again) => assert_eq!(again, invalid_reply),
            Decision::Run => panic!("a final refusal is replayed"),
        }
    }
}
