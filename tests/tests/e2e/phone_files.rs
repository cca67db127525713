//! Files sent to the phone end to end: `files.push` and `app_manager.install
//! {host_path}` through `droidwarden call`, the real adb server's `sync:`
//! relay and the emulated phone's file service. What the policy refuses
//! never reaches the phone (the sim's command log, which records every
//! file-service request as `["sync", REQUEST, PATH]`, stays empty); what it
//! allows lands byte for byte, under exactly the path given.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use droidwarden_e2e::P;
use droidwarden_e2e::{AdbServer, Droidwarden, Run, Sim, SimOptions};
use serde_json::{Value, json};
use std::path::Path;

/// Non-ASCII, quotes, `$`, `%`, `;` and an emoji: in a name and a content.
const HOSTILE_NAME: &str = "/sdcard/Download/Grüße \"q\" 'x' 100% $(id); `reboot` 你好 👋.txt";
const TEXT: &str = "Grüße, \"quoted\" 100% $HOME; 你好 👋\nline two\n";

struct Setup {
    _adb: AdbServer,
    sim: Sim,
    dw: Droidwarden,
    host: tempfile::TempDir,
}

/// One phone; the host directory `host` allowed, `extra` added to
/// `[phone_services]`, the shell on (to look at the phone's files).
fn one_phone(extra: &str) -> Setup {
    let host = tempfile::tempdir().expect("host dir");
    let (adb, sim, dw) = droidwarden_e2e::local_phone(
        "SIMFILES1",
        &format!(
            "[phone_services]\nhost_dirs = [\"{}\"]\n{extra}\n[phone_services.shell]\nenabled = true\n",
            host.path().display()
        ),
    );
    Setup {
        _adb: adb,
        sim,
        dw,
        host,
    }
}

/// The phone's file at `path`, as the sim holds it.
fn phone_file(sim: &Sim, path: &str) -> Option<Vec<u8>> {
    sim.state()["content"]["files"][path]
        .as_array()
        .map(|a| a.iter().map(|b| b.as_u64().unwrap() as u8).collect())
}

/// `files.push` on the phone with `params`.
fn push(dw: &Droidwarden, params: Value) -> Run {
    dw.call("phone", "files", "push", params)
}

fn pull(dw: &Droidwarden, path: &str) -> Vec<u8> {
    let run = dw.call("phone", "files", "pull", json!({ "path": path }));
    assert_eq!(run.code, 0, "pull {path}: {}{}", run.stdout, run.stderr);
    B64.decode(run.json["content_base64"].as_str().unwrap())
        .unwrap()
}

fn write_host(dir: &Path, name: &str, bytes: &[u8]) -> String {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, bytes).unwrap();
    path.to_str().unwrap().to_owned()
}

