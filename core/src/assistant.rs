//! The LLM agent inside the daemon: the `droidwarden-agent` runtime wired
//! to the call hub, driven on the daemon's tasks, and announced to MQTT and
//! D-Bus.
//!
//! * [`HubTools`] is the agent's [`ToolHost`]: device calls go through
//!   [`Hub::call`] like every other caller's, so the agent's actions get
//!   the same validation, capability checks, per-phone serialization,
//!   timeouts and `executing → success | error` status as MQTT's and the
//!   CLI's.
//! * [`Assistant`] starts runs ([`Assistant::ask`]), answers approvals,
//!   lists sessions, and at start-up resumes the runs a previous process
//!   left unfinished (waiting for the model, a phone or an approval). Every
//!   run is driven on the daemon's [`TaskTracker`] and stops at the
//!   daemon's shutdown token, checkpointed, to be resumed at the next start.
//! * Its [`Notice`]s carry each agent event once to the MQTT publisher and
//!   the D-Bus signals, plus two things the agent's events do not say
//!   directly: that an approval request is closed (answered or expired:
//!   its retained topic goes) and that a run resumed after a restart
//!   finished (its MQTT requester still gets the reply).

use crate::hub::{Call, Hub};
use droidwarden_agent::config::SkillsConfig;
use droidwarden_agent::skills::SkillSet;
use droidwarden_agent::{
    Agent, AgentConfig, AgentError, AgentEvent, AskRequest, DeviceSummary, EventKind, LlmConfig,
    PendingApproval, RunMode, RunOutcome, SessionSummary, Store, ToolFuture, ToolHost, ToolStep,
};
use droidwarden_bridge::TransportKind;
use droidwarden_services::{Command, ErrorCode, WireError};
use serde_json::{Value, json};
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{broadcast, oneshot, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Notices waiting for a slow consumer. A run sends a few dozen events at
/// most (text deltas aside); 4096 absorbs many runs at once.
const NOTICE_CAPACITY: usize = 4096;

/// The agent's tools over the daemon's devices.
#[derive(Debug)]
pub struct HubTools {
    hub: Hub,
    /// Tools from outside the catalogue (`[[mcp.servers]]`' tools).
    extra: Arc<dyn ExtraTools>,
}

/// Tools the agent is offered beside the phones' services: those of the
/// MCP servers the daemon is a client of (the MCP adapter implements it).
pub trait ExtraTools: Send + Sync + std::fmt::Debug {
    /// The tools, as the model sees them.
    fn tools(&self) -> Vec<droidwarden_agent::tools::extra::ExtraTool>;
    /// Call the tool `name` with `arguments`.
    fn call<'a>(&'a self, name: &'a str, arguments: Value) -> ToolFuture<'a>;
}

/// No tools beside the phones'.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoExtraTools;

impl ExtraTools for NoExtraTools {
    fn tools(&self) -> Vec<droidwarden_agent::tools::extra::ExtraTool> {
        Vec::new()
    }

    fn call<'a>(&'a self, name: &'a str, _arguments: Value) -> ToolFuture<'a> {
        Box::pin(async move {
            Err(WireError::new(
                ErrorCode::UnknownAction,
                format!("no tool named {name}"),
            ))
        })
    }
}

impl HubTools {
    /// The tools over `hub`, and no others.
    pub fn new(hub: Hub) -> Self {
        Self {
            hub,
            extra: Arc::new(NoExtraTools),
        }
    }

    /// Offer these tools too (`[[mcp.servers]]`' tools).
    pub fn with_extra(mut self, extra: Arc<dyn ExtraTools>) -> Self {
        self.extra = extra;
        self
    }
}

/// The service ids a transport can do at least one action of.
pub fn services_of(transport: TransportKind) -> Vec<String> {
    let ids: BTreeSet<&'static str> = transport
        .capabilities()
        .into_iter()
        .filter(|c| c.supported)
        .map(|c| c.service)
        .collect();
    ids.into_iter().map(str::to_owned).collect()
}

impl ToolHost for HubTools {
    fn devices(&self) -> Vec<DeviceSummary> {
        self.hub
            .registry()
            .list()
            .into_iter()
            .map(|info| DeviceSummary {
                name: info.name.to_string(),
                // A service the policy turned off is not offered at all.
                services: services_of(info.transport)
                    .into_iter()
                    .filter(|s| self.hub.service_enabled(s))
                    .collect(),
                online: info.online,
            })
            .collect()
    }

    fn call_limit(&self, device: Option<&str>) -> Option<std::time::Duration> {
        self.hub
            .registry()
            .select(device)
            .ok()
            .map(|handle| crate::hub::call_bound(&handle))
    }

    fn extra_tools(&self) -> Vec<droidwarden_agent::tools::extra::ExtraTool> {
        self.extra.tools()
    }

    fn call_extra<'a>(&'a self, name: &'a str, arguments: Value) -> ToolFuture<'a> {
        self.extra.call(name, arguments)
    }

    fn call<'a>(&'a self, device: Option<&'a str>, command: Command) -> ToolFuture<'a> {
        let call = Call {
            device: device.map(str::to_owned),
            command,
        };
        Box::pin(self.hub.call(call))
    }

    fn call_cleared<'a>(
        &'a self,
        device: Option<&'a str>,
        command: Command,
        cleared: droidwarden_services::Risk,
    ) -> ToolFuture<'a> {
        let call = Call {
            device: device.map(str::to_owned),
            command,
        };
        Box::pin(self.hub.call_cleared(call, cleared))
    }
}

