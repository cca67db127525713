//! droidwarden-companion for Termux, end to end: a real broker (mosquitto,
//! or the daemon's embedded one), the real daemon with a `transport =
//! "companion"` device, and the real `droidwarden-companion` binary with
//! stand-in `termux-*` programs on `PATH`. Each stand-in prints a real
//! recorded output (`companion/fixtures/termux/`, see `SOURCES.md` there)
//! and appends its argv, one JSON array per line, to a log.

use droidwarden_e2e::mqtt::{ANY_BROKER_PORT, Daemon, Mosquitto, NO_POLLS, Probe, ok_result};
use droidwarden_e2e::termux::{FRIEND, ID, Termux, fixture};
use droidwarden_e2e::{AdbServer, P, Sim, SimOptions, WAIT, wait_for};
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};
/// On the daemon's allowlist only.
const DAEMON_ONLY: &str = "+4915199999999";

fn daemon_config(broker: &str) -> String {
    format!(
        "{broker}{NO_POLLS}\n[phone_services.telephony]\nenabled = true\nallowed_numbers = [\"{FRIEND}\", \"{DAEMON_ONLY}\"]\n[[devices]]\nname = \"phone\"\ntransport = \"companion\"\ncompanion_id = \"{ID}\"\n"
    )
}

fn mqtt_url(port: u16) -> String {
    format!("[mqtt]\nurl = \"mqtt://127.0.0.1:{port}\"\n")
}

/// The status topic says `state` for `service.action` (after the call).
fn status_says(probe: &Probe, service: &str, action: &str, state: &str) {
    let topic = format!("{P}/devices/phone/services/{service}/status");
    wait_for(&format!("{state} on {topic}"), WAIT, || {
        probe
            .on(&topic)
            .iter()
            .any(|m| {
                let v = m.json();
                v["state"] == state && v["action"] == action
            })
            .then_some(())
    });
}

