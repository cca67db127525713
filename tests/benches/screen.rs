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

use droidwarden_bridge::adb::actions::{DUMP_PATH, render_screenshot};
use droidwarden_e2e::adb_bench::{InProcessPhone, median, ms};
use droidwarden_e2e::env_size;
use droidwarden_services::{Catalogue, ImageFormat};
use serde_json::json;
use std::time::{Duration, Instant};

const WARMUP: usize = 3;

/// Room for the largest reply, the PNG of a 1080×2400 screen.
const REPLY: usize = 1 << 20;

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let rounds = env_size("SCREEN_ROUNDS", 40);
    let rig = InProcessPhone::start();
    let raw = |service: &str| rig.raw(service, REPLY);
    let parse = |service: &str, action: &str| {
        Catalogue::get()
            .parse(service, action, &json!({}))
            .expect("valid command")
    };
    let (shot, tree) = (parse("screen", "screenshot"), parse("screen", "ui_tree"));
    let call = |command: &droidwarden_services::Command| rig.call_as_task(command);
    let timed = |f: &mut dyn FnMut()| {
        let start = Instant::now();
        f();
        start.elapsed()
    };
    let png = raw("exec:screencap -p");
    assert!(png.starts_with(b"\x89PNG"), "the sim answers a PNG");
    println!(
        "screen actions against droidwarden-sim (1080x2400) via adb server on port {}; PNG {} KB\n",
        rig.adb.port,
        png.len() / 1024
    );

    let (mut ours, mut exec, mut scale) = (Vec::new(), Vec::new(), Vec::new());
    let (mut ours_tree, mut dump_cat, mut dump_and_cat) = (Vec::new(), Vec::new(), Vec::new());
    let (mut parse_only, mut tree_after_scaling) = (Vec::new(), Vec::new());
    let two_exchanges = || {
        let out = raw(&format!("shell,v2,raw:uiautomator dump {DUMP_PATH}"));
        assert!(!out.is_empty());
        let xml = raw(&format!("shell,v2,raw:cat {DUMP_PATH}"));
        assert!(xml.len() > 1000);
    };
    let one_exchange = || {
        let out = raw(&format!(
            "shell,v2,raw:uiautomator dump {DUMP_PATH} && cat {DUMP_PATH}"
        ));
        assert!(out.len() > 1000);
    };
    one_exchange(); // so that the file exists
    let xml = String::from_utf8_lossy(&raw(&format!("exec:cat {DUMP_PATH}"))).into_owned();
    for round in 0..WARMUP + rounds {
        let keep = round >= WARMUP;
        let a = call(&shot);
        let mut bytes = Vec::new();
        let b = timed(&mut || bytes = raw("exec:screencap -p"));
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
