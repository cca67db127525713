//! What the agent needs from the daemon: the devices and a way to run one
//! catalogue action on one of them. The daemon implements [`ToolHost`] over
//! its call hub; tests use [`crate::testing::FakeToolHost`].

use droidwarden_services::{Command, WireError};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::future::Future;
use std::pin::Pin;

/// A boxed, sendable future: the return type of the object-safe async
/// traits in this crate ([`ToolHost`], [`crate::Provider`]).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a [`ToolHost`] call gives back: the action's result, or the error
/// the model is shown.
pub type ToolFuture<'a> = BoxFuture<'a, Result<Value, WireError>>;

/// A device as the agent sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceSummary {
    /// The device name (a `DeviceName`: what the model writes in `device`).
    pub name: String,
    /// Service ids this device offers (e.g. `battery`, `audio_automation`).
    pub services: Vec<String>,
    /// Whether it is reachable now (offline devices stay listed: the
    /// transport may queue the call).
    pub online: bool,
}

/// Runs catalogue actions on devices. Implemented by the daemon.
///
/// `call` receives a typed command, checked against the catalogue when the
/// model's call was planned.
/// Errors are [`WireError`]s: the agent shows them to the model as the tool's
/// result, and retries those marked `retryable` (for actions that change
/// the device, only `device_offline` and `busy`, which guarantee nothing
/// ran).
pub trait ToolHost: Send + Sync + std::fmt::Debug {
    /// The configured devices, with the services each offers.
    fn devices(&self) -> Vec<DeviceSummary>;

    /// The longest a call on `device` can take before the host answers it
    /// by itself (the device's own bound: for a phone that queues calls
    /// while offline, its queue time and answer deadline), when known. The
    /// agent waits at least that long, so that the host's precise answer —
    /// `device_offline` for a change that was never sent, `timeout` for one
    /// that may have run — reaches the model rather than the agent's own
    /// timeout, which cannot tell the two apart.
    fn call_limit(&self, _device: Option<&str>) -> Option<std::time::Duration> {
        None
    }

    /// Run `command` on `device` (`None`: the daemon's default device).
    /// The agent bounds the wait with its tool timeout (at least
    /// [`ToolHost::call_limit`] plus a second).
    fn call<'a>(&'a self, device: Option<&'a str>, command: Command) -> ToolFuture<'a>;

    /// [`ToolHost::call`] for a call the agent cleared up to `cleared` (its
    /// policy, a grant, or a person's approval): a host that knows the app
    /// in front answers a screen action it makes riskier with
    /// `approval_required` (`droidwarden_services::ui`) without running
    /// it. The default knows no app and runs the call.
    fn call_cleared<'a>(
        &'a self,
        device: Option<&'a str>,
        command: Command,
        cleared: droidwarden_services::Risk,
    ) -> ToolFuture<'a> {
        let _ = cleared;
        self.call(device, command)
    }

    /// Tools beyond the catalogue (the daemon's MCP servers), offered to
    /// the model as they are. Denied tools are not in this list.
    fn extra_tools(&self) -> Vec<crate::tools::extra::ExtraTool> {
        Vec::new()
    }

    /// Run extra tool `name` with `arguments` (a JSON object). The host
    /// bounds the wait itself.
    fn call_extra<'a>(&'a self, name: &'a str, _arguments: Value) -> ToolFuture<'a> {
        Box::pin(async move {
            Err(WireError::new(
                droidwarden_services::ErrorCode::InvalidRequest,
                format!("unknown tool {name}"),
            ))
        })
    }
}
