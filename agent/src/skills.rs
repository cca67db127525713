//! Skills: packaged know-how the agent can list, read and run.
//!
//! A skill is a directory holding a `SKILL.md` in the public Agent Skills
//! layout: YAML front matter, then a Markdown body of instructions, and
//! optionally a `references/` directory of files the skill may read.
//!
//! ```text
//! ---
//! name: bedtime                     # lowercase-hyphenated, = the directory name
//! description: Quiet the phone for the night.
//! allowed-tools: audio_automation.ringer_mode screen_control.set_brightness
//! risk: medium                      # ours: low | medium | high
//! max_iterations: 6                 # ours
//! timeout_s: 120                    # ours
//! parameters: {type: object, properties: {device: {type: string}}}   # ours
//! metadata: {author: home}
//! ---
//! Set the ringer to vibrate, then …
//! ```
//!
//! This module owns the format, the loader (blocking file I/O: the daemon
//! calls [`SkillSet::load`] off the async runtime) and the rules that turn
//! `allowed-tools` into the only tools a skill's run gets
//! ([`AllowedTools`]). Running a skill is the driver's job
//! ([`crate::Agent`]); the graph sees `invoke_skill` as one more tool call.
//!
//! Choices, and why:
//!
//! * **Unknown front-matter keys are errors.** A misspelt `alowed-tools`
//!   would otherwise silently give a skill no tools, or a misspelt `risk`
//!   would lower its approval level. The spec's own optional keys `license`
//!   and `compatibility` are accepted and kept.
//! * **No `allowed-tools` means no tools**: the skill is instructions only.
//!   A skill is trusted with exactly what it names, never with everything.
//! * **Names in `allowed-tools` are checked when the skill is invoked**, not
//!   at load, so one catalogue change does not hide a skill from `skills
//!   show`; the invocation fails with the names that do not exist.

use droidwarden_services::{Catalogue, Risk};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Largest `SKILL.md` accepted, in bytes. A skill body goes into a model
/// prompt: anything near this is a mistake or an attack.
pub const MAX_SKILL_BYTES: u64 = 256 * 1024;
/// Largest reference file [`SkillSet::read`] returns, in bytes.
pub const MAX_REFERENCE_BYTES: u64 = 256 * 1024;
/// Longest skill name (the Agent Skills limit).
pub const MAX_NAME_LEN: usize = 64;
/// Longest description (the Agent Skills limit).
pub const MAX_DESCRIPTION_LEN: usize = 1024;
/// Most skills loaded from one directory.
pub const MAX_SKILLS_PER_DIR: usize = 500;

/// Tool name: list the skills.
pub const LIST_SKILLS_TOOL: &str = "list_skills";
/// Tool name: read a skill's instructions or one of its references.
pub const READ_SKILL_TOOL: &str = "read_skill";
/// Tool name: run a skill as a child run.
pub const INVOKE_SKILL_TOOL: &str = "invoke_skill";

/// The skills shipped in the binary: (directory name, SKILL.md).
const BUILTIN: &[(&str, &str)] = &[
    ("bedtime", include_str!("skills/builtin/bedtime/SKILL.md")),
    (
        "find-my-phone",
        include_str!("skills/builtin/find-my-phone/SKILL.md"),
    ),
    (
        "phone-health-report",
        include_str!("skills/builtin/phone-health-report/SKILL.md"),
    ),
    (
        "leave-home",
        include_str!("skills/builtin/leave-home/SKILL.md"),
    ),
    (
        "quiet-hours",
        include_str!("skills/builtin/quiet-hours/SKILL.md"),
    ),
];

/// Where a skill came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "path", rename_all = "snake_case")]
pub enum SkillSource {
    /// Shipped in the binary.
    Builtin,
    /// A `SKILL.md` on disk.
    File(PathBuf),
}

/// The front matter as written (the spec's keys and ours).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawFrontMatter {
    name: String,
    description: String,
    #[serde(default)]
    allowed_tools: Option<ToolList>,
    #[serde(default)]
    metadata: Option<BTreeMap<String, Value>>,
    #[serde(default)]
    license: Option<String>,
    #[serde(default)]
    compatibility: Option<String>,
    #[serde(default)]
    risk: Option<Risk>,
    #[serde(default, alias = "max_iterations")]
    max_iterations: Option<u32>,
    #[serde(default, alias = "timeout_s")]
    timeout_s: Option<f64>,
    #[serde(default)]
    parameters: Option<Value>,
}