/// What the agent side announces, in order, to MQTT and D-Bus.
#[derive(Debug, Clone)]
pub enum Notice {
    /// An event of a run (each once).
    Event(Arc<AgentEvent>),
    /// An approval request was answered or expired.
    ApprovalClosed {
        /// The request's id.
        approval_id: String,
    },
    /// A run resumed after a restart finished; `origin` is what the request
    /// that started it recorded (see [`Origin`]).
    ResumedRunFinished {
        /// The origin tag the run was stored with.
        origin: String,
        /// How it ended.
        result: Result<Answer, WireError>,
    },
}

/// A finished run's answer: what `cmd/ask` replies and `Ask` callers see.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The session the run belongs to.
    pub session: String,
    /// The run's id.
    pub run: String,
    /// The agent's final text.
    pub text: String,
    /// Why the run stopped (`done`, `max_iterations`, …).
    pub stop_reason: String,
    /// The tool calls made, with their results.
    pub steps: Vec<ToolStep>,
}

impl Answer {
    /// The answer as MQTT replies and D-Bus returns it.
    pub fn to_json(&self) -> Value {
        json!({
            "session": self.session,
            "run": self.run,
            "text": self.text,
            "stop_reason": self.stop_reason,
            "steps": self.steps,
        })
    }
}

/// Where the answer of a run goes when the run outlives its request (the
/// daemon restarted): stored with the run as its origin tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// An MQTT `cmd/ask` with this id: the answer goes to `reply/<id>`.
    Mqtt(String),
}

impl Origin {
    /// The tag stored with the run.
    pub fn tag(&self) -> String {
        match self {
            Self::Mqtt(id) => format!("mqtt:{id}"),
        }
    }

    /// The origin a stored tag names.
    pub fn parse(tag: &str) -> Option<Self> {
        tag.strip_prefix("mqtt:")
            .map(|id| Self::Mqtt(id.to_owned()))
    }
}

/// A started run: its ids and, when it ends, its answer. `done` is closed
/// without a value when the daemon shuts down first (the run resumes at the
/// next start).
#[derive(Debug)]
pub struct Started {
    /// The session the run belongs to.
    pub session: String,
    /// The run's id.
    pub run: String,
    /// Its answer, when it ends.
    pub done: oneshot::Receiver<Result<Answer, WireError>>,
}

/// Counts for systemd's `STATUS=`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Activity {
    /// Runs being driven.
    pub runs: usize,
    /// Approval requests waiting for a person.
    pub approvals: usize,
}

#[derive(Debug)]
struct Inner {
    agent: Agent,
    tracker: TaskTracker,
    shutdown: CancellationToken,
    notices: broadcast::Sender<Notice>,
    /// Open approval requests: (run, call) → approval id.
    open: Mutex<HashMap<(String, String), String>>,
    runs: AtomicUsize,
    activity: watch::Sender<Activity>,
}

/// The agent as the daemon uses it. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Assistant {
    inner: Arc<Inner>,
}