#[test]
fn termux_companion_answers_through_the_daemon() {
    let broker = Mosquitto::start();
    let probe = Probe::connect(broker.port);
    let adb = AdbServer::shared();
    let _daemon = Daemon::start(&adb, &daemon_config(&mqtt_url(broker.port)));
    let phone = Termux::new(broker.port, "notification_poll_s = 1");

    // First run: every command looked up; the missing one named.
    let check = phone.cli(&["check"]);
    let text = String::from_utf8_lossy(&check.stdout).into_owned();
    assert_eq!(check.status.code(), Some(2), "{text}");
    assert!(text.contains("ok          termux-battery-status"), "{text}");
    assert!(
        text.contains("MISSING     termux-wifi-enable: not installed (pkg install termux-api)"),
        "{text}"
    );
    assert!(
        text.contains("not run     termux-sms-send (it acts; permission needed: SMS)"),
        "{text}"
    );
    assert!(
        text.contains("Android API 34: Wi-Fi cannot be switched"),
        "{text}"
    );
    let status = phone.cli(&["status"]);
    assert_eq!(status.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&status.stdout).contains("has not run yet"));
    std::fs::remove_file(&phone.log).unwrap();

    let companion = phone.start();
    probe.wait_payload(&format!("{P}/companion/{ID}/online"), WAIT, "online");
    probe.wait_payload(&format!("{P}/devices/phone/availability"), WAIT, "online");
    // On every connection: the battery event, and the wake lock is held.
    let battery = probe.wait("the battery event", WAIT, |m| {
        m.topic == format!("{P}/companion/{ID}/event/battery")
    });
    assert_eq!(battery.json()["level_percent"], 59);
    wait_for("the wake lock", WAIT, || {
        (!phone.runs_of("termux-wake-lock").is_empty()).then_some(())
    });
    let line = wait_for("an online status line", WAIT, || {
        let out = phone.cli(&["status"]);
        let line = String::from_utf8_lossy(&out.stdout).into_owned();
        (out.status.success() && line.starts_with("online:")).then_some(line)
    });
    assert!(
        line.contains(&format!("connected to 127.0.0.1:{} as {ID}", broker.port)),
        "{line}"
    );

    // Battery: the real output as the catalogue's record.
    let result = ok_result(probe.call(P, "b1", "phone", "battery", "status", json!({})));
    assert_eq!(
        result,
        json!({"level_percent": 59, "level": 59, "scale": 100, "status": "discharging",
               "health": "good", "plugged": null, "charging": false, "present": true,
               "temperature_c": 27.200000762939453, "voltage_mv": null, "technology": null,
               "simulated": false})
    );
    status_says(&probe, "battery", "status", "success");

    // Volume: read, set (40 % of 15 is index 6), read back.
    let result = ok_result(probe.call(
        P,
        "v1",
        "phone",
        "audio_automation",
        "get_volume",
        json!({"stream": "voice_call"}),
    ));
    assert_eq!(
        result,
        json!({"stream": "voice_call", "level": 100, "index": 5, "min": 0, "max": 5, "muted": false})
    );
    let result = ok_result(probe.call(
        P,
        "v2",
        "phone",
        "audio_automation",
        "set_volume",
        json!({"stream": "music", "level": 40}),
    ));
    // The stand-in keeps printing its recording: the read-back says index 7.
    assert_eq!(result["index"], 7, "{result}");
    assert!(
        phone
            .runs_of("termux-volume")
            .contains(&json!(["termux-volume", "music", "6"])),
        "{:?}",
        phone.argv()
    );
    status_says(&probe, "audio_automation", "set_volume", "success");

    // Brightness and notifications.
    let result = ok_result(probe.call(
        P,
        "s1",
        "phone",
        "screen_control",
        "set_brightness",
        json!({"level": 128}),
    ));
    assert_eq!(result, json!({"brightness": 128}));
    assert_eq!(
        phone.runs_of("termux-brightness"),
        [json!(["termux-brightness", "128"])]
    );
    let result = ok_result(probe.call(P, "n1", "phone", "notifications", "list", json!({})));
    assert_eq!(result["count"], 1, "{result}");
    assert_eq!(
        result["notifications"][0]["package"],
        "com.example_organisation.app_name"
    );

    // Wi-Fi: the recorded status; switching it is refused on Android 10+
    // before anything runs.
    let result = ok_result(probe.call(P, "w1", "phone", "wifi_automation", "status", json!({})));
    assert_eq!(
        result,
        json!({"enabled": true, "connected": true, "ssid": null, "bssid": null,
               "ip": "192.168.xxx.xxx", "rssi_dbm": -42, "link_speed_mbps": 433,
               "frequency_mhz": 5180, "mac": null})
    );
    assert_eq!(
        phone.runs_of("termux-wifi-connectioninfo"),
        [json!(["termux-wifi-connectioninfo"])]
    );
    status_says(&probe, "wifi_automation", "status", "success");
    let reply = probe.call(P, "w2", "phone", "wifi_automation", "enable", json!({}));
    assert_eq!(reply["error"]["code"], "unsupported_action", "{reply}");
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("Android 10 and later (this phone: API 34)"),
        "{reply}"
    );
    assert_eq!(
        phone.runs_of("getprop"),
        [json!(["getprop", "ro.build.version.sdk"])]
    );
    status_says(&probe, "wifi_automation", "enable", "error");
    let reply = probe.call(
        P,
        "r1",
        "phone",
        "audio_automation",
        "ringer_mode",
        json!({"mode": "silent"}),
    );
    assert_eq!(reply["error"]["code"], "unsupported_action", "{reply}");

    // Location.
    let result = ok_result(probe.call(P, "l1", "phone", "location", "current", json!({})));
    assert_eq!(
        result,
        json!({"provider": "gps", "latitude": 1.3277513, "longitude": 103.678317,
               "altitude_m": 51.6298828125, "accuracy_m": 48.46337890625,
               "speed_mps": 0.0, "bearing_deg": 0.0})
    );
    assert_eq!(
        phone.runs_of("termux-location"),
        [json!(["termux-location", "-p", "network", "-r", "last"])]
    );
    status_says(&probe, "location", "current", "success");

    // A photo, stored in the photo directory.
    let result = ok_result(probe.call(
        P,
        "c1",
        "phone",
        "camera_control",
        "take_photo",
        json!({"filename": "door.jpg"}),
    ));
    let photo = phone.dir.path().join("photos/door.jpg");
    assert_eq!(result, json!({"path": photo.to_str().unwrap()}));
    assert_eq!(
        phone.runs_of("termux-camera-photo"),
        [json!([
            "termux-camera-photo",
            "-c",
            "0",
            photo.to_str().unwrap()
        ])]
    );
    assert_eq!(std::fs::read(&photo).unwrap(), b"JPEG");
    status_says(&probe, "camera_control", "take_photo", "success");

    // A text to an allowed number: the number as one argument, the text
    // on standard input exactly as sent, whatever it holds.
    for (i, text) in droidwarden_e2e::HOSTILE.iter().enumerate() {
        let reply = probe.call(
            P,
            &format!("sms{i}"),
            "phone",
            "telephony",
            "sms_send",
            json!({"number": FRIEND, "text": text}),
        );
        if text.contains('\u{0}') {
            assert_eq!(reply["error"]["code"], "invalid_params", "{reply}");
            continue;
        }
        assert_eq!(
            ok_result(reply),
            json!({"number": FRIEND, "status": "sent"}),
            "{text:?}"
        );
        assert_eq!(phone.sms_text(), *text, "{text:?}");
        assert_eq!(
            phone.runs_of("termux-sms-send").last(),
            Some(&json!(["termux-sms-send", "-n", FRIEND]))
        );
    }
    status_says(&probe, "telephony", "sms_send", "success");
    let sent = phone.runs_of("termux-sms-send").len();
    assert_eq!(sent, droidwarden_e2e::HOSTILE.len() - 1);
    // Not on the daemon's list: refused by the daemon, never published.
    let reply = probe.call(
        P,
        "sms-x",
        "phone",
        "telephony",
        "sms_send",
        json!({"number": "+4930123456", "text": "hi"}),
    );
    assert_eq!(reply["error"]["code"], "denied", "{reply}");
    // On the daemon's list but not the phone's: the companion refuses it.
    let reply = probe.call(
        P,
        "sms-y",
        "phone",
        "telephony",
        "sms_send",
        json!({"number": DAEMON_ONLY, "text": "hi"}),
    );
    assert_eq!(reply["error"]["code"], "denied", "{reply}");
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("this phone's droidwarden-companion configuration"),
        "{reply}"
    );
    let reply = probe.call(
        P,
        "call-y",
        "phone",
        "telephony",
        "dial",
        json!({"number": DAEMON_ONLY}),
    );
    assert_eq!(reply["error"]["code"], "denied", "{reply}");
    assert_eq!(phone.runs_of("termux-sms-send").len(), sent, "never sent");
    assert!(phone.runs_of("termux-telephony-call").is_empty());
    let result = ok_result(probe.call(
        P,
        "call-1",
        "phone",
        "telephony",
        "dial",
        json!({"number": FRIEND}),
    ));
    assert_eq!(result, json!({"number": FRIEND, "calling": true}));
    assert_eq!(
        phone.runs_of("termux-telephony-call"),
        [json!(["termux-telephony-call", FRIEND])]
    );

    // The clipboard: empty, then set through standard input (no argument
    // carries the text) and read back as it was, hostile text and all.
    let result = ok_result(probe.call(
        P,
        "clip-0",
        "phone",
        "ui_control",
        "get_clipboard",
        json!({}),
    ));
    assert_eq!(result, json!({"text": null, "via": "companion"}));
    let text = "Grüße, \"quoted\" 100% $HOME; 你好 👋 $(touch${IFS}pwned) `id`";
    let result = ok_result(probe.call(
        P,
        "clip-1",
        "phone",
        "ui_control",
        "set_clipboard",
        json!({"text": text}),
    ));
    assert_eq!(
        result,
        json!({"length": text.chars().count(), "via": "companion"})
    );
    assert_eq!(
        phone.runs_of("termux-clipboard-set"),
        [json!(["termux-clipboard-set"])],
        "the text is not an argument"
    );
    let result = ok_result(probe.call(
        P,
        "clip-2",
        "phone",
        "ui_control",
        "get_clipboard",
        json!({}),
    ));
    assert_eq!(result["text"], text, "{result}");
    status_says(&probe, "ui_control", "get_clipboard", "success");
    assert!(
        !phone.companion_log().contains("Grüße"),
        "the clipboard's text is never logged"
    );

    // Alerts: the torch and a vibration as argv; speech on standard input
    // exactly as sent, whatever it holds (the catalogue bounds its length).
    let result = ok_result(probe.call(P, "t1", "phone", "alerts", "torch", json!({"on": true})));
    assert_eq!(result, json!({"torch": true}));
    let result = ok_result(probe.call(P, "t2", "phone", "alerts", "torch", json!({"on": false})));
    assert_eq!(result, json!({"torch": false}));
    assert_eq!(
        phone.runs_of("termux-torch"),
        [
            json!(["termux-torch", "on"]),
            json!(["termux-torch", "off"])
        ]
    );
    status_says(&probe, "alerts", "torch", "success");
    let result = ok_result(probe.call(P, "vib", "phone", "alerts", "vibrate", json!({"ms": 700})));
    assert_eq!(result, json!({"ms": 700}));
    assert_eq!(
        phone.runs_of("termux-vibrate"),
        [json!(["termux-vibrate", "-f", "-d", "700"])]
    );
    status_says(&probe, "alerts", "vibrate", "success");
    let mut spoken = 0;
    for (i, text) in droidwarden_e2e::HOSTILE.iter().enumerate() {
        let reply = probe.call(
            P,
            &format!("say{i}"),
            "phone",
            "alerts",
            "speak",
            json!({"text": text}),
        );
        if text.contains('\u{0}') {
            assert_eq!(reply["error"]["code"], "invalid_params", "{reply}");
            continue;
        }
        spoken += 1;
        assert_eq!(
            ok_result(reply),
            json!({"length": text.chars().count()}),
            "{text:?}"
        );
        assert_eq!(phone.spoken(), *text, "{text:?}");
        assert_eq!(
            phone.runs_of("termux-tts-speak").last(),
            Some(&json!(["termux-tts-speak"])),
            "the text is not an argument"
        );
    }
    assert_eq!(phone.runs_of("termux-tts-speak").len(), spoken);
    status_says(&probe, "alerts", "speak", "success");
    let reply = probe.call(
        P,
        "say-long",
        "phone",
        "alerts",
        "speak",
        json!({"text": "x".repeat(droidwarden_services::SPEAK_MAX_CHARS + 1)}),
    );
    assert_eq!(reply["error"]["code"], "invalid_params", "{reply}");
    // Finding the phone: the alarm at its highest index (7 of 7 in the
    // recording), the torch, a vibration for the whole ring and speech on
    // the alarm stream; answered at once; a second request while it rings
    // is busy; after the ring the torch goes off and the volume back.
    let before = phone.argv().len();
    // What ran since `before`, the notification poll left out.
    let ran_since = || -> Vec<Value> {
        phone.argv()[before..]
            .iter()
            .filter(|a| a[0] != "termux-notification-list")
            .cloned()
            .collect()
    };
    let asked = Instant::now();
    let result = ok_result(probe.call(
        P,
        "find",
        "phone",
        "alerts",
        "find_my_phone",
        json!({"seconds": 5}),
    ));
    assert!(asked.elapsed() < Duration::from_secs(5), "answered at once");
    assert_eq!(result["seconds"], 5, "{result}");
    let until = result["until_ms"].as_u64().unwrap();
    let reply = probe.call(P, "find-2", "phone", "alerts", "find_my_phone", json!({}));
    assert_eq!(reply["error"]["code"], "busy", "{reply}");
    let ended = wait_for("the ring's end", WAIT, || {
        let ran = ran_since();
        ran.contains(&json!(["termux-torch", "off"])).then_some(ran)
    });
    let finished = droidwarden_services::time::epoch_ms(std::time::SystemTime::now());
    assert!(finished + 1_000 >= until, "{finished} / {until}");
    let ran = wait_for("the volume restored", WAIT, || {
        let ran = ran_since();
        (ran.last() == Some(&json!(["termux-volume", "alarm", "7"])) && ran.len() > 7)
            .then_some(ran)
    });
    let pulse = json!(["termux-vibrate", "-f", "-d", "1000"]);
    assert_eq!(
        ran[..5],
        [
            json!(["termux-volume"]),
            json!(["termux-volume", "alarm", "7"]),
            json!(["termux-torch", "on"]),
            pulse.clone(),
            json!(["termux-tts-speak", "-s", "ALARM"]),
        ],
        "{ended:?}"
    );
    // A pulse every two seconds of the five (timers may let one slip).
    let pulses = &ran[5..ran.len() - 2];
    assert!(
        (1..=2).contains(&pulses.len()) && pulses.iter().all(|a| *a == pulse),
        "{ran:?}"
    );
    assert_eq!(
        ran[ran.len() - 2..],
        [
            json!(["termux-torch", "off"]),
            json!(["termux-volume", "alarm", "7"])
        ]
    );
    assert_eq!(phone.spoken(), "Here I am!\n".repeat(5));
    status_says(&probe, "alerts", "find_my_phone", "success");

    // A hostile link reaches the program as one argument, untouched.
    let hostile = "https://example.org/a;b'c\"d$(touch${IFS}pwned)`id`&x=|y";
    let result = ok_result(probe.call(
        P,
        "u1",
        "phone",
        "intents",
        "open_url",
        json!({"url": hostile}),
    ));
    assert_eq!(result["url"], hostile);
    assert_eq!(
        phone.runs_of("termux-open-url"),
        [json!(["termux-open-url", hostile])]
    );
    assert!(!phone.dir.path().join("pwned").exists() && !Path::new("pwned").exists());
    // Refused before anything runs: a scheme the policy does not allow.
    let before = phone.argv().len();
    let reply = probe.call(
        P,
        "u2",
        "phone",
        "intents",
        "open_url",
        json!({"url": "javascript:alert(1)"}),
    );
    assert_eq!(reply["ok"], false, "{reply}");
    let reply = probe.call(
        P,
        "bt",
        "phone",
        "bluetooth_automation",
        "disable",
        json!({}),
    );
    assert_eq!(reply["error"]["code"], "unsupported_action", "{reply}");
    let reply = probe.call(
        P,
        "v3",
        "phone",
        "audio_automation",
        "get_volume",
        json!({"stream": "dtmf"}),
    );
    assert_eq!(reply["error"]["code"], "unsupported_action", "{reply}");
    let ran: Vec<_> = phone.argv()[before..]
        .iter()
        .filter(|a| a[0] != "termux-notification-list")
        .cloned()
        .collect();
    assert!(ran.is_empty(), "nothing ran for refusals: {ran:?}");

    // Notification events: the first reading was the baseline (nothing
    // announced for what was already showing); a removal and a posting
    // follow the list, and reach the daemon's event topic.
    let posted = format!("{P}/companion/{ID}/event/notification_posted");
    let removed = format!("{P}/companion/{ID}/event/notification_removed");
    assert!(probe.on(&posted).is_empty(), "no storm at start");
    phone.set_notifications("[]");
    let gone = probe.wait("notification_removed", WAIT, |m| m.topic == removed);
    assert_eq!(
        gone.json()["key"],
        "0|com.example_organisation.app_name|-100|null|10151"
    );
    phone.set_notifications(&std::fs::read_to_string(fixture("notification-list.json")).unwrap());
    let back = probe.wait("notification_posted", WAIT, |m| m.topic == posted);
    assert_eq!(back.json()["title"], "Notification title");
    assert_eq!(probe.on(&removed).len(), 1);
    assert_eq!(probe.on(&posted).len(), 1);

    // Nothing secret in the companion's log: no message text, no number.
    let log = phone.companion_log();
    assert!(log.contains("online"), "{log}");
    assert!(!log.contains(FRIEND) && !log.contains("reboot"), "{log}");

    // A ring still on when the companion stops ends at once, before it
    // exits: the torch off and the alarm volume back.
    let result = ok_result(probe.call(
        P,
        "find-3",
        "phone",
        "alerts",
        "find_my_phone",
        json!({"seconds": 60}),
    ));
    assert_eq!(result["seconds"], 60, "{result}");
    let torches = phone.runs_of("termux-torch").len();

    // Stopped on purpose: offline, the wake lock released; started again:
    // online and answering (a companion restart).
    let stopping = Instant::now();
    assert!(companion.terminate().is_some_and(|s| s.success()));
    assert!(
        stopping.elapsed() < Duration::from_secs(20),
        "the ring did not hold it up"
    );
    assert_eq!(phone.runs_of("termux-torch").len(), torches + 1);
    assert_eq!(
        phone.runs_of("termux-torch").last(),
        Some(&json!(["termux-torch", "off"]))
    );
    assert_eq!(
        phone.runs_of("termux-volume").last(),
        Some(&json!(["termux-volume", "alarm", "7"]))
    );
    probe.wait_payload(&format!("{P}/devices/phone/availability"), WAIT, "offline");
    assert_eq!(
        phone.runs_of("termux-wake-unlock"),
        [json!(["termux-wake-unlock"])]
    );
    let out = phone.cli(&["status"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("stopped:"));
    let mut companion = phone.start();
    probe.wait_payload(&format!("{P}/devices/phone/availability"), WAIT, "online");
    ok_result(probe.call(P, "b2", "phone", "battery", "status", json!({})));

    // Killed without a goodbye: the will says offline.
    companion.0.kill().unwrap();
    companion.0.wait().unwrap();
    probe.wait_payload(&format!("{P}/devices/phone/availability"), WAIT, "offline");
    let late = Probe::connect(broker.port);
    wait_for("the retained will", WAIT, || {
        late.on(&format!("{P}/companion/{ID}/online"))
            .last()
            .filter(|m| m.payload == "offline" && m.retain)
            .map(|_| ())
    });
}

