//! A new user's first hour on a fresh server: what happens when adb is not
//! installed yet, is installed later, or its server is killed. Real daemon
//! binary, the real adb program and server, an emulated phone, mosquitto.

use droidwarden_e2e::P;
use droidwarden_e2e::mqtt::{Daemon, Mosquitto, Probe, call_request};
use droidwarden_e2e::{AdbServer, Sim, SimOptions, binary, free_port, run_with_timeout, wait_for};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(45);

#[test]
fn a_missing_adb_is_named_with_the_fix_and_is_not_retryable() {
    let home = tempfile::tempdir().unwrap();
    let config = tempfile::NamedTempFile::new().unwrap();
    for args in [
        &["call", "--local", "battery", "status"][..],
        &[
            "call", "--local", "--device", "kitchen", "battery", "status",
        ][..],
    ] {
        let mut cmd = Command::new(binary("droidwarden"));
        cmd.arg("--config")
            .arg(config.path())
            .args(args)
            .env("HOME", home.path())
            .env(
                "DROIDWARDEN__ADB__SERVER",
                format!("127.0.0.1:{}", free_port()),
            )
            .env("DROIDWARDEN__ADB__START_SERVER", "true")
            .env("DROIDWARDEN__ADB__PROGRAM", home.path().join("no-such-adb"))
            .env_remove("RUST_LOG");
        let out = run_with_timeout(cmd, WAIT);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let reply: Value = serde_json::from_str(&stdout).unwrap_or(Value::Null);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stdout}");
        let error = &reply["error"];
        assert_eq!(error["code"], "adb_missing", "{args:?}: {stdout}");
        assert_eq!(error["retryable"], false, "{args:?}: {stdout}");
        let message = error["message"].as_str().unwrap_or_default();
        assert!(message.contains("apt-get install adb"), "{message}");
    }
}

/// Kills the adb server on `port` when dropped.
struct KillServer<'a> {
    port: u16,
    home: &'a Path,
}

impl KillServer<'_> {
    fn kill(&self) {
        let mut cmd = Command::new("adb");
        cmd.env("HOME", self.home)
            .args(["-P", &self.port.to_string(), "kill-server"]);
        let _ = run_with_timeout(cmd, Duration::from_secs(20));
    }
}

impl Drop for KillServer<'_> {
    fn drop(&mut self) {
        self.kill();
    }
}

#[test]
fn the_adb_server_is_started_when_adb_appears_and_again_each_time_it_is_killed() {
    let broker = Mosquitto::start();
    let probe = Probe::connect(broker.port);
    // The harness's own server only lends its HOME (adb keys); the daemon
    // runs another, on a port nobody serves yet.
    let lender = AdbServer::start();
    let port = free_port();
    let killer = KillServer {
        port,
        home: lender.home(),
    };
    let bin = tempfile::tempdir().unwrap();
    let program = bin.path().join("adb");
    let sim = Sim::start(SimOptions::default());
    let serial = sim.serial();
    let config = format!(
        "[mqtt]\nurl = \"mqtt://127.0.0.1:{}\"\n[adb]\nprogram = \"{}\"\npoll_interval_ms = 300\nconnect = [\"{serial}\"]\n[[devices]]\nname = \"phone\"\ntransport = \"adb\"\nserial = \"{serial}\"\n",
        broker.port,
        program.display(),
    );
    let server = format!("127.0.0.1:{port}");
    let daemon = Daemon::start_with_env(
        &lender,
        &config,
        tempfile::tempdir().unwrap(),
        &[
            ("DROIDWARDEN__ADB__SERVER", &server),
            ("DROIDWARDEN__ADB__START_SERVER", "true"),
        ],
    );
    // adb is not installed yet: said once, with the fix.
    wait_for("the daemon to say adb is missing", WAIT, || {
        daemon.log().contains("apt-get install adb").then_some(())
    });
    // The adb transport says so as it starts, which can be before the
    // daemon listens for commands: a command published then is never seen.
    probe.wait_payload(&format!("{P}/availability"), WAIT, "online");
    // A call through the daemon says so too, not "no such device"; so
    // does a call that names no device.
    for (id, device) in [("missing-1", Some("phone")), ("missing-2", None)] {
        let mut request = call_request(id, "phone", "battery", "status", json!({}));
        if device.is_none() {
            request.as_object_mut().unwrap().remove("device");
        }
        let reply = probe.request(P, "call", request);
        assert_eq!(reply["error"]["code"], "adb_missing", "{reply}");
        let message = reply["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("apt-get install adb"), "{reply}");
    }
    // Installed while the daemon runs.
    let real = which("adb");
    std::os::unix::fs::symlink(&real, &program).unwrap();
    probe.wait_payload(&format!("{P}/devices/phone/availability"), WAIT, "online");
    // A call leaves a connection to the server opened for the next one.
    let battery = |id: &str| {
        let reply = probe.request(
            P,
            "call",
            call_request(id, "phone", "battery", "status", json!({})),
        );
        assert_eq!(reply["ok"], true, "{reply}");
    };
    battery("before");
    // Killed, twice: started again each time (so quickly that the phone
    // may never be seen offline), and the phone is back on it.
    for round in 1..=2 {
        let starts = daemon.log().matches("starting the adb server").count();
        killer.kill();
        wait_for(
            &format!("round {round}: the adb server started again"),
            WAIT,
            || (daemon.log().matches("starting the adb server").count() > starts).then_some(()),
        );
        wait_for(
            &format!("round {round}: the phone back on the new server"),
            WAIT,
            || {
                let mut cmd = Command::new("adb");
                cmd.env("HOME", lender.home())
                    .args(["-P", &port.to_string(), "devices"]);
                let out = run_with_timeout(cmd, Duration::from_secs(20));
                String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .any(|l| l.starts_with(&serial) && l.ends_with("\tdevice"))
                    .then_some(())
            },
        );
        probe.wait_payload(&format!("{P}/devices/phone/availability"), WAIT, "online");
        // The connection opened to the killed server is not used: calls
        // go to the new one.
        battery(&format!("round-{round}"));
    }
    let log = daemon.log();
    // Said by the start-up, the server starter and the poller: once each,
    // not once per poll (the calls made while it was missing each have
    // their own line).
    let said = log
        .lines()
        .filter(|l| l.contains("apt-get install adb") && !l.contains("call failed"))
        .count();
    assert!(said <= 3, "the missing adb is repeated:\n{log}");
}

fn which(program: &str) -> std::path::PathBuf {
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join(program))
                .find(|p| p.is_file())
        })
        .unwrap_or_else(|| panic!("{program} is not on PATH"))
}

