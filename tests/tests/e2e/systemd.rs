//! The daemon as a systemd service, end to end: a notify socket read by the
//! test stands in for systemd, with a real mosquitto, the real adb server
//! and an emulated phone. Also `systemd-analyze verify` on the unit files,
//! and the sysusers/tmpfiles snippets applied to a scratch root.

use droidwarden_e2e::mqtt::{Mosquitto, Probe, call_request, ok_result, phone_config};
use droidwarden_e2e::systemd::{Notice, NotifySocket, Service};
use droidwarden_e2e::{AdbServer, Sim, SimOptions, binary, wait_for};
use droidwarden_e2e::{P, WAIT};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Fields drop in order: the daemon stops first, while the notify socket,
/// the broker and the adb server it talks to are still there.
struct Rig {
    service: Service,
    notify: NotifySocket,
    probe: Probe,
    sim: Sim,
    broker: Mosquitto,
    _adb: AdbServer,
}

fn config_for(broker: &Mosquitto, sim: &Sim, name: &str, extra: &str) -> String {
    phone_config(broker.port, &sim.serial(), name, extra)
}

/// A daemon with one phone named `phone`, started with a notify socket and
/// `env`; returns once READY=1 arrived.
fn rig(env: &[(&str, &str)]) -> (Rig, Notice) {
    let broker = Mosquitto::start();
    let probe = Probe::connect(broker.port);
    let adb = AdbServer::shared();
    let sim = adb.phone(SimOptions {
        model: Some("Pixel 8".into()),
        ..Default::default()
    });
    let notify = NotifySocket::new();
    let socket = notify.path().to_str().expect("a UTF-8 path").to_owned();
    let mut env = env.to_vec();
    env.push(("NOTIFY_SOCKET", &socket));
    let service = Service::start(&adb, &config_for(&broker, &sim, "phone", ""), &env);
    let (_, ready) = notify.wait_from(0, "READY=1", WAIT, |n| n.has("READY", "1"));
    (
        Rig {
            service,
            notify,
            probe,
            sim,
            broker,
            _adb: adb,
        },
        ready,
    )
}

/// CLOCK_BOOTTIME in µs, from /proc/uptime (to 10 ms): CLOCK_BOOTTIME is
/// never less than CLOCK_MONOTONIC.
fn boottime_usec() -> u128 {
    let uptime = std::fs::read_to_string("/proc/uptime").expect("/proc/uptime");
    let seconds: f64 = uptime
        .split_whitespace()
        .next()
        .and_then(|s| s.parse().ok())
        .expect("uptime seconds");
    (seconds * 1e6) as u128
}

#[test]
fn ready_comes_once_mqtt_serves_with_a_status_and_the_watchdog_is_fed() {
    let (r, ready) = rig(&[("WATCHDOG_USEC", "1000000")]);
    // Ready means ready: the first command is answered.
    ok_result(
        r.probe
            .call(P, "r1", "phone", "battery", "status", json!({})),
    );
    let status = ready.get("STATUS").expect("a STATUS with READY");
    assert!(status.ends_with("devices online"), "{status}");
    assert!(
        r.notify
            .notices()
            .iter()
            .take_while(|n| !n.has("READY", "1"))
            .all(|n| !n.has("WATCHDOG", "1") || n.get("STATUS").is_none()),
        "notices are separate datagrams"
    );
    // The phone is online: the status says so (it may have come in READY's
    // own status or in an update after it).
    r.notify
        .wait_from(0, "STATUS with the phone online", WAIT, |n| {
            n.get("STATUS") == Some("1/1 devices online")
        });

    // WATCHDOG_USEC=1 s: a ping every 500 ms. Gather pings spanning more
    // than two seconds, then count those in the first two.
    let pings = wait_for("watchdog pings over 2 s", WAIT, || {
        let pings: Vec<Notice> = r
            .notify
            .notices()
            .into_iter()
            .filter(|n| n.has("WATCHDOG", "1"))
            .collect();
        let first = pings.first()?;
        pings
            .last()
            .filter(|last| last.at.duration_since(first.at) > Duration::from_millis(2_100))
            .map(|_| pings.clone())
    });
    let start = pings[0].at;
    let in_two_seconds = pings
        .iter()
        .filter(|p| p.at.duration_since(start) < Duration::from_secs(2))
        .count();
    assert!(
        (3..=5).contains(&in_two_seconds),
        "{in_two_seconds} pings in 2 s, expected about 4"
    );
}

