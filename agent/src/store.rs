//! Durable state in SQLite: sessions, runs (their checkpointed state),
//! turns (the conversation, for the prompt window and for markdown),
//! approvals, and the FTS5 index of archived turns.
//!
//! SQLite is blocking, so one OS thread owns the connection (an actor) and
//! [`Store`] is a cloneable handle that sends it closures over a bounded
//! channel (capacity 64: enough for every run's next checkpoint to queue
//! without blocking; beyond that callers wait, which is the backpressure we
//! want). Waits are bounded by SQLite's `busy_timeout` (5 s); no tokio timer
//! is involved, so tests with paused time work.
//!
//! The database is in WAL mode. [`Durability::Process`] (the default,
//! `synchronous=NORMAL`) survives a killed process; [`Durability::Power`]
//! (`synchronous=FULL`) also survives power loss, at one fsync per commit.

use crate::clock;
use crate::error::AgentError;
use crate::events::{ApprovalOutcome, PendingApproval, StopReason};
use crate::grant::Grant;
use crate::graph::{RunOutcome, RunState};
use crate::message::{Message, TimedMessage};
use droidwarden_services::Risk;
use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use tokio::sync::{mpsc, oneshot};

mod children; // Child runs, for `session show`.
mod tasks; // Background delegations.
pub(crate) use children::ChildRecord;
pub use tasks::{Task, TaskStatus};

/// A unit of work for the store's thread. It returns how to deliver its
/// result once the enclosing transaction has committed (or failed to).
type Job = Box<dyn FnOnce(&mut Connection) -> Reply + Send>;
type Reply = Box<dyn FnOnce(Option<&str>) + Send>;

/// Most jobs committed together (see the group commit in [`Store::open`]).
const MAX_BATCH: usize = 64;

/// How hard commits try to reach the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Durability {
    /// WAL with `synchronous=NORMAL`: survives a crash of the process.
    #[default]
    Process,
    /// WAL with `synchronous=FULL`: survives power loss.
    Power,
}

/// A handle to the store's thread. Cheap to clone; the thread ends when the
/// last handle is dropped.
#[derive(Debug, Clone)]
pub struct Store {
    tx: mpsc::Sender<Job>,
    path: PathBuf,
}

/// A session, for listings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionSummary {
    /// Session id.
    pub id: String,
    /// The first prompt, shortened.
    pub title: String,
    /// Created, unix ms.
    pub created_at: u64,
    /// Last activity, unix ms.
    pub updated_at: u64,
    /// Finished turns.
    pub turns: u64,
    /// Runs not finished (running, waiting for approval, or interrupted).
    pub active_runs: u64,
    /// Its background delegations, oldest first (in a listing, without
    /// their tool calls).
    #[serde(default)]
    pub tasks: Vec<Task>,
}

/// A run that is not finished, for [`crate::Agent::interrupted_runs`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunInfo {
    /// Run id.
    pub run_id: String,
    /// Session id.
    pub session_id: String,
    /// Started, unix ms.
    pub created_at: u64,
    /// Last checkpoint, unix ms.
    pub updated_at: u64,
    /// The tag the caller gave in [`crate::AskRequest::origin`] (where to
    /// send the answer of a run resumed after a restart).
    pub origin: Option<String>,
}

/// The state of an approval request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ApprovalStatus {
    Pending,
    /// Approved by whom (`None` in rows stored before it was recorded).
    Approved(Option<String>),
    /// Denied, why, and by whom.
    Denied(String, Option<String>),
    Expired,
}

/// Everything stored about one session, for its markdown.
#[derive(Debug)]
pub(crate) struct SessionDetail {
    pub(crate) summary: SessionSummary,
    pub(crate) turns: Vec<TurnRecord>,
    pub(crate) active: Vec<RunState>,
    pub(crate) children: Vec<ChildRecord>,
    pub(crate) approvals: Vec<ApprovalOutcome>,
}

