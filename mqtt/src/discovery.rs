//! Home Assistant MQTT discovery: each phone becomes one Home Assistant
//! device with sensors and controls wired to droidwarden's topics. Pure:
//! builds `(topic, payload)` pairs; the MQTT task publishes them.
//!
//! Follows Home Assistant's documented discovery schema: config topics
//! `<discovery prefix>/<component>/<node id>/<object id>/config`, a
//! `unique_id` per entity, a shared `device` block, and availability tied to
//! both the daemon's and the phone's availability topics.

use super::topics::Topics;
use droidwarden_bridge::DeviceInfo;
use droidwarden_services::home_assistant::{HaKind, HaStep};
use droidwarden_services::{Catalogue, Command};
use serde_json::{Value, json};

/// The command a Home Assistant control's payload asks for: `ON`/`OFF` for
/// a switch, a number within the slider's range, `PRESS` for a button. The
/// controls and their commands are declared by the services
/// ([`droidwarden_services::ServiceSpec::home_assistant`]).
///
/// # Errors
/// A message naming the unknown control or what the payload should have been.
pub(crate) fn ha_command(object_id: &str, payload: &str) -> Result<Command, String> {
    let entity = Catalogue::get()
        .services()
        .iter()
        .flat_map(|s| &s.home_assistant)
        .find(|e| e.object_id == object_id)
        .ok_or_else(|| format!("unknown control {:?}", clip(object_id)))?;
    let payload = payload.trim();
    match &entity.kind {
        HaKind::Switch { on, off, .. } => match payload {
            "ON" => Ok(on()),
            "OFF" => Ok(off()),
            other => Err(format!("expected ON or OFF, got {:?}", clip(other))),
        },
        HaKind::Number { max, set, .. } => payload
            .parse::<f64>()
            .ok()
            .filter(|n| n.is_finite() && *n >= 0.0 && *n <= f64::from(*max))
            .map(|n| set(n.round() as u32))
            .ok_or_else(|| format!("expected a number from 0 to {max}, got {:?}", clip(payload))),
        HaKind::Button { press } if payload == "PRESS" => Ok(press()),
        HaKind::Button { .. } => Err(format!("expected PRESS, got {:?}", clip(payload))),
        HaKind::Sensor { .. } | HaKind::BinarySensor { .. } => {
            Err(format!("{object_id} is a sensor, not a control"))
        }
    }
}

fn clip(text: &str) -> String {
    text.chars().take(40).collect()
}

/// Home Assistant's node id for a device: letters, digits, `_` and `-` only.
pub fn node_id(device: &str) -> String {
    let cleaned: String = device
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("droidwarden_{cleaned}")
}

struct Entity {
    component: &'static str,
    object_id: &'static str,
    name: &'static str,
    body: Value,
}

/// The media volume slider's step in percent: one of the phone's volume
/// steps (`max` of its music stream, e.g. 15 → 6.6667 %), so that every
/// position Home Assistant offers is a level the phone has; 1 until the
/// phone's range is known.
pub(crate) fn volume_step(max_index: Option<u64>) -> f64 {
    match max_index {
        Some(max) if (1..=100).contains(&max) => (10_000.0 / max as f64).round() / 100.0,
        _ => 1.0,
    }
}