#[test]
fn sighup_applies_a_new_device_name() {
    let (r, _) = rig(&[]);
    let old_discovery = "homeassistant/switch/droidwarden_phone/wifi/config";
    let new_discovery = "homeassistant/switch/droidwarden_kitchen/wifi/config";
    r.probe.wait("the first discovery", WAIT, |m| {
        m.topic == old_discovery && !m.payload.is_empty()
    });

    let from = r.notify.count();
    r.service
        .write_config(&config_for(&r.broker, &r.sim, "kitchen", ""));
    r.service.signal("HUP");
    let (i, reloading) = r
        .notify
        .wait_from(from, "RELOADING=1", WAIT, |n| n.has("RELOADING", "1"));
    let usec: u128 = reloading
        .get("MONOTONIC_USEC")
        .and_then(|v| v.parse().ok())
        .expect("MONOTONIC_USEC in the RELOADING notice");
    // /proc/uptime has a 10 ms resolution: a second of slack.
    assert!(usec > 0 && usec <= boottime_usec() + 1_000_000, "{usec}");
    r.notify
        .wait_from(i + 1, "READY=1 after the reload", WAIT, |n| {
            n.has("READY", "1")
        });

    // The phone serves under its new name, and Home Assistant follows.
    r.probe
        .wait_payload(&format!("{P}/devices/kitchen/availability"), WAIT, "online");
    r.probe
        .wait_last(new_discovery, WAIT, |m| !m.payload.is_empty());
    r.probe
        .wait_last(old_discovery, WAIT, |m| m.payload.is_empty());
    // The old name's retained topics are cleared, availability included.
    r.probe
        .wait_last(&format!("{P}/devices/phone/availability"), WAIT, |m| {
            m.payload.is_empty()
        });
    ok_result(
        r.probe
            .call(P, "k1", "kitchen", "battery", "status", json!({})),
    );
    let reply = r
        .probe
        .call(P, "k2", "phone", "battery", "status", json!({}));
    assert_eq!(reply["error"]["code"], "device_not_found", "{reply}");
    assert!(r.service.log().contains("device renamed"));
}

#[test]
fn a_broken_configuration_is_refused_by_name_and_the_daemon_keeps_serving() {
    let (r, _) = rig(&[]);
    let broken = config_for(&r.broker, &r.sim, "phone", "").replace(
        "poll_interval_ms = 300",
        "poll_interval_ms = 300\nworkers_per_device = 0",
    );
    let from = r.notify.count();
    r.service.write_config(&broken);
    r.service.signal("HUP");
    let (i, _) = r
        .notify
        .wait_from(from, "RELOADING=1", WAIT, |n| n.has("RELOADING", "1"));
    r.notify
        .wait_from(i + 1, "READY=1 after the failed reload", WAIT, |n| {
            n.has("READY", "1")
        });
    wait_for("the reload failure in the log", WAIT, || {
        let log = r.service.log();
        (log.contains("configuration reload failed") && log.contains("adb.workers_per_device"))
            .then_some(())
    });
    ok_result(
        r.probe
            .call(P, "b1", "phone", "battery", "status", json!({})),
    );

    // A key read only at start: logged by name, the running value kept.
    let from = r.notify.count();
    r.service.write_config(&config_for(
        &r.broker,
        &r.sim,
        "phone",
        "topic_prefix = \"elsewhere\"",
    ));
    r.service.signal("HUP");
    r.notify
        .wait_from(from, "READY=1 after the second reload", WAIT, |n| {
            n.has("READY", "1")
        });
    wait_for("the restart notice in the log", WAIT, || {
        let log = r.service.log();
        (log.contains("needs a restart") && log.contains("mqtt.topic_prefix")).then_some(())
    });
    ok_result(
        r.probe
            .call(P, "b2", "phone", "battery", "status", json!({})),
    );
}

