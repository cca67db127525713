//! The byte formats both ends of a device connection share: shell protocol
//! v2 packets and the file service's (`sync:`) messages.
//!
//! The bridge writes and reads them as the host (`exchange`, `sync`); the
//! emulated phone (`droidwarden-sim`) as the device. One definition keeps
//! the two ends from drifting apart. Pure functions, no I/O.

/// Shell protocol v2 packet id: standard output.
pub const SHELL_V2_STDOUT: u8 = 1;
/// Shell protocol v2 packet id: standard error.
pub const SHELL_V2_STDERR: u8 = 2;
/// Shell protocol v2 packet id: the exit status (one byte of data).
pub const SHELL_V2_EXIT: u8 = 3;
/// The size of a shell protocol v2 packet header: the id, then the payload
/// length as a little-endian `u32`.
pub const SHELL_V2_HEADER: usize = 5;

/// The most bytes of one sync `DATA` message (adb's `SYNC_DATA_MAX`).
pub const SYNC_DATA_MAX: usize = 64 * 1024;
/// The longest path a sync request may name (adb's limit).
pub const SYNC_MAX_PATH: usize = 1024;

/// A shell protocol v2 packet: `id`, the length of `data`, then `data`
/// (longer than `u32::MAX` bytes is the caller's error: it is cut short in
/// the header only).
pub fn shell_v2_packet(id: u8, data: &[u8]) -> Vec<u8> {
    let mut packet = Vec::with_capacity(SHELL_V2_HEADER + data.len());
    packet.push(id);
    packet.extend_from_slice(&u32::try_from(data.len()).unwrap_or(u32::MAX).to_le_bytes());
    packet.extend_from_slice(data);
    packet
}

/// The id and payload length a shell protocol v2 header announces.
pub fn shell_v2_header(header: [u8; SHELL_V2_HEADER]) -> (u8, usize) {
    let [id, len @ ..] = header;
    (id, u32::from_le_bytes(len) as usize)
}

/// A sync message: four ASCII letters, a little-endian `u32` (the length
/// of `payload`, or a request's own word: `DONE`'s mtime), then `payload`.
pub fn sync_message(id: &[u8; 4], word: u32, payload: &[u8]) -> Vec<u8> {
    let mut message = Vec::with_capacity(8 + payload.len());
    message.extend_from_slice(id);
    message.extend_from_slice(&word.to_le_bytes());
    message.extend_from_slice(payload);
    message
}

/// The id and word of a sync message's 8-byte header.
pub fn sync_header(header: [u8; 8]) -> ([u8; 4], u32) {
    let [a, b, c, d, word @ ..] = header;
    ([a, b, c, d], u32::from_le_bytes(word))
}

/// The device's answer to `STAT`: mode, size and mtime (mode 0: no such
/// file).
pub fn sync_stat_reply(mode: u32, size: u32, mtime: u32) -> Vec<u8> {
    let mut reply = b"STAT".to_vec();
    for word in [mode, size, mtime] {
        reply.extend_from_slice(&word.to_le_bytes());
    }
    reply
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_read_back_what_was_written() {
        let packet = shell_v2_packet(SHELL_V2_STDERR, b"oops");
        let header: [u8; SHELL_V2_HEADER] = packet[..SHELL_V2_HEADER].try_into().unwrap();
        assert_eq!(shell_v2_header(header), (SHELL_V2_STDERR, 4));
        assert_eq!(&packet[SHELL_V2_HEADER..], b"oops");

        let message = sync_message(b"DONE", 1_750_000_000, b"");
        let header: [u8; 8] = message[..].try_into().unwrap();
        assert_eq!(sync_header(header), (*b"DONE", 1_750_000_000));
        assert_eq!(
            sync_message(b"DATA", 2, b"hi"),
            b"DATA\x02\0\0\0hi".to_vec()
        );
        assert_eq!(
            sync_stat_reply(0o100_644, 3, 1),
            b"STAT\xa4\x81\0\0\x03\0\0\0\x01\0\0\0".to_vec()
        );
    }
}
