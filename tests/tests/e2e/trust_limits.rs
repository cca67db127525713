//! The limits of issue #10, end to end: the real `droidwarden daemon`, a
//! real mosquitto, a scripted language model over real HTTP, companion
//! phones that never come online, a private `dbus-daemon` for the CLI, and
//! start-up on a broken state directory.
//!
//! * A flood of `cmd/ask` gets `busy` beyond `[agent] max_concurrent_runs`
//!   plus `max_queued`; the model never sees more than
//!   `max_concurrent_runs` requests at once; the daemon's memory stays
//!   bounded.
//! * Changes queued for an offline companion phone come back
//!   `device_offline` (never sent, did not run), never `timeout`; the
//!   phone's queue limit counts them.
//! * `droidwarden call` waits for the daemon's own answer on such a phone.
//! * An unusable state directory exits 73, a configuration error 78.

use droidwarden_agent::testing::ScriptStep;
use droidwarden_agent::{ModelReply, ProviderKind};
use droidwarden_e2e::dbus::PrivateBus;
use droidwarden_e2e::mqtt::{Daemon, Mosquitto, NO_POLLS, Probe};
use droidwarden_e2e::{
    AdbServer, Droidwarden, binary, free_port, run_with_timeout, scripted_llm_config, wait_for,
};
use droidwarden_e2e::{P, WAIT};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

/// Polling and discovery off: only what a test does reaches the broker.
fn quiet() -> String {
    format!("[mqtt.homeassistant]\ndiscovery = false\n{NO_POLLS}")
}

/// Wait for the daemon's own `online` (published after it subscribed).
fn wait_daemon_online(probe: &Probe) {
    probe.wait_payload(&format!("{P}/availability"), WAIT, "online");
}

/// Every reply on `reply/<prefix>…`, by id, once `count` have come.
fn wait_replies(
    probe: &Probe,
    prefix: &str,
    count: usize,
    within: Duration,
) -> BTreeMap<String, Value> {
    let topic = format!("{P}/reply/{prefix}");
    wait_for(&format!("{count} replies on {topic}*"), within, || {
        let replies: BTreeMap<String, Value> = probe
            .messages()
            .iter()
            .filter(|m| m.topic.starts_with(&topic))
            .map(|m| (m.topic.clone(), m.json()))
            .collect();
        (replies.len() >= count).then_some(replies)
    })
}

