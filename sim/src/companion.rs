//! Companion mode: the emulated phone also runs the droidwarden companion
//! app, which speaks the companion protocol (`docs/companion-protocol.md`)
//! over MQTT.
//!
//! - [`request`] answers one request payload (pure: version, deadline and
//!   parameter checks, response building);
//! - [`actions`] performs each catalogue action on the same phone state the
//!   ADB side serves, through the same device commands and the bridge's
//!   parsers, so both views agree;
//! - [`client`] is the MQTT driver: connects with a retained `offline` last
//!   will, resubscribes and announces `online` on every ConnAck, answers
//!   requests, pushes `battery` and `location` events, and obeys the control
//!   port (go offline cleanly or abruptly, duplicate every response).
//!
//! [`Companion`] is the state these share: the wanted link state, whether
//! the MQTT session is up, the tracking interval, photos taken, and volume
//! levels saved by `mute`.

mod actions;
mod client;
mod request;

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Mutex, MutexGuard, PoisonError};

use droidwarden_services::DeviceName;
use tokio::sync::watch;

use crate::error::SimError;

pub(crate) use client::run;

/// Where the companion app connects and who it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompanionSettings {
    /// The MQTT broker's host name or address.
    pub broker_host: String,
    /// The MQTT broker's port.
    pub broker_port: u16,
    /// User name and password, when the broker wants them.
    pub credentials: Option<(String, String)>,
    /// The companion id: the topic level after `companion/`, and the MQTT
    /// client id.
    pub id: String,
    /// The topic prefix (`droidwarden` by default).
    pub topic_prefix: String,
}

impl CompanionSettings {
    /// Settings from `mqtt://[USER:PASSWORD@]HOST:PORT`, a companion id and a
    /// topic prefix.
    ///
    /// ```
    /// use droidwarden_sim::CompanionSettings;
    /// let s = CompanionSettings::new("mqtt://127.0.0.1:1883", "pixel-7", "droidwarden").unwrap();
    /// assert_eq!((s.broker_host.as_str(), s.broker_port), ("127.0.0.1", 1883));
    /// assert!(CompanionSettings::new("mqtt://127.0.0.1:1883", "a/b", "droidwarden").is_err());
    /// ```
    ///
    /// # Errors
    /// `SimError::Config` for another scheme, a missing port, an id that is
    /// not a valid device name (it is a topic level and names the device),
    /// or a prefix with wildcards, empty levels or a leading or trailing `/`.
    pub fn new(url: &str, id: &str, topic_prefix: &str) -> Result<Self, SimError> {
        let bad = |why: &str| SimError::Config(format!("--mqtt {url:?}: {why}"));
        let rest = url
            .strip_prefix("mqtt://")
            .ok_or_else(|| bad("expected mqtt://HOST:PORT"))?;
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        let (credentials, hostport) = match rest.rsplit_once('@') {
            Some((user, hostport)) => {
                let (name, password) = user.split_once(':').unwrap_or((user, ""));
                (Some((name.to_owned(), password.to_owned())), hostport)
            }
            None => (None, rest),
        };
        let (host, port) = hostport
            .rsplit_once(':')
            .ok_or_else(|| bad("expected mqtt://HOST:PORT"))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let port = port
            .parse::<u16>()
            .map_err(|_| bad("the port is not a number from 0 to 65535"))?;
        if host.is_empty() {
            return Err(bad("no host"));
        }
        DeviceName::try_from(id).map_err(|e| SimError::Config(format!("--companion-id: {e}")))?;
        if topic_prefix.is_empty()
            || topic_prefix.starts_with('/')
            || topic_prefix.ends_with('/')
            || topic_prefix.contains("//")
            || topic_prefix.contains(['+', '#', '\0'])
        {
            return Err(SimError::Config(format!(
                "--topic-prefix {topic_prefix:?}: must be topic levels without wildcards, empty levels or a leading or trailing '/'"
            )));
        }
        Ok(Self {
            broker_host: host.to_owned(),
            broker_port: port,
            credentials,
            id: id.to_owned(),
            topic_prefix: topic_prefix.to_owned(),
        })
    }

