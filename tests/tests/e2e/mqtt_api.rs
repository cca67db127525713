//! The daemon's MQTT side end to end: a real mosquitto, the real adb server,
//! emulated phones, `droidwarden daemon` as a process, and a probe client.

use droidwarden_e2e::mqtt::{Daemon, Mosquitto, Probe, call_request, phone_config};
use droidwarden_e2e::{AdbServer, Sim, SimOptions, wait_for};
use droidwarden_e2e::{P, WAIT};
use serde_json::{Value, json};

struct Rig {
    broker: Mosquitto,
    probe: Probe,
    sim: Sim,
    daemon: Daemon,
    adb: AdbServer,
}

fn config_for(broker: &Mosquitto, sim: &Sim, name: &str, extra: &str) -> String {
    phone_config(
        broker.port,
        &sim.serial(),
        name,
        &format!("max_payload_bytes = 4096\n{extra}"),
    )
}

fn rig(extra: &str) -> Rig {
    let broker = Mosquitto::start();
    let probe = Probe::connect(broker.port);
    let adb = AdbServer::shared();
    let sim = adb.phone(SimOptions {
        model: Some("Pixel 8".into()),
        ..Default::default()
    });
    let config = config_for(&broker, &sim, "phone", extra);
    let daemon = Daemon::start(&adb, &config);
    probe.wait_payload(&format!("{P}/availability"), WAIT, "online");
    probe.wait_payload(&format!("{P}/devices/phone/availability"), WAIT, "online");
    Rig {
        broker,
        probe,
        sim,
        daemon,
        adb,
    }
}

/// A `cmd/call` body for the phone.
fn call(id: &str, service: &str, action: &str, params: Value) -> Value {
    call_request(id, "phone", service, action, params)
}

#[test]
fn commands_reply_and_every_call_publishes_status_and_state() {
    let r = rig("");
    let reply = r
        .probe
        .request(P, "call", call("b1", "batteryMonitor", "status", json!({})));
    assert_eq!(reply["ok"], true, "{reply}");
    assert_eq!(reply["id"], "b1");
    assert_eq!(
        reply["result"]["level_percent"],
        r.sim.state()["battery"]["level"]
    );
    let state = r.probe.wait_last(
        &format!("{P}/devices/phone/services/battery/state"),
        WAIT,
        |m| m.retain || !m.payload.is_empty(),
    );
    assert_eq!(
        state.json()["level_percent"],
        reply["result"]["level_percent"]
    );

    let status_topic = format!("{P}/devices/phone/services/wifi_automation/status");
    let before = r.probe.on(&status_topic).len();
    let reply = r.probe.request(
        P,
        "call",
        call("w1", "wifi_automation", "disable", json!({})),
    );
    assert_eq!(reply["ok"], true, "{reply}");
    assert_eq!(r.sim.state()["wifi"]["enabled"], false);
    r.probe
        .wait_last(&status_topic, WAIT, |m| m.json()["state"] == "success");
    let statuses: Vec<Value> = r.probe.on(&status_topic)[before..]
        .iter()
        .map(|m| m.json())
        .collect();
    assert_eq!(statuses.len(), 2, "{statuses:?}");
    assert_eq!(statuses[0]["state"], "executing");
    assert_eq!(statuses[0]["action"], "disable");
    assert_eq!(statuses[1]["state"], "success");
    assert!(statuses[1]["duration_ms"].is_u64() && statuses[1]["finished_at"].is_string());
    // A change is followed by a fresh read of the service's state.
    r.probe.wait_last(
        &format!("{P}/devices/phone/services/wifi_automation/state"),
        WAIT,
        |m| m.json()["enabled"] == false,
    );

    // A failing call publishes error, with the error.
    let reply = r.probe.request(
        P,
        "call",
        call(
            "l1",
            "app_launcher",
            "launch",
            json!({"package": "com.not.there"}),
        ),
    );
    assert_eq!(reply["error"]["code"], "not_found", "{reply}");
    let last = r.probe.wait_last(
        &format!("{P}/devices/phone/services/app_launcher/status"),
        WAIT,
        |m| m.json()["state"] == "error",
    );
    assert_eq!(last.json()["error"]["code"], "not_found");

    let reply = r.probe.request(P, "devices", json!({"id": "d1"}));
    assert_eq!(reply["result"]["devices"][0]["name"], "phone", "{reply}");
    assert_eq!(reply["result"]["devices"][0]["online"], true);

    for (id, body, code) in [
        (
            "e1",
            json!({"id": "e1", "device": "garage", "service": "battery", "action": "status"}),
            "device_not_found",
        ),
        (
            "e2",
            json!({"id": "e2", "device": "phone", "service": "toaster", "action": "status"}),
            "unknown_service",
        ),
        (
            "e3",
            json!({"id": "e3", "device": "phone", "service": "battery", "action": "explode"}),
            "unknown_action",
        ),
        (
            "e4",
            call(
                "e4",
                "screen_control",
                "set_brightness",
                json!({"level": 900}),
            ),
            "invalid_params",
        ),
        (
            "e5",
            json!({"id": "e5", "service": "battery"}),
            "invalid_request",
        ),
    ] {
        let reply = r.probe.request(P, "call", body);
        assert_eq!(reply["ok"], false, "{id}: {reply}");
        assert_eq!(reply["error"]["code"], code, "{id}: {reply}");
        assert!(
            reply["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty())
        );
    }
}

#[test]
fn an_mqtt5_response_topic_is_honoured() {
    let r = rig("");
    let status = std::process::Command::new("mosquitto_pub")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &r.broker.port.to_string(),
            "-V",
            "mqttv5",
            "-q",
            "1",
            "-t",
            &format!("{P}/cmd/call"),
        ])
        .args([
            "-D",
            "publish",
            "response-topic",
            "droidwarden/responses/answers",
            "-D",
            "publish",
            "correlation-data",
            "corr-42",
        ])
        .args([
            "-m",
            &json!({"service": "battery", "action": "status", "device": "phone"}).to_string(),
        ])
        .status()
        .expect("mosquitto_pub");
    assert!(status.success());
    let reply = r.probe.wait("a reply on the response topic", WAIT, |m| {
        m.topic == "droidwarden/responses/answers"
    });
    assert_eq!(reply.json()["ok"], true, "{}", reply.payload);
}

