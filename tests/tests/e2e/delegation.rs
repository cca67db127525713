//! Delegation to `[[agents]]` through the daemon, end to end: the scripted
//! language model over real HTTP, a real mosquitto, the real adb server,
//! two emulated phones and `droidwarden daemon` as a process (the rig of
//! `droidwarden_e2e::agent_rig`, shared with the skill tests). Asks go over
//! MQTT `cmd/ask`; what reached a phone is read from the sim's command log;
//! `droidwarden sessions` and `session show` run over a private D-Bus.

use droidwarden_agent::ModelReply;
use droidwarden_agent::testing::{RecordedRequest, Responder, ScriptStep};
use droidwarden_e2e::Droidwarden;
use droidwarden_e2e::agent_rig::{
    P, Rig, WAIT, call, dev, ok_text, rig_full, sim_commands_with, text,
};
use droidwarden_e2e::dbus::PrivateBus;
use droidwarden_e2e::mqtt::Daemon;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};

const AGENTS: &str = "[agent]\nmax_iterations = 4\n[[agents]]\nname = \"battery-doctor\"\ndescription = \"Reads a phone's battery.\"\nsystem_prompt = \"DOCTOR: you read batteries.\"\ntools = [\"battery\"]\nmax_iterations = 3\n[[agents]]\nname = \"netcheck\"\ndescription = \"Checks a phone's Wi-Fi.\"\nsystem_prompt = \"NETCHECK: you check Wi-Fi.\"\ntools = [\"wifi_automation.status\"]\nmode = \"background\"\nmax_iterations = 3\n";

/// The last message, when it is a tool result.
fn tool_result(r: &RecordedRequest) -> Option<String> {
    let last = r.body["messages"].as_array()?.last()?;
    (last["role"] == "tool").then(|| last["content"].as_str().unwrap_or_default().to_owned())
}

fn tool_reply(tool: &str, args: Value) -> ModelReply {
    ModelReply::tool_calls(vec![(tool.to_owned(), args.to_string())])
}

/// Wait for an event of `kind` on the session's topic matching `pred`.
fn wait_event(r: &Rig, session: &str, kind: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let topic = format!("{P}/sessions/{session}/events");
    r.probe
        .wait(&format!("{kind} on {topic}"), WAIT, |m| {
            if m.topic != topic {
                return false;
            }
            let v = m.json();
            v["event"] == kind && pred(&v)
        })
        .json()
}

