//! What an automation is: its name, trigger, conditions, action and safety
//! settings, and how untrusted definitions (the configuration's
//! `[[automations]]`, `droidwarden automations add`) become one.
//!
//! A definition is read once, here, into typed values: a cron expression is
//! parsed, a time zone looked up, a device checked against the configured
//! ones, a state path against the catalogue, a call against the action's
//! schema. Every problem is an error naming its key
//! (`automations[2].trigger.cron: …`), so the daemon refuses to start with a
//! bad automation instead of discovering it at 23:00.
//!
//! No I/O beyond the time zone database (read once per zone at parse time).

use croner::Cron;
use croner::parser::{CronParser, Seconds};
use droidwarden_core::hub::Call;
use droidwarden_services::{Catalogue, Risk};
use jiff::tz::TimeZone;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeSet;
use std::time::Duration;

/// Longest automation name.
const MAX_NAME: usize = 48;

/// A checked automation name: 1 to 48 of `a-z`, `0-9`, `_` and `-`, so it
/// is safe in MQTT topics, Home Assistant object ids and agent session ids.
///
/// ```text
/// "kids_tablet_bedtime" is good; "Kids Tablet" and "a/b" are not.
/// ```
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_NAME {
        return Err(format!("must be 1 to {MAX_NAME} characters"));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
    {
        return Err(format!(
            "{name:?} may only hold a-z, 0-9, '_' and '-' (it is used in MQTT topics and Home Assistant ids)"
        ));
    }
    Ok(())
}

/// What makes an automation run.
#[derive(Debug, Clone)]
pub enum Trigger {
    /// A 5-field cron expression in the automation's time zone.
    Cron {
        /// As written.
        expr: String,
        /// Parsed.
        cron: Box<Cron>,
    },
    /// Every so often, counted from the last run (or the start).
    Interval { every: Duration },
    /// A device came online (`online = true`) or went offline.
    Availability { device: String, online: bool },
    /// A state value crossed a threshold, changed, or became a value.
    State {
        device: String,
        path: StatePath,
        when: StateWhen,
    },
    /// The phone pushed an event of this kind (companion app: `notification`…).
    PhoneEvent { device: String, kind: String },
    /// A message on this MQTT topic (exact name).
    Mqtt { topic: String },
    /// Only by hand: `droidwarden automations run`, MQTT, D-Bus, Home Assistant.
    Manual,
}

impl Trigger {
    /// Whether the trigger is a time (cron or interval).
    pub fn is_timed(&self) -> bool {
        matches!(self, Self::Cron { .. } | Self::Interval { .. })
    }

    /// A short description for listings and run records.
    pub fn describe(&self) -> String {
        match self {
            Self::Cron { expr, .. } => format!("cron {expr}"),
            Self::Interval { every } => format!("every {} s", every.as_secs()),
            Self::Availability { device, online } => {
                format!("{device} {}", if *online { "online" } else { "offline" })
            }
            Self::State { device, path, when } => {
                let what = match when {
                    StateWhen::Below { value, .. } => format!("below {value}"),
                    StateWhen::Above { value, .. } => format!("above {value}"),
                    StateWhen::Changed => "changed".into(),
                    StateWhen::Becomes(v) => format!("becomes {v}"),
                };
                format!("{device} {path} {what}")
            }
            Self::PhoneEvent { device, kind } => format!("{device} event {kind}"),
            Self::Mqtt { topic } => format!("mqtt {topic}"),
            Self::Manual => "manual".into(),
        }
    }
}

/// When a state trigger fires.
#[derive(Debug, Clone, PartialEq)]
pub enum StateWhen {
    /// Once each time the value goes below `value`; re-armed when it is
    /// back at or above `value + hysteresis`.
    Below { value: f64, hysteresis: f64 },
    /// Once each time the value goes above `value`; re-armed at or below
    /// `value - hysteresis`.
    Above { value: f64, hysteresis: f64 },
    /// Each time the value differs from the last one seen (not on the
    /// first value seen).
    Changed,
    /// Each time the value becomes this one (from another).
    Becomes(Value),
}