/// `allowed-tools`: the spec's space-delimited string, or a YAML list.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum ToolList {
    Text(String),
    List(Vec<String>),
}

/// One skill, parsed and checked.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Skill {
    /// Its name (= its directory name).
    pub name: String,
    /// What it does and when to use it: all the model sees before it reads
    /// the skill.
    pub description: String,
    /// The `allowed-tools` entries as written.
    pub allowed_tools: Vec<String>,
    /// The declared risk, if any (else the highest risk of its tools).
    pub risk: Option<Risk>,
    /// Model calls its run may make.
    pub max_iterations: Option<u32>,
    /// Longest its run may take.
    #[serde(serialize_with = "ser_secs")]
    pub timeout: Option<Duration>,
    /// JSON Schema of its input, if declared.
    pub parameters: Option<Value>,
    /// Free-form `metadata`.
    pub metadata: BTreeMap<String, Value>,
    /// `license`, if given.
    pub license: Option<String>,
    /// `compatibility`, if given.
    pub compatibility: Option<String>,
    /// The instructions (the Markdown body).
    pub body: String,
    /// Files under `references/`, relative names.
    pub references: Vec<String>,
    /// Where it came from.
    pub source: SkillSource,
    /// Whether `[agent.skills] enabled` lets the agent use it.
    pub enabled: bool,
}

fn ser_secs<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    d.map(|d| d.as_secs_f64()).serialize(s)
}

/// A skill that could not be loaded: the file and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LoadProblem {
    /// The file or directory.
    pub path: PathBuf,
    /// What is wrong with it.
    pub reason: String,
}

/// Whether `name` is a valid skill name: 1 to 64 characters of lowercase
/// letters, digits and single hyphens, not starting or ending with one.
///
/// ```
/// use droidwarden_agent::skills::valid_name;
/// assert!(valid_name("find-my-phone"));
/// assert!(!valid_name("../etc"));
/// assert!(!valid_name("Bedtime"));
/// assert!(!valid_name("a--b"));
/// ```
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
}

/// Split `text` into its YAML front matter and body.
fn split_front_matter(text: &str) -> Result<(&str, &str), String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
        .ok_or("SKILL.md must start with a YAML front matter block (a line \"---\")")?;
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return Ok((&rest[..offset], &rest[offset + line.len()..]));
        }
        offset += line.len();
    }
    Err("the front matter is not closed by a line \"---\"".into())
}

