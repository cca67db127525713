//! Background delegations: a `delegate_to_<agent>` call in background mode
//! stores a task (`running`), hands a [`Delegation`] to the driver the
//! daemon set ([`Agent::set_background_driver`]) and answers
//! `{status: "delegated", task_id}` at once. The task then runs as a child
//! run with a slot of its own (the parent may have finished long before),
//! bounded by its time limit and the shutdown token, and its end is stored
//! (`succeeded`, `failed` or `interrupted`) before `delegation_finished` is
//! sent. `delegation_status {task_id}` reads the stored task.
//!
//! The crate still spawns nothing: the driver is the daemon's (or a test's).

use super::{Agent, Child, ChildEnd, drive_child};
use crate::clock::now_ms;
use crate::events::{AgentEvent, EventKind};
use crate::graph::{Input, RunState};
use crate::host::BoxFuture;
use crate::store::{Task, TaskStatus};
use droidwarden_services::{ErrorCode, WireError};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

type Spawn = Arc<dyn Fn(Delegation) + Send + Sync>;

/// Where background delegations go, and how many are not finished.
#[derive(Default)]
pub(super) struct Driver {
    spawn: Mutex<Option<Spawn>>,
    open: Arc<AtomicUsize>,
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("set", &self.get().is_some())
            .field("open", &self.open.load(Ordering::Relaxed))
            .finish()
    }
}

impl Driver {
    pub(super) fn set(&self, spawn: Spawn) {
        let mut slot = self
            .spawn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *slot = Some(spawn);
    }

    fn get(&self) -> Option<Spawn> {
        self.spawn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Count one more open task, unless `max` are open.
    fn try_open(&self, max: usize) -> Option<OpenTask> {
        self.open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| OpenTask(self.open.clone()))
    }
}

/// One open task in the count; released when the task ends (or is dropped).
struct OpenTask(Arc<AtomicUsize>);

impl Drop for OpenTask {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A background delegation, stored and ready to drive. The daemon spawns
/// [`Delegation::drive`]; dropping it undriven leaves the task `running`
/// until the next start marks it `interrupted`.
#[must_use = "a delegation does nothing until `drive` is awaited"]
pub struct Delegation {
    agent: Agent,
    child: Child,
    call_id: String,
    _open: OpenTask,
}

impl std::fmt::Debug for Delegation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delegation")
            .field("task_id", &self.child.state.run_id)
            .field("agent", &self.child.name)
            .finish_non_exhaustive()
    }
}

impl Delegation {
    /// The task's id.
    pub fn task_id(&self) -> &str {
        &self.child.state.run_id
    }

    /// Run the task to its end: wait for a run slot, drive the agent's run
    /// (bounded by its time limit), store how it ended and send
    /// `delegation_finished`. When `shutdown` fires the task stops at its
    /// next await and is stored as `interrupted`. Never fails: every
    /// failure is the task's.
    pub async fn drive(self, shutdown: CancellationToken) {
        let Delegation {
            agent,
            child,
            call_id,
            _open,
        } = self;
        let task_id = child.state.run_id.clone();
        let session_id = child.state.session_id.clone();
        let tag = child.tag.clone();
        let name = child.name.clone();
        let token = shutdown.child_token();
        let ChildEnd { result, steps } = drive_child(agent.clone(), child, token).await;
        let (status, result, error) = match result {
            Ok(v) => (TaskStatus::Succeeded, Some(v), None),
            Err(_) if shutdown.is_cancelled() => (
                TaskStatus::Interrupted,
                None,
                Some(WireError::new(
                    ErrorCode::Internal,
                    "the daemon stopped while this task ran; it did not finish (delegate it again if it is still wanted)",
                )),
            ),
            Err(e) => (TaskStatus::Failed, None, Some(e)),
        };
        if let Err(e) = agent
            .inner
            .store
            .finish_task(
                task_id.clone(),
                status,
                result.clone(),
                error.clone(),
                steps,
            )
            .await
        {
            tracing::warn!(task = task_id, "background task's end not stored: {e}");
        }
        tracing::info!(
            task = task_id,
            agent = name,
            status = status.as_str(),
            "background delegation ended"
        );
        let _ = agent.inner.events.send(AgentEvent {
            run_id: task_id.clone(),
            session_id,
            skill: tag.skill,
            parent_run: tag.parent_run,
            kind: EventKind::DelegationFinished {
                call_id,
                task_id,
                agent: name,
                status,
                result,
                error,
            },
        });
    }
}