/// A value in a service's state: `battery.level_percent` is the field
/// `level_percent` of the `battery` service's state (the read polled and
/// published on `devices/<device>/state/battery`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatePath {
    /// The service id, checked against the catalogue.
    pub service: &'static str,
    /// The fields below it, e.g. `["level_percent"]`.
    pub fields: Vec<String>,
}

impl StatePath {
    fn parse(text: &str) -> Result<Self, String> {
        let mut parts = text.split('.');
        let service = parts.next().unwrap_or_default();
        let spec = Catalogue::get()
            .service(service)
            .map_err(|_| format!("{service:?} is not a service (see `droidwarden services`)"))?;
        if spec.state.is_none() {
            return Err(format!("the service {service} has no state to watch"));
        }
        let fields: Vec<String> = parts.map(str::to_owned).collect();
        if fields.is_empty() || fields.iter().any(String::is_empty) {
            return Err(format!(
                "{text:?} must name a field of the state, e.g. \"battery.level_percent\""
            ));
        }
        Ok(Self {
            service: spec.id,
            fields,
        })
    }

    /// The value in a state, if it is there.
    pub fn get<'a>(&self, state: &'a Value) -> Option<&'a Value> {
        self.fields.iter().try_fold(state, |v, f| v.get(f))
    }
}

impl std::fmt::Display for StatePath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.service, self.fields.join("."))
    }
}

/// A comparison in a state condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Op {
    /// Whether `left op right`; numbers compare as numbers, other values
    /// only for (in)equality.
    pub fn holds(self, left: &Value, right: &Value) -> bool {
        if let (Some(a), Some(b)) = (left.as_f64(), right.as_f64()) {
            return match self {
                Self::Eq => a == b,
                Self::Ne => a != b,
                Self::Lt => a < b,
                Self::Le => a <= b,
                Self::Gt => a > b,
                Self::Ge => a >= b,
            };
        }
        match self {
            Self::Eq => left == right,
            Self::Ne => left != right,
            _ => false,
        }
    }
}

/// Something that must hold when a trigger fires, or the run is skipped.
#[derive(Debug, Clone)]
pub enum Condition {
    /// The device is online.
    Online { device: String },
    /// A state value compares as asked (an unknown value fails).
    State {
        device: String,
        path: StatePath,
        op: Op,
        value: Value,
    },
    /// The local time (in the automation's zone) is in `[after, before)`;
    /// a window that wraps midnight (`22:00`–`06:00`) is allowed.
    TimeWindow { after: u32, before: u32 },
    /// The automation has not run in the last `within`.
    NotRunWithin { within: Duration },
}

/// What an automation does.
#[derive(Debug, Clone)]
pub enum Action {
    /// A catalogue call through the hub (validation, order, status events).
    Call(Call),
    /// An agent run, in the session `automation-<name>` so it remembers
    /// earlier runs.
    Prompt { prompt: String },
    /// Only the notification (`notify` topic and the run event).
    Notify { message: String },
    /// A skill run through the agent (docs/skills.md), in the session
    /// `automation-<name>`; an unknown skill is the run's error.
    Skill { skill: String, input: Value },
}

impl Action {
    /// `call`, `prompt`, `notify` or `skill`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Call(_) => "call",
            Self::Prompt { .. } => "prompt",
            Self::Notify { .. } => "notify",
            Self::Skill { .. } => "skill",
        }
    }
}

/// After downtime, what happens to runs that fell due while the daemon was
/// not running. Either way they are counted as missed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Misfire {
    /// Do not run them; wait for the next time.
    Skip,
    /// Run once, at start, however many were missed.
    RunOnce,
}

