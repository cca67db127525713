//! The phone's content that the phone services of issue #13 read and
//! change: posted notifications, files, and what intents started (links
//! opened, text shared, messages composed, calls placed), kept so tests can
//! check that every value arrived exactly as it was sent.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Notifications, files and the intents the phone was asked to start.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PhoneContent {
    /// Posted notifications, in the order they were posted.
    pub notifications: Vec<PostedNotification>,
    /// Files by absolute path (`stat`, `base64`, `pm install`). An APK here
    /// is a text file holding the package name it installs.
    pub files: BTreeMap<String, Vec<u8>>,
    /// Files of that many zero bytes by absolute path, as `truncate -s`
    /// makes them: large files without their bytes in the state.
    pub sparse_files: BTreeMap<String, u64>,
    /// Every intent `am start` delivered, oldest first.
    pub intents: Vec<StartedIntent>,
    /// Packages whose data `pm clear` erased, in order.
    pub cleared: Vec<String>,
}

/// One posted notification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PostedNotification {
    /// The posting app.
    pub package: String,
    /// The app's id for it.
    pub id: u32,
    /// `android.title`.
    pub title: Option<String>,
    /// `android.text`.
    pub text: Option<String>,
    /// When it was posted, Unix epoch ms.
    pub posted_ms: u64,
    /// `ONGOING_EVENT`.
    #[serde(default)]
    pub ongoing: bool,
    /// The app's uid.
    pub uid: u32,
}

impl PostedNotification {
    /// `user|package|id|tag|uid`, as Android builds it.
    pub fn key(&self) -> String {
        format!("0|{}|{}|null|{}", self.package, self.id, self.uid)
    }
}

/// One intent `am start` delivered.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StartedIntent {
    /// `-a`.
    pub action: Option<String>,
    /// `-d`.
    pub data: Option<String>,
    /// `-t`.
    pub mime: Option<String>,
    /// `-c`, in order.
    pub categories: Vec<String>,
    /// The activity that received it, `package/class`.
    pub component: String,
    /// Extras as given: option (`--es`, `--ei`, …), key, value.
    pub extras: Vec<(String, String, String)>,
}

impl PhoneContent {
    /// A file's bytes (a sparse file's zeros made on demand).
    pub fn file(&self, path: &str) -> Option<std::borrow::Cow<'_, [u8]>> {
        if let Some(bytes) = self.files.get(path) {
            return Some(std::borrow::Cow::Borrowed(bytes));
        }
        let size = *self.sparse_files.get(path)?;
        Some(std::borrow::Cow::Owned(vec![
            0;
            usize::try_from(size).ok()?
        ]))
    }

    /// A file's size, without making its bytes.
    pub fn file_size(&self, path: &str) -> Option<u64> {
        self.files
            .get(path)
            .map(|b| b.len() as u64)
            .or_else(|| self.sparse_files.get(path).copied())
    }

    /// Whether `path` is a directory holding a file.
    pub fn is_dir(&self, path: &str) -> bool {
        let prefix = format!("{}/", path.trim_end_matches('/'));
        self.files
            .keys()
            .chain(self.sparse_files.keys())
            .any(|f| f.starts_with(&prefix))
    }

    /// A plausible phone's content: a playing-music and a reminder
    /// notification, a text file in Downloads, a photo in DCIM and an APK
    /// waiting in `/data/local/tmp`.
    pub fn sample(boot_epoch_ms: u64) -> Self {
        let files = [
            (
                "/sdcard/Download/shopping.txt",
                b"milk\neggs\nbread\n".to_vec(),
            ),
            (
                "/sdcard/DCIM/Camera/IMG_0001.jpg",
                vec![0xff, 0xd8, 0xff, 0xe0, 0, 0x10],
            ),
            ("/data/local/tmp/game.apk", b"com.example.game\n".to_vec()),
        ];
        Self {
            notifications: vec![
                PostedNotification {
                    package: "com.spotify.music".into(),
                    id: 1,
                    title: Some("Podcast #12".into()),
                    text: Some("Episode 12".into()),
                    posted_ms: boot_epoch_ms + 60_000,
                    ongoing: true,
                    uid: 10_201,
                },
                PostedNotification {
                    package: "com.example.notes".into(),
                    id: 7,
                    title: Some("Reminder".into()),
                    text: Some("Call the plumber".into()),
                    posted_ms: boot_epoch_ms + 120_000,
                    ongoing: false,
                    uid: 10_203,
                },
            ],
            files: files.into_iter().map(|(p, b)| (p.to_owned(), b)).collect(),
            sparse_files: BTreeMap::new(),
            intents: Vec::new(),
            cleared: Vec::new(),
        }
    }
}
