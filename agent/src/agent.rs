//! The public face of the crate and the thin async driver of the graph.
//!
//! [`Agent`] is a cloneable handle holding the configuration, the provider,
//! the tool host, the store and the event channel. [`Agent::ask`] (or
//! [`Agent::resume`]) returns a [`Run`]; the daemon spawns
//! [`Run::drive`], which feeds the state machine in [`crate::graph`] and
//! performs its actions: model calls, tool executions (concurrent across
//! devices, one at a time per device), approval waits (bounded by the
//! request's expiry), checkpoints and events. Nothing here spawns a task:
//! in-flight work is polled side by side in one `FuturesUnordered`.

pub(crate) mod external; // Approvals for calls from outside a run (MCP).

use crate::clock::now_ms;
use crate::config::AgentConfig;
use crate::error::AgentError;
use crate::events::{AgentEvent, EventKind, PendingApproval};
use crate::graph::{Action, Input, RunLimits, RunOutcome, RunState, StepEnv, step};
use crate::host::{BoxFuture, ToolHost};
use crate::limit::{Admission, RunLimiter, Slot};
use crate::markdown;
use crate::policy::ApprovalPolicy;
use crate::provider::{ChatRequest, Provider};
use crate::store::{self, ApprovalStatus, RunInfo, SessionSummary, Store};
use crate::tools::{Planned, Toolset};
use droidwarden_services::{Command, ErrorCode, WireError};
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use serde_json::Value;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use tokio::sync::{broadcast, oneshot};
use tokio_util::sync::CancellationToken;

/// Longest accepted prompt, in characters.
pub const MAX_PROMPT_CHARS: usize = 32_000;

/// A person's answer to an approval request, delivered to a waiting run.
#[derive(Debug)]
enum Answer {
    Approved,
    Denied(String),
}

#[derive(Debug)]
struct Inner {
    config: AgentConfig,
    provider: Arc<dyn Provider>,
    host: Arc<dyn ToolHost>,
    store: Store,
    events: broadcast::Sender<AgentEvent>,
    /// The approval policy new runs take (replaceable on reload; a run
    /// keeps the policy it started or resumed with).
    policy: RwLock<Arc<ApprovalPolicy>>,
    // std Mutexes: held for a map operation only, never across an await.
    waiters: Mutex<HashMap<String, oneshot::Sender<Answer>>>,
    running: Mutex<HashSet<String>>,
    /// `max_concurrent_runs` and `max_queued` (see `limit.rs`).
    limiter: Arc<RunLimiter>,
}

/// The agent runtime. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Agent {
    inner: Arc<Inner>,
}

/// A question for the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AskRequest {
    /// What the user asks.
    pub prompt: String,
    /// Continue this session (created if it does not exist); `None` starts
    /// a new one.
    pub session_id: Option<String>,
    /// An opaque tag stored with the run and returned by
    /// [`Agent::interrupted_runs`]: the daemon records where the answer
    /// goes, so a run resumed after a restart can still deliver it.
    pub origin: Option<String>,
}

impl AskRequest {
    /// A prompt in a new session.
    pub fn new(prompt: impl Into<String>) -> Self {
        Self {
            prompt: prompt.into(),
            session_id: None,
            origin: None,
        }
    }

    /// The same prompt in session `id`.
    pub fn in_session(mut self, id: impl Into<String>) -> Self {
        self.session_id = Some(id.into());
        self
    }

    /// The same request tagged with `origin` (see [`AskRequest::origin`]).
    pub fn with_origin(mut self, origin: impl Into<String>) -> Self {
        self.origin = Some(origin.into());
        self
    }
}

/// Marks a run as driven by this process; removed on drop.
#[derive(Debug)]
struct RunningGuard {
    agent: Arc<Inner>,
    run_id: String,
}

impl Drop for RunningGuard {
    fn drop(&mut self) {
        if let Ok(mut set) = self.agent.running.lock() {
            set.remove(&self.run_id);
        }
    }
}

/// A run, prepared and persisted, ready to drive.
#[derive(Debug)]
#[must_use = "a run does nothing until `drive` is awaited"]
pub struct Run {
    agent: Agent,
    state: RunState,
    toolset: Toolset,
    resumed: bool,
    /// Its place in the bound on agent work; exchanged for a slot when the
    /// run first needs the model or a phone.
    admission: Admission,
    _guard: RunningGuard,
}

