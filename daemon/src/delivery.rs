//! The delivery store: what must survive a killed process for "every command
//! once" to hold. One SQLite file, `<state dir>/delivery.db` (mode 0600),
//! with two tables:
//!
//! - `ids`: every command id accepted within the dedupe window, recorded
//!   *before* the command runs, and its serialized reply once it has one.
//!   A repeat after a restart is answered from here; an id with no reply is
//!   one whose first run was interrupted, and is not run again.
//! - `calls`: the (device, service) calls in flight. Whatever is left at
//!   start was interrupted by the previous process's death; the daemon
//!   publishes an `error` status for it instead of leaving a retained
//!   `executing` forever.
//!
//! SQLite is blocking, so the connection lives on its own thread. Requests
//! reach it over a bounded channel; the thread lingers a millisecond after
//! the first (longer, up to 4 ms, while requests keep coming), takes
//! everything pending and runs it in one transaction (group commit).
//! Admissions, replies and flushes hear back only after that transaction
//! committed: a reply is published only once it is recorded, so a repeat
//! after a kill gets that reply, never "interrupted". The calls-in-flight
//! rows are queued without waiting (in order, so a call's end never
//! precedes its begin, and a call that begins and ends within one batch
//! writes nothing). WAL with `synchronous=NORMAL`: a commit
//! survives the process being killed (not a power cut), and costs no fsync,
//! so a batch is tens of microseconds.
//!
//! The cap is per time, not by eviction: every accepted id stays for the
//! whole window, and when `max_ids` new ids are already in the window, new
//! ones are refused ([`Admit::Busy`]) rather than pushing real ids out.
//! Expired rows are pruned at most once a second while requests come, and
//! at start.

use droidwarden_services::time;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};

use rusqlite::{Connection, OptionalExtension, params};

/// Requests waiting for the store's thread. A batch takes everything
/// pending, so this bounds memory, not throughput: 4096 covers a burst of a
/// thousand calls (each makes up to four requests); beyond it callers wait.
const CHANNEL: usize = 4096;

/// Most requests in one transaction.
const MAX_BATCH: usize = 2048;

/// Longest wait for the store: SQLite's own busy timeout (5 s) plus a
/// full batch ahead, with room to spare.
const ASK_LIMIT: Duration = Duration::from_secs(10);

/// How long the store's thread waits for more requests before it commits
/// a batch (see `Worker::run`).
const LINGER: Duration = Duration::from_millis(1);

/// Under load the thread lingers again, a [`LINGER`] at a time, while each
/// wait brought at least [`BUSY`] more requests, up to this in all.
const MAX_LINGER: Duration = Duration::from_millis(4);

/// Requests per [`LINGER`] that mean load: a few calls' worth.
const BUSY: usize = 8;

/// Prune expired ids at most this often.
const PRUNE_EVERY: Duration = Duration::from_secs(1);

/// What the store says about a command id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Admit {
    /// Never seen within the window: recorded (committed); run it.
    New,
    /// Seen, and its reply is known: send this again.
    Done(String),
    /// Seen, but no reply was recorded: its first run was interrupted (the
    /// daemon stopped) and may or may not have taken effect.
    Interrupted,
    /// Too many new ids within the window: refused, not recorded.
    Busy,
}

/// A call that was in flight when the previous process stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Interrupted {
    pub(crate) device: String,
    pub(crate) service: String,
    pub(crate) action: String,
    /// Unix milliseconds.
    pub(crate) started_ms: i64,
}

/// A problem with the store's file.
#[derive(Debug)]
pub(crate) struct StoreError(String);

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        Self(e.to_string())
    }
}

type Done<T> = oneshot::Sender<Result<T, String>>;

enum Request {
    Admit {
        id: String,
        done: Done<Admit>,
    },
    Reply {
        id: String,
        reply: String,
        done: Done<()>,
    },
    Begin {
        key: u64,
        call: Interrupted,
    },
    End {
        key: u64,
    },
    Flush {
        done: Done<()>,
    },
}

/// A cloneable handle to the store's thread.
#[derive(Debug, Clone)]
pub(crate) struct DeliveryStore {
    tx: mpsc::Sender<Request>,
    path: PathBuf,
}

/// The limits the store enforces.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// How long an accepted id is remembered.
    pub(crate) window: Duration,
    /// Most ids within one window.
    pub(crate) max_ids: u64,
}

