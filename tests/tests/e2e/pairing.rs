//! `droidwarden pair` and `droidwarden discover` against real adb servers:
//! Debian's adb (on PATH, 29.0.6 here), which has no pairing or mDNS host
//! services, and Google's adb 36 from the PyPI adbutils wheel (scripts/test
//! installs it), which has both. No phone pairs here: a wrong code against
//! a port where nothing listens, and one that accepts and stays silent,
//! show that every failure is clear and bounded; `discover` answers with
//! what the server sees over mDNS (nothing, in a container). D-Bus `Pair`
//! and `Discover` take the same path through the daemon and answer alike.
//! An emulated phone that announces itself over mDNS and moves to another
//! port is connected again, by its mDNS name, without a person.

use droidwarden_e2e::adb36::NewAdb;
use droidwarden_e2e::dbus::{PrivateBus, gdbus_string};
use droidwarden_e2e::mqtt::{ANY_BROKER_PORT, Daemon};
use droidwarden_e2e::{
    AdbServer, Droidwarden, KillOnDrop, Sim, SimOptions, WAIT, binary, free_port, run_with_timeout,
    wait_for,
};
use serde_json::Value;
use std::io::{Read as _, Write as _};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Longer than any of these commands may take.
const LIMIT: Duration = Duration::from_secs(20);

/// A code that is never shown anywhere.
const CODE: &str = "135790";

/// `droidwarden ARGS --json` against the adb server on `port` (HOME
/// `home`, never starting a server), with `stdin` piped in when given.
/// Whether it succeeded, and its JSON output.
fn droidwarden(home: &Path, port: u16, args: &[&str], stdin: Option<&str>) -> (bool, Value) {
    let mut cmd = Command::new(binary("droidwarden"));
    cmd.env("HOME", home)
        .env("DROIDWARDEN__ADB__SERVER", format!("127.0.0.1:{port}"))
        .env("DROIDWARDEN__ADB__START_SERVER", "false")
        .env("DROIDWARDEN__STATE__DIR", home.join("state"))
        .args(args)
        .arg("--json");
    let (ok, stdout, stderr) = match stdin {
        None => {
            let out = run_with_timeout(cmd, LIMIT);
            (out.status.success(), out.stdout, out.stderr)
        }
        Some(text) => {
            let child = cmd
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn droidwarden");
            let mut child = KillOnDrop::from(child);
            // Dropped at the end of the statement: standard input closes.
            child
                .stdin
                .take()
                .unwrap()
                .write_all(text.as_bytes())
                .unwrap();
            let code = child.exit_code("droidwarden", LIMIT);
            let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
            child
                .stdout
                .take()
                .unwrap()
                .read_to_end(&mut stdout)
                .unwrap();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_end(&mut stderr)
                .unwrap();
            (code == 0, stdout, stderr)
        }
    };
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&stdout),
        String::from_utf8_lossy(&stderr)
    );
    assert!(!all.contains(CODE), "the pairing code was shown: {all}");
    let json = serde_json::from_slice(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {all}"));
    (ok, json)
}

fn error_code(json: &Value) -> &str {
    json["error"]["code"].as_str().unwrap_or_default()
}

fn message(json: &Value) -> &str {
    json["error"]["message"].as_str().unwrap_or_default()
}

/// The version line of `adb version` for `program`.
fn adb_version(program: &Path) -> String {
    let out = run_with_timeout(
        {
            let mut c = Command::new(program);
            c.arg("version");
            c
        },
        LIMIT,
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("Version "))
        .expect("adb version prints its version")
        .trim()
        .to_owned()
}

