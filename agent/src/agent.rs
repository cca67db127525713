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

mod background; // Background delegations: tasks that outlive the call.
mod delegate; // Delegation to `[[agents]]` as child runs.
pub(crate) mod external; // Approvals for calls from outside a run (MCP).
mod pace; // Time spent waiting for the model, left out of child time limits.

pub use background::Delegation;

use crate::clock::now_ms;
use crate::config::AgentConfig;
use crate::error::AgentError;
use crate::events::{AgentEvent, ApprovalOutcome, EventKind, PendingApproval};
use crate::grant::{ApprovalDecision, Grant};
use crate::graph::{Action, Input, RunLimits, RunOutcome, RunState, StepEnv, step};
use crate::host::{BoxFuture, ToolHost};
use crate::limit::{Admission, RunLimiter, Slot};
use crate::markdown;
use crate::message::ToolCall;
use crate::plan::{PlanState, RunMode};
use crate::policy::ApprovalPolicy;
use crate::provider::{ChatRequest, Provider};
use crate::skills::{INVOKE_SKILL_TOOL, SkillSet};
use crate::store::{self, ApprovalStatus, RunInfo, SessionSummary, Store};
use crate::tools::{Planned, SkillScope, Toolset};
use droidwarden_services::{Command, ErrorCode, Risk, WireError};
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use pace::Pace;
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
struct Answer {
    approved: bool,
    /// Why not, when denied.
    reason: Option<String>,
    /// Who answered ([`Agent::approve`]).
    by: String,
    /// Edited parameters and the grant given, if any.
    extra: store::DecisionExtra,
}

/// Longest recorded name of who answered an approval, in characters.
const MAX_DECIDER_CHARS: usize = 200;

/// `by` as it is recorded: control characters dropped (it reaches logs,
/// markdown and terminals), at most [`MAX_DECIDER_CHARS`], never empty.
fn decider(by: &str) -> String {
    let clean: String = by
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_DECIDER_CHARS)
        .collect();
    match clean.trim() {
        "" => "unknown".to_owned(),
        trimmed => trimmed.to_owned(),
    }
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
    /// The skills new runs see (replaceable on reload; a run keeps the set
    /// it started or resumed with).
    skills: RwLock<Arc<SkillSet>>,
    /// The `[[agents]]` new runs may delegate to (replaceable on reload).
    delegates: RwLock<Arc<crate::delegation::Delegates>>,
    /// Where background delegations are handed to be driven (the daemon
    /// spawns them); without one, background mode is refused.
    background: background::Driver,
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
    /// ReAct or plan-and-execute; `None`: `[agent] mode`.
    pub mode: Option<RunMode>,
    /// The account asking, as the way in vouches for it (`MQTT user
    /// "ha"`), or `None` for a person (the CLI, D-Bus) and callers with no
    /// account. The run's approval requests carry it, and an answer from
    /// that account may deny them but not approve them
    /// ([`Agent::answer_as`]): a machine account cannot clear its own
    /// requests.
    pub asked_by: Option<String>,
}

impl AskRequest {
    /// A prompt in a new session.
    pub fn new(prompt: impl Into<String>) -> Self {
        Self {
            prompt: prompt.into(),
            session_id: None,
            origin: None,
            mode: None,
            asked_by: None,
        }
    }

