//! The adb file service (`sync:`): files to and from the phone without a
//! shell, so their bytes and names never pass a command line.
//!
//! After `host:transport:SERIAL` and `sync:` (each answered `OKAY` by the
//! server), the connection carries sync requests, each an 8-byte header —
//! four ASCII letters and a little-endian `u32` — and a payload:
//!
//! | request | payload | reply |
//! |---|---|---|
//! | `STAT` | the path | `STAT` + mode, size, mtime (`u32` each; mode 0: no such file) |
//! | `SEND` | `PATH,MODE` (mode in decimal, file type bits included) | nothing until `DONE` |
//! | `DATA` | up to 64 KiB of the file | (after `SEND`) nothing |
//! | `DONE` | (the header's `u32` is the file's mtime) | `OKAY` (length 0), or `FAIL` + message |
//! | `QUIT` | none | the device closes |
//!
//! (`RECV` and `LIST` read files and directories; `files.pull` does not
//! need them yet.) This is version 1 of the protocol, which every adbd speaks (the v2
//! requests of newer releases are optional). A device that cannot create
//! the file still reads every `DATA` up to `DONE` before it answers `FAIL`,
//! and removes what it wrote; a connection closed before `DONE` leaves no
//! file either.

use super::exchange::{Conn, Dialer, ExchangeError, bounded};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

use super::wire::{SYNC_DATA_MAX, SYNC_MAX_PATH, sync_header, sync_message};

/// `S_IFREG`: the file type bits of a regular file in a `SEND` mode.
const S_IFREG: u32 = 0o100_000;
/// `S_IFMT`: the mask of the file type bits.
const S_IFMT: u32 = 0o170_000;
/// `S_IFDIR`.
const S_IFDIR: u32 = 0o040_000;

/// What `STAT` says about a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RemoteStat {
    /// `st_mode`, type bits included.
    pub(crate) mode: u32,
    /// The size in bytes (the low 32 bits: version 1 carries no more).
    pub(crate) size: u32,
}

impl RemoteStat {
    /// Whether the path is a directory.
    pub(crate) fn is_dir(self) -> bool {
        self.mode & S_IFMT == S_IFDIR
    }
}

/// One file to send.
pub(crate) struct Outgoing<'a> {
    /// The absolute path on the phone.
    pub(crate) remote: &'a str,
    /// The permission bits (e.g. `0o644`).
    pub(crate) permissions: u32,
    /// The file's modification time, Unix seconds.
    pub(crate) mtime: u32,
    /// Where the bytes come from.
    pub(crate) data: &'a mut (dyn AsyncRead + Unpin + Send),
    /// The most bytes `data` may yield; more is [`ExchangeError::TooLarge`]
    /// and the connection is dropped before `DONE`, so no file is left.
    pub(crate) max: u64,
    /// Look the path up first and report it in [`Sent::existed`]; with
    /// `replace` false, an existing path is not written.
    pub(crate) replace: bool,
}

/// What a send did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sent {
    /// The file was written: this many bytes; whether one was there before.
    Written { bytes: u64, replaced: bool },
    /// Nothing was written: the path exists (and `replace` was false) or is
    /// a directory.
    Exists(RemoteStat),
}

/// Open the file service of the device with `serial`.
async fn open(server: &Dialer, serial: &str) -> Result<Conn, ExchangeError> {
    let mut conn = Conn::to_device(server, serial).await?;
    conn.request("sync:").await?;
    Ok(conn)
}

/// Look `remote` up, then write the file unless [`Outgoing::replace`] is false
/// and something is there: one connection, one deadline.
pub(crate) async fn send(
    server: &Dialer,
    serial: &str,
    file: Outgoing<'_>,
    deadline: Instant,
) -> Result<Sent, ExchangeError> {
    check_path(file.remote)?;
    bounded(deadline, async {
        let mut conn = open(server, serial).await?;
        let before = stat_on(&mut conn, file.remote).await?;
        if let Some(st) = before
            && (st.is_dir() || !file.replace)
        {
            quit(&mut conn).await;
            return Ok(Sent::Exists(st));
        }
        let bytes = send_on(&mut conn, file).await?;
        quit(&mut conn).await;
        Ok(Sent::Written {
            bytes,
            replaced: before.is_some(),
        })
    })
    .await
}

