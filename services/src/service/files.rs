//! The `files` service: read files from, and write files to, the phone's
//! allowed directories.

use super::*;

/// The most bytes `files.push` carries in its parameters (`text` or
/// `content_base64`), whatever the configuration allows for host files:
/// parameters travel through MQTT, D-Bus and a model's context.
pub const MAX_INLINE_PUSH_BYTES: usize = 1024 * 1024;

/// Characters of base64 that encode [`MAX_INLINE_PUSH_BYTES`].
const MAX_INLINE_BASE64: usize = MAX_INLINE_PUSH_BYTES.div_ceil(3) * 4;

actions!(
    /// `files` actions.
    FilesAction {
        Pull = "pull" (Medium, reads)
            "Read a file from the phone and return its content in base64. Only files under the directories the daemon allows (by default /sdcard/Download), and only up to its size limit (1 MiB by default)."
        {
            /// The file's absolute path on the phone.
            path: String = phone_file(),
        }
        -> FilePulled
        example(Self::Pull { path: "/sdcard/Download/shopping.txt".into() }),
        Push = "push" (High, changes)
            "Write a file on the phone, under the directories the daemon allows (by default /sdcard/Download). Give exactly one of: text (written as UTF-8), content_base64 (any bytes), or host_path (a file on the daemon's machine, under the host directories the daemon allows; none by default). An existing file is replaced only with overwrite: true. Sizes are bounded (1 MiB inline, 16 MiB from the host by default)."
        {
            /// The file's absolute path on the phone.
            path: String = phone_file(),
            /// The content as text (written as UTF-8).
            text: Option<String> = text_param("the file's content as text", MAX_INLINE_PUSH_BYTES),
            /// The file's content as standard base64.
            content_base64: Option<String> = Schema::pattern(
                "",
                r"^[A-Za-z0-9+/]*={0,2}$",
                MAX_INLINE_BASE64,
            ),
            /// A file on the daemon's machine to send instead.
            host_path: Option<String> = host_path_param(
                "absolute path of a file on the daemon's machine, e.g. /srv/droidwarden/share/map.pdf",
            ),
            /// Replace an existing file (default false).
            overwrite: Option<bool>,
        }
        -> FilePushed
        example(Self::Push {
            path: "/sdcard/Download/todo.txt".into(),
            text: Some("call the plumber\n".into()),
            content_base64: None,
            host_path: None,
            overwrite: None,
        }),
    }
);

/// The file `pull` reads and `push` writes.
fn phone_file() -> Schema {
    phone_path_param("absolute path on the phone, e.g. /sdcard/Download/list.txt")
}

impl FilesAction {
    /// For `push`, how many of `text`, `content_base64` and `host_path`
    /// were given (exactly one is valid).
    pub fn push_sources(&self) -> usize {
        match self {
            Self::Pull { .. } => 0,
            Self::Push {
                text,
                content_base64,
                host_path,
                ..
            } => [
                text.is_some(),
                content_base64.is_some(),
                host_path.is_some(),
            ]
            .into_iter()
            .filter(|given| *given)
            .count(),
        }
    }
}

/// The number of bytes a base64 text encodes, without decoding it (`None`
/// when its length cannot be standard base64).
pub fn base64_decoded_len(text: &str) -> Option<usize> {
    if !text.len().is_multiple_of(4) {
        return None;
    }
    let pad = text.len() - text.trim_end_matches('=').len();
    (pad <= 2).then(|| text.len() / 4 * 3 - pad)
}

records! {
    /// What `files.pull` answers.
    FilePulled {
        /// The file's path on the phone, as given.
        path: String,
        /// The file's size.
        size_bytes: u64,
        /// The file's bytes, standard base64.
        content_base64: String,
    }

    /// What `files.push` answers.
    FilePushed {
        /// Where the file is on the phone.
        path: String,
        /// The bytes written.
        size_bytes: u64,
        /// Whether a file was there before (and was replaced).
        replaced: bool,
    }
}

pub(super) fn spec() -> ServiceSpec {
    ServiceSpec {
        node_type: "fileTransfer",
        id: "files",
        description: "Read and write files in the directories of the phone the daemon allows.",
        actions: FilesAction::specs(),
        state: None,
        home_assistant: Vec::new(),
        companion_event: None,
    }
}