/// One finished turn, as stored.
#[derive(Debug, Clone)]
pub(crate) struct TurnRecord {
    pub(crate) run_id: String,
    pub(crate) started_at: u64,
    pub(crate) stop_reason: String,
    pub(crate) messages: Vec<TimedMessage>,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    title TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions(id),
    status TEXT NOT NULL,          -- active | finished
    state TEXT NOT NULL,           -- RunState as JSON
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    origin TEXT                    -- the caller's tag (AskRequest::origin)
);
CREATE INDEX IF NOT EXISTS runs_by_status ON runs(status);
CREATE TABLE IF NOT EXISTS turns (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES sessions(id),
    run_id TEXT NOT NULL,
    prompt TEXT NOT NULL,
    answer TEXT NOT NULL,
    stop_reason TEXT NOT NULL,
    messages TEXT NOT NULL,        -- Vec<TimedMessage> as JSON
    started_at INTEGER NOT NULL,
    finished_at INTEGER NOT NULL,
    archived INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS turns_by_session ON turns(session_id, archived, id);
CREATE VIRTUAL TABLE IF NOT EXISTS memory USING fts5(
    content, session_id UNINDEXED, turn_id UNINDEXED, at UNINDEXED
);
CREATE TABLE IF NOT EXISTS approvals (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    call_id TEXT NOT NULL,
    device TEXT,
    service TEXT NOT NULL,
    action TEXT NOT NULL,
    params TEXT NOT NULL,
    risk TEXT NOT NULL,
    requested_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    status TEXT NOT NULL,          -- pending | approved | denied | expired
    reason TEXT,
    decided_at INTEGER,
    decided_by TEXT                -- who answered (see Agent::approve)
);
CREATE INDEX IF NOT EXISTS approvals_by_status ON approvals(status);
CREATE TABLE IF NOT EXISTS grants (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    approval_id TEXT NOT NULL,
    device TEXT NOT NULL,
    up_to TEXT NOT NULL,           -- Risk
    granted_by TEXT NOT NULL,
    granted_at INTEGER NOT NULL,
    revoked_at INTEGER,
    revoked_by TEXT,
    ended_at INTEGER               -- when its run finished
);
CREATE INDEX IF NOT EXISTS grants_by_run ON grants(run_id);
";

pub use crate::ids::check_id;

/// A fresh id: `prefix`, the time in hex and 24 random bits.
pub(crate) fn new_id(prefix: &str) -> String {
    format!(
        "{prefix}{:x}{:06x}",
        clock::now_ms(),
        fastrand::u32(..) & 0xff_ffff
    )
}

/// Store a pending approval request; `verb` is `INSERT` or, where a replay
/// may bring the same request again, `INSERT OR IGNORE`.
fn insert_approval(
    conn: &rusqlite::Connection,
    a: &PendingApproval,
    verb: &str,
) -> rusqlite::Result<usize> {
    conn.execute(
        &format!(
            "{verb} INTO approvals (id, run_id, session_id, call_id, device, service,
                action, params, risk, requested_at, expires_at, status, app, asked_by)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, 'pending', ?12, ?13)"
        ),
        params![
            a.approval_id,
            a.run_id,
            a.session,
            a.call_id,
            a.device,
            a.service,
            a.action,
            a.params.to_string(),
            a.risk.as_str(),
            i(a.requested_at),
            i(a.expires_at),
            a.app,
            a.asked_by
        ],
    )
}

