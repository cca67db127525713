//! The `camera_control` service.

use super::*;

actions!(
    /// `camera_control` actions.
    CameraAction {
        /// Cameras and which way they face.
        CameraInfo = "camera_info",
        /// Take a photo (companion app).
        TakePhoto = "take_photo" {
            /// File name for the photo.
            filename: Option<String>,
        },
    }
);

pub(super) fn spec() -> ServiceSpec {
    ServiceSpec {
        node_type: "cameraControl",
        id: "camera_control",
        description: "Cameras.",
        actions: vec![
            action(
                "camera_info",
                Risk::Low,
                false,
                "List the cameras and which way each faces.",
            )
            .returns(vec![
                req("count", Schema::integer("", Some(0), None)),
                list_of(
                    "cameras",
                    "",
                    vec![
                        req("id", Schema::string("")),
                        req("facing", Schema::string("back, front or external")),
                    ],
                ),
            ]),
            action(
                "take_photo",
                Risk::High,
                true,
                "Take a photo and store it on the phone (companion app only).",
            )
            .param(
                "filename",
                false,
                Schema::pattern("file name, e.g. door.jpg", FILENAME_PATTERN, 128),
            )
            .returns(vec![req(
                "path",
                Schema::string("where the photo was stored"),
            )])
            .example(json!({"filename": "door.jpg"})),
        ],
        state: None,
        home_assistant: Vec::new(),
        companion_event: None,
    }
}
