//! Benchmark: how long a phone connected by its mDNS name is out of reach
//! when its port changes (wireless debugging turned off and on), with no
//! one acting.
//!
//! Set-up: Google's adb 36 (the PyPI adbutils wheel), an emulated phone
//! announcing `_adb-tls-connect._tcp` (`--mdns-instance`), the daemon with
//! the phone in `[adb] connect` by its mDNS name and `poll_interval_ms`
//! `POLL_MS` (default 300), no other mDNS client. Each of `MOVES` (default
//! 10) rounds moves the phone to a free port through its control port and
//! measures, polling at once from two threads:
//! - seen: until `adb mdns services` lists the new port;
//! - call: until a `battery status` call through the daemon (D-Bus `Call`)
//!   succeeds again.
//!
//! The harness polls every 20 ms, and one `adb mdns services` run or one
//! `gdbus call` takes a few milliseconds more: that is the resolution.
//!
//! Run with `cargo build --release --workspace --bins` then
//! `cargo bench -p droidwarden-e2e --bench mdns_move`.

use droidwarden_e2e::adb_bench::median;
use droidwarden_e2e::adb36::NewAdb;
use droidwarden_e2e::dbus::{PrivateBus, gdbus_string};
use droidwarden_e2e::mqtt::{ANY_BROKER_PORT, Daemon};
use droidwarden_e2e::{
    AdbServer, Sim, SimOptions, WAIT, env_size, free_port, poll_until, wait_for,
};
use std::time::Instant;

fn main() {
    let moves = env_size("MOVES", 10);
    let poll_ms = env_size("POLL_MS", 300);

    let adb = NewAdb::start();
    let lender = AdbServer::start();
    let instance = format!("adb-BENCH-{:06}", free_port());
    let sim = Sim::start(SimOptions {
        serial: Some("BENCH".into()),
        extra_args: vec!["--mdns-instance".into(), instance.clone()],
        ..SimOptions::default()
    });
    let name = format!("{instance}._adb-tls-connect._tcp");
    wait_for("adb 36 to see the phone over mDNS", WAIT, || {
        adb.sees_connect_service(&instance, sim.adb_port)
            .then_some(())
    });
    let bus = PrivateBus::session();
    let server = format!("127.0.0.1:{}", adb.port);
    let mut env = bus.daemon_env().to_vec();
    env.push(("DROIDWARDEN__ADB__SERVER", server.as_str()));
    let config = format!(
        "{ANY_BROKER_PORT}[adb]\npoll_interval_ms = {poll_ms}\nconnect = [\"{name}\"]\n\
         [[devices]]\nname = \"phone\"\ntransport = \"adb\"\nserial = \"{name}\"\n"
    );
    let _daemon = Daemon::start_with_env(&lender, &config, tempfile::tempdir().unwrap(), &env);
    bus.wait_for_daemon(WAIT);
    let call = || {
        bus.gdbus_call("Call", &["phone", "battery", "status", "{}"])
            .ok()
            .map(|reply| gdbus_string(&reply))
            .filter(|text| text.contains("level"))
    };
    wait_for("a first call on the phone", WAIT, call);

    let (mut seen, mut called) = (Vec::new(), Vec::new());
    for round in 0..moves {
        let moved = sim.control(serde_json::json!({"op": "move", "port": 0}));
        let started = Instant::now();
        let port: u16 = moved["adb"]
            .as_str()
            .and_then(|a| a.rsplit(':').next())
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("round {round}: no new address: {moved}"));
        let (s, c) = std::thread::scope(|scope| {
            let s = scope.spawn(|| {
                poll_until(WAIT, || {
                    adb.sees_connect_service(&instance, port).then_some(())
                })
                .map(|()| started.elapsed())
            });
            let c = scope.spawn(|| poll_until(WAIT, call).map(|_| started.elapsed()));
            (s.join().unwrap(), c.join().unwrap())
        });
        seen.push(s.unwrap_or_else(|| panic!("round {round}: adb 36 never saw port {port}")));
        called.push(c.unwrap_or_else(|| panic!("round {round}: no call succeeded")));
    }
    println!("{moves} moves, daemon poll interval {poll_ms} ms");
    median("move → adb 36 lists the new port", seen);
    median("move → a call through the daemon succeeds", called);
}
