//! Automations end to end: a real mosquitto, the real adb server, an
//! emulated phone, the scripted model server over HTTP, and
//! `droidwarden daemon` as a process. Automations are defined in the
//! configuration and driven over MQTT (`cmd/automation`, `cmd/approve`,
//! a trigger topic); their runs are read on
//! `droidwarden/automations/<name>/runs`. The time-based logic (cron across
//! DST, intervals, misfires) is unit-tested with an injected clock in
//! `automations/src/engine.rs`; here, a misfire is made by editing
//! the store between two runs of the daemon.

use droidwarden_agent::testing::ScriptStep;
use droidwarden_agent::{ModelReply, ProviderKind};
use droidwarden_e2e::mqtt::{Daemon, NO_POLLS};
use droidwarden_e2e::phone_rig::{P, PhoneRig, PhoneRigOptions, WAIT};
use droidwarden_e2e::{AdbServer, SimOptions, binary, run_with_timeout, wait_for};
use serde_json::{Value, json};
use std::process::Command;
use std::time::Duration;

type Rig = PhoneRig;

fn rig(extra: &str) -> Rig {
    PhoneRig::start(extra)
}

fn rig_with(discovery: bool, extra: &str) -> Rig {
    let options = PhoneRigOptions {
        discovery,
        ..PhoneRigOptions::default()
    };
    PhoneRig::start_with(options, extra)
}

/// A rig whose automations use topics of home automation (outside the
/// daemon's prefix): on a mosquitto of its own.
fn rig_own_broker(extra: &str) -> Rig {
    let options = PhoneRigOptions {
        own_broker: true,
        ..PhoneRigOptions::default()
    };
    PhoneRig::start_with(options, extra)
}

/// A rig with the scripted model (OpenAI wire format).
fn rig_with_model(extra: &str) -> Rig {
    let options = PhoneRigOptions {
        llm: Some(ProviderKind::Openai),
        ..PhoneRigOptions::default()
    };
    PhoneRig::start_with(options, extra)
}

/// What the automation tests read and do beyond calls.
trait Automations {
    fn runs(&self, name: &str) -> Vec<Value>;
    fn with_status(&self, name: &str, status: &str) -> Vec<Value>;
    fn wait_status(&self, name: &str, status: &str, n: usize) -> Vec<Value>;
    fn manage(&self, id: &str, body: Value) -> Value;
    fn read_battery(&self, id: &str) -> Value;
    fn set_battery(&self, level: u64);
}

impl Automations for Rig {
    /// The run outcomes published for `name`, parsed, in order.
    fn runs(&self, name: &str) -> Vec<Value> {
        self.probe.on_json(&format!("{P}/automations/{name}/runs"))
    }

    /// Outcomes of `name` with this status.
    fn with_status(&self, name: &str, status: &str) -> Vec<Value> {
        self.runs(name)
            .into_iter()
            .filter(|r| r["status"] == status)
            .collect()
    }

    /// Wait until `name` has `n` outcomes of `status`.
    fn wait_status(&self, name: &str, status: &str, n: usize) -> Vec<Value> {
        wait_for(&format!("{n} {status} run(s) of {name}"), WAIT, || {
            let found = self.with_status(name, status);
            (found.len() >= n).then_some(found)
        })
    }

    /// `cmd/automation`, answered.
    fn manage(&self, id: &str, body: Value) -> Value {
        let mut body = body;
        body["id"] = json!(id);
        self.probe.request(P, "automation", body)
    }

    /// Read the battery through the daemon (a state read: the automations
    /// see the state as they see a poll's).
    fn read_battery(&self, id: &str) -> Value {
        let reply = self.probe.request(
            P,
            "call",
            json!({"id": id, "device": "phone", "service": "battery", "action": "status"}),
        );
        assert_eq!(reply["ok"], true, "{reply}");
        reply["result"].clone()
    }

    fn set_battery(&self, level: u64) {
        self.sim
            .control(json!({"op": "set", "path": "battery.level", "value": level}));
    }
}

const SAVER: &str = r#"
[agent.approval]
auto_approve_up_to = "medium"

[[automations]]
name = "kitchen_saver"
description = "battery saver below 15 %, and tell me"
notify = "home/alerts"
trigger = { kind = "below", device = "phone", state = "battery.level_percent", value = 15 }
action = { kind = "call", device = "phone", service = "device_state", action = "power_save", params = { enabled = true } }
"#;

