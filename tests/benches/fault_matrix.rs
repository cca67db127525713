//! Benchmark: delivery under bursts, stalls and crashes — the fault matrix.
//!
//! Every scenario drives the release daemon over MQTT with real
//! components (the real adb server, emulated ADB phones, the embedded
//! broker or mosquitto) and checks every command against the phones' own
//! command logs. Each command is `intents.open_url` with a link that
//! carries its id (`https://dw.test/<id>`), so a phone's log says exactly
//! which commands ran, how often and in what order.
//!
//! For each scenario it prints: sent; answered, by outcome; ran once; ran
//! twice; answered but the answer was untrue (`ok` that never ran, "not
//! sent" that ran); lost (no answer even after same-id resends, and never
//! ran); and, where one publisher sends in order, whether each phone ran
//! its commands in that order.
//!
//! ```sh
//! cargo build --release --workspace --bins
//! cargo bench -p droidwarden-e2e --bench fault_matrix            # all
//! cargo bench -p droidwarden-e2e --bench fault_matrix -- flood   # some
//! ```
//! Scenarios (a name filters by substring): `flood-embedded`,
//! `flood-mosquitto` (its defaults), `flood-mosquitto-roomy`
//! (`max_queued_messages 100000`), `paced-320/s-embedded`, `queue-depth`
//! (200 at once to one phone that takes 200 ms a command),
//! `outage-{3,10,60}s-{persistent,volatile}` (mosquitto stopped and
//! started again), `kill-5x` (the daemon SIGKILLed five times in a stream
//! of 1 000, then every id resent), `frozen-phone` (20 s), `slow-phone`
//! (1.2 s a command against a 1 s timeout), `wal-deleted`,
//! `store-emptied`.
//! `FLOOD` (20000), `PHONES` (10) and `STREAM` (500) override the sizes.
//! The mosquitto outage, kill and roomy-flood scenarios add two companion
//! phones (the emulated companion app over MQTT) to the ADB phones.
//! `JSON=1` prints each scenario's counts as one JSON line too.

use droidwarden_e2e::mqtt::{ANY_BROKER_PORT, Daemon, Mosquitto, NO_POLLS};
use droidwarden_e2e::{AdbServer, P, Sim, SimOptions, free_port, poll_until, wait_for};
use rumqttc::{Client, Event, MqttOptions, Packet, QoS};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let flood = droidwarden_e2e::env_size("FLOOD", 20_000);
    let phones = droidwarden_e2e::env_size("PHONES", 10);
    let stream = droidwarden_e2e::env_size("STREAM", 500);
    let mut scenarios: Vec<Scenario> = vec![
        Scenario::flood("flood-embedded", BrokerKind::Embedded, flood, phones),
        Scenario::flood("flood-mosquitto", BrokerKind::Mosquitto, flood, phones),
        Scenario::flood(
            "flood-mosquitto-roomy",
            BrokerKind::MosquittoRoomy,
            flood,
            phones,
        ),
        Scenario {
            rate: Some(320.0),
            ..Scenario::flood("paced-320/s-embedded", BrokerKind::Embedded, flood, phones)
        },
        Scenario {
            calls: 200,
            rate: None,
            call_timeout_ms: None,
            ..Scenario::stall("queue-depth", Fault::Slow(200))
        },
    ];
    for secs in [3, 10, 60] {
        for persistent in [true, false] {
            scenarios.push(Scenario::outage(secs, persistent, stream, phones));
        }
    }
    scenarios.extend([
        Scenario::kills(1000, phones),
        Scenario::stall("frozen-phone", Fault::Freeze),
        Scenario::stall("slow-phone", Fault::Slow(1200)),
        Scenario::store("wal-deleted", StoreDamage::DeleteWal),
        Scenario::store("store-emptied", StoreDamage::EmptyMain),
    ]);
    let chosen: Vec<Scenario> = scenarios
        .into_iter()
        .filter(|s| filters.is_empty() || filters.iter().any(|f| s.name.contains(f.as_str())))
        .collect();
    println!(
        "{:<26} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>5} {:>5} {:>6} {:>5}  order / notes",
        "scenario",
        "sent",
        "ok",
        "busy",
        "offln",
        "tmout",
        "intrn",
        "resnt",
        "once",
        "twice",
        "untrue",
        "lost",
    );
    for scenario in chosen {
        let started = Instant::now();
        let tally = scenario.run();
        tally.print(&scenario.name, started.elapsed());
    }
}