impl Skill {
    /// Parse a `SKILL.md` found in directory `dir_name`.
    ///
    /// # Errors
    /// A reason naming the problem: no or unclosed front matter, YAML that
    /// does not parse, an unknown or mistyped key, a name that is invalid
    /// or differs from the directory, an empty or over-long description,
    /// bad limits, or `parameters` that is not an object schema.
    pub fn parse(dir_name: &str, text: &str, source: SkillSource) -> Result<Skill, String> {
        let (yaml, body) = split_front_matter(text)?;
        let raw: RawFrontMatter =
            serde_saphyr::from_str(yaml).map_err(|e| format!("front matter: {e}"))?;
        if !valid_name(&raw.name) {
            return Err(format!(
                "name {:?} must be 1 to {MAX_NAME_LEN} lowercase letters, digits and single hyphens",
                raw.name.chars().take(80).collect::<String>()
            ));
        }
        if raw.name != dir_name {
            return Err(format!(
                "name {:?} must equal the directory name {:?}",
                raw.name, dir_name
            ));
        }
        let description = raw.description.trim().to_owned();
        if description.is_empty() {
            return Err("description must not be empty".into());
        }
        if description.chars().count() > MAX_DESCRIPTION_LEN {
            return Err(format!(
                "description is longer than {MAX_DESCRIPTION_LEN} characters"
            ));
        }
        let allowed_tools: Vec<String> = match raw.allowed_tools {
            None => Vec::new(),
            Some(ToolList::Text(t)) => t.split_whitespace().map(str::to_owned).collect(),
            Some(ToolList::List(l)) => l
                .into_iter()
                .flat_map(|t| t.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
                .collect(),
        };
        if allowed_tools.len() > 200 {
            return Err("allowed-tools names more than 200 tools".into());
        }
        if let Some(n) = raw.max_iterations
            && !(1..=100).contains(&n)
        {
            return Err(format!("max_iterations must be 1 to 100, got {n}"));
        }
        let timeout = match raw.timeout_s {
            None => None,
            Some(t) if t > 0.0 && t <= 3600.0 => Some(Duration::from_secs_f64(t)),
            Some(t) => {
                return Err(format!(
                    "timeout_s must be more than 0 and at most 3600, got {t}"
                ));
            }
        };
        if let Some(p) = &raw.parameters
            && p.get("type").and_then(Value::as_str) != Some("object")
        {
            return Err("parameters must be a JSON Schema with \"type\": \"object\"".into());
        }
        let body = body.trim().to_owned();
        if body.is_empty() {
            return Err(
                "the instructions (the Markdown body after the front matter) are empty".into(),
            );
        }
        Ok(Skill {
            name: raw.name,
            description,
            allowed_tools,
            risk: raw.risk,
            max_iterations: raw.max_iterations,
            timeout,
            parameters: raw.parameters,
            metadata: raw.metadata.unwrap_or_default(),
            license: raw.license,
            compatibility: raw.compatibility,
            body,
            references: Vec::new(),
            source,
            enabled: true,
        })
    }

    /// Resolve `allowed-tools` against the catalogue.
    ///
    /// # Errors
    /// The entries that name no tool, service or action.
    pub fn resolve_tools(&self) -> Result<AllowedTools, Vec<String>> {
        AllowedTools::resolve(&self.allowed_tools)
    }

    /// The skill's risk: the declared one, else the highest risk of the
    /// catalogue actions it may use (`low` when it may use none). Invoking
    /// other skills does not raise it: each invocation is checked on its
    /// own.
    pub fn risk(&self, allowed: &AllowedTools) -> Risk {
        self.risk.unwrap_or_else(|| allowed.max_risk())
    }

    /// Check `input` against the declared `parameters`: an object, the
    /// required keys present, no unknown keys when `additionalProperties`
    /// is false, and the basic JSON type of each known property.
    ///
    /// # Errors
    /// A message naming the key.
    pub fn check_input(&self, input: &Value) -> Result<(), String> {
        let Value::Object(obj) = input else {
            return Err(format!(
                "input must be a JSON object, got {}",
                droidwarden_services::schema::json_type(input)
            ));
        };
        let Some(schema) = &self.parameters else {
            return Ok(());
        };
        let props = schema.get("properties").and_then(Value::as_object);
        if let Some(required) = schema.get("required").and_then(Value::as_array) {
            for key in required.iter().filter_map(Value::as_str) {
                if !obj.contains_key(key) {
                    return Err(format!("input.{key} is required by skill {}", self.name));
                }
            }
        }
        for (key, value) in obj {
            let Some(prop) = props.and_then(|p| p.get(key)) else {
                if schema.get("additionalProperties") == Some(&Value::Bool(false)) {
                    return Err(format!(
                        "input.{key} is not a parameter of skill {}; parameters: {}",
                        self.name,
                        props
                            .map(|p| p.keys().cloned().collect::<Vec<_>>().join(", "))
                            .unwrap_or_default()
                    ));
                }
                continue;
            };
            let want = prop.get("type").and_then(Value::as_str);
            let ok = match want {
                Some("string") => value.is_string(),
                Some("integer") => value.is_i64() || value.is_u64(),
                Some("number") => value.is_number(),
                Some("boolean") => value.is_boolean(),
                Some("object") => value.is_object(),
                Some("array") => value.is_array(),
                _ => true,
            };
            if !ok {
                return Err(format!(
                    "input.{key} must be of type {}, got {}",
                    want.unwrap_or("?"),
                    droidwarden_services::schema::json_type(value)
                ));
            }
            if let Some(options) = prop.get("enum").and_then(Value::as_array)
                && !options.contains(value)
            {
                return Err(format!(
                    "input.{key} must be one of {}",
                    Value::from(options.clone())
                ));
            }
        }
        Ok(())
    }

    /// The skill as JSON (for `droidwarden skills --json` and the tools).
    pub fn summary_json(&self) -> Value {
        json!({
            "name": self.name,
            "description": self.description,
            "allowed_tools": self.allowed_tools,
            "risk": self.resolve_tools().ok().map(|a| self.risk(&a)),
            "enabled": self.enabled,
            "builtin": self.source == SkillSource::Builtin,
            "source": self.source,
        })
    }
}

/// What a skill's run may use, resolved from `allowed-tools`.
///
/// Entries: a service id or node type (`battery`, `batteryMonitor`) or
/// `service.*` for all its actions; `service.action` for one action;
/// `current_time`, `calculator`; `list_skills`, `read_skill`,
/// `invoke_skill` (skills invoking skills, up to the depth limit).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllowedTools {
    /// Service id → its allowed actions (`None`: all of them).
    pub services: BTreeMap<String, Option<BTreeSet<String>>>,
    /// `current_time`.
    pub current_time: bool,
    /// `calculator`.
    pub calculator: bool,
    /// `list_skills` and `read_skill`.
    pub read_skills: bool,
    /// `invoke_skill`.
    pub invoke_skill: bool,
}

