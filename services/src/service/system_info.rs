//! The `system_info` service.

use super::*;

actions!(
    /// `system_info` actions.
    SystemInfoAction {
        Info = "info" (Low, reads)
            "Read device facts: model, manufacturer, Android version and SDK level, build, memory and uptime."
        -> SystemInfo,
    }
);

records! {
    /// What `system_info.info` answers: system properties, `/proc/meminfo`
    /// and `/proc/uptime`.
    SystemInfo {
        /// `ro.product.model`, e.g. `Pixel 8`.
        model: String,
        /// `ro.product.manufacturer`.
        manufacturer: String,
        /// `ro.product.brand`.
        brand: String,
        /// `ro.product.device` (the device code name).
        device: String,
        /// `ro.build.version.release`, e.g. `14`.
        android_version: String,
        /// The API level, `ro.build.version.sdk`, e.g. 34.
        sdk: Option<u32>,
        /// `ro.build.id`.
        build_id: String,
        /// `ro.serialno`.
        serial: Option<String>,
        /// `MemTotal`; null when the phone hides `/proc/meminfo`.
        memory_total_kb: Option<u64>,
        /// `MemAvailable` (kernels before 3.14 lack it).
        memory_available_kb: Option<u64>,
        /// Seconds since boot, from `/proc/uptime`.
        uptime_s: Option<f64>,
    }
}

pub(super) fn spec() -> ServiceSpec {
    ServiceSpec {
        node_type: "systemInfo",
        id: "system_info",
        description: "Device model, Android version, memory and uptime.",
        actions: SystemInfoAction::specs(),
        state: None,
        home_assistant: Vec::new(),
        companion_event: None,
    }
}
