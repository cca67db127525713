//! The companion app's MQTT session (rumqttc).
//!
//! One task owns the `EventLoop` and only polls it; everything that may wait
//! on rumqttc's request channel (answers, events) runs in other tasks with
//! clones of the client, because publishing into a full request channel
//! from the polling task deadlocks. The polling task itself uses only the
//! non-blocking `try_*` calls.
//!
//! - The last will is `offline`, retained, on the `online` topic.
//! - On every ConnAck the request topic is subscribed again (rumqttc does not
//!   restore subscriptions); on the SubAck, `online` is published retained
//!   and the session counts as connected, so a request sent after the
//!   presence shows `online` is never missed.
//! - After a connection error, rumqttc reconnects on the next poll with no
//!   delay of its own: the task waits a capped, doubling backoff first.
//! - Going offline cleanly publishes `offline` (retained) and disconnects;
//!   going offline abruptly drops the TCP connection so the broker
//!   publishes the will.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use droidwarden_services::{ErrorCode, WireError};
use rumqttc::{
    AsyncClient, Event, EventLoop, LastWill, MqttOptions, Outgoing, Packet, QoS,
    SubscribeReasonCode,
};
use serde_json::Value;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{Companion, Link, actions, request};
use crate::clock;
use crate::fault::OneShot;
use crate::sim::SimHandle;

/// Keep-alive: a phone that vanishes without closing its connection is
/// declared gone (and its will published) after about 1.5 × this.
const KEEP_ALIVE: Duration = Duration::from_secs(10);

/// rumqttc's default maximum packet is 10 KiB; an `app_list.list` answer
/// with system apps is bigger.
const MAX_PACKET: usize = 1024 * 1024;

/// rumqttc's request channel: answers and events wait on it (never the
/// polling task), so a small bound is enough to keep memory flat while the
/// broker is slow.
const REQUEST_CAPACITY: usize = 64;

const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(2);

/// How long a clean goodbye (`offline`, DISCONNECT) may take.
const GOODBYE_WAIT: Duration = Duration::from_secs(2);

/// Why a session ended.
enum End {
    /// The simulator is shutting down.
    Shutdown,
    /// The control port changed the link.
    Link,
}

/// Runs the companion app until `shutdown`: connected while the link is up.
pub(crate) async fn run(
    sim: SimHandle,
    app: Arc<Companion>,
    shutdown: CancellationToken,
    tracker: TaskTracker,
) {
    let mut link = app.link.subscribe();
    loop {
        if *link.borrow_and_update() != Link::Up {
            tokio::select! {
                () = shutdown.cancelled() => return,
                changed = link.changed() => match changed {
                    Ok(()) => continue,
                    Err(_) => return,
                },
            }
        }
        match session(&sim, &app, &mut link, &shutdown, &tracker).await {
            End::Shutdown => return,
            End::Link => {}
        }
    }
}

fn options(app: &Companion) -> MqttOptions {
    let s = &app.settings;
    let mut options = MqttOptions::new(s.id.clone(), s.broker_host.clone(), s.broker_port);
    options
        .set_keep_alive(KEEP_ALIVE)
        // The daemon queues requests for an offline phone; a persistent
        // session would have the broker deliver stale ones as well.
        .set_clean_session(true)
        .set_max_packet_size(MAX_PACKET, MAX_PACKET)
        .set_last_will(LastWill::new(
            s.topic("online"),
            "offline",
            QoS::AtLeastOnce,
            true,
        ));
    if let Some((user, password)) = &s.credentials {
        options.set_credentials(user.clone(), password.clone());
    }
    options
}

