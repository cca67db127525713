//! The `screen_control` service.

use super::*;

actions!(
    /// `screen_control` actions.
    ScreenAction {
        Status = "status" (Low, reads)
            "Read the screen: brightness (0-255), auto brightness, timeout in ms, on or off, locked or not."
        -> ScreenStatus,
        SetBrightness = "set_brightness" (Low, changes) "Set the screen brightness, 0-255." {
            /// Brightness 0-255.
            level: u8 = Schema::integer("", Some(0), Some(255)),
        }
        -> ScreenBrightness
        example(Self::SetBrightness { level: 128 }),
        AutoBrightness = "auto_brightness" (Low, changes) "Turn automatic brightness on or off." {
            /// Whether auto brightness should be on.
            enabled: bool,
        }
        -> AutoBrightness
        example(Self::AutoBrightness { enabled: true }),
        SetTimeout = "set_timeout" (Low, changes)
            "Set the screen-off timeout in milliseconds (5000 to 86400000)."
        {
            /// Timeout in milliseconds.
            ms: u32 = Schema::integer("", Some(5_000), Some(86_400_000)),
        }
        -> ScreenTimeout
        example(Self::SetTimeout { ms: 60000 }),
        Wake = "wake" (Low, changes)
            "Wake the screen (KEYCODE_WAKEUP; does nothing when it is on). It does not unlock: a phone with a lock screen stays locked."
        -> ScreenPower,
        Display = "display" (Low, reads)
            "Read the display: its size in pixels and its density in dpi, as apps see them (a size or density overridden with `wm` wins over the physical one)."
        -> DisplayInfo,
    }
);

records! {
    /// What `screen_control.status` answers, from the system settings and
    /// `dumpsys power`.
    ScreenStatus {
        /// `screen_brightness`, 0–255; null when the setting is unset.
        brightness: Option<i64> = Schema::integer("", Some(0), Some(255)),
        /// Whether `screen_brightness_mode` is automatic.
        auto_brightness: bool,
        /// `screen_off_timeout` in milliseconds; null when the setting is unset.
        timeout_ms: Option<i64> = Schema::integer("", Some(0), None),
        /// Whether the screen is on.
        screen_on: bool,
        /// Whether the lock screen (keyguard) shows; null when the phone's
        /// window manager does not say.
        locked: Option<bool>,
    }

    /// What `screen_control.set_brightness` answers.
    ScreenBrightness {
        /// The brightness now set, 0–255.
        brightness: u8 = Schema::integer("", Some(0), Some(255)),
    }

    /// What `screen_control.auto_brightness` answers.
    AutoBrightness {
        /// Whether automatic brightness is now on.
        auto_brightness: bool,
    }

    /// What `screen_control.set_timeout` answers.
    ScreenTimeout {
        /// The screen-off timeout now set, in milliseconds.
        timeout_ms: u32,
    }

    /// What `screen_control.display` answers.
    DisplayInfo {
        /// Width in pixels, in the display's natural orientation.
        width: u32,
        /// Height in pixels, in the display's natural orientation.
        height: u32,
        /// Density in dots per inch; a length of `n` dp is `n * density_dpi
        /// / 160` pixels.
        density_dpi: u32,
    }
}

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
