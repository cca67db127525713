//! Cross-parser tests: no parser panics on any fixture or on garbage.
//!
//! Each parser's own tests check concrete values for the fixtures of its
//! command; this file feeds *every* fixture (found on disk, so new ones are
//! covered without editing the list) and some hostile text to *every* parser.

use std::path::{Path, PathBuf};

use super::*;

/// The `am start` failures of the fixtures, with what each says was not
/// found: an activity `am` could not resolve.
pub(super) const AM_START_ERRORS: &[(&str, &str)] = &[
    (
        fixture!("am-start-errors/fenix-issue7925-pixel2-10.txt"),
        "Intent { act=android.intent.action.MAIN cat=[android.intent.category.LAUNCHER] flg=0x10000000 pkg=org.mozilla.fenix.performancetest }",
    ),
    (
        fixture!("am-start-errors/rn-deeplinking-issue1-unknown.txt"),
        "Intent { act=android.intent.action.VIEW dat=exp://127.0.0.1:19004/--/details/3 flg=0x10000000 pkg=com.deeplinking }",
    ),
    (
        fixture!("am-start-errors/uniride-issue22-unknown.txt"),
        "com.sjsu.se195.uniride/com.sjsu.se195.uniride.SignInActivity",
    ),
];

fn fixture_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            fixture_files(&path, out);
        } else {
            out.push(path);
        }
    }
}

/// Runs every parser on `text`; only a panic can fail this.
fn run_all(text: &str) {
    let _ = classify_device_error(text, text, 0);
    let _ = classify_device_error(text, "", 1);
    let _ = classify_device_error("", text, 127);
    let _ = battery(text);
    let _ = ip_addr(text);
    let _ = ip_route(text);
    let _ = airplane_mode(text);
    let _ = setting_value(text);
    let _ = getprop_value(text);
    if let Ok(props) = getprop(text) {
        let _ = device_props(&props);
    }
    let _ = meminfo(text);
    let _ = uptime_seconds(text);
    let _ = location(text);
    let _ = dump_complete("dumpsys x", text, text);
    let _ = dump_complete("dumpsys x", text, "");
    let _ = ip_addrs(text);
    let _ = ip_route_get(text);
    if let Ok(links) = ip_addrs(text) {
        let _ = uplink(&links, text.lines().next());
    }
    let _ = resolve_activity_brief(text);
    let _ = launcher_activities(text);
    let _ = component_package(text);
    let _ = am_start(text);
    let _ = package_list(text);
    let _ = pm_path(text);
    let _ = wifi(text);
    let _ = notifications(text);
    let _ = wifi_scan(text);
    let _ = bluetooth(text);
    let _ = cmd_success(text);
    for stream in ["STREAM_MUSIC", "ring", "", "VOLUME GROUP"] {
        let _ = audio_stream(text, stream);
    }
    let _ = power(text);
    if let Ok(dump) = sensors(text) {
        let _ = (motion(&dump), ambient(&dump), proximity(&dump));
    }
    let _ = rotation(text);
    let _ = cameras(text);
    let _ = media_sessions(text);
    let _ = focused_app(text);
}

#[test]
fn no_parser_panics_on_any_fixture() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/android");
    let mut files = Vec::new();
    fixture_files(&root, &mut files);
    assert!(
        files.len() >= 50,
        "fixtures not found under {}",
        root.display()
    );
    for path in files {
        let bytes = std::fs::read(&path).expect("readable fixture");
        run_all(&String::from_utf8_lossy(&bytes));
    }
}

#[test]
fn no_parser_panics_on_garbage() {
    let long_line = "x".repeat(1 << 20);
    let long_numbers = "9".repeat(4096);
    let samples = [
        String::new(),
        "\n\n\n".to_owned(),
        "\0\u{1}\u{7f}\u{fffd}\u{fffd}binary\u{0}\r\n".to_owned(),
        long_line,
        format!("level: {long_numbers}\nscale: {long_numbers}\nstatus: 2\nhealth: 2\npresent: true"),
        format!(" 10:00:00 up {long_numbers} days, {long_numbers}:{long_numbers},  load average: 0"),
        "[[[[]]]]: [\n]: [\n[a]: [".to_owned(),
        "last location=Location[\nlast location=Location[gps\nlast location=Location[gps 1,2,3 ]".to_owned(),
        "- STREAM_MUSIC:\n   Current: : , (: ), 2 (: x\n   Devices: (\n- :\n-  (:".to_owned(),
        "mWifiInfo SSID: \"\nmWifiInfo \nmNetworkInfo state: \nWi-Fi is ".to_owned(),
        "Sensor List:\n0x) | | type: (\n) |\nRecent Sensor events:\n: last events\n\t 1 (ts=, wall=) ,,,\n".to_owned(),
        "  mRotation=ROTATION_\n  init=x\n  mCurrentFocus=Window{ u0 /}\n  mFocusedApp= u0".to_owned(),
        "== Camera HAL device / info ==\n  Facing:\n  android.lens.facing\n".to_owned(),
        "package=\nstate=PlaybackState {state=(\nmetadata: description=".to_owned(),
        "3: : <> state\n    inet /\n    inet6 \n".to_owned(),
        "Bonded devices:\n    :::::\n    a:b:c:d:e:f [\n".to_owned(),
        "é日本語\u{1F600}: [é]\n\u{1F600}mRotation=1".to_owned(),
        "Starting:\nStatus:\nTotalTime: -1\nError".to_owned(),
        "sh: : not found\n/system/bin/sh: 1: : not found".to_owned(),
        "*** DUMP TIMEOUT\n***EXPIRED DUMP TIMEOUT\n*** é DUMP TIMEOUT é EXPIRED".to_owned(),
        "2 activities found:\n  Activity #0:\n    /\n    a/\n  ActivityInfo:\n name=\npackageName=".to_owned(),
        "8.8.8.8 via\nunreachable\n dev\n1: lo: <>\n2: : <UP>\n".to_owned(),
        "    BSSID\n  aa:bb:cc:dd:ee:ff x y z\n  aa:bb:cc:dd:ee:ff 1 -2(0:-3 >1000.0 [\n".to_owned(),
    ];
    for sample in &samples {
        run_all(sample);
        // Also every prefix cut at a character boundary, like a truncated read.
        if sample.len() < 512 {
            for (i, _) in sample.char_indices() {
                run_all(&sample[..i]);
            }
        }
    }
}
