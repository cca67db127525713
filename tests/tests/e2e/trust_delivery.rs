//! "Every command run once, in order, nothing silently lost" (issue #10),
//! end to end: a real mosquitto, the real adb server, an emulated phone,
//! and `droidwarden daemon` as a process, killed and restarted.
//!
//! What a phone really ran is read from the sim's command log, never from
//! the daemon's own word. The semantics that need no process — the order
//! of fifty changes, response topics outside `<prefix>/responses/` — are
//! tested in-process (`daemon/src/daemon/in_process.rs`).

use droidwarden_e2e::P;
use droidwarden_e2e::mqtt::{Daemon, Mosquitto, NO_POLLS, Probe, one_phone_config};
use droidwarden_e2e::{AdbServer, Sim, SimOptions, wait_for};
use serde_json::{Value, json};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(60);

struct Rig {
    broker: Mosquitto,
    probe: Probe,
    sim: Sim,
    daemon: Option<Daemon>,
    adb: AdbServer,
    config: String,
}

/// Everything but the daemon, on `broker`.
fn world(broker: Mosquitto) -> Rig {
    let probe = Probe::connect(broker.port);
    let adb = AdbServer::shared();
    let sim = adb.phone(SimOptions::default());
    // No polling: the command log holds only what the tests ask for.
    let config = one_phone_config(broker.port, &sim.serial(), NO_POLLS);
    Rig {
        broker,
        probe,
        sim,
        daemon: None,
        adb,
        config,
    }
}

fn rig() -> Rig {
    let mut rig = world(Mosquitto::start());
    rig.start(tempfile::tempdir().expect("state dir"));
    rig
}

/// A rig whose phone calls are bounded by `call_ms` (a call that waits
/// that long behind earlier ones is answered `busy`, not sent).
fn rig_with_call_timeout(call_ms: u64) -> Rig {
    let mut rig = world(Mosquitto::start());
    rig.config = one_phone_config(
        rig.broker.port,
        &rig.sim.serial(),
        &format!("{NO_POLLS}[calls]\ntimeout_ms = {call_ms}\n"),
    );
    rig.start(tempfile::tempdir().expect("state dir"));
    rig
}

impl Rig {
    /// Start the daemon on `state` and wait until it serves the phone.
    fn start(&mut self, state: tempfile::TempDir) {
        let before = self.probe.on(&format!("{P}/availability")).len();
        self.daemon = Some(Daemon::start_with_state(&self.adb, &self.config, state));
        wait_for("the daemon to come online", WAIT, || {
            self.probe.on(&format!("{P}/availability"))[before..]
                .iter()
                .any(|m| m.payload == "online")
                .then_some(())
        });
        self.probe
            .wait_payload(&format!("{P}/devices/phone/availability"), WAIT, "online");
        // The commands subscription is acknowledged: a request is answered.
        let marker = format!("ready-{}", droidwarden_e2e::free_port());
        let reply = self.probe.request(P, "devices", json!({"id": marker}));
        assert_eq!(reply["ok"], true, "{reply}");
    }

    /// Publish a `cmd/call` body without waiting for its reply.
    fn send_call(&self, body: &Value) {
        self.probe
            .publish(&format!("{P}/cmd/call"), body.to_string());
    }

    /// Publish a brightness change to each of `levels` (request ids
    /// `<tag>-<level>`) without waiting.
    fn send_levels(&self, tag: &str, levels: &[u64]) {
        for level in levels {
            self.send_call(&set_brightness(&format!("{tag}-{level}"), *level));
        }
    }

    /// Wait for the replies to [`send_levels`](Self::send_levels): each a
    /// success.
    fn wait_levels_ok(&self, tag: &str, levels: &[u64]) {
        for level in levels {
            let reply = self.wait_reply(&format!("{tag}-{level}"));
            assert_eq!(reply["ok"], true, "{reply}");
        }
    }

    /// SIGKILL the daemon (no shutdown at all) and keep its state.
    fn kill(&mut self) -> tempfile::TempDir {
        self.daemon.take().expect("a daemon").kill()
    }

