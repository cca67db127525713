//! The `motion_detection` service.

use super::*;

actions!(
    /// `motion_detection` actions.
    MotionAction {
        CurrentMotion = "current_motion" (Low, reads)
            "Read the accelerometer and gyroscope and whether the phone is moving."
        -> MotionReading,
        Orientation = "orientation" (Low, reads)
            "Read the screen rotation (0, 90, 180, 270) and orientation."
        -> DeviceOrientation,
    }
);

records! {
    /// Whether the phone is moving, from the newest accelerometer and
    /// gyroscope events: what `motion_detection.current_motion` answers.
    MotionReading {
        /// Acceleration in m/s², gravity included.
        accelerometer: Option<Vec3>,
        /// Angular speed in rad/s.
        gyroscope: Option<Vec3>,
        /// `|acceleration|` differs from 9.81 by more than 0.5, or `|rotation|` is
        /// above 0.1; null without either reading.
        moving: Option<bool>,
    }

    /// A three-axis reading.
    #[derive(Copy)]
    Vec3 {
        /// X axis.
        x: f64,
        /// Y axis.
        y: f64,
        /// Z axis.
        z: f64,
    }

    /// Screen rotation and the orientation it gives: what
    /// `motion_detection.orientation` answers.
    DeviceOrientation {
        /// Clockwise rotation from the display's natural orientation: 0, 90, 180 or 270.
        rotation_deg: u16 = Schema::integer("", Some(0), Some(270)),
        /// `portrait`, `landscape`, `reverse_portrait` or `reverse_landscape`.
        orientation: String = Schema::enumeration(
            "",
            &["portrait", "landscape", "reverse_portrait", "reverse_landscape"],
        ),
    }
}

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
