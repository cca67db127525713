//! droidwarden-companion for Termux, end to end: a real mosquitto, the real
//! daemon with a `transport = "companion"` device, and the real
//! `droidwarden-companion` binary with stand-in `termux-*` programs on
//! `PATH`. Each stand-in prints a real recorded output
//! (`companion/fixtures/termux/`, see `SOURCES.md` there) and appends its
//! argv, one JSON array per line, to a log.

use droidwarden_e2e::mqtt::{Daemon, Mosquitto, NO_POLLS, Probe, ok_result};
use droidwarden_e2e::{AdbServer, P, WAIT, binary, wait_for};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

const ID: &str = "termux-phone";

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../companion/fixtures/termux")
        .join(name)
}

/// A stand-in `name` that logs its argv to `log` and runs `output` (shell).
fn stand_in(dir: &Path, log: &Path, name: &str, output: &str) {
    let script = format!(
        "#!/bin/sh\n{{ printf '['; sep=''; for a in \"$(basename \"$0\")\" \"$@\"; do printf '%s\"%s\"' \"$sep\" \"$(printf '%s' \"$a\" | sed 's/\\\\/\\\\\\\\/g; s/\"/\\\\\"/g')\"; sep=','; done; printf ']\\n'; }} >> '{}'\n{output}\n",
        log.display()
    );
    let path = dir.join(name);
    std::fs::write(&path, script).unwrap();
    let mut perms = std::fs::metadata(&path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&path, perms).unwrap();
}

struct Companion(Child);

