//! The agent's end-to-end rig, shared by the skill, plan and delegation
//! tests: a scripted language model over real HTTP, a real mosquitto, the
//! real adb server, two emulated phones (`kitchen`, `hall`) and
//! `droidwarden daemon` as a process, with skills from a temporary
//! directory named in `[agent.skills] dirs`.

use crate::mqtt::{Daemon, Mosquitto, Probe};
use crate::{AdbServer, Sim, SimOptions};
use droidwarden_agent::ModelReply;
use droidwarden_agent::testing::{RecordedRequest, Responder, ScriptStep, ScriptedLlm};
use serde_json::{Value, json};
use std::path::Path;

pub use crate::{P, WAIT};

/// Field order is drop order: the daemon stops before the phones, the
/// broker and the model go.
#[allow(missing_debug_implementations)] // reason: holds processes and a runtime; nothing to print
pub struct Rig {
    /// The daemon (taken to kill and restart it).
    pub daemon: Option<Daemon>,
    /// An MQTT client that records everything.
    pub probe: Probe,
    /// The phone named `kitchen`.
    pub kitchen: Sim,
    /// The phone named `hall`.
    pub hall: Sim,
    /// The scripted model.
    pub llm: ScriptedLlm,
    /// The adb server.
    pub adb: AdbServer,
    /// The mosquitto broker the daemon uses: the shared one, under the
    /// rig's topic level.
    pub broker: Mosquitto,
    _rt: tokio::runtime::Runtime,
    /// The daemon's configuration (TOML).
    pub config: String,
    /// The skills directory.
    pub skills: tempfile::TempDir,
}

/// Write `dir/name/SKILL.md`.
///
/// # Panics
/// When the file cannot be written.
pub fn write_skill(dir: &Path, name: &str, text: &str) {
    let d = dir.join(name);
    std::fs::create_dir_all(&d).expect("skill dir");
    std::fs::write(d.join("SKILL.md"), text).expect("SKILL.md");
}

/// A rig with the skills of `skills`.
pub fn rig(skills: tempfile::TempDir) -> Rig {
    rig_with(skills, &[])
}

/// A rig whose daemon has `env` in its environment.
pub fn rig_with(skills: tempfile::TempDir, env: &[(&str, &str)]) -> Rig {
    rig_full(skills, env, "")
}

/// A rig whose configuration ends with `extra` (e.g. `[[agents]]`
/// entries) and whose daemon has `env` in its environment.
///
/// # Panics
/// When a part does not start or the phones do not come online.
pub fn rig_full(skills: tempfile::TempDir, env: &[(&str, &str)], extra: &str) -> Rig {
    rig_llm(skills, env, extra, None)
}

/// [`rig_full`] whose daemon talks to the model `[llm]` describes (a
/// real endpoint, for the eval) instead of the scripted one, when given.
///
/// # Panics
/// When a part does not start or the phones do not come online.
pub fn rig_llm(
    skills: tempfile::TempDir,
    env: &[(&str, &str)],
    extra: &str,
    llm_toml: Option<&str>,
) -> Rig {
    let (rt, llm) = crate::scripted_model();
    let broker = Mosquitto::shared();
    let probe = Probe::connect_to(&broker);
    let adb = AdbServer::shared();
    let kitchen = adb.phone(SimOptions::default());
    let hall = adb.phone(SimOptions::default());
    let config = format!(
        "[mqtt]\nurl = \"mqtt://127.0.0.1:{}\"\n{}[mqtt.homeassistant]\ndiscovery = false\n{}[adb]\npoll_interval_ms = 300\nconnect = [\"{}\", \"{}\"]\n{}[agent.skills]\ndirs = [\"{}\"]\n[[devices]]\nname = \"kitchen\"\ntransport = \"adb\"\nserial = \"{}\"\n[[devices]]\nname = \"hall\"\ntransport = \"adb\"\nserial = \"{}\"\n{extra}",
        broker.port,
        broker.mqtt_keys(),
        crate::mqtt::NO_POLLS,
        kitchen.serial(),
        hall.serial(),
        llm_toml.map_or_else(
            || crate::scripted_llm_config(&llm, droidwarden_agent::ProviderKind::Openai),
            str::to_owned
        ),
        skills.path().display(),
        kitchen.serial(),
        hall.serial(),
    );
    let daemon = Daemon::start_with_env(&adb, &config, tempfile::tempdir().expect("state"), env);
    let rig = Rig {
        daemon: Some(daemon),
        probe,
        kitchen,
        hall,
        llm,
        adb,
        broker,
        _rt: rt,
        config,
        skills,
    };
    rig.wait_online();
    rig
}

impl Rig {
    /// The running daemon.
    ///
    /// # Panics
    /// When it was taken.
    pub fn daemon(&self) -> &Daemon {
        self.daemon.as_ref().expect("daemon running")
    }

