//! The device side of the adb file service (`sync:`), as a pure state
//! machine: bytes from the host in, reply bytes out, files through a
//! [`SyncFs`]. Version 1 of the protocol, as every adbd speaks it:
//! `STAT`, `LIST`, `SEND` + `DATA`… + `DONE`, `RECV` and `QUIT`, each an
//! 8-byte header (four ASCII letters, a little-endian `u32`) and, except
//! for `DONE` and `QUIT`, that many bytes of payload. The host's requests
//! arrive split at arbitrary points (the adb server relays them in its own
//! packets), so the machine keeps what it has not used yet.

// The messages' format is the bridge's, the host end of the same protocol.
use droidwarden_bridge::adb::wire::{
    SYNC_DATA_MAX, SYNC_MAX_PATH, sync_header, sync_message, sync_stat_reply,
};

/// The files the service reads and writes.
pub(crate) trait SyncFs {
    /// `(mode, size, mtime)` of `path`, or `None`.
    fn stat(&self, path: &str) -> Option<(u32, u32, u32)>;
    /// The entries of directory `path`: name, mode, size, mtime.
    fn list(&self, path: &str) -> Vec<(String, u32, u32, u32)>;
    /// The bytes of `path`, or why not.
    fn read(&self, path: &str) -> Result<Vec<u8>, String>;
    /// Whether `path` may be created; the reason (`errno` text) if not.
    fn check_create(&self, path: &str) -> Result<(), String>;
    /// Write `bytes` to `path` with `mtime`, or say why not.
    fn write(&self, path: &str, bytes: Vec<u8>, mtime: u32) -> Result<(), String>;
    /// The most bytes one file may have.
    fn max_file(&self) -> usize;
}

/// A `SEND` in progress.
#[derive(Debug)]
struct Sending {
    path: String,
    data: Vec<u8>,
    /// The refusal to answer at `DONE` (the data is still read, as adbd does).
    failed: Option<String>,
}

/// One `sync:` stream's state.
#[derive(Debug, Default)]
pub(crate) struct SyncMachine {
    pending: Vec<u8>,
    sending: Option<Sending>,
    closed: bool,
}

/// What the machine answers to some input.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Reply {
    /// Bytes for the host.
    pub(crate) bytes: Vec<u8>,
    /// Close the stream after them.
    pub(crate) close: bool,
}

fn fail(out: &mut Vec<u8>, message: &str) {
    out.extend(sync_message(
        b"FAIL",
        size32(message.len()),
        message.as_bytes(),
    ));
}