/// Which broker the daemon and the publishers meet on.
#[derive(Debug, Clone, Copy, PartialEq)]
enum BrokerKind {
    /// The daemon's own broker (the default set-up).
    Embedded,
    /// mosquitto with its defaults (no persistence).
    Mosquitto,
    /// mosquitto with persistence on.
    MosquittoPersistent,
    /// mosquitto with room to queue a flood for a client
    /// (`max_queued_messages 100000`; its default is 1000).
    MosquittoRoomy,
}

/// What goes wrong during a scenario.
#[derive(Debug, Clone, Copy)]
enum Fault {
    None,
    /// The broker is stopped after 2 s for this long, then started again.
    BrokerOutage(Duration),
    /// The daemon is SIGKILLed this many times, evenly through the stream,
    /// and started again at once on the same state directory.
    DaemonKills(u32),
    /// Phone 0 stops answering (its adbd holds every request) after 2 s for
    /// 20 s, then runs what it kept.
    Freeze,
    /// Phone 0 answers every command this many milliseconds late.
    Slow(u64),
}

/// How the delivery store is damaged between two runs of the daemon.
#[derive(Debug, Clone, Copy)]
enum StoreDamage {
    /// SIGKILL, then `delivery.db-wal` deleted.
    DeleteWal,
    /// A clean stop, then `delivery.db` truncated to zero bytes.
    EmptyMain,
}

#[derive(Debug)]
struct Scenario {
    name: String,
    broker: BrokerKind,
    phones: usize,
    /// Companion phones (`cphone-<n>`, the emulated companion app over
    /// MQTT), on mosquitto scenarios; commands go round-robin over every
    /// phone.
    companions: usize,
    calls: usize,
    publishers: usize,
    /// Commands per second over all publishers; `None`: as fast as they go.
    rate: Option<f64>,
    fault: Fault,
    damage: Option<StoreDamage>,
    /// `[calls] timeout_ms`, when not the default.
    call_timeout_ms: Option<u64>,
}

impl Scenario {
    fn flood(name: &str, broker: BrokerKind, calls: usize, phones: usize) -> Self {
        Self {
            name: name.into(),
            broker,
            phones,
            companions: 0,
            calls,
            publishers: 4,
            rate: None,
            fault: Fault::None,
            damage: None,
            call_timeout_ms: None,
        }
    }

    fn outage(secs: u64, persistent: bool, calls: usize, phones: usize) -> Self {
        Self {
            name: format!(
                "outage-{secs}s-{}",
                if persistent { "persistent" } else { "volatile" }
            ),
            broker: if persistent {
                BrokerKind::MosquittoPersistent
            } else {
                BrokerKind::Mosquitto
            },
            phones,
            companions: 2,
            calls,
            publishers: 1,
            rate: Some(50.0),
            fault: Fault::BrokerOutage(Duration::from_secs(secs)),
            damage: None,
            call_timeout_ms: None,
        }
    }

    fn kills(calls: usize, phones: usize) -> Self {
        Self {
            name: "kill-5x".into(),
            broker: BrokerKind::MosquittoPersistent,
            phones,
            companions: 2,
            calls,
            publishers: 1,
            rate: Some(50.0),
            fault: Fault::DaemonKills(5),
            damage: None,
            call_timeout_ms: None,
        }
    }

    fn stall(name: &str, fault: Fault) -> Self {
        Self {
            name: name.into(),
            broker: BrokerKind::Embedded,
            phones: 2,
            companions: 0,
            calls: 120,
            publishers: 1,
            rate: Some(4.0),
            fault,
            damage: None,
            call_timeout_ms: Some(1000),
        }
    }

    fn store(name: &str, damage: StoreDamage) -> Self {
        Self {
            name: name.into(),
            broker: BrokerKind::MosquittoPersistent,
            phones: 1,
            companions: 0,
            calls: 40,
            publishers: 1,
            rate: None,
            fault: Fault::None,
            damage: Some(damage),
            call_timeout_ms: None,
        }
    }