/// Every entity of a device: each service's declared entities, then the
/// last action's status.
fn entities(t: &Topics, device: &str, volume_max: Option<u64>) -> Vec<Entity> {
    let on_off = |field: &str| format!("{{{{ 'ON' if value_json.{field} else 'OFF' }}}}");
    let value = |field: &str| format!("{{{{ value_json.{field} }}}}");
    let mut out = Vec::new();
    for service in Catalogue::get().services() {
        let state = t.state(device, service.id);
        for entity in &service.home_assistant {
            let command_topic = t.ha_command(device, entity.object_id);
            let mut body = match &entity.kind {
                HaKind::Sensor {
                    field,
                    device_class,
                    unit,
                } => json!({
                    "state_topic": state, "value_template": value(field),
                    "device_class": device_class, "unit_of_measurement": unit,
                    "state_class": "measurement" }),
                HaKind::BinarySensor {
                    field,
                    device_class,
                } => json!({
                    "state_topic": state, "value_template": on_off(field),
                    "device_class": device_class }),
                HaKind::Switch { field, .. } => json!({
                    "state_topic": state, "value_template": on_off(field),
                    "command_topic": command_topic, "payload_on": "ON", "payload_off": "OFF",
                    "state_on": "ON", "state_off": "OFF" }),
                HaKind::Number {
                    field,
                    max,
                    step,
                    unit,
                    ..
                } => json!({
                    "state_topic": state, "value_template": value(field),
                    "command_topic": command_topic, "min": 0, "max": max,
                    "step": match step {
                        HaStep::One => 1.0,
                        HaStep::PhoneSteps => volume_step(volume_max),
                    },
                    "unit_of_measurement": unit, "mode": "slider" }),
                HaKind::Button { .. } => {
                    json!({ "command_topic": command_topic, "payload_press": "PRESS" })
                }
            };
            // Home Assistant reads an absent key and a null one differently.
            if let Some(obj) = body.as_object_mut() {
                obj.retain(|_, v| !v.is_null());
            }
            out.push(Entity {
                component: entity.kind.component(),
                object_id: entity.object_id,
                name: entity.name,
                body,
            });
        }
    }
    out.push(Entity {
        component: "sensor",
        object_id: "last_action",
        name: "Last action",
        body: json!({
            "state_topic": t.last_status(device),
            "value_template": "{{ value_json.state }}",
            "json_attributes_topic": t.last_status(device) }),
    });
    out
}

/// The phone's own serial number, when the transport's identifier is one:
/// a USB serial is `ro.serialno`, while a network phone's adb serial is its
/// address (`192.168.1.40:5555`, `adb-…._adb-tls-connect._tcp`) and a
/// companion phone's is the app's id — neither belongs in Home Assistant's
/// "serial number".
fn serial_number(info: &DeviceInfo) -> Option<&str> {
    let s = info.serial.as_str();
    let usb_serial = info.transport == droidwarden_bridge::TransportKind::Adb
        && !s.is_empty()
        && !s.contains([':', '.'])
        && !s.starts_with("emulator-");
    usb_serial.then_some(s)
}

/// Discovery config messages for one device; `volume_max` is the phone's
/// number of music volume steps, once a read has told it.
pub(crate) fn configs(
    ha_prefix: &str,
    t: &Topics,
    info: &DeviceInfo,
    volume_max: Option<u64>,
) -> Vec<(String, Value)> {
    let device = info.name.as_str();
    let node = node_id(device);
    let mut device_block = json!({
        "identifiers": [node],
        "name": device,
        "model": info.model.clone().unwrap_or_else(|| "Android phone".into()),
        "manufacturer": "droidwarden",
    });
    if let Some(serial) = serial_number(info) {
        device_block["serial_number"] = json!(serial);
    }
    entities(t, device, volume_max)
        .into_iter()
        .map(|e| {
            let mut body = e.body;
            body["name"] = json!(e.name);
            body["unique_id"] = json!(format!("{node}_{}", e.object_id));
            // Home Assistant 2025.10 deprecated `object_id` for
            // `default_entity_id` (the whole entity id) and ignores it from
            // 2026.4; older releases still read `object_id`.
            // Entity ids are lowercase letters, digits and `_`.
            let slug: String = format!("{node}_{}", e.object_id)
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() {
                        c.to_ascii_lowercase()
                    } else {
                        '_'
                    }
                })
                .collect();
            body["default_entity_id"] = json!(format!("{}.{slug}", e.component));
            body["object_id"] = json!(format!("{node}_{}", e.object_id));
            body["device"] = device_block.clone();
            body["availability"] = json!([
                { "topic": t.availability() },
                { "topic": t.device_availability(device) },
            ]);
            body["availability_mode"] = json!("all");
            body["qos"] = json!(1);
            (
                format!("{ha_prefix}/{}/{node}/{}/config", e.component, e.object_id),
                body,
            )
        })
        .collect()
}

