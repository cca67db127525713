//! The tools the model sees, built from the service catalogue and the
//! devices, and the first stage of the tool pipeline: turning a raw tool
//! call into a validated [`Planned`] call (or a wire error the model can
//! read and correct).
//!
//! Two modes ([`ToolMode`]):
//!
//! * **toolkit** — one tool `android_device {device?, service_id, action,
//!   parameters}`; `service_id` is an enum of the services the devices offer.
//! * **direct** — one tool `android_<service_id> {device?, action,
//!   parameters}` per service, `action` an enum.
//!
//! **Progressive disclosure.** The tools carry a compact *index* (in their
//! descriptions): each service, its actions one line each with their
//! parameter names (`*` required) and, for the risky ones, their risk —
//! not every parameter's schema on every call. `parameters` is a free-form
//! object; an action's full schema (types, bounds, allowed values, an
//! example) comes from `describe_action {service_id, action?}` when the
//! model needs it, and with every validation error of that action, so a
//! wrong call teaches the right one. The catalogue validates every call
//! exactly as before. A few hundred tokens instead of thousands: a small
//! model on a home server reads the prompt at ~20 tokens/s, and
//! llama.cpp's common 8,192-token context must hold the conversation too.
//! The index is generated from the catalogue, so new actions appear in it
//! by themselves; it depends only on the devices, so the prompt prefix is
//! the same, byte for byte, on every call of a run (servers' prompt caches
//! reuse it).
//!
//! `parameters` renders as an open object for standard JSON Schema readers
//! and as JSON text where a dialect has no open objects (OpenAI strict
//! mode, Gemini); the planner takes either.
//!
//! `device` exists only when more than one device is configured (an enum of
//! their names). `current_time` and `calculator` are always present.

pub mod calculator;
pub mod extra;
pub mod names;
pub mod reply;
pub mod schema;

pub use schema::ToolSpec;

use crate::clock;
use crate::host::DeviceSummary;
use crate::message::ToolCall;
use crate::skills::{AllowedTools, INVOKE_SKILL_TOOL, LIST_SKILLS_TOOL, READ_SKILL_TOOL, SkillSet};
use droidwarden_services::schema::NotAnObject;
use droidwarden_services::{Catalogue, Command, ErrorCode, Risk, ServiceSpec, WireError};
use schema::{Parameters, Property, Schema};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Name of the toolkit tool.
pub const TOOLKIT_TOOL: &str = "android_device";
/// Prefix of the direct tools.
pub const DIRECT_PREFIX: &str = "android_";
/// Name of the tool that gives an action's full parameter schema.
pub const DESCRIBE_TOOL: &str = "describe_action";
pub use names::{CALCULATOR_TOOL, TIME_TOOL};

/// How much of the catalogue's schemas the device tools carry (`[agent]
/// tool_schemas`, `[mcp] tool_schemas`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolSchemas {
    /// A compact index of the actions; an action's schema on demand
    /// (`describe_action`, and with its errors). The default.
    #[default]
    Index,
    /// Every action's parameter schema in the tools, flattened into one
    /// `parameters` object, and no `describe_action`: several thousand
    /// tokens more, for a large model that would rather have it all up
    /// front.
    Full,
}

/// How the catalogue is offered to the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolMode {
    /// One `android_device` tool.
    Toolkit,
    /// One `android_<service>` tool per service.
    Direct,
}

/// A catalogue command as a plan stores it: `service`, `action` and
/// `params` fields (the shape checkpoints have always had), checked by the
/// catalogue again when a checkpoint is read back.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceCall(pub Command);

#[derive(Serialize, Deserialize)]
struct StoredCall {
    service: String,
    action: String,
    params: Value,
}

impl Serialize for DeviceCall {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        StoredCall {
            service: self.0.service_id().to_owned(),
            action: self.0.action_name().to_owned(),
            params: self.0.params_json(),
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for DeviceCall {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let stored = StoredCall::deserialize(deserializer)?;
        Catalogue::get()
            .parse(&stored.service, &stored.action, &stored.params)
            .map(DeviceCall)
            .map_err(serde::de::Error::custom)
    }
}

/// A validated tool call, ready for policy and execution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Planned {
    /// A catalogue action on a device.
    Device {
        /// Target device (`None`: the host's default, single device).
        device: Option<String>,
        /// The typed command (stored as `service`, `action`, `params`).
        #[serde(flatten)]
        call: DeviceCall,
        /// The action's risk.
        risk: Risk,
        /// Whether the action changes the device.
        mutates: bool,
    },
    /// `calculator {expression}`.
    Calculator {
        /// The expression.
        expression: String,
    },
    /// `current_time {}`.
    CurrentTime,
    /// `describe_action {service_id, action?}`: an action's (or every
    /// action of a service's) full parameter schema, from the catalogue.
    Describe {
        /// The service.
        service: String,
        /// The action; `None` for all of the service's actions.
        action: Option<String>,
    },
    /// `list_skills {}`.
    ListSkills,
    /// `read_skill {skill, file?}`.
    ReadSkill {
        /// The skill.
        skill: String,
        /// A file under its `references/`, or `None` for its instructions.
        file: Option<String>,
    },
    /// `invoke_skill {skill, input}`: run the skill as a child run.
    InvokeSkill {
        /// The skill (known and enabled when planned).
        skill: String,
        /// Its input, checked against its `parameters`.
        input: Value,
        /// Its risk: declared, or the highest of its tools.
        risk: Risk,
        /// Depth of the child run (1 for a skill the user's run invokes).
        depth: u32,
    },
    /// `delegate_to_<agent> {task, context?, mode?}`: run a specialised
    /// agent (`[[agents]]`) as a child run.
    Delegate {
        /// The agent's name.
        agent: String,
        /// What it is asked to do.
        task: String,
        /// What it should know (it does not see the conversation).
        context: Option<String>,
        /// The mode the call asked for (`None`: the agent's own).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mode: Option<crate::delegation::DelegateMode>,
    },
    /// `delegation_status {task_id}`: where a background delegation of
    /// this session is, with its result once it ended.
    DelegationStatus {
        /// The task.
        task_id: String,
    },
    /// A tool the host offers beyond the catalogue (an MCP server's).
    Extra {
        /// The tool's name (as offered).
        tool: String,
        /// Its arguments (a JSON object; the tool's server checks them).
        arguments: Value,
        /// Its risk.
        risk: Risk,
    },
}

