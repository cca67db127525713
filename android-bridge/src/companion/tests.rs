//! The hub end to end, without MQTT: a scripted phone reads the requests the
//! hub hands over and feeds answers back. Paused tokio time drives the
//! timeouts and the queue.

use super::*;
use crate::test_support::{drain, name, names, renamed};
use droidwarden_services::{ErrorCode, WireError};
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(5);
const TTL: Duration = Duration::from_secs(30);

fn config(auto_register: bool) -> CompanionConfig {
    CompanionConfig {
        request_timeout: TIMEOUT,
        queue_ttl: TTL,
        auto_register,
        max_auto_devices: 16,
        names: BTreeMap::from([(
            "phone-a".to_owned(),
            DeviceName::try_from("kitchen").unwrap(),
        )]),
    }
}

fn hub() -> (CompanionHub, mpsc::Receiver<Outgoing>, Arc<Registry>) {
    let registry = Arc::new(Registry::new());
    let (hub, rx) = CompanionHub::new(config(false), registry.clone());
    (hub, rx, registry)
}

fn cmd(service: &str, action: &str, params: Value) -> Command {
    droidwarden_services::Catalogue::get()
        .parse(service, action, &params)
        .unwrap()
}

fn battery() -> &'static Command {
    static BATTERY: std::sync::LazyLock<Command> =
        std::sync::LazyLock::new(|| cmd("battery", "status", json!({})));
    &BATTERY
}

fn battery_result(level: i64) -> Value {
    json!({
        "level_percent": level, "level": level, "scale": 100, "status": "charging",
        "health": "good", "plugged": "ac", "charging": true, "present": true,
        "temperature_c": 25.5, "voltage_mv": 4100, "technology": "Li-ion", "simulated": false
    })
}

fn request(out: &Outgoing) -> Value {
    serde_json::from_slice(&out.payload).unwrap()
}

fn ok(id: &Value, result: Value) -> Vec<u8> {
    json!({"v": 1, "id": id, "ok": true, "result": result})
        .to_string()
        .into_bytes()
}

fn kitchen(registry: &Registry) -> DeviceHandle {
    registry.get("kitchen").expect("registered")
}

/// One task per command, each calling `handle` with it, in order.
fn spawn_calls(
    handle: &DeviceHandle,
    commands: impl IntoIterator<Item = Command>,
) -> Vec<tokio::task::JoinHandle<Result<Value, BridgeError>>> {
    commands
        .into_iter()
        .map(|c| {
            let handle = handle.clone();
            tokio::spawn(async move { handle.call(&c).await })
        })
        .collect()
}

/// A hub whose phone `phone-a` (device `kitchen`) is online, and the
/// kitchen's handle.
fn online() -> (
    CompanionHub,
    mpsc::Receiver<Outgoing>,
    Arc<Registry>,
    DeviceHandle,
) {
    let (hub, rx, registry) = hub();
    hub.on_presence("phone-a", true);
    let handle = kitchen(&registry);
    (hub, rx, registry, handle)
}

/// `command` on `handle` while the phone takes the next request it is sent
/// and does `answer` with it; the call's result and what `answer` returned.
async fn call_answered<T>(
    handle: &DeviceHandle,
    command: &Command,
    rx: &mut mpsc::Receiver<Outgoing>,
    answer: impl AsyncFnOnce(Value) -> T,
) -> (Result<Value, BridgeError>, T) {
    let phone = async { answer(request(&rx.recv().await.unwrap())).await };
    tokio::join!(handle.call(command), phone)
}