    /// SIGTERM the daemon, wait for it, and keep its state.
    fn stop(&mut self) -> tempfile::TempDir {
        let mut daemon = self.daemon.take().expect("a daemon");
        assert_eq!(daemon.terminate(), Some(0));
        daemon.kill()
    }

    /// Wait for the `n`-th reply (from 1) to `id`.
    fn wait_nth_reply(&self, id: &str, n: usize) -> Value {
        wait_for(&format!("reply {n} to {id}"), WAIT, || {
            self.replies(id).get(n - 1).cloned()
        })
    }

    /// Two `cmd/devices` requests answered one after the other: every
    /// command published before them has had its id recorded (each
    /// request's id is committed in the store's order before its reply).
    fn ids_recorded(&self, tag: &str) {
        for n in 0..2 {
            let reply = self
                .probe
                .request(P, "devices", json!({"id": format!("{tag}-{n}")}));
            assert_eq!(reply["ok"], true, "{reply}");
        }
    }

    /// The brightness levels the phone was told to set, in order.
    fn brightness_log(&self) -> Vec<u64> {
        self.sim
            .commands()
            .iter()
            .filter(|argv| {
                argv.len() == 5 && argv[..4] == ["settings", "put", "system", "screen_brightness"]
            })
            .filter_map(|argv| argv[4].parse().ok())
            .collect()
    }

    fn replies(&self, id: &str) -> Vec<Value> {
        self.probe.on_json(&format!("{P}/reply/{id}"))
    }

    fn wait_reply(&self, id: &str) -> Value {
        wait_for(&format!("a reply to {id}"), WAIT, || {
            self.replies(id).first().cloned()
        })
    }
}

/// The `cmd/call` body setting the phone's brightness to `level`.
fn set_brightness(id: &str, level: u64) -> Value {
    json!({"id": id, "device": "phone", "service": "screen_control",
           "action": "set_brightness", "params": {"level": level}})
}

/// A write on the phone after everything before it: once it is answered,
/// every earlier command on the phone has started (the order guarantee).
fn barrier(r: &Rig, id: &str) {
    let reply = r.probe.request(P, "call", set_brightness(id, 200));
    assert_eq!(reply["ok"], true, "{reply}");
}

#[test]
fn fifty_home_assistant_brightness_commands_run_in_order() {
    let r = rig();
    r.sim.clear_log();
    let topic = format!("{P}/devices/phone/ha/brightness/set");
    let levels: Vec<u64> = (101..=150).collect();
    for level in &levels {
        r.probe.publish(&topic, level.to_string());
    }
    wait_for("the phone to run 50 brightness changes", WAIT, || {
        (r.brightness_log().len() >= levels.len()).then_some(())
    });
    assert_eq!(
        r.brightness_log(),
        levels,
        "the phone ran them out of order"
    );
    assert_eq!(r.sim.state()["display"]["brightness"], 150);
}

#[test]
fn a_retained_command_never_runs_at_start_or_restart() {
    let broker = Mosquitto::start();
    let probe = Probe::connect(broker.port);
    // Published (retained) before any daemon exists.
    probe.publish_retained(
        &format!("{P}/cmd/call"),
        set_brightness("retained-1", 33).to_string(),
    );
    probe.publish_retained(&format!("{P}/devices/phone/ha/brightness/set"), "34");
    drop(probe);
    let mut r = world(broker);
    r.start(tempfile::tempdir().expect("state dir"));
    barrier(&r, "retained-barrier-1");
    let state = r.stop();
    r.start(state);
    barrier(&r, "retained-barrier-2");
    let log = r.brightness_log();
    assert!(
        !log.contains(&33) && !log.contains(&34),
        "a retained command ran: {log:?}"
    );
    assert!(r.replies("retained-1").is_empty());
}

