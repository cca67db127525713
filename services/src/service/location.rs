//! The `location` service.

use super::*;

actions!(
    /// `location` actions.
    LocationAction {
        Current = "current" (Medium, reads)
            "Read the phone's last known position (latitude, longitude, accuracy, provider)."
        returns(vec![
            req("provider", Schema::string("gps, fused or network")),
            req("latitude", Schema::number("")),
            req("longitude", Schema::number("")),
            opt("altitude_m", Schema::number("")),
            opt("accuracy_m", Schema::number("")),
            opt("speed_mps", Schema::number("")),
            opt("bearing_deg", Schema::number("")),
        ]),
        StartTracking = "start_tracking" (High, changes)
            "Start pushing position updates at an interval (companion app only)."
        {
            /// Seconds between updates.
            interval_s: Option<u32> =
                Schema::integer("seconds between updates", Some(10), Some(86_400)),
        }
        returns(vec![
            req("tracking", Schema::boolean("")),
            opt("interval_s", Schema::integer("", None, None)),
        ])
        example(Self::StartTracking { interval_s: Some(60) }),
        StopTracking = "stop_tracking" (Low, changes)
            "Stop pushing position updates (companion app only)."
        returns(vec![req("tracking", Schema::boolean(""))]),
    }
);

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