/// The error every agent entry point gives when no model is configured.
pub fn disabled() -> WireError {
    WireError::new(
        ErrorCode::InvalidRequest,
        "the agent is off: no language model is configured (set [llm] provider and model; see docs/agent.md)",
    )
}

impl Assistant {
    /// Open the store under `state_dir/agent`, build the provider, and
    /// start forwarding events. Call [`Assistant::resume_interrupted`] once
    /// the consumers of [`Assistant::subscribe`] are subscribed.
    ///
    /// # Errors
    /// The store cannot be opened, or the provider cannot be built (an API
    /// key that cannot be read: the message names its source, never the key).
    pub async fn start(
        llm: &LlmConfig,
        config: AgentConfig,
        state_dir: &Path,
        hub: Hub,
        extra: Arc<dyn ExtraTools>,
        tracker: TaskTracker,
        shutdown: CancellationToken,
    ) -> Result<Self, AgentError> {
        // Reading the key is blocking file or environment I/O, done once.
        let provider = {
            let llm = llm.clone();
            tokio::task::spawn_blocking(move || droidwarden_agent::provider::from_config(&llm))
                .await
                .map_err(|e| AgentError::Client(format!("provider set-up panicked: {e}")))??
        };
        let store = Store::open(state_dir.join("agent"), config.durability).await?;
        let skills = load_skills(&config.skills, state_dir).await;
        let agent = Agent::new(
            config,
            provider,
            Arc::new(HubTools::new(hub).with_extra(extra)),
            store,
        );
        agent.set_skills(skills);
        agent.set_agents(delegates(llm, &agent.config().agents).await?);
        {
            // Background delegations run on the daemon's tracker and stop
            // with it (stored as interrupted).
            let (tracker, shutdown) = (tracker.clone(), shutdown.clone());
            agent.set_background_driver(move |d| {
                tracker.spawn(d.drive(shutdown.clone()));
            });
        }
        // Also marks background tasks the last process left running as
        // interrupted.
        let orphans = agent.expire_orphan_approvals().await?;
        if orphans > 0 {
            tracing::info!(
                orphans,
                "approval requests of skills interrupted by the last stop expired"
            );
        }
        let orphans = agent.expire_orphaned_external_approvals().await?;
        if orphans > 0 {
            tracing::info!(
                expired = orphans,
                "approval requests of MCP calls from before the restart expired"
            );
        }
        let pending = agent.pending_approvals().await?;
        let open = pending
            .iter()
            .map(|a| ((a.run_id.clone(), a.call_id.clone()), a.approval_id.clone()))
            .collect::<HashMap<_, _>>();
        let (notices, _) = broadcast::channel(NOTICE_CAPACITY);
        let activity = watch::channel(Activity {
            runs: 0,
            approvals: open.len(),
        })
        .0;
        let assistant = Self {
            inner: Arc::new(Inner {
                agent,
                tracker,
                shutdown,
                notices,
                open: Mutex::new(open),
                runs: AtomicUsize::new(0),
                activity,
            }),
        };
        let events = assistant.inner.agent.subscribe();
        assistant
            .inner
            .tracker
            .spawn(assistant.clone().forward(events));
        tracing::info!(
            provider = llm.provider.as_str(),
            model = llm.model,
            base_url = llm.base_url,
            tools = ?assistant.inner.agent.config().tool_mode,
            "agent ready"
        );
        Ok(assistant)
    }

    /// The agent runtime itself (its approval policy and approvals, for
    /// calls from other clients: `gate.rs`).
    pub fn agent(&self) -> &droidwarden_agent::Agent {
        &self.inner.agent
    }

