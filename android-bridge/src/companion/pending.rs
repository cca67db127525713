//! The table of requests waiting for a phone's answer: a state machine
//! without I/O.
//!
//! A request is *opened* when a call starts (it may then wait in the offline
//! queue), marked *sent* with its deadline when it is handed to the daemon
//! for publishing, and leaves the table exactly once: *answered* by the first
//! usable response, or *abandoned* when the call stops waiting (timeout,
//! queue expiry, the caller dropped the future). A bounded memory of the ids
//! that left lets a second or late response be recognised and ignored; it
//! is never applied twice because the reply channel is consumed on the first.
//!
//! The caller supplies the current time, so the table is tested with paused
//! tokio time and no runtime tricks.

use super::protocol::Reply;
use std::collections::{HashMap, VecDeque};
use tokio::sync::oneshot;
use tokio::time::Instant;

/// How many finished ids are remembered to tell duplicates and late answers
/// from unknown ids. Only logging depends on it: an id forgotten after this
/// many newer requests is reported as unknown, and still ignored.
const REMEMBERED: usize = 1024;

/// What became of a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseDisposition {
    /// It answered a waiting call.
    Delivered,
    /// That request had already been answered: ignored.
    Duplicate,
    /// The call had stopped waiting (deadline passed or call abandoned): ignored.
    Late,
    /// No request with that id was sent to this phone: ignored.
    Unknown,
    /// The id belongs to a request for another phone: ignored.
    Foreign,
    /// The payload could not be read (not JSON, no id, too large): ignored.
    Malformed,
    /// The phone is not a known companion: ignored.
    UnknownCompanion,
}

#[derive(Debug)]
struct Live {
    companion: String,
    /// `None` while queued (not yet sent), then the answer deadline.
    deadline: Option<Instant>,
    reply: oneshot::Sender<Reply>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Finish {
    Answered,
    Abandoned,
}

/// The requests in flight and the recently finished ones.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    live: HashMap<String, Live>,
    finished: HashMap<String, Finish>,
    finished_order: VecDeque<String>,
}

impl Pending {
    /// Open request `id` for `companion`; the receiver gets its reply.
    pub(crate) fn open(&mut self, id: String, companion: &str) -> oneshot::Receiver<Reply> {
        let (reply, rx) = oneshot::channel();
        self.live.insert(
            id,
            Live {
                companion: companion.to_owned(),
                deadline: None,
                reply,
            },
        );
        rx
    }

    /// Record that `id` was handed over for publishing and must be answered
    /// by `deadline`.
    pub(crate) fn sent(&mut self, id: &str, deadline: Instant) {
        if let Some(live) = self.live.get_mut(id) {
            live.deadline = Some(deadline);
        }
    }

    /// Apply a response from `companion` to `id`, received at `now`.
    pub(crate) fn answer(
        &mut self,
        companion: &str,
        id: &str,
        reply: Reply,
        now: Instant,
    ) -> ResponseDisposition {
        let Some(live) = self.live.get(id) else {
            return match self.finished.get(id) {
                Some(Finish::Answered) => ResponseDisposition::Duplicate,
                Some(Finish::Abandoned) => ResponseDisposition::Late,
                None => ResponseDisposition::Unknown,
            };
        };
        if live.companion != companion {
            return ResponseDisposition::Foreign;
        }
        let Some(deadline) = live.deadline else {
            // Still queued: the phone cannot have seen it.
            return ResponseDisposition::Unknown;
        };
        let Some(live) = self.live.remove(id) else {
            return ResponseDisposition::Unknown;
        };
        if now > deadline {
            // Dropping the sender tells the call its wait is over.
            self.finish(id, Finish::Abandoned);
            return ResponseDisposition::Late;
        }
        match live.reply.send(reply) {
            Ok(()) => {
                self.finish(id, Finish::Answered);
                ResponseDisposition::Delivered
            }
            Err(_) => {
                // The call went away between its deadline and this answer.
                self.finish(id, Finish::Abandoned);
                ResponseDisposition::Late
            }
        }
    }

