//! Tests of the shared parsers on every sample, and the sample set itself.
//!
//! Each parser's own tests check concrete values for the fixtures of its
//! command; [`each_sample`] feeds *every* fixture (found on disk, so new ones
//! are covered without editing a list) and some hostile text to a parser.
//! The parsers of this module are run on it here; each service module
//! under `actions` runs its own parsers on it.

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
    let _ = setting_value(text);
    let _ = getprop_value(text);
    let _ = dump_complete("dumpsys x", text, text);
    let _ = dump_complete("dumpsys x", text, "");
    let _ = resolve_activity_brief(text);
    let _ = keyguard(text);
    let _ = launcher_activities(text);
    let _ = component_package(text);
    let _ = am_start(text);
    let _ = package_list(text);
    let _ = pm_path(text);
    let _ = cmd_success(text);
    let _ = power(text);
    let _ = rotation(text);
    if let Ok(dump) = sensors(text) {
        let _ = (motion(&dump), ambient(&dump), proximity(&dump));
    }
    let _ = focused_app(text);
    let _ = dump_denial(text);
    for line in text.lines().take(64) {
        let _ = (
            text::split_int(line),
            text::grouped_uint(line),
            text::leading_int(line),
        );
    }
}

/// Runs `check` on every stored real output (found on disk, so new ones
/// are covered without editing a list) and on hostile text, each sample also
/// cut short at every character boundary, like a truncated read. Every
/// parser's module calls it, so no parser can panic on what a phone prints.
pub(crate) fn each_sample(check: impl Fn(&str)) {
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
        check(&String::from_utf8_lossy(&bytes));
    }
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
        "-\n+,\n1,\n1,2\n,123\n-9,223,372,036,854,775,808\n9,999,999,999,999,999,999\n1,234.\n5,745é\n".to_owned(),
        "    BSSID\n  aa:bb:cc:dd:ee:ff x y z\n  aa:bb:cc:dd:ee:ff 1 -2(0:-3 >1000.0 [\n".to_owned(),
    ];
    for sample in &samples {
        check(sample);
        // Also every prefix cut at a character boundary, like a truncated read.
        if sample.len() < 512 {
            for (i, _) in sample.char_indices() {
                check(&sample[..i]);
            }
        }
    }
}

#[test]
fn no_shared_parser_panics() {
    each_sample(run_all);
}