impl Planned {
    /// Run a local tool (calculator, clock). `None` for device calls and
    /// skills (the driver runs those).
    pub fn run_local(&self, now_ms: u64) -> Option<Result<Value, WireError>> {
        match self {
            Self::Device { .. }
            | Self::Extra { .. }
            | Self::ListSkills
            | Self::ReadSkill { .. }
            | Self::InvokeSkill { .. }
            | Self::Delegate { .. }
            | Self::DelegationStatus { .. } => None,
            Self::Calculator { expression } => Some(
                calculator::evaluate(expression)
                    .map(|v| json!({ "expression": expression, "result": v }))
                    .map_err(|m| WireError::new(ErrorCode::InvalidParams, m)),
            ),
            Self::Describe { service, action } => Some(describe(service, action.as_deref())),
            Self::CurrentTime => Some(Ok(json!({
                "utc": clock::rfc3339(now_ms),
                "unix_ms": now_ms,
                "weekday_utc": clock::weekday(now_ms),
            }))),
        }
    }
}

/// What a child run (a skill's or a delegated agent's) is limited to.
#[derive(Debug, Clone, PartialEq)]
pub struct SkillScope {
    /// The skill (or `agent <name>` for a delegated agent's run).
    name: String,
    /// How errors name its limits: `allowed-tools of skill <name>` or
    /// `tools of agent <name>`.
    label: String,
    /// Its resolved `allowed-tools`.
    allowed: AllowedTools,
}

impl SkillScope {
    /// Skill `name`'s run: its `allowed-tools`.
    pub fn skill(name: &str, allowed: AllowedTools) -> Self {
        Self {
            name: name.to_owned(),
            label: format!("allowed-tools of skill {name}"),
            allowed,
        }
    }

    /// Delegated agent `name`'s run (at depth 1): its tools.
    pub fn agent(name: &str, allowed: AllowedTools) -> Self {
        Self {
            name: format!("agent {name}"),
            label: format!("tools of agent {name}"),
            allowed,
        }
    }
}

/// The tools for one run: built from the devices at the start of the run.
#[derive(Debug, Clone)]
pub struct Toolset {
    mode: ToolMode,
    devices: Vec<DeviceSummary>,
    /// Service ids offered, in catalogue order.
    services: Vec<&'static ServiceSpec>,
    specs: std::sync::Arc<[ToolSpec]>,
    /// The skills the run may list, read and invoke.
    skills: Option<std::sync::Arc<SkillSet>>,
    /// Set for a skill's run: only its `allowed-tools`.
    scope: Option<std::sync::Arc<SkillScope>>,
    /// 0 for a user's run, n for a skill run n levels down.
    depth: u32,
    /// Deepest skill run allowed.
    max_depth: u32,
    /// Agents offered as `delegate_to_<name>` tools.
    delegates: Vec<String>,
    /// The agents' definitions this run delegates to (kept for the whole
    /// run, whatever a reload does meanwhile).
    delegate_set: Option<std::sync::Arc<crate::delegation::Delegates>>,
    /// The host's extra tools offered (name, risk).
    extras: Vec<(String, Risk)>,
}

impl Toolset {
    /// The device tools with `schemas`: [`ToolSchemas::Full`] replaces the
    /// index with every action's schema and drops `describe_action`.
    #[must_use]
    pub fn with_schemas(mut self, schemas: ToolSchemas) -> Self {
        if schemas == ToolSchemas::Index {
            return self;
        }
        let specs: Vec<ToolSpec> = self
            .specs
            .iter()
            .filter(|s| s.name != DESCRIBE_TOOL)
            .map(|spec| {
                if self.mode == ToolMode::Toolkit && spec.name == TOOLKIT_TOOL {
                    return self.toolkit_spec_full();
                }
                let service = spec
                    .name
                    .strip_prefix(DIRECT_PREFIX)
                    .and_then(|id| self.services.iter().find(|s| s.id == id));
                match service {
                    Some(s) if self.mode == ToolMode::Direct => self.direct_spec_full(s),
                    _ => spec.clone(),
                }
            })
            .collect();
        self.specs = specs.into();
        self
    }
}

/// Default limit on skills invoking skills.
pub const DEFAULT_MAX_SKILL_DEPTH: u32 = 3;

impl Toolset {
    /// Build the tools for these devices. `builtins` adds `current_time` and
    /// `calculator`. With no devices and no builtins the set is empty and
    /// the run is a single model call.
    pub fn new(mode: ToolMode, devices: &[DeviceSummary], builtins: bool) -> Self {
        Self::build(
            mode,
            devices,
            builtins,
            None,
            None,
            0,
            DEFAULT_MAX_SKILL_DEPTH,
        )
    }

    /// The tools of a user's run with skills: as [`Toolset::new`], plus
    /// `list_skills`, `read_skill` and `invoke_skill` when any skill is
    /// enabled. `max_depth` bounds skills invoking skills.
    pub fn with_skills(
        mode: ToolMode,
        devices: &[DeviceSummary],
        builtins: bool,
        skills: std::sync::Arc<SkillSet>,
        max_depth: u32,
    ) -> Self {
        Self::build(mode, devices, builtins, Some(skills), None, 0, max_depth)
    }

    /// The tools of a child run (a skill's or a delegated agent's) at
    /// `depth`: **only** what `scope` allows (services and actions outside
    /// it are refused when planned, before anything reaches a phone), plus
    /// `skills`; never a delegate tool.
    pub fn for_child(
        mode: ToolMode,
        devices: &[DeviceSummary],
        skills: std::sync::Arc<SkillSet>,
        scope: SkillScope,
        depth: u32,
        max_depth: u32,
    ) -> Self {
        Self::build(
            mode,
            devices,
            false,
            Some(skills),
            Some(std::sync::Arc::new(scope)),
            depth,
            max_depth,
        )
    }

