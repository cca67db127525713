//! Benchmark: `screen.observe` (issue #29's one observation step: the
//! state, the screenshot and the tree in one call) against the raw
//! exchanges it needs, on an emulated phone behind the real adb server
//! (1080×2400 screen).
//!
//! The raw exchanges are what `observe` sends, each on a connection of its
//! own: `shell,v2,raw:dumpsys window displays`, `exec:screencap -p` plus
//! the scaling alone (`render_screenshot`: decode, scale to 1024, JPEG 80),
//! and `shell,v2,raw:uiautomator dump FILE && cat FILE`. `observe` runs
//! the three at once, so the raw floor is measured both ways: at once (a
//! thread each, the scaling on the screenshot's) and one after the other
//! (what a model pays today for `screenshot`, `ui_tree` and
//! `foreground_app` in three rounds, minus the rounds). Target:
//! observe / raw at once ≤ 1.2.
//!
//! The ways run interleaved, in an order that rotates every round. Run
//! with `cargo bench -p droidwarden-e2e --bench observe` after `cargo
//! build --release --workspace --bins` (or `--profile dev` for a quick look
//! with the debug binaries). `OBSERVE_ROUNDS` sets the rounds (default 30).

use droidwarden_bridge::adb::actions::{DUMP_PATH, render_screenshot};
use droidwarden_e2e::adb_bench::{InProcessPhone, median, ms};
use droidwarden_e2e::env_size;
use droidwarden_services::{Catalogue, ImageFormat};
use serde_json::json;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

const WARMUP: usize = 3;

/// Room for the largest reply, the PNG of a 1080×2400 screen.
const REPLY: usize = 1 << 20;

/// One raw exchange on a connection of its own (as `InProcessPhone::raw`,
/// callable from any thread).
fn raw(port: u16, serial: &str, service: &str) -> Vec<u8> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect adb server");
    stream.set_nodelay(true).expect("nodelay");
    for request in [format!("host:transport:{serial}"), service.to_owned()] {
        write!(stream, "{:04x}{request}", request.len()).expect("write request");
        let mut status = [0u8; 4];
        stream.read_exact(&mut status).expect("read status");
        assert_eq!(&status, b"OKAY", "adb server refused {request}");
    }
    let mut reply = Vec::with_capacity(REPLY);
    stream.read_to_end(&mut reply).expect("read reply");
    reply
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let rounds = env_size("OBSERVE_ROUNDS", 30);
    let rig = InProcessPhone::start();
    let (port, serial) = (rig.adb.port, rig.serial.clone());
    let observe = Catalogue::get()
        .parse("screen", "observe", &json!({}))
        .expect("valid command");
    let state = || {
        let out = raw(port, &serial, "shell,v2,raw:dumpsys window displays");
        assert!(out.len() > 500);
    };
    let shot = || {
        let png = raw(port, &serial, "exec:screencap -p");
        render_screenshot(&png, 1024, ImageFormat::Jpeg, 80).expect("scales");
    };
    let tree = || {
        let out = raw(
            port,
            &serial,
            &format!("shell,v2,raw:uiautomator dump {DUMP_PATH} && cat {DUMP_PATH}"),
        );
        assert!(out.len() > 1000);
    };
    let timed = |f: &mut dyn FnMut()| {
        let start = Instant::now();
        f();
        start.elapsed()
    };
    println!("screen.observe against droidwarden-sim (1080x2400) via adb server on port {port}\n");
    let (mut ours, mut at_once, mut in_turn) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..WARMUP + rounds {
        let mut t = [Duration::ZERO; 3];
        for k in 0..3 {
            let which = (round + k) % 3;
            t[which] = match which {
                0 => rig.call_as_task(&observe),
                1 => timed(&mut || {
                    std::thread::scope(|s| {
                        s.spawn(state);
                        s.spawn(shot);
                        s.spawn(tree);
                    });
                }),
                _ => timed(&mut || {
                    state();
                    shot();
                    tree();
                }),
            };
        }
        if round >= WARMUP {
            ours.push(t[0]);
            at_once.push(t[1]);
            in_turn.push(t[2]);
        }
    }
    let ours = median("screen.observe (droidwarden, runtime task)", ours);
    let at_once = median("raw: the three exchanges at once (+ scaling)", at_once);
    let in_turn = median("raw: the three one after the other (+ scaling)", in_turn);
    println!();
    println!(
        "observe / raw at once      = {:.2} (target <= 1.2)",
        ms(ours) / ms(at_once)
    );
    println!(
        "observe / raw in turn      = {:.2} (what three separate reads cost, without the model rounds between them)",
        ms(ours) / ms(in_turn)
    );
}
