//! ADB services this device offers and how their replies are framed.
//!
//! A service string such as `shell,v2,TERM=xterm,raw:echo hi` is split at the
//! first `:`; the part before it names the service and carries options. Only
//! `shell` (v1 raw or v2 packets), `exec`, `sync` (the file service) and
//! `tcp` (a device port) are offered; the caller answers
//! anything else with `CLSE`. Pure functions, no I/O.

use crate::shell::Fd;
// The packets' format is the bridge's, the host end of the same protocol.
use droidwarden_bridge::adb::wire::{
    SHELL_V2_EXIT, SHELL_V2_HEADER, SHELL_V2_STDERR, SHELL_V2_STDOUT, shell_v2_packet,
};

/// How a service frames its reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ServiceKind {
    /// `shell,v2,…:` — shell protocol packets with a separate stderr and the exit status.
    ShellV2,
    /// `shell:` — raw bytes, stdout and stderr merged, no exit status.
    ShellRaw,
    /// `exec:` — raw stdout only.
    Exec,
    /// `sync:` — the file service: requests and replies on one open stream
    /// (`super::sync`), not one command.
    Sync,
    /// `tcp:PORT` — a connection to a port on the device (what `adb
    /// forward` and the official uiautomator2 client open): the bytes the
    /// host writes go to whatever listens there.
    Tcp(u16),
}

/// An accepted service request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServiceRequest {
    pub(crate) kind: ServiceKind,
    /// The command line for the device shell.
    pub(crate) command: String,
}

/// Parses the payload of an `OPEN` (trailing NULs allowed).
///
/// Returns `None` for services this device does not offer: `shell,v2` on a
/// device without the `shell_v2` feature (before Android 7, whose adbd only
/// knew `shell:`) is one of them.
pub(crate) fn parse_service(raw: &[u8], shell_v2: bool) -> Option<ServiceRequest> {
    let end = raw.iter().rposition(|b| *b != 0).map_or(0, |i| i + 1);
    let text = String::from_utf8_lossy(&raw[..end]);
    let (head, command) = text.split_once(':')?;
    let mut parts = head.split(',');
    let name = parts.next().unwrap_or_default();
    let kind = match name {
        "shell" if shell_v2 && parts.any(|opt| opt == "v2") => ServiceKind::ShellV2,
        // Before Android 7, adbd knew plain `shell:` only, with no options.
        "shell" if !shell_v2 && head != "shell" => return None,
        "shell" => ServiceKind::ShellRaw,
        "exec" => ServiceKind::Exec,
        "sync" if head == "sync" && command.is_empty() => ServiceKind::Sync,
        "tcp" if head == "tcp" => ServiceKind::Tcp(command.parse().ok().filter(|p| *p != 0)?),
        _ => return None,
    };
    Some(ServiceRequest {
        kind,
        command: command.to_owned(),
    })
}

/// Frames a finished command's output as WRTE payloads of at most `max` bytes.
///
/// For v2, every payload holds whole packets (a packet never straddles two
/// WRTEs), which is what adbd does in practice and what strict clients assume.
pub(crate) fn frame_output(
    kind: ServiceKind,
    chunks: &[(Fd, Vec<u8>)],
    exit: u8,
    max: usize,
) -> Vec<Vec<u8>> {
    match kind {
        ServiceKind::ShellRaw => {
            let all: Vec<u8> = chunks.iter().flat_map(|(_, b)| b.iter().copied()).collect();
            super::message::chunk(&all, max)
        }
        ServiceKind::Exec => {
            let out: Vec<u8> = chunks
                .iter()
                .filter(|(fd, _)| *fd == Fd::Stdout)
                .flat_map(|(_, b)| b.iter().copied())
                .collect();
            super::message::chunk(&out, max)
        }
        ServiceKind::ShellV2 => frame_v2(chunks, exit, max),
        // These answer request by request, never as a command.
        ServiceKind::Sync | ServiceKind::Tcp(_) => Vec::new(),
    }
}

fn frame_v2(chunks: &[(Fd, Vec<u8>)], exit: u8, max: usize) -> Vec<Vec<u8>> {
    let room = max.saturating_sub(SHELL_V2_HEADER).max(1);
    let mut packets = Vec::new();
    for (fd, bytes) in chunks {
        let id = match fd {
            Fd::Stdout => SHELL_V2_STDOUT,
            Fd::Stderr => SHELL_V2_STDERR,
        };
        for piece in bytes.chunks(room) {
            packets.push(shell_v2_packet(id, piece));
        }
    }
    packets.push(shell_v2_packet(SHELL_V2_EXIT, &[exit]));

    // Pack consecutive small packets into one payload while they fit.
    let mut payloads: Vec<Vec<u8>> = Vec::new();
    for p in packets {
        match payloads.last_mut() {
            Some(last) if last.len() + p.len() <= max => last.extend_from_slice(&p),
            _ => payloads.push(p),
        }
    }
    payloads
}