/// A validated automation.
#[derive(Debug, Clone)]
pub struct Automation {
    pub name: String,
    /// Enabled unless the store says otherwise.
    pub enabled: bool,
    pub description: String,
    pub trigger: Trigger,
    pub conditions: Vec<Condition>,
    pub action: Action,
    /// Calls up to this risk run at once; riskier ones wait for
    /// `droidwarden automations approve NAME`. Never above the agent's.
    pub auto_approve_up_to: Risk,
    /// Most runs in any hour; more are skipped (recorded).
    pub max_runs_per_hour: u32,
    /// A device trigger waits for this much quiet before it fires (and
    /// fires only if it still holds): a flapping phone runs it once.
    pub debounce: Duration,
    pub misfire: Misfire,
    /// The zone cron expressions and time windows are read in.
    pub time_zone: TimeZone,
    /// Its IANA name, for display (`None`: the system's).
    pub time_zone_name: Option<String>,
    /// An MQTT topic each run's outcome is also published on.
    pub notify: Option<String>,
    /// The definition as given, kept for `automations show` and the store.
    pub source: Value,
}

/// The raw definition: a table of `[[automations]]` or the JSON of
/// `automations add`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAutomation {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default = "yes")]
    enabled: bool,
    trigger: Value,
    #[serde(default)]
    conditions: Vec<Value>,
    action: Value,
    #[serde(default)]
    auto_approve_up_to: Option<Risk>,
    #[serde(default)]
    max_runs_per_hour: Option<u32>,
    #[serde(default)]
    debounce_s: Option<u64>,
    #[serde(default)]
    misfire: Option<Misfire>,
    #[serde(default)]
    time_zone: Option<String>,
    #[serde(default)]
    notify: Option<String>,
}

fn yes() -> bool {
    true
}

/// What a definition is checked against.
#[derive(Debug, Clone)]
pub struct Context {
    /// The configured device names.
    pub devices: BTreeSet<String>,
    /// `[agent.approval] auto_approve_up_to`: the most an automation may
    /// run without asking.
    pub agent_up_to: Risk,
    /// Topic prefixes the daemon owns (`[mqtt] topic_prefix`, Home
    /// Assistant's): an automation neither triggers on nor notifies to
    /// them, so a definition (which an `automation` MQTT user may add)
    /// cannot make the daemon publish as itself on a phone's, a command's
    /// or a discovery topic.
    pub reserved: Vec<String>,
}

impl Context {
    /// `<prefix>/notify`: where an automation added over MQTT may notify
    /// (the daemon's first reserved prefix is its topic prefix).
    pub fn notify_home(&self) -> Option<String> {
        self.reserved
            .first()
            .filter(|p| !p.is_empty())
            .map(|p| format!("{p}/notify"))
    }

    /// Whether a definition added by an `automation` account (over MQTT)
    /// may notify on `topic`: only under [`Context::notify_home`], since the
    /// daemon publishes it with its own rights, and that account may not
    /// publish anywhere else itself.
    ///
    /// # Errors
    /// The message naming where it may notify.
    pub fn check_added_notify(&self, topic: &str) -> Result<(), String> {
        match self.notify_home() {
            Some(home) if topic.starts_with(&format!("{home}/")) => Ok(()),
            home => Err(format!(
                "definition.notify: an automation added over MQTT notifies only under {}/ (the daemon would publish {topic:?} with its own rights, which the adding account does not have); put it in the configuration's [[automations]] to notify there",
                home.unwrap_or_default()
            )),
        }
    }
}

/// Runs per hour when `max_runs_per_hour` is not set.
pub const DEFAULT_RUNS_PER_HOUR: u32 = 60;
/// The shortest interval: an automation is not a busy loop.
const MIN_INTERVAL_S: u64 = 10;