/// A request as the daemon encodes it, for `intents.open_url` of `url`.
fn forged_request(id: &str, url: &str) -> String {
    let deadline = droidwarden_services::time::epoch_ms(std::time::SystemTime::now()) + 60_000;
    json!({"v": 1, "id": id, "service": "intents", "action": "open_url",
           "params": {"url": url}, "deadline_ms": deadline})
    .to_string()
}

/// What another client publishes on the phone's request topic never runs:
/// the broker lets only the daemon's account publish there.
fn forged_requests_never_run(phone: &Termux, watcher: &Probe, forgers: &[&Probe]) {
    let request = format!("{P}/companion/{ID}/request");
    for (i, forger) in forgers.iter().enumerate() {
        forger.publish(
            &request,
            forged_request(&format!("forged-{i}"), "https://mallory.example/"),
        );
    }
    // The daemon's account may: its request runs (and, sent after the
    // forged ones, is answered after them had they been delivered).
    watcher.publish(&request, forged_request("genuine", "https://example.org/"));
    let response = format!("{P}/companion/{ID}/response");
    let answer = watcher.wait("the genuine answer", WAIT, |m| {
        m.topic == response && m.json()["id"] == "genuine"
    });
    assert_eq!(answer.json()["ok"], true, "{}", answer.payload);
    // A second genuine request: every earlier delivery has been answered
    // by the time this one is (answers are published in order of arrival
    // for these quick commands).
    watcher.publish(
        &request,
        forged_request("genuine-2", "https://example.org/2"),
    );
    watcher.wait("the second answer", WAIT, |m| {
        m.topic == response && m.json()["id"] == "genuine-2"
    });
    assert_eq!(
        phone.runs_of("termux-open-url"),
        [
            json!(["termux-open-url", "https://example.org/"]),
            json!(["termux-open-url", "https://example.org/2"])
        ]
    );
    assert!(
        watcher.on(&response).iter().all(|m| !m.json()["id"]
            .as_str()
            .unwrap_or_default()
            .starts_with("forged")),
        "a forged request was answered"
    );
}

