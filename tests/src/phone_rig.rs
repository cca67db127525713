//! One emulated phone named `phone` behind the real adb server, a real
//! mosquitto, optionally the scripted language model, and
//! `droidwarden daemon` as a process: the rig of the tests that drive one
//! phone over MQTT (screen, automations, phone services…), over ADB or
//! through the companion app.

use crate::mqtt::{Daemon, Mosquitto, NO_POLLS, Probe, one_phone_config};
use crate::{AdbServer, Sim, SimOptions, scripted_llm_config};
use droidwarden_agent::ProviderKind;
use droidwarden_agent::testing::{ScriptStep, ScriptedLlm};
use serde_json::{Value, json};
use std::cell::Cell;

pub use crate::{P, WAIT};
/// The companion id of the phone in companion mode.
pub const COMPANION_ID: &str = "alice-pixel";

/// How to build a [`PhoneRig`].
#[derive(Debug, Clone, Default)]
pub struct PhoneRigOptions {
    /// Home Assistant discovery on.
    pub discovery: bool,
    /// Start the scripted model and point `[llm]` at it, speaking this
    /// provider's wire format.
    pub llm: Option<ProviderKind>,
    /// The emulated phone.
    pub sim: SimOptions,
    /// Reach the phone through its companion app (id `alice-pixel`, device
    /// `alice`) instead of ADB.
    pub companion: bool,
    /// More `[adb]` keys (TOML lines), for an ADB phone.
    pub adb_keys: String,
    /// A mosquitto of the rig's own instead of the shared one, for topics
    /// outside the daemon's prefix (an automation's MQTT trigger or
    /// notification), which the shared broker's topic level does not cover.
    pub own_broker: bool,
}

/// Field order is drop order: the daemon stops before the phone, the
/// broker and the model go.
#[allow(missing_debug_implementations)] // reason: holds processes and a runtime; nothing to print
pub struct PhoneRig {
    /// The daemon (taken to kill and restart it).
    pub daemon: Option<Daemon>,
    /// An MQTT client that records everything.
    pub probe: Probe,
    /// The phone.
    pub sim: Sim,
    /// The adb server.
    pub adb: AdbServer,
    /// The broker.
    pub broker: Mosquitto,
    /// The scripted model and its wire format, with
    /// [`PhoneRigOptions::llm`].
    pub llm: Option<(ScriptedLlm, ProviderKind)>,
    // Runs the scripted model's server; dropped last.
    _rt: Option<tokio::runtime::Runtime>,
    discovery: bool,
    adb_keys: String,
    /// The phone's device name: `phone` (ADB) or `alice` (companion).
    pub device: &'static str,
    next: Cell<u32>,
}

impl PhoneRig {
    /// A rig without discovery or model, the configuration ending with
    /// `extra`; returns once the phone is online.
    pub fn start(extra: &str) -> Self {
        Self::start_with(PhoneRigOptions::default(), extra)
    }

    /// A rig whose phone (`alice`) is reached through its companion app,
    /// the configuration ending with `extra`; returns once it is online.
    pub fn start_companion(extra: &str) -> Self {
        Self::start_with(
            PhoneRigOptions {
                companion: true,
                ..PhoneRigOptions::default()
            },
            extra,
        )
    }