#[cfg(test)]
mod tests {
    use super::*;
    use droidwarden_bridge::adb::wire::shell_v2_header;

    fn check(raw: &str, expected: Option<(ServiceKind, &str)>) {
        let got = parse_service(raw.as_bytes(), true);
        assert_eq!(
            got.map(|r| (r.kind, r.command)),
            expected.map(|(k, c)| (k, c.to_owned())),
            "service {raw:?}"
        );
    }

    #[test]
    fn service_strings() {
        check(
            "shell,v2,TERM=xterm,raw:echo hi\0",
            Some((ServiceKind::ShellV2, "echo hi")),
        );
        check("shell,v2,raw:a:b", Some((ServiceKind::ShellV2, "a:b")));
        check("shell:ls", Some((ServiceKind::ShellRaw, "ls")));
        check("shell,raw:ls", Some((ServiceKind::ShellRaw, "ls")));
        check(
            "exec:echo 'hello'",
            Some((ServiceKind::Exec, "echo 'hello'")),
        );
        check("sync:", Some((ServiceKind::Sync, "")));
        check("sync:x", None);
        check("tcp:9008", Some((ServiceKind::Tcp(9008), "9008")));
        check("tcp:0", None);
        check("tcp:http", None);
        check("framebuffer:", None);
        check("reboot:", None);
        check("shell", None);
    }

    #[test]
    fn a_device_before_android_7_only_knows_plain_shell() {
        let old = |raw: &str| parse_service(raw.as_bytes(), false).map(|r| (r.kind, r.command));
        assert_eq!(old("shell:ls"), Some((ServiceKind::ShellRaw, "ls".into())));
        assert_eq!(old("shell,v2,raw:ls"), None);
        assert_eq!(old("shell,raw:ls"), None);
        assert_eq!(old("exec:ls"), Some((ServiceKind::Exec, "ls".into())));
    }

    #[test]
    fn v2_framing_has_packets_and_exit() {
        let chunks = vec![
            (Fd::Stdout, b"hi\n".to_vec()),
            (Fd::Stderr, b"oops\n".to_vec()),
        ];
        let payloads = frame_output(ServiceKind::ShellV2, &chunks, 3, 4096);
        assert_eq!(payloads.len(), 1);
        let mut expected = vec![1, 3, 0, 0, 0];
        expected.extend_from_slice(b"hi\n");
        expected.extend_from_slice(&[2, 5, 0, 0, 0]);
        expected.extend_from_slice(b"oops\n");
        expected.extend_from_slice(&[3, 1, 0, 0, 0, 3]);
        assert_eq!(payloads[0], expected);
    }

    #[test]
    fn v2_packets_never_straddle_payloads() {
        let chunks = vec![(Fd::Stdout, vec![b'x'; 10_000])];
        let payloads = frame_output(ServiceKind::ShellV2, &chunks, 0, 4096);
        assert!(payloads.iter().all(|p| p.len() <= 4096));
        let mut data = Vec::new();
        for p in &payloads {
            let mut rest = &p[..];
            while !rest.is_empty() {
                let (header, body) = rest.split_at(SHELL_V2_HEADER);
                let (id, len) = shell_v2_header(header.try_into().unwrap());
                assert!(body.len() >= len, "packet split across payloads");
                if id == SHELL_V2_STDOUT {
                    data.extend_from_slice(&body[..len]);
                }
                rest = &body[len..];
            }
        }
        assert_eq!(data.len(), 10_000);
    }

    #[test]
    fn raw_merges_and_exec_keeps_stdout() {
        let chunks = vec![
            (Fd::Stdout, b"a".to_vec()),
            (Fd::Stderr, b"b".to_vec()),
            (Fd::Stdout, b"c".to_vec()),
        ];
        assert_eq!(
            frame_output(ServiceKind::ShellRaw, &chunks, 1, 2),
            vec![b"ab".to_vec(), b"c".to_vec()]
        );
        assert_eq!(
            frame_output(ServiceKind::Exec, &chunks, 1, 10),
            vec![b"ac".to_vec()]
        );
        assert!(frame_output(ServiceKind::Exec, &[], 0, 10).is_empty());
    }
}
