//! Child runs that ended inside their parent's tool call (a skill's run, a
//! wait-mode delegated agent's run), kept for `session show`: the child's
//! own tool calls and results are not in the parent's conversation, which
//! holds only the call and its result. Written once, when the child ends;
//! a child a stopped process cut short has no row (its parent reports it
//! as interrupted).

use super::{Store, i, u};
use crate::error::AgentError;
use crate::graph::ToolStep;
use rusqlite::{Connection, params};
use serde_json::Value;

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS child_runs (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    parent_run TEXT NOT NULL,
    call_id TEXT NOT NULL,
    kind TEXT NOT NULL,            -- skill | agent
    name TEXT NOT NULL,
    is_error INTEGER NOT NULL,
    result TEXT NOT NULL,          -- the parent's tool result, or the WireError (JSON)
    steps TEXT NOT NULL,           -- Vec<ToolStep> (JSON)
    started_at INTEGER NOT NULL,
    finished_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS child_runs_by_session ON child_runs(session_id, started_at);
";

/// A child run that ended, as stored.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ChildRecord {
    pub(crate) run_id: String,
    pub(crate) session_id: String,
    pub(crate) parent_run: String,
    pub(crate) call_id: String,
    /// `skill` or `agent`.
    pub(crate) kind: String,
    pub(crate) name: String,
    pub(crate) is_error: bool,
    pub(crate) result: Value,
    pub(crate) steps: Vec<ToolStep>,
    pub(crate) started_at: u64,
    pub(crate) finished_at: u64,
}

/// The child runs of a session, oldest first.
pub(super) fn of_session(conn: &Connection, session: &str) -> Result<Vec<ChildRecord>, AgentError> {
    let mut stmt = conn.prepare(
        "SELECT id, session_id, parent_run, call_id, kind, name, is_error, result, steps,
                started_at, finished_at
         FROM child_runs WHERE session_id = ?1 ORDER BY started_at, id",
    )?;
    let rows = stmt.query_map(params![session], |r| {
        Ok((
            ChildRecord {
                run_id: r.get(0)?,
                session_id: r.get(1)?,
                parent_run: r.get(2)?,
                call_id: r.get(3)?,
                kind: r.get(4)?,
                name: r.get(5)?,
                is_error: r.get::<_, i64>(6)? != 0,
                result: Value::Null,
                steps: Vec::new(),
                started_at: u(r.get(9)?),
                finished_at: u(r.get(10)?),
            },
            r.get::<_, String>(7)?,
            r.get::<_, String>(8)?,
        ))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (mut c, result, steps) = row?;
        c.result = serde_json::from_str(&result).unwrap_or(Value::String(result));
        c.steps = serde_json::from_str(&steps).unwrap_or_default();
        out.push(c);
    }
    Ok(out)
}

impl Store {
    /// Keep a child run that ended.
    pub(crate) async fn record_child(&self, c: ChildRecord) -> Result<(), AgentError> {
        self.call(move |conn| {
            conn.execute(
                "INSERT OR REPLACE INTO child_runs (id, session_id, parent_run, call_id, kind, name,
                    is_error, result, steps, started_at, finished_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                params![
                    c.run_id,
                    c.session_id,
                    c.parent_run,
                    c.call_id,
                    c.kind,
                    c.name,
                    i64::from(c.is_error),
                    c.result.to_string(),
                    serde_json::to_string(&c.steps)?,
                    i(c.started_at),
                    i(c.finished_at)
                ],
            )?;
            Ok(())
        })
        .await
    }
}