fn size32(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

impl SyncMachine {
    /// Take `data` from the host; answer every request it completes.
    pub(crate) fn feed(&mut self, data: &[u8], fs: &dyn SyncFs) -> Reply {
        let mut reply = Reply::default();
        if self.closed {
            return reply;
        }
        self.pending.extend_from_slice(data);
        let mut used = 0;
        while self.pending.len() - used >= 8 {
            let at = &self.pending[used..];
            let Ok(header) = <[u8; 8]>::try_from(&at[..8]) else {
                break; // Never: the loop holds eight bytes at least.
            };
            let (id, len) = sync_header(header);
            let takes_payload = !matches!(&id, b"DONE" | b"QUIT");
            let payload_len = if takes_payload { len as usize } else { 0 };
            let limit = if &id == b"DATA" {
                SYNC_DATA_MAX
            } else {
                SYNC_MAX_PATH + 16
            };
            if payload_len > limit {
                fail(&mut reply.bytes, "sync request too large");
                reply.close = true;
                self.closed = true;
                return reply;
            }
            if at.len() < 8 + payload_len {
                break;
            }
            let payload = at[8..8 + payload_len].to_vec();
            used += 8 + payload_len;
            if self.request(id, len, &payload, fs, &mut reply.bytes) {
                reply.close = true;
                self.closed = true;
                return reply;
            }
        }
        self.pending.drain(..used);
        reply
    }

    /// Handle one request; `true` to close the stream.
    fn request(
        &mut self,
        id: [u8; 4],
        len: u32,
        payload: &[u8],
        fs: &dyn SyncFs,
        out: &mut Vec<u8>,
    ) -> bool {
        let text = || String::from_utf8_lossy(payload).into_owned();
        match &id {
            b"STAT" => {
                let (mode, size, mtime) = fs.stat(&text()).unwrap_or((0, 0, 0));
                out.extend(sync_stat_reply(mode, size, mtime));
            }
            b"LIST" => {
                for (name, mode, size, mtime) in fs.list(&text()) {
                    out.extend_from_slice(b"DENT");
                    for w in [mode, size, mtime, size32(name.len())] {
                        out.extend_from_slice(&w.to_le_bytes());
                    }
                    out.extend_from_slice(name.as_bytes());
                }
                out.extend_from_slice(b"DONE");
                out.extend_from_slice(&[0; 16]);
            }
            b"RECV" => match fs.read(&text()) {
                Ok(bytes) => {
                    for piece in bytes.chunks(SYNC_DATA_MAX) {
                        out.extend(sync_message(b"DATA", size32(piece.len()), piece));
                    }
                    out.extend(sync_message(b"DONE", 0, b""));
                }
                Err(why) => fail(out, &why),
            },
            b"SEND" => {
                // `PATH,MODE`: the path may itself hold commas.
                let spec = text();
                let path = spec
                    .rsplit_once(',')
                    .map_or(spec.as_str(), |(p, _)| p)
                    .to_owned();
                let failed = fs.check_create(&path).err();
                self.sending = Some(Sending {
                    path,
                    data: Vec::new(),
                    failed,
                });
            }
            b"DATA" => match &mut self.sending {
                Some(s) => {
                    if s.failed.is_none() {
                        if s.data.len() + payload.len() > fs.max_file() {
                            s.failed = Some("No space left on device".into());
                            s.data = Vec::new();
                        } else {
                            s.data.extend_from_slice(payload);
                        }
                    }
                }
                None => {
                    fail(out, "DATA outside of SEND");
                    return true;
                }
            },
            b"DONE" => match self.sending.take() {
                Some(Sending {
                    path,
                    data,
                    failed: None,
                }) => match fs.write(&path, data, len) {
                    Ok(()) => out.extend(sync_message(b"OKAY", 0, b"")),
                    Err(why) => fail(out, &format!("couldn't create file: {why}")),
                },
                Some(Sending {
                    failed: Some(why), ..
                }) => fail(out, &format!("couldn't create file: {why}")),
                None => {
                    fail(out, "DONE outside of SEND");
                    return true;
                }
            },
            b"QUIT" => return true,
            other => {
                fail(
                    out,
                    &format!("unknown sync request {:?}", String::from_utf8_lossy(other)),
                );
                return true;
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::collections::BTreeMap;

    #[derive(Default)]
    struct Fs {
        files: RefCell<BTreeMap<String, (Vec<u8>, u32)>>,
    }

    impl SyncFs for Fs {
        fn stat(&self, path: &str) -> Option<(u32, u32, u32)> {
            let files = self.files.borrow();
            let (bytes, mtime) = files.get(path)?;
            Some((0o100_644, size32(bytes.len()), *mtime))
        }
        fn list(&self, _: &str) -> Vec<(String, u32, u32, u32)> {
            vec![("a".into(), 0o100_644, 1, 2)]
        }
        fn read(&self, path: &str) -> Result<Vec<u8>, String> {
            self.files
                .borrow()
                .get(path)
                .map(|(b, _)| b.clone())
                .ok_or_else(|| "No such file or directory".into())
        }
        fn check_create(&self, path: &str) -> Result<(), String> {
            if path.starts_with("/system/") {
                Err("Read-only file system".into())
            } else {
                Ok(())
            }
        }
        fn write(&self, path: &str, bytes: Vec<u8>, mtime: u32) -> Result<(), String> {
            self.files.borrow_mut().insert(path.into(), (bytes, mtime));
            Ok(())
        }
        fn max_file(&self) -> usize {
            100
        }
    }

    fn request(id: &[u8; 4], payload: &[u8]) -> Vec<u8> {
        sync_message(id, size32(payload.len()), payload)
    }

    fn send(path: &str, data: &[&[u8]], mtime: u32) -> Vec<u8> {
        let mut r = request(b"SEND", format!("{path},33188").as_bytes());
        for d in data {
            r.extend(request(b"DATA", d));
        }
        r.extend(sync_message(b"DONE", mtime, b""));
        r
    }

    #[test]
    fn a_send_split_anywhere_writes_the_file() {
        let fs = Fs::default();
        let mut m = SyncMachine::default();
        let bytes = send("/sdcard/Download/a,b ü.txt", &[b"hello ", b"world"], 77);
        let mut replies = Vec::new();
        for piece in bytes.chunks(3) {
            let r = m.feed(piece, &fs);
            assert!(!r.close);
            replies.extend(r.bytes);
        }
        assert_eq!(replies, sync_message(b"OKAY", 0, b""));
        assert_eq!(
            fs.files.borrow()["/sdcard/Download/a,b ü.txt"],
            (b"hello world".to_vec(), 77)
        );
        let r = m.feed(
            &request(b"STAT", "/sdcard/Download/a,b ü.txt".as_bytes()),
            &fs,
        );
        assert_eq!(&r.bytes[..4], b"STAT");
        assert_eq!(u32::from_le_bytes(r.bytes[8..12].try_into().unwrap()), 11);
        let r = m.feed(&sync_message(b"QUIT", 0, b""), &fs);
        assert!(r.close);
    }

    #[test]
    fn refusals_come_at_done_after_the_data() {
        let fs = Fs::default();
        let mut m = SyncMachine::default();
        let r = m.feed(&send("/system/x", &[b"abc"], 0), &fs);
        assert_eq!(&r.bytes[..4], b"FAIL");
        assert!(String::from_utf8_lossy(&r.bytes[8..]).contains("Read-only file system"));
        assert!(fs.files.borrow().is_empty());
        // Over the file bound: "No space left on device", nothing written.
        let r = m.feed(&send("/sdcard/big", &[&[0; 60], &[0; 60]], 0), &fs);
        assert!(String::from_utf8_lossy(&r.bytes[8..]).contains("No space left"));
        assert!(fs.files.borrow().is_empty());
        // A stream that ends before DONE writes nothing either.
        let mut m = SyncMachine::default();
        let mut cut = send("/sdcard/a", &[b"abc"], 0);
        cut.truncate(cut.len() - 8);
        assert_eq!(m.feed(&cut, &fs), Reply::default());
        assert!(fs.files.borrow().is_empty());
    }

    #[test]
    fn recv_list_and_bad_requests() {
        let fs = Fs::default();
        fs.write("/sdcard/a", b"xyz".to_vec(), 1).unwrap();
        let mut m = SyncMachine::default();
        let r = m.feed(&request(b"RECV", b"/sdcard/a"), &fs);
        let mut want = request(b"DATA", b"xyz");
        want.extend(sync_message(b"DONE", 0, b""));
        assert_eq!(r.bytes, want);
        let r = m.feed(&request(b"RECV", b"/sdcard/none"), &fs);
        assert_eq!(&r.bytes[..4], b"FAIL");
        let r = m.feed(&request(b"LIST", b"/sdcard"), &fs);
        assert_eq!(&r.bytes[..4], b"DENT");
        assert!(r.bytes.ends_with(&[
            b'D', b'O', b'N', b'E', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
        ]));
        let r = m.feed(&sync_message(b"DATA", 1_000_000, b""), &fs);
        assert!(r.close);
        let mut m = SyncMachine::default();
        assert!(m.feed(&request(b"XXXX", b""), &fs).close);
    }
}