fn i(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// A session's id, title and times (columns 0 to 3), without counts or
/// tasks.
fn session_of(r: &rusqlite::Row<'_>) -> rusqlite::Result<SessionSummary> {
    Ok(SessionSummary {
        id: r.get(0)?,
        title: r.get(1)?,
        created_at: u(r.get(2)?),
        updated_at: u(r.get(3)?),
        turns: 0,
        active_runs: 0,
        tasks: Vec::new(),
    })
}

fn u(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

impl Store {
    /// Open (creating if needed) `dir/agent.sqlite3` on the store's own thread.
    ///
    /// # Errors
    /// [`AgentError::StoreDir`] when the directory cannot be created,
    /// [`AgentError::Store`] when SQLite cannot open or migrate the file.
    pub async fn open(dir: impl AsRef<Path>, durability: Durability) -> Result<Store, AgentError> {
        let dir = dir.as_ref().to_owned();
        let path = dir.join("agent.sqlite3");
        // Capacity: see the module documentation.
        let (tx, mut rx) = mpsc::channel::<Job>(64);
        let (ready_tx, ready_rx) = oneshot::channel();
        let thread_path = path.clone();
        std::thread::Builder::new()
            .name("dw-agent-store".into())
            .spawn(move || {
                let conn = match open_connection(&dir, &thread_path, durability) {
                    Ok(c) => {
                        let _ = ready_tx.send(Ok(()));
                        c
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let mut conn = conn;
                // Group commit: jobs that queued up while the previous batch
                // ran share one transaction, and their callers hear back
                // only after it committed. Each job works inside its own
                // savepoint, so one job's failure does not undo another's.
                let mut batch: Vec<Job> = Vec::with_capacity(MAX_BATCH);
                while let Some(job) = rx.blocking_recv() {
                    batch.push(job);
                    while batch.len() < MAX_BATCH {
                        match rx.try_recv() {
                            Ok(job) => batch.push(job),
                            Err(_) => break,
                        }
                    }
                    if batch.len() == 1
                        && let Some(job) = batch.pop()
                    {
                        job(&mut conn)(None);
                        continue;
                    }
                    let begun = conn.execute_batch("BEGIN IMMEDIATE");
                    let replies: Vec<Reply> = batch.drain(..).map(|job| job(&mut conn)).collect();
                    let committed = begun.and_then(|()| conn.execute_batch("COMMIT"));
                    let failure = committed.err().map(|e| {
                        let _ = conn.execute_batch("ROLLBACK");
                        e.to_string()
                    });
                    for reply in replies {
                        reply(failure.as_deref());
                    }
                }
            })
            .map_err(|e| AgentError::StoreDir {
                path: path.display().to_string(),
                source: e,
            })?;
        ready_rx.await.map_err(|_| AgentError::StoreClosed)??;
        Ok(Store { tx, path })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    async fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, AgentError> + Send + 'static,
    ) -> Result<T, AgentError> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(Box::new(move |conn| {
                let result = f(conn);
                Box::new(move |commit_failure: Option<&str>| {
                    let result = match commit_failure {
                        Some(e) => result.and(Err(AgentError::StoreCommit(e.to_owned()))),
                        None => result,
                    };
                    let _ = tx.send(result);
                })
            }))
            .await
            .map_err(|_| AgentError::StoreClosed)?;
        rx.await.map_err(|_| AgentError::StoreClosed)?
    }

    /// Create the session if needed and a run, built by `make` from the
    /// session's context: its recent turns (`window` of them, as messages)
    /// and up to `recall` archived turns matching `prompt`.
    pub(crate) async fn start_run(
        &self,
        session_id: String,
        prompt: String,
        origin: Option<String>,
        window: u32,
        recall: u32,
        make: impl FnOnce(Vec<Message>, Vec<String>) -> RunState + Send + 'static,
    ) -> Result<RunState, AgentError> {
        self.call(move |conn| {
            let tx = conn.savepoint()?;
            let now = i(clock::now_ms());
            let title: String = prompt.chars().take(80).collect();
            tx.execute(
                "INSERT INTO sessions (id, title, created_at, updated_at) VALUES (?1, ?2, ?3, ?3)
                 ON CONFLICT(id) DO UPDATE SET updated_at = excluded.updated_at",
                params![session_id, title, now],
            )?;
            let history = recent_history(&tx, &session_id, window)?;
            let recalled = if recall > 0 {
                recall_turns(&tx, &session_id, &prompt, recall)?
            } else {
                Vec::new()
            };
            let state = make(history, recalled);
            let json = serde_json::to_string(&state)?;
            tx.execute(
                "INSERT INTO runs (id, session_id, status, state, created_at, updated_at, origin)
                 VALUES (?1, ?2, 'active', ?3, ?4, ?4, ?5)",
                params![state.run_id, session_id, json, now, origin],
            )?;
            tx.commit()?;
            Ok(state)
        })
        .await
    }

    /// Persist a run's state and new approval requests in one transaction.
    pub(crate) async fn checkpoint(
        &self,
        run_id: String,
        state_json: String,
        approvals: Vec<PendingApproval>,
    ) -> Result<(), AgentError> {
        self.call(move |conn| {
            let tx = conn.savepoint()?;
            let now = i(clock::now_ms());
            tx.execute(
                "UPDATE runs SET state = ?2, updated_at = ?3 WHERE id = ?1",
                params![run_id, state_json, now],
            )?;
            for a in &approvals {
                insert_approval(&tx, a, "INSERT OR IGNORE")?;
            }
            tx.commit()?;
            Ok(())
        })
        .await
    }

    /// Store a new approval request that belongs to no run (see
    /// `agent/external.rs`).
    pub(crate) async fn insert_approval(&self, a: PendingApproval) -> Result<(), AgentError> {
        self.call(move |conn| {
            insert_approval(conn, &a, "INSERT")?;
            Ok(())
        })
        .await
    }

    /// Mark the run finished, store its turn and archive turns that fell out
    /// of the window into the full-text index.
    pub(crate) async fn finish_run(
        &self,
        state: &RunState,
        outcome: &RunOutcome,
        window: u32,
    ) -> Result<(), AgentError> {
        let json = serde_json::to_string(state)?;
        let messages = serde_json::to_string(&state.messages)?;
        let run_id = state.run_id.clone();
        let session_id = state.session_id.clone();
        let prompt = state.prompt().to_owned();
        let answer = outcome.text.clone();
        let stop = serde_json::to_value(outcome.stop_reason)?
            .as_str()
            .unwrap_or("error")
            .to_owned();
        let started = state.messages.first().map_or(0, |m| m.at_ms);
        self.call(move |conn| {
            let tx = conn.savepoint()?;
            let now = i(clock::now_ms());
            let changed = tx.execute(
                "UPDATE runs SET state = ?2, status = 'finished', updated_at = ?3
                 WHERE id = ?1 AND status = 'active'",
                params![run_id, json, now],
            )?;
            if changed == 1 {
                tx.execute(
                    "INSERT INTO turns (session_id, run_id, prompt, answer, stop_reason, messages,
                        started_at, finished_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                    params![
                        session_id,
                        run_id,
                        prompt,
                        answer,
                        stop,
                        messages,
                        i(started),
                        now
                    ],
                )?;
                tx.execute(
                    "UPDATE sessions SET updated_at = ?2 WHERE id = ?1",
                    params![session_id, now],
                )?;
                archive_overflow(&tx, &session_id, window)?;
            }
            // Grants end with their run.
            tx.execute(
                // App grants are not the run's: they end when they expire.
                "UPDATE grants SET ended_at = ?2 WHERE run_id = ?1 AND ended_at IS NULL
                    AND app IS NULL",
                params![run_id, now],
            )?;
            tx.commit()?;
            Ok(())
        })
        .await
    }

    /// Load an unfinished run's state.
    pub(crate) async fn load_run(&self, run_id: String) -> Result<RunState, AgentError> {
        self.call(move |conn| {
            let json: Option<String> = conn
                .query_row(
                    "SELECT state FROM runs WHERE id = ?1 AND status = 'active'",
                    params![run_id],
                    |r| r.get(0),
                )
                .optional()?;
            let json = json.ok_or_else(|| AgentError::UnknownRun(run_id.clone()))?;
            Ok(serde_json::from_str(&json)?)
        })
        .await
    }

    /// Runs that are not finished.
    pub async fn active_runs(&self) -> Result<Vec<RunInfo>, AgentError> {
        self.call(|conn| {
            let mut stmt = conn.prepare(
                "SELECT id, session_id, created_at, updated_at, origin FROM runs
                 WHERE status = 'active' ORDER BY created_at",
            )?;
            let rows = stmt.query_map([], |r| {
                Ok(RunInfo {
                    run_id: r.get(0)?,
                    session_id: r.get(1)?,
                    created_at: u(r.get(2)?),
                    updated_at: u(r.get(3)?),
                    origin: r.get(4)?,
                })
            })?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
    }

    pub(crate) async fn approval_status(&self, id: String) -> Result<ApprovalStatus, AgentError> {
        self.call(move |conn| read_status(conn, &id)?.ok_or(AgentError::UnknownApproval(id)))
            .await
    }

    /// Answer a pending approval, recording who answered. Returns the
    /// request.
    pub(crate) async fn decide(
        &self,
        id: String,
        approved: bool,
        reason: Option<String>,
        by: String,
        extra: DecisionExtra,
    ) -> Result<PendingApproval, AgentError> {
        self.call(move |conn| {
            let tx = conn.savepoint()?;
            let now = clock::now_ms();
            let approval =
                read_approval(&tx, &id)?.ok_or_else(|| AgentError::UnknownApproval(id.clone()))?;
            let status: String = tx.query_row(
                "SELECT status FROM approvals WHERE id = ?1",
                params![id],
                |r| r.get(0),
            )?;
            if status != "pending" {
                return Err(AgentError::ApprovalClosed { id, status });
            }
            if approval.expires_at <= now {
                tx.execute(
                    "UPDATE approvals SET status = 'expired', decided_at = ?2 WHERE id = ?1",
                    params![id, i(now)],
                )?;
                tx.commit()?;
                return Err(AgentError::ApprovalClosed {
                    id,
                    status: "expired".into(),
                });
            }
            let edited = extra
                .edits
                .as_ref()
                .map(|m| Value::Object(m.clone()).to_string());
            tx.execute(
                "UPDATE approvals SET status = ?2, reason = ?3, decided_at = ?4, decided_by = ?5,
                    edited_params = ?6, grant_id = ?7
                 WHERE id = ?1",
                params![
                    id,
                    if approved { "approved" } else { "denied" },
                    reason,
                    i(now),
                    by,
                    edited,
                    extra.grant.as_ref().map(|g| g.grant_id.clone())
                ],
            )?;
            if let Some(g) = &extra.grant {
                tx.execute(
                    "INSERT INTO grants (id, run_id, session_id, approval_id, device, up_to,
                        granted_by, granted_at, app, expires_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                    params![
                        g.grant_id,
                        g.run_id,
                        g.session_id,
                        g.approval_id,
                        g.device,
                        g.up_to.as_str(),
                        g.granted_by,
                        i(g.granted_at),
                        g.app,
                        g.expires_at.map(i)
                    ],
                )?;
            }
            tx.commit()?;
            Ok(approval)
        })
        .await
    }

    /// The waiting run's timer ran out: expire the request unless it was
    /// answered meanwhile. Returns the final status.
    pub(crate) async fn expire(&self, id: String) -> Result<ApprovalStatus, AgentError> {
        self.call(move |conn| {
            conn.execute(
                "UPDATE approvals SET status = 'expired', decided_at = ?2
                 WHERE id = ?1 AND status = 'pending'",
                params![id, i(clock::now_ms())],
            )?;
            read_status(conn, &id)?.ok_or(AgentError::UnknownApproval(id))
        })
        .await
    }

    /// Expire the pending approval requests no active run can still read:
    /// those of a skill's run (not persisted on its own) that a stopped
    /// process left behind. Call once at start-up, before any run is
    /// driven; returns how many were expired.
    pub(crate) async fn expire_orphans(&self) -> Result<usize, AgentError> {
        self.call(|conn| {
            Ok(conn.execute(
                "UPDATE approvals SET status = 'expired', decided_at = ?1,
                    reason = 'the skill that asked was interrupted by a restart'
                 WHERE status = 'pending'
                   AND run_id NOT IN (SELECT id FROM runs WHERE status = 'active')",
                params![i(clock::now_ms())],
            )?)
        })
        .await
    }

    /// The edited parameters and the grant of an answered request.
    pub(crate) async fn decision_extra(&self, id: String) -> Result<DecisionExtra, AgentError> {
        self.call(move |conn| {
            let row: Option<(Option<String>, Option<String>)> = conn
                .query_row(
                    "SELECT edited_params, grant_id FROM approvals WHERE id = ?1",
                    params![id],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()?;
            let Some((edits, grant_id)) = row else {
                return Ok(DecisionExtra::default());
            };
            let grant = match grant_id {
                Some(g) => grants(conn, "WHERE id = ?1", params![g])?.pop(),
                None => None,
            };
            Ok(DecisionExtra {
                edits: edits.and_then(|t| serde_json::from_str(&t).ok()),
                grant,
            })
        })
        .await
    }

    /// The grants that hold for run `run_id`: its own, and the app grants
    /// not yet expired (they hold for every run).
    pub(crate) async fn run_grants(&self, run_id: String) -> Result<Vec<Grant>, AgentError> {
        let now = i(clock::now_ms());
        self.call(move |conn| {
            grants(
                conn,
                "WHERE revoked_at IS NULL AND ended_at IS NULL
                   AND ((app IS NULL AND run_id = ?1) OR (app IS NOT NULL AND expires_at > ?2))",
                params![run_id, now],
            )
        })
        .await
    }

    /// The app grants not yet expired nor revoked.
    pub(crate) async fn app_grants(&self) -> Result<Vec<Grant>, AgentError> {
        let now = i(clock::now_ms());
        self.call(move |conn| {
            grants(
                conn,
                "WHERE revoked_at IS NULL AND app IS NOT NULL AND expires_at > ?1
                 ORDER BY granted_at",
                params![now],
            )
        })
        .await
    }

    /// Every grant that still holds (its run not finished; an app grant
    /// until it expires), oldest first.
    pub(crate) async fn active_grants(&self) -> Result<Vec<Grant>, AgentError> {
        let now = i(clock::now_ms());
        self.call(move |conn| {
            grants(
                conn,
                "WHERE revoked_at IS NULL AND ended_at IS NULL
                   AND ((app IS NULL AND run_id IN (SELECT id FROM runs WHERE status = 'active'))
                     OR (app IS NOT NULL AND expires_at > ?1))
                 ORDER BY granted_at",
                params![now],
            )
        })
        .await
    }

    /// Revoke grant `id` on behalf of `by`. Returns it, revoked.
    pub(crate) async fn revoke_grant(&self, id: String, by: String) -> Result<Grant, AgentError> {
        self.call(move |conn| {
            let grant = grants(conn, "WHERE id = ?1", params![id])?
                .pop()
                .ok_or_else(|| AgentError::UnknownGrant(id.clone()))?;
            let now = clock::now_ms();
            if !grant.active() || grant.expires_at.is_some_and(|end| end <= now) {
                return Err(AgentError::GrantClosed(id));
            }
            conn.execute(
                "UPDATE grants SET revoked_at = ?2, revoked_by = ?3 WHERE id = ?1",
                params![id, i(now), by],
            )?;
            Ok(Grant {
                revoked_at: Some(now),
                revoked_by: Some(by),
                ..grant
            })
        })
        .await
    }

    /// Approval requests still waiting for an answer.
    pub async fn pending_approvals(&self) -> Result<Vec<PendingApproval>, AgentError> {
        self.call(|conn| approvals(conn, "WHERE status = 'pending' ORDER BY requested_at", []))
            .await
    }

    /// The `limit` approval requests answered (or expired) last, the most
    /// recent first.
    pub(crate) async fn approval_history(
        &self,
        limit: usize,
    ) -> Result<Vec<ApprovalOutcome>, AgentError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.call(move |conn| {
            outcomes(
                conn,
                "WHERE status != 'pending' ORDER BY decided_at DESC, requested_at DESC LIMIT ?1",
                params![limit],
            )
        })
        .await
    }

    /// Every session, most recent first.
    pub async fn sessions(&self) -> Result<Vec<SessionSummary>, AgentError> {
        self.call(|conn| {
            let mut stmt = conn.prepare(
                "SELECT s.id, s.title, s.created_at, s.updated_at,
                    (SELECT count(*) FROM turns t WHERE t.session_id = s.id),
                    (SELECT count(*) FROM runs r WHERE r.session_id = s.id AND r.status = 'active')
                 FROM sessions s ORDER BY s.updated_at DESC",
            )?;
            let rows = stmt.query_map([], |r| {
                Ok(SessionSummary {
                    turns: u(r.get(4)?),
                    active_runs: u(r.get(5)?),
                    ..session_of(r)?
                })
            })?;
            let mut out = rows.collect::<Result<Vec<_>, _>>()?;
            let mut by_session: std::collections::HashMap<String, Vec<Task>> =
                std::collections::HashMap::new();
            for t in tasks::of_session(conn, None)? {
                by_session.entry(t.session_id.clone()).or_default().push(t);
            }
            for s in &mut out {
                s.tasks = by_session.remove(&s.id).unwrap_or_default();
                // A listing: the tool calls are in `session show`.
                for t in &mut s.tasks {
                    t.steps.clear();
                }
            }
            Ok(out)
        })
        .await
    }

    /// A session's finished turns and unfinished runs.
    pub(crate) async fn session_detail(&self, id: String) -> Result<SessionDetail, AgentError> {
        self.call(move |conn| {
            let summary = conn
                .query_row(
                    "SELECT id, title, created_at, updated_at FROM sessions WHERE id = ?1",
                    params![id],
                    session_of,
                )
                .optional()?
                .ok_or_else(|| AgentError::UnknownSession(id.clone()))?;
            let mut stmt = conn.prepare(
                "SELECT run_id, started_at, stop_reason, messages FROM turns
                 WHERE session_id = ?1 ORDER BY id",
            )?;
            let turns = stmt
                .query_map(params![id], |r| {
                    Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?, r.get::<_, String>(2)?, r.get::<_, String>(3)?))
                })?
                .collect::<Result<Vec<_>, _>>()?;
            let turns = turns
                .into_iter()
                .map(|(run_id, started, stop, messages)| {
                    Ok(TurnRecord {
                        run_id,
                        started_at: u(started),
                        stop_reason: stop,
                        messages: serde_json::from_str(&messages)?,
                    })
                })
                .collect::<Result<Vec<_>, AgentError>>()?;
            let mut stmt = conn.prepare(
                "SELECT state FROM runs WHERE session_id = ?1 AND status = 'active' ORDER BY created_at",
            )?;
            let active = stmt
                .query_map(params![id], |r| r.get::<_, String>(0))?
                .collect::<Result<Vec<_>, _>>()?
                .iter()
                .map(|s| serde_json::from_str(s))
                .collect::<Result<Vec<RunState>, _>>()?;
            let mut summary = summary;
            summary.tasks = tasks::of_session(conn, Some(&id))?;
            let children = children::of_session(conn, &id)?;
            let approvals = outcomes(
                conn,
                "WHERE session_id = ?1 ORDER BY requested_at",
                params![id],
            )?;
            Ok(SessionDetail {
                summary,
                turns,
                active,
                children,
                approvals,
            })
        })
        .await
    }
}

/// `ALTER TABLE table ADD COLUMN column TEXT` unless it is there already.
fn add_missing_column(conn: &Connection, table: &str, column: &str) -> Result<(), AgentError> {
    add_missing_typed(conn, table, column, "TEXT")
}

/// [`add_missing_column`] for a column of unix milliseconds: compared as
/// numbers, which a `TEXT` column's affinity would turn into strings.
fn add_missing_integer_column(
    conn: &Connection,
    table: &str,
    column: &str,
) -> Result<(), AgentError> {
    add_missing_typed(conn, table, column, "INTEGER")
}

fn add_missing_typed(
    conn: &Connection,
    table: &str,
    column: &str,
    kind: &str,
) -> Result<(), AgentError> {
    let present = conn
        .prepare("SELECT 1 FROM pragma_table_info(?1) WHERE name = ?2")?
        .exists(params![table, column])?;
    if !present {
        conn.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {column} {kind}"))?;
    }
    Ok(())
}

fn open_connection(
    dir: &Path,
    path: &Path,
    durability: Durability,
) -> Result<Connection, AgentError> {
    std::fs::create_dir_all(dir).map_err(|e| AgentError::StoreDir {
        path: dir.display().to_string(),
        source: e,
    })?;
    let conn = Connection::open(path)?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(
        None,
        "synchronous",
        match durability {
            Durability::Process => "NORMAL",
            Durability::Power => "FULL",
        },
    )?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    conn.execute_batch(SCHEMA)?;
    conn.execute_batch(tasks::SCHEMA)?;
    conn.execute_batch(children::SCHEMA)?;
    // Databases created before runs had an origin, or approvals recorded
    // who answered them.
    add_missing_column(&conn, "runs", "origin")?;
    add_missing_column(&conn, "approvals", "decided_by")?;
    // Answers richer than yes/no (see `crate::grant`).
    add_missing_column(&conn, "approvals", "edited_params")?;
    add_missing_column(&conn, "approvals", "grant_id")?;
    // Scoped trust for screen actions: the app in front of a request, and
    // app grants (allowed on a device until they expire).
    add_missing_column(&conn, "approvals", "app")?;
    // Who asked for the run (see `RunState::asked_by`).
    add_missing_column(&conn, "approvals", "asked_by")?;
    add_missing_column(&conn, "grants", "app")?;
    add_missing_integer_column(&conn, "grants", "expires_at")?;
    Ok(conn)
}

fn read_status(conn: &Connection, id: &str) -> Result<Option<ApprovalStatus>, AgentError> {
    Ok(conn
        .query_row(
            "SELECT status, reason, decided_by FROM approvals WHERE id = ?1",
            params![id],
            |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, Option<String>>(1)?,
                    r.get::<_, Option<String>>(2)?,
                ))
            },
        )
        .optional()?
        .map(|(status, reason, by)| match status.as_str() {
            "pending" => ApprovalStatus::Pending,
            "approved" => ApprovalStatus::Approved(by),
            "expired" => ApprovalStatus::Expired,
            _ => ApprovalStatus::Denied(reason.unwrap_or_else(|| "denied".into()), by),
        }))
}

