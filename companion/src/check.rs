//! `droidwarden-companion check`: the first-run check. Every Termux:API
//! command the companion may run is looked up in `PATH`; the ones that
//! only read are run once to see whether Termux:API answers and which
//! Android permission is missing; the ones that act are not run (they
//! would act) and their permission is listed.

use crate::exec;
use crate::termux::{self, COMMANDS};
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

/// What the check found for one command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Installed and, if it was run, it answered.
    Ok,
    /// Installed; not run because it acts. The permission to grant.
    NotRun(&'static str),
    /// Not in `PATH`.
    Missing,
    /// Ran and showed that a permission is missing: what to grant.
    Permission(String),
    /// Ran and failed otherwise.
    Failed(String),
}

/// One line of the check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The command.
    pub command: &'static str,
    /// What was found.
    pub verdict: Verdict,
}

impl Finding {
    /// Whether this finding stops an action from working.
    pub fn is_problem(&self) -> bool {
        matches!(
            self.verdict,
            Verdict::Missing | Verdict::Permission(_) | Verdict::Failed(_)
        )
    }

    /// The line printed for it.
    pub fn line(&self) -> String {
        match &self.verdict {
            Verdict::Ok => format!("ok          {}", self.command),
            Verdict::NotRun(p) => format!(
                "not run     {} (it acts; permission needed: {p})",
                self.command
            ),
            Verdict::Missing => format!(
                "MISSING     {}: not installed (pkg install termux-api)",
                self.command
            ),
            Verdict::Permission(what) => format!("PERMISSION  {}: {what}", self.command),
            Verdict::Failed(why) => format!("FAILED      {}: {why}", self.command),
        }
    }
}

/// Whether `program` is an executable file in one of `path`'s directories.
pub fn in_path(program: &str, path: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(path).any(|dir| {
        std::fs::metadata(Path::new(&dir).join(program))
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

/// The commands that only read, with the arguments the check runs them with.
const PROBES: &[(&str, &[&str])] = &[
    ("termux-battery-status", &[]),
    ("termux-volume", &[]),
    ("termux-notification-list", &[]),
    ("termux-wifi-connectioninfo", &[]),
    ("termux-location", &["-p", "network", "-r", "last"]),
];

/// Judge a read-only command's output.
pub fn judge(command: &str, stdout: &str, status: Option<i32>) -> Verdict {
    let value: Option<Value> = serde_json::from_str(stdout.trim()).ok();
    let error = value.as_ref().and_then(|v| {
        v.get("error")
            .or_else(|| v.get("API_ERROR"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    });
    match (command, error) {
        ("termux-notification-list", Some(e)) => Verdict::Permission(format!(
            "grant Termux:API notification access (Android settings → Notifications → Device & app notifications / Notification access); Termux:API said: {e}"
        )),
        ("termux-location", Some(e)) if e.contains("Failed to get location") => {
            Verdict::Permission(format!(
                "no position: grant Termux:API the Location permission (Android settings → Apps → Termux:API → Permissions) and turn location on; Termux:API said: {e}"
            ))
        }
        (_, Some(e)) if e.to_lowercase().contains("permission") => {
            Verdict::Permission(format!("Termux:API said: {e}"))
        }
        (_, Some(e)) => Verdict::Failed(format!("Termux:API said: {e}")),
        ("termux-wifi-connectioninfo", None)
            if value
                .as_ref()
                .and_then(|v| v.get("ssid"))
                .and_then(Value::as_str)
                == Some("<unknown ssid>") =>
        {
            Verdict::Permission(
                "Android hides the network's name: grant Termux:API the Location permission".into(),
            )
        }
        _ if status != Some(0) => Verdict::Failed(format!("exit status {status:?}")),
        _ if value.is_none() => Verdict::Failed(format!(
            "unexpected output: {}",
            stdout.trim().chars().take(120).collect::<String>()
        )),
        _ => Verdict::Ok,
    }
}

/// Run the check with `path` as `PATH`, each probe limited to `limit`.
pub async fn run(path: &str, limit: Duration) -> Vec<Finding> {
    let mut findings = Vec::new();
    for &(command, permission) in COMMANDS {
        let verdict = if !in_path(command, path) {
            Verdict::Missing
        } else if let Some((_, args)) = PROBES.iter().find(|(c, _)| *c == command) {
            let mut argv = vec![(*command).to_owned()];
            argv.extend(args.iter().map(|a| (*a).to_owned()));
            match exec::run(&argv, limit).await {
                Ok(out) => judge(command, &out.stdout, out.status),
                Err(exec::ExecError::Timeout { .. }) => Verdict::Failed(format!(
                    "no answer within {limit:?}: is the Termux:API app installed (from the same source as Termux) and allowed to run in the background?"
                )),
                Err(e) => Verdict::Failed(e.to_string()),
            }
        } else {
            Verdict::NotRun(permission)
        };
        findings.push(Finding { command, verdict });
    }
    findings
}

/// The Android API level line, and whether Wi-Fi may be toggled.
pub async fn android(limit: Duration) -> String {
    let api = exec::run(&["getprop".into(), "ro.build.version.sdk".into()], limit)
        .await
        .ok()
        .and_then(|o| o.stdout.trim().parse::<u32>().ok());
    match (api, termux::wifi_toggle_refusal(api)) {
        (Some(api), None) => format!("Android API {api}: Wi-Fi can be switched by the companion"),
        (Some(api), Some(_)) => format!(
            "Android API {api}: Wi-Fi cannot be switched by an app (wifi_automation.enable/disable answer unsupported_action)"
        ),
        (None, _) => "Android version unknown (no getprop): not a phone?".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts() {
        assert_eq!(
            judge("termux-battery-status", r#"{"percentage": 5}"#, Some(0)),
            Verdict::Ok
        );
        assert!(matches!(
            judge(
                "termux-location",
                include_str!(concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/fixtures/termux/location-failed.json"
                )),
                Some(0)
            ),
            Verdict::Permission(_)
        ));
        assert!(matches!(
            judge(
                "termux-wifi-connectioninfo",
                r#"{"ssid": "<unknown ssid>"}"#,
                Some(0)
            ),
            Verdict::Permission(_)
        ));
        assert!(matches!(
            judge("termux-volume", "", Some(1)),
            Verdict::Failed(_)
        ));
    }

    #[test]
    fn path_lookup() {
        assert!(in_path("sh", "/nonexistent:/bin:/usr/bin"));
        assert!(!in_path("termux-no-such", "/bin"));
    }
}