#[tokio::test(start_paused = true)]
async fn responses_are_correlated_by_id() {
    let (hub, mut rx, _registry, handle) = online();
    let phone = async {
        let first = request(&rx.recv().await.unwrap());
        let second = request(&rx.recv().await.unwrap());
        assert_ne!(first["id"], second["id"]);
        assert_eq!(first["v"], 1);
        assert_eq!(first["service"], "battery");
        assert_eq!(first["action"], "status");
        assert_eq!(first["params"], json!({}));
        assert!(first["deadline_ms"].as_u64().unwrap() > 1_600_000_000_000);
        // Answer in the opposite order, each with a different level.
        for (req, level) in [(&second, 20), (&first, 10)] {
            assert_eq!(
                hub.on_response("phone-a", &ok(&req["id"], battery_result(level))),
                ResponseDisposition::Delivered
            );
        }
        (first, second)
    };
    let (a, b, _) = tokio::join!(handle.call(battery()), handle.call(battery()), phone);
    let mut levels = [a.unwrap()["level"].clone(), b.unwrap()["level"].clone()];
    levels.sort_by_key(|v| v.as_i64());
    assert_eq!(levels, [json!(10), json!(20)]);
    assert_eq!(lock(&hub.inner.shared.pending).open_count(), 0);
}

#[tokio::test(start_paused = true)]
async fn an_unanswered_request_times_out_and_a_late_answer_is_ignored() {
    let (hub, mut rx, registry) = hub();
    hub.on_presence("phone-a", true);
    let started = Instant::now();
    let err = kitchen(&registry).call(battery()).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::Timeout);
    assert!(err.retryable());
    assert_eq!(started.elapsed(), TIMEOUT);
    let sent = request(&rx.try_recv().unwrap());
    assert_eq!(
        hub.on_response("phone-a", &ok(&sent["id"], battery_result(1))),
        ResponseDisposition::Late
    );
    assert_eq!(lock(&hub.inner.shared.pending).open_count(), 0);
}

#[tokio::test(start_paused = true)]
async fn an_offline_phone_gets_queued_requests_when_it_returns() {
    let (hub, mut rx, registry) = hub();
    let handle = kitchen(&registry);
    assert!(!handle.info().online);
    assert_eq!(
        handle.info().state_detail.as_deref(),
        Some("the companion app has not been seen yet")
    );
    let mut availability = registry.subscribe();
    let call = tokio::spawn({
        let handle = handle.clone();
        async move {
            handle
                .call(&cmd(
                    "screen_control",
                    "set_brightness",
                    json!({"level": 9}),
                ))
                .await
        }
    });
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert!(
        rx.try_recv().is_err(),
        "nothing is sent to an offline phone"
    );
    hub.on_presence("phone-a", true);
    assert_eq!(
        availability.recv().await.unwrap(),
        DeviceEvent::Availability {
            device: DeviceName::try_from("kitchen").unwrap(),
            online: true,
            detail: None
        }
    );
    let sent = request(&rx.recv().await.unwrap());
    assert_eq!(sent["action"], "set_brightness");
    assert_eq!(sent["params"], json!({"level": 9}));
    hub.on_response("phone-a", &ok(&sent["id"], json!({"brightness": 9})));
    assert_eq!(call.await.unwrap().unwrap(), json!({"brightness": 9}));
}

#[tokio::test(start_paused = true)]
async fn a_queued_request_fails_with_device_offline_when_its_ttl_passes() {
    let (hub, mut rx, registry) = hub();
    let started = Instant::now();
    let err = kitchen(&registry).call(battery()).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::DeviceOffline);
    assert!(err.retryable());
    assert!(err.to_string().contains("queue"), "{err}");
    assert_eq!(started.elapsed(), TTL);
    // It never went out, not even when the phone comes back.
    hub.on_presence("phone-a", true);
    assert!(rx.try_recv().is_err());
    assert_eq!(lock(&hub.inner.shared.pending).open_count(), 0);
}

#[tokio::test(start_paused = true)]
async fn the_offline_queue_is_bounded() {
    let (hub, _rx, registry) = hub();
    let handle = kitchen(&registry);
    let waiting = spawn_calls(&handle, (0..QUEUE_LIMIT).map(|_| battery().clone()));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let err = handle.call(battery()).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::DeviceOffline);
    assert!(err.to_string().contains("already queued"), "{err}");
    for call in waiting {
        assert_eq!(
            call.await.unwrap().unwrap_err().code(),
            ErrorCode::DeviceOffline
        );
    }
    drop(hub);
}

