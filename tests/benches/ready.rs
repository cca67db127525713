//! Benchmark: how fast `droidwarden daemon` is ready, and how much memory
//! it holds when idle, as a systemd service would see it.
//!
//! Set-up: the real adb server with two emulated phones attached, a
//! mosquitto broker (the embedded broker is off), and a notify socket
//! standing in for systemd. Each run starts the release binary and
//! measures:
//! - exec → READY=1: from just before the process is spawned to the arrival
//!   of `READY=1` (configuration loaded, both phones listed, MQTT connected
//!   and its subscriptions acknowledged);
//! - idle RSS: `VmRSS` from `/proc/PID/status` two seconds after READY=1
//!   (and `VmHWM`, the peak).
//!
//! Run with `cargo build --release --workspace --bins` then
//! `cargo bench -p droidwarden-e2e --bench ready`. Targets: READY ≤ 100 ms,
//! idle RSS ≤ 20 MB.

use droidwarden_e2e::mqtt::Mosquitto;
use droidwarden_e2e::systemd::{NotifySocket, Service};
use droidwarden_e2e::{AdbServer, Sim, SimOptions};
use std::time::{Duration, Instant};

const RUNS: usize = 10;
const IDLE: Duration = Duration::from_secs(2);

fn status_kib(pid: u32, key: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {key} in /proc/{pid}/status"))
}

fn summary(name: &str, unit: &str, mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    let median = samples[samples.len() / 2];
    println!(
        "{name:<28} median {median:>8.1} {unit}   min {:>8.1}   max {:>8.1}   (n={})",
        samples[0],
        samples[samples.len() - 1],
        samples.len()
    );
    median
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` asks for a listing; nothing to list.
    }
    let broker = Mosquitto::start();
    let adb = AdbServer::start();
    let sims: Vec<Sim> = ["Pixel 8", "Pixel 9"]
        .into_iter()
        .map(|model| {
            adb.phone(SimOptions {
                model: Some(model.into()),
                ..Default::default()
            })
        })
        .collect();
    let mut config = format!("[mqtt]\nurl = \"mqtt://127.0.0.1:{}\"\n", broker.port);
    for (i, sim) in sims.iter().enumerate() {
        config.push_str(&format!(
            "[[devices]]\nname = \"phone-{i}\"\ntransport = \"adb\"\nserial = \"{}\"\n",
            sim.serial()
        ));
    }
    println!(
        "droidwarden daemon, release build, 2 emulated phones (ADB), mosquitto on port {}\n",
        broker.port
    );

    let mut ready_ms = Vec::new();
    let mut rss_mib = Vec::new();
    let mut hwm_mib = Vec::new();
    // One run more than measured: the first warms the page cache.
    for run in 0..=RUNS {
        let notify = NotifySocket::new();
        let socket = notify.path().to_str().expect("UTF-8 path").to_owned();
        let start = Instant::now();
        let service = Service::start(
            &adb,
            &config,
            &[("NOTIFY_SOCKET", socket.as_str()), ("RUST_LOG", "warn")],
        );
        let (_, ready) = notify.wait_from(0, "READY=1", Duration::from_secs(30), |n| {
            n.has("READY", "1")
        });
        assert_eq!(
            ready.get("STATUS"),
            Some("2/2 devices online"),
            "both phones are online at READY"
        );
        let elapsed = ready.at.duration_since(start);
        // Idle means idle: nothing to do but wait.
        std::thread::sleep(IDLE);
        let rss = status_kib(service.pid(), "VmRSS:");
        let hwm = status_kib(service.pid(), "VmHWM:");
        drop(service);
        if run == 0 {
            continue;
        }
        ready_ms.push(elapsed.as_secs_f64() * 1000.0);
        rss_mib.push(rss as f64 / 1024.0);
        hwm_mib.push(hwm as f64 / 1024.0);
    }
    let ready = summary("exec → READY=1", "ms ", ready_ms);
    let rss = summary("idle VmRSS after 2 s", "MiB", rss_mib);
    summary("peak VmHWM", "MiB", hwm_mib);
    println!(
        "\nREADY {ready:.1} ms (target ≤ 100 ms): {}; idle RSS {rss:.1} MiB (target ≤ 20 MB): {}",
        if ready <= 100.0 { "met" } else { "NOT met" },
        if rss * 1.048_576 <= 20.0 {
            "met"
        } else {
            "NOT met"
        }
    );
}
