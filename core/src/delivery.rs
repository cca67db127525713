//! The delivery store: what must survive a killed process for "every command
//! once" to hold. One SQLite file, `<state dir>/delivery.db` (mode 0600),
//! with two tables:
//!
//! - `ids`: every command id accepted within the dedupe window, recorded
//!   *before* the command runs (`admitted`), marked `started` just before
//!   it can take effect (a call: when its turn comes and it goes to the
//!   phone, committed first for a change), and its serialized reply once
//!   it has one. A repeat after a restart is answered from here: an id
//!   with a reply gets it again; one that started but has no reply was
//!   interrupted and may have run, and is not run again; one that was only
//!   admitted (waiting for its turn when the process died) never ran, and
//!   runs. An answer that says the command did not run for a passing
//!   reason (`busy`, `device_offline` before sending) is not recorded: the
//!   id is forgotten, so the same id may run later
//!   ([`DeliveryStore::forget`]).
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
//!
//! Durability does not rest on the WAL alone: the thread checkpoints it
//! into the main file every [`CHECKPOINT_EVERY`] when anything was written
//! (and truncates it), at start, and at a clean stop ([`DeliveryStore::close`]),
//! so the WAL stays small (`journal_size_limit`) and losing it loses at
//! most the last few seconds. A sidecar file, `delivery.db.created`, is
//! written when the store is first created: a store that existed but now
//! reads empty (its file replaced or truncated) is logged as an error
//! naming the file, since repeats of the ids it held would run again.

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

/// Checkpoint the WAL into the main file this often when anything was
/// written: what a lost or damaged WAL can take with it.
const CHECKPOINT_EVERY: Duration = Duration::from_secs(5);

/// The WAL is truncated to at most this many bytes after a checkpoint.
const JOURNAL_SIZE_LIMIT: i64 = 1024 * 1024;

/// SQLite's own automatic checkpoint, in pages (4 KiB): 1 MiB of WAL, a
/// quarter of its default.
const WAL_AUTOCHECKPOINT: i64 = 256;

/// The sidecar written when the store is first created (see the module
/// documentation).
const CREATED_MARKER: &str = "delivery.db.created";

/// What the store says about a command id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admit {
    /// Never seen within the window: recorded (committed); run it.
    New,
    /// Seen, and its reply is known: send this again.
    Done(String),
    /// Seen and started, but no reply was recorded: its first run was
    /// interrupted (the daemon stopped) and may or may not have taken
    /// effect.
    Interrupted,
    /// Too many new ids within the window: refused, not recorded.
    Busy,
}

/// A call that was in flight when the previous process stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interrupted {
    /// The device it was on.
    pub device: String,
    /// The service id.
    pub service: String,
    /// The action.
    pub action: String,
    /// Unix milliseconds.
    pub started_ms: i64,
}

/// A problem with the store's file.
#[derive(Debug)]
pub struct StoreError(String);

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
        /// Recorded as started at once (it takes effect as soon as it runs).
        started: bool,
        done: Done<Admit>,
    },
    Refused {
        id: String,
        /// The refusal, when it is final for the id.
        reply: Option<String>,
        done: Done<Admit>,
    },
    Forget {
        id: String,
        done: Done<()>,
    },
    Reply {
        id: String,
        reply: String,
        done: Done<()>,
    },
    Begin {
        key: u64,
        call: Interrupted,
        /// The command id the call runs for, marked started with the row.
        id: Option<String>,
    },
    End {
        key: u64,
    },
    Flush {
        done: Done<()>,
    },
    /// Checkpoint (and truncate) the WAL after the batch commits.
    Checkpoint {
        done: Option<Done<()>>,
    },
}

/// A cloneable handle to the store's thread.
#[derive(Debug, Clone)]
pub struct DeliveryStore {
    tx: mpsc::Sender<Request>,
    path: PathBuf,
    /// The store existed before (its marker says so) but was found empty.
    found_empty: bool,
}

