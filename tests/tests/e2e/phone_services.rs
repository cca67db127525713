//! The phone services of issue #13 end to end: `droidwarden call` through
//! the real adb server to an emulated phone. What the daemon's
//! `[phone_services]` policy refuses never reaches the phone (the sim's
//! command log stays empty); what it allows arrives with every value as
//! exactly one literal argument, and changes the phone's state.

use droidwarden_e2e::{AdbServer, Droidwarden, Sim, SimOptions};
use serde_json::{Value, json};

/// Telephony on for one number, and the shell on.
const ENABLED: &str = "[phone_services.telephony]\nenabled = true\nallowed_numbers = [\"+49 151 1234 5678\"]\n[phone_services.shell]\nenabled = true\n";

fn one_phone(extra_config: &str) -> (AdbServer, Sim, Droidwarden) {
    droidwarden_e2e::local_phone("SIMPHONE1", extra_config)
}

/// The last intent the phone delivered.
fn last_intent(sim: &Sim) -> Value {
    sim.state()["content"]["intents"]
        .as_array()
        .and_then(|a| a.last().cloned())
        .unwrap_or(Value::Null)
}

#[test]
fn open_url_refuses_dangerous_and_unlisted_schemes_before_the_phone() {
    let (_adb, sim, dw) = one_phone("");
    for (url, want) in [
        ("javascript:alert(document.cookie)", "denied"),
        ("JavaScript:alert(1)", "denied"),
        (
            "file:///data/data/com.android.providers.telephony/databases/mmssms.db",
            "denied",
        ),
        ("content://sms/inbox", "denied"),
        (
            "intent://scan/#Intent;scheme=zxing;package=com.x;end",
            "denied",
        ),
        ("data:text/html,<script>alert(1)</script>", "denied"),
        ("market://details?id=com.x", "denied"),
        ("no scheme at all", "invalid_params"),
    ] {
        sim.clear_log();
        let run = dw.call("phone", "intents", "open_url", json!({ "url": url }));
        assert_eq!(run.error_code(), want, "{url}: {}", run.stdout);
        let message = run.error_message();
        if want == "denied" && !url.starts_with("market") {
            assert!(message.contains("never opened"), "{url}: {message}");
        }
        assert!(sim.commands().is_empty(), "{url} reached the phone");
    }
    let url = "https://example.org/a?q=$HOME&x='1'";
    sim.clear_log();
    let run = dw.call("phone", "intents", "open_url", json!({ "url": url }));
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(
        run.json["activity"],
        "com.android.chrome/com.google.android.apps.chrome.Main"
    );
    let log = sim.commands();
    assert_eq!(log.len(), 1, "{log:?}");
    assert_eq!(log[0].last().unwrap(), url);
    let intent = last_intent(&sim);
    assert_eq!(intent["data"], url);
    assert_eq!(
        intent["categories"],
        json!(["android.intent.category.BROWSABLE"])
    );

    // A configured scheme opens; the defaults then no longer do.
    let (_adb2, sim2, dw2) = one_phone("[phone_services]\nurl_schemes = [\"https\", \"geo\"]\n");
    let run = dw2.call(
        "phone",
        "intents",
        "open_url",
        json!({"url": "http://example.org/"}),
    );
    assert_eq!(run.error_code(), "denied", "{}", run.stdout);
    assert!(sim2.commands().is_empty());
    // A scheme the configuration may not list is a configuration error.
    let (_adb3, _sim3, dw3) =
        one_phone("[phone_services]\nurl_schemes = [\"https\", \"javascript\"]\n");
    let run = dw3.call("phone", "battery", "status", json!({}));
    assert_ne!(run.code, 0);
    assert!(
        run.stderr.contains("phone_services.url_schemes"),
        "{}{}",
        run.stdout,
        run.stderr
    );
}

