//! The `camera_control` service over ADB (taking a photo needs the
//! companion app).
//!
//! Cameras: `dumpsys media.camera`.
//!
//! The camera service dump has changed shape several times; the parser reads
//! the sections that name a camera and the facing lines inside them:
//!
//! - Android 5–7: `Camera 0 static information:` then `  Facing: BACK`;
//! - Android 8+: `== Camera device 0 dynamic info: ==`,
//!   `== Camera device 0 static information: ==` or
//!   `== Camera HAL device device@3.4/internal/0 (v3.4) static information: ==`,
//!   with `    Facing: Back` under `API1 info:` and the metadata entry
//!   `android.lens.facing (80005): byte[1]` followed by `[BACK ]` (or `[1 ]`);
//! - `Device 0 maps to "0"` in the global section lists the public ids.

use super::*;
use crate::adb::parse::ParseError;
use crate::adb::parse::text::reject_device_error;
use droidwarden_services::{CameraAction, CameraList, Command};

pub(super) async fn run(sh: &dyn Shell, action: &CameraAction) -> Result<Value, BridgeError> {
    match action {
        CameraAction::CameraInfo => {
            let cameras = read(sh, &["dumpsys", "media.camera"], cameras).await?;
            answer(CameraList {
                count: cameras.len() as u64,
                cameras,
            })
        }
        CameraAction::TakePhoto { .. } => Err(unsupported(sh, &Command::Camera(action.clone()))),
    }
}

pub use droidwarden_services::CameraInfo;

/// Parses `dumpsys media.camera`, cameras in the order first mentioned.
///
/// # Errors
/// [`ParseError::MissingField`] when the output names no camera and has no
/// `Number of camera devices` line, [`ParseError::Device`] for a device
/// error message.
pub fn cameras(output: &str) -> Result<Vec<CameraInfo>, ParseError> {
    reject_device_error(output)?;
    let mut found: Vec<CameraInfo> = Vec::new();
    let mut current: Option<usize> = None;
    let mut lines = output.lines();
    while let Some(line) = lines.next() {
        if let Some(id) = section_id(line).or_else(|| mapped_id(line)) {
            current = Some(entry(&mut found, id));
            continue;
        }
        let facing = facing_line(line).or_else(|| {
            line.trim()
                .starts_with("android.lens.facing")
                .then(|| lens_facing(lines.clone()))
                .flatten()
        });
        // The first facing printed for a camera wins.
        if let (Some(facing), Some(i)) = (facing, current)
            && let Some(cam) = found.get_mut(i).filter(|c| c.facing == "unknown")
        {
            cam.facing = facing.to_owned();
        }
    }
    if found.is_empty() && !output.contains("Number of camera devices") {
        return Err(ParseError::MissingField {
            command: "dumpsys media.camera",
            field: "Number of camera devices",
        });
    }
    Ok(found)
}

/// The index of camera `id` in `found`, adding it if new.
fn entry(found: &mut Vec<CameraInfo>, id: String) -> usize {
    if let Some(i) = found.iter().position(|c| c.id == id) {
        return i;
    }
    found.push(CameraInfo {
        id,
        facing: "unknown".to_owned(),
    });
    found.len() - 1
}

/// The camera id of a section heading, if `line` is one.
fn section_id(line: &str) -> Option<String> {
    let t = line.trim().trim_matches('=').trim();
    if !t.contains("info") {
        return None;
    }
    let id = if let Some(rest) = t.strip_prefix("Camera HAL device ") {
        let name = rest.split_whitespace().next()?;
        name.rsplit('/').next()?
    } else if let Some(rest) = t.strip_prefix("Camera device ") {
        rest.split_whitespace().next()?
    } else {
        // `Camera 0 static information:`, but not `Camera Provider HAL … info`.
        let id = t.strip_prefix("Camera ")?.split_whitespace().next()?;
        id.starts_with(|c: char| c.is_ascii_digit()).then_some(id)?
    };
    let id = id.trim_end_matches(':');
    let plausible = !id.is_empty()
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    plausible.then(|| id.to_owned())
}