#[test]
fn a_flood_of_asks_is_bounded_busy_beyond_the_limits() {
    const FLOOD: usize = 200;
    const RUNNING: usize = 4;
    const QUEUED: usize = 8;
    let (_rt, llm) = droidwarden_e2e::scripted_model();
    llm.set_fallback(ScriptStep::Reply(ModelReply::text("All quiet.")));
    // A slow model: the flood arrives while the first runs still wait.
    llm.set_delay(Duration::from_millis(1500));
    let broker = Mosquitto::shared();
    let probe = Probe::connect_to(&broker);
    let adb = AdbServer::shared();
    let config = format!(
        "[mqtt]\nurl = \"mqtt://127.0.0.1:{}\"\n{}{}{}[agent]\nmax_concurrent_runs = {RUNNING}\nmax_queued = {QUEUED}\n",
        broker.port,
        broker.mqtt_keys(),
        quiet(),
        scripted_llm_config(&llm, ProviderKind::Openai),
    );
    let daemon = Daemon::start(&adb, &config);
    wait_daemon_online(&probe);
    let before = droidwarden_e2e::rss_kib(daemon.pid());

    let started = Instant::now();
    for i in 0..FLOOD {
        probe.publish(
            &format!("{P}/cmd/ask"),
            json!({"id": format!("flood-{i:03}"), "prompt": format!("Anything new? ({i})")})
                .to_string(),
        );
    }
    let replies = wait_replies(&probe, "flood-", FLOOD, Duration::from_secs(60));
    let elapsed = started.elapsed();
    let after = droidwarden_e2e::rss_kib(daemon.pid());

    let (ok, busy): (Vec<&Value>, Vec<&Value>) = replies.values().partition(|r| r["ok"] == true);
    for reply in &busy {
        assert_eq!(reply["error"]["code"], "busy", "{reply}");
        assert_eq!(reply["error"]["retryable"], true, "{reply}");
        assert!(
            reply["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("max_concurrent_runs")),
            "{reply}"
        );
    }
    for reply in &ok {
        assert_eq!(reply["result"]["text"], "All quiet.", "{reply}");
    }
    // The flood lands within one model delay: only the runs that fit were
    // admitted (a few more if some finished while it was still arriving).
    assert!(
        ok.len() >= RUNNING + QUEUED && ok.len() <= RUNNING + QUEUED + RUNNING,
        "{} answered, {} busy",
        ok.len(),
        busy.len()
    );
    assert_eq!(ok.len() + busy.len(), FLOOD);
    assert_eq!(
        llm.requests().len(),
        ok.len(),
        "busy asks never reach the model"
    );
    assert!(
        llm.max_in_flight() <= RUNNING,
        "the model saw {} requests at once",
        llm.max_in_flight()
    );
    assert_eq!(llm.max_in_flight(), RUNNING, "the slots were used");
    // Generous: the daemon's whole resident set, not just the agent's
    // share, on a noisy machine. Unbounded, 500 asks took 149 MB.
    assert!(
        after < before + 40 * 1024 && after < 120 * 1024,
        "RSS {before} KiB before, {after} KiB after the flood"
    );
    eprintln!(
        "flood: {FLOOD} asks in {elapsed:?}: {} answered, {} busy; RSS {before} → {after} KiB; model at most {} at once",
        ok.len(),
        busy.len(),
        llm.max_in_flight()
    );
    drop(daemon);
}

/// A running daemon with one companion phone, `alice`, that never comes
/// online; fields in drop order (the daemon first, the broker last).
struct OfflineCompanion {
    _daemon: Daemon,
    config: String,
    adb: AdbServer,
    probe: Probe,
    _broker: Mosquitto,
}

/// Start a broker, a probe, an adb server and a daemon with `[companion]`
/// settings `companion` and the extra environment `env`, and wait until the
/// daemon is online.
fn offline_companion(companion: &str, env: &[(&str, &str)]) -> OfflineCompanion {
    let broker = Mosquitto::shared();
    let probe = Probe::connect_to(&broker);
    let adb = AdbServer::shared();
    let config = format!(
        "[mqtt]\nurl = \"mqtt://127.0.0.1:{}\"\n{}{}[calls]\ntimeout_ms = 1000\n[companion]\n{companion}\n[[devices]]\nname = \"alice\"\ntransport = \"companion\"\ncompanion_id = \"alice-pixel\"\n",
        broker.port,
        broker.mqtt_keys(),
        quiet(),
    );
    let daemon = Daemon::start_with_env(&adb, &config, tempfile::tempdir().expect("state"), env);
    wait_daemon_online(&probe);
    OfflineCompanion {
        _daemon: daemon,
        config,
        adb,
        probe,
        _broker: broker,
    }
}

#[test]
fn changes_queued_for_an_offline_companion_are_device_offline_and_counted_by_the_queue_limit() {
    let phone = offline_companion("request_timeout_ms = 1000\nqueue_ttl_ms = 3000", &[]);
    let probe = &phone.probe;
    probe.wait_payload(&format!("{P}/devices/alice/availability"), WAIT, "offline");
    // 70 changes at once: 64 fit the phone's queue of unsent calls.
    for i in 0..70 {
        probe.publish(
            &format!("{P}/cmd/call"),
            json!({"id": format!("q-{i:02}"), "device": "alice", "service": "screen_control",
                   "action": "set_brightness", "params": {"level": i}})
            .to_string(),
        );
    }
    let replies = wait_replies(probe, "q-", 70, WAIT);
    let mut refused = 0;
    for reply in replies.values() {
        let error = &reply["error"];
        assert_eq!(error["code"], "device_offline", "{reply}");
        assert_eq!(error["retryable"], true, "{reply}");
        let message = error["message"].as_str().unwrap_or_default();
        assert!(message.contains("not sent"), "{reply}");
        if message.contains("already queued") {
            refused += 1;
        }
    }
    assert_eq!(refused, 70 - 64, "the queue limit counts changes");
    // Nothing ever went out to the phone.
    assert!(
        probe
            .messages()
            .iter()
            .all(|m| !m.topic.ends_with("/companion/alice-pixel/request")),
        "no request was published"
    );
}

#[test]
fn the_cli_waits_for_the_daemons_own_answer_on_a_queued_companion_call() {
    let bus = PrivateBus::session();
    // The CLI used to give up after `[calls] timeout_ms` + 5 s = 6 s with a
    // retryable timeout while the change stayed queued for 8 s.
    let phone = offline_companion(
        "request_timeout_ms = 1000\nqueue_ttl_ms = 8000",
        &bus.daemon_env(),
    );
    bus.wait_for_daemon(WAIT);
    // The daemon's bound: the call's turn behind earlier calls, then the
    // reading of the app in front a screen action needs (a quarter of the
    // phone's bound), then the call, each within the phone's own bound:
    // 10 s + 2.5 s + 10 s.
    let reply = bus
        .gdbus_call("CallTimeout", &["alice"])
        .expect("CallTimeout");
    assert!(reply.contains("(uint64 22500,)"), "{reply}");
    let reply = bus
        .gdbus_call("CallTimeout", &["nobody"])
        .expect("CallTimeout");
    assert!(reply.contains("(uint64 0,)"), "{reply}");

    let dw = Droidwarden::new(&phone.adb, &phone.config);
    let started = Instant::now();
    let run = dw.run_on_bus(
        &bus.address,
        &[
            "call",
            "--device",
            "alice",
            "screen_control",
            "set_brightness",
            "level=7",
        ],
    );
    let elapsed = started.elapsed();
    assert_ne!(run.code, 0, "{run:?}");
    let error = &run.json["error"];
    assert_eq!(error["code"], "device_offline", "{run:?}");
    assert!(
        error["message"]
            .as_str()
            .is_some_and(|m| m.contains("not sent")),
        "{run:?}"
    );
    assert!(
        elapsed >= Duration::from_secs(7),
        "answered after {elapsed:?}"
    );
}

/// `droidwarden daemon` with this configuration, run to its exit.
fn exit_status(config_toml: &str) -> (i32, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("config.toml");
    std::fs::write(&config, config_toml).expect("config");
    let mut cmd = Command::new(binary("droidwarden"));
    cmd.arg("--config")
        .arg(&config)
        .arg("daemon")
        .env("HOME", dir.path())
        .env(
            "DROIDWARDEN__ADB__SERVER",
            format!("127.0.0.1:{}", free_port()),
        )
        .env("DROIDWARDEN__ADB__START_SERVER", "false")
        .env("DROIDWARDEN__DBUS__BUS", "none")
        .env_remove("NOTIFY_SOCKET")
        .env_remove("STATE_DIRECTORY");
    let out = run_with_timeout(cmd, WAIT);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn an_unusable_state_directory_exits_73_and_a_configuration_error_78() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("a-file");
    std::fs::write(&file, "not a directory").expect("file");
    let mqtt = format!("[mqtt]\nurl = \"mqtt://127.0.0.1:{}\"\n", free_port());

    // The state directory would be below a file: it cannot be created.
    let (code, log) = exit_status(&format!(
        "{mqtt}[state]\ndir = \"{}/state\"\n",
        file.display()
    ));
    assert_eq!(code, 73, "{log}");

    // The directory is fine but the agent's store cannot be created in it.
    let state = dir.path().join("state");
    std::fs::create_dir(&state).expect("state dir");
    std::fs::write(state.join("agent"), "in the way").expect("file");
    let (code, log) = exit_status(&format!(
        "{mqtt}[state]\ndir = \"{}\"\n[llm]\nprovider = \"openai\"\nbase_url = \"http://127.0.0.1:{}/v1\"\nmodel = \"m\"\n",
        state.display(),
        free_port()
    ));
    assert_eq!(code, 73, "{log}");

    // A real configuration error keeps 78 (not restarted by systemd).
    let (code, log) = exit_status(&format!("{mqtt}[agent]\nmax_concurrent_runs = 0\n"));
    assert_eq!(code, 78, "{log}");
    assert!(log.contains("agent.max_concurrent_runs"), "{log}");
}

#[test]
fn a_damaged_user_file_exits_78_and_a_damaged_delivery_store_says_what_to_do() {
    let dir = tempfile::tempdir().expect("temp dir");
    let state = dir.path().join("state");
    std::fs::create_dir(&state).expect("state dir");
    // The embedded broker, whose accounts live in mqtt-users.json.
    let broker = format!(
        "[state]\ndir = \"{}\"\n[broker]\nlisten = \"127.0.0.1:{}\"\n",
        state.display(),
        free_port()
    );
    let users = state.join("mqtt-users.json");
    std::fs::write(&users, "{\"users\": [ garbage").expect("users");
    let (code, log) = exit_status(&broker);
    assert_eq!(code, 78, "a person must fix it: not restarted\n{log}");
    assert!(log.contains("mqtt-users.json"), "{log}");
    assert!(log.contains("move it aside"), "{log}");
    std::fs::remove_file(&users).expect("remove");

    // A delivery store that is not a database: 74, and what to do.
    std::fs::write(state.join("delivery.db"), vec![b'x'; 4096]).expect("store");
    let mqtt = format!("[mqtt]\nurl = \"mqtt://127.0.0.1:{}\"\n", free_port());
    let (code, log) = exit_status(&format!("{mqtt}[state]\ndir = \"{}\"\n", state.display()));
    assert_eq!(code, 74, "{log}");
    assert!(log.contains("delivery.db"), "{log}");
    assert!(log.contains("aside"), "{log}");
}