/// Parse one definition; errors name `key.<field>`.
///
/// # Errors
/// The first problem found, as `key.field: why`.
pub fn parse(key: &str, value: &Value, cx: &Context) -> Result<Automation, String> {
    let raw: RawAutomation =
        serde_json::from_value(value.clone()).map_err(|e| format!("{key}: {e}"))?;
    let at = |field: &str| format!("{key}.{field}");
    check_name(&raw.name).map_err(|e| format!("{}: {e}", at("name")))?;
    let (time_zone, time_zone_name) = match raw.time_zone {
        None => (TimeZone::system(), None),
        Some(name) => (
            TimeZone::get(&name).map_err(|_| {
                format!(
                    "{}: {name:?} is not a time zone of the system's tz database (e.g. \"Europe/Berlin\")",
                    at("time_zone")
                )
            })?,
            Some(name),
        ),
    };
    let trigger = parse_trigger(&at("trigger"), &raw.trigger, cx)?;
    let conditions = raw
        .conditions
        .iter()
        .enumerate()
        .map(|(i, c)| parse_condition(&at(&format!("conditions[{i}]")), c, cx))
        .collect::<Result<Vec<_>, _>>()?;
    let action = parse_action(&at("action"), &raw.action, cx)?;
    let auto_approve_up_to = match raw.auto_approve_up_to {
        None => cx.agent_up_to,
        Some(r) if r > cx.agent_up_to => {
            return Err(format!(
                "{}: {} is broader than the agent's agent.approval.auto_approve_up_to ({}); an automation never has more rights than the agent",
                at("auto_approve_up_to"),
                r.as_str(),
                cx.agent_up_to.as_str()
            ));
        }
        Some(r) => r,
    };
    if raw.auto_approve_up_to.is_some()
        && matches!(action, Action::Prompt { .. } | Action::Skill { .. })
    {
        return Err(format!(
            "{}: not available for a prompt or skill action: the agent's own approval policy applies to its tool calls",
            at("auto_approve_up_to")
        ));
    }
    let max_runs_per_hour = raw.max_runs_per_hour.unwrap_or(DEFAULT_RUNS_PER_HOUR);
    if !(1..=3600).contains(&max_runs_per_hour) {
        return Err(format!(
            "{}: must be between 1 and 3600",
            at("max_runs_per_hour")
        ));
    }
    let debounce_s = raw.debounce_s.unwrap_or(0);
    if debounce_s > 86_400 {
        return Err(format!(
            "{}: must be at most 86400 (a day)",
            at("debounce_s")
        ));
    }
    if let Some(topic) = &raw.notify {
        check_topic(topic, cx).map_err(|e| format!("{}: {e}", at("notify")))?;
    }
    Ok(Automation {
        name: raw.name,
        enabled: raw.enabled,
        description: raw.description,
        trigger,
        conditions,
        action,
        auto_approve_up_to,
        max_runs_per_hour,
        debounce: Duration::from_secs(debounce_s),
        misfire: raw.misfire.unwrap_or(Misfire::RunOnce),
        time_zone,
        time_zone_name,
        notify: raw.notify,
        source: value.clone(),
    })
}

/// Every `[[automations]]` table; names must differ.
///
/// # Errors
/// The first problem, naming `automations[i].<key>`.
pub fn parse_all(values: &[Value], cx: &Context) -> Result<Vec<Automation>, String> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::with_capacity(values.len());
    for (i, v) in values.iter().enumerate() {
        let key = format!("automations[{i}]");
        let a = parse(&key, v, cx)?;
        if !seen.insert(a.name.clone()) {
            return Err(format!("{key}.name: {} is defined twice", a.name));
        }
        out.push(a);
    }
    Ok(out)
}

/// The topics of the MQTT triggers among `automations`.
pub fn mqtt_topics(automations: &[Automation]) -> BTreeSet<String> {
    automations
        .iter()
        .filter_map(|a| match &a.trigger {
            Trigger::Mqtt { topic } => Some(topic.clone()),
            _ => None,
        })
        .collect()
}