#[test]
fn a_repeated_id_is_not_run_again_after_a_kill_and_restart() {
    let mut r = rig();
    r.sim.clear_log();
    let body = set_brightness("once-1", 77);
    r.send_call(&body);
    let first = r.wait_reply("once-1");
    assert_eq!(first["ok"], true, "{first}");
    let state = r.kill();
    r.start(state);
    r.send_call(&body);
    wait_for("the repeat's reply", WAIT, || {
        (r.replies("once-1").len() >= 2).then_some(())
    });
    assert_eq!(
        r.replies("once-1")[1],
        first,
        "the repeat gets the first reply"
    );
    barrier(&r, "once-barrier");
    assert_eq!(
        r.brightness_log().iter().filter(|l| **l == 77).count(),
        1,
        "{:?}",
        r.brightness_log()
    );
}

#[test]
fn commands_sent_while_the_daemon_is_down_run_once_after_it_returns() {
    let mut r = rig();
    r.sim.clear_log();
    let state = r.kill();
    // The broker has noticed: it published the daemon's will.
    r.probe
        .wait_payload(&format!("{P}/availability"), WAIT, "offline");
    let levels: Vec<u64> = (1..=20).map(|i| i + 10).collect();
    run_once_after_restart(&mut r, state, "away", &levels);

    // The same across a clean stop (SIGTERM): the session and its
    // subscriptions outlive the process.
    r.sim.clear_log();
    let state = r.stop();
    let levels: Vec<u64> = (1..=10).map(|i| i + 50).collect();
    run_once_after_restart(&mut r, state, "stopped", &levels);
}

/// Brightness changes to `levels` (ids `<tag>-<level>`) sent while the
/// daemon is down, restarted on `state`: each answered once with success,
/// and the phone ran each once, in order, before the barrier's.
fn run_once_after_restart(r: &mut Rig, state: tempfile::TempDir, tag: &str, levels: &[u64]) {
    r.send_levels(tag, levels);
    r.start(state);
    r.wait_levels_ok(tag, levels);
    barrier(r, &format!("{tag}-barrier"));
    for level in levels {
        assert_eq!(
            r.replies(&format!("{tag}-{level}")).len(),
            1,
            "{tag}-{level}"
        );
    }
    assert_eq!(
        r.brightness_log(),
        [levels, &[200]].concat(),
        "each change once, in order"
    );
}

#[test]
fn a_call_cut_short_by_a_kill_is_reported_as_error_after_restart() {
    let mut r = rig();
    let status_topic = format!("{P}/devices/phone/services/screen_control/status");
    r.sim
        .control(json!({"op": "fault", "kind": "delay", "ms": 10000}));
    r.send_call(&set_brightness("slow-1", 99));
    r.probe
        .wait_last(&status_topic, WAIT, |m| m.json()["state"] == "executing");
    let state = r.kill();
    r.sim.control(json!({"op": "fault", "kind": "clear"}));
    // The broker still holds the retained `executing`.
    r.probe
        .wait_last(&status_topic, WAIT, |m| m.json()["state"] == "executing");
    r.start(state);
    let last = r
        .probe
        .wait_last(&status_topic, WAIT, |m| m.json()["state"] == "error");
    let body = last.json();
    assert_eq!(body["action"], "set_brightness", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("stopped during this call"),
        "{body}"
    );
    // Its id is not run again either: its first run may have taken effect.
    r.send_call(&set_brightness("slow-1", 99));
    let reply = r.wait_reply("slow-1");
    assert_eq!(reply["ok"], false, "{reply}");
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("interrupted"),
        "{reply}"
    );
}

/// The error code of a reply (`""` for a success).
fn code(reply: &Value) -> &str {
    reply["error"]["code"].as_str().unwrap_or_default()
}