    /// Every notice from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Notice> {
        self.inner.notices.subscribe()
    }

    /// Runs and approvals, as they change.
    pub fn activity(&self) -> watch::Receiver<Activity> {
        self.inner.activity.subscribe()
    }

    /// Apply a reloaded approval policy to runs that start from now on.
    pub fn set_approval_policy(&self, config: &AgentConfig) {
        self.inner
            .agent
            .set_approval_policy(config.approval.clone());
    }

    /// Load the skills again (SIGHUP): files added, changed or removed
    /// take effect for runs that start afterwards.
    pub async fn reload_skills(&self, config: &SkillsConfig, state_dir: &Path) {
        let skills = load_skills(config, state_dir).await;
        tracing::info!(
            skills = skills.enabled().count(),
            problems = skills.problems().len(),
            "skills reloaded"
        );
        self.inner.agent.set_skills(skills);
    }

    /// Apply `[[agents]]` again (SIGHUP): runs that start afterwards see
    /// the new set; runs and tasks already going keep theirs. An agent
    /// whose own provider cannot be built (its key unreadable) keeps the
    /// whole running set, with the reason logged.
    pub async fn reload_agents(
        &self,
        llm: &LlmConfig,
        agents: &[droidwarden_agent::delegation::DelegateConfig],
    ) {
        match delegates(llm, agents).await {
            Ok(set) => {
                tracing::info!(agents = set.agents.len(), "agents reloaded");
                self.inner.agent.set_agents(set);
            }
            Err(e) => tracing::error!(
                error = %e,
                "[[agents]] not reloaded; keeping the running agents"
            ),
        }
    }

    /// The skills runs see now.
    pub fn skills(&self) -> Arc<SkillSet> {
        self.inner.agent.skills()
    }

    /// Run skill `skill` with `input` in `session` (a new session when
    /// `None`): the entry point for `droidwarden skill run`, MQTT
    /// `cmd/skill`, D-Bus `RunSkill` — and for anything in the daemon
    /// that wants a skill run (an automation, say). The run asks for
    /// approval first when the skill's risk is above the threshold, is
    /// durable like an ask, and its events go to the session's stream;
    /// `done` answers with the skill's result. `asked_by` as in
    /// [`Assistant::ask`].
    ///
    /// # Errors
    /// `not_found` (unknown skill), `invalid_params` (input that does not
    /// match the skill's parameters), `invalid_request` (disabled skill,
    /// tools that do not exist), and the errors of [`Assistant::ask`].
    pub async fn run_skill(
        &self,
        skill: &str,
        input: Value,
        session: Option<String>,
        origin: Option<Origin>,
        asked_by: Option<String>,
    ) -> Result<Started, WireError> {
        self.accepting_runs()?;
        let run = self
            .inner
            .agent
            .run_skill(skill, input, session, origin.map(|o| o.tag()), asked_by)
            .await
            .map_err(|e| e.to_wire())?;
        tracing::info!(
            session = run.session_id(),
            run = run.run_id(),
            skill,
            "skill run started"
        );
        Ok(self.launch(run))
    }

    /// Resume every run a previous process left unfinished.
    pub async fn resume_interrupted(&self) {
        let runs = match self.inner.agent.interrupted_runs().await {
            Ok(runs) => runs,
            Err(e) => {
                tracing::error!(error = %e, "cannot list interrupted agent runs");
                return;
            }
        };
        for info in runs {
            match self.inner.agent.resume(&info.run_id).await {
                Ok(run) => {
                    tracing::info!(
                        run = info.run_id,
                        session = info.session_id,
                        "resuming an interrupted agent run"
                    );
                    let origin = info.origin.clone();
                    let notices = self.inner.notices.clone();
                    let (tx, rx) = oneshot::channel();
                    self.drive(run, tx);
                    if let Some(origin) = origin {
                        self.inner.tracker.spawn(async move {
                            if let Ok(result) = rx.await {
                                let _ = notices.send(Notice::ResumedRunFinished { origin, result });
                            }
                        });
                    }
                }
                Err(e) => {
                    tracing::warn!(run = info.run_id, error = %e, "cannot resume an agent run")
                }
            }
        }
    }

    /// Start a run for `prompt` in `session` (a new session when `None`).
    /// The run waits, in order, for one of `[agent] max_concurrent_runs`
    /// slots; `done` answers when it has run. `asked_by` is the account
    /// asking when a way in vouches for one (`MQTT user "ha"`): that
    /// account may deny the run's approval requests but not approve them
    /// ([`Assistant::answer_as`]).
    ///
    /// # Errors
    /// `busy` (retryable) at once when `max_concurrent_runs` runs are going
    /// and `max_queued` more wait; invalid prompt or session id, shutdown
    /// under way, or a store error.
    pub async fn ask(
        &self,
        prompt: &str,
        session: Option<String>,
        origin: Option<Origin>,
        mode: Option<RunMode>,
        asked_by: Option<String>,
    ) -> Result<Started, WireError> {
        self.accepting_runs()?;
        let mut request = AskRequest::new(prompt).asked_by(asked_by);
        request.session_id = session;
        request.origin = origin.map(|o| o.tag());
        request.mode = mode;
        let run = self
            .inner
            .agent
            .ask(request)
            .await
            .map_err(|e| e.to_wire())?;
        tracing::info!(
            session = run.session_id(),
            run = run.run_id(),
            "agent run started"
        );
        Ok(self.launch(run))
    }

    /// Refuse a new run once shutdown is under way (retryable: the next
    /// process takes it).
    fn accepting_runs(&self) -> Result<(), WireError> {
        if self.inner.shutdown.is_cancelled() {
            let mut e = WireError::new(ErrorCode::Internal, "the daemon is shutting down");
            e.retryable = true;
            return Err(e);
        }
        Ok(())
    }

    /// Drive a run just started; `done` of the answer hears its outcome.
    fn launch(&self, run: droidwarden_agent::Run) -> Started {
        let (session, run_id) = (run.session_id().to_owned(), run.run_id().to_owned());
        let (tx, done) = oneshot::channel();
        self.drive(run, tx);
        Started {
            session,
            run: run_id,
            done,
        }
    }

    fn drive(&self, run: droidwarden_agent::Run, tx: oneshot::Sender<Result<Answer, WireError>>) {
        let this = self.clone();
        let token = self.inner.shutdown.child_token();
        self.inner.runs.fetch_add(1, Ordering::Relaxed);
        self.update_activity();
        self.inner.tracker.spawn(async move {
            let (session, run_id) = (run.session_id().to_owned(), run.run_id().to_owned());
            let result = run.drive(token).await;
            this.inner.runs.fetch_sub(1, Ordering::Relaxed);
            this.update_activity();
            let answer = match result {
                Ok(outcome) => answer_of(outcome),
                Err(AgentError::Interrupted { .. }) => {
                    tracing::info!(
                        session,
                        run = run_id,
                        "agent run interrupted by shutdown; it resumes at the next start"
                    );
                    return;
                }
                Err(e) => {
                    tracing::error!(session, run = run_id, error = %e, "agent run failed");
                    Err(e.to_wire())
                }
            };
            let _ = tx.send(answer);
        });
    }

    /// Approve a pending request on behalf of `by`, as the way in that
    /// carried the answer names the person (`droidwarden_agent::Agent::approve`).
    ///
    /// # Errors
    /// `not_found` for an unknown id, `invalid_request` when it was already
    /// answered or has expired.
    pub async fn approve(&self, approval_id: &str, by: &str) -> Result<PendingApproval, WireError> {
        let answer = self.inner.agent.approve(approval_id, by).await;
        answered(approval_id, answer, "granted")
    }

    /// Deny a pending request on behalf of `by`; `reason` reaches the model.
    ///
    /// # Errors
    /// As [`Assistant::approve`].
    pub async fn deny(
        &self,
        approval_id: &str,
        reason: &str,
        by: &str,
    ) -> Result<PendingApproval, WireError> {
        let answer = self.inner.agent.deny(approval_id, reason, by).await;
        answered(approval_id, answer, "denied")
    }

    /// Answer a pending request with any decision (approve once, for the
    /// run, with edited parameters, or deny) on behalf of `by`
    /// (`droidwarden_agent::Agent::answer`).
    ///
    /// # Errors
    /// As [`Assistant::approve`]; `invalid_params` for a grant or edits the
    /// request cannot take (nothing is recorded; it still waits).
    pub async fn answer(
        &self,
        approval_id: &str,
        decision: droidwarden_agent::ApprovalDecision,
        by: &str,
    ) -> Result<PendingApproval, WireError> {
        self.answer_as(approval_id, decision, by, None).await
    }

    /// [`Assistant::answer`] from `account`, the account a way in vouches
    /// for (as given to [`Assistant::ask`] as `asked_by`): it may deny the
    /// requests of a run it asked for, not approve them
    /// (`droidwarden_agent::Agent::answer_as`).
    ///
    /// # Errors
    /// As [`Assistant::answer`]; `permission_denied` for an approval from
    /// the account that asked.
    pub async fn answer_as(
        &self,
        approval_id: &str,
        decision: droidwarden_agent::ApprovalDecision,
        by: &str,
        account: Option<&str>,
    ) -> Result<PendingApproval, WireError> {
        let verdict = decision.name();
        let answer = self
            .inner
            .agent
            .answer_as(approval_id, decision, by, account)
            .await;
        answered(approval_id, answer, verdict)
    }

    /// The grants for a run that still hold, oldest first.
    ///
    /// # Errors
    /// A store error.
    pub async fn grants(&self) -> Result<Vec<droidwarden_agent::Grant>, WireError> {
        self.inner.agent.grants().await.map_err(|e| e.to_wire())
    }

    /// Revoke a grant on behalf of `by`.
    ///
    /// # Errors
    /// `not_found`, or `invalid_request` when it no longer holds.
    pub async fn revoke_grant(
        &self,
        grant_id: &str,
        by: &str,
    ) -> Result<droidwarden_agent::Grant, WireError> {
        let grant = self
            .inner
            .agent
            .revoke_grant(grant_id, by)
            .await
            .map_err(|e| e.to_wire())?;
        tracing::info!(
            grant = grant_id,
            session = grant.session_id,
            "grant revoked"
        );
        Ok(grant)
    }

    /// The `limit` requests answered (or expired) last, the most recent
    /// first, with who answered and when.
    ///
    /// # Errors
    /// A store error.
    pub async fn approval_history(
        &self,
        limit: usize,
    ) -> Result<Vec<droidwarden_agent::ApprovalOutcome>, WireError> {
        self.inner
            .agent
            .approval_history(limit)
            .await
            .map_err(|e| e.to_wire())
    }

    /// Requests waiting for an answer, oldest first.
    ///
    /// # Errors
    /// A store error.
    pub async fn pending_approvals(&self) -> Result<Vec<PendingApproval>, WireError> {
        self.inner
            .agent
            .pending_approvals()
            .await
            .map_err(|e| e.to_wire())
    }

    /// Every session, most recent first.
    ///
    /// # Errors
    /// A store error.
    pub async fn sessions(&self) -> Result<Vec<SessionSummary>, WireError> {
        self.inner.agent.sessions().await.map_err(|e| e.to_wire())
    }

    /// A session as markdown.
    ///
    /// # Errors
    /// `not_found` for an unknown session, `invalid_params` for a bad id.
    pub async fn session_markdown(&self, id: &str) -> Result<String, WireError> {
        self.inner
            .agent
            .session_markdown(id)
            .await
            .map_err(|e| e.to_wire())
    }

    fn update_activity(&self) {
        let runs = self.inner.runs.load(Ordering::Relaxed);
        let approvals = self.open().len();
        self.inner.activity.send_if_modified(|a| {
            let new = Activity { runs, approvals };
            let changed = *a != new;
            *a = new;
            changed
        });
    }

    fn open(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), String>> {
        self.inner.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Pass the agent's events on as notices, noting which approval
    /// requests open and close.
    async fn forward(self, mut events: broadcast::Receiver<AgentEvent>) {
        loop {
            let event = tokio::select! {
                () = self.inner.shutdown.cancelled() => return,
                event = events.recv() => event,
            };
            let event = match event {
                Ok(event) => event,
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    tracing::warn!(missed = n, "agent events missed by the daemon");
                    continue;
                }
                Err(broadcast::error::RecvError::Closed) => return,
            };
            let closed = match &event.kind {
                EventKind::ApprovalRequested { approval } => {
                    self.open().insert(
                        (approval.run_id.clone(), approval.call_id.clone()),
                        approval.approval_id.clone(),
                    );
                    self.update_activity();
                    None
                }
                EventKind::ToolResult { call_id, .. } => {
                    let closed = self.open().remove(&(event.run_id.clone(), call_id.clone()));
                    if closed.is_some() {
                        self.update_activity();
                    }
                    closed
                }
                _ => None,
            };
            let _ = self.inner.notices.send(Notice::Event(Arc::new(event)));
            if let Some(approval_id) = closed {
                let _ = self
                    .inner
                    .notices
                    .send(Notice::ApprovalClosed { approval_id });
            }
        }
    }
}