    /// `<prefix>/companion/<id>/<leaf>`.
    pub fn topic(&self, leaf: &str) -> String {
        format!("{}/companion/{}/{leaf}", self.topic_prefix, self.id)
    }
}

/// How the app should be connected (set by the control port).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Link {
    /// Connected, reconnecting whenever the broker drops it.
    Up,
    /// Disconnected cleanly: `offline` published (retained), then DISCONNECT.
    Down,
    /// Connection dropped without DISCONNECT, so the broker publishes the
    /// last will.
    Dropped,
}

/// What the MQTT driver, the actions and the control port share.
#[derive(Debug)]
pub(crate) struct Companion {
    pub(crate) settings: CompanionSettings,
    pub(crate) link: watch::Sender<Link>,
    /// Whether the MQTT session is up (ConnAck received, not yet lost).
    pub(crate) connected: watch::Sender<bool>,
    /// Send every response twice (to test the daemon's dedupe).
    pub(crate) duplicates: AtomicBool,
    /// The location tracking interval in seconds, while tracking.
    pub(crate) tracking: watch::Sender<Option<u32>>,
    photos: Mutex<Vec<String>>,
    /// Volume indexes saved by `mute`, per Android stream number.
    pub(crate) muted: Mutex<HashMap<u8, i64>>,
    /// The latest `screen.ui_tree`, for `ui_control.tap {element}`.
    pub(crate) ui_tree: Mutex<Option<droidwarden_bridge::adb::actions::UiSnapshot>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Plain data; a panic elsewhere cannot leave it inconsistent.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Companion {
    pub(crate) fn new(settings: CompanionSettings) -> Self {
        Self {
            settings,
            link: watch::Sender::new(Link::Up),
            connected: watch::Sender::new(false),
            duplicates: AtomicBool::new(false),
            tracking: watch::Sender::new(None),
            photos: Mutex::new(Vec::new()),
            muted: Mutex::new(HashMap::new()),
            ui_tree: Mutex::new(None),
        }
    }

    #[cfg(test)]
    pub(crate) fn for_tests() -> Self {
        Self::new(
            CompanionSettings::new("mqtt://127.0.0.1:1", "test-phone", "droidwarden")
                .expect("valid test settings"),
        )
    }

    /// Paths of the photos taken, oldest first.
    pub(crate) fn photos(&self) -> MutexGuard<'_, Vec<String>> {
        lock(&self.photos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_from_urls() {
        let s = CompanionSettings::new("mqtt://user:pw@broker.lan:1884/", "p1", "home/dw").unwrap();
        assert_eq!(s.broker_host, "broker.lan");
        assert_eq!(s.broker_port, 1884);
        assert_eq!(s.credentials, Some(("user".into(), "pw".into())));
        assert_eq!(s.topic("request"), "home/dw/companion/p1/request");
        let s = CompanionSettings::new("mqtt://[::1]:1883", "p1", "droidwarden").unwrap();
        assert_eq!(s.broker_host, "::1");
        for (url, id, prefix) in [
            ("tcp://h:1", "p", "dw"),
            ("mqtt://h", "p", "dw"),
            ("mqtt://h:x", "p", "dw"),
            ("mqtt://:1", "p", "dw"),
            ("mqtt://h:1", "a/b", "dw"),
            ("mqtt://h:1", "a+", "dw"),
            ("mqtt://h:1", "", "dw"),
            ("mqtt://h:1", "p", ""),
            ("mqtt://h:1", "p", "dw/"),
            ("mqtt://h:1", "p", "/dw"),
            ("mqtt://h:1", "p", "a//b"),
            ("mqtt://h:1", "p", "dw/#"),
        ] {
            assert!(
                CompanionSettings::new(url, id, prefix).is_err(),
                "{url} {id} {prefix}"
            );
        }
    }
}
