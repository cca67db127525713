//! The `screen_control` service over ADB: brightness and timeout settings,
//! waking the screen, and the display's size and density (`wm size`, `wm
//! density`).

use super::*;
use crate::adb::parse::ParseError;
use crate::adb::parse::text::reject_device_error;
use droidwarden_services::{
    AutoBrightness, DisplayInfo, ScreenAction, ScreenBrightness, ScreenPower, ScreenStatus,
    ScreenTimeout,
};

pub(super) async fn run(sh: &dyn Shell, action: &ScreenAction) -> Result<Value, BridgeError> {
    match action {
        ScreenAction::Status => {
            let brightness = number_setting(sh, "system", "screen_brightness").await?;
            let mode = setting(sh, "system", "screen_brightness_mode").await?;
            let timeout = number_setting(sh, "system", "screen_off_timeout").await?;
            let power = read(sh, &["dumpsys", "power"], parse::power).await?;
            // The lock state is a bonus: a phone whose window manager
            // cannot be read still reports the rest.
            let locked = read(sh, &["dumpsys", "window", "displays"], parse::keyguard)
                .await
                .ok()
                .and_then(|k| k.locked);
            answer(ScreenStatus {
                brightness,
                auto_brightness: mode.as_deref() == Some("1"),
                timeout_ms: timeout,
                screen_on: power.screen_on,
                locked,
            })
        }
        ScreenAction::SetBrightness { level } => {
            put_setting(sh, "screen_brightness", &level.to_string()).await?;
            answer(ScreenBrightness { brightness: *level })
        }
        ScreenAction::AutoBrightness { enabled } => {
            put_setting(
                sh,
                "screen_brightness_mode",
                if *enabled { "1" } else { "0" },
            )
            .await?;
            answer(AutoBrightness {
                auto_brightness: *enabled,
            })
        }
        ScreenAction::SetTimeout { ms } => {
            put_setting(sh, "screen_off_timeout", &ms.to_string()).await?;
            answer(ScreenTimeout { timeout_ms: *ms })
        }
        ScreenAction::Display => {
            let (width, height) = read(sh, &["wm", "size"], parse::wm_size).await?;
            let density_dpi = read(sh, &["wm", "density"], wm_density).await?;
            answer(DisplayInfo {
                width,
                height,
                density_dpi,
            })
        }
        ScreenAction::Wake => {
            keyevent(sh, "KEYCODE_WAKEUP").await?;
            answer(ScreenPower { screen_on: true })
        }
    }
}

/// The display density from `wm density`, in dpi: the override when one is
/// set (`Override density: 480` below `Physical density: 420`), else the
/// physical density.
///
/// # Errors
/// [`ParseError::MissingField`] without a density line that reads as a
/// positive number, [`ParseError::Device`] for a device error message.
pub fn wm_density(output: &str) -> Result<u32, ParseError> {
    reject_device_error(output)?;
    parse::wm_value(
        output,
        "wm density",
        ("Override density:", "Physical density:"),
        |v| v.parse().ok().filter(|dpi: &u32| *dpi > 0),
    )
}

#[cfg(test)]
mod tests {
    use super::super::tests::{ScriptedShell, run};
    use super::*;
    use serde_json::json;

    const SIZE: &str = fixture!("wm-size/dipendrasharma-guide-example-unknown.txt");
    const DENSITY: &str = fixture!("wm-density/dipendrasharma-guide-example-unknown.txt");

    #[test]
    fn density_from_a_real_output_and_an_override() {
        assert_eq!(wm_density(DENSITY), Ok(300));
        assert_eq!(
            wm_density("Physical density: 420\nOverride density: 480\n"),
            Ok(480)
        );
        for unreadable in [
            "",
            "Physical density: \n",
            "Physical density: 0\n",
            "Usage: wm",
        ] {
            assert!(
                matches!(wm_density(unreadable), Err(ParseError::MissingField { .. })),
                "{unreadable:?}"
            );
        }
        assert!(matches!(
            wm_density("Can't find service: window\n"),
            Err(ParseError::Device(_))
        ));
    }

    #[tokio::test]
    async fn display_reads_the_size_and_the_density() {
        let sh = ScriptedShell::default()
            .answer("wm size", SIZE)
            .answer("wm density", DENSITY);
        let v = run(&sh, "screen_control.display", json!({})).await.unwrap();
        assert_eq!(v, json!({"width": 720, "height": 1600, "density_dpi": 300}));
    }

    #[test]
    fn reads_any_text_without_panicking() {
        crate::adb::parse::tests::each_sample(|text| {
            let _ = wm_density(text);
        });
    }
}