/// The limits the store enforces.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// How long an accepted id is remembered.
    pub window: Duration,
    /// Most ids within one window.
    pub max_ids: u64,
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
    /// When the directory or the file cannot be created or opened; the
    /// message names the file and says what to do.
    pub async fn open(dir: &Path, limits: Limits) -> Result<(Self, Vec<Interrupted>), StoreError> {
        let path = dir.join("delivery.db");
        let (tx, rx) = mpsc::channel(CHANNEL);
        let (ready_tx, ready_rx) = oneshot::channel();
        let thread_path = path.clone();
        let dir = dir.to_owned();
        std::thread::Builder::new()
            .name("dw-delivery".into())
            .spawn(move || {
                let opened = open_connection(&dir, &thread_path).and_then(|(conn, found_empty)| {
                    let mut worker = Worker::new(conn, limits, thread_path.clone())?;
                    let leftovers = worker.take_interrupted()?;
                    // A WAL left by a killed process goes into the main
                    // file (and shrinks) before anything new is written.
                    if let Err(e) = worker.checkpoint() {
                        tracing::warn!(error = %e, "delivery store checkpoint failed");
                    }
                    Ok((worker, leftovers, found_empty))
                });
                match opened {
                    Ok((worker, leftovers, found_empty)) => {
                        let _ = ready_tx.send(Ok((leftovers, found_empty)));
                        worker.run(rx);
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                    }
                }
            })
            .map_err(|e| StoreError(format!("{}: {e}", path.display())))?;
        let (leftovers, found_empty) = ready_rx
            .await
            .map_err(|_| StoreError("the delivery store's thread stopped".into()))?
            .map_err(|e| StoreError(format!("{}: {e}", path.display())))?;
        spawn_checkpoints(&tx);
        Ok((
            Self {
                tx,
                path,
                found_empty,
            },
            leftovers,
        ))
    }

    /// Whether the store existed before but was found empty at open (it
    /// was logged as an error then).
    pub fn found_empty(&self) -> bool {
        self.found_empty
    }

    /// The database file.
    pub fn path(&self) -> &Path {
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
    ///
    /// `started`: the command takes effect as soon as it runs (an agent
    /// run), so it is recorded as started at once; a call is admitted to
    /// wait for its turn and marked started by [`Self::begin`].
    pub async fn admit(&self, id: &str, started: bool) -> Result<Admit, String> {
        let id = id.to_owned();
        self.ask(|done| Request::Admit { id, started, done }).await
    }

    /// A command with this id was refused before it ran: say what is known
    /// about the id (a repeat of one that ran gets [`Admit::Done`] or
    /// [`Admit::Interrupted`], whatever refused it this time), or, for an
    /// id not known, record `final_reply` as its reply (committed before
    /// this returns) when the refusal is final, and answer [`Admit::New`].
    ///
    /// # Errors
    /// When the store cannot be read or written.
    pub async fn refused(&self, id: &str, final_reply: Option<&str>) -> Result<Admit, String> {
        let id = id.to_owned();
        let reply = final_reply.map(str::to_owned);
        self.ask(|done| Request::Refused { id, reply, done }).await
    }

    /// Forget an admitted id whose command did not run (committed before
    /// this returns): the same id may run later.
    pub async fn forget(&self, id: &str) {
        let owned = id.to_owned();
        if let Err(e) = self.ask(|done| Request::Forget { id: owned, done }).await {
            tracing::warn!(id, error = %e, "command id not forgotten");
        }
    }

    /// Record the reply of an accepted id, committed before this returns:
    /// the caller publishes the reply after it, so a reply anyone saw is
    /// the one a repeat gets after a kill. Under load the wait is the
    /// batch's linger (1–4 ms), shared by every call in the batch.
    pub async fn record_reply(&self, id: &str, reply: &str) {
        let (id, reply) = (id.to_owned(), reply.to_owned());
        let logged = id.clone();
        if let Err(e) = self.ask(|done| Request::Reply { id, reply, done }).await {
            tracing::warn!(id = logged, error = %e, "reply not recorded");
        }
    }

    /// Record a call in flight, in the next batch (queued, not awaited:
    /// the calls' hot path pays no commit; the store commits within a
    /// batch's time, well under a millisecond). `id`, the command id the
    /// call runs for, is marked started in the same transaction: a caller
    /// that must not send before that is durable waits with [`Self::flush`].
    ///
    /// # Errors
    /// When the store is closed.
    pub async fn begin(&self, key: u64, call: Interrupted, id: Option<&str>) -> Result<(), String> {
        let id = id.map(str::to_owned);
        self.tx
            .send(Request::Begin { key, call, id })
            .await
            .map_err(|_| "the delivery store is closed".to_owned())
    }

    /// The call recorded with `key` finished (queued like [`Self::begin`],
    /// and committed in order after it).
    ///
    /// # Errors
    /// When the store is closed.
    pub async fn end(&self, key: u64) -> Result<(), String> {
        self.tx
            .send(Request::End { key })
            .await
            .map_err(|_| "the delivery store is closed".to_owned())
    }

    /// Wait until everything sent before has been committed.
    ///
    /// # Errors
    /// When the store is closed.
    pub async fn flush(&self) -> Result<(), String> {
        self.ask(|done| Request::Flush { done }).await
    }

    /// A clean stop: commit everything sent before and checkpoint the WAL
    /// into the main file (truncating it), so that nothing lives in the WAL
    /// alone while the daemon is stopped.
    ///
    /// # Errors
    /// When the store is closed or cannot be written.
    pub async fn close(&self) -> Result<(), String> {
        self.ask(|done| Request::Checkpoint { done: Some(done) })
            .await
    }
}

