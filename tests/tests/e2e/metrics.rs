//! `[metrics] listen`: a Prometheus scrape of the running daemon, parsed by
//! the official Python client's OpenMetrics parser (an implementation
//! nobody here wrote), after real calls on an emulated phone.

use droidwarden_e2e::mqtt::{ANY_BROKER_PORT, Daemon, Probe};
use droidwarden_e2e::{AdbServer, SimOptions, free_port, run_with_timeout, wait_for};
use droidwarden_e2e::{P, WAIT};
use serde_json::{Value, json};
use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::process::Command;

fn get(port: u16, path: &str) -> (String, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("metrics port");
    stream.set_read_timeout(Some(WAIT)).unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP answer");
    (head.to_owned(), body.to_owned())
}

/// Samples as `{"name": …, "labels": {…}, "value": …}` from the Python
/// client's strict OpenMetrics parser.
fn parse(body: &str) -> Vec<Value> {
    let script = r#"
import json, sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
out = []
for family in text_string_to_metric_families(open(sys.argv[1]).read()):
    for s in family.samples:
        out.append({"name": s.name, "labels": s.labels, "value": s.value, "type": family.type})
print(json.dumps(out))
"#;
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), body).unwrap();
    let mut cmd = Command::new("python3");
    cmd.args(["-c", script]).arg(file.path());
    let out = run_with_timeout(cmd, WAIT);
    assert!(
        out.status.success(),
        "the OpenMetrics parser refused the scrape: {}\n{body}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("parser output")
}

fn value(samples: &[Value], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|s| s["name"] == name && labels.iter().all(|(k, v)| s["labels"][*k] == *v))
        .and_then(|s| s["value"].as_f64())
}

#[test]
fn a_scrape_counts_calls_devices_and_broker_clients() {
    let adb = AdbServer::shared();
    let sim = adb.phone(SimOptions {
        model: Some("Pixel 8".into()),
        ..Default::default()
    });
    let metrics = free_port();
    let config = format!(
        "{ANY_BROKER_PORT}[metrics]\nlisten = \"127.0.0.1:{metrics}\"\n[adb]\npoll_interval_ms = 300\nconnect = [\"{serial}\"]\n[[devices]]\nname = \"phone\"\ntransport = \"adb\"\nserial = \"{serial}\"\n",
        serial = sim.serial()
    );
    let daemon = Daemon::start(&adb, &config);
    wait_for("the metrics port", WAIT, || {
        TcpStream::connect(("127.0.0.1", metrics)).ok()
    });
    let broker = daemon.embedded_broker_port();
    let admin = Probe::connect_as(broker, "droidwarden", &daemon.mqtt_secret());
    admin.wait_payload(&format!("{P}/devices/phone/availability"), WAIT, "online");
    for (id, service, action, params) in [
        ("m1", "battery", "status", json!({})),
        ("m2", "wifi_automation", "disable", json!({})),
        (
            "m3",
            "app_launcher",
            "launch",
            json!({"package": "com.example.missing"}),
        ),
    ] {
        admin.call(P, id, "phone", service, action, params);
    }
    let samples = wait_for("the three calls in a scrape", WAIT, || {
        let (head, body) = get(metrics, "/metrics");
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert!(head.contains("application/openmetrics-text"), "{head}");
        let samples = parse(&body);
        let done = value(
            &samples,
            "droidwarden_calls_total",
            &[("service", "app_launcher")],
        )
        .is_some();
        done.then_some(samples)
    });
    let calls = |service: &str, outcome: &str| {
        value(
            &samples,
            "droidwarden_calls_total",
            &[
                ("device", "phone"),
                ("service", service),
                ("outcome", outcome),
            ],
        )
    };
    assert_eq!(calls("battery", "success"), Some(1.0));
    assert_eq!(calls("wifi_automation", "success"), Some(1.0));
    assert_eq!(calls("app_launcher", "not_found"), Some(1.0));
    assert_eq!(
        value(
            &samples,
            "droidwarden_call_duration_seconds_count",
            &[("device", "phone"), ("service", "battery")]
        ),
        Some(1.0)
    );
    assert_eq!(
        value(&samples, "droidwarden_devices_online", &[]),
        Some(1.0)
    );
    assert_eq!(
        value(
            &samples,
            "droidwarden_calls_in_flight",
            &[("device", "phone")]
        ),
        Some(0.0)
    );
    // The daemon's own client and the admin probe.
    wait_for("broker clients counted", WAIT, || {
        let samples = parse(&get(metrics, "/metrics").1);
        (value(&samples, "droidwarden_broker_clients", &[]) >= Some(2.0)).then_some(())
    });
    let (head, _) = get(metrics, "/nothing");
    assert!(head.starts_with("HTTP/1.1 404"), "{head}");
    drop(daemon);
}

#[test]
fn metrics_stay_on_loopback_unless_allowed() {
    let adb = AdbServer::shared();
    let mut daemon = Daemon::start(&adb, "[metrics]\nlisten = \"0.0.0.0:9464\"\n");
    assert_eq!(daemon.wait_exit(WAIT), Some(78), "{}", daemon.log());
    assert!(daemon.log().contains("metrics.listen"), "{}", daemon.log());
}