/// Now, in Unix milliseconds, as the store's columns hold it.
fn now_ms() -> i64 {
    i64::try_from(time::now_ms()).unwrap_or(i64::MAX)
}

impl DeliveryStore {
    /// Open (creating, mode 0600) `dir/delivery.db` on its own thread, and
    /// take the calls a previous process left in flight (they are removed
    /// from the store: the caller reports them once).
    ///
    /// # Errors
    /// When the directory or the file cannot be created or opened.
    pub(crate) async fn open(
        dir: &Path,
        limits: Limits,
    ) -> Result<(Self, Vec<Interrupted>), StoreError> {
        let path = dir.join("delivery.db");
        let (tx, rx) = mpsc::channel(CHANNEL);
        let (ready_tx, ready_rx) = oneshot::channel();
        let thread_path = path.clone();
        let dir = dir.to_owned();
        std::thread::Builder::new()
            .name("dw-delivery".into())
            .spawn(move || {
                let opened = open_connection(&dir, &thread_path).and_then(|conn| {
                    let mut worker = Worker::new(conn, limits)?;
                    let leftovers = worker.take_interrupted()?;
                    Ok((worker, leftovers))
                });
                match opened {
                    Ok((worker, leftovers)) => {
                        let _ = ready_tx.send(Ok(leftovers));
                        worker.run(rx);
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                    }
                }
            })
            .map_err(|e| StoreError(format!("{}: {e}", path.display())))?;
        let leftovers = ready_rx
            .await
            .map_err(|_| StoreError("the delivery store's thread stopped".into()))?
            .map_err(|e| StoreError(format!("{}: {e}", path.display())))?;
        Ok((Self { tx, path }, leftovers))
    }

    /// The database file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Send a request and wait for its commit, at most [`ASK_LIMIT`]
    /// (queueing included).
    async fn ask<T>(&self, make: impl FnOnce(Done<T>) -> Request) -> Result<T, String> {
        let (done, rx) = oneshot::channel();
        let asked = async {
            self.tx
                .send(make(done))
                .await
                .map_err(|_| "the delivery store is closed".to_owned())?;
            rx.await
                .map_err(|_| "the delivery store stopped".to_owned())?
        };
        tokio::time::timeout(ASK_LIMIT, asked)
            .await
            .map_err(|_| format!("the delivery store did not answer within {ASK_LIMIT:?}"))?
    }

    /// Record `id` as accepted (committed before this returns), or say what
    /// is known about it.
    ///
    /// # Errors
    /// When the store cannot be written (the caller must not run the
    /// command: "once" can no longer be promised).
    pub(crate) async fn admit(&self, id: &str) -> Result<Admit, String> {
        let id = id.to_owned();
        self.ask(|done| Request::Admit { id, done }).await
    }

    /// Record the reply of an accepted id, committed before this returns:
    /// the caller publishes the reply after it, so a reply anyone saw is
    /// the one a repeat gets after a kill. Under load the wait is the
    /// batch's linger (1–4 ms), shared by every call in the batch.
    pub(crate) async fn record_reply(&self, id: &str, reply: &str) {
        let (id, reply) = (id.to_owned(), reply.to_owned());
        let logged = id.clone();
        if let Err(e) = self.ask(|done| Request::Reply { id, reply, done }).await {
            tracing::warn!(id = logged, error = %e, "reply not recorded");
        }
    }

    /// Record a call in flight, in the next batch (queued, not awaited:
    /// the calls' hot path pays no commit; the store commits within a
    /// batch's time, well under a millisecond).
    ///
    /// # Errors
    /// When the store is closed.
    pub(crate) async fn begin(&self, key: u64, call: Interrupted) -> Result<(), String> {
        self.tx
            .send(Request::Begin { key, call })
            .await
            .map_err(|_| "the delivery store is closed".to_owned())
    }

    /// The call recorded with `key` finished (queued like [`Self::begin`],
    /// and committed in order after it).
    ///
    /// # Errors
    /// When the store is closed.
    pub(crate) async fn end(&self, key: u64) -> Result<(), String> {
        self.tx
            .send(Request::End { key })
            .await
            .map_err(|_| "the delivery store is closed".to_owned())
    }

