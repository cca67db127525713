//! The app in front, known before every screen action (`ui_control.*`,
//! `screen.screenshot`, `screen.ui_tree`), and the gate it feeds: the
//! phone-services policy's UI rules (`droidwarden_services::ui`) for every
//! caller, and, for a caller that says how far it was cleared (the agent,
//! the MCP gate), `approval_required` when the app raises the action above
//! that.
//!
//! The hub runs the gate in the device's turn, just before the action, so
//! the app it checks is the app the action meets (a change that moved the
//! phone to another app ran before, not after). Readings are kept per
//! device for [`FRESH`] and forgotten as soon as any change is made to the
//! device (a tap, a key, an app launch can all bring another app to the
//! front), so a screenshot and a tree read in a row cost one reading, and a
//! tap after a tap always reads again. The screen service's own state reads
//! (polling) refresh the reading for free.

use droidwarden_bridge::DeviceHandle;
use droidwarden_services::{
    Command, DeviceName, PhonePolicy, Risk, ScreenReaderAction, WireError, ui,
};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a reading of the app in front stands for the actions that
/// follow without a change in between. Short: apps also come to the front
/// by themselves (an incoming call, an alarm).
const FRESH: Duration = Duration::from_secs(2);

/// The longest the reading before a screen action may take: a quarter of
/// the device's call timeout, at most this. [`crate::hub::call_bound`]
/// counts it.
pub(crate) const READ_LIMIT: Duration = Duration::from_secs(5);

/// The bound of one reading on `device`.
pub(crate) fn read_limit(device: &DeviceHandle) -> Duration {
    (device.timeout() / 4).min(READ_LIMIT)
}

#[derive(Debug, Clone)]
struct Reading {
    app: String,
    at: Instant,
}

/// The latest reading of each device's app in front.
#[derive(Debug, Default)]
pub(crate) struct Foreground {
    readings: Mutex<HashMap<DeviceName, Reading>>,
}

impl Foreground {
    /// A `screen.foreground_app` answer seen for `device` (the gate's own
    /// read, a state poll, a caller's read).
    pub(crate) fn note(&self, device: &DeviceName, answer: &Value) {
        let Some(app) = answer.get("package").and_then(Value::as_str) else {
            return;
        };
        self.lock().insert(
            device.clone(),
            Reading {
                app: app.to_owned(),
                at: Instant::now(),
            },
        );
    }

    /// A change was made to `device`: whatever is in front may be another
    /// app now.
    pub(crate) fn forget(&self, device: &DeviceName) {
        self.lock().remove(device);
    }

    fn fresh(&self, device: &DeviceName) -> Option<String> {
        self.lock()
            .get(device)
            .filter(|r| r.at.elapsed() < FRESH)
            .map(|r| r.app.clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<DeviceName, Reading>> {
        // A poisoned lock still holds whole readings: each is one insert.
        self.readings
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The app in front of `device`: a fresh reading, or a new one
    /// (bounded by [`read_limit`]); `None` when it cannot be read.
    async fn app(&self, device: &DeviceHandle) -> Option<String> {
        let name = device.info().name;
        if let Some(app) = self.fresh(&name) {
            return Some(app);
        }
        let read = Command::ScreenReader(ScreenReaderAction::ForegroundApp);
        // The UI action comes next in this turn: the phone may keep this
        // reading for its own checks (the lock guard) and not read again.
        let reading = droidwarden_bridge::for_next_action(device.call(&read));
        match tokio::time::timeout(read_limit(device), reading).await {
            Ok(Ok(answer)) => {
                self.note(&name, &answer);
                answer
                    .get("package")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            }
            Ok(Err(e)) => {
                tracing::debug!(device = %name, error = %e, "cannot read the app in front");
                None
            }
            Err(_) => {
                tracing::debug!(device = %name, "reading the app in front timed out");
                None
            }
        }
    }

    /// The gate before a screen action on `device` (other commands pass
    /// untouched): the UI rules of `policy` with the app in front, and,
    /// when `cleared` is given, the action's risk there against it.
    ///
    /// # Errors
    /// `disabled` / `denied` from [`PhonePolicy::check_ui`];
    /// `approval_required` (details: `app`, `risk`, `cleared`) when the
    /// app raises the action above `cleared`.
    pub(crate) async fn gate(
        &self,
        policy: &PhonePolicy,
        device: &DeviceHandle,
        command: &Command,
        cleared: Option<Risk>,
    ) -> Result<(), WireError> {
        if !ui::is_screen_action(command) {
            return Ok(());
        }
        let info = device.info();
        if info
            .transport
            .unsupported_reason(command.service_id(), command.action_name())
            .is_some()
        {
            // The call answers `unsupported_action` by itself.
            return Ok(());
        }
        let app = self.app(device).await;
        policy.check_ui(command, app.as_deref())?;
        let Some(cleared) = cleared else {
            return Ok(());
        };
        let risk = policy.ui.effective_risk(command, app.as_deref());
        if risk <= cleared {
            return Ok(());
        }
        Err(ui::approval_required(
            command,
            app.as_deref(),
            risk,
            cleared,
        ))
    }
}
