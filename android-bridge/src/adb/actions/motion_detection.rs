//! The `motion_detection` service over ADB: the accelerometer and gyroscope from
//! `dumpsys sensorservice`, the rotation from `dumpsys window displays`.

use super::*;
use droidwarden_services::MotionAction;

pub(super) async fn run(sh: &dyn Shell, action: &MotionAction) -> Result<Value, BridgeError> {
    match action {
        MotionAction::CurrentMotion => {
            let dump = read(sh, &["dumpsys", "sensorservice"], parse::sensors).await?;
            answer(parse::motion(&dump))
        }
        MotionAction::Orientation => {
            answer(read(sh, &["dumpsys", "window", "displays"], parse::rotation).await?)
        }
    }
}
