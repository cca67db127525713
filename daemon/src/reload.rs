//! Configuration reload (SIGHUP, `systemctl reload`): the same layers are
//! read again (the `--config` file or the system file, then the
//! environment) and what can change while running is applied in place.
//!
//! Live: the devices (ADB names, the `connect` list and `only_named`,
//! companion names),
//! the adb refresh interval, the state polling intervals, the agent's
//! approval policy (`[agent.approval]`, for runs that start afterwards) and
//! the skills (`[agent.skills]` and the SKILL.md files, read again on every
//! reload). Everything
//! else (the broker and its credentials, topics, the state directory, the
//! adb server, timeouts, D-Bus) is read once at start: a change to it is logged as
//! needing a restart and the running value is kept. A configuration that
//! does not load is logged, naming the key, and the running one is kept.
//!
//! [`plan`] compares two configurations without side effects; [`apply`]
//! hands the live changes to the transports and the poller, which
//! announce devices that come and go on the registry as usual (so MQTT
//! and Home Assistant follow).

use crate::assistant::Assistant;
use crate::config::{BrokerTarget, Config, ConfigError};
use crate::poll::Intervals;
use droidwarden_bridge::adb::AdbTransport;
use droidwarden_bridge::companion::CompanionHub;
use tokio::sync::watch;

/// What differs between the running configuration and a new one.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Plan {
    /// ADB names or the `connect` list changed.
    pub(crate) adb_devices: bool,
    /// `adb.poll_interval_ms` changed.
    pub(crate) adb_poll_interval: bool,
    /// Companion names changed.
    pub(crate) companion_names: bool,
    /// `[poll]` changed.
    pub(crate) poll: bool,
    /// `[agent.approval]` changed.
    pub(crate) approval_policy: bool,
    /// Keys that changed but are only read at start.
    pub(crate) needs_restart: Vec<&'static str>,
}

impl Plan {
    /// Whether anything can be applied live.
    pub(crate) fn has_live_changes(&self) -> bool {
        self.adb_devices
            || self.adb_poll_interval
            || self.companion_names
            || self.poll
            || self.approval_policy
    }
}

/// The new approval policy with the running phone-services part: the hub
/// keeps its `[phone_services]` until a restart, so the agent does too.
fn approval_keeping_phone(
    running: &droidwarden_agent::ApprovalPolicy,
    new: &droidwarden_agent::ApprovalPolicy,
) -> droidwarden_agent::ApprovalPolicy {
    let mut approval = new.clone();
    approval.phone = running.phone.clone();
    approval
}