#[test]
fn sigterm_says_stopping_first_and_lets_the_call_in_flight_finish() {
    let (mut r, _) = rig(&[]);
    r.sim
        .control(json!({"op": "fault", "kind": "delay", "ms": 1500}));
    let status_topic = format!("{P}/devices/phone/services/battery/status");
    let reply_topic = format!("{P}/reply/t1");
    r.probe.publish(
        &format!("{P}/cmd/call"),
        call_request("t1", "phone", "battery", "status", json!({})).to_string(),
    );
    r.probe.wait("the call to start", WAIT, |m| {
        m.topic == status_topic && m.json()["state"] == "executing"
    });
    let from = r.notify.count();
    r.service.signal("TERM");
    r.notify
        .wait_from(from, "STOPPING=1", WAIT, |n| n.has("STOPPING", "1"));
    assert!(
        r.probe.on(&reply_topic).is_empty(),
        "STOPPING=1 comes before the call in flight finishes"
    );
    let reply = r
        .probe
        .wait("the reply of the call in flight", WAIT, |m| {
            m.topic == reply_topic
        })
        .json();
    assert_eq!(reply["ok"], true, "{reply}");
    assert_eq!(r.service.wait_exit(WAIT), Some(0), "{}", r.service.log());
    // The call's last status went out before the goodbye: nothing retained
    // says `executing` for a daemon that has stopped.
    r.probe
        .wait_last(&status_topic, WAIT, |m| m.json()["state"] == "success");
    r.probe
        .wait_payload(&format!("{P}/availability"), WAIT, "offline");
    let notices = r.notify.notices();
    let stopping = notices
        .iter()
        .position(|n| n.has("STOPPING", "1"))
        .expect("STOPPING=1");
    assert!(
        notices[stopping + 1..]
            .iter()
            .all(|n| !n.has("READY", "1") && !n.has("WATCHDOG", "1")),
        "nothing but stopping after STOPPING=1: {notices:?}"
    );
}

#[test]
fn without_a_journal_socket_the_journal_stream_gets_plain_lines() {
    if Path::new("/run/systemd/journal/socket").exists() {
        eprintln!("a journal runs here: the daemon logs to it; the fallback is not exercised");
        return;
    }
    let broker = Mosquitto::start();
    let adb = AdbServer::shared();
    let config = format!("[mqtt]\nurl = \"mqtt://127.0.0.1:{}\"\n", broker.port);
    let service = Service::start_journaled(&adb, &config, &[]);
    wait_for("the daemon to log", WAIT, || {
        service
            .log()
            .contains("connected to the MQTT broker")
            .then_some(())
    });
    let log = service.log();
    assert!(
        log.contains("its socket cannot be reached; logging plain lines"),
        "{log}"
    );
    assert!(!log.contains('\u{1b}'), "no colours for the journal: {log}");
}

/// A copy of a unit file with its `ExecStart=` binary replaced by the one
/// just built (`systemd-analyze verify` checks that it exists).
fn unit_copy(unit: &str, binary_in_unit: &str, dir: &Path) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../systemd")
        .join(unit);
    let text = std::fs::read_to_string(&source).expect("unit file");
    assert!(
        text.contains(&format!("ExecStart={binary_in_unit} ")),
        "{unit} runs {binary_in_unit}"
    );
    let built = binary("droidwarden");
    let copy = dir.join("droidwarden.service");
    std::fs::write(
        &copy,
        text.replace(
            &format!("ExecStart={binary_in_unit} "),
            &format!("ExecStart={} ", built.display()),
        ),
    )
    .expect("write the unit copy");
    copy
}

