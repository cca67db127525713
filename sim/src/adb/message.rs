//! ADB transport messages: the 24-byte header and its payload.
//!
//! Pure encoding and decoding; no I/O. The header is six little-endian `u32`
//! words: command, arg0, arg1, data length, data check (byte sum of the
//! payload) and magic (`command ^ 0xffffffff`).

use std::fmt;

/// `CNXN`: connect.
pub(crate) const A_CNXN: u32 = 0x4e58_4e43;
/// `AUTH`: authentication.
pub(crate) const A_AUTH: u32 = 0x4854_5541;
/// `OPEN`: open a stream.
pub(crate) const A_OPEN: u32 = 0x4e45_504f;
/// `OKAY`: stream ready / acknowledge.
pub(crate) const A_OKAY: u32 = 0x5941_4b4f;
/// `CLSE`: close a stream.
pub(crate) const A_CLSE: u32 = 0x4553_4c43;
/// `WRTE`: stream data.
pub(crate) const A_WRTE: u32 = 0x4554_5257;
/// `STLS`: switch to TLS (never sent by this device).
pub(crate) const A_STLS: u32 = 0x534c_5453;

/// The protocol version this device announces (skips data checks on the host).
pub(crate) const A_VERSION: u32 = 0x0100_0001;
/// The largest WRTE payload this device accepts and sends.
pub(crate) const MAX_PAYLOAD: u32 = 256 * 1024;
/// Upper bound on an incoming payload: the host offers up to 1 MiB, and the
/// margin keeps a corrupt length from making us allocate gigabytes.
pub(crate) const MAX_INCOMING: u32 = 1024 * 1024 + 4096;

/// `AUTH` arg0: a token for the host to sign.
pub(crate) const AUTH_TOKEN: u32 = 1;
/// `AUTH` arg0: the host's signature of our token.
pub(crate) const AUTH_SIGNATURE: u32 = 2;
/// `AUTH` arg0: the host's public key.
pub(crate) const AUTH_RSAPUBLICKEY: u32 = 3;

/// Size of the header in bytes.
pub(crate) const HEADER_LEN: usize = 24;

/// Why a header could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FrameError {
    /// `magic` is not `command ^ 0xffffffff`.
    BadMagic {
        /// The command word.
        command: u32,
        /// The magic word.
        magic: u32,
    },
    /// The payload is larger than `MAX_INCOMING`.
    TooLong(u32),
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BadMagic { command, magic } => {
                write!(f, "bad magic {magic:#010x} for command {command:#010x}")
            }
            Self::TooLong(n) => write!(f, "payload of {n} bytes exceeds {MAX_INCOMING}"),
        }
    }
}

/// A decoded header (payload not yet read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    pub(crate) command: u32,
    pub(crate) arg0: u32,
    pub(crate) arg1: u32,
    pub(crate) data_length: u32,
    pub(crate) data_check: u32,
}

impl Header {
    /// Decodes and validates a header.
    pub(crate) fn decode(bytes: &[u8; HEADER_LEN]) -> Result<Self, FrameError> {
        let word =
            |i: usize| u32::from_le_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
        let command = word(0);
        let magic = word(20);
        if magic != command ^ 0xffff_ffff {
            return Err(FrameError::BadMagic { command, magic });
        }
        let data_length = word(12);
        if data_length > MAX_INCOMING {
            return Err(FrameError::TooLong(data_length));
        }
        Ok(Self {
            command,
            arg0: word(4),
            arg1: word(8),
            data_length,
            data_check: word(16),
        })
    }
}

/// A whole message.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Message {
    pub(crate) command: u32,
    pub(crate) arg0: u32,
    pub(crate) arg1: u32,
    pub(crate) data: Vec<u8>,
}

impl fmt::Debug for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}({:#x}, {:#x}, {} bytes)",
            command_name(self.command),
            self.arg0,
            self.arg1,
            self.data.len()
        )
    }
}

impl Message {
    /// A message with a payload.
    pub(crate) fn new(command: u32, arg0: u32, arg1: u32, data: Vec<u8>) -> Self {
        Self {
            command,
            arg0,
            arg1,
            data,
        }
    }

