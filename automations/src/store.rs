//! Where automations' records live across restarts:
//! `<state dir>/automations.json`, owner-only like the rest of the state
//! directory.
//!
//! One small JSON document (a record is a few hundred bytes; a thousand
//! automations are a few hundred kilobytes), replaced whole on each save:
//! written to a temporary file, flushed to disk, renamed over the old one,
//! so a killed process leaves the old or the new document, never half of
//! one. Saves happen when a run starts or ends and on enable/disable, not
//! on every poll. The file also keeps the automations added at run time
//! (`droidwarden automations add`), as their definitions.
//!
//! The file work runs on tokio's blocking threads.

use super::engine::Record;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The file's name in the state directory.
pub const FILE: &str = "automations.json";

/// The document.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Document {
    /// Records by automation name.
    pub records: BTreeMap<String, Record>,
    /// Definitions added at run time, by name (the same JSON as a
    /// configuration's `[[automations]]` table).
    pub added: BTreeMap<String, Value>,
    /// Who added them, by name, when a way in vouched for an account
    /// (`MQTT user "ha"`): that account may not approve their calls.
    pub added_by: BTreeMap<String, String>,
}

/// The store.
#[derive(Debug, Clone)]
pub struct Store {
    path: PathBuf,
}

impl Store {
    /// The store in `state_dir`.
    pub fn new(state_dir: &Path) -> Self {
        Self {
            path: state_dir.join(FILE),
        }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Read the document; a missing file is an empty one.
    ///
    /// # Errors
    /// The file cannot be read or is not a document (the daemon refuses to
    /// start rather than forget what ran).
    pub async fn load(&self) -> std::io::Result<Document> {
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{}: {e}", path.display()),
                )
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Document::default()),
            Err(e) => Err(e),
        })
        .await
        .map_err(std::io::Error::other)?
    }

    /// Replace the document, durably (`droidwarden_core::private::write_file`: an
    /// exclusive temporary file, fsync, rename; never through a link).
    ///
    /// # Errors
    /// The file cannot be written.
    pub async fn save(&self, document: &Document) -> std::io::Result<()> {
        let bytes = serde_json::to_vec(document).map_err(std::io::Error::other)?;
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || droidwarden_core::private::write_file(&path, &bytes))
            .await
            .map_err(std::io::Error::other)?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn saves_and_loads_the_document() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        assert_eq!(store.load().await.unwrap(), Document::default());
        let mut doc = Document::default();
        doc.records.insert(
            "a".into(),
            Record {
                runs: 3,
                past: Some(true),
                ..Record::default()
            },
        );
        doc.added
            .insert("b".into(), serde_json::json!({"name": "b"}));
        doc.added_by.insert("b".into(), "MQTT user \"ha\"".into());
        store.save(&doc).await.unwrap();
        assert_eq!(store.load().await.unwrap(), doc);
        std::fs::write(store.path(), b"{not json").unwrap();
        assert!(store.load().await.is_err());
    }
}