#[tokio::test(start_paused = true)]
async fn a_duplicate_response_is_ignored_and_never_applied_twice() {
    let (hub, mut rx, _registry, handle) = online();
    let (result, (first, second)) = call_answered(&handle, battery(), &mut rx, async |sent| {
        let first = hub.on_response("phone-a", &ok(&sent["id"], battery_result(10)));
        let second = hub.on_response("phone-a", &ok(&sent["id"], battery_result(99)));
        (first, second)
    })
    .await;
    assert_eq!(first, ResponseDisposition::Delivered);
    assert_eq!(second, ResponseDisposition::Duplicate);
    assert_eq!(result.unwrap()["level"], 10);
}

#[tokio::test(start_paused = true)]
async fn garbage_is_ignored_and_the_real_answer_still_counts() {
    let (hub, mut rx, registry, handle) = online();
    let (result, seen) = call_answered(&handle, battery(), &mut rx, async |sent| {
        let id = sent["id"].clone();
        let mut seen = Vec::new();
        for garbage in [
            &b""[..],
            b"\xff\xfe\x00",
            b"null",
            b"[]",
            br#"{"v":1,"ok":true,"result":{}}"#,
            br#"{"v":1,"id":{"nested":true},"ok":true}"#,
        ] {
            seen.push(hub.on_response("phone-a", garbage));
        }
        seen.push(hub.on_response("phone-a", &ok(&json!("no-such-id"), json!({}))));
        seen.push(hub.on_response("phone-b", &ok(&id, battery_result(1))));
        seen.push(hub.on_response("phone-a", &ok(&id, battery_result(42))));
        seen
    })
    .await;
    assert_eq!(result.unwrap()["level"], 42);
    assert_eq!(seen[..6], [ResponseDisposition::Malformed; 6]);
    assert_eq!(
        seen[6..],
        [
            ResponseDisposition::Unknown,
            ResponseDisposition::UnknownCompanion,
            ResponseDisposition::Delivered
        ]
    );
    // Presence and events from unknown phones or with garbage bodies are
    // ignored too.
    hub.on_presence("phone-b", true);
    assert!(registry.get("phone-b").is_none());
    assert!(hub.on_event("phone-a", "battery", b"{").is_none());
    assert!(hub.on_event("phone-a", "teleport", b"{}").is_none());
    assert!(hub.on_event("nobody", "battery", b"{}").is_none());
}

#[tokio::test(start_paused = true)]
async fn a_response_from_another_phone_cannot_answer_a_request() {
    let registry = Arc::new(Registry::new());
    let (hub, mut rx) = CompanionHub::new(config(true), registry.clone());
    hub.on_presence("phone-a", true);
    hub.on_presence("phone-b", true);
    let handle = kitchen(&registry);
    let (result, dispositions) = call_answered(&handle, battery(), &mut rx, async |sent| {
        let foreign = hub.on_response("phone-b", &ok(&sent["id"], battery_result(1)));
        let own = hub.on_response("phone-a", &ok(&sent["id"], battery_result(2)));
        (foreign, own)
    })
    .await;
    assert_eq!(
        dispositions,
        (ResponseDisposition::Foreign, ResponseDisposition::Delivered)
    );
    assert_eq!(result.unwrap()["level"], 2);
}

#[tokio::test(start_paused = true)]
async fn a_result_that_does_not_match_the_catalogue_is_unexpected_output() {
    let (hub, mut rx, _registry, handle) = online();
    let (result, ()) = call_answered(&handle, battery(), &mut rx, async |sent| {
        hub.on_response("phone-a", &ok(&sent["id"], json!({"level": "full"})));
    })
    .await;
    let err = result.unwrap_err();
    assert!(
        matches!(err, BridgeError::UnexpectedOutput { .. }),
        "{err:?}"
    );
    assert_eq!(err.code(), ErrorCode::DeviceError);
    assert!(err.to_string().contains("does not match"), "{err}");
}