    /// Wait until both phones are online.
    pub fn wait_online(&self) {
        for device in ["kitchen", "hall"] {
            self.probe.wait_payload(
                &format!("{P}/devices/{device}/availability"),
                WAIT,
                "online",
            );
        }
    }

    /// SIGKILL the daemon (no shutdown at all, no goodbye) and start it
    /// again on the same state directory; returns once the new daemon and
    /// both phones are online. The broker's will (`offline`) is awaited
    /// first, so the `online` seen next is the new daemon's, published
    /// after its subscriptions (an answer sent then reaches it).
    ///
    /// # Panics
    /// When no daemon is running or the new one does not come online.
    pub fn kill_and_restart(&mut self) {
        let state = self.daemon.take().expect("daemon running").kill();
        let availability = format!("{P}/availability");
        self.probe.wait_payload(&availability, WAIT, "offline");
        self.daemon = Some(Daemon::start_with_state(&self.adb, &self.config, state));
        self.probe.wait_payload(&availability, WAIT, "online");
        self.wait_online();
    }

    /// Wait until the approval request `id` is published, still pending.
    pub fn wait_pending_approval(&self, id: &str) {
        self.probe
            .wait_last(&format!("{P}/approvals/{id}"), WAIT, |m| {
                !m.payload.is_empty() && m.json()["approval_id"] == id
            });
    }

    /// Queue model replies.
    pub fn script(&self, steps: impl IntoIterator<Item = ScriptStep>) {
        for step in steps {
            self.llm.push(step);
        }
    }

    /// MQTT `cmd/skill`, and its reply.
    pub fn skill(&self, id: &str, skill: &str, input: Value) -> Value {
        self.probe.request(
            P,
            "skill",
            json!({"id": id, "skill": skill, "input": input}),
        )
    }

    /// MQTT `cmd/ask` (in `session` when given), and its reply.
    pub fn ask(&self, id: &str, prompt: &str, session: Option<&str>) -> Value {
        let mut body = json!({"id": id, "prompt": prompt});
        if let Some(s) = session {
            body["session"] = json!(s);
        }
        self.probe.request(P, "ask", body)
    }

    /// The events published so far on a session's topic.
    pub fn events(&self, session: &str) -> Vec<Value> {
        self.probe.session_events(P, session)
    }

    /// Wait until a session has published its `final` event; every event
    /// it published by then.
    pub fn wait_final(&self, session: &str) -> Vec<Value> {
        self.probe.wait_session_end(P, session, WAIT)
    }

    /// Wait for the reply to request `id`.
    pub fn wait_reply(&self, id: &str) -> Value {
        let topic = format!("{P}/reply/{id}");
        self.probe
            .wait(&format!("a reply on {topic}"), WAIT, |m| m.topic == topic)
            .json()
    }
}

/// A model reply calling `android_device` on `device`.
pub fn dev(device: &str, service: &str, action: &str) -> ScriptStep {
    call(
        "android_device",
        json!({"device": device, "service_id": service, "action": action, "parameters": {}}),
    )
}

/// A model reply calling `tool` with `args`.
pub fn call(tool: &str, args: Value) -> ScriptStep {
    ScriptStep::Reply(ModelReply::tool_calls(vec![(
        tool.to_owned(),
        args.to_string(),
    )]))
}

/// A model reply with text only.
pub fn text(t: &str) -> ScriptStep {
    ScriptStep::Reply(ModelReply::text(t))
}

/// The text of a successful reply.
///
/// # Panics
/// When the reply is not `ok`, showing it.
pub fn ok_text(reply: &Value) -> String {
    assert_eq!(reply["ok"], true, "{reply}");
    reply["result"]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Commands in the sim's log with every one of `words` as an argument.
pub fn sim_commands_with(sim: &Sim, words: &[&str]) -> usize {
    sim.commands()
        .iter()
        .filter(|argv| words.iter().all(|w| argv.iter().any(|a| a == w)))
        .count()
}

/// A model reply made from the tool results it was sent (see
/// [`tool_results`]), when the request comes.
pub fn answer_from_results(f: impl Fn(&[Value]) -> String + Send + Sync + 'static) -> ScriptStep {
    ScriptStep::Compute(Responder::new(move |request| {
        ModelReply::text(f(&tool_results(request)))
    }))
}

/// The tool results in a request (OpenAI `role: tool` messages), parsed.
pub fn tool_results(request: &RecordedRequest) -> Vec<Value> {
    request.body["messages"]
        .as_array()
        .map(|messages| {
            messages
                .iter()
                .filter(|m| m["role"] == "tool")
                .map(|m| {
                    let text = m["content"].as_str().unwrap_or_default();
                    serde_json::from_str(text).unwrap_or_else(|_| json!(text))
                })
                .collect()
        })
        .unwrap_or_default()
}
