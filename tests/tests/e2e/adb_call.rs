//! `droidwarden call` end to end: the real adb server, emulated phones, the
//! real binary. Every action the ADB transport supports, device selection,
//! hostile input, and faults.

use droidwarden_bridge::TransportKind;
use droidwarden_e2e::{AdbServer, Droidwarden, Sim, SimOptions, wait_for};
use droidwarden_services::Catalogue;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// One adb server with one connected sim, and a runner configured for it.
fn one_phone(extra_config: &str) -> (AdbServer, Sim, Droidwarden) {
    one_phone_with(
        SimOptions {
            serial: Some("SIM0001".into()),
            model: Some("Pixel 8".into()),
            ..SimOptions::default()
        },
        extra_config,
    )
}

/// [`one_phone`] with a sim of these options, named `phone` in the config.
fn one_phone_with(options: SimOptions, extra_config: &str) -> (AdbServer, Sim, Droidwarden) {
    droidwarden_e2e::local_phone_with(options, extra_config)
}

fn pointer<'a>(value: &'a Value, path: &str) -> &'a Value {
    value
        .pointer(path)
        .unwrap_or_else(|| panic!("no {path} in {value}"))
}

fn lower(value: &Value) -> Value {
    match value {
        Value::String(s) => Value::String(s.to_lowercase()),
        other => other.clone(),
    }
}

/// What each state-changing call must leave in the phone's state.
const STATE_CHECKS: &[(&str, &str, &str, &str, &str)] = &[
    ("wifi_automation", "disable", "{}", "/wifi/enabled", "false"),
    ("wifi_automation", "enable", "{}", "/wifi/enabled", "true"),
    (
        "bluetooth_automation",
        "disable",
        "{}",
        "/bluetooth/enabled",
        "false",
    ),
    (
        "bluetooth_automation",
        "enable",
        "{}",
        "/bluetooth/enabled",
        "true",
    ),
    ("airplane_mode", "enable", "{}", "/airplane_mode", "true"),
    ("airplane_mode", "disable", "{}", "/airplane_mode", "false"),
    (
        "audio_automation",
        "set_volume",
        r#"{"stream":"music","level":100}"#,
        "/audio/volumes/music/index",
        "MAX:/audio/volumes/music/max",
    ),
    (
        "audio_automation",
        "set_volume",
        r#"{"stream":"alarm","level":0}"#,
        "/audio/volumes/alarm/index",
        "MAX:/audio/volumes/alarm/min",
    ),
    (
        "audio_automation",
        "mute",
        r#"{"stream":"ring"}"#,
        "/audio/volumes/ring/index",
        "MAX:/audio/volumes/ring/min",
    ),
    (
        "audio_automation",
        "ringer_mode",
        r#"{"mode":"silent"}"#,
        "/audio/ringer_mode",
        "\"silent\"",
    ),
    (
        "audio_automation",
        "ringer_mode",
        r#"{"mode":"normal"}"#,
        "/audio/ringer_mode",
        "\"normal\"",
    ),
    (
        "screen_control",
        "set_brightness",
        r#"{"level":37}"#,
        "/display/brightness",
        "37",
    ),
    (
        "screen_control",
        "auto_brightness",
        r#"{"enabled":true}"#,
        "/display/brightness_mode",
        "1",
    ),
    (
        "screen_control",
        "auto_brightness",
        r#"{"enabled":false}"#,
        "/display/brightness_mode",
        "0",
    ),
    (
        "screen_control",
        "set_timeout",
        r#"{"ms":120000}"#,
        "/display/screen_off_timeout_ms",
        "120000",
    ),
    (
        "device_state",
        "screen_off",
        "{}",
        "/display/screen_on",
        "false",
    ),
    (
        "device_state",
        "screen_on",
        "{}",
        "/display/screen_on",
        "true",
    ),
    (
        "device_state",
        "screen_off",
        "{}",
        "/display/screen_on",
        "false",
    ),
    ("screen_control", "wake", "{}", "/display/screen_on", "true"),
    (
        "device_state",
        "power_save",
        r#"{"enabled":true}"#,
        "/power_save",
        "true",
    ),
    (
        "device_state",
        "power_save",
        r#"{"enabled":false}"#,
        "/power_save",
        "false",
    ),
    (
        "app_launcher",
        "launch",
        r#"{"package":"org.videolan.vlc"}"#,
        "/foreground",
        "\"org.videolan.vlc/.StartActivity\"",
    ),
    // After the catalogue example's 500 ms: `cmd vibrator_manager synced`.
    (
        "alerts",
        "vibrate",
        r#"{"ms":700}"#,
        "/alerts/vibrations/1",
        "700",
    ),
];

