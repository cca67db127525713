//! The `screen_control` service.

use super::*;

actions!(
    /// `screen_control` actions.
    ScreenAction {
        Status = "status" (Low, reads)
            "Read the screen: brightness (0-255), auto brightness, timeout in ms, on or off."
        returns(vec![
            req("brightness", Schema::integer("", Some(0), Some(255)).or_null()),
            req("auto_brightness", Schema::boolean("")),
            req("timeout_ms", Schema::integer("", Some(0), None).or_null()),
            req("screen_on", Schema::boolean("")),
        ]),
        SetBrightness = "set_brightness" (Low, changes) "Set the screen brightness, 0-255." {
            /// 0–255.
            level: u8 = Schema::integer("brightness 0-255", Some(0), Some(255)),
        }
        returns(vec![req("brightness", Schema::integer("", Some(0), Some(255)))])
        example(Self::SetBrightness { level: 128 }),
        AutoBrightness = "auto_brightness" (Low, changes) "Turn automatic brightness on or off." {
            /// Whether automatic brightness should be on.
            enabled: bool = Schema::boolean("whether auto brightness should be on"),
        }
        returns(vec![req("auto_brightness", Schema::boolean(""))])
        example(Self::AutoBrightness { enabled: true }),
        SetTimeout = "set_timeout" (Low, changes)
            "Set the screen-off timeout in milliseconds (5000 to 86400000)."
        {
            /// Milliseconds.
            ms: u32 = Schema::integer("timeout in milliseconds", Some(5_000), Some(86_400_000)),
        }
        returns(vec![req("timeout_ms", Schema::integer("", Some(0), None))])
        example(Self::SetTimeout { ms: 60000 }),
        Wake = "wake" (Low, changes) "Wake the screen."
        returns(vec![req("screen_on", Schema::boolean(""))]),
    }
);

pub(super) fn spec() -> ServiceSpec {
    ServiceSpec {
        node_type: "screenControlAutomation",
        id: "screen_control",
        description: "Brightness and screen timeout.",
        actions: ScreenAction::specs(),
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
