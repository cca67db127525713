//! Background delegations (`delegate_to_<agent>` in background mode), as
//! stored: one row per task, written when it is delegated and again when
//! it ends. A task a stopped process left `running` is marked
//! `interrupted` at the next start ([`Store::interrupt_tasks`]), so it is
//! reported, never silently lost.

use super::{Store, i, u};
use crate::clock;
use crate::error::AgentError;
use crate::graph::ToolStep;
use droidwarden_services::WireError;
use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS tasks (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    parent_run TEXT NOT NULL,
    call_id TEXT NOT NULL,
    agent TEXT NOT NULL,
    task TEXT NOT NULL,
    status TEXT NOT NULL,          -- running | succeeded | failed | interrupted
    result TEXT,                   -- the agent's answer (JSON)
    error TEXT,                    -- WireError (JSON)
    steps TEXT NOT NULL DEFAULT '[]',  -- Vec<ToolStep> (JSON)
    created_at INTEGER NOT NULL,
    finished_at INTEGER
);
CREATE INDEX IF NOT EXISTS tasks_by_session ON tasks(session_id, created_at);
CREATE INDEX IF NOT EXISTS tasks_by_status ON tasks(status);
";

pub use crate::events::TaskStatus;

/// A status as the table stores it (an unknown word reads as interrupted).
fn parse_status(s: &str) -> TaskStatus {
    match s {
        "running" => TaskStatus::Running,
        "succeeded" => TaskStatus::Succeeded,
        "failed" => TaskStatus::Failed,
        _ => TaskStatus::Interrupted,
    }
}

/// A background delegation, as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Task {
    /// Its id (`delegation_status {task_id}`); also the id of its run's
    /// events.
    pub task_id: String,
    /// The session it was delegated from.
    pub session_id: String,
    /// The run that delegated it.
    pub parent_run: String,
    /// The parent's tool call.
    pub call_id: String,
    /// The agent (`[[agents]]` name).
    pub agent: String,
    /// What it was asked (the task; the context is not kept).
    pub task: String,
    /// Where it is.
    pub status: TaskStatus,
    /// Its answer, once it succeeded (`{"agent", "text", "stop_reason",
    /// "tool_calls"}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// Why it failed or was interrupted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<WireError>,
    /// The tool calls it made, once finished.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<ToolStep>,
    /// Delegated, unix ms.
    pub created_at: u64,
    /// Ended, unix ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<u64>,
}

const COLUMNS: &str = "id, session_id, parent_run, call_id, agent, task, status, result, error, steps, created_at, finished_at";

fn read(r: &rusqlite::Row<'_>) -> rusqlite::Result<Task> {
    fn json<T: serde::de::DeserializeOwned>(s: Option<String>) -> Option<T> {
        s.and_then(|s| serde_json::from_str(&s).ok())
    }
    Ok(Task {
        task_id: r.get(0)?,
        session_id: r.get(1)?,
        parent_run: r.get(2)?,
        call_id: r.get(3)?,
        agent: r.get(4)?,
        task: r.get(5)?,
        status: parse_status(&r.get::<_, String>(6)?),
        result: json(r.get(7)?),
        error: json(r.get(8)?),
        steps: json(r.get(9)?).unwrap_or_default(),
        created_at: u(r.get(10)?),
        finished_at: r.get::<_, Option<i64>>(11)?.map(u),
    })
}

/// The tasks of `session` (every task with `None`), oldest first.
pub(super) fn of_session(
    conn: &Connection,
    session: Option<&str>,
) -> Result<Vec<Task>, AgentError> {
    super::rows(
        conn,
        &format!(
            "SELECT {COLUMNS} FROM tasks WHERE ?1 IS NULL OR session_id = ?1 ORDER BY created_at, id"
        ),
        params![session],
        read,
    )
}

impl Store {
    /// Record a task just delegated (`running`).
    pub(crate) async fn insert_task(&self, t: Task) -> Result<(), AgentError> {
        self.call(move |conn| {
            conn.execute(
                "INSERT INTO tasks (id, session_id, parent_run, call_id, agent, task, status, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![
                    t.task_id,
                    t.session_id,
                    t.parent_run,
                    t.call_id,
                    t.agent,
                    t.task,
                    t.status.as_str(),
                    i(t.created_at)
                ],
            )?;
            Ok(())
        })
        .await
    }

    /// Record how a task ended. A task already ended keeps its first end.
    pub(crate) async fn finish_task(
        &self,
        task_id: String,
        status: TaskStatus,
        result: Option<Value>,
        error: Option<WireError>,
        steps: Vec<ToolStep>,
    ) -> Result<(), AgentError> {
        self.call(move |conn| {
            let error = error.map(|e| serde_json::to_string(&e)).transpose()?;
            conn.execute(
                "UPDATE tasks SET status = ?2, result = ?3, error = ?4, steps = ?5, finished_at = ?6
                 WHERE id = ?1 AND status = 'running'",
                params![
                    task_id,
                    status.as_str(),
                    result.map(|v| v.to_string()),
                    error,
                    serde_json::to_string(&steps)?,
                    i(clock::now_ms())
                ],
            )?;
            Ok(())
        })
        .await
    }

    /// One task.
    pub async fn task(&self, task_id: String) -> Result<Option<Task>, AgentError> {
        self.call(move |conn| {
            Ok(conn
                .query_row(
                    &format!("SELECT {COLUMNS} FROM tasks WHERE id = ?1"),
                    params![task_id],
                    read,
                )
                .optional()?)
        })
        .await
    }

    /// The tasks of a session (every task with `None`), oldest first.
    pub async fn tasks(&self, session: Option<String>) -> Result<Vec<Task>, AgentError> {
        self.call(move |conn| of_session(conn, session.as_deref()))
            .await
    }

    /// Mark every task still `running` as `interrupted`: call once at
    /// start-up, before any run is driven (nothing of this process runs
    /// them). Returns how many were marked.
    pub(crate) async fn interrupt_tasks(&self) -> Result<usize, AgentError> {
        self.call(|conn| {
            let error = serde_json::to_string(&WireError::new(
                droidwarden_services::ErrorCode::Internal,
                "the daemon stopped while this task ran; it did not finish (delegate it again if it is still wanted)",
            ))?;
            Ok(conn.execute(
                "UPDATE tasks SET status = 'interrupted', error = ?1, finished_at = ?2
                 WHERE status = 'running'",
                params![error, i(clock::now_ms())],
            )?)
        })
        .await
    }
}
