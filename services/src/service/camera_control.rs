//! The `camera_control` service.

use super::*;

actions!(
    /// `camera_control` actions.
    CameraAction {
        CameraInfo = "camera_info" (Low, reads) "List the cameras and which way each faces."
        -> CameraList,
        TakePhoto = "take_photo" (High, changes)
            "Take a photo and store it on the phone (companion app only)."
        {
            /// File name, e.g. `door.jpg`.
            filename: Option<String> = Schema::pattern("", FILENAME_PATTERN, 128),
        }
        -> CameraPhoto
        example(Self::TakePhoto { filename: Some("door.jpg".into()) }),
    }
);

records! {
    /// What `camera_control.camera_info` answers.
    CameraList {
        /// How many cameras are listed.
        count: u64,
        /// The cameras, in the order the phone first mentions them.
        cameras: Vec<CameraInfo>,
    }

    /// A camera and which way it faces.
    CameraInfo {
        /// The camera id, e.g. `0`.
        id: String,
        /// `back`, `front`, `external`, or `unknown` when the dump does not say.
        facing: String,
    }

    /// What `camera_control.take_photo` answers.
    CameraPhoto {
        /// Where the photo was stored on the phone.
        path: String,
    }
}

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