/// One MQTT client from connect to goodbye, reconnecting on errors.
async fn session(
    sim: &SimHandle,
    app: &Arc<Companion>,
    link: &mut watch::Receiver<Link>,
    shutdown: &CancellationToken,
    tracker: &TaskTracker,
) -> End {
    let settings = &app.settings;
    let request_topic = settings.topic("request");
    let online_topic = settings.topic("online");
    let (client, mut eventloop) = AsyncClient::new(options(app), REQUEST_CAPACITY);
    // Small request/response messages: Nagle's algorithm would hold each
    // one back for the peer's delayed ACK (tens of milliseconds).
    let mut network = rumqttc::NetworkOptions::new();
    network.set_tcp_nodelay(true);
    eventloop.set_network_options(network);
    app.connected.send_replace(false);
    // Answers and events of this session stop with it.
    let session = shutdown.child_token();
    let _stop = session.clone().drop_guard();
    tracker.spawn(events(
        sim.clone(),
        Arc::clone(app),
        client.clone(),
        session.clone(),
    ));
    let mut backoff = BACKOFF_MIN;
    let (end, clean) = loop {
        tokio::select! {
            () = shutdown.cancelled() => break (End::Shutdown, true),
            changed = link.changed() => {
                if changed.is_err() {
                    break (End::Shutdown, true);
                }
                match *link.borrow_and_update() {
                    Link::Up => {}
                    Link::Down => break (End::Link, true),
                    Link::Dropped => break (End::Link, false),
                }
            }
            event = eventloop.poll() => match event {
                Ok(Event::Incoming(Packet::ConnAck(_))) => {
                    backoff = BACKOFF_MIN;
                    tracing::debug!(broker = %settings.broker_host, "companion connected; subscribing");
                    if let Err(e) = client.try_subscribe(&request_topic, QoS::AtLeastOnce) {
                        tracing::warn!(error = %e, "cannot queue the subscription");
                    }
                }
                Ok(Event::Incoming(Packet::SubAck(ack))) => {
                    if ack.return_codes.iter().any(|c| matches!(c, SubscribeReasonCode::Failure)) {
                        tracing::error!(topic = %request_topic, "the broker refused the subscription (ACL?); staying silent");
                        continue;
                    }
                    if let Err(e) = client.try_publish(&online_topic, QoS::AtLeastOnce, true, "online") {
                        tracing::warn!(error = %e, "cannot queue the presence");
                    }
                    app.connected.send_replace(true);
                    tracing::info!(id = %settings.id, "companion online");
                }
                Ok(Event::Incoming(Packet::Publish(publish))) if publish.topic == request_topic => {
                    tracker.spawn(answer(
                        sim.clone(),
                        Arc::clone(app),
                        client.clone(),
                        publish.payload.to_vec(),
                        session.clone(),
                    ));
                }
                Ok(_) => {}
                Err(e) => {
                    if app.connected.send_replace(false) {
                        tracing::warn!(error = %e, "companion connection lost; reconnecting");
                    } else {
                        tracing::debug!(error = %e, ?backoff, "companion cannot connect; retrying");
                    }
                    tokio::select! {
                        () = shutdown.cancelled() => break (End::Shutdown, false),
                        () = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                }
            },
        }
    };
    if clean && *app.connected.borrow() {
        goodbye(&client, &mut eventloop, &online_topic).await;
    }
    // Dropping the event loop closes the connection; without a DISCONNECT
    // the broker publishes the will.
    drop(eventloop);
    app.connected.send_replace(false);
    tracing::info!(id = %settings.id, clean, "companion offline");
    end
}

/// Publishes `offline` (retained) and disconnects, waiting (bounded) until
/// the DISCONNECT has been written.
async fn goodbye(client: &AsyncClient, eventloop: &mut EventLoop, online_topic: &str) {
    let queued = client
        .try_publish(online_topic, QoS::AtLeastOnce, true, "offline")
        .and_then(|()| client.try_disconnect());
    if let Err(e) = queued {
        tracing::warn!(error = %e, "cannot queue the goodbye");
        return;
    }
    let drive = async {
        loop {
            match eventloop.poll().await {
                Ok(Event::Outgoing(Outgoing::Disconnect)) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    if tokio::time::timeout(GOODBYE_WAIT, drive).await.is_err() {
        tracing::warn!("the goodbye did not go out in time");
    }
}

/// Answers one request, applying the simulator's faults: the standing delay
/// first, then a one-shot `fail` (answered with `device_error`, nothing
/// performed) or `drop` (never answered).
async fn answer(
    sim: SimHandle,
    app: Arc<Companion>,
    client: AsyncClient,
    payload: Vec<u8>,
    session: CancellationToken,
) {
    let (delay, one_shot) = sim.take_faults();
    if let Some(delay) = delay {
        tokio::select! {
            () = session.cancelled() => return,
            () = tokio::time::sleep(delay) => {}
        }
    }
    let now = clock::now_ms();
    let response = match one_shot {
        Some(OneShot::Drop) => {
            tracing::info!("fault: companion request dropped unanswered");
            return;
        }
        Some(OneShot::Fail { exit, stderr }) => request::respond(&payload, now, |_| {
            Err(WireError::new(
                ErrorCode::DeviceError,
                format!("{} (exit status {exit})", stderr.trim()),
            ))
        }),
        None => request::respond(&payload, now, |command| {
            actions::perform(&sim, &app, command)
        }),
    };
    let body = match response {
        Ok(body) => body,
        Err(problem) => {
            tracing::warn!(%problem, "companion request ignored");
            return;
        }
    };
    let copies = if app.duplicates.load(Ordering::SeqCst) {
        2
    } else {
        1
    };
    let topic = app.settings.topic("response");
    for _ in 0..copies {
        if let Err(e) = client
            .publish(&topic, QoS::AtLeastOnce, false, body.clone())
            .await
        {
            tracing::warn!(error = %e, "cannot publish the companion response");
            return;
        }
    }
}

/// Publishes `event/<kind>` with a JSON body (not retained).
async fn publish_event(client: &AsyncClient, app: &Companion, kind: &str, body: &Value) {
    let topic = app.settings.topic(&format!("event/{kind}"));
    if let Err(e) = client
        .publish(topic, QoS::AtLeastOnce, false, body.to_string())
        .await
    {
        tracing::debug!(error = %e, kind, "cannot publish a companion event");
    }
}

/// Pushes events while the session is connected: `battery` on connect and
/// whenever the battery changes; `location` at once and then every interval
/// while tracking; `notification_posted` and `notification_removed` when the
/// notifications change (those present at a connection are its baseline).
/// A real app's NotificationListenerService does the same.
async fn events(
    sim: SimHandle,
    app: Arc<Companion>,
    client: AsyncClient,
    session: CancellationToken,
) {
    let mut changes = sim.state_changes();
    let mut tracking = app.tracking.subscribe();
    let mut connected = app.connected.subscribe();
    let mut up = *connected.borrow_and_update();
    // Every command wakes this task: what it compares is read under the
    // state lock, and the battery's report is made only when the battery
    // itself changed (a copy of the whole state per command would cost the
    // phone more than the command).
    let mut last_battery: Option<(crate::state::Battery, Value)> = None;
    let mut shown = notifications_now(&sim);
    let mut next_fix: Option<Instant> = None;
    let battery = async |last: &mut Option<(crate::state::Battery, Value)>| {
        let state = sim.read_state(|s| s.battery.clone());
        if last.as_ref().is_some_and(|(seen, _)| *seen == state) {
            return;
        }
        let Ok(now) = actions::battery_snapshot(&sim) else {
            return;
        };
        if last.as_ref().map(|(_, body)| body) != Some(&now) {
            publish_event(&client, &app, "battery", &now).await;
        }
        *last = Some((state, now));
    };
    let fix = |sim: &SimHandle| actions::current_fix(sim, false).ok();
    loop {
        let interval = tracking.borrow().map(|s| Duration::from_secs(u64::from(s)));
        let due = next_fix;
        let fix_due = async move {
            match due {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = session.cancelled() => return,
            changed = connected.changed() => {
                if changed.is_err() {
                    return;
                }
                up = *connected.borrow_and_update();
                next_fix = None;
                if up {
                    // A snapshot on every (re)connect, then changes only.
                    last_battery = None;
                    battery(&mut last_battery).await;
                    shown = notifications_now(&sim);
                    if let Some(interval) = interval {
                        if let Some(body) = fix(&sim) {
                            publish_event(&client, &app, "location", &body).await;
                        }
                        next_fix = Some(Instant::now() + interval);
                    }
                }
            }
            changed = changes.changed() => {
                if changed.is_err() {
                    return;
                }
                changes.borrow_and_update();
                if up {
                    battery(&mut last_battery).await;
                    if !sim.read_state(|s| same_notifications(&shown, &s.content.notifications)) {
                        let now = notifications_now(&sim);
                        for (kind, body) in notification_changes(&shown, &now, crate::clock::now_ms()) {
                            publish_event(&client, &app, kind, &body).await;
                        }
                        shown = now;
                    }
                }
            }
            changed = tracking.changed() => {
                if changed.is_err() {
                    return;
                }
                let interval = tracking.borrow_and_update().map(|s| Duration::from_secs(u64::from(s)));
                next_fix = None;
                if let (true, Some(interval)) = (up, interval) {
                    if let Some(body) = fix(&sim) {
                        publish_event(&client, &app, "location", &body).await;
                    }
                    next_fix = Some(Instant::now() + interval);
                }
            }
            () = fix_due => {
                if let Some(body) = fix(&sim) {
                    publish_event(&client, &app, "location", &body).await;
                }
                next_fix = interval.map(|i| Instant::now() + i);
            }
        }
    }
}

/// Whether `posted` are the notifications in `shown`.
fn same_notifications(
    shown: &std::collections::BTreeMap<String, crate::content::PostedNotification>,
    posted: &[crate::content::PostedNotification],
) -> bool {
    shown.len() == posted.len() && posted.iter().all(|n| shown.get(&n.key()) == Some(n))
}

/// The posted notifications by key.
fn notifications_now(
    sim: &SimHandle,
) -> std::collections::BTreeMap<String, crate::content::PostedNotification> {
    sim.state()
        .content
        .notifications
        .into_iter()
        .map(|n| (n.key(), n))
        .collect()
}

/// The events that take `before` to `after`: removals, then postings (a
/// changed notification is posted again under its key).
fn notification_changes(
    before: &std::collections::BTreeMap<String, crate::content::PostedNotification>,
    after: &std::collections::BTreeMap<String, crate::content::PostedNotification>,
    now_ms: u64,
) -> Vec<(&'static str, Value)> {
    let mut events = Vec::new();
    for (key, n) in before {
        if !after.contains_key(key) {
            events.push((
                "notification_removed",
                serde_json::json!({"key": key, "package": n.package, "removed_ms": now_ms}),
            ));
        }
    }
    for (key, n) in after {
        if before.get(key) != Some(n) {
            events.push((
                "notification_posted",
                serde_json::json!({
                    "key": key,
                    "package": n.package,
                    "title": n.title,
                    "text": n.text,
                    "posted_ms": n.posted_ms,
                }),
            ));
        }
    }
    events
}

#[cfg(test)]
mod notification_tests {
    use super::*;
    use crate::content::PostedNotification;

    fn note(id: u32, text: &str) -> (String, PostedNotification) {
        let n = PostedNotification {
            package: "com.a.b".into(),
            id,
            title: Some("t".into()),
            text: Some(text.into()),
            posted_ms: 5,
            ongoing: false,
            uid: 10_001,
        };
        (n.key(), n)
    }

    #[test]
    fn removals_then_postings_and_updates() {
        let before = [note(1, "x"), note(2, "y")].into_iter().collect();
        let after = [note(2, "changed"), note(3, "new")].into_iter().collect();
        let events = notification_changes(&before, &after, 99);
        let kinds: Vec<(&str, &str)> = events
            .iter()
            .map(|(k, b)| (*k, b["key"].as_str().unwrap()))
            .collect();
        assert_eq!(
            kinds,
            [
                ("notification_removed", "0|com.a.b|1|null|10001"),
                ("notification_posted", "0|com.a.b|2|null|10001"),
                ("notification_posted", "0|com.a.b|3|null|10001"),
            ]
        );
        assert_eq!(events[0].1["removed_ms"], 99);
        assert!(notification_changes(&after, &after, 1).is_empty());
    }
}