#[test]
fn only_the_daemons_account_sends_requests_with_mosquitto() {
    let broker = Mosquitto::secured(
        &[
            ("droidwarden", "d"),
            (ID, "phone-password"),
            ("mallory-phone", "m"),
            ("homeassistant", "h"),
        ],
        &droidwarden_e2e::documented_block("mqtt-access.md", "acl-example"),
    );
    let phone = Termux::new(
        broker.port,
        "password_file = \"~/password\"\nnotification_poll_s = 0",
    );
    std::fs::write(phone.dir.path().join("password"), "phone-password\n").unwrap();
    let daemon = Probe::connect_as(broker.port, "droidwarden", "d");
    let _companion = phone.start();
    daemon.wait_payload(&format!("{P}/companion/{ID}/online"), WAIT, "online");
    let mallory = Probe::connect_as(broker.port, "mallory-phone", "m");
    let ha = Probe::connect_as(broker.port, "homeassistant", "h");
    forged_requests_never_run(&phone, &daemon, &[&mallory, &ha]);
}

#[test]
fn only_the_daemons_account_sends_requests_with_the_embedded_broker() {
    let adb = AdbServer::shared();
    let daemon = Daemon::start(&adb, &daemon_config(ANY_BROKER_PORT));
    let port = daemon.embedded_broker_port();
    let admin = Probe::connect_as(port, "droidwarden", &daemon.mqtt_secret());
    let password = daemon.add_mqtt_user(&[ID, "--role", "phone"]);
    let mallory_pw = daemon.add_mqtt_user(&["mallory-phone", "--role", "phone"]);
    let ha_pw = daemon.add_mqtt_user(&["ha", "--role", "automation"]);
    let phone = Termux::new(
        port,
        "password_file = \"~/password\"\nnotification_poll_s = 0",
    );
    std::fs::write(phone.dir.path().join("password"), format!("{password}\n")).unwrap();
    let _companion = phone.start();
    admin.wait_payload(&format!("{P}/devices/phone/availability"), WAIT, "online");
    let mallory = Probe::connect_as(port, "mallory-phone", &mallory_pw);
    let ha = Probe::connect_as(port, "ha", &ha_pw);
    forged_requests_never_run(&phone, &admin, &[&mallory, &ha]);
    // And the daemon's own calls go through as usual.
    let result = ok_result(admin.call(P, "b1", "phone", "battery", "status", json!({})));
    assert_eq!(result["level_percent"], 59);
}

