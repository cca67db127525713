//! The daemon's own health, for `droidwarden status` (D-Bus `Status`'s
//! `daemon` object): its version and uptime, the state directory, the adb
//! server (where, whether it answers, its version, what is wrong), the
//! MQTT broker, the agent and whether its model answers, the approvals
//! waiting and the automations. What a new user needs to see when no phone
//! shows up. The same report goes to D-Bus `Status` and, retained, to the
//! MQTT topic `<prefix>/health` (`crate::mqtt::run_health`).
//!
//! The model's reachability is a probe of its model list
//! (`droidwarden_agent::provider::probe`), cached for [`MODEL_FRESH`] after
//! an answer and [`MODEL_RETRY`] after none, and never waited for longer
//! than [`PART`]: a status asked while the model server hangs says so
//! instead of hanging with it.

use crate::approvals::Approvals;
use crate::automations::api::AutomationSummary;
use crate::automations::{self, Automations};
use droidwarden_agent::LlmConfig;
use droidwarden_agent::provider::probe::{self, ModelReach};
use droidwarden_bridge::adb::AdbTransport;
use droidwarden_bridge::adb::host::{self, HostError, MdnsCheck};
use droidwarden_services::WireError;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// The longest one part of the report may take.
const PART: std::time::Duration = std::time::Duration::from_secs(2);

/// How long the model's answer to the probe is kept.
const MODEL_FRESH: std::time::Duration = std::time::Duration::from_secs(60);
/// How long "no answer" is kept before the model is probed again.
const MODEL_RETRY: std::time::Duration = std::time::Duration::from_secs(15);

/// What the health report is read from, fixed at start.
#[derive(Debug, Clone)]
pub struct Health {
    started: Instant,
    state_dir: PathBuf,
    adb: Option<Arc<AdbTransport>>,
    /// Where the daemon's MQTT broker is ([`Health::broker_is`]).
    broker: Arc<std::sync::Mutex<String>>,
    /// `provider model`, when the agent is on.
    agent: Option<String>,
    /// The model to probe ([`Health::with_model`]), and the last answer.
    model: Option<Arc<ModelProbe>>,
}

/// The model's settings and the probe's last answer, with when it came.
#[derive(Debug)]
struct ModelProbe {
    llm: LlmConfig,
    last: tokio::sync::Mutex<Option<(Instant, ModelReach)>>,
}

impl Health {
    /// The report's sources: the state directory, the ADB transport (none
    /// in tests that have no adb), the broker as configured and the agent's
    /// model, when it is on.
    pub fn new(
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
            model: None,
        }
    }

    /// Probe `llm`'s endpoint for the report (the agent's model).
    pub fn with_model(mut self, llm: Option<LlmConfig>) -> Self {
        self.model = llm.map(|llm| {
            Arc::new(ModelProbe {
                llm,
                last: tokio::sync::Mutex::new(None),
            })
        });
        self
    }

    /// The ADB transport the report reads: the one D-Bus `Pair` and
    /// `Discover` ask the adb server through. `None` without it.
    pub fn adb(&self) -> Option<&Arc<AdbTransport>> {
        self.adb.as_ref()
    }

    /// Say where the broker is once known (the embedded one's bound
    /// address, when the configuration let the system choose the port).
    pub fn broker_is(&self, broker: String) {
        *self.broker.lock().unwrap_or_else(|e| e.into_inner()) = broker;
    }

    /// The report, as `status --json` shows it under `daemon`. Every part
    /// is bounded: the adb server's version is asked with the transport's
    /// own request timeout, and a part that cannot be read says why.
    pub async fn report(&self, approvals: &Approvals, automations: &Automations) -> HealthReport {
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
                    Ok(version) => {
                        let (pairing, mdns) = wireless(adb.server()).await;
                        AdbHealth {
                            server,
                            answers: true,
                            version: Some(version),
                            error: None,
                            pairing,
                            mdns,
                        }
                    }
                    Err(e) => AdbHealth {
                        server,
                        answers: false,
                        version: None,
                        error: Some(e.to_wire()),
                        pairing: None,
                        mdns: None,
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
        // Awaited before the report is built: the broker's lock below
        // must not be held across an await.
        let reach = match &self.model {
            Some(model) => Some(model.reach().await),
            None => None,
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
                reach,
            },
            approvals_waiting: approvals,
            automations,
        }
    }
}

impl ModelProbe {
    /// The last answer while fresh, else a new probe, within [`PART`]
    /// (a probe still running when a second status asks is waited for,
    /// within the same bound, rather than doubled).
    async fn reach(&self) -> ModelReach {
        let asked = async {
            let mut last = self.last.lock().await;
            if let Some((at, reach)) = last.as_ref() {
                let keep = if reach.answers() {
                    MODEL_FRESH
                } else {
                    MODEL_RETRY
                };
                if at.elapsed() < keep {
                    return reach.clone();
                }
            }
            let reach = probe::probe(&self.llm, PART).await;
            *last = Some((Instant::now(), reach.clone()));
            reach
        };
        // The probe has PART itself; the lock's wait is bounded here.
        tokio::time::timeout(PART + PART, asked)
            .await
            .unwrap_or_else(|_| ModelReach::Unreachable {
                reason: "no answer in time".into(),
            })
    }
}

