//! The configuration file, `~/.config/droidwarden-companion/config.toml`.
//!
//! Two stages: [`RawConfig`] is what the file says (unknown keys are
//! errors), [`Config`] the validated settings. Neither reads files; the
//! binary reads the file and the password file.

use crate::CompanionError;
use droidwarden_services::{CompanionId, PhonePolicy, RawPhoneServices};
use serde::Deserialize;
use std::path::PathBuf;
use std::time::Duration;

/// An example configuration, printed by `droidwarden-companion example-config`.
pub const EXAMPLE: &str = r#"# droidwarden-companion configuration
# The home server's MQTT broker: mqtt://host[:port] or mqtts://host[:port] (TLS).
broker = "mqtts://home.example.org:8883"
# This phone's companion id: the daemon's [[devices]] companion_id, and the
# MQTT user name unless `user` says otherwise.
companion_id = "alice-pixel"
# A file holding the MQTT password (first line), readable only by you.
password_file = "~/.config/droidwarden-companion/password"
# Optional: the CA certificate (PEM) of a broker with its own CA; without it,
# the built-in Mozilla roots are used.
# ca_file = "~/.config/droidwarden-companion/ca.pem"
# Optional: the daemon's topic prefix (default droidwarden).
# prefix = "droidwarden"
# Optional: the link schemes intents.open_url opens (default http and https;
# javascript:, file:, content: and intent: are always refused).
# url_schemes = ["http", "https"]
# Optional: how long one Termux:API command may take, in seconds (default 20).
# command_timeout_s = 20
# Optional: the numbers telephony.sms_send and telephony.dial may reach.
# Empty (the default): this phone sends no text and places no call, whatever
# the home server asks. The daemon has its own allowlist; both must agree.
# allowed_numbers = ["+4915112345678"]
# Optional: where camera_control.take_photo stores photos.
# photo_dir = "~/droidwarden-photos"
# Optional: how often the notification list is read to push
# notification_posted/removed events, in seconds (default 30; 0: never).
# notification_poll_s = 30
# Optional: hold a Termux wake lock while running (default true), so
# Android does not suspend the connection.
# wake_lock = true
# Optional: the log file (default ~/.local/state/droidwarden-companion/companion.log).
# log_file = "~/.local/state/droidwarden-companion/companion.log"
"#;

/// The file as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    broker: String,
    companion_id: String,
    user: Option<String>,
    password_file: Option<String>,
    ca_file: Option<String>,
    prefix: Option<String>,
    url_schemes: Option<Vec<String>>,
    command_timeout_s: Option<u64>,
    allowed_numbers: Option<Vec<String>>,
    photo_dir: Option<String>,
    notification_poll_s: Option<u64>,
    wake_lock: Option<bool>,
    log_file: Option<String>,
}

/// Where the broker is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broker {
    /// Host name or address.
    pub host: String,
    /// TCP port (1883 for mqtt://, 8883 for mqtts:// unless given).
    pub port: u16,
    /// TLS, with this CA file or (`None`) the built-in roots.
    pub tls: Option<Option<PathBuf>>,
}

/// The validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// The broker.
    pub broker: Broker,
    /// The companion id (a topic level and the MQTT client id).
    pub companion_id: String,
    /// The MQTT user name.
    pub user: String,
    /// The password file, `~` expanded; `None`: connect without credentials.
    pub password_file: Option<PathBuf>,
    /// The topic prefix.
    pub prefix: String,
    /// The daemon's phone policy with the configured link schemes; checked
    /// again here before anything runs.
    pub policy: PhonePolicy,
    /// The time limit of one Termux:API command.
    pub command_timeout: Duration,
    /// Where photos are stored.
    pub photo_dir: PathBuf,
    /// How often the notification list is read for events; `None`: never.
    pub notification_poll: Option<Duration>,
    /// Whether to hold a Termux wake lock while running.
    pub wake_lock: bool,
    /// The log file.
    pub log_file: PathBuf,
    /// The status file `droidwarden-companion status` reads (beside the log).
    pub status_file: PathBuf,
}

impl Config {
    /// Parse and validate the text of a configuration file. `home` expands
    /// a leading `~/` in paths.
    ///
    /// # Errors
    /// [`CompanionError::Config`] naming the key that is wrong.
    pub fn parse(text: &str, home: Option<&str>) -> Result<Self, CompanionError> {
        let raw: RawConfig =
            toml::from_str(text).map_err(|e| CompanionError::Config(e.to_string()))?;
        Self::from_raw(raw, home)
    }

