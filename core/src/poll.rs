//! Keeps each phone's read state fresh: every configured service is read on
//! its own interval and the result goes out on the bus as state (retained
//! on MQTT). Polls are reads by the daemon itself, so they announce state
//! but no `executing`/`success` status.
//!
//! The intervals come through a [`watch`] channel so that a configuration
//! reload changes them in place: each tick reads the current ones.

use crate::hub::Hub;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The key of [`Intervals`] that is no state read: how often ADB phones'
/// notifications are read for their events ([`Hub::poll_notifications`]).
pub const NOTIFICATIONS: &str = "notifications";

/// How often due polls are looked for.
const TICK: Duration = Duration::from_secs(1);

/// (device, service) → when its last poll started, and whether it is still
/// running (so a slow phone never has two polls of one service).
type LastPolls = HashMap<(String, &'static str), (Instant, bool)>;

/// Seconds between state reads, per service id.
pub type Intervals = BTreeMap<&'static str, Duration>;

/// Read each service's state on every device at its interval (from
/// `intervals`, which a reload may change), until `shutdown`; each read
/// goes through the hub like any call and publishes the state it finds;
/// reads are spawned on `tracker`.
pub async fn run(
    hub: Hub,
    mut intervals: watch::Receiver<Intervals>,
    tracker: TaskTracker,
    shutdown: CancellationToken,
) {
    let last: Arc<Mutex<LastPolls>> = Arc::default();
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        if intervals.borrow_and_update().is_empty() {
            // Nothing to poll: sleep until a reload says otherwise.
            tokio::select! {
                () = shutdown.cancelled() => return,
                changed = intervals.changed() => if changed.is_err() { return },
            }
            continue;
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let current = intervals.borrow().clone();
        let now = Instant::now();
        let (online, offline): (Vec<_>, Vec<_>) =
            hub.registry().list().into_iter().partition(|d| d.online);
        for info in offline {
            hub.forget_notifications(&info.name);
        }
        for info in online {
            let Some(device) = hub.registry().get(info.name.as_str()) else {
                continue;
            };
            for (&service, &every) in &current {
                let key = (info.name.to_string(), service);
                {
                    let mut last = last.lock().unwrap_or_else(|e| e.into_inner());
                    match last.get(&key) {
                        Some((_, true)) => continue,
                        Some((at, false)) if now.duration_since(*at) < every => continue,
                        _ => {}
                    }
                    last.insert(key.clone(), (now, true));
                }
                let (hub, device, last) = (hub.clone(), device.clone(), Arc::clone(&last));
                tracker.spawn(async move {
                    if service == NOTIFICATIONS {
                        hub.poll_notifications(&device).await;
                    } else {
                        hub.poll_state(&device, service).await;
                    }
                    if let Some(entry) =
                        last.lock().unwrap_or_else(|e| e.into_inner()).get_mut(&key)
                    {
                        entry.1 = false;
                    }
                });
            }
        }
    }
}