/// An MQTT topic name we may publish on or match exactly: no wildcards,
/// not a broker topic (`$…`), nothing under a prefix the daemon owns.
fn check_topic(topic: &str, cx: &Context) -> Result<(), String> {
    if topic.is_empty() || topic.len() > 512 {
        return Err("must be 1 to 512 bytes".into());
    }
    if topic.contains(['+', '#', '\0']) || topic.starts_with('$') {
        return Err(format!(
            "{topic:?} must be a topic name, without wildcards or a leading '$'"
        ));
    }
    if cx
        .notify_home()
        .is_some_and(|home| topic.starts_with(&format!("{home}/")))
    {
        // The one daemon-owned subtree meant for automations' messages.
        return Ok(());
    }
    if let Some(prefix) = cx
        .reserved
        .iter()
        .find(|p| !p.is_empty() && (topic == p.as_str() || topic.starts_with(&format!("{p}/"))))
    {
        return Err(format!(
            "{topic:?} is under {prefix}/, which the daemon owns; use a topic of your own (e.g. home/alerts)"
        ));
    }
    Ok(())
}

fn str_field<'a>(key: &str, obj: &'a Value, field: &str) -> Result<&'a str, String> {
    obj.get(field)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{key}.{field}: missing, or not a string"))
}

fn device_field(key: &str, obj: &Value, cx: &Context) -> Result<String, String> {
    let device = str_field(key, obj, "device")?;
    if !cx.devices.contains(device) {
        let known: Vec<&str> = cx.devices.iter().map(String::as_str).collect();
        return Err(format!(
            "{key}.device: {device:?} is not a configured device ([[devices]]: {})",
            listed(&known)
        ));
    }
    Ok(device.to_owned())
}

/// `items` for an error message: comma-separated, or `none`.
fn listed(items: &[&str]) -> String {
    if items.is_empty() {
        "none".to_owned()
    } else {
        items.join(", ")
    }
}

/// Only these keys (beside `kind`) in a table.
fn only(key: &str, obj: &Value, allowed: &[&str]) -> Result<(), String> {
    let Some(map) = obj.as_object() else {
        return Err(format!("{key}: must be a table"));
    };
    for k in map.keys() {
        if k != "kind" && !allowed.contains(&k.as_str()) {
            return Err(format!(
                "{key}.{k}: unknown key (expected {})",
                listed(allowed)
            ));
        }
    }
    Ok(())
}

fn number(key: &str, obj: &Value, field: &str) -> Result<Option<f64>, String> {
    match obj.get(field) {
        None => Ok(None),
        Some(v) => v
            .as_f64()
            .map(Some)
            .ok_or_else(|| format!("{key}.{field}: must be a number")),
    }
}

/// A 5-field cron expression (minute hour day month weekday).
pub fn parse_cron(expr: &str) -> Result<Cron, String> {
    CronParser::builder()
        .seconds(Seconds::Disallowed)
        .build()
        .parse(expr)
        .map_err(|e| {
            format!(
                "{expr:?} is not a 5-field cron expression (minute hour day month weekday): {e}"
            )
        })
}

