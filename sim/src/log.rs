//! The command log: one entry per simple command the phone's shell ran.
//!
//! Tests read it to prove which argv reached the device (a quoted argument
//! containing `;` or `$(x)` must arrive as one literal element). The log is
//! bounded so a long-running sim cannot grow without limit; the oldest
//! entries go first. Optionally every entry is also appended as a JSON line
//! to a file (`--command-log`).

use std::collections::VecDeque;
use std::fs::File;
use std::io::Write;

use serde::{Deserialize, Serialize};

/// Entries kept in memory; older ones are dropped (the file keeps them all).
pub(crate) const MAX_ENTRIES: usize = 100_000;

/// One executed simple command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogEntry {
    /// Sequence number, starting at 1 and never reused (not even after a clear).
    pub seq: u64,
    /// Wall-clock time, epoch milliseconds.
    pub ts_ms: u64,
    /// The words the shell produced, exactly.
    pub argv: Vec<String>,
}

/// The in-memory log plus its optional JSON-lines file.
#[derive(Debug)]
pub(crate) struct CommandLog {
    next_seq: u64,
    entries: VecDeque<LogEntry>,
    file: Option<File>,
}

impl CommandLog {
    /// An empty log, appending to `file` if given.
    pub(crate) fn new(file: Option<File>) -> Self {
        Self {
            next_seq: 1,
            entries: VecDeque::new(),
            file,
        }
    }

    /// Records one command.
    pub(crate) fn record(&mut self, ts_ms: u64, argv: &[String]) {
        let entry = LogEntry {
            seq: self.next_seq,
            ts_ms,
            argv: argv.to_vec(),
        };
        self.next_seq += 1;
        if let Some(file) = &mut self.file {
            // The file is a debugging aid: a failed write is logged, not fatal.
            let line = serde_json::to_string(&entry).unwrap_or_default();
            if let Err(e) = writeln!(file, "{line}") {
                tracing::warn!(error = %e, "cannot append to the command log file");
            }
        }
        if self.entries.len() == MAX_ENTRIES {
            self.entries.pop_front();
        }
        self.entries.push_back(entry);
    }

    /// A copy of the entries, oldest first.
    pub(crate) fn entries(&self) -> Vec<LogEntry> {
        self.entries.iter().cloned().collect()
    }

    /// Forgets the in-memory entries (sequence numbers keep counting).
    pub(crate) fn clear(&mut self) {
        self.entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_numbers_survive_a_clear() {
        let mut log = CommandLog::new(None);
        log.record(5, &["a".to_owned()]);
        log.clear();
        log.record(6, &["b".to_owned(), "c d".to_owned()]);
        assert_eq!(
            log.entries(),
            vec![LogEntry {
                seq: 2,
                ts_ms: 6,
                argv: vec!["b".to_owned(), "c d".to_owned()]
            }]
        );
    }

    #[test]
    fn entries_serialise_as_documented() {
        let e = LogEntry {
            seq: 1,
            ts_ms: 2,
            argv: vec!["dumpsys".to_owned(), "battery".to_owned()],
        };
        assert_eq!(
            serde_json::to_string(&e).expect("json"),
            r#"{"seq":1,"ts_ms":2,"argv":["dumpsys","battery"]}"#
        );
    }
}