impl Drop for Companion {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn argv_log(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

#[test]
fn termux_companion_answers_through_the_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let log = dir.path().join("argv.log");
    let cat = |name: &str| format!("cat '{}'", fixture(name).display());
    stand_in(
        &bin,
        &log,
        "termux-battery-status",
        &cat("battery-status.json"),
    );
    stand_in(
        &bin,
        &log,
        "termux-volume",
        &format!("if [ $# -eq 0 ]; then {}; fi", cat("volume.json")),
    );
    stand_in(
        &bin,
        &log,
        "termux-notification-list",
        &cat("notification-list.json"),
    );
    stand_in(&bin, &log, "termux-brightness", "true");
    stand_in(&bin, &log, "termux-open-url", "true");

    let broker = Mosquitto::start();
    let probe = Probe::connect(broker.port);
    let adb = AdbServer::start();
    let config = format!(
        "[mqtt]\nurl = \"mqtt://127.0.0.1:{}\"\n{NO_POLLS}\n[[devices]]\nname = \"phone\"\ntransport = \"companion\"\ncompanion_id = \"{ID}\"\n",
        broker.port
    );
    let _daemon = Daemon::start(&adb, &config);

    let companion_config = dir.path().join("config.toml");
    std::fs::write(
        &companion_config,
        format!(
            "broker = \"mqtt://127.0.0.1:{}\"\ncompanion_id = \"{ID}\"\ncommand_timeout_s = 5\n",
            broker.port
        ),
    )
    .unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut companion = Companion(
        Command::new(binary("droidwarden-companion"))
            .args(["--config", companion_config.to_str().unwrap()])
            .env("PATH", path)
            .env("DROIDWARDEN_COMPANION_LOG", "debug")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start droidwarden-companion"),
    );
    probe.wait_payload(&format!("{P}/companion/{ID}/online"), WAIT, "online");
    probe.wait_payload(&format!("{P}/devices/phone/availability"), WAIT, "online");

    // Battery: the real output as the catalogue's record.
    let result = ok_result(probe.call(P, "b1", "phone", "battery", "status", json!({})));
    assert_eq!(
        result,
        json!({"level_percent": 59, "level": 59, "scale": 100, "status": "discharging",
               "health": "good", "plugged": null, "charging": false, "present": true,
               "temperature_c": 27.200000762939453, "voltage_mv": null, "technology": null,
               "simulated": false})
    );
    assert_eq!(argv_log(&log), [json!(["termux-battery-status"])]);

    // Volume: read, set (40 % of 15 is index 6), read back.
    let result = ok_result(probe.call(
        P,
        "v1",
        "phone",
        "audio_automation",
        "get_volume",
        json!({"stream": "voice_call"}),
    ));
    assert_eq!(
        result,
        json!({"stream": "voice_call", "level": 100, "index": 5, "min": 0, "max": 5, "muted": false})
    );
    let result = ok_result(probe.call(
        P,
        "v2",
        "phone",
        "audio_automation",
        "set_volume",
        json!({"stream": "music", "level": 40}),
    ));
    // The stand-in keeps printing its recording: the read-back says index 7.
    assert_eq!(result["index"], 7, "{result}");
    // One set, between reads (the daemon may read the state again after
    // a change: more plain reads).
    let volume_calls = &argv_log(&log)[1..];
    assert_eq!(
        volume_calls[..3],
        [
            json!(["termux-volume"]),
            json!(["termux-volume"]),
            json!(["termux-volume", "music", "6"])
        ]
    );
    assert!(
        volume_calls[3..]
            .iter()
            .all(|a| *a == json!(["termux-volume"])),
        "{volume_calls:?}"
    );

    // Brightness and notifications.
    let result = ok_result(probe.call(
        P,
        "s1",
        "phone",
        "screen_control",
        "set_brightness",
        json!({"level": 128}),
    ));
    assert_eq!(result, json!({"brightness": 128}));
    let result = ok_result(probe.call(P, "n1", "phone", "notifications", "list", json!({})));
    assert_eq!(result["count"], 1, "{result}");
    assert_eq!(
        result["notifications"][0]["package"],
        "com.example_organisation.app_name"
    );
    let log_now = argv_log(&log);
    assert_eq!(
        log_now[log_now.len() - 2..],
        [
            json!(["termux-brightness", "128"]),
            json!(["termux-notification-list"])
        ]
    );

    // A hostile link reaches the program as one argument, untouched.
    let hostile = "https://example.org/a;b'c\"d$(touch${IFS}pwned)`id`&x=|y";
    let result = ok_result(probe.call(
        P,
        "u1",
        "phone",
        "intents",
        "open_url",
        json!({"url": hostile}),
    ));
    assert_eq!(result["url"], hostile);
    assert_eq!(
        argv_log(&log).last(),
        Some(&json!(["termux-open-url", hostile]))
    );
    assert!(!dir.path().join("pwned").exists() && !Path::new("pwned").exists());

    // Refused before anything runs: a scheme the policy does not allow.
    let before = argv_log(&log).len();
    let reply = probe.call(
        P,
        "u2",
        "phone",
        "intents",
        "open_url",
        json!({"url": "javascript:alert(1)"}),
    );
    assert_eq!(reply["ok"], false, "{reply}");
    // Not offered: unsupported_action with the reason.
    let reply = probe.call(P, "w1", "phone", "wifi_automation", "disable", json!({}));
    assert_eq!(reply["error"]["code"], "unsupported_action", "{reply}");
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("wifi_automation.disable"),
        "{reply}"
    );
    let reply = probe.call(
        P,
        "v3",
        "phone",
        "audio_automation",
        "get_volume",
        json!({"stream": "dtmf"}),
    );
    assert_eq!(reply["error"]["code"], "unsupported_action", "{reply}");
    assert_eq!(argv_log(&log).len(), before, "nothing ran for refusals");

    // Killed without a goodbye: the will says offline.
    companion.0.kill().unwrap();
    companion.0.wait().unwrap();
    probe.wait_payload(&format!("{P}/devices/phone/availability"), WAIT, "offline");
    // A new subscriber gets the will as the retained presence.
    let late = Probe::connect(broker.port);
    wait_for("the retained will", WAIT, || {
        late.on(&format!("{P}/companion/{ID}/online"))
            .last()
            .filter(|m| m.payload == "offline" && m.retain)
            .map(|_| ())
    });
}