#[test]
fn a_threshold_fires_once_per_crossing() {
    let r = rig_own_broker(SAVER);
    r.set_battery(50);
    assert_eq!(r.read_battery("b1")["level_percent"], 50);
    r.set_battery(10);
    r.read_battery("b2");
    let first = r.wait_status("kitchen_saver", "success", 1);
    assert_eq!(first[0]["run"], 1);
    assert!(
        first[0]["trigger"]
            .as_str()
            .unwrap()
            .contains("battery.level_percent below 15"),
        "{}",
        first[0]
    );
    // The call went through the hub to the phone: battery saver is on.
    let state = r.sim.state();
    assert_eq!(state["power_save"], true, "{state}");
    // The notification went to the configured topic.
    let alert = r
        .probe
        .wait("the notification", WAIT, |m| m.topic == "home/alerts");
    assert_eq!(alert.json()["automation"], "kitchen_saver");
    assert_eq!(alert.json()["status"], "success");
    // More reads below the threshold (polls) do not run it again.
    for i in 0..5 {
        r.read_battery(&format!("low{i}"));
    }
    // Back above, then below again: a second crossing, a second run.
    r.set_battery(60);
    r.read_battery("b3");
    r.set_battery(9);
    r.read_battery("b4");
    r.wait_status("kitchen_saver", "success", 2);
    for i in 0..3 {
        r.read_battery(&format!("again{i}"));
    }
    // Wait for the management answer (it comes after every event before
    // it), then count.
    let shown = r.manage("show", json!({"op": "show", "name": "kitchen_saver"}));
    assert_eq!(shown["result"]["runs"], 2, "{shown}");
    assert_eq!(r.with_status("kitchen_saver", "running").len(), 2);
    // The last outcome is retained.
    let retained = r.probe.on(&format!("{P}/automations/kitchen_saver/runs"));
    assert!(!retained.is_empty());
}

