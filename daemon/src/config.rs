//! Configuration in two stages: [`RawConfig`] is what the layered sources
//! deserialize into (unknown keys rejected), [`Config`] is the validated
//! result that the rest of the daemon uses. Every problem names its key.

use droidwarden_agent::{AgentConfig, LlmConfig, RawAgentConfig, RawLlmConfig};
use droidwarden_bridge::TransportKind;
use droidwarden_bridge::adb::AdbConfig;
use droidwarden_bridge::companion::CompanionConfig;
pub(crate) use droidwarden_dbus::DbusBus;
pub(crate) use droidwarden_mqtt::{BrokerTarget, Credentials, MqttSettings};
use droidwarden_services::DeviceName;
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The built-in defaults, embedded in the binary.
pub(crate) const DEFAULT_TOML: &str = include_str!("../../configs/default.toml");

/// The system-wide configuration file, read when present.
pub(crate) const SYSTEM_CONFIG: &str = "/etc/droidwarden/config.toml";

/// A configuration problem; the daemon exits with status 78 (EX_CONFIG).
#[derive(Debug)]
pub struct ConfigError(pub(crate) String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "configuration error: {}", self.0)
    }
}

impl std::error::Error for ConfigError {}

fn bad(key: &str, why: impl std::fmt::Display) -> ConfigError {
    ConfigError(format!("{key}: {why}"))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConfig {
    adb: RawAdb,
    calls: RawCalls,
    state: RawState,
    mqtt: RawMqtt,
    broker: RawBroker,
    poll: BTreeMap<String, u64>,
    companion: RawCompanion,
    #[serde(default)]
    devices: Vec<RawDevice>,
    dbus: RawDbus,
    metrics: RawMetrics,
    #[serde(default)]
    llm: RawLlmConfig,
    #[serde(default)]
    agent: RawAgentConfig,
    /// Specialised agents to delegate to (`[[agents]]`, docs/agent.md).
    #[serde(default)]
    agents: Vec<droidwarden_agent::delegation::RawDelegateConfig>,
    #[serde(default)]
    phone_services: droidwarden_services::RawPhoneServices,
    #[serde(default)]
    mcp: crate::mcp::RawMcpConfig,
    /// Checked by `automations::model::parse` (docs/automations.md).
    #[serde(default)]
    automations: Vec<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCompanion {
    request_timeout_ms: u64,
    queue_ttl_ms: u64,
    auto_register: bool,
    max_auto_devices: usize,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMqtt {
    url: String,
    client_id: String,
    username: String,
    password: String,
    password_file: String,
    ca_file: String,
    keep_alive_s: u64,
    topic_prefix: String,
    dedupe_window_s: u64,
    max_ids_per_window: u64,
    session_expiry_s: u64,
    max_payload_bytes: usize,
    homeassistant: RawHomeAssistant,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHomeAssistant {
    discovery: bool,
    prefix: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBroker {
    listen: String,
    allow_remote: bool,
    anonymous: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMetrics {
    listen: String,
    allow_remote: bool,
}

/// Where Prometheus metrics are served (`[metrics]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MetricsSettings {
    pub(crate) listen: std::net::SocketAddr,
    pub(crate) allow_remote: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAdb {
    server: String,
    connect: Vec<String>,
    only_named: bool,
    start_server: bool,
    program: String,
    poll_interval_ms: u64,
    workers_per_device: usize,
    wake_for_ui: bool,
    ui_server_jar: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCalls {
    timeout_ms: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawState {
    dir: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDevice {
    name: String,
    /// Matched exhaustively below: a new transport does not compile until
    /// its devices' settings are checked.
    transport: TransportKind,
    #[serde(default)]
    serial: Option<String>,
    #[serde(default)]
    companion_id: Option<String>,
}

/// The validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub(crate) adb: AdbConfig,
    pub(crate) companion: CompanionConfig,
    pub(crate) state_dir: PathBuf,
    pub(crate) mqtt: MqttSettings,
    /// Seconds between state reads, per service id (only non-zero entries).
    pub(crate) poll: BTreeMap<&'static str, Duration>,
    /// The message bus the D-Bus API is offered on.
    pub(crate) dbus: DbusBus,
    /// Prometheus metrics; `None` when `[metrics] listen` is empty (off).
    pub(crate) metrics: Option<MetricsSettings>,
    /// The language model; `None` (no `[llm] provider`) turns the agent off.
    pub(crate) llm: Option<LlmConfig>,
    /// The agent: tools, limits, memory and the approval policy.
    pub(crate) agent: AgentConfig,
    /// What the phone services may do (`[phone_services]`,
    /// docs/phone-services.md), enforced by the hub.
    pub(crate) phone_services: droidwarden_services::PhonePolicy,
    /// MCP, both ways (`[mcp]`, docs/mcp.md).
    pub(crate) mcp: crate::mcp::McpConfig,
    /// `[[automations]]`, checked, and what run-time additions are checked
    /// against.
    pub(crate) automations: Vec<crate::automations::model::Automation>,
    pub(crate) automation_context: crate::automations::model::Context,
    /// The file given with `--config` (`None`: the system file when it
    /// exists), so that a reload reads the same layers again.
    pub(crate) source: Option<PathBuf>,
    /// `--socket`: the private API socket's path, from the command line
    /// only (`None`: `$RUNTIME_DIRECTORY/api.sock` or `<state dir>/api.sock`).
    pub(crate) api_socket: Option<PathBuf>,
}

fn mqtt_settings(mut raw: RawMqtt, broker: RawBroker) -> Result<MqttSettings, ConfigError> {
    let mut url_credentials: Option<Credentials> = None;
    let target = if raw.url.is_empty() {
        let listen = broker.listen.parse::<std::net::SocketAddr>().map_err(|_| {
            bad(
                "broker.listen",
                format!("{:?} is not ip:port", broker.listen),
            )
        })?;
        if !broker.allow_remote && !listen.ip().is_loopback() {
            return Err(bad(
                "broker.listen",
                format!(
                    "{listen} is not a loopback address; the embedded broker has no TLS, so passwords and commands would cross the network in clear (set broker.allow_remote = true to accept that)"
                ),
            ));
        }
        BrokerTarget::Embedded {
            listen,
            allow_remote: broker.allow_remote,
            anonymous: broker.anonymous,
        }
    } else {
        let (tls, rest) = if let Some(rest) = raw.url.strip_prefix("mqtts://") {
            (true, rest)
        } else if let Some(rest) = raw.url.strip_prefix("mqtt://") {
            (false, rest)
        } else {
            return Err(bad("mqtt.url", "must start with mqtt:// or mqtts://"));
        };
        let rest = rest.trim_end_matches('/');
        // `user:password@host`: taken as the credentials, and never echoed
        // back — every message below names only the host part.
        let rest = match rest.rsplit_once('@') {
            Some((userinfo, host)) => {
                url_credentials = Some(userinfo_credentials(userinfo)?);
                host
            }
            None => rest,
        };
        let (host, port) = match rest.rsplit_once(':') {
            Some((host, port)) => (
                host,
                port.parse::<u16>()
                    .ok()
                    .filter(|p| *p != 0)
                    .ok_or_else(|| bad("mqtt.url", format!("{port:?} is not a port")))?,
            ),
            None => (rest, if tls { 8883 } else { 1883 }),
        };
        check_host_port(&format!("{host}:1")).map_err(|e| bad("mqtt.url", e))?;
        let ca = (!raw.ca_file.is_empty()).then(|| PathBuf::from(&raw.ca_file));
        if let Some(ca) = &ca
            && !ca.is_file()
        {
            return Err(bad(
                "mqtt.ca_file",
                format!("{}: no such file", ca.display()),
            ));
        }
        if ca.is_some() && !tls {
            return Err(bad("mqtt.ca_file", "only used with an mqtts:// url"));
        }
        BrokerTarget::External {
            host: host.to_owned(),
            port,
            tls: tls.then_some(ca),
        }
    };
    let mut password = match (raw.password.is_empty(), raw.password_file.is_empty()) {
        (_, false) => std::fs::read_to_string(&raw.password_file)
            .map(|p| p.trim_end_matches(['\r', '\n']).to_owned())
            .map_err(|e| bad("mqtt.password_file", format!("{}: {e}", raw.password_file)))?,
        (false, true) => raw.password,
        (true, true) => String::new(),
    };
    if let Some(from_url) = url_credentials {
        if !raw.username.is_empty() || !password.is_empty() {
            return Err(bad(
                "mqtt.url",
                "holds a user name and password, and mqtt.username or a password is set too: give them in one place",
            ));
        }
        raw.username = from_url.username;
        password = from_url.password;
    }
    let credentials = match (raw.username.is_empty(), password.is_empty()) {
        (true, true) => None,
        (true, false) => return Err(bad("mqtt.username", "a password is set but no username")),
        (false, _) => Some(Credentials {
            username: raw.username,
            password,
        }),
    };
    let prefix = raw.topic_prefix;
    if prefix.is_empty()
        || prefix.starts_with('/')
        || prefix.ends_with('/')
        || prefix.contains(['+', '#', '\0'])
    {
        return Err(bad(
            "mqtt.topic_prefix",
            "must be non-empty, without + or #, and not start or end with /",
        ));
    }
    if raw.client_id.is_empty() || raw.client_id.len() > 64 {
        return Err(bad("mqtt.client_id", "must be 1 to 64 characters"));
    }
    if !(5..=3600).contains(&raw.keep_alive_s) {
        return Err(bad("mqtt.keep_alive_s", "must be between 5 and 3600"));
    }
    if !(1024..=16 * 1024 * 1024).contains(&raw.max_payload_bytes) {
        return Err(bad(
            "mqtt.max_payload_bytes",
            "must be between 1024 and 16777216",
        ));
    }
    if !(1..=100_000_000).contains(&raw.max_ids_per_window) {
        return Err(bad(
            "mqtt.max_ids_per_window",
            "must be between 1 and 100000000",
        ));
    }
    if raw.session_expiry_s > u64::from(u32::MAX) {
        return Err(bad(
            "mqtt.session_expiry_s",
            format!("must be at most {} (MQTT's limit)", u32::MAX),
        ));
    }
    let ha = raw.homeassistant;
    if ha.discovery && (ha.prefix.is_empty() || ha.prefix.contains(['+', '#'])) {
        return Err(bad(
            "mqtt.homeassistant.prefix",
            "must be a plain topic prefix",
        ));
    }
    Ok(MqttSettings {
        broker: target,
        client_id: raw.client_id,
        credentials,
        keep_alive: Duration::from_secs(raw.keep_alive_s),
        prefix,
        dedupe_window: Duration::from_secs(raw.dedupe_window_s),
        max_ids_per_window: raw.max_ids_per_window,
        session_expiry: Duration::from_secs(raw.session_expiry_s),
        max_payload: raw.max_payload_bytes,
        discovery: ha.discovery.then_some(ha.prefix),
    })
}

fn poll_settings(
    raw: BTreeMap<String, u64>,
) -> Result<BTreeMap<&'static str, Duration>, ConfigError> {
    let mut poll = BTreeMap::new();
    for (service, seconds) in raw {
        let key = format!("poll.{service}");
        let spec = droidwarden_services::Catalogue::get()
            .services()
            .iter()
            .find(|s| s.id == service)
            .ok_or_else(|| bad(&key, "not a service id"))?;
        // `notifications` is read for its events (ADB phones), not as state.
        if spec.state.is_none() && spec.id != crate::poll::NOTIFICATIONS {
            return Err(bad(&key, "this service has no state to poll"));
        }
        match seconds {
            0 => {}
            5..=86_400 => {
                poll.insert(spec.id, Duration::from_secs(seconds));
            }
            _ => return Err(bad(&key, "must be 0 (off) or between 5 and 86400 seconds")),
        }
    }
    Ok(poll)
}

impl TryFrom<RawConfig> for Config {
    type Error = ConfigError;

    fn try_from(raw: RawConfig) -> Result<Self, ConfigError> {
        let server = parse_server(&raw.adb.server).map_err(|e| bad("adb.server", e))?;
        for (i, target) in raw.adb.connect.iter().enumerate() {
            // A phone's mDNS service name (`adb-SERIAL-xxxxxx._adb-tls-connect._tcp`)
            // is connected by name, wherever its port is now.
            if droidwarden_bridge::adb::host::is_service_name(target) {
                continue;
            }
            check_host_port(target).map_err(|e| bad(&format!("adb.connect[{i}]"), e))?;
        }
        if raw.adb.poll_interval_ms < 100 {
            return Err(bad("adb.poll_interval_ms", "must be at least 100"));
        }
        if !(1..=64).contains(&raw.adb.workers_per_device) {
            return Err(bad("adb.workers_per_device", "must be between 1 and 64"));
        }
        if !(100..=600_000).contains(&raw.calls.timeout_ms) {
            return Err(bad("calls.timeout_ms", "must be between 100 and 600000"));
        }
        let mut names = BTreeMap::new();
        let mut companions = BTreeMap::new();
        let mut seen = BTreeSet::new();
        let mut nodes: BTreeMap<String, (usize, DeviceName)> = BTreeMap::new();
        for (i, d) in raw.devices.iter().enumerate() {
            let key = |field: &str| format!("devices[{i}].{field}");
            let name = DeviceName::try_from(d.name.as_str()).map_err(|e| bad(&key("name"), e))?;
            if !seen.insert(name.clone()) {
                return Err(bad(&key("name"), format!("{name} is configured twice")));
            }
            // Home Assistant's node ids keep letters, digits, `-` and `_`:
            // two names that differ only in `.`, `_` or `:` would be one
            // device there, and one phone would silently have no entities.
            let node = crate::mqtt::discovery::node_id(name.as_str());
            if raw.mqtt.homeassistant.discovery
                && let Some((j, other)) = nodes.insert(node.clone(), (i, name.clone()))
            {
                return Err(bad(
                    &key("name"),
                    format!(
                        "{name} and {other} (devices[{j}]) would be the same device in Home Assistant ({node}): names must differ in more than '.', '_' or ':'"
                    ),
                ));
            }
            match d.transport {
                TransportKind::Adb => {
                    if d.companion_id.is_some() {
                        return Err(bad(
                            &key("companion_id"),
                            "only for transport = \"companion\"",
                        ));
                    }
                    let serial = d.serial.as_deref().unwrap_or_default();
                    if serial.trim().is_empty() {
                        return Err(bad(&key("serial"), "an adb device needs its serial"));
                    }
                    if names.insert(serial.to_owned(), name).is_some() {
                        return Err(bad(&key("serial"), format!("{serial} is named twice")));
                    }
                }
                TransportKind::Companion => {
                    if d.serial.is_some() {
                        return Err(bad(
                            &key("serial"),
                            "only for transport = \"adb\"; use companion_id",
                        ));
                    }
                    let id = d.companion_id.as_deref().unwrap_or_default();
                    if let Err(e) = droidwarden_services::CompanionId::try_from(id) {
                        return Err(bad(&key("companion_id"), e.reason));
                    }
                    if companions.insert(id.to_owned(), name).is_some() {
                        return Err(bad(&key("companion_id"), format!("{id} is named twice")));
                    }
                }
            }
        }
        let companion = raw.companion;
        if !(100..=600_000).contains(&companion.request_timeout_ms) {
            return Err(bad(
                "companion.request_timeout_ms",
                "must be between 100 and 600000",
            ));
        }
        if companion.max_auto_devices > 4096 {
            return Err(bad("companion.max_auto_devices", "must be at most 4096"));
        }
        if companion.queue_ttl_ms > 86_400_000 {
            return Err(bad(
                "companion.queue_ttl_ms",
                "must be at most 86400000 (a day)",
            ));
        }
        let phone_services = droidwarden_services::PhonePolicy::try_from(raw.phone_services)
            .map_err(|e| bad(&e.key, e.reason))?;
        let mut agent = AgentConfig::try_from(raw.agent).map_err(agent_config_error)?;
        agent.agents =
            droidwarden_agent::delegation::validate(raw.agents).map_err(agent_config_error)?;
        // The agent refuses what the hub would, before asking anyone.
        agent.approval.phone = phone_services.clone();
        let automation_context = crate::automations::model::Context {
            devices: names
                .values()
                .chain(companions.values())
                .map(|n: &DeviceName| n.to_string())
                .collect(),
            agent_up_to: agent.approval.auto_approve_up_to,
            reserved: vec![
                raw.mqtt.topic_prefix.clone(),
                raw.mqtt.homeassistant.prefix.clone(),
            ],
        };
        let automations =
            crate::automations::model::parse_all(&raw.automations, &automation_context)
                .map_err(ConfigError)?;
        Ok(Config {
            automations,
            automation_context,
            companion: CompanionConfig {
                request_timeout: Duration::from_millis(companion.request_timeout_ms),
                queue_ttl: Duration::from_millis(companion.queue_ttl_ms),
                auto_register: companion.auto_register,
                max_auto_devices: companion.max_auto_devices,
                names: companions,
            },
            adb: AdbConfig {
                server,
                connect: raw.adb.connect,
                only_named: raw.adb.only_named,
                names,
                call_timeout: Duration::from_millis(raw.calls.timeout_ms),
                poll_interval: Duration::from_millis(raw.adb.poll_interval_ms),
                workers_per_device: raw.adb.workers_per_device,
                start_server: raw.adb.start_server,
                adb_program: PathBuf::from(raw.adb.program),
                host_files: phone_services.host_files.clone(),
                wake_for_ui: raw.adb.wake_for_ui,
                ui_server_jar: ui_server_jar(&raw.adb.ui_server_jar)?,
            },
            state_dir: state_dir(&raw.state.dir),
            mqtt: mqtt_settings(raw.mqtt, raw.broker)?,
            poll: poll_settings(raw.poll)?,
            dbus: parse_dbus_bus(&raw.dbus.bus)?,
            metrics: metrics_settings(&raw.metrics)?,
            llm: if raw.llm == RawLlmConfig::default() {
                None
            } else {
                Some(LlmConfig::try_from(raw.llm).map_err(agent_config_error)?)
            },
            agent,
            phone_services,
            mcp: crate::mcp::McpConfig::try_from(raw.mcp).map_err(ConfigError)?,
            source: None,
            api_socket: None,
        })
    }
}

/// The values of every enumerated setting that serde reads straight into a
/// Rust enum, by the enum's type name. serde's own message names the Rust
/// type ("enum ProviderKind does not have variant constructor ollama");
/// [`explain_enum`] turns it into the key, the value and the valid values.
const ENUM_VALUES: &[(&str, &[&str])] = &[
    ("ProviderKind", &["openai", "anthropic", "gemini"]),
    ("ToolMode", &["toolkit", "direct"]),
    ("Durability", &["process", "power"]),
    ("Risk", &["low", "medium", "high", "critical"]),
    ("TransportKind", &["adb", "companion"]),
];

fn explain_enum(message: &str) -> String {
    let Some((head, rest)) = message.split_once(" does not have variant constructor ") else {
        return message.to_owned();
    };
    let Some(type_name) = head.rsplit(' ').next() else {
        return message.to_owned();
    };
    let (value, key) = match rest.split_once(" for key `") {
        Some((value, key)) => (value, key.trim_end_matches('`')),
        None => (rest, "?"),
    };
    // The config crate writes an array element's field as `devices[0]transport`.
    let key = key
        .replace("]", "].")
        .replace("]..", "].")
        .replace("].[", "][");
    let key = key.trim_end_matches('.');
    match ENUM_VALUES.iter().find(|(name, _)| *name == type_name) {
        Some((_, valid)) => format!(
            "{key}: {value:?} is not one of the valid values: {}",
            valid.join(", ")
        ),
        None => format!("{key}: {value:?} is not a valid value"),
    }
}

fn metrics_settings(raw: &RawMetrics) -> Result<Option<MetricsSettings>, ConfigError> {
    if raw.listen.is_empty() {
        return Ok(None);
    }
    let listen = raw
        .listen
        .parse::<std::net::SocketAddr>()
        .map_err(|_| bad("metrics.listen", format!("{:?} is not ip:port", raw.listen)))?;
    if !raw.allow_remote && !listen.ip().is_loopback() {
        return Err(bad(
            "metrics.listen",
            format!(
                "{listen} is not a loopback address (set metrics.allow_remote = true to serve metrics beyond this machine)"
            ),
        ));
    }
    Ok(Some(MetricsSettings {
        listen,
        allow_remote: raw.allow_remote,
    }))
}

/// The agent crate's configuration errors name their key too.
fn agent_config_error(e: droidwarden_agent::AgentError) -> ConfigError {
    match e {
        droidwarden_agent::AgentError::Config { key, reason } => bad(&key, reason),
        other => ConfigError(other.to_string()),
    }
}

fn parse_server(text: &str) -> Result<SocketAddrV4, String> {
    let (host, port) = split_host_port(text)?;
    let ip = if host == "localhost" {
        Ipv4Addr::LOCALHOST
    } else {
        host.parse::<Ipv4Addr>()
            .map_err(|_| format!("{host:?} is not an IPv4 address or localhost"))?
    };
    Ok(SocketAddrV4::new(ip, port))
}

/// The `user[:password]` of an MQTT URL, percent-decoded. Errors say what
/// is wrong without repeating any of it.
fn userinfo_credentials(userinfo: &str) -> Result<Credentials, ConfigError> {
    let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
    let decode = |part: &str, what: &str| {
        droidwarden_services::percent_decode(part).ok_or_else(|| {
            bad(
                "mqtt.url",
                format!("the {what} in the url is not valid percent-encoded UTF-8 (not shown)"),
            )
        })
    };
    let username = decode(user, "user name")?;
    if username.is_empty() {
        return Err(bad("mqtt.url", "has an @ but no user name before it"));
    }
    Ok(Credentials {
        username,
        password: decode(password, "password")?,
    })
}

fn split_host_port(text: &str) -> Result<(&str, u16), String> {
    let (host, port) = text
        .rsplit_once(':')
        .ok_or_else(|| format!("{text:?} is not host:port"))?;
    let port = port
        .parse::<u16>()
        .ok()
        .filter(|p| *p != 0)
        .ok_or_else(|| format!("{port:?} is not a port number"))?;
    if host.is_empty() {
        return Err(format!("{text:?} has no host"));
    }
    Ok((host, port))
}

fn check_host_port(text: &str) -> Result<(), String> {
    let (host, _) = split_host_port(text)?;
    if host
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
    {
        Ok(())
    } else {
        Err(format!("{host:?} is not a host name or IPv4 address"))
    }
}

/// `[adb] ui_server_jar`: empty is off; anything else must be an absolute
/// path (the daemon's working directory is `/` under systemd). Whether the
/// file is there is checked when a phone needs it, so the jar may be
/// installed after the daemon starts.
fn ui_server_jar(configured: &str) -> Result<Option<PathBuf>, ConfigError> {
    if configured.is_empty() {
        return Ok(None);
    }
    let path = PathBuf::from(configured);
    if !path.is_absolute() {
        return Err(ConfigError(format!(
            "adb.ui_server_jar: {configured:?} is not an absolute path (the uiautomator2 u2.jar, docs/screen-component.md)"
        )));
    }
    Ok(Some(path))
}

fn state_dir(configured: &str) -> PathBuf {
    if !configured.is_empty() {
        return PathBuf::from(configured);
    }
    if let Some(dir) = std::env::var_os("STATE_DIRECTORY") {
        // systemd may pass several, colon-separated; the first is ours.
        if let Some(first) = dir.to_string_lossy().split(':').next()
            && !first.is_empty()
        {
            return PathBuf::from(first);
        }
    }
    if is_root() {
        return PathBuf::from("/var/lib/droidwarden");
    }
    if let Some(xdg) = std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        return Path::new(&xdg).join("droidwarden");
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| ".".into());
    Path::new(&home).join(".local/state/droidwarden")
}

fn is_root() -> bool {
    // Without libc: the effective uid is in /proc/self/status ("Uid: r e s f").
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|e| e == "0"))
        })
        .unwrap_or(false)
}

/// Load the configuration: defaults, then `file` (or the system file when it
/// exists), then `DROIDWARDEN__SECTION__KEY` environment variables.
///
/// # Errors
/// A problem in a layer, naming its key (and variable).
pub fn load(file: Option<&Path>) -> Result<Config, ConfigError> {
    load_with_env(file, std::env::vars())
}

/// An error about a key that came from the environment names the
/// variable too, as the person typed it: `for key `calls.timeout_ms` in the
/// environment` gains `(DROIDWARDEN__CALLS__TIMEOUT_MS)`, and an unknown
/// field that only a variable spells (`cals`) gains `(from
/// DROIDWARDEN__CALS__TIMEOUT_MS)`.
fn name_the_variable(message: String, variables: &[String]) -> String {
    let spelled = |key: &str| {
        format!(
            "DROIDWARDEN__{}",
            key.split('.')
                .map(str::to_ascii_uppercase)
                .collect::<Vec<_>>()
                .join("__")
        )
    };
    if let Some(rest) = message.split("for key `").nth(1)
        && let Some(key) = rest.split('`').next()
        && message.contains("in the environment")
        && let Some(variable) = variables
            .iter()
            .find(|v| v.eq_ignore_ascii_case(&spelled(key)))
    {
        return format!("{message} ({variable})");
    }
    if let Some(rest) = message.strip_prefix("unknown field `")
        && let Some(field) = rest.split('`').next()
    {
        let field = format!("__{}", field.to_ascii_uppercase());
        let from: Vec<&str> = variables
            .iter()
            .filter(|v| {
                v.to_ascii_uppercase().contains(&field)
                    && (v.to_ascii_uppercase().ends_with(&field)
                        || v.to_ascii_uppercase().contains(&format!("{field}__")))
            })
            .map(String::as_str)
            .collect();
        if !from.is_empty() {
            return format!("{message} (from {})", from.join(", "));
        }
    }
    message
}

/// A validation error `KEY: why` (`adb.connect[0]: …`) whose KEY came
/// from an environment variable gains `(from DROIDWARDEN__ADB__CONNECT)`.
fn name_the_key_variable(message: String, variables: &[String]) -> String {
    let Some((key, _)) = message.split_once(": ") else {
        return message;
    };
    let key = key.split('[').next().unwrap_or(key);
    if key.is_empty()
        || !key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._".contains(c))
    {
        return message;
    }
    let spelled = format!(
        "DROIDWARDEN__{}",
        key.split('.')
            .map(str::to_ascii_uppercase)
            .collect::<Vec<_>>()
            .join("__")
    );
    match variables.iter().find(|v| v.eq_ignore_ascii_case(&spelled)) {
        Some(variable) => format!("{message} (from {variable})"),
        None => message,
    }
}

/// [`load`] with these environment variables instead of the process's.
///
/// # Errors
/// A problem in a layer, naming its key (and variable).
pub fn load_with_env(
    file: Option<&Path>,
    env: impl IntoIterator<Item = (String, String)>,
) -> Result<Config, ConfigError> {
    use config::{Config as Layers, Environment, File, FileFormat};
    let mut layers = Layers::builder().add_source(File::from_str(DEFAULT_TOML, FileFormat::Toml));
    match file {
        Some(path) => {
            if !path.is_file() {
                return Err(ConfigError(format!("{}: no such file", path.display())));
            }
            layers = layers.add_source(File::from(path).format(FileFormat::Toml).required(true));
        }
        None if Path::new(SYSTEM_CONFIG).is_file() => {
            layers = layers.add_source(File::new(SYSTEM_CONFIG, FileFormat::Toml).required(true));
        }
        None => {}
    }
    let mut credentials = None;
    let env: config::Map<String, String> = env
        .into_iter()
        .filter(|(k, v)| {
            if k == CREDENTIALS_DIRECTORY {
                credentials = Some(v.clone());
            }
            k.starts_with("DROIDWARDEN__")
        })
        .collect();
    let variables: Vec<String> = env.keys().cloned().collect();
    layers = layers.add_source(
        Environment::with_prefix("DROIDWARDEN")
            .prefix_separator("__")
            .separator("__")
            .list_separator(",")
            .with_list_parse_key("adb.connect")
            .with_list_parse_key("agent.approval.allow")
            .with_list_parse_key("agent.approval.deny")
            .try_parsing(true)
            .source(Some(env)),
    );
    let mut raw: RawConfig = layers
        .build()
        .and_then(|c| c.try_deserialize())
        .map_err(|e| ConfigError(name_the_variable(explain_enum(&e.to_string()), &variables)))?;
    let credentials = credentials.as_deref();
    raw.mqtt.password_file =
        expand_credentials("mqtt.password_file", &raw.mqtt.password_file, credentials)?;
    raw.mqtt.ca_file = expand_credentials("mqtt.ca_file", &raw.mqtt.ca_file, credentials)?;
    if let Some(file) = raw.llm.api_key_file.take() {
        let file = file.to_string_lossy();
        raw.llm.api_key_file = Some(PathBuf::from(expand_credentials(
            "llm.api_key_file",
            &file,
            credentials,
        )?));
    }
    // A value that reads but is not valid (`adb.server: …`) names the
    // variable it came from, as a type error does.
    let mut config =
        Config::try_from(raw).map_err(|e| ConfigError(name_the_key_variable(e.0, &variables)))?;
    config.source = file.map(Path::to_path_buf);
    Ok(config)
}

/// The variable systemd sets to the directory of a unit's credentials
/// (`LoadCredential=`, `SetCredential=`).
const CREDENTIALS_DIRECTORY: &str = "CREDENTIALS_DIRECTORY";

/// Replace `${CREDENTIALS_DIRECTORY}` or `$CREDENTIALS_DIRECTORY` in a file
/// key, so that a configuration can name a systemd credential
/// (`password_file = "${CREDENTIALS_DIRECTORY}/mqtt-password"`). Only this
/// one variable is expanded: any other `$` is part of the path.
///
/// # Errors
/// Names `key` when the value uses the variable and it is not set.
fn expand_credentials(key: &str, value: &str, dir: Option<&str>) -> Result<String, ConfigError> {
    let braced = format!("${{{CREDENTIALS_DIRECTORY}}}");
    let bare = format!("${CREDENTIALS_DIRECTORY}");
    if !value.contains(&bare) && !value.contains(&braced) {
        return Ok(value.to_owned());
    }
    let dir = dir.filter(|d| !d.is_empty()).ok_or_else(|| {
        bad(
            key,
            format!(
                "{value:?} uses ${CREDENTIALS_DIRECTORY}, which is not set (systemd sets it for a unit with LoadCredential=)"
            ),
        )
    })?;
    Ok(value.replace(&braced, dir).replace(&bare, dir))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDbus {
    bus: String,
}

/// `[dbus] bus`.
fn parse_dbus_bus(text: &str) -> Result<DbusBus, ConfigError> {
    DbusBus::ALL
        .into_iter()
        .find(|bus| bus.as_str() == text)
        .ok_or_else(|| {
            bad(
                "dbus.bus",
                format!("{text:?} is not a bus; valid: auto, session, system, socket, none"),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn with_file(text: &str) -> Result<Config, ConfigError> {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(text.as_bytes()).unwrap();
        load_with_env(Some(f.path()), Vec::new())
    }

    /// Every service that declares a state read can be polled, location
    /// too (the companion app pushes it, and a poll refreshes its topic);
    /// and `notifications`, read for its events rather than as state.
    #[test]
    fn every_service_with_a_state_can_be_polled() {
        for spec in droidwarden_services::Catalogue::get().services() {
            let result = with_file(&format!("[poll]\n{} = 60", spec.id));
            let pollable = spec.state.is_some() || spec.id == crate::poll::NOTIFICATIONS;
            assert_eq!(result.is_ok(), pollable, "{}", spec.id);
        }
        let cfg = with_file("[poll]\nnotifications = 15").unwrap();
        assert_eq!(
            cfg.poll.get("notifications"),
            Some(&Duration::from_secs(15))
        );
        let cfg = with_file("[poll]\nlocation = 60").unwrap();
        assert_eq!(cfg.poll.get("location"), Some(&Duration::from_secs(60)));
    }

    /// A mistake in an environment variable names the variable, as typed.
    #[test]
    fn an_environment_error_names_the_variable() {
        let env = |k: &str, v: &str| vec![(k.to_owned(), v.to_owned())];
        let bad_value =
            load_with_env(None, env("DROIDWARDEN__CALLS__TIMEOUT_MS", "nonsense")).unwrap_err();
        assert!(
            bad_value.0.contains("calls.timeout_ms")
                && bad_value.0.contains("(DROIDWARDEN__CALLS__TIMEOUT_MS)"),
            "{bad_value}"
        );
        let typo = load_with_env(None, env("DROIDWARDEN__CALS__TIMEOUT_MS", "5")).unwrap_err();
        assert!(
            typo.0.contains("unknown field `cals`")
                && typo.0.contains("(from DROIDWARDEN__CALS__TIMEOUT_MS)"),
            "{typo}"
        );
        let inner = load_with_env(None, env("DROIDWARDEN__ADB__POLL_INTERVAL", "5")).unwrap_err();
        assert!(
            inner.0.contains("(from DROIDWARDEN__ADB__POLL_INTERVAL)"),
            "{inner}"
        );
        // A value that reads but is not valid names its variable too.
        for (variable, value, key) in [
            ("DROIDWARDEN__ADB__SERVER", "nonsense", "adb.server"),
            ("DROIDWARDEN__ADB__CONNECT", "a b:5", "adb.connect[0]"),
            ("DROIDWARDEN__CALLS__TIMEOUT_MS", "0", "calls.timeout_ms"),
        ] {
            let invalid = load_with_env(None, env(variable, value)).unwrap_err();
            assert!(
                invalid.0.starts_with(key) && invalid.0.ends_with(&format!("(from {variable})")),
                "{invalid}"
            );
        }
        // A mistake in the file names no variable.
        let in_file = with_file("[cals]\ntimeout_ms = 5\n").unwrap_err();
        assert!(!in_file.0.contains("DROIDWARDEN__"), "{in_file}");
    }

    #[test]
    fn the_embedded_defaults_are_valid() {
        let cfg = load_with_env(None, Vec::new()).unwrap();
        assert_eq!(cfg.adb.server.to_string(), "127.0.0.1:5037");
        assert_eq!(cfg.adb.call_timeout, Duration::from_secs(15));
    }

    #[test]
    fn a_file_and_the_environment_override_the_defaults() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        writeln!(f, "[adb]\nserver = \"127.0.0.1:6000\"\n[[devices]]\nname = \"kitchen\"\ntransport = \"adb\"\nserial = \"127.0.0.1:5555\"").unwrap();
        let env = vec![
            (
                "DROIDWARDEN__CALLS__TIMEOUT_MS".to_owned(),
                "2000".to_owned(),
            ),
            (
                "DROIDWARDEN__ADB__CONNECT".to_owned(),
                "10.0.0.2:5555,phone.lan:5555".to_owned(),
            ),
            ("DROIDWARDEN__ADB__ONLY_NAMED".to_owned(), "true".to_owned()),
        ];
        assert!(!load_with_env(None, Vec::new()).unwrap().adb.only_named);
        let cfg = load_with_env(Some(f.path()), env).unwrap();
        assert!(cfg.adb.only_named);
        assert_eq!(cfg.adb.server.port(), 6000);
        assert_eq!(cfg.adb.call_timeout, Duration::from_secs(2));
        assert_eq!(cfg.adb.connect, vec!["10.0.0.2:5555", "phone.lan:5555"]);
        assert_eq!(cfg.adb.names["127.0.0.1:5555"].as_str(), "kitchen");
    }

    #[test]
    fn problems_name_the_key() {
        let cases = [
            ("[adb]\nserverr = \"x\"", "serverr"),
            ("[adbb]\nx = 1", "adbb"),
            ("[adb]\nserver = \"nonsense\"", "adb.server"),
            ("[adb]\nserver = \"127.0.0.1:99999\"", "adb.server"),
            ("[adb]\nconnect = [\"a b:5\"]", "adb.connect[0]"),
            ("[calls]\ntimeout_ms = 0", "calls.timeout_ms"),
            ("[mqtt]\nurl = \"http://x\"", "mqtt.url"),
            ("[mqtt]\nurl = \"mqtt://host:0\"", "mqtt.url"),
            ("[mqtt]\ntopic_prefix = \"a/#\"", "mqtt.topic_prefix"),
            ("[mqtt]\npassword = \"x\"", "mqtt.username"),
            (
                "[mqtt]\nurl = \"mqtts://h\"\nca_file = \"/nonexistent.pem\"",
                "mqtt.ca_file",
            ),
            ("[mqtt.homeassistant]\ncolour = 1", "colour"),
            ("[poll]\nbatery = 5", "poll.batery"),
            ("[poll]\nbattery = 1", "poll.battery"),
            ("[poll]\napp_list = 60", "poll.app_list"),
            ("[broker]\nlisten = \"nowhere\"", "broker.listen"),
            (
                "[companion]\nmax_auto_devices = 5000",
                "companion.max_auto_devices",
            ),
            (
                "[agent]\nmax_concurrent_runs = 0",
                "agent.max_concurrent_runs",
            ),
            ("[agent]\nmax_queued = -1", "max_queued"),
            (
                "[[agents]]\nname = \"doc\"\ndescription = \"d\"\nsystem_prompt = \"p\"\ntools = [\"teleporter\"]",
                "agents[0].tools",
            ),
            (
                "[[agents]]\nname = \"Doc\"\ndescription = \"d\"\nsystem_prompt = \"p\"",
                "agents[0].name",
            ),
            ("[[agents]]\nname = \"doc\"\ncolour = \"x\"", "colour"),
            (
                "[[agents]]\nname = \"doc\"\ndescription = \"d\"\nsystem_prompt = \"p\"\nmodel = \"a b\"",
                "agents[0].model",
            ),
            (
                "[[agents]]\nname = \"doc\"\ndescription = \"d\"\nsystem_prompt = \"p\"\nprovider = \"skynet\"",
                "agents[0].provider",
            ),
            (
                "[[agents]]\nname = \"doc\"\ndescription = \"d\"\nsystem_prompt = \"p\"\nmode = \"later\"",
                "agents[0].mode",
            ),
            ("[broker]\nlisten = \"0.0.0.0:1883\"", "broker.listen"),
            ("[calls]\ntimeout_ms = \"soon\"", "timeout_ms"),
            (
                "[[devices]]\nname = \"a/b\"\ntransport = \"adb\"\nserial = \"x\"",
                "devices[0].name",
            ),
            (
                "[[devices]]\nname = \"a\"\ntransport = \"usb\"\nserial = \"x\"",
                "devices[0].transport",
            ),
            (
                "[[devices]]\nname = \"a\"\ntransport = \"adb\"\nserial = \"x\"\ncolour = 1",
                "colour",
            ),
            (
                "[[devices]]\nname = \"a\"\ntransport = \"adb\"\nserial = \"x\"\n[[devices]]\nname = \"a\"\ntransport = \"adb\"\nserial = \"y\"",
                "devices[1].name",
            ),
            (
                "[[devices]]\nname = \"kitchen.tablet\"\ntransport = \"adb\"\nserial = \"x\"\n[[devices]]\nname = \"kitchen_tablet\"\ntransport = \"adb\"\nserial = \"y\"",
                "devices[1].name",
            ),
        ];
        for (text, key) in cases {
            let err = with_file(text).unwrap_err().to_string();
            assert!(
                err.contains(key),
                "{text:?} gave {err:?}, which does not name {key}"
            );
        }
    }

    #[test]
    fn mqtt_settings_are_parsed_and_the_password_stays_secret() {
        let dir = tempfile::tempdir().unwrap();
        let pw = dir.path().join("pw");
        std::fs::write(&pw, "s3cret\n").unwrap();
        let cfg = with_file(&format!(
            "[mqtt]\nurl = \"mqtts://broker.lan\"\nusername = \"dw\"\npassword_file = \"{}\"",
            pw.display()
        ))
        .unwrap();
        assert_eq!(
            cfg.mqtt.broker,
            BrokerTarget::External {
                host: "broker.lan".into(),
                port: 8883,
                tls: Some(None)
            }
        );
        assert_eq!(cfg.mqtt.credentials.as_ref().unwrap().password, "s3cret");
        assert!(!format!("{cfg:?}").contains("s3cret"));
        let default = load_with_env(None, Vec::new()).unwrap();
        assert!(matches!(
            default.mqtt.broker,
            BrokerTarget::Embedded {
                anonymous: false,
                ..
            }
        ));
        let open = load_with_env(
            None,
            vec![("DROIDWARDEN__BROKER__ANONYMOUS".into(), "true".into())],
        )
        .unwrap();
        assert!(matches!(
            open.mqtt.broker,
            BrokerTarget::Embedded {
                anonymous: true,
                ..
            }
        ));
        assert_eq!(default.poll["battery"], Duration::from_secs(60));
        assert!(!default.poll.contains_key("network"));
    }

    #[test]
    fn an_unknown_enum_value_names_the_key_and_the_valid_values() {
        for (text, key, valid) in [
            (
                "[llm]\nprovider = \"ollama\"\nmodel = \"m\"",
                "llm.provider",
                "openai, anthropic, gemini",
            ),
            (
                "[agent]\ntool_mode = \"x\"",
                "agent.tool_mode",
                "toolkit, direct",
            ),
            (
                "[agent]\ndurability = \"x\"",
                "agent.durability",
                "process, power",
            ),
            (
                "[agent.approval]\nauto_approve_up_to = \"x\"",
                "agent.approval.auto_approve_up_to",
                "low, medium, high",
            ),
        ] {
            let err = with_file(text).unwrap_err().to_string();
            assert!(err.contains(key) && err.contains(valid), "{text:?}: {err}");
            assert!(!err.contains("variant constructor"), "{err}");
        }
        // The table lists exactly the values each enum accepts.
        for (text, ok) in [
            ("[llm]\nprovider = \"gemini\"\nmodel = \"m\"", true),
            ("[agent]\ntool_mode = \"direct\"", true),
            ("[agent]\ndurability = \"power\"", true),
            ("[agent.approval]\nauto_approve_up_to = \"high\"", true),
        ] {
            assert_eq!(with_file(text).is_ok(), ok, "{text}");
        }
    }

    #[test]
    fn credentials_in_the_url_are_used_and_never_echoed() {
        let cfg = with_file("[mqtt]\nurl = \"mqtt://dw:s%40cret@broker.lan:1884/\"").unwrap();
        assert_eq!(
            cfg.mqtt.broker,
            BrokerTarget::External {
                host: "broker.lan".into(),
                port: 1884,
                tls: None
            }
        );
        let credentials = cfg.mqtt.credentials.as_ref().unwrap();
        assert_eq!(
            (credentials.username.as_str(), credentials.password.as_str()),
            ("dw", "s@cret")
        );
        assert!(!format!("{cfg:?}").contains("s@cret"));
        // Every way the url can be wrong: the message names the key and
        // never the secret.
        for url in [
            "mqtt://dw:hunter2@broker.lan:0",
            "mqtt://dw:hunter2@bro ker.lan",
            "mqtt://dw:hunter2%zz@broker.lan",
            "mqtt://:hunter2@broker.lan",
            "mqtt://dw:hunter2@",
        ] {
            let err = with_file(&format!("[mqtt]\nurl = \"{url}\""))
                .unwrap_err()
                .to_string();
            assert!(err.contains("mqtt.url"), "{url}: {err}");
            assert!(!err.contains("hunter2"), "{url} leaked: {err}");
        }
        let err = with_file("[mqtt]\nurl = \"mqtt://dw:hunter2@h\"\nusername = \"x\"")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("mqtt.url") && !err.contains("hunter2"),
            "{err}"
        );
    }

    #[test]
    fn the_password_file_can_be_a_systemd_credential() {
        let creds = tempfile::tempdir().unwrap();
        std::fs::write(creds.path().join("mqtt-password"), "from-systemd\n").unwrap();
        let mut f = tempfile::NamedTempFile::new().unwrap();
        writeln!(
            f,
            "[mqtt]\nurl = \"mqtt://broker.lan\"\nusername = \"dw\"\npassword_file = \"${{CREDENTIALS_DIRECTORY}}/mqtt-password\""
        )
        .unwrap();
        let dir = creds.path().to_str().unwrap();
        let env = |dir: &str| vec![("CREDENTIALS_DIRECTORY".to_owned(), dir.to_owned())];
        let cfg = load_with_env(Some(f.path()), env(dir)).unwrap();
        assert_eq!(cfg.mqtt.credentials.unwrap().password, "from-systemd");
        // The unbraced form, from the environment layer.
        let mut with_bare = env(dir);
        with_bare.push((
            "DROIDWARDEN__MQTT__PASSWORD_FILE".to_owned(),
            "$CREDENTIALS_DIRECTORY/mqtt-password".to_owned(),
        ));
        let bare = load_with_env(Some(f.path()), with_bare).unwrap();
        assert_eq!(bare.mqtt.credentials.unwrap().password, "from-systemd");
        // Outside systemd the variable is missing: an error naming the key.
        let err = load_with_env(Some(f.path()), Vec::new())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("mqtt.password_file") && err.contains("CREDENTIALS_DIRECTORY"),
            "{err}"
        );
        // A missing credential names the key and the expanded path.
        let err = load_with_env(Some(f.path()), env("/nonexistent"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("mqtt.password_file") && err.contains("/nonexistent/mqtt-password"),
            "{err}"
        );
    }

    #[test]
    fn only_the_credentials_variable_is_expanded() {
        let check = |value: &str, expected: &str| {
            assert_eq!(
                expand_credentials("k", value, Some("/run/credentials/dw.service")).unwrap(),
                expected
            );
        };
        check("", "");
        check("/etc/pw", "/etc/pw");
        check("/etc/$HOME/pw", "/etc/$HOME/pw");
        check(
            "${CREDENTIALS_DIRECTORY}/pw",
            "/run/credentials/dw.service/pw",
        );
        check(
            "$CREDENTIALS_DIRECTORY/pw",
            "/run/credentials/dw.service/pw",
        );
    }

    #[test]
    fn the_source_file_is_remembered_for_reloads() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        writeln!(f, "[calls]\ntimeout_ms = 2000").unwrap();
        let cfg = load_with_env(Some(f.path()), Vec::new()).unwrap();
        assert_eq!(cfg.source.as_deref(), Some(f.path()));
        assert_eq!(load_with_env(None, Vec::new()).unwrap().source, None);
    }

    #[test]
    fn a_missing_file_is_an_error() {
        let err = load_with_env(Some(Path::new("/nonexistent/droidwarden.toml")), Vec::new())
            .unwrap_err();
        assert!(err.to_string().contains("no such file"));
    }

    #[test]
    fn the_dbus_bus_is_auto_by_default_and_checked() {
        assert_eq!(load_with_env(None, Vec::new()).unwrap().dbus, DbusBus::Auto);
        for (text, bus) in [
            ("session", DbusBus::Session),
            ("system", DbusBus::System),
            ("socket", DbusBus::Socket),
            ("none", DbusBus::Off),
        ] {
            let cfg = with_file(&format!("[dbus]\nbus = \"{text}\"")).unwrap();
            assert_eq!(cfg.dbus, bus);
            assert_eq!(bus.as_str(), text);
        }
        let env = vec![("DROIDWARDEN__DBUS__BUS".to_owned(), "system".to_owned())];
        assert_eq!(load_with_env(None, env).unwrap().dbus, DbusBus::System);
        let err = with_file("[dbus]\nbus = \"user\"").unwrap_err().to_string();
        assert!(err.contains("dbus.bus"), "{err}");
        let err = with_file("[dbus]\nbuss = \"session\"")
            .unwrap_err()
            .to_string();
        assert!(err.contains("buss"), "{err}");
    }
}