#[test]
fn after_a_kill_a_command_that_only_waited_runs_and_the_one_sent_does_not() {
    let mut r = rig();
    let status_topic = format!("{P}/devices/phone/services/screen_control/status");
    r.sim
        .control(json!({"op": "fault", "kind": "delay", "ms": 10000}));
    // One change goes to the phone (and hangs there); two wait behind it.
    r.send_call(&set_brightness("sent-1", 11));
    r.probe
        .wait_last(&status_topic, WAIT, |m| m.json()["state"] == "executing");
    r.send_call(&set_brightness("waited-2", 22));
    r.send_call(&set_brightness("waited-3", 33));
    r.ids_recorded("recorded");
    let state = r.kill();
    r.sim.control(json!({"op": "fault", "kind": "clear"}));
    r.start(state);
    // The one that went out may have run: not run again.
    r.send_call(&set_brightness("sent-1", 11));
    let reply = r.wait_reply("sent-1");
    assert_eq!(code(&reply), "internal", "{reply}");
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("may have run"),
        "{reply}"
    );
    // The ones that only waited never reached the phone: a repeat runs.
    for (id, level) in [("waited-2", 22), ("waited-3", 33)] {
        r.send_call(&set_brightness(id, level));
        let reply = r.wait_reply(id);
        assert_eq!(reply["ok"], true, "{id}: {reply}");
    }
    let log = r.brightness_log();
    assert_eq!(
        log.iter().filter(|l| [22, 33].contains(*l)).count(),
        2,
        "each waited command ran once: {log:?}"
    );
}

#[test]
fn a_repeat_of_an_id_that_ran_gets_its_reply_even_when_the_queue_is_full() {
    let r = rig();
    let first = r.probe.request(P, "call", set_brightness("ran-1", 10));
    assert_eq!(first["ok"], true, "{first}");
    r.sim
        .control(json!({"op": "fault", "kind": "delay", "ms": 20000}));
    // One change hangs on the phone; the phone's queue (64) fills behind
    // it, and six more are held back unacknowledged.
    for n in 0..70 {
        r.send_call(&set_brightness(&format!("fill-{n}"), 100 + n));
    }
    // The repeat arrives after them: held too, then answered from the
    // store without waiting for a place.
    r.send_call(&set_brightness("ran-1", 10));
    let again = r.wait_nth_reply("ran-1", 2);
    assert_eq!(again, first, "the recorded reply, not `busy`");
    assert!(
        (0..70).all(|n| r.replies(&format!("fill-{n}")).is_empty()),
        "answered while everything before it still waited"
    );
    // Beyond the queue and the held line (64 + 64), `busy` at once, with
    // the reason.
    for n in 70..140 {
        r.send_call(&set_brightness(&format!("fill-{n}"), 100 + n));
    }
    let busy = wait_for("a call refused: queue and held line full", WAIT, || {
        (70..140)
            .flat_map(|n| r.replies(&format!("fill-{n}")))
            .find(|reply| code(reply) == "busy")
    });
    let message = busy["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("queued") && message.contains("unacknowledged"),
        "{busy}"
    );
    assert_eq!(busy["error"]["retryable"], true, "{busy}");
    r.send_call(&set_brightness("ran-1", 10));
    let third = r.wait_nth_reply("ran-1", 3);
    assert_eq!(third, first, "the recorded reply, not `busy`");
    r.sim.control(json!({"op": "fault", "kind": "clear"}));
}

#[test]
fn a_burst_beyond_the_queue_is_held_back_and_runs_in_order() {
    let r = rig();
    r.sim
        .control(json!({"op": "fault", "kind": "delay", "ms": 50}));
    // 120 changes at once: one runs, 64 queue, the rest are held back
    // (their PUBACK withheld) and admitted in order as the queue drains.
    let levels: Vec<u64> = (0..120).collect();
    r.send_levels("burst", &levels);
    r.wait_levels_ok("burst", &levels);
    assert_eq!(r.brightness_log(), levels, "each once, in the order sent");
    r.sim.control(json!({"op": "fault", "kind": "clear"}));
}