/// A thread that asks the store for a checkpoint every [`CHECKPOINT_EVERY`]
/// (the store's thread checkpoints only when something was written), until
/// the store is dropped. It holds only a weak sender, so it never keeps the
/// store open.
fn spawn_checkpoints(tx: &mpsc::Sender<Request>) {
    let weak = tx.downgrade();
    let spawned = std::thread::Builder::new()
        .name("dw-delivery-ckpt".into())
        .spawn(move || {
            loop {
                std::thread::sleep(CHECKPOINT_EVERY);
                let Some(tx) = weak.upgrade() else { return };
                // Never blocks: with the channel full, the store is busy
                // and the next tick will do.
                if let Err(mpsc::error::TrySendError::Closed(_)) =
                    tx.try_send(Request::Checkpoint { done: None })
                {
                    return;
                }
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "cannot start the delivery store's checkpoints; SQLite's own remain");
    }
}

/// What the person must do about a store SQLite cannot open or use, by
/// the error's kind.
fn advice(e: &rusqlite::Error, path: &Path) -> String {
    use rusqlite::ErrorCode as Code;
    let p = path.display();
    match e.sqlite_error_code() {
        Some(Code::NotADatabase | Code::DatabaseCorrupt) => format!(
            "{p} is damaged: stop the daemon, move {p} and its -wal and -shm files aside, \
             then start it (a new, empty store is created; the command ids the old one \
             held are forgotten, so their repeats would run again)"
        ),
        Some(Code::DiskFull) => {
            format!("the file system holding {p} is full: free space on it (the daemon retries)")
        }
        Some(Code::ReadOnly | Code::CannotOpen | Code::PermissionDenied) => format!(
            "check that {p} and its directory belong to the daemon's user and that the \
             file system is writable"
        ),
        _ => format!(
            "if {p} is damaged, stop the daemon and move it (and its -wal and -shm files) aside"
        ),
    }
}

/// A store error naming the file and what to do.
fn store_error(e: &rusqlite::Error, path: &Path) -> StoreError {
    StoreError(format!("{e}; {}", advice(e, path)))
}

/// Open (creating) the store at `path`. Also says whether it was found
/// empty although its marker says it existed before.
fn open_connection(dir: &Path, path: &Path) -> Result<(Connection, bool), StoreError> {
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
    let conn = Connection::open(path).map_err(|e| store_error(&e, path))?;
    let set_up = |conn: &Connection| -> rusqlite::Result<()> {
        conn.busy_timeout(Duration::from_secs(5))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.pragma_update(None, "journal_size_limit", JOURNAL_SIZE_LIMIT)?;
        conn.pragma_update(None, "wal_autocheckpoint", WAL_AUTOCHECKPOINT)?;
        // `started` defaults to 1 so that rows written before the column
        // existed (by an older daemon) count as possibly run.
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS ids (
                 id TEXT PRIMARY KEY,
                 at_ms INTEGER NOT NULL,
                 reply TEXT,
                 started INTEGER NOT NULL DEFAULT 1
             ) WITHOUT ROWID;
             CREATE INDEX IF NOT EXISTS ids_at ON ids (at_ms);
             CREATE TABLE IF NOT EXISTS calls (
                 key INTEGER PRIMARY KEY,
                 device TEXT NOT NULL,
                 service TEXT NOT NULL,
                 action TEXT NOT NULL,
                 started_ms INTEGER NOT NULL
             );
             CREATE TABLE IF NOT EXISTS meta (
                 key TEXT PRIMARY KEY,
                 value TEXT NOT NULL
             ) WITHOUT ROWID;",
        )?;
        let has_started: bool = conn
            .prepare("SELECT 1 FROM pragma_table_info('ids') WHERE name = 'started'")?
            .exists([])?;
        if !has_started {
            conn.execute_batch("ALTER TABLE ids ADD COLUMN started INTEGER NOT NULL DEFAULT 1")?;
        }
        Ok(())
    };
    set_up(&conn).map_err(|e| store_error(&e, path))?;
    let found_empty = check_marker(&conn, path).map_err(|e| store_error(&e, path))?;
    Ok((conn, found_empty))
}