/// Start a call without waiting for its reply.
fn start_call(probe: &Probe, id: &str, service: &str, action: &str, params: Value) {
    probe.publish(
        &format!("{P}/cmd/call"),
        droidwarden_e2e::mqtt::call_request(id, "phone", service, action, params).to_string(),
    );
}

/// Broker restart, companion restart and a phone offline within and
/// beyond the queue's time to live, with mosquitto: each call is answered
/// once, performed at most once, and what was never sent fails with
/// `device_offline`, never `timeout`.
#[test]
fn outages_behave_as_the_protocol_promises_with_mosquitto() {
    let mut broker = Mosquitto::start();
    let probe = Probe::connect(broker.port);
    let adb = AdbServer::shared();
    let _daemon = Daemon::start(
        &adb,
        &format!(
            "{}[companion]\nqueue_ttl_ms = 8000\nrequest_timeout_ms = 8000\n",
            daemon_config(&mqtt_url(broker.port))
        ),
    );
    let phone = Termux::new(broker.port, "notification_poll_s = 0");
    let companion = phone.start();
    probe.wait_payload(&format!("{P}/devices/phone/availability"), WAIT, "online");

    // The broker restarts: the companion comes back by itself and answers.
    broker.restart();
    let probe = Probe::connect(broker.port);
    probe.wait_payload(&format!("{P}/devices/phone/availability"), WAIT, "online");
    let result = ok_result(probe.call(
        P,
        "after-broker",
        "phone",
        "screen_control",
        "set_brightness",
        json!({"level": 11}),
    ));
    assert_eq!(result, json!({"brightness": 11}));
    assert_eq!(
        phone.runs_of("termux-brightness"),
        [json!(["termux-brightness", "11"])],
        "performed once"
    );

    // Offline within the time to live: the call waits, unsent, and runs
    // once when the companion is back.
    assert!(companion.terminate().is_some_and(|s| s.success()));
    probe.wait_payload(&format!("{P}/devices/phone/availability"), WAIT, "offline");
    let status_topic = format!("{P}/devices/phone/services/screen_control/status");
    let executing = || {
        probe
            .on(&status_topic)
            .iter()
            .filter(|m| m.json()["state"] == "executing")
            .count()
    };
    let before = executing();
    start_call(
        &probe,
        "within",
        "screen_control",
        "set_brightness",
        json!({"level": 22}),
    );
    wait_for("the call to be queued", WAIT, || {
        (executing() > before).then_some(())
    });
    assert!(probe.on(&format!("{P}/reply/within")).is_empty());
    let companion = phone.start();
    let reply = probe.wait_reply(P, "within");
    assert_eq!(reply["ok"], true, "{reply}");
    assert_eq!(
        phone.runs_of("termux-brightness")[1..],
        [json!(["termux-brightness", "22"])]
    );

    // Offline beyond it: device_offline ("was not sent"), and it does not
    // run when the phone comes back.
    assert!(companion.terminate().is_some_and(|s| s.success()));
    probe.wait_payload(&format!("{P}/devices/phone/availability"), WAIT, "offline");
    let start = Instant::now();
    let reply = probe.call(
        P,
        "beyond",
        "phone",
        "screen_control",
        "set_brightness",
        json!({"level": 33}),
    );
    assert_eq!(reply["error"]["code"], "device_offline", "{reply}");
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("not sent"),
        "{reply}"
    );
    assert!(
        start.elapsed() >= Duration::from_secs(7),
        "{:?}",
        start.elapsed()
    );
    let _companion = phone.start();
    probe.wait_payload(&format!("{P}/devices/phone/availability"), WAIT, "online");
    ok_result(probe.call(P, "b", "phone", "battery", "status", json!({})));
    assert_eq!(
        phone.runs_of("termux-brightness"),
        [
            json!(["termux-brightness", "11"]),
            json!(["termux-brightness", "22"])
        ],
        "the expired call never ran"
    );
    for id in ["after-broker", "within", "beyond"] {
        assert_eq!(probe.on(&format!("{P}/reply/{id}")).len(), 1, "{id}");
    }
}