/// The columns [`approval_row`] reads, in its order.
const APPROVAL_COLUMNS: &str = "id, run_id, session_id, call_id, device, service, action, \
     params, risk, requested_at, expires_at, app, asked_by";

/// The approval request in a row that starts with [`APPROVAL_COLUMNS`].
fn approval_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<PendingApproval> {
    Ok(PendingApproval {
        approval_id: r.get(0)?,
        run_id: r.get(1)?,
        session: r.get(2)?,
        call_id: r.get(3)?,
        device: r.get(4)?,
        service: r.get(5)?,
        action: r.get(6)?,
        params: decoded(7, serde_json::from_str(&r.get::<_, String>(7)?))?,
        risk: decoded(
            8,
            serde_json::from_value(serde_json::Value::String(r.get(8)?)),
        )?,
        requested_at: u(r.get(9)?),
        expires_at: u(r.get(10)?),
        app: r.get(11)?,
        asked_by: r.get(12)?,
    })
}

/// A column's JSON, or the error that says which column did not decode.
fn decoded<T>(column: usize, json: serde_json::Result<T>) -> rusqlite::Result<T> {
    json.map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(column, rusqlite::types::Type::Text, Box::new(e))
    })
}

/// The approval requests that `filter` (`WHERE … ORDER BY …`, with
/// `params`) selects.
fn approvals(
    conn: &Connection,
    filter: &str,
    params: impl rusqlite::Params,
) -> Result<Vec<PendingApproval>, AgentError> {
    rows(
        conn,
        &format!("SELECT {APPROVAL_COLUMNS} FROM approvals {filter}"),
        params,
        approval_row,
    )
}