#[test]
fn wait_mode_reaches_the_phone_a_failing_child_is_a_tool_error_and_a_self_delegating_loop_stops() {
    let r = rig_full(tempfile::tempdir().expect("skills"), &[], AGENTS);

    // Wait mode: the doctor reads the kitchen battery on the phone.
    r.script([
        call(
            "delegate_to_battery-doctor",
            json!({"task": "Read the kitchen phone's battery.", "context": "It is the phone named kitchen."}),
        ),
        dev("kitchen", "battery", "status"),
        text("Kitchen battery read."),
        text("The doctor read the kitchen battery."),
    ]);
    let before = sim_commands_with(&r.kitchen, &["dumpsys", "battery"]);
    let reply = r.ask("w1", "How is the kitchen battery?", None);
    assert_eq!(ok_text(&reply), "The doctor read the kitchen battery.");
    assert_eq!(
        sim_commands_with(&r.kitchen, &["dumpsys", "battery"]),
        before + 1
    );
    let session = reply["result"]["session"]
        .as_str()
        .expect("session")
        .to_owned();
    let requests = r.llm.requests();
    assert!(
        requests[0]
            .tool_names()
            .contains(&"delegate_to_battery-doctor".to_owned())
    );
    assert!(
        requests[0]
            .tool_names()
            .contains(&"delegation_status".to_owned())
    );
    assert!(requests[1].system_prompt().starts_with("DOCTOR"));
    // Isolated: the child saw the task and context, not the user's words.
    assert!(
        !requests[1].body["messages"]
            .to_string()
            .contains("How is the kitchen")
    );
    // The parent got the child's answer as its tool result.
    assert!(
        requests[3].body["messages"]
            .to_string()
            .contains("Kitchen battery read.")
    );
    // The child's events are on the session's topic, tagged with the agent.
    let started = wait_event(&r, &session, "skill_started", |_| true);
    assert_eq!(started["skill"], "agent:battery-doctor");
    let child_call = wait_event(&r, &session, "tool_call", |v| {
        v["skill"] == "agent:battery-doctor"
    });
    assert_eq!(child_call["arguments"]["service_id"], "battery");

    // A child whose model fails: the parent gets a tool error, continues.
    r.script([
        call(
            "delegate_to_battery-doctor",
            json!({"task": "Read the hall battery."}),
        ),
        ScriptStep::Status {
            status: 400,
            retry_after: None,
            body: json!({"error": {"message": "the doctor's model is broken"}}).to_string(),
        },
        text("The doctor could not help."),
    ]);
    let n = r.llm.requests().len();
    let reply = r.ask("w2", "And the hall?", None);
    assert_eq!(ok_text(&reply), "The doctor could not help.");
    let requests = r.llm.requests();
    assert_eq!(requests.len(), n + 3);
    let seen = requests[n + 2].body["messages"].to_string();
    assert!(seen.contains("agent battery-doctor failed"), "{seen}");

    // Hostile: a model that always delegates to the same agent, from the
    // parent and from the child. The child is refused with a depth error;
    // the parent stops at its own limit; the daemon serves on.
    r.llm.set_fallback(ScriptStep::Compute(Responder::new(|_| {
        tool_reply(
            "delegate_to_battery-doctor",
            json!({"task": "delegate again"}),
        )
    })));
    let n = r.llm.requests().len();
    let reply = r.ask("w3", "loop", None);
    assert_eq!(reply["ok"], true, "{reply}");
    assert_eq!(reply["result"]["stop_reason"], "max_iterations", "{reply}");
    let requests = r.llm.requests();
    let loop_requests = &requests[n..];
    assert!(
        loop_requests.iter().any(|q| q.body["messages"]
            .to_string()
            .contains("delegation depth limit reached")),
        "no depth error seen"
    );
    // Every child was offered no delegate tool.
    for q in loop_requests
        .iter()
        .filter(|q| q.system_prompt().starts_with("DOCTOR"))
    {
        assert!(
            q.tool_names()
                .iter()
                .all(|t| !t.starts_with("delegate_to_"))
        );
    }
    // Bounded: parent 4 model calls, each of its 3 delegations 3.
    assert_eq!(loop_requests.len(), 4 + 3 * 3);
    r.script([text("Still here.")]);
    assert_eq!(ok_text(&r.ask("w4", "hello", None)), "Still here.");
}

/// The model of the background test: the netcheck agent reads the hall's
/// Wi-Fi and answers; the main agent delegates (`BG`), asks for the status
/// of the task in `task` (`STATUS`), and answers with the tool result.
fn background_model(task: Arc<Mutex<String>>) -> Responder {
    Responder::new(move |r| {
        if r.system_prompt().starts_with("NETCHECK") {
            return match tool_result(r) {
                None => tool_reply(
                    "android_device",
                    json!({"device": "hall", "service_id": "wifi_automation", "action": "status", "parameters": {}}),
                ),
                Some(_) => ModelReply::text("Hall Wi-Fi is on."),
            };
        }
        if let Some(result) = tool_result(r) {
            return ModelReply::text(format!("Result: {result}"));
        }
        let prompt = r.last_user_message();
        if prompt.contains("BG") {
            tool_reply(
                "delegate_to_netcheck",
                json!({"task": "Check the hall phone's Wi-Fi."}),
            )
        } else if prompt.contains("STATUS") {
            let id = task.lock().expect("task").clone();
            tool_reply("delegation_status", json!({"task_id": id}))
        } else {
            ModelReply::text("Nothing to do.")
        }
    })
}