#[test]
fn an_old_adb_server_gets_a_clear_adb_too_old_error_for_pair_and_discover() {
    let adb = AdbServer::start();
    let version = adb_version(Path::new("adb"));
    for args in [&["pair", "127.0.0.1:37123", CODE][..], &["discover"][..]] {
        let started = Instant::now();
        let (ok, json) = droidwarden(adb.home(), adb.port, args, None);
        assert!(!ok, "{args:?}: {json}");
        assert_eq!(error_code(&json), "unsupported_action", "{json}");
        assert_eq!(json["error"]["retryable"], false, "{json}");
        let text = message(&json);
        for needed in [
            format!("is adb {version}").as_str(),
            "platform-tools 30 or newer",
            "adbutils",
            "[adb] program",
        ] {
            assert!(
                text.contains(needed),
                "{args:?}: missing {needed:?} in {text}"
            );
        }
        assert!(!text.contains("unknown host service'"), "{text}");
        assert!(started.elapsed() < Duration::from_secs(5), "{args:?}");
    }
}

#[test]
fn bad_addresses_and_codes_are_refused_before_anything_is_sent() {
    // A server that must never be connected to.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let home = tempfile::tempdir().unwrap();
    for (args, wanted) in [
        (&["pair", "192.168.1.40", CODE][..], "HOST:PORT"),
        (&["pair", "192.168.1.40:0", CODE][..], "port"),
        (&["pair", "a b:5555", CODE][..], "host"),
        (&["pair", "192.168.1.40:37123", "12345"][..], "6 digits"),
        (&["pair", "192.168.1.40:37123", "12345a"][..], "6 digits"),
        (&["pair", CODE, "192.168.1.40:37123"][..], "address first"),
    ] {
        let (ok, json) = droidwarden(home.path(), port, args, None);
        assert!(!ok, "{args:?}");
        assert_eq!(error_code(&json), "invalid_params", "{args:?}: {json}");
        assert!(message(&json).contains(wanted), "{args:?}: {json}");
    }
    // An empty line on standard input is no code either.
    let (_, json) = droidwarden(
        home.path(),
        port,
        &["pair", "192.168.1.40:37123"],
        Some("\n"),
    );
    assert_eq!(error_code(&json), "invalid_params", "{json}");
    assert!(
        listener.accept().is_err(),
        "something was sent to the adb server"
    );
}

