//! The `device_state` service.

use super::*;

actions!(
    /// `device_state` actions.
    DeviceStateAction {
        Status = "status" (Low, reads)
            "Read power state: screen on or off, wakefulness, plugged in, battery saver."
        returns(vec![
            req("screen_on", Schema::boolean("")),
            req("wakefulness", Schema::string("Awake, Asleep, Dreaming, Dozing")),
            req("plugged", Schema::boolean("")),
            opt("power_save", Schema::boolean("battery saver")),
            opt("battery_level", Schema::integer("", None, None)),
        ]),
        ScreenOn = "screen_on" (Low, changes) "Wake the screen."
        returns(vec![req("screen_on", Schema::boolean(""))]),
        ScreenOff = "screen_off" (Medium, changes) "Turn the screen off."
        returns(vec![req("screen_on", Schema::boolean(""))]),
        PowerSave = "power_save" (Medium, changes) "Turn battery saver on or off." {
            /// Whether battery saver should be on.
            enabled: bool = Schema::boolean("whether battery saver should be on"),
        }
        returns(vec![req("power_save", Schema::boolean(""))])
        example(Self::PowerSave { enabled: true }),
        Storage = "storage" (Low, reads)
            "Read storage: size, used and available bytes and percent used of app data (/data) and of shared storage (/storage/emulated, the \"SD card\"); null when the phone has none."
        returns(vec![
            req("data", storage_volume("app data, /data").or_null()),
            req("external", storage_volume("shared storage").or_null()),
        ]),
    }
);

pub(super) fn spec() -> ServiceSpec {
    ServiceSpec {
        node_type: "deviceStateAutomation",
        id: "device_state",
        description: "Screen power and battery saver.",
        actions: DeviceStateAction::specs(),
        state: Some(|| Command::DeviceState(DeviceStateAction::Status)),
        home_assistant: Vec::new(),
        companion_event: None,
    }
}

fn storage_volume(description: &'static str) -> Schema {
    Schema::object(
        description,
        vec![
            req("mount", Schema::string("mount point")),
            req("filesystem", Schema::string("device or filesystem")),
            req("size_bytes", Schema::integer("", Some(0), None)),
            req("used_bytes", Schema::integer("", Some(0), None)),
            req("available_bytes", Schema::integer("", Some(0), None)),
            req("use_percent", Schema::integer("", Some(0), Some(100))),
        ],
    )
}
