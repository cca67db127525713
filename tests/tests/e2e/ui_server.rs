//! The on-device UI server (uiautomator2's `u2.jar`,
//! docs/screen-component.md), end to end: the real adb server and the
//! emulated phone, which emulates the server. Its official Python client
//! checks the emulation; the daemon's own client reads the tree, types any
//! text and uses the clipboard through it, and falls back when it dies.

use droidwarden_e2e::phone_rig::{PhoneRig, PhoneRigOptions};
use droidwarden_e2e::{AdbServer, SimOptions, run_with_timeout};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// The text the issue asks for: quotes, a percent, a shell variable, a
/// semicolon, CJK and an emoji.
const HOSTILE_TEXT: &str = "Grüße, \"quoted\" 100% $HOME; 你好 👋";

/// The version of the official client these tests pin (scripts/test
/// installs it; docs/screen-component.md names it).
const CLIENT_VERSION: &str = "3.7.1";

const LIMIT: Duration = Duration::from_secs(120);

/// `u2.jar` from the PyPI uiautomator2 package, which scripts/test installs.
fn u2_jar() -> PathBuf {
    let out = run_with_timeout(
        {
            let mut c = Command::new("python3");
            c.args([
                "-c",
                "import uiautomator2, os; print(os.path.join(os.path.dirname(uiautomator2.__file__), 'assets', 'u2.jar'))",
            ]);
            c
        },
        LIMIT,
    );
    assert!(
        out.status.success(),
        "the PyPI uiautomator2 package is missing (scripts/test installs it: python3 -m pip install uiautomator2=={CLIENT_VERSION}): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let jar = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    assert!(jar.is_file(), "{} is missing", jar.display());
    jar
}

/// A phone with the daemon allowed to run the server on it (and the jar
/// it names, kept as long as the rig); the phone's ADB keyboard is
/// uninstalled unless `adb_keyboard`.
///
/// The emulated phone runs no Java, only checks that the jar is there, and
/// keeps every file it is sent in its state: a small stand-in keeps that
/// state (read and written whole by the test's controls) small. The
/// official client's test sends the real jar.
fn rig(adb_keyboard: bool) -> (PhoneRig, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let jar = dir.path().join("u2.jar");
    std::fs::write(&jar, b"PK stand-in for uiautomator2's u2.jar").expect("write the jar");
    let r = PhoneRig::start_with(
        PhoneRigOptions {
            adb_keys: format!("ui_server_jar = {:?}", jar.display().to_string()),
            ..PhoneRigOptions::default()
        },
        "",
    );
    set(&r, "ui.adb_ime_installed", json!(adb_keyboard));
    (r, dir)
}

fn set(r: &PhoneRig, path: &str, value: Value) {
    let reply = r
        .sim
        .control(json!({"op": "set", "path": path, "value": value}));
    assert_eq!(reply["ok"], true, "{reply}");
}

/// Focus the home screen's search field by a tap on it.
fn focus_field(r: &PhoneRig) {
    let tree = r.ok("screen", "ui_tree", json!({}));
    let field = tree["elements"]
        .as_array()
        .expect("elements")
        .iter()
        .find(|e| e["class"] == "EditText")
        .unwrap_or_else(|| panic!("no field in {}", tree["text"]));
    r.ok("ui_control", "tap", json!({"element": field["index"]}));
}

#[test]
fn the_official_client_drives_the_emulated_server() {
    let adb = AdbServer::shared();
    let sim = adb.phone(SimOptions::default());
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/python/u2_official_client.py");
    let mut python = Command::new("python3");
    python
        .arg(script)
        .arg(adb.port.to_string())
        .arg(sim.serial())
        .arg(HOSTILE_TEXT);
    let out = run_with_timeout(python, LIMIT);
    assert!(
        out.status.success(),
        "the official client failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_slice(&out.stdout).expect("the client's JSON");
    assert_eq!(seen["version"], CLIENT_VERSION);
    assert_eq!(seen["info"]["displayWidth"], 1080, "{seen}");
    assert_eq!(seen["info"]["currentPackageName"], "com.android.launcher3");
    assert_eq!(seen["dump_has_settings"], true, "{seen}");
    assert_eq!(seen["clipboard"], "Grüße 你好");
    assert_eq!(seen["typed"], HOSTILE_TEXT, "{seen}");
    assert_eq!(seen["front_after_click"], "com.android.settings");
    assert_eq!(seen["missing_exists"], false);
    // The phone got the real jar by the file service.
    let listed = adb.run(&[
        "-s",
        &sim.serial(),
        "shell",
        "stat",
        "-c",
        "%s",
        "/data/local/tmp/u2.jar",
    ]);
    let size = std::fs::metadata(u2_jar()).expect("the jar").len();
    assert_eq!(listed.trim(), size.to_string(), "{listed}");
}

#[test]
fn the_tree_comes_from_the_server_and_falls_back_when_it_dies_mid_call() {
    let (r, _jar) = rig(true);
    let tree = r.ok("screen", "ui_tree", json!({}));
    assert_eq!(tree["via"], "ui_server", "{tree}");
    assert!(tree["text"].as_str().unwrap().contains("\"Settings\""));
    assert_eq!(r.ran("uiautomator"), 0, "no uiautomator dump ran");

    // The server crashes on the next request: the read still answers,
    // through uiautomator dump.
    set(&r, "ui.ui_server_dies", json!(1));
    let tree = r.ok("screen", "ui_tree", json!({}));
    assert_eq!(tree["via"], "uiautomator_dump", "{tree}");
    assert!(tree["text"].as_str().unwrap().contains("\"Settings\""));
    assert_eq!(r.ran("uiautomator"), 1);

    // The next read starts it again.
    let tree = r.ok("screen", "ui_tree", json!({}));
    assert_eq!(tree["via"], "ui_server", "{tree}");
    // And a tap by index resolves against a tree the server read.
    let settings = tree["elements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["text"] == "Settings")
        .expect("Settings")["index"]
        .clone();
    r.ok("ui_control", "tap", json!({"element": settings}));
    assert_eq!(
        r.ok("screen", "foreground_app", json!({}))["package"],
        "com.android.settings"
    );
}

#[test]
fn any_text_is_typed_on_a_stock_phone_and_the_clipboard_is_given_back() {
    let (r, _jar) = rig(false);
    r.ok(
        "ui_control",
        "set_clipboard",
        json!({"text": "what the person copied"}),
    );
    focus_field(&r);
    let typed = r.ok("ui_control", "type_text", json!({"text": HOSTILE_TEXT}));
    assert_eq!(typed["method"], "clipboard_paste", "{typed}");
    assert_eq!(typed["typed"], HOSTILE_TEXT.chars().count());
    assert_eq!(r.sim.state()["ui"]["text"], HOSTILE_TEXT);
    // The person's clipboard is theirs again.
    let clip = r.ok("ui_control", "get_clipboard", json!({}));
    assert_eq!(clip["text"], "what the person copied", "{clip}");
    assert_eq!(clip["via"], "ui_server");
    // Nothing of the text went through a shell command.
    assert_eq!(r.ran("你好"), 0);
    assert_eq!(r.ran("ADB_INPUT_B64"), 0);
}

#[test]
fn the_adb_keyboard_is_still_used_when_installed() {
    let (r, _jar) = rig(true);
    focus_field(&r);
    let typed = r.ok("ui_control", "type_text", json!({"text": HOSTILE_TEXT}));
    assert_eq!(typed["method"], "ime_broadcast", "{typed}");
    assert_eq!(r.sim.state()["ui"]["text"], HOSTILE_TEXT);
    // The user's keyboard is back.
    assert_ne!(
        r.sim.state()["settings"]["secure"]["default_input_method"],
        "com.android.adbkeyboard/.AdbIME"
    );
}

#[test]
fn the_clipboard_round_trips_through_the_server() {
    let (r, _jar) = rig(true);
    let set_ = r.ok("ui_control", "set_clipboard", json!({"text": HOSTILE_TEXT}));
    assert_eq!(set_["length"], HOSTILE_TEXT.chars().count());
    assert_eq!(r.sim.state()["ui"]["clipboard"], HOSTILE_TEXT);
    let got = r.ok("ui_control", "get_clipboard", json!({}));
    assert_eq!(got["text"], HOSTILE_TEXT);
    // The value is in no log of the daemon.
    let log = r.daemon().log();
    assert!(!log.contains("你好"), "the clipboard reached the log");
}

#[test]
fn without_consent_nothing_runs_and_the_errors_say_what_to_do() {
    // The default configuration: no jar named.
    let r = PhoneRig::start("");
    set(&r, "ui.adb_ime_installed", json!(false));
    let tree = r.ok("screen", "ui_tree", json!({}));
    assert_eq!(tree["via"], "uiautomator_dump");
    let clip = r.call("ui_control", "get_clipboard", json!({}));
    assert_eq!(clip["error"]["code"], "unsupported_action", "{clip}");
    assert!(
        clip["error"]["message"]
            .as_str()
            .unwrap()
            .contains("ui_server_jar"),
        "{clip}"
    );
    focus_field(&r);
    let typed = r.call("ui_control", "type_text", json!({"text": HOSTILE_TEXT}));
    assert_eq!(typed["error"]["code"], "unsupported_action", "{typed}");
    let message = typed["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("ADB Keyboard") && message.contains("ui_server_jar"),
        "{message}"
    );
    assert_eq!(r.sim.state()["ui"]["text"], "", "nothing was typed");
    // Nothing was sent or launched.
    assert!(
        !r.sim.state()["content"]["files"]
            .as_object()
            .is_some_and(|f| f.contains_key("/data/local/tmp/u2.jar"))
    );
}