    fn run(&self) -> Tally {
        let adb = AdbServer::start();
        let sims: Vec<Sim> = (0..self.phones)
            .map(|_| adb.phone(SimOptions::default()))
            .collect();
        let mut mosquitto = match self.broker {
            BrokerKind::Embedded => None,
            BrokerKind::Mosquitto => Some(Mosquitto::start()),
            BrokerKind::MosquittoPersistent => Some(Mosquitto::start_persistent(free_port())),
            BrokerKind::MosquittoRoomy => Some(Mosquitto::start_with(
                free_port(),
                "max_queued_messages 100000\n",
            )),
        };
        let companions: Vec<Sim> = match &mosquitto {
            Some(broker) => (0..self.companions)
                .map(|i| {
                    Sim::start(SimOptions {
                        companion: Some((broker.port, format!("cphone-{i}"))),
                        no_adb: true,
                        ..SimOptions::default()
                    })
                })
                .collect(),
            None => Vec::new(),
        };
        let config = self.config(&sims, &companions, mosquitto.as_ref());
        let mut daemon = Daemon::start(&adb, &config);
        let (port, login) = match &mosquitto {
            Some(m) => (m.port, None),
            None => {
                let port = daemon.embedded_broker_port();
                let password = daemon.add_mqtt_user(&["fm-load", "--role", "automation"]);
                (port, Some(("fm-load".to_owned(), password)))
            }
        };
        let load = Load::connect(port, login.clone(), self.publishers);
        let names: Vec<String> = (0..self.phones)
            .map(|i| format!("phone-{i}"))
            .chain((0..companions.len()).map(|i| format!("cphone-{i}")))
            .collect();
        for name in &names {
            load.wait_online(name);
        }
        let ids: Vec<String> = (0..self.calls).map(|n| format!("c{n:05}")).collect();
        let device_of = |n: usize| {
            if matches!(self.fault, Fault::Freeze | Fault::Slow(_)) {
                // The stalled phone gets every command: its order is the point.
                "phone-0".to_owned()
            } else {
                names[n % names.len()].clone()
            }
        };
        let bodies: Vec<(String, Value)> = ids
            .iter()
            .enumerate()
            .map(|(n, id)| (id.clone(), body(id, &device_of(n))))
            .collect();
        let mut notes = Vec::new();
        if let Fault::Slow(ms) = self.fault {
            sims[0].control(json!({"op": "fault", "kind": "delay", "ms": ms}));
        }
        let sending = load.send_all(&bodies, self.rate);
        let t0 = Instant::now();
        match self.fault {
            Fault::None | Fault::Slow(_) => {}
            Fault::BrokerOutage(outage) => {
                let broker = mosquitto.as_mut().expect("a mosquitto scenario");
                sleep_until(t0 + Duration::from_secs(2));
                broker.stop();
                std::thread::sleep(outage);
                broker.resume();
            }
            Fault::DaemonKills(kills) => {
                let every = self.rate.map_or(Duration::from_secs(2), |r| {
                    Duration::from_secs_f64(self.calls as f64 / r / f64::from(kills + 1))
                });
                for k in 1..=kills {
                    sleep_until(t0 + every * k);
                    let state = daemon.kill();
                    daemon = Daemon::start_with_state(&adb, &config, state);
                }
            }
            Fault::Freeze => {
                sleep_until(t0 + Duration::from_secs(2));
                sims[0].control(json!({"op": "fault", "kind": "freeze"}));
                std::thread::sleep(Duration::from_secs(20));
                sims[0].control(json!({"op": "fault", "kind": "thaw"}));
            }
        }
        for handle in sending {
            let _ = handle.join();
        }
        let first = load.settle(&ids, Duration::from_secs(60));
        notes.push(format!("answered at once {first}/{}", ids.len()));
        if let Some(damage) = self.damage {
            // Past the store's periodic checkpoint (5 s): what the WAL
            // holds then is at most what came after it.
            std::thread::sleep(Duration::from_secs(6));
            daemon = self.damage_store(daemon, &adb, &config, damage, &mut notes);
            // Every id again: a store that kept them answers from it.
            load.resend(&bodies, |_| true);
            load.settle_all(&ids, Duration::from_secs(60));
        }
        if matches!(self.fault, Fault::DaemonKills(_)) {
            // Each id once more, as a client that never saw its answer
            // would: nothing may run twice.
            load.resend(&bodies, |_| true);
            load.settle_all(&ids, Duration::from_secs(60));
        }
        // Same-id resends of what got no answer (three rounds at most).
        let mut resent = 0;
        let mut resent_ids = std::collections::HashSet::new();
        for _ in 0..3 {
            let missing: Vec<&(String, Value)> =
                bodies.iter().filter(|(id, _)| !load.answered(id)).collect();
            if missing.is_empty() {
                break;
            }
            resent += missing.len();
            resent_ids.extend(missing.iter().map(|(id, _)| id.clone()));
            load.resend(&bodies, |id| !load.answered(id));
            load.settle(&ids, Duration::from_secs(30));
        }
        // Let phones finish what they hold (a thawed phone, a slow one).
        std::thread::sleep(Duration::from_secs(2));
        let every: Vec<&Sim> = sims.iter().chain(&companions).collect();
        let runs = phone_runs(&every);
        let mut tally = Tally::new(&ids, &load, &runs, resent);
        if self.publishers == 1 {
            // Resent ids run when they are resent: only the others' order
            // is the daemon's.
            let first_round: Vec<Vec<String>> = runs
                .iter()
                .map(|run| {
                    run.iter()
                        .filter(|id| !resent_ids.contains(*id))
                        .cloned()
                        .collect()
                })
                .collect();
            tally.order = Some(in_order(&first_round));
        }
        tally.notes = notes;
        if self.damage.is_some() {
            let log = daemon.log();
            tally.notes.push(format!(
                "store warning logged: {}",
                log.contains("found empty") || log.contains("was found empty")
            ));
        }
        drop(load);
        drop(daemon);
        tally
    }

