//! The `files` service: read files from the phone's allowed directories.

use super::*;

actions!(
    /// `files` actions.
    FilesAction {
        /// Read one file.
        Pull = "pull" {
            /// The file's absolute path on the phone.
            path: String,
        },
    }
);

pub(super) fn spec() -> ServiceSpec {
    ServiceSpec {
        node_type: "fileTransfer",
        id: "files",
        description: "Read files from the directories of the phone the daemon allows.",
        actions: vec![
            action(
                "pull",
                Risk::Medium,
                false,
                "Read a file from the phone and return its content in base64. Only files under the directories the daemon allows (by default /sdcard/Download), and only up to its size limit (1 MiB by default).",
            )
            .param(
                "path",
                true,
                phone_path_param("absolute path on the phone, e.g. /sdcard/Download/list.txt"),
            )
            .returns(vec![
                req("path", Schema::string("")),
                req("size_bytes", Schema::integer("", Some(0), None)),
                req("content_base64", Schema::string("the file's bytes, standard base64")),
            ])
            .example(json!({"path": "/sdcard/Download/shopping.txt"})),
        ],
        state: None,
        home_assistant: Vec::new(),
        companion_event: None,
    }
}
