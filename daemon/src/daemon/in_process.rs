//! The daemon started in-process ([`Daemon::start`]) with a fake phone and
//! the embedded broker: the MQTT API's semantics, start-up failures and
//! the ordered stop, without a process, an adb server or a sim.

use super::*;
use droidwarden_bridge::DeviceHandle;
use droidwarden_bridge::testing::FakePhone;
use droidwarden_services::ErrorCode;
use rumqttc::{AsyncClient, Event as MqttEvent, MqttOptions, Packet, QoS};
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// Every wait in these tests: generous, since CI machines are loaded.
const WAIT: Duration = Duration::from_secs(20);

/// A configuration for an in-process daemon: its own state directory, the
/// embedded broker on `broker_port` (0: any) with anonymous access, no
/// bus (the D-Bus API on the private socket alone), an adb server address where nothing listens, and `extra`.
fn config(state: &std::path::Path, broker_port: u16, extra: &str) -> Config {
    let file = state.join("config.toml");
    let text = format!(
        r#"
[adb]
server = "127.0.0.1:9"
start_server = false
poll_interval_ms = 60000
[state]
dir = "{dir}"
[broker]
listen = "127.0.0.1:{broker_port}"
anonymous = true
[mqtt]
topic_prefix = "dw"
[mqtt.homeassistant]
discovery = false
[dbus]
bus = "socket"
[poll]
battery = 0
wifi_automation = 0
bluetooth_automation = 0
airplane_mode = 0
audio_automation = 0
screen_control = 0
device_state = 0
{extra}
"#,
        dir = state.join("state").display()
    );
    std::fs::write(&file, text).expect("config file");
    crate::config::load_with_env(Some(&file), Vec::new()).expect("a valid configuration")
}

/// A started daemon with one fake phone `phone` (each command 20 ms).
async fn started(state: &std::path::Path) -> (Running, Arc<FakePhone>) {
    let running = Daemon::new(config(state, 0, ""))
        .start(CancellationToken::new())
        .await
        .expect("the daemon starts");
    running.ready(WAIT).await.expect("MQTT is up");
    let phone = FakePhone::new("phone", Duration::from_millis(20));
    running
        .registry()
        .insert(DeviceHandle::new(phone.clone(), Duration::from_secs(600)));
    (running, phone)
}

/// An MQTT client of the embedded broker subscribed to `filters`; what it
/// receives comes out of the channel as (topic, payload).
async fn client(
    running: &Running,
    name: &str,
    filters: &[&str],
) -> (AsyncClient, mpsc::UnboundedReceiver<(String, Vec<u8>)>) {
    let addr = running.addresses().broker.expect("the embedded broker");
    let mut options = MqttOptions::new(name, addr.ip().to_string(), addr.port());
    options.set_max_packet_size(1 << 20, 1 << 20);
    let (client, mut eventloop) = AsyncClient::new(options, 64);
    let (tx, rx) = mpsc::unbounded_channel();
    let (subscribed_tx, mut subscribed) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            match eventloop.poll().await {
                Ok(MqttEvent::Incoming(Packet::Publish(p))) => {
                    let topic = p.topic.clone();
                    if tx.send((topic, p.payload.to_vec())).is_err() {
                        return;
                    }
                }
                Ok(MqttEvent::Incoming(Packet::SubAck(_))) => {
                    let _ = subscribed_tx.send(());
                }
                Ok(_) => {}
                Err(_) => return,
            }
        }
    });
    for filter in filters {
        client
            .subscribe(*filter, QoS::AtLeastOnce)
            .await
            .expect("subscribe");
        tokio::time::timeout(WAIT, subscribed.recv())
            .await
            .expect("a SUBACK in time")
            .expect("the client runs");
    }
    (client, rx)
}

