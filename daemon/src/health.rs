//! The daemon's own health, for `droidwarden status` (D-Bus `Status`'s
//! `daemon` object): its version and uptime, the state directory, the adb
//! server (where, whether it answers, its version, what is wrong), the
//! MQTT broker, the agent, the approvals waiting and the automations. What
//! a new user needs to see when no phone shows up.

use crate::approvals::Approvals;
use crate::automations::{self, Automations};
use droidwarden_bridge::adb::AdbTransport;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// The longest one part of the report may take.
const PART: std::time::Duration = std::time::Duration::from_secs(2);

/// What the health report is read from, fixed at start.
#[derive(Debug, Clone)]
pub(crate) struct Health {
    started: Instant,
    state_dir: PathBuf,
    adb: Option<Arc<AdbTransport>>,
    /// Where the daemon's MQTT broker is ([`Health::broker_is`]).
    broker: Arc<std::sync::Mutex<String>>,
    /// `provider model`, when the agent is on.
    agent: Option<String>,
}

impl Health {
    /// The report's sources: the state directory, the ADB transport (none
    /// in tests that have no adb), the broker as configured and the agent's
    /// model, when it is on.
    pub(crate) fn new(
        state_dir: PathBuf,
        adb: Option<Arc<AdbTransport>>,
        broker: String,
        agent: Option<String>,
    ) -> Self {
        Self {
            started: Instant::now(),
            state_dir,
            adb,
            broker: Arc::new(std::sync::Mutex::new(broker)),
            agent,
        }
    }

    /// Say where the broker is once known (the embedded one's bound
    /// address, when the configuration let the system choose the port).
    pub(crate) fn broker_is(&self, broker: String) {
        *self.broker.lock().unwrap_or_else(|e| e.into_inner()) = broker;
    }

    /// The report, as `status --json` shows it under `daemon`. Every part
    /// is bounded: the adb server's version is asked with the transport's
    /// own request timeout, and a part that cannot be read says why.
    pub(crate) async fn report(&self, approvals: &Approvals, automations: &Automations) -> Value {
        let adb = match &self.adb {
            None => Value::Null,
            Some(adb) => {
                let server = adb.server().to_string();
                // A server the last refresh could not reach is not asked
                // again from here (its requests hold threads while it
                // hangs): that refresh's error is the answer.
                let known = adb
                    .registry()
                    .problems()
                    .into_iter()
                    .find(|(transport, _)| *transport == "adb")
                    .map(|(_, e)| e);
                let version = match known {
                    Some(e) => Err(e),
                    None => adb.server_version().await,
                };
                match version {
                    Ok(version) => json!({"server": server, "answers": true, "version": version}),
                    Err(e) => json!({"server": server, "answers": false, "error": e.to_wire()}),
                }
            }
        };
        // Each part within [`PART`], so a busy driver cannot hold up the
        // whole report (the CLI gives `Status` ten seconds).
        let late = || json!({"error": "no answer in time"});
        let approvals = match tokio::time::timeout(PART, approvals.pending()).await {
            Ok(Ok(pending)) => json!(pending.len()),
            Ok(Err(e)) => json!({"error": e}),
            Err(_) => late(),
        };
        let listed = tokio::time::timeout(PART, automations.request(automations::Op::List)).await;
        let automations = match listed {
            Ok(Ok(Value::Array(list))) => json!({
                "count": list.len(),
                "enabled": list.iter().filter(|a| a["enabled"] == true).count(),
            }),
            Ok(Ok(_)) => Value::Null,
            Ok(Err(e)) => json!({"error": e}),
            Err(_) => late(),
        };
        json!({
            "version": env!("CARGO_PKG_VERSION"),
            "uptime_s": self.started.elapsed().as_secs(),
            "state_dir": self.state_dir.display().to_string(),
            "adb": adb,
            "broker": self.broker.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            "agent": self.agent.as_deref().map_or_else(|| json!({"on": false}), |m| json!({"on": true, "model": m})),
            "approvals_waiting": approvals,
            "automations": automations,
        })
    }
}

/// Where the broker is, as configured: `embedded, on 127.0.0.1:1883` or
/// `mqtts://broker.lan:8883`.
pub(crate) fn broker_description(broker: &crate::config::BrokerTarget) -> String {
    match broker {
        crate::config::BrokerTarget::Embedded { listen, .. } => format!("embedded, on {listen}"),
        crate::config::BrokerTarget::External { host, port, tls } => format!(
            "{}://{host}:{port}",
            if tls.is_some() { "mqtts" } else { "mqtt" }
        ),
    }
}

/// `daemon` of a status report as lines for people.
pub(crate) fn lines(daemon: &Value) -> Vec<String> {
    let mut lines = Vec::new();
    let Some(version) = daemon["version"].as_str() else {
        return lines;
    };
    lines.push(format!(
        "droidwarden {version}, up {} s, state in {}",
        daemon["uptime_s"].as_u64().unwrap_or(0),
        daemon["state_dir"].as_str().unwrap_or("?")
    ));
    let adb = &daemon["adb"];
    if let Some(server) = adb["server"].as_str() {
        lines.push(match adb["version"].as_str() {
            Some(v) => format!("adb server {server}: answers, version {v}"),
            None => format!(
                "adb server {server}: {}",
                adb["error"]["message"]
                    .as_str()
                    .unwrap_or("does not answer")
            ),
        });
    }
    lines.push(format!(
        "MQTT broker: {}",
        daemon["broker"].as_str().unwrap_or("?")
    ));
    lines.push(match daemon["agent"]["model"].as_str() {
        Some(model) => format!("agent: on, {model}"),
        None => "agent: off (no [llm] provider)".to_owned(),
    });
    if let Some(n) = daemon["approvals_waiting"].as_u64() {
        lines.push(format!(
            "approvals waiting: {n}{}",
            if n > 0 {
                " (droidwarden approvals)"
            } else {
                ""
            }
        ));
    }
    if let Some(n) = daemon["automations"]["count"].as_u64() {
        lines.push(format!(
            "automations: {n} ({} enabled)",
            daemon["automations"]["enabled"].as_u64().unwrap_or(0)
        ));
    }
    lines
}