#[test]
fn shell_is_disabled_by_default_and_runs_argv_literally_when_enabled() {
    let (_adb, sim, dw) = one_phone("");
    let argv = json!(["echo", "a b; id", "$HOME", "`reboot`", "'q'"]);
    let run = dw.call("phone", "shell", "run", json!({ "argv": argv }));
    run.assert_error("disabled", "[phone_services.shell] enabled = true");
    assert_eq!(run.json["error"]["retryable"], false);
    assert!(sim.commands().is_empty());
    // A command string for `sh -c` is not an argv.
    let run = dw.call(
        "phone",
        "shell",
        "run",
        json!({ "argv": "echo hi; reboot" }),
    );
    assert_eq!(run.error_code(), "invalid_params");

    let (_adb, sim, dw) = one_phone(ENABLED);
    let run = dw.call("phone", "shell", "run", json!({ "argv": argv }));
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(run.json["exit"], 0);
    assert_eq!(run.json["stdout"], "a b; id $HOME `reboot` 'q'\n");
    assert_eq!(run.json["truncated"], false);
    let log = sim.commands();
    assert_eq!(log.len(), 1, "{log:?}");
    assert_eq!(
        json!(log[0]),
        argv,
        "every element arrives as one literal argument"
    );
    let run = dw.call("phone", "shell", "run", json!({"argv": ["false"]}));
    assert_eq!(run.json["exit"], 1, "{}", run.stdout);
}