#[test]
fn every_action_the_adb_transport_supports_works_on_an_emulated_phone() {
    // Telephony and the shell are off unless enabled (tests/tests/e2e/phone_services.rs);
    // the clipboard needs the on-device UI server, allowed by naming its
    // jar (the emulated phone only checks that one was sent: a stand-in
    // will do, as in ui_server.rs).
    let dir = tempfile::tempdir().expect("a temporary directory");
    let jar = dir.path().join("u2.jar");
    std::fs::write(&jar, b"PK stand-in for uiautomator2's u2.jar").expect("write the jar");
    let (_adb, sim, dw) = one_phone(&format!(
        "ui_server_jar = {:?}\n[phone_services.telephony]\nenabled = true\nallowed_numbers = [\"+4915112345678\"]\n[phone_services.shell]\nenabled = true\n",
        jar.display().to_string()
    ));
    let catalogue = Catalogue::get();
    let mut covered = 0;
    for cap in TransportKind::Adb.capabilities() {
        let (_, spec) = catalogue.action(cap.service, cap.action).unwrap();
        if cap.service == "ui_control" {
            // `ui_control.power`'s example puts the screen to sleep, and a
            // UI action on a sleeping screen answers `screen_off`.
            let woken = dw.call("phone", "screen_control", "wake", serde_json::json!({}));
            assert_eq!(woken.code, 0, "{}{}", woken.stdout, woken.stderr);
        }
        let run = dw.call("phone", cap.service, cap.action, spec.example.clone());
        if !cap.supported {
            assert_eq!(
                run.code, 1,
                "{}.{} should be refused",
                cap.service, cap.action
            );
            assert_eq!(run.error_code(), "unsupported_action", "{}", run.stdout);
            continue;
        }
        assert_eq!(
            run.code, 0,
            "{}.{}: {}{}",
            cap.service, cap.action, run.stdout, run.stderr
        );
        if let Err(v) = spec.result.validate(&run.json) {
            panic!(
                "{}.{} returned {} which breaks its schema at {}: {}",
                cap.service, cap.action, run.json, v.path, v.reason
            );
        }
        covered += 1;
    }
    assert!(covered >= 40, "only {covered} actions covered");

    for (service, action, params, path, expected) in STATE_CHECKS {
        let run = dw.call(
            "phone",
            service,
            action,
            serde_json::from_str(params).unwrap(),
        );
        assert_eq!(
            run.code, 0,
            "{service}.{action}: {}{}",
            run.stdout, run.stderr
        );
        let state = sim.state();
        let expected: Value = match expected.strip_prefix("MAX:") {
            Some(other) => pointer(&state, other).clone(),
            None => serde_json::from_str(expected).unwrap(),
        };
        assert_eq!(
            lower(pointer(&state, path)),
            lower(&expected),
            "{service}.{action} {params}: state at {path}"
        );
    }
}

