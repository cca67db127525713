//! Answers richer than yes/no, and the grants they leave behind.
//!
//! A person answering an approval request may approve it once, approve it
//! *for the rest of the run* (a [`Grant`]), deny it with a reason, or
//! approve it with edited parameters. This module owns the vocabulary and
//! the pure checks; the store records grants with the decision, the graph
//! consults them when it plans a call, and [`crate::Agent`] answers,
//! lists and revokes them.
//!
//! What a grant covers, and why no more:
//!
//! * **One run.** A grant ends when the run that asked finishes (or when
//!   revoked). It never reaches another run, another session, a skill's
//!   child run or a delegate: trust given to one task is not trust given to
//!   the next one.
//! * **One device.** The device of the request it answered.
//! * **Device actions up to `up_to`**, which is at most [`GRANT_CEILING`]
//!   (`medium`: taps, typing, volume). A `high` action (Wi-Fi, power,
//!   uninstall …) and a `critical` one (the shell) ask every time, whatever
//!   was granted. Skills and the host's extra tools are never covered.
//! * **An app grant** ("allow this app on this device for N minutes",
//!   [`ApprovalDecision::AllowApp`]) is the other scope: it answers a
//!   screen action that the app in front made riskier, and from then on
//!   that app counts as allowed on that device — for every run and MCP
//!   call — until it expires (at most [`MAX_APP_MINUTES`]) or is revoked.
//!   Never for an app above [`GRANT_CEILING`] (the dialer, messaging,
//!   settings, stores): those stay asked about one action at a time.
//! * **Only what would be asked.** The deny list and the phone-services
//!   policy still refuse first: a grant only answers the question a person
//!   would otherwise have been asked.

use droidwarden_services::Risk;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The highest risk a grant may cover: `high` and `critical` actions are
/// always asked about one by one.
pub const GRANT_CEILING: Risk = Risk::Medium;

/// The longest an app may be allowed by one answer: a day. Longer trust
/// belongs in the configuration (`[phone_services.ui] allowed_apps`),
/// where it is reviewed.
pub const MAX_APP_MINUTES: u32 = 24 * 60;

/// A person's answer to an approval request.
#[derive(Debug, Clone, PartialEq)]
pub enum ApprovalDecision {
    /// Run this call, once.
    Approve,
    /// Run this call, and let the rest of this run do device actions on
    /// the same device up to `up_to` (at most [`GRANT_CEILING`]) without
    /// asking.
    ApproveForRun {
        /// The highest risk the grant covers.
        up_to: Risk,
    },
    /// Run this call with these parameters instead (merged over the
    /// model's: a key given here replaces the model's value). They are
    /// validated by the catalogue like the model's; the action, the device
    /// and the risk may not change.
    ApproveWithEdits {
        /// The edited parameters.
        params: Map<String, Value>,
    },
    /// Run this call, and let the app in front of it (a screen action the
    /// app made riskier) be used on this device as an allowed app for
    /// `minutes`, by every run and caller: its screen actions are then of
    /// their own risk. Never for a `high` app ([`GRANT_CEILING`]).
    AllowApp {
        /// How long, at most [`MAX_APP_MINUTES`].
        minutes: u32,
    },
    /// Do not run it; the reason reaches the model.
    Deny {
        /// Why not.
        reason: String,
    },
}

impl ApprovalDecision {
    /// Its name, as replies give it: `approve`, `approve_for_run`,
    /// `approve_with_edits` or `deny`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Approve => "approve",
            Self::ApproveForRun { .. } => "approve_for_run",
            Self::ApproveWithEdits { .. } => "approve_with_edits",
            Self::AllowApp { .. } => "allow_app",
            Self::Deny { .. } => "deny",
        }
    }
}

/// Trust given for the rest of one run (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    /// Grant id (`g…`).
    pub grant_id: String,
    /// The run it belongs to; it ends with it.
    pub run_id: String,
    /// The run's session.
    pub session_id: String,
    /// The device it covers.
    pub device: String,
    /// The highest risk it covers.
    pub up_to: Risk,
    /// Who granted it, as the way in named them.
    pub granted_by: String,
    /// When, unix ms.
    pub granted_at: u64,
    /// The approval request whose answer made it.
    pub approval_id: String,
    /// When it was revoked, unix ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<u64>,
    /// Who revoked it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_by: Option<String>,
    /// When its run ended, unix ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<u64>,
    /// For an app grant ([`ApprovalDecision::AllowApp`]): the app allowed
    /// on [`Grant::device`]; `None` for a grant for the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app: Option<String>,
    /// When an app grant ends by itself, unix ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
}

impl Grant {
    /// Whether the grant answers, for a person, a device action on
    /// `device` of risk `risk` (still active; the caller checks that).
    pub fn covers(&self, device: Option<&str>, risk: Risk) -> bool {
        self.run_scoped()
            && device == Some(self.device.as_str())
            && risk <= self.up_to
            && risk <= GRANT_CEILING
    }

    /// Whether it is a grant for the run (not an app grant).
    pub fn run_scoped(&self) -> bool {
        self.app.is_none()
    }

    /// Whether it is an app grant that lets `app` on `device` be used as
    /// an allowed app at `now_ms` (still active; the caller checks that).
    pub fn covers_app(&self, device: Option<&str>, app: &str, now_ms: u64) -> bool {
        self.app.as_deref() == Some(app)
            && device == Some(self.device.as_str())
            && self.expires_at.is_some_and(|end| now_ms < end)
    }

    /// Whether it still holds (an app grant also until it expires).
    pub fn active(&self) -> bool {
        self.revoked_at.is_none() && self.ended_at.is_none()
    }
}
