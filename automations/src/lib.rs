//! droidwarden's automations: the daemon acting on its own, on a schedule
//! or when something happens (docs/automations.md).
//!
//! * [`model`] — what an automation is, and how a definition (the
//!   configuration's `[[automations]]`, `automations add`) is checked into
//!   one, with errors that name the key.
//! * [`engine`] — the pure state machine: triggers, debounce, conditions,
//!   the rate limit, misfires after downtime, the records; driven with an
//!   injected time and unit-tested without I/O.
//! * [`store`] — the records (and the definitions added at run time) in
//!   `<state dir>/automations.json`.
//! * This file — the thin driver: one task owns the engine, reads the
//!   hub's states and phone events and the devices' availability
//!   ([`Inputs`]), wakes at the
//!   engine's next due time, saves the records before it performs a run,
//!   and performs runs on the daemon's tasks: a catalogue call through
//!   [`Hub::call`] (validation, order, status events like any caller's)
//!   under the automation's approval policy, an agent prompt in the
//!   session `automation-<name>`, or a notification. Each outcome goes out
//!   as a [`RunEvent`] to the daemon's event centre: MQTT publishes it on
//!   `<prefix>/automations/<name>/runs` (retained) and on the automation's
//!   `notify` topic.
//!
//! [`Automations`] is the handle the management paths share (D-Bus
//! `Automation`, MQTT `cmd/automation`, and so the CLI): one JSON request,
//! one JSON answer ([`Automations::request`]).
//!
//! A risky call (above the automation's `auto_approve_up_to`, which is
//! never above the agent's) waits, as the run's `waiting_approval`
//! outcome, for `droidwarden automations approve NAME` (or `deny`), at
//! most the agent's approval timeout; the deny list of `[agent.approval]`
//! applies too. Such a wait is kept in memory only: a restart records the
//! run as interrupted, and does not run it.
//!
//! Architecture invariant: knows no protocol (the management requests are
//! typed in [`api`]; MQTT and D-Bus carry them); every call goes through
//! the core's hub, every prompt through its assistant.

pub mod api;
pub mod engine;
pub mod model;
pub mod store;

use api::{AutomationSummary, LastRun};
use droidwarden_agent::policy::Verdict;
use droidwarden_agent::{ApprovalPolicy, PendingApproval};
use droidwarden_bridge::DeviceEvent;
use droidwarden_core::assistant::Assistant;
use droidwarden_core::hub::{BusEvent, Call, Hub};
use droidwarden_services::{ErrorCode, WireError};
use engine::{Engine, Input, Outcome, Output, Status};
use jiff::Timestamp;
use model::{Action, Automation, Context};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Requests waiting for the driver. Management is occasional (people and
/// Home Assistant); 64 absorbs a burst, beyond it a request waits.
const REQUESTS: usize = 64;
/// How long a management request waits for the driver.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Outcome events waiting for a slow consumer.
const EVENTS: usize = 1024;
/// The longest sleep between looks at the clock, so that a wall-clock
/// jump (suspend, NTP) is noticed within it.
const MAX_SLEEP: Duration = Duration::from_secs(30);
/// The longest an agent prompt's run is waited for.
const PROMPT_TIMEOUT: Duration = Duration::from_secs(3600);

/// What the automations announce on the event centre.
#[derive(Debug, Clone)]
pub enum AutomationEvent {
    /// A run's outcome.
    Run(RunEvent),
    /// Every automation and whether it is enabled: at start and after
    /// each enable, disable, add or remove (Home Assistant's switches and
    /// buttons follow it).
    Listed(Arc<Vec<Listing>>),
    /// A run's call waits for a person: listed, published and counted
    /// like the agent's approval requests (`automation:<name>`).
    ApprovalRequested(Arc<PendingApproval>),
    /// The request was answered, expired, or its automation removed.
    ApprovalClosed {
        /// `automation:<name>`.
        approval_id: String,
    },
}

/// One automation, for Home Assistant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing {
    pub name: String,
    pub enabled: bool,
}

/// A run's outcome, for MQTT and D-Bus.
#[derive(Debug, Clone)]
pub struct RunEvent {
    pub name: String,
    pub outcome: Outcome,
    /// The automation's `notify` topic.
    pub notify: Option<String>,
}