/// Home Assistant's node id for the automations: one device holding a
/// switch (enabled) and a button (run now) per automation.
const AUTOMATIONS_NODE: &str = "droidwarden_automations";

/// Discovery configs of one automation: a switch on
/// `<prefix>/automations/<name>/enabled` (commands on `…/set`) with the
/// last run as its attributes, and a button on `…/run`.
pub(crate) fn automation_configs(ha_prefix: &str, t: &Topics, name: &str) -> Vec<(String, Value)> {
    // Entity ids are lowercase letters, digits and `_`; names are already
    // lowercase, digits, `_` and `-`.
    let slug = name.replace('-', "_");
    let device = json!({
        "identifiers": [AUTOMATIONS_NODE],
        "name": "droidwarden automations",
        "model": "Automations",
        "manufacturer": "droidwarden",
    });
    let common = |component: &str, object: &str, title: String| {
        let id = format!("{AUTOMATIONS_NODE}_{object}");
        json!({
            "name": title,
            "unique_id": id,
            "object_id": id,
            "default_entity_id": format!("{component}.{id}"),
            "device": device,
            "availability": [{ "topic": t.availability() }],
            "qos": 1,
        })
    };
    let mut switch = common("switch", &slug, name.to_owned());
    switch["state_topic"] = json!(t.automation_enabled(name));
    switch["command_topic"] = json!(t.automation_set(name));
    switch["payload_on"] = json!("ON");
    switch["payload_off"] = json!("OFF");
    switch["json_attributes_topic"] = json!(t.automation_runs(name));
    let run_object = format!("{slug}_run");
    let mut button = common("button", &run_object, format!("Run {name}"));
    button["command_topic"] = json!(t.automation_run(name));
    button["payload_press"] = json!("PRESS");
    vec![
        (
            format!("{ha_prefix}/switch/{AUTOMATIONS_NODE}/{slug}/config"),
            switch,
        ),
        (
            format!("{ha_prefix}/button/{AUTOMATIONS_NODE}/{run_object}/config"),
            button,
        ),
    ]
}

