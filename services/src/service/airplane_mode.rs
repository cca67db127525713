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
    let [enable, disable] = switch_actions(
        "airplane mode is on",
        (
            Risk::High,
            "Turn airplane mode on. Cuts all radios; a phone reached over the network will drop.",
        ),
        (Risk::Medium, "Turn airplane mode off."),
    );
    ServiceSpec {
        node_type: "airplaneModeControl",
        id: "airplane_mode",
        description: "Airplane mode.",
        actions: vec![
            action(
                "status",
                Risk::Low,
                false,
                "Read whether airplane mode is on.",
            )
            .returns(toggle_result("airplane mode is on")),
            enable,
            disable,
        ],
        state: Some(|| Command::AirplaneMode(AirplaneModeAction::Status)),
        home_assistant: vec![
            ha_binary("airplane_mode_on", "Airplane mode on", "enabled", None),
            ha_switch(
                "airplane_mode",
                "Airplane mode",
                || Command::AirplaneMode(AirplaneModeAction::Enable),
                || Command::AirplaneMode(AirplaneModeAction::Disable),
            ),
        ],
        companion_event: None,
    }
}
