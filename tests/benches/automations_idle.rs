//! Benchmark: what 1,000 automations cost an idle daemon.
//!
//! Set-up: mosquitto, the real adb server and one emulated phone whose
//! battery and power state are polled every 5 s (each poll is a state
//! event every state automation is checked against). Two daemons run one
//! after the other with the same configuration, one without automations
//! (the baseline) and one with `AUTOMATIONS` (default 1,000): 40 % cron
//! (on 29 February, so never due during the window), 10 % intervals (a
//! day), 30 % battery thresholds (below 1–14 %, the phone is at 100 %),
//! 20 % changes of the screen or battery saver (which do not change).
//! Nothing fires; the automations wait.
//!
//! Each daemon's CPU time (user + system, `/proc/PID/stat`) is read over a
//! window of `WINDOW_S` seconds (default 60) after `WARMUP_S` (default 5)
//! seconds. Reported: each daemon's share of one core, and the difference,
//! which is what the automations cost. Target: less than 1 % of a core.
//!
//! Run with `cargo build --release --workspace --bins` then
//! `cargo bench -p droidwarden-e2e --bench automations_idle` (or, on the
//! debug binaries, an upper bound: `cargo bench --profile dev -p
//! droidwarden-e2e --bench automations_idle`).

use droidwarden_e2e::mqtt::{Daemon, Mosquitto, NO_POLLS};
use droidwarden_e2e::{AdbServer, Sim, SimOptions, cpu_time, env_size, wait_for};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// `n` automations of the four kinds, none of which fires while idle.
fn automations(n: usize) -> String {
    let mut out = String::new();
    for i in 0..n {
        let name = format!("a{i:04}");
        let (trigger, action) = match i % 10 {
            0..=3 => (
                format!(
                    "{{ kind = \"cron\", cron = \"{} {} 29 2 *\" }}",
                    i % 60,
                    i % 24
                ),
                "{ kind = \"notify\", message = \"leap day\" }".to_owned(),
            ),
            4 => (
                "{ kind = \"interval\", every_s = 86400 }".to_owned(),
                "{ kind = \"call\", device = \"phone\", service = \"battery\", action = \"status\" }"
                    .to_owned(),
            ),
            5..=7 => (
                format!(
                    "{{ kind = \"below\", device = \"phone\", state = \"battery.level_percent\", value = {} }}",
                    1 + i % 14
                ),
                "{ kind = \"call\", device = \"phone\", service = \"screen_control\", action = \"wake\" }"
                    .to_owned(),
            ),
            _ => (
                format!(
                    "{{ kind = \"changed\", device = \"phone\", state = \"device_state.{}\" }}",
                    if i % 2 == 0 { "screen_on" } else { "power_save" }
                ),
                "{ kind = \"notify\", message = \"changed\" }".to_owned(),
            ),
        };
        let _ = write!(
            out,
            "[[automations]]\nname = \"{name}\"\ntime_zone = \"Europe/Berlin\"\ntrigger = {trigger}\naction = {action}\n"
        );
    }
    out
}

/// Run one daemon and return its share of a core over the window.
fn measure(
    broker: &Mosquitto,
    adb: &AdbServer,
    sim: &Sim,
    extra: &str,
    warmup: Duration,
    window: Duration,
) -> f64 {
    // Battery and power state polled every 5 s; nothing else.
    let polls = NO_POLLS
        .replace("battery = 0", "battery = 5")
        .replace("device_state = 0", "device_state = 5");
    let config = droidwarden_e2e::mqtt::one_phone_config(
        broker.port,
        &sim.serial(),
        &format!(
            "[mqtt.homeassistant]\ndiscovery = false\n{polls}\n[agent.approval]\nauto_approve_up_to = \"low\"\n{extra}"
        ),
    );
    let started = Instant::now();
    let daemon = Daemon::start(adb, &config);
    // Ready once its automations are loaded and the phone is polled.
    sim.clear_log();
    wait_for("the daemon's first polls", Duration::from_secs(120), || {
        let polled = sim
            .commands()
            .iter()
            .any(|argv| argv.iter().any(|a| a == "battery"));
        (polled && daemon.log().contains("automations ready")).then_some(())
    });
    println!("  ready and polling after {:?}", started.elapsed());
    std::thread::sleep(warmup);
    let pid = daemon.pid();
    sim.clear_log();
    let (c0, t0) = (cpu_time(pid), Instant::now());
    std::thread::sleep(window);
    let (c1, t1) = (cpu_time(pid), Instant::now());
    let share = (c1 - c0).as_secs_f64() / (t1 - t0).as_secs_f64() * 100.0;
    let polls = sim
        .commands()
        .iter()
        .filter(|argv| argv.iter().any(|a| a == "battery" || a == "power"))
        .count();
    println!(
        "  {:.2} s of CPU in {:.1} s: {share:.3} % of a core (RSS {} KiB, {polls} state reads)",
        (c1 - c0).as_secs_f64(),
        (t1 - t0).as_secs_f64(),
        droidwarden_e2e::rss_kib(pid)
    );
    share
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` asks for a listing; nothing to list.
    }
    let n = env_size("AUTOMATIONS", 1000);
    let window = Duration::from_secs(env_size("WINDOW_S", 60) as u64);
    let warmup = Duration::from_secs(env_size("WARMUP_S", 5) as u64);
    let broker = Mosquitto::start();
    let adb = AdbServer::start();
    let sim = adb.phone(SimOptions::default());
    println!("baseline: no automations");
    let base = measure(&broker, &adb, &sim, "", warmup, window);
    println!("{n} automations (cron, interval, thresholds, changes)");
    let with = measure(&broker, &adb, &sim, &automations(n), warmup, window);
    let cost = with - base;
    println!(
        "automations_idle: {n} automations cost {cost:.3} % of a core (daemon {with:.3} % vs {base:.3} % without); target < 1 %"
    );
}