    fn build(
        mode: ToolMode,
        devices: &[DeviceSummary],
        builtins: bool,
        skills: Option<std::sync::Arc<SkillSet>>,
        scope: Option<std::sync::Arc<SkillScope>>,
        depth: u32,
        max_depth: u32,
    ) -> Self {
        let catalogue = Catalogue::get();
        let services: Vec<&'static ServiceSpec> = catalogue
            .services()
            .iter()
            .filter(|s| devices.iter().any(|d| d.services.iter().any(|x| x == s.id)))
            .filter(|s| {
                scope
                    .as_ref()
                    .is_none_or(|sc| sc.allowed.allows_service(s.id))
            })
            .collect();
        let (time, calculator, read_skills, invoke) = match &scope {
            None => (builtins, builtins, true, true),
            Some(sc) => (
                sc.allowed.current_time,
                sc.allowed.calculator,
                sc.allowed.read_skills,
                sc.allowed.invoke_skill,
            ),
        };
        let has_skills = skills.as_ref().is_some_and(|s| !s.is_empty());
        let mut set = Self {
            mode,
            devices: devices.to_vec(),
            services,
            specs: std::sync::Arc::from(Vec::new()),
            skills,
            scope,
            depth,
            max_depth,
            delegates: Vec::new(),
            delegate_set: None,
            extras: Vec::new(),
        };
        let mut specs = Vec::new();
        if !set.services.is_empty() {
            match mode {
                ToolMode::Toolkit => specs.push(set.toolkit_spec()),
                ToolMode::Direct => {
                    for s in &set.services {
                        specs.push(set.direct_spec(s));
                    }
                }
            }
            specs.push(set.describe_spec());
        }
        if time {
            specs.push(ToolSpec {
                name: TIME_TOOL.into(),
                description: "The current UTC date, time and weekday.".into(),
                parameters: Schema::object("", Vec::new()).into(),
            });
        }
        if calculator {
            specs.push(ToolSpec {
                name: CALCULATOR_TOOL.into(),
                description: "Evaluate arithmetic, e.g. (40 * 255) / 100; also % ^ sqrt ln log10 sin cos round min max pi e.".into(),
                parameters: Schema::object(
                    "",
                    vec![Property::required(
                        "expression",
                        Schema::string(""),
                    )],
                ).into(),
            });
        }
        // A user's run with no device and no built-in tool stays a single
        // model call: skills act through tools, and there are none.
        let has_skills = has_skills && (set.scope.is_some() || !specs.is_empty());
        if has_skills && read_skills {
            specs.push(ToolSpec {
                name: LIST_SKILLS_TOOL.into(),
                description: "List the skills you can run, with their tools and risk.".into(),
                parameters: Schema::object("", Vec::new()).into(),
            });
            specs.push(ToolSpec {
                name: READ_SKILL_TOOL.into(),
                description: "A skill's instructions, or one of its reference files.".into(),
                parameters: Schema::object(
                    "",
                    vec![
                        Property::required("skill", Schema::string("")),
                        Property::optional(
                            "file",
                            Schema::string("a reference file; leave out for the instructions"),
                        ),
                    ],
                )
                .into(),
            });
        }
        if has_skills && invoke {
            specs.push(ToolSpec {
                name: INVOKE_SKILL_TOOL.into(),
                description: "Run a skill on its own, with only its tools; returns its result."
                    .into(),
                parameters: Schema::object(
                    "",
                    vec![
                        Property::required("skill", Schema::string("")),
                        Property::optional(
                            "input",
                            Schema::object(
                                "its parameters, e.g. {\"device\": \"kitchen\"}",
                                Vec::new(),
                            ),
                        ),
                    ],
                )
                .into(),
            });
        }
        set.specs = specs.into();
        set
    }

    /// Add one `delegate_to_<name>` tool per agent, and
    /// `delegation_status` (a user's run only; a child run has none, so
    /// delegation is one level deep). Nothing is added to a set without
    /// tools: such a run is a single model call.
    #[must_use]
    pub fn with_delegates(mut self, agents: &[crate::delegation::DelegateConfig]) -> Self {
        use crate::delegation::DelegateMode;
        if self.scope.is_some() || self.specs.is_empty() || agents.is_empty() {
            return self;
        }
        let mut specs = self.specs.to_vec();
        for a in agents {
            let returns = match a.mode {
                DelegateMode::Wait => {
                    "By default it waits and returns the agent's answer; mode \"background\" returns a task id at once instead (then ask delegation_status)."
                }
                DelegateMode::Background => {
                    "By default it runs in the background: the call returns {status: \"delegated\", task_id} at once and delegation_status {task_id} gives the result later; mode \"wait\" waits for the answer instead."
                }
            };
            specs.push(ToolSpec {
                name: a.tool_name(),
                description: format!(
                    "Delegate a task to the specialised agent {}: {} It works on its own with only its tools ({}) and does not see this conversation: put everything it needs in task and context. {returns}",
                    a.name,
                    a.description.trim(),
                    a.allowed.describe()
                ),
                parameters: Schema::object(
                    "",
                    vec![
                        Property::required("task", Schema::string("what the agent should do")),
                        Property::optional(
                            "context",
                            Schema::string("facts from this conversation it needs"),
                        ),
                        Property::optional(
                            "mode",
                            Schema::one_of(
                                format!(
                                    "wait for the answer, or run in the background (default: {})",
                                    a.mode.as_str()
                                ),
                                ["wait", "background"],
                            ),
                        ),
                    ],
                ).into(),
            });
        }
        specs.push(ToolSpec {
            name: crate::delegation::STATUS_TOOL.into(),
            description: "Where a task delegated in the background is: running, succeeded (with the agent's answer), failed or interrupted (with the error). Tasks of this conversation only.".into(),
            parameters: Schema::object(
                "",
                vec![Property::required(
                    "task_id",
                    Schema::string("the task_id the delegate_to_* call returned"),
                )],
            ).into(),
        });
        self.delegates = agents.iter().map(|a| a.name.clone()).collect();
        self.specs = specs.into();
        self
    }

    /// As [`Toolset::with_delegates`], keeping `set` for the run (its
    /// agents and their providers).
    #[must_use]
    pub fn with_delegate_set(self, set: std::sync::Arc<crate::delegation::Delegates>) -> Self {
        let mut out = self.with_delegates(&set.agents);
        if !out.delegates.is_empty() {
            out.delegate_set = Some(set);
        }
        out
    }

    /// The agents' definitions this run delegates to.
    pub fn delegate_set(&self) -> Option<&std::sync::Arc<crate::delegation::Delegates>> {
        self.delegate_set.as_ref()
    }