impl RunEvent {
    /// The payload of `automations/<name>/runs` and of the notify topic.
    pub fn to_json(&self) -> Value {
        let mut v = json!(self.outcome);
        v["automation"] = json!(self.name);
        v["at"] = json!(rfc3339(self.outcome.at_ms));
        if let Some(done) = self.outcome.finished_ms {
            v["finished_at"] = json!(rfc3339(done));
        }
        v
    }

    /// Whether the run is over (a notification is sent then).
    pub fn is_final(&self) -> bool {
        !matches!(
            self.outcome.status,
            Status::Running | Status::WaitingApproval
        )
    }
}

/// As every timestamp the daemon publishes
/// (`droidwarden_services::time::rfc3339_millis`).
fn rfc3339(ms: i64) -> String {
    droidwarden_services::time::rfc3339_millis(u64::try_from(ms).unwrap_or(0))
}

/// A management request.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    List,
    Show(String),
    Run(String),
    Enable(String),
    Disable(String),
    /// Approve (or deny) the call the automation waits with, on behalf of
    /// `by` (who asked, as the way in names them: `D-Bus uid 1000 (:1.42)`,
    /// `MQTT`). `account`, the account the way in vouches for, may not
    /// approve the call of an automation it added (`permission_denied`).
    Answer {
        name: String,
        approve: bool,
        by: String,
        account: Option<String>,
    },
    /// Add a definition; `over_mqtt` when an MQTT client sent it (its
    /// `notify` is then held to what such a client may publish), and
    /// `account` the account the way in vouches for (recorded: it may not
    /// approve the automation's calls).
    Add {
        definition: Value,
        over_mqtt: bool,
        account: Option<String>,
    },
    Remove(String),
    /// The calls waiting for approval, as [`PendingApproval`]s (oldest
    /// first).
    Pending,
    /// A message on an MQTT trigger topic (from the MQTT side only).
    Mqtt(String),
}

impl Op {
    /// Parse `{"op": "...", "name": "...", "definition": {...}}` from `by`
    /// (who sent it, recorded with an approval's answer).
    ///
    /// # Errors
    /// `invalid_request` naming what is wrong.
    pub fn parse(body: &Value, by: &str) -> Result<Self, WireError> {
        let bad = |m: String| WireError::new(ErrorCode::InvalidRequest, m);
        let op = body.get("op").and_then(Value::as_str).ok_or_else(|| {
            bad("op: missing (list, show, run, enable, disable, approve, deny, add, remove)".into())
        })?;
        let name = || {
            body.get("name")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| bad(format!("name: missing (op {op} needs it)")))
        };
        Ok(match op {
            "list" => Self::List,
            "show" => Self::Show(name()?),
            "run" => Self::Run(name()?),
            "enable" => Self::Enable(name()?),
            "disable" => Self::Disable(name()?),
            "approve" | "deny" => Self::Answer {
                name: name()?,
                approve: op == "approve",
                by: by.to_owned(),
                account: None,
            },
            "remove" => Self::Remove(name()?),
            "add" => Self::Add {
                definition: body
                    .get("definition")
                    .cloned()
                    .ok_or_else(|| bad("definition: missing (op add needs it)".into()))?,
                over_mqtt: false,
                account: None,
            },
            other => {
                return Err(bad(format!(
                    "op: {other:?} is not one of list, show, run, enable, disable, approve, deny, add, remove"
                )));
            }
        })
    }
}

type Reply = oneshot::Sender<Result<Value, WireError>>;

/// The handle: management requests and the outcome events. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Automations {
    requests: mpsc::Sender<(Op, Reply)>,
    events: broadcast::Sender<AutomationEvent>,
    /// The configured MQTT trigger topics (subscribed by the MQTT side).
    topics: Arc<BTreeSet<String>>,
}

/// What [`Automations::new`] keeps for [`Automations::start`].
#[derive(Debug)]
pub struct Pending {
    requests: mpsc::Receiver<(Op, Reply)>,
}

impl Automations {
    /// The handle, before the driver runs (requests wait for it), with
    /// the configured automations' MQTT trigger topics.
    pub fn new(topics: BTreeSet<String>) -> (Self, Pending) {
        let (requests, rx) = mpsc::channel(REQUESTS);
        let (events, _) = broadcast::channel(EVENTS);
        let topics = Arc::new(topics);
        (
            Self {
                requests,
                events,
                topics,
            },
            Pending { requests: rx },
        )
    }