    /// Header plus payload, ready to write.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_LEN + self.data.len());
        let len = u32::try_from(self.data.len()).unwrap_or(u32::MAX);
        for word in [
            self.command,
            self.arg0,
            self.arg1,
            len,
            checksum(&self.data),
            self.command ^ 0xffff_ffff,
        ] {
            out.extend_from_slice(&word.to_le_bytes());
        }
        out.extend_from_slice(&self.data);
        out
    }
}

/// The byte sum of a payload (`data_check`).
pub(crate) fn checksum(data: &[u8]) -> u32 {
    data.iter()
        .fold(0u32, |acc, b| acc.wrapping_add(u32::from(*b)))
}

/// Splits `data` into pieces of at most `max` bytes (at least one byte each;
/// no pieces for empty data).
pub(crate) fn chunk(data: &[u8], max: usize) -> Vec<Vec<u8>> {
    data.chunks(max.max(1)).map(<[u8]>::to_vec).collect()
}

/// The four-letter name of a command, for logs.
pub(crate) fn command_name(command: u32) -> String {
    match command {
        A_CNXN | A_AUTH | A_OPEN | A_OKAY | A_CLSE | A_WRTE | A_STLS => command
            .to_le_bytes()
            .iter()
            .map(|b| char::from(*b))
            .collect(),
        other => format!("{other:#010x}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_then_decode_round_trips() {
        let msg = Message::new(A_WRTE, 7, 9, b"hello".to_vec());
        let bytes = msg.encode();
        assert_eq!(bytes.len(), HEADER_LEN + 5);
        let header: [u8; HEADER_LEN] = bytes[..HEADER_LEN].try_into().expect("24 bytes");
        let h = Header::decode(&header).expect("valid header");
        assert_eq!(
            h,
            Header {
                command: A_WRTE,
                arg0: 7,
                arg1: 9,
                data_length: 5,
                data_check: u32::from(b'h')
                    + u32::from(b'e')
                    + 2 * u32::from(b'l')
                    + u32::from(b'o'),
            }
        );
        assert_eq!(&bytes[HEADER_LEN..], b"hello");
    }

    #[test]
    fn header_words_are_little_endian() {
        let bytes = Message::new(A_CNXN, A_VERSION, MAX_PAYLOAD, Vec::new()).encode();
        assert_eq!(&bytes[0..4], b"CNXN");
        assert_eq!(&bytes[4..8], &[0x01, 0x00, 0x00, 0x01]);
        assert_eq!(&bytes[20..24], &(A_CNXN ^ 0xffff_ffff).to_le_bytes());
    }

    #[test]
    fn bad_magic_is_rejected() {
        let mut bytes = Message::new(A_OKAY, 1, 2, Vec::new()).encode();
        bytes[23] ^= 0x01;
        let header: [u8; HEADER_LEN] = bytes[..HEADER_LEN].try_into().expect("24 bytes");
        assert!(matches!(
            Header::decode(&header),
            Err(FrameError::BadMagic { .. })
        ));
    }

    #[test]
    fn oversized_payload_is_rejected() {
        let mut bytes = Message::new(A_WRTE, 1, 2, Vec::new()).encode();
        bytes[12..16].copy_from_slice(&(MAX_INCOMING + 1).to_le_bytes());
        let header: [u8; HEADER_LEN] = bytes[..HEADER_LEN].try_into().expect("24 bytes");
        assert_eq!(
            Header::decode(&header),
            Err(FrameError::TooLong(MAX_INCOMING + 1))
        );
    }

    #[test]
    fn checksum_is_a_wrapping_byte_sum() {
        assert_eq!(checksum(&[]), 0);
        assert_eq!(checksum(&[0xff, 0x01]), 0x100);
    }

    #[test]
    fn chunking_respects_the_limit() {
        let data = vec![7u8; 10_000];
        let pieces = chunk(&data, 4096);
        assert_eq!(
            pieces.iter().map(Vec::len).collect::<Vec<_>>(),
            [4096, 4096, 1808]
        );
        assert_eq!(pieces.concat(), data);
        assert!(chunk(&[], 4096).is_empty());
    }

    #[test]
    fn command_names() {
        assert_eq!(command_name(A_OPEN), "OPEN");
        assert_eq!(command_name(1), "0x00000001");
    }
}