/// `systemd-analyze ARGS` with `env` added: whether it succeeded, and what
/// it printed (package_deb.rs verifies the packaged units with it too).
pub(crate) fn systemd_analyze(args: &[&str], env: &[(&str, &Path)]) -> (bool, String) {
    let mut cmd = Command::new("systemd-analyze");
    cmd.args(args);
    for (key, value) in env {
        cmd.env(key, value);
    }
    let out = cmd
        .output()
        .expect("systemd-analyze (apt-get install systemd; scripts/test does it)");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// `systemd-analyze verify` loads the unit as systemd would, without a
/// running systemd: every key is parsed (an unknown key or a bad value is a
/// warning, which fails this test), the `ExecStart=` binary must exist and
/// be executable, and the units it orders itself after are loaded. It does
/// not check that the user exists, that the credential files exist, or
/// that the sandbox lets the daemon run (that needs a real systemd).
#[test]
fn the_unit_files_verify() {
    let dir = tempfile::tempdir().expect("temp dir");
    let system = unit_copy(
        "droidwarden.service",
        "/usr/local/bin/droidwarden",
        dir.path(),
    );
    let (ok, out) = systemd_analyze(&["verify", "--man=no", system.to_str().unwrap()], &[]);
    assert!(ok && out.trim().is_empty(), "system unit: {out}");

    // The exposure score of the sandbox; 1.2 when written ("OK").
    let (ok, out) = systemd_analyze(
        &[
            "security",
            "--offline=yes",
            "--threshold=20",
            system.to_str().unwrap(),
        ],
        &[],
    );
    assert!(ok, "{out}");
    let score: f64 = out
        .lines()
        .find_map(|l| l.split("droidwarden.service: ").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no exposure level in {out}"));
    assert!(score <= 2.0, "exposure {score}: {out}");

    // The user unit, verified by a user manager (it needs a runtime
    // directory; %h, %E and %S resolve against HOME and the XDG variables).
    let user_dir = tempfile::tempdir().expect("temp dir");
    let user = unit_copy(
        "user/droidwarden.service",
        "%h/.cargo/bin/droidwarden",
        user_dir.path(),
    );
    let runtime = tempfile::tempdir().expect("runtime dir");
    let (ok, out) = systemd_analyze(
        &["--user", "verify", "--man=no", user.to_str().unwrap()],
        &[("XDG_RUNTIME_DIR", runtime.path())],
    );
    assert!(ok && out.trim().is_empty(), "user unit: {out}");
}

/// The sysusers and tmpfiles snippets, applied to a scratch root: the user
/// is created, then the directories and the root-only secret files.
#[test]
fn the_sysusers_and_tmpfiles_snippets_apply() {
    if !droidwarden_e2e::is_root() {
        eprintln!("not root: tmpfiles cannot set owners; skipped");
        return;
    }
    let root = tempfile::tempdir().expect("scratch root");
    std::fs::create_dir_all(root.path().join("etc")).expect("etc");
    let snippet = |name: &str| {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../systemd")
            .join(name)
    };
    let run = |program: &str, args: &[&str]| {
        let out = Command::new(program)
            .arg(format!("--root={}", root.path().display()))
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("{program}: {e}"));
        assert!(
            out.status.success(),
            "{program}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run(
        "systemd-sysusers",
        &[snippet("sysusers.d/droidwarden.conf").to_str().unwrap()],
    );
    let passwd = std::fs::read_to_string(root.path().join("etc/passwd")).expect("passwd");
    let entry = passwd
        .lines()
        .find(|l| l.starts_with("droidwarden:"))
        .expect("the droidwarden user");
    let fields: Vec<&str> = entry.split(':').collect();
    assert_eq!(fields[5], "/var/lib/droidwarden", "{entry}");
    assert_eq!(fields[6], "/usr/sbin/nologin", "{entry}");
    let uid: u32 = fields[2].parse().expect("uid");
    run(
        "systemd-tmpfiles",
        &[
            "--create",
            snippet("tmpfiles.d/droidwarden.conf").to_str().unwrap(),
        ],
    );
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let meta = |p: &str| std::fs::metadata(root.path().join(p)).expect(p);
    let state = meta("var/lib/droidwarden");
    assert_eq!(
        (state.uid(), state.permissions().mode() & 0o777),
        (uid, 0o700)
    );
    for secret in [
        "etc/droidwarden/mqtt-password",
        "etc/droidwarden/llm-api-key",
    ] {
        let m = meta(secret);
        assert_eq!(
            (m.uid(), m.permissions().mode() & 0o777),
            (0, 0o600),
            "{secret}"
        );
    }
}
