//! Benchmark: calls per second through the daemon over MQTT, and latency
//! from command publish to reply, with 100 companion phones; and the
//! daemon's resident memory with those 100 phones.
//!
//! Everything is real: mosquitto, `droidwarden daemon`, and 100
//! `droidwarden-sim` processes in companion mode. A load client keeps a
//! window of calls outstanding (`battery.status`, round-robin over the
//! phones) and times each from publish to its reply.
//!
//! ```sh
//! cargo build --release --workspace --bins
//! cargo bench -p droidwarden-e2e --bench mqtt_load
//! ```
//! `PHONES`, `CALLS` and `WINDOW` environment variables override the sizes.
//! To compare with an older build, point `DROIDWARDEN_BIN_DIR` at its
//! binaries; `LEGACY_CONFIG=1` leaves out settings builds before
//! `[companion] max_auto_devices` would refuse.

use droidwarden_e2e::mqtt::{Daemon, Mosquitto, Probe};
use droidwarden_e2e::{AdbServer, Sim, SimOptions, cpu_time, free_port, wait_for};
use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::mqttbytes::v5::Packet;
use rumqttc::v5::{AsyncClient, Event, MqttOptions};
use std::collections::HashMap;
use std::time::{Duration, Instant};

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let phones = droidwarden_e2e::env_size("PHONES", 100);
    let calls = droidwarden_e2e::env_size("CALLS", 20_000);
    let window = droidwarden_e2e::env_size("WINDOW", 256);

    let broker = Mosquitto::start_with(free_port(), "max_queued_messages 100000\n");
    let adb = AdbServer::start();
    let started = Instant::now();
    let sims: Vec<Sim> = (0..phones)
        .map(|i| {
            Sim::start(SimOptions {
                companion: Some((broker.port, format!("phone-{i:03}"))),
                no_adb: true,
                ..SimOptions::default()
            })
        })
        .collect();
    println!("{phones} companion phones up in {:?}", started.elapsed());

    let cap = if std::env::var_os("LEGACY_CONFIG").is_some() {
        String::new()
    } else {
        format!("max_auto_devices = {phones}\n")
    };
    let mut config = format!(
        "[mqtt]\nurl = \"mqtt://127.0.0.1:{}\"\n[companion]\nauto_register = true\n{cap}[poll]\n",
        broker.port
    );
    for service in [
        "battery",
        "wifi_automation",
        "bluetooth_automation",
        "airplane_mode",
        "audio_automation",
        "screen_control",
        "device_state",
    ] {
        config.push_str(&format!("{service} = 0\n"));
    }
    let daemon = Daemon::start(&adb, &config);
    let probe = Probe::connect(broker.port);
    wait_for("every phone to be online", Duration::from_secs(60), || {
        let online = probe
            .messages()
            .iter()
            .filter(|m| {
                m.topic.starts_with("droidwarden/devices/") && m.topic.ends_with("/availability")
            })
            .map(|m| (m.topic.clone(), m.payload.clone()))
            .collect::<HashMap<_, _>>()
            .values()
            .filter(|p| *p == "online")
            .count();
        (online >= phones).then_some(())
    });
    drop(probe);
    std::thread::sleep(Duration::from_secs(2)); // let discovery traffic settle
    let idle_rss = droidwarden_e2e::rss_kib(daemon.pid());
    let idle_anon = droidwarden_e2e::rss_anon_kib(daemon.pid());
    let broker_pid = broker.pid().expect("broker running");
    let me = std::process::id();
    let cpu_before = (
        cpu_time(daemon.pid()),
        cpu_time(broker_pid),
        sims.iter().map(|s| cpu_time(s.pid())).sum::<Duration>(),
        cpu_time(me),
    );

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (elapsed, mut latencies) = runtime.block_on(async {
        let mut options = MqttOptions::new(format!("load-{}", std::process::id()), "127.0.0.1", broker.port);
        options.set_keep_alive(Duration::from_secs(30));
        let mut network = rumqttc::NetworkOptions::new();
        network.set_tcp_nodelay(true);
        options.set_network_options(network);
        let (client, mut eventloop) = AsyncClient::new(options, 100_000);
        client.subscribe("droidwarden/reply/#", QoS::AtLeastOnce).await.expect("subscribe");
        // Wait for the SUBACK before sending.
        loop {
            if let Ok(Event::Incoming(Packet::SubAck(_))) = eventloop.poll().await {
                break;
            }
        }
        let mut sent_at: HashMap<String, Instant> = HashMap::new();
        let mut latencies = Vec::with_capacity(calls);
        let mut next = 0usize;
        let start = Instant::now();
        while latencies.len() < calls {
            while next < calls && sent_at.len() < window {
                let id = format!("b{next}");
                let body = format!(
                    r#"{{"id":"{id}","device":"phone-{:03}","service":"battery","action":"status"}}"#,
                    next % phones
                );
                sent_at.insert(id, Instant::now());
                client.publish("droidwarden/cmd/call", QoS::AtLeastOnce, false, body).await.expect("publish");
                next += 1;
            }
            match tokio::time::timeout(Duration::from_secs(30), eventloop.poll()).await {
                Ok(Ok(Event::Incoming(Packet::Publish(p)))) => {
                    let topic = String::from_utf8_lossy(&p.topic);
                    if let Some(id) = topic.strip_prefix("droidwarden/reply/")
                        && let Some(at) = sent_at.remove(id)
                    {
                        assert!(p.payload.windows(9).any(|w| w == br#""ok":true"#), "a call failed: {}", String::from_utf8_lossy(&p.payload));
                        latencies.push(at.elapsed());
                    }
                }
                Ok(Ok(_)) => {}
                Ok(Err(e)) => panic!("load client: {e}"),
                Err(_) => panic!("no reply for 30 s; {} outstanding", sent_at.len()),
            }
        }
        (start.elapsed(), latencies)
    });
    let loaded_rss = droidwarden_e2e::rss_kib(daemon.pid());
    let loaded_anon = droidwarden_e2e::rss_anon_kib(daemon.pid());
    let cpu_after = (
        cpu_time(daemon.pid()),
        cpu_time(broker_pid),
        sims.iter().map(|s| cpu_time(s.pid())).sum::<Duration>(),
        cpu_time(me),
    );
    latencies.sort();
    let pct = |p: f64| latencies[((latencies.len() as f64 * p) as usize).min(latencies.len() - 1)];
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "calls:        {calls} battery.status over {phones} companion phones, window {window}"
    );
    println!(
        "throughput:   {:.0} calls/s   (target >= 5000)",
        calls as f64 / elapsed.as_secs_f64()
    );
    println!(
        "latency:      p50 {:.2} ms   p99 {:.2} ms   max {:.2} ms   (target p99 < 20 ms)",
        ms(pct(0.50)),
        ms(pct(0.99)),
        ms(pct(1.0))
    );
    println!(
        "daemon RSS:   {:.1} MB idle with {phones} phones, {:.1} MB after the load   (target < 30 MB)",
        idle_rss as f64 / 1024.0,
        loaded_rss as f64 / 1024.0
    );
    println!(
        "  of which:   {:.1} → {:.1} MB anonymous (heap, stacks); the rest is mapped code and libraries",
        idle_anon as f64 / 1024.0,
        loaded_anon as f64 / 1024.0
    );
    let per_call =
        |before: Duration, after: Duration| (after - before).as_secs_f64() * 1e6 / calls as f64;
    let daemon_us = per_call(cpu_before.0, cpu_after.0);
    let broker_us = per_call(cpu_before.1, cpu_after.1);
    let phones_us = per_call(cpu_before.2, cpu_after.2);
    let client_us = per_call(cpu_before.3, cpu_after.3);
    println!(
        "CPU per call: daemon {daemon_us:.0} µs, mosquitto {broker_us:.0} µs, phones {phones_us:.0} µs, load client {client_us:.0} µs   ({:.1} s of load)",
        elapsed.as_secs_f64()
    );
    let cores = std::thread::available_parallelism().map_or(1, usize::from) as f64;
    println!(
        "ceilings:     the rig without the daemon {:.0} calls/s on {cores} cores; the daemon alone {:.0} calls/s per core",
        cores * 1e6 / (broker_us + phones_us + client_us),
        1e6 / daemon_us
    );
    drop(sims);
}
