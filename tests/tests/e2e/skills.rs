//! Skills and plan mode through the daemon, end to end: skills from a temporary
//! directory named in `[agent.skills] dirs`, a scripted language model
//! over real HTTP, a real mosquitto, the real adb server, two emulated
//! phones and `droidwarden daemon` as a process. Skills are run with MQTT
//! `cmd/skill`; what reached a phone is read from the sim's command log.

use droidwarden_agent::testing::ScriptStep;
use droidwarden_e2e::Droidwarden;
use droidwarden_e2e::agent_rig::{
    P, WAIT, dev, ok_text, rig, rig_with, sim_commands_with, text, write_skill,
};
use droidwarden_e2e::dbus::PrivateBus;
use serde_json::{Value, json};

#[test]
fn a_user_skill_runs_with_only_its_tools_and_a_malformed_one_is_skipped() {
    let dir = tempfile::tempdir().expect("skills");
    write_skill(
        dir.path(),
        "kitchen-battery",
        "---\nname: kitchen-battery\ndescription: Report the kitchen phone's battery.\nallowed-tools: battery.status\n---\nRead battery.status on the kitchen phone and report the level.\n",
    );
    write_skill(
        dir.path(),
        "broken",
        "---\nname: broken\ndescription: [never closed\n---\nx\n",
    );
    write_skill(
        dir.path(),
        "sneaky",
        "---\nname: sneaky\ndescription: x\nallowed-tools: battery\nrun-as: root\n---\nx\n",
    );
    let r = rig(dir);
    // Malformed files are reported with the file and the reason, and the
    // daemon serves on.
    let log = r.daemon().log();
    assert!(
        log.contains("broken/SKILL.md") && log.contains("skill skipped"),
        "{log}"
    );
    assert!(
        log.contains("sneaky/SKILL.md") && log.contains("run-as"),
        "{log}"
    );

    r.script([
        dev("kitchen", "battery", "status"),
        dev("kitchen", "wifi_automation", "disable"),
        text("Kitchen battery read; turning Wi-Fi off is not allowed for this skill."),
    ]);
    let before = sim_commands_with(&r.kitchen, &["dumpsys", "battery"]);
    let reply = r.skill("k1", "kitchen-battery", json!({}));
    assert_eq!(
        ok_text(&reply),
        "Kitchen battery read; turning Wi-Fi off is not allowed for this skill."
    );
    // The allowed read reached the phone; the refused change did not.
    assert_eq!(
        sim_commands_with(&r.kitchen, &["dumpsys", "battery"]),
        before + 1
    );
    assert_eq!(sim_commands_with(&r.kitchen, &["wifi", "disable"]), 0);
    assert_eq!(r.kitchen.state()["wifi"]["enabled"], true);
    // The skill's model read the refusal.
    let requests = r.llm.requests();
    let last = requests.last().expect("requests").body["messages"].to_string();
    assert!(
        last.contains("permission_denied")
            && last.contains("allowed-tools of skill kitchen-battery"),
        "{last}"
    );
    assert!(
        requests[0].body["messages"][0]["content"]
            .as_str()
            .unwrap_or_default()
            .contains("Read battery.status on the kitchen phone")
    );
    // Events on the session topic, the skill's tagged with it.
    let session = reply["result"]["session"].as_str().expect("session");
    let events = r.wait_final(session);
    assert!(
        events
            .iter()
            .any(|e| e["event"] == "skill_started" && e["skill"] == "kitchen-battery")
    );
    assert!(events.iter().any(|e| e["event"] == "tool_result"
        && e["skill"] == "kitchen-battery"
        && e["is_error"] == true));

    // Bad requests get clear errors.
    for (id, skill) in [("k2", "no-such-skill"), ("k3", "broken"), ("k4", "../etc")] {
        let reply = r.skill(id, skill, json!({}));
        assert_eq!(reply["error"]["code"], "not_found", "{skill}: {reply}");
    }
}

