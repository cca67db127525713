//! The `motion_detection` service.

use super::*;

actions!(
    /// `motion_detection` actions.
    MotionAction {
        CurrentMotion = "current_motion" (Low, reads)
            "Read the accelerometer and gyroscope and whether the phone is moving."
        returns(vec![
            opt("accelerometer", vec3()),
            opt("gyroscope", vec3()),
            opt("moving", Schema::boolean("")),
        ]),
        Orientation = "orientation" (Low, reads)
            "Read the screen rotation (0, 90, 180, 270) and orientation."
        returns(vec![
            req("rotation_deg", Schema::integer("", Some(0), Some(270))),
            req(
                "orientation",
                Schema::enumeration(
                    "",
                    &["portrait", "landscape", "reverse_portrait", "reverse_landscape"],
                ),
            ),
        ]),
    }
);

pub(super) fn spec() -> ServiceSpec {
    ServiceSpec {
        node_type: "motionDetection",
        id: "motion_detection",
        description: "Motion sensors and orientation.",
        actions: MotionAction::specs(),
        state: None,
        home_assistant: Vec::new(),
        companion_event: None,
    }
}
