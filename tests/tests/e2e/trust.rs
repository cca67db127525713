//! What the daemon must never do, whoever is watching: leak a secret into a
//! log, leave its state readable by other users, or let text from a phone
//! rewrite the operator's terminal. Real daemon binary, real mosquitto, the
//! real adb server and an emulated phone.

use droidwarden_e2e::mqtt::{Daemon, Mosquitto, Probe};
use droidwarden_e2e::phone_rig::PhoneRig;
use droidwarden_e2e::{AdbServer, binary, free_port, run_with_timeout, terminate, wait_for};
use droidwarden_e2e::{P, WAIT};
use serde_json::json;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::Command;

#[test]
fn credentials_in_the_mqtt_url_never_reach_the_logs_or_errors() {
    let adb = AdbServer::shared();
    // Nobody listens on this port: the daemon keeps reconnecting and
    // logging why, with the broker's address in hand.
    let port = free_port();
    let config = format!("[mqtt]\nurl = \"mqtt://dw:hunter2%21@127.0.0.1:{port}\"\n");
    let daemon = Daemon::start_with_env(
        &adb,
        &config,
        tempfile::tempdir().unwrap(),
        &[("RUST_LOG", "trace")],
    );
    wait_for("a failed MQTT connection in the log", WAIT, || {
        daemon.log().contains("MQTT connection lost").then_some(())
    });
    let log = daemon.log();
    assert!(
        !log.contains("hunter2"),
        "the password reached the log:\n{log}"
    );
    // A URL the configuration refuses: the error names the key, not the secret.
    let mut file = tempfile::NamedTempFile::new().unwrap();
    std::io::Write::write_all(
        &mut file,
        b"[mqtt]\nurl = \"mqtt://dw:hunter2@bro ker.lan:1883\"\n",
    )
    .unwrap();
    let mut check = Command::new(binary("droidwarden"));
    check
        .arg("--config")
        .arg(file.path())
        .args(["config", "check"]);
    let out = run_with_timeout(check, WAIT);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(78), "{text}");
    assert!(text.contains("mqtt.url"), "{text}");
    assert!(!text.contains("hunter2"), "the password was echoed: {text}");
}

/// Every directory under `dir` is 0700 and every file 0600 (at most).
fn assert_private(dir: &Path) {
    let mut seen = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(path) = stack.pop() {
        let meta = std::fs::symlink_metadata(&path).unwrap();
        let mode = meta.permissions().mode() & 0o777;
        assert_eq!(
            mode & 0o077,
            0,
            "{} is {mode:o}: readable by others",
            path.display()
        );
        if meta.is_dir() {
            for entry in std::fs::read_dir(&path).unwrap() {
                stack.push(entry.unwrap().path());
            }
        } else {
            seen += 1;
        }
    }
    assert!(
        seen >= 2,
        "expected the daemon's files under {}",
        dir.display()
    );
}

#[test]
fn state_files_are_private_whatever_the_umask() {
    let adb = AdbServer::shared();
    let broker = Mosquitto::shared();
    let probe = Probe::connect_to(&broker);
    let base = tempfile::tempdir().unwrap();
    std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let state = base.path().join("state");
    // An agent is configured so that its database is created too; nothing
    // listens at its address and nothing asks it anything.
    let config = format!(
        "[mqtt]\nurl = \"mqtt://127.0.0.1:{}\"\n{}[mqtt.homeassistant]\ndiscovery = false\n[llm]\nprovider = \"openai\"\nbase_url = \"http://127.0.0.1:{}/v1\"\nmodel = \"m\"\n[state]\ndir = \"{}\"\n",
        broker.port,
        broker.mqtt_keys(),
        free_port(),
        state.display()
    );
    let mut file = tempfile::NamedTempFile::new().unwrap();
    std::io::Write::write_all(&mut file, config.as_bytes()).unwrap();
    let log = base.path().join("daemon.log");
    // The daemon under `sh -c "umask 000; exec …"`: a permissive umask, as
    // a root shell or a careless service manager may hand it down.
    let daemon = |umask: &str| {
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(format!("umask {umask}; exec \"$0\" \"$@\""))
            .arg(binary("droidwarden"))
            .arg("--config")
            .arg(file.path())
            .arg("daemon")
            .env("DROIDWARDEN__DBUS__BUS", "none");
        adb.client_env(&mut cmd)
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap()
    };
    let stop = |mut child: std::process::Child| {
        terminate(&mut child, WAIT);
    };
    let child = daemon("000");
    probe.wait_payload(&format!("{P}/availability"), WAIT, "online");
    wait_for("the agent's database", WAIT, || {
        std::fs::read_dir(state.join("agent"))
            .ok()
            .and_then(|mut d| d.next())
            .map(|_| ())
    });
    stop(child);
    assert_private(&state);
    // An existing state directory that others can enter is narrowed.
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o755)).unwrap();
    let child = daemon("022");
    wait_for("the state directory narrowed to 0700", WAIT, || {
        (std::fs::metadata(&state).unwrap().permissions().mode() & 0o777 == 0o700).then_some(())
    });
    stop(child);
}

#[test]
fn text_from_a_phone_reaches_the_log_escaped() {
    // No state polls (the rig has none): the sim's one-shot fault must
    // meet our call.
    let r = PhoneRig::start("");
    // The phone answers with terminal escapes (clear screen, set the
    // window title, an 8-bit CSI), a forged log line and a right-to-left
    // override; the daemon logs the failure.
    let hostile = "boom\u{1b}[2J\u{1b}]0;owned\u{7}\u{9b}31m\r\n2026-11-23T00:00:00Z  INFO forged line \u{202e}gpj.exe";
    let answer = r
        .sim
        .control(json!({"op": "fault", "kind": "fail", "exit": 1, "stderr": hostile}));
    assert_eq!(answer["ok"], true, "{answer}");
    let reply = r.call("wifi_automation", "disable", json!({}));
    assert_eq!(reply["ok"], false, "{reply}");
    // The reply is JSON, which escapes by itself; the log must too.
    let log = wait_for("the failure in the log", WAIT, || {
        let log = r.daemon().log();
        log.contains("call failed").then_some(log)
    });
    for bad in ['\u{1b}', '\u{7}', '\u{9b}', '\u{202e}', '\r'] {
        assert!(!log.contains(bad), "{bad:?} reached the log:\n{log}");
    }
    assert!(
        !log.lines()
            .any(|l| l.contains("INFO forged line") && !l.contains("call failed")),
        "a forged line stands on its own in the log:\n{log}"
    );
    // No colour codes either: standard error is a file, not a terminal.
    assert!(!log.contains("\u{1b}["), "colours in a file:\n{log}");
}
