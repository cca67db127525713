//! What `droidwarden status` tells a new user about what is wrong, and
//! what to do: a phone whose key prompt was not accepted (`unauthorized`),
//! a phone adb sees but cannot reach (`offline`), adb not installed (and a
//! call through the daemon answering `adb_missing` with the fix), and a
//! model that does not answer. Each in the text and in `--json`, and the
//! daemon's health on the retained MQTT topic `<prefix>/health`.

use droidwarden_e2e::dbus::PrivateBus;
use droidwarden_e2e::mqtt::{Daemon, Mosquitto, Probe};
use droidwarden_e2e::{AdbServer, Droidwarden, P, Run, Sim, SimOptions, WAIT, free_port, wait_for};
use serde_json::{Value, json};

/// The device named `name` in `status --json`.
fn device<'a>(status: &'a Value, name: &str) -> &'a Value {
    status["devices"]
        .as_array()
        .and_then(|all| all.iter().find(|d| d["name"] == name))
        .unwrap_or(&Value::Null)
}

/// `status` and `status --json` through the daemon on `bus`, once the
/// JSON satisfies `ready`.
fn status_when(
    dw: &Droidwarden,
    bus: &PrivateBus,
    what: &str,
    ready: impl Fn(&Value) -> bool,
) -> (Value, String) {
    let json = wait_for(what, WAIT, || {
        let run: Run = dw.run_on_bus(&bus.address, &["status", "--json"]);
        ready(&run.json).then_some(run.json)
    });
    let text = dw.run_on_bus(&bus.address, &["status"]);
    assert_eq!(text.code, 0, "{}{}", text.stdout, text.stderr);
    (json, text.stdout)
}

/// `status`'s text once it contains one of `parts`.
fn text_with(dw: &Droidwarden, bus: &PrivateBus, parts: &[&str]) -> String {
    wait_for(&format!("status to say one of {parts:?}"), WAIT, || {
        let run = dw.run_on_bus(&bus.address, &["status"]);
        parts
            .iter()
            .any(|p| run.stdout.contains(p))
            .then_some(run.stdout)
    })
}

#[test]
fn unauthorized_and_offline_phones_show_in_status_with_what_to_do() {
    let adb = AdbServer::shared();
    // Not `adb.phone`, which waits for it to be online: it never will be.
    let locked = Sim::start(SimOptions {
        serial: Some("LOCKED1".into()),
        extra_args: vec!["--auth-prompt".into()],
        ..SimOptions::default()
    });
    let gone = adb.phone(SimOptions {
        serial: Some("GONE1".into()),
        ..SimOptions::default()
    });
    let bus = PrivateBus::session();
    let config = format!(
        "{}[adb]\npoll_interval_ms = 300\nconnect = [\"{l}\", \"{g}\"]\n\
         [[devices]]\nname = \"locked\"\ntransport = \"adb\"\nserial = \"{l}\"\n\
         [[devices]]\nname = \"gone\"\ntransport = \"adb\"\nserial = \"{g}\"\n",
        droidwarden_e2e::mqtt::ANY_BROKER_PORT,
        l = locked.serial(),
        g = gone.serial(),
    );
    let _daemon = Daemon::start_with_env(
        &adb,
        &config,
        tempfile::tempdir().unwrap(),
        &bus.daemon_env(),
    );
    bus.wait_for_daemon(WAIT);
    let dw = Droidwarden::new(&adb, &config);

    // The key prompt nobody accepted.
    let (json, _) = status_when(&dw, &bus, "`locked` unauthorized", |s| {
        device(s, "locked")["state_detail"]
            .as_str()
            .is_some_and(|d| d.starts_with("unauthorized"))
            && device(s, "gone")["online"] == true
    });
    let detail = device(&json, "locked")["state_detail"].as_str().unwrap();
    assert!(detail.contains("accept the USB debugging prompt"), "{json}");
    assert_eq!(device(&json, "locked")["online"], false, "{json}");
    text_with(
        &dw,
        &bus,
        &["unauthorized: accept the USB debugging prompt on the phone"],
    );

    // A phone adb knows that stops answering: offline, and what to try.
    let stopped = gone.control(json!({"op": "listen", "enabled": false}));
    assert_eq!(stopped["ok"], true, "{stopped}");
    // adb lists it offline while it tries to reconnect (and may drop it
    // later, "not seen by the adb server").
    const OFFLINE: &str = "offline: adb sees the phone but it does not answer; unlock it";
    const GONE: &str = "not seen by the adb server";
    let (json, _) = status_when(&dw, &bus, "`gone` offline", |s| {
        device(s, "gone")["state_detail"]
            .as_str()
            .is_some_and(|d| d.starts_with(OFFLINE))
    });
    assert_eq!(device(&json, "gone")["online"], false, "{json}");
    let text = text_with(&dw, &bus, &[OFFLINE, GONE]);
    // The adb server's own health: it answers, and Debian's cannot pair.
    assert_eq!(json["daemon"]["adb"]["answers"], true, "{json}");
    assert_eq!(json["daemon"]["adb"]["pairing"], false, "{json}");
    assert!(text.contains("too old to pair"), "{text}");
}

