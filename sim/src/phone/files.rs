//! The phone's files as the adb file service (`sync:`) and the shell's
//! `ls` and `rm` see them. Files live in `PhoneContent::files` (directories
//! are implied by the files under them). What the shell user may create is
//! what a real phone lets it: shared storage and `/data/local/tmp`; the
//! system partitions are read-only and everything else is denied.
//!
//! Every file-service request is recorded in the command log as
//! `["sync", REQUEST, PATH]` (`STAT`, `LIST`, `RECV`, `SEND`), so tests see
//! that a refused call sent the phone nothing, whichever way it would have
//! gone.

use super::{CommandResult, Output, Phone, done, lock};
use crate::clock;
use crate::state::PhoneState;

/// Directories the shell user may write under.
const WRITABLE: [&str; 3] = ["/sdcard/", "/storage/emulated/0/", "/data/local/tmp/"];
/// Read-only partitions.
const READ_ONLY: [&str; 4] = ["/system/", "/vendor/", "/product/", "/apex/"];
/// The most bytes one file may have (the emulated storage's free space).
pub(crate) const MAX_FILE: usize = 64 * 1024 * 1024;

const S_IFREG: u32 = 0o100_000;
const S_IFDIR: u32 = 0o040_000;

/// Where a new file may not be created, and why (`errno` text).
fn create_refusal(st: &PhoneState, path: &str) -> Option<&'static str> {
    if !path.starts_with('/') || path.ends_with('/') || st.content.is_dir(path) {
        return Some("Is a directory");
    }
    if READ_ONLY.iter().any(|d| path.starts_with(d)) {
        return Some("Read-only file system");
    }
    if !WRITABLE.iter().any(|d| path.starts_with(d)) {
        return Some("Permission denied");
    }
    None
}

impl Phone {
    fn record_sync(&self, request: &str, path: &str) {
        lock(&self.log).record(
            clock::now_ms(),
            &["sync".to_owned(), request.to_owned(), path.to_owned()],
        );
    }

    /// `STAT`: `(mode, size, mtime)`.
    pub(crate) fn sync_stat(&self, path: &str) -> Option<(u32, u32, u32)> {
        self.record_sync("STAT", path);
        let st = lock(&self.state);
        let mtime = u32::try_from(st.boot_epoch_ms / 1000).unwrap_or(0);
        let path = path.trim_end_matches('/');
        match st.content.file_size(path) {
            Some(size) => Some((
                S_IFREG | 0o660,
                u32::try_from(size).unwrap_or(u32::MAX),
                mtime,
            )),
            None if st.content.is_dir(path) => Some((S_IFDIR | 0o771, 4096, mtime)),
            None => None,
        }
    }

    /// `LIST`: the entries of a directory.
    pub(crate) fn sync_list(&self, path: &str) -> Vec<(String, u32, u32, u32)> {
        self.record_sync("LIST", path);
        let st = lock(&self.state);
        let mtime = u32::try_from(st.boot_epoch_ms / 1000).unwrap_or(0);
        children(&st, path)
            .into_iter()
            .map(|(name, size)| match size {
                Some(size) => (
                    name,
                    S_IFREG | 0o660,
                    u32::try_from(size).unwrap_or(u32::MAX),
                    mtime,
                ),
                None => (name, S_IFDIR | 0o771, 4096, mtime),
            })
            .collect()
    }

    /// `RECV`: a file's bytes.
    pub(crate) fn sync_read(&self, path: &str) -> Result<Vec<u8>, String> {
        self.record_sync("RECV", path);
        let st = lock(&self.state);
        st.content
            .file(path)
            .map(std::borrow::Cow::into_owned)
            .ok_or_else(|| "No such file or directory".to_owned())
    }

    /// `SEND`: whether `path` may be created.
    pub(crate) fn sync_check_create(&self, path: &str) -> Result<(), String> {
        self.record_sync("SEND", path);
        match create_refusal(&lock(&self.state), path) {
            Some(why) => Err(why.to_owned()),
            None => Ok(()),
        }
    }