/// The embedded broker restarts with its daemon: the companion reconnects
/// (logging in again) and answers.
#[test]
fn the_companion_comes_back_after_the_embedded_broker_restarts() {
    let adb = AdbServer::shared();
    let port = droidwarden_e2e::free_port();
    let config = daemon_config(&format!("[broker]\nlisten = \"127.0.0.1:{port}\"\n"));
    let daemon = Daemon::start(&adb, &config);
    // The daemon's own account first: then its users file exists.
    let admin = Probe::connect_as(port, "droidwarden", &daemon.mqtt_secret());
    let password = daemon.add_mqtt_user(&[ID, "--role", "phone"]);
    let phone = Termux::new(
        port,
        "password_file = \"~/password\"\nnotification_poll_s = 0",
    );
    std::fs::write(phone.dir.path().join("password"), format!("{password}\n")).unwrap();
    let _companion = phone.start();
    admin.wait_payload(&format!("{P}/devices/phone/availability"), WAIT, "online");
    ok_result(admin.call(P, "b1", "phone", "battery", "status", json!({})));
    drop(admin);
    let daemon = daemon.restart_with(&adb, &config);
    let admin = Probe::connect_as(port, "droidwarden", &daemon.mqtt_secret());
    admin.wait_payload(&format!("{P}/devices/phone/availability"), WAIT, "online");
    let result = ok_result(admin.call(P, "b2", "phone", "battery", "status", json!({})));
    assert_eq!(result["level_percent"], 59);
    assert!(phone.runs_of("termux-battery-status").len() >= 2);
}

