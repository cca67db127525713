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
use serde_json::{Value, json};

/// A control that Home Assistant can send to, and what droidwarden does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Control {
    Wifi,
    Bluetooth,
    AirplaneMode,
    Brightness,
    Volume,
    Play,
    Pause,
}

impl Control {
    pub(crate) const ALL: [Control; 7] = [
        Control::Wifi,
        Control::Bluetooth,
        Control::AirplaneMode,
        Control::Brightness,
        Control::Volume,
        Control::Play,
        Control::Pause,
    ];

    /// The object id, also the level in the command topic.
    pub(crate) fn object_id(self) -> &'static str {
        match self {
            Self::Wifi => "wifi",
            Self::Bluetooth => "bluetooth",
            Self::AirplaneMode => "airplane_mode",
            Self::Brightness => "brightness",
            Self::Volume => "media_volume",
            Self::Play => "media_play",
            Self::Pause => "media_pause",
        }
    }

    pub(crate) fn from_object_id(id: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.object_id() == id)
    }

    /// The call a command payload asks for: `(service, action, params)`.
    ///
    /// # Errors
    /// A message naming what the payload should have been.
    pub(crate) fn call_for(
        self,
        payload: &str,
    ) -> Result<(&'static str, &'static str, Value), String> {
        let payload = payload.trim();
        let switch = |service: &'static str| match payload {
            "ON" => Ok((service, "enable", json!({}))),
            "OFF" => Ok((service, "disable", json!({}))),
            other => Err(format!(
                "expected ON or OFF, got {:?}",
                other.chars().take(40).collect::<String>()
            )),
        };
        let number = |max: i64| {
            payload
                .parse::<f64>()
                .ok()
                .filter(|n| n.is_finite() && *n >= 0.0 && *n <= max as f64)
                .map(|n| n.round() as i64)
                .ok_or_else(|| {
                    format!(
                        "expected a number from 0 to {max}, got {:?}",
                        payload.chars().take(40).collect::<String>()
                    )
                })
        };
        match self {
            Self::Wifi => switch("wifi_automation"),
            Self::Bluetooth => switch("bluetooth_automation"),
            Self::AirplaneMode => switch("airplane_mode"),
            Self::Brightness => Ok((
                "screen_control",
                "set_brightness",
                json!({ "level": number(255)? }),
            )),
            Self::Volume => Ok((
                "audio_automation",
                "set_volume",
                json!({ "stream": "music", "level": number(100)? }),
            )),
            Self::Play | Self::Pause if payload != "PRESS" => Err(format!(
                "expected PRESS, got {:?}",
                payload.chars().take(40).collect::<String>()
            )),
            Self::Play => Ok(("media_control", "play", json!({}))),
            Self::Pause => Ok(("media_control", "pause", json!({}))),
        }
    }
}

