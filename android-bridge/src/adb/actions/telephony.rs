//! The `telephony` service over ADB: dialling and composing an SMS through
//! intents.

use super::intents::am_start;
use super::*;
use droidwarden_services::{CallPlaced, SmsComposed, TelephonyAction};

pub(super) async fn run(sh: &dyn Shell, action: &TelephonyAction) -> Result<Value, BridgeError> {
    match action {
        TelephonyAction::SmsSend { number, text } => {
            let uri = format!("smsto:{number}");
            let argv = [
                "am",
                "start",
                "-W",
                "-a",
                "android.intent.action.SENDTO",
                "-d",
                &uri,
                "--es",
                "sms_body",
                text.as_str(),
                "--ez",
                "exit_on_sent",
                "true",
            ];
            am_start(sh, &argv).await?;
            answer(SmsComposed {
                number: number.clone(),
                status: "composed".into(),
            })
        }
        TelephonyAction::Dial { number } => {
            let uri = format!("tel:{number}");
            let argv = [
                "am",
                "start",
                "-W",
                "-a",
                "android.intent.action.CALL",
                "-d",
                &uri,
            ];
            am_start(sh, &argv).await?;
            answer(CallPlaced {
                number: number.clone(),
                calling: true,
            })
        }
    }
}
