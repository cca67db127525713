//! The `system_info` service.

use super::*;

actions!(
    /// `system_info` actions.
    SystemInfoAction {
        Info = "info" (Low, reads)
            "Read device facts: model, manufacturer, Android version and SDK level, build, memory and uptime."
        returns(vec![
            req("model", Schema::string("")),
            req("manufacturer", Schema::string("")),
            req("brand", Schema::string("")),
            req("device", Schema::string("")),
            req("android_version", Schema::string("")),
            opt("sdk", Schema::integer("API level", None, None)),
            req("build_id", Schema::string("")),
            opt("serial", Schema::string("")),
            opt("memory_total_kb", Schema::integer("", Some(0), None)),
            opt("memory_available_kb", Schema::integer("", Some(0), None)),
            opt("uptime_s", Schema::number("seconds since boot")),
        ]),
    }
);

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
