//! The agent through the daemon, end to end: a scripted language model
//! speaking the OpenAI wire format over real HTTP, a real mosquitto, the
//! real adb server, two emulated phones, and `droidwarden daemon` as a
//! process. Requests come in on MQTT `cmd/ask` (and, in the last test, the
//! CLI over a private D-Bus); every device action goes through the daemon's
//! call path to the sims.

use droidwarden_agent::ModelReply;
use droidwarden_agent::testing::{Responder, ScriptStep};
use droidwarden_e2e::agent_rig::{
    self, P, Rig, WAIT, answer_from_results, ok_text, sim_commands_with,
};
use droidwarden_e2e::dbus::PrivateBus;
use droidwarden_e2e::{Droidwarden, KillOnDrop, binary, own_uid, wait_for};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

fn rig(agent: &str) -> Rig {
    rig_with(agent, &[])
}

/// The agent rig (two phones, `kitchen` and `hall`, the scripted model)
/// with `agent` configuration and `env` in the daemon's environment.
fn rig_with(agent: &str, env: &[(&str, &str)]) -> Rig {
    agent_rig::rig_full(tempfile::tempdir().expect("skills dir"), env, agent)
}

/// What these tests do beyond the shared rig.
trait AgentTest {
    fn ask_async(&self, id: &str, prompt: &str);
    fn wait_approval(&self) -> Value;
    fn answer(&self, approval_id: &str, decision: &str, reason: Option<&str>);
}

impl AgentTest for Rig {
    /// Publish `cmd/ask` without waiting.
    fn ask_async(&self, id: &str, prompt: &str) {
        self.probe.publish(
            &format!("{P}/cmd/ask"),
            json!({"id": id, "prompt": prompt}).to_string(),
        );
    }

    /// The first approval request published (retained; a live subscriber
    /// sees it without the retain flag).
    fn wait_approval(&self) -> Value {
        self.probe.wait_approval(P, "an approval request", |_| true)
    }

    fn answer(&self, approval_id: &str, decision: &str, reason: Option<&str>) {
        let mut body = json!({"approval_id": approval_id, "decision": decision});
        if let Some(r) = reason {
            body["reason"] = json!(r);
        }
        self.probe
            .publish(&format!("{P}/cmd/approve"), body.to_string());
    }
}

/// A tool call in the model's words.
fn call(name: &str, arguments: Value) -> (String, String) {
    (name.to_owned(), arguments.to_string())
}

fn tools_reply(calls: Vec<(String, String)>) -> ScriptStep {
    ScriptStep::Reply(ModelReply::tool_calls(calls))
}

fn text_reply(text: &str) -> ScriptStep {
    ScriptStep::Reply(ModelReply::text(text))
}