    /// The topics MQTT triggers listen on.
    pub fn mqtt_topics(&self) -> &BTreeSet<String> {
        &self.topics
    }

    /// A message arrived on an automation's trigger topic. Never waits: a
    /// trigger storm beyond the request queue is dropped (and logged).
    pub fn mqtt_trigger(&self, topic: String) {
        let (tx, _) = oneshot::channel();
        if self.requests.try_send((Op::Mqtt(topic), tx)).is_err() {
            tracing::warn!("automations are busy: an MQTT trigger was dropped");
        }
    }

    /// The calls waiting for a person's approval, oldest first.
    ///
    /// # Errors
    /// `internal` when the driver is gone or does not answer in time.
    pub async fn pending_approvals(&self) -> Result<Vec<PendingApproval>, WireError> {
        let listed = self.request(Op::Pending).await?;
        serde_json::from_value(listed).map_err(|e| {
            WireError::new(
                ErrorCode::Internal,
                format!("the automations' approval list: {e}"),
            )
        })
    }

    /// Outcome events from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<AutomationEvent> {
        self.events.subscribe()
    }

    /// Perform a management request.
    ///
    /// # Errors
    /// The request's error (`not_found`, `invalid_request` …), or
    /// `internal` when the driver is gone or does not answer in time.
    pub async fn request(&self, op: Op) -> Result<Value, WireError> {
        let gone = || {
            let mut e = WireError::new(ErrorCode::Internal, "automations are not running");
            e.retryable = true;
            e
        };
        let (tx, rx) = oneshot::channel();
        tokio::time::timeout(REQUEST_TIMEOUT, async {
            self.requests.send((op, tx)).await.map_err(|_| gone())?;
            rx.await.map_err(|_| gone())?
        })
        .await
        .map_err(|_| gone())?
    }
}

/// What the driver needs.
#[derive(Debug)]
pub struct Deps {
    pub automations: Vec<Automation>,
    pub context: Context,
    pub hub: Hub,
    pub assistant: Option<Assistant>,
    /// `[agent.approval]`: its deny list and timeout apply.
    pub approval: ApprovalPolicy,
    pub events: Inputs,
}

/// What the automations react to: the hub's states and phone events and
/// the devices' availability, subscribed when made (make it early, so no
/// state is missed before the driver starts).
#[derive(Debug)]
pub struct Inputs {
    bus: broadcast::Receiver<BusEvent>,
    devices: broadcast::Receiver<DeviceEvent>,
}

/// One input.
#[derive(Debug)]
enum Event {
    Bus(BusEvent),
    Device(DeviceEvent),
}

impl Inputs {
    /// Subscribe to `hub`'s bus and its registry's device events.
    pub fn new(hub: &Hub) -> Self {
        Self {
            bus: hub.subscribe(),
            devices: hub.registry().subscribe(),
        }
    }

    /// The next input; `None` once the hub or the registry is gone. A
    /// missed stretch (this consumer fell behind) is logged and skipped:
    /// the next state read brings the automations up to date.
    async fn next(&mut self) -> Option<Event> {
        loop {
            let missed = tokio::select! {
                event = self.bus.recv() => match event {
                    Ok(event) => return Some(Event::Bus(event)),
                    Err(RecvError::Closed) => return None,
                    Err(RecvError::Lagged(n)) => n,
                },
                event = self.devices.recv() => match event {
                    Ok(event) => return Some(Event::Device(event)),
                    Err(RecvError::Closed) => return None,
                    Err(RecvError::Lagged(n)) => n,
                },
            };
            tracing::warn!(missed, "the automations fell behind the hub's events");
        }
    }
}

