//! Benchmark: a flood of `cmd/ask` against the daemon's agent limits.
//!
//! Real mosquitto, `droidwarden daemon` and a scripted language model over
//! HTTP that takes `DELAY_MS` to answer. Each round publishes `FLOOD` asks
//! at once and waits for every reply (an answer, or `busy` for the asks
//! beyond `[agent] max_concurrent_runs` + `max_queued`). Reported per
//! round: how fast the refusals come back (asks refused per second, from
//! the first publish to the last `busy` reply), answers per second (bound
//! by design to `max_concurrent_runs` / model delay),
//! the daemon's peak resident memory (VmRSS sampled every 5 ms) and the
//! most requests the model saw at once.
//!
//! ```sh
//! cargo build --release --workspace --bins
//! cargo bench -p droidwarden-e2e --bench ask_flood
//! ```
//! `FLOOD` (500), `ROUNDS` (3), `DELAY_MS` (200), `RUNNING` (4) and
//! `QUEUED` (32) override the sizes.

use droidwarden_agent::testing::ScriptStep;
use droidwarden_agent::{ModelReply, ProviderKind};
use droidwarden_e2e::mqtt::{Daemon, Mosquitto, Probe};
use droidwarden_e2e::{AdbServer, free_port, scripted_llm_config};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

const P: &str = "droidwarden";

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let flood = droidwarden_e2e::env_size("FLOOD", 500);
    let rounds = droidwarden_e2e::env_size("ROUNDS", 3);
    let delay = Duration::from_millis(droidwarden_e2e::env_size("DELAY_MS", 200) as u64);
    let running = droidwarden_e2e::env_size("RUNNING", 4);
    let queued = droidwarden_e2e::env_size("QUEUED", 32);

    let (_rt, llm) = droidwarden_e2e::scripted_model();
    llm.set_fallback(ScriptStep::Reply(ModelReply::text("All quiet.")));
    llm.set_delay(delay);
    let broker = Mosquitto::start_with(free_port(), "max_queued_messages 100000\n");
    let probe = Probe::connect(broker.port);
    let adb = AdbServer::start();
    let config = format!(
        "[mqtt]\nurl = \"mqtt://127.0.0.1:{}\"\n[mqtt.homeassistant]\ndiscovery = false\n{}[agent]\nmax_concurrent_runs = {running}\nmax_queued = {queued}\n",
        broker.port,
        scripted_llm_config(&llm, ProviderKind::Openai)
    );
    let daemon = Daemon::start(&adb, &config);
    probe.wait_payload(
        &format!("{P}/availability"),
        Duration::from_secs(30),
        "online",
    );
    let pid = daemon.pid();
    println!(
        "ask flood: {flood} asks per round, model delay {delay:?}, max_concurrent_runs = {running}, max_queued = {queued}; RSS at rest {} KiB",
        droidwarden_e2e::rss_kib(pid)
    );

    for round in 0..rounds {
        let peak = Arc::new(AtomicU64::new(droidwarden_e2e::rss_kib(pid)));
        let stop = Arc::new(AtomicBool::new(false));
        let sampler = {
            let (peak, stop) = (Arc::clone(&peak), Arc::clone(&stop));
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    peak.fetch_max(droidwarden_e2e::rss_kib(pid), Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(5));
                }
            })
        };
        let prefix = format!("r{round}-");
        let reply_prefix = format!("{P}/reply/{prefix}");
        let requests_before = llm.requests().len();
        let started = Instant::now();
        for i in 0..flood {
            probe.publish(
                &format!("{P}/cmd/ask"),
                serde_json::json!({"id": format!("{prefix}{i}"), "prompt": format!("status {i}")})
                    .to_string(),
            );
        }
        // Poll every 2 ms, noting when the last refusal arrived.
        let mut busy_done = Duration::ZERO;
        let mut last_busy = 0;
        let (answered, busy) = loop {
            let replies: Vec<serde_json::Value> = probe
                .messages()
                .iter()
                .filter(|m| m.topic.starts_with(&reply_prefix))
                .map(|m| m.json())
                .collect();
            let answered = replies.iter().filter(|r| r["ok"] == true).count();
            let busy = replies.len() - answered;
            if busy > last_busy {
                last_busy = busy;
                busy_done = started.elapsed();
            }
            if replies.len() >= flood {
                break (answered, busy);
            }
            assert!(
                started.elapsed() < Duration::from_secs(600),
                "the replies did not all come"
            );
            std::thread::sleep(Duration::from_millis(2));
        };
        let elapsed = started.elapsed();
        stop.store(true, Ordering::Relaxed);
        let _ = sampler.join();
        println!(
            "round {round}: {busy} busy replies within {:.0} ms ({:.0} asks/s refused); {answered} answered in {:.2} s ({:.1} runs/s); peak RSS {} KiB; model requests {} (at most {} at once)",
            busy_done.as_secs_f64() * 1000.0,
            busy as f64 / busy_done.as_secs_f64().max(1e-3),
            elapsed.as_secs_f64(),
            answered as f64 / elapsed.as_secs_f64(),
            peak.load(Ordering::Relaxed),
            llm.requests().len() - requests_before,
            llm.max_in_flight()
        );
    }
    drop(daemon);
}