#[test]
fn push_writes_exact_bytes_under_the_exact_name_and_pull_reads_them_back() {
    let s = one_phone("max_push_bytes = 200000\n");
    s.sim.clear_log();
    let run = push(&s.dw, json!({"path": HOSTILE_NAME, "text": TEXT}));
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(run.json["path"], HOSTILE_NAME);
    assert_eq!(run.json["size_bytes"], TEXT.len());
    assert_eq!(run.json["replaced"], false);
    // Through the file service only: no command line carried the name.
    let log = s.sim.commands();
    assert_eq!(
        log,
        vec![
            vec!["sync", "STAT", HOSTILE_NAME],
            vec!["sync", "SEND", HOSTILE_NAME]
        ]
    );
    assert_eq!(phone_file(&s.sim, HOSTILE_NAME).unwrap(), TEXT.as_bytes());
    assert_eq!(pull(&s.dw, HOSTILE_NAME), TEXT.as_bytes());
    // The phone's own tools see it.
    let ls = s.dw.call(
        "phone",
        "shell",
        "run",
        json!({"argv": ["ls", "/sdcard/Download"]}),
    );
    let name = HOSTILE_NAME.rsplit('/').next().unwrap();
    assert!(
        ls.json["stdout"]
            .as_str()
            .unwrap()
            .lines()
            .any(|l| l == name),
        "{}",
        ls.stdout
    );
    let stat = s.dw.call(
        "phone",
        "shell",
        "run",
        json!({"argv": ["stat", "-c", "%s", HOSTILE_NAME]}),
    );
    assert_eq!(stat.json["stdout"], format!("{}\n", TEXT.len()));

    // An existing file is kept unless overwrite says otherwise.
    let again = push(&s.dw, json!({"path": HOSTILE_NAME, "text": "other"}));
    again.assert_error("denied", "overwrite");
    assert_eq!(phone_file(&s.sim, HOSTILE_NAME).unwrap(), TEXT.as_bytes());
    let replaced = push(
        &s.dw,
        json!({"path": HOSTILE_NAME, "text": "other", "overwrite": true}),
    );
    assert_eq!(replaced.code, 0, "{}{}", replaced.stdout, replaced.stderr);
    assert_eq!(replaced.json["replaced"], true);
    assert_eq!(pull(&s.dw, HOSTILE_NAME), b"other");
    // A directory is no file.
    let dir = push(&s.dw, json!({"path": "/sdcard/Download", "text": "x"}));
    assert_eq!(dir.error_code(), "denied", "{}", dir.stdout);

    // Any bytes, in base64.
    let bytes: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
    let run = push(
        &s.dw,
        json!({"path": "/sdcard/Download/bytes.bin", "content_base64": B64.encode(&bytes)}),
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(pull(&s.dw, "/sdcard/Download/bytes.bin"), bytes);

    // A file of the daemon's machine larger than one DATA request (64 KiB),
    // under a non-ASCII name in a sub-directory.
    let big: Vec<u8> = (0..150_000u32).map(|i| (i * 7 % 256) as u8).collect();
    let host = write_host(s.host.path(), "sub/karte ü.bin", &big);
    let run = push(
        &s.dw,
        json!({"path": "/sdcard/Download/karte ü.bin", "host_path": host}),
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(run.json["size_bytes"], 150_000);
    assert_eq!(
        phone_file(&s.sim, "/sdcard/Download/karte ü.bin").unwrap(),
        big
    );
}

#[test]
fn refused_pushes_send_the_phone_nothing() {
    let s =
        one_phone("max_push_bytes = 4096\npush_dirs = [\"/sdcard/Download\", \"/system/etc\"]\n");
    let dir = s.host.path();
    let inside = write_host(dir, "ok.txt", b"fine");
    let big = write_host(dir, "big.bin", &[1u8; 5000]);
    let outside = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(outside.path(), b"secret").unwrap();
    let link = dir.join("link.txt");
    std::os::unix::fs::symlink(outside.path(), &link).unwrap();
    let to = |path: &str, extra: Value| {
        let mut p = json!({ "path": path });
        p.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        p
    };
    let dl = "/sdcard/Download/new.txt";
    for (params, want) in [
        // Outside the phone's push directories.
        (to("/sdcard/DCIM/x.txt", json!({"text": "x"})), "denied"),
        (to("/data/local/tmp/x", json!({"text": "x"})), "denied"),
        (to("/sdcard/Downloads/x", json!({"text": "x"})), "denied"),
        (
            to("/sdcard/Download/../DCIM/x", json!({"text": "x"})),
            "invalid_params",
        ),
        (
            to("sdcard/Download/x", json!({"text": "x"})),
            "invalid_params",
        ),
        // No source, two sources, bad base64.
        (to(dl, json!({})), "invalid_params"),
        (
            to(dl, json!({"text": "x", "host_path": inside})),
            "invalid_params",
        ),
        (to(dl, json!({"content_base64": "abc"})), "invalid_params"),
        (to(dl, json!({"content_base64": "ab$="})), "invalid_params"),
        // Over max_push_bytes, inline and from the host.
        (to(dl, json!({"text": "x".repeat(4097)})), "denied"),
        (to(dl, json!({"host_path": big})), "denied"),
        // Host files outside host_dirs, by name or through a link.
        (to(dl, json!({"host_path": "/etc/passwd"})), "denied"),
        (
            to(dl, json!({"host_path": outside.path().to_str().unwrap()})),
            "denied",
        ),
        (
            to(dl, json!({"host_path": link.to_str().unwrap()})),
            "denied",
        ),
        (
            to(
                dl,
                json!({"host_path": format!("{}/../etc/passwd", dir.display())}),
            ),
            "invalid_params",
        ),
        (
            to(
                dl,
                json!({"host_path": format!("{}/none.txt", dir.display())}),
            ),
            "not_found",
        ),
        (
            to(dl, json!({"host_path": "/tmp/x; rm -rf / $(id)"})),
            "denied",
        ),
        (to(dl, json!({"host_path": "relative/x"})), "invalid_params"),
    ] {
        s.sim.clear_log();
        let run = push(&s.dw, params.clone());
        assert_eq!(
            run.error_code(),
            want,
            "{params}: {}{}",
            run.stdout,
            run.stderr
        );
        assert!(
            s.sim.commands().is_empty(),
            "{params} reached the phone: {:?}",
            s.sim.commands()
        );
    }
    assert!(phone_file(&s.sim, dl).is_none());

    // Allowed by the daemon, refused by the phone: its words come back.
    let run = push(
        &s.dw,
        json!({"path": "/system/etc/hosts", "text": "127.0.0.1 evil\n"}),
    );
    run.assert_error("device_error", "Read-only file system");

    // Without host_dirs, no host file is sent at all.
    let (_adb, sim, dw) = droidwarden_e2e::local_phone_with(SimOptions::default(), "");
    sim.clear_log();
    let run = push(&dw, to(dl, json!({"host_path": inside})));
    run.assert_error("denied", "host_dirs");
    assert!(sim.commands().is_empty());
}

#[test]
fn install_from_the_host_sends_installs_and_removes_the_apk() {
    let s = one_phone("max_apk_bytes = 1000\n");
    let installed = |pkg: &str| {
        s.sim.state()["packages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["package"] == pkg)
    };
    let temp_files = || -> Vec<String> {
        s.sim.state()["content"]["files"]
            .as_object()
            .unwrap()
            .keys()
            .filter(|k| k.starts_with("/data/local/tmp/droidwarden-"))
            .cloned()
            .collect()
    };
    // The emulated package manager reads an APK as the package name it holds.
    let apk = write_host(s.host.path(), "spiel ü 'x'.apk", b"com.example.hostgame\n");
    s.sim.clear_log();
    let run = s.dw.call(
        "phone",
        "app_manager",
        "install",
        json!({ "host_path": apk }),
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(
        run.json,
        json!({"apk_path": apk, "from_host": true, "installed": true})
    );
    assert!(installed("com.example.hostgame"));
    assert!(temp_files().is_empty(), "{:?}", temp_files());
    let log = s.sim.commands();
    let temp = &log[1][2];
    assert!(temp.starts_with("/data/local/tmp/droidwarden-") && temp.ends_with(".apk"));
    assert_eq!(
        log,
        vec![
            vec!["sync", "STAT", temp],
            vec!["sync", "SEND", temp],
            vec!["pm", "install", "-r", temp],
            vec!["rm", "-f", temp],
        ]
    );

    // A file the package manager refuses: a structured error, and the
    // temporary copy is removed all the same.
    let bad = write_host(s.host.path(), "broken.apk", b"not an apk!");
    let run = s.dw.call(
        "phone",
        "app_manager",
        "install",
        json!({ "host_path": bad }),
    );
    run.assert_error("invalid_params", "INSTALL_PARSE_FAILED_NOT_APK");
    assert!(run.error_message().contains("not an APK"), "{}", run.stdout);
    assert!(temp_files().is_empty(), "{:?}", temp_files());

    // Refused before the phone: too large, not an .apk, outside host_dirs,
    // both sources at once.
    let large = write_host(s.host.path(), "large.apk", &[b'a'; 1001]);
    for (params, want) in [
        (json!({ "host_path": large }), "denied"),
        (
            json!({ "host_path": write_host(s.host.path(), "x.txt", b"a.b") }),
            "invalid_params",
        ),
        (json!({"host_path": "/etc/x.apk"}), "denied"),
        (
            json!({"host_path": apk, "apk_path": "/data/local/tmp/game.apk"}),
            "invalid_params",
        ),
        (json!({}), "invalid_params"),
    ] {
        s.sim.clear_log();
        let run = s.dw.call("phone", "app_manager", "install", params.clone());
        assert_eq!(run.error_code(), want, "{params}: {}", run.stdout);
        assert!(
            s.sim.commands().is_empty(),
            "{params}: {:?}",
            s.sim.commands()
        );
    }

    // An APK already on the phone still installs from where it is.
    let run = s.dw.call(
        "phone",
        "app_manager",
        "install",
        json!({"apk_path": "/data/local/tmp/game.apk"}),
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(run.json["from_host"], false);
    assert!(installed("com.example.game"));
}

#[test]
fn companion_phones_take_content_but_not_host_files() {
    use droidwarden_e2e::mqtt::{Daemon, Mosquitto, Probe};
    use std::time::Duration;
    const WAIT: Duration = Duration::from_secs(30);

    let broker = Mosquitto::start();
    let probe = Probe::connect(broker.port);
    let adb = AdbServer::shared();
    let alice = Sim::start(SimOptions {
        companion: Some((broker.port, "alice-pixel".into())),
        no_adb: true,
        ..Default::default()
    });
    probe.wait_payload(&format!("{P}/companion/alice-pixel/online"), WAIT, "online");
    let host = tempfile::tempdir().unwrap();
    let file = write_host(host.path(), "a.txt", b"from the host");
    let config = format!(
        "[mqtt]\nurl = \"mqtt://127.0.0.1:{}\"\n[phone_services]\nhost_dirs = [\"{}\"]\n[[devices]]\nname = \"alice\"\ntransport = \"companion\"\ncompanion_id = \"alice-pixel\"\n",
        broker.port,
        host.path().display()
    );
    let _daemon = Daemon::start(&adb, &config);
    probe.wait_payload(&format!("{P}/devices/alice/availability"), WAIT, "online");
    let call = |id: &str, service: &str, action: &str, params: Value| {
        probe.call(P, id, "alice", service, action, params)
    };
    let pushed = call(
        "f1",
        "files",
        "push",
        json!({"path": "/sdcard/Download/note ü.txt", "text": TEXT}),
    );
    assert_eq!(pushed["ok"], true, "{pushed}");
    assert_eq!(pushed["result"]["size_bytes"], TEXT.len());
    assert_eq!(
        phone_file(&alice, "/sdcard/Download/note ü.txt").unwrap(),
        TEXT.as_bytes()
    );
    alice.clear_log();
    for (id, service, action, params) in [
        (
            "f2",
            "files",
            "push",
            json!({"path": "/sdcard/Download/b.txt", "host_path": file}),
        ),
        (
            "f3",
            "app_manager",
            "install",
            json!({"host_path": format!("{}/x.apk", host.path().display())}),
        ),
    ] {
        let refused = call(id, service, action, params);
        assert_eq!(refused["error"]["code"], "unsupported_action", "{refused}");
        assert!(alice.commands().is_empty(), "{:?}", alice.commands());
    }
    assert!(phone_file(&alice, "/sdcard/Download/b.txt").is_none());
}