#[test]
fn home_assistant_discovery_and_its_controls() {
    let r = rig("");
    let node = "droidwarden_phone";
    let switch = r.probe.wait("the Wi-Fi switch config", WAIT, |m| {
        m.topic == format!("homeassistant/switch/{node}/wifi/config")
    });
    let config = switch.json();
    for key in [
        "name",
        "unique_id",
        "device",
        "availability",
        "state_topic",
        "command_topic",
    ] {
        assert!(!config[key].is_null(), "missing {key} in {config}");
    }
    assert_eq!(config["device"]["identifiers"][0], node);
    let battery = r.probe.wait("the battery sensor config", WAIT, |m| {
        m.topic == format!("homeassistant/sensor/{node}/battery/config")
    });
    assert_eq!(battery.json()["device_class"], "battery");

    let command_topic = config["command_topic"].as_str().unwrap().to_owned();
    r.probe.publish(&command_topic, "OFF");
    wait_for("Wi-Fi to go off", WAIT, || {
        (r.sim.state()["wifi"]["enabled"] == false).then_some(())
    });
    r.probe
        .wait_last(config["state_topic"].as_str().unwrap(), WAIT, |m| {
            m.json()["enabled"] == false
        });

    let brightness = r.probe.wait("the brightness config", WAIT, |m| {
        m.topic == format!("homeassistant/number/{node}/brightness/config")
    });
    r.probe
        .publish(brightness.json()["command_topic"].as_str().unwrap(), "77");
    wait_for("brightness 77", WAIT, || {
        (r.sim.state()["display"]["brightness"] == 77).then_some(())
    });

    // A bad payload is refused without touching the phone.
    r.probe.publish(&command_topic, "MAYBE");
    r.probe.wait("an error report", WAIT, |m| {
        m.topic == format!("{P}/errors") && m.payload.contains("MAYBE")
    });
}

#[test]
fn an_adb_phone_that_disappears_goes_offline_and_comes_back() {
    let r = rig("");
    let topic = format!("{P}/devices/phone/availability");
    r.sim.control(json!({"op": "listen", "enabled": false}));
    r.probe.wait_payload(&topic, WAIT, "offline");
    let reply = r
        .probe
        .request(P, "call", call("off1", "battery", "status", json!({})));
    assert_eq!(reply["error"]["code"], "device_offline", "{reply}");
    r.sim.control(json!({"op": "listen", "enabled": true}));
    r.probe.wait_payload(&topic, WAIT, "online");
    let reply = r
        .probe
        .request(P, "call", call("on1", "battery", "status", json!({})));
    assert_eq!(reply["ok"], true, "{reply}");
}