/// `    Device 0 maps to "0"` → `0`.
fn mapped_id(line: &str) -> Option<String> {
    let (_, quoted) = line
        .trim()
        .strip_prefix("Device ")?
        .split_once(" maps to ")?;
    let id = quoted.trim().trim_matches('"');
    (!id.is_empty()).then(|| id.to_owned())
}

/// `Facing: BACK` / `Facing: Front`.
fn facing_line(line: &str) -> Option<&'static str> {
    facing_name(line.trim().strip_prefix("Facing:")?)
}

/// The `[BACK ]` or `[1 ]` line after an `android.lens.facing` entry.
fn lens_facing<'a>(mut rest: impl Iterator<Item = &'a str>) -> Option<&'static str> {
    let value = rest.find(|l| !l.trim().is_empty())?.trim();
    let value = value.strip_prefix('[')?.strip_suffix(']')?;
    match value.trim() {
        "0" => Some("front"),
        "1" => Some("back"),
        "2" => Some("external"),
        other => facing_name(other),
    }
}

fn facing_name(value: &str) -> Option<&'static str> {
    match value.trim().to_ascii_lowercase().as_str() {
        "back" => Some("back"),
        "front" => Some("front"),
        "external" => Some("external"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adb::parse::failure;

    fn cam(id: &str, facing: &str) -> CameraInfo {
        CameraInfo {
            id: id.into(),
            facing: facing.into(),
        }
    }

    #[test]
    fn android_12_hal_sections() {
        let text = "\
== Service global info: ==

Number of camera devices: 2
Number of normal camera devices: 2
Number of public camera devices visible to API1: 2
    Device 0 maps to \"0\"
    Device 1 maps to \"1\"
Active Camera Clients:
[]
Allowed user IDs: 0

== Camera service events log (most recent at top): ==
  05-23 15:57:50 : USER_SWITCH previous allowed user IDs: <None>, current allowed user IDs: 0

== Camera device 0 dynamic info: ==
  Device 0 is closed, no client instance
== Camera device 1 dynamic info: ==
  Device 1 is closed, no client instance
== Camera Provider HAL internal/0 (v2.7, remote) static info: 2 devices: ==
== Camera HAL device device@3.7/internal/0 (v3.7) static information: ==
  Resource cost: 100
  Conflicting devices: None
  API1 info:
    Has a flash unit: true
    Facing: Back
    Orientation: 90
  API2 camera characteristics:
    Dumping camera metadata array: 90 / 90 entries, 6228 / 6228 bytes of extra data.
      android.lens.facing (80005): byte[1]
        [BACK ]
== Camera HAL device device@3.7/internal/1 (v3.7) static information: ==
  Resource cost: 100
  API2 camera characteristics:
      android.lens.facing (80005): byte[1]
        [FRONT ]
";
        assert_eq!(cameras(text), Ok(vec![cam("0", "back"), cam("1", "front")]));
    }

    #[test]
    fn external_usb_camera() {
        let text = "\
Number of camera devices: 1
    Device 0 maps to \"0\"
== Camera device 0 dynamic info: ==
  Device 0 is closed, no client instance
== Camera Provider HAL external/0-0 (v2.5, remote) static info: 1 devices: ==
== Camera HAL device device@3.4/external/0 (v3.4) static information: ==
  API1 info:
    Has a flash unit: false
    Facing: Front
  API2 camera characteristics:
      android.lens.facing (80005): byte[1]
        [2 ]
";
        // The API1 view says front; it is read first and kept.
        assert_eq!(cameras(text), Ok(vec![cam("0", "front")]));
    }

    #[test]
    fn android_5_format_and_empty() {
        let text = "\
Camera module HAL API version: 0x204
Number of camera devices: 2
Camera 0 static information:
  Facing: BACK
  Orientation: 90
Camera 1 static information:
  Facing: FRONT
  Orientation: 270
";
        assert_eq!(cameras(text), Ok(vec![cam("0", "back"), cam("1", "front")]));
        assert_eq!(cameras("Number of camera devices: 0\n"), Ok(vec![]));
        assert_eq!(failure(cameras("nothing")), "missing_field");
        assert_eq!(
            failure(cameras("Can't find service: media.camera\n")),
            "device"
        );
    }

    #[test]
    fn reads_any_text_without_panicking() {
        crate::adb::parse::tests::each_sample(|text| {
            let _ = cameras(text);
        });
    }
}
