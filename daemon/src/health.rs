//! The daemon's own health, for `droidwarden status` (D-Bus `Status`'s
//! `daemon` object): its version and uptime, the state directory, the adb
//! server (where, whether it answers, its version, what is wrong), the
//! MQTT broker, the agent, the approvals waiting and the automations. What
//! a new user needs to see when no phone shows up.

use crate::approvals::Approvals;
use crate::automations::api::AutomationSummary;
use crate::automations::{self, Automations};
use droidwarden_bridge::adb::AdbTransport;
use droidwarden_services::WireError;
use serde::{Deserialize, Serialize};
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

    /// The ADB transport the report reads: the one D-Bus `Pair` and
    /// `Discover` ask the adb server through. `None` without it.
    pub(crate) fn adb(&self) -> Option<&Arc<AdbTransport>> {
        self.adb.as_ref()
    }

    /// Say where the broker is once known (the embedded one's bound
    /// address, when the configuration let the system choose the port).
    pub(crate) fn broker_is(&self, broker: String) {
        *self.broker.lock().unwrap_or_else(|e| e.into_inner()) = broker;
    }

    /// The report, as `status --json` shows it under `daemon`. Every part
    /// is bounded: the adb server's version is asked with the transport's
    /// own request timeout, and a part that cannot be read says why.
    pub(crate) async fn report(
        &self,
        approvals: &Approvals,
        automations: &Automations,
    ) -> HealthReport {
        let adb = match &self.adb {
            None => None,
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
                Some(match version {
                    Ok(version) => AdbHealth {
                        server,
                        answers: true,
                        version: Some(version),
                        error: None,
                    },
                    Err(e) => AdbHealth {
                        server,
                        answers: false,
                        version: None,
                        error: Some(e.to_wire()),
                    },
                })
            }
        };
        // Each part within [`PART`], so a busy driver cannot hold up the
        // whole report (the CLI gives `Status` ten seconds).
        let late = || PartError::Text("no answer in time".into());
        let approvals = match tokio::time::timeout(PART, approvals.pending()).await {
            Ok(Ok(pending)) => Part::Read(u64::try_from(pending.len()).unwrap_or(u64::MAX)),
            Ok(Err(e)) => Part::Failed {
                error: PartError::Wire(e),
            },
            Err(_) => Part::Failed { error: late() },
        };
        let listed = tokio::time::timeout(PART, automations.request(automations::Op::List)).await;
        let automations = match listed {
            Ok(Ok(list)) => serde_json::from_value::<Vec<AutomationSummary>>(list)
                .ok()
                .map(|list| {
                    Part::Read(AutomationCount {
                        count: list.len(),
                        enabled: list.iter().filter(|a| a.enabled).count(),
                    })
                }),
            Ok(Err(e)) => Some(Part::Failed {
                error: PartError::Wire(e),
            }),
            Err(_) => Some(Part::Failed { error: late() }),
        };
        HealthReport {
            version: env!("CARGO_PKG_VERSION").to_owned(),
            uptime_s: self.started.elapsed().as_secs(),
            state_dir: self.state_dir.display().to_string(),
            adb,
            broker: self
                .broker
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
            agent: AgentHealth {
                on: self.agent.is_some(),
                model: self.agent.clone(),
            },
            approvals_waiting: approvals,
            automations,
        }
    }
}

/// The daemon's own health: `daemon` of D-Bus `Status()` (whose payload
/// types `crate::dbus::json` lists).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct HealthReport {
    /// The daemon's version.
    pub(crate) version: String,
    /// Seconds since it started.
    pub(crate) uptime_s: u64,
    /// Its state directory.
    pub(crate) state_dir: String,
    /// The adb server; `null` without the ADB transport.
    pub(crate) adb: Option<AdbHealth>,
    /// Where the MQTT broker is: `embedded, on 127.0.0.1:1883` or a URL.
    pub(crate) broker: String,
    /// Whether the agent is on, and its model.
    pub(crate) agent: AgentHealth,
    /// Approval requests waiting, of every kind.
    pub(crate) approvals_waiting: Part<u64>,
    /// The automations; `null` when their driver gave no list.
    pub(crate) automations: Option<Part<AutomationCount>>,
}

/// The adb server, as the health report sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct AdbHealth {
    /// Its address.
    pub(crate) server: String,
    /// Whether it answered.
    pub(crate) answers: bool,
    /// Its version (`1.0.41`), when it answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) version: Option<String>,
    /// What it answered with instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<WireError>,
}

/// The agent, as the health report sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct AgentHealth {
    /// Whether a language model is configured.
    pub(crate) on: bool,
    /// `provider model`, when on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) model: Option<String>,
}

/// How many automations there are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct AutomationCount {
    /// All of them.
    pub(crate) count: usize,
    /// Those enabled.
    pub(crate) enabled: usize,
}

/// A part of the health report, or why it could not be read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub(crate) enum Part<T> {
    /// What was read.
    Read(T),
    /// `{"error": …}`.
    Failed {
        /// Why.
        error: PartError,
    },
}

/// Why a part of the health report is missing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub(crate) enum PartError {
    /// The part answered with an error.
    Wire(WireError),
    /// It did not answer in time (`no answer in time`).
    Text(String),
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
pub(crate) fn lines(daemon: &HealthReport) -> Vec<String> {
    let mut lines = vec![format!(
        "droidwarden {}, up {} s, state in {}",
        daemon.version, daemon.uptime_s, daemon.state_dir
    )];
    if let Some(adb) = &daemon.adb {
        lines.push(match (&adb.version, &adb.error) {
            (Some(v), _) => format!("adb server {}: answers, version {v}", adb.server),
            (None, Some(e)) => format!("adb server {}: {}", adb.server, e.message),
            (None, None) => format!("adb server {}: does not answer", adb.server),
        });
    }
    lines.push(format!("MQTT broker: {}", daemon.broker));
    lines.push(match &daemon.agent.model {
        Some(model) => format!("agent: on, {model}"),
        None => "agent: off (no [llm] provider)".to_owned(),
    });
    if let Part::Read(n) = daemon.approvals_waiting {
        lines.push(format!(
            "approvals waiting: {n}{}",
            if n > 0 {
                " (droidwarden approvals)"
            } else {
                ""
            }
        ));
    }
    if let Some(Part::Read(automations)) = &daemon.automations {
        lines.push(format!(
            "automations: {} ({} enabled)",
            automations.count, automations.enabled
        ));
    }
    lines
}