#[test]
fn the_broker_restarts_and_every_accepted_command_gets_exactly_one_reply() {
    let mut r = rig("");
    r.sim
        .control(json!({"op": "fault", "kind": "delay", "ms": 1500}));
    let ids: Vec<String> = (0..6).map(|i| format!("r{i}")).collect();
    for id in &ids {
        r.probe.publish(
            &format!("{P}/cmd/call"),
            call(id, "battery", "status", json!({})).to_string(),
        );
    }
    // Accepted: the daemon announced each as executing (the phone takes
    // 1.5 s to answer, so the replies are still to come).
    let status = format!("{P}/devices/phone/services/battery/status");
    wait_for("every call to be executing", WAIT, || {
        (r.probe
            .on(&status)
            .iter()
            .filter(|m| m.json()["state"] == "executing")
            .count()
            >= ids.len())
        .then_some(())
    });
    r.broker.restart();
    for id in &ids {
        let topic = format!("{P}/reply/{id}");
        wait_for(&format!("a reply to {id}"), WAIT, || {
            (!r.probe.on(&topic).is_empty()).then_some(())
        });
    }
    r.sim.control(json!({"op": "fault", "kind": "clear"}));
    let reply = r.probe.request(
        P,
        "call",
        call("after-restart", "battery", "status", json!({})),
    );
    assert_eq!(reply["ok"], true, "{reply}");
    for id in &ids {
        assert_eq!(
            r.probe.on(&format!("{P}/reply/{id}")).len(),
            1,
            "{id} must get exactly one reply"
        );
    }
    r.probe
        .wait_payload(&format!("{P}/availability"), WAIT, "online");
}

#[test]
fn sigterm_says_offline_and_exits_cleanly() {
    let mut r = rig("");
    assert_eq!(r.daemon.terminate(), Some(0), "{}", r.daemon.log());
    r.probe
        .wait_payload(&format!("{P}/availability"), WAIT, "offline");
    assert!(r.daemon.log().contains("stopped"));
}

#[test]
fn a_device_removed_from_the_configuration_leaves_home_assistant() {
    let r = rig("");
    let topic = "homeassistant/switch/droidwarden_phone/wifi/config";
    r.probe
        .wait("the first discovery", WAIT, |m| m.topic == topic);
    let config = config_for(&r.broker, &r.sim, "renamed", "");
    let _daemon = r.daemon.restart_with(&r.adb, &config);
    r.probe.wait_last(topic, WAIT, |m| m.payload.is_empty());
    // Its retained state goes too, not only its discovery.
    r.probe.wait_last(
        &format!("{P}/devices/phone/services/battery/state"),
        WAIT,
        |m| m.payload.is_empty(),
    );
    r.probe.wait("the new name's discovery", WAIT, |m| {
        m.topic == "homeassistant/switch/droidwarden_renamed/wifi/config"
    });
}

/// A device removed while Home Assistant was away (the embedded broker
/// restarts empty, so the clearing at start reached nobody) leaves Home
/// Assistant when Home Assistant next says it is online: its config once
/// more, then the clearing (Home Assistant removes an entity on an empty
/// config only when it discovered it since it started).
#[test]
fn a_device_removed_while_home_assistant_was_away_leaves_at_its_next_birth() {
    let port = droidwarden_e2e::free_port();
    let adb = AdbServer::shared();
    let sim = adb.phone(SimOptions::default());
    let config = |name: &str| {
        format!(
            "[broker]\nlisten = \"127.0.0.1:{port}\"\n[[devices]]\nname = \"{name}\"\ntransport = \"adb\"\nserial = \"{}\"\n",
            sim.serial()
        )
    };
    let topic = "homeassistant/switch/droidwarden_phone/wifi/config";
    let daemon = Daemon::start(&adb, &config("phone"));
    let secret = daemon.mqtt_secret();
    {
        let ha = Probe::connect_as(port, "droidwarden", &secret);
        ha.wait("the first discovery", WAIT, |m| {
            m.topic == topic && !m.payload.is_empty()
        });
    }
    // Restarted without it while nobody listens: the clearing is lost
    // with the old broker's memory.
    let daemon = daemon.restart_with(&adb, &config("renamed"));
    wait_for("the embedded broker", WAIT, || {
        std::net::TcpStream::connect(("127.0.0.1", port)).ok()
    });
    let ha = Probe::connect_as(port, "droidwarden", &daemon.mqtt_secret());
    ha.wait("the new name's discovery", WAIT, |m| {
        m.topic == "homeassistant/switch/droidwarden_renamed/wifi/config"
    });
    // The new broker keeps nothing of the removed device. (The daemon's
    // own clearing at start, an empty message that is never retained, is
    // seen live when this client subscribed before it went out.)
    let on_topic = || -> Vec<droidwarden_e2e::mqtt::Message> {
        ha.messages()
            .into_iter()
            .filter(|m| m.topic == topic)
            .collect()
    };
    assert!(
        on_topic().iter().all(|m| m.payload.is_empty() && !m.retain),
        "the new broker has nothing of the removed device"
    );
    let before = on_topic().len();
    // Home Assistant's birth message.
    ha.publish("homeassistant/status", "online");
    let (early, seen) = wait_for("the config, then its clearing", WAIT, || {
        let mut after: Vec<_> = on_topic().split_off(before);
        // The daemon's clearing at start may still arrive after `before`
        // on a slow machine: everything before the config is that.
        let config = after.iter().position(|m| !m.payload.is_empty())?;
        let seen = after.split_off(config);
        (seen.len() >= 2).then_some((after, seen))
    });
    assert!(
        early.iter().all(|m| m.payload.is_empty() && !m.retain),
        "only the clearing at start comes before the config"
    );
    assert!(seen[1].payload.is_empty(), "then its clearing");
    // Nothing of it is retained.
    let later = Probe::connect_as(port, "droidwarden", &daemon.mqtt_secret());
    later.wait("the renamed device's discovery", WAIT, |m| {
        m.topic == "homeassistant/switch/droidwarden_renamed/wifi/config"
    });
    assert!(!later.messages().iter().any(|m| m.topic == topic));
}

