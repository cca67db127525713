//! What a grant covers in a run, and the edited call a person approved:
//! the graph's side of [`crate::grant`] (whose types the events carry, so
//! they stay free of the graph).

use super::CallSlot;
use crate::events::PendingApproval;
use crate::grant::Grant;
use crate::policy::{ApprovalPolicy, Verdict};
use crate::tools::{Planned, Toolset};
use droidwarden_services::{ErrorCode, WireError};
use serde_json::{Map, Value};

/// Whether one of `grants` covers `planned` (a device action only).
pub(crate) fn covered(grants: &[Grant], planned: &Planned) -> Option<String> {
    let Planned::Device { device, risk, .. } = planned else {
        return None;
    };
    grants
        .iter()
        .find(|g| g.active() && g.covers(device.as_deref(), *risk))
        .map(|g| g.grant_id.clone())
}

/// Whether `grant` answers the waiting `request` at `now_ms`: a grant for
/// the run, a device action of its run on its device up to its ceiling
/// (never a skill or another tool); an app grant, a screen action on its
/// device with its app in front, up to the risk it was given at.
pub(crate) fn answers(grant: &Grant, request: &PendingApproval, now_ms: u64) -> bool {
    if !grant.active() {
        return false;
    }
    let device = request.device.as_deref();
    let device_action = request.service != super::SKILL_SERVICE
        && request.service != crate::tools::extra::EXTRA_SERVICE;
    match &request.app {
        _ if grant.run_scoped() => {
            device_action && request.run_id == grant.run_id && grant.covers(device, request.risk)
        }
        Some(app) => {
            device_action && grant.covers_app(device, app, now_ms) && request.risk <= grant.up_to
        }
        None => false,
    }
}

fn refused(message: impl Into<String>) -> WireError {
    WireError::new(ErrorCode::InvalidParams, message)
}

/// The call of `slot` with `edits` merged over the model's parameters,
/// validated by the catalogue exactly like the model's call (through
/// `toolset`), checked by `policy` again, and refused when it would change
/// the action, the device or the risk.
///
/// # Errors
/// `invalid_params` with the reason: not a device action, the edited
/// parameters fail validation, the action or device changed, the risk
/// rose, or the policy refuses the edited call.
pub(crate) fn plan_edited(
    toolset: &Toolset,
    policy: &ApprovalPolicy,
    slot: &CallSlot,
    edits: &Map<String, Value>,
) -> Result<Planned, WireError> {
    let Some(Planned::Device {
        device, call, risk, ..
    }) = &slot.planned
    else {
        return Err(refused(
            "only a device action's parameters can be edited; approve or deny it",
        ));
    };
    let mut args: Map<String, Value> = serde_json::from_str(&slot.call.arguments)
        .map_err(|_| refused("the original call's arguments cannot be read"))?;
    // The validated parameters are the base: the model may have written
    // them as JSON text or beside the other arguments (see
    // `tools::Toolset::plan`).
    args.retain(|k, _| matches!(k.as_str(), "device" | "service_id" | "action"));
    let mut params = match call.0.params_json() {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    for (key, value) in edits {
        params.insert(key.clone(), value.clone());
    }
    args.insert("parameters".into(), Value::Object(params));
    // Pin the device the person was asked about: an edit cannot move it.
    if let Some(device) = device {
        args.insert("device".into(), Value::String(device.clone()));
    }
    let edited_call = crate::message::ToolCall {
        arguments: Value::Object(args).to_string(),
        ..slot.call.clone()
    };
    let edited = toolset.plan(&edited_call).map_err(|e| {
        refused(format!(
            "the edited parameters are not valid: {}",
            e.message
        ))
    })?;
    let Planned::Device {
        device: new_device,
        call: new_call,
        risk: new_risk,
        ..
    } = &edited
    else {
        return Err(refused("an edit may not change the action"));
    };
    if new_call.0.service_id() != call.0.service_id()
        || new_call.0.action_name() != call.0.action_name()
    {
        return Err(refused("an edit may not change the action"));
    }
    if new_device != device {
        return Err(refused("an edit may not change the device"));
    }
    if new_risk > risk {
        return Err(refused("an edit may not raise the action's risk"));
    }
    policy.phone.check(&new_call.0).map_err(|e| {
        refused(format!(
            "the edited call is refused by the phone-services policy: {}",
            e.message
        ))
    })?;
    if let Verdict::Deny(reason) =
        policy.decide(new_call.0.service_id(), new_call.0.action_name(), *new_risk)
    {
        return Err(refused(reason));
    }
    Ok(edited)
}