/// The approval requests that `filter` (`WHERE … ORDER BY …`, with
/// `params`) selects, each with how it ended.
fn outcomes(
    conn: &Connection,
    filter: &str,
    params: impl rusqlite::Params,
) -> Result<Vec<ApprovalOutcome>, AgentError> {
    let sql = format!(
        "SELECT {APPROVAL_COLUMNS}, status, reason, decided_at, decided_by, edited_params,
            grant_id FROM approvals {filter}"
    );
    // The columns after the request's.
    let n = APPROVAL_COLUMNS.split(',').count();
    let mut out = rows(conn, &sql, params, |r| {
        Ok((
            ApprovalOutcome {
                request: approval_row(r)?,
                status: r.get(n)?,
                reason: r.get(n + 1)?,
                decided_at: r.get::<_, Option<i64>>(n + 2)?.map(u),
                decided_by: r.get(n + 3)?,
                edited_params: r
                    .get::<_, Option<String>>(n + 4)?
                    .and_then(|t| serde_json::from_str(&t).ok()),
                grant: None,
            },
            r.get::<_, Option<String>>(n + 5)?,
        ))
    })?;
    for (outcome, grant_id) in &mut out {
        if let Some(id) = grant_id {
            outcome.grant = grants(conn, "WHERE id = ?1", params![id.as_str()])?.pop();
        }
    }
    Ok(out.into_iter().map(|(o, _)| o).collect())
}

