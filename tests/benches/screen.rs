//! Benchmark: the screen actions against the raw adb commands they stand on,
//! on an emulated phone behind the real adb server (1080×2400 screen).
//!
//! 1. `screen.screenshot` (default: longest side 1024, JPEG 80) through
//!    `DeviceHandle::call`, as a task on the runtime, against a raw
//!    `exec:screencap -p` exchange with the adb server (what `adb exec-out
//!    screencap -p` does, without spawning adb) plus the scaling alone
//!    (`render_screenshot` on that PNG: decode, scale, encode). Target:
//!    ≤ 1.3 × (raw + scaling).
//! 2. `screen.ui_tree` against the raw `uiautomator dump FILE` and `cat FILE`
//!    exchanges. Target: ≤ 1.2 × raw. Also against the one raw exchange
//!    `uiautomator dump FILE && cat FILE`, which is what `ui_tree` sends:
//!    that ratio is its own cost over the device command. The three run in
//!    an order that rotates every round; the parsing alone, and a `ui_tree`
//!    right after the screenshot's scaling (parked workers, cold caches),
//!    are shown beside them.
//!
//! The ways run interleaved, one of each per round. Run with
//! `cargo bench -p droidwarden-e2e --bench screen` after `cargo build
//! --release --workspace --bins` (or, for a quick look with the debug
//! binaries, `cargo bench -p droidwarden-e2e --bench screen --profile dev`).
//! `SCREEN_ROUNDS` sets the rounds (default 40).