#[tokio::test(start_paused = true)]
async fn phone_errors_and_version_mismatches_end_the_call_at_once() {
    let (hub, mut rx, _registry, handle) = online();
    for (answer, code, retryable, text) in [
        (
            json!({"ok": false, "error": {"code": "permission_denied", "message": "grant camera", "retryable": false}}),
            ErrorCode::PermissionDenied,
            false,
            "grant camera",
        ),
        (
            json!({"ok": false, "error": {"code": "unknown_action", "message": "old app", "retryable": false}}),
            ErrorCode::UnsupportedAction,
            false,
            "old app",
        ),
        (
            json!({"v": 2, "ok": true, "result": {}}),
            ErrorCode::DeviceError,
            false,
            "protocol version 2",
        ),
    ] {
        let started = Instant::now();
        let phone = async {
            let sent = request(&rx.recv().await.unwrap());
            let mut body = json!({"v": 1, "id": sent["id"]});
            for (k, v) in answer.as_object().unwrap() {
                body[k] = v.clone();
            }
            hub.on_response("phone-a", body.to_string().as_bytes());
        };
        let photo = cmd("camera_control", "take_photo", json!({}));
        let (result, ()) = tokio::join!(handle.call(&photo), phone);
        let err = result.unwrap_err();
        assert_eq!(err.code(), code, "{err}");
        assert_eq!(err.retryable(), retryable, "{err}");
        assert!(err.to_string().contains(text), "{err}");
        assert_eq!(started.elapsed(), Duration::ZERO);
    }
    let err = BridgeError::Companion {
        device: "kitchen".into(),
        error: WireError::new(ErrorCode::Timeout, "camera busy"),
    };
    assert!(err.retryable());
}

#[tokio::test(start_paused = true)]
async fn a_phone_that_drops_after_the_request_went_out_can_still_answer() {
    let (hub, mut rx, _registry, handle) = online();
    let (result, disposition) = call_answered(&handle, battery(), &mut rx, async |sent| {
        hub.on_presence("phone-a", false);
        tokio::time::sleep(Duration::from_secs(2)).await;
        hub.on_presence("phone-a", true);
        hub.on_response("phone-a", &ok(&sent["id"], battery_result(7)))
    })
    .await;
    assert_eq!(disposition, ResponseDisposition::Delivered);
    assert_eq!(result.unwrap()["level"], 7);
}

#[tokio::test]
async fn presence_registers_and_announces_devices() {
    let registry = Arc::new(Registry::new());
    let mut availability = registry.subscribe();
    let (hub, _rx) = CompanionHub::new(config(true), registry.clone());
    assert_eq!(registry.list().len(), 1, "configured companions at once");
    hub.on_presence("phone-a", true);
    hub.on_presence("phone-a", true);
    hub.on_presence("phone-a", false);
    hub.on_presence("bad/id", true);
    hub.on_presence("phone-z", false);
    hub.on_presence("phone-z", true);
    assert_eq!(
        drain(&mut availability),
        [
            DeviceEvent::Availability {
                device: name("kitchen"),
                online: true,
                detail: None
            },
            DeviceEvent::Availability {
                device: name("kitchen"),
                online: false,
                detail: Some("the companion app is offline".into())
            },
            DeviceEvent::Availability {
                device: name("phone-z"),
                online: true,
                detail: None
            },
        ]
    );
    let info = registry.get("phone-z").unwrap().info();
    assert_eq!(info.transport, TransportKind::Companion);
    assert_eq!(info.serial, "phone-z");
    assert_eq!(
        registry
            .get("kitchen")
            .unwrap()
            .info()
            .state_detail
            .as_deref(),
        Some("the companion app is offline")
    );
    assert_eq!(registry.list().len(), 2);
}

#[derive(Debug)]
struct OtherTransport;

impl Device for OtherTransport {
    fn info(&self) -> DeviceInfo {
        DeviceInfo {
            name: DeviceName::try_from("phone-x").unwrap(),
            transport: TransportKind::Adb,
            online: true,
            serial: "phone-x".into(),
            model: None,
            state_detail: None,
        }
    }

    fn execute<'a>(&'a self, _: &'a Command) -> BoxFuture<'a, Result<Value, BridgeError>> {
        Box::pin(async { Ok(Value::Null) })
    }
}