#[test]
fn a_flapping_device_is_debounced() {
    let r = rig(r#"
[[automations]]
name = "welcome_back"
debounce_s = 4
trigger = { kind = "online", device = "phone" }
action = { kind = "notify", message = "the phone is back" }
"#);
    let availability = format!("{P}/devices/phone/availability");
    let latest_is = |payload: &str| {
        r.probe
            .wait_last(&availability, WAIT, |m| m.payload == payload);
    };
    // The phone goes away and comes back three times, each time online
    // for less than the debounce.
    for _ in 0..3 {
        r.sim.control(json!({"op": "listen", "enabled": false}));
        latest_is("offline");
        r.sim.control(json!({"op": "listen", "enabled": true}));
        latest_is("online");
    }
    // One run, after four quiet seconds.
    let done = r.wait_status("welcome_back", "success", 1);
    assert!(done[0]["trigger"].as_str().unwrap().contains("debounced"));
    // Nothing more comes: the answer to a later request follows every run.
    let shown = r.manage("show", json!({"op": "show", "name": "welcome_back"}));
    assert_eq!(shown["result"]["runs"], 1, "{shown}");
}

#[test]
fn a_risky_call_waits_for_approval() {
    let r = rig_own_broker(
        r#"
[[automations]]
name = "wifi_off"
trigger = { kind = "mqtt", topic = "home/bedtime" }
action = { kind = "call", device = "phone", service = "wifi_automation", action = "disable" }
"#,
    );
    let before = r.ran("wifi");
    // Home automation fires it on its topic.
    r.probe.publish("home/bedtime", "now");
    let waiting = r.wait_status("wifi_off", "waiting_approval", 1);
    assert_eq!(waiting[0]["detail"]["approval_id"], "automation:wifi_off");
    assert_eq!(waiting[0]["detail"]["risk"], "high");
    // Listed where the agent's requests are: a retained approvals/<id>.
    let topic = format!("{P}/approvals/automation:wifi_off");
    let listed = r.probe.wait("the approval's topic", WAIT, |m| {
        m.topic == topic && !m.payload.is_empty()
    });
    let request = listed.json();
    // Retained: a client that subscribes later finds it.
    let later = droidwarden_e2e::mqtt::Probe::connect_to(&r.broker);
    let kept = later.wait("the retained request", WAIT, |m| m.topic == topic);
    assert!(kept.retain && kept.json() == request, "{}", kept.payload);
    assert_eq!(request["service"], "wifi_automation", "{request}");
    assert_eq!(request["action"], "disable", "{request}");
    assert_eq!(request["device"], "phone", "{request}");
    assert_eq!(request["risk"], "high", "{request}");
    assert_eq!(request["session"], "automation-wifi_off", "{request}");
    assert!(
        request["expires_at"].as_u64() > request["requested_at"].as_u64(),
        "{request}"
    );
    // Nothing reached the phone.
    let shown = r.manage("s1", json!({"op": "show", "name": "wifi_off"}));
    assert_eq!(shown["result"]["waiting_approval"], true, "{shown}");
    assert_eq!(r.ran("wifi"), before, "the phone was not touched");
    // cmd/automation cannot approve (cmd/approve's access rules decide).
    let refused = r.manage("a0", json!({"op": "approve", "name": "wifi_off"}));
    assert_eq!(refused["ok"], false, "{refused}");
    // Approved: it runs.
    let approved = r.probe.request(
        P,
        "approve",
        json!({"id": "a1", "approval_id": "automation:wifi_off", "decision": "approve"}),
    );
    assert_eq!(approved["ok"], true, "{approved}");
    // Answered: its topic is cleared.
    r.probe.wait_last(&topic, WAIT, |m| m.payload.is_empty());
    r.wait_status("wifi_off", "success", 1);
    assert!(r.ran("wifi") > before, "the phone ran the Wi-Fi change");
    assert_eq!(r.sim.state()["wifi"]["enabled"], false, "{}", r.sim.state());
    // A second run, denied: nothing runs.
    let ran = r.ran("wifi");
    let run = r.manage("r2", json!({"op": "run", "name": "wifi_off"}));
    assert_eq!(run["ok"], true, "{run}");
    r.wait_status("wifi_off", "waiting_approval", 2);
    let denied = r.probe.request(
        P,
        "approve",
        json!({"id": "a2", "approval_id": "automation:wifi_off", "decision": "deny"}),
    );
    assert_eq!(denied["ok"], true, "{denied}");
    let denials = r.wait_status("wifi_off", "denied", 1);
    assert_eq!(denials[0]["detail"]["by"], "MQTT", "{denials:?}");
    assert_eq!(r.ran("wifi"), ran);
}

#[test]
fn an_agent_prompt_runs_in_its_own_session() {
    let r = rig_with_model(
        "\n[[automations]]\nname = \"health_report\"\ntrigger = { kind = \"cron\", cron = \"0 9 * * 1\" }\naction = { kind = \"prompt\", prompt = \"Write the weekly phone health report.\" }\n",
    );
    // An answer about the phones without a tool call is sent back once
    // per run (`[agent] tool_nudge`): the model says each answer twice.
    for text in [
        "All phones are healthy.",
        "All phones are healthy.",
        "Still healthy.",
        "Still healthy.",
    ] {
        r.llm().push(ScriptStep::Reply(ModelReply::text(text)));
    }
    let run = r.manage("r1", json!({"op": "run", "name": "health_report"}));
    assert_eq!(run["ok"], true, "{run}");
    let done = r.wait_status("health_report", "success", 1);
    assert_eq!(done[0]["detail"]["text"], "All phones are healthy.");
    assert_eq!(done[0]["detail"]["session"], "automation-health_report");
    r.manage("r2", json!({"op": "run", "name": "health_report"}));
    let done = r.wait_status("health_report", "success", 2);
    assert_eq!(done[1]["detail"]["text"], "Still healthy.");
    // The second run remembers the first: the model saw its answer.
    let requests = r.llm().requests();
    let second = requests.last().expect("two model requests");
    assert!(
        second.body.to_string().contains("All phones are healthy."),
        "the session's history reaches the model: {}",
        second.body
    );
    // The cron automation waits for its Monday.
    let listed = r.manage("l", json!({"op": "list"}));
    let next = listed["result"][0]["next_due"].as_str().unwrap().to_owned();
    assert!(!next.is_empty(), "{listed}");
}

#[test]
fn a_skill_automation_runs_the_skill_with_only_its_tools() {
    // The built-in phone-health-report skill: reads only.
    let r = rig_with_model(
        "\n[[automations]]\nname = \"weekly_health\"\ntrigger = { kind = \"manual\" }\naction = { kind = \"skill\", skill = \"phone-health-report\" }\n\n[[automations]]\nname = \"ghost\"\ntrigger = { kind = \"manual\" }\naction = { kind = \"skill\", skill = \"no-such-skill\" }\n",
    );
    let tool = |service: &str, action: &str| {
        ScriptStep::Reply(ModelReply::tool_calls(vec![(
            "android_device".to_owned(),
            json!({"device": "phone", "service_id": service, "action": action, "parameters": {}})
                .to_string(),
        )]))
    };
    r.llm().push(tool("battery", "status"));
    r.llm().push(tool("wifi_automation", "disable"));
    r.llm().push(ScriptStep::Reply(ModelReply::text(
        "Battery fine; report done.",
    )));
    let batteries = r.ran("battery");
    let run = r.manage("s1", json!({"op": "run", "name": "weekly_health"}));
    assert_eq!(run["ok"], true, "{run}");
    let done = r.wait_status("weekly_health", "success", 1);
    assert_eq!(
        done[0]["detail"]["text"], "Battery fine; report done.",
        "{}",
        done[0]
    );
    assert_eq!(done[0]["detail"]["session"], "automation-weekly_health");
    // The skill's read reached the phone; the change outside its
    // allowed-tools did not.
    assert!(r.ran("battery") > batteries);
    assert_eq!(r.ran("svc"), 0, "{:?}", r.sim.commands());
    assert_eq!(r.sim.state()["wifi"]["enabled"], true);
    // A skill that does not exist is the run's error, not a crash.
    r.manage("s2", json!({"op": "run", "name": "ghost"}));
    let failed = r.wait_status("ghost", "error", 1);
    assert!(
        failed[0]["detail"].to_string().contains("no-such-skill"),
        "{}",
        failed[0]
    );
}

/// The store's file in the daemon's state directory.
fn store(daemon: &Daemon) -> std::path::PathBuf {
    daemon.state_dir.path().join("automations.json")
}

#[test]
fn a_restart_neither_loses_nor_repeats_a_due_run() {
    let every_minute = r#"
[[automations]]
name = "tick"
trigger = { kind = "cron", cron = "* * * * *" }
action = { kind = "notify", message = "tick" }
"#;
    let mut r = rig(every_minute);
    let file = store(r.daemon());
    wait_for("the store", WAIT, || file.exists().then_some(()));
    // Down over a due time: the daemon is killed, and the store says the
    // run was due five minutes ago (as if it had been down since).
    let state_dir = r.daemon.take().unwrap().kill();
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let due_ms = droidwarden_services::time::now_ms() - 5 * 60_000;
    doc["records"]["tick"]["next_due_ms"] = json!(due_ms);
    std::fs::write(&file, doc.to_string()).unwrap();
    let config = r.config(every_minute);
    r.daemon = Some(Daemon::start_with_state(&r.adb, &config, state_dir));
    // Not lost: run once at start (misfire = run_once), the rest recorded
    // as missed.
    let ran = r.wait_status("tick", "success", 1);
    assert!(
        ran[0]["trigger"].as_str().unwrap().contains("missed"),
        "{}",
        ran[0]
    );
    let missed = r.wait_status("tick", "missed", 1);
    assert!(
        missed[0]["detail"]["missed"].as_u64().unwrap() >= 4,
        "{}",
        missed[0]
    );
    let shown = r.manage("s1", json!({"op": "show", "name": "tick"}));
    let runs = shown["result"]["runs"].as_u64().unwrap();
    // Not repeated: a restart right away runs nothing that already ran
    // (unless a new minute began meanwhile).
    let daemon = r.daemon.take().unwrap().restart_with(&r.adb, &config);
    r.daemon = Some(daemon);
    r.wait_online();
    let shown = r.manage("s2", json!({"op": "show", "name": "tick"}));
    let after = shown["result"]["runs"].as_u64().unwrap();
    let minute_turned = shown["result"]["last"]["trigger"] == "cron * * * * *";
    assert!(
        after == runs || (minute_turned && after == runs + 1),
        "{runs} run(s) before the restart, {after} after: {shown}"
    );
    assert_eq!(shown["result"]["missed"], missed[0]["detail"]["missed"]);
}

#[test]
fn run_time_management_is_kept_across_restarts() {
    let mut r = rig_own_broker(
        r#"
[[automations]]
name = "manual_one"
trigger = { kind = "manual" }
action = { kind = "notify", message = "hi" }
"#,
    );
    let disabled = r.manage("d", json!({"op": "disable", "name": "manual_one"}));
    assert_eq!(disabled["result"]["enabled"], false, "{disabled}");
    let added = r.manage(
        "a",
        json!({"op": "add", "definition": {
            "name": "added_one",
            "trigger": {"kind": "interval", "every_s": 3600},
            "action": {"kind": "call", "device": "phone", "service": "battery", "action": "status"},
        }}),
    );
    assert_eq!(added["ok"], true, "{added}");
    let bad = r.manage(
        "b",
        json!({"op": "add", "definition": {
            "name": "bad",
            "trigger": {"kind": "cron", "cron": "every day"},
            "action": {"kind": "notify", "message": "x"},
        }}),
    );
    assert_eq!(bad["ok"], false);
    assert!(
        bad["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("definition.trigger.cron:"),
        "{bad}"
    );
    // Added over MQTT, a definition notifies only where its adder could
    // publish: not on another system's topic with the daemon's rights.
    for (id, topic) in [
        ("n1", "zigbee2mqtt/front_door/set"),
        ("n2", "cmnd/garage/POWER"),
    ] {
        let escalate = r.manage(
            id,
            json!({"op": "add", "definition": {
                "name": format!("escalate_{id}"),
                "trigger": {"kind": "interval", "every_s": 3600},
                "action": {"kind": "notify", "message": "ON"},
                "notify": topic,
            }}),
        );
        assert_eq!(escalate["ok"], false, "{escalate}");
        assert_eq!(escalate["error"]["code"], "invalid_params", "{escalate}");
        assert!(
            escalate["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains(&format!("only under {P}/notify/")),
            "{escalate}"
        );
    }
    let own = r.manage(
        "n3",
        json!({"op": "add", "definition": {
            "name": "notifies_home",
            "trigger": {"kind": "manual"},
            "action": {"kind": "notify", "message": "hello"},
            "notify": format!("{P}/notify/kitchen"),
        }}),
    );
    assert_eq!(own["ok"], true, "{own}");
    let run = r.manage("rn", json!({"op": "run", "name": "notifies_home"}));
    assert_eq!(run["ok"], true, "{run}");
    r.probe.wait("the notification under notify/", WAIT, |m| {
        m.topic == format!("{P}/notify/kitchen")
    });
    let removed = r.manage("rm", json!({"op": "remove", "name": "notifies_home"}));
    assert_eq!(removed["ok"], true, "{removed}");
    let run = r.manage("r", json!({"op": "run", "name": "added_one"}));
    assert_eq!(run["ok"], true, "{run}");
    r.wait_status("added_one", "success", 1);
    let config = r.config(
        r#"
[[automations]]
name = "manual_one"
trigger = { kind = "manual" }
action = { kind = "notify", message = "hi" }
"#,
    );
    let daemon = r.daemon.take().unwrap().restart_with(&r.adb, &config);
    r.daemon = Some(daemon);
    r.wait_online();
    let listed = r.manage("l", json!({"op": "list"}));
    let list = listed["result"].as_array().unwrap().clone();
    assert_eq!(list.len(), 2, "{listed}");
    assert_eq!(list[0]["name"], "manual_one");
    assert_eq!(list[0]["enabled"], false);
    assert_eq!(list[1]["name"], "added_one");
    assert_eq!(list[1]["runs"], 1);
    assert_eq!(list[1]["source"], "added");
    let removed = r.manage("x", json!({"op": "remove", "name": "added_one"}));
    assert_eq!(removed["ok"], true, "{removed}");
    let refused = r.manage("y", json!({"op": "remove", "name": "manual_one"}));
    assert_eq!(refused["ok"], false, "{refused}");
    let unknown = r.manage("z", json!({"op": "run", "name": "nope"}));
    assert_eq!(unknown["error"]["code"], "not_found", "{unknown}");
}

#[test]
fn home_assistant_gets_a_switch_and_a_button() {
    let r = rig_with(
        true,
        r#"
[[automations]]
name = "night-mode"
trigger = { kind = "manual" }
action = { kind = "notify", message = "good night" }
"#,
    );
    let switch = r.probe.wait("the switch's config", WAIT, |m| {
        m.topic == "homeassistant/switch/droidwarden_automations/night_mode/config"
    });
    let switch = switch.json();
    assert_eq!(
        switch["command_topic"],
        format!("{P}/automations/night-mode/set")
    );
    assert_eq!(
        switch["state_topic"],
        format!("{P}/automations/night-mode/enabled")
    );
    assert_eq!(switch["unique_id"], "droidwarden_automations_night_mode");
    let button = r.probe.wait("the button's config", WAIT, |m| {
        m.topic == "homeassistant/button/droidwarden_automations/night_mode_run/config"
    });
    assert_eq!(
        button.json()["command_topic"],
        format!("{P}/automations/night-mode/run")
    );
    let enabled = format!("{P}/automations/night-mode/enabled");
    r.probe.wait_payload(&enabled, WAIT, "ON");
    // The switch turns it off; the button runs it (by hand, even disabled).
    r.probe
        .publish(&format!("{P}/automations/night-mode/set"), "OFF");
    r.probe.wait_payload(&enabled, WAIT, "OFF");
    r.probe
        .publish(&format!("{P}/automations/night-mode/run"), "PRESS");
    let done = r.wait_status("night-mode", "success", 1);
    assert_eq!(done[0]["detail"]["message"], "good night");
    // A payload that is neither is refused, and changes nothing.
    r.probe
        .publish(&format!("{P}/automations/night-mode/set"), "MAYBE");
    let shown = r.manage("s", json!({"op": "show", "name": "night-mode"}));
    assert_eq!(shown["result"]["enabled"], false, "{shown}");
    r.probe
        .publish(&format!("{P}/automations/night-mode/set"), "ON");
    r.probe.wait_payload(&enabled, WAIT, "ON");
}

/// `droidwarden config check` on a configuration: status and standard error.
fn check(config: &str) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    std::fs::write(
        &path,
        format!(
            "[[devices]]\nname = \"kitchen\"\ntransport = \"adb\"\nserial = \"127.0.0.1:5555\"\n{config}"
        ),
    )
    .unwrap();
    let mut cmd = Command::new(binary("droidwarden"));
    cmd.arg("--config")
        .arg(&path)
        .args(["config", "check"])
        .env_remove("RUST_LOG");
    let out = run_with_timeout(cmd, Duration::from_secs(30));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn configuration_errors_name_the_key() {
    let cases = [
        (
            "[[automations]]\nname = \"a\"\ntrigger = { kind = \"cron\", cron = \"0 25 * * *\" }\naction = { kind = \"notify\", message = \"x\" }\n",
            "automations[0].trigger.cron",
        ),
        (
            "[[automations]]\nname = \"a\"\ntrigger = { kind = \"online\", device = \"garage\" }\naction = { kind = \"notify\", message = \"x\" }\n",
            "automations[0].trigger.device: \"garage\" is not a configured device",
        ),
        (
            "[[automations]]\nname = \"a\"\ntrigger = { kind = \"manual\" }\naction = { kind = \"notify\", message = \"x\" }\n[[automations]]\nname = \"b\"\ntrigger = { kind = \"manual\" }\naction = { kind = \"call\", device = \"attic\", service = \"battery\", action = \"status\" }\n",
            "automations[1].action.device",
        ),
        (
            "[[automations]]\nname = \"a\"\ntrigger = { kind = \"manual\" }\naction = { kind = \"skill\", skill = \"../leave_home\" }\n",
            "automations[0].action.skill: \"../leave_home\" is not a skill name",
        ),
        (
            "[[automations]]\nname = \"a\"\nauto_approve_up_to = \"high\"\ntrigger = { kind = \"manual\" }\naction = { kind = \"notify\", message = \"x\" }\n",
            "automations[0].auto_approve_up_to",
        ),
    ];
    for (config, want) in cases {
        let (code, stderr) = check(config);
        assert_eq!(code, 78, "{stderr}");
        assert!(stderr.contains(want), "{want:?} not in {stderr:?}");
    }
    let (code, stderr) = check(
        "[[automations]]\nname = \"ok\"\ntime_zone = \"Europe/Berlin\"\ntrigger = { kind = \"cron\", cron = \"0 23 * * *\" }\naction = { kind = \"call\", device = \"kitchen\", service = \"screen_control\", action = \"wake\" }\n",
    );
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn the_cli_manages_automations_through_the_daemon() {
    let adb = AdbServer::shared();
    let sim = adb.phone(SimOptions::default());
    let runtime = tempfile::tempdir().expect("runtime dir");
    let config = format!(
        "{broker}{NO_POLLS}[adb]\npoll_interval_ms = 300\nconnect = [\"{serial}\"]\n[[devices]]\nname = \"phone\"\ntransport = \"adb\"\nserial = \"{serial}\"\n\n[[automations]]\nname = \"wifi_off\"\ndescription = \"Wi-Fi off by hand\"\ntrigger = {{ kind = \"manual\" }}\naction = {{ kind = \"call\", device = \"phone\", service = \"wifi_automation\", action = \"disable\" }}\n",
        broker = droidwarden_e2e::mqtt::ANY_BROKER_PORT,
        serial = sim.serial(),
    );
    // Neither bus can be reached: the CLI and the daemon meet on the socket.
    let daemon = Daemon::start_without_bus(&adb, &config, runtime.path());
    let socket = daemon.state_dir.path().join("api.sock");
    wait_for("the socket", WAIT, || socket.exists().then_some(()));
    let cli = |args: &[&str]| {
        let run = daemon.cli_without_bus(&adb, runtime.path(), args);
        (run.code, run.stdout, run.stderr)
    };
    let json = |args: &[&str]| -> Value {
        let (code, out, err) = cli(args);
        assert_eq!(code, 0, "{args:?}: {err}");
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
    };
    // The driver starts once the daemon is up; the socket may come first.
    wait_for("the automations", WAIT, || {
        let (code, out, _) = cli(&["automations", "list"]);
        (code == 0 && out.contains("wifi_off")).then_some(())
    });
    let (_, table, _) = cli(&["automations", "list"]);
    assert!(
        table.starts_with("NAME  ENABLED  TRIGGER  ACTION"),
        "{table}"
    );
    assert!(table.contains("wifi_off  yes  manual  call  0"), "{table}");
    let listed = json(&["automations", "list", "--json"]);
    assert_eq!(listed[0]["name"], "wifi_off", "{listed}");
    // Run it: the risky call waits; approve it from the CLI.
    wait_for("the phone online", WAIT, || {
        let d = json(&["devices", "--json"]);
        (d["devices"][0]["online"] == true).then_some(())
    });
    let run = json(&["automations", "run", "wifi_off"]);
    assert_eq!(run["status"], "running", "{run}");
    wait_for("the approval wait", WAIT, || {
        let s = json(&["automations", "show", "wifi_off"]);
        (s["waiting_approval"] == true).then_some(())
    });
    assert_eq!(sim.state()["wifi"]["enabled"], true);
    // `droidwarden approvals` lists it, with the agent off, as it lists
    // the agent's requests.
    let pending = json(&["approvals", "--json"]);
    assert_eq!(
        pending["approvals"][0]["approval_id"], "automation:wifi_off",
        "{pending}"
    );
    assert_eq!(pending["approvals"][0]["risk"], "high", "{pending}");
    let (_, table, _) = cli(&["approvals"]);
    assert!(
        table.contains("automation:wifi_off  wifi_automation.disable on phone  risk high"),
        "{table}"
    );
    // Who answered: the CLI's uid (on the bus or the private socket).
    let answered = json(&["automations", "approve", "wifi_off"]);
    let by = answered["by"].as_str().unwrap_or_default();
    assert!(
        by.contains(&format!(
            " uid {} ",
            droidwarden_e2e::own_uid().expect("own uid")
        )) || by.ends_with(&format!(
            " uid {}",
            droidwarden_e2e::own_uid().expect("own uid")
        )),
        "{answered}"
    );
    wait_for("the approved run", WAIT, || {
        let s = json(&["automations", "show", "wifi_off"]);
        (s["last"]["status"] == "success").then_some(())
    });
    assert_eq!(sim.state()["wifi"]["enabled"], false);
    let pending = json(&["approvals", "--json"]);
    assert_eq!(pending["approvals"], json!([]), "{pending}");
    // `droidwarden deny <id>` answers an automation's request too.
    json(&["automations", "run", "wifi_off"]);
    wait_for("the second approval wait", WAIT, || {
        let s = json(&["automations", "show", "wifi_off"]);
        (s["waiting_approval"] == true).then_some(())
    });
    let (code, _, err) = cli(&["deny", "automation:wifi_off"]);
    assert_eq!(code, 0, "{err}");
    wait_for("the denied run", WAIT, || {
        let s = json(&["automations", "show", "wifi_off"]);
        (s["last"]["status"] == "denied").then_some(())
    });
    // Disable, add from a TOML file, remove.
    let disabled = json(&["automations", "disable", "wifi_off"]);
    assert_eq!(disabled["enabled"], false, "{disabled}");
    let file = daemon.state_dir.path().join("nightly.toml");
    std::fs::write(
        &file,
        "name = \"nightly\"\ntrigger = { kind = \"cron\", cron = \"0 23 * * *\" }\naction = { kind = \"notify\", message = \"good night\" }\n",
    )
    .unwrap();
    let added = json(&["automations", "add", file.to_str().unwrap()]);
    assert_eq!(added["source"], "added", "{added}");
    assert!(added["next_due"].as_str().is_some(), "{added}");
    let (code, _, err) = cli(&["automations", "remove", "wifi_off"]);
    assert_ne!(code, 0);
    assert!(err.contains("defined in the configuration"), "{err}");
    json(&["automations", "remove", "nightly"]);
    let (code, _, err) = cli(&["automations", "show", "nightly"]);
    assert_ne!(code, 0);
    assert!(err.contains("no automation is named"), "{err}");
}

/// Issue #29: an ADB phone has no app to push notification events, so the
/// daemon reads its notifications at `[poll] notifications` and announces
/// what was posted and removed, with the companion phones' event shape.
/// The first read is a baseline (the two notifications already posted are
/// not news); then a post and a removal fire the automations' event
/// triggers once each, and `notifications.dismiss` (a snooze over ADB)
/// removes one as well.
#[test]
fn an_adb_phone_posting_and_removing_a_notification_fires_event_triggers_once_each() {
    // `extra` follows the rig's `[poll]` table: the first line is its key.
    let r = rig(r#"notifications = 5

[[automations]]
name = "washer_done"
trigger = { kind = "event", device = "phone", event = "notification_posted" }
action = { kind = "notify", message = "a notification was posted" }

[[automations]]
name = "washer_gone"
trigger = { kind = "event", device = "phone", event = "notification_removed" }
action = { kind = "notify", message = "a notification was removed" }
"#);
    let set_notifications = |value: Value| {
        let answer = r
            .sim
            .control(json!({"op": "set", "path": "content.notifications", "value": value}));
        assert_eq!(answer["ok"], true, "{answer}");
    };
    let before = r.sim.state()["content"]["notifications"].clone();
    assert_eq!(before.as_array().map(Vec::len), Some(2), "{before}");
    // The baseline read has happened once a `notifications.list` poll ran.
    wait_for("the baseline read", WAIT, || {
        (r.ran("--noredact") > 0).then_some(())
    });
    let mut with_washer = before.clone();
    with_washer.as_array_mut().unwrap().push(json!({
        "package": "com.example.washer", "id": 3, "title": "Washer", "text": "Done: 1:02 h",
        "posted_ms": 1_716_300_000_000u64, "ongoing": false, "uid": 10_500,
    }));
    set_notifications(with_washer);
    let posted = r
        .probe
        .wait("the posted event", WAIT, |m| {
            m.topic == format!("{P}/devices/phone/events/notification_posted")
        })
        .json();
    assert_eq!(
        posted,
        json!({"key": "0|com.example.washer|3|null|10500", "package": "com.example.washer",
               "title": "Washer", "text": "Done: 1:02 h", "posted_ms": 1_716_300_000_000u64}),
        "the companion phones' shape"
    );
    r.wait_status("washer_done", "success", 1);

    set_notifications(before.clone());
    let removed = r
        .probe
        .wait("the removed event", WAIT, |m| {
            m.topic == format!("{P}/devices/phone/events/notification_removed")
        })
        .json();
    assert_eq!(
        removed["key"], "0|com.example.washer|3|null|10500",
        "{removed}"
    );
    assert_eq!(removed["package"], "com.example.washer");
    assert!(removed["removed_ms"].as_u64().is_some(), "{removed}");
    r.wait_status("washer_gone", "success", 1);
    // Once each: the later polls saw no change.
    let shown = r.manage("show", json!({"op": "show", "name": "washer_done"}));
    assert_eq!(shown["result"]["runs"], 1, "{shown}");
    let baseline_posts = r
        .probe
        .on(&format!("{P}/devices/phone/events/notification_posted"));
    assert_eq!(
        baseline_posts.len(),
        1,
        "no event for what was already there"
    );

    // Dismissed over ADB (a snooze): gone from the phone, and a removal.
    let key = "0|com.example.notes|7|null|10203";
    let dismissed = r.ok("notifications", "dismiss", json!({"notification_key": key}));
    assert_eq!(dismissed, json!({"key": key, "method": "snoozed"}));
    assert!(
        r.sim.state()["content"]["notifications"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n["package"] != "com.example.notes")
    );
    r.wait_status("washer_gone", "success", 2);
    let again = r.call("notifications", "dismiss", json!({"notification_key": key}));
    assert_eq!(again["error"]["code"], "not_found", "{again}");
    let open = r.call("notifications", "open", json!({"notification_key": key}));
    assert_eq!(open["error"]["code"], "unsupported_action", "{open}");
    assert!(
        open["error"]["message"]
            .as_str()
            .unwrap()
            .contains("companion"),
        "{open}"
    );
}