/// Extras of an answer: the edited parameters and the grant, if any.
#[derive(Debug, Clone, Default)]
pub(crate) struct DecisionExtra {
    pub(crate) edits: Option<Map<String, Value>>,
    pub(crate) grant: Option<Grant>,
}

/// Every grant `filter` (with `params`) selects.
fn grants(
    conn: &Connection,
    filter: &str,
    params: impl rusqlite::Params,
) -> Result<Vec<Grant>, AgentError> {
    let sql = format!(
        "SELECT id, run_id, session_id, approval_id, device, up_to, granted_by, granted_at,
            revoked_at, revoked_by, ended_at, app, expires_at FROM grants {filter}"
    );
    rows(conn, &sql, params, |r| {
        let up_to: String = r.get(5)?;
        Ok(Grant {
            grant_id: r.get(0)?,
            run_id: r.get(1)?,
            session_id: r.get(2)?,
            approval_id: r.get(3)?,
            device: r.get(4)?,
            // An unreadable ceiling covers nothing above the lowest risk.
            up_to: serde_json::from_value(Value::String(up_to)).unwrap_or(Risk::Low),
            granted_by: r.get(6)?,
            granted_at: u(r.get(7)?),
            revoked_at: r.get::<_, Option<i64>>(8)?.map(u),
            revoked_by: r.get(9)?,
            ended_at: r.get::<_, Option<i64>>(10)?.map(u),
            app: r.get(11)?,
            expires_at: r.get::<_, Option<i64>>(12)?.map(u),
        })
    })
}