/// Load the records and start the driver.
///
/// # Errors
/// The store cannot be read.
pub async fn start(
    handle: &Automations,
    pending: Pending,
    deps: Deps,
    state_dir: &Path,
    tracker: &TaskTracker,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let store = store::Store::new(state_dir);
    let document = store.load().await?;
    let mut automations = deps.automations;
    let mut added = BTreeMap::new();
    let mut added_by = document.added_by;
    for (name, definition) in document.added {
        if automations.iter().any(|a| a.name == name) {
            tracing::warn!(
                automation = name,
                "an automation added at run time is now in the configuration; the configuration's is used"
            );
            continue;
        }
        match model::parse(
            &format!("added automation {name}"),
            &definition,
            &deps.context,
        ) {
            Ok(a) => {
                automations.push(a);
                added.insert(name, definition);
            }
            Err(e) => {
                tracing::error!(automation = name, error = %e, "an automation added at run time is no longer valid; it is not loaded")
            }
        }
    }
    added_by.retain(|name, _| added.contains_key(name));
    let count = automations.len();
    let (mut engine, first) = Engine::new(automations, document.records, Timestamp::now());
    for info in deps.hub.registry().list() {
        engine.seed_online(info.name.as_str(), info.online);
    }
    let (done_tx, done_rx) = mpsc::channel(REQUESTS);
    let mut driver = Driver {
        engine,
        added,
        added_by,
        store,
        context: deps.context,
        hub: deps.hub,
        assistant: deps.assistant,
        approval: deps.approval,
        announce: handle.events.clone(),
        waiting: HashMap::new(),
        done: done_tx,
        tracker: tracker.clone(),
        shutdown: shutdown.clone(),
    };
    tracing::info!(automations = count, file = %driver.store.path().display(), "automations ready");
    driver.perform(first, true).await;
    driver.announce_list();
    tracker.spawn(driver.run(deps.events, pending.requests, done_rx, shutdown));
    Ok(())
}

/// A run's end, from its task.
#[derive(Debug)]
enum Done {
    Finished {
        name: String,
        run: u64,
        status: Status,
        detail: Value,
    },
    /// An approval's time ran out.
    Expired { name: String, run: u64 },
}

impl Done {
    /// How run `run` of automation `name` ended, given its status and
    /// detail.
    fn finisher(name: String, run: u64) -> impl Fn(Status, Value) -> Done + Send + 'static {
        move |status, detail| Done::Finished {
            name: name.clone(),
            run,
            status,
            detail,
        }
    }
}

/// A call waiting for a person.
#[derive(Debug)]
struct Waiting {
    run: u64,
    call: Call,
    /// The request as every approval list shows it.
    request: Arc<PendingApproval>,
}

/// The approval id of the call automation `name` waits with.
pub fn approval_id(name: &str) -> String {
    format!("{APPROVAL_PREFIX}{name}")
}

/// What the approval ids of automations start with.
pub const APPROVAL_PREFIX: &str = "automation:";

#[derive(Debug)]
struct Driver {
    engine: Engine,
    added: BTreeMap<String, Value>,
    /// The accounts that added them, where one was vouched for.
    added_by: BTreeMap<String, String>,
    store: store::Store,
    context: Context,
    hub: Hub,
    assistant: Option<Assistant>,
    approval: ApprovalPolicy,
    announce: broadcast::Sender<AutomationEvent>,
    /// Calls waiting for approval, by automation.
    waiting: HashMap<String, Waiting>,
    done: mpsc::Sender<Done>,
    tracker: TaskTracker,
    shutdown: CancellationToken,
}

impl Driver {
    async fn run(
        mut self,
        mut events: Inputs,
        mut requests: mpsc::Receiver<(Op, Reply)>,
        mut done: mpsc::Receiver<Done>,
        shutdown: CancellationToken,
    ) {
        let mut events_open = true;
        loop {
            let sleep = match self.engine.next_wake() {
                Some(t) => {
                    let ms = t.as_millisecond() - Timestamp::now().as_millisecond();
                    Duration::from_millis(ms.max(0) as u64).min(MAX_SLEEP)
                }
                None => MAX_SLEEP,
            };
            tokio::select! {
                () = shutdown.cancelled() => break,
                () = tokio::time::sleep(sleep) => self.step(Input::Tick).await,
                event = events.next(), if events_open => match event {
                    Some(event) => self.on_event(&event).await,
                    None => events_open = false,
                },
                Some((op, reply)) = requests.recv() => {
                    let answer = self.manage(op).await;
                    let _ = reply.send(answer);
                }
                Some(d) = done.recv() => self.on_done(d).await,
            }
        }
        if let Err(e) = self.save().await {
            tracing::warn!(error = %e, "cannot save the automations' records at shutdown");
        }
    }

