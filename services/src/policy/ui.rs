//! Where the screen is decides what a UI action may do: `[phone_services.ui]`.
//!
//! A tap means nothing by itself: in a notes app it types a note, in the
//! dialer it places a call. So the risk of the screen's actions
//! (`ui_control.*`, `screen.screenshot`, `screen.ui_tree`) is the larger of
//! the action's own risk (the catalogue's, `low` for those but `power`) and
//! the risk of the app in front ([`UiPolicy::app_risk`]): `low` for apps the
//! person allows, `high` for the dialer, messaging, contacts, settings, the
//! package installer, the permission screens and app stores, `medium` for
//! the rest.
//!
//! On top of the risk, a UI action never gets past what the typed action
//! for the same effect would need ([`PhonePolicy::check_ui`]): a tap, a key
//! or typed text in a dialer or messaging app is telephony, so it answers
//! `disabled` while `[phone_services.telephony]` is off, and a number typed
//! there must be on the allowlist.
//!
//! This module only decides; the hub reads the app in front in the
//! device's turn, just before the action (`Hub` in the core crate), and
//! applies both rules for every caller.

use super::{PhonePolicy, PolicyConfigError, TELEPHONY_PACKAGES, config_err, normalize_number};
use crate::wire::{ErrorCode, WireError};
use crate::{Command, Risk, ScreenReaderAction, UiControlAction};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};

/// Apps that are `high` by default besides the telephony apps: settings,
/// the package installer and permission screens, the system UI (quick
/// settings toggles radios and airplane mode), and app stores. A person
/// may lower them (`[phone_services.ui] apps`); telephony apps stay high.
const HIGH_APPS: &[&str] = &[
    "com.android.settings",
    "com.samsung.android.settings",
    "com.android.packageinstaller",
    "com.google.android.packageinstaller",
    "com.android.permissioncontroller",
    "com.google.android.permissioncontroller",
    "com.android.systemui",
    "com.android.vending",
    "com.sec.android.app.samsungapps",
    "com.huawei.appmarket",
    "com.amazon.venezia",
    "org.fdroid.fdroid",
];

/// `[phone_services.ui]` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawUiPolicy {
    allowed_apps: Option<Vec<String>>,
    default_risk: Option<Risk>,
    apps: Option<BTreeMap<String, Risk>>,
}

/// The validated UI policy. [`Default`]: no app allowed, the built-in
/// `high` apps, `medium` for the rest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UiPolicy {
    /// Each listed app's risk (the built-in high apps, then the
    /// configuration's `apps` and `allowed_apps`, which are `low`).
    pub apps: BTreeMap<String, Risk>,
    /// The risk of an app not listed.
    pub default_risk: Risk,
}

impl Default for UiPolicy {
    fn default() -> Self {
        let apps = TELEPHONY_PACKAGES
            .iter()
            .chain(HIGH_APPS)
            .map(|p| ((*p).to_owned(), Risk::High))
            .collect();
        Self {
            apps,
            default_risk: Risk::Medium,
        }
    }
}