impl AllowedTools {
    /// Resolve entries against the catalogue.
    ///
    /// # Errors
    /// The entries that name nothing.
    pub fn resolve(entries: &[String]) -> Result<Self, Vec<String>> {
        let catalogue = Catalogue::get();
        let mut out = Self::default();
        let mut unknown = Vec::new();
        for entry in entries {
            match entry.as_str() {
                crate::tools::names::TIME_TOOL => out.current_time = true,
                crate::tools::names::CALCULATOR_TOOL => out.calculator = true,
                LIST_SKILLS_TOOL | READ_SKILL_TOOL => out.read_skills = true,
                INVOKE_SKILL_TOOL => out.invoke_skill = true,
                e => {
                    let (service, action) = match e.split_once('.') {
                        Some((s, "*")) => (s, None),
                        Some((s, a)) => (s, Some(a)),
                        None => (e, None),
                    };
                    match (catalogue.service(service), action) {
                        (Ok(spec), None) => {
                            out.services.insert(spec.id.to_owned(), None);
                        }
                        (Ok(spec), Some(a)) if spec.action(a).is_some() => {
                            let slot = out
                                .services
                                .entry(spec.id.to_owned())
                                .or_insert_with(|| Some(BTreeSet::new()));
                            if let Some(set) = slot {
                                set.insert(a.to_owned());
                            }
                        }
                        _ => unknown.push(e.chars().take(80).collect()),
                    }
                }
            }
        }
        if unknown.is_empty() {
            Ok(out)
        } else {
            Err(unknown)
        }
    }

    /// Whether `service.action` may run.
    pub fn allows(&self, service: &str, action: &str) -> bool {
        match self.services.get(service) {
            Some(None) => true,
            Some(Some(actions)) => actions.contains(action),
            None => false,
        }
    }

    /// Whether any action of `service` may run.
    pub fn allows_service(&self, service: &str) -> bool {
        self.services.contains_key(service)
    }

    /// The highest risk of the catalogue actions allowed (`low` if none).
    pub fn max_risk(&self) -> Risk {
        let catalogue = Catalogue::get();
        self.services
            .iter()
            .filter_map(|(s, actions)| {
                let spec = catalogue.service(s).ok()?;
                Some(match actions {
                    None => spec.max_risk(),
                    Some(set) => set
                        .iter()
                        .filter_map(|a| spec.action(a).map(|x| x.risk))
                        .max()
                        .unwrap_or(Risk::Low),
                })
            })
            .max()
            .unwrap_or(Risk::Low)
    }

    /// The entries, written back (for error messages).
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = self
            .services
            .iter()
            .flat_map(|(s, actions)| match actions {
                None => vec![format!("{s}.*")],
                Some(set) => set.iter().map(|a| format!("{s}.{a}")).collect(),
            })
            .collect();
        for (on, name) in [
            (self.current_time, crate::tools::names::TIME_TOOL),
            (self.calculator, crate::tools::names::CALCULATOR_TOOL),
            (self.read_skills, "list_skills, read_skill"),
            (self.invoke_skill, INVOKE_SKILL_TOOL),
        ] {
            if on {
                parts.push(name.to_owned());
            }
        }
        if parts.is_empty() {
            "none".into()
        } else {
            parts.join(", ")
        }
    }
}

/// The skills the agent knows: built-in ones, overridden by files of the
/// same name, plus what failed to load.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SkillSet {
    skills: BTreeMap<String, Arc<Skill>>,
    problems: Vec<LoadProblem>,
}

