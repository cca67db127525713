//! The `airplane_mode` service.

use super::*;

actions!(
    /// `airplane_mode` actions.
    AirplaneModeAction {
        Status = "status" (Low, reads) "Read whether airplane mode is on."
        -> AirplaneToggle,
        Enable = "enable" (High, changes)
            "Turn airplane mode on. Cuts all radios; a phone reached over the network will drop."
        -> AirplaneToggle,
        Disable = "disable" (Medium, changes) "Turn airplane mode off."
        -> AirplaneToggle,
    }
);

records! {
    /// What every `airplane_mode` action answers.
    AirplaneToggle {
        /// Whether airplane mode is (now) on.
        enabled: bool,
    }
}

pub(super) fn spec() -> ServiceSpec {
    ServiceSpec {
        node_type: "airplaneModeControl",
        id: "airplane_mode",
        description: "Airplane mode.",
        actions: AirplaneModeAction::specs(),
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