    /// `DONE`: store the file.
    pub(crate) fn sync_write(&self, path: &str, bytes: Vec<u8>) -> Result<(), String> {
        let result = {
            let mut st = lock(&self.state);
            match create_refusal(&st, path) {
                Some(why) => Err(why.to_owned()),
                None => {
                    st.content.sparse_files.remove(path);
                    st.content.files.insert(path.to_owned(), bytes);
                    Ok(())
                }
            }
        };
        self.changed();
        result
    }
}

/// The entries right under `dir`: name and size (`None` for a directory).
fn children(st: &PhoneState, dir: &str) -> Vec<(String, Option<u64>)> {
    let prefix = format!("{}/", dir.trim_end_matches('/'));
    let mut out: Vec<(String, Option<u64>)> = Vec::new();
    let all = st
        .content
        .files
        .iter()
        .map(|(p, b)| (p, b.len() as u64))
        .chain(st.content.sparse_files.iter().map(|(p, s)| (p, *s)));
    for (path, size) in all {
        let Some(rest) = path.strip_prefix(&prefix) else {
            continue;
        };
        let entry = match rest.split_once('/') {
            Some((sub, _)) => (sub.to_owned(), None),
            None => (rest.to_owned(), Some(size)),
        };
        if !out.iter().any(|(n, _)| *n == entry.0) {
            out.push(entry);
        }
    }
    out.sort();
    out
}

/// toybox `ls [-1] [-a] PATH…`: names, one per line (the flags that change
/// the format are not emulated).
pub(crate) fn ls(st: &PhoneState, args: &[String]) -> CommandResult {
    let mut out = Output::default();
    let mut status = 0;
    let paths: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    for path in paths {
        if st.content.file_size(path).is_some() {
            out.outln(path);
        } else if st.content.is_dir(path) {
            for (name, _) in children(st, path) {
                out.outln(name);
            }
        } else {
            out.errln(format!("ls: {path}: No such file or directory"));
            status = 1;
        }
    }
    done(out, status)
}

/// toybox `rm [-f] FILE…` (files only: `-r` is not emulated).
pub(crate) fn rm(st: &mut PhoneState, args: &[String]) -> CommandResult {
    let force = args.iter().any(|a| a.starts_with('-') && a.contains('f'));
    let mut out = Output::default();
    let mut status = 0;
    for path in args.iter().filter(|a| !a.starts_with('-')) {
        let removed = st.content.files.remove(path.as_str()).is_some()
            | st.content.sparse_files.remove(path.as_str()).is_some();
        if removed {
            continue;
        }
        if st.content.is_dir(path) {
            out.errln(format!("rm: {path}: Is a directory"));
            status = 1;
        } else if !force {
            out.errln(format!("rm: {path}: No such file or directory"));
            status = 1;
        }
    }
    done(out, status)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{phone, run};

    #[test]
    fn ls_and_rm_see_the_files() {
        let p = phone();
        p.sync_write("/sdcard/Download/grüße €.txt", b"hi".to_vec())
            .unwrap();
        let (out, _, _) = run(&p, "ls /sdcard/Download");
        assert!(out.contains("grüße €.txt\n"), "{out}");
        let (out, _, _) = run(&p, "stat -c %s '/sdcard/Download/grüße €.txt'");
        assert_eq!(out, "2\n");
        run(&p, "rm -f '/sdcard/Download/grüße €.txt'");
        assert!(!run(&p, "ls /sdcard/Download").0.contains("grüße"));
        assert_eq!(
            p.sync_check_create("/system/bin/x").unwrap_err(),
            "Read-only file system"
        );
        assert_eq!(
            p.sync_check_create("/data/system/x").unwrap_err(),
            "Permission denied"
        );
        assert!(p.sync_check_create("/data/local/tmp/a.apk").is_ok());
    }
}