    /// Wait until everything sent before has been committed.
    ///
    /// # Errors
    /// When the store is closed.
    pub(crate) async fn flush(&self) -> Result<(), String> {
        self.ask(|done| Request::Flush { done }).await
    }
}

fn open_connection(dir: &Path, path: &Path) -> Result<Connection, StoreError> {
    std::fs::create_dir_all(dir).map_err(|e| StoreError(format!("{}: {e}", dir.display())))?;
    {
        // Create the file owner-only before SQLite does (its -wal and -shm
        // files copy the main file's permissions): command replies may
        // carry private data.
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| StoreError(format!("{}: {e}", path.display())))?;
    }
    let conn = Connection::open(path)?;
    conn.busy_timeout(Duration::from_secs(5))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS ids (
             id TEXT PRIMARY KEY,
             at_ms INTEGER NOT NULL,
             reply TEXT
         ) WITHOUT ROWID;
         CREATE INDEX IF NOT EXISTS ids_at ON ids (at_ms);
         CREATE TABLE IF NOT EXISTS calls (
             key INTEGER PRIMARY KEY,
             device TEXT NOT NULL,
             service TEXT NOT NULL,
             action TEXT NOT NULL,
             started_ms INTEGER NOT NULL
         );",
    )?;
    Ok(conn)
}

/// Run one statement through the connection's statement cache: the hot
/// statements are compiled once, not once per call.
fn exec(conn: &Connection, sql: &str, params: impl rusqlite::Params) -> rusqlite::Result<usize> {
    conn.prepare_cached(sql)?.execute(params)
}

/// The store's thread: the connection and the id count.
struct Worker {
    conn: Connection,
    limits: Limits,
    /// Rows in `ids` (pruned ones excluded): the ids within the window,
    /// plus expired ones not yet pruned.
    ids: u64,
    last_prune: Instant,
}

/// A reply to send once the batch committed.
enum Pending {
    Admit(Done<Admit>, Result<Admit, String>),
    Unit(Done<()>, Result<(), String>),
}

impl Worker {
    fn new(conn: Connection, limits: Limits) -> Result<Self, StoreError> {
        let mut worker = Self {
            conn,
            limits,
            ids: 0,
            last_prune: Instant::now(),
        };
        worker.prune(now_ms())?;
        let count: i64 = worker
            .conn
            .query_row("SELECT COUNT(*) FROM ids", [], |r| r.get(0))?;
        worker.ids = u64::try_from(count).unwrap_or(0);
        Ok(worker)
    }

