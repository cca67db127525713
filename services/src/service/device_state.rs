//! The `device_state` service.

use super::*;

actions!(
    /// `device_state` actions.
    DeviceStateAction {
        Status = "status" (Low, reads)
            "Read power state: screen on or off, wakefulness, plugged in, battery saver."
        -> PowerStatus,
        ScreenOn = "screen_on" (Low, changes) "Wake the screen." -> ScreenPower,
        ScreenOff = "screen_off" (Medium, changes) "Turn the screen off." -> ScreenPower,
        PowerSave = "power_save" (Medium, changes) "Turn battery saver on or off." {
            /// Whether battery saver should be on.
            enabled: bool,
        } -> PowerSave
        example(Self::PowerSave { enabled: true }),
        Storage = "storage" (Low, reads)
            "Read storage: size, used and available bytes and percent used of app data (/data) and of shared storage (/storage/emulated, the \"SD card\"); null when the phone has none."
        -> Storage,
    }
);

records! {
    /// What `device_state.status` answers.
    PowerStatus {
        /// Whether the screen is on.
        screen_on: bool,
        /// `Awake`, `Asleep`, `Dreaming` or `Dozing`.
        wakefulness: String,
        /// Whether the phone is plugged in.
        plugged: bool,
        /// Whether battery saver is on, when the phone says.
        power_save: Option<bool>,
        /// The battery level, when `dumpsys power` prints it.
        battery_level: Option<i64>,
    }

    /// What waking the screen or turning it off answers.
    ScreenPower {
        /// Whether the screen is now on.
        screen_on: bool,
    }

    /// What `device_state.power_save` answers.
    PowerSave {
        /// Whether battery saver is now on.
        power_save: bool,
    }

    /// What `device_state.storage` answers.
    Storage {
        /// App data, `/data`; null when the phone has none.
        data: Option<Filesystem>,
        /// Shared storage (`/storage/emulated`, the "SD card"); null when
        /// the phone has none.
        external: Option<Filesystem>,
    }

    /// One mounted filesystem from `df`, in bytes.
    Filesystem {
        /// Where it is mounted, e.g. `/data`.
        mount: String,
        /// The device or filesystem name, e.g. `/dev/block/dm-5`.
        filesystem: String,
        /// Total size.
        size_bytes: u64,
        /// Used.
        used_bytes: u64,
        /// Available to apps.
        available_bytes: u64,
        /// Used, in percent of the size (rounded; `df`'s own figure when it
        /// prints one).
        use_percent: u8 = Schema::integer("", Some(0), Some(100)),
    }
}

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