/// Whether the adb server at `server` can pair (platform-tools 30+) and
/// whether its mDNS discovery runs, in its words; `None` when it could
/// not be asked within [`PART`].
async fn wireless(server: std::net::SocketAddrV4) -> (Option<bool>, Option<String>) {
    match host::mdns_check(server, PART).await {
        Ok(MdnsCheck::Running(text) | MdnsCheck::Disabled(text)) => (Some(true), Some(text)),
        Err(HostError::Unsupported { .. }) => (Some(false), None),
        Err(_) => (None, None),
    }
}

/// What to do about the model's answer, for people; `None` when it answers.
pub fn model_advice(reach: &ModelReach) -> Option<String> {
    match reach {
        ModelReach::Reachable { .. } => None,
        ModelReach::KeyRefused { status } => Some(format!(
            "the model's server refused the API key (HTTP {status}): check [llm] api_key_env or api_key_file"
        )),
        ModelReach::Answered { status } => Some(format!(
            "the model's server answers, but not its model list (HTTP {status}): if asks fail, check [llm] base_url and model"
        )),
        ModelReach::Unreachable { reason } => Some(format!(
            "the model is unreachable ({reason}): start the model server, or fix [llm] base_url; `droidwarden ask` fails until it answers"
        )),
        ModelReach::NoKey { reason } => Some(format!(
            "the model's API key cannot be read ({reason}): set it, or fix [llm] api_key_env or api_key_file"
        )),
        _ => Some("the model's state is unknown".into()),
    }
}

/// The daemon's own health: `daemon` of D-Bus `Status()` (whose payload
/// types `crate::dbus::json` lists).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HealthReport {
    /// The daemon's version.
    pub version: String,
    /// Seconds since it started.
    pub uptime_s: u64,
    /// Its state directory.
    pub state_dir: String,
    /// The adb server; `null` without the ADB transport.
    pub adb: Option<AdbHealth>,
    /// Where the MQTT broker is: `embedded, on 127.0.0.1:1883` or a URL.
    pub broker: String,
    /// Whether the agent is on, and its model.
    pub agent: AgentHealth,
    /// Approval requests waiting, of every kind.
    pub approvals_waiting: Part<u64>,
    /// The automations; `null` when their driver gave no list.
    pub automations: Option<Part<AutomationCount>>,
}

/// The adb server, as the health report sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdbHealth {
    /// Its address.
    pub server: String,
    /// Whether it answered.
    pub answers: bool,
    /// Its version (`1.0.41`), when it answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// What it answered with instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<WireError>,
    /// Whether it can pair phones for wireless debugging (platform-tools
    /// 30 or newer); absent when it could not be asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pairing: Option<bool>,
    /// Its mDNS discovery, in its words (`mdns daemon version …`, or
    /// `ERROR: mdns discovery disabled`); absent when it has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mdns: Option<String>,
}

/// The agent, as the health report sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentHealth {
    /// Whether a language model is configured.
    pub on: bool,
    /// `provider model`, when on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Whether the model's server answered the probe of its model list
    /// (`reach`: `reachable`, `key_refused`, `answered`, `unreachable`,
    /// `no_key`), when on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reach: Option<ModelReach>,
}

/// How many automations there are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AutomationCount {
    /// All of them.
    pub count: usize,
    /// Those enabled.
    pub enabled: usize,
}

/// A part of the health report, or why it could not be read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Part<T> {
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
pub enum PartError {
    /// The part answered with an error.
    Wire(WireError),
    /// It did not answer in time (`no answer in time`).
    Text(String),
}

/// `daemon` of a status report as lines for people.
pub fn lines(daemon: &HealthReport) -> Vec<String> {
    let mut lines = vec![format!(
        "droidwarden {}, up {} s, state in {}",
        daemon.version, daemon.uptime_s, daemon.state_dir
    )];
    if let Some(adb) = &daemon.adb {
        lines.push(match (&adb.version, &adb.error) {
            (Some(v), _) => format!(
                "adb server {}: answers, version {v}{}",
                adb.server,
                match (adb.pairing, &adb.mdns) {
                    (Some(true), Some(mdns)) => format!("; pairs phones, mDNS: {mdns}"),
                    (Some(true), None) => "; pairs phones".to_owned(),
                    (Some(false), _) => "; too old to pair or discover phones (platform-tools 30 or newer needed: see `droidwarden pair`)".to_owned(),
                    (None, _) => String::new(),
                }
            ),
            (None, Some(e)) => format!("adb server {}: {}", adb.server, e.message),
            (None, None) => format!("adb server {}: does not answer", adb.server),
        });
    }
    lines.push(format!("MQTT broker: {}", daemon.broker));
    lines.push(match &daemon.agent.model {
        Some(model) => match daemon.agent.reach.as_ref().and_then(model_advice) {
            Some(advice) => format!("agent: on, {model}; {advice}"),
            None if daemon.agent.reach.is_some() => {
                format!("agent: on, {model}; the model answers")
            }
            None => format!("agent: on, {model}"),
        },
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
