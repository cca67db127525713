//! Approval policy: which device actions run at once, which are refused,
//! and which wait for a person.
//!
//! Order of the rules: the deny list wins, then the allow list, then the
//! risk threshold (`auto_approve_up_to`, default `low`); a `critical`
//! action is always asked about, even when allowed. Entries are
//! `service.action` or `service.*`. Local tools (calculator, clock) never
//! need approval.

use droidwarden_services::Risk;
use std::collections::BTreeSet;
use std::time::Duration;

/// What the policy says about one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Run it.
    Allow,
    /// Refuse it; the reason goes to the model.
    Deny(String),
    /// Ask a person.
    Ask,
}

/// The approval policy (validated configuration).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalPolicy {
    /// Actions up to this risk run without asking.
    pub auto_approve_up_to: Risk,
    /// `service.action` or `service.*` entries that always run.
    pub allow: BTreeSet<String>,
    /// Entries that never run.
    pub deny: BTreeSet<String>,
    /// How long a request waits for an answer before it counts as denied.
    pub timeout: Duration,
    /// The daemon's phone-services policy (`[phone_services]`): a call it
    /// refuses (a service that is off, a value outside an allowlist) is
    /// refused before anyone is asked to approve it. The daemon's hub checks
    /// it again for every caller.
    pub phone: droidwarden_services::PhonePolicy,
}

impl Default for ApprovalPolicy {
    fn default() -> Self {
        Self {
            auto_approve_up_to: Risk::Low,
            allow: BTreeSet::new(),
            deny: BTreeSet::new(),
            timeout: Duration::from_secs(300),
            phone: droidwarden_services::PhonePolicy::default(),
        }
    }
}

impl ApprovalPolicy {
    /// Whether `service.action` is on the allow list: it always runs, the
    /// app in front of a screen action included (never past what the
    /// phone-services policy refuses).
    pub fn allowed(&self, service: &str, action: &str) -> bool {
        !self.deny.contains(&format!("{service}.{action}"))
            && !self.deny.contains(&format!("{service}.*"))
            && (self.allow.contains(&format!("{service}.{action}"))
                || self.allow.contains(&format!("{service}.*")))
    }

    /// Decide for `service.action` of risk `risk`.
    pub fn decide(&self, service: &str, action: &str, risk: Risk) -> Verdict {
        let listed = |set: &BTreeSet<String>| {
            set.contains(&format!("{service}.{action}")) || set.contains(&format!("{service}.*"))
        };
        if listed(&self.deny) {
            Verdict::Deny(format!(
                "{service}.{action} is on the deny list of this daemon"
            ))
        } else if risk == Risk::Critical {
            // Critical actions (the phone's shell) always wait for a
            // person: no threshold or allow entry waives that.
            Verdict::Ask
        } else if listed(&self.allow) || risk <= self.auto_approve_up_to {
            Verdict::Allow
        } else {
            Verdict::Ask
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deny_then_allow_then_risk() {
        let mut p = ApprovalPolicy::default();
        p.allow.insert("app_launcher.launch".into());
        p.deny.insert("airplane_mode.*".into());
        p.deny.insert("app_launcher.launch".into());
        p.allow.insert("wifi_automation.*".into());
        let check = |s, a, r, want: &str| {
            let got = match p.decide(s, a, r) {
                Verdict::Allow => "allow",
                Verdict::Deny(_) => "deny",
                Verdict::Ask => "ask",
            };
            assert_eq!(got, want, "{s}.{a}");
        };
        check("battery", "status", Risk::Low, "allow");
        check("audio_automation", "mute", Risk::Medium, "ask");
        check("airplane_mode", "status", Risk::Low, "deny");
        check("app_launcher", "launch", Risk::Medium, "deny");
        check("wifi_automation", "disable", Risk::High, "allow");
    }

    #[test]
    fn critical_always_asks_unless_denied() {
        let mut p = ApprovalPolicy {
            auto_approve_up_to: Risk::Critical,
            ..ApprovalPolicy::default()
        };
        p.allow.insert("shell.*".into());
        assert_eq!(p.decide("shell", "run", Risk::Critical), Verdict::Ask);
        assert_eq!(p.decide("battery", "status", Risk::High), Verdict::Allow);
        p.deny.insert("shell.run".into());
        assert!(matches!(
            p.decide("shell", "run", Risk::Critical),
            Verdict::Deny(_)
        ));
    }
}