fn parse_trigger(key: &str, v: &Value, cx: &Context) -> Result<Trigger, String> {
    let kind = str_field(key, v, "kind")?;
    let state_path = |v: &Value| {
        StatePath::parse(str_field(key, v, "state")?).map_err(|e| format!("{key}.state: {e}"))
    };
    match kind {
        "cron" => {
            only(key, v, &["cron"])?;
            let expr = str_field(key, v, "cron")?;
            let cron = parse_cron(expr).map_err(|e| format!("{key}.cron: {e}"))?;
            Ok(Trigger::Cron {
                expr: expr.to_owned(),
                cron: Box::new(cron),
            })
        }
        "interval" => {
            only(key, v, &["every_s"])?;
            let every = v
                .get("every_s")
                .and_then(Value::as_u64)
                .ok_or_else(|| format!("{key}.every_s: missing, or not a whole number"))?;
            if !(MIN_INTERVAL_S..=366 * 86_400).contains(&every) {
                return Err(format!(
                    "{key}.every_s: must be between {MIN_INTERVAL_S} and 31622400 (a year)"
                ));
            }
            Ok(Trigger::Interval {
                every: Duration::from_secs(every),
            })
        }
        "online" | "offline" => {
            only(key, v, &["device"])?;
            Ok(Trigger::Availability {
                device: device_field(key, v, cx)?,
                online: kind == "online",
            })
        }
        "below" | "above" => {
            only(key, v, &["device", "state", "value", "hysteresis"])?;
            let device = device_field(key, v, cx)?;
            let path = state_path(v)?;
            let value = number(key, v, "value")?
                .ok_or_else(|| format!("{key}.value: missing (the threshold)"))?;
            let hysteresis = number(key, v, "hysteresis")?.unwrap_or(0.0);
            if hysteresis < 0.0 {
                return Err(format!("{key}.hysteresis: must not be negative"));
            }
            let when = if kind == "below" {
                StateWhen::Below { value, hysteresis }
            } else {
                StateWhen::Above { value, hysteresis }
            };
            Ok(Trigger::State { device, path, when })
        }
        "changed" => {
            only(key, v, &["device", "state"])?;
            Ok(Trigger::State {
                device: device_field(key, v, cx)?,
                path: state_path(v)?,
                when: StateWhen::Changed,
            })
        }
        "becomes" => {
            only(key, v, &["device", "state", "value"])?;
            let value = v
                .get("value")
                .cloned()
                .ok_or_else(|| format!("{key}.value: missing"))?;
            Ok(Trigger::State {
                device: device_field(key, v, cx)?,
                path: state_path(v)?,
                when: StateWhen::Becomes(value),
            })
        }
        "event" => {
            only(key, v, &["device", "event"])?;
            let kind = str_field(key, v, "event")?;
            if kind.is_empty() || kind.len() > 64 {
                return Err(format!("{key}.event: must be 1 to 64 characters"));
            }
            Ok(Trigger::PhoneEvent {
                device: device_field(key, v, cx)?,
                kind: kind.to_owned(),
            })
        }
        "mqtt" => {
            only(key, v, &["topic"])?;
            let topic = str_field(key, v, "topic")?;
            check_topic(topic, cx).map_err(|e| format!("{key}.topic: {e}"))?;
            Ok(Trigger::Mqtt {
                topic: topic.to_owned(),
            })
        }
        "manual" => {
            only(key, v, &[])?;
            Ok(Trigger::Manual)
        }
        other => Err(format!(
            "{key}.kind: {other:?} is not a trigger (cron, interval, online, offline, below, above, changed, becomes, event, mqtt, manual)"
        )),
    }
}

/// `"HH:MM"` as minutes after midnight.
fn clock(key: &str, v: &Value, field: &str) -> Result<u32, String> {
    let text = str_field(key, v, field)?;
    let bad = || format!("{key}.{field}: {text:?} is not a time of day (\"HH:MM\")");
    let (h, m) = text.split_once(':').ok_or_else(bad)?;
    let (h, m): (u32, u32) = (h.parse().map_err(|_| bad())?, m.parse().map_err(|_| bad())?);
    if h > 23 || m > 59 || text.len() != 5 {
        return Err(bad());
    }
    Ok(h * 60 + m)
}

fn parse_condition(key: &str, v: &Value, cx: &Context) -> Result<Condition, String> {
    match str_field(key, v, "kind")? {
        "online" => {
            only(key, v, &["device"])?;
            Ok(Condition::Online {
                device: device_field(key, v, cx)?,
            })
        }
        "state" => {
            only(key, v, &["device", "state", "op", "value"])?;
            let device = device_field(key, v, cx)?;
            let path = StatePath::parse(str_field(key, v, "state")?)
                .map_err(|e| format!("{key}.state: {e}"))?;
            let op = match v.get("op") {
                None => Op::Eq,
                Some(op) => serde_json::from_value(op.clone())
                    .map_err(|_| format!("{key}.op: must be one of eq, ne, lt, le, gt, ge"))?,
            };
            let value = v
                .get("value")
                .cloned()
                .ok_or_else(|| format!("{key}.value: missing"))?;
            Ok(Condition::State {
                device,
                path,
                op,
                value,
            })
        }
        "time_window" => {
            only(key, v, &["after", "before"])?;
            let after = clock(key, v, "after")?;
            let before = clock(key, v, "before")?;
            if after == before {
                return Err(format!("{key}.before: the window is empty"));
            }
            Ok(Condition::TimeWindow { after, before })
        }
        "not_run_within" => {
            only(key, v, &["minutes"])?;
            let minutes = v
                .get("minutes")
                .and_then(Value::as_u64)
                .filter(|m| (1..=525_600).contains(m))
                .ok_or_else(|| format!("{key}.minutes: a whole number from 1 to 525600"))?;
            Ok(Condition::NotRunWithin {
                within: Duration::from_secs(minutes * 60),
            })
        }
        other => Err(format!(
            "{key}.kind: {other:?} is not a condition (online, state, time_window, not_run_within)"
        )),
    }
}