    fn take_interrupted(&mut self) -> Result<Vec<Interrupted>, StoreError> {
        let mut statement = self
            .conn
            .prepare("SELECT device, service, action, started_ms FROM calls ORDER BY key")?;
        let rows = statement
            .query_map([], |r| {
                Ok(Interrupted {
                    device: r.get(0)?,
                    service: r.get(1)?,
                    action: r.get(2)?,
                    started_ms: r.get(3)?,
                })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        drop(statement);
        self.conn.execute("DELETE FROM calls", [])?;
        Ok(rows)
    }

    fn window_ms(&self) -> i64 {
        i64::try_from(self.limits.window.as_millis()).unwrap_or(i64::MAX)
    }

    fn prune(&mut self, now: i64) -> Result<(), rusqlite::Error> {
        let cutoff = now.saturating_sub(self.window_ms());
        let removed = self
            .conn
            .execute("DELETE FROM ids WHERE at_ms < ?1", params![cutoff])?;
        self.ids = self.ids.saturating_sub(removed as u64);
        self.last_prune = Instant::now();
        Ok(())
    }

    fn run(mut self, mut rx: mpsc::Receiver<Request>) {
        let mut batch: Vec<Request> = Vec::with_capacity(64);
        while let Some(request) = rx.blocking_recv() {
            batch.push(request);
            // Group commit with a short linger: under load the requests of
            // many calls share one transaction and one wake-up of this
            // thread, instead of a wake-up (two context switches) per
            // request. It costs a lone request LINGER of latency; while
            // requests keep pouring in, the thread lingers longer (up to
            // MAX_LINGER), so that a commit serves tens of calls rather
            // than two or three: the commit, not the rows, is what costs.
            let mut lingered = Duration::ZERO;
            while lingered < MAX_LINGER && batch.len() < MAX_BATCH {
                std::thread::sleep(LINGER);
                lingered += LINGER;
                let before = batch.len();
                while batch.len() < MAX_BATCH {
                    match rx.try_recv() {
                        Ok(request) => batch.push(request),
                        Err(_) => break,
                    }
                }
                if batch.len() - before < BUSY {
                    break;
                }
            }
            let pending = self.run_batch(&mut batch);
            for reply in pending {
                match reply {
                    Pending::Admit(done, result) => {
                        let _ = done.send(result);
                    }
                    Pending::Unit(done, result) => {
                        let _ = done.send(result);
                    }
                }
            }
        }
    }

    /// One transaction for the whole batch; replies are handed back to be
    /// sent after the commit (or with the commit's error).
    fn run_batch(&mut self, batch: &mut Vec<Request>) -> Vec<Pending> {
        let now = now_ms();
        let begun = self.conn.execute_batch("BEGIN IMMEDIATE");
        let ids_before = self.ids;
        let mut pending = Vec::with_capacity(batch.len());
        if self.last_prune.elapsed() >= PRUNE_EVERY
            && let Err(e) = self.prune(now)
        {
            tracing::warn!(error = %e, "cannot prune expired command ids");
        }
        // A call that began and ended within this batch leaves nothing to
        // record: neither row is written.
        let ended: std::collections::HashSet<u64> = batch
            .iter()
            .filter_map(|r| match r {
                Request::End { key } => Some(*key),
                _ => None,
            })
            .collect();
        let mut skip: std::collections::HashSet<u64> = std::collections::HashSet::new();
        for request in batch.drain(..) {
            match request {
                Request::Begin { key, .. } if ended.contains(&key) => {
                    skip.insert(key);
                }
                Request::End { key } if skip.contains(&key) => {}
                Request::Admit { id, done } => {
                    let result = self.admit(&id, now).map_err(|e| e.to_string());
                    pending.push(Pending::Admit(done, result));
                }
                Request::Reply { id, reply, done } => {
                    let result = exec(
                        &self.conn,
                        "UPDATE ids SET reply = ?2 WHERE id = ?1",
                        params![id, reply],
                    )
                    .map(drop)
                    .map_err(|e| format!("cannot record the reply of {id}: {e}"));
                    pending.push(Pending::Unit(done, result));
                }
                Request::Begin { key, call } => {
                    let result = exec(
                            &self.conn,
                            "INSERT OR REPLACE INTO calls (key, device, service, action, started_ms) VALUES (?1, ?2, ?3, ?4, ?5)",
                            params![
                                i64::try_from(key).unwrap_or(i64::MAX),
                                call.device,
                                call.service,
                                call.action,
                                call.started_ms
                            ],
                        )
                        .map(drop);
                    if let Err(e) = result {
                        tracing::warn!(error = %e, "cannot record a call in flight");
                    }
                }
                Request::End { key } => {
                    if let Err(e) = exec(
                        &self.conn,
                        "DELETE FROM calls WHERE key = ?1",
                        params![i64::try_from(key).unwrap_or(i64::MAX)],
                    ) {
                        tracing::warn!(error = %e, "cannot record the end of a call");
                    }
                }
                Request::Flush { done } => pending.push(Pending::Unit(done, Ok(()))),
            }
        }
        let committed = begun.and_then(|()| self.conn.execute_batch("COMMIT"));
        if let Err(e) = committed {
            let _ = self.conn.execute_batch("ROLLBACK");
            self.ids = ids_before;
            let message = format!("cannot write the delivery store: {e}");
            tracing::error!("{message}");
            for reply in &mut pending {
                match reply {
                    Pending::Admit(_, result) => *result = Err(message.clone()),
                    Pending::Unit(_, result) => *result = Err(message.clone()),
                }
            }
        }
        pending
    }

    fn admit(&mut self, id: &str, now: i64) -> Result<Admit, rusqlite::Error> {
        let cutoff = now.saturating_sub(self.window_ms());
        let known: Option<(i64, Option<String>)> = self
            .conn
            .prepare_cached("SELECT at_ms, reply FROM ids WHERE id = ?1")?
            .query_row(params![id], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        match known {
            Some((at, reply)) if at >= cutoff => {
                return Ok(match reply {
                    Some(reply) => Admit::Done(reply),
                    None => Admit::Interrupted,
                });
            }
            Some(_) => {
                // Expired, not yet pruned: a new request with an old id.
                exec(
                    &self.conn,
                    "UPDATE ids SET at_ms = ?2, reply = NULL WHERE id = ?1",
                    params![id, now],
                )?;
                return Ok(Admit::New);
            }
            None => {}
        }
        if self.ids >= self.limits.max_ids {
            // Make sure the count is not made of expired rows.
            self.prune(now)?;
            if self.ids >= self.limits.max_ids {
                return Ok(Admit::Busy);
            }
        }
        exec(
            &self.conn,
            "INSERT INTO ids (id, at_ms, reply) VALUES (?1, ?2, NULL)",
            params![id, now],
        )?;
        self.ids += 1;
        Ok(Admit::New)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max_ids: u64) -> Limits {
        Limits {
            window: Duration::from_secs(600),
            max_ids,
        }
    }

    #[tokio::test]
    async fn an_id_is_remembered_with_its_reply_across_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let (store, left) = DeliveryStore::open(dir.path(), limits(100)).await.unwrap();
        assert!(left.is_empty());
        assert_eq!(store.admit("a").await.unwrap(), Admit::New);
        assert_eq!(store.admit("b").await.unwrap(), Admit::New);
        store.record_reply("a", r#"{"ok":true}"#).await;
        assert_eq!(
            store.admit("a").await.unwrap(),
            Admit::Done(r#"{"ok":true}"#.into())
        );
        store
            .begin(
                7,
                Interrupted {
                    device: "phone".into(),
                    service: "screen_control".into(),
                    action: "set_brightness".into(),
                    started_ms: 1,
                },
            )
            .await
            .unwrap();
        store.flush().await.unwrap();
        drop(store);
        let (store, left) = DeliveryStore::open(dir.path(), limits(100)).await.unwrap();
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].action, "set_brightness");
        assert_eq!(
            store.admit("a").await.unwrap(),
            Admit::Done(r#"{"ok":true}"#.into())
        );
        // Accepted, never answered: interrupted.
        assert_eq!(store.admit("b").await.unwrap(), Admit::Interrupted);
        let (_store, left) = DeliveryStore::open(dir.path(), limits(100)).await.unwrap();
        assert!(left.is_empty(), "interrupted calls are reported once");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join("delivery.db"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[tokio::test]
    async fn a_junk_flood_cannot_evict_a_real_id() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = DeliveryStore::open(dir.path(), limits(1000)).await.unwrap();
        assert_eq!(store.admit("real").await.unwrap(), Admit::New);
        store.record_reply("real", "first").await;
        // Junk, concurrently, far beyond the cap.
        let mut tasks = Vec::new();
        for i in 0..3000 {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                store.admit(&format!("junk-{i}")).await.unwrap()
            }));
        }
        let mut busy = 0;
        for task in tasks {
            if task.await.unwrap() == Admit::Busy {
                busy += 1;
            }
        }
        assert_eq!(busy, 3000 - 999, "the cap counts every id in the window");
        assert_eq!(
            store.admit("real").await.unwrap(),
            Admit::Done("first".into())
        );
        // Refused new ids are not recorded, and the window is still full.
        assert_eq!(store.admit("junk-new").await.unwrap(), Admit::Busy);
        assert_eq!(store.admit("junk-new").await.unwrap(), Admit::Busy);
    }

    #[tokio::test]
    async fn after_the_window_an_id_is_new_again_and_room_comes_back() {
        let dir = tempfile::tempdir().unwrap();
        let limits = Limits {
            window: Duration::ZERO,
            max_ids: 1,
        };
        let (store, _) = DeliveryStore::open(dir.path(), limits).await.unwrap();
        assert_eq!(store.admit("a").await.unwrap(), Admit::New);
        // The window is zero: "a" has expired once the store's clock (unix
        // milliseconds) has moved on.
        next_millisecond().await;
        assert_eq!(store.admit("a").await.unwrap(), Admit::New);
        next_millisecond().await;
        assert_eq!(store.admit("b").await.unwrap(), Admit::New);
    }

    /// Wait until `now_ms` has moved past its value now (at most a
    /// millisecond), without blocking the runtime.
    async fn next_millisecond() {
        let start = now_ms();
        while now_ms() <= start {
            tokio::task::yield_now().await;
        }
    }
}