/// The store's birth certificate: a `meta` row and, beside the file, the
/// [`CREATED_MARKER`] sidecar. A marker without its row means the store
/// existed and was lost (logged as an error: the ids it held will run
/// again); a row without a marker (a store from before markers, or a lost
/// sidecar) only gets its marker. Returns whether the store was lost.
fn check_marker(conn: &Connection, path: &Path) -> rusqlite::Result<bool> {
    let marker = path.with_file_name(CREATED_MARKER);
    let created: Option<String> = conn
        .query_row("SELECT value FROM meta WHERE key = 'created'", [], |r| {
            r.get(0)
        })
        .optional()?;
    let had_marker = marker.exists();
    let found_empty = had_marker && created.is_none();
    if found_empty {
        tracing::error!(
            file = %path.display(),
            marker = %marker.display(),
            "the delivery store existed but was found empty (its file was replaced or truncated, \
             or its -wal file lost): the command ids it held are forgotten, so repeats of them \
             will run again; check the disk and what touched the file"
        );
    }
    let stamp = match created {
        Some(stamp) => stamp,
        None => {
            let stamp = now_ms().to_string();
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('created', ?1)",
                params![stamp],
            )?;
            stamp
        }
    };
    if !had_marker {
        write_marker(&marker, &stamp);
    }
    Ok(found_empty)
}

/// Write the marker, owner-only; a failure costs only the detection of a
/// lost store, so it is logged, not fatal.
fn write_marker(marker: &Path, stamp: &str) {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let written = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(0o600)
        .open(marker)
        .and_then(|mut f| {
            f.write_all(format!("{stamp}\n").as_bytes())?;
            f.sync_all()
        });
    if let Err(e) = written {
        tracing::warn!(file = %marker.display(), error = %e, "cannot write the delivery store's marker");
    }
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
    path: PathBuf,
    /// Rows in `ids` (pruned ones excluded): the ids within the window,
    /// plus expired ones not yet pruned.
    ids: u64,
    last_prune: Instant,
    /// Something was committed since the last checkpoint.
    dirty: bool,
    /// The last batch failed to commit: the next failure is logged at a
    /// lower level (one ERROR per outage, not one per command), and the
    /// next success says the store recovered.
    failing: bool,
}

/// A reply to send once the batch committed.
enum Pending {
    Admit(Done<Admit>, Result<Admit, String>),
    Unit(Done<()>, Result<(), String>),
    /// A checkpoint to run after the commit, and whom to tell.
    Checkpoint(Option<Done<()>>),
}

impl Worker {
    fn new(conn: Connection, limits: Limits, path: PathBuf) -> Result<Self, StoreError> {
        let mut worker = Self {
            conn,
            limits,
            path,
            ids: 0,
            last_prune: Instant::now(),
            dirty: false,
            failing: false,
        };
        let path = worker.path.clone();
        worker.prune(now_ms()).map_err(|e| store_error(&e, &path))?;
        let count: i64 = worker
            .conn
            .query_row("SELECT COUNT(*) FROM ids", [], |r| r.get(0))
            .map_err(|e| store_error(&e, &path))?;
        worker.ids = u64::try_from(count).unwrap_or(0);
        Ok(worker)
    }

