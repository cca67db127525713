//! The automations' state machine: events and the time in, runs and
//! records out. No I/O, no clock, no awaiting: the driver
//! ([`super::run`]) feeds it what happened with the time it happened at
//! ([`Engine::step`]), performs the runs it asks for, and reports how they
//! ended ([`Input::Finished`]); it wakes it at [`Engine::next_wake`].
//!
//! What it decides:
//! * when a cron or interval automation is due (in the automation's time
//!   zone; DST gaps and folds are croner's and jiff's: a time that does not
//!   exist runs at the first instant after the gap, a time that exists twice
//!   runs once);
//! * whether a device event triggers (a threshold fires once per crossing
//!   and re-arms past its hysteresis, a change fires on a different value,
//!   a "becomes" on entering the value);
//! * debouncing: with `debounce_s`, a trigger waits for that much quiet
//!   and fires only if it still holds, so a flapping phone runs it once;
//! * conditions, the rate limit and the misfire policy after downtime
//!   (missed runs are counted and recorded);
//! * what is kept across restarts ([`Record`]): enabled, counts, the next
//!   due time, the threshold's side, the last outcome. A due run's next time
//!   is advanced before the run is handed out, and the driver saves the
//!   records before it performs it, so a restart neither loses nor repeats
//!   it.

use super::model::{Automation, Condition, Misfire, StateWhen, Trigger};
use jiff::{Timestamp, ToSpan, Zoned};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

/// A run later than this after its due time counts as missed (the daemon
/// was down or suspended), not as a slow tick.
pub const MISFIRE_GRACE: Duration = Duration::from_secs(60);
/// At most this many missed runs are counted per automation (a cron that
/// fires every minute over a month of downtime is not walked to the end).
const MAX_MISSED_COUNTED: u64 = 10_000;
/// The rate limit's window.
const HOUR_MS: i64 = 3_600_000;

/// How a run ended (or why it did not start).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Started, not finished.
    Running,
    /// The action succeeded.
    Success,
    /// The action failed.
    Error,
    /// A condition did not hold, or the rate limit was reached.
    Skipped,
    /// Due while the daemon was down (and not run: `misfire = "skip"`, or
    /// the runs beyond the one `run_once` makes).
    Missed,
    /// A risky call waits for `droidwarden automations approve NAME`.
    WaitingApproval,
    /// The approval was refused or expired, or a deny list forbids it.
    Denied,
    /// The daemon stopped during the run.
    Interrupted,
}

impl Status {
    /// The status's name, as its JSON spells it (`waiting_approval`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Success => "success",
            Self::Error => "error",
            Self::Skipped => "skipped",
            Self::Missed => "missed",
            Self::WaitingApproval => "waiting_approval",
            Self::Denied => "denied",
            Self::Interrupted => "interrupted",
        }
    }
}

/// One run's record: what `automations show` lists and
/// `<prefix>/automations/<name>/runs` carries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// The automation's run number (1, 2 …).
    pub run: u64,
    pub status: Status,
    /// What fired it: `cron 0 23 * * *`, `kitchen battery.level_percent below 15`,
    /// `manual` …
    pub trigger: String,
    /// Milliseconds since the Unix epoch.
    pub at_ms: i64,
    /// When it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_ms: Option<i64>,
    /// The result, error, answer or reason.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub detail: Value,
}

/// What is kept about an automation across restarts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Record {
    /// Set by enable/disable; `None`: as configured.
    pub enabled: Option<bool>,
    /// Runs started.
    pub runs: u64,
    /// Runs missed during downtime.
    pub missed: u64,
    /// Runs skipped (conditions, rate limit).
    pub skipped: u64,
    /// When a timed automation is next due.
    pub next_due_ms: Option<i64>,
    /// Start times of the runs of the last hour (the rate limit).
    pub recent_ms: VecDeque<i64>,
    /// A threshold trigger: whether the value is past it (`None`: never seen).
    pub past: Option<bool>,
    /// The last run's outcome (or skip).
    pub last: Option<Outcome>,
    /// When it last started a run.
    pub last_run_ms: Option<i64>,
}

/// What happened, for the engine to decide on.
#[derive(Debug)]
pub enum Input<'a> {
    /// Time passed (the driver's wake-up).
    Tick,
    /// A device's availability.
    Availability { device: &'a str, online: bool },
    /// A service's state was read or pushed.
    State {
        device: &'a str,
        service: &'a str,
        /// Shared with the bus event: kept for conditions without a copy.
        state: &'a Arc<Value>,
    },
    /// A phone pushed an event.
    PhoneEvent { device: &'a str, kind: &'a str },
    /// An MQTT message arrived on a topic.
    Mqtt { topic: &'a str },
    /// Run now, by hand (no conditions, but the rate limit applies).
    RunNow { name: &'a str },
    /// Enable or disable.
    SetEnabled { name: &'a str, enabled: bool },
    /// A run's end (or its wait for approval, or a denial).
    Finished {
        name: &'a str,
        run: u64,
        status: Status,
        detail: Value,
    },
}

/// What the driver does.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// Perform `name`'s action as run number `run` (the records are saved
    /// first).
    Run {
        name: String,
        run: u64,
        trigger: String,
    },
    /// Announce an outcome (publish it; it is in the records already).
    Announce { name: String, outcome: Outcome },
}

/// The errors of [`Engine::step`]'s management inputs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineError {
    /// No automation has this name.
    Unknown(String),
}

impl std::fmt::Display for EngineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unknown(name) => write!(f, "no automation is named {name:?}"),
        }
    }
}