fn parse_action(key: &str, v: &Value, cx: &Context) -> Result<Action, String> {
    match str_field(key, v, "kind")? {
        "call" => {
            only(key, v, &["device", "service", "action", "params"])?;
            let device = match v.get("device") {
                None => None,
                Some(_) => Some(device_field(key, v, cx)?),
            };
            let service = str_field(key, v, "service")?;
            let action = str_field(key, v, "action")?;
            let params = v
                .get("params")
                .cloned()
                .unwrap_or_else(|| Value::Object(Default::default()));
            let command = Catalogue::get()
                .parse(service, action, &params)
                .map_err(|e| format!("{key}: {e}"))?;
            Ok(Action::Call(Call { device, command }))
        }
        "prompt" => {
            only(key, v, &["prompt"])?;
            let prompt = str_field(key, v, "prompt")?.trim();
            if prompt.is_empty() || prompt.len() > 16_000 {
                return Err(format!("{key}.prompt: must be 1 to 16000 characters"));
            }
            Ok(Action::Prompt {
                prompt: prompt.to_owned(),
            })
        }
        "notify" => {
            only(key, v, &["message"])?;
            Ok(Action::Notify {
                message: str_field(key, v, "message")?.to_owned(),
            })
        }
        "skill" => {
            only(key, v, &["skill", "input"])?;
            let skill = str_field(key, v, "skill")?;
            // The skill itself is looked up when the automation runs: skills
            // are reloaded on SIGHUP, automations are not.
            if skill.is_empty()
                || skill.len() > 64
                || !skill
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            {
                return Err(format!(
                    "{key}.skill: {:?} is not a skill name (lowercase letters, digits and '-', at most 64)",
                    skill.chars().take(70).collect::<String>()
                ));
            }
            let input = match v.get("input") {
                None => Value::Object(serde_json::Map::new()),
                Some(i @ Value::Object(_)) => i.clone(),
                Some(_) => return Err(format!("{key}.input: must be a table")),
            };
            Ok(Action::Skill {
                skill: skill.to_owned(),
                input,
            })
        }
        other => Err(format!(
            "{key}.kind: {other:?} is not an action (call, prompt, notify, skill)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cx() -> Context {
        Context {
            devices: ["kitchen".to_owned()].into(),
            agent_up_to: Risk::Medium,
            reserved: vec!["droidwarden".into(), "homeassistant".into()],
        }
    }

    fn good() -> Value {
        json!({
            "name": "saver",
            "trigger": {"kind": "below", "device": "kitchen", "state": "battery.level_percent", "value": 15},
            "action": {"kind": "call", "device": "kitchen", "service": "battery", "action": "status"},
        })
    }

    fn error_of(change: impl FnOnce(&mut Value)) -> String {
        let mut v = good();
        change(&mut v);
        parse("automations[0]", &v, &cx()).expect_err("should be refused")
    }

    #[test]
    fn a_good_definition_parses() {
        let a = parse("automations[0]", &good(), &cx()).unwrap();
        assert_eq!(a.name, "saver");
        assert_eq!(a.auto_approve_up_to, Risk::Medium);
        assert_eq!(a.misfire, Misfire::RunOnce);
        assert!(matches!(
            a.trigger,
            Trigger::State {
                when: StateWhen::Below { value, .. },
                ..
            } if value == 15.0
        ));
    }

    type Change = Box<dyn FnOnce(&mut Value)>;

    #[test]
    fn problems_name_their_key() {
        let cases: Vec<(Change, &str)> = vec![
            (
                Box::new(|v| v["trigger"] = json!({"kind": "cron", "cron": "61 * * * *"})),
                "automations[0].trigger.cron:",
            ),
            (
                Box::new(|v| v["trigger"] = json!({"kind": "cron", "cron": "0 0 23 * * *"})),
                "automations[0].trigger.cron:",
            ),
            (
                Box::new(|v| v["trigger"]["device"] = json!("garage")),
                "automations[0].trigger.device: \"garage\" is not a configured device",
            ),
            (
                Box::new(|v| v["action"]["device"] = json!("garage")),
                "automations[0].action.device:",
            ),
            (
                Box::new(|v| v["trigger"]["state"] = json!("battery")),
                "automations[0].trigger.state:",
            ),
            (
                Box::new(|v| v["trigger"]["state"] = json!("nope.level")),
                "automations[0].trigger.state:",
            ),
            (
                Box::new(|v| v["name"] = json!("Bad Name")),
                "automations[0].name:",
            ),
            (
                Box::new(|v| v["auto_approve_up_to"] = json!("high")),
                "automations[0].auto_approve_up_to: high is broader",
            ),
            (
                Box::new(|v| v["action"] = json!({"kind": "skill", "name": "x"})),
                "automations[0].action.name: unknown key",
            ),
            (
                Box::new(|v| v["action"] = json!({"kind": "skill", "skill": "../etc"})),
                "automations[0].action.skill: \"../etc\" is not a skill name",
            ),
            (
                Box::new(|v| {
                    v["action"] = json!({"kind": "skill", "skill": "bedtime", "input": 3})
                }),
                "automations[0].action.input: must be a table",
            ),
            (
                Box::new(|v| v["action"]["action"] = json!("explode")),
                "automations[0].action:",
            ),
            (
                Box::new(|v| v["time_zone"] = json!("Mars/Olympus")),
                "automations[0].time_zone:",
            ),
            (
                Box::new(|v| v["colour"] = json!(1)),
                "automations[0]: unknown field `colour`",
            ),
            (
                Box::new(|v| v["trigger"]["colour"] = json!(1)),
                "automations[0].trigger.colour: unknown key",
            ),
            (
                Box::new(|v| {
                    v["conditions"] =
                        json!([{"kind": "time_window", "after": "25:00", "before": "06:00"}])
                }),
                "automations[0].conditions[0].after:",
            ),
            (
                Box::new(|v| v["trigger"] = json!({"kind": "interval", "every_s": 1})),
                "automations[0].trigger.every_s:",
            ),
            (
                Box::new(|v| v["notify"] = json!("home/#")),
                "automations[0].notify:",
            ),
            (
                Box::new(|v| v["notify"] = json!("droidwarden/companion/x/request")),
                "automations[0].notify: \"droidwarden/companion/x/request\" is under droidwarden/",
            ),
            (
                Box::new(|v| {
                    v["trigger"] = json!({"kind": "mqtt", "topic": "homeassistant/status"})
                }),
                "automations[0].trigger.topic:",
            ),
        ];
        for (change, want) in cases {
            let err = error_of(change);
            assert!(err.starts_with(want), "{err:?} should start with {want:?}");
        }
    }

    #[test]
    fn state_paths_and_comparisons() {
        let p = StatePath::parse("battery.level_percent").unwrap();
        assert_eq!(p.get(&json!({"level_percent": 14})), Some(&json!(14)));
        assert_eq!(p.get(&json!({})), None);
        assert!(Op::Lt.holds(&json!(14), &json!(15.0)));
        assert!(Op::Eq.holds(&json!("home"), &json!("home")));
        assert!(!Op::Gt.holds(&json!("b"), &json!("a")));
    }
}