/// The skills as JSON (D-Bus `ListSkills`, `droidwarden skills --json`):
/// every skill's summary and the load problems.
pub fn skills_json(set: &droidwarden_agent::skills::SkillSet) -> Value {
    json!({
        "skills": set.all().map(|s| s.summary_json()).collect::<Vec<_>>(),
        "problems": set.problems(),
    })
}

/// The `[[agents]]` with a provider for each one that has its own model
/// settings (the key read off the async runtime, once).
///
/// # Errors
/// A provider that cannot be built, naming the agent's entry.
pub async fn delegates(
    llm: &LlmConfig,
    agents: &[droidwarden_agent::delegation::DelegateConfig],
) -> Result<droidwarden_agent::delegation::Delegates, AgentError> {
    let mut set = droidwarden_agent::delegation::Delegates::new(agents.to_vec());
    for (i, a) in agents.iter().enumerate() {
        let Some(own) = &a.llm else { continue };
        let cfg = own.apply(llm);
        let built =
            tokio::task::spawn_blocking(move || droidwarden_agent::provider::from_config(&cfg))
                .await
                .map_err(|e| AgentError::Client(format!("provider set-up panicked: {e}")))?
                .map_err(|e| AgentError::Config {
                    key: format!("agents[{i}]"),
                    reason: format!("agent {}'s own model cannot be used: {e}", a.name),
                })?;
        tracing::info!(
            agent = a.name,
            provider = own.apply(llm).provider.as_str(),
            model = own.apply(llm).model,
            "agent has its own model"
        );
        set = set.with_provider(&a.name, built);
    }
    Ok(set)
}