fn sh(dir: &std::path::Path, script: &str) {
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .output()
        .expect("sh");
    assert!(
        out.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// TLS with a private CA, and a username with the password in a file (as a
/// systemd credential would be): the daemon connects, and the password
/// appears nowhere in its log.
#[test]
fn a_tls_broker_with_a_password() {
    let plain = droidwarden_e2e::free_port();
    let tls = droidwarden_e2e::free_port();
    let dir = tempfile::tempdir().unwrap();
    sh(
        dir.path(),
        "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj /CN=droidwarden-test-ca 2>/dev/null && \
         openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=127.0.0.1 2>/dev/null && \
         printf 'subjectAltName=IP:127.0.0.1\\n' > san.ext && \
         openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt -days 2 -extfile san.ext 2>/dev/null && \
         mosquitto_passwd -b -c passwd dw 'pa55 w0rd!' && printf 'pa55 w0rd!\\n' > secret && chmod 755 . && chmod 644 *",
    );
    let d = dir.path().display();
    let broker = Mosquitto::start_with(
        plain,
        &format!(
            "listener {tls} 127.0.0.1\nallow_anonymous false\npassword_file {d}/passwd\ncafile {d}/ca.crt\ncertfile {d}/server.crt\nkeyfile {d}/server.key\n"
        ),
    );
    let probe = Probe::connect(broker.port);
    let adb = AdbServer::shared();
    let config = format!(
        "[mqtt]\nurl = \"mqtts://127.0.0.1:{tls}\"\nca_file = \"{d}/ca.crt\"\nusername = \"dw\"\npassword_file = \"{d}/secret\"\n"
    );
    let daemon = Daemon::start(&adb, &config);
    probe.wait_payload(&format!("{P}/availability"), WAIT, "online");
    let reply = probe.request(P, "devices", json!({"id": "tls-1"}));
    assert_eq!(reply["ok"], true, "{reply}");
    assert!(
        !daemon.log().contains("pa55"),
        "the password leaked into the log"
    );
}

/// With no broker configured the daemon brings its own, on loopback.
#[test]
fn the_embedded_broker_serves_when_no_broker_is_configured() {
    let port = droidwarden_e2e::free_port();
    let adb = AdbServer::shared();
    let sim = adb.phone(SimOptions::default());
    let config = format!(
        "[broker]\nlisten = \"127.0.0.1:{port}\"\n[[devices]]\nname = \"phone\"\ntransport = \"adb\"\nserial = \"{}\"\n",
        sim.serial()
    );
    let mut daemon = Daemon::start(&adb, &config);
    wait_for("the embedded broker", WAIT, || {
        std::net::TcpStream::connect(("127.0.0.1", port)).ok()
    });
    // It requires a login: the daemon's own account (admin) will do.
    let probe = Probe::connect_as(port, "droidwarden", &daemon.mqtt_secret());
    probe.wait_payload(&format!("{P}/availability"), WAIT, "online");
    let reply = probe.request(P, "call", call("emb-1", "battery", "status", json!({})));
    assert_eq!(reply["ok"], true, "{reply}");
    probe.wait("discovery on the embedded broker", WAIT, |m| {
        m.topic.starts_with("homeassistant/")
    });
    assert_eq!(daemon.terminate(), Some(0));
    assert!(
        !daemon.log().contains("connection lost"),
        "{}",
        daemon.log()
    );
}
