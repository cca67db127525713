//! The `device_state` service.

use super::*;

actions!(
    /// `device_state` actions.
    DeviceStateAction {
        /// Screen, power and power-save state.
        Status = "status",
        /// Wake the screen.
        ScreenOn = "screen_on",
        /// Turn the screen off.
        ScreenOff = "screen_off",
        /// Battery saver on or off.
        PowerSave = "power_save" {
            /// Whether battery saver should be on.
            enabled: bool,
        },
        /// Size, used and free space of app data and shared storage.
        Storage = "storage",
    }
);

pub(super) fn spec() -> ServiceSpec {
    ServiceSpec {
        node_type: "deviceStateAutomation",
        id: "device_state",
        description: "Screen power and battery saver.",
        actions: vec![
            action(
                "status",
                Risk::Low,
                false,
                "Read power state: screen on or off, wakefulness, plugged in, battery saver.",
            )
            .returns(vec![
                req("screen_on", Schema::boolean("")),
                req(
                    "wakefulness",
                    Schema::string("Awake, Asleep, Dreaming, Dozing"),
                ),
                req("plugged", Schema::boolean("")),
                opt("power_save", Schema::boolean("battery saver")),
                opt("battery_level", Schema::integer("", None, None)),
            ]),
            action("screen_on", Risk::Low, true, "Wake the screen.")
                .returns(vec![req("screen_on", Schema::boolean(""))]),
            action("screen_off", Risk::Medium, true, "Turn the screen off.")
                .returns(vec![req("screen_on", Schema::boolean(""))]),
            set_flag("power_save", Risk::Medium, "Turn battery saver on or off.", "whether battery saver should be on", "power_save"),
            action(
                "storage",
                Risk::Low,
                false,
                "Read storage: size, used and available bytes and percent used of app data (/data) and of shared storage (/storage/emulated, the \"SD card\"); null when the phone has none.",
            )
            .returns(vec![
                req("data", storage_volume("app data, /data").or_null()),
                req("external", storage_volume("shared storage").or_null()),
            ]),
        ],
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
