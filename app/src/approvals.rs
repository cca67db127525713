//! One approval list: the agent's requests (kept in its store, for runs,
//! skills, plans, delegates and MCP tool calls) and the automations' (kept by
//! their driver, `automation:<name>`), listed, answered and counted the same
//! way by every way in — the CLI over D-Bus, D-Bus itself, MQTT's
//! `cmd/approve` and `approvals/<id>` topics, and the metrics.
//!
//! Who may answer is decided by each way in before it comes here (D-Bus
//! policy and the private socket's peer check, MQTT roles, MCP elicitation's
//! rules); this module only routes the answer by the id's kind and records
//! `by`.

use crate::assistant::{self, Assistant};
use crate::automations::{self, Automations};
use droidwarden_agent::{Grant, PendingApproval};
use droidwarden_services::{ErrorCode, Risk, WireError};

/// The daemon's approval requests, whichever part of it waits.
#[derive(Debug, Clone)]
pub struct Approvals {
    assistant: Option<Assistant>,
    automations: Automations,
}

/// An answer to an approval request: the agent's
/// [`droidwarden_agent::ApprovalDecision`] (approve once, for the rest of
/// the run, with edited parameters, or deny with a reason). Automations take
/// approve and deny only.
pub use droidwarden_agent::ApprovalDecision as Decision;

/// How long `scope: "app"` allows an app when no `minutes` is given.
pub const DEFAULT_APP_MINUTES: u64 = 30;

/// The options every way in gives the same way (MQTT `cmd/approve`'s
/// fields, D-Bus `AnswerApproval`'s JSON): `decision` (`approve` or
/// `deny`), then for an approval either `scope: "run"` with an optional
/// `up_to` (`low` or `medium`, default `medium`), or `scope: "app"` with
/// `minutes` (allow the app in front of a screen action on its device for
/// that long, default 30), or `params` (an object of edited parameters);
/// `reason` for a denial. `scope: "once"` is the default.
///
/// # Errors
/// The message names the field that is wrong.
pub fn decision_of(
    decision: &str,
    scope: Option<&str>,
    up_to: Option<&str>,
    minutes: Option<u64>,
    params: Option<serde_json::Map<String, serde_json::Value>>,
    reason: Option<String>,
) -> Result<Decision, String> {
    let (run, app) = match scope {
        None | Some("once") => (false, false),
        Some("run") => (true, false),
        Some("app") => (false, true),
        Some(other) => {
            return Err(format!(
                "scope {:?} must be \"once\", \"run\" or \"app\"",
                other.chars().take(40).collect::<String>()
            ));
        }
    };
    if up_to.is_some() && !run {
        return Err("up_to goes with scope \"run\"".into());
    }
    if minutes.is_some() && !app {
        return Err("minutes goes with scope \"app\"".into());
    }
    if app {
        if decision != "approve" || params.is_some() {
            return Err("scope \"app\" goes with decision \"approve\" and no params".into());
        }
        let max = droidwarden_agent::grant::MAX_APP_MINUTES;
        let minutes = minutes.unwrap_or(DEFAULT_APP_MINUTES);
        return match u32::try_from(minutes) {
            Ok(m) if (1..=max).contains(&m) => Ok(Decision::AllowApp { minutes: m }),
            _ => Err(format!("minutes must be between 1 and {max}")),
        };
    }
    match decision {
        "deny" => {
            if run || params.is_some() {
                return Err("scope and params go with decision \"approve\"".into());
            }
            Ok(Decision::Deny {
                reason: reason.unwrap_or_default(),
            })
        }
        "approve" => match (run, params) {
            (true, Some(_)) => Err(
                "give either scope \"run\" or params, not both: an edit is approved once".into(),
            ),
            (true, None) => {
                let up_to = match up_to.unwrap_or("medium") {
                    "low" => Risk::Low,
                    "medium" => Risk::Medium,
                    other => {
                        return Err(format!(
                            "up_to {:?} must be \"low\" or \"medium\": high and critical actions are asked about one by one",
                            other.chars().take(40).collect::<String>()
                        ));
                    }
                };
                Ok(Decision::ApproveForRun { up_to })
            }
            (false, Some(params)) => Ok(Decision::ApproveWithEdits { params }),
            (false, None) => Ok(Decision::Approve),
        },
        other => Err(format!(
            "decision {:?} must be \"approve\" or \"deny\"",
            other.chars().take(40).collect::<String>()
        )),
    }
}

impl Approvals {
    /// The list over the agent (when it is on) and the automations.
    pub fn new(assistant: Option<Assistant>, automations: Automations) -> Self {
        Self {
            assistant,
            automations,
        }
    }

