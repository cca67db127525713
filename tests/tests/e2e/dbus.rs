//! The D-Bus API end to end: a private dbus-daemon, the real adb server,
//! emulated phones, `droidwarden daemon` as a process, and the standard
//! tools (busctl, gdbus call, gdbus monitor) and the CLI as clients.

use droidwarden_e2e::WAIT;
use droidwarden_e2e::dbus::{Monitor, NO_BUS, PrivateBus, gdbus_string, signal_args};
use droidwarden_e2e::mqtt::{Daemon, Mosquitto, Probe};
use droidwarden_e2e::{AdbServer, Droidwarden, Sim, SimOptions, wait_for};
use serde_json::{Value, json};

/// A phone named `phone`, the daemon on a private session bus, and a
/// runner for the CLI against it.
struct Rig {
    daemon: Daemon,
    bus: PrivateBus,
    sim: Sim,
    adb: AdbServer,
    dw: Droidwarden,
}

/// `mqtt` is the `[mqtt]`/`[broker]` part of the configuration.
fn rig(mqtt: &str) -> Rig {
    rig_on(AdbServer::shared(), mqtt)
}

/// [`rig`] on `adb`: one of the test's own for a phone it does not name.
fn rig_on(adb: AdbServer, mqtt: &str) -> Rig {
    let bus = PrivateBus::session();
    let sim = adb.phone(SimOptions {
        model: Some("Pixel 8".into()),
        ..SimOptions::default()
    });
    let config = format!(
        "{mqtt}\n[adb]\npoll_interval_ms = 300\nconnect = [\"{serial}\"]\n[[devices]]\nname = \"phone\"\ntransport = \"adb\"\nserial = \"{serial}\"\n",
        serial = sim.serial()
    );
    let daemon = start_daemon(&adb, &config, &bus);
    bus.wait_for_daemon(WAIT);
    wait_for("the phone to be online", WAIT, || {
        let devices = list_devices(&bus);
        (devices[0]["online"] == true).then_some(())
    });
    let dw = Droidwarden::new(&adb, &config);
    Rig {
        daemon,
        bus,
        sim,
        adb,
        dw,
    }
}

fn start_daemon(adb: &AdbServer, config: &str, bus: &PrivateBus) -> Daemon {
    Daemon::start_with_env(
        adb,
        config,
        tempfile::tempdir().expect("state dir"),
        &bus.daemon_env(),
    )
}

fn embedded_broker() -> String {
    droidwarden_e2e::mqtt::ANY_BROKER_PORT.to_owned()
}

fn list_devices(bus: &PrivateBus) -> Value {
    let reply = bus.gdbus_call("ListDevices", &[]).expect("ListDevices");
    serde_json::from_str(&gdbus_string(&reply)).expect("ListDevices JSON")
}

/// `Call` through gdbus: the JSON result, or the error text gdbus prints
/// (`GDBus.Error:org.droidwarden.Error.X: message`).
fn call(
    bus: &PrivateBus,
    device: &str,
    service: &str,
    action: &str,
    params: &str,
) -> Result<Value, String> {
    bus.gdbus_call("Call", &[device, service, action, params])
        .map(|reply| serde_json::from_str(&gdbus_string(&reply)).expect("Call JSON"))
}

fn status(bus: &PrivateBus) -> Value {
    let reply = bus.gdbus_call("Status", &[]).expect("Status");
    serde_json::from_str(&gdbus_string(&reply)).expect("Status JSON")
}

/// The ServiceStatusChanged signals for (device, service) seen so far, as
/// (state, details).
fn status_signals(monitor: &Monitor, device: &str, service: &str) -> Vec<(String, Value)> {
    monitor
        .signals("ServiceStatusChanged")
        .iter()
        .map(|line| signal_args(line))
        .filter(|args| args[0] == device && args[1] == service)
        .map(|args| {
            (
                args[2].clone(),
                serde_json::from_str(&args[3]).expect("details JSON"),
            )
        })
        .collect()
}