/// Whether a skill name matches an `enabled` list (`"*"` matches all).
fn enabled_by(list: &[String], name: &str) -> bool {
    list.iter().any(|e| e == "*" || e == name)
}

impl SkillSet {
    /// The built-in skills only, all enabled.
    pub fn builtin() -> Self {
        Self::load(&[], &["*".to_owned()])
    }

    /// Load the built-in skills, then every `<dir>/<name>/SKILL.md` in
    /// `dirs` in order (a later one of the same name replaces an earlier
    /// one, and every file replaces a built-in). A directory that does not
    /// exist is skipped silently; every other problem is recorded in
    /// [`SkillSet::problems`] and the skill skipped. Blocking file I/O.
    pub fn load(dirs: &[PathBuf], enabled: &[String]) -> Self {
        let mut set = Self::default();
        for (dir, text) in BUILTIN {
            match Skill::parse(dir, text, SkillSource::Builtin) {
                Ok(skill) => {
                    set.skills.insert(skill.name.clone(), Arc::new(skill));
                }
                Err(reason) => set.problems.push(LoadProblem {
                    path: PathBuf::from(format!("builtin:{dir}")),
                    reason,
                }),
            }
        }
        for dir in dirs {
            set.load_dir(dir);
        }
        for skill in set.skills.values_mut() {
            Arc::make_mut(skill).enabled = enabled_by(enabled, &skill.name);
        }
        set
    }