/// What `STAT` says about `remote` (`None`: nothing there).
pub(crate) async fn stat(
    server: &Dialer,
    serial: &str,
    remote: &str,
    deadline: Instant,
) -> Result<Option<RemoteStat>, ExchangeError> {
    check_path(remote)?;
    bounded(deadline, async {
        let mut conn = open(server, serial).await?;
        let st = stat_on(&mut conn, remote).await?;
        quit(&mut conn).await;
        Ok(st)
    })
    .await
}

fn check_path(remote: &str) -> Result<(), ExchangeError> {
    if remote.len() > SYNC_MAX_PATH || remote.contains('\0') {
        return Err(ExchangeError::Protocol(format!(
            "a sync path must be at most {SYNC_MAX_PATH} bytes without NUL"
        )));
    }
    Ok(())
}

async fn write_request(conn: &mut Conn, id: &[u8; 4], payload: &[u8]) -> Result<(), ExchangeError> {
    let len = u32::try_from(payload.len())
        .map_err(|_| ExchangeError::Protocol("a sync payload over 4 GiB".into()))?;
    conn.stream
        .write_all(&sync_message(id, len, payload))
        .await?;
    Ok(())
}

async fn read_header(conn: &mut Conn) -> Result<([u8; 4], u32), ExchangeError> {
    let mut header = [0u8; 8];
    conn.stream.read_exact(&mut header).await?;
    Ok(sync_header(header))
}

/// The message of a `FAIL` whose header said `len` bytes follow.
async fn fail_message(conn: &mut Conn, len: u32) -> ExchangeError {
    if len as usize > SYNC_DATA_MAX {
        return ExchangeError::Protocol(format!("a FAIL message of {len} bytes"));
    }
    let mut message = vec![0u8; len as usize];
    match conn.stream.read_exact(&mut message).await {
        Ok(_) => ExchangeError::SyncFailed(String::from_utf8_lossy(&message).into_owned()),
        Err(e) => e.into(),
    }
}

fn unexpected(request: &str, id: &[u8; 4]) -> ExchangeError {
    ExchangeError::Protocol(format!(
        "unexpected {:?} in answer to {request}",
        String::from_utf8_lossy(id)
    ))
}

async fn stat_on(conn: &mut Conn, remote: &str) -> Result<Option<RemoteStat>, ExchangeError> {
    write_request(conn, b"STAT", remote.as_bytes()).await?;
    let (id, mode) = read_header(conn).await?;
    if &id != b"STAT" {
        return Err(unexpected("STAT", &id));
    }
    let size = conn.stream.read_u32_le().await?;
    let _mtime = conn.stream.read_u32_le().await?;
    Ok((mode != 0).then_some(RemoteStat { mode, size }))
}

/// `SEND`, the data in `DATA` requests, `DONE`, and the device's verdict.
async fn send_on(conn: &mut Conn, file: Outgoing<'_>) -> Result<u64, ExchangeError> {
    let mode = S_IFREG | (file.permissions & 0o777);
    let header = format!("{},{mode}", file.remote);
    write_request(conn, b"SEND", header.as_bytes()).await?;
    let mut buffer = vec![0u8; SYNC_DATA_MAX];
    let mut total: u64 = 0;
    loop {
        let n = read_chunk(file.data, &mut buffer).await?;
        if n == 0 {
            break;
        }
        total += n as u64;
        if total > file.max {
            // Dropping the connection before DONE leaves no file.
            return Err(ExchangeError::TooLarge);
        }
        write_request(conn, b"DATA", &buffer[..n]).await?;
    }
    conn.stream
        .write_all(&sync_message(b"DONE", file.mtime, b""))
        .await?;
    let (id, len) = read_header(conn).await?;
    match &id {
        b"OKAY" => Ok(total),
        b"FAIL" => Err(fail_message(conn, len).await),
        other => Err(unexpected("SEND", other)),
    }
}