#[test]
fn adb_36_pairing_fails_clearly_and_within_its_bound_and_discover_answers() {
    let adb = NewAdb::start();
    assert!(adb_version(&adb.program).starts_with("36."));
    let home = adb.home.path();

    // Nothing listens on the pairing port: the server's own answer, at once.
    let closed = free_port();
    let target = format!("127.0.0.1:{closed}");
    let started = Instant::now();
    let (ok, json) = droidwarden(home, adb.port, &["pair", &target, CODE], None);
    assert!(!ok);
    assert_eq!(error_code(&json), "device_error", "{json}");
    assert!(
        message(&json).contains("Unable to start pairing client")
            && message(&json).contains("Pair device with pairing code"),
        "{json}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));

    // The same with the code on standard input.
    let (_, json) = droidwarden(
        home,
        adb.port,
        &["pair", &target],
        Some(&format!("{CODE}\n")),
    );
    assert_eq!(error_code(&json), "device_error", "{json}");

    // A port that accepts and never answers holds the server's pairing
    // without a limit of its own: ours ends it.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let target = format!("127.0.0.1:{}", silent.local_addr().unwrap().port());
    let started = Instant::now();
    let (_, json) = droidwarden(
        home,
        adb.port,
        &["pair", &target, CODE, "--timeout-ms", "800"],
        None,
    );
    assert_eq!(error_code(&json), "timeout", "{json}");
    assert_eq!(json["error"]["retryable"], true, "{json}");
    assert!(started.elapsed() < Duration::from_secs(5));

    // Discovery answers: what the server sees over mDNS (nothing here).
    let started = Instant::now();
    let (ok, json) = droidwarden(home, adb.port, &["discover"], None);
    assert!(ok, "{json}");
    assert!(json["services"].is_array(), "{json}");
    assert!(json["mdns"]["check"].is_string(), "{json}");
    assert_eq!(json["adb_server"], format!("127.0.0.1:{}", adb.port));
    assert!(started.elapsed() < Duration::from_secs(5));
}

/// D-Bus `Pair` and `Discover` answer as the CLI does, through the
/// daemon's own adb server: against adb 36, the server's own answer passed
/// through (nothing listens on the pairing port) and what it sees over
/// mDNS; against Debian's adb 29, the "too old" error naming it. A bad
/// code is refused before anything is sent, and the code is never logged.
#[test]
fn pair_and_discover_over_dbus_answer_as_the_cli_does() {
    let debian = AdbServer::start();
    let new = NewAdb::start();
    let bus = PrivateBus::session();
    let closed = format!("127.0.0.1:{}", free_port());
    for (port, old) in [(new.port, false), (debian.port, true)] {
        let server = format!("127.0.0.1:{port}");
        let mut env = bus.daemon_env().to_vec();
        env.push(("DROIDWARDEN__ADB__SERVER", server.as_str()));
        let daemon =
            Daemon::start_with_env(&debian, ANY_BROKER_PORT, tempfile::tempdir().unwrap(), &env);
        bus.wait_for_daemon(WAIT);
        let started = Instant::now();
        let paired = bus.gdbus_call("Pair", &[closed.as_str(), CODE, "0"]);
        let err = paired.expect_err("nothing pairs here");
        if old {
            assert!(
                err.contains("org.droidwarden.Error.UnsupportedAction")
                    && err.contains("platform-tools 30 or newer")
                    && err.contains("adbutils"),
                "{err}"
            );
        } else {
            assert!(
                err.contains("org.droidwarden.Error.DeviceError")
                    && err.contains("Unable to start pairing client"),
                "{err}"
            );
        }
        assert!(started.elapsed() < Duration::from_secs(10), "{err}");
        let err = bus
            .gdbus_call("Pair", &[closed.as_str(), "12345", "0"])
            .expect_err("a bad code");
        assert!(
            err.contains("org.droidwarden.Error.InvalidParams") && err.contains("6 digits"),
            "{err}"
        );
        let err = bus
            .gdbus_call("Pair", &[closed.as_str(), CODE, "99"])
            .expect_err("a timeout out of bounds");
        assert!(err.contains("InvalidParams"), "{err}");
        let discovered = bus.gdbus_call("Discover", &[]);
        if old {
            let err = discovered.expect_err("adb 29 has no mDNS");
            assert!(err.contains("UnsupportedAction"), "{err}");
        } else {
            let reply = discovered.expect("Discover");
            let json: Value = serde_json::from_str(&gdbus_string(&reply)).unwrap();
            assert_eq!(json["adb_server"], server.as_str(), "{json}");
            assert!(json["mdns"]["check"].is_string(), "{json}");
            assert!(json["services"].is_array(), "{json}");
        }
        assert!(!daemon.log().contains(CODE), "{}", daemon.log());
        drop(daemon);
        wait_for("the daemon to leave the bus", WAIT, || {
            (!bus.has_owner("org.droidwarden.Daemon1")).then_some(())
        });
    }
}

/// A paired phone keeps working when its port changes: the emulated phone
/// announces `_adb-tls-connect._tcp` over mDNS under a name like a real
/// phone's, the daemon keeps that name connected (`[adb] connect`), and
/// when the phone moves to another port — wireless debugging turned off
/// and on — it is connected again where it is announced now, and calls go
/// on under the same device name, with no one touching the daemon or the
/// adb server. Google's adb 36 is the server and no other mDNS client runs:
/// adb 36 listens on the host's non-loopback interfaces only, and hears the
/// loopback phone because the emulated phone announces and answers there
/// too (`sim/src/mdns.rs`).
#[test]
fn a_phone_whose_port_changes_is_connected_again_by_its_mdns_name() {
    let adb = NewAdb::start();
    let lender = AdbServer::start();
    // A name no earlier run announced (adb keeps what it saw for a while).
    let instance = format!("adb-SIMMOVE-{:06}", free_port());
    let sim = Sim::start(SimOptions {
        serial: Some("SIMMOVE".into()),
        extra_args: vec!["--mdns-instance".into(), instance.clone()],
        ..SimOptions::default()
    });
    let name = format!("{instance}._adb-tls-connect._tcp");
    let seen_at = |port: u16| adb.sees_connect_service(&instance, port).then_some(());
    wait_for(
        "adb 36 to see the phone over mDNS (it listens on non-loopback interfaces only: \
         this host needs one that is up)",
        WAIT,
        || seen_at(sim.adb_port),
    );
    let bus = PrivateBus::session();
    let server = format!("127.0.0.1:{}", adb.port);
    let mut env = bus.daemon_env().to_vec();
    env.push(("DROIDWARDEN__ADB__SERVER", server.as_str()));
    let config = format!(
        "{ANY_BROKER_PORT}[adb]\npoll_interval_ms = 300\nconnect = [\"{name}\"]\n\
         [[devices]]\nname = \"phone\"\ntransport = \"adb\"\nserial = \"{name}\"\n"
    );
    let _daemon = Daemon::start_with_env(&lender, &config, tempfile::tempdir().unwrap(), &env);
    bus.wait_for_daemon(WAIT);
    let battery = || {
        bus.gdbus_call("Call", &["phone", "battery", "status", "{}"])
            .ok()
            .map(|reply| gdbus_string(&reply))
    };
    let first = wait_for("a call on the phone, connected by name", WAIT, battery);
    assert!(first.contains("level"), "{first}");
    let devices = adb.run(&["devices"]);
    assert!(
        devices.contains(&format!("{name}\tdevice")),
        "the adb server lists the phone by its mDNS name: {devices}"
    );
    // Discover shows it, connected, as the device the daemon calls it.
    let discovered: Value =
        serde_json::from_str(&gdbus_string(&bus.gdbus_call("Discover", &[]).unwrap())).unwrap();
    let entry = discovered["services"]
        .as_array()
        .and_then(|all| all.iter().find(|s| s["instance"] == instance.as_str()))
        .cloned()
        .unwrap_or_default();
    assert_eq!(entry["device"], "phone", "{discovered}");
    assert_eq!(entry["connected"], true, "{discovered}");

    // The phone moves; no one touches the daemon or the adb server.
    let old = sim.adb_port;
    let moved = sim.control(serde_json::json!({"op": "move", "port": 0}));
    assert_eq!(moved["ok"], true, "{moved}");
    let new: u16 = moved["adb"]
        .as_str()
        .and_then(|a| a.rsplit(':').next())
        .and_then(|p| p.parse().ok())
        .expect("the new address");
    assert_ne!(new, old);
    let started = Instant::now();
    wait_for("adb 36 to see the phone's new port", WAIT, || seen_at(new));
    let seen = started.elapsed();
    let again = wait_for("a call on the phone at its new port", WAIT, battery);
    assert!(again.contains("level"), "{again}");
    eprintln!(
        "adb 36 saw the new port {} ms after the move; a call succeeded after {} ms",
        seen.as_millis(),
        started.elapsed().as_millis()
    );
    // Connected where it is now, still under its name, and online in the
    // daemon's status.
    let devices = adb.run(&["devices"]);
    assert!(devices.contains(&format!("{name}\tdevice")), "{devices}");
    let dw = Droidwarden::new(&lender, &config);
    let status = wait_for("`phone` online in status", WAIT, || {
        let run = dw.run_on_bus(&bus.address, &["status", "--json"]);
        let online = run.json["devices"].as_array().is_some_and(|all| {
            all.iter()
                .any(|d| d["name"] == "phone" && d["online"] == true)
        });
        online.then_some(run.json)
    });
    let text = dw.run_on_bus(&bus.address, &["status"]).stdout;
    assert!(text.contains("phone"), "{text}\n{status}");
}