#[test]
fn a_taken_broker_port_names_both_ways_out() {
    let adb = AdbServer::start();
    // Someone (Home Assistant's Mosquitto, say) already has the port.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let mut daemon = Daemon::start(&adb, &format!("[broker]\nlisten = \"127.0.0.1:{port}\"\n"));
    let code = daemon.wait_exit(WAIT);
    assert_eq!(code, Some(1), "{}", daemon.log());
    let log = daemon.log();
    assert!(
        log.contains("already uses this port")
            && log.contains("[mqtt] url")
            && log.contains("[broker] listen"),
        "{log}"
    );
    // The start stopped what it had begun, in order, as a shutdown does:
    // the delivery store it had opened is closed and checkpointed (its
    // write-ahead log empty), not left to the process's end.
    assert!(log.contains("stopped: the start did not complete"), "{log}");
    let wal = daemon.state_dir.path().join("delivery.db-wal");
    let wal_len = std::fs::metadata(&wal).map_or(0, |m| m.len());
    assert_eq!(wal_len, 0, "{} still holds {wal_len} bytes", wal.display());
    drop(taken);
}

fn droidwarden(args: &[&str]) -> (Option<i32>, String, String) {
    let mut cmd = Command::new(binary("droidwarden"));
    // Neither needs a configuration: a broken one must not stop them.
    cmd.args(args)
        .env("DROIDWARDEN__CALLS__TIMEOUT_MS", "nonsense")
        .env_remove("RUST_LOG");
    let out = run_with_timeout(cmd, WAIT);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn completions_and_the_manual_page_come_from_the_command_definitions() {
    for (shell, marker) in [
        ("bash", "complete -F _droidwarden"),
        ("zsh", "#compdef droidwarden"),
        ("fish", "complete -c droidwarden"),
    ] {
        let (code, out, err) = droidwarden(&["completions", shell]);
        assert_eq!(code, Some(0), "{shell}: {err}");
        assert!(out.contains(marker), "{shell}: {out}");
        // Every subcommand is offered, the newest included.
        for sub in ["daemon", "call", "approve", "completions"] {
            assert!(out.contains(sub), "{shell} misses {sub}");
        }
    }
    // bash itself accepts the script.
    let (_, script, _) = droidwarden(&["completions", "bash"]);
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), script).unwrap();
    let mut bash = Command::new("bash");
    bash.arg("-n").arg(file.path());
    assert!(run_with_timeout(bash, WAIT).status.success());
    let (code, man, err) = droidwarden(&["man"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        man.starts_with(".ie") || man.contains(".TH droidwarden"),
        "{man}"
    );
    assert!(man.contains("completions"), "{man}");
}

