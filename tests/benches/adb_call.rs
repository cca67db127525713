//! Benchmark: one action (`battery.status`, i.e. `dumpsys battery`) on an
//! emulated phone behind the real adb server, three ways:
//!
//! 1. a warm droidwarden call in-process (`DeviceHandle::call`), three
//!    ways: as a task on a two-worker runtime, timed inside the task, which
//!    is how the daemon runs calls (MQTT and D-Bus handlers are tasks on the
//!    runtime's workers); awaited with `block_on` on a current-thread
//!    runtime, through a transport of its own, which is how `droidwarden
//!    call --local` runs one; and awaited
//!    with `block_on` from the bench's own thread on the two-worker runtime,
//!    which pays a hand-off between threads at every wait (no command runs
//!    that way any more: it shows what the current thread saves),
//! 2. spawning `adb -s SERIAL shell dumpsys battery` per action, as most
//!    peers do,
//! 3. a raw adb-server round trip: one hand-written TCP exchange
//!    (`host:transport:SERIAL`, then `shell,v2,raw:…`), the floor any client
//!    of the adb server pays; and the same exchange on tokio's sockets as a
//!    task, the floor of an async client, which splits a call's cost over
//!    the raw one into the runtime's I/O and the bridge's own work.
//!
//! `adb_client`'s own `shell_command` is timed too, for reference. The
//! in-process ways run interleaved, one of each per round in an order that
//! changes each round, so that noise on a shared machine, and whatever one
//! way leaves behind, fall on all of them alike.
//!
//! Then calls at once: `PHONES` emulated phones (default 4), bursts of
//! `BURST` calls (default 64) spread over them, on the same two-worker
//! runtime; prints calls per second and the most threads the process had
//! while the bursts ran (from `/proc/self/status`, sampled every
//! millisecond by one extra thread, counted in).
//!
//! Run with `cargo bench -p droidwarden-e2e --bench adb_call` (after
//! `cargo build --release --workspace --bins`). Prints medians and p90s and
//! the two ratios the targets are stated in. It uses only the bridge's
//! public API, so the same file builds against older bridges for
//! comparisons.

use droidwarden_e2e::SimOptions;
use droidwarden_e2e::adb_bench::{InProcessPhone, ms};
use droidwarden_services::Catalogue;
use serde_json::json;
use std::net::SocketAddrV4;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const WARMUP: usize = 20;
/// Rounds of the interleaved comparison (each runs every in-process way once).
const ROUNDS: usize = 1000;
/// Spawning `adb` costs milliseconds; fewer runs are enough.
const SPAWNS: usize = 100;
/// Bursts of calls at once in the concurrency part.
const BURSTS: usize = 50;

/// A number from the environment, or `default`.
fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The process's current thread count.
fn threads() -> usize {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Threads:"))
                .and_then(|n| n.trim().parse().ok())
        })
        .unwrap_or(0)
}

struct Stats {
    median: Duration,
    p90: Duration,
}

impl Stats {
    fn of(name: &str, mut samples: Vec<Duration>) -> Self {
        samples.sort();
        let stats = Self {
            median: samples[samples.len() / 2],
            p90: samples[samples.len() * 9 / 10],
        };
        println!(
            "{name:<44} median {:>8.3} ms   p90 {:>8.3} ms   (n={})",
            ms(stats.median),
            ms(stats.p90),
            samples.len()
        );
        stats
    }
}

fn time(f: &mut dyn FnMut()) -> Duration {
    let start = Instant::now();
    f();
    start.elapsed()
}

/// A way to time: a closure that runs once and returns how long it took
/// (most are [`time`]d from outside; a task on the runtime times itself).
type Way<'a> = (&'a str, &'a mut dyn FnMut() -> Duration);