#[test]
fn results_reflect_the_phones_state() {
    let (_adb, sim, dw) = one_phone("");
    sim.control(json!({"op": "set", "path": "battery.level", "value": 42}));
    let run = dw.call("phone", "batteryMonitor", "status", json!({}));
    assert_eq!(run.json["level_percent"], 42, "{}", run.stdout);

    let run = dw.call(
        "phone",
        "audio_automation",
        "set_volume",
        json!({"stream": "music", "level": 40}),
    );
    let state = sim.state();
    assert_eq!(
        run.json["index"],
        state["audio"]["volumes"]["music"]["index"]
    );
    assert_eq!(run.json["level"], 40, "{}", run.stdout);

    let run = dw.call("phone", "system_info", "info", json!({}));
    assert_eq!(run.json["model"], "Pixel 8");
    assert_eq!(run.json["serial"], "SIM0001");

    // KEY=VALUE words are typed by the schema.
    let run = dw.run(&[
        "call",
        "--device",
        "phone",
        "screenControlAutomation",
        "set_brightness",
        "level=200",
    ]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert_eq!(sim.state()["display"]["brightness"], 200);
}

#[test]
fn two_phones_at_once_and_device_selection() {
    // Its phones are not named: an adb server of its own.
    let adb = AdbServer::start();
    let a = adb.phone(SimOptions {
        serial: Some("AAA".into()),
        model: Some("Tab A".into()),
        ..Default::default()
    });
    let b = adb.phone(SimOptions {
        serial: Some("BBB".into()),
        model: Some("Pixel 9".into()),
        android: Some("15".into()),
        ..Default::default()
    });
    let config = format!(
        "[[devices]]\nname = \"kitchen-tablet\"\ntransport = \"adb\"\nserial = \"{}\"\n",
        a.serial()
    );
    let dw = Droidwarden::new(&adb, &config);

    let run = dw.run(&["devices", "--json"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let devices = run.json["devices"].as_array().unwrap();
    let names: Vec<&str> = devices
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"kitchen-tablet"), "{names:?}");
    let b_serial = b.serial();
    assert!(
        names.contains(&b_serial.as_str()),
        "unnamed devices appear under their serial: {names:?}"
    );
    assert!(
        devices
            .iter()
            .all(|d| d["online"] == true && d["transport"] == "adb")
    );

    let run = dw.run(&["call", "battery", "status"]);
    assert_eq!(run.code, 1);
    assert_eq!(run.error_code(), "device_ambiguous", "{}", run.stdout);

    let info = |device: &str| dw.call(device, "system_info", "info", json!({})).json;
    assert_eq!(info("kitchen-tablet")["model"], "Tab A");
    assert_eq!(info(&b_serial)["model"], "Pixel 9");
    assert_eq!(info(&b_serial)["android_version"], "15");

    dw.call("kitchen-tablet", "wifi_automation", "disable", json!({}));
    assert_eq!(a.state()["wifi"]["enabled"], false);
    assert_eq!(
        b.state()["wifi"]["enabled"],
        true,
        "only the named phone changed"
    );

    let run = dw.call("garage", "battery", "status", json!({}));
    run.assert_error("device_not_found", "kitchen-tablet");

    // `[adb] only_named`: the unnamed phone is not served at all, so the
    // named one is chosen without --device.
    let only_named = Droidwarden::new(&adb, &format!("[adb]\nonly_named = true\n{config}"));
    let run = only_named.run(&["devices", "--json"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(
        run.json["devices"].as_array().map(Vec::len),
        Some(1),
        "{}",
        run.stdout
    );
    assert_eq!(run.json["devices"][0]["name"], "kitchen-tablet");
    only_named
        .call(&b_serial, "battery", "status", json!({}))
        .assert_error("device_not_found", "kitchen-tablet");
    let run = only_named.run(&["call", "system_info", "info"]);
    assert_eq!(run.json["model"], "Tab A", "{}{}", run.stdout, run.stderr);

    // One phone gone: the other is chosen without --device.
    let a_serial = a.serial();
    drop(a);
    adb.wait_gone(&a_serial);
    let run = wait_for(
        "the remaining phone to be selected",
        Duration::from_secs(30),
        || {
            let run = dw.run(&["call", "system_info", "info"]);
            (run.code == 0).then_some(run)
        },
    );
    assert_eq!(run.json["model"], "Pixel 9");
}

/// Hostile strings: each is either rejected before anything reaches the
/// phone, or reaches it as exactly one literal argument.
#[test]
fn hostile_parameters_are_rejected_or_arrive_as_one_literal_argument() {
    let (_adb, sim, dw) = one_phone("");
    let long = format!("https://example.org/{}", "a".repeat(5000));
    let urls: Vec<String> = vec![
        "https://example.org/a;reboot".into(),
        "https://example.org/a&&reboot".into(),
        "https://example.org/a||reboot".into(),
        "https://example.org/a|reboot".into(),
        "https://example.org/$(reboot)".into(),
        "https://example.org/${IFS}reboot".into(),
        "https://example.org/a>%2Fsdcard%2Fx".into(),
        "https://example.org/a`reboot`".into(),
        "https://example.org/a'b".into(),
        "https://example.org/a\"b".into(),
        "https://example.org/a\nreboot".into(),
        "https://example.org/a\u{0}b".into(),
        "https://example.org/a b".into(),
        "https://example.org/ünïcødé/日本".into(),
        // Legal in a URL and special to a shell: accepted, and quoted.
        "https://example.org/*".into(),
        "https://example.org/a?x=$HOME&y=!1".into(),
        "https://example.org/a#$(id)".into(),
        "https://example.org/~user/(x);y".into(),
        "https://example.org/a%0Areboot".into(),
        "javascript:alert(1)".into(),
        "file:///data/local/tmp/x".into(),
        long,
    ];
    let mut accepted = 0;
    for url in &urls {
        sim.clear_log();
        let run = dw.call("phone", "media_control", "play_url", json!({ "url": url }));
        let log = sim.commands();
        if run.code == 0 {
            accepted += 1;
            assert_eq!(log.len(), 1, "{url:?} → {log:?}");
            assert_eq!(
                log[0].last().unwrap(),
                url,
                "{url:?} must arrive as one literal argument: {log:?}"
            );
        } else {
            assert_eq!(
                run.error_code(),
                "invalid_params",
                "{url:?}: {}",
                run.stdout
            );
            assert!(
                log.is_empty(),
                "a rejected {url:?} reached the phone: {log:?}"
            );
        }
    }
    assert!(
        accepted >= 7,
        "the quoting path must be exercised, not only rejection"
    );

    let packages = [
        "com.x;reboot",
        "com.x && reboot",
        "$(reboot)",
        "com.x`id`",
        "com.x\nreboot",
        "com.x'",
        "ком.пример",
        "",
    ];
    for package in packages {
        sim.clear_log();
        for (action, params) in [
            ("launch", json!({ "package": package })),
            ("stop", json!({ "package": package })),
        ] {
            let run = dw.call("phone", "app_launcher", action, params);
            assert_eq!(
                run.error_code(),
                "invalid_params",
                "{package:?}: {}",
                run.stdout
            );
        }
        let run = dw.call(
            "phone",
            "app_launcher",
            "launch",
            json!({ "package": "org.videolan.vlc", "activity": package }),
        );
        assert_eq!(
            run.error_code(),
            "invalid_params",
            "{package:?}: {}",
            run.stdout
        );
        assert!(sim.commands().is_empty(), "{package:?} reached the phone");
    }
    // Hostile KEY=VALUE words and non-object params are refused too.
    for words in [
        &[
            "call",
            "--device",
            "phone",
            "audio_automation",
            "set_volume",
            "stream=music;reboot",
            "level=5",
        ][..],
        &[
            "call",
            "--device",
            "phone",
            "audio_automation",
            "set_volume",
            "stream=music",
            "level=5;reboot",
        ][..],
        &[
            "call", "--device", "phone", "battery", "status", "--params", "[\"x\"]",
        ][..],
        &[
            "call", "--device", "phone", "battery", "status", "--params", "{\"a\":",
        ][..],
    ] {
        let run = dw.run(words);
        assert_eq!(
            run.error_code(),
            "invalid_params",
            "{words:?}: {}",
            run.stdout
        );
    }
}

#[test]
fn android_errors_become_structured_errors() {
    let (_adb, sim, dw) = one_phone("");
    for action in ["launch", "stop"] {
        let run = dw.call(
            "phone",
            "app_launcher",
            action,
            json!({"package": "com.not.installed"}),
        );
        assert_eq!(run.error_code(), "not_found", "{action}: {}", run.stdout);
    }

    // The exit status comes from the shell v2 exit packet (adb_client's
    // shell_command drops it; see android-bridge's `adb::exchange`).
    sim.control(json!({"op": "fault", "kind": "fail", "exit": 1, "stderr": "java.lang.SecurityException: Permission Denial: nope"}));
    let run = dw.call("phone", "wifi_automation", "disable", json!({}));
    assert_eq!(run.error_code(), "permission_denied", "{}", run.stdout);
    sim.control(
        json!({"op": "fault", "kind": "fail", "exit": 3, "stderr": "Error: the radio is on fire"}),
    );
    let run = dw.call("phone", "wifi_automation", "disable", json!({}));
    run.assert_error("device_error", "radio is on fire");
    assert_eq!(sim.state()["wifi"]["enabled"], true);
}

/// A phone before Android 7 has no shell protocol v2: commands go over
/// plain `shell:` with a trailer that carries the exit status.
#[test]
fn a_phone_before_android_7_is_served_over_plain_shell() {
    let (_adb, sim, dw) = one_phone_with(
        SimOptions {
            serial: Some("OLD0006".into()),
            android: Some("6.0.1".into()),
            ..SimOptions::default()
        },
        "",
    );
    let serial = "phone";

    let run = dw.call(serial, "battery", "status", json!({}));
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(run.json["level"].is_number(), "{}", run.stdout);
    let run = dw.call(serial, "wifi_automation", "disable", json!({}));
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(sim.state()["wifi"]["enabled"], false);

    // The trailer went to the phone with the command, and the status it
    // printed reached the error mapping.
    let raw = sim.control(json!({"op": "log"}));
    assert!(
        raw.to_string().contains("__dw_rc="),
        "no trailer in the log: {raw}"
    );
    sim.control(
        json!({"op": "fault", "kind": "fail", "exit": 3, "stderr": "Error: the radio is on fire"}),
    );
    let run = dw.call(serial, "wifi_automation", "enable", json!({}));
    run.assert_error("device_error", "radio is on fire");
    assert_eq!(sim.state()["wifi"]["enabled"], false);
}

#[test]
fn a_slow_phone_times_out_within_the_configured_timeout() {
    let (_adb, sim, dw) = one_phone("[calls]\ntimeout_ms = 1000");
    sim.control(json!({"op": "fault", "kind": "delay", "ms": 4000}));
    let start = Instant::now();
    let run = dw.call("phone", "battery", "status", json!({}));
    let took = start.elapsed();
    assert_eq!(run.error_code(), "timeout", "{}", run.stdout);
    assert_eq!(run.json["error"]["retryable"], true);
    assert!(
        took < Duration::from_millis(3500),
        "timed out only after {took:?}"
    );
    sim.control(json!({"op": "fault", "kind": "clear"}));
    let run = dw.call("phone", "battery", "status", json!({}));
    assert_eq!(run.code, 0, "{}", run.stdout);
}

#[test]
fn a_dropped_connection_is_offline_and_the_phone_comes_back() {
    let (adb, sim, dw) = one_phone("[calls]\ntimeout_ms = 5000");
    sim.control(json!({"op": "fault", "kind": "drop"}));
    let start = Instant::now();
    let run = dw.call("phone", "battery", "status", json!({}));
    let code = run.json["error"]["code"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        code == "device_offline" || code == "timeout",
        "{}",
        run.stdout
    );
    assert!(start.elapsed() < Duration::from_secs(6));

    // The phone disappears entirely, then comes back on the same port.
    sim.control(json!({"op": "listen", "enabled": false}));
    adb.wait_gone(&sim.serial());
    let run = dw.run(&["devices", "--json"]);
    let phone = run.json["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == "phone")
        .cloned()
        .unwrap();
    assert_eq!(phone["online"], false, "{phone}");
    let run = dw.call("phone", "battery", "status", json!({}));
    assert_eq!(run.error_code(), "device_offline", "{}", run.stdout);

    sim.control(json!({"op": "listen", "enabled": true}));
    wait_for("the phone to answer again", Duration::from_secs(30), || {
        let run = dw.call("phone", "battery", "status", json!({}));
        (run.code == 0).then_some(())
    });
}

#[test]
fn a_replayed_bug_report_is_reproduced() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../android-bridge/fixtures/android/dumpsys-battery/appium-adb-issue133-unknown.txt"
    );
    std::fs::copy(fixture, dir.path().join("battery.txt")).unwrap();
    std::fs::write(
        dir.path().join("index.json"),
        r#"[{"command": "dumpsys battery", "stdout": "battery.txt", "stderr": null, "exit": 0}]"#,
    )
    .unwrap();
    // Its phone is not named: an adb server of its own.
    let adb = AdbServer::start();
    let sim = adb.phone(SimOptions {
        replay: Some(dir.path().to_path_buf()),
        ..Default::default()
    });
    let dw = Droidwarden::new(&adb, "");
    let run = dw.call(&sim.serial(), "battery", "status", json!({}));
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let expected = droidwarden_bridge::adb::actions::battery::battery(
        &std::fs::read_to_string(fixture).unwrap(),
    )
    .unwrap();
    assert_eq!(run.json["level_percent"], expected.level_percent);
    assert_eq!(run.json["status"], expected.status);
}

#[test]
fn the_adb_server_is_never_started_on_the_default_port_behind_our_back() {
    // adb_client runs `adb start-server` (port 5037) before every server
    // request on loopback; the bridge hands it a no-op program instead.
    // Its phone is not named: an adb server of its own.
    let adb = AdbServer::start();
    let _sim = adb.phone(SimOptions::default());
    let default_port_was_free = std::net::TcpStream::connect("127.0.0.1:5037").is_err();
    let dw = Droidwarden::new(&adb, "");
    for _ in 0..3 {
        assert_eq!(dw.run(&["devices", "--json"]).code, 0);
    }
    if default_port_was_free {
        assert!(
            std::net::TcpStream::connect("127.0.0.1:5037").is_err(),
            "an adb server appeared on 5037"
        );
    }
}

#[test]
fn an_unreachable_adb_server_is_a_clear_error() {
    // Stopped by the test: its own.
    let adb = AdbServer::start();
    let dw = Droidwarden::new(&adb, "");
    drop(adb);
    let run = dw.run(&["call", "battery", "status"]);
    assert_eq!(run.code, 1);
    run.assert_error("device_offline", "adb server");
    assert_eq!(run.json["error"]["retryable"], true);
}

#[test]
fn a_bad_configuration_exits_78_naming_the_key() {
    let adb = AdbServer::shared();
    for (config, key) in [
        ("[adb]\nserverr = \"127.0.0.1:5037\"\n", "serverr"),
        ("[calls]\ntimeout_ms = -5\n", "timeout_ms"),
        (
            "[[devices]]\nname = \"a b\"\ntransport = \"adb\"\nserial = \"x\"\n",
            "devices[0].name",
        ),
    ] {
        let dw = Droidwarden::new(&adb, config);
        let run = dw.run(&["devices"]);
        assert_eq!(run.code, 78, "{config:?}: {}{}", run.stdout, run.stderr);
        assert!(run.stderr.contains(key), "{config:?}: {}", run.stderr);
    }
    let dw = Droidwarden::new(&adb, "");
    let run = dw.run(&["config", "print-default"]);
    assert_eq!(run.code, 0);
    assert!(run.stdout.contains("[adb]") && run.stdout.contains("[mqtt]"));
}