    async fn on_event(&mut self, event: &Event) {
        let input = match event {
            Event::Device(DeviceEvent::Availability { device, online, .. }) => {
                Input::Availability {
                    device: device.as_str(),
                    online: *online,
                }
            }
            Event::Bus(BusEvent::State(s)) => Input::State {
                device: s.device.as_str(),
                service: s.service,
                state: &s.state,
            },
            Event::Bus(BusEvent::PhoneEvent { device, kind, .. }) => Input::PhoneEvent {
                device: device.as_str(),
                kind,
            },
            _ => return,
        };
        self.step(input).await;
    }

    /// A step whose input names no automation (cannot fail).
    async fn step(&mut self, input: Input<'_>) {
        match self.engine.step(Timestamp::now(), input) {
            Ok(out) => self.perform(out, false).await,
            Err(e) => tracing::warn!(error = %e, "automation step"),
        }
    }

    async fn save(&mut self) -> std::io::Result<()> {
        let document = store::Document {
            records: self.engine.records(),
            added: self.added.clone(),
            added_by: self.added_by.clone(),
        };
        self.store.save(&document).await
    }

    /// Save (when anything changed), then announce and run.
    async fn perform(&mut self, out: Vec<Output>, force_save: bool) {
        if (self.engine.take_dirty() || force_save || !out.is_empty())
            && let Err(e) = self.save().await
        {
            // Running without a record risks a repeat after a restart;
            // not running risks a lost run. A full disk is loud either way.
            tracing::error!(error = %e, file = %self.store.path().display(), "cannot save the automations' records");
        }
        for o in out {
            match o {
                Output::Announce { name, outcome } => self.announce(name, outcome),
                Output::Run { name, run, trigger } => self.start_run(name, run, trigger),
            }
        }
    }

    fn announce(&self, name: String, outcome: Outcome) {
        let notify = self
            .engine
            .get(&name)
            .and_then(|(a, _, _)| a.notify.clone());
        match outcome.status {
            Status::Error | Status::Denied | Status::Interrupted => {
                tracing::warn!(automation = name, run = outcome.run, status = ?outcome.status, detail = %outcome.detail, "automation run")
            }
            _ => {
                tracing::info!(automation = name, run = outcome.run, status = ?outcome.status, trigger = outcome.trigger, "automation run")
            }
        }
        let _ = self.announce.send(AutomationEvent::Run(RunEvent {
            name,
            outcome,
            notify,
        }));
    }

    /// Keep `name`'s call until a person answers, and say so.
    fn hold(&mut self, name: String, waiting: Waiting) {
        let request = Arc::clone(&waiting.request);
        if let Some(old) = self.waiting.insert(name, waiting) {
            let _ = self.announce.send(AutomationEvent::ApprovalClosed {
                approval_id: old.request.approval_id.clone(),
            });
        }
        let _ = self
            .announce
            .send(AutomationEvent::ApprovalRequested(request));
    }

    /// Take `name`'s waiting call (answered, expired or removed), and say
    /// that its request is closed.
    fn release(&mut self, name: &str) -> Option<Waiting> {
        let waiting = self.waiting.remove(name)?;
        let _ = self.announce.send(AutomationEvent::ApprovalClosed {
            approval_id: waiting.request.approval_id.clone(),
        });
        Some(waiting)
    }

    /// Announce every automation and whether it is enabled.
    fn announce_list(&self) {
        let listed = self
            .engine
            .automations()
            .map(|(a, _, enabled)| Listing {
                name: a.name.clone(),
                enabled,
            })
            .collect();
        let _ = self
            .announce
            .send(AutomationEvent::Listed(Arc::new(listed)));
    }