fn multi_step(mode: &str) {
    let r = rig(&format!("[agent]\ntool_mode = \"{mode}\"\n"));
    r.kitchen
        .control(json!({"op": "set", "path": "battery.level", "value": 57}));
    let volume_before = r.hall.state()["audio"]["volumes"].clone();
    let (battery, volume) = if mode == "toolkit" {
        (
            call(
                "android_device",
                json!({"device": "kitchen", "service_id": "battery", "action": "status", "parameters": {}}),
            ),
            call(
                "android_device",
                json!({"device": "hall", "service_id": "audio_automation", "action": "set_volume", "parameters": {"stream": "music", "level": 30}}),
            ),
        )
    } else {
        (
            call(
                "android_battery",
                json!({"device": "kitchen", "action": "status", "parameters": {}}),
            ),
            call(
                "android_audio_automation",
                json!({"device": "hall", "action": "set_volume", "parameters": {"stream": "music", "level": 30}}),
            ),
        )
    };
    r.script([
        tools_reply(vec![battery, volume]),
        answer_from_results(|results| {
            let level = results
                .iter()
                .find_map(|v| v["level"].as_u64())
                .map_or("unknown".to_owned(), |l| l.to_string());
            format!("The kitchen tablet is at {level}% and the hall volume is set.")
        }),
    ]);
    let reply = r.ask(
        &format!("ask-{mode}"),
        "battery of the kitchen, and hall volume to 30",
        None,
    );
    assert_eq!(reply["ok"], true, "{reply}");
    let result = &reply["result"];
    assert_eq!(
        result["text"], "The kitchen tablet is at 57% and the hall volume is set.",
        "{reply}"
    );
    assert_eq!(result["stop_reason"], "final_answer");
    let steps = result["steps"].as_array().expect("steps");
    assert_eq!(steps.len(), 2, "{reply}");
    assert!(steps.iter().all(|s| s["is_error"] == false), "{reply}");
    // The phones changed (or were read) through the daemon's call path,
    // which announced each call's status.
    assert_ne!(r.hall.state()["audio"]["volumes"], volume_before);
    for (device, service) in [("kitchen", "battery"), ("hall", "audio_automation")] {
        r.probe.wait_last(
            &format!("{P}/devices/{device}/services/{service}/status"),
            WAIT,
            |m| m.json()["state"] == "success",
        );
    }
    // The model saw the tools of the mode, with both devices to choose from.
    let first = &r.llm.requests()[0].body;
    let names: Vec<&str> = first["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    if mode == "toolkit" {
        assert!(names.contains(&"android_device"), "{names:?}");
        let device = &first["tools"][0]["function"]["parameters"]["properties"]["device"];
        let listed = device.to_string();
        assert!(
            listed.contains("kitchen") && listed.contains("hall"),
            "{device}"
        );
    } else {
        assert!(
            names.contains(&"android_battery") && names.contains(&"android_wifi_automation"),
            "{names:?}"
        );
        assert!(!names.contains(&"android_device"), "{names:?}");
    }
    // Progress events on the session topic, each once.
    let session = result["session"].as_str().expect("session");
    let events = r.wait_final(session);
    let count = |kind: &str| events.iter().filter(|e| e["event"] == kind).count();
    assert_eq!(count("tool_call"), 2, "{events:?}");
    assert_eq!(count("tool_result"), 2, "{events:?}");
    assert_eq!(count("final"), 1, "{events:?}");
    let mut call_ids: Vec<&str> = events
        .iter()
        .filter(|e| e["event"] == "tool_result")
        .filter_map(|e| e["call_id"].as_str())
        .collect();
    call_ids.dedup();
    assert_eq!(call_ids.len(), 2, "{events:?}");
}

#[test]
fn a_multi_step_task_across_two_devices_in_toolkit_mode() {
    multi_step("toolkit");
}

#[test]
fn a_multi_step_task_across_two_devices_in_direct_mode() {
    multi_step("direct");
}