#[test]
fn a_high_risk_skill_waits_for_approval_across_sigkill_and_skills_reload_on_sighup() {
    let dir = tempfile::tempdir().expect("skills");
    write_skill(
        dir.path(),
        "radio-silence",
        "---\nname: radio-silence\ndescription: Turn the kitchen Wi-Fi off.\nallowed-tools: wifi_automation.disable\nrisk: high\n---\nTurn Wi-Fi off on the kitchen phone.\n",
    );
    let mut r = rig(dir);
    r.script([
        dev("kitchen", "wifi_automation", "disable"),
        text("Kitchen Wi-Fi is off."),
    ]);
    r.probe.publish(
        &format!("{P}/cmd/skill"),
        json!({"id": "quiet", "skill": "radio-silence", "input": {"device": "kitchen"}})
            .to_string(),
    );
    let approval = r.probe.wait_approval(P, "an approval request", |_| true);
    assert_eq!(approval["service"], "skill");
    assert_eq!(approval["action"], "radio-silence");
    assert_eq!(approval["risk"], "high");
    let id = approval["approval_id"].as_str().expect("id").to_owned();
    assert!(
        r.llm.requests().is_empty(),
        "nothing ran before the approval"
    );

    r.kill_and_restart();
    r.wait_pending_approval(&id);
    assert_eq!(r.kitchen.state()["wifi"]["enabled"], true);
    r.probe.answer_approval(P, &id, "approve");
    let reply = r.wait_reply("quiet");
    assert_eq!(ok_text(&reply), "Kitchen Wi-Fi is off.");
    assert_eq!(r.kitchen.state()["wifi"]["enabled"], false);
    assert_eq!(sim_commands_with(&r.kitchen, &["wifi", "disable"]), 1);

    // A skill added while running is found after SIGHUP.
    let missing = r.skill("before", "health", json!({}));
    assert_eq!(missing["error"]["code"], "not_found", "{missing}");
    write_skill(
        r.skills.path(),
        "health",
        "---\nname: health\ndescription: Battery only.\nallowed-tools: battery.status\n---\nSay hello.\n",
    );
    r.daemon().reload("skills reloaded", WAIT);
    r.script([text("hello")]);
    let found = r.skill("after", "health", json!({}));
    assert_eq!(found["ok"], true, "{found}");
    assert_eq!(found["result"]["text"], "hello");
}

fn json_text(v: Value) -> ScriptStep {
    text(&v.to_string())
}

#[test]
fn a_plan_mode_ask_runs_three_steps_across_two_phones_with_one_replan() {
    let r = rig(tempfile::tempdir().expect("skills"));
    r.kitchen
        .control(json!({"op": "set", "path": "battery.level", "value": 81}));
    r.hall
        .control(json!({"op": "set", "path": "battery.level", "value": 23}));
    r.script([
        json_text(json!({"steps": ["read the kitchen battery", "read the hall battery"]})),
        dev("kitchen", "battery", "status"),
        text("kitchen at 81 %"),
        json_text(json!({"decision": "replan", "steps": ["read the hall battery", "read the hall Wi-Fi"]})),
        dev("hall", "battery", "status"),
        text("hall at 23 %"),
        json_text(json!({"decision": "continue"})),
        dev("hall", "wifi_automation", "status"),
        text("hall Wi-Fi on"),
        json_text(json!({"decision": "continue"})),
        text("Kitchen 81 %, hall 23 % with Wi-Fi on."),
    ]);
    let kitchen_before = sim_commands_with(&r.kitchen, &["dumpsys", "battery"]);
    let hall_before = sim_commands_with(&r.hall, &["dumpsys", "battery"]);
    let reply = r.probe.request(
        P,
        "ask",
        json!({"id": "p1", "prompt": "how are the batteries?", "mode": "plan"}),
    );
    assert_eq!(ok_text(&reply), "Kitchen 81 %, hall 23 % with Wi-Fi on.");
    assert_eq!(
        sim_commands_with(&r.kitchen, &["dumpsys", "battery"]),
        kitchen_before + 1
    );
    assert_eq!(
        sim_commands_with(&r.hall, &["dumpsys", "battery"]),
        hall_before + 1
    );
    // The phones' real answers reached the executors.
    let requests = r.llm.requests();
    assert_eq!(requests.len(), 11);
    assert!(requests[2].body["messages"].to_string().contains("81"));
    assert!(requests[5].body["messages"].to_string().contains("23"));
    let session = reply["result"]["session"].as_str().expect("session");
    let events = r.wait_final(session);
    let kinds: Vec<&str> = events
        .iter()
        .filter_map(|e| e["event"].as_str())
        .filter(|k| k.starts_with("plan") || k.starts_with("step_"))
        .collect();
    assert_eq!(
        kinds,
        vec![
            "plan",
            "step_started",
            "step_finished",
            "plan",
            "step_started",
            "step_finished",
            "step_started",
            "step_finished"
        ]
    );
    let bad = r
        .probe
        .request(P, "ask", json!({"id": "p2", "prompt": "x", "mode": "yolo"}));
    assert_eq!(bad["error"]["code"], "invalid_request", "{bad}");
}

