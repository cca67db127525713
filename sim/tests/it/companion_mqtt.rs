//! Companion mode against a real broker: a private `mosquitto` on a free
//! loopback port per test, the emulated phone's companion app, and on the
//! daemon's side either a plain MQTT client or the bridge's `CompanionHub`
//! wired to MQTT the way the daemon does it. Every wait polls or listens
//! with a deadline; nothing sleeps hoping something is ready.

use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use droidwarden_bridge::Registry;
use droidwarden_bridge::companion::{
    CompanionConfig, CompanionHub, ResponseDisposition, presence_from_payload,
};
use droidwarden_e2e::documented_block;
use droidwarden_e2e::mqtt::Mosquitto;
use droidwarden_services::{Catalogue, ErrorCode};
use droidwarden_sim::{CompanionSettings, Fault, Sim, SimConfig, SimHandle};
use rumqttc::{AsyncClient, Event, MqttOptions, Packet, Publish, QoS};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

const DEADLINE: Duration = Duration::from_secs(20);

/// An MQTT client whose event loop runs in a task; publishes it receives
/// are buffered so a test can wait for a topic without losing others.
struct Mqtt {
    client: AsyncClient,
    rx: mpsc::UnboundedReceiver<Publish>,
    buffer: VecDeque<Publish>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Mqtt {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Mqtt {
    async fn connect(port: u16, id: &str, filters: &[&str]) -> Self {
        Self::connect_as(port, id, None, filters).await
    }

    async fn connect_as(
        port: u16,
        id: &str,
        credentials: Option<(&str, &str)>,
        filters: &[&str],
    ) -> Self {
        let mut options = MqttOptions::new(id, "127.0.0.1", port);
        if let Some((user, password)) = credentials {
            options.set_credentials(user, password);
        }
        options.set_keep_alive(Duration::from_secs(5));
        options.set_max_packet_size(1 << 20, 1 << 20);
        let (client, mut eventloop) = AsyncClient::new(options, 64);
        let (tx, rx) = mpsc::unbounded_channel();
        let (subacks, mut subacked) = mpsc::unbounded_channel();
        let task = tokio::spawn(async move {
            loop {
                match eventloop.poll().await {
                    Ok(Event::Incoming(Packet::Publish(p))) => {
                        if tx.send(p).is_err() {
                            return;
                        }
                    }
                    Ok(Event::Incoming(Packet::SubAck(_))) => {
                        let _ = subacks.send(());
                    }
                    Ok(_) => {}
                    Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                }
            }
        });
        for filter in filters {
            client
                .subscribe(*filter, QoS::AtLeastOnce)
                .await
                .expect("subscribe");
        }
        for _ in filters {
            tokio::time::timeout(DEADLINE, subacked.recv())
                .await
                .expect("SubAck within the deadline")
                .expect("event loop running");
        }
        Self {
            client,
            rx,
            buffer: VecDeque::new(),
            task,
        }
    }

    /// The next publish on `topic` that `accept` likes; others on that
    /// topic are dropped, other topics stay buffered.
    async fn next_where(&mut self, topic: &str, accept: impl Fn(&Publish) -> bool) -> Publish {
        if let Some(pos) = self
            .buffer
            .iter()
            .position(|p| p.topic == topic && accept(p))
        {
            return self.buffer.remove(pos).expect("present");
        }
        self.buffer.retain(|p| p.topic != topic);
        let wait = async {
            loop {
                let p = self.rx.recv().await.expect("event loop running");
                if p.topic == topic {
                    if accept(&p) {
                        return p;
                    }
                } else {
                    self.buffer.push_back(p);
                }
            }
        };
        tokio::time::timeout(DEADLINE, wait)
            .await
            .unwrap_or_else(|_| panic!("nothing suitable on {topic} within {DEADLINE:?}"))
    }

    /// The next publish on any topic.
    async fn next_any(&mut self) -> Publish {
        if let Some(p) = self.buffer.pop_front() {
            return p;
        }
        tokio::time::timeout(DEADLINE, self.rx.recv())
            .await
            .expect("a publish within the deadline")
            .expect("event loop running")
    }

    async fn next(&mut self, topic: &str) -> Publish {
        self.next_where(topic, |_| true).await
    }

    async fn json(&mut self, topic: &str) -> Value {
        let p = self.next(topic).await;
        serde_json::from_slice(&p.payload).expect("a JSON payload")
    }

    async fn publish(&self, topic: &str, payload: Value) {
        self.client
            .publish(topic, QoS::AtLeastOnce, false, payload.to_string())
            .await
            .expect("publish");
    }

    /// Publishes a request for `service.action` on phone-1's request topic.
    async fn send(&self, id: &str, service: &str, action: &str, params: Value) {
        self.publish(&topic("request"), request(id, service, action, params))
            .await;
    }

    /// Sends a request and returns the next JSON on phone-1's response topic.
    async fn call(&mut self, id: &str, service: &str, action: &str, params: Value) -> Value {
        self.send(id, service, action, params).await;
        self.json(&topic("response")).await
    }
}

fn text(p: &Publish) -> String {
    String::from_utf8_lossy(&p.payload).into_owned()
}

const PREFIX: &str = "droidwarden/companion/phone-1";

fn topic(leaf: &str) -> String {
    format!("{PREFIX}/{leaf}")
}

async fn companion_sim(broker: &Mosquitto, adb: bool) -> SimHandle {
    companion_sim_at(&broker.url(), "phone-1", adb).await
}

/// A sim whose companion app connects to `url` as `id`, once connected.
async fn companion_sim_at(url: &str, id: &str, adb: bool) -> SimHandle {
    let sim = Sim::start(SimConfig {
        adb,
        companion: Some(CompanionSettings::new(url, id, "droidwarden").expect("settings")),
        ..SimConfig::default()
    })
    .await
    .expect("start the sim");
    tokio::time::timeout(DEADLINE, sim.companion_connected())
        .await
        .unwrap_or_else(|_| panic!("{id} connected within the deadline"))
        .expect("connected");
    sim
}

fn request(id: &str, service: &str, action: &str, params: Value) -> Value {
    let deadline = droidwarden_services::time::now_ms() + 60_000;
    json!({"v": 1, "id": id, "service": service, "action": action, "params": params, "deadline_ms": deadline})
}

fn check_result(service: &str, action: &str, result: &Value) {
    let (_, spec) = Catalogue::get().action(service, action).expect("known");
    if let Err(v) = spec.result.validate(result) {
        panic!(
            "{service}.{action}: {result} does not match at {:?}: {}",
            v.path, v.reason
        );
    }
}

#[tokio::test]
async fn requests_are_answered_from_the_same_state_the_adb_side_serves() {
    let broker = Mosquitto::start();
    let sim = companion_sim(&broker, true).await;
    let mut daemon = Mqtt::connect(
        broker.port,
        "daemon",
        &[&topic("online"), &topic("response"), &topic("event/#")],
    )
    .await;
    let online = daemon.next(&topic("online")).await;
    assert_eq!(text(&online), "online");
    assert!(online.retain, "presence is retained");

    let response = daemon.call("r1", "battery", "status", json!({})).await;
    assert_eq!(response["v"], 1);
    assert_eq!(response["id"], "r1");
    assert_eq!(response["ok"], true, "{response}");
    assert_eq!(response["result"]["level_percent"], 85);
    check_result("battery", "status", &response["result"]);

    // A change through the companion is what ADB sees, and the reverse.
    let response = daemon
        .call(
            "r2",
            "screen_control",
            "set_brightness",
            json!({"level": 17}),
        )
        .await;
    assert_eq!(response["result"], json!({"brightness": 17}));
    assert_eq!(
        sim.execute("settings get system screen_brightness")
            .stdout_text(),
        "17\n"
    );
    sim.set_path("battery.level", json!(42)).expect("set");
    let event = daemon
        .next_where(&topic("event/battery"), |p| {
            serde_json::from_slice::<Value>(&p.payload).is_ok_and(|v| v["level_percent"] == 42)
        })
        .await;
    let body: Value = serde_json::from_slice(&event.payload).expect("JSON");
    check_result("battery", "status", &body);

    // Bad requests are answered with the catalogue's error codes.
    let response = daemon
        .call(
            "r3",
            "audio_automation",
            "set_volume",
            json!({"stream": "music", "level": 400}),
        )
        .await;
    assert_eq!(response["ok"], false);
    assert_eq!(response["error"]["code"], "invalid_params");
    daemon
        .publish(&topic("request"), json!({"v": 2, "id": "r4"}))
        .await;
    assert_eq!(
        daemon.json(&topic("response")).await["error"]["code"],
        "invalid_request"
    );

    // Faults apply to companion requests: fail answers device_error without
    // performing anything; drop leaves the request unanswered.
    sim.set_fault(Fault::Fail {
        exit: 1,
        stderr: "boom".into(),
    });
    let response = daemon
        .call(
            "r5",
            "screen_control",
            "set_brightness",
            json!({"level": 99}),
        )
        .await;
    assert_eq!(response["id"], "r5");
    assert_eq!(response["error"]["code"], "device_error");
    assert!(
        response["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("boom"))
    );
    assert_eq!(sim.state().display.brightness, 17, "nothing was performed");
    sim.set_fault(Fault::Drop);
    daemon.send("r6", "battery", "status", json!({})).await;
    assert_eq!(
        daemon.call("r7", "battery", "status", json!({})).await["id"],
        "r7",
        "r6 was dropped"
    );
    sim.set_fault(Fault::Delay(Duration::from_millis(300)));
    let sent = Instant::now();
    assert_eq!(
        daemon.call("r7b", "battery", "status", json!({})).await["id"],
        "r7b"
    );
    assert!(sent.elapsed() >= Duration::from_millis(300), "delayed");
    sim.set_fault(Fault::Clear);

    // Companion-only actions.
    assert_eq!(
        daemon
            .call(
                "r8",
                "location",
                "start_tracking",
                json!({"interval_s": 10})
            )
            .await["result"],
        json!({"tracking": true, "interval_s": 10})
    );
    let fix = daemon.json(&topic("event/location")).await;
    check_result("location", "current", &fix);
    assert_eq!(
        daemon
            .call(
                "r9",
                "camera_control",
                "take_photo",
                json!({"filename": "door.jpg"})
            )
            .await["result"],
        json!({"path": "/sdcard/DCIM/Camera/door.jpg"})
    );

    // Duplicates on: every response twice.
    sim.set_companion_duplicates(true).expect("companion mode");
    daemon.send("r10", "battery", "status", json!({})).await;
    let first = daemon.json(&topic("response")).await;
    let second = daemon.json(&topic("response")).await;
    assert_eq!(
        (first["id"].clone(), second["id"].clone()),
        (json!("r10"), json!("r10"))
    );

    sim.shutdown().await;
    // A clean shutdown says goodbye: retained `offline`.
    let gone = daemon.next(&topic("online")).await;
    assert_eq!(text(&gone), "offline");
}

#[tokio::test]
async fn presence_goes_offline_cleanly_or_by_the_will_and_comes_back() {
    let broker = Mosquitto::start();
    let sim = companion_sim(&broker, false).await;
    assert_eq!(sim.adb_addr(), None);
    let mut daemon = Mqtt::connect(broker.port, "daemon", &[&topic("online")]).await;
    assert_eq!(text(&daemon.next(&topic("online")).await), "online");

    assert!(!sim.set_companion_online(false, false).await.expect("off"));
    assert_eq!(text(&daemon.next(&topic("online")).await), "offline");
    assert!(sim.set_companion_online(true, false).await.expect("on"));
    assert_eq!(text(&daemon.next(&topic("online")).await), "online");
    // Abrupt: no goodbye, the broker publishes the will.
    assert!(!sim.set_companion_online(false, true).await.expect("drop"));
    let will = daemon.next(&topic("online")).await;
    assert_eq!(text(&will), "offline");
    assert!(sim.set_companion_online(true, false).await.expect("on"));
    assert_eq!(text(&daemon.next(&topic("online")).await), "online");

    // A late subscriber sees the retained presence.
    let mut late = Mqtt::connect(broker.port, "late", &[&topic("online")]).await;
    let retained = late.next(&topic("online")).await;
    assert!(retained.retain);
    assert_eq!(text(&retained), "online");
    sim.shutdown().await;
}

/// The daemon's side as the daemon wires it: a `CompanionHub` fed from MQTT
/// and its requests published on the phones' request topics.
async fn hub_over_mqtt(
    port: u16,
    config: CompanionConfig,
) -> (
    CompanionHub,
    Arc<Registry>,
    mpsc::UnboundedReceiver<ResponseDisposition>,
    Vec<tokio::task::JoinHandle<()>>,
) {
    let registry = Arc::new(Registry::new());
    let (hub, mut outgoing) = CompanionHub::new(config, registry.clone());
    let mut mqtt = Mqtt::connect(
        port,
        "droidwarden-daemon",
        &[
            "droidwarden/companion/+/online",
            "droidwarden/companion/+/response",
            "droidwarden/companion/+/event/#",
        ],
    )
    .await;
    let client = mqtt.client.clone();
    let (dispositions, seen) = mpsc::unbounded_channel();
    let feed = tokio::spawn({
        let hub = hub.clone();
        async move {
            while let Some(p) = mqtt.rx.recv().await {
                let Some(rest) = p.topic.strip_prefix("droidwarden/companion/") else {
                    continue;
                };
                let Some((id, leaf)) = rest.split_once('/') else {
                    continue;
                };
                match leaf {
                    "online" => {
                        if let Some(online) = presence_from_payload(&p.payload) {
                            hub.on_presence(id, online);
                        }
                    }
                    "response" => {
                        let _ = dispositions.send(hub.on_response(id, &p.payload));
                    }
                    _ => {
                        if let Some(kind) = leaf.strip_prefix("event/") {
                            hub.on_event(id, kind, &p.payload);
                        }
                    }
                }
            }
        }
    });
    // Publishing from another task than the one polling the event loop.
    let publish = tokio::spawn(async move {
        while let Some(out) = outgoing.recv().await {
            let topic = format!("droidwarden/companion/{}/request", out.companion_id);
            if client
                .publish(topic, QoS::AtLeastOnce, false, out.payload)
                .await
                .is_err()
            {
                return;
            }
        }
    });
    (hub, registry, seen, vec![feed, publish])
}

#[tokio::test]
async fn the_bridge_hub_drives_the_companion_app_end_to_end() {
    let broker = Mosquitto::start();
    let config = CompanionConfig {
        request_timeout: Duration::from_secs(10),
        queue_ttl: Duration::from_secs(30),
        auto_register: true,
        max_auto_devices: 16,
        names: Default::default(),
    };
    let (hub, registry, mut dispositions, tasks) = hub_over_mqtt(broker.port, config).await;
    let mut events = hub.subscribe_events();
    let sim = companion_sim(&broker, true).await;

    // The retained presence registers the phone.
    let started = Instant::now();
    let handle = loop {
        if let Some(h) = registry.get("phone-1").filter(|h| h.info().online) {
            break h;
        }
        assert!(started.elapsed() < DEADLINE, "phone-1 never came online");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let parse = |service: &str, action: &str, params: Value| {
        Catalogue::get()
            .parse(service, action, &params)
            .expect("valid")
    };
    let battery = parse("battery", "status", json!({}));
    let result = handle.call(&battery).await.expect("battery over MQTT");
    assert_eq!(result["level_percent"], 85);
    assert_eq!(
        dispositions.recv().await,
        Some(ResponseDisposition::Delivered)
    );

    // Every response twice: the second is recognised and ignored.
    sim.set_companion_duplicates(true).expect("companion mode");
    let set = parse(
        "audio_automation",
        "set_volume",
        json!({"stream": "music", "level": 60}),
    );
    let result = handle.call(&set).await.expect("set_volume over MQTT");
    assert_eq!(result["level"], 60);
    assert_eq!(
        [dispositions.recv().await, dispositions.recv().await],
        [
            Some(ResponseDisposition::Delivered),
            Some(ResponseDisposition::Duplicate)
        ]
    );
    sim.set_companion_duplicates(false).expect("companion mode");

    // Offline: the call waits in the queue and is delivered on return.
    assert!(!sim.set_companion_online(false, true).await.expect("drop"));
    let started = Instant::now();
    while handle.info().online {
        assert!(started.elapsed() < DEADLINE, "the will never arrived");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let queued = tokio::spawn({
        let handle = handle.clone();
        let wake = parse("screen_control", "set_brightness", json!({"level": 5}));
        async move { handle.call(&wake).await }
    });
    assert!(sim.set_companion_online(true, false).await.expect("on"));
    let result = tokio::time::timeout(DEADLINE, queued)
        .await
        .expect("delivered after the phone returned")
        .expect("task")
        .expect("set_brightness");
    assert_eq!(result, json!({"brightness": 5}));
    assert_eq!(sim.state().display.brightness, 5);

    // A phone error reaches the caller with its code.
    sim.set_fault(Fault::Fail {
        exit: 1,
        stderr: "camera busy".into(),
    });
    let err = handle
        .call(&parse("camera_control", "take_photo", json!({})))
        .await
        .expect_err("failed on the phone");
    assert_eq!(err.code(), ErrorCode::DeviceError);
    assert!(err.to_string().contains("camera busy"), "{err}");

    // Events arrive checked against their schema.
    sim.set_path("battery.level", json!(7)).expect("set");
    let event = tokio::time::timeout(DEADLINE, async {
        loop {
            let e = events.recv().await.expect("events");
            if e.data["level_percent"] == 7 {
                return e;
            }
        }
    })
    .await
    .expect("battery event");
    assert_eq!(event.device.as_str(), "phone-1");

    sim.shutdown().await;
    for task in tasks {
        task.abort();
    }
}

#[tokio::test]
async fn the_documented_acl_confines_each_phone_to_its_own_topics() {
    let broker = Mosquitto::secured(
        &[
            ("droidwarden", "secret"),
            ("phone-a", "pa"),
            ("phone-b", "pb"),
        ],
        &documented_block("companion-protocol.md", "acl-example"),
    );
    // phone-a is the emulated app: it connects with its will, subscribes and
    // announces itself under the ACL (or never becomes connected).
    let url = format!("mqtt://phone-a:pa@127.0.0.1:{}", broker.port);
    let sim = companion_sim_at(&url, "phone-a", false).await;
    let mut daemon = Mqtt::connect_as(
        broker.port,
        "droidwarden",
        Some(("droidwarden", "secret")),
        &["droidwarden/companion/+/response"],
    )
    .await;
    let mut intruder = Mqtt::connect_as(
        broker.port,
        "phone-b",
        Some(("phone-b", "pb")),
        &[
            "droidwarden/companion/phone-a/request",
            "droidwarden/companion/phone-b/request",
        ],
    )
    .await;

    daemon
        .publish(
            "droidwarden/companion/phone-a/request",
            request("a1", "battery", "status", json!({})),
        )
        .await;
    let answer = daemon.json("droidwarden/companion/phone-a/response").await;
    assert_eq!(answer["id"], "a1");
    // Published after a1: had a1 reached phone-b, it would have come first.
    daemon
        .publish(
            "droidwarden/companion/phone-b/request",
            request("b1", "battery", "status", json!({})),
        )
        .await;
    let first = intruder.next_any().await;
    assert_eq!(
        first.topic, "droidwarden/companion/phone-b/request",
        "phone-b read phone-a's request"
    );

    // A forged answer on phone-a's topic is dropped; phone-b's own goes through.
    intruder
        .publish(
            "droidwarden/companion/phone-a/response",
            json!({"v": 1, "id": "a1", "ok": true, "result": {}}),
        )
        .await;
    intruder
        .publish(
            "droidwarden/companion/phone-b/response",
            json!({"v": 1, "id": "b1", "ok": true, "result": {}}),
        )
        .await;
    let next = daemon.next_any().await;
    assert_eq!(
        next.topic, "droidwarden/companion/phone-b/response",
        "phone-b spoke for phone-a"
    );
    sim.shutdown().await;
}

// --- The binary -----------------------------------------------------------

#[tokio::test]
async fn the_binary_prints_its_companion_and_its_will_outlives_a_kill() {
    let broker = Mosquitto::start();
    let mut daemon = Mqtt::connect(broker.port, "daemon", &[&topic("online")]).await;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_droidwarden-sim"))
        .args([
            "--mqtt",
            &broker.url(),
            "--companion-id",
            "phone-1",
            "--control-port",
            "0",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn the binary");
    let line = crate::common::ready_line(&mut child, DEADLINE).await;
    let control = line
        .strip_prefix("droidwarden-sim ready adb=- control=")
        .and_then(|rest| rest.strip_suffix(" companion=phone-1"))
        .unwrap_or_else(|| panic!("unexpected ready line {line:?}"));
    assert_eq!(text(&daemon.next(&topic("online")).await), "online");

    let stream = tokio::net::TcpStream::connect(control)
        .await
        .expect("control port");
    let (read, mut write) = stream.into_split();
    let mut replies = BufReader::new(read).lines();
    let mut call = async |line: &str| -> Value {
        write
            .write_all(format!("{line}\n").as_bytes())
            .await
            .expect("write");
        let reply = tokio::time::timeout(DEADLINE, replies.next_line())
            .await
            .expect("reply in time")
            .expect("read")
            .expect("a reply");
        serde_json::from_str(&reply).expect("JSON")
    };
    assert_eq!(
        call(r#"{"op":"companion_duplicates","enabled":true}"#).await,
        json!({"ok": true})
    );
    let status = call(r#"{"op":"companion_status"}"#).await;
    assert_eq!(status["companion"]["connected"], true, "{status}");
    assert_eq!(status["companion"]["duplicates"], true, "{status}");
    assert_eq!(
        call(r#"{"op":"companion","online":false}"#).await,
        json!({"ok": true, "connected": false})
    );
    assert_eq!(text(&daemon.next(&topic("online")).await), "offline");
    assert_eq!(
        call(r#"{"op":"companion","online":true}"#).await,
        json!({"ok": true, "connected": true})
    );
    // Under load the clean goodbye can lose its race with the socket close,
    // and the broker then also publishes the will: a second "offline" may
    // arrive before the "online".
    let mut seen = Vec::new();
    while seen.last().map(String::as_str) != Some("online") {
        assert!(seen.len() < 3, "no online after reconnecting: {seen:?}");
        seen.push(text(&daemon.next(&topic("online")).await));
    }

    // SIGKILL: no goodbye at all; the broker publishes the will.
    child.start_kill().expect("kill");
    child.wait().await.expect("reaped");
    assert_eq!(text(&daemon.next(&topic("online")).await), "offline");
}

#[tokio::test]
async fn the_binary_needs_something_to_serve() {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_droidwarden-sim"))
        .args(["--companion-id", "p"])
        .output()
        .await
        .expect("runs");
    assert!(!out.status.success());
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_droidwarden-sim"))
        .args(["--mqtt", "mqtt://127.0.0.1:1", "--companion-id", "bad/id"])
        .output()
        .await
        .expect("runs");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("companion-id"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_droidwarden-sim"))
        .output()
        .await
        .expect("runs");
    assert!(!out.status.success(), "neither --adb-port nor --mqtt");
}