    /// Every request waiting for an answer, oldest first.
    ///
    /// # Errors
    /// The agent's store cannot be read, or the automations do not answer.
    pub async fn pending(&self) -> Result<Vec<PendingApproval>, WireError> {
        let mut all = match &self.assistant {
            Some(assistant) => assistant.pending_approvals().await?,
            None => Vec::new(),
        };
        all.extend(self.automations.pending_approvals().await?);
        all.sort_by(|a, b| (a.requested_at, &a.approval_id).cmp(&(b.requested_at, &b.approval_id)));
        Ok(all)
    }

    /// Answer request `approval_id` on behalf of `by` (who answered, as the
    /// way in names them); a denial's reason reaches the model when it is
    /// an agent's request.
    ///
    /// # Errors
    /// `not_found` for an unknown id, `invalid_request` for one already
    /// answered or expired, or for a grant or edits to an automation's
    /// request, `invalid_params` for a grant or edits the request cannot
    /// take, `unavailable` for an agent request while the agent is off.
    pub async fn answer(
        &self,
        approval_id: &str,
        decision: Decision,
        by: &str,
    ) -> Result<(), WireError> {
        self.answer_as(approval_id, decision, by, None).await
    }

    /// [`Approvals::answer`] from `account`, the account the way in vouches
    /// for: it may not approve the requests of a run it asked for
    /// (`permission_denied`), only deny them.
    ///
    /// # Errors
    /// As [`Approvals::answer`].
    pub async fn answer_as(
        &self,
        approval_id: &str,
        decision: Decision,
        by: &str,
        account: Option<&str>,
    ) -> Result<(), WireError> {
        if let Some(name) = approval_id.strip_prefix(automations::APPROVAL_PREFIX) {
            let approve = match decision {
                Decision::Approve => true,
                Decision::Deny { .. } => false,
                Decision::ApproveForRun { .. }
                | Decision::ApproveWithEdits { .. }
                | Decision::AllowApp { .. } => {
                    return Err(WireError::new(
                        ErrorCode::InvalidRequest,
                        "an automation's request is approved or denied, once: it has no run to grant and no parameters to edit",
                    ));
                }
            };
            let op = automations::Op::Answer {
                name: name.to_owned(),
                approve,
                by: by.to_owned(),
                account: account.map(str::to_owned),
            };
            self.automations.request(op).await?;
            return Ok(());
        }
        let assistant = self.assistant.as_ref().ok_or_else(assistant::disabled)?;
        assistant
            .answer_as(approval_id, decision, by, account)
            .await?;
        Ok(())
    }

    /// The grants for a run that still hold (the agent's only), oldest
    /// first; none while the agent is off.
    ///
    /// # Errors
    /// The agent's store cannot be read.
    pub async fn grants(&self) -> Result<Vec<Grant>, WireError> {
        match &self.assistant {
            Some(assistant) => assistant.grants().await,
            None => Ok(Vec::new()),
        }
    }

    /// Revoke grant `grant_id` on behalf of `by`.
    ///
    /// # Errors
    /// `not_found` for an unknown grant, `invalid_request` for one revoked
    /// already or whose run has ended, `unavailable` while the agent is off.
    pub async fn revoke(&self, grant_id: &str, by: &str) -> Result<Grant, WireError> {
        let assistant = self.assistant.as_ref().ok_or_else(assistant::disabled)?;
        assistant.revoke_grant(grant_id, by).await
    }
}

/// How many requests wait, kept from the event centre's events (the
/// agent's activity and the automations' requests), for the metrics and
/// systemd's status line.
#[derive(Debug, Default)]
pub struct OpenCount {
    agent: usize,
    automations: std::collections::BTreeSet<String>,
}

impl OpenCount {
    /// Take `event` into account; true when the count may have changed.
    pub fn on_event(&mut self, event: &crate::events::Event) -> bool {
        use crate::automations::AutomationEvent;
        use crate::events::Event;
        match event {
            Event::Activity(activity) => {
                self.agent = activity.approvals;
                true
            }
            Event::Automation(AutomationEvent::ApprovalRequested(request)) => {
                self.automations.insert(request.approval_id.clone())
            }
            Event::Automation(AutomationEvent::ApprovalClosed { approval_id }) => {
                self.automations.remove(approval_id)
            }
            _ => false,
        }
    }

    /// Requests waiting for a person, of every kind.
    pub fn total(&self) -> usize {
        self.agent + self.automations.len()
    }
}
