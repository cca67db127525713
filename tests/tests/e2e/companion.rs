//! Companion phones through the daemon: a real mosquitto, `droidwarden
//! daemon`, and emulated phones in companion mode beside an ADB one.

use droidwarden_e2e::mqtt::{Daemon, Mosquitto, Probe, call_request, ok_result};
use droidwarden_e2e::{AdbServer, Sim, SimOptions, wait_for};
use droidwarden_e2e::{P, WAIT};
use serde_json::json;
use std::time::{Duration, Instant};

struct Rig {
    probe: Probe,
    adb_sim: Sim,
    alice: Sim,
    _daemon: Daemon,
    _adb: AdbServer,
    _broker: Mosquitto,
}

fn rig(extra: &str) -> Rig {
    let broker = Mosquitto::start();
    let probe = Probe::connect(broker.port);
    let adb = AdbServer::shared();
    let adb_sim = adb.phone(SimOptions::default());
    let alice = Sim::start(SimOptions {
        companion: Some((broker.port, "alice-pixel".into())),
        no_adb: true,
        model: Some("Pixel 9".into()),
        ..Default::default()
    });
    probe.wait_payload(&format!("{P}/companion/alice-pixel/online"), WAIT, "online");
    let config = format!(
        "[mqtt]\nurl = \"mqtt://127.0.0.1:{}\"\n{extra}\n[[devices]]\nname = \"tablet\"\ntransport = \"adb\"\nserial = \"{}\"\n[[devices]]\nname = \"alice\"\ntransport = \"companion\"\ncompanion_id = \"alice-pixel\"\n",
        broker.port,
        adb_sim.serial()
    );
    let daemon = Daemon::start(&adb, &config);
    probe.wait_payload(&format!("{P}/devices/alice/availability"), WAIT, "online");
    probe.wait_payload(&format!("{P}/devices/tablet/availability"), WAIT, "online");
    Rig {
        probe,
        adb_sim,
        alice,
        _daemon: daemon,
        _adb: adb,
        _broker: broker,
    }
}

impl Rig {
    /// Take alice's app off the network (`false`) or bring it back, and
    /// wait until the daemon's availability for alice says so.
    fn set_alice_online(&self, online: bool) {
        self.alice
            .control(json!({"op": "companion", "online": online}));
        let availability = if online { "online" } else { "offline" };
        self.probe.wait_payload(
            &format!("{P}/devices/alice/availability"),
            WAIT,
            availability,
        );
    }
}

#[test]
fn adb_and_companion_phones_side_by_side() {
    let r = rig("");
    ok_result(
        r.probe
            .call(P, "a1", "alice", "wifi_automation", "disable", json!({})),
    );
    assert_eq!(r.alice.state()["wifi"]["enabled"], false);
    assert_eq!(
        r.adb_sim.state()["wifi"]["enabled"],
        true,
        "only alice changed"
    );
    let statuses: Vec<String> = r
        .probe
        .on(&format!(
            "{P}/devices/alice/services/wifi_automation/status"
        ))
        .iter()
        .map(|m| m.json()["state"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(statuses, ["executing", "success"]);

    let reply = r
        .probe
        .call(P, "a2", "alice", "system_info", "info", json!({}));
    assert_eq!(reply["result"]["model"], "Pixel 9", "{reply}");
    ok_result(
        r.probe
            .call(P, "t1", "tablet", "battery", "status", json!({})),
    );

    // Tracking needs the app: it works on alice, and is refused over ADB.
    let reply = r.probe.call(
        P,
        "a3",
        "alice",
        "location",
        "start_tracking",
        json!({"interval_s": 30}),
    );
    assert_eq!(reply["result"]["tracking"], true, "{reply}");
    let reply = r
        .probe
        .call(P, "t2", "tablet", "location", "start_tracking", json!({}));
    assert_eq!(reply["error"]["code"], "unsupported_action", "{reply}");

    // Phone errors travel back as they are.
    let reply = r.probe.call(
        P,
        "a4",
        "alice",
        "app_launcher",
        "stop",
        json!({"package": "com.not.there"}),
    );
    assert_eq!(reply["error"]["code"], "not_found", "{reply}");
}

#[test]
fn phone_events_update_state() {
    let r = rig("");
    r.alice
        .control(json!({"op": "set", "path": "battery.level", "value": 17}));
    r.probe.wait_last(
        &format!("{P}/devices/alice/services/battery/state"),
        WAIT,
        |m| m.json()["level_percent"] == 17,
    );
    r.probe.wait("the raw event", WAIT, |m| {
        m.topic == format!("{P}/devices/alice/events/battery")
    });
}

#[test]
fn a_request_for_an_offline_phone_waits_for_it_to_come_back() {
    let r = rig("");
    r.set_alice_online(false);
    r.probe.publish(
        &format!("{P}/cmd/call"),
        call_request("q1", "alice", "bluetooth_automation", "disable", json!({})).to_string(),
    );
    // Give the daemon time to queue it; no reply may come while offline.
    wait_for("the call to be executing", WAIT, || {
        r.probe
            .on(&format!(
                "{P}/devices/alice/services/bluetooth_automation/status"
            ))
            .iter()
            .any(|m| m.json()["state"] == "executing")
            .then_some(())
    });
    assert!(r.probe.on(&format!("{P}/reply/q1")).is_empty());
    r.alice.control(json!({"op": "companion", "online": true}));
    let reply = r.probe.wait_reply(P, "q1");
    assert_eq!(reply["ok"], true, "{reply}");
    assert_eq!(r.alice.state()["bluetooth"]["enabled"], false);
}

#[test]
fn a_queued_request_fails_after_its_time_to_live() {
    let r = rig("[companion]\nqueue_ttl_ms = 1000\nrequest_timeout_ms = 2000");
    r.set_alice_online(false);
    let start = Instant::now();
    let reply = r
        .probe
        .call(P, "ttl1", "alice", "battery", "status", json!({}));
    assert_eq!(reply["error"]["code"], "device_offline", "{reply}");
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    r.set_alice_online(true);
    // The expired request is not performed late.
    ok_result(
        r.probe
            .call(P, "ttl2", "alice", "battery", "status", json!({})),
    );
}

#[test]
fn duplicate_responses_from_a_phone_are_applied_once() {
    let r = rig("");
    r.alice
        .control(json!({"op": "companion_duplicates", "enabled": true}));
    for i in 0..5 {
        ok_result(
            r.probe
                .call(P, &format!("d{i}"), "alice", "battery", "status", json!({})),
        );
    }
    for i in 0..5 {
        assert_eq!(r.probe.on(&format!("{P}/reply/d{i}")).len(), 1);
    }
}