    fn start_run(&mut self, name: String, run: u64, trigger: String) {
        let Some((automation, _, _)) = self.engine.get(&name) else {
            return;
        };
        let done = self.done.clone();
        let finish = Done::finisher(name, run);
        match automation.action.clone() {
            Action::Call(call) => {
                let mut policy = self.approval.clone();
                policy.auto_approve_up_to = automation.auto_approve_up_to;
                let spec = call.command.spec();
                let (service, action) = (call.command.service_id(), spec.name);
                match policy.decide(service, action, spec.risk) {
                    Verdict::Allow => {
                        let cleared = automation.auto_approve_up_to.max(spec.risk);
                        self.call(finish, call, cleared);
                    }
                    Verdict::Deny(why) => {
                        let _ = done.try_send(finish(Status::Denied, json!({"denied": why})));
                    }
                    Verdict::Ask => {
                        let automation_name = automation.name.clone();
                        let now_ms = u64::try_from(Timestamp::now().as_millisecond()).unwrap_or(0);
                        let timeout_ms =
                            u64::try_from(policy.timeout.as_millis()).unwrap_or(u64::MAX);
                        let request = Arc::new(PendingApproval {
                            approval_id: approval_id(&automation_name),
                            run_id: format!("automation-{automation_name}-{run}"),
                            session: format!("automation-{automation_name}"),
                            call_id: format!("run-{run}"),
                            device: call.device.clone(),
                            service: service.to_owned(),
                            action: action.to_owned(),
                            params: call.command.params_json(),
                            risk: spec.risk,
                            app: None,
                            asked_by: self.added_by.get(&automation_name).cloned(),
                            requested_at: now_ms,
                            expires_at: now_ms.saturating_add(timeout_ms),
                        });
                        let detail = json!({
                            "approval_id": approval_id(&automation_name),
                            "approval": format!("{service}.{action} is {} risk, above this automation's auto_approve_up_to ({}): approve with `droidwarden automations approve {automation_name}` (or MQTT cmd/approve with approval_id \"automation:{automation_name}\") or deny it", spec.risk.as_str(), automation.auto_approve_up_to.as_str()),
                            "service": service,
                            "action": action,
                            "risk": spec.risk,
                            "params": call.command.params_json(),
                            "expires_in_s": policy.timeout.as_secs(),
                        });
                        let _ = done.try_send(finish(Status::WaitingApproval, detail));
                        self.hold(automation_name.clone(), Waiting { run, call, request });
                        let (timeout, shutdown, done) =
                            (policy.timeout, self.shutdown.clone(), self.done.clone());
                        self.tracker.spawn(async move {
                            tokio::select! {
                                () = shutdown.cancelled() => {}
                                () = tokio::time::sleep(timeout) => {
                                    let _ = done.send(Done::Expired { name: automation_name, run }).await;
                                }
                            }
                        });
                    }
                }
            }
            Action::Prompt { prompt } => {
                let prompt =
                    format!("{prompt}\n\n(Automation run {run}, triggered by: {trigger}.)");
                self.agent_run(finish, &automation.name, move |assistant, session| {
                    Box::pin(async move {
                        assistant
                            .ask(&prompt, Some(session), None, None, None)
                            .await
                    })
                });
            }
            Action::Skill { skill, input } => {
                let (skill, input) = (skill.clone(), input.clone());
                self.agent_run(finish, &automation.name, move |assistant, session| {
                    Box::pin(async move {
                        assistant
                            .run_skill(&skill, input, Some(session), None, None)
                            .await
                    })
                });
            }
            Action::Notify { message } => {
                let _ = done.try_send(finish(Status::Success, json!({"message": message})));
            }
        }
    }

    /// Start an agent run (a prompt or a skill) in the automation's own
    /// session, wait for its answer (bounded, given up at shutdown: the
    /// agent resumes it at the next start) and report its end.
    fn agent_run(
        &self,
        finish: impl FnOnce(Status, Value) -> Done + Send + 'static,
        automation: &str,
        start: impl FnOnce(
            Assistant,
            String,
        ) -> std::pin::Pin<
            Box<
                dyn std::future::Future<
                        Output = Result<droidwarden_core::assistant::Started, WireError>,
                    > + Send,
            >,
        > + Send
        + 'static,
    ) {
        let session = format!("automation-{automation}");
        let (assistant, shutdown, done) = (
            self.assistant.clone(),
            self.shutdown.clone(),
            self.done.clone(),
        );
        self.tracker.spawn(async move {
            let Some(assistant) = assistant else {
                let _ = done
                    .send(finish(Status::Error, json!({"error": droidwarden_core::assistant::disabled()})))
                    .await;
                return;
            };
            let result = match start(assistant, session).await {
                Err(e) => finish(Status::Error, json!({"error": e})),
                Ok(started) => {
                    tokio::select! {
                        () = shutdown.cancelled() => return,
                        answer = tokio::time::timeout(PROMPT_TIMEOUT, started.done) => match answer {
                            Ok(Ok(Ok(answer))) => finish(Status::Success, answer.to_json()),
                            Ok(Ok(Err(e))) => finish(Status::Error, json!({"error": e, "session": started.session, "run": started.run})),
                            Ok(Err(_)) => return,
                            Err(_) => finish(Status::Error, json!({"error": "the agent's run did not finish within an hour", "session": started.session, "run": started.run})),
                        },
                    }
                }
            };
            let _ = done.send(result).await;
        });
    }