    /// The call for `id` stopped waiting; a later answer is late.
    pub(crate) fn abandon(&mut self, id: &str) {
        if self.live.remove(id).is_some() {
            self.finish(id, Finish::Abandoned);
        }
    }

    /// How many requests are open.
    #[cfg(test)]
    pub(crate) fn open_count(&self) -> usize {
        self.live.len()
    }

    fn finish(&mut self, id: &str, how: Finish) {
        if self.finished.insert(id.to_owned(), how).is_none() {
            self.finished_order.push_back(id.to_owned());
        }
        while self.finished_order.len() > REMEMBERED {
            if let Some(old) = self.finished_order.pop_front() {
                self.finished.remove(&old);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::Duration;

    fn ok() -> Reply {
        Reply::Ok(json!({}))
    }

    #[tokio::test(start_paused = true)]
    async fn the_first_answer_in_time_is_delivered_once() {
        let mut p = Pending::default();
        let mut rx = p.open("1".into(), "a");
        p.sent("1", Instant::now() + Duration::from_secs(5));
        tokio::time::advance(Duration::from_secs(4)).await;
        assert_eq!(
            p.answer("a", "1", ok(), Instant::now()),
            ResponseDisposition::Delivered
        );
        assert_eq!(rx.try_recv().unwrap(), ok());
        assert_eq!(
            p.answer("a", "1", Reply::Ok(json!({"other": 1})), Instant::now()),
            ResponseDisposition::Duplicate
        );
        assert_eq!(p.open_count(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_after_the_deadline_is_late_and_ends_the_wait() {
        let mut p = Pending::default();
        let mut rx = p.open("1".into(), "a");
        p.sent("1", Instant::now() + Duration::from_secs(5));
        tokio::time::advance(Duration::from_secs(6)).await;
        assert_eq!(
            p.answer("a", "1", ok(), Instant::now()),
            ResponseDisposition::Late
        );
        assert!(matches!(
            rx.try_recv(),
            Err(oneshot::error::TryRecvError::Closed)
        ));
        assert_eq!(
            p.answer("a", "1", ok(), Instant::now()),
            ResponseDisposition::Late
        );
    }

    #[tokio::test(start_paused = true)]
    async fn unsent_foreign_unknown_and_abandoned_requests_are_not_answered() {
        let mut p = Pending::default();
        let mut rx = p.open("1".into(), "a");
        let now = Instant::now();
        assert_eq!(p.answer("a", "1", ok(), now), ResponseDisposition::Unknown);
        p.sent("1", now + Duration::from_secs(5));
        assert_eq!(p.answer("b", "1", ok(), now), ResponseDisposition::Foreign);
        assert_eq!(p.answer("a", "2", ok(), now), ResponseDisposition::Unknown);
        assert!(rx.try_recv().is_err());
        p.abandon("1");
        assert_eq!(p.answer("a", "1", ok(), now), ResponseDisposition::Late);
        assert_eq!(p.open_count(), 0);
        // Abandoning twice, or an unknown id, changes nothing.
        p.abandon("1");
        p.abandon("zzz");
    }

    #[test]
    fn the_memory_of_finished_ids_is_bounded() {
        let mut p = Pending::default();
        for i in 0..(REMEMBERED + 10) {
            let id = i.to_string();
            let _rx = p.open(id.clone(), "a");
            p.abandon(&id);
        }
        assert_eq!(p.finished.len(), REMEMBERED);
        assert_eq!(p.finished_order.len(), REMEMBERED);
        let now = Instant::now();
        assert_eq!(p.answer("a", "0", ok(), now), ResponseDisposition::Unknown);
        let last = (REMEMBERED + 9).to_string();
        assert_eq!(p.answer("a", &last, ok(), now), ResponseDisposition::Late);
    }
}