/// Every row `sql` (with `params`) selects, each read by `row`.
fn rows<T>(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
    row: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> Result<Vec<T>, AgentError> {
    let mut stmt = conn.prepare(sql)?;
    let rows = stmt
        .query_map(params, row)?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

fn read_approval(conn: &Connection, id: &str) -> Result<Option<PendingApproval>, AgentError> {
    Ok(approvals(conn, "WHERE id = ?1", params![id])?.pop())
}

/// The last `window` unarchived turns as user / assistant messages.
fn recent_history(
    conn: &Connection,
    session_id: &str,
    window: u32,
) -> Result<Vec<Message>, AgentError> {
    let mut stmt = conn.prepare(
        "SELECT prompt, answer FROM (
            SELECT id, prompt, answer FROM turns WHERE session_id = ?1 AND archived = 0
            ORDER BY id DESC LIMIT ?2
         ) ORDER BY id",
    )?;
    let rows = stmt.query_map(params![session_id, window], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (prompt, answer) = row?;
        out.push(Message::User { text: prompt });
        if !answer.is_empty() {
            out.push(Message::Assistant {
                text: answer,
                thinking: Vec::new(),
                tool_calls: Vec::new(),
            });
        }
    }
    Ok(out)
}

/// Archived turns of the session that best match `prompt` (BM25).
fn recall_turns(
    conn: &Connection,
    session_id: &str,
    prompt: &str,
    k: u32,
) -> Result<Vec<String>, AgentError> {
    let Some(query) = fts_query(prompt) else {
        return Ok(Vec::new());
    };
    let mut stmt = conn.prepare(
        "SELECT content, at FROM memory WHERE memory MATCH ?1 AND session_id = ?2
         ORDER BY bm25(memory) LIMIT ?3",
    )?;
    let rows = stmt.query_map(params![query, session_id, k], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (content, at) = row?;
        let mut snippet: String = content.chars().take(1200).collect();
        if snippet.len() < content.len() {
            snippet.push('…');
        }
        out.push(format!("[{}] {snippet}", clock::rfc3339(u(at))));
    }
    Ok(out)
}

/// An FTS5 query matching any word (3+ characters) of `text`, each quoted so
/// no FTS syntax from the prompt is interpreted.
fn fts_query(text: &str) -> Option<String> {
    let mut words: Vec<String> = Vec::new();
    for w in text.split(|c: char| !c.is_alphanumeric()) {
        let w = w.to_lowercase();
        if w.chars().count() >= 3 && !words.contains(&w) {
            words.push(w);
        }
        if words.len() >= 32 {
            break;
        }
    }
    (!words.is_empty()).then(|| {
        words
            .iter()
            .map(|w| format!("\"{w}\""))
            .collect::<Vec<_>>()
            .join(" OR ")
    })
}

/// Searchable text of a turn: the prompt, answers, tool calls and results.
pub(crate) fn searchable(messages: &[TimedMessage]) -> String {
    let mut out = String::new();
    for m in messages {
        match &m.message {
            Message::User { text } => {
                out.push_str("user: ");
                out.push_str(text);
            }
            Message::Assistant {
                text, tool_calls, ..
            } => {
                if !text.is_empty() {
                    out.push_str("assistant: ");
                    out.push_str(text);
                }
                for c in tool_calls {
                    out.push_str(&format!(" tool {} {}", c.name, c.arguments));
                }
            }
            Message::Tool { name, content, .. } => {
                out.push_str(&format!("{name} result: "));
                out.push_str(&content.chars().take(2000).collect::<String>());
            }
        }
        out.push('\n');
    }
    out
}

fn archive_overflow(conn: &Connection, session_id: &str, window: u32) -> Result<(), AgentError> {
    let old: Vec<(i64, String, i64)> = {
        let mut stmt = conn.prepare(
            "SELECT id, messages, started_at FROM turns WHERE session_id = ?1 AND archived = 0
             ORDER BY id DESC LIMIT -1 OFFSET ?2",
        )?;
        stmt.query_map(params![session_id, window], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })?
        .collect::<Result<Vec<_>, _>>()?
    };
    for (id, messages, at) in old {
        let messages: Vec<TimedMessage> = serde_json::from_str(&messages)?;
        conn.execute(
            "INSERT INTO memory (content, session_id, turn_id, at) VALUES (?1, ?2, ?3, ?4)",
            params![searchable(&messages), session_id, id, at],
        )?;
        conn.execute("UPDATE turns SET archived = 1 WHERE id = ?1", params![id])?;
    }
    Ok(())
}

