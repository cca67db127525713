//! Benchmark: `battery status` on an emulated phone through the running
//! daemon, two ways, interleaved (one of each per round, so noise on a
//! shared machine falls on both alike):
//!
//! 1. MCP `tools/call` of `android_device {service_id: battery, action:
//!    status}` to `droidwarden mcp` over its stdio (one JSON-RPC line out,
//!    one back), which forwards it to the daemon over D-Bus
//!    (`CallChecked`),
//! 2. the same call as `droidwarden call` makes it: the daemon's D-Bus
//!    `Call` method, on one connection kept open.
//!
//! Both end at the same hub and the same phone; the ratio is what MCP
//! adds. Target: MCP at most 1.3× D-Bus.
//!
//! Run with `cargo bench -p droidwarden-e2e --bench mcp_call` after
//! `cargo build --workspace --bins` (or `--release` with
//! `DROIDWARDEN_BIN_DIR=target/release`). `ROUNDS` sets the rounds
//! (default 300).

use droidwarden_e2e::dbus::PrivateBus;
use droidwarden_e2e::mqtt::{Daemon, Mosquitto, Probe, one_phone_config};
use droidwarden_e2e::{AdbServer, SimOptions, binary, env_size};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const WARMUP: usize = 20;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn main() {
    let rounds = env_size("ROUNDS", 300);
    let bus = PrivateBus::session();
    let broker = Mosquitto::start();
    let probe = Probe::connect(broker.port);
    let adb = AdbServer::start();
    let sim = adb.phone(SimOptions::default());
    let config = one_phone_config(broker.port, &sim.serial(), "");
    let daemon = Daemon::start_with_env(
        &adb,
        &config,
        tempfile::tempdir().expect("state"),
        &[
            ("DBUS_SESSION_BUS_ADDRESS", bus.address.as_str()),
            ("DROIDWARDEN__DBUS__BUS", "session"),
            ("RUST_LOG", "warn"),
        ],
    );
    bus.wait_for_daemon(Duration::from_secs(60));
    probe.wait_payload(
        "droidwarden/devices/phone/availability",
        Duration::from_secs(60),
        "online",
    );

    // MCP: `droidwarden mcp` on pipes.
    let mut mcp = Command::new(binary("droidwarden"))
        .arg("--config")
        .arg(daemon.config_path())
        .arg("mcp")
        .env("DBUS_SESSION_BUS_ADDRESS", &bus.address)
        .env("DROIDWARDEN__DBUS__BUS", "session")
        .env("HOME", adb.home())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("droidwarden mcp");
    let mut stdin = mcp.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(mcp.stdout.take().expect("stdout"));
    let mut line = String::new();
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"}}})
    )
    .expect("initialize");
    stdout.read_line(&mut line).expect("initialize reply");
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
    )
    .expect("initialized");
    let mut exchange = |request: &Value| -> Value {
        writeln!(stdin, "{request}").expect("write");
        stdin.flush().expect("flush");
        line.clear();
        stdout.read_line(&mut line).expect("read");
        serde_json::from_str(&line).expect("a JSON-RPC reply")
    };
    let mut id = 1u64;
    let mut mcp_call = |ping: bool| -> Duration {
        id += 1;
        let request = if ping {
            json!({"jsonrpc": "2.0", "id": id, "method": "ping"})
        } else {
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
                "name": "android_device",
                "arguments": {"service_id": "battery", "action": "status"}}})
        };
        let start = Instant::now();
        let reply = exchange(&request);
        let took = start.elapsed();
        assert!(
            ping || reply["result"]["isError"] == false,
            "MCP battery status failed: {reply}"
        );
        took
    };

    // D-Bus: one connection, `Call` as `droidwarden call` sends it.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let conn = rt.block_on(async {
        zbus::connection::Builder::address(bus.address.as_str())
            .expect("address")
            .build()
            .await
            .expect("D-Bus connection")
    });
    let dbus_call = || -> Duration {
        let start = Instant::now();
        let reply = rt
            .block_on(conn.call_method(
                Some("org.droidwarden.Daemon1"),
                "/org/droidwarden/Daemon1",
                Some("org.droidwarden.Daemon1"),
                "Call",
                &("", "battery", "status", ""),
            ))
            .expect("D-Bus Call");
        let took = start.elapsed();
        let text: String = reply.body().deserialize().expect("result_json");
        assert!(text.contains("level"), "{text}");
        took
    };

    for _ in 0..WARMUP {
        mcp_call(false);
        dbus_call();
    }
    let mut over_mcp = Vec::with_capacity(rounds);
    let mut over_dbus = Vec::with_capacity(rounds);
    let mut pings = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        over_mcp.push(mcp_call(false));
        over_dbus.push(dbus_call());
        pings.push(mcp_call(true));
    }
    over_mcp.sort();
    over_dbus.sort();
    pings.sort();
    let (m50, d50) = (percentile(&over_mcp, 0.5), percentile(&over_dbus, 0.5));
    println!("battery status through the daemon, {rounds} interleaved rounds");
    println!(
        "  MCP tools/call over stdio : median {:>8.3} ms   p90 {:>8.3} ms",
        m50.as_secs_f64() * 1e3,
        percentile(&over_mcp, 0.9).as_secs_f64() * 1e3
    );
    println!(
        "  D-Bus Call                : median {:>8.3} ms   p90 {:>8.3} ms",
        d50.as_secs_f64() * 1e3,
        percentile(&over_dbus, 0.9).as_secs_f64() * 1e3
    );
    println!(
        "  MCP ping (stdio floor)    : median {:>8.3} ms",
        percentile(&pings, 0.5).as_secs_f64() * 1e3
    );
    println!(
        "  ratio MCP / D-Bus (medians): {:.2}x (target <= 1.3x)",
        m50.as_secs_f64() / d50.as_secs_f64()
    );
    let _ = mcp.kill();
    let _ = mcp.wait();
}
