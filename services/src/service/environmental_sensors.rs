//! The `environmental_sensors` service.

use super::*;

actions!(
    /// `environmental_sensors` actions.
    EnvironmentAction {
        AmbientConditions = "ambient_conditions" (Low, reads)
            "Read ambient light (lux), pressure (hPa), temperature (°C) and humidity (%) where the phone has the sensors."
        -> AmbientConditions,
        Proximity = "proximity" (Low, reads)
            "Read the proximity sensor: distance in cm and whether something is near."
        -> ProximityReading,
    }
);

records! {
    /// Ambient conditions from the newest environmental sensor events:
    /// what `environmental_sensors.ambient_conditions` answers.
    AmbientConditions {
        /// Illuminance in lux.
        light_lux: Option<f64>,
        /// Air pressure in hPa.
        pressure_hpa: Option<f64>,
        /// Ambient temperature in °C.
        temperature_c: Option<f64>,
        /// Relative humidity in %.
        humidity_percent: Option<f64>,
        /// Which of `light`, `pressure`, `temperature`, `humidity` the phone has.
        available: Vec<String>,
    }

    /// The proximity sensor's newest reading: what
    /// `environmental_sensors.proximity` answers.
    ProximityReading {
        /// The phone has a proximity sensor.
        available: bool,
        /// Distance in cm (many sensors only report 0 or their maximum range).
        distance_cm: Option<f64>,
        /// Something is closer than 1 cm.
        near: Option<bool>,
    }
}

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
