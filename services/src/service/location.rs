//! The `location` service.

use super::*;

actions!(
    /// `location` actions.
    LocationAction {
        /// The last known position.
        Current = "current",
        /// Start pushing location updates (companion app).
        StartTracking = "start_tracking" {
            /// Seconds between updates.
            interval_s: Option<u32>,
        },
        /// Stop pushing location updates.
        StopTracking = "stop_tracking",
    }
);

pub(super) fn spec() -> ServiceSpec {
    ServiceSpec {
        node_type: "location",
        id: "location",
        description: "The phone's position.",
        actions: vec![
            action(
                "current",
                Risk::Medium,
                false,
                "Read the phone's last known position (latitude, longitude, accuracy, provider).",
            )
            .returns(vec![
                req("provider", Schema::string("gps, fused or network")),
                req("latitude", Schema::number("")),
                req("longitude", Schema::number("")),
                opt("altitude_m", Schema::number("")),
                opt("accuracy_m", Schema::number("")),
                opt("speed_mps", Schema::number("")),
                opt("bearing_deg", Schema::number("")),
            ]),
            action(
                "start_tracking",
                Risk::High,
                true,
                "Start pushing position updates at an interval (companion app only).",
            )
            .param(
                "interval_s",
                false,
                Schema::integer("seconds between updates", Some(10), Some(86_400)),
            )
            .returns(vec![
                req("tracking", Schema::boolean("")),
                opt("interval_s", Schema::integer("", None, None)),
            ])
            .example(json!({"interval_s": 60})),
            action(
                "stop_tracking",
                Risk::Low,
                true,
                "Stop pushing position updates (companion app only).",
            )
            .returns(vec![req("tracking", Schema::boolean(""))]),
        ],
        state: Some(|| Command::Location(LocationAction::Current)),
        home_assistant: Vec::new(),
        companion_event: Some("location"),
    }
}