    fn take_interrupted(&mut self) -> Result<Vec<Interrupted>, StoreError> {
        let path = self.path.clone();
        let taken = || -> rusqlite::Result<Vec<Interrupted>> {
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
        };
        taken().map_err(|e| store_error(&e, &path))
    }

    /// Copy the WAL into the main file and truncate it (the only
    /// connection, so nothing holds it back).
    fn checkpoint(&mut self) -> Result<(), String> {
        let done: rusqlite::Result<(i64, i64, i64)> =
            self.conn
                .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                });
        match done {
            Ok((0, _, _)) => {
                self.dirty = false;
                Ok(())
            }
            Ok((busy, log, copied)) => Err(format!(
                "the checkpoint of {} was held back (busy {busy}, {copied} of {log} pages copied)",
                self.path.display()
            )),
            Err(e) => Err(format!(
                "cannot checkpoint {}: {e}; {}",
                self.path.display(),
                advice(&e, &self.path)
            )),
        }
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
                    Pending::Checkpoint(done) => {
                        // The timer's checkpoints run only when something
                        // was written; a clean stop's always does.
                        let result = if done.is_some() || self.dirty {
                            self.checkpoint()
                        } else {
                            Ok(())
                        };
                        match done {
                            Some(done) => {
                                let _ = done.send(result);
                            }
                            None => {
                                if let Err(e) = result {
                                    tracing::warn!(error = %e, "delivery store checkpoint failed");
                                }
                            }
                        }
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
        let wrote = batch
            .iter()
            .any(|r| !matches!(r, Request::Flush { .. } | Request::Checkpoint { .. }));
        for request in batch.drain(..) {
            match request {
                Request::Begin { key, id, .. } if ended.contains(&key) => {
                    skip.insert(key);
                    // The call is over, but its reply is not recorded yet:
                    // its id still started.
                    if let Some(id) = id {
                        self.mark_started(&id);
                    }
                }
                Request::End { key } if skip.contains(&key) => {}
                Request::Admit { id, started, done } => {
                    let result = self.admit(&id, started, now).map_err(|e| e.to_string());
                    pending.push(Pending::Admit(done, result));
                }
                Request::Refused { id, reply, done } => {
                    let result = self
                        .refused(&id, reply.as_deref(), now)
                        .map_err(|e| e.to_string());
                    pending.push(Pending::Admit(done, result));
                }
                Request::Forget { id, done } => {
                    let result = exec(&self.conn, "DELETE FROM ids WHERE id = ?1", params![id])
                        .map(|removed| self.ids = self.ids.saturating_sub(removed as u64))
                        .map_err(|e| format!("cannot forget {id}: {e}"));
                    pending.push(Pending::Unit(done, result));
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
                Request::Begin { key, call, id } => {
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
                    if let Some(id) = id {
                        self.mark_started(&id);
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
                Request::Checkpoint { done } => pending.push(Pending::Checkpoint(done)),
            }
        }
        let committed = begun.and_then(|()| self.conn.execute_batch("COMMIT"));
        match committed {
            Ok(()) => {
                self.dirty |= wrote;
                if self.failing {
                    self.failing = false;
                    tracing::info!(file = %self.path.display(), "the delivery store is written again");
                }
            }
            Err(e) => {
                let _ = self.conn.execute_batch("ROLLBACK");
                self.ids = ids_before;
                let message = format!(
                    "cannot write the delivery store: {e}; {}",
                    advice(&e, &self.path)
                );
                if self.failing {
                    tracing::debug!("{message}");
                } else {
                    self.failing = true;
                    tracing::error!(
                        "{message}; commands are refused until it can be written again"
                    );
                }
                // A full file system may still take a checkpoint that
                // shrinks the WAL back to its limit.
                if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull) {
                    let _ = self.checkpoint();
                }
                for reply in &mut pending {
                    match reply {
                        Pending::Admit(_, result) => *result = Err(message.clone()),
                        Pending::Unit(_, result) => *result = Err(message.clone()),
                        Pending::Checkpoint(_) => {}
                    }
                }
            }
        }
        pending
    }

    /// Mark `id` started (within the batch's transaction).
    fn mark_started(&mut self, id: &str) {
        if let Err(e) = exec(
            &self.conn,
            "UPDATE ids SET started = 1 WHERE id = ?1",
            params![id],
        ) {
            tracing::warn!(id, error = %e, "cannot mark a command id started");
        }
    }

    /// What is known of `id` within the window: `None` when it is not
    /// known, or only admitted by an earlier process and never started
    /// (it never ran: as good as new).
    fn known(&self, id: &str, now: i64) -> Result<Option<Admit>, rusqlite::Error> {
        let cutoff = now.saturating_sub(self.window_ms());
        let known: Option<(i64, Option<String>, bool)> = self
            .conn
            .prepare_cached("SELECT at_ms, reply, started FROM ids WHERE id = ?1")?
            .query_row(params![id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .optional()?;
        Ok(match known {
            Some((at, Some(reply), _)) if at >= cutoff => Some(Admit::Done(reply)),
            Some((at, None, true)) if at >= cutoff => Some(Admit::Interrupted),
            _ => None,
        })
    }

    fn admit(&mut self, id: &str, started: bool, now: i64) -> Result<Admit, rusqlite::Error> {
        if let Some(known) = self.known(id, now)? {
            return Ok(known);
        }
        if self.renew(id, started, None, now)? {
            return Ok(Admit::New);
        }
        if !self.has_room(now)? {
            return Ok(Admit::Busy);
        }
        exec(
            &self.conn,
            "INSERT INTO ids (id, at_ms, reply, started) VALUES (?1, ?2, NULL, ?3)",
            params![id, now, started],
        )?;
        self.ids += 1;
        Ok(Admit::New)
    }

    fn refused(
        &mut self,
        id: &str,
        reply: Option<&str>,
        now: i64,
    ) -> Result<Admit, rusqlite::Error> {
        if let Some(known) = self.known(id, now)? {
            return Ok(known);
        }
        let Some(reply) = reply else {
            return Ok(Admit::New);
        };
        if self.renew(id, true, Some(reply), now)? {
            return Ok(Admit::New);
        }
        // A full window records nothing new; the refusal is still sent.
        if self.has_room(now)? {
            exec(
                &self.conn,
                "INSERT INTO ids (id, at_ms, reply, started) VALUES (?1, ?2, ?3, 1)",
                params![id, now, reply],
            )?;
            self.ids += 1;
        }
        Ok(Admit::New)
    }

    /// Reuse the row of an id that is expired (not yet pruned) or was only
    /// admitted by an earlier process: a new request with that id. False
    /// when there is no row.
    fn renew(
        &mut self,
        id: &str,
        started: bool,
        reply: Option<&str>,
        now: i64,
    ) -> Result<bool, rusqlite::Error> {
        let renewed = exec(
            &self.conn,
            "UPDATE ids SET at_ms = ?2, reply = ?3, started = ?4 WHERE id = ?1",
            params![id, now, reply, started],
        )?;
        Ok(renewed > 0)
    }

    /// Whether a new id fits in the window.
    fn has_room(&mut self, now: i64) -> Result<bool, rusqlite::Error> {
        if self.ids >= self.limits.max_ids {
            // Make sure the count is not made of expired rows.
            self.prune(now)?;
        }
        Ok(self.ids < self.limits.max_ids)
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
        assert_eq!(store.admit("a", true).await.unwrap(), Admit::New);
        assert_eq!(store.admit("b", true).await.unwrap(), Admit::New);
        store.record_reply("a", r#"{"ok":true}"#).await;
        assert_eq!(
            store.admit("a", true).await.unwrap(),
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
                None,
            )
            .await
            .unwrap();
        store.flush().await.unwrap();
        drop(store);
        let (store, left) = DeliveryStore::open(dir.path(), limits(100)).await.unwrap();
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].action, "set_brightness");
        assert_eq!(
            store.admit("a", true).await.unwrap(),
            Admit::Done(r#"{"ok":true}"#.into())
        );
        // Accepted, never answered: interrupted.
        assert_eq!(store.admit("b", true).await.unwrap(), Admit::Interrupted);
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
        assert_eq!(store.admit("real", true).await.unwrap(), Admit::New);
        store.record_reply("real", "first").await;
        // Junk, concurrently, far beyond the cap.
        let mut tasks = Vec::new();
        for i in 0..3000 {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                store.admit(&format!("junk-{i}"), true).await.unwrap()
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
            store.admit("real", true).await.unwrap(),
            Admit::Done("first".into())
        );
        // Refused new ids are not recorded, and the window is still full.
        assert_eq!(store.admit("junk-new", true).await.unwrap(), Admit::Busy);
        assert_eq!(store.admit("junk-new", true).await.unwrap(), Admit::Busy);
    }

    #[tokio::test]
    async fn after_the_window_an_id_is_new_again_and_room_comes_back() {
        let dir = tempfile::tempdir().unwrap();
        let limits = Limits {
            window: Duration::ZERO,
            max_ids: 1,
        };
        let (store, _) = DeliveryStore::open(dir.path(), limits).await.unwrap();
        assert_eq!(store.admit("a", true).await.unwrap(), Admit::New);
        // The window is zero: "a" has expired once the store's clock (unix
        // milliseconds) has moved on.
        next_millisecond().await;
        assert_eq!(store.admit("a", true).await.unwrap(), Admit::New);
        next_millisecond().await;
        assert_eq!(store.admit("b", true).await.unwrap(), Admit::New);
    }

    fn call(action: &str) -> Interrupted {
        Interrupted {
            device: "phone".into(),
            service: "screen_control".into(),
            action: action.into(),
            started_ms: 1,
        }
    }

    #[tokio::test]
    async fn after_a_restart_an_id_that_only_waited_runs_and_one_that_started_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = DeliveryStore::open(dir.path(), limits(100)).await.unwrap();
        // Both admitted to wait for their turn; only "sent" got it.
        assert_eq!(store.admit("waiting", false).await.unwrap(), Admit::New);
        assert_eq!(store.admit("sent", false).await.unwrap(), Admit::New);
        store
            .begin(1, call("set_brightness"), Some("sent"))
            .await
            .unwrap();
        store.flush().await.unwrap();
        // An agent run is started as soon as it is admitted.
        assert_eq!(store.admit("asked", true).await.unwrap(), Admit::New);
        // The process dies here: no replies.
        drop(store);
        let (store, _) = DeliveryStore::open(dir.path(), limits(100)).await.unwrap();
        assert_eq!(
            store.admit("waiting", false).await.unwrap(),
            Admit::New,
            "a command that never started runs on a repeat"
        );
        assert_eq!(
            store.admit("sent", false).await.unwrap(),
            Admit::Interrupted
        );
        assert_eq!(
            store.admit("asked", true).await.unwrap(),
            Admit::Interrupted
        );
        // The one that runs now is recorded as any new id.
        store.record_reply("waiting", "ran").await;
        assert_eq!(
            store.admit("waiting", false).await.unwrap(),
            Admit::Done("ran".into())
        );
    }

    #[tokio::test]
    async fn a_started_mark_survives_a_begin_and_end_in_one_batch() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = DeliveryStore::open(dir.path(), limits(100)).await.unwrap();
        assert_eq!(store.admit("quick", false).await.unwrap(), Admit::New);
        // Queued back to back: one batch, so neither call row is written.
        store.begin(1, call("wake"), Some("quick")).await.unwrap();
        store.end(1).await.unwrap();
        store.flush().await.unwrap();
        drop(store);
        let (store, left) = DeliveryStore::open(dir.path(), limits(100)).await.unwrap();
        assert!(left.is_empty());
        assert_eq!(
            store.admit("quick", false).await.unwrap(),
            Admit::Interrupted
        );
    }

    #[tokio::test]
    async fn a_forgotten_id_may_run_again_and_frees_its_place() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = DeliveryStore::open(dir.path(), limits(1)).await.unwrap();
        assert_eq!(store.admit("a", true).await.unwrap(), Admit::New);
        assert_eq!(store.admit("b", true).await.unwrap(), Admit::Busy);
        store.forget("a").await;
        assert_eq!(store.admit("b", true).await.unwrap(), Admit::New);
        store.forget("b").await;
        assert_eq!(store.admit("a", true).await.unwrap(), Admit::New);
    }

    #[tokio::test]
    async fn a_refusal_gives_way_to_a_known_id_and_only_a_final_one_is_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = DeliveryStore::open(dir.path(), limits(100)).await.unwrap();
        assert_eq!(store.admit("ran", false).await.unwrap(), Admit::New);
        store.record_reply("ran", "ok").await;
        assert_eq!(
            store.refused("ran", Some("refused")).await.unwrap(),
            Admit::Done("ok".into()),
            "a repeat of an id that ran gets its reply, whatever refuses it now"
        );
        assert_eq!(store.refused("passing", None).await.unwrap(), Admit::New);
        assert_eq!(store.admit("passing", false).await.unwrap(), Admit::New);
        assert_eq!(
            store.refused("final", Some("invalid")).await.unwrap(),
            Admit::New
        );
        assert_eq!(
            store.admit("final", false).await.unwrap(),
            Admit::Done("invalid".into())
        );
    }

    #[tokio::test]
    async fn a_clean_stop_leaves_nothing_in_the_wal_alone() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = DeliveryStore::open(dir.path(), limits(100)).await.unwrap();
        assert_eq!(store.admit("a", false).await.unwrap(), Admit::New);
        store.record_reply("a", "ok").await;
        store.close().await.unwrap();
        let wal = dir.path().join("delivery.db-wal");
        let wal_len = std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
        assert_eq!(wal_len, 0, "the WAL is checkpointed and truncated");
        // The main file alone (the WAL lost) still knows the id.
        let copy = tempfile::tempdir().unwrap();
        std::fs::copy(
            dir.path().join("delivery.db"),
            copy.path().join("delivery.db"),
        )
        .unwrap();
        let (copied, _) = DeliveryStore::open(copy.path(), limits(100)).await.unwrap();
        assert!(!copied.found_empty());
        assert_eq!(
            copied.admit("a", false).await.unwrap(),
            Admit::Done("ok".into())
        );
    }

    #[tokio::test]
    async fn a_store_that_existed_but_reads_empty_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = DeliveryStore::open(dir.path(), limits(100)).await.unwrap();
        assert!(!store.found_empty(), "a new store is not a lost one");
        assert!(dir.path().join(CREATED_MARKER).exists());
        store.close().await.unwrap();
        // The marker stays; the file is replaced by an empty one.
        let lost = tempfile::tempdir().unwrap();
        std::fs::copy(
            dir.path().join(CREATED_MARKER),
            lost.path().join(CREATED_MARKER),
        )
        .unwrap();
        std::fs::write(lost.path().join("delivery.db"), b"").unwrap();
        let (store, _) = DeliveryStore::open(lost.path(), limits(100)).await.unwrap();
        assert!(store.found_empty());
        drop(store);
        // Reported once: the store is whole again.
        let (store, _) = DeliveryStore::open(lost.path(), limits(100)).await.unwrap();
        assert!(!store.found_empty());
    }

    #[tokio::test]
    async fn a_damaged_store_says_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("delivery.db"), vec![b'x'; 4096]).unwrap();
        let error = DeliveryStore::open(dir.path(), limits(100))
            .await
            .expect_err("a damaged store does not open")
            .to_string();
        assert!(error.contains("is damaged"), "{error}");
        assert!(error.contains("aside"), "{error}");
        assert!(
            error.contains(&dir.path().join("delivery.db").display().to_string()),
            "{error}"
        );
    }

    #[tokio::test]
    async fn an_older_store_gains_the_started_column_and_its_open_ids_count_as_started() {
        let dir = tempfile::tempdir().unwrap();
        {
            let conn = Connection::open(dir.path().join("delivery.db")).unwrap();
            conn.execute_batch(
                "CREATE TABLE ids (id TEXT PRIMARY KEY, at_ms INTEGER NOT NULL, reply TEXT) WITHOUT ROWID;",
            )
            .unwrap();
            conn.execute(
                "INSERT INTO ids (id, at_ms, reply) VALUES ('old', ?1, NULL)",
                params![now_ms()],
            )
            .unwrap();
        }
        let (store, _) = DeliveryStore::open(dir.path(), limits(100)).await.unwrap();
        assert_eq!(store.admit("old", false).await.unwrap(), Admit::Interrupted);
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
