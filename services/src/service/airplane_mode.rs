//! The `airplane_mode` service.

use super::*;

actions!(
    /// `airplane_mode` actions.
    AirplaneModeAction {
        /// Whether airplane mode is on.
        Status = "status",
        /// Turn airplane mode on.
        Enable = "enable",
        /// Turn airplane mode off.
        Disable = "disable",
    }
);

pub(super) fn spec() -> ServiceSpec {
    ServiceSpec {
        node_type: "airplaneModeControl",
        id: "airplane_mode",
        description: "Airplane mode.",
        actions: vec![
            action("status", Risk::Low, false, "Read whether airplane mode is on.").returns(toggle_result("airplane mode is on")),
            action("enable", Risk::High, true, "Turn airplane mode on. Cuts all radios; a phone reached over the network will drop.").returns(toggle_result("airplane mode is on")),
            action("disable", Risk::Medium, true, "Turn airplane mode off.").returns(toggle_result("airplane mode is on")),
        ],
        state: Some(|| Command::AirplaneMode(AirplaneModeAction::Status)),
        home_assistant: vec![
            HaEntity { object_id: "airplane_mode_on", name: "Airplane mode on", kind: HaKind::BinarySensor { field: "enabled", device_class: None } },
            ha_switch("airplane_mode", "Airplane mode", || Command::AirplaneMode(AirplaneModeAction::Enable), || Command::AirplaneMode(AirplaneModeAction::Disable)),
        ],
        companion_event: None,
    }
}