    fn config(&self, sims: &[Sim], companions: &[Sim], mosquitto: Option<&Mosquitto>) -> String {
        let mut config = match mosquitto {
            Some(m) => format!("[mqtt]\nurl = \"{}\"\n", m.url()),
            None => ANY_BROKER_PORT.to_owned(),
        };
        if let Some(ms) = self.call_timeout_ms {
            config.push_str(&format!("[calls]\ntimeout_ms = {ms}\n"));
        }
        config.push_str(NO_POLLS);
        let serials: Vec<String> = sims.iter().map(|s| format!("\"{}\"", s.serial())).collect();
        config.push_str(&format!(
            "[adb]\npoll_interval_ms = 300\nconnect = [{}]\n",
            serials.join(", ")
        ));
        for (i, sim) in sims.iter().enumerate() {
            config.push_str(&format!(
                "[[devices]]\nname = \"phone-{i}\"\ntransport = \"adb\"\nserial = \"{}\"\n",
                sim.serial()
            ));
        }
        for i in 0..companions.len() {
            config.push_str(&format!(
                "[[devices]]\nname = \"cphone-{i}\"\ntransport = \"companion\"\ncompanion_id = \"cphone-{i}\"\n"
            ));
        }
        config
    }

    /// Stop the daemon as `damage` says, damage its store, and start it
    /// again on the same state directory.
    fn damage_store(
        &self,
        daemon: Daemon,
        adb: &AdbServer,
        config: &str,
        damage: StoreDamage,
        notes: &mut Vec<String>,
    ) -> Daemon {
        let state = match damage {
            StoreDamage::DeleteWal => daemon.kill(),
            StoreDamage::EmptyMain => {
                let mut daemon = daemon;
                daemon.terminate();
                let dir = tempfile::tempdir().expect("state dir");
                std::mem::replace(&mut daemon.state_dir, dir)
            }
        };
        let db = state.path().join("delivery.db");
        let wal = state.path().join("delivery.db-wal");
        let wal_bytes = std::fs::metadata(&wal).map_or(0, |m| m.len());
        notes.push(format!("WAL at stop {wal_bytes} B"));
        match damage {
            StoreDamage::DeleteWal => {
                let _ = std::fs::remove_file(&wal);
            }
            StoreDamage::EmptyMain => {
                let _ = std::fs::remove_file(&wal);
                std::fs::write(&db, b"").expect("truncate the store");
            }
        }
        Daemon::start_with_state(adb, config, state)
    }
}

