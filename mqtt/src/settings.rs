//! The MQTT side's settings, validated: where the broker is, who we are
//! on it, and the limits of the command API. `droidwarden`'s configuration
//! (`[mqtt]`, `[broker]`) builds them; see docs/configuration.md.

use std::path::PathBuf;
use std::time::Duration;

/// Where the MQTT broker is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BrokerTarget {
    /// An external broker.
    External {
        /// Its host name or address.
        host: String,
        /// Its port.
        port: u16,
        /// TLS, with an optional private CA certificate file.
        tls: Option<Option<PathBuf>>,
    },
    /// Start the embedded broker on this address and connect to it.
    Embedded {
        /// The address it listens on.
        listen: std::net::SocketAddr,
        /// Whether a non-loopback address is allowed.
        allow_remote: bool,
        /// Let clients in without credentials, with every right
        /// (`[broker] anonymous`); off by default: users and roles come
        /// from `<state dir>/mqtt-users.json` (docs/mqtt-access.md).
        anonymous: bool,
    },
}

/// A username and password; the password never appears in `Debug` output.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The login.
    pub username: String,
    /// The password; never logged.
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// Validated MQTT settings.
#[derive(Debug, Clone)]
pub struct MqttSettings {
    /// Where the broker is.
    pub broker: BrokerTarget,
    /// Our client id: fixed, so the broker keeps our session.
    pub client_id: String,
    /// Our login, when the broker wants one.
    pub credentials: Option<Credentials>,
    /// The MQTT keep-alive interval.
    pub keep_alive: Duration,
    /// The topic prefix (`droidwarden`): every topic is under it.
    pub prefix: String,
    /// How long a command id is remembered, so a repeat is answered and
    /// not run again.
    pub dedupe_window: Duration,
    /// Most new command ids accepted within one dedupe window; beyond it new
    /// commands are refused with `busy` (remembered ids are never evicted).
    pub max_ids_per_window: u64,
    /// How long the broker keeps our session (subscriptions and queued
    /// QoS 1 commands) while we are away; zero: a clean session.
    pub session_expiry: Duration,
    /// The largest command payload taken, in bytes.
    pub max_payload: usize,
    /// The Home Assistant discovery prefix, when discovery is on.
    pub discovery: Option<String>,
}

impl BrokerTarget {
    /// Where the broker is, as configured, for people:
    /// `embedded, on 127.0.0.1:1883` or `mqtts://broker.lan:8883`.
    pub fn description(&self) -> String {
        match self {
            Self::Embedded { listen, .. } => format!("embedded, on {listen}"),
            Self::External { host, port, tls } => format!(
                "{}://{host}:{port}",
                if tls.is_some() { "mqtts" } else { "mqtt" }
            ),
        }
    }
}