#[test]
fn config_check_says_what_would_run_and_lists_valid_values() {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    std::io::Write::write_all(
        &mut file,
        b"[mqtt]\nurl = \"mqtt://dw:s3cret@broker.lan\"\n[llm]\nprovider = \"openai\"\nbase_url = \"http://127.0.0.1:11434/v1\"\nmodel = \"qwen2.5:7b\"\n[[devices]]\nname = \"alice-phone\"\ntransport = \"companion\"\ncompanion_id = \"alice\"\n",
    )
    .unwrap();
    let path = file.path().to_str().unwrap().to_owned();
    let mut cmd = Command::new(binary("droidwarden"));
    cmd.args(["--config", &path, "config", "check"]);
    let out = run_with_timeout(cmd, WAIT);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    for expected in [
        "mqtt://broker.lan:1883 as dw (password set)",
        "device alice-phone: companion id alice",
        "agent:      openai model qwen2.5:7b",
    ] {
        assert!(text.contains(expected), "{expected:?} missing from\n{text}");
    }
    assert!(!text.contains("s3cret"), "{text}");
    let mut file = tempfile::NamedTempFile::new().unwrap();
    std::io::Write::write_all(&mut file, b"[llm]\nprovider = \"ollama\"\nmodel = \"m\"\n").unwrap();
    let mut cmd = Command::new(binary("droidwarden"));
    cmd.arg("--config")
        .arg(file.path())
        .args(["config", "check"]);
    let out = run_with_timeout(cmd, WAIT);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{err}");
    assert!(
        err.contains("llm.provider") && err.contains("openai, anthropic, gemini"),
        "{err}"
    );
    assert!(!err.contains("ProviderKind"), "{err}");
}

#[test]
fn subscribers_of_the_embedded_broker_see_the_daemon_go_offline() {
    let adb = AdbServer::start();
    let port = free_port();
    let mut daemon = Daemon::start(&adb, &format!("[broker]\nlisten = \"127.0.0.1:{port}\"\n"));
    wait_for("the embedded broker", WAIT, || {
        std::net::TcpStream::connect(("127.0.0.1", port)).ok()
    });
    let user = daemon.add_mqtt_user(&["watcher", "--role", "automation"]);
    let password = user
        .lines()
        .find_map(|l| l.split_whitespace().last())
        .unwrap_or_default()
        .to_owned();
    let probe = Probe::connect_as(port, "watcher", &password);
    probe.wait_payload(&format!("{P}/availability"), WAIT, "online");
    assert_eq!(daemon.terminate(), Some(0), "{}", daemon.log());
    // The goodbye reaches a subscriber before the broker itself stops.
    probe.wait(&format!("{P}/availability offline"), WAIT, |m| {
        m.topic == format!("{P}/availability") && m.payload == "offline"
    });
}

#[test]
fn home_assistant_sees_the_phones_volume_steps_and_errors_for_unknown_devices() {
    let broker = Mosquitto::start();
    let probe = Probe::connect(broker.port);
    let adb = AdbServer::start();
    let sim = adb.phone(SimOptions::default());
    let config = droidwarden_e2e::mqtt::one_phone_config(broker.port, &sim.serial(), "");
    let _daemon = Daemon::start(&adb, &config);
    let volume_config = "homeassistant/number/droidwarden_phone/media_volume/config";
    probe.wait_last(volume_config, WAIT, |m| !m.payload.is_empty());
    // A music volume read tells the phone's steps (the sim has 15): the
    // slider is announced again with them.
    let reply = probe.request(
        P,
        "call",
        serde_json::json!({"id": "v1", "device": "phone", "service": "audio_automation", "action": "get_volume", "params": {"stream": "music"}}),
    );
    let max = reply["result"]["max"].as_u64().expect("max");
    let step = (10_000.0 / max as f64).round() / 100.0;
    probe.wait_last(volume_config, WAIT, |m| m.json()["step"] == step);
    // A Home Assistant command for a device nobody knows is an error where
    // every bad command goes.
    probe.publish(&format!("{P}/devices/ghost/ha/wifi/set"), "OFF");
    let error = probe.wait(&format!("{P}/errors"), WAIT, |m| {
        m.topic == format!("{P}/errors") && m.payload.contains("ghost")
    });
    assert_eq!(
        error.json()["error"]["code"],
        "device_not_found",
        "{}",
        error.payload
    );
}