/// The config topics of one device, to clear (empty retained payload) when
/// the device is removed.
pub(crate) fn config_topics(ha_prefix: &str, t: &Topics, device: &str) -> Vec<String> {
    let node = node_id(device);
    entities(t, device, None)
        .into_iter()
        .map(|e| format!("{ha_prefix}/{}/{node}/{}/config", e.component, e.object_id))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use droidwarden_bridge::TransportKind;
    use droidwarden_services::DeviceName;

    fn info() -> DeviceInfo {
        DeviceInfo {
            name: DeviceName::try_from("127.0.0.1:5555").unwrap(),
            transport: TransportKind::Adb,
            online: true,
            serial: "127.0.0.1:5555".into(),
            model: Some("Pixel 8".into()),
            state_detail: None,
        }
    }

    #[test]
    fn every_config_has_the_keys_home_assistant_requires() {
        let t = Topics::new("droidwarden");
        let configs = configs("homeassistant", &t, &info(), None);
        assert_eq!(configs.len(), 15);
        let mut unique = std::collections::HashSet::new();
        for (topic, body) in &configs {
            let parts: Vec<&str> = topic.split('/').collect();
            assert_eq!(parts.len(), 5, "{topic}");
            assert_eq!(parts[0], "homeassistant");
            assert!(["sensor", "binary_sensor", "switch", "number", "button"].contains(&parts[1]));
            assert!(
                parts[2]
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'),
                "{topic}"
            );
            assert_eq!(parts[4], "config");
            assert!(unique.insert(body["unique_id"].as_str().unwrap().to_owned()));
            let entity_id = body["default_entity_id"].as_str().unwrap();
            assert_eq!(
                entity_id,
                format!("{}.{}", parts[1], body["object_id"].as_str().unwrap())
            );
            assert!(
                entity_id
                    .split_once('.')
                    .unwrap()
                    .1
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
                "{entity_id}"
            );
            assert_eq!(
                body["device"].get("serial_number"),
                None,
                "an address is no serial"
            );
            assert!(body["name"].is_string() && body["device"]["identifiers"].is_array());
            assert_eq!(body["availability"].as_array().unwrap().len(), 2);
            match parts[1] {
                "button" => assert!(body["command_topic"].is_string()),
                "switch" | "number" => {
                    assert!(body["command_topic"].is_string() && body["state_topic"].is_string())
                }
                _ => assert!(body["state_topic"].is_string()),
            }
        }
        assert_eq!(
            config_topics("homeassistant", &t, "127.0.0.1:5555").len(),
            configs.len()
        );
    }

    #[test]
    fn only_a_usb_serial_is_a_serial_number() {
        let mut usb = info();
        usb.serial = "R58M12ABCDE".into();
        let t = Topics::new("droidwarden");
        let (_, body) = &configs("homeassistant", &t, &usb, None)[0];
        assert_eq!(body["device"]["serial_number"], "R58M12ABCDE");
        for not_serial in [
            "emulator-5554",
            "adb-R58M-x._adb-tls-connect._tcp",
            "10.0.0.2:5555",
        ] {
            usb.serial = not_serial.into();
            let (_, body) = &configs("homeassistant", &t, &usb, None)[0];
            assert_eq!(body["device"].get("serial_number"), None, "{not_serial}");
        }
    }

    #[test]
    fn the_volume_slider_moves_in_the_phones_own_steps() {
        assert_eq!(volume_step(None), 1.0);
        assert_eq!(volume_step(Some(15)), 6.67);
        assert_eq!(volume_step(Some(25)), 4.0);
        assert_eq!(volume_step(Some(0)), 1.0);
        let t = Topics::new("droidwarden");
        let volume = configs("homeassistant", &t, &info(), Some(15))
            .into_iter()
            .find(|(topic, _)| topic.contains("/media_volume/"))
            .unwrap()
            .1;
        assert_eq!(volume["step"], 6.67);
        // A slider position maps to the phone's nearest step: 46.67 % is
        // step 7 of 15, which reads back as 47 %.
        assert_eq!(
            ha_command("media_volume", "46.67").unwrap().params_json(),
            json!({"stream": "music", "level": 47})
        );
    }

    #[test]
    fn controls_map_payloads_to_calls() {
        assert_eq!(ha_command("wifi", "OFF").unwrap().action_name(), "disable");
        assert_eq!(
            ha_command("brightness", "127.6").unwrap().params_json(),
            json!({"level": 128})
        );
        assert_eq!(
            ha_command("media_volume", "40").unwrap().params_json(),
            json!({"stream": "music", "level": 40})
        );
        assert_eq!(
            ha_command("media_play", "PRESS").unwrap().action_name(),
            "play"
        );
        for (control, bad) in [
            ("wifi", "on"),
            ("brightness", "300"),
            ("media_volume", "-1"),
            ("media_volume", "NaN"),
            ("media_pause", "ON"),
            ("battery", "ON"),
            ("nope", "ON"),
        ] {
            assert!(ha_command(control, bad).is_err(), "{control} {bad}");
        }
    }

    /// The entities users' Home Assistant set-ups know (their unique ids
    /// and topics) are still announced.
    #[test]
    fn the_released_entities_are_all_still_there() {
        let t = Topics::new("droidwarden");
        let ids: std::collections::BTreeSet<String> = configs("homeassistant", &t, &info(), None)
            .into_iter()
            .map(|(topic, _)| topic.split('/').nth(3).unwrap().to_owned())
            .collect();
        for id in [
            "battery",
            "charging",
            "wifi_connected",
            "bluetooth_on",
            "airplane_mode_on",
            "media_volume_level",
            "brightness_level",
            "last_action",
            "wifi",
            "bluetooth",
            "airplane_mode",
            "brightness",
            "media_volume",
            "media_play",
            "media_pause",
        ] {
            assert!(ids.contains(id), "{id}");
        }
    }
}
