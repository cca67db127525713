//! Arrival order per device: the rule that makes "set brightness 1, 2, … 20"
//! end at 20 whoever sends it (MQTT, Home Assistant, D-Bus, the agent).
//!
//! Every call on a device takes a [`Ticket`] the moment it is admitted
//! (synchronously, in arrival order), then waits for its turn:
//!
//! - a **write** (an action that changes the phone) starts only when every
//!   earlier ticket of that device has finished;
//! - a **read** starts when every earlier *write* has finished, so reads
//!   overlap reads, but never overtake a change, and a change waits for the
//!   reads before it.
//!
//! A ticket finishes when it is dropped, whether the call ran, failed or was
//! abandoned, so a cancelled caller never blocks the ones behind it. Each
//! device has its own [`Sequencer`]: a slow phone holds up only its own
//! queue.
//!
//! Pure bookkeeping under a `std` mutex (held for a few map operations, never
//! across an await); waiters are woken through a `watch` counter bumped on
//! every finish.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

/// The arrival order of one device's calls.
#[derive(Debug)]
pub struct Sequencer {
    state: Mutex<State>,
    /// Bumped whenever a ticket finishes; waiters re-check their turn.
    finished: watch::Sender<u64>,
}

#[derive(Debug, Default)]
struct State {
    next: u64,
    /// Every ticket not yet finished, by number (the value: is a write).
    open: BTreeMap<u64, bool>,
    /// The unfinished writes among them.
    writes: BTreeSet<u64>,
}

/// A place in a device's queue; finishing (dropping) it lets later calls go.
#[derive(Debug)]
pub struct Ticket {
    sequencer: Arc<Sequencer>,
    number: u64,
    write: bool,
}

impl Default for Sequencer {
    fn default() -> Self {
        Self {
            state: Mutex::new(State::default()),
            finished: watch::channel(0).0,
        }
    }
}

impl Sequencer {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // The state is a pair of maps updated together; a panic while held
        // cannot leave it half-updated, so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Take the next place in the queue. Synchronous: the caller's arrival
    /// order is the order in which it calls this.
    pub fn ticket(self: &Arc<Self>, write: bool) -> Ticket {
        let mut state = self.state();
        let number = state.next;
        state.next += 1;
        state.open.insert(number, write);
        if write {
            state.writes.insert(number);
        }
        Ticket {
            sequencer: Arc::clone(self),
            number,
            write,
        }
    }

    /// Changes whenever a ticket finishes.
    pub fn moved(&self) -> watch::Receiver<u64> {
        self.finished.subscribe()
    }

    /// How many tickets are open (waiting or running).
    pub fn open(&self) -> usize {
        self.state().open.len()
    }
}

impl Ticket {
    /// Whether this ticket may start now.
    pub fn ready(&self) -> bool {
        let state = self.sequencer.state();
        if self.write {
            state.open.keys().next() == Some(&self.number)
        } else {
            state.writes.range(..self.number).next().is_none()
        }
    }

    /// Wait until this ticket may start. The caller bounds the wait.
    pub async fn turn(&self) {
        // Subscribe before checking, so a finish between the check and the
        // wait is not missed.
        let mut finished = self.sequencer.finished.subscribe();
        while !self.ready() {
            if finished.changed().await.is_err() {
                // The sender lives in the sequencer we hold: cannot happen.
                return;
            }
        }
    }

    /// Whether this ticket is for a write.
    #[cfg(test)]
    fn is_write(&self) -> bool {
        self.write
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        {
            let mut state = self.sequencer.state();
            state.open.remove(&self.number);
            if self.write {
                state.writes.remove(&self.number);
            }
        }
        self.sequencer
            .finished
            .send_modify(|n| *n = n.wrapping_add(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn ready(tickets: &[&Ticket]) -> Vec<bool> {
        tickets.iter().map(|t| t.ready()).collect()
    }

    #[test]
    fn reads_overlap_but_never_overtake_a_write() {
        let s = Arc::new(Sequencer::default());
        let r1 = s.ticket(false);
        let r2 = s.ticket(false);
        let w3 = s.ticket(true);
        let r4 = s.ticket(false);
        let w5 = s.ticket(true);
        assert!(w3.is_write() && !r4.is_write());
        assert_eq!(
            ready(&[&r1, &r2, &w3, &r4, &w5]),
            [true, true, false, false, false]
        );
        drop(r1);
        assert_eq!(ready(&[&r2, &w3, &r4, &w5]), [true, false, false, false]);
        drop(r2);
        // The write waited for the reads before it; the read after it waits.
        assert_eq!(ready(&[&w3, &r4, &w5]), [true, false, false]);
        drop(w3);
        assert_eq!(ready(&[&r4, &w5]), [true, false]);
        drop(r4);
        assert!(w5.ready());
        drop(w5);
        assert_eq!(s.open(), 0);
    }

    #[test]
    fn an_abandoned_ticket_does_not_block_the_queue() {
        let s = Arc::new(Sequencer::default());
        let w1 = s.ticket(true);
        let w2 = s.ticket(true);
        let w3 = s.ticket(true);
        drop(w2);
        assert_eq!(ready(&[&w1, &w3]), [true, false]);
        drop(w1);
        assert!(w3.ready());
    }

    #[tokio::test]
    async fn writes_start_in_arrival_order_whatever_the_scheduling() {
        let s = Arc::new(Sequencer::default());
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        // Take every ticket first (arrival order), then spawn in reverse so
        // the scheduler would favour the last one.
        let tickets: Vec<Ticket> = (0..50).map(|_| s.ticket(true)).collect();
        for (i, ticket) in tickets.into_iter().enumerate().rev() {
            let order = Arc::clone(&order);
            tasks.push(tokio::spawn(async move {
                tokio::time::timeout(Duration::from_secs(5), ticket.turn())
                    .await
                    .expect("turn within 5 s");
                order.lock().unwrap().push(i);
                tokio::task::yield_now().await;
                drop(ticket);
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), (0..50).collect::<Vec<_>>());
    }
}