/// Parse a stored stop reason.
pub(crate) fn stop_reason(s: &str) -> Option<StopReason> {
    serde_json::from_value(serde_json::Value::String(s.to_owned())).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fts_queries_are_quoted_words() {
        assert_eq!(
            fts_query("What's the garage-door code? NEAR(x)").as_deref(),
            Some("\"what\" OR \"the\" OR \"garage\" OR \"door\" OR \"code\" OR \"near\"")
        );
        assert_eq!(fts_query("a b"), None);
    }

    /// A store written before runs had an origin and approvals recorded
    /// who answered opens, gains both columns, and keeps its rows.
    #[test]
    fn an_older_store_gains_the_new_columns() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.sqlite3");
        let old = Connection::open(&path).unwrap();
        old.execute_batch(
            "CREATE TABLE runs (id TEXT PRIMARY KEY, session_id TEXT NOT NULL,
                 created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,
                 status TEXT NOT NULL, state TEXT NOT NULL);
             CREATE TABLE approvals (id TEXT PRIMARY KEY, run_id TEXT NOT NULL,
                 session_id TEXT NOT NULL, call_id TEXT NOT NULL, device TEXT,
                 service TEXT NOT NULL, action TEXT NOT NULL, params TEXT NOT NULL,
                 risk TEXT NOT NULL, requested_at INTEGER NOT NULL,
                 expires_at INTEGER NOT NULL, status TEXT NOT NULL, reason TEXT,
                 decided_at INTEGER);
             INSERT INTO approvals VALUES ('a1', 'r1', 's1', 'c1', NULL, 'wifi_automation',
                 'disable', '{}', 'high', 1, 2, 'approved', NULL, 2);",
        )
        .unwrap();
        drop(old);
        let conn = open_connection(dir.path(), &path, Durability::Process).unwrap();
        for (table, column) in [("runs", "origin"), ("approvals", "decided_by")] {
            let present: bool = conn
                .prepare("SELECT 1 FROM pragma_table_info(?1) WHERE name = ?2")
                .unwrap()
                .exists(params![table, column])
                .unwrap();
            assert!(present, "{table}.{column}");
        }
        assert_eq!(
            read_status(&conn, "a1").unwrap(),
            Some(ApprovalStatus::Approved(None))
        );
        drop(conn);
        // Opening again finds the columns there and leaves them.
        open_connection(dir.path(), &path, Durability::Process).unwrap();
    }

    #[test]
    fn ids() {
        assert!(check_id("s-1_A").is_ok());
        assert!(check_id("").is_err());
        assert!(check_id("a/b").is_err());
        assert!(new_id("r-").starts_with("r-"));
    }
}