#[test]
fn pull_reads_only_inside_allowed_directories() {
    let (_adb, sim, dw) = one_phone("");
    let run = dw.call(
        "phone",
        "files",
        "pull",
        json!({"path": "/sdcard/Download/shopping.txt"}),
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(run.json["content_base64"], "bWlsawplZ2dzCmJyZWFkCg==");
    assert_eq!(run.json["size_bytes"], 16);
    for (path, want) in [
        ("/sdcard/DCIM/Camera/IMG_0001.jpg", "denied"),
        (
            "/sdcard/Download/../DCIM/Camera/IMG_0001.jpg",
            "invalid_params",
        ),
        ("/sdcard/Download/./shopping.txt", "invalid_params"),
        ("/sdcard/Download", "denied"),
        ("/sdcard/Downloads/x", "denied"),
        ("sdcard/Download/shopping.txt", "invalid_params"),
        ("/data/system/packages.xml", "denied"),
    ] {
        sim.clear_log();
        let run = dw.call("phone", "files", "pull", json!({ "path": path }));
        assert_eq!(run.error_code(), want, "{path}: {}", run.stdout);
        assert!(sim.commands().is_empty(), "{path} reached the phone");
    }
    let run = dw.call(
        "phone",
        "files",
        "pull",
        json!({"path": "/sdcard/Download/none.txt"}),
    );
    assert_eq!(run.error_code(), "not_found", "{}", run.stdout);

    // Over the size bound: refused after `stat`, before the content is read.
    let big = droidwarden_bridge::adb::actions::MAX_PULL_BYTES + 1;
    let answer = sim.control(json!({
        "op": "set",
        "path": "content.sparse_files",
        "value": { "/sdcard/Download/big.bin": big, "/sdcard/Download/limit.bin": big - 1 },
    }));
    assert_eq!(answer["ok"], true, "{answer}");
    let answer = sim.control(json!({
        "op": "set",
        "path": "content.files",
        "value": { "/sdcard/Download/a b.txt": [104, 105] },
    }));
    assert_eq!(answer["ok"], true, "{answer}");
    sim.clear_log();
    let run = dw.call(
        "phone",
        "files",
        "pull",
        json!({"path": "/sdcard/Download/big.bin"}),
    );
    assert_eq!(run.error_code(), "denied", "{}", run.stdout);
    let log = sim.commands();
    assert_eq!(log.len(), 1, "only stat ran: {log:?}");
    assert_eq!(log[0][0], "stat");
    let run = dw.call(
        "phone",
        "files",
        "pull",
        json!({"path": "/sdcard/Download/a b.txt"}),
    );
    assert_eq!(run.json["content_base64"], "aGk=", "{}", run.stdout);
}

#[test]
fn notifications_are_listed_from_the_phone() {
    let (_adb, sim, dw) = one_phone("");
    let run = dw.call("phone", "notifications", "list", json!({}));
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(run.json["count"], 2);
    assert_eq!(run.json["redacted"], false);
    let first = &run.json["notifications"][0];
    assert_eq!(
        first["package"], "com.example.notes",
        "newest first: {}",
        run.json
    );
    assert_eq!(first["title"], "Reminder");
    assert_eq!(first["text"], "Call the plumber");
    assert_eq!(first["key"], "0|com.example.notes|7|null|10203");
    assert_eq!(run.json["notifications"][1]["ongoing"], true);
    assert_eq!(
        sim.commands(),
        vec![vec!["dumpsys", "notification", "--noredact"]]
    );

    // An app's own words, however they look, are its words: line breaks,
    // parentheses, an "Error:" at the start of a line.
    let text = "Payment failed (card)\nError: retry later; $HOME (ok)";
    let answer = sim.control(json!({
        "op": "set",
        "path": "content.notifications",
        "value": [{
            "package": "com.example.bank", "id": 3, "title": "Bank (alert)", "text": text,
            "posted_ms": 1_716_200_000_000u64, "ongoing": false, "uid": 10_400,
        }],
    }));
    assert_eq!(answer["ok"], true, "{answer}");
    let run = dw.call(
        "phone",
        "notifications",
        "list",
        json!({"package": "com.example.bank"}),
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(run.json["count"], 1);
    assert_eq!(run.json["notifications"][0]["title"], "Bank (alert)");
    assert_eq!(run.json["notifications"][0]["text"], text);
    let run = dw.call(
        "phone",
        "notifications",
        "list",
        json!({"package": "com.other.app"}),
    );
    assert_eq!(run.json["count"], 0, "{}", run.stdout);

    // The phone refusing the dump is a permission error, not an empty list.
    sim.control(json!({"op": "fault", "kind": "fail", "exit": 1,
        "stderr": "Permission Denial: can't dump NotificationManager from from pid=4242, uid=2000 due to missing android.permission.DUMP permission"}));
    let run = dw.call("phone", "notifications", "list", json!({}));
    assert_eq!(run.error_code(), "permission_denied", "{}", run.stdout);
}

#[test]
fn apps_install_uninstall_and_clear() {
    let (_adb, sim, dw) = one_phone("");
    let installed = |sim: &Sim, pkg: &str| {
        sim.state()["packages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["package"] == pkg)
    };
    assert!(!installed(&sim, "com.example.game"));
    let run = dw.call(
        "phone",
        "app_manager",
        "install",
        json!({"apk_path": "/data/local/tmp/game.apk"}),
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(installed(&sim, "com.example.game"));
    let run = dw.call(
        "phone",
        "app_manager",
        "uninstall",
        json!({"package": "com.example.game"}),
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(!installed(&sim, "com.example.game"));
    let run = dw.call(
        "phone",
        "app_manager",
        "uninstall",
        json!({"package": "com.example.game"}),
    );
    assert_eq!(run.error_code(), "not_found", "{}", run.stdout);
    let run = dw.call(
        "phone",
        "app_manager",
        "clear_data",
        json!({"package": "com.example.notes"}),
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(
        sim.state()["content"]["cleared"],
        json!(["com.example.notes"])
    );
    for (path, want) in [
        ("/sdcard/Download/game.apk", "denied"),
        ("/data/local/tmp/../../sdcard/x.apk", "invalid_params"),
        ("/data/local/tmp/game.sh", "invalid_params"),
    ] {
        sim.clear_log();
        let run = dw.call(
            "phone",
            "app_manager",
            "install",
            json!({ "apk_path": path }),
        );
        assert_eq!(run.error_code(), want, "{path}: {}", run.stdout);
        assert!(sim.commands().is_empty());
    }
    let run = dw.call(
        "phone",
        "app_manager",
        "install",
        json!({"apk_path": "/data/local/tmp/none.apk"}),
    );
    assert_eq!(run.error_code(), "device_error", "{}", run.stdout);
}

#[test]
fn telephony_is_off_until_enabled_and_reaches_only_allowed_numbers() {
    let (_adb, sim, dw) = one_phone("");
    let run = dw.call(
        "phone",
        "telephony",
        "dial",
        json!({"number": "+4915112345678"}),
    );
    assert_eq!(run.error_code(), "disabled", "{}", run.stdout);
    assert!(sim.commands().is_empty());

    let (_adb, sim, dw) = one_phone(ENABLED);
    let run = dw.call(
        "phone",
        "telephony",
        "dial",
        json!({"number": "+4915100000000"}),
    );
    assert_eq!(run.error_code(), "denied", "{}", run.stdout);
    assert!(sim.commands().is_empty());
    let run = dw.call(
        "phone",
        "telephony",
        "dial",
        json!({"number": "+4915112345678"}),
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let intent = last_intent(&sim);
    assert_eq!(intent["action"], "android.intent.action.CALL");
    assert_eq!(intent["data"], "tel:+4915112345678");
    let text = "Grüße, \"quoted\" 100% $HOME; 你好 👋\nline 2 `id`";
    let run = dw.call(
        "phone",
        "telephony",
        "sms_send",
        json!({"number": "+4915112345678", "text": text}),
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(run.json["status"], "composed");
    let intent = last_intent(&sim);
    assert_eq!(intent["data"], "smsto:+4915112345678");
    assert_eq!(
        intent["component"],
        "com.google.android.apps.messaging/com.google.android.apps.messaging.ui.conversation.LaunchConversationActivity"
    );
    assert_eq!(intent["extras"][0], json!(["--es", "sms_body", text]));
}

#[test]
fn start_activity_passes_typed_extras_and_share_text_its_text() {
    let (_adb, sim, dw) = one_phone("");
    let run = dw.call(
        "phone",
        "intents",
        "start_activity",
        json!({
            "component": "com.example.notes/.MainActivity",
            "action": "android.intent.action.VIEW",
            "extras": [
                {"key": "note_id", "type": "int", "value": "-42"},
                {"key": "big", "type": "long", "value": "9000000000"},
                {"key": "pinned", "type": "bool", "value": "true"},
                {"key": "ratio", "type": "float", "value": "1.5"},
                {"key": "title", "type": "string", "value": "it's $(id) & `x`"},
            ],
        }),
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let intent = last_intent(&sim);
    assert_eq!(
        intent["component"],
        "com.example.notes/com.example.notes.MainActivity"
    );
    assert_eq!(
        intent["extras"],
        json!([
            ["--ei", "note_id", "-42"],
            ["--el", "big", "9000000000"],
            ["--ez", "pinned", "true"],
            ["--ef", "ratio", "1.5"],
            ["--es", "title", "it's $(id) & `x`"],
        ])
    );
    sim.clear_log();
    for bad in [
        json!({"component": "com.example.notes/.MainActivity", "extras": [{"key": "n", "type": "int", "value": "1; reboot"}]}),
        json!({"extras": []}),
        json!({"action": "android.intent.action.VIEW", "data": "javascript:alert(1)"}),
        json!({"component": "com.x/.A;reboot"}),
    ] {
        let run = dw.call("phone", "intents", "start_activity", bad.clone());
        assert_ne!(run.code, 0, "{bad}: {}", run.stdout);
    }
    assert!(sim.commands().is_empty());
    let text = "Meet at 7 — \"usual\" place; 100% sure $HOME";
    let run = dw.call("phone", "intents", "share_text", json!({ "text": text }));
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let intent = last_intent(&sim);
    assert_eq!(intent["action"], "android.intent.action.SEND");
    assert_eq!(intent["mime"], "text/plain");
    assert_eq!(
        intent["extras"][0],
        json!(["--es", "android.intent.extra.TEXT", text])
    );
}

/// Every new string parameter against the hostile corpus: each value is
/// refused before the phone, or reaches it as exactly one literal argument
/// (the sim's command log shows the argv its shell parsed).
#[test]
fn hostile_strings_in_every_new_parameter_are_refused_or_one_literal_argument() {
    let (_adb, sim, dw) = one_phone(ENABLED);
    let corpus: Vec<String> = droidwarden_e2e::HOSTILE
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    // (service, action, the params with the value, a literal argument the
    // phone must see for it)
    type Case = (
        &'static str,
        &'static str,
        fn(&str) -> Value,
        fn(&str) -> String,
    );
    let cases: &[Case] = &[
        (
            "intents",
            "open_url",
            |v| json!({"url": format!("https://example.org/{v}")}),
            |v| format!("https://example.org/{v}"),
        ),
        (
            "intents",
            "share_text",
            |v| json!({"text": v}),
            |v| v.to_owned(),
        ),
        (
            "intents",
            "start_activity",
            |v| json!({"component": format!("com.example.notes/{v}")}),
            |v| format!("com.example.notes/{v}"),
        ),
        (
            "intents",
            "start_activity",
            |v| json!({"action": v}),
            |v| v.to_owned(),
        ),
        (
            "intents",
            "start_activity",
            |v| json!({"action": "a.B", "data": format!("geo:{v}")}),
            |v| format!("geo:{v}"),
        ),
        (
            "intents",
            "start_activity",
            |v| json!({"component": "com.example.notes/.MainActivity", "extras": [{"key": v, "type": "string", "value": "x"}]}),
            |v| v.to_owned(),
        ),
        (
            "intents",
            "start_activity",
            |v| json!({"component": "com.example.notes/.MainActivity", "extras": [{"key": "k", "type": "string", "value": v}]}),
            |v| v.to_owned(),
        ),
        (
            "files",
            "pull",
            |v| json!({"path": format!("/sdcard/Download/{v}")}),
            |v| format!("/sdcard/Download/{v}"),
        ),
        (
            "files",
            "push",
            |v| json!({"path": format!("/sdcard/Download/{v}"), "text": v}),
            |v| format!("/sdcard/Download/{v}"),
        ),
        (
            "app_manager",
            "install",
            |v| json!({"apk_path": format!("/data/local/tmp/{v}.apk")}),
            |v| format!("/data/local/tmp/{v}.apk"),
        ),
        (
            "app_manager",
            "uninstall",
            |v| json!({"package": v}),
            |v| v.to_owned(),
        ),
        (
            "app_manager",
            "clear_data",
            |v| json!({"package": v}),
            |v| v.to_owned(),
        ),
        (
            "notifications",
            "list",
            |v| json!({"package": v}),
            |v| v.to_owned(),
        ),
        (
            "telephony",
            "sms_send",
            |v| json!({"number": "+4915112345678", "text": v}),
            |v| v.to_owned(),
        ),
        (
            "telephony",
            "sms_send",
            |v| json!({"number": v, "text": "x"}),
            |v| format!("smsto:{v}"),
        ),
        (
            "telephony",
            "dial",
            |v| json!({"number": v}),
            |v| format!("tel:{v}"),
        ),
        (
            "shell",
            "run",
            |v| json!({"argv": ["echo", v]}),
            |v| v.to_owned(),
        ),
    ];
    let mut reached = 0;
    for (service, action, params, literal) in cases {
        for value in &corpus {
            sim.clear_log();
            let run = dw.call("phone", service, action, params(value));
            let log = sim.commands();
            let label = format!("{service}.{action} {value:?}");
            if log.is_empty() {
                // Refused at the edge: a structured error, nothing sent.
                assert!(
                    ["invalid_params", "denied"].contains(&run.error_code()),
                    "{label}: {}",
                    run.stdout
                );
                continue;
            }
            reached += 1;
            let want = literal(value);
            assert!(
                log.iter().any(|argv| argv.contains(&want)),
                "{label} did not arrive as one literal argument: {log:?}"
            );
            // Nothing the value holds ever ran as a command of its own.
            for argv in &log {
                assert!(
                    !["reboot", "id"].contains(&argv[0].as_str()),
                    "{label} ran {argv:?}"
                );
            }
        }
    }
    assert!(
        reached >= 60,
        "the quoting path must be exercised: {reached}"
    );
}

/// Through the daemon and its agent: a scripted model asks for `shell.run`
/// and `app_manager.install`. The shell is critical: even on the allow
/// list (`shell.*`), a person must approve it (the threshold case is the
/// agent's unit test `critical_always_asks_unless_denied`); install is high
/// risk and waits above `auto_approve_up_to = "medium"`; a denied install
/// never runs. Nothing reaches the phone before the answer.
#[test]
fn the_agent_needs_approval_for_the_shell_and_for_installs() {
    use droidwarden_agent::testing::ScriptStep;
    use droidwarden_agent::{ModelReply, ProviderKind};
    use droidwarden_e2e::phone_rig::{P, PhoneRig, PhoneRigOptions};

    let options = PhoneRigOptions {
        llm: Some(ProviderKind::Openai),
        ..PhoneRigOptions::default()
    };
    let r = PhoneRig::start_with(
        options,
        "[agent.approval]\nauto_approve_up_to = \"medium\"\nallow = [\"shell.*\"]\ndeny = [\"app_manager.uninstall\"]\n[phone_services.shell]\nenabled = true\n",
    );
    let (probe, sim, llm) = (&r.probe, &r.sim, r.llm());
    let tool = |service: &str, action: &str, parameters: Value| {
        ScriptStep::Reply(ModelReply::tool_calls(vec![(
            "android_device".to_owned(),
            json!({"device": "phone", "service_id": service, "action": action, "parameters": parameters})
                .to_string(),
        )]))
    };
    let done = || ScriptStep::Reply(ModelReply::text("done"));
    let approval_for = |action: &str| {
        probe.wait_approval(P, &format!("an approval request for {action}"), |a| {
            a["action"] == action
        })
    };
    let answer = |id: &str, decision: &str| probe.answer_approval(P, id, decision);
    let reply = |id: &str| probe.wait_reply(P, id);

    // The shell: asked about although allowed and under the threshold.
    sim.clear_log();
    llm.push(tool(
        "shell",
        "run",
        json!({"argv": ["echo", "hi; reboot"]}),
    ));
    llm.push(done());
    r.ask("sh", "say hi");
    let approval = approval_for("run");
    assert_eq!(approval["risk"], "critical", "{approval}");
    assert!(
        sim.commands().iter().all(|argv| argv[0] != "echo"),
        "nothing runs before the answer"
    );
    answer(approval["approval_id"].as_str().unwrap(), "approve");
    assert_eq!(reply("sh")["ok"], true);
    let ran: Vec<Vec<String>> = sim
        .commands()
        .into_iter()
        .filter(|a| a[0] == "echo")
        .collect();
    assert_eq!(ran, vec![vec!["echo".to_owned(), "hi; reboot".to_owned()]]);

    // Install: high risk, above the threshold: it waits, and a denial
    // leaves the phone as it was. Uninstall is on the deny list: refused
    // at once, without asking.
    let installed = |sim: &Sim| {
        sim.state()["packages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["package"] == "com.example.game")
    };
    llm.push(tool(
        "app_manager",
        "install",
        json!({"apk_path": "/data/local/tmp/game.apk"}),
    ));
    llm.push(tool(
        "app_manager",
        "uninstall",
        json!({"package": "com.example.notes"}),
    ));
    llm.push(done());
    r.ask("apps", "install the game, remove notes");
    let approval = approval_for("install");
    assert_eq!(approval["risk"], "high", "{approval}");
    assert!(!installed(sim), "nothing installed before the answer");
    answer(approval["approval_id"].as_str().unwrap(), "deny");
    assert_eq!(reply("apps")["ok"], true);
    assert!(!installed(sim), "a denied install never ran");
    assert!(
        !sim.commands()
            .iter()
            .any(|a| a.first().is_some_and(|w| w == "pm")
                && a.get(1).is_some_and(|w| w == "install" || w == "uninstall"))
    );

    // Approved, it installs.
    llm.push(tool(
        "app_manager",
        "install",
        json!({"apk_path": "/data/local/tmp/game.apk"}),
    ));
    llm.push(done());
    r.ask("apps2", "install the game");
    let approval = probe.wait_approval(P, "a second install approval", |a| {
        a["action"] == "install" && a["session"] != approval["session"]
    });
    answer(approval["approval_id"].as_str().unwrap(), "approve");
    assert_eq!(reply("apps2")["ok"], true);
    assert!(installed(sim));
    assert!(
        sim.state()["packages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["package"] == "com.example.notes")
    );

    // Telephony is off here: the model learns `disabled` at once, and
    // nobody is asked to approve a call that could not run.
    llm.push(tool(
        "telephony",
        "dial",
        json!({"number": "+4915112345678"}),
    ));
    llm.push(ScriptStep::Compute(
        droidwarden_agent::testing::Responder::new(|request| {
            let body = request.body.to_string();
            ModelReply::text(if body.contains("disabled") {
                "telephony is off"
            } else {
                "?"
            })
        }),
    ));
    let r = probe.request(P, "ask", json!({"id": "tel", "prompt": "call mum"}));
    assert_eq!(r["result"]["text"], "telephony is off", "{r}");
    assert!(
        !probe.saw_approval(P, |a| a["action"] == "dial"),
        "an approval was asked for a disabled service"
    );
}

/// The companion transport: the same actions through the protocol, the same
/// policy at the daemon's hub, and notification events pushed by the app
/// (`notification_posted`, `notification_removed`) on the daemon's MQTT.
#[test]
fn companion_phones_list_notifications_and_push_their_changes() {
    use droidwarden_e2e::phone_rig::{P, PhoneRig, WAIT};

    let r = PhoneRig::start_companion("");
    let (probe, alice) = (&r.probe, &r.sim);
    let listed = r.call("notifications", "list", json!({}));
    assert_eq!(listed["ok"], true, "{listed}");
    assert_eq!(listed["result"]["count"], 2, "{listed}");
    // The policy holds for companion phones too: nothing is sent.
    let refused = r.call("intents", "open_url", json!({"url": "javascript:alert(1)"}));
    assert_eq!(refused["error"]["code"], "denied", "{refused}");
    let refused = r.call("shell", "run", json!({"argv": ["id"]}));
    assert_eq!(refused["error"]["code"], "disabled", "{refused}");
    assert!(
        alice.state()["content"]["intents"]
            .as_array()
            .unwrap()
            .is_empty(),
        "a refused call reached the phone"
    );

    // A new notification, and the reminder dismissed.
    let mut notes = alice.state()["content"]["notifications"].clone();
    let list = notes.as_array_mut().unwrap();
    list.retain(|n| n["package"] != "com.example.notes");
    list.push(json!({
        "package": "com.example.bank", "id": 9, "title": "Payment", "text": "€5 (coffee)",
        "posted_ms": 1_716_200_000_000u64, "ongoing": false, "uid": 10_400,
    }));
    let answer =
        alice.control(json!({"op": "set", "path": "content.notifications", "value": notes}));
    assert_eq!(answer["ok"], true, "{answer}");
    let posted = probe
        .wait("a posted notification", WAIT, |m| {
            m.topic == format!("{P}/devices/alice/events/notification_posted")
        })
        .json();
    assert_eq!(posted["key"], "0|com.example.bank|9|null|10400", "{posted}");
    assert_eq!(posted["text"], "€5 (coffee)");
    let removed = probe
        .wait("a removed notification", WAIT, |m| {
            m.topic == format!("{P}/devices/alice/events/notification_removed")
        })
        .json();
    assert_eq!(
        removed["key"], "0|com.example.notes|7|null|10203",
        "{removed}"
    );
    assert_eq!(removed["package"], "com.example.notes");
}

/// A phone before Android 7 (no shell protocol v2): `shell.run` still
/// reports the program's exit status (from the trailer) and its own output
/// only, and a hostile argument is still one literal argument.
#[test]
fn shell_run_on_android_6_reports_the_exit_status_through_the_trailer() {
    let (_adb, _sim, dw) = droidwarden_e2e::local_phone_with(
        SimOptions {
            android: Some("6".into()),
            ..SimOptions::default()
        },
        ENABLED,
    );
    let run = dw.call(
        "phone",
        "shell",
        "run",
        json!({"argv": ["echo", "x; echo __dw_rc=0"]}),
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(run.json["exit"], 0);
    assert_eq!(run.json["stdout"], "x; echo __dw_rc=0\n");
    let run = dw.call("phone", "shell", "run", json!({"argv": ["false"]}));
    assert_eq!(run.json["exit"], 1, "{}", run.stdout);
    let run = dw.call("phone", "notifications", "list", json!({}));
    assert_eq!(run.json["count"], 2, "{}{}", run.stdout, run.stderr);
}
