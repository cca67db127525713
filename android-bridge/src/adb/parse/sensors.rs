//! Sensors: `dumpsys sensorservice`, and motion, ambient and proximity
//! readings derived from it.
//!
//! The `Sensor List:` prints one line per sensor (Android 7+):
//!
//! ```text
//! 0x00000001) Goldfish 3-axis Gyroscope | The Android Open Source Project | ver: 1 | type: android.sensor.gyroscope(4) | perm: n/a | flags: 0x00000050
//! ```
//!
//! (handle 0 prints as `0000000000)`). `Recent Sensor events:` then lists, per
//! sensor name, `NAME: last N events` and numbered lines
//! `\t 1 (ts=13.173068000, wall=15:57:54.185) 0.68, 0.00, 0.00, `; the
//! highest number is the newest (the one with the largest `ts` is used).
//! Several sensors can share a type (a hardware gyroscope and AOSP's
//! "Corrected Gyroscope", or the accelerometer-typed "Gyroscope Bias
//! (debug)"); like `SensorManager.getDefaultSensor`, the first one listed
//! with events wins.

use std::collections::BTreeMap;

pub use droidwarden_services::{AmbientConditions, MotionReading, ProximityReading, Vec3};
use serde::Serialize;

use super::error::ParseError;
use super::text::reject_device_error;

/// One sensor from the `Sensor List`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SensorInfo {
    /// The sensor handle.
    pub handle: u32,
    /// The sensor name, e.g. `Goldfish 3-axis Accelerometer`.
    pub name: String,
    /// The vendor, e.g. `AOSP`.
    pub vendor: String,
    /// The type string, e.g. `android.sensor.accelerometer`.
    pub kind: String,
    /// The numeric type, e.g. 1.
    pub type_id: u32,
}

/// The sensor list and the newest recorded event per sensor type.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SensorDump {
    /// All sensors, in the order listed.
    pub sensors: Vec<SensorInfo>,
    /// Per type string, the values of the newest event of the default sensor
    /// of that type (the first listed that has events).
    pub recent: BTreeMap<String, Vec<f64>>,
}

const COMMAND: &str = "dumpsys sensorservice";
const ACCELEROMETER: &str = "android.sensor.accelerometer";
const GYROSCOPE: &str = "android.sensor.gyroscope";
const LIGHT: &str = "android.sensor.light";
const PRESSURE: &str = "android.sensor.pressure";
const TEMPERATURE: &str = "android.sensor.ambient_temperature";
const HUMIDITY: &str = "android.sensor.relative_humidity";
const PROXIMITY: &str = "android.sensor.proximity";

/// Parses `dumpsys sensorservice`.
///
/// Events of a sensor missing from the list (a fragment) are dropped: their
/// type is unknown.
///
/// # Errors
/// [`ParseError::MissingField`] when there is neither a sensor line nor a
/// `Sensor List:` heading, [`ParseError::Device`] for a device error message.
pub fn sensors(output: &str) -> Result<SensorDump, ParseError> {
    reject_device_error(output)?;
    let sensors: Vec<SensorInfo> = output.lines().filter_map(sensor_line).collect();
    if sensors.is_empty() && !output.contains("Sensor List:") {
        return Err(ParseError::MissingField {
            command: COMMAND,
            field: "Sensor List",
        });
    }
    let events = newest_events(output);
    let mut recent = BTreeMap::new();
    for sensor in &sensors {
        let values = events.get(sensor.name.as_str()).or_else(|| {
            events
                .iter()
                .find(|(name, _)| squash(name) == squash(&sensor.name))
                .map(|(_, v)| v)
        });
        if let Some(values) = values {
            recent
                .entry(sensor.kind.clone())
                .or_insert_with(|| values.clone());
        }
    }
    Ok(SensorDump { sensors, recent })
}