    /// Perform a call through the hub and report its end.
    /// Run `call`, cleared up to `cleared` (what the automation's
    /// threshold or a person's approval covers): a screen action the app
    /// in front makes riskier ends the run with `approval_required`.
    fn call(
        &self,
        finish: impl FnOnce(Status, Value) -> Done + Send + 'static,
        call: Call,
        cleared: droidwarden_services::Risk,
    ) {
        let (hub, done) = (self.hub.clone(), self.done.clone());
        self.tracker.spawn(async move {
            let d = match hub.call_cleared(call, cleared).await {
                Ok(result) => finish(Status::Success, json!({"result": result})),
                Err(e) => finish(Status::Error, json!({"error": e})),
            };
            let _ = done.send(d).await;
        });
    }

    async fn on_done(&mut self, done: Done) {
        let (name, run, status, detail) = match done {
            Done::Finished {
                name,
                run,
                status,
                detail,
            } => (name, run, status, detail),
            Done::Expired { name, run } => {
                if self.waiting.get(&name).is_none_or(|w| w.run != run) {
                    return;
                }
                self.release(&name);
                (
                    name,
                    run,
                    Status::Denied,
                    json!({"denied": "nobody approved it in time"}),
                )
            }
        };
        let input = Input::Finished {
            name: &name,
            run,
            status,
            detail,
        };
        match self.engine.step(Timestamp::now(), input) {
            Ok(out) => self.perform(out, false).await,
            Err(e) => tracing::debug!(error = %e, "a run ended for an automation that is gone"),
        }
    }

