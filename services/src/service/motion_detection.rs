//! The `motion_detection` service.

use super::*;

actions!(
    /// `motion_detection` actions.
    MotionAction {
        /// Accelerometer and gyroscope readings.
        CurrentMotion = "current_motion",
        /// Screen rotation.
        Orientation = "orientation",
    }
);

pub(super) fn spec() -> ServiceSpec {
    ServiceSpec {
        node_type: "motionDetection",
        id: "motion_detection",
        description: "Motion sensors and orientation.",
        actions: vec![
            action(
                "current_motion",
                Risk::Low,
                false,
                "Read the accelerometer and gyroscope and whether the phone is moving.",
            )
            .returns(vec![
                opt("accelerometer", vec3()),
                opt("gyroscope", vec3()),
                opt("moving", Schema::boolean("")),
            ]),
            action(
                "orientation",
                Risk::Low,
                false,
                "Read the screen rotation (0, 90, 180, 270) and orientation.",
            )
            .returns(vec![
                req("rotation_deg", Schema::integer("", Some(0), Some(270))),
                req(
                    "orientation",
                    Schema::enumeration(
                        "",
                        &[
                            "portrait",
                            "landscape",
                            "reverse_portrait",
                            "reverse_landscape",
                        ],
                    ),
                ),
            ]),
        ],
        state: None,
        home_assistant: Vec::new(),
        companion_event: None,
    }
}
