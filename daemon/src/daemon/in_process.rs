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
    config_full(state, broker_port, true, extra)
}

/// [`config`], with the embedded broker's `anonymous` as given (`false`:
/// only the users of `<state dir>/mqtt-users.json` log in).
fn config_full(state: &std::path::Path, broker_port: u16, anonymous: bool, extra: &str) -> Config {
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
anonymous = {anonymous}
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
    started_with(config(state, 0, "")).await
}

/// [`started`] on `config`.
async fn started_with(config: Config) -> (Running, Arc<FakePhone>) {
    let running = Daemon::new(config)
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
    client_as(running, name, None, filters).await
}

/// [`client`] logged in as `login` (user, password).
async fn client_as(
    running: &Running,
    name: &str,
    login: Option<(&str, &str)>,
    filters: &[&str],
) -> (AsyncClient, mpsc::UnboundedReceiver<(String, Vec<u8>)>) {
    let addr = running.addresses().broker.expect("the embedded broker");
    let mut options = MqttOptions::new(name, addr.ip().to_string(), addr.port());
    if let Some((user, password)) = login {
        options.set_credentials(user, password);
    }
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

/// The `cmd/call` body setting the phone's brightness to `level`.
fn set_brightness(id: &str, level: u64) -> Value {
    json!({"id": id, "device": "phone", "service": "screen_control",
           "action": "set_brightness", "params": {"level": level}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_changes_over_mqtt_run_in_the_order_they_were_sent() {
    let dir = tempfile::tempdir().unwrap();
    let (running, phone) = started(dir.path()).await;
    let (client, mut rx) = client(&running, "test-order", &["dw/reply/#"]).await;
    let levels: Vec<u64> = (1..=50).collect();
    for level in &levels {
        let call = set_brightness(&format!("order-{level}"), *level);
        publish(&client, "dw/cmd/call", call.to_string()).await;
    }
    for _ in &levels {
        let (topic, payload) = tokio::time::timeout(WAIT, rx.recv())
            .await
            .expect("fifty replies in time")
            .expect("the client runs");
        let reply: Value = serde_json::from_slice(&payload).expect("JSON");
        assert_eq!(reply["ok"], true, "{topic}: {reply}");
    }
    // The state reads each change is followed by have no level.
    let ran: Vec<u64> = phone
        .params()
        .iter()
        .filter_map(|p| p["level"].as_u64())
        .collect();
    assert_eq!(ran, levels, "the phone ran them out of order");
    running.stop().await;
}

/// Publish `payload` on `topic` from an MQTT 5 client of the embedded
/// broker, with `response_topic` and correlation data, and wait for its
/// PUBACK.
async fn publish_v5(running: &Running, topic: &str, payload: &Value, response_topic: &str) {
    use rumqttc::v5::mqttbytes::v5::{Packet as Packet5, PublishProperties};
    use rumqttc::v5::{AsyncClient as Client5, Event as Event5, MqttOptions as Options5};
    let addr = running.addresses().broker.expect("the embedded broker");
    let id = format!("test-v5-{}", payload["id"].as_str().unwrap_or("x"));
    let (client, mut eventloop) =
        Client5::new(Options5::new(id, addr.ip().to_string(), addr.port()), 16);
    let properties = PublishProperties {
        response_topic: Some(response_topic.to_owned()),
        correlation_data: Some(b"corr-42".to_vec().into()),
        ..PublishProperties::default()
    };
    client
        .publish_with_properties(
            topic,
            rumqttc::v5::mqttbytes::QoS::AtLeastOnce,
            false,
            payload.to_string(),
            properties,
        )
        .await
        .expect("publish");
    tokio::time::timeout(WAIT, async {
        loop {
            match eventloop.poll().await {
                Ok(Event5::Incoming(Packet5::PubAck(_))) => return,
                Ok(_) => {}
                Err(e) => panic!("the MQTT 5 client failed: {e}"),
            }
        }
    })
    .await
    .expect("a PUBACK in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_topic_is_honoured_under_the_responses_prefix_only() {
    let dir = tempfile::tempdir().unwrap();
    let (running, phone) = started(dir.path()).await;
    let (_client, mut rx) = client(&running, "test-rt", &["dw/#"]).await;
    // A response topic elsewhere would let a caller make the daemon
    // publish where it must not (a phone's request topic): refused, and
    // the command does not run.
    let hijack = "dw/companion/x/request";
    publish_v5(&running, "dw/cmd/call", &set_brightness("rt-1", 44), hijack).await;
    let refused = next_on(&mut rx, "dw/reply/rt-1").await;
    assert_eq!(refused["ok"], false, "{refused}");
    assert_eq!(refused["error"]["code"], "invalid_request", "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("dw/responses/")),
        "{refused}"
    );
    // Under <prefix>/responses/: the reply goes there.
    let allowed = "dw/responses/me";
    publish_v5(
        &running,
        "dw/cmd/call",
        &set_brightness("rt-2", 45),
        allowed,
    )
    .await;
    let answer = tokio::time::timeout(WAIT, async {
        loop {
            let (topic, payload) = rx.recv().await.expect("the client runs");
            assert_ne!(topic, hijack, "published on the refused response topic");
            if topic == allowed {
                return serde_json::from_slice::<Value>(&payload).expect("JSON");
            }
        }
    })
    .await
    .expect("a reply on the response topic");
    assert_eq!(answer["ok"], true, "{answer}");
    assert_eq!(answer["id"], "rt-2", "{answer}");
    let levels: Vec<u64> = phone
        .params()
        .iter()
        .filter_map(|p| p["level"].as_u64())
        .collect();
    assert_eq!(levels, [45], "the refused command ran");
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

/// Adds an `automation` user with the `approve` grant to the users file
/// of the state directory `state` (before the daemon starts), and returns
/// its password.
fn add_approver(state: &std::path::Path, name: &str) -> String {
    use crate::mqtt_users::{Grant, RoleName, USERS_FILE, UserDb, UserRecord, hash_password};
    let path = state.join(USERS_FILE);
    let mut db = UserDb::load(&path).expect("the users file");
    let password = format!("{name}-secret-password");
    db.insert(UserRecord {
        name: name.to_owned(),
        role: RoleName::Automation,
        companion_id: None,
        grants: vec![Grant::Approve],
        password: hash_password(password.as_bytes()).expect("a hash"),
    });
    std::fs::create_dir_all(state).expect("the state directory");
    db.save(&path).expect("the users file is written");
    password
}

/// An MQTT account holding both rights (ask, approve) cannot clear its own
/// requests: its approval of a run it asked for is `permission_denied`
/// and nothing runs; another account's approval then runs the call. The
/// same for an automation it added at run time; a denial from it holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_account_cannot_approve_what_it_asked_for() {
    use droidwarden_agent::ModelReply;
    use droidwarden_agent::testing::{ScriptStep, ScriptedLlm};
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let ha = add_approver(&state, "ha");
    let other = add_approver(&state, "other");
    let wifi_off = json!({"device": "phone", "service_id": "wifi_automation", "action": "disable", "parameters": {}});
    let llm = ScriptedLlm::start([
        ScriptStep::Reply(ModelReply::tool_calls(vec![(
            "android_device".to_owned(),
            wifi_off.to_string(),
        )])),
        ScriptStep::Reply(ModelReply::text("Wi-Fi is off.")),
    ])
    .await
    .expect("the scripted model");
    // `phone` is configured (automations name configured devices) and
    // replaced by the fake phone below.
    let extra = format!(
        "[[devices]]\nname = \"phone\"\ntransport = \"adb\"\nserial = \"emulator-5554\"\n[llm]\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"scripted\"\n",
        llm.base_url(droidwarden_agent::ProviderKind::Openai)
    );
    let (running, phone) = started_with(config_full(dir.path(), 0, false, &extra)).await;
    let topics = ["dw/approvals/#", "dw/reply/#", "dw/automations/+/runs"];
    let (ha_client, mut ha_rx) = client_as(&running, "ha-1", Some(("ha", &ha)), &topics).await;
    let (other_client, mut other_rx) = client_as(
        &running,
        "other-1",
        Some(("other", &other)),
        &["dw/reply/#"],
    )
    .await;

    // The agent: ha asks, the run waits for approval of the Wi-Fi change.
    publish(
        &ha_client,
        "dw/cmd/ask",
        json!({"id": "ask-1", "prompt": "turn the wifi off"}).to_string(),
    )
    .await;
    let approval = tokio::time::timeout(WAIT, async {
        loop {
            let (topic, payload) = ha_rx.recv().await.expect("the client runs");
            if topic.starts_with("dw/approvals/") && !payload.is_empty() {
                return serde_json::from_slice::<Value>(&payload).expect("JSON");
            }
        }
    })
    .await
    .expect("an approval request");
    assert_eq!(approval["asked_by"], r#"MQTT user "ha""#, "{approval}");
    let id = approval["approval_id"].as_str().expect("an id").to_owned();
    for (reply_id, extra) in [
        ("self-1", json!({})),
        ("self-2", json!({"scope": "run", "up_to": "medium"})),
    ] {
        let mut answer =
            json!({"id": reply_id, "approval_id": id, "decision": "approve", "by": "Alice"});
        answer
            .as_object_mut()
            .expect("an object")
            .extend(extra.as_object().expect("an object").clone());
        publish(&ha_client, "dw/cmd/approve", answer.to_string()).await;
        let refused = next_on(&mut ha_rx, &format!("dw/reply/{reply_id}")).await;
        assert_eq!(refused["error"]["code"], "permission_denied", "{refused}");
    }
    assert_eq!(disables(&phone), 0, "nothing ran: {:?}", phone.log());
    publish(
        &other_client,
        "dw/cmd/approve",
        json!({"id": "other-1", "approval_id": id, "decision": "approve"}).to_string(),
    )
    .await;
    let approved = next_on(&mut other_rx, "dw/reply/other-1").await;
    assert_eq!(approved["ok"], true, "{approved}");
    let answer = next_on(&mut ha_rx, "dw/reply/ask-1").await;
    assert_eq!(answer["result"]["text"], "Wi-Fi is off.", "{answer}");
    assert_eq!(disables(&phone), 1, "{:?}", phone.log());

    // An automation ha adds: ha may deny its call, not approve it.
    let definition = json!({"name": "radio_off", "trigger": {"kind": "interval", "every_s": 86400}, "action": {"kind": "call", "device": "phone", "service": "wifi_automation", "action": "disable"}});
    publish(
        &ha_client,
        "dw/cmd/automation",
        json!({"id": "add", "op": "add", "definition": definition}).to_string(),
    )
    .await;
    let added = next_on(&mut ha_rx, "dw/reply/add").await;
    assert_eq!(added["ok"], true, "{added}");
    for round in 1..=2 {
        publish(
            &ha_client,
            "dw/cmd/automation",
            json!({"id": format!("run-{round}"), "op": "run", "name": "radio_off"}).to_string(),
        )
        .await;
        let run = next_on(&mut ha_rx, &format!("dw/reply/run-{round}")).await;
        assert_eq!(run["ok"], true, "{run}");
        let mine = json!({"id": format!("auto-self-{round}"), "approval_id": "automation:radio_off", "decision": "approve"});
        publish(&ha_client, "dw/cmd/approve", mine.to_string()).await;
        let refused = next_on(&mut ha_rx, &format!("dw/reply/auto-self-{round}")).await;
        assert_eq!(refused["error"]["code"], "permission_denied", "{refused}");
        assert_eq!(disables(&phone), 1, "nothing more ran: {:?}", phone.log());
        let (client, rx, decision) = if round == 1 {
            (&ha_client, &mut ha_rx, "deny")
        } else {
            (&other_client, &mut other_rx, "approve")
        };
        let answer = json!({"id": format!("auto-{round}"), "approval_id": "automation:radio_off", "decision": decision});
        publish(client, "dw/cmd/approve", answer.to_string()).await;
        let taken = next_on(rx, &format!("dw/reply/auto-{round}")).await;
        assert_eq!(taken["ok"], true, "{taken}");
    }
    // The call the other account approved runs: its outcome is published.
    loop {
        let outcome = next_on(&mut ha_rx, "dw/automations/radio_off/runs").await;
        if outcome["status"] == "success" {
            break;
        }
    }
    assert_eq!(disables(&phone), 2, "{:?}", phone.log());
    running.stop().await;
}

/// How many times `phone` turned its Wi-Fi off.
fn disables(phone: &FakePhone) -> usize {
    phone
        .log()
        .iter()
        .filter(|c| *c == "wifi_automation.disable")
        .count()
}