    fn from_raw(raw: RawConfig, home: Option<&str>) -> Result<Self, CompanionError> {
        let bad = |key: &str, reason: String| CompanionError::Config(format!("{key}: {reason}"));
        let companion_id = CompanionId::try_from(raw.companion_id.as_str())
            .map_err(|e| bad("companion_id", e.to_string()))?
            .to_string();
        let expand = |p: &str| -> PathBuf {
            match (p.strip_prefix("~/"), home) {
                (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
                _ => PathBuf::from(p),
            }
        };
        let (tls, rest) = if let Some(rest) = raw.broker.strip_prefix("mqtts://") {
            (true, rest)
        } else if let Some(rest) = raw.broker.strip_prefix("mqtt://") {
            (false, rest)
        } else {
            return Err(bad(
                "broker",
                format!(
                    "{:?} is not mqtt://host[:port] or mqtts://host[:port]",
                    raw.broker
                ),
            ));
        };
        let rest = rest.trim_end_matches('/');
        let (host, port) = match rest.rsplit_once(':') {
            Some((host, port)) if !host.ends_with(']') || host.starts_with('[') => {
                let port = port
                    .parse::<u16>()
                    .ok()
                    .filter(|p| *p != 0)
                    .ok_or_else(|| bad("broker", format!("{port:?} is not a port")))?;
                (host, port)
            }
            _ => (rest, if tls { 8883 } else { 1883 }),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() || host.contains(['/', '@', ' ']) {
            return Err(bad("broker", format!("{host:?} is not a host")));
        }
        if raw.ca_file.is_some() && !tls {
            return Err(bad(
                "ca_file",
                "is only used with an mqtts:// broker".to_owned(),
            ));
        }
        let mut services = serde_json::Map::new();
        if let Some(schemes) = raw.url_schemes {
            services.insert("url_schemes".into(), schemes.into());
        }
        // Telephony is on exactly when numbers are listed: the daemon's
        // policy checks the same allowlist again here.
        if let Some(numbers) = raw.allowed_numbers.filter(|n| !n.is_empty()) {
            services.insert(
                "telephony".into(),
                serde_json::json!({"enabled": true, "allowed_numbers": numbers}),
            );
        }
        let policy = serde_json::from_value::<RawPhoneServices>(services.into())
            .map_err(|e| bad("url_schemes", e.to_string()))
            .and_then(|raw| {
                PhonePolicy::try_from(raw).map_err(|e| {
                    let key = if e.key.contains("allowed_numbers") {
                        "allowed_numbers"
                    } else {
                        "url_schemes"
                    };
                    bad(key, e.reason)
                })
            })?;
        let poll = raw.notification_poll_s.unwrap_or(30);
        if poll != 0 && !(1..=3600).contains(&poll) {
            return Err(bad(
                "notification_poll_s",
                format!("{poll} is neither 0 nor between 1 and 3600"),
            ));
        }
        let home_dir = PathBuf::from(home.unwrap_or("."));
        let log_file = raw.log_file.as_deref().map_or_else(
            || home_dir.join(".local/state/droidwarden-companion/companion.log"),
            expand,
        );
        let status_file = log_file.with_file_name("status.json");
        let timeout = raw.command_timeout_s.unwrap_or(20);
        if !(1..=300).contains(&timeout) {
            return Err(bad(
                "command_timeout_s",
                format!("{timeout} is not between 1 and 300"),
            ));
        }
        let prefix = raw.prefix.unwrap_or_else(|| "droidwarden".into());
        if prefix.is_empty() || prefix.contains(['+', '#']) || prefix.ends_with('/') {
            return Err(bad("prefix", format!("{prefix:?} is not a topic prefix")));
        }
        Ok(Self {
            broker: Broker {
                host: host.to_owned(),
                port,
                tls: tls.then(|| raw.ca_file.as_deref().map(expand)),
            },
            user: raw.user.unwrap_or_else(|| companion_id.clone()),
            companion_id,
            password_file: raw.password_file.as_deref().map(expand),
            prefix,
            policy,
            command_timeout: Duration::from_secs(timeout),
            photo_dir: raw
                .photo_dir
                .as_deref()
                .map_or_else(|| home_dir.join("droidwarden-photos"), expand),
            notification_poll: (poll != 0).then(|| Duration::from_secs(poll)),
            wake_lock: raw.wake_lock.unwrap_or(true),
            log_file,
            status_file,
        })
    }

    /// The topic `<prefix>/companion/<id>/<leaf>`.
    pub fn topic(&self, leaf: &str) -> String {
        format!("{}/companion/{}/{leaf}", self.prefix, self.companion_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, expected: Result<(&str, u16, Option<Option<&str>>), &str>) {
        match (Config::parse(text, Some("/home/u")), expected) {
            (Ok(c), Ok((host, port, tls))) => {
                assert_eq!(c.broker.host, host, "{text}");
                assert_eq!(c.broker.port, port, "{text}");
                assert_eq!(c.broker.tls, tls.map(|ca| ca.map(PathBuf::from)), "{text}");
            }
            (Err(e), Err(want)) => assert!(e.to_string().contains(want), "{text}: {e}"),
            (got, want) => panic!("{text}: got {got:?}, expected {want:?}"),
        }
    }

    #[test]
    fn brokers() {
        check(
            "broker = \"mqtt://127.0.0.1:1884\"\ncompanion_id = \"a\"",
            Ok(("127.0.0.1", 1884, None)),
        );
        check(
            "broker = \"mqtts://home.example\"\ncompanion_id = \"a\"",
            Ok(("home.example", 8883, Some(None))),
        );
        check(
            "broker = \"mqtts://h:8884\"\ncompanion_id = \"a\"\nca_file = \"~/ca.pem\"",
            Ok(("h", 8884, Some(Some("/home/u/ca.pem")))),
        );
        check(
            "broker = \"http://h\"\ncompanion_id = \"a\"",
            Err("broker: \"http://h\" is not mqtt://"),
        );
        check(
            "broker = \"mqtt://h:0\"\ncompanion_id = \"a\"",
            Err("is not a port"),
        );
        check(
            "broker = \"mqtt://h\"\ncompanion_id = \"a\"\nca_file = \"x\"",
            Err("ca_file: is only used with an mqtts://"),
        );
        check(
            "broker = \"mqtt://h\"\ncompanion_id = \"a/b\"",
            Err("companion_id"),
        );
        check(
            "broker = \"mqtt://h\"\ncompanion_id = \"a\"\nextra = 1",
            Err("unknown field"),
        );
        check(
            "broker = \"mqtt://h\"\ncompanion_id = \"a\"\nurl_schemes = [\"javascript\"]",
            Err("url_schemes"),
        );
    }

    #[test]
    fn defaults_and_the_example() {
        let c = Config::parse(EXAMPLE, Some("/home/u")).unwrap();
        assert_eq!(c.user, "alice-pixel");
        assert_eq!(c.prefix, "droidwarden");
        assert_eq!(
            c.topic("online"),
            "droidwarden/companion/alice-pixel/online"
        );
        assert_eq!(
            c.password_file.as_deref(),
            Some(std::path::Path::new(
                "/home/u/.config/droidwarden-companion/password"
            ))
        );
        assert_eq!(
            c.policy.url_schemes,
            PhonePolicy::default().url_schemes,
            "http and https by default"
        );
        assert_eq!(c.command_timeout, Duration::from_secs(20));
        assert!(!c.policy.telephony, "no numbers: no telephony");
        assert_eq!(c.notification_poll, Some(Duration::from_secs(30)));
        assert!(c.wake_lock);
        assert_eq!(
            c.log_file,
            PathBuf::from("/home/u/.local/state/droidwarden-companion/companion.log")
        );
        assert_eq!(
            c.status_file,
            PathBuf::from("/home/u/.local/state/droidwarden-companion/status.json")
        );
    }

    #[test]
    fn telephony_follows_the_allowlist() {
        let c = Config::parse(
            "broker = \"mqtt://h\"\ncompanion_id = \"a\"\nallowed_numbers = [\"+4915112345678\"]\nnotification_poll_s = 0",
            None,
        )
        .unwrap();
        assert!(c.policy.telephony);
        assert!(c.policy.allowed_numbers.contains("+4915112345678"));
        assert_eq!(c.notification_poll, None);
        check(
            "broker = \"mqtt://h\"\ncompanion_id = \"a\"\nallowed_numbers = [\"call me\"]",
            Err("allowed_numbers"),
        );
        check(
            "broker = \"mqtt://h\"\ncompanion_id = \"a\"\nnotification_poll_s = 3601",
            Err("notification_poll_s"),
        );
    }
}
