//! The `screen_control` service.

use super::*;

actions!(
    /// `screen_control` actions.
    ScreenAction {
        /// Brightness, auto brightness, timeout, screen state.
        Status = "status",
        /// Set the brightness.
        SetBrightness = "set_brightness" {
            /// 0–255.
            level: u8,
        },
        /// Automatic brightness on or off.
        AutoBrightness = "auto_brightness" {
            /// Whether automatic brightness should be on.
            enabled: bool,
        },
        /// Set the screen-off timeout.
        SetTimeout = "set_timeout" {
            /// Milliseconds.
            ms: u32,
        },
        /// Wake the screen.
        Wake = "wake",
    }
);

pub(super) fn spec() -> ServiceSpec {
    ServiceSpec {
        node_type: "screenControlAutomation",
        id: "screen_control",
        description: "Brightness and screen timeout.",
        actions: vec![
            action(
                "status",
                Risk::Low,
                false,
                "Read the screen: brightness (0-255), auto brightness, timeout in ms, on or off.",
            )
            .returns(vec![
                req(
                    "brightness",
                    Schema::integer("", Some(0), Some(255)).or_null(),
                ),
                req("auto_brightness", Schema::boolean("")),
                req("timeout_ms", Schema::integer("", Some(0), None).or_null()),
                req("screen_on", Schema::boolean("")),
            ]),
            action(
                "set_brightness",
                Risk::Low,
                true,
                "Set the screen brightness, 0-255.",
            )
            .param(
                "level",
                true,
                Schema::integer("brightness 0-255", Some(0), Some(255)),
            )
            .returns(vec![req(
                "brightness",
                Schema::integer("", Some(0), Some(255)),
            )])
            .example(json!({"level": 128})),
            set_flag(
                "auto_brightness",
                Risk::Low,
                "Turn automatic brightness on or off.",
                "whether auto brightness should be on",
                "auto_brightness",
            ),
            action(
                "set_timeout",
                Risk::Low,
                true,
                "Set the screen-off timeout in milliseconds (5000 to 86400000).",
            )
            .param(
                "ms",
                true,
                Schema::integer("timeout in milliseconds", Some(5_000), Some(86_400_000)),
            )
            .returns(vec![req("timeout_ms", Schema::integer("", Some(0), None))])
            .example(json!({"ms": 60000})),
            action("wake", Risk::Low, true, "Wake the screen.")
                .returns(vec![req("screen_on", Schema::boolean(""))]),
        ],
        state: Some(|| Command::Screen(ScreenAction::Status)),
        home_assistant: vec![
            ha_sensor(
                "brightness_level",
                "Brightness level",
                "brightness",
                None,
                None,
            ),
            HaEntity {
                object_id: "brightness",
                name: "Brightness",
                kind: HaKind::Number {
                    field: "brightness",
                    max: 255,
                    step: HaStep::One,
                    unit: None,
                    set: |level| {
                        Command::Screen(ScreenAction::SetBrightness {
                            level: level.min(255) as u8,
                        })
                    },
                },
            },
        ],
        companion_event: None,
    }
}
