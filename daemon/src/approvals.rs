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
use droidwarden_agent::PendingApproval;
use droidwarden_services::WireError;

/// The daemon's approval requests, whichever part of it waits.
#[derive(Debug, Clone)]
pub(crate) struct Approvals {
    assistant: Option<Assistant>,
    automations: Automations,
}

/// An answer to an approval request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// The action goes ahead.
    Approve,
    /// It does not.
    Deny,
}

impl Decision {
    /// `approve` or `deny`, as replies name it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Approve => "approve",
            Self::Deny => "deny",
        }
    }
}

impl Approvals {
    /// The list over the agent (when it is on) and the automations.
    pub(crate) fn new(assistant: Option<Assistant>, automations: Automations) -> Self {
        Self {
            assistant,
            automations,
        }
    }

    /// Every request waiting for an answer, oldest first.
    ///
    /// # Errors
    /// The agent's store cannot be read, or the automations do not answer.
    pub(crate) async fn pending(&self) -> Result<Vec<PendingApproval>, WireError> {
        let mut all = match &self.assistant {
            Some(assistant) => assistant.pending_approvals().await?,
            None => Vec::new(),
        };
        all.extend(self.automations.pending_approvals().await?);
        all.sort_by(|a, b| (a.requested_at, &a.approval_id).cmp(&(b.requested_at, &b.approval_id)));
        Ok(all)
    }

    /// Answer request `approval_id` on behalf of `by` (who answered, as the
    /// way in names them); `reason` reaches the model when an agent's
    /// request is denied.
    ///
    /// # Errors
    /// `not_found` for an unknown id, `invalid_request` for one already
    /// answered or expired, `unavailable` for an agent request while the
    /// agent is off.
    pub(crate) async fn answer(
        &self,
        approval_id: &str,
        decision: Decision,
        reason: &str,
        by: &str,
    ) -> Result<(), WireError> {
        if let Some(name) = approval_id.strip_prefix(automations::APPROVAL_PREFIX) {
            let op = automations::Op::Answer {
                name: name.to_owned(),
                approve: decision == Decision::Approve,
                by: by.to_owned(),
            };
            self.automations.request(op).await?;
            return Ok(());
        }
        let assistant = self.assistant.as_ref().ok_or_else(assistant::disabled)?;
        match decision {
            Decision::Approve => assistant.approve(approval_id, by).await?,
            Decision::Deny => assistant.deny(approval_id, reason, by).await?,
        };
        Ok(())
    }
}

/// How many requests wait, kept from the event centre's events (the
/// agent's activity and the automations' requests), for the metrics and
/// systemd's status line.
#[derive(Debug, Default)]
pub(crate) struct OpenCount {
    agent: usize,
    automations: std::collections::BTreeSet<String>,
}

impl OpenCount {
    /// Take `event` into account; true when the count may have changed.
    pub(crate) fn on_event(&mut self, event: &crate::events::Event) -> bool {
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
    pub(crate) fn total(&self) -> usize {
        self.agent + self.automations.len()
    }
}
