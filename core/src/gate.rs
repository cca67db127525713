//! The approval gate for calls whose caller is not trusted to decide by
//! itself — MCP clients (over HTTP inside the daemon, or `droidwarden mcp`
//! through D-Bus `CallChecked`): the same policy as the agent's
//! (`[agent.approval]`), and the same requests, announced on MQTT and
//! D-Bus, listed by `droidwarden approvals`, answered by `droidwarden
//! approve | deny`, denied when they expire.
//!
//! A model behind an MCP client is as untrusted as the daemon's own, so an
//! action above the threshold waits for a person; without the agent
//! (no `[llm]`) there is no one to ask and such an action is refused with
//! a message that says so. The gate sits above the hub's own checks (the
//! phone policy and the app in front), which every call meets anyway.

use crate::assistant::Assistant;
use crate::hub::{Call, Hub};
use droidwarden_agent::policy::Verdict;
use droidwarden_agent::{ApprovalPolicy, ExternalAnswer, ExternalRequest, GRANT_CEILING};
use droidwarden_services::{ErrorCode, Risk, WireError, ui};
use serde_json::Value;

/// Who the gate's approval requests are listed as (their `session`).
pub const CALLER: &str = "mcp";

/// Run `call` under the approval policy: at once, refused, or after a
/// person's approval.
///
/// # Errors
/// `denied` when the policy refuses it, a person denies it or the request
/// expires; otherwise the call's own errors.
pub async fn call_checked(
    hub: &Hub,
    assistant: Option<&Assistant>,
    call: Call,
) -> Result<Value, WireError> {
    call_checked_with(hub, assistant, call, |_| {}).await
}

/// [`call_checked`], telling `on_open` the approval request's id as soon
/// as the call waits for one (never called when it runs or is refused at
/// once), so the caller can ask for the answer itself (elicitation,
/// `elicit.rs`).
///
/// # Errors
/// As [`call_checked`].
pub async fn call_checked_with(
    hub: &Hub,
    assistant: Option<&Assistant>,
    call: Call,
    on_open: impl FnOnce(&str),
) -> Result<Value, WireError> {
    let spec = call.command.spec();
    let service = call.command.service_id();
    let action = call.command.action_name();
    let policy = assistant.map_or_else(ApprovalPolicy::default, |a| {
        (*a.agent().approval_policy()).clone()
    });
    let mut on_open = Some(on_open);
    let cleared = match policy.decide(service, action, spec.risk) {
        // An allow-listed action always runs, whatever app is in front.
        Verdict::Allow if policy.allowed(service, action) => Risk::High,
        Verdict::Allow => policy.auto_approve_up_to.min(Risk::High).max(spec.risk),
        Verdict::Deny(reason) => return Err(WireError::new(ErrorCode::Denied, reason)),
        Verdict::Ask => {
            let Some(assistant) = assistant else {
                return Err(WireError::new(
                    ErrorCode::Denied,
                    format!(
                        "{service}.{action} ({} risk) needs a person's approval, and approvals need the agent, which is off (no [llm] configured); allow it in [agent.approval] allow to run it without asking",
                        spec.risk.as_str()
                    ),
                ));
            };
            ask(assistant, &call, spec.risk, None, on_open.take()).await?;
            spec.risk
        }
    };
    run_cleared(hub, assistant, call, cleared, on_open).await
}

/// Run `call` cleared up to `cleared`; a screen action the app in front
/// makes riskier (`approval_required`) runs again once an app grant covers
/// it or a person approves it at that risk. Each round raises the
/// clearance, so there are at most as many as risk levels.
async fn run_cleared(
    hub: &Hub,
    assistant: Option<&Assistant>,
    call: Call,
    mut cleared: Risk,
    mut on_open: Option<impl FnOnce(&str)>,
) -> Result<Value, WireError> {
    loop {
        let error = match hub.call_cleared(call.clone(), cleared).await {
            Err(error) => error,
            done => return done,
        };
        let Some((app, risk)) = ui::required(&error).filter(|(_, r)| *r > cleared) else {
            return Err(error);
        };
        let Some(assistant) = assistant else {
            return Err(error);
        };
        let device = hub.device_name(call.device.as_deref());
        let allowed = match (&device, &app) {
            (Some(device), Some(app)) if risk <= GRANT_CEILING => assistant
                .agent()
                .app_allowed(device.as_str(), app)
                .await
                .map_err(|e| e.to_wire())?,
            _ => false,
        };
        if !allowed {
            ask(assistant, &call, risk, app, on_open.take()).await?;
        }
        cleared = risk;
    }
}

/// Ask a person about `call` at `risk` (with `app` in front, when the app
/// raised it) and wait.
///
/// # Errors
/// `denied` when a person denies it or the request expires.
async fn ask(
    assistant: &Assistant,
    call: &Call,
    risk: Risk,
    app: Option<String>,
    on_open: Option<impl FnOnce(&str)>,
) -> Result<(), WireError> {
    let request = ExternalRequest {
        caller: CALLER.to_owned(),
        device: call.device.clone(),
        command: call.command.clone(),
        risk,
        app,
    };
    let answer = assistant
        .agent()
        .request_external_approval(request, |a| {
            tracing::info!(
                approval = a.approval_id,
                service = a.service,
                action = a.action,
                "an MCP call waits for approval"
            );
            if let Some(on_open) = on_open {
                on_open(&a.approval_id);
            }
        })
        .await?;
    match answer {
        ExternalAnswer::Approved => Ok(()),
        ExternalAnswer::Denied(reason) => Err(WireError::new(ErrorCode::Denied, reason)),
    }
}

/// The longest ticket [`ticketed_call`] accepts.
const MAX_TICKET: usize = 128;

/// D-Bus `CallCheckedTicket`: [`call_checked`], and `announce` the
/// approval id when the call waits for one (so `droidwarden mcp` can ask
/// its client for the answer).
///
/// # Errors
/// A bad ticket (`invalid_params`), or as [`call_checked`].
pub async fn ticketed_call<F, Fut>(
    hub: &Hub,
    assistant: Option<&Assistant>,
    call: Call,
    ticket: &str,
    announce: F,
) -> Result<Value, WireError>
where
    F: FnOnce(String) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    if ticket.is_empty() || ticket.chars().count() > MAX_TICKET {
        return Err(WireError::new(
            ErrorCode::InvalidParams,
            format!("ticket must be 1 to {MAX_TICKET} characters"),
        ));
    }
    let (tx, rx) = tokio::sync::oneshot::channel::<String>();
    let run = call_checked_with(hub, assistant, call, move |id| {
        let _ = tx.send(id.to_owned());
    });
    let tell = async move {
        if let Ok(id) = rx.await {
            announce(id).await;
        }
    };
    let (result, ()) = tokio::join!(run, tell);
    result
}
