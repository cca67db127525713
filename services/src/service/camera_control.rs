//! The `camera_control` service.

use super::*;

actions!(
    /// `camera_control` actions.
    CameraAction {
        CameraInfo = "camera_info" (Low, reads) "List the cameras and which way each faces."
        returns(vec![
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
        TakePhoto = "take_photo" (High, changes)
            "Take a photo and store it on the phone (companion app only)."
        {
            /// File name for the photo.
            filename: Option<String> =
                Schema::pattern("file name, e.g. door.jpg", FILENAME_PATTERN, 128),
        }
        returns(vec![req("path", Schema::string("where the photo was stored"))])
        example(Self::TakePhoto { filename: Some("door.jpg".into()) }),
    }
);

pub(super) fn spec() -> ServiceSpec {
    ServiceSpec {
        node_type: "cameraControl",
        id: "camera_control",
        description: "Cameras.",
        actions: CameraAction::specs(),
        state: None,
        home_assistant: Vec::new(),
        companion_event: None,
    }
}
