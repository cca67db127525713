//! The JSON shapes of the automations' management API that a client
//! reads or writes with types: the request ([`AutomationRequest`]) and an
//! automation's summary ([`AutomationSummary`], what `list` answers with
//! and `show`, `enable`, `disable` and `add` start with). The driver
//! writes the summary with this type, the CLI reads it back with it (over
//! D-Bus `Automation`, whose payload types `crate::dbus::json` lists).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A management request: `request_json` of D-Bus `Automation()`: `{"op": "list"}`, `{"op": "show",
/// "name": …}`, `{"op": "add", "definition": {…}}` … (docs/automations.md).
/// The daemon reads it as any client's JSON ([`super::Op::parse`], with
/// its own messages for what is wrong, as MQTT's `cmd/automation` is
/// read); the CLI writes it with this.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum AutomationRequest {
    /// Every automation, as [`AutomationSummary`]s.
    List,
    /// One automation: its summary, definition and record.
    Show {
        /// The automation.
        name: String,
    },
    /// Run it now.
    Run {
        /// The automation.
        name: String,
    },
    /// Enable it.
    Enable {
        /// The automation.
        name: String,
    },
    /// Disable it.
    Disable {
        /// The automation.
        name: String,
    },
    /// Approve the call it waits with.
    Approve {
        /// The automation.
        name: String,
    },
    /// Deny the call it waits with.
    Deny {
        /// The automation.
        name: String,
    },
    /// Add one at run time.
    Add {
        /// One `[[automations]]` table's keys.
        definition: Value,
    },
    /// Remove one added at run time.
    Remove {
        /// The automation.
        name: String,
    },
}

impl AutomationRequest {
    /// The request as the JSON text `Automation()` takes.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// One automation in the answer to `{"op": "list"}` (and the start of the
/// answers to `show`, `enable`, `disable` and `add`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AutomationSummary {
    /// Its name.
    pub name: String,
    /// Its description.
    pub description: String,
    /// Whether it runs when triggered.
    pub enabled: bool,
    /// What triggers it, in words.
    pub trigger: String,
    /// The time zone of its times (`system` when not set).
    pub time_zone: String,
    /// What it does: `call`, `ask`, `skill` …
    pub action: String,
    /// `config` or `added` (at run time).
    pub source: String,
    /// Runs started.
    pub runs: u64,
    /// Runs missed while the daemon was down.
    pub missed: u64,
    /// Runs skipped (conditions, rate limit).
    pub skipped: u64,
    /// When it is next due (RFC 3339), for an enabled timed automation.
    pub next_due: Option<String>,
    /// Its last run.
    pub last: Option<LastRun>,
}

/// The last run of an automation: its record with `at` as RFC 3339.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LastRun {
    /// The run's record (`run`, `status`, `trigger`, `at_ms` …).
    #[serde(flatten)]
    pub outcome: super::engine::Outcome,
    /// When it started (RFC 3339).
    pub at: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_automation_summary_reads_back_as_it_was_written() {
        use super::super::engine::{Outcome, Status};
        let summary = AutomationSummary {
            name: "lights".into(),
            description: "evening lights".into(),
            enabled: true,
            trigger: "cron 0 23 * * *".into(),
            time_zone: "system".into(),
            action: "call".into(),
            source: "config".into(),
            runs: 2,
            missed: 0,
            skipped: 1,
            next_due: Some("2026-11-22T23:00:00Z".into()),
            last: Some(LastRun {
                outcome: Outcome {
                    run: 2,
                    status: Status::WaitingApproval,
                    trigger: "manual".into(),
                    at_ms: 1_700_000_000_000,
                    finished_ms: None,
                    detail: Value::Null,
                },
                at: "2023-11-14T22:13:20Z".into(),
            }),
        };
        let value = serde_json::to_value(&summary).unwrap();
        assert_eq!(value["last"]["status"], "waiting_approval");
        assert_eq!(value["last"]["at"], "2023-11-14T22:13:20Z");
        assert_eq!(
            serde_json::from_value::<AutomationSummary>(value).unwrap(),
            summary
        );
        for status in [
            Status::Running,
            Status::Success,
            Status::Error,
            Status::Skipped,
            Status::Missed,
            Status::WaitingApproval,
            Status::Denied,
            Status::Interrupted,
        ] {
            assert_eq!(serde_json::to_value(status).unwrap(), status.as_str());
        }
    }

    #[test]
    fn automation_requests_are_what_the_daemon_parses() {
        use super::super::Op;
        let name = || "lights".to_owned();
        for (request, op) in [
            (AutomationRequest::List, Op::List),
            (AutomationRequest::Show { name: name() }, Op::Show(name())),
            (AutomationRequest::Run { name: name() }, Op::Run(name())),
            (
                AutomationRequest::Enable { name: name() },
                Op::Enable(name()),
            ),
            (
                AutomationRequest::Disable { name: name() },
                Op::Disable(name()),
            ),
            (
                AutomationRequest::Approve { name: name() },
                Op::Answer {
                    name: name(),
                    approve: true,
                    by: "me".into(),
                    account: None,
                },
            ),
            (
                AutomationRequest::Deny { name: name() },
                Op::Answer {
                    name: name(),
                    approve: false,
                    by: "me".into(),
                    account: None,
                },
            ),
            (
                AutomationRequest::Add {
                    definition: json!({"name": "x"}),
                },
                Op::Add {
                    definition: json!({"name": "x"}),
                    over_mqtt: false,
                    account: None,
                },
            ),
            (
                AutomationRequest::Remove { name: name() },
                Op::Remove(name()),
            ),
        ] {
            let body: Value = serde_json::from_str(&request.to_json()).unwrap();
            assert_eq!(Op::parse(&body, "me").unwrap(), op, "{body}");
        }
    }
}
