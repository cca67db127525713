//! Approvals for calls that do not come from a run of the agent: a device
//! action asked for by another client (an MCP client through the daemon)
//! that the approval policy says must wait for a person.
//!
//! Such a request is stored and announced exactly as a run's is (an
//! [`EventKind::ApprovalRequested`] event, listed by
//! [`Agent::pending_approvals`], answered by [`Agent::approve`] /
//! [`Agent::deny`], denied when it expires), so every place a person
//! answers the agent's requests answers these too. Its `run_id` is the
//! caller's own id (prefixed `ext-`), its `session` names the caller.

use super::{Agent, await_approval};
use crate::clock::now_ms;
use crate::error::AgentError;
use crate::events::{AgentEvent, EventKind, PendingApproval};
use crate::graph::Input;
use crate::store;
use droidwarden_services::{Command, ErrorCode, Risk, WireError};
use serde_json::json;

/// What an external caller asks a person to approve.
#[derive(Debug, Clone)]
pub struct ExternalRequest {
    /// Who asks, shown as the request's session (e.g. `mcp`); 1–64 of
    /// `[A-Za-z0-9_-]`.
    pub caller: String,
    /// The target device, when named.
    pub device: Option<String>,
    /// The validated command.
    pub command: Command,
    /// Its risk (for a screen action asked about again, its risk with
    /// `app` in front).
    pub risk: Risk,
    /// The app in front, for a screen action the app made riskier.
    pub app: Option<String>,
}

/// The prefix of an external request's `run_id`.
const RUN_PREFIX: &str = "ext-";

/// A person's answer to an external request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExternalAnswer {
    /// Approved: the caller may run the command.
    Approved,
    /// Denied, or expired; the reason.
    Denied(String),
}

impl Agent {
    /// Expire the external requests a previous process left pending: their
    /// callers are gone with it (an MCP call does not outlive its
    /// connection), so nobody would act on an answer. Call at start, before
    /// listing pending approvals. Returns how many were expired.
    ///
    /// # Errors
    /// A store error.
    pub async fn expire_orphaned_external_approvals(&self) -> Result<usize, AgentError> {
        let mut expired = 0;
        for approval in self.inner.store.pending_approvals().await? {
            if approval.run_id.starts_with(RUN_PREFIX) {
                self.inner.store.expire(approval.approval_id).await?;
                expired += 1;
            }
        }
        Ok(expired)
    }

    /// Store and announce an approval request for `request`, then wait for
    /// a person's answer or the policy's timeout (which denies). `on_open`
    /// is told the request as soon as it is stored, so the caller can say
    /// where to answer it.
    ///
    /// # Errors
    /// The store cannot be written, or the caller name is not a valid id.
    pub async fn request_external_approval(
        &self,
        request: ExternalRequest,
        on_open: impl FnOnce(&PendingApproval),
    ) -> Result<ExternalAnswer, WireError> {
        store::check_id(&request.caller).map_err(|e| e.to_wire())?;
        let now = now_ms();
        let timeout = self.approval_policy().timeout;
        let approval = PendingApproval {
            approval_id: store::new_id("ap"),
            run_id: store::new_id(RUN_PREFIX),
            session: request.caller.clone(),
            call_id: store::new_id("call"),
            device: request.device.clone(),
            service: request.command.service_id().to_owned(),
            action: request.command.action_name().to_owned(),
            params: request.command.params_json(),
            risk: request.risk,
            app: request.app.clone(),
            asked_by: None,
            requested_at: now,
            expires_at: now.saturating_add(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX)),
        };
        self.inner
            .store
            .insert_approval(approval.clone())
            .await
            .map_err(|e| e.to_wire())?;
        on_open(&approval);
        self.announce(
            &approval,
            EventKind::ApprovalRequested {
                approval: approval.clone(),
            },
        );
        let answer = await_approval(
            &self.inner,
            approval.call_id.clone(),
            approval.approval_id.clone(),
            approval.expires_at,
        )
        .await;
        let answer = match answer {
            Input::ApprovalAnswered {
                approved,
                reason,
                by,
                ..
            } => {
                self.announce(
                    &approval,
                    EventKind::ApprovalAnswered {
                        approval_id: approval.approval_id.clone(),
                        call_id: approval.call_id.clone(),
                        approved,
                        by,
                        reason: reason.clone(),
                        grant: None,
                        original_params: None,
                        edited_params: None,
                    },
                );
                if approved {
                    ExternalAnswer::Approved
                } else {
                    ExternalAnswer::Denied(reason.unwrap_or_else(|| "denied by the user".into()))
                }
            }
            _ => ExternalAnswer::Denied("no answer".into()),
        };
        // Close the request for everyone who shows open ones, as a run's
        // tool result does.
        self.announce(
            &approval,
            EventKind::ToolResult {
                call_id: approval.call_id.clone(),
                tool: format!("{}.{}", approval.service, approval.action),
                is_error: answer != ExternalAnswer::Approved,
                content: match &answer {
                    ExternalAnswer::Approved => json!({ "approved": true }),
                    ExternalAnswer::Denied(reason) => json!({
                        "error": WireError::new(ErrorCode::Denied, reason.clone())
                    }),
                },
            },
        );
        Ok(answer)
    }

    /// Send `kind` as an event of the external request's own run.
    fn announce(&self, approval: &PendingApproval, kind: EventKind) {
        let _ = self.inner.events.send(AgentEvent {
            run_id: approval.run_id.clone(),
            session_id: approval.session.clone(),
            skill: None,
            parent_run: None,
            kind,
        });
    }
}
