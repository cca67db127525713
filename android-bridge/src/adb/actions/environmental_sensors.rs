//! The `environmental_sensors` service over ADB: light, pressure, temperature,
//! humidity and proximity from `dumpsys sensorservice`.

use super::*;
use droidwarden_services::EnvironmentAction;

pub(super) async fn run(sh: &dyn Shell, action: &EnvironmentAction) -> Result<Value, BridgeError> {
    let dump = read(sh, &["dumpsys", "sensorservice"], parse::sensors).await?;
    match action {
        EnvironmentAction::AmbientConditions => answer(parse::ambient(&dump)),
        EnvironmentAction::Proximity => answer(parse::proximity(&dump)),
    }
}