/// Whitespace-insensitive form of a sensor name (the list pads names).
fn squash(name: &str) -> String {
    name.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `0x00000001) NAME | VENDOR | ver: 1 | type: KIND(ID) | perm: … | flags: …`
fn sensor_line(line: &str) -> Option<SensorInfo> {
    let (handle, rest) = line.split_once(") ")?;
    let handle = handle.trim();
    let hex = handle.strip_prefix("0x").unwrap_or(handle);
    if hex.is_empty() || hex.len() > 10 {
        return None;
    }
    let handle = u32::from_str_radix(hex, 16).ok()?;
    let fields: Vec<&str> = rest.split('|').map(str::trim).collect();
    let (kind, type_id) = fields
        .iter()
        .find_map(|f| f.strip_prefix("type:"))
        .and_then(|t| t.trim().strip_suffix(')')?.split_once('('))?;
    Some(SensorInfo {
        handle,
        name: (*fields.first()?).to_owned(),
        vendor: (*fields.get(1)?).to_owned(),
        kind: kind.to_owned(),
        type_id: type_id.parse().ok()?,
    })
}

/// Sensor name → values of its event with the largest timestamp.
fn newest_events(output: &str) -> BTreeMap<&str, Vec<f64>> {
    let mut newest: BTreeMap<&str, (f64, Vec<f64>)> = BTreeMap::new();
    let mut current: Option<&str> = None;
    let section = output
        .split_once("Recent Sensor events:")
        .map_or("", |(_, rest)| rest);
    for line in section.lines() {
        if let Some((name, _)) = line
            .split_once(": last ")
            .filter(|(_, n)| n.ends_with("events"))
        {
            current = Some(name.trim());
        } else if let (Some(name), Some((ts, values))) = (current, event_line(line)) {
            let slot = newest
                .entry(name)
                .or_insert((f64::NEG_INFINITY, Vec::new()));
            if ts >= slot.0 {
                *slot = (ts, values);
            }
        } else if !line.starts_with(char::is_whitespace) {
            current = None;
        }
    }
    newest.into_iter().map(|(k, (_, v))| (k, v)).collect()
}

/// `\t 1 (ts=13.173068000, wall=15:57:54.185) 0.68, 0.00, 0.00, `
fn event_line(line: &str) -> Option<(f64, Vec<f64>)> {
    let (head, data) = line.split_once(") ")?;
    let ts: f64 = head
        .split_once("(ts=")?
        .1
        .split(',')
        .next()?
        .trim()
        .parse()
        .ok()?;
    let values: Option<Vec<f64>> = data
        .split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(|v| v.parse::<f64>().ok().filter(|v| v.is_finite()))
        .collect();
    let values = values.filter(|v| !v.is_empty())?;
    ts.is_finite().then_some((ts, values))
}

fn vec3(dump: &SensorDump, kind: &str) -> Option<Vec3> {
    match dump.recent.get(kind)?.as_slice() {
        [x, y, z, ..] => Some(Vec3 {
            x: *x,
            y: *y,
            z: *z,
        }),
        _ => None,
    }
}

fn first_value(dump: &SensorDump, kind: &str) -> Option<f64> {
    dump.recent.get(kind)?.first().copied()
}

fn has(dump: &SensorDump, kind: &str) -> bool {
    dump.sensors.iter().any(|s| s.kind == kind)
}

/// Standard gravity, m/s².
const GRAVITY: f64 = 9.81;

/// The length of a three-axis reading.
fn magnitude(v: Vec3) -> f64 {
    (v.x * v.x + v.y * v.y + v.z * v.z).sqrt()
}

/// Motion from the newest accelerometer and gyroscope events.
pub fn motion(dump: &SensorDump) -> MotionReading {
    let accelerometer = vec3(dump, ACCELEROMETER);
    let gyroscope = vec3(dump, GYROSCOPE);
    let shaking = accelerometer.map(|a| (magnitude(a) - GRAVITY).abs() > 0.5);
    let turning = gyroscope.map(|g| magnitude(g) > 0.1);
    let moving = match (shaking, turning) {
        (None, None) => None,
        (a, g) => Some(a.unwrap_or(false) || g.unwrap_or(false)),
    };
    MotionReading {
        accelerometer,
        gyroscope,
        moving,
    }
}

/// Ambient light, pressure, temperature and humidity from the newest events.
pub fn ambient(dump: &SensorDump) -> AmbientConditions {
    let available = [
        (LIGHT, "light"),
        (PRESSURE, "pressure"),
        (TEMPERATURE, "temperature"),
        (HUMIDITY, "humidity"),
    ]
    .into_iter()
    .filter(|(kind, _)| has(dump, kind))
    .map(|(_, short)| short.to_owned())
    .collect();
    AmbientConditions {
        light_lux: first_value(dump, LIGHT),
        pressure_hpa: first_value(dump, PRESSURE),
        temperature_c: first_value(dump, TEMPERATURE),
        humidity_percent: first_value(dump, HUMIDITY),
        available,
    }
}

/// The proximity sensor's newest distance.
pub fn proximity(dump: &SensorDump) -> ProximityReading {
    let distance_cm = first_value(dump, PROXIMITY);
    ProximityReading {
        available: has(dump, PROXIMITY),
        distance_cm,
        near: distance_cm.map(|d| d < 1.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adb::parse::failure;

    const FIXTURE: &str = fixture!("dumpsys-sensorservice/adbjsoncli-emulator-17.txt");

    /// The fixture's sensor list followed by a plausible `Recent Sensor
    /// events:` section in AOSP's format (the fixture stops before it).
    fn with_events() -> String {
        format!(
            "{FIXTURE}Recent Sensor events:
Goldfish 3-axis Accelerometer: last 3 events
\t 1 (ts=314.171581772, wall=16:02:55.184) 0.00, 9.81, 0.00, 
\t 2 (ts=314.271581772, wall=16:02:55.284) 0.10, 9.70, 0.30, 
\t 3 (ts=315.071581772, wall=16:02:56.084) 1.50, 11.20, 0.40, 
Gyroscope Bias (debug): last 1 events
\t 1 (ts=316.000000000, wall=16:02:57.000) 0.00, 0.00, 0.00, 
Goldfish 3-axis Gyroscope: last 2 events
\t 1 (ts=315.188202732, wall=16:02:56.200) 0.00, 0.00, 0.00, 
\t 2 (ts=315.193202732, wall=16:02:56.205) 0.02, -0.01, 0.00, 
Goldfish Pressure sensor: last 1 events
\t 1 (ts=314.171581772, wall=16:02:55.184) 1013.25, 0.00, 0.00, 
Goldfish Light sensor: last 1 events
\t 1 (ts=12.000000000, wall=15:57:53.000) 372.00, 
Goldfish Proximity sensor: last 2 events
\t 1 (ts=11.000000000, wall=15:57:52.000) 5.00, 
\t 2 (ts=12.500000000, wall=15:57:53.500) 0.00, 
Unlisted Sensor: last 1 events
\t 1 (ts=1.000000000, wall=15:57:42.000) 7.00, 
Active sensors:
"
        )
    }

    #[test]
    fn fixture_sensor_list() {
        let dump = sensors(FIXTURE).expect("parses");
        assert_eq!(dump.sensors.len(), 20);
        assert_eq!(
            dump.sensors[0],
            SensorInfo {
                handle: 0,
                name: "Goldfish 3-axis Accelerometer".into(),
                vendor: "The Android Open Source Project".into(),
                kind: "android.sensor.accelerometer".into(),
                type_id: 1,
            }
        );
        assert_eq!(
            dump.sensors[6],
            SensorInfo {
                handle: 6,
                name: "Goldfish Light sensor".into(),
                vendor: "The Android Open Source Project".into(),
                kind: "android.sensor.light".into(),
                type_id: 5,
            }
        );
        assert_eq!(dump.sensors[19].handle, 0x5f79_7072);
        assert_eq!(dump.sensors[19].vendor, "AOSP");
        assert!(dump.recent.is_empty());
        assert_eq!(
            motion(&dump),
            MotionReading {
                accelerometer: None,
                gyroscope: None,
                moving: None
            }
        );
        assert_eq!(
            ambient(&dump).available,
            vec!["light", "pressure", "temperature", "humidity"]
        );
        assert_eq!(
            proximity(&dump),
            ProximityReading {
                available: true,
                distance_cm: None,
                near: None
            }
        );
    }

    #[test]
    fn recent_events_and_helpers() {
        let dump = sensors(&with_events()).expect("parses");
        assert_eq!(dump.recent[ACCELEROMETER], vec![1.5, 11.2, 0.4]);
        assert_eq!(dump.recent[GYROSCOPE], vec![0.02, -0.01, 0.0]);
        assert_eq!(dump.recent.len(), 5);
        let m = motion(&dump);
        assert_eq!(
            m.accelerometer,
            Some(Vec3 {
                x: 1.5,
                y: 11.2,
                z: 0.4
            })
        );
        assert_eq!(m.moving, Some(true));
        let a = ambient(&dump);
        assert_eq!(
            (
                a.light_lux,
                a.pressure_hpa,
                a.temperature_c,
                a.humidity_percent
            ),
            (Some(372.0), Some(1013.25), None, None)
        );
        assert_eq!(
            proximity(&dump),
            ProximityReading {
                available: true,
                distance_cm: Some(0.0),
                near: Some(true)
            }
        );
    }

    #[test]
    fn still_phone_and_garbage() {
        let text = "Sensor List:
0x01010001) ICM45631 Accelerometer    | Invensense      | ver: 1 | type: android.sensor.accelerometer(1) | perm: n/a | flags: 0x000009c0
Recent Sensor events:
ICM45631 Accelerometer: last 1 events
\t 1 (ts=5.0, wall=10:00:00.000) 0.05, 0.10, 9.79, 
";
        let dump = sensors(text).expect("parses");
        assert_eq!(motion(&dump).moving, Some(false));
        assert_eq!(failure(sensors("garbage")), "missing_field");
        assert_eq!(
            sensors("Sensor List:\n"),
            Ok(SensorDump {
                sensors: vec![],
                recent: BTreeMap::new()
            })
        );
    }
}