#[test]
fn the_cli_lists_shows_and_runs_skills() {
    let dir = tempfile::tempdir().expect("skills");
    write_skill(
        dir.path(),
        "kitchen-battery",
        "---\nname: kitchen-battery\ndescription: Report a phone's battery.\nallowed-tools: battery.status\n---\nRead battery.status on the input's device.\n",
    );
    write_skill(dir.path(), "broken", "no front matter\n");
    let bus = PrivateBus::session();
    let r = rig_with(dir, &bus.daemon_env());
    bus.wait_for_daemon(WAIT);
    let cli = Droidwarden::new(&r.adb, &r.config);

    // Listed locally, built-in and user skills, with the skipped file.
    let listed = cli.run(&["skills", "--json"]);
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    let names: Vec<&str> = listed.json["skills"]
        .as_array()
        .expect("skills")
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    for want in ["kitchen-battery", "bedtime", "phone-health-report"] {
        assert!(names.contains(&want), "{names:?}");
    }
    let problems = listed.json["problems"].to_string();
    assert!(problems.contains("broken/SKILL.md"), "{problems}");
    let shown = cli.run(&["skills", "show", "kitchen-battery"]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    assert!(
        shown.stdout.contains("Read battery.status"),
        "{}",
        shown.stdout
    );
    let missing = cli.run(&["skills", "show", "nope"]);
    assert_ne!(missing.code, 0);
    // Over D-Bus.
    let over_dbus = bus.gdbus_call("ListSkills", &[]).expect("ListSkills");
    assert!(over_dbus.contains("kitchen-battery"), "{over_dbus}");

    // Run through the daemon.
    r.script([
        dev("hall", "battery", "status"),
        text("The hall phone's battery is fine."),
    ]);
    let run = cli.run_on_bus(
        &bus.address,
        &[
            "skill",
            "run",
            "kitchen-battery",
            "--device",
            "hall",
            "note=quick",
        ],
    );
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("▶ skill kitchen-battery"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("[kitchen-battery] → android_device"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .trim_end()
            .ends_with("The hall phone's battery is fine."),
        "{}",
        run.stdout
    );
    // The input reached the skill's model.
    let requests = r.llm.requests();
    let first = requests[0].body["messages"].to_string();
    assert!(first.contains("hall") && first.contains("quick"), "{first}");
    // `session show` has the skill's own calls under the run's turn.
    let session = run
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("session "))
        .expect("session line")
        .trim()
        .to_owned();
    let shown = cli.run_on_bus(&bus.address, &["session", "show", &session]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    assert!(
        shown
            .stdout
            .contains("> **Skill kitchen-battery** (run `k-")
            && shown.stdout.contains("> **Tool call** `android_device`")
            && shown.stdout.contains("> The hall phone's battery is fine."),
        "{}",
        shown.stdout
    );
    let unknown = cli.run_on_bus(&bus.address, &["skill", "run", "nope"]);
    assert_ne!(unknown.code, 0);
    assert!(
        unknown.stderr.contains("unknown skill"),
        "{}",
        unknown.stderr
    );
}