/// The next message on `topic`, skipping others.
async fn next_on(rx: &mut mpsc::UnboundedReceiver<(String, Vec<u8>)>, topic: &str) -> Value {
    tokio::time::timeout(WAIT, async {
        loop {
            let (t, payload) = rx.recv().await.expect("the client runs");
            if t == topic {
                return serde_json::from_slice(&payload).expect("JSON");
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("nothing on {topic} within {WAIT:?}"))
}

async fn publish(client: &AsyncClient, topic: &str, payload: impl Into<Vec<u8>>) {
    client
        .publish(topic, QoS::AtLeastOnce, false, payload.into())
        .await
        .expect("publish");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_over_mqtt_is_answered_with_its_statuses_and_the_stop_is_clean() {
    let dir = tempfile::tempdir().unwrap();
    let (running, phone) = started(dir.path()).await;
    let (client, mut rx) = client(&running, "test-a", &["dw/#"]).await;
    let call = json!({"id": "c1", "device": "phone", "service": "battery", "action": "status"});
    publish(&client, "dw/cmd/call", call.to_string()).await;
    let executing = next_on(&mut rx, "dw/devices/phone/services/battery/status").await;
    assert_eq!(executing["state"], "executing", "{executing}");
    let done = next_on(&mut rx, "dw/devices/phone/services/battery/status").await;
    assert_eq!(done["state"], "success", "{done}");
    // The reply follows its status: whoever reads the reply sees the
    // status already published.
    let reply = next_on(&mut rx, "dw/reply/c1").await;
    assert_eq!(reply["ok"], true, "{reply}");
    assert_eq!(reply["id"], "c1");
    assert_eq!(phone.log(), ["battery.status"]);
    let broker = running.addresses().broker.expect("broker");
    tokio::time::timeout(WAIT, running.stop())
        .await
        .expect("the stop is bounded");
    // The broker's port is free again: the stop ended the broker.
    std::net::TcpListener::bind(broker).expect("the broker's port is free after the stop");
    // The delivery store was closed cleanly: the same state starts again.
    let again = Daemon::new(config(dir.path(), 0, ""))
        .start(CancellationToken::new())
        .await
        .expect("a second start on the same state");
    again.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_id_gets_the_first_reply_and_runs_once() {
    let dir = tempfile::tempdir().unwrap();
    let (running, phone) = started(dir.path()).await;
    let (client, mut rx) = client(&running, "test-b", &["dw/reply/#"]).await;
    let body = json!({"id": "same", "device": "phone", "service": "bluetooth_automation", "action": "disable"});
    publish(&client, "dw/cmd/call", body.to_string()).await;
    publish(&client, "dw/cmd/call", body.to_string()).await;
    let first = next_on(&mut rx, "dw/reply/same").await;
    let second = next_on(&mut rx, "dw/reply/same").await;
    assert_eq!(first, second);
    assert_eq!(first["ok"], true, "{first}");
    assert_eq!(phone.log(), ["bluetooth_automation.disable"]);
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_commands_get_structured_errors_and_the_daemon_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let (running, phone) = started(dir.path()).await;
    let (client, mut rx) = client(&running, "test-c", &["dw/reply/#", "dw/errors"]).await;
    let cases = [
        (
            json!({"id": "m1", "service": 3, "action": "status"}),
            "invalid_request",
        ),
        (
            json!({"id": "m2", "device": "nope", "service": "battery", "action": "status"}),
            // Not a phone the daemon knows; with the adb server away it
            // might be an ADB phone, so the answer says that server is away.
            "device_offline",
        ),
        (
            json!({"id": "m3", "device": "phone", "service": "toaster", "action": "status"}),
            "unknown_service",
        ),
        (
            json!({"id": "m4", "device": "phone", "service": "screen_control", "action": "set_brightness", "params": {"level": "max"}}),
            "invalid_params",
        ),
        (
            json!({"id": "m5", "device": "phone", "service": "battery", "action": "status", "extra": true}),
            "invalid_request",
        ),
    ];
    for (body, _) in &cases {
        publish(&client, "dw/cmd/call", body.to_string()).await;
    }
    // The replies, in whatever order they come.
    let mut replies = std::collections::HashMap::new();
    while replies.len() < cases.len() {
        let (topic, payload) = tokio::time::timeout(WAIT, rx.recv())
            .await
            .unwrap_or_else(|_| panic!("only {replies:?} within {WAIT:?}"))
            .expect("the client runs");
        if let Some(id) = topic.strip_prefix("dw/reply/") {
            let reply: Value = serde_json::from_slice(&payload).expect("JSON");
            assert!(replies.insert(id.to_owned(), reply).is_none(), "{id} twice");
        }
    }
    for (body, code) in &cases {
        let reply = &replies[body["id"].as_str().unwrap()];
        assert_eq!(reply["ok"], false, "{reply}");
        assert_eq!(reply["error"]["code"], *code, "{body} → {reply}");
    }
    // A burst of a thousand bad payloads, each answered or reported, and
    // never a stop.
    let bad: Vec<String> = vec![
        "{".into(),
        "not json at all".into(),
        "\u{0}\u{1}\u{2}".into(),
        "[]".into(),
        "42".into(),
        r#"{"id": 5}"#.into(),
        r#"{"id": "x/y", "service": "battery", "action": "status"}"#.into(),
        r#"{"id": "b-ID", "service": 3, "action": "status"}"#.into(),
        r#"{"id": "b-ID", "service": "battery", "action": "status", "params": "x"}"#.into(),
        r#"{"id": "b-ID", "device": "phone", "service": "nope", "action": "status"}"#.into(),
        format!(
            r#"{{"id": "b-ID", "device": "phone", "service": "battery", "action": "status", "params": {{"pad": "{}"}}}}"#,
            "x".repeat(8000)
        ),
    ];
    for i in 0..1000 {
        let payload = bad[i % bad.len()].replace("ID", &i.to_string());
        publish(&client, "dw/cmd/call", payload).await;
    }
    let expected = (0..1000)
        .filter(|i| bad[i % bad.len()].contains("b-ID"))
        .count();
    let mut answered = std::collections::HashSet::new();
    let mut reported = 0;
    while answered.len() < expected {
        let (topic, payload) = tokio::time::timeout(WAIT, rx.recv())
            .await
            .unwrap_or_else(|_| panic!("{} of {expected} answered within {WAIT:?}", answered.len()))
            .expect("the client runs");
        if let Some(id) = topic.strip_prefix("dw/reply/b-") {
            let reply: Value = serde_json::from_slice(&payload).expect("JSON");
            assert_eq!(reply["ok"], false, "{reply}");
            assert!(answered.insert(id.to_owned()), "b-{id} answered twice");
        } else if topic == "dw/errors" {
            reported += 1;
        }
    }
    assert!(
        reported > 0,
        "unreadable requests are reported on the errors topic"
    );
    // A payload with no readable id is reported on the errors topic.
    publish(&client, "dw/cmd/call", "{ not json").await;
    let error = next_on(&mut rx, "dw/errors").await;
    assert_eq!(error["error"]["code"], "invalid_request", "{error}");
    // Nothing reached the phone, and the daemon still serves.
    assert!(phone.log().is_empty(), "{:?}", phone.log());
    let ok = json!({"id": "after", "device": "phone", "service": "battery", "action": "status"});
    publish(&client, "dw/cmd/call", ok.to_string()).await;
    assert_eq!(next_on(&mut rx, "dw/reply/after").await["ok"], true);
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_that_fails_late_stops_what_it_began_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    // The metrics port is taken; the broker (started before metrics) gets
    // a port of its own, free when the test begins.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let broker_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let metrics = format!("[metrics]\nlisten = \"{}\"\n", taken.local_addr().unwrap());
    let failed = Daemon::new(config(dir.path(), broker_port, &metrics))
        .start(CancellationToken::new())
        .await
        .expect_err("the metrics port is taken");
    assert_eq!(failed.status, 1);
    assert!(failed.what.contains("metrics"), "{failed}");
    // What had begun was stopped: the broker's port is free again...
    std::net::TcpListener::bind(("127.0.0.1", broker_port))
        .expect("the broker stopped with the failed start");
    // ... and the delivery store was closed: the next start succeeds.
    let running = Daemon::new(config(dir.path(), broker_port, ""))
        .start(CancellationToken::new())
        .await
        .expect("a start after the failed one");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_directory_that_cannot_be_used_is_exit_status_73() {
    let dir = tempfile::tempdir().unwrap();
    // A file where the state directory should be.
    std::fs::write(dir.path().join("state"), b"").unwrap();
    let failed = Daemon::new(config(dir.path(), 0, ""))
        .start(CancellationToken::new())
        .await
        .expect_err("a file is no state directory");
    assert_eq!(failed.status, crate::EXIT_CANTCREAT, "{failed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_private_dbus_socket_maps_every_error_back_to_its_code() {
    let dir = tempfile::tempdir().unwrap();
    let (running, phone) = started(dir.path()).await;
    let client = crate::dbus::client::Client::over_socket(
        &running.addresses().api_socket,
        Duration::from_secs(15),
        false,
    )
    .await
    .expect("the private socket answers");
    let ok = client
        .call(Some("phone"), "battery", "status", &json!({}))
        .await
        .expect("a call on the fake phone");
    assert_eq!(ok, json!({"ok": true}));
    let cases = [
        (
            Some("phone"),
            "toaster",
            "status",
            json!({}),
            ErrorCode::UnknownService,
        ),
        (
            Some("phone"),
            "battery",
            "explode",
            json!({}),
            ErrorCode::UnknownAction,
        ),
        (
            Some("phone"),
            "screen_control",
            "set_brightness",
            json!({"level": "max"}),
            ErrorCode::InvalidParams,
        ),
        (
            Some("ghost"),
            "battery",
            "status",
            json!({}),
            ErrorCode::DeviceOffline,
        ),
    ];
    for (device, service, action, params, code) in cases {
        let e = client
            .call(device, service, action, &params)
            .await
            .expect_err("refused");
        assert_eq!(e.code, code, "{service}.{action}: {e:?}");
        assert!(!e.message.is_empty());
    }
    // The bound the daemon reports is the hub's, the one fact every
    // caller waits by.
    let handle = running.registry().select(Some("phone")).unwrap();
    assert_eq!(
        client.call_bound(Some("phone")).await,
        crate::hub::call_bound(&handle)
    );
    assert_eq!(phone.log(), ["battery.status"]);
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_applies_live_keys_and_names_every_changed_mcp_key_as_needing_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (mut running, _phone) = started(dir.path()).await;
    // `[poll]` changes live; every `[mcp]` key is read at start only, so a
    // change to each is named, none silently kept or dropped.
    let changed = config(
        dir.path(),
        0,
        r#"
[mcp]
listen = "127.0.0.1:0"
tool_mode = "direct"
tool_schemas = "full"
elicitation = false
[[mcp.servers]]
name = "t"
command = "true"
"#,
    );
    let mut changed_poll = changed.clone();
    changed_poll.poll.insert("battery", Duration::from_secs(30));
    let plan = running
        .reload(Ok(changed_poll))
        .await
        .expect("a valid configuration reloads");
    assert!(plan.poll, "[poll] is applied live");
    for key in [
        "mcp.listen",
        "mcp.tool_mode",
        "mcp.tool_schemas",
        "mcp.elicitation",
        "mcp.servers",
    ] {
        assert!(
            plan.needs_restart.contains(&key),
            "{key} not named: {:?}",
            plan.needs_restart
        );
    }
    // A configuration that does not load changes nothing.
    let broken = running
        .reload(Err(crate::config::ConfigError("broken".into())))
        .await;
    assert!(broken.is_err());
    running.stop().await;
}