/// Whether `package` looks like an Android package name.
fn package_like(package: &str) -> bool {
    package.contains('.')
        && package.split('.').all(|part| {
            part.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
}

impl TryFrom<RawUiPolicy> for UiPolicy {
    type Error = PolicyConfigError;

    fn try_from(raw: RawUiPolicy) -> Result<Self, PolicyConfigError> {
        let mut policy = Self::default();
        if let Some(risk) = raw.default_risk {
            if risk == Risk::Critical {
                return Err(config_err(
                    "ui.default_risk",
                    "must be low, medium or high (critical is the shell's)",
                ));
            }
            policy.default_risk = risk;
        }
        let listed = raw.apps.unwrap_or_default().into_iter().map(|(app, risk)| {
            let key = format!("ui.apps.{app}");
            (app, risk, key)
        });
        let allowed = raw
            .allowed_apps
            .unwrap_or_default()
            .into_iter()
            .map(|app| (app, Risk::Low, "ui.allowed_apps".to_owned()));
        let mut seen = BTreeSet::new();
        for (app, risk, key) in listed.chain(allowed) {
            if !package_like(&app) {
                return Err(config_err(
                    &key,
                    format!("{app:?} is not an Android package name (like com.example.notes)"),
                ));
            }
            // The dialer, messaging and contacts reach calls and texts: a
            // tap there is telephony, asked about one by one (and refused
            // while telephony is off), never made cheaper.
            if TELEPHONY_PACKAGES.contains(&app.as_str()) && risk < Risk::High {
                return Err(config_err(
                    &key,
                    format!(
                        "{app} places calls or sends messages; its screen stays high risk (use telephony.dial / sms_send with allowed numbers instead)"
                    ),
                ));
            }
            if !seen.insert(app.clone()) {
                return Err(config_err(
                    &key,
                    format!("{app} is listed twice (in apps and allowed_apps)"),
                ));
            }
            policy.apps.insert(app, risk);
        }
        Ok(policy)
    }
}

impl UiPolicy {
    /// The risk of acting on or reading `app`'s screen; `None` (the app in
    /// front could not be read) is `high`: nothing is known about it.
    pub fn app_risk(&self, app: Option<&str>) -> Risk {
        match app {
            None => Risk::High,
            Some(app) => self.apps.get(app).copied().unwrap_or(self.default_risk),
        }
    }

    /// The risk of `command` with `app` in front: the larger of the
    /// action's own and the app's for a screen action ([`is_screen_action`]),
    /// the action's own for the rest.
    pub fn effective_risk(&self, command: &Command, app: Option<&str>) -> Risk {
        let own = command.spec().risk;
        if is_screen_action(command) {
            own.max(self.app_risk(app))
        } else {
            own
        }
    }

    /// The apps a person allows (`low`), sorted.
    pub fn allowed_apps(&self) -> Vec<&str> {
        self.apps
            .iter()
            .filter(|(_, r)| **r == Risk::Low)
            .map(|(a, _)| a.as_str())
            .collect()
    }
}

/// Whether `command` acts on or reads what is on the screen, so that the
/// app in front decides its risk: every `ui_control` action and
/// `screen.screenshot` / `screen.ui_tree`.
pub fn is_screen_action(command: &Command) -> bool {
    matches!(
        command,
        Command::UiControl(_)
            | Command::ScreenReader(ScreenReaderAction::Screenshot { .. })
            | Command::ScreenReader(ScreenReaderAction::UiTree { .. })
    )
}

/// Whether `app` places calls or sends messages when touched.
pub fn telephony_app(app: &str) -> bool {
    TELEPHONY_PACKAGES.contains(&app)
}

impl PhonePolicy {
    /// Check a screen action with `app` in front (`None`: unknown) against
    /// what the typed action for the same effect would need: any touch, key
    /// or text in a telephony app is refused while telephony is off, and a
    /// number typed there must be on the allowlist. Reading the screen
    /// changes nothing and passes (at the app's risk).
    ///
    /// # Errors
    /// [`ErrorCode::Disabled`] while telephony is off, [`ErrorCode::Denied`]
    /// for a typed number that is not allowed.
    pub fn check_ui(&self, command: &Command, app: Option<&str>) -> Result<(), WireError> {
        let Command::UiControl(action) = command else {
            return Ok(());
        };
        let Some(app) = app.filter(|a| telephony_app(a)) else {
            return Ok(());
        };
        let name = action.name();
        if !self.telephony {
            return Err(WireError::new(
                ErrorCode::Disabled,
                format!(
                    "ui_control.{name} in {app} reaches the phone's calls and messages, and the telephony service is off on this daemon; turn it on with [phone_services.telephony] enabled = true in its configuration"
                ),
            ));
        }
        if let UiControlAction::TypeText { text } = action
            && let Some(number) = normalize_number(text.trim())
        {
            return self.check_number(&number);
        }
        Ok(())
    }
}

/// The `approval_required` answer for `command` with `app` in front
/// (`None`: unknown), of risk `risk` there, cleared only up to `cleared`.
/// Its details carry the app and both risks, for [`required`].
pub fn approval_required(
    command: &Command,
    app: Option<&str>,
    risk: Risk,
    cleared: Risk,
) -> WireError {
    let place = app.unwrap_or("an app that could not be read");
    WireError {
        code: ErrorCode::ApprovalRequired,
        message: format!(
            "{}.{} in {place} is {} risk ([phone_services.ui]); it was cleared up to {}, so it needs a person's approval",
            command.service_id(),
            command.action_name(),
            risk.as_str(),
            cleared.as_str()
        ),
        retryable: false,
        details: Some(Box::new(serde_json::json!({
            "app": app,
            "risk": risk,
            "cleared": cleared,
        }))),
    }
}

/// The app in front and the risk an `approval_required` error names
/// ([`approval_required`]); `None` for any other error.
pub fn required(error: &WireError) -> Option<(Option<String>, Risk)> {
    if error.code != ErrorCode::ApprovalRequired {
        return None;
    }
    let details = error.details.as_ref()?;
    let risk: Risk = serde_json::from_value(details.get("risk")?.clone()).ok()?;
    let app = details
        .get("app")
        .and_then(serde_json::Value::as_str)
        .map(str::to_owned);
    Some((app, risk))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Catalogue;
    use serde_json::json;

    fn command(service: &str, action: &str, params: serde_json::Value) -> Command {
        Catalogue::get()
            .parse(service, action, &params)
            .expect("a valid command")
    }

    fn tap() -> Command {
        command("ui_control", "tap", json!({"x": 1, "y": 2}))
    }

    fn policy(raw: serde_json::Value) -> Result<UiPolicy, PolicyConfigError> {
        let raw: RawUiPolicy = serde_json::from_value(raw).map_err(|e| PolicyConfigError {
            key: "shape".into(),
            reason: e.to_string(),
        })?;
        UiPolicy::try_from(raw)
    }

    #[test]
    fn the_app_in_front_decides_a_screen_actions_risk() {
        let p = policy(json!({"allowed_apps": ["com.example.notes"]})).expect("valid");
        let shot = command("screen", "screenshot", json!({}));
        let power = command("ui_control", "power", json!({}));
        let battery = command("battery", "status", json!({}));
        let check = |c: &Command, app: Option<&str>, want: Risk| {
            assert_eq!(
                p.effective_risk(c, app),
                want,
                "{} in {app:?}",
                c.action_name()
            );
        };
        check(&tap(), Some("com.example.notes"), Risk::Low);
        check(&shot, Some("com.example.notes"), Risk::Low);
        check(&tap(), Some("com.example.other"), Risk::Medium);
        check(&tap(), Some("com.android.dialer"), Risk::High);
        check(&shot, Some("com.android.settings"), Risk::High);
        check(&tap(), Some("com.android.vending"), Risk::High);
        check(&tap(), None, Risk::High);
        // The action's own risk still counts.
        check(&power, Some("com.example.notes"), Risk::High);
        // Not a screen action: the app does not matter.
        check(&battery, Some("com.android.dialer"), Risk::Low);
    }

    #[test]
    fn the_configuration_is_checked_and_names_the_key() {
        let err = |raw: serde_json::Value, key: &str| {
            let e = policy(raw.clone()).expect_err("refused");
            assert!(e.key.contains(key), "{e} for {raw}");
        };
        err(
            json!({"allowed_apps": ["com.android.dialer"]}),
            "ui.allowed_apps",
        );
        err(
            json!({"apps": {"com.google.android.apps.messaging": "medium"}}),
            "ui.apps.com.google.android.apps.messaging",
        );
        err(
            json!({"allowed_apps": ["not a package"]}),
            "ui.allowed_apps",
        );
        err(json!({"default_risk": "critical"}), "ui.default_risk");
        err(
            json!({"allowed_apps": ["com.a.b"], "apps": {"com.a.b": "high"}}),
            "ui.allowed_apps",
        );
        // A person may lower a default high app that is not telephony.
        let p = policy(json!({"default_risk": "high", "apps": {"com.android.settings": "medium"}}))
            .expect("valid");
        assert_eq!(p.app_risk(Some("com.android.settings")), Risk::Medium);
        assert_eq!(p.app_risk(Some("com.x.y")), Risk::High);
        assert!(policy(json!({"nonsense": 1})).is_err());
    }

    #[test]
    fn touching_a_telephony_app_passes_the_telephony_rules() {
        let off = PhonePolicy::default();
        let dialer = Some("com.google.android.dialer");
        let code = |r: Result<(), WireError>| r.err().map(|e| e.code);
        assert_eq!(
            code(off.check_ui(&tap(), dialer)),
            Some(ErrorCode::Disabled)
        );
        let typed = |text: &str| command("ui_control", "type_text", json!({ "text": text }));
        assert_eq!(
            code(off.check_ui(&typed("hello"), Some("com.android.mms"))),
            Some(ErrorCode::Disabled)
        );
        // Reading the dialer's screen changes nothing.
        let tree = command("screen", "ui_tree", json!({}));
        assert_eq!(code(off.check_ui(&tree, dialer)), None);
        // Elsewhere, or where the app is unknown, nothing to refuse.
        assert_eq!(code(off.check_ui(&tap(), Some("com.example.notes"))), None);
        assert_eq!(code(off.check_ui(&tap(), None)), None);
        let mut on = PhonePolicy {
            telephony: true,
            ..PhonePolicy::default()
        };
        on.allowed_numbers.insert("+4930123456".into());
        assert_eq!(code(on.check_ui(&tap(), dialer)), None);
        assert_eq!(code(on.check_ui(&typed("+49 30 123456"), dialer)), None);
        assert_eq!(
            code(on.check_ui(&typed("+1 900 555 0100"), dialer)),
            Some(ErrorCode::Denied)
        );
        // Text that is no number (a message) is not an allowlist matter.
        assert_eq!(code(on.check_ui(&typed("see you at 8"), dialer)), None);
    }

    #[test]
    fn approval_required_carries_the_app_and_the_risk() {
        let e = approval_required(&tap(), Some("com.x.y"), Risk::Medium, Risk::Low);
        assert_eq!(e.code, ErrorCode::ApprovalRequired);
        assert!(e.message.contains("com.x.y"), "{}", e.message);
        assert_eq!(required(&e), Some((Some("com.x.y".into()), Risk::Medium)));
        let unknown = approval_required(&tap(), None, Risk::High, Risk::Medium);
        assert_eq!(required(&unknown), Some((None, Risk::High)));
        assert_eq!(required(&WireError::new(ErrorCode::Denied, "no")), None);
    }
}
