//! The `alerts` service over ADB: vibration only.
//!
//! - `vibrate`: `cmd vibrator_manager synced -f oneshot MS` (Android 12,
//!   API 31, and later: `VibratorManagerService`'s shell command, `-f`
//!   ignores Do Not Disturb), else `cmd vibrator vibrate -f MS` (Android 10
//!   and 11's `VibratorService`, the same `-f`), chosen by which service the
//!   phone has (`Can't find service: vibrator_manager` on Android 11 and
//!   older). Android 9 and older know no `-f`: their error is the answer.
//! - `torch`, `speak`, `find_my_phone`: `unsupported_action`. The torch is
//!   an app API (`CameraManager.setTorchMode`; the camera service's shell
//!   command, `cmd media.camera`, has no torch command), text-to-speech
//!   is an app's `TextToSpeech` bound to an engine (no system service has a
//!   shell command for it), and finding the phone needs both.

use super::*;
use droidwarden_services::{AlertsAction, Command, VIBRATE_DEFAULT_MS, Vibrated};

pub(super) async fn run(sh: &dyn Shell, action: &AlertsAction) -> Result<Value, BridgeError> {
    match action {
        AlertsAction::Vibrate { ms } => {
            let ms = ms.unwrap_or(VIBRATE_DEFAULT_MS);
            let duration = ms.to_string();
            let synced = [
                "cmd",
                "vibrator_manager",
                "synced",
                "-f",
                "oneshot",
                &duration,
            ];
            match ok(sh, &synced).await {
                Ok(_) => {}
                // Android 11 and older: the single vibrator's service.
                Err(BridgeError::MissingOnPhone { .. }) => {
                    ok(sh, &["cmd", "vibrator", "vibrate", "-f", &duration]).await?;
                }
                Err(e) => return Err(e),
            }
            answer(Vibrated { ms })
        }
        AlertsAction::Torch { .. }
        | AlertsAction::Speak { .. }
        | AlertsAction::FindMyPhone { .. } => {
            Err(unsupported(sh, &Command::Alerts(action.clone())))
        }
    }
}