/// The events of one run, filtered from the agent's broadcast channel.
#[derive(Debug)]
pub struct RunEvents {
    run_id: String,
    rx: broadcast::Receiver<AgentEvent>,
    lagged: u64,
}

impl RunEvents {
    /// The next event of this run; `None` when the agent is gone. Events
    /// lost to lag are counted in [`RunEvents::lagged`].
    pub async fn recv(&mut self) -> Option<AgentEvent> {
        loop {
            match self.rx.recv().await {
                Ok(ev) if ev.run_id == self.run_id => return Some(ev),
                Ok(_) => {}
                Err(broadcast::error::RecvError::Lagged(n)) => self.lagged += n,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }

    /// Events this receiver missed because it fell behind.
    pub fn lagged(&self) -> u64 {
        self.lagged
    }
}

impl Agent {
    /// An agent over these parts.
    pub fn new(
        config: AgentConfig,
        provider: Arc<dyn Provider>,
        host: Arc<dyn ToolHost>,
        store: Store,
    ) -> Self {
        let (events, _) = broadcast::channel(config.event_capacity);
        let policy = RwLock::new(Arc::new(config.approval.clone()));
        let limiter = RunLimiter::new(config.max_concurrent_runs, config.max_queued);
        Self {
            inner: Arc::new(Inner {
                policy,
                config,
                provider,
                host,
                store,
                events,
                waiters: Mutex::new(HashMap::new()),
                running: Mutex::new(HashSet::new()),
                limiter,
            }),
        }
    }

    /// Every event of every run. Subscribe before driving a run to see all
    /// of its events.
    pub fn subscribe(&self) -> broadcast::Receiver<AgentEvent> {
        self.inner.events.subscribe()
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// The configuration.
    pub fn config(&self) -> &AgentConfig {
        &self.inner.config
    }

    /// The approval policy runs started or resumed from now on use.
    pub fn approval_policy(&self) -> Arc<ApprovalPolicy> {
        match self.inner.policy.read() {
            Ok(p) => Arc::clone(&p),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }

    /// Replace the approval policy (a configuration reload). Runs already
    /// going keep the policy they started with.
    pub fn set_approval_policy(&self, policy: ApprovalPolicy) {
        let mut slot = self
            .inner
            .policy
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *slot = Arc::new(policy);
    }

    fn guard(&self, run_id: &str) -> Result<RunningGuard, AgentError> {
        let mut set = self
            .inner
            .running
            .lock()
            .map_err(|_| AgentError::RunBusy(run_id.to_owned()))?;
        if !set.insert(run_id.to_owned()) {
            return Err(AgentError::RunBusy(run_id.to_owned()));
        }
        Ok(RunningGuard {
            agent: self.inner.clone(),
            run_id: run_id.to_owned(),
        })
    }

    fn toolset(&self) -> Toolset {
        let cfg = &self.inner.config;
        Toolset::new(cfg.tool_mode, &self.inner.host.devices(), cfg.builtin_tools)
    }

    /// Runs driven now and runs waiting for a slot.
    pub fn load(&self) -> (usize, usize) {
        let load = self.inner.limiter.load();
        (load.running, load.queued)
    }

    /// Prepare a run: create the session if needed, load its memory (the
    /// recent turns and the archived turns that match the prompt) and
    /// persist the run. Drive it with [`Run::drive`], which waits, in
    /// order, for one of the `max_concurrent_runs` slots.
    ///
    /// # Errors
    /// [`AgentError::Busy`] at once, before anything is stored, when
    /// `max_concurrent_runs` runs are going and `max_queued` more wait;
    /// [`AgentError::InvalidPrompt`], [`AgentError::InvalidId`], or a store error.
    pub async fn ask(&self, request: AskRequest) -> Result<Run, AgentError> {
        let prompt = request.prompt.trim().to_owned();
        if prompt.is_empty() {
            return Err(AgentError::InvalidPrompt("it is empty".into()));
        }
        if prompt.chars().count() > MAX_PROMPT_CHARS {
            return Err(AgentError::InvalidPrompt(format!(
                "longer than {MAX_PROMPT_CHARS} characters"
            )));
        }
        let session_id = match request.session_id {
            Some(id) => {
                store::check_id(&id)?;
                id
            }
            None => store::new_id("s-"),
        };
        let cfg = &self.inner.config;
        let admission = self
            .inner
            .limiter
            .try_admit()
            .map_err(|load| AgentError::Busy {
                running: load.running,
                queued: load.queued,
                max_running: cfg.max_concurrent_runs,
                max_queued: cfg.max_queued,
            })?;
        let run_id = store::new_id("r-");
        let guard = self.guard(&run_id)?;
        let toolset = self.toolset();
        let limits = RunLimits {
            max_iterations: cfg.max_iterations,
            max_steps: cfg.max_steps,
            max_result_chars: cfg.max_result_chars,
            approval_timeout_ms: u64::try_from(cfg.approval.timeout.as_millis())
                .unwrap_or(u64::MAX),
            tools_enabled: !toolset.is_empty(),
        };
        let now = now_ms();
        let (rid, sid, p) = (run_id.clone(), session_id.clone(), prompt.clone());
        let state = self
            .inner
            .store
            .start_run(
                session_id,
                prompt,
                request.origin,
                cfg.memory_turns,
                cfg.memory_recall,
                move |history, recalled| RunState::new(rid, sid, p, history, recalled, limits, now),
            )
            .await?;
        Ok(Run {
            agent: self.clone(),
            state,
            toolset,
            resumed: false,
            admission,
            _guard: guard,
        })
    }

    /// Continue a run that did not finish (the process stopped while it was
    /// waiting for the model, a tool or an approval). It is work already
    /// accepted, so it is never refused as busy, but it waits for a slot
    /// like every run and counts against `max_queued` meanwhile.
    ///
    /// # Errors
    /// [`AgentError::UnknownRun`] when no unfinished run has that id,
    /// [`AgentError::RunBusy`] when this process is already driving it.
    pub async fn resume(&self, run_id: &str) -> Result<Run, AgentError> {
        store::check_id(run_id)?;
        let guard = self.guard(run_id)?;
        let state = self.inner.store.load_run(run_id.to_owned()).await?;
        Ok(Run {
            agent: self.clone(),
            state,
            toolset: self.toolset(),
            resumed: true,
            admission: self.inner.limiter.admit(),
            _guard: guard,
        })
    }

    /// Unfinished runs that no [`Run`] of this process is driving: call
    /// [`Agent::resume`] for each at start-up.
    ///
    /// # Errors
    /// A store error.
    pub async fn interrupted_runs(&self) -> Result<Vec<RunInfo>, AgentError> {
        let runs = self.inner.store.active_runs().await?;
        let running = self
            .inner
            .running
            .lock()
            .map(|s| s.clone())
            .unwrap_or_default();
        Ok(runs
            .into_iter()
            .filter(|r| !running.contains(&r.run_id))
            .collect())
    }

    /// Approve a pending request. The decision is stored first, so it holds
    /// even if the waiting run is not running right now (it reads the
    /// decision when resumed).
    ///
    /// # Errors
    /// [`AgentError::UnknownApproval`], or [`AgentError::ApprovalClosed`]
    /// when it was already answered or has expired.
    pub async fn approve(&self, approval_id: &str) -> Result<PendingApproval, AgentError> {
        self.answer(approval_id, Answer::Approved).await
    }

    /// Deny a pending request; `reason` reaches the model.
    ///
    /// # Errors
    /// As [`Agent::approve`].
    pub async fn deny(
        &self,
        approval_id: &str,
        reason: &str,
    ) -> Result<PendingApproval, AgentError> {
        let reason = if reason.trim().is_empty() {
            "denied by the user".to_owned()
        } else {
            reason.chars().take(500).collect()
        };
        self.answer(approval_id, Answer::Denied(reason)).await
    }

    async fn answer(
        &self,
        approval_id: &str,
        answer: Answer,
    ) -> Result<PendingApproval, AgentError> {
        let (approved, reason) = match &answer {
            Answer::Approved => (true, None),
            Answer::Denied(r) => (false, Some(r.clone())),
        };
        let approval = self
            .inner
            .store
            .decide(approval_id.to_owned(), approved, reason)
            .await?;
        let waiter = self
            .inner
            .waiters
            .lock()
            .ok()
            .and_then(|mut w| w.remove(approval_id));
        if let Some(tx) = waiter {
            let _ = tx.send(answer);
        }
        Ok(approval)
    }

    /// Approval requests waiting for an answer.
    ///
    /// # Errors
    /// A store error.
    pub async fn pending_approvals(&self) -> Result<Vec<PendingApproval>, AgentError> {
        self.inner.store.pending_approvals().await
    }

    /// Every session, most recent first.
    ///
    /// # Errors
    /// A store error.
    pub async fn sessions(&self) -> Result<Vec<SessionSummary>, AgentError> {
        self.inner.store.sessions().await
    }

    /// A session as markdown: every turn with timestamps, tool calls and
    /// results, then unfinished runs.
    ///
    /// # Errors
    /// [`AgentError::UnknownSession`] or a store error.
    pub async fn session_markdown(&self, session_id: &str) -> Result<String, AgentError> {
        store::check_id(session_id)?;
        let (summary, turns, active) = self
            .inner
            .store
            .session_detail(session_id.to_owned())
            .await?;
        Ok(markdown::render(&summary, &turns, &active))
    }

    fn emit(&self, state: &RunState, kind: EventKind) {
        // No receiver is not an error: nobody is listening.
        let _ = self.inner.events.send(AgentEvent {
            run_id: state.run_id.clone(),
            session_id: state.session_id.clone(),
            kind,
        });
    }
}

impl Run {
    /// The run id.
    pub fn run_id(&self) -> &str {
        &self.state.run_id
    }

    /// The session id.
    pub fn session_id(&self) -> &str {
        &self.state.session_id
    }

    /// Subscribe to this run's events (call before [`Run::drive`]).
    pub fn events(&self) -> RunEvents {
        RunEvents {
            run_id: self.state.run_id.clone(),
            rx: self.agent.subscribe(),
            lagged: 0,
        }
    }

    /// Drive the run to its end. A model failure is an outcome
    /// (`stop_reason: error`), not an `Err`.
    ///
    /// Before its first model call or device action the run waits, first
    /// come first served, for one of `max_concurrent_runs` slots. While it
    /// waits only for a person (approvals) it gives the slot back, and
    /// queues for one again when the answer comes.
    ///
    /// # Errors
    /// [`AgentError::Interrupted`] when `shutdown` fires (the run is
    /// checkpointed and can be resumed; device actions in flight are
    /// reported to the model as interrupted on resume, never repeated), or a
    /// store error.
    pub async fn drive(self, shutdown: CancellationToken) -> Result<RunOutcome, AgentError> {
        let Run {
            agent,
            mut state,
            toolset,
            resumed,
            admission,
            _guard,
        } = self;
        let mut admission = Some(admission);
        let mut slot: Option<Slot> = None;
        // Model calls and executions in flight; when none is, the run waits
        // only for approvals and gives its slot back.
        let mut working = 0usize;
        let inner = agent.inner.clone();
        let cfg = &inner.config;
        let policy = agent.approval_policy();
        let env = StepEnv {
            toolset: &toolset,
            policy: &policy,
        };
        let system: Arc<str> = system_prompt(cfg, &state).into();
        let mut inflight: FuturesUnordered<BoxFuture<'static, Input>> = FuturesUnordered::new();
        let mut device_locks: HashMap<String, Arc<tokio::sync::Mutex<()>>> = HashMap::new();
        let first = if resumed {
            Input::Resume { now_ms: now_ms() }
        } else {
            Input::Start { now_ms: now_ms() }
        };
        let mut actions: VecDeque<Action> = step(&mut state, &env, first).into();
        loop {
            while let Some(action) = actions.pop_front() {
                match action {
                    Action::CallModel => {
                        if slot.is_none() {
                            slot =
                                Some(take_slot(&inner, &mut admission, &shutdown, &state).await?);
                        }
                        working += 1;
                        inflight.push(model_call(&inner, &state, &toolset, system.clone()));
                    }
                    Action::Checkpoint { approvals } => {
                        if cfg.checkpoint_steps || !approvals.is_empty() {
                            let json = serde_json::to_string(&state)?;
                            inner
                                .store
                                .checkpoint(state.run_id.clone(), json, approvals)
                                .await?;
                        }
                    }
                    Action::Emit(kind) => agent.emit(&state, kind),
                    Action::AwaitApproval {
                        call_id,
                        approval_id,
                        expires_at,
                    } => inflight.push(await_approval(&inner, call_id, approval_id, expires_at)),
                    Action::Execute { call_id, planned } => {
                        if slot.is_none() {
                            slot =
                                Some(take_slot(&inner, &mut admission, &shutdown, &state).await?);
                        }
                        working += 1;
                        inflight.push(execute(&inner, &mut device_locks, call_id, planned));
                    }
                    Action::Finish(outcome) => {
                        inner
                            .store
                            .finish_run(&state, &outcome, cfg.memory_turns)
                            .await?;
                        let kind = match &outcome.error {
                            Some(error) => EventKind::Error {
                                error: error.clone(),
                            },
                            None => EventKind::Final {
                                text: outcome.text.clone(),
                                stop_reason: outcome.stop_reason,
                                usage: outcome.usage,
                            },
                        };
                        agent.emit(&state, kind);
                        return Ok(outcome);
                    }
                }
            }
            if inflight.is_empty() {
                // The machine always leaves work in flight or finishes; an
                // empty queue would be a bug, and waiting would hang.
                return Err(AgentError::Interrupted {
                    run_id: state.run_id.clone(),
                });
            }
            if working == 0 {
                // Only approvals are awaited: a person may take minutes.
                slot = None;
                admission = None;
            }
            let input = tokio::select! {
                biased;
                () = shutdown.cancelled() => {
                    return Err(AgentError::Interrupted { run_id: state.run_id.clone() });
                }
                Some(input) = inflight.next() => input,
            };
            if matches!(
                input,
                Input::ModelReplied { .. } | Input::ModelFailed { .. } | Input::ToolFinished { .. }
            ) {
                working = working.saturating_sub(1);
            }
            actions.extend(step(&mut state, &env, input));
        }
    }
}

/// Wait, in order, for a run slot: with the run's first admission, or a
/// new one (always granted) after the run gave its slot back while it
/// waited for a person.
async fn take_slot(
    inner: &Arc<Inner>,
    admission: &mut Option<Admission>,
    shutdown: &CancellationToken,
    state: &RunState,
) -> Result<Slot, AgentError> {
    let admission = admission.take().unwrap_or_else(|| inner.limiter.admit());
    tokio::select! {
        biased;
        () = shutdown.cancelled() => Err(AgentError::Interrupted { run_id: state.run_id.clone() }),
        slot = inner.limiter.slot(admission) => Ok(slot),
    }
}

fn system_prompt(cfg: &AgentConfig, state: &RunState) -> String {
    let mut s = cfg.system_prompt.clone();
    if !state.recalled.is_empty() {
        s.push_str(
            "\n\nEarlier parts of this conversation that may be relevant (retrieved from the session archive):",
        );
        for r in &state.recalled {
            s.push_str("\n- ");
            s.push_str(r);
        }
    }
    s
}

fn model_call(
    inner: &Arc<Inner>,
    state: &RunState,
    toolset: &Toolset,
    system: Arc<str>,
) -> BoxFuture<'static, Input> {
    let request = ChatRequest {
        system: system.to_string(),
        messages: state.conversation(),
        tools: if state.limits.tools_enabled {
            toolset.specs().clone()
        } else {
            Arc::from(Vec::new())
        },
    };
    let inner = inner.clone();
    let (run_id, session_id) = (state.run_id.clone(), state.session_id.clone());
    Box::pin(async move {
        let events = inner.events.clone();
        let sink = move |t: &str| {
            let _ = events.send(AgentEvent {
                run_id: run_id.clone(),
                session_id: session_id.clone(),
                kind: EventKind::TextDelta { text: t.to_owned() },
            });
        };
        match inner.provider.complete(&request, &sink).await {
            Ok(reply) => Input::ModelReplied {
                reply,
                now_ms: now_ms(),
            },
            Err(e) => {
                tracing::warn!(provider = inner.provider.name(), "model call failed: {e}");
                Input::ModelFailed {
                    error: e.to_wire(),
                    now_ms: now_ms(),
                }
            }
        }
    })
}

fn await_approval(
    inner: &Arc<Inner>,
    call_id: String,
    approval_id: String,
    expires_at: u64,
) -> BoxFuture<'static, Input> {
    let inner = inner.clone();
    Box::pin(async move {
        // Register before reading the stored state, so an answer given in
        // between is not lost.
        let (tx, rx) = oneshot::channel();
        if let Ok(mut w) = inner.waiters.lock() {
            w.insert(approval_id.clone(), tx);
        }
        let decided = |s: ApprovalStatus| match s {
            ApprovalStatus::Approved => Some((true, None)),
            ApprovalStatus::Denied(r) => Some((false, Some(r))),
            ApprovalStatus::Expired => Some((false, Some("the approval request expired".into()))),
            ApprovalStatus::Pending => None,
        };
        let stored = inner.store.approval_status(approval_id.clone()).await;
        let (approved, reason) = match stored.map(decided) {
            Ok(Some(d)) => d,
            Ok(None) => {
                let remaining = Duration::from_millis(expires_at.saturating_sub(now_ms()));
                match tokio::time::timeout(remaining, rx).await {
                    Ok(Ok(Answer::Approved)) => (true, None),
                    Ok(Ok(Answer::Denied(r))) => (false, Some(r)),
                    // Timer ran out (or the waiter was replaced): expire,
                    // unless an answer landed in the store meanwhile.
                    Ok(Err(_)) | Err(_) => match inner.store.expire(approval_id.clone()).await {
                        Ok(s) => decided(s)
                            .unwrap_or((false, Some("the approval request expired".into()))),
                        Err(e) => (false, Some(format!("approval state unavailable: {e}"))),
                    },
                }
            }
            Err(e) => (false, Some(format!("approval state unavailable: {e}"))),
        };
        if let Ok(mut w) = inner.waiters.lock() {
            w.remove(&approval_id);
        }
        Input::ApprovalAnswered {
            call_id,
            approved,
            reason,
            now_ms: now_ms(),
        }
    })
}

fn execute(
    inner: &Arc<Inner>,
    locks: &mut HashMap<String, Arc<tokio::sync::Mutex<()>>>,
    call_id: String,
    planned: Planned,
) -> BoxFuture<'static, Input> {
    if let Some(result) = planned.run_local(now_ms()) {
        return Box::pin(async move {
            Input::ToolFinished {
                call_id,
                result,
                now_ms: now_ms(),
            }
        });
    }
    let Planned::Device {
        device,
        call,
        mutates,
        ..
    } = planned
    else {
        unreachable!("run_local handles every other kind")
    };
    // One action at a time per device within a run (FIFO: tokio's Mutex is
    // fair); different devices run concurrently.
    let lock = locks
        .entry(device.clone().unwrap_or_default())
        .or_default()
        .clone();
    let inner = inner.clone();
    Box::pin(async move {
        let _turn = lock.lock_owned().await;
        let result = call_device(&inner, device.as_deref(), &call.0, mutates).await;
        Input::ToolFinished {
            call_id,
            result,
            now_ms: now_ms(),
        }
    })
}

/// One device call with the tool timeout (at least the device's own bound),
/// retried on retryable errors. An action that changes the device is
/// retried only on `device_offline` and `busy` (nothing ran); a timeout may
/// mean it did run, so it is not repeated.
async fn call_device(
    inner: &Inner,
    device: Option<&str>,
    command: &Command,
    mutates: bool,
) -> Result<Value, WireError> {
    let cfg = &inner.config;
    let (service, action) = (command.service_id(), command.action_name());
    // Never give up before the device itself answers: its error says
    // whether a change was sent; ours could not.
    let limit = inner.host.call_limit(device).map_or(cfg.tool_timeout, |l| {
        cfg.tool_timeout.max(l + Duration::from_secs(1))
    });
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        let result =
            match tokio::time::timeout(limit, inner.host.call(device, command.clone())).await {
                Ok(r) => r,
                Err(_) => Err(WireError::new(
                    ErrorCode::Timeout,
                    format!(
                        "{service}.{action} did not finish within {} s",
                        limit.as_secs_f64()
                    ),
                )),
            };
        match result {
            Err(e)
                if e.retryable
                    && attempt <= cfg.tool_retries
                    && (!mutates
                        || e.code == ErrorCode::DeviceOffline
                        || e.code == ErrorCode::Busy) =>
            {
                tracing::debug!(service, action, attempt, "retrying device call: {e}");
                tokio::time::sleep(Duration::from_millis(200 << attempt.min(5))).await;
            }
            other => return other,
        }
    }
}
