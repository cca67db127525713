//! Benchmark: `screen.ui_tree` through the on-device UI server (uiautomator2's
//! `u2.jar`, docs/screen-component.md) against `uiautomator dump`, on an
//! emulated phone behind the real adb server.
//!
//! Three ways, interleaved one of each per round in an order that rotates:
//!
//! 1. `screen.ui_tree` through a transport allowed to use the server
//!    (`via: "ui_server"`);
//! 2. `screen.ui_tree` through a transport without it (`via:
//!    "uiautomator_dump"`);
//! 3. the raw server exchange the first stands on: `tcp:9008` through the
//!    adb server and one `POST /jsonrpc/0` of `dumpWindowHierarchy`.
//!
//! The emulated phone answers `uiautomator dump` at once, where a real
//! phone takes from a fraction of a second to many seconds (its Java start
//! and the wait for an idle screen): these figures say what the daemon's
//! side costs, not how much faster a real phone reads. Real-phone speed
//! must be measured on a phone (docs/screen-component.md cites published
//! figures).
//!
//! Run with `cargo bench -p droidwarden-e2e --bench ui_server` (release) or
//! `--profile dev`. `UI_SERVER_ROUNDS` sets the rounds (default 40).

use droidwarden_bridge::Registry;
use droidwarden_bridge::adb::{AdbConfig, AdbTransport};
use droidwarden_e2e::adb_bench::{InProcessPhone, median, ms};
use droidwarden_e2e::env_size;
use droidwarden_services::Catalogue;
use serde_json::json;
use std::io::{Read, Write};
use std::net::{SocketAddrV4, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

const WARMUP: usize = 3;

fn request(stream: &mut TcpStream, request: &str) {
    write!(stream, "{:04x}{request}", request.len()).expect("write request");
    let mut status = [0u8; 4];
    stream.read_exact(&mut status).expect("read status");
    assert_eq!(&status, b"OKAY", "adb server refused {request}");
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let rounds = env_size("UI_SERVER_ROUNDS", 40);
    let rig = InProcessPhone::start();
    // The emulated phone checks that a jar is there and runs no Java: a
    // stand-in keeps its state small.
    let dir = tempfile::tempdir().expect("temporary directory");
    let jar = dir.path().join("u2.jar");
    std::fs::write(&jar, b"PK stand-in").expect("write the jar");
    let registry = Arc::new(Registry::new());
    let transport = AdbTransport::new(
        AdbConfig {
            server: rig.server(),
            start_server: false,
            ui_server_jar: Some(jar),
            ..AdbConfig::default()
        },
        Arc::clone(&registry),
    );
    rig.runtime
        .block_on(transport.refresh())
        .expect("list devices");
    let with_server = registry.select(Some(&rig.serial)).expect("listed");
    let tree = Catalogue::get()
        .parse("screen", "ui_tree", &json!({}))
        .expect("valid command");
    let call = |device: &droidwarden_bridge::DeviceHandle, via: &str| {
        let (device, command, via) = (device.clone(), tree.clone(), via.to_owned());
        let task = rig.runtime.spawn(async move {
            let start = Instant::now();
            let result = device.call(&command).await.expect("call succeeds");
            let took = start.elapsed();
            assert_eq!(result["via"], via.as_str(), "{result}");
            took
        });
        rig.runtime.block_on(task).expect("the call's task")
    };
    // The first call starts the server (sends the jar, launches, pings).
    let start = call(&with_server, "ui_server");
    let body =
        json!({"jsonrpc": "2.0", "id": 1, "method": "dumpWindowHierarchy", "params": [false, 50]})
            .to_string();
    let raw = || {
        let started = Instant::now();
        let server = SocketAddrV4::new([127, 0, 0, 1].into(), rig.adb.port);
        let mut stream = TcpStream::connect(server).expect("connect adb server");
        stream.set_nodelay(true).expect("nodelay");
        request(&mut stream, &format!("host:transport:{}", rig.serial));
        request(&mut stream, "tcp:9008");
        write!(
            stream,
            "POST /jsonrpc/0 HTTP/1.1\r\nHost: 127.0.0.1:9008\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .expect("write");
        let mut reply = Vec::with_capacity(64 * 1024);
        stream.read_to_end(&mut reply).expect("read reply");
        assert!(reply.starts_with(b"HTTP/1.1 200"), "the server answers");
        started.elapsed()
    };
    println!(
        "screen.ui_tree on droidwarden-sim (1080x2400) via adb server on port {}; the server's start took {:.1} ms\n",
        rig.adb.port,
        ms(start)
    );
    let (mut via_server, mut via_dump, mut raw_server) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..WARMUP + rounds {
        let mut t = [Duration::ZERO; 3];
        for k in 0..3 {
            let which = (round + k) % 3;
            t[which] = match which {
                0 => call(&with_server, "ui_server"),
                1 => call(&rig.device, "uiautomator_dump"),
                _ => raw(),
            };
        }
        if round >= WARMUP {
            via_server.push(t[0]);
            via_dump.push(t[1]);
            raw_server.push(t[2]);
        }
    }
    let s = median(
        "screen.ui_tree through the UI server (runtime task)",
        via_server,
    );
    let d = median(
        "screen.ui_tree through uiautomator dump (runtime task)",
        via_dump,
    );
    let r = median("raw tcp:9008 + POST dumpWindowHierarchy", raw_server);
    println!();
    println!(
        "through the server / raw server exchange = {:.2}",
        ms(s) / ms(r)
    );
    println!(
        "through the server / through uiautomator dump = {:.2}",
        ms(s) / ms(d)
    );
    drop(transport);
}