/// The skill directories: `[agent.skills] dirs`, or by default
/// `/etc/droidwarden/skills` then `$STATE/skills` (a later one overrides an
/// earlier one of the same name; both override the built-in skills).
pub fn skill_dirs(config: &SkillsConfig, state_dir: &Path) -> Vec<PathBuf> {
    config.dirs.clone().unwrap_or_else(|| {
        vec![
            PathBuf::from("/etc/droidwarden/skills"),
            state_dir.join("skills"),
        ]
    })
}

/// Load the skills off the async runtime (file I/O), logging every file
/// that was skipped and why.
pub async fn load_skills(config: &SkillsConfig, state_dir: &Path) -> SkillSet {
    let dirs = skill_dirs(config, state_dir);
    let enabled = config.enabled.clone();
    let loaded = tokio::task::spawn_blocking(move || SkillSet::load(&dirs, &enabled)).await;
    match loaded {
        Ok(set) => {
            for p in set.problems() {
                tracing::warn!(file = %p.path.display(), reason = p.reason, "skill skipped");
            }
            set
        }
        Err(e) => {
            tracing::error!(error = %e, "loading the skills failed; only the built-in ones are available");
            SkillSet::builtin()
        }
    }
}

/// An approval the agent answered (`verdict`: granted or denied), logged;
/// or the agent's refusal, as a wire error.
fn answered(
    approval_id: &str,
    answer: Result<PendingApproval, AgentError>,
    verdict: &str,
) -> Result<PendingApproval, WireError> {
    let approval = answer.map_err(|e| e.to_wire())?;
    tracing::info!(
        approval = approval_id,
        session = approval.session,
        "approval {verdict}"
    );
    Ok(approval)
}

fn answer_of(outcome: RunOutcome) -> Result<Answer, WireError> {
    if let Some(error) = outcome.error {
        return Err(error);
    }
    Ok(Answer {
        stop_reason: serde_json::to_value(outcome.stop_reason)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default(),
        session: outcome.session_id,
        run: outcome.run_id,
        text: outcome.text,
        steps: outcome.steps,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_round_trip() {
        let o = Origin::Mqtt("ask-1".into());
        assert_eq!(Origin::parse(&o.tag()), Some(o));
        assert_eq!(Origin::parse("dbus:x"), None);
    }

    #[test]
    fn adb_devices_offer_the_services_the_adb_transport_can_do() {
        let adb = services_of(TransportKind::Adb);
        assert!(adb.contains(&"battery".to_owned()));
        assert!(adb.contains(&"wifi_automation".to_owned()));
        let companion = services_of(TransportKind::Companion);
        assert!(companion.len() >= adb.len());
    }
}