/// Compare the running configuration with a newly loaded one.
///
/// Every field of [`Config`] and of its sections is named below, by
/// exhaustive destructuring: a new key does not compile until it is either
/// applied live (a [`Plan`] flag) or reported as needing a restart.
pub(crate) fn plan(running: &Config, new: &Config) -> Plan {
    let mut restart = Vec::new();
    let mut differs = |key: &'static str, changed: bool| {
        if changed {
            restart.push(key);
        }
    };
    let Config {
        adb,
        companion,
        state_dir,
        mqtt,
        poll,
        dbus,
        metrics,
        llm,
        agent,
        phone_services,
        mcp,
        automations,
        // Derived from the devices, the approval policy and the prefixes,
        // each compared here.
        automation_context: _,
        // From the command line, which a reload does not read again.
        source: _,
        api_socket: _,
    } = running;
    let droidwarden_bridge::adb::AdbConfig {
        server,
        connect,
        names: adb_names,
        only_named,
        call_timeout,
        poll_interval,
        workers_per_device,
        start_server,
        adb_program,
        // `[phone_services]`'s, compared with it below.
        host_files: _,
        wake_for_ui,
        ui_server_jar,
    } = adb;
    let b = &new.adb;
    differs("adb.wake_for_ui", *wake_for_ui != b.wake_for_ui);
    differs("adb.server", *server != b.server);
    differs("adb.start_server", *start_server != b.start_server);
    differs("adb.program", *adb_program != b.adb_program);
    differs("adb.ui_server_jar", *ui_server_jar != b.ui_server_jar);
    differs(
        "adb.workers_per_device",
        *workers_per_device != b.workers_per_device,
    );
    differs("calls.timeout_ms", *call_timeout != b.call_timeout);
    differs("state.dir", *state_dir != new.state_dir);
    differs("metrics", *metrics != new.metrics);
    let droidwarden_bridge::companion::CompanionConfig {
        request_timeout,
        queue_ttl,
        auto_register,
        max_auto_devices,
        names: companion_names,
    } = companion;
    let b = &new.companion;
    differs(
        "companion.request_timeout_ms",
        *request_timeout != b.request_timeout,
    );
    differs("companion.queue_ttl_ms", *queue_ttl != b.queue_ttl);
    differs("companion.auto_register", *auto_register != b.auto_register);
    differs(
        "companion.max_auto_devices",
        *max_auto_devices != b.max_auto_devices,
    );
    let crate::config::MqttSettings {
        broker,
        client_id,
        credentials,
        keep_alive,
        prefix,
        dedupe_window,
        max_ids_per_window,
        session_expiry,
        max_payload,
        discovery,
    } = mqtt;
    let b = &new.mqtt;
    match (broker, &b.broker) {
        (
            BrokerTarget::Embedded {
                listen: la,
                allow_remote: ra,
                anonymous: aa,
            },
            BrokerTarget::Embedded {
                listen: lb,
                allow_remote: rb,
                anonymous: ab,
            },
        ) => {
            differs("broker.listen", la != lb);
            differs("broker.allow_remote", ra != rb);
            differs("broker.anonymous", aa != ab);
        }
        (
            BrokerTarget::External {
                host: ha,
                port: pa,
                tls: ta,
            },
            BrokerTarget::External {
                host: hb,
                port: pb,
                tls: tb,
            },
        ) => {
            differs(
                "mqtt.url",
                ha != hb || pa != pb || ta.is_some() != tb.is_some(),
            );
            differs("mqtt.ca_file", ta.is_some() && tb.is_some() && ta != tb);
        }
        _ => differs("mqtt.url", true),
    }
    differs("mqtt.client_id", *client_id != b.client_id);
    differs("mqtt.username/password", *credentials != b.credentials);
    differs("mqtt.keep_alive_s", *keep_alive != b.keep_alive);
    differs("mqtt.topic_prefix", *prefix != b.prefix);
    differs("mqtt.dedupe_window_s", *dedupe_window != b.dedupe_window);
    differs(
        "mqtt.max_ids_per_window",
        *max_ids_per_window != b.max_ids_per_window,
    );
    differs("mqtt.session_expiry_s", *session_expiry != b.session_expiry);
    differs("mqtt.max_payload_bytes", *max_payload != b.max_payload);
    differs("mqtt.homeassistant", *discovery != b.discovery);
    differs("dbus.bus", *dbus != new.dbus);
    differs("llm", *llm != new.llm);
    differs("phone_services", *phone_services != new.phone_services);
    let mut kept = new.agent.clone();
    kept.approval = agent.approval.clone();
    // `[agent.skills]` and `[[agents]]` are applied on every reload (see
    // `daemon.rs`).
    kept.skills = agent.skills.clone();
    kept.agents = agent.agents.clone();
    differs("agent", *agent != kept);
    // Automations are read at start (their records and schedules live in
    // the driver): `droidwarden automations add/remove` changes them live.
    let sources = |list: &[crate::automations::model::Automation]| {
        list.iter().map(|a| a.source.clone()).collect::<Vec<_>>()
    };
    differs(
        "automations",
        sources(automations) != sources(&new.automations),
    );
    // MCP is set up once, at start: the HTTP endpoint binds its address
    // and reads its token, `[[mcp.servers]]` are spawned
    // (mcp/src/client.rs), and the tools are offered in one mode.
    let crate::mcp::McpConfig {
        tool_mode,
        tool_schemas,
        http,
        servers,
        elicitation,
    } = mcp;
    let b = &new.mcp;
    differs("mcp.tool_mode", *tool_mode != b.tool_mode);
    differs("mcp.tool_schemas", *tool_schemas != b.tool_schemas);
    differs("mcp.elicitation", *elicitation != b.elicitation);
    differs("mcp.servers", *servers != b.servers);
    match (http, &b.http) {
        (None, None) => {}
        (Some(a), Some(b)) => {
            let crate::mcp::http::HttpSettings {
                listen,
                allow_remote,
                token_file,
                elicitation: _,
                token_owner,
            } = a;
            differs("mcp.listen", *listen != b.listen);
            differs("mcp.allow_remote", *allow_remote != b.allow_remote);
            differs("mcp.token_file", *token_file != b.token_file);
            differs("mcp.token_owner", *token_owner != b.token_owner);
        }
        _ => differs("mcp.listen", true),
    }
    Plan {
        adb_devices: *adb_names != new.adb.names
            || *connect != new.adb.connect
            || *only_named != new.adb.only_named,
        adb_poll_interval: *poll_interval != new.adb.poll_interval,
        companion_names: *companion_names != new.companion.names,
        poll: *poll != new.poll,
        // `[phone_services]` inside it needs a restart (above), like the hub's.
        approval_policy: agent.approval
            != approval_keeping_phone(&agent.approval, &new.agent.approval),
        needs_restart: restart,
    }
}