#[test]
fn a_busy_answer_leaves_its_id_free_and_final_answers_are_replayed() {
    let r = rig_with_call_timeout(1500);
    let status_topic = format!("{P}/devices/phone/services/screen_control/status");
    r.sim
        .control(json!({"op": "fault", "kind": "delay", "ms": 4000}));
    // "slow" goes to the phone and times out there (it may have run). Once
    // it is out, "slow-2" and "waiting" queue behind it: "slow-2" gets its
    // turn when "slow" times out and holds the phone for another call
    // bound (the phone is stalled: a probe that does not answer), so
    // "waiting" waits longer than its own bound: not sent — `busy`, or
    // `device_offline` since the stalled phone is announced "not
    // answering"; both retryable.
    r.send_call(&set_brightness("slow", 41));
    r.probe
        .wait_last(&status_topic, WAIT, |m| m.json()["state"] == "executing");
    r.send_call(&set_brightness("slow-2", 43));
    r.send_call(&set_brightness("waiting", 42));
    let waiting = r.wait_reply("waiting");
    assert!(
        ["busy", "device_offline"].contains(&code(&waiting)),
        "{waiting}"
    );
    assert!(
        waiting["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("not sent"),
        "{waiting}"
    );
    assert_eq!(waiting["error"]["retryable"], true, "{waiting}");
    let slow = r.wait_reply("slow");
    assert_eq!(code(&slow), "timeout", "{slow}");
    r.wait_reply("slow-2");
    r.sim.control(json!({"op": "fault", "kind": "clear"}));
    // Following `retryable: true` with the same id runs the command.
    r.send_call(&set_brightness("waiting", 42));
    let again = r.wait_nth_reply("waiting", 2);
    assert_eq!(again["ok"], true, "{again}");
    assert_eq!(
        r.brightness_log().iter().filter(|l| **l == 42).count(),
        1,
        "{:?}",
        r.brightness_log()
    );
    // A timeout may have run: its answer is final.
    r.send_call(&set_brightness("slow", 41));
    let again = r.wait_nth_reply("slow", 2);
    assert_eq!(again, slow);
    // So is a refusal that a retry cannot change.
    r.send_call(&set_brightness("bad", 999));
    let bad = r.wait_reply("bad");
    assert_eq!(code(&bad), "invalid_params", "{bad}");
    r.send_call(&set_brightness("bad", 50));
    let again = r.wait_nth_reply("bad", 2);
    assert_eq!(again, bad, "the same id is answered again, not run");
    barrier(&r, "after-bad");
    assert!(
        !r.brightness_log().contains(&50),
        "{:?}",
        r.brightness_log()
    );
}

#[test]
fn after_a_clean_stop_the_ids_live_in_the_main_file_not_the_wal_alone() {
    let mut r = rig();
    let first = r.probe.request(P, "call", set_brightness("kept-1", 77));
    assert_eq!(first["ok"], true, "{first}");
    let state = r.stop();
    // The write-ahead log is lost (or damaged) while the daemon is stopped.
    let wal = state.path().join("delivery.db-wal");
    if wal.exists() {
        std::fs::remove_file(&wal).expect("remove the WAL");
    }
    r.start(state);
    r.send_call(&set_brightness("kept-1", 77));
    let again = r.wait_nth_reply("kept-1", 2);
    assert_eq!(again, first, "answered from the store, not run again");
    barrier(&r, "after-kept");
    assert_eq!(
        r.brightness_log().iter().filter(|l| **l == 77).count(),
        1,
        "{:?}",
        r.brightness_log()
    );
}

/// A change queued behind a slow change, from the CLI: the CLI waits as
/// long as the daemon may take to answer (the call's turn, then the call
/// itself, as `CallTimeout` reports it), so what it shows is the daemon's
/// answer. It never reports a `timeout` of its own, "retryable", for a
/// call that can still run (a script that trusted it would run the change
/// twice).
#[test]
fn the_cli_waits_for_a_change_queued_behind_a_slow_one() {
    let adb = AdbServer::shared();
    let sim = adb.phone(SimOptions::default());
    let runtime = tempfile::tempdir().expect("runtime dir");
    // Each change takes 7.7 s on the phone, within the 8 s bound; the
    // second waits for the first, so it answers after about 15 s: longer
    // than a bound plus the client's margin (13 s), within twice the bound.
    let config = format!(
        "{broker}{NO_POLLS}[calls]\ntimeout_ms = 8000\n[adb]\nconnect = [\"{serial}\"]\n[[devices]]\nname = \"phone\"\ntransport = \"adb\"\nserial = \"{serial}\"\n",
        broker = droidwarden_e2e::mqtt::ANY_BROKER_PORT,
        serial = sim.serial(),
    );
    let daemon = Daemon::start_without_bus(&adb, &config, runtime.path());
    let cli = |args: &[&str]| {
        let run = daemon.cli_without_bus(&adb, runtime.path(), args);
        (run.code, run.stdout, run.stderr)
    };
    wait_for("the phone online through the CLI", WAIT, || {
        let (code, out, _) = cli(&["devices", "--json"]);
        let devices: Value = serde_json::from_str(&out).unwrap_or_default();
        (code == 0 && devices["devices"][0]["online"] == true).then_some(())
    });
    sim.control(json!({"op": "fault", "kind": "delay", "ms": 7700}));
    let brightness = |level: &str| {
        cli(&[
            "call",
            "--device",
            "phone",
            "screen_control",
            "set_brightness",
            &format!("level={level}"),
        ])
    };
    std::thread::scope(|s| {
        let first = s.spawn(|| brightness("21"));
        wait_for("the first change on the phone", WAIT, || {
            let (_, out, _) = cli(&["status", "--json"]);
            out.contains("\"executing\"").then_some(())
        });
        let started = std::time::Instant::now();
        let (code, out, err) = brightness("22");
        let took = started.elapsed();
        assert_eq!(code, 0, "the queued change: {out}{err} after {took:?}");
        assert!(
            took > Duration::from_secs(13),
            "it waited behind the first ({took:?}): the case is exercised"
        );
        let (code, out, err) = first.join().expect("first call");
        assert_eq!(code, 0, "{out}{err}");
    });
    sim.control(json!({"op": "fault", "kind": "clear"}));
    let log: Vec<Vec<String>> = sim
        .commands()
        .into_iter()
        .filter(|argv| {
            argv.len() == 5 && argv[..4] == ["settings", "put", "system", "screen_brightness"]
        })
        .collect();
    assert_eq!(log.len(), 2, "each change ran once: {log:?}");
}

/// A phone that freezes, as one whose adbd stops answering but keeps what
/// it is sent and runs it all when it resumes (issue #34, item 7): the
/// change that timed out may still run, so nothing follows it into the
/// phone until a check answers. While frozen the phone is shown as not
/// answering and the next change is refused unsent; once it resumes, what
/// it kept runs, the next change goes after it, and each ran once, in the
/// order accepted (checked against the phone's own command log).
#[test]
fn a_frozen_phone_gets_nothing_more_until_it_answers() {
    let r = rig_with_call_timeout(1500);
    let availability = format!("{P}/devices/phone/availability");
    r.probe
        .wait_last(&availability, WAIT, |m| m.payload == "online");
    r.sim.control(json!({"op": "fault", "kind": "freeze"}));
    r.send_call(&set_brightness("frozen-1", 61));
    let first = r.wait_reply("frozen-1");
    assert_eq!(code(&first), "timeout", "sent, may have run: {first}");
    r.probe
        .wait_last(&availability, WAIT, |m| m.payload == "offline");
    r.send_call(&set_brightness("frozen-2", 62));
    let second = r.wait_reply("frozen-2");
    assert!(
        ["device_offline", "busy"].contains(&code(&second)),
        "{second}"
    );
    assert_eq!(second["error"]["retryable"], true, "{second}");
    assert!(
        second["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("not sent") || m.contains("nothing was sent")),
        "{second}"
    );
    assert!(r.brightness_log().is_empty(), "nothing ran while frozen");
    r.sim.control(json!({"op": "fault", "kind": "thaw"}));
    // What the phone kept runs now: the change that timed out.
    wait_for("the kept change to run", WAIT, || {
        (r.brightness_log() == [61]).then_some(())
    });
    r.send_call(&set_brightness("after-3", 63));
    let third = r.wait_reply("after-3");
    assert_eq!(third["ok"], true, "{third}");
    r.probe
        .wait_last(&availability, WAIT, |m| m.payload == "online");
    assert_eq!(
        r.brightness_log(),
        [61, 63],
        "in the order accepted, each once; the refused change never ran"
    );
}