#[tokio::test]
async fn a_companion_never_replaces_a_device_of_another_transport() {
    let registry = Arc::new(Registry::new());
    registry.insert(DeviceHandle::new(
        Arc::new(OtherTransport),
        Duration::from_secs(1),
    ));
    let (hub, _rx) = CompanionHub::new(config(true), registry.clone());
    hub.on_presence("phone-x", true);
    assert_eq!(
        registry.get("phone-x").unwrap().info().transport,
        TransportKind::Adb
    );
    assert!(hub.on_event("phone-x", "battery", b"{}").is_none());
}

#[tokio::test]
async fn events_are_checked_and_broadcast() {
    let (hub, _rx, _registry) = hub();
    let mut events = hub.subscribe_events();
    let body = battery_result(33);
    let event = hub
        .on_event("phone-a", "battery", body.to_string().as_bytes())
        .expect("a valid battery event");
    assert_eq!(event.kind, EventKind::from_name("battery").unwrap());
    assert_eq!(event.device.as_str(), "kitchen");
    assert_eq!(event.companion_id, "phone-a");
    assert_eq!(event.data, body);
    assert_eq!(events.try_recv().unwrap(), event);
    // A body that is not a battery.status result is dropped.
    assert!(
        hub.on_event("phone-a", "battery", br#"{"level": 3}"#)
            .is_none()
    );
    let note = json!({"key": "0|com.a|1", "package": "com.a", "title": "Hi", "text": null, "posted_ms": 1});
    let event = hub
        .on_event(
            "phone-a",
            "notification_posted",
            note.to_string().as_bytes(),
        )
        .unwrap();
    assert_eq!(event.kind, EventKind::NotificationPosted);
    assert!(events.try_recv().is_ok());
    assert!(events.try_recv().is_err());
}

#[tokio::test(start_paused = true)]
async fn a_stopped_daemon_fails_calls_instead_of_hanging() {
    let (hub, rx, registry) = hub();
    hub.on_presence("phone-a", true);
    drop(rx);
    let err = kitchen(&registry).call(battery()).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::DeviceOffline);
    assert!(err.to_string().contains("stopped"), "{err}");
}

#[test]
fn every_catalogue_action_is_supported() {
    assert!(
        TransportKind::Companion
            .capabilities()
            .iter()
            .all(|c| c.supported)
    );
}

#[tokio::test]
async fn a_renamed_phone_keeps_its_presence_under_the_new_name() {
    let (hub, _rx, registry) = hub();
    hub.on_presence("phone-a", true);
    let mut events = registry.subscribe();
    let changes = hub.set_names(BTreeMap::from([("phone-a".to_owned(), name("hall"))]));
    assert_eq!(changes, vec![(Some(name("kitchen")), Some(name("hall")))]);
    assert_eq!(names(&registry), vec![("hall".to_owned(), true)]);
    let seen = drain(&mut events);
    assert_eq!(seen, renamed("kitchen", "hall"));
    // Presence now moves the new name.
    hub.on_presence("phone-a", false);
    assert_eq!(names(&registry), vec![("hall".to_owned(), false)]);
}

#[tokio::test(start_paused = true)]
async fn a_call_queued_under_the_old_name_goes_out_when_the_renamed_phone_returns() {
    let (hub, mut rx, registry) = hub();
    let old = kitchen(&registry);
    let call = tokio::spawn(async move { old.call(battery()).await });
    tokio::time::sleep(Duration::from_secs(1)).await;
    hub.set_names(BTreeMap::from([("phone-a".to_owned(), name("hall"))]));
    hub.on_presence("phone-a", true);
    let sent = request(&rx.recv().await.unwrap());
    hub.on_response("phone-a", &ok(&sent["id"], battery_result(42)));
    assert_eq!(call.await.unwrap().unwrap()["level"], 42);
}

#[tokio::test]
async fn a_phone_no_longer_named_leaves_unless_auto_registration_keeps_it() {
    let (hub, _rx, registry) = hub();
    hub.on_presence("phone-a", true);
    let changes = hub.set_names(BTreeMap::new());
    assert_eq!(changes, vec![(Some(name("kitchen")), None)]);
    assert!(registry.list().is_empty());

    let registry = Arc::new(Registry::new());
    let (hub, _rx) = CompanionHub::new(config(true), Arc::clone(&registry));
    hub.on_presence("phone-a", true);
    hub.set_names(BTreeMap::new());
    assert_eq!(names(&registry), vec![("phone-a".to_owned(), true)]);
}

