//! A child run's clock of model time: how long it has waited for its model
//! (its own calls and those of the skills it runs), so its time limit can
//! leave that out. On a CPU-only box a small model takes minutes per call;
//! a fixed limit on the whole child would end a skill that is making
//! progress. Each model call is bounded anyway, by the provider's progress
//! limits (first byte, idle), and their number by the child's iteration
//! limit, so every wait still has a bound.
//!
//! Tokio's clock, so tests with paused time see the same as production.

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

/// Time spent waiting for the model, with calls possibly in flight.
#[derive(Debug, Default)]
pub(super) struct Pace {
    // A std Mutex: held for a few arithmetic operations, never across an
    // await.
    state: Mutex<State>,
    /// Told when the last call in flight ends (the clock runs again).
    idle: Notify,
}

#[derive(Debug, Default)]
struct State {
    /// Model calls in flight now.
    calls: usize,
    /// Since when at least one has been in flight.
    since: Option<Instant>,
    /// Time with at least one in flight, up to `since`.
    waited: Duration,
}

/// One model call in flight; the clock stops when it is dropped.
#[derive(Debug)]
pub(super) struct Waiting(Arc<Pace>);

impl Drop for Waiting {
    fn drop(&mut self) {
        let mut s = self.0.lock();
        s.calls = s.calls.saturating_sub(1);
        if s.calls == 0
            && let Some(since) = s.since.take()
        {
            s.waited += since.elapsed();
            drop(s);
            // A permit is kept if nobody waits yet: no wake-up is lost.
            self.0.idle.notify_one();
        }
    }
}

impl Pace {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A model call starts; it counts until the guard is dropped.
    pub(super) fn begin(self: &Arc<Self>) -> Waiting {
        let mut s = self.lock();
        if s.calls == 0 {
            s.since = Some(Instant::now());
        }
        s.calls += 1;
        Waiting(Arc::clone(self))
    }

    /// Time spent waiting for the model so far, a call in flight included.
    pub(super) fn model_time(&self) -> Duration {
        let s = self.lock();
        s.waited + s.since.map_or(Duration::ZERO, |t| t.elapsed())
    }

    /// `fut`, if it ends within `limit` of time not spent waiting for the
    /// model; otherwise `Err` with the model time (the future is dropped).
    pub(super) async fn bound<T>(
        &self,
        limit: Duration,
        fut: impl Future<Output = T>,
    ) -> Result<T, Duration> {
        let start = Instant::now();
        tokio::pin!(fut);
        loop {
            let (busy, deadline) = {
                let s = self.lock();
                let model = s.waited + s.since.map_or(Duration::ZERO, |t| t.elapsed());
                (s.calls > 0, start + limit + model)
            };
            if busy {
                // The clock stands while the model works: wait for the
                // call to end (its own limits bound it), not for a
                // deadline that moves as fast as time.
                tokio::select! {
                    out = &mut fut => return Ok(out),
                    () = self.idle.notified() => continue,
                }
            }
            tokio::select! {
                out = &mut fut => return Ok(out),
                () = tokio::time::sleep_until(deadline) => {
                    // A model call since may have moved the deadline.
                    if start + limit + self.model_time() <= Instant::now() {
                        return Err(self.model_time());
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn model_time_is_left_out_of_the_limit() {
        let pace = Arc::new(Pace::default());
        // 3 s of model time (two calls overlapping for 1 s count once),
        // then 1.5 s of own time: within a 2 s limit.
        let p = pace.clone();
        let work = async move {
            let a = p.begin();
            tokio::time::sleep(Duration::from_secs(1)).await;
            let b = p.begin();
            tokio::time::sleep(Duration::from_secs(1)).await;
            drop(a);
            tokio::time::sleep(Duration::from_secs(1)).await;
            drop(b);
            tokio::time::sleep(Duration::from_millis(1500)).await;
            "done"
        };
        assert_eq!(pace.bound(Duration::from_secs(2), work).await, Ok("done"));
        assert_eq!(pace.model_time(), Duration::from_secs(3));

        // Own time beyond the limit still ends it.
        let pace = Arc::new(Pace::default());
        let p = pace.clone();
        let work = async move {
            drop(p.begin());
            tokio::time::sleep(Duration::from_secs(5)).await;
        };
        let started = Instant::now();
        assert_eq!(
            pace.bound(Duration::from_secs(2), work).await,
            Err(Duration::ZERO)
        );
        assert_eq!(started.elapsed(), Duration::from_secs(2));
    }
}
