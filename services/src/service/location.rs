//! The `location` service.

use super::*;

actions!(
    /// `location` actions.
    LocationAction {
        Current = "current" (Medium, reads)
            "Read the phone's last known position (latitude, longitude, accuracy, provider)."
        -> LocationFix,
        StartTracking = "start_tracking" (High, changes)
            "Start pushing position updates at an interval (companion app only)."
        {
            /// Seconds between updates.
            interval_s: Option<u32> = Schema::integer("", Some(10), Some(86_400)),
        }
        -> TrackingStarted
        example(Self::StartTracking { interval_s: Some(60) }),
        StopTracking = "stop_tracking" (Low, changes)
            "Stop pushing position updates (companion app only)."
        -> TrackingStopped,
    }
);

records! {
    /// A location fix: what `location.current` answers and the `location`
    /// event carries.
    LocationFix {
        /// The provider that produced the fix: `gps`, `fused`, `network`, …
        provider: String,
        /// Latitude in degrees.
        latitude: f64,
        /// Longitude in degrees.
        longitude: f64,
        /// Altitude above the WGS84 ellipsoid, in metres.
        altitude_m: Option<f64>,
        /// Horizontal accuracy radius, in metres.
        accuracy_m: Option<f64>,
        /// Speed over ground, in metres per second.
        speed_mps: Option<f64>,
        /// Bearing, in degrees.
        bearing_deg: Option<f64>,
    }

    /// What `location.start_tracking` answers.
    TrackingStarted {
        /// Whether position updates are being pushed (`true`).
        tracking: bool,
        /// Seconds between updates.
        interval_s: Option<u32>,
    }

    /// What `location.stop_tracking` answers.
    TrackingStopped {
        /// Whether position updates are being pushed (`false`).
        tracking: bool,
    }
}

pub(super) fn spec() -> ServiceSpec {
    ServiceSpec {
        node_type: "location",
        id: "location",
        description: "The phone's position.",
        actions: LocationAction::specs(),
        state: Some(|| Command::Location(LocationAction::Current)),
        home_assistant: Vec::new(),
        companion_event: Some("location"),
    }
}