    fn load_dir(&mut self, dir: &Path) {
        let entries = match std::fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(e) => {
                self.problem(dir, format!("cannot read the directory: {e}"));
                return;
            }
        };
        let mut names: Vec<(String, PathBuf)> = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                self.problem(&path, "the directory name is not UTF-8".into());
                continue;
            };
            if name.starts_with('.') {
                continue;
            }
            if !entry
                .file_type()
                .is_ok_and(|t| t.is_dir() || t.is_symlink())
            {
                continue;
            }
            names.push((name, path));
        }
        names.sort();
        if names.len() > MAX_SKILLS_PER_DIR {
            self.problem(
                dir,
                format!(
                    "{} skill directories; only the first {MAX_SKILLS_PER_DIR} are loaded",
                    names.len()
                ),
            );
            names.truncate(MAX_SKILLS_PER_DIR);
        }
        for (name, path) in names {
            let file = path.join("SKILL.md");
            match load_file(&name, &path, &file) {
                Ok(skill) => {
                    self.skills.insert(skill.name.clone(), Arc::new(skill));
                }
                Err(reason) => {
                    tracing::warn!(file = %file.display(), "skill skipped: {reason}");
                    self.problem(&file, reason);
                }
            }
        }
    }

    fn problem(&mut self, path: &Path, reason: String) {
        self.problems.push(LoadProblem {
            path: path.to_owned(),
            reason,
        });
    }

    /// Every skill, by name, enabled or not.
    pub fn all(&self) -> impl Iterator<Item = &Arc<Skill>> {
        self.skills.values()
    }

    /// The enabled skills, by name.
    pub fn enabled(&self) -> impl Iterator<Item = &Arc<Skill>> {
        self.skills.values().filter(|s| s.enabled)
    }

    /// A skill by name, enabled or not.
    pub fn get(&self, name: &str) -> Option<&Arc<Skill>> {
        self.skills.get(name)
    }

    /// An enabled skill by name.
    ///
    /// # Errors
    /// A message listing the enabled skills.
    pub fn enabled_skill(&self, name: &str) -> Result<&Arc<Skill>, String> {
        match self.skills.get(name) {
            Some(s) if s.enabled => Ok(s),
            Some(_) => Err(format!(
                "skill {name} is not enabled ([agent.skills] enabled)"
            )),
            None => Err(format!(
                "unknown skill {:?}; skills: {}",
                name.chars().take(80).collect::<String>(),
                self.enabled()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }

    /// Only the skills named in `names` (unknown names are left out; a
    /// delegated agent's run sees this set).
    pub fn subset(&self, names: &[String]) -> Self {
        Self {
            skills: self
                .skills
                .iter()
                .filter(|(k, _)| names.iter().any(|n| n == *k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            problems: Vec::new(),
        }
    }

    /// Files that failed to load, with the reason.
    pub fn problems(&self) -> &[LoadProblem] {
        &self.problems
    }

    /// Whether no skill is enabled.
    pub fn is_empty(&self) -> bool {
        self.enabled().next().is_none()
    }

    /// The registry that goes into the system prompt: name, description and
    /// tools of each enabled skill, never the bodies (progressive
    /// disclosure: `read_skill` or `invoke_skill` loads a body when used).
    pub fn registry_prompt(&self) -> String {
        let mut s = String::from(
            "## Available skills\nRun one with invoke_skill {skill, input}; read_skill tells what it does.",
        );
        for skill in self.enabled() {
            let _ = write!(s, "\n- {}: {}", skill.name, brief(&skill.description));
        }
        s
    }

    /// `read_skill` without a file: the skill's instructions and what it
    /// declares.
    ///
    /// # Errors
    /// An unknown or disabled skill.
    pub fn read(&self, name: &str) -> Result<Value, String> {
        let skill = self.enabled_skill(name)?;
        Ok(json!({
            "name": skill.name,
            "description": skill.description,
            "allowed_tools": skill.allowed_tools,
            "parameters": skill.parameters,
            "instructions": skill.body,
            "references": skill.references,
        }))
    }

    /// The path of reference `file` of skill `name`. Only names the loader
    /// found are accepted: no path from the model reaches the file system.
    ///
    /// # Errors
    /// An unknown skill, or a file that is not one of its references.
    pub fn reference_path(&self, name: &str, file: &str) -> Result<PathBuf, String> {
        let skill = self.enabled_skill(name)?;
        if !skill.references.iter().any(|r| r == file) {
            return Err(format!(
                "skill {name} has no reference {:?}; references: {}",
                file.chars().take(80).collect::<String>(),
                if skill.references.is_empty() {
                    "none".to_owned()
                } else {
                    skill.references.join(", ")
                }
            ));
        }
        let SkillSource::File(path) = &skill.source else {
            return Err(format!("skill {name} has no reference files"));
        };
        Ok(path
            .parent()
            .unwrap_or(Path::new("."))
            .join("references")
            .join(file))
    }
}

fn read_capped(path: &Path, max: u64) -> Result<String, String> {
    use std::io::Read as _;
    let f = std::fs::File::open(path).map_err(|e| format!("cannot open: {e}"))?;
    let len = f.metadata().map_err(|e| format!("cannot stat: {e}"))?.len();
    if len > max {
        return Err(format!("{len} bytes; the limit is {max}"));
    }
    let mut text = String::new();
    // Read at most max + 1 bytes, whatever the metadata said (a file that
    // grows while read, or a special file).
    f.take(max + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read as UTF-8 text: {e}"))?;
    if text.len() as u64 > max {
        return Err(format!("more than {max} bytes"));
    }
    Ok(text)
}

fn load_file(dir_name: &str, dir: &Path, file: &Path) -> Result<Skill, String> {
    if !valid_name(dir_name) {
        return Err(format!(
            "directory name {:?} is not a valid skill name (lowercase letters, digits and single hyphens)",
            dir_name.chars().take(80).collect::<String>()
        ));
    }
    let text = read_capped(file, MAX_SKILL_BYTES)?;
    let mut skill = Skill::parse(dir_name, &text, SkillSource::File(file.to_owned()))?;
    let refs = dir.join("references");
    if let Ok(entries) = std::fs::read_dir(&refs) {
        let mut names: Vec<String> = entries
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .filter_map(|e| e.file_name().to_str().map(str::to_owned))
            .filter(|n| !n.starts_with('.') && !n.contains('/') && !n.contains('\\'))
            .take(100)
            .collect();
        names.sort();
        skill.references = names;
    }
    Ok(skill)
}

/// A skill's description for the registry, which every request carries:
/// its first clause (up to " — " or the first sentence's end) and, when
/// it has one, the sentence that says when to use it. `read_skill` gives
/// the whole description.
fn brief(description: &str) -> String {
    let description = description.trim();
    let first = description
        .split(" — ")
        .next()
        .unwrap_or(description)
        .split(". ")
        .next()
        .unwrap_or(description)
        .trim_end_matches('.');
    match description.rfind("Use ") {
        Some(i) if i > first.len() => format!("{first}. {}", &description[i..]),
        _ => format!("{first}."),
    }
}

#[cfg(test)]
mod tests;