    /// Add the host's extra tools (a user's run only: a skill's run keeps
    /// to its `allowed-tools`). A tool whose name is already taken is
    /// skipped.
    #[must_use]
    pub fn with_extra(mut self, tools: Vec<extra::ExtraTool>) -> Self {
        if self.scope.is_some() || tools.is_empty() {
            return self;
        }
        let mut specs: Vec<ToolSpec> = self.specs.iter().cloned().collect();
        for t in tools {
            if specs.iter().any(|s| s.name == t.name) {
                continue;
            }
            self.extras.push((t.name.clone(), t.risk));
            specs.push(ToolSpec {
                name: t.name,
                description: t.description,
                parameters: Parameters::Raw(t.schema),
            });
        }
        self.specs = specs.into();
        self
    }

    /// The agents this run may delegate to.
    pub fn delegates(&self) -> &[String] {
        &self.delegates
    }

    /// Whether `invoke_skill` is offered.
    pub fn has_invoke(&self) -> bool {
        self.has(INVOKE_SKILL_TOOL)
    }

    /// The skill this set is limited to, for a skill's run.
    pub fn skill(&self) -> Option<&str> {
        self.scope.as_ref().map(|s| s.name.as_str())
    }

    /// The skills this run may use.
    pub fn skills(&self) -> Option<&std::sync::Arc<SkillSet>> {
        self.skills.as_ref()
    }

    /// How deep in skills this run is (0: a user's run).
    pub fn depth(&self) -> u32 {
        self.depth
    }

    /// The deepest skill run allowed.
    pub fn max_depth(&self) -> u32 {
        self.max_depth
    }

    /// The tool specs, for the provider (shared, cheap to clone).
    pub fn specs(&self) -> &std::sync::Arc<[ToolSpec]> {
        &self.specs
    }

    /// The arguments tool `name` expects, in short, for an error that
    /// shows the model what to send: each top-level key with its type,
    /// whether it is required, and its values when there are a few
    /// (`{"service_id": "string, required", "device": "string"}`). Short
    /// on purpose: the whole schema is in the request already, and a small
    /// model's context is small. `None` for a tool this run does not have.
    pub fn expected_arguments(&self, name: &str) -> Option<Value> {
        let schema = self
            .specs
            .iter()
            .find(|s| s.name == name)?
            .parameters_for(schema::Dialect::Anthropic)?;
        Some(brief(&schema))
    }

    /// A call to show a model that wrote a call wrong or answered without
    /// one: the device tool and the arguments of a harmless read
    /// (`battery.status` when offered, else a service's first reading
    /// action), with `device` when there are several phones. `None`
    /// without device tools.
    pub fn example_call(&self) -> Option<(String, Value)> {
        let reads = |s: &&&'static ServiceSpec| s.actions.iter().any(|a| !a.mutates);
        let service = self
            .services
            .iter()
            .find(|s| s.id == "battery")
            .or_else(|| self.services.iter().find(reads))?;
        let action = service.actions.iter().find(|a| !a.mutates)?;
        let mut args = Map::new();
        if self.devices.len() > 1
            && let Some(d) = self
                .devices
                .iter()
                .find(|d| d.services.iter().any(|x| x == service.id))
        {
            args.insert("device".into(), json!(d.name));
        }
        let tool = match self.mode {
            ToolMode::Toolkit => {
                args.insert("service_id".into(), json!(service.id));
                TOOLKIT_TOOL.to_owned()
            }
            ToolMode::Direct => format!("{DIRECT_PREFIX}{}", service.id),
        };
        args.insert("action".into(), json!(action.name));
        self.has(&tool).then_some((tool, Value::Object(args)))
    }

    /// Whether `prompt` is about the phones: it names one, or says phone,
    /// device, or a word of a service this run offers (`battery`, `wifi`,
    /// `volume` …). Deliberately broad: a false yes costs one model call
    /// (the nudge), a false no lets a guessed answer through.
    pub fn about_phones(&self, prompt: &str) -> bool {
        /// Words of service ids that say nothing on their own.
        const VAGUE: &[&str] = &[
            "automation",
            "control",
            "info",
            "state",
            "mode",
            "list",
            "manager",
            "launcher",
            "detection",
            "sensors",
            "environmental",
            "params",
            "system",
        ];
        /// What people say for what the services do.
        const WORDS: &[&str] = &[
            "phone",
            "device",
            "tablet",
            "android",
            "volume",
            "ringer",
            "brightness",
            "notification",
            "charging",
            "charge",
            "mute",
            "silent",
            "vibrate",
            "music",
            "photo",
            "sms",
            "message",
            "dial",
            "app",
            "airplane",
            "wi-fi",
            "wlan",
            "storage",
            "temperature",
            "playing",
            "song",
            "ssid",
            "signal",
            "gps",
        ];
        if self.services.is_empty() {
            return false;
        }
        let lower = prompt.to_lowercase();
        let words: Vec<&str> = lower
            .split(|c: char| !(c.is_alphanumeric() || c == '-'))
            .filter(|w| !w.is_empty())
            .collect();
        let said = |w: &str| {
            words
                .iter()
                .any(|x| *x == w || x.strip_suffix('s') == Some(w))
        };
        WORDS.iter().any(|w| said(w))
            || self.devices.iter().any(|d| said(&d.name.to_lowercase()))
            || self.services.iter().any(|s| {
                s.id.split('_')
                    .filter(|part| part.len() > 2 && !VAGUE.contains(part))
                    .any(said)
            })
    }

    /// Whether there are no tools at all.
    pub fn is_empty(&self) -> bool {
        self.specs.is_empty()
    }

    /// The devices this set was built for.
    pub fn devices(&self) -> &[DeviceSummary] {
        &self.devices
    }

    /// `device`, an enum of the phones, when there are several.
    fn device_prop(&self, description: &'static str) -> Option<Property> {
        (self.devices.len() > 1).then(|| {
            Property::optional(
                "device",
                Schema::one_of(description, self.devices.iter().map(|d| d.name.clone())),
            )
        })
    }

    /// The phones, when there are several: each with the services it
    /// offers, or `all services` (the common case, said in two words).
    fn phones_line(&self) -> Option<String> {
        if self.devices.len() < 2 {
            return None;
        }
        let phones: Vec<String> = self
            .devices
            .iter()
            .map(|d| {
                let offered: Vec<&str> = self
                    .services
                    .iter()
                    .map(|s| s.id)
                    .filter(|id| d.services.iter().any(|x| x == id))
                    .collect();
                if offered.len() == self.services.len() {
                    d.name.clone()
                } else {
                    format!("{} (only {})", d.name, offered.join(", "))
                }
            })
            .collect();
        Some(format!("Phones (\"device\"): {}.", phones.join(", ")))
    }