#[test]
fn introspection_methods_properties_signals_and_errors() {
    let broker = Mosquitto::shared();
    let probe = Probe::connect_to(&broker);
    // Its second phone is not named: an adb server of its own.
    let r = rig_on(
        AdbServer::start(),
        &format!(
            "[mqtt]\nurl = \"mqtt://127.0.0.1:{}\"\n{}[mqtt.homeassistant]\ndiscovery = false",
            broker.port,
            broker.mqtt_keys()
        ),
    );
    let bus = &r.bus;

    // Introspection, as busctl and gdbus show it.
    let out = bus.busctl(&[
        "introspect",
        "org.droidwarden.Daemon1",
        "/org/droidwarden/Daemon1",
    ]);
    let table = String::from_utf8_lossy(&out.stdout);
    for row in [
        (".Call", "method", "ssss", "s"),
        (".CallChecked", "method", "ssss", "s"),
        (".CallTimeout", "method", "s", "t"),
        (".ListDevices", "method", "-", "s"),
        (".ListServices", "method", "-", "s"),
        (".Status", "method", "-", "s"),
        (".Ask", "method", "ss", "s"),
        (".ListApprovals", "method", "-", "s"),
        (".ApprovalHistory", "method", "u", "s"),
        (".Approve", "method", "s", "-"),
        (".Deny", "method", "ss", "-"),
        (".ListSessions", "method", "-", "s"),
        (".ShowSession", "method", "s", "s"),
        (".ApprovalRequested", "signal", "ss", "-"),
        (".SessionEvent", "signal", "ss", "-"),
        (".DeviceCount", "property", "u", "1"),
        (".Version", "property", "s", "\"0.1.0\""),
        (".ServiceStatusChanged", "signal", "ssss", "-"),
        (".DeviceAvailabilityChanged", "signal", "sb", "-"),
    ] {
        assert!(
            table.lines().any(|l| {
                let words: Vec<&str> = l.split_whitespace().collect();
                words.len() >= 4 && (words[0], words[1], words[2], words[3]) == row
            }),
            "{row:?} not in\n{table}"
        );
    }
    let out = std::process::Command::new("gdbus")
        .args([
            "introspect",
            "--xml",
            "--address",
            &bus.address,
            "--dest",
            "org.droidwarden.Daemon1",
            "--object-path",
            "/org/droidwarden/Daemon1",
        ])
        .output()
        .expect("gdbus introspect");
    let xml = String::from_utf8_lossy(&out.stdout);
    for fragment in [
        r#"<interface name="org.droidwarden.Daemon1">"#,
        r#"<arg name="params_json" type="s" direction="in"/>"#,
        r#"<arg name="result_json" type="s" direction="out"/>"#,
        r#"<arg name="details_json" type="s"/>"#,
        r#"<property name="DeviceCount" type="u" access="read"/>"#,
    ] {
        assert!(xml.contains(fragment), "{fragment} not in\n{xml}");
    }
    assert_eq!(
        bus.property("Version"),
        format!("s \"{}\"", env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(bus.property("DeviceCount"), "u 1");

    // ListDevices and ListServices are what the CLI prints as JSON.
    let devices = list_devices(bus);
    assert_eq!(devices.as_array().map(Vec::len), Some(1), "{devices}");
    assert_eq!(devices[0]["name"], "phone");
    assert_eq!(devices[0]["model"], "Pixel 8");
    assert_eq!(devices[0]["transport"], "adb");
    let run = r.dw.run_on_bus(&bus.address, &["devices", "--json"]);
    assert_eq!(run.json["devices"], devices, "{}{}", run.stdout, run.stderr);
    let reply = bus.gdbus_call("ListServices", &[]).expect("ListServices");
    let services: Value = serde_json::from_str(&gdbus_string(&reply)).unwrap();
    assert_eq!(services, r.dw.run(&["services", "--json"]).json["services"]);

    // A call through busctl: executing then success on D-Bus, and on MQTT.
    let monitor = bus.monitor();
    let out = bus.busctl(&[
        "call",
        "org.droidwarden.Daemon1",
        "/org/droidwarden/Daemon1",
        "org.droidwarden.Daemon1",
        "Call",
        "ssss",
        "phone",
        "wifi_automation",
        "disable",
        "{}",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        r#"s "{\"enabled\":false}""#
    );
    assert_eq!(r.sim.state()["wifi"]["enabled"], false);
    monitor.wait("ServiceStatusChanged success", |l| {
        l.contains("ServiceStatusChanged ('phone', 'wifi_automation', 'success'")
    });
    let signals = status_signals(&monitor, "phone", "wifi_automation");
    let states: Vec<&str> = signals.iter().map(|(s, _)| s.as_str()).collect();
    assert_eq!(states, ["executing", "success"], "{signals:?}");
    assert_eq!(signals[0].1["action"], "disable");
    assert_eq!(signals[0].1["state"], "executing");
    assert!(signals[1].1["duration_ms"].is_u64(), "{:?}", signals[1]);
    probe.wait_last(
        "droidwarden/devices/phone/services/wifi_automation/status",
        WAIT,
        |m| m.json()["state"] == "success" && m.json()["action"] == "disable",
    );

    // gdbus: no device named means the only online one; no params is {}.
    let battery = call(bus, "", "battery", "status", "").expect("battery status");
    assert_eq!(
        battery["level_percent"],
        r.sim.state()["battery"]["level"],
        "{battery}"
    );
    let volume = call(
        bus,
        "phone",
        "audio_automation",
        "set_volume",
        r#"{"stream":"music","level":40}"#,
    )
    .expect("set_volume");
    assert_eq!(volume["level"], 40, "{volume}");

    // Status: availability and the last status of each service.
    let st = status(bus);
    let phone = &st["devices"][0];
    assert_eq!(phone["name"], "phone");
    assert_eq!(phone["online"], true);
    for service in ["wifi_automation", "battery", "audio_automation"] {
        assert_eq!(
            phone["services"][service]["state"], "success",
            "{service}: {st}"
        );
    }
    assert_eq!(phone["services"]["wifi_automation"]["action"], "disable");

    // Failures carry stable error names and the message.
    for (args, name, words) in [
        (
            ["nope", "battery", "status", "{}"],
            "DeviceNotFound",
            "nope",
        ),
        (["phone", "battery", "status", "{"], "InvalidParams", "JSON"),
        (
            [
                "phone",
                "screen_control",
                "set_brightness",
                r#"{"level":"loud"}"#,
            ],
            "InvalidParams",
            "level",
        ),
        (
            ["phone", "battery", "status", "[1]"],
            "InvalidParams",
            "object",
        ),
        (
            ["phone", "toaster", "status", "{}"],
            "UnknownService",
            "toaster",
        ),
        (
            ["phone", "battery", "explode", "{}"],
            "UnknownAction",
            "explode",
        ),
        (
            [
                "phone",
                "app_launcher",
                "launch",
                r#"{"package":"com.not.there"}"#,
            ],
            "NotFound",
            "com.not.there",
        ),
    ] {
        let err = call(bus, args[0], args[1], args[2], args[3]).expect_err("an error");
        assert!(
            err.contains(&format!("GDBus.Error:org.droidwarden.Error.{name}: ")),
            "{args:?}: {err}"
        );
        assert!(err.contains(words), "{args:?}: {err}");
    }
    // A call that fails on the phone goes executing, then error.
    monitor.wait("ServiceStatusChanged error", |l| {
        l.contains("ServiceStatusChanged ('phone', 'app_launcher', 'error'")
    });
    let signals = status_signals(&monitor, "phone", "app_launcher");
    assert_eq!(signals.len(), 2, "{signals:?}");
    assert_eq!(signals[0].0, "executing");
    assert_eq!(signals[1].1["error"]["code"], "not_found", "{signals:?}");
    assert_eq!(
        status(bus)["devices"][0]["services"]["app_launcher"]["state"],
        "error"
    );

    // A second phone: availability signals and DeviceCount.
    let sim2 = r.adb.phone(SimOptions::default());
    let serial2 = sim2.serial();
    monitor.wait("the second phone online", |l| {
        l.contains(&format!("DeviceAvailabilityChanged ('{serial2}', true)"))
    });
    monitor.wait("PropertiesChanged DeviceCount 2", |l| {
        l.contains("PropertiesChanged ('org.droidwarden.Daemon1', {'DeviceCount': <uint32 2>}")
    });
    assert_eq!(bus.property("DeviceCount"), "u 2");
    let err = call(bus, "", "battery", "status", "").expect_err("two phones online");
    assert!(
        err.contains("org.droidwarden.Error.DeviceAmbiguous"),
        "{err}"
    );
    drop(sim2);
    monitor.wait("the second phone offline", |l| {
        l.contains(&format!("DeviceAvailabilityChanged ('{serial2}', false)"))
    });
    assert_eq!(status(bus)["devices"].as_array().map(Vec::len), Some(2));
}

#[test]
fn the_cli_asks_the_daemon_and_says_when_it_is_not_running() {
    let mut r = rig(&embedded_broker());
    let addr = r.bus.address.clone();

    // `call` without --local goes through the daemon and changes the phone.
    let run =
        r.dw.run_on_bus(&addr, &["call", "wifi_automation", "disable"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(run.json, json!({"enabled": false}));
    assert_eq!(r.sim.state()["wifi"]["enabled"], false);
    let run = r.dw.run_on_bus(
        &addr,
        &[
            "call",
            "--device",
            "phone",
            "audio_automation",
            "set_volume",
            "stream=music",
            "level=40",
        ],
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(run.json["level"], 40);

    // Errors come back with their wire codes and exit 1.
    for (args, code) in [
        (
            &["call", "--device", "nope", "battery", "status"][..],
            "device_not_found",
        ),
        (
            &["call", "app_launcher", "launch", "package=com.not.there"][..],
            "not_found",
        ),
        (
            &["call", "screen_control", "set_brightness", "level=loud"][..],
            "invalid_params",
        ),
    ] {
        let run = r.dw.run_on_bus(&addr, args);
        assert_eq!(run.code, 1, "{args:?}: {}{}", run.stdout, run.stderr);
        assert_eq!(run.json["error"]["code"], code, "{args:?}: {}", run.stdout);
        assert!(run.json["error"]["message"].is_string());
    }

    // `devices` and `status` show what the daemon knows.
    let run = r.dw.run_on_bus(&addr, &["devices"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout.starts_with("NAME")
            && run
                .stdout
                .lines()
                .nth(1)
                .is_some_and(|l| l.starts_with("phone"))
            && run.stdout.contains("online"),
        "{}",
        run.stdout
    );
    let run = r.dw.run_on_bus(&addr, &["status"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let line = run
        .stdout
        .lines()
        .find(|l| l.trim_start().starts_with("wifi_automation"))
        .unwrap_or_else(|| panic!("no wifi_automation line in\n{}", run.stdout));
    assert!(
        line.contains("success") && line.contains("disable"),
        "{line}"
    );
    let run = r.dw.run_on_bus(&addr, &["status", "--json"]);
    assert_eq!(
        run.json["devices"][0]["services"]["app_launcher"]["error"]["code"], "not_found",
        "{}",
        run.stdout
    );

    // A second daemon on the same bus refuses to start: the name is taken.
    let mut second = start_daemon(
        &r.adb,
        &format!("{}\n[adb]\npoll_interval_ms = 300", embedded_broker()),
        &r.bus,
    );
    wait_for("the second daemon to give up", WAIT, || {
        second.log().contains("already owned").then_some(())
    });
    assert_eq!(second.terminate(), Some(1), "{}", second.log());
    // With `auto` too: only a missing bus is excused, never a taken name.
    let mut auto = Daemon::start_with_env(
        &r.adb,
        &format!("{}\n[adb]\npoll_interval_ms = 300", embedded_broker()),
        tempfile::tempdir().expect("state dir"),
        &[
            ("DBUS_SESSION_BUS_ADDRESS", &r.bus.address),
            ("DROIDWARDEN__DBUS__BUS", "auto"),
        ],
    );
    assert_eq!(auto.wait_exit(WAIT), Some(1), "{}", auto.log());
    assert!(auto.log().contains("already owned"), "{}", auto.log());

    // With the daemon stopped, the CLI says so and fails; --local works.
    assert_eq!(r.daemon.terminate(), Some(0), "{}", r.daemon.log());
    wait_for("the name to be released", WAIT, || {
        (!r.bus.has_owner("org.droidwarden.Daemon1")).then_some(())
    });
    let not_running = "droidwarden daemon is not running on the session bus (org.droidwarden.Daemon1 has no owner)";
    let run =
        r.dw.run_on_bus(&addr, &["call", "wifi_automation", "enable"]);
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    let message = run.error_message();
    assert!(
        message.contains(not_running) && message.contains("--local"),
        "{}",
        run.stdout
    );
    assert_eq!(r.sim.state()["wifi"]["enabled"], false);
    for args in [&["devices"][..], &["status"][..]] {
        let run = r.dw.run_on_bus(&addr, args);
        assert_eq!(run.code, 1, "{args:?}: {}{}", run.stdout, run.stderr);
        assert!(run.stderr.contains(not_running), "{args:?}: {}", run.stderr);
    }
    let run =
        r.dw.run_on_bus(&addr, &["call", "--local", "wifi_automation", "enable"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(r.sim.state()["wifi"]["enabled"], true);
}

#[test]
fn a_missing_bus_stops_the_daemon_only_when_chosen_explicitly() {
    let adb = AdbServer::shared();
    // A daemon (on a broker of its own) with `[dbus] bus = mode` and a
    // session bus address where no bus is.
    let start = |mode: &str| {
        let config = format!("{}\n[adb]\npoll_interval_ms = 300", embedded_broker());
        Daemon::start_with_env(
            &adb,
            &config,
            tempfile::tempdir().unwrap(),
            &[
                ("DBUS_SESSION_BUS_ADDRESS", NO_BUS),
                ("DROIDWARDEN__DBUS__BUS", mode),
            ],
        )
    };
    let mut explicit = start("session");
    wait_for("the daemon to give up", WAIT, || {
        explicit
            .log()
            .contains("cannot start the D-Bus API")
            .then_some(())
    });
    assert_eq!(explicit.terminate(), Some(1), "{}", explicit.log());

    let mut auto = start("auto");
    // Without a bus, `auto` serves the API on the private socket alone
    // (tests/tests/e2e/dbus_socket.rs).
    wait_for("the daemon to run without a bus", WAIT, || {
        let log = auto.log();
        (log.contains("D-Bus API ready (socket only)")
            && log.contains("connected to the MQTT broker"))
        .then_some(())
    });
    assert!(!auto.log().contains("no D-Bus API"), "{}", auto.log());
    assert_eq!(auto.terminate(), Some(0), "{}", auto.log());
}

/// A private bus configured like Debian's system bus (deny by default),
/// with `policy` (the shipped file, perhaps edited) included and `extra`
/// rules after it.
fn system_bus(policy: String, extra: &str) -> PrivateBus {
    let extra = extra.to_owned();
    PrivateBus::start(move |dir| {
        std::fs::write(dir.join("policy.conf"), policy).unwrap();
        format!(
            r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:dir={dir}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <deny own="*"/>
    <deny send_type="method_call"/>
    <allow send_type="signal"/>
    <allow send_requested_reply="true" send_type="method_return"/>
    <allow send_requested_reply="true" send_type="error"/>
    <allow receive_type="method_call"/>
    <allow receive_type="method_return"/>
    <allow receive_type="error"/>
    <allow receive_type="signal"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Introspectable"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Properties"/>
  </policy>
  <include>{dir}/policy.conf</include>
  {extra}
</busconfig>
"#,
            dir = dir.display()
        )
    })
}

/// The system-bus policy file, on a private bus configured like Debian's
/// system bus (deny by default), checked as root and as two other users.
#[test]
fn the_system_bus_policy_limits_owning_and_calling() {
    if !droidwarden_e2e::is_root() {
        eprintln!("skipped: switching users needs root");
        return;
    }
    let policy_file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../systemd/dbus/org.droidwarden.Daemon1.conf"
    );
    let policy = std::fs::read_to_string(policy_file).expect("the policy file");
    let adb = AdbServer::shared();
    let config = format!("{}\n[adb]\npoll_interval_ms = 300", embedded_broker());
    let on_system_bus = |bus: &PrivateBus| {
        Daemon::start_with_env(
            &adb,
            &config,
            tempfile::tempdir().unwrap(),
            &[
                ("DBUS_SYSTEM_BUS_ADDRESS", &bus.address),
                ("DROIDWARDEN__DBUS__BUS", "system"),
            ],
        )
    };

    // The policy as shipped: only user droidwarden may own the name, so
    // root may not.
    let bus = system_bus(policy.clone(), "");
    let mut daemon = on_system_bus(&bus);
    wait_for("the daemon to be refused the name", WAIT, || {
        daemon
            .log()
            .contains("cannot start the D-Bus API")
            .then_some(())
    });
    assert!(daemon.log().contains("AccessDenied"), "{}", daemon.log());
    assert_eq!(daemon.terminate(), Some(1));

    // This machine has no droidwarden user or group: root stands in for
    // the user, and the group is renamed to nogroup (user nobody's).
    let renamed = policy.replace(r#"group="droidwarden""#, r#"group="nogroup""#);
    assert_ne!(renamed, policy);
    let bus = system_bus(
        renamed,
        r#"<policy user="root"><allow own="org.droidwarden.Daemon1"/></policy>"#,
    );
    let _daemon = on_system_bus(&bus);
    bus.wait_for_daemon(WAIT);

    const DAEMON_USER: u32 = 1; // "daemon": in no droidwarden group
    const NOBODY: u32 = 65534; // in nogroup, standing in for droidwarden
    let outsider = |method: &str, args: &[&str]| bus.gdbus_call_as(Some(DAEMON_USER), method, args);
    for (method, args) in [
        ("org.freedesktop.DBus.Introspectable.Introspect", &[][..]),
        (
            "org.freedesktop.DBus.Properties.Get",
            &["org.droidwarden.Daemon1", "DeviceCount"][..],
        ),
        (
            "org.freedesktop.DBus.Properties.GetAll",
            &["org.droidwarden.Daemon1"][..],
        ),
        ("org.droidwarden.Daemon1.ListDevices", &[][..]),
        ("org.droidwarden.Daemon1.ListServices", &[][..]),
        ("org.droidwarden.Daemon1.Status", &[][..]),
    ] {
        assert!(
            outsider(method, args).is_ok(),
            "{method}: {:?}",
            outsider(method, args)
        );
    }
    let call = [
        "org.droidwarden.Daemon1.Call",
        "",
        "battery",
        "status",
        "{}",
    ];
    let err = outsider(call[0], &call[1..]).expect_err("Call is not for everyone");
    assert!(
        err.contains("org.freedesktop.DBus.Error.AccessDenied"),
        "{err}"
    );
    // The agent's methods: anyone may list approvals (this daemon has no
    // model, so only automations could wait: none does); acting and
    // reading conversations is for the group.
    let listed =
        outsider("org.droidwarden.Daemon1.ListApprovals", &[]).expect("anyone may list approvals");
    assert_eq!(listed.trim(), "('[]',)", "{listed}");
    for (method, args) in [
        ("org.droidwarden.Daemon1.Ask", &["", "hello"][..]),
        ("org.droidwarden.Daemon1.Approve", &["r-1-a1"][..]),
        ("org.droidwarden.Daemon1.Deny", &["r-1-a1", "no"][..]),
        ("org.droidwarden.Daemon1.ListSessions", &[][..]),
        ("org.droidwarden.Daemon1.ShowSession", &["s-1"][..]),
        ("org.droidwarden.Daemon1.ApprovalHistory", &["5"][..]),
        (
            "org.droidwarden.Daemon1.AnswerApproval",
            &["r-1-a1", r#"{"decision": "approve", "scope": "run"}"#][..],
        ),
        ("org.droidwarden.Daemon1.RevokeGrant", &["g1"][..]),
    ] {
        let err = outsider(method, args).expect_err("not for everyone");
        assert!(
            err.contains("org.freedesktop.DBus.Error.AccessDenied"),
            "{method}: {err}"
        );
        let err = bus
            .gdbus_call_as(Some(NOBODY), method, args)
            .expect_err("agent off");
        assert!(
            err.contains("org.droidwarden.Error.InvalidRequest"),
            "{method}: {err}"
        );
    }
    // Root and the group get through to the daemon (which has no phone).
    for user in [None, Some(NOBODY)] {
        let err = bus
            .gdbus_call_as(user, call[0], &call[1..])
            .expect_err("no phone");
        assert!(
            err.contains("org.droidwarden.Error.DeviceNotFound"),
            "{user:?}: {err}"
        );
    }
}

/// The system-bus policy lets only root and the group receive the signals
/// that carry private content (a conversation, tool results, an approval's
/// parameters); everyone still receives device and status signals.
#[test]
fn the_system_bus_policy_keeps_private_signals_from_other_users() {
    if !droidwarden_e2e::is_root() {
        eprintln!("skipped: switching users needs root");
        return;
    }
    let policy = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../systemd/dbus/org.droidwarden.Daemon1.conf"
    ))
    .expect("the policy file")
    // No droidwarden user or group here: root owns the name, nogroup
    // (user nobody's) stands in for the group.
    .replace(r#"group="droidwarden""#, r#"group="nogroup""#);
    let bus = system_bus(
        policy,
        r#"<policy user="root"><allow own="org.droidwarden.Daemon1"/></policy>"#,
    );
    let (_rt, llm) = droidwarden_e2e::scripted_model();
    let adb = AdbServer::shared();
    let phone = adb.phone(SimOptions::default());
    let config = format!(
        "{}\n[adb]\npoll_interval_ms = 300\nconnect = [\"{serial}\"]\n[[devices]]\nname = \"phone\"\ntransport = \"adb\"\nserial = \"{serial}\"\n{}",
        embedded_broker(),
        droidwarden_e2e::scripted_llm_config(&llm, droidwarden_agent::ProviderKind::Openai),
        serial = phone.serial(),
    );
    let _daemon = Daemon::start_with_env(
        &adb,
        &config,
        tempfile::tempdir().unwrap(),
        &[
            ("DBUS_SYSTEM_BUS_ADDRESS", &bus.address),
            ("DROIDWARDEN__DBUS__BUS", "system"),
        ],
    );
    bus.wait_for_daemon(WAIT);
    const OUTSIDER: u32 = 1; // user "daemon": in no droidwarden group
    const MEMBER: u32 = 65534; // nobody, in nogroup: the group's stand-in
    let outsider = droidwarden_e2e::dbus::Monitor::start_as(&bus.address, Some(OUTSIDER));
    let member = droidwarden_e2e::dbus::Monitor::start_as(&bus.address, Some(MEMBER));

    // A run that asks for an approval, then answers from a tool result.
    llm.push(droidwarden_e2e::agent_rig::call(
        "android_device",
        json!({"device": "phone", "service_id": "wifi_automation", "action": "disable", "parameters": {}}),
    ));
    llm.push(droidwarden_e2e::agent_rig::text(
        "Secret answer: Wi-Fi is off.",
    ));
    bus.gdbus_call_as(None, "org.droidwarden.Daemon1.Ask", &["", "turn wifi off"])
        .expect("Ask");
    let approval = member.wait("ApprovalRequested for the group", |l| {
        l.contains(".ApprovalRequested (")
    });
    let id = approval
        .split('\'')
        .nth(1)
        .unwrap_or_else(|| panic!("an approval id in {approval}"))
        .to_owned();
    bus.gdbus_call_as(None, "org.droidwarden.Daemon1.Approve", &[&id])
        .expect("Approve");
    member.wait("the run's final event for the group", |l| {
        l.contains(".SessionEvent (") && l.contains("Secret answer")
    });
    // Everyone sees calls' statuses (what Status tells anyone). One more
    // call after the run's end: once the outsider has its status, it has
    // had every signal sent before it (one sender's signals keep their
    // order).
    outsider.wait("the agent's call's status for everyone", |l| {
        l.contains(".ServiceStatusChanged (") && l.contains("wifi_automation")
    });
    bus.gdbus_call_as(
        None,
        "org.droidwarden.Daemon1.Call",
        &["phone", "battery", "status", "{}"],
    )
    .expect("Call");
    outsider.wait("a later call's status for everyone", |l| {
        l.contains(".ServiceStatusChanged (") && l.contains("battery")
    });
    // … and the outsider got none of the private signals, before or after.
    for member_name in [
        "SessionEvent",
        "ApprovalRequested",
        "AutomationRun",
        "CallAwaitsApproval",
    ] {
        assert_eq!(
            outsider.signals(member_name),
            Vec::<String>::new(),
            "{member_name} reached a user outside the group"
        );
    }
    assert!(
        outsider
            .lines()
            .iter()
            .all(|l| !l.contains("Secret answer")),
        "{:?}",
        outsider.lines()
    );
}
