//! The `environmental_sensors` service.

use super::*;

actions!(
    /// `environmental_sensors` actions.
    EnvironmentAction {
        AmbientConditions = "ambient_conditions" (Low, reads)
            "Read ambient light (lux), pressure (hPa), temperature (°C) and humidity (%) where the phone has the sensors."
        returns(vec![
            opt("light_lux", Schema::number("")),
            opt("pressure_hpa", Schema::number("")),
            opt("temperature_c", Schema::number("")),
            opt("humidity_percent", Schema::number("")),
            req("available", Schema::array("sensor kinds present", Schema::string(""))),
        ]),
        Proximity = "proximity" (Low, reads)
            "Read the proximity sensor: distance in cm and whether something is near."
        returns(vec![
            req("available", Schema::boolean("")),
            opt("distance_cm", Schema::number("")),
            opt("near", Schema::boolean("")),
        ]),
    }
);

pub(super) fn spec() -> ServiceSpec {
    ServiceSpec {
        node_type: "environmentalSensors",
        id: "environmental_sensors",
        description: "Light, pressure, temperature, humidity and proximity.",
        actions: EnvironmentAction::specs(),
        state: None,
        home_assistant: Vec::new(),
        companion_event: None,
    }
}