fn sleep_until(at: Instant) {
    if let Some(left) = at.checked_duration_since(Instant::now()) {
        std::thread::sleep(left);
    }
}

/// A `cmd/call` body whose effect carries its id.
fn body(id: &str, device: &str) -> Value {
    json!({
        "id": id,
        "device": device,
        "service": "intents",
        "action": "open_url",
        "params": {"url": format!("https://dw.test/{id}")},
    })
}

/// MQTT clients: publishers (persistent sessions, QoS 1) and one
/// collector of replies and availability.
struct Load {
    publishers: Vec<Client>,
    /// Every reply seen, by id, in arrival order.
    replies: Arc<Mutex<HashMap<String, Vec<Value>>>>,
    availability: Arc<Mutex<HashMap<String, String>>>,
    collector: Client,
}

impl Load {
    fn connect(port: u16, login: Option<(String, String)>, publishers: usize) -> Self {
        let replies: Arc<Mutex<HashMap<String, Vec<Value>>>> = Arc::default();
        let availability: Arc<Mutex<HashMap<String, String>>> = Arc::default();
        let subscribed = Arc::new(Mutex::new(false));
        let collector = {
            let replies = Arc::clone(&replies);
            let availability = Arc::clone(&availability);
            let subscribed = Arc::clone(&subscribed);
            client(
                port,
                &login,
                "fm-collector",
                move |client, event| match event {
                    Event::Incoming(Packet::ConnAck(_)) => {
                        let _ = client.try_subscribe(format!("{P}/reply/#"), QoS::AtLeastOnce);
                        let _ = client
                            .try_subscribe(format!("{P}/devices/+/availability"), QoS::AtLeastOnce);
                    }
                    Event::Incoming(Packet::SubAck(_)) => *subscribed.lock().unwrap() = true,
                    Event::Incoming(Packet::Publish(p)) => {
                        if let Some(id) = p.topic.strip_prefix(&format!("{P}/reply/")) {
                            let reply = serde_json::from_slice(&p.payload).unwrap_or(Value::Null);
                            replies
                                .lock()
                                .unwrap()
                                .entry(id.to_owned())
                                .or_default()
                                .push(reply);
                        } else if let Some(device) = p
                            .topic
                            .strip_prefix(&format!("{P}/devices/"))
                            .and_then(|t| t.strip_suffix("/availability"))
                        {
                            availability.lock().unwrap().insert(
                                device.to_owned(),
                                String::from_utf8_lossy(&p.payload).into_owned(),
                            );
                        }
                    }
                    _ => {}
                },
            )
        };
        wait_for(
            "the collector's subscription",
            Duration::from_secs(30),
            || (*subscribed.lock().unwrap()).then_some(()),
        );
        let publishers = (0..publishers)
            .map(|k| client(port, &login, &format!("fm-pub-{k}"), |_, _| {}))
            .collect();
        Self {
            publishers,
            replies,
            availability,
            collector,
        }
    }

    fn wait_online(&self, device: &str) {
        wait_for(&format!("{device} online"), Duration::from_secs(60), || {
            (self
                .availability
                .lock()
                .unwrap()
                .get(device)
                .map(String::as_str)
                == Some("online"))
            .then_some(())
        });
    }

