//! Configuration reload (SIGHUP, `systemctl reload`): the same layers are
//! read again (the `--config` file or the system file, then the
//! environment) and what can change while running is applied in place.
//!
//! Live: the devices (ADB names and the `connect` list, companion names),
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
pub(crate) fn plan(running: &Config, new: &Config) -> Plan {
    let mut restart = Vec::new();
    let mut differs = |key: &'static str, changed: bool| {
        if changed {
            restart.push(key);
        }
    };
    let (a, b) = (&running.adb, &new.adb);
    differs("adb.server", a.server != b.server);
    differs("adb.start_server", a.start_server != b.start_server);
    differs("adb.program", a.adb_program != b.adb_program);
    differs(
        "adb.workers_per_device",
        a.workers_per_device != b.workers_per_device,
    );
    differs("calls.timeout_ms", a.call_timeout != b.call_timeout);
    differs("state.dir", running.state_dir != new.state_dir);
    differs("metrics", running.metrics != new.metrics);
    let (a, b) = (&running.companion, &new.companion);
    differs(
        "companion.request_timeout_ms",
        a.request_timeout != b.request_timeout,
    );
    differs("companion.queue_ttl_ms", a.queue_ttl != b.queue_ttl);
    differs(
        "companion.auto_register",
        a.auto_register != b.auto_register,
    );
    differs(
        "companion.max_auto_devices",
        a.max_auto_devices != b.max_auto_devices,
    );
    let (a, b) = (&running.mqtt, &new.mqtt);
    match (&a.broker, &b.broker) {
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
    differs("mqtt.client_id", a.client_id != b.client_id);
    differs("mqtt.username/password", a.credentials != b.credentials);
    differs("mqtt.keep_alive_s", a.keep_alive != b.keep_alive);
    differs("mqtt.topic_prefix", a.prefix != b.prefix);
    differs("mqtt.dedupe_window_s", a.dedupe_window != b.dedupe_window);
    differs(
        "mqtt.max_ids_per_window",
        a.max_ids_per_window != b.max_ids_per_window,
    );
    differs(
        "mqtt.session_expiry_s",
        a.session_expiry != b.session_expiry,
    );
    differs("mqtt.max_payload_bytes", a.max_payload != b.max_payload);
    differs("mqtt.homeassistant", a.discovery != b.discovery);
    differs("dbus.bus", running.dbus != new.dbus);
    differs("llm", running.llm != new.llm);
    differs(
        "phone_services",
        running.phone_services != new.phone_services,
    );
    let mut agent = new.agent.clone();
    agent.approval = running.agent.approval.clone();
    // `[agent.skills]` and `[[agents]]` are applied on every reload (see
    // `daemon.rs`).
    agent.skills = running.agent.skills.clone();
    agent.agents = running.agent.agents.clone();
    differs("agent", running.agent != agent);
    // Automations are read at start (their records and schedules live in
    // the driver): `droidwarden automations add/remove` changes them live.
    let sources = |c: &Config| {
        c.automations
            .iter()
            .map(|a| a.source.clone())
            .collect::<Vec<_>>()
    };
    differs("automations", sources(running) != sources(new));
    // `[[mcp.servers]]` are spawned once, at start (daemon/src/mcp/client.rs).
    differs("mcp.servers", running.mcp.servers != new.mcp.servers);
    Plan {
        adb_devices: running.adb.names != new.adb.names || running.adb.connect != new.adb.connect,
        adb_poll_interval: running.adb.poll_interval != new.adb.poll_interval,
        companion_names: running.companion.names != new.companion.names,
        poll: running.poll != new.poll,
        // `[phone_services]` inside it needs a restart (above), like the hub's.
        approval_policy: running.agent.approval
            != approval_keeping_phone(&running.agent.approval, &new.agent.approval),
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
        let outcome = live
            .adb
            .reconfigure(new.adb.names.clone(), new.adb.connect.clone());
        tracing::info!(
            renamed = outcome.renamed.len(),
            removed = outcome.removed.len(),
            added = outcome.added.len(),
            connect = ?new.adb.connect,
            "ADB devices reconfigured"
        );
        running.adb.names = new.adb.names;
        running.adb.connect = new.adb.connect;
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
    }
}