/// Home Assistant's node id for a device: letters, digits, `_` and `-` only.
pub(crate) fn node_id(device: &str) -> String {
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

fn entities(t: &Topics, device: &str, volume_max: Option<u64>) -> Vec<Entity> {
    let state = |service: &str| t.state(device, service);
    let on_off = |field: &str| format!("{{{{ 'ON' if value_json.{field} else 'OFF' }}}}");
    let mut out = vec![
        Entity {
            component: "sensor",
            object_id: "battery",
            name: "Battery",
            body: json!({
            "state_topic": state("battery"), "value_template": "{{ value_json.level_percent }}",
            "device_class": "battery", "unit_of_measurement": "%", "state_class": "measurement" }),
        },
        Entity {
            component: "binary_sensor",
            object_id: "charging",
            name: "Charging",
            body: json!({
            "state_topic": state("battery"), "value_template": on_off("charging"),
            "device_class": "battery_charging" }),
        },
        Entity {
            component: "binary_sensor",
            object_id: "wifi_connected",
            name: "Wi-Fi connected",
            body: json!({
            "state_topic": state("wifi_automation"), "value_template": on_off("connected"),
            "device_class": "connectivity" }),
        },
        Entity {
            component: "binary_sensor",
            object_id: "bluetooth_on",
            name: "Bluetooth on",
            body: json!({
            "state_topic": state("bluetooth_automation"), "value_template": on_off("enabled") }),
        },
        Entity {
            component: "binary_sensor",
            object_id: "airplane_mode_on",
            name: "Airplane mode on",
            body: json!({
            "state_topic": state("airplane_mode"), "value_template": on_off("enabled") }),
        },
        Entity {
            component: "sensor",
            object_id: "media_volume_level",
            name: "Media volume level",
            body: json!({
            "state_topic": state("audio_automation"), "value_template": "{{ value_json.level }}",
            "unit_of_measurement": "%", "state_class": "measurement" }),
        },
        Entity {
            component: "sensor",
            object_id: "brightness_level",
            name: "Brightness level",
            body: json!({
            "state_topic": state("screen_control"), "value_template": "{{ value_json.brightness }}",
            "state_class": "measurement" }),
        },
        Entity {
            component: "sensor",
            object_id: "last_action",
            name: "Last action",
            body: json!({
            "state_topic": t.last_status(device),
            "value_template": "{{ value_json.state }}",
            "json_attributes_topic": t.last_status(device) }),
        },
    ];
    for control in Control::ALL {
        let command_topic = t.ha_command(device, control.object_id());
        let (component, name, body) = match control {
            Control::Wifi | Control::Bluetooth | Control::AirplaneMode => {
                let (service, name) = match control {
                    Control::Wifi => ("wifi_automation", "Wi-Fi"),
                    Control::Bluetooth => ("bluetooth_automation", "Bluetooth"),
                    _ => ("airplane_mode", "Airplane mode"),
                };
                (
                    "switch",
                    name,
                    json!({
                    "state_topic": state(service), "value_template": on_off("enabled"),
                    "command_topic": command_topic, "payload_on": "ON", "payload_off": "OFF",
                    "state_on": "ON", "state_off": "OFF" }),
                )
            }
            Control::Brightness => (
                "number",
                "Brightness",
                json!({
                "state_topic": state("screen_control"), "value_template": "{{ value_json.brightness }}",
                "command_topic": command_topic, "min": 0, "max": 255, "step": 1, "mode": "slider" }),
            ),
            Control::Volume => (
                "number",
                "Media volume",
                json!({
                "state_topic": state("audio_automation"), "value_template": "{{ value_json.level }}",
                "command_topic": command_topic, "min": 0, "max": 100, "step": volume_step(volume_max),
                "unit_of_measurement": "%", "mode": "slider" }),
            ),
            Control::Play => (
                "button",
                "Play",
                json!({ "command_topic": command_topic, "payload_press": "PRESS" }),
            ),
            Control::Pause => (
                "button",
                "Pause",
                json!({ "command_topic": command_topic, "payload_press": "PRESS" }),
            ),
        };
        out.push(Entity {
            component,
            object_id: control.object_id(),
            name,
            body,
        });
    }
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
            Control::Volume.call_for("46.67").unwrap().2,
            json!({"stream": "music", "level": 47})
        );
    }

    #[test]
    fn controls_map_payloads_to_calls() {
        assert_eq!(Control::Wifi.call_for("OFF").unwrap().1, "disable");
        assert_eq!(
            Control::Brightness.call_for("127.6").unwrap().2,
            json!({"level": 128})
        );
        assert_eq!(
            Control::Volume.call_for("40").unwrap().2,
            json!({"stream": "music", "level": 40})
        );
        assert_eq!(Control::Play.call_for("PRESS").unwrap().1, "play");
        for (control, bad) in [
            (Control::Wifi, "on"),
            (Control::Brightness, "300"),
            (Control::Volume, "-1"),
            (Control::Volume, "NaN"),
            (Control::Pause, "ON"),
        ] {
            assert!(control.call_for(bad).is_err(), "{control:?} {bad}");
        }
        assert_eq!(
            Control::from_object_id("media_volume"),
            Some(Control::Volume)
        );
    }
}
