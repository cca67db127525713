//! The bound on agent work: how many runs talk to the model and the phones
//! at once (`[agent] max_concurrent_runs`) and how many more may wait for a
//! turn (`max_queued`).
//!
//! Every run needs an [`Admission`] to exist and a run slot (a permit of a
//! fair, first-in-first-out [`Semaphore`]) to make progress. [`Agent::ask`]
//! asks for an admission with [`RunLimiter::try_admit`], which refuses at
//! once when `running + waiting` already reaches `max_concurrent_runs +
//! max_queued`: the caller gets `busy` and nothing is stored or sent to the
//! model. Runs resumed at start-up and runs woken by an approval are work
//! the daemon already accepted, so they are admitted unconditionally
//! ([`RunLimiter::admit`]) — they still wait for a slot like everyone, and
//! while they wait they count against the bound, so fresh asks are refused
//! until the backlog drains.
//!
//! A run that waits only for a person (an approval, up to
//! `[agent.approval] timeout_s`) gives its slot and its admission back: it
//! costs no model call and no device work while it waits, only its state in
//! memory, and holding a slot would let four unanswered approvals stop
//! every other ask for five minutes. It takes an admission and a slot again
//! when the answer arrives.
//!
//! [`Agent::ask`]: crate::Agent::ask

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How much agent work may run and wait.
#[derive(Debug)]
pub(crate) struct RunLimiter {
    slots: Arc<Semaphore>,
    max_running: usize,
    max_queued: usize,
    /// Runs admitted and not parked: running, or waiting for a slot.
    admitted: AtomicUsize,
}

/// A run's place in the bound: running or waiting for a slot. Given back
/// on drop.
#[derive(Debug)]
pub(crate) struct Admission {
    limiter: Arc<RunLimiter>,
}

impl Drop for Admission {
    fn drop(&mut self) {
        self.limiter.admitted.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A run slot, held together with the run's admission.
#[derive(Debug)]
pub(crate) struct Slot {
    _permit: Option<OwnedSemaphorePermit>,
    _admission: Admission,
}

/// The counts behind a refusal, for the `busy` message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Load {
    /// Runs holding a slot.
    pub(crate) running: usize,
    /// Runs admitted and waiting for a slot.
    pub(crate) queued: usize,
}

impl RunLimiter {
    /// A limiter for `max_running` runs at once and `max_queued` waiting.
    pub(crate) fn new(max_running: usize, max_queued: usize) -> Arc<Self> {
        Arc::new(Self {
            slots: Arc::new(Semaphore::new(max_running)),
            max_running,
            max_queued,
            admitted: AtomicUsize::new(0),
        })
    }

    /// Runs holding a slot and runs waiting for one.
    pub(crate) fn load(&self) -> Load {
        let running = self
            .max_running
            .saturating_sub(self.slots.available_permits());
        let admitted = self.admitted.load(Ordering::SeqCst);
        Load {
            running,
            queued: admitted.saturating_sub(running),
        }
    }

    /// Admit a new run if the bound allows it.
    ///
    /// # Errors
    /// The current load when `running + waiting` has reached
    /// `max_running + max_queued`.
    pub(crate) fn try_admit(self: &Arc<Self>) -> Result<Admission, Load> {
        let cap = self.max_running + self.max_queued;
        self.admitted
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < cap).then_some(n + 1)
            })
            .map_err(|_| self.load())?;
        Ok(Admission {
            limiter: Arc::clone(self),
        })
    }

    /// Admit work already accepted (a resumed run, a run whose approval
    /// was answered), beyond the bound if need be.
    pub(crate) fn admit(self: &Arc<Self>) -> Admission {
        self.admitted.fetch_add(1, Ordering::SeqCst);
        Admission {
            limiter: Arc::clone(self),
        }
    }

    /// Wait for a slot, first come first served.
    pub(crate) async fn slot(&self, admission: Admission) -> Slot {
        // The semaphore is never closed, so acquiring cannot fail; if it
        // ever were, running without a permit is safer than never running.
        Slot {
            _permit: Arc::clone(&self.slots).acquire_owned().await.ok(),
            _admission: admission,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn admissions_beyond_running_plus_queued_are_refused_and_slots_go_in_order() {
        let limiter = RunLimiter::new(2, 1);
        let a = limiter.try_admit().unwrap();
        let b = limiter.try_admit().unwrap();
        let c = limiter.try_admit().unwrap();
        assert_eq!(
            limiter.try_admit().unwrap_err(),
            Load {
                running: 0,
                queued: 3
            }
        );
        let sa = limiter.slot(a).await;
        let _sb = limiter.slot(b).await;
        assert_eq!(
            limiter.load(),
            Load {
                running: 2,
                queued: 1
            }
        );
        // The third waits until a slot frees.
        let waiting = tokio::spawn({
            let limiter = Arc::clone(&limiter);
            async move { limiter.slot(c).await }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!waiting.is_finished());
        assert!(limiter.try_admit().is_err());
        drop(sa);
        let _sc = waiting.await.unwrap();
        // One left the bound: a new ask fits again.
        let d = limiter.try_admit().unwrap();
        // Accepted work is admitted beyond the bound.
        let e = limiter.admit();
        assert_eq!(
            limiter.load(),
            Load {
                running: 2,
                queued: 2
            }
        );
        drop((d, e));
        assert_eq!(
            limiter.load(),
            Load {
                running: 2,
                queued: 0
            }
        );
    }
}