#[test]
fn a_missing_adb_and_an_unreachable_model_show_in_status_and_on_mqtt() {
    let broker = Mosquitto::shared();
    let probe = Probe::connect_to(&broker);
    // Lends its HOME; the daemon's server is on a port nobody serves and
    // its program does not exist.
    let lender = AdbServer::shared();
    let bin = tempfile::tempdir().unwrap();
    let program = bin.path().join("adb");
    // A model server that takes the connection and never answers: the
    // status must not wait for it longer than its part's bound.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let model = format!(
        "http://127.0.0.1:{}/v1",
        silent.local_addr().unwrap().port()
    );
    let config = format!(
        "[mqtt]\nurl = \"mqtt://127.0.0.1:{}\"\n{}[mqtt.homeassistant]\ndiscovery = false\n\
         [adb]\nprogram = \"{}\"\npoll_interval_ms = 300\n\
         [llm]\nprovider = \"openai\"\nbase_url = \"{model}\"\nmodel = \"small\"\n",
        broker.port,
        broker.mqtt_keys(),
        program.display(),
    );
    let server = format!("127.0.0.1:{}", free_port());
    let bus = PrivateBus::session();
    let mut env = bus.daemon_env().to_vec();
    env.extend([
        ("DROIDWARDEN__ADB__SERVER", server.as_str()),
        ("DROIDWARDEN__ADB__START_SERVER", "true"),
    ]);
    let daemon = Daemon::start_with_env(&lender, &config, tempfile::tempdir().unwrap(), &env);
    bus.wait_for_daemon(WAIT);
    let dw = Droidwarden::new(&lender, &config);

    // The first status probes the model: bounded, whatever the server does.
    let started = std::time::Instant::now();
    let first = dw.run_on_bus(&bus.address, &["status", "--json"]);
    assert_eq!(first.code, 0, "{}{}", first.stdout, first.stderr);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(8),
        "status took {:?} with a silent model server",
        started.elapsed()
    );
    let (json, text) = status_when(&dw, &bus, "adb missing in status", |s| {
        s["problems"][0]["error"]["code"] == "adb_missing"
    });
    let message = json["problems"][0]["error"]["message"].as_str().unwrap();
    assert!(message.contains("apt-get install adb"), "{json}");
    assert!(text.contains("apt-get install adb"), "{text}");
    assert_eq!(json["daemon"]["adb"]["answers"], false, "{json}");
    // The model: probed, unreachable, with the action to take.
    let reach = &json["daemon"]["agent"]["reach"];
    assert_eq!(reach["reach"], "unreachable", "{json}");
    assert!(
        reach["reason"]
            .as_str()
            .is_some_and(|r| r.contains("no answer within 2000 ms")),
        "{json}"
    );
    assert!(
        text.contains("the model is unreachable") && text.contains("start the model server"),
        "{text}"
    );

    // A call through the daemon says adb is missing, with the fix.
    let call = dw.run_on_bus(&bus.address, &["call", "battery", "status"]);
    call.assert_error("adb_missing", "apt-get install adb");

    // The same health, retained on MQTT.
    let topic = format!("{P}/health");
    probe.wait(&topic, WAIT, |m| m.topic == topic);
    // Retained: a subscriber that comes later gets it at once.
    let later = Probe::connect_to(&broker);
    let health = later.wait(&topic, WAIT, |m| m.topic == topic && m.retain);
    let health: Value = serde_json::from_str(&health.payload).unwrap();
    assert_eq!(health["agent"]["reach"]["reach"], "unreachable", "{health}");
    assert_eq!(health["adb"]["error"]["code"], "adb_missing", "{health}");
    assert_eq!(health["version"], json["daemon"]["version"]);
    drop(daemon);
}