/// Time each way once per round, the ways interleaved, so that whatever
/// else the machine does (frequency changes, neighbours on a shared host)
/// weighs on every way alike instead of on whichever ran in a bad second;
/// the order changes from round to round.
fn interleaved(ways: &mut [Way<'_>], rounds: usize) -> Vec<Stats> {
    for (_, f) in ways.iter_mut() {
        for _ in 0..WARMUP {
            f();
        }
    }
    let mut samples = vec![Vec::with_capacity(rounds); ways.len()];
    let mut order: Vec<usize> = (0..ways.len()).collect();
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    for _ in 0..rounds {
        // A new order each round (Fisher–Yates on xorshift), so that no way
        // always runs right after the same other one, whose leftovers (a
        // connection still closing, say) it would always meet.
        for i in (1..order.len()).rev() {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            order.swap(i, (seed % (i as u64 + 1)) as usize);
        }
        for &i in &order {
            samples[i].push((ways[i].1)());
        }
    }
    ways.iter()
        .zip(samples)
        .map(|((name, _), s)| Stats::of(name, s))
        .collect()
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` asks for a listing; nothing to list.
    }
    let rig = InProcessPhone::start();
    let (adb, serial, device) = (&rig.adb, &rig.serial, &rig.device);
    let command = Catalogue::get()
        .parse("battery", "status", &json!({}))
        .expect("valid command");

    println!(
        "battery.status against droidwarden-sim via adb server on port {}\n",
        adb.port
    );
    let server = rig.server();
    let mut ours = || {
        time(&mut || {
            rig.runtime
                .block_on(device.call(&command))
                .expect("call succeeds");
        })
    };
    let mut ours_task = || rig.call_as_task(&command);
    let local = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("current-thread runtime");
    // A transport of its own, as `call --local` has.
    let (_local_transport, _local_registry, local_device) = rig.own_transport(&local);
    let mut ours_local = || {
        let took = time(&mut || {
            local
                .block_on(local_device.call(&command))
                .expect("call succeeds");
        });
        // The finished connection's close, queued on this runtime, runs
        // now rather than inside the next call: `call --local` closes it
        // when the process exits, after printing the answer.
        local.block_on(tokio::task::yield_now());
        took
    };
    let mut library = || time(&mut || library_call(serial, server));
    let mut raw = || {
        time(&mut || {
            assert!(rig.raw("shell,v2,raw:dumpsys battery", 4096).len() > 100);
        })
    };
    let mut raw_task = || rig.raw_as_task("shell,v2,raw:dumpsys battery");
    let stats = interleaved(
        &mut [
            ("droidwarden call, block_on beside 2 workers", &mut ours),
            ("droidwarden call as a runtime task", &mut ours_task),
            ("droidwarden call, current-thread block_on", &mut ours_local),
            ("adb_client shell_command alone", &mut library),
            ("raw adb-server round trip", &mut raw),
            ("raw round trip, tokio sockets, as a task", &mut raw_task),
        ],
        ROUNDS,
    );
    let [ours, ours_task, ours_local, library, raw, raw_task] =
        <[Stats; 6]>::try_from(stats).unwrap_or_else(|_| unreachable!("six ways measured"));
    let mut spawn_once = || {
        time(&mut || {
            let out = adb
                .adb(&["-s", serial, "shell", "dumpsys", "battery"])
                .output()
                .expect("adb runs");
            assert!(out.status.success());
        })
    };
    let spawn = interleaved(
        &mut [(
            "spawn `adb -s SERIAL shell dumpsys battery`",
            &mut spawn_once,
        )],
        SPAWNS,
    )
    .remove(0);
    println!();
    for (ratio, over, under, note) in [
        (
            "ours (call --local) / spawn-per-action: ",
            &ours_local,
            &spawn,
            "target <= 0.25",
        ),
        (
            "ours as a runtime task / raw round trip: ",
            &ours_task,
            &raw,
            "target <= 1.1; how the daemon runs calls",
        ),
        (
            "ours on a current-thread runtime / raw round trip: ",
            &ours_local,
            &raw,
            "target <= 1.1; how `droidwarden call --local` runs a call",
        ),
        (
            "ours, block_on from outside the workers / raw round trip: ",
            &ours,
            &raw,
            "a hand-off between threads at every wait; no command runs calls so",
        ),
        (
            "raw with tokio sockets as a task / raw: ",
            &raw_task,
            &raw,
            "what async I/O itself costs on this runtime",
        ),
        (
            "ours as a runtime task / raw with tokio sockets as a task: ",
            &ours_task,
            &raw_task,
            "the bridge's own work",
        ),
        (
            "adb_client alone / raw:  ",
            &library,
            &raw,
            "its shell_command asks the server for the device's features before every command",
        ),
    ] {
        println!("{ratio}{:.3}  ({note})", ms(over.median) / ms(under.median));
    }
    let _ = (
        ours.p90,
        ours_task.p90,
        ours_local.p90,
        spawn.p90,
        raw.p90,
        raw_task.p90,
    );

    // Calls at once, over several phones.
    let phones = env_number("PHONES", 4).max(1);
    let burst = env_number("BURST", 64).max(1);
    let mut serials = vec![serial.clone()];
    let mut sims = Vec::new();
    for _ in 1..phones {
        let more = adb.phone(SimOptions::default());
        serials.push(more.serial());
        sims.push(more);
    }
    rig.runtime
        .block_on(rig.transport.refresh())
        .expect("list devices");
    let handles: Vec<_> = serials
        .iter()
        .map(|s| rig.registry.select(Some(s)).expect("the sim is listed"))
        .collect();
    let before = threads();
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let sampling = Arc::clone(&sampling);
        std::thread::spawn(move || {
            let mut most = 0;
            while sampling.load(Ordering::Relaxed) {
                most = most.max(threads());
                std::thread::sleep(Duration::from_millis(1));
            }
            most
        })
    };
    let started = Instant::now();
    for _ in 0..BURSTS {
        rig.runtime.block_on(async {
            let mut calls = tokio::task::JoinSet::new();
            for i in 0..burst {
                let device = handles[i % handles.len()].clone();
                let command = command.clone();
                calls.spawn(async move { device.call(&command).await });
            }
            for result in calls.join_all().await {
                result.expect("call succeeds");
            }
        });
    }
    let took = started.elapsed();
    sampling.store(false, Ordering::Relaxed);
    let most = sampler.join().expect("the sampler thread");
    println!();
    println!(
        "{burst} calls at once over {phones} phones, {BURSTS} bursts: {:.0} calls/s",
        (burst * BURSTS) as f64 / took.as_secs_f64()
    );
    println!(
        "threads in this process: {before} before (incl. the 2 runtime workers), at most {most} during the bursts (incl. the sampler)"
    );
}

/// `dumpsys battery` through `adb_client`'s `shell_command`.
fn library_call(serial: &str, server: SocketAddrV4) {
    use adb_client::ADBDeviceExt;
    let mut device =
        adb_client::server_device::ADBServerDevice::new(serial.to_owned(), Some(server));
    let mut out = Vec::new();
    device
        .shell_command(&"dumpsys battery", Some(&mut out), None)
        .expect("shell");
    assert!(out.len() > 100);
}