/// The parent's side of a background delegation: store the task, hand it
/// to the driver, and answer with its id.
pub(super) fn start(
    agent: &Agent,
    call_id: String,
    child: Child,
    task: String,
) -> BoxFuture<'static, Input> {
    let agent = agent.clone();
    Box::pin(async move {
        let result = accept(&agent, &call_id, child, task).await;
        Input::ToolFinished {
            call_id,
            result,
            now_ms: now_ms(),
        }
    })
}

async fn accept(
    agent: &Agent,
    call_id: &str,
    child: Child,
    task: String,
) -> Result<Value, WireError> {
    let inner = &agent.inner;
    let Some(spawn) = inner.background.get() else {
        return Err(WireError::new(
            ErrorCode::UnsupportedAction,
            "background delegation is not available here; call again with mode \"wait\"",
        ));
    };
    let max = inner.config.max_background_tasks;
    if max == 0 {
        return Err(WireError::new(
            ErrorCode::Disabled,
            "background delegation is off ([agent] max_background_tasks = 0); call again with mode \"wait\"",
        ));
    }
    let open = inner.background.try_open(max).ok_or_else(|| {
        WireError::new(
            ErrorCode::Busy,
            format!(
                "{max} background tasks are not finished yet, the most allowed; check them with delegation_status, or call again with mode \"wait\""
            ),
        )
    })?;
    let state: &RunState = &child.state;
    let record = Task {
        task_id: state.run_id.clone(),
        session_id: state.session_id.clone(),
        parent_run: child.tag.parent_run.clone().unwrap_or_default(),
        call_id: call_id.to_owned(),
        agent: child.name.clone(),
        task: task.clone(),
        status: TaskStatus::Running,
        result: None,
        error: None,
        steps: Vec::new(),
        created_at: now_ms(),
        finished_at: None,
    };
    inner
        .store
        .insert_task(record)
        .await
        .map_err(|e| e.to_wire())?;
    let (task_id, name) = (state.run_id.clone(), child.name.clone());
    agent.emit(
        state,
        &child.tag,
        EventKind::DelegationStarted {
            call_id: call_id.to_owned(),
            task_id: task_id.clone(),
            agent: name.clone(),
            task,
        },
    );
    spawn(Delegation {
        agent: agent.clone(),
        child,
        call_id: call_id.to_owned(),
        _open: open,
    });
    Ok(json!({
        "status": "delegated",
        "task_id": task_id,
        "agent": name,
        "hint": "the agent works in the background; call delegation_status with this task_id for its result",
    }))
}

/// `delegation_status {task_id}`: the stored task, if it belongs to this
/// session.
pub(super) fn status(
    agent: &Agent,
    state: &RunState,
    call_id: String,
    task_id: String,
) -> BoxFuture<'static, Input> {
    let store = agent.inner.store.clone();
    let session = state.session_id.clone();
    Box::pin(async move {
        let result = match store.task(task_id.clone()).await {
            Ok(Some(t)) if t.session_id == session => Ok(status_json(&t)),
            Ok(_) => Err(WireError::new(
                ErrorCode::NotFound,
                format!("no background task {task_id:?} in this conversation"),
            )),
            Err(e) => Err(e.to_wire()),
        };
        Input::ToolFinished {
            call_id,
            result,
            now_ms: now_ms(),
        }
    })
}

/// What the model is told about a task.
fn status_json(t: &Task) -> Value {
    let mut v = json!({
        "task_id": t.task_id,
        "agent": t.agent,
        "task": t.task,
        "status": t.status,
    });
    if let Some(r) = &t.result {
        v["result"] = r.clone();
    }
    if let Some(e) = &t.error {
        v["error"] = json!(e);
    }
    if !t.steps.is_empty() {
        v["tool_calls"] = json!(t.steps.len());
    }
    v
}