#[test]
fn background_tasks_report_through_status_sessions_reload_and_a_restart() {
    let bus = PrivateBus::session();
    let env = bus.daemon_env();
    let mut r = rig_full(tempfile::tempdir().expect("skills"), &env, AGENTS);
    bus.wait_for_daemon(WAIT);
    let task = Arc::new(Mutex::new(String::new()));
    r.llm
        .set_fallback(ScriptStep::Compute(background_model(task.clone())));

    // The agent's default mode is background: the call answers at once.
    let wifi_before = sim_commands_with(&r.hall, &["wifi"]);
    let reply = r.ask("b1", "BG: is the hall phone on Wi-Fi?", None);
    let text1 = ok_text(&reply);
    assert!(text1.contains("delegated"), "{text1}");
    let session = reply["result"]["session"]
        .as_str()
        .expect("session")
        .to_owned();
    let started = wait_event(&r, &session, "delegation_started", |_| true);
    let task_id = started["task_id"].as_str().expect("task id").to_owned();
    assert!(text1.contains(&task_id), "{text1}");
    assert_eq!(started["agent"], "netcheck");
    assert_eq!(started["skill"], "agent:netcheck");
    *task.lock().expect("task") = task_id.clone();
    let finished = wait_event(&r, &session, "delegation_finished", |v| {
        v["task_id"] == task_id.as_str()
    });
    assert_eq!(finished["status"], "succeeded", "{finished}");
    assert_eq!(finished["result"]["text"], "Hall Wi-Fi is on.");
    // The child's read reached the hall phone.
    assert!(sim_commands_with(&r.hall, &["wifi"]) > wifi_before);

    // delegation_status in a later turn of the same session.
    let reply = r.ask("b2", "STATUS of the Wi-Fi check", Some(&session));
    let text2 = ok_text(&reply);
    assert!(
        text2.contains("succeeded") && text2.contains("Hall Wi-Fi is on."),
        "{text2}"
    );

    // Listed by `droidwarden sessions`, shown by `session show`.
    let cli = Droidwarden::new(&r.adb, &r.config);
    let listed = cli.run_on_bus(&bus.address, &["sessions"]);
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    assert!(
        listed
            .stdout
            .contains(&format!("task {task_id}  netcheck  succeeded")),
        "{}",
        listed.stdout
    );
    let shown = cli.run_on_bus(&bus.address, &["session", "show", &session]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    assert!(
        shown.stdout.contains(&format!(
            "Background task `{task_id}` — agent netcheck (succeeded"
        )) && shown.stdout.contains("Hall Wi-Fi is on."),
        "{}",
        shown.stdout
    );

    // SIGHUP: a new agent in the file is offered to the next run.
    let path = r.daemon().config_path().to_owned();
    let mut file = std::fs::read_to_string(&path).expect("config");
    file.push_str("\n[[agents]]\nname = \"scout\"\ndescription = \"Looks around.\"\nsystem_prompt = \"SCOUT\"\ntools = [\"battery.status\"]\n");
    std::fs::write(&path, file).expect("config");
    r.daemon().reload("agents reloaded", WAIT);
    let n = r.llm.requests().len();
    ok_text(&r.ask("b3", "anything new?", None));
    let offered = r.llm.requests()[n].tool_names();
    assert!(
        offered.contains(&"delegate_to_scout".to_owned())
            && offered.contains(&"delegate_to_netcheck".to_owned()),
        "{offered:?}"
    );

    // A task in flight when the daemon is killed: reported as interrupted
    // after the restart, never lost.
    r.hall
        .control(json!({"op": "fault", "kind": "delay", "ms": 30000}));
    let reply = r.ask("b4", "BG again please", Some(&session));
    ok_text(&reply);
    let started = wait_event(&r, &session, "delegation_started", |v| {
        v["task_id"] != task_id.as_str()
    });
    let lost = started["task_id"].as_str().expect("task id").to_owned();
    // Its phone call is under way (the sim holds it for 30 s).
    wait_event(&r, &session, "tool_call", |v| v["run_id"] == lost.as_str());
    let state = r.daemon.take().expect("daemon").kill();
    r.hall.control(json!({"op": "fault", "kind": "clear"}));
    r.daemon = Some(Daemon::start_with_env(&r.adb, &r.config, state, &env));
    r.wait_online();
    bus.wait_for_daemon(WAIT);
    *task.lock().expect("task") = lost.clone();
    let text3 = ok_text(&r.ask("b5", "STATUS after the restart", Some(&session)));
    assert!(
        text3.contains("interrupted") && text3.contains("daemon stopped"),
        "{text3}"
    );
    let cli = Droidwarden::new(&r.adb, &r.config);
    let listed = cli.run_on_bus(&bus.address, &["sessions", "--json"]);
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    let tasks = listed.json["sessions"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| s["tasks"].as_array().cloned().unwrap_or_default())
        .map(|t| (t["task_id"].clone(), t["status"].clone()))
        .collect::<Vec<_>>();
    assert!(
        tasks.contains(&(json!(task_id), json!("succeeded")))
            && tasks.contains(&(json!(lost), json!("interrupted"))),
        "{tasks:?}"
    );
}