    fn toolkit_spec(&self) -> ToolSpec {
        let mut description = String::from(
            "Read or change the user's Android phones. Below: each service's actions, as action(parameters, * required). Put the parameters in \"parameters\"; describe_action gives their types and limits.",
        );
        if let Some(phones) = self.phones_line() {
            description.push(' ');
            description.push_str(&phones);
        }
        description.push_str(RISK_NOTE);
        for s in &self.services {
            let _ = write!(description, "\n{}: ", s.id);
            index_actions(&mut description, &s.actions);
        }
        self.device_tool(
            TOOLKIT_TOOL.into(),
            description,
            [
                // The index names the services (an enum would name them
                // again); the catalogue checks the name.
                Property::required("service_id", Schema::string("")),
                Property::required("action", Schema::string("")),
            ],
        )
    }

    fn direct_spec(&self, s: &'static ServiceSpec) -> ToolSpec {
        let mut description = format!("{} Actions (* required): ", s.description);
        index_actions(&mut description, &s.actions);
        self.device_tool(
            format!("{DIRECT_PREFIX}{}", s.id),
            description,
            // The index names the actions: an enum would name them again
            // in every one of these tools (the catalogue checks the name).
            [Property::required("action", Schema::string(""))],
        )
    }

    /// `describe_action {service_id, action?}`.
    fn describe_spec(&self) -> ToolSpec {
        ToolSpec {
            name: DESCRIBE_TOOL.into(),
            description: "An action's parameters in full (types, limits, values), its risk and an example. Without action: every action of the service.".into(),
            parameters: Schema::object(
                "",
                vec![
                    Property::required("service_id", Schema::string("")),
                    Property::optional("action", Schema::string("")),
                ],
            )
            .into(),
        }
    }

    /// A tool over device actions: `device` (with several phones), the
    /// properties that choose the action, and `parameters`, free-form (the
    /// catalogue checks them against the action's schema).
    fn device_tool(
        &self,
        name: String,
        description: String,
        choice: impl IntoIterator<Item = Property>,
    ) -> ToolSpec {
        let mut props: Vec<Property> = self.device_prop("").into_iter().collect();
        props.extend(choice);
        ToolSpec {
            name,
            description,
            parameters: Parameters::Open {
                schema: Schema::object("", props),
                key: "parameters",
                description: "the action's parameters",
            },
        }
    }

    // The full schemas (`ToolSchemas::Full`): the surface before the index.

    fn toolkit_spec_full(&self) -> ToolSpec {
        let mut description = String::from(
            "Read or change the state of the user's Android phones. Choose service_id and action; put the action's parameters in `parameters` (leave out or null the ones it does not use).",
        );
        if self.devices.len() > 1 {
            let _ = write!(
                description,
                " Phones: {}.",
                self.devices
                    .iter()
                    .map(|d| {
                        let offered: Vec<&str> = d
                            .services
                            .iter()
                            .map(String::as_str)
                            .filter(|s| self.services.iter().any(|x| x.id == *s))
                            .collect();
                        format!("{} ({})", d.name, offered.join(", "))
                    })
                    .collect::<Vec<_>>()
                    .join("; ")
            );
        }
        description.push_str("\nServices and actions:");
        for s in &self.services {
            let _ = write!(description, "\n- {}: {}", s.id, s.description);
            list_actions(&mut description, &s.actions, "\n  - ");
        }
        self.device_tool_full(
            TOOLKIT_TOOL.into(),
            description,
            [
                Property::required(
                    "service_id",
                    Schema::one_of("the service", self.services.iter().map(|s| s.id)),
                ),
                Property::required(
                    "action",
                    Schema::string("the action of that service, as listed in the tool description"),
                ),
            ],
            self.services.iter().flat_map(|s| s.actions.iter()),
        )
    }

    fn direct_spec_full(&self, s: &'static ServiceSpec) -> ToolSpec {
        let mut description = format!("{} Actions:", s.description);
        list_actions(&mut description, &s.actions, "\n- ");
        self.device_tool_full(
            format!("{DIRECT_PREFIX}{}", s.id),
            description,
            [Property::required(
                "action",
                Schema::one_of("the action", s.actions.iter().map(|a| a.name)),
            )],
            s.actions.iter(),
        )
    }