/// Fill `buffer` from `data` as far as it goes (a file read may return
/// less than asked): the number of bytes, 0 at the end.
async fn read_chunk(
    data: &mut (dyn AsyncRead + Unpin + Send),
    buffer: &mut [u8],
) -> Result<usize, ExchangeError> {
    let mut filled = 0;
    while filled < buffer.len() {
        let n = data.read(&mut buffer[filled..]).await?;
        if n == 0 {
            break;
        }
        filled += n;
    }
    Ok(filled)
}

/// `QUIT`, best effort: the answer is already in hand.
async fn quit(conn: &mut Conn) {
    let _ = conn.stream.write_all(&sync_message(b"QUIT", 0, b"")).await;
}

#[cfg(test)]
mod tests {
    //! The sync client against a scripted device behind a scripted server.
    use super::*;
    use crate::adb::wire::sync_stat_reply;
    use crate::test_support::{loopback, read_request};
    use std::net::SocketAddrV4;
    use std::time::Duration;
    use tokio::net::TcpStream;

    /// A server that accepts the transport and `sync:` requests, then
    /// hands the connection to `device`; returns its address.
    async fn server<F, Fut>(device: F) -> SocketAddrV4
    where
        F: FnOnce(TcpStream) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let (listener, addr) = loopback().await;
        tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            for expected in ["host:transport:emu-1", "sync:"] {
                assert_eq!(read_request(&mut conn).await, expected);
                conn.write_all(b"OKAY").await.unwrap();
            }
            device(conn).await;
        });
        addr
    }

    async fn request(conn: &mut TcpStream) -> ([u8; 4], Vec<u8>) {
        let mut header = [0u8; 8];
        conn.read_exact(&mut header).await.unwrap();
        let (id, len) = sync_header(header);
        if &id == b"DONE" || &id == b"QUIT" {
            return (id, len.to_le_bytes().to_vec());
        }
        let mut body = vec![0u8; len as usize];
        conn.read_exact(&mut body).await.unwrap();
        (id, body)
    }

    fn deadline() -> Instant {
        Instant::now() + Duration::from_secs(5)
    }

    /// Send `data` to `remote` on `emu-1` behind `addr`, mode 0644.
    async fn send_to(
        addr: SocketAddrV4,
        remote: &str,
        mtime: u32,
        mut data: &[u8],
        max: u64,
        replace: bool,
    ) -> Result<Sent, ExchangeError> {
        let outgoing = Outgoing {
            remote,
            permissions: 0o644,
            mtime,
            data: &mut data,
            max,
            replace,
        };
        send(&Dialer::new(addr), "emu-1", outgoing, deadline()).await
    }

    #[tokio::test]
    async fn send_splits_the_data_into_64_kib_chunks_and_sends_the_mtime() {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let addr = server(|mut conn| async move {
            let (id, path) = request(&mut conn).await;
            assert_eq!(
                (&id, path.as_slice()),
                (b"STAT", "/sdcard/Download/é x".as_bytes())
            );
            conn.write_all(&sync_stat_reply(0, 0, 1_700_000_000))
                .await
                .unwrap();
            let (id, header) = request(&mut conn).await;
            assert_eq!(&id, b"SEND");
            assert_eq!(
                header,
                format!("/sdcard/Download/é x,{}", 0o100_644).as_bytes()
            );
            let mut chunks = Vec::new();
            let mtime = loop {
                let (id, body) = request(&mut conn).await;
                match &id {
                    b"DATA" => chunks.push(body),
                    b"DONE" => break u32::from_le_bytes(body.try_into().unwrap()),
                    other => panic!("{other:?}"),
                }
            };
            conn.write_all(b"OKAY\0\0\0\0").await.unwrap();
            let (id, _) = request(&mut conn).await;
            assert_eq!(&id, b"QUIT");
            let _ = tx.send((chunks, mtime));
        })
        .await;
        let data: Vec<u8> = (0..150_000u32).map(|i| (i % 251) as u8).collect();
        let sent = send_to(
            addr,
            "/sdcard/Download/é x",
            1_750_000_000,
            &data,
            1 << 20,
            false,
        )
        .await
        .unwrap();
        assert_eq!(
            sent,
            Sent::Written {
                bytes: 150_000,
                replaced: false
            }
        );
        let (chunks, mtime) = rx.await.unwrap();
        assert_eq!(mtime, 1_750_000_000);
        assert!(chunks.iter().all(|c| c.len() <= SYNC_DATA_MAX));
        assert_eq!(chunks.len(), 3);
        assert_eq!(chunks.concat(), data);
    }

    #[tokio::test]
    async fn an_existing_file_is_left_alone_unless_replaced() {
        let addr = server(|mut conn| async move {
            let _ = request(&mut conn).await;
            conn.write_all(&sync_stat_reply(0o100_644, 3, 1_700_000_000))
                .await
                .unwrap();
            let (id, _) = request(&mut conn).await;
            assert_eq!(&id, b"QUIT", "nothing is sent");
        })
        .await;
        let sent = send_to(addr, "/sdcard/a", 0, b"new", 10, false)
            .await
            .unwrap();
        assert!(matches!(sent, Sent::Exists(st) if st.size == 3 && !st.is_dir()));
    }

    #[tokio::test]
    async fn the_devices_fail_carries_its_message() {
        let addr = server(|mut conn| async move {
            let _ = request(&mut conn).await;
            conn.write_all(&sync_stat_reply(0, 0, 1_700_000_000))
                .await
                .unwrap();
            loop {
                let (id, _) = request(&mut conn).await;
                if &id == b"DONE" {
                    break;
                }
            }
            let message = b"couldn't create file: Read-only file system";
            let mut reply = b"FAIL".to_vec();
            reply.extend_from_slice(&(message.len() as u32).to_le_bytes());
            reply.extend_from_slice(message);
            conn.write_all(&reply).await.unwrap();
        })
        .await;
        let err = send_to(addr, "/system/x", 0, b"x", 10, true)
            .await
            .unwrap_err();
        assert!(
            matches!(&err, ExchangeError::SyncFailed(m) if m.contains("Read-only")),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn data_beyond_the_bound_stops_before_done() {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let addr = server(|mut conn| async move {
            let _ = request(&mut conn).await;
            conn.write_all(&sync_stat_reply(0, 0, 1_700_000_000))
                .await
                .unwrap();
            let mut ids = Vec::new();
            loop {
                let mut header = [0u8; 8];
                if conn.read_exact(&mut header).await.is_err() {
                    break; // closed by the client
                }
                let len = u32::from_le_bytes(header[4..].try_into().unwrap());
                ids.push(String::from_utf8_lossy(&header[..4]).into_owned());
                let mut body = vec![0u8; len as usize];
                if conn.read_exact(&mut body).await.is_err() {
                    break;
                }
            }
            let _ = tx.send(ids);
        })
        .await;
        let data = vec![7u8; 200_000];
        let err = send_to(addr, "/sdcard/a", 0, &data, 100_000, true)
            .await
            .unwrap_err();
        assert!(matches!(err, ExchangeError::TooLarge), "{err:?}");
        let ids = rx.await.unwrap();
        assert!(!ids.iter().any(|i| i == "DONE"), "{ids:?}");
    }
}