/// The emulated companion (`droidwarden-sim`) and this program answer the
/// same requests alike for the actions both offer: the same result shape
/// (both checked against the catalogue by the daemon), the same values
/// where the request decides them, the same error codes for refusals.
#[test]
fn the_emulated_and_the_termux_companion_answer_alike() {
    let broker = Mosquitto::start();
    let probe = Probe::connect(broker.port);
    let adb = AdbServer::shared();
    let _sim = Sim::start(SimOptions {
        companion: Some((broker.port, "alice-pixel".into())),
        no_adb: true,
        ..Default::default()
    });
    let config = format!(
        "{}[[devices]]\nname = \"alice\"\ntransport = \"companion\"\ncompanion_id = \"alice-pixel\"\n",
        daemon_config(&mqtt_url(broker.port))
    );
    let _daemon = Daemon::start(&adb, &config);
    let phone = Termux::new(broker.port, "notification_poll_s = 0");
    let _companion = phone.start();
    for device in ["phone", "alice"] {
        probe.wait_payload(
            &format!("{P}/devices/{device}/availability"),
            WAIT,
            "online",
        );
    }
    let keys = |v: &Value| {
        v.as_object()
            .map(|o| o.keys().cloned().collect::<Vec<_>>())
            .unwrap_or_default()
    };
    // (service, action, params, the result fields the request decides)
    let cases: &[(&str, &str, Value, &[&str])] = &[
        ("battery", "status", json!({}), &[]),
        (
            "audio_automation",
            "get_volume",
            json!({"stream": "music"}),
            &["stream"],
        ),
        (
            "audio_automation",
            "set_volume",
            json!({"stream": "music", "level": 40}),
            &["stream"],
        ),
        (
            "screen_control",
            "set_brightness",
            json!({"level": 128}),
            &["brightness"],
        ),
        ("notifications", "list", json!({}), &[]),
        (
            "intents",
            "open_url",
            json!({"url": "https://example.org/a?b=c"}),
            &["url", "status"],
        ),
        ("wifi_automation", "status", json!({}), &[]),
        ("location", "current", json!({}), &[]),
        (
            "camera_control",
            "take_photo",
            json!({"filename": "door.jpg"}),
            &[],
        ),
        (
            "telephony",
            "sms_send",
            json!({"number": FRIEND, "text": "on my way"}),
            &["number"],
        ),
        (
            "telephony",
            "dial",
            json!({"number": FRIEND}),
            &["number", "calling"],
        ),
        (
            "ui_control",
            "set_clipboard",
            json!({"text": "ünïcødé 日本 👋"}),
            &["length", "via"],
        ),
        // What the step before put there.
        ("ui_control", "get_clipboard", json!({}), &["text", "via"]),
        ("alerts", "torch", json!({"on": true}), &["torch"]),
        ("alerts", "vibrate", json!({"ms": 700}), &["ms"]),
        (
            "alerts",
            "speak",
            json!({"text": "Dinner is ready; $(id) \"now\""}),
            &["length"],
        ),
        (
            "alerts",
            "find_my_phone",
            json!({"seconds": 5}),
            &["seconds"],
        ),
    ];
    for (i, (service, action, params, decided)) in cases.iter().enumerate() {
        let termux = probe.call(
            P,
            &format!("t{i}"),
            "phone",
            service,
            action,
            params.clone(),
        );
        let sim = probe.call(
            P,
            &format!("s{i}"),
            "alice",
            service,
            action,
            params.clone(),
        );
        let (t, s) = (ok_result(termux), ok_result(sim));
        assert_eq!(keys(&t), keys(&s), "{service}.{action}: {t} / {s}");
        for field in *decided {
            assert_eq!(
                t[*field], s[*field],
                "{service}.{action}.{field}: {t} / {s}"
            );
        }
    }
    // Refusals: the same codes from both.
    let refusals: &[(&str, &str, Value)] = &[
        // Both still ring from the last case: another ring is busy.
        ("alerts", "find_my_phone", json!({})),
        // The daemon's policy, before either phone.
        ("intents", "open_url", json!({"url": "javascript:alert(1)"})),
        (
            "telephony",
            "sms_send",
            json!({"number": "+4930123456", "text": "x"}),
        ),
        // Parameters the catalogue refuses.
        ("screen_control", "set_brightness", json!({"level": 999})),
        ("audio_automation", "get_volume", json!({"stream": "loud"})),
        ("alerts", "vibrate", json!({"ms": 60_000})),
        ("alerts", "speak", json!({"text": "x".repeat(101)})),
    ];
    for (i, (service, action, params)) in refusals.iter().enumerate() {
        let t = probe.call(
            P,
            &format!("rt{i}"),
            "phone",
            service,
            action,
            params.clone(),
        );
        let s = probe.call(
            P,
            &format!("rs{i}"),
            "alice",
            service,
            action,
            params.clone(),
        );
        assert_eq!(t["ok"], false, "{t}");
        assert_eq!(
            t["error"]["code"], s["error"]["code"],
            "{service}.{action}: {t} / {s}"
        );
    }
}