    /// A tool over device actions: `device` (with several phones), the
    /// properties that choose the action, and `parameters`, the union of
    /// those of `actions`.
    fn device_tool_full<'a>(
        &self,
        name: String,
        description: String,
        choice: impl IntoIterator<Item = Property>,
        actions: impl Iterator<Item = &'a droidwarden_services::ActionSpec>,
    ) -> ToolSpec {
        let mut props: Vec<Property> = self
            .device_prop("which phone; may be left out when only one phone offers the service")
            .into_iter()
            .collect();
        props.extend(choice);
        props.push(Property::optional("parameters", flattened_params(actions)));
        ToolSpec {
            name,
            description,
            parameters: Schema::object("", props).into(),
        }
    }

    /// Stage one of the pipeline: parse and validate a raw tool call.
    ///
    /// # Errors
    /// A [`WireError`] for the model: unknown tool (`invalid_request`),
    /// arguments that are not a JSON object or fail validation
    /// (`invalid_params`), an unknown service or action, a device that does
    /// not exist or does not offer the service.
    pub fn plan(&self, call: &ToolCall) -> Result<Planned, WireError> {
        let args = parse_arguments(&call.arguments)?;
        match call.name.as_str() {
            TIME_TOOL if self.has(TIME_TOOL) => {
                only_keys(&args, &[])?;
                Ok(Planned::CurrentTime)
            }
            CALCULATOR_TOOL if self.has(CALCULATOR_TOOL) => {
                only_keys(&args, &["expression"])?;
                let expression = str_arg(&args, "expression")?;
                Ok(Planned::Calculator {
                    expression: expression.to_owned(),
                })
            }
            DESCRIBE_TOOL if self.has(DESCRIBE_TOOL) => {
                only_keys(&args, &["service_id", "action"])?;
                let service = str_arg(&args, "service_id")?;
                let action = match args.get("action") {
                    None | Some(Value::Null) => None,
                    Some(Value::String(a)) if a.trim().is_empty() => None,
                    Some(Value::String(a)) => Some(a.as_str()),
                    Some(_) => return Err(invalid("\"action\" must be a string")),
                };
                let spec = match action {
                    Some(a) => Catalogue::get().action(service, a)?.0,
                    None => Catalogue::get().service(service)?,
                };
                if !self.services.iter().any(|s| s.id == spec.id) {
                    return Err(self.not_offered(spec.id));
                }
                Ok(Planned::Describe {
                    service: spec.id.to_owned(),
                    action: action.map(str::to_owned),
                })
            }
            LIST_SKILLS_TOOL if self.has(LIST_SKILLS_TOOL) => {
                only_keys(&args, &[])?;
                Ok(Planned::ListSkills)
            }
            READ_SKILL_TOOL if self.has(READ_SKILL_TOOL) => {
                only_keys(&args, &["skill", "file"])?;
                let skill = str_arg(&args, "skill")?.to_owned();
                let file = match args.get("file") {
                    None | Some(Value::Null) => None,
                    Some(Value::String(f)) => Some(f.clone()),
                    Some(_) => return Err(invalid("\"file\" must be a string")),
                };
                Ok(Planned::ReadSkill { skill, file })
            }
            INVOKE_SKILL_TOOL if self.has(INVOKE_SKILL_TOOL) => {
                only_keys(&args, &["skill", "input"])?;
                self.plan_invoke(&args)
            }
            name if name.starts_with(crate::delegation::DELEGATE_PREFIX) && self.has(name) => {
                only_keys(&args, &["task", "context", "mode"])?;
                plan_delegate(name, &args)
            }
            crate::delegation::STATUS_TOOL if self.has(crate::delegation::STATUS_TOOL) => {
                only_keys(&args, &["task_id"])?;
                let task_id = str_arg(&args, "task_id")?.trim();
                if crate::ids::check_id(task_id).is_err() {
                    return Err(invalid(
                        "\"task_id\" must be a task id as the delegate call returned it",
                    ));
                }
                Ok(Planned::DelegationStatus {
                    task_id: task_id.to_owned(),
                })
            }
            name if self.scope.is_some()
                && (name.starts_with(crate::delegation::DELEGATE_PREFIX)
                    || name == crate::delegation::STATUS_TOOL) =>
            {
                Err(WireError::new(
                    ErrorCode::PermissionDenied,
                    format!(
                        "delegation depth limit reached: {} runs as a delegated agent or skill, and delegation is one level deep, so {:?} is refused; do the task with your own tools or answer with what you found",
                        self.scope.as_ref().map_or("this run", |s| s.name.as_str()),
                        name.chars().take(80).collect::<String>()
                    ),
                ))
            }
            name if self.extras.iter().any(|(n, _)| n == name) => {
                let risk = self
                    .extras
                    .iter()
                    .find(|(n, _)| n == name)
                    .map_or(Risk::High, |(_, r)| *r);
                Ok(Planned::Extra {
                    tool: name.to_owned(),
                    arguments: Value::Object(args),
                    risk,
                })
            }
            TOOLKIT_TOOL if self.mode == ToolMode::Toolkit && self.has(TOOLKIT_TOOL) => {
                let args = hoist(args, &["device", "service_id", "action"]);
                let service = str_arg(&args, "service_id")?;
                self.plan_device(&args, service)
            }
            name if self.mode == ToolMode::Direct && self.has(name) => {
                let args = hoist(args, &["device", "action"]);
                let service = name.strip_prefix(DIRECT_PREFIX).unwrap_or(name);
                self.plan_device(&args, service)
            }
            other => Err(WireError::new(
                if self.scope.is_some() {
                    ErrorCode::PermissionDenied
                } else {
                    ErrorCode::InvalidRequest
                },
                format!(
                    "unknown tool {:?}{}; available tools: {}",
                    other.chars().take(80).collect::<String>(),
                    self.scope
                        .as_ref()
                        .map(|s| format!(" (not in the {})", s.label))
                        .unwrap_or_default(),
                    self.specs
                        .iter()
                        .map(|s| s.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )),
        }
    }

    fn plan_invoke(&self, args: &Map<String, Value>) -> Result<Planned, WireError> {
        let name = str_arg(args, "skill")?;
        let Some(skills) = &self.skills else {
            return Err(WireError::new(
                ErrorCode::NotFound,
                "no skills are available",
            ));
        };
        let skill = skills
            .enabled_skill(name)
            .map_err(|m| WireError::new(ErrorCode::NotFound, m))?;
        let depth = self.depth + 1;
        if depth > self.max_depth {
            return Err(WireError::new(
                ErrorCode::InvalidRequest,
                format!(
                    "skill depth limit reached: {} skills deep already (limit {}); finish this skill without invoking {name}",
                    self.depth, self.max_depth
                ),
            ));
        }
        let input = match args.get("input") {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(v) => v.clone(),
        };
        skill.check_input(&input).map_err(invalid)?;
        let allowed = skill.resolve_tools().map_err(|unknown| {
            WireError::new(
                ErrorCode::InvalidRequest,
                format!(
                    "skill {name} cannot run: its allowed-tools name tools that do not exist: {}",
                    unknown.join(", ")
                ),
            )
        })?;
        Ok(Planned::InvokeSkill {
            skill: skill.name.clone(),
            input,
            risk: skill.risk(&allowed),
            depth,
        })
    }

    fn has(&self, name: &str) -> bool {
        self.specs.iter().any(|s| s.name == name)
    }

    fn plan_device(&self, args: &Map<String, Value>, service: &str) -> Result<Planned, WireError> {
        let action = str_arg(args, "action")?;
        let (spec, action_spec) = Catalogue::get().action(service, action)?;
        if let Some(scope) = &self.scope
            && !scope.allowed.allows(spec.id, action_spec.name)
        {
            return Err(WireError::new(
                ErrorCode::PermissionDenied,
                format!(
                    "{}.{} is not in the {}; it may use: {}",
                    spec.id,
                    action_spec.name,
                    scope.label,
                    scope.allowed.describe()
                ),
            ));
        }
        if !self.services.iter().any(|s| s.id == spec.id) {
            return Err(self.not_offered(spec.id));
        }
        let teach = |mut e: WireError| {
            let _ = write!(
                e.message,
                "; {}.{} takes {}",
                spec.id,
                action_spec.name,
                brief(&action_spec.params_schema().to_json())
            );
            e
        };
        // Strict-mode models fill every key, unused ones with null: drop
        // them. Dialects without open objects send the object as JSON text.
        let given = match args.get("parameters") {
            Some(Value::String(text)) if text.trim().is_empty() => Value::Null,
            Some(Value::String(text)) => match serde_json::from_str::<Value>(text) {
                Ok(v @ Value::Object(_)) => v,
                _ => {
                    return Err(teach(invalid(
                        "\"parameters\" must be a JSON object (or its JSON text)",
                    )));
                }
            },
            Some(v) => v.clone(),
            None => Value::Null,
        };
        let params: Map<String, Value> = match given {
            Value::Null => Map::new(),
            Value::Object(m) => m.into_iter().filter(|(_, v)| !v.is_null()).collect(),
            other => {
                return Err(teach(invalid(format!(
                    "\"parameters\" must be an object, got {}",
                    droidwarden_services::schema::json_type(&other)
                ))));
            }
        };
        let command = Catalogue::get()
            .parse(spec.id, action_spec.name, &Value::Object(params))
            .map_err(|e| teach(e.into()))?;
        let device = self.pick_device(args, spec.id)?;
        Ok(Planned::Device {
            device,
            call: DeviceCall(command),
            risk: action_spec.risk,
            mutates: action_spec.mutates,
        })
    }

    fn pick_device(
        &self,
        args: &Map<String, Value>,
        service: &str,
    ) -> Result<Option<String>, WireError> {
        let offers = |d: &&DeviceSummary| d.services.iter().any(|s| s == service);
        match args.get("device") {
            Some(Value::String(name)) => {
                let Some(d) = self.devices.iter().find(|d| &d.name == name) else {
                    return Err(WireError::new(
                        ErrorCode::DeviceNotFound,
                        format!(
                            "no phone named {:?}; phones: {}",
                            name.chars().take(64).collect::<String>(),
                            self.device_names()
                        ),
                    ));
                };
                if !offers(&d) {
                    return Err(WireError::new(
                        ErrorCode::UnsupportedAction,
                        format!("phone {name} does not offer {service}"),
                    ));
                }
                Ok(Some(d.name.clone()))
            }
            None | Some(Value::Null) => {
                let candidates: Vec<&DeviceSummary> = self.devices.iter().filter(offers).collect();
                match candidates.as_slice() {
                    [only] => Ok(Some(only.name.clone())),
                    _ => Err(WireError::new(
                        ErrorCode::DeviceAmbiguous,
                        format!(
                            "several phones offer {service}; set \"device\" to one of: {}",
                            candidates
                                .iter()
                                .map(|d| d.name.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    )),
                }
            }
            Some(other) => Err(invalid(format!(
                "\"device\" must be a string, got {}",
                droidwarden_services::schema::json_type(other)
            ))),
        }
    }

    /// The error for a service no phone of this run offers.
    fn not_offered(&self, service: &str) -> WireError {
        WireError::new(
            ErrorCode::UnknownService,
            format!(
                "no configured phone offers {service}; available services: {}",
                self.services
                    .iter()
                    .map(|s| s.id)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
    }

    fn device_names(&self) -> String {
        self.devices
            .iter()
            .map(|d| d.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// A `delegate_to_<agent>` call, checked.
fn plan_delegate(tool: &str, args: &Map<String, Value>) -> Result<Planned, WireError> {
    let agent = tool
        .strip_prefix(crate::delegation::DELEGATE_PREFIX)
        .unwrap_or(tool)
        .to_owned();
    let max = crate::delegation::MAX_TASK_CHARS;
    let task = str_arg(args, "task")?.trim();
    if task.is_empty() {
        return Err(invalid("\"task\" must not be empty"));
    }
    let context = match args.get("context") {
        None | Some(Value::Null) => None,
        Some(Value::String(c)) if c.trim().is_empty() => None,
        Some(Value::String(c)) => Some(c.clone()),
        Some(_) => return Err(invalid("\"context\" must be a string")),
    };
    if task.chars().count() > max || context.as_ref().is_some_and(|c| c.chars().count() > max) {
        return Err(invalid(format!(
            "\"task\" and \"context\" are limited to {max} characters each"
        )));
    }
    let mode = match args.get("mode") {
        None | Some(Value::Null) => None,
        Some(Value::String(m)) => Some(
            crate::delegation::DelegateMode::parse(m)
                .ok_or_else(|| invalid("\"mode\" must be \"wait\" or \"background\""))?,
        ),
        Some(_) => return Err(invalid("\"mode\" must be \"wait\" or \"background\"")),
    };
    Ok(Planned::Delegate {
        agent,
        task: task.to_owned(),
        context,
        mode,
    })
}

fn invalid(message: impl Into<String>) -> WireError {
    WireError::new(ErrorCode::InvalidParams, message)
}

/// Whether a call's arguments are something other than a JSON object's
/// text (empty text counts as `{}`).
pub fn malformed_arguments(text: &str) -> bool {
    !text.trim().is_empty() && !matches!(serde_json::from_str::<Value>(text), Ok(Value::Object(_)))
}

fn parse_arguments(text: &str) -> Result<Map<String, Value>, WireError> {
    if text.trim().is_empty() {
        return Ok(Map::new());
    }
    droidwarden_services::schema::object_from_slice(text.as_bytes()).map_err(|e| match e {
        NotAnObject::Other(got) => {
            invalid(format!("tool arguments must be a JSON object, got {got}"))
        }
        NotAnObject::NotJson(e) => invalid(format!("tool arguments are not valid JSON: {e}")),
    })
}

fn only_keys(args: &Map<String, Value>, allowed: &[&str]) -> Result<(), WireError> {
    match args.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(invalid(format!(
            "unknown argument {:?}; expected: {}",
            k.chars().take(64).collect::<String>(),
            if allowed.is_empty() {
                "none".to_owned()
            } else {
                allowed.join(", ")
            }
        ))),
        None => Ok(()),
    }
}

/// A string argument: missing (or null) and of another type are told
/// apart, so the model fixes the right thing.
fn str_arg<'a>(args: &'a Map<String, Value>, key: &str) -> Result<&'a str, WireError> {
    match args.get(key) {
        Some(Value::String(s)) => Ok(s),
        None | Some(Value::Null) => Err(invalid(format!("\"{key}\" is required (a string)"))),
        Some(other) => Err(invalid(format!(
            "\"{key}\" must be a string, got {}",
            droidwarden_services::schema::json_type(other)
        ))),
    }
}

/// Said once in the index: what the risk marks mean.
const RISK_NOTE: &str = " [medium], [high], [critical]: may wait for the user's approval.";

/// The index of `actions`, comma-separated: `name(params)[risk]`,
/// parameters by name (`*` required), risk only when above low. No
/// descriptions: the names say what an action does, `describe_action`
/// says the rest, and they would double the index.
fn index_actions(out: &mut String, actions: &[droidwarden_services::ActionSpec]) {
    for (i, a) in actions.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(a.name);
        if !a.params.is_empty() {
            let params: Vec<String> = a
                .params
                .iter()
                .map(|p| format!("{}{}", p.name, if p.required { "*" } else { "" }))
                .collect();
            let _ = write!(out, "({})", params.join(","));
        }
        if a.risk > Risk::Low {
            let _ = write!(out, "[{}]", a.risk.as_str());
        }
    }
}

/// `describe_action`: one action of `service` or all of them, in full.
fn describe(service: &str, action: Option<&str>) -> Result<Value, WireError> {
    let spec = Catalogue::get().service(service)?;
    let one = |a: &droidwarden_services::ActionSpec| {
        json!({
            "action": a.name,
            "description": a.description,
            "risk": a.risk,
            "changes_the_phone": a.mutates,
            "parameters": a.params_schema().to_json(),
            "example": {"service_id": spec.id, "action": a.name, "parameters": a.example},
        })
    };
    match action {
        Some(name) => {
            let (_, a) = Catalogue::get().action(service, name)?;
            Ok(one(a))
        }
        None => Ok(json!({
            "service_id": spec.id,
            "description": spec.description,
            "actions": spec.actions.iter().map(one).collect::<Vec<_>>(),
        })),
    }
}

/// A schema's properties in short, for an error that shows the model what
/// to send: `{"level": "integer 0..100, required", "stream": "string, one
/// of \"music\", …"}`; `{}` when there are none.
fn brief(schema: &Value) -> Value {
    let required: Vec<&str> = schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let mut out = Map::new();
    for (key, node) in schema["properties"].as_object().into_iter().flatten() {
        let mut text = match &node["type"] {
            Value::String(t) => t.clone(),
            Value::Array(ts) => ts
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(" or "),
            _ => "any".to_owned(),
        };
        match (node["minimum"].as_i64(), node["maximum"].as_i64()) {
            (Some(lo), Some(hi)) => {
                let _ = write!(text, " {lo}..{hi}");
            }
            (Some(lo), None) => {
                let _ = write!(text, " >= {lo}");
            }
            (None, Some(hi)) => {
                let _ = write!(text, " <= {hi}");
            }
            (None, None) => {}
        }
        if let Some(values) = node["enum"].as_array().filter(|v| v.len() <= 12) {
            let values: Vec<String> = values.iter().map(Value::to_string).collect();
            let _ = write!(text, ", one of {}", values.join(", "));
        }
        if required.contains(&key.as_str()) {
            text.push_str(", required");
        }
        out.insert(key.clone(), Value::String(text));
    }
    Value::Object(out)
}

/// A device tool's arguments with the action's parameters put where they
/// belong: a small model often writes them beside `service_id` and
/// `action` instead of inside `parameters`. Keys other than `keep` and
/// `parameters` move into `parameters` (which the catalogue then checks
/// like any other); when `parameters` is there too, they are merged into
/// it unless it names them already.
fn hoist(mut args: Map<String, Value>, keep: &[&str]) -> Map<String, Value> {
    let stray: Vec<String> = args
        .keys()
        .filter(|k| !keep.contains(&k.as_str()) && k.as_str() != "parameters")
        .cloned()
        .collect();
    if stray.is_empty() {
        return args;
    }
    let mut params = match args.remove("parameters") {
        Some(Value::Object(m)) => m,
        None | Some(Value::Null) => Map::new(),
        // Anything else is reported by the planner as it is.
        Some(other) => {
            args.insert("parameters".into(), other);
            return args;
        }
    };
    for k in stray {
        if let Some(v) = args.remove(&k) {
            params.entry(k).or_insert(v);
        }
    }
    args.insert("parameters".into(), Value::Object(params));
    args
}

/// One line per action (`{bullet}name(params): description`), for tool
/// descriptions.
fn list_actions(out: &mut String, actions: &[droidwarden_services::ActionSpec], bullet: &str) {
    for a in actions {
        let _ = write!(
            out,
            "{bullet}{}{}: {}",
            a.name,
            param_list(a),
            a.description
        );
    }
}

fn param_list(a: &droidwarden_services::ActionSpec) -> String {
    if a.params.is_empty() {
        return String::new();
    }
    format!(
        " {{{}}}",
        a.params
            .iter()
            .map(|p| format!("{}{}", p.name, if p.required { "*" } else { "" }))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// The union of the parameters of `actions`, all optional, each described
/// with the actions that take it (`*`: required there).
fn flattened_params<'a>(
    actions: impl Iterator<Item = &'a droidwarden_services::ActionSpec>,
) -> Schema {
    let mut merged: BTreeMap<&'static str, (Schema, Vec<String>)> = BTreeMap::new();
    for a in actions {
        for p in &a.params {
            let node = p.schema.clone();
            let used = format!("{}{}", a.name, if p.required { "*" } else { "" });
            match merged.get_mut(p.name) {
                Some((existing, users)) => {
                    schema::merge(existing, &node);
                    if !users.contains(&used) {
                        users.push(used);
                    }
                }
                None => {
                    merged.insert(p.name, (node, vec![used]));
                }
            }
        }
    }
    let props = merged
        .into_iter()
        .map(|(name, (mut node, users))| {
            node.description = if node.description.is_empty() {
                format!("for {}", users.join(", ")).into()
            } else {
                format!("{} (for {})", node.description, users.join(", ")).into()
            };
            Property::optional(name, node)
        })
        .collect();
    Schema::object(
        "the action's parameters; * marks a parameter the action requires",
        props,
    )
}

#[cfg(test)]
mod tests;