#[tokio::test]
async fn a_newly_named_phone_is_registered_offline() {
    let (hub, _rx, registry) = hub();
    let changes = hub.set_names(BTreeMap::from([
        ("phone-a".to_owned(), name("kitchen")),
        ("phone-b".to_owned(), name("garage")),
    ]));
    assert_eq!(changes, vec![(None, Some(name("garage")))]);
    assert_eq!(
        names(&registry),
        vec![("garage".to_owned(), false), ("kitchen".to_owned(), false)]
    );
    hub.on_presence("phone-b", true);
    assert_eq!(
        names(&registry),
        vec![("garage".to_owned(), true), ("kitchen".to_owned(), false)]
    );
}

/// A phone that announced itself while unknown (auto-registration off),
/// then named by a reload, starts online: its retained `online` message is
/// not delivered again, so the hub must have kept it. One that went
/// offline meanwhile starts offline.
#[tokio::test]
async fn a_phone_named_while_online_starts_online() {
    let (hub, _rx, registry) = hub();
    hub.on_presence("phone-b", true);
    hub.on_presence("phone-c", true);
    hub.on_presence("phone-c", false);
    assert_eq!(names(&registry), vec![("kitchen".to_owned(), false)]);
    hub.set_names(BTreeMap::from([
        ("phone-a".to_owned(), name("kitchen")),
        ("phone-b".to_owned(), name("garage")),
        ("phone-c".to_owned(), name("attic")),
    ]));
    assert_eq!(
        names(&registry),
        vec![
            ("attic".to_owned(), false),
            ("garage".to_owned(), true),
            ("kitchen".to_owned(), false)
        ]
    );
    // Many unknown ids keep the memory bounded: the oldest are forgotten.
    for n in 0..MAX_UNKNOWN_PRESENCES + 10 {
        hub.on_presence(&format!("flood-{n}"), true);
    }
    assert_eq!(lock(&hub.inner.unknown).len(), MAX_UNKNOWN_PRESENCES);
}