    /// A rig as `options` say, the configuration ending with `extra`;
    /// returns once the phone is online.
    ///
    /// # Panics
    /// When a part does not start or the phone does not come online.
    pub fn start_with(options: PhoneRigOptions, extra: &str) -> Self {
        let (rt, llm) = match options.llm {
            Some(kind) => {
                let (rt, llm) = crate::scripted_model();
                (Some(rt), Some((llm, kind)))
            }
            None => (None, None),
        };
        // A companion's topics and client id are its companion id's, the
        // same in every companion test, and discovery payloads name topics:
        // those get a broker of their own.
        let broker = if options.companion || options.discovery || options.own_broker {
            Mosquitto::start()
        } else {
            Mosquitto::shared()
        };
        let probe = Probe::connect_to(&broker);
        let adb = AdbServer::shared();
        let (sim, device) = if options.companion {
            let sim = Sim::start(SimOptions {
                companion: Some((broker.port, COMPANION_ID.into())),
                no_adb: true,
                ..options.sim
            });
            probe.wait_payload(
                &format!("{P}/companion/{COMPANION_ID}/online"),
                WAIT,
                "online",
            );
            (sim, "alice")
        } else {
            (adb.phone(options.sim), "phone")
        };
        let mut rig = Self {
            daemon: None,
            probe,
            sim,
            adb,
            broker,
            llm,
            _rt: rt,
            discovery: options.discovery,
            adb_keys: options.adb_keys,
            device,
            next: Cell::new(0),
        };
        rig.daemon = Some(Daemon::start(&rig.adb, &rig.config(extra)));
        rig.wait_online();
        rig
    }

    /// The rig's daemon configuration, ending with `extra` (to restart the
    /// daemon with another).
    pub fn config(&self, extra: &str) -> String {
        let llm = self
            .llm
            .as_ref()
            .map(|(llm, kind)| scripted_llm_config(llm, *kind))
            .unwrap_or_default();
        if self.device == "alice" {
            return format!(
                "[mqtt]\nurl = \"{}\"\n[mqtt.homeassistant]\ndiscovery = {}\n{llm}{extra}\n[[devices]]\nname = \"alice\"\ntransport = \"companion\"\ncompanion_id = \"{COMPANION_ID}\"\n",
                self.broker.url(),
                self.discovery
            );
        }
        one_phone_config(
            self.broker.port,
            &self.sim.serial(),
            &format!(
                "{}[mqtt.homeassistant]\ndiscovery = {}\n{NO_POLLS}{llm}{extra}\n",
                self.broker.mqtt_keys(),
                self.discovery
            ),
        )
        .replacen("\n[adb]\n", &format!("\n[adb]\n{}\n", self.adb_keys), 1)
    }

    /// The running daemon.
    ///
    /// # Panics
    /// When it was taken.
    pub fn daemon(&self) -> &Daemon {
        self.daemon.as_ref().expect("daemon running")
    }

    /// The scripted model.
    ///
    /// # Panics
    /// Without [`PhoneRigOptions::llm`].
    pub fn llm(&self) -> &ScriptedLlm {
        &self.llm.as_ref().expect("a rig with the scripted model").0
    }

    /// Queue model replies.
    pub fn script(&self, steps: impl IntoIterator<Item = ScriptStep>) {
        for step in steps {
            self.llm().push(step);
        }
    }

    /// Wait until the phone is online.
    pub fn wait_online(&self) {
        self.probe.wait_payload(
            &format!("{P}/devices/{}/availability", self.device),
            WAIT,
            "online",
        );
    }

    /// Publish `cmd/ask` with this id (the reply comes on `reply/<id>`).
    pub fn ask(&self, id: &str, prompt: &str) {
        self.probe.publish(
            &format!("{P}/cmd/ask"),
            json!({"id": id, "prompt": prompt}).to_string(),
        );
    }

    /// `cmd/call` on the phone; the whole reply.
    pub fn call(&self, service: &str, action: &str, params: Value) -> Value {
        let n = self.next.get() + 1;
        self.next.set(n);
        self.probe.request(
            P,
            "call",
            json!({"id": format!("c{n}"), "device": self.device, "service": service, "action": action, "params": params}),
        )
    }

    /// A call that must succeed; its result.
    ///
    /// # Panics
    /// When the call fails.
    pub fn ok(&self, service: &str, action: &str, params: Value) -> Value {
        let reply = self.call(service, action, params);
        assert_eq!(reply["ok"], true, "{service}.{action}: {reply}");
        reply["result"].clone()
    }

    /// How many commands the phone ran with a word containing `word`.
    pub fn ran(&self, word: &str) -> usize {
        self.sim
            .commands()
            .iter()
            .filter(|argv| argv.iter().any(|a| a.contains(word)))
            .count()
    }
}