use droidwarden_bridge::Registry;
use droidwarden_bridge::adb::actions::{DUMP_PATH, render_screenshot};
use droidwarden_bridge::adb::{AdbConfig, AdbTransport};
use droidwarden_e2e::{AdbServer, Sim, SimOptions, env_size};
use droidwarden_services::{Catalogue, ImageFormat};
use serde_json::json;
use std::io::{Read, Write};
use std::net::{SocketAddrV4, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

const WARMUP: usize = 3;

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn median(name: &str, mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    let m = samples[samples.len() / 2];
    let p90 = samples[samples.len() * 9 / 10];
    println!(
        "{name:<52} median {:>8.2} ms   p90 {:>8.2} ms   (n={})",
        ms(m),
        ms(p90),
        samples.len()
    );
    m
}

fn send(stream: &mut TcpStream, request: &str) {
    write!(stream, "{:04x}{request}", request.len()).expect("write request");
    let mut status = [0u8; 4];
    stream.read_exact(&mut status).expect("read status");
    assert_eq!(&status, b"OKAY", "adb server refused {request}");
}

/// One raw exchange (`service` is `exec:…` or `shell,v2,raw:…`); the reply.
fn raw(port: u16, serial: &str, service: &str) -> Vec<u8> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect adb server");
    stream.set_nodelay(true).expect("nodelay");
    send(&mut stream, &format!("host:transport:{serial}"));
    send(&mut stream, service);
    let mut reply = Vec::with_capacity(1 << 20);
    stream.read_to_end(&mut reply).expect("read reply");
    reply
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let rounds = env_size("SCREEN_ROUNDS", 40);
    let adb = AdbServer::start();
    let sim = Sim::start(SimOptions::default());
    adb.connect(&sim.serial());
    let serial = sim.serial();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let registry = Arc::new(Registry::new());
    let transport = AdbTransport::new(
        AdbConfig {
            server: SocketAddrV4::new([127, 0, 0, 1].into(), adb.port),
            start_server: false,
            ..AdbConfig::default()
        },
        Arc::clone(&registry),
    );
    runtime.block_on(transport.refresh()).expect("list devices");
    let device = registry.select(Some(&serial)).expect("the sim is listed");
    let parse = |service: &str, action: &str| {
        Catalogue::get()
            .parse(service, action, &json!({}))
            .expect("valid command")
    };
    let (shot, tree) = (parse("screen", "screenshot"), parse("screen", "ui_tree"));
    let call = |command: &droidwarden_services::Command| {
        let (device, command) = (device.clone(), command.clone());
        runtime
            .block_on(runtime.spawn(async move {
                let start = Instant::now();
                device.call(&command).await.expect("call succeeds");
                start.elapsed()
            }))
            .expect("the call's task")
    };
    let timed = |f: &mut dyn FnMut()| {
        let start = Instant::now();
        f();
        start.elapsed()
    };
    let png = raw(adb.port, &serial, "exec:screencap -p");
    assert!(png.starts_with(b"\x89PNG"), "the sim answers a PNG");
    println!(
        "screen actions against droidwarden-sim (1080x2400) via adb server on port {}; PNG {} KB\n",
        adb.port,
        png.len() / 1024
    );

    let (mut ours, mut exec, mut scale) = (Vec::new(), Vec::new(), Vec::new());
    let (mut ours_tree, mut dump_cat, mut dump_and_cat) = (Vec::new(), Vec::new(), Vec::new());
    let (mut parse_only, mut tree_after_scaling) = (Vec::new(), Vec::new());
    let two_exchanges = || {
        let out = raw(
            adb.port,
            &serial,
            &format!("shell,v2,raw:uiautomator dump {DUMP_PATH}"),
        );
        assert!(!out.is_empty());
        let xml = raw(adb.port, &serial, &format!("shell,v2,raw:cat {DUMP_PATH}"));
        assert!(xml.len() > 1000);
    };
    let one_exchange = || {
        let out = raw(
            adb.port,
            &serial,
            &format!("shell,v2,raw:uiautomator dump {DUMP_PATH} && cat {DUMP_PATH}"),
        );
        assert!(out.len() > 1000);
    };
    one_exchange(); // so that the file exists
    let xml = String::from_utf8_lossy(&raw(adb.port, &serial, &format!("exec:cat {DUMP_PATH}")))
        .into_owned();
    for round in 0..WARMUP + rounds {
        let keep = round >= WARMUP;
        let a = call(&shot);
        let mut bytes = Vec::new();
        let b = timed(&mut || bytes = raw(adb.port, &serial, "exec:screencap -p"));
        let c = timed(&mut || {
            render_screenshot(&bytes, 1024, ImageFormat::Jpeg, 80).expect("scales");
        });
        // Right after 50+ ms of scaling on this thread: the runtime's
        // workers are parked and the caches cold. Informational.
        let d = call(&tree);
        // The three ui_tree ways, in an order that rotates every round, so
        // none always follows the screenshot's work or another way.
        let mut t = [Duration::ZERO; 3];
        for k in 0..3 {
            let which = (round + k) % 3;
            t[which] = match which {
                0 => call(&tree),
                1 => timed(&mut || two_exchanges()),
                _ => timed(&mut || one_exchange()),
            };
        }
        // The parsing alone: the XML into the list and its JSON.
        let g = timed(&mut || {
            let tree =
                droidwarden_bridge::adb::parse::ui_elements(&xml, true, 200).expect("parses");
            serde_json::to_value(tree).expect("json");
        });
        if keep {
            ours.push(a);
            exec.push(b);
            scale.push(c);
            tree_after_scaling.push(d);
            ours_tree.push(t[0]);
            dump_cat.push(t[1]);
            dump_and_cat.push(t[2]);
            parse_only.push(g);
        }
    }
    let base: Vec<Duration> = exec.iter().zip(&scale).map(|(a, b)| *a + *b).collect();
    let ours = median("screen.screenshot (droidwarden, runtime task)", ours);
    median("raw exec:screencap -p", exec);
    median("scaling alone (decode, scale to 1024, JPEG 80)", scale);
    let base = median("raw exec:screencap -p + scaling", base);
    println!();
    let ours_tree = median("screen.ui_tree (droidwarden, runtime task)", ours_tree);
    let dump_cat = median("raw uiautomator dump + cat (two exchanges)", dump_cat);
    let dump_and_cat = median("raw `uiautomator dump && cat` (one exchange)", dump_and_cat);
    median(
        "parsing the XML into the list and its JSON alone",
        parse_only,
    );
    median("screen.ui_tree right after the scaling", tree_after_scaling);
    println!();
    println!(
        "screenshot / (raw + scaling) = {:.2} (target <= 1.3)",
        ms(ours) / ms(base)
    );
    println!(
        "ui_tree / (raw dump + cat)   = {:.2} (target <= 1.2)",
        ms(ours_tree) / ms(dump_cat)
    );
    println!(
        "ui_tree / raw dump && cat    = {:.2} (its own cost over the one device command)",
        ms(ours_tree) / ms(dump_and_cat)
    );
}