#[test]
fn malformed_calls_rate_limits_and_cut_streams_do_not_end_the_run() {
    let r = rig("");
    r.script([
        ScriptStep::Status {
            status: 429,
            retry_after: Some("0".into()),
            body: r#"{"error":{"message":"slow down"}}"#.into(),
        },
        tools_reply(vec![
            ("android_device".into(), r#"{"service_id": "battery""#.into()),
            call("android_toaster", json!({})),
            call(
                "android_device",
                json!({"device": "hall", "service_id": "audio_automation", "action": "set_volume", "parameters": {"stream": "music", "level": 500}}),
            ),
        ]),
        answer_from_results(|results| {
            let codes: Vec<String> = results
                .iter()
                .map(|v| v["error"]["code"].as_str().unwrap_or("ok").to_owned())
                .collect();
            format!("errors: {}", codes.join(","))
        }),
    ]);
    let reply = r.ask("bad-calls", "do something odd", None);
    assert_eq!(reply["ok"], true, "{reply}");
    let text = reply["result"]["text"].as_str().unwrap_or_default();
    assert!(text.starts_with("errors: "), "{text}");
    assert!(
        !text.contains("ok"),
        "every malformed call is an error: {text}"
    );
    assert!(text.contains("invalid_params"), "{text}");
    // The 429 was retried: three requests reached the model (429, the
    // malformed calls, the answer).
    assert_eq!(r.llm.requests().len(), 3);
    // A stream cut mid-way through a tool call (before any answer text was
    // shown) is retried; the half-streamed call is not acted on.
    let battery = || {
        ModelReply::tool_calls([call(
            "android_device",
            json!({"device": "kitchen", "service_id": "battery", "action": "status", "parameters": {}}),
        )])
    };
    r.script([
        ScriptStep::Cut {
            reply: battery(),
            events: 2,
        },
        ScriptStep::Reply(battery()),
        text_reply("fine after all"),
    ]);
    let reply = r.ask("after-cut", "hello", None);
    assert_eq!(reply["result"]["text"], "fine after all", "{reply}");
    assert_eq!(
        reply["result"]["steps"].as_array().map(Vec::len),
        Some(1),
        "{reply}"
    );
    // The daemon is still serving ordinary calls.
    let call = r.probe.request(
        P,
        "call",
        json!({"id": "still-alive", "device": "kitchen", "service": "battery", "action": "status"}),
    );
    assert_eq!(call["ok"], true, "{call}");
}

#[test]
fn approvals_are_published_and_approve_deny_and_expiry_reach_the_run() {
    let r = rig("[agent.approval]\ntimeout_s = 4\n");
    let disable = || {
        tools_reply(vec![call(
            "android_device",
            json!({"device": "kitchen", "service_id": "wifi_automation", "action": "disable", "parameters": {}}),
        )])
    };
    let report = || {
        answer_from_results(|results| {
            let r = &results[0];
            match r["error"]["code"].as_str() {
                Some(code) => format!(
                    "{code}: {}",
                    r["error"]["message"].as_str().unwrap_or_default()
                ),
                None => "wifi is off".into(),
            }
        })
    };
    // Approve.
    r.script([disable(), report()]);
    r.ask_async("approve-me", "turn off the kitchen wifi");
    let approval = r.wait_approval();
    for key in [
        "approval_id",
        "session",
        "device",
        "service",
        "action",
        "params",
        "risk",
        "requested_at",
        "expires_at",
    ] {
        assert!(approval.get(key).is_some(), "{key} missing: {approval}");
    }
    assert_eq!(approval["service"], "wifi_automation");
    assert_eq!(approval["risk"], "high");
    let id = approval["approval_id"].as_str().expect("id").to_owned();
    assert_eq!(
        r.kitchen.state()["wifi"]["enabled"],
        true,
        "nothing ran yet"
    );
    assert_eq!(sim_commands_with(&r.kitchen, &["wifi", "disable"]), 0);
    // Home automation names who pressed the button (`by`, its own word).
    // It also claims a login in the property the embedded broker vouches
    // with: from another broker (mosquitto here) the daemon does not read
    // it. Sent with mosquitto's own client, MQTT 5.
    let approve = json!({"approval_id": id, "decision": "approve", "by": "Alice"});
    let mut pub_cmd = Command::new("mosquitto_pub");
    pub_cmd.args(["-h", "127.0.0.1", "-p", &r.broker.port.to_string()]);
    let topic = format!("{}{P}/cmd/approve", r.broker.mount().unwrap_or(""));
    pub_cmd.args(["-V", "mqttv5", "-q", "1", "-t", &topic]);
    pub_cmd.args([
        "-D",
        "publish",
        "user-property",
        "droidwarden-publisher",
        "root",
    ]);
    pub_cmd.args(["-m", &approve.to_string()]);
    let out = droidwarden_e2e::run_with_timeout(pub_cmd, WAIT);
    assert!(out.status.success(), "{out:?}");
    let reply = r.wait_reply("approve-me");
    assert_eq!(reply["result"]["text"], "wifi is off", "{reply}");
    assert_eq!(r.kitchen.state()["wifi"]["enabled"], false);
    // The retained request is cleared once answered.
    r.probe
        .wait_last(&format!("{P}/approvals/{id}"), WAIT, |m| {
            m.payload.is_empty()
        });
    let session = reply["result"]["session"].as_str().expect("session");
    let events = r.events(session);
    assert_eq!(
        events
            .iter()
            .filter(|e| e["event"] == "approval_requested")
            .count(),
        1,
        "{events:?}"
    );
    // Who answered, in the session's events.
    let answered: Vec<_> = events
        .iter()
        .filter(|e| e["event"] == "approval_answered")
        .collect();
    assert_eq!(answered.len(), 1, "{events:?}");
    assert_eq!(answered[0]["approval_id"], id.as_str(), "{events:?}");
    assert_eq!(answered[0]["approved"], true, "{events:?}");
    assert_eq!(answered[0]["by"], r#"MQTT, as "Alice""#, "{events:?}");
    // Answering again is refused with a reason.
    r.probe.publish(
        &format!("{P}/cmd/approve"),
        json!({"id": "again", "approval_id": id, "decision": "approve"}).to_string(),
    );
    let again = r.wait_reply("again");
    assert_eq!(again["ok"], false, "{again}");
    assert_eq!(again["error"]["code"], "invalid_request", "{again}");

    // Deny, with a reason the model reads.
    r.kitchen
        .control(json!({"op": "set", "path": "wifi.enabled", "value": true}));
    r.script([disable(), report()]);
    r.ask_async("deny-me", "turn off the kitchen wifi");
    let approval = wait_for("a second approval request", WAIT, || {
        r.probe
            .messages()
            .into_iter()
            .filter(|m| m.topic.starts_with(&format!("{P}/approvals/")) && !m.payload.is_empty())
            .map(|m| m.json())
            .find(|a| a["approval_id"] != id.as_str())
    });
    let denied_id = approval["approval_id"].as_str().expect("id").to_owned();
    r.answer(&denied_id, "deny", Some("not during dinner"));
    let reply = r.wait_reply("deny-me");
    let text = reply["result"]["text"].as_str().unwrap_or_default();
    assert!(
        text.starts_with("denied:") && text.contains("not during dinner"),
        "{reply}"
    );
    assert_eq!(r.kitchen.state()["wifi"]["enabled"], true);

    // No answer: expired after timeout_s, which the model sees as a denial.
    r.script([disable(), report()]);
    let reply = r.ask("expire-me", "turn off the kitchen wifi", None);
    let text = reply["result"]["text"].as_str().unwrap_or_default();
    assert!(
        text.starts_with("denied:") && text.contains("expired"),
        "{reply}"
    );
    assert_eq!(r.kitchen.state()["wifi"]["enabled"], true);
    assert_eq!(sim_commands_with(&r.kitchen, &["wifi", "disable"]), 1);
    // Unknown ids and bad payloads get structured errors.
    r.probe.publish(
        &format!("{P}/cmd/approve"),
        json!({"id": "nope", "approval_id": "r-0-a9", "decision": "approve"}).to_string(),
    );
    assert_eq!(r.wait_reply("nope")["error"]["code"], "not_found");
    r.probe
        .publish(&format!("{P}/cmd/ask"), r#"{"id":"bad-ask","prompt":7}"#);
    assert_eq!(r.wait_reply("bad-ask")["error"]["code"], "invalid_request");
}

#[test]
fn a_run_waiting_for_approval_survives_a_killed_daemon() {
    let mut r = rig("");
    r.script([
        tools_reply(vec![call(
            "android_device",
            json!({"device": "kitchen", "service_id": "wifi_automation", "action": "disable", "parameters": {}}),
        )]),
        text_reply("done: wifi is off"),
    ]);
    r.ask_async("survivor", "turn off the kitchen wifi");
    let approval = r.wait_approval();
    let id = approval["approval_id"].as_str().expect("id").to_owned();
    r.kill_and_restart();
    // The request is still pending and still published.
    r.wait_pending_approval(&id);
    assert_eq!(r.kitchen.state()["wifi"]["enabled"], true);
    r.answer(&id, "approve", None);
    // The resumed run completes and its requester still gets the reply.
    let reply = r.wait_reply("survivor");
    assert_eq!(ok_text(&reply), "done: wifi is off");
    assert_eq!(r.kitchen.state()["wifi"]["enabled"], false);
    assert_eq!(
        sim_commands_with(&r.kitchen, &["wifi", "disable"]),
        1,
        "the change ran exactly once"
    );
    assert!(
        r.daemon()
            .log()
            .contains("resuming an interrupted agent run")
    );
}

#[test]
fn a_long_session_still_recalls_an_early_fact() {
    let r = rig("[agent]\nmemory_turns = 2\nmemory_recall = 3\n");
    r.script([text_reply("Noted: bay B42.")]);
    let first = r.ask(
        "m1",
        "Remember that my car is parked in bay B42",
        Some("errands"),
    );
    assert_eq!(first["result"]["session"], "errands");
    for (i, prompt) in [
        "What is the capital of France?",
        "Tell me a joke",
        "How are you?",
    ]
    .iter()
    .enumerate()
    {
        r.script([text_reply("ok")]);
        let reply = r.ask(&format!("m{}", i + 2), prompt, Some("errands"));
        assert_eq!(reply["ok"], true, "{reply}");
    }
    r.script([ScriptStep::Compute(Responder::new(|request| {
        let system = request.body["messages"][0]["content"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        ModelReply::text(if system.contains("B42") {
            "Your car is in bay B42."
        } else {
            "I do not remember."
        })
    }))]);
    let reply = r.ask("m5", "Where is my car parked?", Some("errands"));
    assert_eq!(
        reply["result"]["text"], "Your car is in bay B42.",
        "{reply}"
    );
    // Only the last two turns were in the conversation itself.
    let last = r.llm.requests().pop().expect("request");
    let messages = last.body["messages"].as_array().expect("messages");
    let conversation = messages.iter().filter(|m| m["role"] != "system").count();
    assert_eq!(
        conversation, 5,
        "2 turns × 2 messages + the prompt: {messages:?}"
    );
}

/// `droidwarden ask` in the background, its output lines collected.
struct Background {
    child: KillOnDrop,
    lines: Arc<Mutex<Vec<String>>>,
    /// Kept until the process ends.
    _config: tempfile::NamedTempFile,
}

/// `droidwarden ask ARGS…` against the daemon on the bus at `bus_address`.
fn spawn_ask(config: &str, bus_address: &str, home: &std::path::Path, args: &[&str]) -> Background {
    let config_file = tempfile::NamedTempFile::new().expect("config");
    std::fs::write(config_file.path(), config).expect("write config");
    let mut child = Command::new(binary("droidwarden"))
        .arg("--config")
        .arg(config_file.path())
        .arg("ask")
        .args(args)
        .env("DBUS_SESSION_BUS_ADDRESS", bus_address)
        .env("HOME", home)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn droidwarden ask");
    let lines: Arc<Mutex<Vec<String>>> = Arc::default();
    for stream in [
        Box::new(child.stdout.take().expect("stdout")) as Box<dyn std::io::Read + Send>,
        Box::new(child.stderr.take().expect("stderr")),
    ] {
        let lines = Arc::clone(&lines);
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines() {
                let Ok(line) = line else { return };
                lines.lock().unwrap().push(line);
            }
        });
    }
    Background {
        child: child.into(),
        lines,
        _config: config_file,
    }
}

impl Background {
    fn wait_line(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        wait_for(what, WAIT, || {
            self.lines.lock().unwrap().iter().find(|l| pred(l)).cloned()
        })
    }

    fn wait_exit(&mut self) -> i32 {
        self.child.exit_code("droidwarden ask", WAIT)
    }
}

#[test]
fn the_cli_and_dbus_ask_approve_and_show_sessions() {
    let bus = PrivateBus::session();
    let r = rig_with("", &bus.daemon_env());
    bus.wait_for_daemon(WAIT);
    let monitor = bus.monitor();
    let cli = Droidwarden::new(&r.adb, &r.config);
    r.script([
        tools_reply(vec![call(
            "android_device",
            json!({"device": "hall", "service_id": "wifi_automation", "action": "disable", "parameters": {}}),
        )]),
        text_reply("Hall wifi is off."),
    ]);
    let mut ask = spawn_ask(
        &r.config,
        &bus.address,
        r.adb.home(),
        &["--session", "cli-1", "turn", "off", "the", "hall", "wifi"],
    );
    ask.wait_line("the tool call", |l| l.starts_with("→ android_device"));
    let prompt_line = ask.wait_line("the approval prompt", |l| l.contains("approval needed"));
    assert!(
        prompt_line.contains("wifi_automation.disable on hall"),
        "{prompt_line}"
    );
    // The pending request, listed by the CLI and over D-Bus.
    let listed = cli.run_on_bus(&bus.address, &["approvals", "--json"]);
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    let id = listed.json["approvals"][0]["approval_id"]
        .as_str()
        .expect("an approval")
        .to_owned();
    let over_dbus = bus.gdbus_call("ListApprovals", &[]).expect("ListApprovals");
    assert!(over_dbus.contains(&id), "{over_dbus}");
    let unknown = bus
        .gdbus_call("Deny", &["r-0-a1", "no"])
        .expect_err("an unknown approval");
    assert!(
        unknown.contains("org.droidwarden.Error.NotFound"),
        "{unknown}"
    );
    let approved = cli.run_on_bus(&bus.address, &["approve", &id]);
    assert_eq!(approved.code, 0, "{}", approved.stderr);
    assert_eq!(ask.wait_exit(), 0);
    let out = ask.lines.lock().unwrap().join("\n");
    assert!(out.contains("session cli-1"), "{out}");
    assert!(out.contains("✓ android_device"), "{out}");
    assert!(out.trim_end().ends_with("Hall wifi is off."), "{out}");
    assert_eq!(r.hall.state()["wifi"]["enabled"], false);
    // Signals: the request and every event of the session.
    wait_for("ApprovalRequested and SessionEvent signals", WAIT, || {
        let requested = monitor.signals("ApprovalRequested");
        let events = monitor.signals("SessionEvent");
        (requested.iter().any(|l| l.contains(&id)) && events.iter().any(|l| l.contains("final")))
            .then_some(())
    });
    // Sessions and the conversation.
    let sessions = cli.run_on_bus(&bus.address, &["sessions", "--json"]);
    assert_eq!(
        sessions.json["sessions"][0]["id"], "cli-1",
        "{}",
        sessions.stdout
    );
    // One convention for every --json: an object, times in RFC 3339.
    let updated = sessions.json["sessions"][0]["updated_at"]
        .as_str()
        .unwrap_or_default();
    assert!(
        updated.ends_with('Z') && updated.contains('T'),
        "{}",
        sessions.stdout
    );
    let shown = cli.run_on_bus(&bus.address, &["session", "show", "cli-1"]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    // Who answered: the CLI's uid, as the bus daemon vouches for it.
    let approved_by = format!(
        "**Approval** `{id}`: approved by D-Bus uid {} (:",
        own_uid().expect("own uid")
    );
    for needle in [
        "turn off the hall wifi",
        "android_device",
        "Hall wifi is off.",
        &approved_by,
    ] {
        assert!(shown.stdout.contains(needle), "{needle}: {}", shown.stdout);
    }
    // The record of answered requests: who answered, and when.
    let history = cli.run_on_bus(&bus.address, &["approvals", "--history", "--json"]);
    assert_eq!(history.code, 0, "{}", history.stderr);
    let last = &history.json["approvals"][0];
    assert_eq!(last["approval_id"], id.as_str(), "{}", history.stdout);
    assert_eq!(last["status"], "approved", "{}", history.stdout);
    assert!(
        last["decided_by"].as_str().is_some_and(
            |by| by.starts_with(&format!("D-Bus uid {} (:", own_uid().expect("own uid")))
        ),
        "{}",
        history.stdout
    );
    assert!(
        last["decided_at"]
            .as_str()
            .is_some_and(|at| at.ends_with('Z')),
        "{}",
        history.stdout
    );
    let table = cli.run_on_bus(&bus.address, &["approvals", "--history", "--limit", "1"]);
    assert_eq!(table.code, 0, "{}", table.stderr);
    assert!(
        table.stdout.contains("  approved  D-Bus uid ")
            && table.stdout.contains("wifi_automation.disable on hall")
            && table.stdout.contains(&id),
        "{}",
        table.stdout
    );
    let missing = cli.run_on_bus(&bus.address, &["session", "show", "nope"]);
    assert_ne!(missing.code, 0);
    // D-Bus Ask returns the session at once; the answer comes as signals.
    r.script([text_reply("pong")]);
    let session = bus.gdbus_call("Ask", &["", "ping"]).expect("Ask");
    assert!(session.contains("s-"), "{session}");
    wait_for("the pong event", WAIT, || {
        monitor
            .signals("SessionEvent")
            .iter()
            .any(|l| l.contains("pong"))
            .then_some(())
    });
    // Ctrl-C while the run waits for a person: the CLI says the run goes
    // on and the approval stays open, and it does.
    r.script([tools_reply(vec![call(
        "android_device",
        json!({"device": "hall", "service_id": "wifi_automation", "action": "enable", "parameters": {}}),
    )])]);
    let mut ask = spawn_ask(
        &r.config,
        &bus.address,
        r.adb.home(),
        &[
            "--session",
            "cli-2",
            "turn",
            "the",
            "hall",
            "wifi",
            "back",
            "on",
        ],
    );
    ask.wait_line("the second approval prompt", |l| {
        l.contains("approval needed")
    });
    let listed = cli.run_on_bus(&bus.address, &["approvals", "--json"]);
    let id = listed.json["approvals"][0]["approval_id"]
        .as_str()
        .expect("an approval")
        .to_owned();
    let _ = Command::new("kill")
        .args(["-INT", &ask.child.id().to_string()])
        .status();
    assert_eq!(ask.wait_exit(), 130);
    let said = ask.wait_line("what Ctrl-C leaves behind", |l| l.contains("still waits"));
    assert!(said.contains(&id), "{said}");
    let listed = cli.run_on_bus(&bus.address, &["approvals", "--json"]);
    assert_eq!(
        listed.json["approvals"][0]["approval_id"],
        id.as_str(),
        "{}",
        listed.stdout
    );
    let denied = cli.run_on_bus(&bus.address, &["deny", &id]);
    assert_eq!(denied.code, 0, "{}", denied.stderr);
}

/// A toolkit `ui_control.tap` at (`x`, `y`) on the kitchen phone.
fn tap(x: u32, y: u32) -> ScriptStep {
    tools_reply(vec![call(
        "android_device",
        json!({"device": "kitchen", "service_id": "ui_control", "action": "tap", "parameters": {"x": x, "y": y}}),
    )])
}

/// Taps on the emulated phone at (`x`, `y`), from its command log.
fn taps_at(r: &Rig, x: u32, y: u32) -> usize {
    sim_commands_with(
        &r.kitchen,
        &["input", "tap", &x.to_string(), &y.to_string()],
    )
}

#[test]
fn approve_for_the_run_and_with_edits_over_mqtt() {
    let r = rig("");
    // For the run: the first tap asks, the two after it do not.
    r.script([
        tap(11, 21),
        tap(12, 22),
        tap(13, 23),
        text_reply("tapped thrice"),
    ]);
    r.ask_async("grant", "tap three times");
    let approval = r.wait_approval();
    assert_eq!(approval["action"], "tap");
    let id = approval["approval_id"].as_str().expect("id").to_owned();
    r.probe.publish(
        &format!("{P}/cmd/approve"),
        json!({"id": "for-run", "approval_id": id, "decision": "approve", "scope": "run", "up_to": "medium", "by": "Alice"})
            .to_string(),
    );
    let answered = r.wait_reply("for-run");
    assert_eq!(
        answered["result"]["decision"], "approve_for_run",
        "{answered}"
    );
    let reply = r.wait_reply("grant");
    assert_eq!(reply["result"]["text"], "tapped thrice", "{reply}");
    for (x, y) in [(11, 21), (12, 22), (13, 23)] {
        assert_eq!(taps_at(&r, x, y), 1, "({x}, {y})");
    }
    let session = reply["result"]["session"].as_str().expect("session");
    let events = r.events(session);
    let requested = events
        .iter()
        .filter(|e| e["event"] == "approval_requested")
        .count();
    assert_eq!(requested, 1, "{events:?}");
    let grant = events
        .iter()
        .find(|e| e["event"] == "approval_answered")
        .map(|e| e["grant"].clone())
        .expect("answered");
    assert_eq!(
        (&grant["device"], &grant["up_to"], &grant["granted_by"]),
        (
            &json!("kitchen"),
            &json!("medium"),
            &json!(r#"MQTT, as "Alice""#)
        ),
        "{grant}"
    );
    // It ended with its run: revoking it now is refused.
    r.probe.publish(
        &format!("{P}/cmd/approve"),
        json!({"id": "revoke", "decision": "revoke", "grant_id": grant["grant_id"]}).to_string(),
    );
    let revoked = r.wait_reply("revoke");
    assert_eq!(revoked["error"]["code"], "invalid_request", "{revoked}");

    // With edits: the person moves the tap; a bad edit is refused first
    // and the request still waits.
    r.script([tap(1, 2), text_reply("tapped")]);
    r.ask_async("edit", "tap once");
    let approval = r.probe.wait_approval(P, "the tap to edit", |a| {
        a["params"] == json!({"x": 1, "y": 2})
    });
    let id = approval["approval_id"].as_str().expect("id").to_owned();
    r.probe.publish(
        &format!("{P}/cmd/approve"),
        json!({"id": "bad-edit", "approval_id": id, "decision": "approve", "params": {"x": "far"}})
            .to_string(),
    );
    let refused = r.wait_reply("bad-edit");
    assert_eq!(refused["error"]["code"], "invalid_params", "{refused}");
    r.probe.publish(
        &format!("{P}/cmd/approve"),
        json!({"id": "good-edit", "approval_id": id, "decision": "approve", "params": {"x": 111, "y": 222}})
            .to_string(),
    );
    assert_eq!(r.wait_reply("good-edit")["ok"], true);
    let reply = r.wait_reply("edit");
    assert_eq!(reply["result"]["text"], "tapped", "{reply}");
    assert_eq!(taps_at(&r, 111, 222), 1);
    assert_eq!(taps_at(&r, 1, 2), 0, "the model's tap did not run");
    let session = reply["result"]["session"].as_str().expect("session");
    let answered = r
        .events(session)
        .into_iter()
        .find(|e| e["event"] == "approval_answered")
        .expect("answered");
    assert_eq!(
        answered["original_params"],
        json!({"x": 1, "y": 2}),
        "{answered}"
    );
    assert_eq!(
        answered["edited_params"],
        json!({"x": 111, "y": 222}),
        "{answered}"
    );
}

#[test]
fn the_cli_approves_for_the_run_with_edits_and_revokes() {
    let bus = PrivateBus::session();
    let r = rig_with("", &bus.daemon_env());
    bus.wait_for_daemon(WAIT);
    let cli = Droidwarden::new(&r.adb, &r.config);
    let waiting = || -> String {
        wait_for("an approval request listed by the CLI", WAIT, || {
            let listed = cli.run_on_bus(&bus.address, &["approvals", "--json"]);
            listed.json["approvals"][0]["approval_id"]
                .as_str()
                .map(str::to_owned)
        })
    };
    // With an edit typed by the action's schema (`x=111` is a number).
    r.script([tap(1, 2), text_reply("tapped")]);
    r.ask_async("cli-edit", "tap once");
    let id = waiting();
    let approved = cli.run_on_bus(
        &bus.address,
        &["approve", &id, "--edit", "x=111", "--edit", "y=222"],
    );
    assert_eq!(approved.code, 0, "{}", approved.stderr);
    assert_eq!(r.wait_reply("cli-edit")["result"]["text"], "tapped");
    assert_eq!((taps_at(&r, 111, 222), taps_at(&r, 1, 2)), (1, 0));
    // For the run: one question for three taps.
    r.script([tap(31, 41), tap(32, 42), tap(33, 43), text_reply("done")]);
    r.ask_async("cli-run", "tap three times");
    let id = waiting();
    let approved = cli.run_on_bus(
        &bus.address,
        &["approve", &id, "--for-run", "--up-to", "medium"],
    );
    assert_eq!(approved.code, 0, "{}", approved.stderr);
    let reply = r.wait_reply("cli-run");
    assert_eq!(reply["result"]["text"], "done", "{reply}");
    for (x, y) in [(31, 41), (32, 42), (33, 43)] {
        assert_eq!(taps_at(&r, x, y), 1, "({x}, {y})");
    }
    let session = reply["result"]["session"].as_str().expect("session");
    let events = r.events(session);
    let asked = events
        .iter()
        .filter(|e| e["event"] == "approval_requested")
        .count();
    assert_eq!(asked, 1, "{events:?}");
    let grant = events
        .iter()
        .find_map(|e| e["grant"]["grant_id"].as_str())
        .expect("the grant in the session's events")
        .to_owned();
    // It ended with its run: no longer listed, and revoking it says so.
    let listed = cli.run_on_bus(&bus.address, &["approvals", "--json"]);
    assert_eq!(listed.json["grants"], json!([]), "{}", listed.stdout);
    let revoked = cli.run_on_bus(&bus.address, &["approvals", "revoke", &grant]);
    assert_ne!(revoked.code, 0, "{}", revoked.stdout);
    let bad = cli.run_on_bus(&bus.address, &["approve", "r-nope", "--edit", "x=1"]);
    assert_ne!(bad.code, 0);
    assert!(bad.stderr.contains("no approval request"), "{}", bad.stderr);
}