    /// Publish every body, spread round-robin over the publishers, each
    /// publisher in its own thread; at `rate` per second overall, or as
    /// fast as they go.
    fn send_all(
        &self,
        bodies: &[(String, Value)],
        rate: Option<f64>,
    ) -> Vec<std::thread::JoinHandle<()>> {
        let n = self.publishers.len();
        let start = Instant::now();
        self.publishers
            .iter()
            .enumerate()
            .map(|(k, client)| {
                let client = client.clone();
                let mine: Vec<(usize, String)> = bodies
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| i % n == k)
                    .map(|(i, (_, b))| (i, b.to_string()))
                    .collect();
                std::thread::spawn(move || {
                    for (i, payload) in mine {
                        if let Some(rate) = rate {
                            sleep_until(start + Duration::from_secs_f64(i as f64 / rate));
                        }
                        let _ = client.publish(
                            format!("{P}/cmd/call"),
                            QoS::AtLeastOnce,
                            false,
                            payload,
                        );
                    }
                })
            })
            .collect()
    }

    /// Publish again, with the same ids, the bodies `which` selects.
    fn resend(&self, bodies: &[(String, Value)], which: impl Fn(&str) -> bool) {
        for (_, body) in bodies.iter().filter(|(id, _)| which(id)) {
            let _ = self.publishers[0].publish(
                format!("{P}/cmd/call"),
                QoS::AtLeastOnce,
                false,
                body.to_string(),
            );
        }
    }

    fn answered(&self, id: &str) -> bool {
        self.replies
            .lock()
            .unwrap()
            .get(id)
            .is_some_and(|r| !r.is_empty())
    }

    fn answered_count(&self, ids: &[String]) -> usize {
        let replies = self.replies.lock().unwrap();
        ids.iter()
            .filter(|id| replies.get(*id).is_some_and(|r| !r.is_empty()))
            .count()
    }

    /// Wait until every id has an answer, or nothing new arrived for 5 s,
    /// or `limit`; how many have one.
    fn settle(&self, ids: &[String], limit: Duration) -> usize {
        let total = || -> usize { self.replies.lock().unwrap().values().map(Vec::len).sum() };
        let deadline = Instant::now() + limit;
        let mut last = (total(), Instant::now());
        while Instant::now() < deadline {
            if self.answered_count(ids) == ids.len() {
                break;
            }
            let now = total();
            if now != last.0 {
                last = (now, Instant::now());
            } else if last.1.elapsed() > Duration::from_secs(5) {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.answered_count(ids)
    }

    /// After a resend of every id: wait until each has one more answer.
    fn settle_all(&self, ids: &[String], limit: Duration) {
        let before: HashMap<String, usize> = {
            let replies = self.replies.lock().unwrap();
            ids.iter()
                .map(|id| (id.clone(), replies.get(id).map_or(0, Vec::len)))
                .collect()
        };
        poll_until(limit, || {
            let replies = self.replies.lock().unwrap();
            before
                .iter()
                .all(|(id, n)| replies.get(id).map_or(0, Vec::len) > *n)
                .then_some(())
        });
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        for c in &self.publishers {
            let _ = c.try_disconnect();
        }
        let _ = self.collector.try_disconnect();
    }
}

/// A client with a persistent session that reconnects by itself; `on`
/// sees every event.
fn client(
    port: u16,
    login: &Option<(String, String)>,
    id: &str,
    mut on: impl FnMut(&Client, Event) + Send + 'static,
) -> Client {
    let mut options = MqttOptions::new(format!("{id}-{}", std::process::id()), "127.0.0.1", port);
    options
        .set_keep_alive(Duration::from_secs(5))
        .set_clean_session(false)
        .set_inflight(100)
        .set_max_packet_size(2 * 1024 * 1024, 2 * 1024 * 1024);
    if let Some((user, password)) = login {
        options.set_credentials(user, password);
    }
    let (client, mut connection) = Client::new(options, 100_000);
    let handle = client.clone();
    std::thread::spawn(move || {
        for event in connection.iter() {
            match event {
                Ok(Event::Outgoing(rumqttc::Outgoing::Disconnect)) => return,
                Ok(event) => on(&handle, event),
                Err(rumqttc::ConnectionError::RequestsDone) => return,
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    });
    client
}

/// What each phone ran: per phone, the ids in the order they ran.
fn phone_runs(sims: &[&Sim]) -> Vec<Vec<String>> {
    sims.iter()
        .map(|sim| {
            std::fs::read_to_string(&sim.log_file)
                .unwrap_or_default()
                .lines()
                .filter_map(|line| {
                    let entry: Value = serde_json::from_str(line).ok()?;
                    entry["argv"].as_array()?.iter().find_map(|a| {
                        let a = a.as_str()?;
                        let at = a.find("https://dw.test/")?;
                        Some(a[at + "https://dw.test/".len()..].to_owned())
                    })
                })
                .collect()
        })
        .collect()
}

/// Whether every phone ran its commands in the order they were sent (ids
/// are numbered in sending order).
fn in_order(runs: &[Vec<String>]) -> String {
    let mut out_of_order = 0;
    for run in runs {
        let mut seen: Vec<&String> = Vec::new();
        for id in run {
            if seen.contains(&id) {
                continue;
            }
            if seen.last().is_some_and(|last| *last > id) {
                out_of_order += 1;
            }
            seen.push(id);
        }
    }
    if out_of_order == 0 {
        "in order".into()
    } else {
        format!("{out_of_order} out of order")
    }
}

#[derive(Debug, Default)]
struct Tally {
    sent: usize,
    /// The final answer of each id, by outcome (`ok` or its error code).
    outcomes: BTreeMap<String, usize>,
    resent: usize,
    ran_once: usize,
    ran_twice: usize,
    /// `ok` for what never ran, or "not sent" (`busy`, `device_offline`)
    /// for what ran.
    untrue: usize,
    lost: usize,
    /// `internal` answers ("interrupted, may have run") for commands that
    /// never ran.
    interrupted_not_run: usize,
    order: Option<String>,
    notes: Vec<String>,
}

impl Tally {
    fn new(ids: &[String], load: &Load, runs: &[Vec<String>], resent: usize) -> Self {
        let mut ran: HashMap<&str, usize> = HashMap::new();
        for id in runs.iter().flatten() {
            *ran.entry(id.as_str()).or_default() += 1;
        }
        let replies = load.replies.lock().unwrap();
        let mut tally = Tally {
            sent: ids.len(),
            resent,
            ..Tally::default()
        };
        for id in ids {
            let times = ran.get(id.as_str()).copied().unwrap_or(0);
            match times {
                0 => {}
                1 => tally.ran_once += 1,
                _ => tally.ran_twice += 1,
            }
            let answers = replies.get(id).map(Vec::as_slice).unwrap_or_default();
            let Some(last) = answers.last() else {
                if times == 0 {
                    tally.lost += 1;
                }
                *tally.outcomes.entry("none".into()).or_default() += 1;
                continue;
            };
            let code = outcome(last);
            let not_sent = |a: &Value| ["busy", "device_offline"].contains(&outcome(a).as_str());
            if (code == "ok" && times == 0) || (times > 0 && answers.iter().all(not_sent)) {
                tally.untrue += 1;
            }
            if code == "internal" && times == 0 {
                tally.interrupted_not_run += 1;
            }
            *tally.outcomes.entry(code).or_default() += 1;
        }
        tally
    }

    fn count(&self, outcome: &str) -> usize {
        self.outcomes.get(outcome).copied().unwrap_or(0)
    }

    fn print(&self, name: &str, took: Duration) {
        let mut notes = self.notes.clone();
        if let Some(order) = &self.order {
            notes.insert(0, order.clone());
        }
        if self.interrupted_not_run > 0 {
            notes.push(format!("{} internal never ran", self.interrupted_not_run));
        }
        let others: Vec<String> = self
            .outcomes
            .iter()
            .filter(|(k, _)| {
                !["ok", "busy", "device_offline", "timeout", "internal"].contains(&k.as_str())
            })
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        if !others.is_empty() {
            notes.push(others.join(", "));
        }
        notes.push(format!("{:.0} s", took.as_secs_f64()));
        println!(
            "{:<26} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>5} {:>5} {:>6} {:>5}  {}",
            name,
            self.sent,
            self.count("ok"),
            self.count("busy"),
            self.count("device_offline"),
            self.count("timeout"),
            self.count("internal"),
            self.resent,
            self.ran_once,
            self.ran_twice,
            self.untrue,
            self.lost,
            notes.join("; ")
        );
        if std::env::var_os("JSON").is_some() {
            println!(
                "{}",
                json!({
                    "scenario": name, "sent": self.sent, "outcomes": self.outcomes,
                    "resent": self.resent, "ran_once": self.ran_once,
                    "ran_twice": self.ran_twice, "untrue": self.untrue, "lost": self.lost,
                    "order": self.order, "notes": self.notes,
                })
            );
        }
    }
}

/// `ok`, or the error code of a reply.
fn outcome(reply: &Value) -> String {
    if reply["ok"] == true {
        "ok".into()
    } else {
        reply["error"]["code"]
            .as_str()
            .unwrap_or("unparsed")
            .to_owned()
    }
}
