//! Replay: answer chosen commands from recorded files instead of the
//! built-in handlers.
//!
//! `DIR/index.json` lists entries `{"command", "stdout", "stderr", "exit"}`;
//! `command` is the argv joined by single spaces, `stdout`/`stderr` are file
//! names relative to `DIR` (or `null` for nothing). The index is read and
//! validated in two stages (raw serde records, then a checked table with the
//! files loaded) so a broken index stops the sim at start-up with an error
//! that names the entry, never halfway through a test.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::SimError;

/// One `index.json` record as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    command: String,
    #[serde(default)]
    stdout: Option<String>,
    #[serde(default)]
    stderr: Option<String>,
    #[serde(default)]
    exit: i64,
}

/// A recorded answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Recorded {
    pub(crate) stdout: Vec<u8>,
    pub(crate) stderr: Vec<u8>,
    pub(crate) exit: u8,
}

/// The validated replay table.
#[derive(Debug, Clone, Default)]
pub(crate) struct Replay {
    answers: HashMap<String, Recorded>,
}

impl Replay {
    /// Loads and validates `dir/index.json` and every file it names.
    ///
    /// # Errors
    ///
    /// `SimError::Replay` naming the index and, where it applies, the entry.
    pub(crate) fn load(dir: &Path) -> Result<Self, SimError> {
        let index = dir.join("index.json");
        let err = |reason: String| SimError::Replay {
            path: index.clone(),
            reason,
        };
        let text = std::fs::read_to_string(&index).map_err(|e| err(format!("cannot read: {e}")))?;
        let raw: Vec<RawEntry> =
            serde_json::from_str(&text).map_err(|e| err(format!("not a valid index: {e}")))?;
        let mut answers = HashMap::new();
        for (i, entry) in raw.into_iter().enumerate() {
            let at = |what: String| err(format!("entry {i} ({:?}): {what}", entry.command));
            if entry.command.trim().is_empty() {
                return Err(at("empty command".to_owned()));
            }
            if entry.command
                != entry
                    .command
                    .split(' ')
                    .filter(|w| !w.is_empty())
                    .collect::<Vec<_>>()
                    .join(" ")
            {
                return Err(at("command must be argv joined by single spaces".to_owned()));
            }
            let exit = u8::try_from(entry.exit)
                .map_err(|_| at(format!("exit {} is not in 0..=255", entry.exit)))?;
            let read = |name: &Option<String>| -> Result<Vec<u8>, SimError> {
                let Some(name) = name else {
                    return Ok(Vec::new());
                };
                let rel = PathBuf::from(name);
                if rel.is_absolute()
                    || rel
                        .components()
                        .any(|c| matches!(c, std::path::Component::ParentDir))
                {
                    return Err(at(format!(
                        "file {name:?} must be relative to the replay directory"
                    )));
                }
                std::fs::read(dir.join(&rel)).map_err(|e| at(format!("cannot read {name:?}: {e}")))
            };
            let recorded = Recorded {
                stdout: read(&entry.stdout)?,
                stderr: read(&entry.stderr)?,
                exit,
            };
            if answers.insert(entry.command.clone(), recorded).is_some() {
                return Err(at("duplicate command".to_owned()));
            }
        }
        Ok(Self { answers })
    }

    /// The recorded answer for `argv`, if any.
    pub(crate) fn lookup(&self, argv: &[String]) -> Option<&Recorded> {
        self.answers.get(&argv.join(" "))
    }

    /// Number of recorded commands.
    pub(crate) fn len(&self) -> usize {
        self.answers.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir_with(index: &str, files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("index.json"), index).expect("index");
        for (name, body) in files {
            std::fs::write(dir.path().join(name), body).expect("file");
        }
        dir
    }

    #[test]
    fn loads_a_valid_index() {
        let dir = dir_with(
            r#"[{"command":"dumpsys battery","stdout":"battery.txt","stderr":null,"exit":0},
                {"command":"getprop ro.x","stderr":"err.txt","exit":1}]"#,
            &[("battery.txt", "level: 3\n"), ("err.txt", "nope\n")],
        );
        let replay = Replay::load(dir.path()).expect("valid");
        assert_eq!(replay.len(), 2);
        let argv = ["dumpsys".to_owned(), "battery".to_owned()];
        assert_eq!(
            replay.lookup(&argv).map(|r| r.stdout.clone()),
            Some(b"level: 3\n".to_vec())
        );
        let r = replay
            .lookup(&["getprop".to_owned(), "ro.x".to_owned()])
            .expect("second");
        assert_eq!(
            (r.stdout.as_slice(), r.stderr.as_slice(), r.exit),
            (&b""[..], &b"nope\n"[..], 1)
        );
        assert!(replay.lookup(&["dumpsys".to_owned()]).is_none());
    }

    fn error_of(index: &str, files: &[(&str, &str)]) -> String {
        let dir = dir_with(index, files);
        Replay::load(dir.path()).expect_err("invalid").to_string()
    }

    #[test]
    fn rejects_broken_indexes_with_a_clear_reason() {
        assert!(error_of("{", &[]).contains("not a valid index"));
        assert!(
            error_of(r#"[{"command":"a","stdout":"missing.txt"}]"#, &[])
                .contains("cannot read \"missing.txt\"")
        );
        assert!(error_of(r#"[{"command":"a","exit":300}]"#, &[]).contains("exit 300"));
        assert!(error_of(r#"[{"command":"a"},{"command":"a"}]"#, &[]).contains("duplicate"));
        assert!(error_of(r#"[{"command":"a  b"}]"#, &[]).contains("single spaces"));
        assert!(error_of(r#"[{"command":"a","stdout":"../x"}]"#, &[]).contains("relative"));
        assert!(error_of(r#"[{"command":"a","typo":1}]"#, &[]).contains("unknown field"));
        let missing = tempfile::tempdir().expect("tempdir");
        assert!(
            Replay::load(missing.path())
                .expect_err("no index")
                .to_string()
                .contains("cannot read")
        );
    }
}