    /// The same request in `mode`.
    pub fn with_mode(mut self, mode: RunMode) -> Self {
        self.mode = Some(mode);
        self
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

    /// The same request asked by `account` (see [`AskRequest::asked_by`]).
    pub fn asked_by(mut self, account: Option<String>) -> Self {
        self.asked_by = account;
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
                provider,
                host,
                store,
                events,
                waiters: Mutex::new(HashMap::new()),
                running: Mutex::new(HashSet::new()),
                limiter,
                skills: RwLock::new(Arc::new(SkillSet::builtin())),
                delegates: RwLock::new(Arc::new(crate::delegation::Delegates::new(
                    config.agents.clone(),
                ))),
                background: background::Driver::default(),
                config,
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
        current(&self.inner.policy)
    }

    /// Replace the approval policy (a configuration reload). Runs already
    /// going keep the policy they started with.
    pub fn set_approval_policy(&self, policy: ApprovalPolicy) {
        replace(&self.inner.policy, policy);
    }

    /// The skills runs started or resumed from now on see (the built-in
    /// skills until [`Agent::set_skills`] is called).
    pub fn skills(&self) -> Arc<SkillSet> {
        current(&self.inner.skills)
    }

    /// Replace the skills (loaded by the daemon with
    /// [`SkillSet::load`], at start-up and on reload). Runs already going
    /// keep the set they started with.
    pub fn set_skills(&self, skills: SkillSet) {
        replace(&self.inner.skills, skills);
    }

    /// The `[[agents]]` runs started from now on may delegate to (the
    /// configuration's, without own providers, until
    /// [`Agent::set_agents`]).
    pub fn agents(&self) -> Arc<crate::delegation::Delegates> {
        current(&self.inner.delegates)
    }

    /// Replace the agents (at start-up, to give agents their own
    /// providers, and on reload). Runs already going keep theirs; tasks
    /// already delegated keep running with the definition they started
    /// with.
    pub fn set_agents(&self, agents: crate::delegation::Delegates) {
        replace(&self.inner.delegates, agents);
    }

    /// Have `spawn` drive every background delegation from now on (the
    /// daemon spawns [`Delegation::drive`] on its task tracker with its
    /// shutdown token). Until one is set, a background delegation is
    /// refused with a tool error.
    pub fn set_background_driver(&self, spawn: impl Fn(Delegation) + Send + Sync + 'static) {
        self.inner.background.set(Arc::new(spawn));
    }

    /// A background delegation, as stored.
    ///
    /// # Errors
    /// A bad id or a store error.
    pub async fn task(&self, task_id: &str) -> Result<Option<store::Task>, AgentError> {
        store::check_id(task_id)?;
        self.inner.store.task(task_id.to_owned()).await
    }

    /// The background delegations of `session` (all with `None`), oldest
    /// first.
    ///
    /// # Errors
    /// A bad id or a store error.
    pub async fn tasks(&self, session: Option<&str>) -> Result<Vec<store::Task>, AgentError> {
        if let Some(s) = session {
            store::check_id(s)?;
        }
        self.inner.store.tasks(session.map(str::to_owned)).await
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
        Toolset::with_skills(
            cfg.tool_mode,
            &self.inner.host.devices(),
            cfg.builtin_tools,
            self.skills(),
            cfg.skills.max_depth,
        )
        .with_schemas(cfg.tool_schemas)
        .with_delegate_set(self.agents())
        .with_extra(self.inner.host.extra_tools())
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
        self.start(request, None).await
    }

    /// Run skill `skill` with `input` directly (no model call decides to):
    /// a run whose first step is `invoke_skill {skill, input}`, so it gets
    /// the skill's approval (once, before it starts, when the skill's risk
    /// is above the threshold), is durable like every run, and answers with
    /// the skill's result. `session_id`, `origin` and `asked_by` as in
    /// [`AskRequest`].
    ///
    /// # Errors
    /// [`AgentError::Skill`] at once for an unknown or disabled skill,
    /// input that does not match its `parameters`, or `allowed-tools` that
    /// name tools that do not exist; otherwise as [`Agent::ask`].
    pub async fn run_skill(
        &self,
        skill: &str,
        input: Value,
        session_id: Option<String>,
        origin: Option<String>,
        asked_by: Option<String>,
    ) -> Result<Run, AgentError> {
        let arguments = serde_json::json!({ "skill": skill, "input": input }).to_string();
        let call = ToolCall {
            id: "skill".into(),
            name: INVOKE_SKILL_TOOL.into(),
            arguments,
            signature: None,
        };
        // Check now, so a bad request is refused before anything is stored.
        self.toolset().plan(&call).map_err(AgentError::Skill)?;
        let mut request = AskRequest::new(format!(
            "Run the skill {skill} with input {}",
            serde_json::to_string(&input).unwrap_or_default()
        ));
        request.session_id = session_id;
        request.origin = origin;
        request.asked_by = asked_by;
        self.start(request, Some(call)).await
    }

    async fn start(
        &self,
        request: AskRequest,
        skill_call: Option<ToolCall>,
    ) -> Result<Run, AgentError> {
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
            text_calls: cfg.text_tool_calls,
            tool_nudge: cfg.tool_nudge,
        };
        let now = now_ms();
        // A direct skill run is a single tool call: never planned.
        let plan = (request.mode.unwrap_or(cfg.mode) == RunMode::Plan && skill_call.is_none())
            .then_some(cfg.plan);
        let (rid, sid, p) = (run_id.clone(), session_id.clone(), prompt.clone());
        let asked_by = request.asked_by;
        let state = self
            .inner
            .store
            .start_run(
                session_id,
                prompt,
                request.origin,
                cfg.memory_turns,
                cfg.memory_recall,
                move |history, recalled| {
                    let mut state = RunState::new(rid, sid, p, history, recalled, limits, now);
                    state.asked_by = asked_by;
                    state.plan = plan.map(PlanState::new);
                    state.skill_call = skill_call;
                    state
                },
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

    /// At start-up, before any run is driven: expire the approval requests
    /// of skill runs a stopped process left behind (their skill was
    /// reported to its parent as interrupted; nothing waits for them).
    ///
    /// # Errors
    /// A store error.
    /// Background delegations a stopped process left running are marked
    /// `interrupted` here too (nothing drives them any more).
    pub async fn expire_orphan_approvals(&self) -> Result<usize, AgentError> {
        let tasks = self.inner.store.interrupt_tasks().await?;
        if tasks > 0 {
            tracing::info!(
                tasks,
                "background delegations interrupted by the last stop marked interrupted"
            );
        }
        self.inner.store.expire_orphans().await
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

    /// Approve a pending request on behalf of `by`, who answered, as the
    /// way in that carried the answer knows them (`D-Bus uid 1000`,
    /// `MQTT`, …): it is stored with the decision, logged, and sent in the
    /// [`EventKind::ApprovalAnswered`] event. The decision is stored first,
    /// so it holds even if the waiting run is not running right now (it
    /// reads the decision when resumed).
    ///
    /// # Errors
    /// [`AgentError::UnknownApproval`], or [`AgentError::ApprovalClosed`]
    /// when it was already answered or has expired.
    pub async fn approve(
        &self,
        approval_id: &str,
        by: &str,
    ) -> Result<PendingApproval, AgentError> {
        self.answer(approval_id, ApprovalDecision::Approve, by)
            .await
    }

    /// Deny a pending request on behalf of `by` (as in [`Agent::approve`]);
    /// `reason` reaches the model.
    ///
    /// # Errors
    /// As [`Agent::approve`].
    pub async fn deny(
        &self,
        approval_id: &str,
        reason: &str,
        by: &str,
    ) -> Result<PendingApproval, AgentError> {
        let decision = ApprovalDecision::Deny {
            reason: reason.to_owned(),
        };
        self.answer(approval_id, decision, by).await
    }

    /// Answer a pending request on behalf of `by` (as in
    /// [`Agent::approve`]) with any [`ApprovalDecision`]: once, for the
    /// rest of the run (a [`Grant`], see [`crate::grant`]), with edited
    /// parameters, or a denial.
    ///
    /// # Errors
    /// As [`Agent::approve`]; [`AgentError::InvalidAnswer`] when a grant is
    /// asked for a request it cannot cover (not a device action, or a
    /// ceiling above [`crate::GRANT_CEILING`]), or when the edited
    /// parameters fail the catalogue's validation, change the action, the
    /// device or the risk, or are refused by the policy. Nothing is
    /// recorded then: the request still waits for an answer.
    pub async fn answer(
        &self,
        approval_id: &str,
        decision: ApprovalDecision,
        by: &str,
    ) -> Result<PendingApproval, AgentError> {
        self.answer_as(approval_id, decision, by, None).await
    }

    /// [`Agent::answer`] from `account`, as the way in vouches for it (the
    /// same spelling as [`AskRequest::asked_by`]): an approval of any kind
    /// from the account that asked for the run is refused, so a machine
    /// account holding both rights cannot clear its own requests; a
    /// denial from it is taken.
    ///
    /// # Errors
    /// As [`Agent::answer`]; [`AgentError::SelfApproval`] for an approval
    /// from the account that asked (nothing is recorded; it still waits).
    pub async fn answer_as(
        &self,
        approval_id: &str,
        decision: ApprovalDecision,
        by: &str,
        account: Option<&str>,
    ) -> Result<PendingApproval, AgentError> {
        if let Some(account) = account
            && !matches!(decision, ApprovalDecision::Deny { .. })
            && let Some(request) = self.pending_request(approval_id).await?
            && request.asked_by.as_deref() == Some(account)
        {
            return Err(AgentError::SelfApproval {
                id: approval_id.to_owned(),
                account: account.to_owned(),
            });
        }
        let by = decider(by);
        let mut extra = store::DecisionExtra::default();
        let (approved, reason) = match decision {
            ApprovalDecision::Approve => (true, None),
            ApprovalDecision::Deny { reason } => {
                let reason = if reason.trim().is_empty() {
                    "denied by the user".to_owned()
                } else {
                    reason.chars().take(500).collect()
                };
                (false, Some(reason))
            }
            ApprovalDecision::ApproveForRun { up_to } => {
                extra.grant = Some(self.grant_for(approval_id, up_to, &by).await?);
                (true, None)
            }
            ApprovalDecision::ApproveWithEdits { params } => {
                self.check_edits(approval_id, &params).await?;
                extra.edits = Some(params);
                (true, None)
            }
            ApprovalDecision::AllowApp { minutes } => {
                extra.grant = Some(self.app_grant_for(approval_id, minutes, &by).await?);
                (true, None)
            }
        };
        let grant = extra.grant.clone();
        let approval = self
            .record(approval_id, approved, reason, by.clone(), extra)
            .await?;
        if let Some(grant) = grant {
            self.release_covered(&grant, approval_id, &by).await;
        }
        Ok(approval)
    }

    /// Other requests still waiting that `grant` answers: of the same
    /// run and device up to its ceiling (a grant for the run), or of the
    /// same device and app up to its risk (an app grant). They are
    /// approved in its name, so a step whose calls all waited runs on.
    async fn release_covered(&self, grant: &Grant, answered: &str, by: &str) {
        let pending = match self.inner.store.pending_approvals().await {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(grant = grant.grant_id, error = %e, "cannot read the requests a grant may answer");
                return;
            }
        };
        let by = format!("{by} (grant {})", grant.grant_id);
        for request in pending {
            if request.approval_id != answered
                && crate::graph::grants::answers(grant, &request, now_ms())
                && let Err(e) = self
                    .record(
                        &request.approval_id,
                        true,
                        None,
                        by.clone(),
                        store::DecisionExtra::default(),
                    )
                    .await
            {
                // Answered or expired meanwhile: nothing to release.
                tracing::debug!(approval = request.approval_id, error = %e, "a covered request closed first");
            }
        }
    }

    /// Whether an app grant lets `app` on `device` be used as an allowed
    /// app now ([`ApprovalDecision::AllowApp`]).
    ///
    /// # Errors
    /// The store cannot be read.
    pub async fn app_allowed(&self, device: &str, app: &str) -> Result<bool, AgentError> {
        let now = now_ms();
        Ok(self
            .inner
            .store
            .app_grants()
            .await?
            .iter()
            .any(|g| g.active() && g.covers_app(Some(device), app, now)))
    }

    /// Record the answer to `approval_id` and wake whoever waits for it.
    async fn record(
        &self,
        approval_id: &str,
        approved: bool,
        reason: Option<String>,
        by: String,
        extra: store::DecisionExtra,
    ) -> Result<PendingApproval, AgentError> {
        let approval = self
            .inner
            .store
            .decide(
                approval_id.to_owned(),
                approved,
                reason.clone(),
                by.clone(),
                extra.clone(),
            )
            .await?;
        tracing::info!(
            approval = approval_id,
            approved,
            by = %by,
            service = %approval.service,
            action = %approval.action,
            grant = extra.grant.as_ref().map(|g| g.grant_id.as_str()),
            edited = extra.edits.is_some(),
            "approval answered"
        );
        let answer = Answer {
            approved,
            reason,
            by,
            extra,
        };
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

    /// The grant an "allow this app on this device for `minutes`" answer
    /// to `approval_id` gives: only for a screen action the app in front
    /// made riskier, of at most [`crate::grant::GRANT_CEILING`] there.
    async fn app_grant_for(
        &self,
        approval_id: &str,
        minutes: u32,
        by: &str,
    ) -> Result<Grant, AgentError> {
        let max = crate::grant::MAX_APP_MINUTES;
        if minutes == 0 || minutes > max {
            return Err(AgentError::InvalidAnswer(format!(
                "an app is allowed for 1 to {max} minutes; list it in [phone_services.ui] allowed_apps for longer"
            )));
        }
        let request = self.pending_request(approval_id).await?;
        let now = now_ms();
        // Unknown or closed ids fall through to `decide`, which says which.
        let Some(request) = request else {
            return Ok(new_grant(
                approval_id,
                by,
                now,
                Risk::Low,
                Default::default(),
            ));
        };
        let (Some(device), Some(app)) = (request.device.clone(), request.app.clone()) else {
            return Err(AgentError::InvalidAnswer(
                "only a screen action asked about because of the app in front can allow that app; approve this one once or for the run"
                    .into(),
            ));
        };
        if request.risk > crate::grant::GRANT_CEILING {
            return Err(AgentError::InvalidAnswer(format!(
                "{app} is {} risk ([phone_services.ui]); its screen actions are asked about one by one",
                request.risk.as_str()
            )));
        }
        Ok(Grant {
            app: Some(app),
            expires_at: Some(now.saturating_add(u64::from(minutes) * 60_000)),
            ..new_grant(
                approval_id,
                by,
                now,
                request.risk,
                (request.run_id, request.session, device),
            )
        })
    }

    /// The grant an "approve for this run" answer to `approval_id` gives.
    async fn grant_for(
        &self,
        approval_id: &str,
        up_to: Risk,
        by: &str,
    ) -> Result<Grant, AgentError> {
        if up_to > crate::grant::GRANT_CEILING {
            return Err(AgentError::InvalidAnswer(format!(
                "a grant for the run covers actions up to {} at most; {} actions are asked about one by one",
                crate::grant::GRANT_CEILING.as_str(),
                up_to.as_str()
            )));
        }
        let request = self.pending_request(approval_id).await?;
        let grant = |run_id: String, session_id: String, device: String| {
            new_grant(
                approval_id,
                by,
                now_ms(),
                up_to,
                (run_id, session_id, device),
            )
        };
        // Unknown or closed ids fall through to `decide`, which says which.
        let Some(request) = request else {
            return Ok(grant(String::new(), String::new(), String::new()));
        };
        let device = match (&request.device, request.service.as_str()) {
            (Some(d), s)
                if s != crate::graph::SKILL_SERVICE && s != crate::tools::extra::EXTRA_SERVICE =>
            {
                d.clone()
            }
            _ => {
                return Err(AgentError::InvalidAnswer(
                    "a grant for the run covers a device's actions; this request is not one: approve it once"
                        .into(),
                ));
            }
        };
        // Only an agent's run can hold a grant: a call from outside a run
        // (MCP) or a skill's step (no run of its own) is approved once.
        if self
            .inner
            .store
            .load_run(request.run_id.clone())
            .await
            .is_err()
        {
            return Err(AgentError::InvalidAnswer(
                "a grant for the run needs an agent's run; this request comes from outside one (an MCP client's call or a skill's step): approve it once"
                    .into(),
            ));
        }
        Ok(grant(request.run_id, request.session, device))
    }

    /// Check edited parameters for `approval_id` as the waiting run will:
    /// the call from its checkpoint, this agent's tools and policy.
    async fn check_edits(
        &self,
        approval_id: &str,
        params: &serde_json::Map<String, Value>,
    ) -> Result<(), AgentError> {
        let Some(request) = self.pending_request(approval_id).await? else {
            // Unknown or closed: `decide` says which.
            return Ok(());
        };
        let not_editable = || {
            AgentError::InvalidAnswer(
                "this request's call cannot be edited (it comes from outside an agent's run: an MCP client's call or a skill's step); approve or deny it"
                    .into(),
            )
        };
        let state = self
            .inner
            .store
            .load_run(request.run_id.clone())
            .await
            .map_err(|_| not_editable())?;
        let slot = state
            .calls
            .iter()
            .find(|s| s.call.id == request.call_id)
            .ok_or_else(not_editable)?;
        crate::graph::grants::plan_edited(&self.toolset(), &self.approval_policy(), slot, params)
            .map(|_| ())
            .map_err(|e| AgentError::InvalidAnswer(e.message))
    }

    /// The grants that still hold, oldest first.
    ///
    /// # Errors
    /// A store error.
    pub async fn grants(&self) -> Result<Vec<Grant>, AgentError> {
        self.inner.store.active_grants().await
    }

    /// Revoke grant `grant_id` on behalf of `by`: the next action it
    /// would have covered asks a person again. Sent as a
    /// [`EventKind::GrantRevoked`] event of the grant's run.
    ///
    /// # Errors
    /// [`AgentError::UnknownGrant`], [`AgentError::GrantClosed`] when it
    /// was revoked already or its run has ended, or a store error.
    pub async fn revoke_grant(&self, grant_id: &str, by: &str) -> Result<Grant, AgentError> {
        let by = decider(by);
        let grant = self
            .inner
            .store
            .revoke_grant(grant_id.to_owned(), by.clone())
            .await?;
        tracing::info!(grant = grant_id, by = %by, "grant revoked");
        let _ = self.inner.events.send(AgentEvent {
            run_id: grant.run_id.clone(),
            session_id: grant.session_id.clone(),
            skill: None,
            parent_run: None,
            kind: EventKind::GrantRevoked {
                grant_id: grant.grant_id.clone(),
                by,
            },
        });
        Ok(grant)
    }

    /// The `limit` approval requests answered (or expired) last, the most
    /// recent first, each with who answered and when.
    ///
    /// # Errors
    /// A store error.
    pub async fn approval_history(&self, limit: usize) -> Result<Vec<ApprovalOutcome>, AgentError> {
        self.inner.store.approval_history(limit).await
    }

    /// The waiting approval request `approval_id`, if it is waiting.
    async fn pending_request(
        &self,
        approval_id: &str,
    ) -> Result<Option<PendingApproval>, AgentError> {
        Ok(self
            .inner
            .store
            .pending_approvals()
            .await?
            .into_iter()
            .find(|a| a.approval_id == approval_id))
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
        let detail = self
            .inner
            .store
            .session_detail(session_id.to_owned())
            .await?;
        Ok(markdown::render(&detail))
    }

    fn emit(&self, state: &RunState, tag: &Tag, kind: EventKind) {
        // No receiver is not an error: nobody is listening.
        let _ = self.inner.events.send(AgentEvent {
            run_id: state.run_id.clone(),
            session_id: state.session_id.clone(),
            skill: tag.skill.clone(),
            parent_run: tag.parent_run.clone(),
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
            state,
            toolset,
            resumed,
            admission,
            _guard,
        } = self;
        let policy = agent.approval_policy();
        let provider = agent.inner.provider.clone();
        let system: Arc<str> = system_prompt(&agent.inner.config, &state, &toolset).into();
        let first = if resumed {
            Input::Resume { now_ms: now_ms() }
        } else {
            Input::Start { now_ms: now_ms() }
        };
        drive_loop(Loop {
            agent,
            state,
            toolset,
            policy,
            system,
            first,
            slots: Slots::Top {
                admission: Some(admission),
                slot: None,
            },
            persisted: true,
            provider,
            tag: Tag::default(),
            paces: Vec::new(),
            shutdown,
        })
        .await
    }
}

/// What a run's events are tagged with: nothing for a user's run, the
/// skill and the parent run for a skill's run.
#[derive(Debug, Clone, Default)]
struct Tag {
    skill: Option<String>,
    parent_run: Option<String>,
}

/// How a run holds its place in the bound on agent work.
enum Slots {
    /// A user's run: it takes a slot before its first model call or device
    /// action, and gives it back while it waits only for a person.
    Top {
        admission: Option<Admission>,
        slot: Option<Slot>,
    },
    /// A skill's run works inside its parent's slot (taking a second one
    /// could deadlock when every slot's run waits for a skill). It is not
    /// persisted as a run of its own: if the process stops, the parent
    /// reports the skill as interrupted (at most once, like a device
    /// change).
    Child,
}

/// Everything one drive of the graph needs.
struct Loop {
    agent: Agent,
    state: RunState,
    toolset: Toolset,
    policy: Arc<ApprovalPolicy>,
    system: Arc<str>,
    first: Input,
    slots: Slots,
    /// Whether the run has a row of its own (a user's run; not a child).
    persisted: bool,
    /// The model it talks to (a delegated agent may have its own).
    provider: Arc<dyn Provider>,
    tag: Tag,
    /// The clocks of the child runs this run is (in): each counts the time
    /// spent waiting for the model, which their time limits leave out.
    paces: Vec<Arc<Pace>>,
    shutdown: CancellationToken,
}

/// What a swappable setting holds now (a poisoned lock still holds it:
/// a writer only swaps the `Arc`).
fn current<T>(slot: &RwLock<Arc<T>>) -> Arc<T> {
    Arc::clone(
        &slot
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    )
}

/// Swap a setting for the runs started from now on; runs going keep
/// their `Arc` of the old one.
fn replace<T>(slot: &RwLock<Arc<T>>, value: T) {
    *slot
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(value);
}

/// Feed the state machine and perform its actions until the run finishes.
async fn drive_loop(l: Loop) -> Result<RunOutcome, AgentError> {
    let Loop {
        agent,
        mut state,
        toolset,
        policy,
        system,
        first,
        mut slots,
        persisted,
        provider,
        tag,
        paces,
        shutdown,
    } = l;
    // Model calls and executions in flight; when none is, the run waits
    // only for approvals and gives its slot back.
    let mut working = 0usize;
    let inner = agent.inner.clone();
    let cfg = &inner.config;
    let no_grants: Vec<Grant> = Vec::new();
    let env = StepEnv {
        toolset: &toolset,
        policy: &policy,
        grants: &no_grants,
    };
    let mut inflight: FuturesUnordered<BoxFuture<'static, Input>> = FuturesUnordered::new();
    let mut device_locks: HashMap<String, Arc<tokio::sync::Mutex<()>>> = HashMap::new();
    let mut actions: VecDeque<Action> = step(&mut state, &env, first).into();
    loop {
        while let Some(action) = actions.pop_front() {
            match action {
                Action::CallModel => {
                    slots.ensure(&inner, &shutdown, &state).await?;
                    working += 1;
                    inflight.push(model_call(
                        &inner,
                        &provider,
                        &state,
                        &toolset,
                        system.clone(),
                        &tag,
                        paces.clone(),
                    ));
                }
                Action::Checkpoint { approvals } => {
                    // A skill's run has no row of its own; its approval
                    // requests are stored all the same, so a person can
                    // answer them through every channel.
                    if (persisted && cfg.checkpoint_steps) || !approvals.is_empty() {
                        let json = serde_json::to_string(&state)?;
                        inner
                            .store
                            .checkpoint(state.run_id.clone(), json, approvals)
                            .await?;
                    }
                }
                Action::Emit(kind) => agent.emit(&state, &tag, kind),
                Action::AwaitApproval {
                    call_id,
                    approval_id,
                    expires_at,
                } => inflight.push(await_approval(&inner, call_id, approval_id, expires_at)),
                Action::Execute {
                    call_id,
                    planned,
                    cleared,
                } => {
                    slots.ensure(&inner, &shutdown, &state).await?;
                    working += 1;
                    let fut = match planned {
                        Planned::InvokeSkill {
                            skill,
                            input,
                            risk,
                            depth,
                        } => invoke_skill(
                            &agent,
                            &state,
                            &toolset,
                            &policy,
                            call_id,
                            SkillCall {
                                skill,
                                input,
                                risk,
                                depth,
                            },
                            Within {
                                paces: &paces,
                                shutdown: &shutdown,
                            },
                        ),
                        Planned::Delegate {
                            agent: name,
                            task,
                            context,
                            mode,
                        } => delegate::delegate(
                            &agent,
                            &state,
                            &toolset,
                            &policy,
                            call_id,
                            delegate::DelegateCall {
                                agent: name,
                                task,
                                context,
                                mode,
                            },
                            Within {
                                paces: &paces,
                                shutdown: &shutdown,
                            },
                        ),
                        Planned::DelegationStatus { task_id } => {
                            background::status(&agent, &state, call_id, task_id)
                        }
                        planned => execute(
                            &inner,
                            &provider,
                            &toolset,
                            &mut device_locks,
                            call_id,
                            planned,
                            cleared,
                        ),
                    };
                    inflight.push(fut);
                }
                Action::Finish(outcome) => {
                    // From the ask (the run's first message) to now.
                    let duration_ms = state
                        .messages
                        .first()
                        .map_or(0, |m| now_ms().saturating_sub(m.at_ms));
                    log_end(&state, &tag, &outcome, duration_ms);
                    if !persisted {
                        return Ok(outcome);
                    }
                    inner
                        .store
                        .finish_run(&state, &outcome, cfg.memory_turns)
                        .await?;
                    let kind = match &outcome.error {
                        Some(error) => EventKind::Error {
                            error: error.clone(),
                            stop_reason: outcome.stop_reason,
                            usage: outcome.usage,
                            model_calls: outcome.model_calls,
                            duration_ms,
                        },
                        None => EventKind::Final {
                            text: outcome.text.clone(),
                            stop_reason: outcome.stop_reason,
                            usage: outcome.usage,
                            model_calls: outcome.model_calls,
                            duration_ms,
                        },
                    };
                    agent.emit(&state, &tag, kind);
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
            slots.release();
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
        // The model's calls are planned on its reply: read the run's
        // grants then (a revocation counts from the next reply on), and
        // where a call's clearance is decided again: an answer, and a
        // screen action the app in front stopped. A skill's run has its
        // own id and so no grants.
        let decides = match &input {
            Input::ModelReplied { .. } | Input::ApprovalAnswered { .. } => true,
            Input::ToolFinished { result: Err(e), .. } => e.code == ErrorCode::ApprovalRequired,
            _ => false,
        };
        let grants = if persisted && decides {
            inner.store.run_grants(state.run_id.clone()).await?
        } else {
            Vec::new()
        };
        let env = StepEnv {
            grants: &grants,
            ..env
        };
        actions.extend(step(&mut state, &env, input));
    }
}

/// Log a run's end: why it stopped, how long it took, its model calls and
/// tokens. A user's run at `info` (`warn` when it failed or gave no
/// answer), a child run (a skill's, a delegated agent's) at `debug`: its
/// parent's tool result says how it went.
fn log_end(state: &RunState, tag: &Tag, outcome: &RunOutcome, duration_ms: u64) {
    let no_answer = outcome.error.is_some()
        || outcome.stop_reason != crate::events::StopReason::FinalAnswer
        || outcome.text.trim().is_empty();
    let error = outcome.error.as_ref().map(|e| e.message.as_str());
    macro_rules! end {
        ($level:ident) => {
            tracing::$level!(
                session = state.session_id,
                run = state.run_id,
                skill = tag.skill.as_deref(),
                stop_reason = outcome.stop_reason.as_str(),
                duration_ms,
                model_calls = outcome.model_calls,
                input_tokens = outcome.usage.input_tokens,
                output_tokens = outcome.usage.output_tokens,
                tool_calls = outcome.steps.len(),
                error,
                "agent run finished{}",
                if no_answer { " without an answer" } else { "" }
            )
        };
    }
    match (tag.skill.is_some(), no_answer) {
        (true, _) => end!(debug),
        (false, false) => end!(info),
        (false, true) => end!(warn),
    }
}

impl Slots {
    async fn ensure(
        &mut self,
        inner: &Arc<Inner>,
        shutdown: &CancellationToken,
        state: &RunState,
    ) -> Result<(), AgentError> {
        if let Self::Top { admission, slot } = self
            && slot.is_none()
        {
            *slot = Some(take_slot(inner, admission, shutdown, state).await?);
        }
        Ok(())
    }

    fn release(&mut self) {
        if let Self::Top { admission, slot } = self {
            *slot = None;
            *admission = None;
        }
    }
}

/// What a run's next constrained reply may be
/// ([`crate::tools::reply::ReplyStage`]): a phone action first, then a call
/// or the answer — only the answer once the model repeats a call it made
/// already in this run (a small model held to calls would otherwise call
/// the same read until its iteration cap instead of answering with it).
fn reply_stage(state: &RunState, first_call: bool) -> crate::tools::reply::ReplyStage {
    use crate::tools::reply::ReplyStage;
    if first_call {
        return ReplyStage::First;
    }
    let replies: Vec<&[ToolCall]> = state
        .messages
        .iter()
        .filter_map(|m| match &m.message {
            crate::Message::Assistant { tool_calls, .. } => Some(tool_calls.as_slice()),
            _ => None,
        })
        .collect();
    let Some((last, before)) = replies.split_last() else {
        return ReplyStage::Any;
    };
    let last: Vec<(&str, &str)> = last.iter().map(name_and_arguments).collect();
    let before = before.iter().flat_map(|r| r.iter().map(name_and_arguments));
    ReplyStage::after(&last, before)
}

fn name_and_arguments(call: &ToolCall) -> (&str, &str) {
    (call.name.as_str(), call.arguments.as_str())
}

/// What a child run is started within: the clocks of the runs it is
/// inside (see [`Pace`]) and the caller's shutdown token.
#[derive(Clone, Copy)]
struct Within<'a> {
    paces: &'a [Arc<Pace>],
    shutdown: &'a CancellationToken,
}

/// An `invoke_skill` call, validated.
struct SkillCall {
    skill: String,
    input: Value,
    risk: Risk,
    depth: u32,
}

/// Run a skill as a child run of the same graph: the skill's instructions
/// as the system prompt, only its `allowed-tools`, its own iteration and
/// time limits, in the parent's session (events tagged with the skill). A
/// skill that was approved (or allowed by the policy) at risk `r` runs its
/// tools under that grant: actions up to `r` need no further approval;
/// riskier ones, and the deny list, still apply. Its answer, or its
/// failure, is the parent's tool result.
fn invoke_skill(
    agent: &Agent,
    parent: &RunState,
    parent_tools: &Toolset,
    policy: &ApprovalPolicy,
    call_id: String,
    call: SkillCall,
    within: Within<'_>,
) -> BoxFuture<'static, Input> {
    let Within { paces, shutdown } = within;
    let agent = agent.clone();
    let cfg = &agent.inner.config;
    let skills = parent_tools
        .skills()
        .cloned()
        .unwrap_or_else(|| agent.skills());
    let prepared = (|| {
        let skill = skills
            .enabled_skill(&call.skill)
            .map_err(|m| WireError::new(ErrorCode::NotFound, m))?
            .clone();
        let allowed = skill.resolve_tools().map_err(|unknown| {
            WireError::new(
                ErrorCode::InvalidRequest,
                format!(
                    "skill {} cannot run: its allowed-tools name tools that do not exist: {}",
                    skill.name,
                    unknown.join(", ")
                ),
            )
        })?;
        Ok::<_, WireError>((skill, allowed))
    })();
    let parent_run = parent.run_id.clone();
    let session_id = parent.session_id.clone();
    let (skill, allowed) = match prepared {
        Ok(p) => p,
        Err(e) => {
            return Box::pin(async move {
                Input::ToolFinished {
                    call_id,
                    result: Err(e),
                    now_ms: now_ms(),
                }
            });
        }
    };
    let toolset = Toolset::for_child(
        cfg.tool_mode,
        parent_tools.devices(),
        skills.clone(),
        SkillScope::skill(&skill.name, allowed),
        call.depth,
        parent_tools.max_depth(),
    )
    .with_schemas(cfg.tool_schemas);
    let mut child_policy = policy.clone();
    child_policy.auto_approve_up_to = child_policy.auto_approve_up_to.max(call.risk);
    let limits = child_limits(cfg, skill.max_iterations, policy, &toolset);
    let input_text = serde_json::to_string_pretty(&call.input).unwrap_or_default();
    let state = RunState {
        // The account that asked the parent asked this too.
        asked_by: parent.asked_by.clone(),
        ..RunState::new(
            store::new_id("k-"),
            session_id,
            format!(
                "Carry out the skill {} with this input:\n{input_text}",
                skill.name
            ),
            Vec::new(),
            Vec::new(),
            limits,
            now_ms(),
        )
    };
    let mut system = format!(
        "You are carrying out the skill \"{}\" for droidwarden, an assistant that controls the user's Android phones. Follow the skill's instructions below using only the tools you are given; a tool you are not given is not allowed for this skill. If a tool returns an error, read it and fix the call or report the problem. Finish with a short summary of what you did and found.\n\n# Skill instructions\n\n{}",
        skill.name, skill.body
    );
    if toolset.has_invoke() {
        system.push_str("\n\n");
        system.push_str(&skills.registry_prompt());
    }
    let timeout = skill.timeout.unwrap_or(cfg.skills.timeout);
    let tag = Tag {
        skill: Some(skill.name.clone()),
        parent_run: Some(parent_run),
    };
    let provider = agent.inner.provider.clone();
    run_child(
        agent,
        call_id,
        Child {
            state,
            toolset,
            policy: child_policy,
            system,
            timeout,
            tag,
            kind: "skill",
            name: skill.name.clone(),
            depth: call.depth,
            input: call.input,
            limits_fail: false,
            provider,
            slots: Slots::Child,
            paces: paces.to_vec(),
        },
        shutdown,
    )
}

/// A child run ready to drive: a skill's or a delegated agent's.
struct Child {
    state: RunState,
    toolset: Toolset,
    policy: ApprovalPolicy,
    system: String,
    timeout: Duration,
    tag: Tag,
    /// `skill` or `agent`: the result's key and the messages' word.
    kind: &'static str,
    name: String,
    depth: u32,
    input: Value,
    /// Whether stopping at a limit (iterations, steps) is a failure.
    limits_fail: bool,
    /// The model it talks to.
    provider: Arc<dyn Provider>,
    /// The parent's slot ([`Slots::Child`]) or its own (a background task).
    slots: Slots,
    /// The clocks of the runs it is inside (none for a background task).
    paces: Vec<Arc<Pace>>,
}

/// How a child run ended: its result for the parent, and its tool calls.
struct ChildEnd {
    result: Result<Value, WireError>,
    steps: Vec<crate::graph::ToolStep>,
}

/// The limits of a child run (a skill's or a delegated agent's): its own
/// iteration limit (`None`: the agent's) with steps to match, the parent's
/// approval wait, the agent's result size.
fn child_limits(
    cfg: &AgentConfig,
    max_iterations: Option<u32>,
    policy: &ApprovalPolicy,
    toolset: &Toolset,
) -> RunLimits {
    let max_iterations = max_iterations.unwrap_or(cfg.max_iterations);
    RunLimits {
        max_iterations,
        max_steps: max_iterations * 4 + 4,
        max_result_chars: cfg.max_result_chars,
        approval_timeout_ms: u64::try_from(policy.timeout.as_millis()).unwrap_or(u64::MAX),
        tools_enabled: !toolset.is_empty(),
        text_calls: cfg.text_tool_calls,
        tool_nudge: cfg.tool_nudge,
    }
}

/// Drive a child run to its end, bounded by its timeout. Nothing it does
/// can fail the caller: every failure is in [`ChildEnd::result`].
///
/// The timeout counts the child's own time (tools, approvals, waiting for
/// a slot), not the time its model calls take: a slow model on a CPU would
/// otherwise hit any fixed limit, and each model call is already bounded
/// by the provider's progress limits (first byte, idle), as their number
/// is by the child's iteration limit.
async fn drive_child(agent: Agent, child: Child, shutdown: CancellationToken) -> ChildEnd {
    let Child {
        state,
        toolset,
        policy,
        system,
        timeout,
        tag,
        kind,
        name,
        limits_fail,
        provider,
        slots,
        mut paces,
        ..
    } = child;
    let pace = Arc::new(Pace::default());
    paces.push(pace.clone());
    let looped = drive_loop(Loop {
        agent,
        state,
        toolset,
        policy: Arc::new(policy),
        system: system.into(),
        first: Input::Start { now_ms: now_ms() },
        slots,
        persisted: false,
        provider,
        tag,
        paces,
        shutdown: shutdown.clone(),
    });
    let bounded = pace.bound(timeout, looped);
    let mut steps = Vec::new();
    let result = match bounded.await {
        Ok(Ok(outcome)) => {
            steps = outcome.steps.clone();
            match outcome.error {
                Some(e) => Err(WireError::new(
                    e.code,
                    format!("{kind} {name} failed: {}", e.message),
                )),
                None if limits_fail
                    && outcome.stop_reason != crate::events::StopReason::FinalAnswer =>
                {
                    Err(WireError::new(
                        ErrorCode::Timeout,
                        format!(
                            "{kind} {name} stopped before answering: it reached its limit ({})",
                            serde_json::to_value(outcome.stop_reason)
                                .ok()
                                .and_then(|v| v.as_str().map(str::to_owned))
                                .unwrap_or_default()
                        ),
                    ))
                }
                None => Ok(serde_json::json!({
                    kind: name,
                    "text": outcome.text,
                    "stop_reason": outcome.stop_reason,
                    "tool_calls": outcome.steps.len(),
                })),
            }
        }
        Ok(Err(e)) => Err(WireError::new(
            ErrorCode::Internal,
            format!("{kind} {name} stopped: {e}"),
        )),
        Err(model_time) => {
            // Stop the child's work still in flight (its futures are
            // dropped with the loop; the token ends its waits).
            shutdown.cancel();
            Err(WireError::new(
                ErrorCode::Timeout,
                format!(
                    "{kind} {name} did not finish within its {} s (the {} s it waited for the model not counted)",
                    timeout.as_secs_f64(),
                    model_time.as_secs()
                ),
            ))
        }
    };
    ChildEnd { result, steps }
}

/// Drive a child run in the parent's slot and session, bounded by its
/// timeout, with `skill_started`/`skill_finished` around it. Its answer,
/// or its failure, is the parent's tool result; nothing it does can fail
/// the parent.
fn run_child(
    agent: Agent,
    call_id: String,
    child: Child,
    shutdown: &CancellationToken,
) -> BoxFuture<'static, Input> {
    let shutdown = shutdown.child_token();
    Box::pin(async move {
        let started = EventKind::SkillStarted {
            call_id: call_id.clone(),
            depth: child.depth,
            input: child.input.clone(),
        };
        agent.emit(&child.state, &child.tag, started);
        let (child_id, session_id) = (child.state.run_id.clone(), child.state.session_id.clone());
        let tag = child.tag.clone();
        let (kind, name, started_at) = (child.kind, child.name.clone(), now_ms());
        let ChildEnd { result, steps } = drive_child(agent.clone(), child, shutdown).await;
        // Kept for `session show` (the parent's conversation has only the
        // call and its result).
        let record = store::ChildRecord {
            run_id: child_id.clone(),
            session_id: session_id.clone(),
            parent_run: tag.parent_run.clone().unwrap_or_default(),
            call_id: call_id.clone(),
            kind: kind.to_owned(),
            name,
            is_error: result.is_err(),
            result: match &result {
                Ok(v) => v.clone(),
                Err(e) => serde_json::to_value(e).unwrap_or_default(),
            },
            steps,
            started_at,
            finished_at: now_ms(),
        };
        if let Err(e) = agent.inner.store.record_child(record).await {
            tracing::warn!(run = child_id, "child run not kept for the session: {e}");
        }
        let finished = EventKind::SkillFinished {
            call_id: call_id.clone(),
            stop_reason: match &result {
                Ok(v) => serde_json::from_value(v["stop_reason"].clone())
                    .unwrap_or(crate::events::StopReason::FinalAnswer),
                Err(_) => crate::events::StopReason::Error,
            },
            is_error: result.is_err(),
        };
        let _ = agent.inner.events.send(AgentEvent {
            run_id: child_id,
            session_id,
            skill: tag.skill,
            parent_run: tag.parent_run,
            kind: finished,
        });
        Input::ToolFinished {
            call_id,
            result,
            now_ms: now_ms(),
        }
    })
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

fn system_prompt(cfg: &AgentConfig, state: &RunState, toolset: &Toolset) -> String {
    let mut s = cfg.system_prompt.clone();
    // Progressive disclosure: names and descriptions only; a body is
    // loaded when the model reads or invokes the skill.
    if toolset.has_invoke()
        && let Some(skills) = toolset.skills()
    {
        s.push_str("\n\n");
        s.push_str(&skills.registry_prompt());
    }
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
    provider: &Arc<dyn Provider>,
    state: &RunState,
    toolset: &Toolset,
    system: Arc<str>,
    tag: &Tag,
    paces: Vec<Arc<Pace>>,
) -> BoxFuture<'static, Input> {
    let view = state.model_view();
    // A react run's first call about the phones must call a tool.
    let first_call = view.tools
        && state.plan.is_none()
        && state.iteration == 1
        && toolset.example_call().is_some();
    let mut request = ChatRequest {
        system: if view.system.is_empty() {
            system.to_string()
        } else {
            format!("{system}{}", view.system)
        },
        messages: view.messages,
        tools: if view.tools {
            toolset.specs().clone()
        } else {
            Arc::from(Vec::new())
        },
        // `[llm] tool_choice = "required_first"`: a react run's first call
        // with phones must call a tool.
        require_tool: first_call && provider.requires_first_tool_call(),
        // `[llm] tool_choice = "schema"`: a reply is a call of an offered
        // tool or (after the first call) the answer, nothing else.
        reply_schema: (view.tools && provider.constrains_replies())
            .then(|| std::sync::Arc::from(toolset.reply_schema(reply_stage(state, first_call)))),
    };
    let inner = inner.clone();
    let provider = provider.clone();
    let (run_id, session_id) = (state.run_id.clone(), state.session_id.clone());
    let tag = tag.clone();
    Box::pin(async move {
        let _waiting = paces.iter().map(Pace::begin).collect::<Vec<_>>();
        let events = inner.events.clone();
        // A constrained reply is JSON (a call or `{"answer": …}`), not
        // text to show as it streams: its answer arrives unwrapped in the
        // run's final event.
        let constrained = request.reply_schema.is_some();
        let sink = move |t: &str| {
            if constrained {
                return;
            }
            let _ = events.send(AgentEvent {
                run_id: run_id.clone(),
                session_id: session_id.clone(),
                skill: tag.skill.clone(),
                parent_run: tag.parent_run.clone(),
                kind: EventKind::TextDelta { text: t.to_owned() },
            });
        };
        if !provider.vision() {
            request.messages = crate::images::for_text_model(request.messages);
        }
        let result = match provider.complete(&request, &sink).await {
            // A text-only model refused a screenshot: the provider sends no
            // image from now on, and the model is asked again at once
            // (nothing was streamed), told the image cannot be shown.
            Err(e) if e.refused_images() && !provider.vision() => {
                tracing::info!(
                    provider = provider.name(),
                    "the model refused an image; asking again without it"
                );
                request.messages = crate::images::for_text_model(request.messages);
                provider.complete(&request, &sink).await
            }
            other => other,
        };
        match result {
            Ok(reply) => Input::ModelReplied {
                reply,
                now_ms: now_ms(),
            },
            Err(e) => {
                tracing::warn!(provider = provider.name(), "model call failed: {e}");
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
        let expired = || (false, Some("the approval request expired".into()), None);
        let decided = |s: ApprovalStatus| match s {
            ApprovalStatus::Approved(by) => Some((true, None, by)),
            ApprovalStatus::Denied(r, by) => Some((false, Some(r), by)),
            ApprovalStatus::Expired => Some(expired()),
            ApprovalStatus::Pending => None,
        };
        let unavailable = |e: AgentError| {
            (
                false,
                Some(format!("approval state unavailable: {e}")),
                None,
            )
        };
        let stored = inner.store.approval_status(approval_id.clone()).await;
        // The edits and grant of an answer read from the store (given
        // while the run was not waiting, or raced with the timer).
        let mut extra = None;
        let (approved, reason, by) = match stored.map(decided) {
            Ok(Some(d)) => d,
            Ok(None) => {
                let remaining = Duration::from_millis(expires_at.saturating_sub(now_ms()));
                match tokio::time::timeout(remaining, rx).await {
                    Ok(Ok(answer)) => {
                        extra = Some(answer.extra);
                        (answer.approved, answer.reason, Some(answer.by))
                    }
                    // Timer ran out (or the waiter was replaced): expire,
                    // unless an answer landed in the store meanwhile.
                    Ok(Err(_)) | Err(_) => match inner.store.expire(approval_id.clone()).await {
                        Ok(s) => decided(s).unwrap_or_else(expired),
                        Err(e) => unavailable(e),
                    },
                }
            }
            Err(e) => unavailable(e),
        };
        let extra = match extra {
            Some(extra) => extra,
            None if approved => inner
                .store
                .decision_extra(approval_id.clone())
                .await
                .unwrap_or_default(),
            None => store::DecisionExtra::default(),
        };
        if let Ok(mut w) = inner.waiters.lock() {
            w.remove(&approval_id);
        }
        Input::ApprovalAnswered {
            call_id,
            approved,
            reason,
            by,
            edits: extra.edits,
            grant: extra.grant.map(Box::new),
            now_ms: now_ms(),
        }
    })
}

fn execute(
    inner: &Arc<Inner>,
    provider: &Arc<dyn Provider>,
    toolset: &Toolset,
    locks: &mut HashMap<String, Arc<tokio::sync::Mutex<()>>>,
    call_id: String,
    planned: Planned,
    cleared: Risk,
) -> BoxFuture<'static, Input> {
    let skills = toolset.skills().cloned();
    let skill_tool =
        |result: Result<Value, String>| result.map_err(|m| WireError::new(ErrorCode::NotFound, m));
    match &planned {
        Planned::ListSkills => {
            let list: Vec<Value> = skills
                .iter()
                .flat_map(|s| s.enabled().map(|k| k.summary_json()).collect::<Vec<_>>())
                .collect();
            let result = Ok(serde_json::json!({ "skills": list }));
            return Box::pin(async move {
                Input::ToolFinished {
                    call_id,
                    result,
                    now_ms: now_ms(),
                }
            });
        }
        Planned::ReadSkill { skill, file } => {
            let (skill, file) = (skill.clone(), file.clone());
            return Box::pin(async move {
                let result = match &skills {
                    None => Err(WireError::new(
                        ErrorCode::NotFound,
                        "no skills are available",
                    )),
                    Some(set) => match file {
                        None => skill_tool(set.read(&skill)),
                        Some(file) => skill_tool(read_reference(set, &skill, &file).await),
                    },
                };
                Input::ToolFinished {
                    call_id,
                    result,
                    now_ms: now_ms(),
                }
            });
        }
        _ => {}
    }
    if let Some(result) = planned.run_local(now_ms()) {
        return Box::pin(async move {
            Input::ToolFinished {
                call_id,
                result,
                now_ms: now_ms(),
            }
        });
    }
    if let Planned::Extra {
        tool, arguments, ..
    } = planned
    {
        let inner = inner.clone();
        return Box::pin(async move {
            let result = inner.host.call_extra(&tool, arguments).await;
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
        // Skills are run by `invoke_skill`, never here.
        return Box::pin(async move {
            Input::ToolFinished {
                call_id,
                result: Err(WireError::new(
                    ErrorCode::Internal,
                    "this call cannot be executed here",
                )),
                now_ms: now_ms(),
            }
        });
    };
    // One action at a time per device within a run (FIFO: tokio's Mutex is
    // fair); different devices run concurrently.
    let lock = locks
        .entry(device.clone().unwrap_or_default())
        .or_default()
        .clone();
    let inner = inner.clone();
    let provider = provider.clone();
    Box::pin(async move {
        let _turn = lock.lock_owned().await;
        // Asked now: the model may have refused an image since the call
        // was planned.
        let result = match crate::images::without_vision(&call.0, provider.vision()) {
            // A model without vision reads the screen's UI tree instead.
            Some(tree) => call_device(&inner, device.as_deref(), &tree, false, cleared)
                .await
                .map(crate::images::noted_tree),
            None => call_device(&inner, device.as_deref(), &call.0, mutates, cleared).await,
        };
        // A screenshot's image goes to the model, not into the conversation.
        let result = result.map(crate::images::detach);
        Input::ToolFinished {
            call_id,
            result,
            now_ms: now_ms(),
        }
    })
}

/// A skill's reference file, read without blocking the runtime.
async fn read_reference(set: &SkillSet, skill: &str, file: &str) -> Result<Value, String> {
    let path = set.reference_path(skill, file)?;
    let meta = tokio::fs::metadata(&path)
        .await
        .map_err(|e| format!("cannot read {file}: {e}"))?;
    if meta.len() > crate::skills::MAX_REFERENCE_BYTES {
        return Err(format!(
            "{file} is {} bytes; the limit is {}",
            meta.len(),
            crate::skills::MAX_REFERENCE_BYTES
        ));
    }
    let text = tokio::fs::read_to_string(&path)
        .await
        .map_err(|e| format!("cannot read {file} as UTF-8 text: {e}"))?;
    Ok(serde_json::json!({ "name": skill, "file": file, "text": text }))
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
    cleared: Risk,
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
        let result = match tokio::time::timeout(
            limit,
            inner.host.call_cleared(device, command.clone(), cleared),
        )
        .await
        {
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

/// A new grant (a fresh id) given by `by` at `granted_at` in answer to
/// `approval_id`: actions on `device` of run `run_id` up to `up_to`, for
/// the run (`app` and `expires_at` unset, which an app grant then sets).
fn new_grant(
    approval_id: &str,
    by: &str,
    granted_at: u64,
    up_to: Risk,
    (run_id, session_id, device): (String, String, String),
) -> Grant {
    Grant {
        grant_id: store::new_id("g"),
        run_id,
        session_id,
        device,
        up_to,
        granted_by: by.to_owned(),
        granted_at,
        approval_id: approval_id.to_owned(),
        revoked_at: None,
        revoked_by: None,
        ended_at: None,
        app: None,
        expires_at: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn who_answered_is_recorded_clean_bounded_and_never_empty() {
        assert_eq!(decider("D-Bus uid 1000 (:1.42)"), "D-Bus uid 1000 (:1.42)");
        assert_eq!(decider("  MQTT\r\n"), "MQTT");
        assert_eq!(decider("a\u{1b}[31mb\u{7}"), "a[31mb");
        assert_eq!(decider(""), "unknown");
        assert_eq!(decider("\n\t "), "unknown");
        let long = "é".repeat(MAX_DECIDER_CHARS + 50);
        assert_eq!(decider(&long).chars().count(), MAX_DECIDER_CHARS);
    }
}