    async fn manage(&mut self, op: Op) -> Result<Value, WireError> {
        let not_found = |name: &str| {
            WireError::new(
                ErrorCode::NotFound,
                format!("no automation is named {name:?} (see `droidwarden automations list`)"),
            )
        };
        let now = Timestamp::now();
        match op {
            Op::List => Ok(Value::Array(
                self.engine
                    .automations()
                    .map(|(a, r, enabled)| summary(a, r, enabled, self.added.contains_key(&a.name)))
                    .collect(),
            )),
            Op::Show(name) => {
                let (a, r, enabled) = self.engine.get(&name).ok_or_else(|| not_found(&name))?;
                let mut v = summary(a, r, enabled, self.added.contains_key(&name));
                v["definition"] = a.source.clone();
                v["record"] = json!(r);
                v["waiting_approval"] = json!(self.waiting.contains_key(&name));
                Ok(v)
            }
            Op::Run(name) => {
                let out = self
                    .engine
                    .step(now, Input::RunNow { name: &name })
                    .map_err(|_| not_found(&name))?;
                let outcome = out.iter().find_map(|o| match o {
                    Output::Announce { outcome, .. } => Some(json!(outcome)),
                    _ => None,
                });
                self.perform(out, false).await;
                Ok(outcome.unwrap_or(Value::Null))
            }
            op @ (Op::Enable(_) | Op::Disable(_)) => {
                let (Op::Enable(name) | Op::Disable(name)) = &op else {
                    return Ok(Value::Null);
                };
                let (name, enabled) = (name.clone(), matches!(op, Op::Enable(_)));
                let out = self
                    .engine
                    .step(
                        now,
                        Input::SetEnabled {
                            name: &name,
                            enabled,
                        },
                    )
                    .map_err(|_| not_found(&name))?;
                self.perform(out, true).await;
                self.announce_list();
                let (a, r, enabled) = self.engine.get(&name).ok_or_else(|| not_found(&name))?;
                Ok(summary(a, r, enabled, self.added.contains_key(&name)))
            }
            Op::Answer {
                name,
                approve,
                by,
                account,
            } => {
                self.engine.get(&name).ok_or_else(|| not_found(&name))?;
                if approve
                    && let Some(account) = account
                    && let Some(waiting) = self.waiting.get(&name)
                    && waiting.request.asked_by.as_deref() == Some(account.as_str())
                {
                    return Err(WireError::new(
                        ErrorCode::PermissionDenied,
                        format!(
                            "{account} added automation {name}, so it cannot approve its call: the approval must come from someone else (a person on the CLI or D-Bus, or another account)"
                        ),
                    ));
                }
                let Some(waiting) = self.release(&name) else {
                    return Err(WireError::new(
                        ErrorCode::InvalidRequest,
                        format!(
                            "nothing of {name} waits for approval (it was answered, expired, or the daemon restarted)"
                        ),
                    ));
                };
                let run = waiting.run;
                tracing::info!(automation = %name, run, approve, by = %by, "automation approval answered");
                let (status, detail) = if approve {
                    (Status::Running, json!({"approved": true, "by": by}))
                } else {
                    (
                        Status::Denied,
                        json!({"denied": "denied by a person", "by": by}),
                    )
                };
                let out = self
                    .engine
                    .step(
                        now,
                        Input::Finished {
                            name: &name,
                            run,
                            status,
                            detail,
                        },
                    )
                    .map_err(|_| not_found(&name))?;
                self.perform(out, false).await;
                if approve {
                    self.call(
                        Done::finisher(name, run),
                        waiting.call,
                        waiting.request.risk,
                    );
                }
                Ok(json!({"run": run, "approved": approve, "by": by}))
            }
            Op::Add {
                definition,
                over_mqtt,
                account,
            } => {
                let automation = model::parse("definition", &definition, &self.context)
                    .map_err(|e| WireError::new(ErrorCode::InvalidParams, e))?;
                if over_mqtt && let Some(topic) = &automation.notify {
                    self.context
                        .check_added_notify(topic)
                        .map_err(|e| WireError::new(ErrorCode::InvalidParams, e))?;
                }
                let name = automation.name.clone();
                if matches!(automation.trigger, model::Trigger::Mqtt { .. }) {
                    return Err(WireError::new(
                        ErrorCode::InvalidParams,
                        "definition.trigger: an MQTT trigger is subscribed at start: put it in the configuration's [[automations]]",
                    ));
                }
                if self.engine.get(&name).is_some() {
                    return Err(WireError::new(
                        ErrorCode::InvalidRequest,
                        format!("an automation named {name:?} exists already"),
                    ));
                }
                let out = self.engine.add(automation, now);
                self.added.insert(name.clone(), definition);
                if let Some(account) = account {
                    self.added_by.insert(name.clone(), account);
                }
                self.perform(out, true).await;
                self.announce_list();
                let (a, r, enabled) = self.engine.get(&name).ok_or_else(|| not_found(&name))?;
                Ok(summary(a, r, enabled, true))
            }
            Op::Mqtt(topic) => {
                self.step(Input::Mqtt { topic: &topic }).await;
                Ok(Value::Null)
            }
            Op::Pending => {
                let mut pending: Vec<&PendingApproval> =
                    self.waiting.values().map(|w| &*w.request).collect();
                pending.sort_by_key(|p| (p.requested_at, p.approval_id.as_str()));
                Ok(json!(pending))
            }
            Op::Remove(name) => {
                self.engine.get(&name).ok_or_else(|| not_found(&name))?;
                if !self.added.contains_key(&name) {
                    return Err(WireError::new(
                        ErrorCode::InvalidRequest,
                        format!(
                            "{name} is defined in the configuration: remove it there (or disable it)"
                        ),
                    ));
                }
                self.engine.remove(&name);
                self.added.remove(&name);
                self.added_by.remove(&name);
                self.release(&name);
                self.perform(Vec::new(), true).await;
                self.announce_list();
                Ok(json!({"removed": name}))
            }
        }
    }
}

/// One line of `automations list` (the D-Bus `Automation` answer's
/// [`AutomationSummary`]), as JSON.
fn summary(a: &Automation, r: &engine::Record, enabled: bool, added: bool) -> Value {
    json!(AutomationSummary {
        name: a.name.clone(),
        description: a.description.clone(),
        enabled,
        trigger: a.trigger.describe(),
        time_zone: a.time_zone_name.as_deref().unwrap_or("system").to_owned(),
        action: a.action.kind().to_owned(),
        source: if added { "added" } else { "config" }.to_owned(),
        runs: r.runs,
        missed: r.missed,
        skipped: r.skipped,
        next_due: r.next_due_ms.filter(|_| enabled).map(rfc3339),
        last: r.last.as_ref().map(|o| LastRun {
            outcome: o.clone(),
            at: rfc3339(o.at_ms),
        }),
    })
}