#[derive(Debug)]
struct Entry {
    automation: Automation,
    record: Record,
    /// A debounced trigger waiting for quiet: when it is released, and why.
    pending: Option<(i64, String)>,
    /// The last value seen (change and becomes triggers).
    last_value: Option<Value>,
}

impl Entry {
    fn enabled(&self) -> bool {
        self.record.enabled.unwrap_or(self.automation.enabled)
    }
}

/// Every automation's state. See the module documentation.
#[derive(Debug)]
pub struct Engine {
    entries: Vec<Entry>,
    by_name: HashMap<String, usize>,
    /// Automations with a device trigger, by device.
    by_device: HashMap<String, Vec<usize>>,
    /// Automations with an MQTT trigger, by topic.
    by_topic: HashMap<String, Vec<usize>>,
    /// Automations with a time trigger.
    timed: Vec<usize>,
    /// Devices' availability, as last heard.
    online: HashMap<String, bool>,
    /// device → service → the last state seen (for conditions).
    states: HashMap<String, HashMap<String, Arc<Value>>>,
    /// A record changed since [`Engine::take_dirty`].
    dirty: bool,
}

fn ms(t: Timestamp) -> i64 {
    t.as_millisecond()
}

fn at(ms: i64) -> Timestamp {
    Timestamp::from_millisecond(ms).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// The first time `automation` is due strictly after `after`.
fn next_after(automation: &Automation, after: Timestamp) -> Option<Timestamp> {
    match &automation.trigger {
        Trigger::Cron { cron, .. } => {
            let zoned = after.to_zoned(automation.time_zone.clone());
            cron.find_next_occurrence(&zoned, false)
                .ok()
                .map(|z| z.timestamp())
        }
        Trigger::Interval { every } => {
            let span = (every.as_millis() as i64).milliseconds();
            after.checked_add(span).ok()
        }
        _ => None,
    }
}

impl Engine {
    /// The engine over `automations`, with what the store kept (`records`,
    /// by name; records of automations no longer defined are dropped).
    /// Timed automations whose due time passed while the daemon was down
    /// are settled per their misfire policy: the outputs are those runs and
    /// records.
    pub fn new(
        automations: Vec<Automation>,
        mut records: BTreeMap<String, Record>,
        now: Timestamp,
    ) -> (Self, Vec<Output>) {
        let mut engine = Self {
            entries: Vec::new(),
            by_name: HashMap::new(),
            by_device: HashMap::new(),
            by_topic: HashMap::new(),
            timed: Vec::new(),
            online: HashMap::new(),
            states: HashMap::new(),
            dirty: false,
        };
        let mut out = Vec::new();
        for automation in automations {
            let record = records.remove(&automation.name).unwrap_or_default();
            engine.insert(automation, record, now, &mut out);
        }
        (engine, out)
    }

    fn insert(
        &mut self,
        automation: Automation,
        record: Record,
        now: Timestamp,
        out: &mut Vec<Output>,
    ) {
        let i = self.entries.len();
        self.index_entry(i, &automation);
        self.entries.push(Entry {
            automation,
            record,
            pending: None,
            last_value: None,
        });
        self.settle_start(i, now, out);
    }

    fn index_entry(&mut self, i: usize, automation: &Automation) {
        self.by_name.insert(automation.name.clone(), i);
        match &automation.trigger {
            Trigger::Availability { device, .. }
            | Trigger::State { device, .. }
            | Trigger::PhoneEvent { device, .. } => {
                self.by_device.entry(device.clone()).or_default().push(i)
            }
            Trigger::Mqtt { topic } => self.by_topic.entry(topic.clone()).or_default().push(i),
            Trigger::Cron { .. } | Trigger::Interval { .. } => self.timed.push(i),
            Trigger::Manual => {}
        }
    }

    /// Add an automation at run time (its name is not taken).
    pub fn add(&mut self, automation: Automation, now: Timestamp) -> Vec<Output> {
        let mut out = Vec::new();
        self.insert(automation, Record::default(), now, &mut out);
        self.dirty = true;
        out
    }

    /// Remove an automation and its record.
    pub fn remove(&mut self, name: &str) {
        let Some(i) = self.by_name.get(name).copied() else {
            return;
        };
        self.entries.remove(i);
        self.by_name.clear();
        self.by_device.clear();
        self.by_topic.clear();
        self.timed.clear();
        let automations: Vec<Automation> =
            self.entries.iter().map(|e| e.automation.clone()).collect();
        for (i, a) in automations.iter().enumerate() {
            self.index_entry(i, a);
        }
        self.dirty = true;
    }

    /// A device's availability as known at start: remembered for
    /// conditions and debounces, without triggering anything.
    pub fn seed_online(&mut self, device: &str, online: bool) {
        self.online.insert(device.to_owned(), online);
    }

    /// Whether a record changed since the last call (the driver saves).
    pub fn take_dirty(&mut self) -> bool {
        std::mem::take(&mut self.dirty)
    }

    /// At start (or when added): an interrupted run is recorded, and a
    /// timed automation gets its due time or, when it passed while the
    /// daemon was down, its misfire policy applied.
    fn settle_start(&mut self, i: usize, now: Timestamp, out: &mut Vec<Output>) {
        let entry = &mut self.entries[i];
        if let Some(last) = &mut entry.record.last
            && matches!(last.status, Status::Running | Status::WaitingApproval)
        {
            last.status = Status::Interrupted;
            last.finished_ms = Some(ms(now));
            last.detail = json!("the daemon stopped before the run ended; it is not repeated");
            out.push(Output::Announce {
                name: entry.automation.name.clone(),
                outcome: last.clone(),
            });
        }
        if !entry.automation.trigger.is_timed() {
            entry.record.next_due_ms = None;
            return;
        }
        let grace = MISFIRE_GRACE.as_millis() as i64;
        match entry.record.next_due_ms {
            // Due in the future, or only just passed: the tick runs it.
            Some(due) if due + grace >= ms(now) => {}
            Some(due) => {
                // Count what fell due while we were away.
                let mut missed = 0u64;
                let mut t = at(due);
                while ms(t) <= ms(now) && missed < MAX_MISSED_COUNTED {
                    missed += 1;
                    match next_after(&entry.automation, t) {
                        Some(n) => t = n,
                        None => break,
                    }
                }
                let enabled = entry.enabled();
                let run_once = enabled && entry.automation.misfire == Misfire::RunOnce;
                let not_run = if run_once { missed - 1 } else { missed };
                entry.record.next_due_ms = next_after(&entry.automation, now).map(ms);
                if not_run > 0 {
                    entry.record.missed += not_run;
                    let outcome = Outcome {
                        run: entry.record.runs,
                        status: Status::Missed,
                        trigger: entry.automation.trigger.describe(),
                        at_ms: due,
                        finished_ms: Some(ms(now)),
                        detail: json!({
                            "missed": not_run,
                            "first_due": droidwarden_services::time::rfc3339_millis(u64::try_from(due).unwrap_or(0)),
                            "misfire": if run_once { "run_once" } else { "skip" },
                        }),
                    };
                    entry.record.last = Some(outcome.clone());
                    out.push(Output::Announce {
                        name: entry.automation.name.clone(),
                        outcome,
                    });
                }
                if run_once {
                    let why = format!(
                        "{} (missed at {})",
                        entry.automation.trigger.describe(),
                        at(due)
                    );
                    self.start(i, now, why, true, out);
                }
            }
            None => {
                entry.record.next_due_ms = next_after(&entry.automation, now).map(ms);
            }
        }
    }

    /// The automations, in definition order.
    pub fn automations(&self) -> impl Iterator<Item = (&Automation, &Record, bool)> {
        self.entries
            .iter()
            .map(|e| (&e.automation, &e.record, e.enabled()))
    }

    /// One automation.
    pub fn get(&self, name: &str) -> Option<(&Automation, &Record, bool)> {
        let e = &self.entries[*self.by_name.get(name)?];
        Some((&e.automation, &e.record, e.enabled()))
    }

    /// Every record, by name (what the store saves).
    pub fn records(&self) -> BTreeMap<String, Record> {
        self.entries
            .iter()
            .map(|e| (e.automation.name.clone(), e.record.clone()))
            .collect()
    }

    /// When the engine next has something to do by itself: the earliest
    /// due time or debounce release. `None`: only events wake it.
    pub fn next_wake(&self) -> Option<Timestamp> {
        let timed = self
            .timed
            .iter()
            .filter(|&&i| self.entries[i].enabled())
            .filter_map(|&i| self.entries[i].record.next_due_ms);
        let pending = self
            .entries
            .iter()
            .filter_map(|e| e.pending.as_ref().map(|(t, _)| *t));
        timed.chain(pending).min().map(at)
    }

    /// Decide what `input`, at `now`, calls for.
    ///
    /// # Errors
    /// An unknown name in `RunNow`, `SetEnabled` or `Finished`.
    pub fn step(&mut self, now: Timestamp, input: Input<'_>) -> Result<Vec<Output>, EngineError> {
        let mut out = Vec::new();
        match input {
            Input::Tick => self.tick(now, &mut out),
            Input::Availability { device, online } => {
                self.online.insert(device.to_owned(), online);
                for i in self.watching(device) {
                    if let Trigger::Availability { online: want, .. } =
                        self.entries[i].automation.trigger
                        && want == online
                    {
                        let why = self.entries[i].automation.trigger.describe();
                        self.triggered(i, now, why, &mut out);
                    }
                }
            }
            Input::State {
                device,
                service,
                state,
            } => {
                self.remember_state(device, service, state);
                for i in self.watching(device) {
                    if let Some(why) = self.state_fires(i, service, state) {
                        self.triggered(i, now, why, &mut out);
                    }
                }
            }
            Input::PhoneEvent { device, kind } => {
                for i in self.watching(device) {
                    if matches!(&self.entries[i].automation.trigger, Trigger::PhoneEvent { kind: k, .. } if k == kind)
                    {
                        let why = self.entries[i].automation.trigger.describe();
                        self.triggered(i, now, why, &mut out);
                    }
                }
            }
            Input::Mqtt { topic } => {
                for i in self.by_topic.get(topic).cloned().unwrap_or_default() {
                    let why = self.entries[i].automation.trigger.describe();
                    self.triggered(i, now, why, &mut out);
                }
            }
            Input::RunNow { name } => {
                let i = self.index(name)?;
                self.start(i, now, "manual".into(), false, &mut out);
            }
            Input::SetEnabled { name, enabled } => {
                let i = self.index(name)?;
                let entry = &mut self.entries[i];
                entry.record.enabled = Some(enabled);
                entry.pending = None;
                self.dirty = true;
                if enabled && entry.automation.trigger.is_timed() {
                    // Counted from now: what fell due while it was
                    // disabled is not a misfire.
                    entry.record.next_due_ms = next_after(&entry.automation, now).map(ms);
                }
            }
            Input::Finished {
                name,
                run,
                status,
                detail,
            } => {
                let i = self.index(name)?;
                let entry = &mut self.entries[i];
                if let Some(last) = &mut entry.record.last
                    && last.run == run
                {
                    last.status = status;
                    last.detail = detail;
                    if !matches!(status, Status::Running | Status::WaitingApproval) {
                        last.finished_ms = Some(ms(now));
                    }
                    out.push(Output::Announce {
                        name: name.to_owned(),
                        outcome: last.clone(),
                    });
                }
            }
        }
        Ok(out)
    }

    fn index(&self, name: &str) -> Result<usize, EngineError> {
        self.by_name
            .get(name)
            .copied()
            .ok_or_else(|| EngineError::Unknown(name.to_owned()))
    }

    /// Keep `state` for conditions (every read comes here: no key is
    /// allocated again for a pair already known).
    fn remember_state(&mut self, device: &str, service: &str, state: &Arc<Value>) {
        let by_service = match self.states.get_mut(device) {
            Some(by_service) => by_service,
            None => self.states.entry(device.to_owned()).or_default(),
        };
        match by_service.get_mut(service) {
            Some(slot) => *slot = Arc::clone(state),
            None => {
                by_service.insert(service.to_owned(), Arc::clone(state));
            }
        }
    }

    fn watching(&self, device: &str) -> Vec<usize> {
        self.by_device.get(device).cloned().unwrap_or_default()
    }

    /// Whether a state trigger fires on this new state (and updates what
    /// it remembers: the threshold's side, the last value).
    fn state_fires(&mut self, i: usize, service: &str, state: &Value) -> Option<String> {
        let entry = &mut self.entries[i];
        let Trigger::State { path, when, .. } = &entry.automation.trigger else {
            return None;
        };
        if path.service != service {
            return None;
        }
        let value = path.get(state)?;
        let why = entry.automation.trigger.describe();
        match when {
            StateWhen::Below {
                value: limit,
                hysteresis,
            }
            | StateWhen::Above {
                value: limit,
                hysteresis,
            } => {
                let below = matches!(when, StateWhen::Below { .. });
                let x = value.as_f64()?;
                let past = if below { x < *limit } else { x > *limit };
                let rearmed = if below {
                    x >= limit + hysteresis
                } else {
                    x <= limit - hysteresis
                };
                let was = entry.record.past;
                let now_past = if past {
                    Some(true)
                } else if rearmed || was.is_none() {
                    Some(false)
                } else {
                    was
                };
                self.dirty |= now_past != was;
                if past {
                    entry.record.past = Some(true);
                    // Once per crossing: only when it was not past already.
                    (was != Some(true)).then(|| format!("{why} (now {value})"))
                } else {
                    if rearmed || was.is_none() {
                        entry.record.past = Some(false);
                    }
                    None
                }
            }
            StateWhen::Changed => {
                let before = entry.last_value.replace(value.clone());
                match before {
                    Some(b) if &b != value => Some(format!("{why} ({b} → {value})")),
                    _ => None,
                }
            }
            StateWhen::Becomes(want) => {
                let before = entry.last_value.replace(value.clone());
                (value == want && before.as_ref() != Some(want)).then_some(why)
            }
        }
    }

    /// A device or MQTT trigger fired: at once, or after the debounce.
    fn triggered(&mut self, i: usize, now: Timestamp, why: String, out: &mut Vec<Output>) {
        let entry = &mut self.entries[i];
        if !entry.enabled() {
            return;
        }
        if entry.automation.debounce.is_zero() {
            self.start(i, now, why, true, out);
        } else {
            // Trailing: every new trigger restarts the wait.
            let release = ms(now) + entry.automation.debounce.as_millis() as i64;
            entry.pending = Some((release, why));
        }
    }

    /// Whether a debounced trigger still holds at its release.
    fn still_holds(&self, i: usize) -> bool {
        let entry = &self.entries[i];
        match &entry.automation.trigger {
            Trigger::Availability { device, online } => self.online.get(device) == Some(online),
            Trigger::State {
                when: StateWhen::Below { .. } | StateWhen::Above { .. },
                ..
            } => entry.record.past == Some(true),
            Trigger::State {
                when: StateWhen::Becomes(want),
                ..
            } => entry.last_value.as_ref() == Some(want),
            _ => true,
        }
    }

    fn tick(&mut self, now: Timestamp, out: &mut Vec<Output>) {
        let now_ms = ms(now);
        for i in 0..self.entries.len() {
            if let Some((release, _)) = &self.entries[i].pending
                && *release <= now_ms
            {
                let (_, why) = self.entries[i].pending.take().unwrap_or_default();
                if self.still_holds(i) {
                    self.start(i, now, format!("{why}, debounced"), true, out);
                }
            }
        }
        for k in 0..self.timed.len() {
            let i = self.timed[k];
            let entry = &mut self.entries[i];
            let Some(due) = entry.record.next_due_ms else {
                continue;
            };
            if due > now_ms || !entry.enabled() {
                continue;
            }
            // Advanced before the run is handed out: saved with it.
            entry.record.next_due_ms = next_after(&entry.automation, now).map(ms);
            let why = entry.automation.trigger.describe();
            self.start(i, now, why, true, out);
        }
    }

    /// Start a run if the conditions (unless by hand) and the rate limit
    /// allow; record it either way.
    fn start(&mut self, i: usize, now: Timestamp, why: String, check: bool, out: &mut Vec<Output>) {
        let now_ms = ms(now);
        let failed = if check {
            self.failed_condition(i, now)
        } else {
            None
        };
        let entry = &mut self.entries[i];
        while entry
            .record
            .recent_ms
            .front()
            .is_some_and(|&t| t <= now_ms - HOUR_MS)
        {
            entry.record.recent_ms.pop_front();
        }
        let limited = entry.record.recent_ms.len() >= entry.automation.max_runs_per_hour as usize;
        let waiting = entry
            .record
            .last
            .as_ref()
            .is_some_and(|l| l.status == Status::WaitingApproval);
        let skip = match (failed, limited) {
            // One question at a time: a run waiting for a person is not
            // replaced by the next trigger.
            _ if waiting => Some(json!({"skipped": "an earlier run waits for approval"})),
            (Some(why), _) => Some(json!({"skipped": why})),
            (None, true) => Some(json!({"skipped": format!(
                "rate limit: {} runs in the last hour (max_runs_per_hour)",
                entry.automation.max_runs_per_hour
            )})),
            (None, false) => None,
        };
        let name = entry.automation.name.clone();
        if let Some(detail) = skip {
            entry.record.skipped += 1;
            let outcome = Outcome {
                run: entry.record.runs,
                status: Status::Skipped,
                trigger: why,
                at_ms: now_ms,
                finished_ms: Some(now_ms),
                detail,
            };
            // A skip is announced but does not replace a run in progress.
            if !entry
                .record
                .last
                .as_ref()
                .is_some_and(|l| matches!(l.status, Status::Running | Status::WaitingApproval))
            {
                entry.record.last = Some(outcome.clone());
            }
            out.push(Output::Announce { name, outcome });
            return;
        }
        entry.record.runs += 1;
        entry.record.recent_ms.push_back(now_ms);
        entry.record.last_run_ms = Some(now_ms);
        let run = entry.record.runs;
        let outcome = Outcome {
            run,
            status: Status::Running,
            trigger: why.clone(),
            at_ms: now_ms,
            finished_ms: None,
            detail: Value::Null,
        };
        entry.record.last = Some(outcome.clone());
        out.push(Output::Announce {
            name: name.clone(),
            outcome,
        });
        out.push(Output::Run {
            name,
            run,
            trigger: why,
        });
    }

    /// The first condition that does not hold, described.
    fn failed_condition(&self, i: usize, now: Timestamp) -> Option<String> {
        let entry = &self.entries[i];
        for c in &entry.automation.conditions {
            let holds = match c {
                Condition::Online { device } => self.online.get(device) == Some(&true),
                Condition::State {
                    device,
                    path,
                    op,
                    value,
                } => self
                    .states
                    .get(device)
                    .and_then(|by_service| by_service.get(path.service))
                    .and_then(|s| path.get(s))
                    .is_some_and(|v| op.holds(v, value)),
                Condition::TimeWindow { after, before } => {
                    let local: Zoned = now.to_zoned(entry.automation.time_zone.clone());
                    let m = local.hour() as u32 * 60 + local.minute() as u32;
                    if after < before {
                        (*after..*before).contains(&m)
                    } else {
                        m >= *after || m < *before
                    }
                }
                Condition::NotRunWithin { within } => entry
                    .record
                    .last_run_ms
                    .is_none_or(|t| ms(now) - t >= within.as_millis() as i64),
            };
            if !holds {
                return Some(describe_condition(c));
            }
        }
        None
    }
}

fn describe_condition(c: &Condition) -> String {
    match c {
        Condition::Online { device } => format!("{device} is not online"),
        Condition::State {
            device,
            path,
            op,
            value,
        } => format!("{device} {path} is not {op:?} {value}").to_lowercase(),
        Condition::TimeWindow { after, before } => format!(
            "outside {:02}:{:02}–{:02}:{:02}",
            after / 60,
            after % 60,
            before / 60,
            before % 60
        ),
        Condition::NotRunWithin { within } => {
            format!("it ran in the last {} minutes", within.as_secs() / 60)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Context, parse};
    use droidwarden_services::Risk;

    fn cx() -> Context {
        Context {
            devices: ["kitchen".to_owned()].into(),
            agent_up_to: Risk::Low,
            reserved: Vec::new(),
        }
    }

    fn automation(extra: Value) -> Automation {
        let mut v = json!({
            "name": "a",
            "time_zone": "Europe/Berlin",
            "action": {"kind": "notify", "message": "hi"},
        });
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        parse("automations[0]", &v, &cx()).unwrap()
    }

    fn t(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    /// A state read of `service` on `device`, at `now`.
    fn availability(e: &mut Engine, now: Timestamp, device: &str, online: bool) -> Vec<Output> {
        e.step(now, Input::Availability { device, online }).unwrap()
    }

    fn on_state(
        e: &mut Engine,
        now: Timestamp,
        device: &str,
        service: &'static str,
        state: &Value,
    ) -> Vec<Output> {
        e.step(
            now,
            Input::State {
                device,
                service,
                state: &Arc::new(state.clone()),
            },
        )
        .unwrap()
    }

    fn runs(out: &[Output]) -> Vec<(String, u64)> {
        out.iter()
            .filter_map(|o| match o {
                Output::Run { name, run, .. } => Some((name.clone(), *run)),
                _ => None,
            })
            .collect()
    }

    fn statuses(out: &[Output]) -> Vec<Status> {
        out.iter()
            .filter_map(|o| match o {
                Output::Announce { outcome, .. } => Some(outcome.status),
                _ => None,
            })
            .collect()
    }

    /// Ticks every minute from `from` to `to` and collects the instants
    /// runs started at.
    fn fire_times(engine: &mut Engine, from: Timestamp, to: Timestamp) -> Vec<Timestamp> {
        let mut fired = Vec::new();
        let mut now = from;
        while now < to {
            // The driver wakes at next_wake; step there directly.
            let next = engine.next_wake().unwrap();
            now = if next > now { next } else { now };
            if now >= to {
                break;
            }
            let out = engine.step(now, Input::Tick).unwrap();
            if !runs(&out).is_empty() {
                fired.push(now);
            }
            now = now.checked_add(1.second()).unwrap();
        }
        fired
    }

    #[test]
    fn cron_keeps_local_time_across_a_dst_change() {
        // Berlin springs forward on 29 March 2026 (02:00 → 03:00, CET → CEST).
        let a = automation(json!({"trigger": {"kind": "cron", "cron": "0 9 * * *"}}));
        let (mut e, out) = Engine::new(vec![a], BTreeMap::new(), t("2026-03-27T12:00:00Z"));
        assert!(out.is_empty());
        let fired = fire_times(&mut e, t("2026-03-27T12:00:00Z"), t("2026-03-31T00:00:00Z"));
        // 09:00 local each day: 08:00 UTC in CET, 07:00 UTC in CEST.
        assert_eq!(
            fired,
            vec![
                t("2026-03-28T08:00:00Z"),
                t("2026-03-29T07:00:00Z"),
                t("2026-03-30T07:00:00Z")
            ]
        );
    }

    #[test]
    fn cron_in_a_dst_gap_or_fold_runs_once() {
        // 02:30 does not exist on 29 March 2026 in Berlin, and exists twice
        // on 25 October 2026.
        let a = automation(json!({"trigger": {"kind": "cron", "cron": "30 2 * * *"}}));
        let (mut e, _) = Engine::new(vec![a], BTreeMap::new(), t("2026-03-28T12:00:00Z"));
        let spring = fire_times(&mut e, t("2026-03-28T12:00:00Z"), t("2026-03-29T12:00:00Z"));
        assert_eq!(spring.len(), 1, "{spring:?}");
        // The missing 02:30 runs at the first instant after the gap, 03:00 CEST.
        assert_eq!(spring[0], t("2026-03-29T01:00:00Z"));
        let a = automation(json!({"trigger": {"kind": "cron", "cron": "30 2 * * *"}}));
        let (mut e, _) = Engine::new(vec![a], BTreeMap::new(), t("2026-10-24T12:00:00Z"));
        let autumn = fire_times(&mut e, t("2026-10-24T12:00:00Z"), t("2026-10-25T12:00:00Z"));
        assert_eq!(
            autumn,
            vec![t("2026-10-25T00:30:00Z")],
            "the first 02:30 (CEST) only"
        );
    }

    #[test]
    fn interval_runs_every_so_often() {
        let a = automation(json!({"trigger": {"kind": "interval", "every_s": 600}}));
        let start = t("2026-01-01T00:00:00Z");
        let (mut e, _) = Engine::new(vec![a], BTreeMap::new(), start);
        assert_eq!(e.next_wake(), Some(t("2026-01-01T00:10:00Z")));
        let fired = fire_times(&mut e, start, t("2026-01-01T00:35:00Z"));
        assert_eq!(fired.len(), 3);
    }

    #[test]
    fn a_threshold_fires_once_per_crossing() {
        let a = automation(json!({
            "trigger": {"kind": "below", "device": "kitchen", "state": "battery.level_percent", "value": 15, "hysteresis": 2}
        }));
        let now = t("2026-01-01T00:00:00Z");
        let (mut e, _) = Engine::new(vec![a], BTreeMap::new(), now);
        let mut fired = 0;
        // Polls: 50, 14 (crossing), 13, 14, 16 (not re-armed: < 17), 14,
        // 20 (re-armed), 10 (crossing).
        for level in [50, 14, 13, 14, 16, 14, 20, 10, 10] {
            let state = json!({"level_percent": level});
            let out = on_state(&mut e, now, "kitchen", "battery", &state);
            fired += runs(&out).len();
        }
        assert_eq!(fired, 2);
        // The side is kept: a restart at 10 % does not fire again.
        let records = e.records();
        let a = automation(json!({
            "trigger": {"kind": "below", "device": "kitchen", "state": "battery.level_percent", "value": 15}
        }));
        let (mut e, _) = Engine::new(vec![a], records, now);
        let state = json!({"level_percent": 9});
        let out = on_state(&mut e, now, "kitchen", "battery", &state);
        assert!(runs(&out).is_empty());
        // Other devices' and services' states are ignored.
        let out = on_state(
            &mut e,
            now,
            "kitchen",
            "wifi_automation",
            &json!({"level_percent": 1}),
        );
        assert!(out.is_empty());
    }

    #[test]
    fn changes_and_becomes() {
        let a = automation(
            json!({"trigger": {"kind": "changed", "device": "kitchen", "state": "battery.charging"}}),
        );
        let mut b = automation(
            json!({"trigger": {"kind": "becomes", "device": "kitchen", "state": "battery.charging", "value": true}}),
        );
        b.name = "b".into();
        let now = t("2026-01-01T00:00:00Z");
        let (mut e, _) = Engine::new(vec![a, b], BTreeMap::new(), now);
        let mut log = Vec::new();
        for charging in [false, false, true, true, false, true] {
            let state = json!({"charging": charging});
            let out = on_state(&mut e, now, "kitchen", "battery", &state);
            log.push(
                runs(&out)
                    .into_iter()
                    .map(|(n, _)| n)
                    .collect::<Vec<_>>()
                    .join(","),
            );
        }
        assert_eq!(log, ["", "", "a,b", "", "a", "a,b"]);
    }

    #[test]
    fn a_flapping_device_is_debounced() {
        let a = automation(json!({
            "trigger": {"kind": "online", "device": "kitchen"},
            "debounce_s": 30,
        }));
        let start = t("2026-01-01T00:00:00Z");
        let (mut e, _) = Engine::new(vec![a], BTreeMap::new(), start);
        let mut total = 0;
        // Ten flaps, 5 s apart, ending online.
        for k in 0..10 {
            let now = start.checked_add((5 * k).seconds()).unwrap();
            let online = k % 2 == 1;
            total += runs(&availability(&mut e, now, "kitchen", online)).len();
            total += runs(&e.step(now, Input::Tick).unwrap()).len();
        }
        assert_eq!(total, 0, "nothing while it flaps");
        let release = e.next_wake().unwrap();
        assert_eq!(
            release,
            t("2026-01-01T00:01:15Z"),
            "30 s after the last flap"
        );
        assert_eq!(runs(&e.step(release, Input::Tick).unwrap()).len(), 1);
        // A flap that ends offline does not run it.
        let later = t("2026-01-01T01:00:00Z");
        for online in [false, true, false] {
            availability(&mut e, later, "kitchen", online);
        }
        let release = e.next_wake().unwrap();
        assert!(runs(&e.step(release, Input::Tick).unwrap()).is_empty());
    }

    #[test]
    fn misfires_after_downtime_follow_the_policy() {
        let start = t("2026-01-01T00:00:00Z");
        for (policy, want_runs) in [("run_once", 1), ("skip", 0)] {
            let a = automation(
                json!({"trigger": {"kind": "cron", "cron": "0 * * * *"}, "misfire": policy}),
            );
            let (mut e, _) = Engine::new(vec![a], BTreeMap::new(), start);
            // Due at 01:00; the daemon was down from 00:30 to 04:30.
            assert_eq!(e.next_wake(), Some(t("2026-01-01T01:00:00Z")));
            e.step(t("2026-01-01T00:30:00Z"), Input::Tick).unwrap();
            let records = e.records();
            let a = automation(
                json!({"trigger": {"kind": "cron", "cron": "0 * * * *"}, "misfire": policy}),
            );
            let (e, out) = Engine::new(vec![a], records, t("2026-01-01T04:30:00Z"));
            assert_eq!(runs(&out).len(), want_runs, "{policy}");
            let (_, record, _) = e.get("a").unwrap();
            // 01:00, 02:00, 03:00, 04:00 were missed; run_once runs one.
            assert_eq!(record.missed, 4 - want_runs as u64, "{policy}");
            assert_eq!(record.next_due_ms, Some(ms(t("2026-01-01T05:00:00Z"))));
            assert!(statuses(&out).contains(&Status::Missed));
        }
    }

    #[test]
    fn a_restart_neither_loses_nor_repeats_a_due_run() {
        let a = || automation(json!({"trigger": {"kind": "cron", "cron": "0 23 * * *"}}));
        let start = t("2026-01-01T12:00:00Z");
        let (mut e, _) = Engine::new(vec![a()], BTreeMap::new(), start);
        // It runs at 23:00 (22:00 UTC); the process is killed right after.
        let out = e.step(t("2026-01-01T22:00:00Z"), Input::Tick).unwrap();
        assert_eq!(runs(&out).len(), 1);
        let saved = e.records();
        // Restarted ten seconds later: the run is recorded as interrupted,
        // not repeated.
        let (e2, out) = Engine::new(vec![a()], saved.clone(), t("2026-01-01T22:00:10Z"));
        assert!(runs(&out).is_empty());
        assert_eq!(statuses(&out), [Status::Interrupted]);
        assert_eq!(e2.get("a").unwrap().1.runs, 1);
        // Killed just before it was due, restarted ten seconds after: it runs.
        let (e, _) = Engine::new(vec![a()], BTreeMap::new(), start);
        let saved = e.records();
        let (mut e3, out) = Engine::new(vec![a()], saved, t("2026-01-01T22:00:10Z"));
        assert!(runs(&out).is_empty());
        assert_eq!(
            runs(&e3.step(t("2026-01-01T22:00:10Z"), Input::Tick).unwrap()).len(),
            1
        );
    }

    #[test]
    fn conditions_and_the_rate_limit() {
        let a = automation(json!({
            "trigger": {"kind": "mqtt", "topic": "home/go"},
            "conditions": [
                {"kind": "online", "device": "kitchen"},
                {"kind": "time_window", "after": "22:00", "before": "06:00"},
            ],
            "max_runs_per_hour": 2,
        }));
        let night = t("2026-01-01T23:30:00Z"); // 00:30 in Berlin
        let (mut e, _) = Engine::new(vec![a], BTreeMap::new(), night);
        let out = e.step(night, Input::Mqtt { topic: "home/go" }).unwrap();
        assert_eq!(
            statuses(&out),
            [Status::Skipped],
            "kitchen not known online"
        );
        availability(&mut e, night, "kitchen", true);
        let mut ran = 0;
        for _ in 0..4 {
            ran += runs(&e.step(night, Input::Mqtt { topic: "home/go" }).unwrap()).len();
        }
        assert_eq!(ran, 2, "rate limited");
        let later = t("2026-01-02T01:00:00Z");
        assert_eq!(
            runs(&e.step(later, Input::Mqtt { topic: "home/go" }).unwrap()).len(),
            1
        );
        let day = t("2026-01-02T12:00:00Z");
        let out = e.step(day, Input::Mqtt { topic: "home/go" }).unwrap();
        assert_eq!(statuses(&out), [Status::Skipped], "outside the window");
        // By hand, conditions are not checked.
        assert_eq!(
            runs(&e.step(day, Input::RunNow { name: "a" }).unwrap()).len(),
            1
        );
        assert!(e.step(day, Input::RunNow { name: "zz" }).is_err());
    }

    #[test]
    fn disabled_automations_do_not_run() {
        let a = automation(json!({"trigger": {"kind": "interval", "every_s": 60}}));
        let start = t("2026-01-01T00:00:00Z");
        let (mut e, _) = Engine::new(vec![a], BTreeMap::new(), start);
        e.step(
            start,
            Input::SetEnabled {
                name: "a",
                enabled: false,
            },
        )
        .unwrap();
        assert_eq!(e.next_wake(), None);
        let later = t("2026-01-01T01:00:00Z");
        assert!(runs(&e.step(later, Input::Tick).unwrap()).is_empty());
        e.step(
            later,
            Input::SetEnabled {
                name: "a",
                enabled: true,
            },
        )
        .unwrap();
        assert_eq!(e.next_wake(), Some(t("2026-01-01T01:01:00Z")));
    }

    #[test]
    fn finished_updates_the_last_outcome() {
        let a = automation(json!({"trigger": {"kind": "manual"}}));
        let now = t("2026-01-01T00:00:00Z");
        let (mut e, _) = Engine::new(vec![a], BTreeMap::new(), now);
        let out = e.step(now, Input::RunNow { name: "a" }).unwrap();
        assert_eq!(runs(&out), [("a".to_owned(), 1)]);
        let out = e
            .step(
                now,
                Input::Finished {
                    name: "a",
                    run: 1,
                    status: Status::Success,
                    detail: json!({"ok": true}),
                },
            )
            .unwrap();
        assert_eq!(statuses(&out), [Status::Success]);
        assert_eq!(
            e.get("a").unwrap().1.last.as_ref().unwrap().status,
            Status::Success
        );
        // A run waiting for approval is not replaced by the next trigger.
        e.step(now, Input::RunNow { name: "a" }).unwrap();
        let waiting = Input::Finished {
            name: "a",
            run: 2,
            status: Status::WaitingApproval,
            detail: Value::Null,
        };
        e.step(now, waiting).unwrap();
        let out = e.step(now, Input::RunNow { name: "a" }).unwrap();
        assert_eq!(statuses(&out), [Status::Skipped]);
        assert_eq!(
            e.get("a").unwrap().1.last.as_ref().unwrap().status,
            Status::WaitingApproval
        );
    }
}