/// The running parts a reload changes.
#[derive(Debug)]
pub(crate) struct Live<'a> {
    pub(crate) adb: &'a AdbTransport,
    pub(crate) companion: &'a CompanionHub,
    pub(crate) poll: &'a watch::Sender<Intervals>,
    pub(crate) assistant: Option<&'a Assistant>,
    /// The embedded broker's users, read again on SIGHUP (by the main loop,
    /// before the configuration); `None` without the embedded broker or
    /// with anonymous access.
    pub(crate) broker_users: Option<&'a crate::broker::UsersHandle>,
}

/// Apply `loaded` (the result of reading the configuration again) to the
/// running daemon and to `running`, which then describes what runs: the
/// live settings are the new ones, the others stay as they were started.
///
/// # Errors
/// The configuration error, when it did not load; nothing changed then.
pub(crate) fn apply(
    running: &mut Config,
    loaded: Result<Config, ConfigError>,
    live: &Live<'_>,
) -> Result<Plan, ConfigError> {
    let new = loaded?;
    let plan = plan(running, &new);
    if plan.adb_devices {
        let outcome = live.adb.reconfigure(
            new.adb.names.clone(),
            new.adb.connect.clone(),
            new.adb.only_named,
        );
        tracing::info!(
            renamed = outcome.renamed.len(),
            removed = outcome.removed.len(),
            added = outcome.added.len(),
            connect = ?new.adb.connect,
            only_named = new.adb.only_named,
            "ADB devices reconfigured"
        );
        running.adb.names = new.adb.names;
        running.adb.connect = new.adb.connect;
        running.adb.only_named = new.adb.only_named;
    }
    if plan.adb_poll_interval {
        live.adb.set_poll_interval(new.adb.poll_interval);
        tracing::info!(
            every_ms = new.adb.poll_interval.as_millis() as u64,
            "adb refresh interval changed"
        );
        running.adb.poll_interval = new.adb.poll_interval;
    }
    if plan.companion_names {
        let changes = live.companion.set_names(new.companion.names.clone());
        tracing::info!(changed = changes.len(), "companion names reconfigured");
        running.companion.names = new.companion.names;
    }
    if plan.poll {
        tracing::info!(poll = ?new.poll, "state polling intervals changed");
        live.poll.send_replace(new.poll.clone());
        running.poll = new.poll;
    }
    if plan.approval_policy {
        let mut agent = new.agent.clone();
        agent.approval = approval_keeping_phone(&running.agent.approval, &new.agent.approval);
        if let Some(assistant) = live.assistant {
            assistant.set_approval_policy(&agent);
            tracing::info!(policy = ?agent.approval, "approval policy changed");
        }
        running.agent.approval = agent.approval;
    }
    // Skills are read again on every reload, changed configuration or not
    // (their files may have changed); the main loop does the loading.
    running.agent.skills = new.agent.skills;
    running.agent.agents = new.agent.agents;
    for key in &plan.needs_restart {
        tracing::warn!(
            key,
            "configuration changed, but this key needs a restart; keeping the running value"
        );
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::load_with_env;
    use std::io::Write;

    fn load(text: &str) -> Config {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(text.as_bytes()).unwrap();
        load_with_env(Some(f.path()), Vec::new()).unwrap()
    }

    const BASE: &str = "[adb]\nconnect = [\"10.0.0.2:5555\"]\n[[devices]]\nname = \"kitchen\"\ntransport = \"adb\"\nserial = \"10.0.0.2:5555\"\n";

    fn check(changed: &str, expected: Plan) {
        let running = load(BASE);
        let new = load(&format!("{BASE}{changed}"));
        assert_eq!(plan(&running, &new), expected, "{changed:?}");
    }

    #[test]
    fn the_same_configuration_changes_nothing() {
        check("", Plan::default());
        assert!(!Plan::default().has_live_changes());
    }

    #[test]
    fn devices_and_intervals_change_live() {
        check(
            "[[devices]]\nname = \"hall\"\ntransport = \"adb\"\nserial = \"s2\"\n",
            Plan {
                adb_devices: true,
                ..Plan::default()
            },
        );
        check(
            "[[devices]]\nname = \"alice\"\ntransport = \"companion\"\ncompanion_id = \"alice-pixel\"\n",
            Plan {
                companion_names: true,
                ..Plan::default()
            },
        );
        let running = load(BASE);
        let only_named = load(&BASE.replace("[adb]\n", "[adb]\nonly_named = true\n"));
        assert!(plan(&running, &only_named).adb_devices);
        let renamed = load(&BASE.replace("kitchen", "hall"));
        assert!(plan(&running, &renamed).adb_devices);
        let more = load(&BASE.replace(
            "[\"10.0.0.2:5555\"]",
            "[\"10.0.0.2:5555\", \"10.0.0.3:5555\"]",
        ));
        assert!(plan(&running, &more).adb_devices);
        let faster = load(&format!("{BASE}[poll]\nbattery = 30\n"));
        let p = plan(&running, &faster);
        assert!(p.poll && p.has_live_changes() && p.needs_restart.is_empty());
        let adb_poll = load(&BASE.replace("[adb]\n", "[adb]\npoll_interval_ms = 500\n"));
        assert!(plan(&running, &adb_poll).adb_poll_interval);
        let policy = load(&format!(
            "{BASE}[agent.approval]\nauto_approve_up_to = \"medium\"\ndeny = [\"airplane_mode.*\"]\n"
        ));
        let p = plan(&running, &policy);
        assert!(p.approval_policy && p.has_live_changes() && p.needs_restart.is_empty());
    }

    #[test]
    fn start_only_keys_are_named() {
        let cases = [
            ("[mqtt]\nurl = \"mqtt://broker.lan\"\n", "mqtt.url"),
            ("[mqtt]\ntopic_prefix = \"dw\"\n", "mqtt.topic_prefix"),
            ("[mqtt]\nclient_id = \"other\"\n", "mqtt.client_id"),
            ("[mqtt]\nkeep_alive_s = 60\n", "mqtt.keep_alive_s"),
            (
                "[mqtt.homeassistant]\ndiscovery = false\n",
                "mqtt.homeassistant",
            ),
            ("[broker]\nlisten = \"127.0.0.1:1884\"\n", "broker.listen"),
            ("[broker]\nanonymous = true\n", "broker.anonymous"),
            ("[state]\ndir = \"/tmp/elsewhere\"\n", "state.dir"),
            ("[calls]\ntimeout_ms = 1000\n", "calls.timeout_ms"),
            ("[companion]\nqueue_ttl_ms = 5\n", "companion.queue_ttl_ms"),
            ("[dbus]\nbus = \"none\"\n", "dbus.bus"),
            ("[llm]\nprovider = \"openai\"\nmodel = \"qwen2.5\"\n", "llm"),
            ("[agent]\ntool_mode = \"direct\"\n", "agent"),
            (
                "[[automations]]\nname = \"a\"\ntrigger = { kind = \"manual\" }\naction = { kind = \"notify\", message = \"x\" }\n",
                "automations",
            ),
            // Every `[mcp]` key: the endpoint, its guards, the mode, the
            // servers (`mcp.elicitation` is below, on an endpoint).
            ("[mcp]\nlisten = \"127.0.0.1:8765\"\n", "mcp.listen"),
            ("[mcp]\ntool_mode = \"direct\"\n", "mcp.tool_mode"),
            ("[mcp]\nelicitation = false\n", "mcp.elicitation"),
            (
                "[[mcp.servers]]\nname = \"t\"\ncommand = \"true\"\n",
                "mcp.servers",
            ),
        ];
        for (changed, key) in cases {
            let running = load(BASE);
            let new = load(&format!("{BASE}{changed}"));
            let plan = plan(&running, &new);
            assert_eq!(plan.needs_restart, vec![key], "{changed:?}");
            assert!(!plan.has_live_changes(), "{changed:?}");
        }
        let running = load(BASE);
        let new = load(&BASE.replace("[adb]\n", "[adb]\nserver = \"127.0.0.1:5038\"\n"));
        assert_eq!(plan(&running, &new).needs_restart, vec!["adb.server"]);
        // The endpoint's own keys, on a running endpoint.
        let endpoint = "[mcp]\nlisten = \"127.0.0.1:8765\"\n";
        let running = load(&format!("{BASE}{endpoint}"));
        for (changed, key) in [
            ("listen = \"127.0.0.1:8766\"", "mcp.listen"),
            (
                "listen = \"0.0.0.0:8765\"\nallow_remote = true\ntoken_file = \"/t\"",
                "mcp.listen",
            ),
            (
                "token_file = \"/etc/droidwarden/mcp.token\"",
                "mcp.token_file",
            ),
            (
                "token_file = \"/t\"\ntoken_owner = \"alice\"",
                "mcp.token_owner",
            ),
            ("allow_remote = true", "mcp.allow_remote"),
        ] {
            let changed = endpoint.replace("listen = \"127.0.0.1:8765\"\n", "")
                + if changed.starts_with("listen") {
                    ""
                } else {
                    "listen = \"127.0.0.1:8765\"\n"
                }
                + changed
                + "\n";
            let new = load(&format!("{BASE}{changed}"));
            let plan = plan(&running, &new);
            assert!(plan.needs_restart.contains(&key), "{changed:?}: {plan:?}");
            assert!(!plan.has_live_changes(), "{changed:?}");
        }
    }
}
