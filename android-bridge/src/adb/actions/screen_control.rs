//! The `screen_control` service over ADB: brightness and timeout settings, and
//! waking the screen.

use super::*;
use droidwarden_services::{
    AutoBrightness, ScreenAction, ScreenBrightness, ScreenPower, ScreenStatus, ScreenTimeout,
};

pub(super) async fn run(sh: &dyn Shell, action: &ScreenAction) -> Result<Value, BridgeError> {
    match action {
        ScreenAction::Status => {
            let int = |v: Option<String>| v.and_then(|v| v.parse::<i64>().ok());
            let brightness = int(setting(sh, "system", "screen_brightness").await?);
            let mode = setting(sh, "system", "screen_brightness_mode").await?;
            let timeout = int(setting(sh, "system", "screen_off_timeout").await?);
            let power = read(sh, &["dumpsys", "power"], parse::power).await?;
            answer(ScreenStatus {
                brightness,
                auto_brightness: mode.as_deref() == Some("1"),
                timeout_ms: timeout,
                screen_on: power.screen_on,
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
        ScreenAction::Wake => {
            keyevent(sh, "KEYCODE_WAKEUP").await?;
            answer(ScreenPower { screen_on: true })
        }
    }
}
