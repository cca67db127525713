//! Benchmark: what `droidwarden-companion` (the Termux companion) costs and
//! how fast one answers.
//!
//! Set-up: mosquitto and the real `droidwarden-companion` binary with the
//! stand-in `termux-*` programs of the e2e tests (`droidwarden_e2e::termux`,
//! shell scripts printing recorded outputs). Reported:
//!
//! - the binary's size as built and stripped (`strip`);
//! - idle: resident memory (`VmRSS`, `VmHWM`) and CPU share over `WINDOW_S`
//!   seconds (default 30) while connected, with the default notification
//!   reading every 30 s;
//! - throughput: `REQUESTS` (default 2,000) `battery.status` requests
//!   published straight to its request topic, at most `INFLIGHT` (default
//!   8) unanswered at a time; each runs one stand-in process, as each
//!   Termux:API call runs `termux-api` on a phone.
//!
//! Run with `cargo build --release --workspace --bins` then
//! `cargo bench -p droidwarden-e2e --bench companion`.

use droidwarden_e2e::mqtt::{Mosquitto, Probe};
use droidwarden_e2e::termux::{ID, Termux};
use droidwarden_e2e::{P, WAIT, binary, cpu_time, env_size, wait_for};
use std::time::{Duration, Instant, SystemTime};

fn status_kb(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn request(id: usize) -> String {
    let deadline = droidwarden_services::time::epoch_ms(SystemTime::now()) + 60_000;
    format!(
        r#"{{"v":1,"id":"r{id}","service":"battery","action":"status","params":{{}},"deadline_ms":{deadline}}}"#
    )
}

fn main() {
    let window = Duration::from_secs(env_size("WINDOW_S", 30) as u64);
    let requests = env_size("REQUESTS", 2000);
    let inflight = env_size("INFLIGHT", 8);

    let bin = binary("droidwarden-companion");
    let size = std::fs::metadata(&bin).map(|m| m.len()).unwrap_or(0);
    let stripped =
        std::env::temp_dir().join(format!("dw-companion-stripped-{}", std::process::id()));
    let stripped_size = std::process::Command::new("strip")
        .arg("-o")
        .arg(&stripped)
        .arg(&bin)
        .status()
        .ok()
        .filter(|s| s.success())
        .and_then(|_| std::fs::metadata(&stripped).ok())
        .map(|m| m.len());
    let _ = std::fs::remove_file(&stripped);
    println!(
        "binary {}: {:.1} MiB as built, {} stripped",
        bin.display(),
        size as f64 / 1048576.0,
        stripped_size.map_or("?".into(), |s| format!("{:.1} MiB", s as f64 / 1048576.0))
    );

    let broker = Mosquitto::start();
    let probe = Probe::connect(broker.port);
    let phone = Termux::new(broker.port, "");
    let companion = phone.start();
    let pid = companion.0.id();
    probe.wait_payload(&format!("{P}/companion/{ID}/online"), WAIT, "online");
    // Settled: its start-up work (subscribing, the first battery event
    // and notification reading) is over when its CPU time stops moving.
    let mut last = cpu_time(pid);
    wait_for("the companion to settle", WAIT, || {
        std::thread::sleep(Duration::from_millis(250));
        let now = cpu_time(pid);
        let settled = now == last;
        last = now;
        settled.then_some(())
    });
    let cpu0 = cpu_time(pid);
    let t0 = Instant::now();
    std::thread::sleep(window);
    let idle_cpu = (cpu_time(pid) - cpu0).as_secs_f64() / t0.elapsed().as_secs_f64();
    println!(
        "idle over {:?}: VmRSS {} KiB, VmHWM {} KiB, CPU {:.3} % of a core",
        window,
        status_kb(pid, "VmRSS:"),
        status_kb(pid, "VmHWM:"),
        idle_cpu * 100.0
    );

    let topic = format!("{P}/companion/{ID}/request");
    let responses = format!("{P}/companion/{ID}/response");
    let answered = || probe.on(&responses).len();
    let start = Instant::now();
    let cpu1 = cpu_time(pid);
    let mut sent = 0;
    while sent < requests {
        let done = answered();
        while sent < requests && sent < done + inflight {
            probe.publish(&topic, request(sent));
            sent += 1;
        }
        if sent < requests {
            wait_for("room in the window", WAIT, || {
                (answered() > done).then_some(())
            });
        }
    }
    wait_for("every answer", Duration::from_secs(600), || {
        (answered() >= requests).then_some(())
    });
    let elapsed = start.elapsed();
    let busy_cpu = (cpu_time(pid) - cpu1).as_secs_f64() / elapsed.as_secs_f64();
    let ok = probe
        .on(&responses)
        .iter()
        .filter(|m| m.json()["ok"] == true)
        .count();
    println!(
        "{requests} battery.status requests, {inflight} in flight: {:.1} s, {:.0} requests/s, {ok} ok; companion CPU {:.0} % of a core, VmHWM {} KiB",
        elapsed.as_secs_f64(),
        requests as f64 / elapsed.as_secs_f64(),
        busy_cpu * 100.0,
        status_kb(pid, "VmHWM:")
    );
    assert_eq!(ok, requests, "every request answered with a result");
    drop(companion);
}