/// While the daemon's own connection to the broker is down, a change for a
/// companion phone waits in the phone's queue unsent (not in the MQTT
/// client's, as if sent), and goes once the phone's presence comes back;
/// past the queue's time to live it is `device_offline`, never `timeout`.
#[tokio::test(start_paused = true)]
async fn a_change_asked_while_the_daemons_connection_is_down_is_queued_not_sent() {
    let (hub, mut rx, registry) = hub();
    hub.on_presence("phone-a", true);
    let handle = kitchen(&registry);
    hub.connection_lost("the daemon's connection to the MQTT broker is down");
    assert!(!handle.info().online);
    assert_eq!(
        handle.info().state_detail.as_deref(),
        Some("the daemon's connection to the MQTT broker is down")
    );
    let call = tokio::spawn({
        let handle = handle.clone();
        async move { handle.call(&brightness(7)).await }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(rx.try_recv().is_err(), "nothing handed to the MQTT client");
    // Reconnected: the retained presence arrives again, the change goes.
    hub.on_presence("phone-a", true);
    let sent = request(&rx.recv().await.unwrap());
    hub.on_response("phone-a", &ok(&sent["id"], json!({"brightness": 7})));
    call.await.unwrap().unwrap();

    // Down beyond the queue's time to live: never sent, so device_offline.
    hub.connection_lost("the daemon's connection to the MQTT broker is down");
    let err = handle.call(&brightness(8)).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::DeviceOffline, "{err}");
    assert!(rx.try_recv().is_err());
}

fn brightness(level: i64) -> Command {
    cmd("screen_control", "set_brightness", json!({"level": level}))
}

/// Regression (issue #10): changes queued behind another change for an
/// offline phone were reported as `timeout` ("may have run") when the
/// device handle's overall timeout fired before their own queue time was
/// up. A change that was never sent did not run: `device_offline`.
#[tokio::test(start_paused = true)]
async fn queued_changes_that_were_never_sent_are_device_offline_not_timeout() {
    let (hub, mut rx, registry) = hub();
    let handle = kitchen(&registry);
    let started = Instant::now();
    let calls = spawn_calls(&handle, (0..3).map(brightness));
    for call in calls {
        let err = call.await.unwrap().unwrap_err();
        assert_eq!(err.code(), ErrorCode::DeviceOffline, "{err}");
        assert!(err.retryable());
        assert!(err.to_string().contains("not sent"), "{err}");
    }
    // Each waited at most its own queue time; none was ever sent.
    assert!(
        started.elapsed() <= TTL.max(TIMEOUT),
        "{:?}",
        started.elapsed()
    );
    hub.on_presence("phone-a", true);
    assert!(rx.try_recv().is_err());
    assert_eq!(lock(&hub.inner.shared.pending).open_count(), 0);
}

/// Changes queued for an offline phone go out one at a time, in order,
/// when it comes back; and one that was sent and not answered is `timeout`.
#[tokio::test(start_paused = true)]
async fn queued_changes_go_out_in_order_and_only_a_sent_one_can_time_out() {
    let (hub, mut rx, registry) = hub();
    let handle = kitchen(&registry);
    let calls = spawn_calls(&handle, (1..=2).map(brightness));
    tokio::time::sleep(Duration::from_secs(10)).await;
    hub.on_presence("phone-a", true);
    let first = request(&rx.recv().await.unwrap());
    assert_eq!(first["params"], json!({"level": 1}));
    // The second waits for the first's answer, which never comes.
    let second = request(&rx.recv().await.unwrap());
    assert_eq!(second["params"], json!({"level": 2}));
    hub.on_response("phone-a", &ok(&second["id"], json!({"brightness": 2})));
    let mut calls = calls.into_iter();
    let err = calls.next().unwrap().await.unwrap().unwrap_err();
    assert_eq!(err.code(), ErrorCode::Timeout, "{err}");
    assert_eq!(
        calls.next().unwrap().await.unwrap().unwrap(),
        json!({"brightness": 2})
    );
}

/// Regression (issue #10): the queue limit did not apply to changes (70 of
/// 70 queued), because they waited for the phone's one-change-at-a-time
/// turn before reaching the queue's counter.
#[tokio::test(start_paused = true)]
async fn the_queue_limit_counts_changes_waiting_for_their_turn() {
    let (hub, mut rx, registry) = hub();
    let handle = kitchen(&registry);
    let waiting = spawn_calls(
        &handle,
        (0..QUEUE_LIMIT).map(|i| brightness(i64::try_from(i).unwrap())),
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    for extra in [brightness(99), battery().clone()] {
        let err = handle.call(&extra).await.unwrap_err();
        assert_eq!(err.code(), ErrorCode::DeviceOffline, "{err}");
        assert!(err.to_string().contains("already queued"), "{err}");
    }
    // Online, the queue is full of changes waiting for their turn: busy.
    hub.on_presence("phone-a", true);
    let _first = rx.recv().await.unwrap();
    let err = handle.call(&brightness(100)).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::Busy, "{err}");
    assert!(err.retryable());
    drop(hub);
    for call in waiting {
        let _ = call.await.unwrap();
    }
}

/// A change held up behind earlier changes to an online phone until its
/// queue time is up was never sent: `busy`, not `timeout`.
#[tokio::test(start_paused = true)]
async fn a_change_stuck_behind_others_on_an_online_phone_is_busy() {
    let registry = Arc::new(Registry::new());
    let mut cfg = config(false);
    cfg.queue_ttl = Duration::from_secs(8);
    let (hub, mut rx) = CompanionHub::new(cfg, registry.clone());
    hub.on_presence("phone-a", true);
    let handle = kitchen(&registry);
    let (one, two, three) = (brightness(1), brightness(2), brightness(3));
    let (a, b, c, _) = tokio::join!(
        handle.call(&one),
        handle.call(&two),
        handle.call(&three),
        async {
            // Nothing answers; the first two go out and time out.
            let _ = rx.recv().await;
            let _ = rx.recv().await;
        }
    );
    assert_eq!(a.unwrap_err().code(), ErrorCode::Timeout);
    // The second got its turn after 5 s (the first's answer deadline),
    // within its 8 s of queue time: sent, then timed out at 10 s. The
    // third was still waiting for its turn at 8 s: never sent.
    assert_eq!(b.unwrap_err().code(), ErrorCode::Timeout);
    let c = c.unwrap_err();
    assert_eq!(c.code(), ErrorCode::Busy, "{c}");
    assert!(c.to_string().contains("behind earlier changes"), "{c}");
}

#[tokio::test(start_paused = true)]
async fn auto_registration_stops_at_max_auto_devices() {
    let registry = Arc::new(Registry::new());
    let mut cfg = config(true);
    cfg.max_auto_devices = 3;
    let (hub, _rx) = CompanionHub::new(cfg, registry.clone());
    // A flood of made-up ids.
    for i in 0..3000 {
        hub.on_presence(&format!("fake-{i}"), true);
    }
    // The configured phone, plus three.
    assert_eq!(hub.len(), 4);
    assert_eq!(registry.list().len(), 4);
    // The configured phone is not counted and still comes online.
    hub.on_presence("phone-a", true);
    assert!(kitchen(&registry).info().online);
    // Known auto-registered ids keep working.
    hub.on_presence("fake-1", false);
    hub.on_presence("fake-1", true);
    assert!(registry.get("fake-1").unwrap().info().online);
}

#[tokio::test(start_paused = true)]
async fn unknown_presences_with_auto_registration_off_keep_nothing() {
    let (hub, _rx, registry) = hub();
    for i in 0..3000 {
        hub.on_presence(&format!("fake-{i}"), true);
    }
    assert_eq!(hub.len(), 1);
    assert_eq!(registry.list().len(), 1);
    assert_eq!(lock(&hub.inner.shared.pending).open_count(), 0);
}

#[tokio::test(start_paused = true)]
async fn the_ignored_presence_warning_is_rate_limited() {
    let warn = RateLimited::default();
    let start = Instant::now();
    assert_eq!(warn.due(start), Some(1));
    for _ in 0..99 {
        assert_eq!(warn.due(start + Duration::from_secs(1)), None);
    }
    assert_eq!(warn.due(start + WARN_EVERY), Some(100));
    assert_eq!(warn.due(start + WARN_EVERY), None);
}

/// A request the daemon's MQTT side never took (its channel stayed full)
/// was not sent: `busy`, not `timeout`.
#[tokio::test(start_paused = true)]
async fn a_request_the_mqtt_side_never_took_is_busy_not_timeout() {
    let (hub, _rx, registry) = hub();
    hub.on_presence("phone-a", true);
    let handle = kitchen(&registry);
    // Fill the channel: nobody reads it.
    let fillers = spawn_calls(&handle, (0..OUTGOING_CAPACITY).map(|_| battery().clone()));
    tokio::time::sleep(Duration::from_millis(10)).await;
    let err = handle.call(battery()).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::Busy, "{err}");
    assert!(err.to_string().contains("not sent"), "{err}");
    for filler in fillers {
        // Handed over, never answered: they may have run.
        assert_eq!(
            filler.await.unwrap().unwrap_err().code(),
            ErrorCode::Timeout
        );
    }
}

#[tokio::test(start_paused = true)]
async fn host_files_and_oversized_requests_are_never_published() {
    let (hub, mut rx, _registry, handle) = online();
    for (command, want) in [
        (
            cmd(
                "files",
                "push",
                json!({"path": "/sdcard/Download/a", "host_path": "/srv/a"}),
            ),
            ErrorCode::UnsupportedAction,
        ),
        (
            cmd("app_manager", "install", json!({"host_path": "/srv/a.apk"})),
            ErrorCode::UnsupportedAction,
        ),
        (
            cmd(
                "files",
                "push",
                json!({"path": "/sdcard/Download/a", "text": "x".repeat(MAX_REQUEST_BYTES)}),
            ),
            ErrorCode::Denied,
        ),
    ] {
        let err = handle.call(&command).await.unwrap_err();
        assert_eq!(err.to_wire().code, want, "{err}");
        assert!(rx.try_recv().is_err(), "{err}: something was published");
    }
    assert_eq!(lock(&hub.inner.shared.pending).open_count(), 0);
}
