//! A small elastic pool of OS threads per device.
//!
//! Shell exchanges with the adb server use blocking `std::net` sockets, so
//! they must never run on the async runtime. Each device gets its own
//! threads (named after it, visible in `top -H`), started on demand up to a
//! limit and retired after a minute idle. A thread waiting on a silent
//! connection occupies one slot until its exchange's deadline, a second
//! after the caller's timeout; the others keep serving meanwhile.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

type Job = Box<dyn FnOnce() + Send + 'static>;

/// How long an idle worker waits for work before it exits.
const IDLE_RETIRE: Duration = Duration::from_secs(60);

#[derive(Debug)]
pub(crate) struct WorkerPool {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    name: String,
    max_threads: usize,
    state: Mutex<State>,
    wake: Condvar,
}

struct State {
    queue: VecDeque<Job>,
    threads: usize,
    idle: usize,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("queued", &self.queue.len())
            .field("threads", &self.threads)
            .field("idle", &self.idle)
            .finish()
    }
}

impl WorkerPool {
    pub(crate) fn new(name: impl Into<String>, max_threads: usize) -> Self {
        Self {
            shared: Arc::new(Shared {
                name: name.into(),
                max_threads: max_threads.max(1),
                state: Mutex::new(State {
                    queue: VecDeque::new(),
                    threads: 0,
                    idle: 0,
                }),
                wake: Condvar::new(),
            }),
        }
    }

    /// Queue `job`; start a thread for it if none is idle and the limit allows.
    ///
    /// This only takes a short lock, so it is safe to call from async code.
    pub(crate) fn submit(&self, job: impl FnOnce() + Send + 'static) {
        let mut state = self.shared.lock();
        state.queue.push_back(Box::new(job));
        if state.idle == 0 && state.threads < self.shared.max_threads {
            let shared = Arc::clone(&self.shared);
            let name = format!("adb-{}-{}", self.shared.name, state.threads);
            let spawned = std::thread::Builder::new()
                .name(name)
                .spawn(move || shared.work());
            match spawned {
                Ok(_) => state.threads += 1,
                // Out of threads: the job waits for an existing worker.
                Err(e) => tracing::warn!(error = %e, "could not start an adb worker thread"),
            }
        }
        drop(state);
        self.shared.wake.notify_one();
    }

    #[cfg(test)]
    fn threads(&self) -> usize {
        self.shared.lock().threads
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panicking job cannot leave the queue half-updated: jobs run
        // outside the lock.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn work(&self) {
        let mut state = self.lock();
        loop {
            if let Some(job) = state.queue.pop_front() {
                drop(state);
                // A panic in one job must not take the worker's slot with it.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                state = self.lock();
                continue;
            }
            state.idle += 1;
            let (next, timeout) = self
                .wake
                .wait_timeout(state, IDLE_RETIRE)
                .unwrap_or_else(|e| e.into_inner());
            state = next;
            state.idle -= 1;
            if timeout.timed_out() && state.queue.is_empty() {
                state.threads -= 1;
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn a_stuck_job_does_not_block_the_others() {
        let pool = WorkerPool::new("t", 3);
        let (release_tx, release_rx) = mpsc::channel::<()>();
        pool.submit(move || {
            let _ = release_rx.recv_timeout(Duration::from_secs(10));
        });
        let (done_tx, done_rx) = mpsc::channel();
        for i in 0..5 {
            let done = done_tx.clone();
            pool.submit(move || done.send(i).unwrap());
        }
        let mut got: Vec<i32> = (0..5)
            .map(|_| done_rx.recv_timeout(Duration::from_secs(5)).unwrap())
            .collect();
        got.sort();
        assert_eq!(got, vec![0, 1, 2, 3, 4]);
        assert!(pool.threads() <= 3);
        release_tx.send(()).unwrap();
    }

    #[test]
    fn a_panicking_job_keeps_its_worker() {
        let pool = WorkerPool::new("p", 1);
        pool.submit(|| panic!("boom"));
        let (tx, rx) = mpsc::channel();
        pool.submit(move || tx.send(42).unwrap());
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)).unwrap(), 42);
    }
}
