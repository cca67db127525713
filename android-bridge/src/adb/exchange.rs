//! One shell command through the adb server, on the call path.
//!
//! The adb server speaks a small text protocol on its TCP port: a request
//! is four hex digits of length and the request text; the server answers
//! `OKAY`, or `FAIL` with a hex-length message. A shell command is two
//! requests on one connection: `host:transport:SERIAL` picks the device,
//! then `shell,v2,raw:COMMAND` (shell protocol v2: framed stdout, stderr
//! and the exit status) or, for devices older than Android 7, `shell:COMMAND`
//! (raw bytes, stderr merged, no exit status: the caller adds a trailer).
//! Each request waits for its `OKAY` before the next is sent, as adb's own
//! client does.
//!
//! `adb_client` 3.2 still does discovery and connection management; this
//! exchange replaces its `shell_command` on the call path because that one
//! blocks a thread, opens a second connection before every command (to ask
//! the server for the device's features), drops the exit status it has just
//! read, and has no read timeouts. Here the features are asked once per
//! device ([`features`]), the exit status comes from the v2 packet, and the
//! I/O is tokio's: a command waiting on the phone is a future, not a thread,
//! so any number of calls share the runtime's threads.
//!
//! Every exchange runs under one deadline ([`tokio::time::timeout_at`]
//! around the whole of it: connect, every write, every read), so a server
//! or device that is silent, or trickles bytes, cannot stretch it. A caller
//! that gives up earlier drops the future, and with it the connection, at
//! once: nothing keeps running on its behalf.
//!
//! Opening the TCP connection is an eighth of a call's time on loopback
//! (the handshake runs inside `connect(2)`, then the server accepts). A
//! [`Dialer`] therefore keeps one connection to the server opened ahead of
//! need: a finished command opens the next one off the caller's path.

use std::future::Future;
use std::io;
use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::runtime::RuntimeFlavor;
use tokio::time::Instant;

use super::wire::{SHELL_V2_EXIT, SHELL_V2_HEADER, SHELL_V2_STDERR, SHELL_V2_STDOUT};

/// Most output one command may produce. Every action's output is a few
/// kilobytes (a package list of a few hundred apps is ~30 KB); anything near
/// this is a runaway command, not an answer.
pub(crate) const MAX_OUTPUT: usize = 16 * 1024 * 1024;

/// The read buffer of one connection. The server's replies come in pieces
/// of at most a few KiB (adbd's packets); one buffered read usually takes
/// a v2 header, its payload and the next header together, where unbuffered
/// reads would cost a system call for each.
const READ_BUFFER: usize = 16 * 1024;

/// How a device frames shell output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Protocol {
    /// Shell protocol v2 (Android 7+, feature `shell_v2`).
    V2,
    /// Raw bytes with stderr merged and no exit status.
    V1,
}

/// What one exchange produced.
#[derive(Debug, Default)]
pub(crate) struct Exchange {
    pub(crate) stdout: Vec<u8>,
    pub(crate) stderr: Vec<u8>,
    /// The exit status; `None` for [`Protocol::V1`].
    pub(crate) exit: Option<u8>,
}

/// Why an exchange failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ExchangeError {
    /// The server answered `FAIL` (`device offline`, `device unauthorized`,
    /// `device 'x' not found`, …).
    #[error("adb server: {0}")]
    Refused(String),
    /// The connection failed, timed out ([`io::ErrorKind::TimedOut`]), or
    /// closed before the command finished ([`io::ErrorKind::UnexpectedEof`]).
    #[error("{0}")]
    Io(#[from] io::Error),
    /// The reply did not follow the protocol.
    #[error("malformed reply from the adb server: {0}")]
    Protocol(String),
    /// More output than [`MAX_OUTPUT`].
    #[error("the command printed more than {} MiB", MAX_OUTPUT / (1024 * 1024))]
    TooLarge,
    /// The device's file service answered `FAIL` (a sync request: the
    /// file cannot be created, read, …), with its message.
    #[error("{0}")]
    SyncFailed(String),
}

/// Run `command` on the device with `serial`, finishing by `deadline`.
pub(crate) async fn shell(
    server: &Arc<Dialer>,
    serial: &str,
    command: &str,
    protocol: Protocol,
    deadline: Instant,
) -> Result<Exchange, ExchangeError> {
    let service = match protocol {
        Protocol::V2 => format!("shell,v2,raw:{command}"),
        Protocol::V1 => format!("shell:{command}"),
    };
    on_device(server, serial, &service, protocol, deadline).await
}

/// Run `command` through the `exec:` service (`adb exec-out`): no terminal,
/// so binary output arrives unchanged, but no exit status and stderr merged
/// (framed as [`Protocol::V1`]). For devices without shell protocol v2,
/// whose `shell:` goes through a terminal that turns every `\n` into `\r\n`.
pub(crate) async fn exec(
    server: &Arc<Dialer>,
    serial: &str,
    command: &str,
    deadline: Instant,
) -> Result<Exchange, ExchangeError> {
    let service = format!("exec:{command}");
    on_device(server, serial, &service, Protocol::V1, deadline).await
}

/// Request `service` of the device with `serial` and read its output as
/// `framing` frames it: v2 packets up to the exit status, or raw bytes
/// until the device closes the stream.
async fn on_device(
    server: &Arc<Dialer>,
    serial: &str,
    service: &str,
    framing: Protocol,
    deadline: Instant,
) -> Result<Exchange, ExchangeError> {
    bounded(deadline, async {
        let mut conn = Conn::to_device(server, serial).await?;
        conn.request(service).await?;
        let out = match framing {
            Protocol::V2 => conn.read_v2().await?,
            Protocol::V1 => Exchange {
                stdout: conn.read_to_end().await?,
                ..Exchange::default()
            },
        };
        server.finish(conn);
        Ok(out)
    })
    .await
}

/// Run the quoted command `line` on the device, in the protocol it speaks:
/// `known`, or else learned from its features first. One deadline covers
/// both exchanges. Returns the protocol used with the output.
pub(crate) async fn run(
    server: &Arc<Dialer>,
    serial: &str,
    line: String,
    known: Option<Protocol>,
    deadline: Instant,
) -> Result<(Protocol, Exchange), ExchangeError> {
    let protocol = match known {
        Some(p) => p,
        None => protocol_for(&features(server, serial, deadline).await?),
    };
    let line = match protocol {
        Protocol::V2 => line,
        Protocol::V1 => super::shell::with_trailer(line),
    };
    shell(server, serial, &line, protocol, deadline)
        .await
        .map(|out| (protocol, out))
}

/// The device's features as the adb server knows them (`shell_v2`, `cmd`, …).
pub(crate) async fn features(
    server: &Dialer,
    serial: &str,
    deadline: Instant,
) -> Result<Vec<String>, ExchangeError> {
    let body = bounded(deadline, async {
        let mut conn =
            Conn::first_request(server, &format!("host-serial:{serial}:features")).await?;
        conn.read_hex_body().await
    })
    .await?;
    Ok(String::from_utf8_lossy(&body)
        .split(',')
        .map(str::trim)
        .filter(|f| !f.is_empty())
        .map(str::to_owned)
        .collect())
}

/// Which protocol a device with these features speaks.
pub(crate) fn protocol_for(features: &[String]) -> Protocol {
    if features.iter().any(|f| f == "shell_v2") {
        Protocol::V2
    } else {
        Protocol::V1
    }
}

/// How long opening a spare connection may take before it is given up
/// (the next call then connects itself).
const SPARE_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The adb server's address, and one connection to it opened ahead of need.
///
/// After a command has answered, [`Dialer::finish`] closes its connection
/// and opens the next call's, both in a short task of their own: on
/// loopback the kernel runs a close's FIN and a connect's handshake inside
/// the system call. Connecting took 47–66 µs of a call's 350–450 µs;
/// taking the spare takes 5–9 µs (`docs/benchmarks.md`, "A connection
/// opened ahead").
///
/// The spare is kept as a `std` socket, not registered with any runtime, so
/// whichever runtime takes it (the daemon's, or `call --local`'s) registers
/// it. The adb server keeps an idle connection open indefinitely; one it
/// has closed since (it was restarted) is seen before use, and a fresh
/// connection is opened instead. One that dies in between fails its first
/// request, which is then sent once more on a fresh connection: nothing
/// has reached a device by then.
///
/// Only a server on this host gets a spare. Across a network, a router may
/// forget an idle connection without telling either end, and a call on it
/// would wait out its whole timeout.
#[derive(Debug)]
pub(crate) struct Dialer {
    addr: SocketAddrV4,
    /// Whether spares are kept: the server is on this host.
    ahead: bool,
    spare: Mutex<Option<std::net::TcpStream>>,
    /// Set while a spare is being opened, so that commands finishing
    /// together open one, not one each.
    opening: AtomicBool,
    /// Told each time a spare is stored, so that tests wait for that
    /// instead of polling.
    #[cfg(test)]
    stored: tokio::sync::Notify,
}

impl Dialer {
    /// A dialer for the adb server at `addr`, with no spare yet.
    pub(crate) fn new(addr: SocketAddrV4) -> Arc<Self> {
        Arc::new(Self {
            addr,
            ahead: addr.ip().is_loopback(),
            spare: Mutex::new(None),
            opening: AtomicBool::new(false),
            #[cfg(test)]
            stored: tokio::sync::Notify::new(),
        })
    }

    /// A connection: the spare when there is a live one (`true`), else a
    /// fresh one (`false`).
    async fn connect(&self) -> io::Result<(TcpStream, bool)> {
        if let Some(spare) = self.take_spare() {
            return Ok((spare, true));
        }
        Ok((fresh(self.addr).await?, false))
    }

    /// The spare, unless the server has closed it (or, against the
    /// protocol, sent something on it).
    fn take_spare(&self) -> Option<TcpStream> {
        let spare = self
            .spare
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()?;
        match spare.peek(&mut [0u8; 1]) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => TcpStream::from_std(spare).ok(),
            _ => None,
        }
    }

    /// Close `conn`, whose command has answered, and open a spare if there
    /// is none: in a task of their own when on a runtime (a connection
    /// dropped outside one just closes).
    ///
    /// A current-thread runtime opens no spare: there the task runs on the
    /// thread of the calls, so it could only delay the next one, and its
    /// main user, `call --local`, makes one call and exits.
    pub(crate) fn finish(self: &Arc<Self>, conn: Conn) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return drop(conn);
        };
        let dialer =
            (runtime.runtime_flavor() != RuntimeFlavor::CurrentThread).then(|| Arc::clone(self));
        drop(runtime.spawn(async move {
            drop(conn);
            if let Some(dialer) = dialer {
                dialer.open_spare().await;
            }
        }));
    }

    async fn open_spare(&self) {
        if !self.ahead || self.has_spare() || self.opening.swap(true, Ordering::AcqRel) {
            return;
        }
        // Cleared however this ends, a runtime shutting down included.
        let _opening = Opening(&self.opening);
        let opened = tokio::time::timeout(SPARE_CONNECT_TIMEOUT, fresh(self.addr)).await;
        if let Ok(Ok(stream)) = opened
            && let Ok(stream) = stream.into_std()
        {
            let mut spare = self.spare.lock().unwrap_or_else(|e| e.into_inner());
            if spare.is_none() {
                *spare = Some(stream);
                #[cfg(test)]
                self.stored.notify_one();
            }
        }
    }

    fn has_spare(&self) -> bool {
        self.spare
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }
}

/// [`Dialer::opening`] while set by one task; cleared when dropped.
struct Opening<'a>(&'a AtomicBool);

impl Drop for Opening<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// A new connection to `addr`, with Nagle's delay off (every request is
/// one small write that waits for its answer).
async fn fresh(addr: SocketAddrV4) -> io::Result<TcpStream> {
    let stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

fn out_of_time() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "the adb exchange ran out of time")
}

/// `work` if it finishes by `deadline`, else [`io::ErrorKind::TimedOut`].
/// A deadline already past starts nothing (tokio's timeout would still poll
/// `work` once, and a connect on loopback can finish in that one poll).
pub(super) async fn bounded<T>(
    deadline: Instant,
    work: impl Future<Output = Result<T, ExchangeError>>,
) -> Result<T, ExchangeError> {
    if Instant::now() >= deadline {
        return Err(out_of_time().into());
    }
    tokio::time::timeout_at(deadline, work)
        .await
        .unwrap_or_else(|_| Err(out_of_time().into()))
}

/// One connection to the adb server. Its deadline is the caller's
/// ([`bounded`]), so none of its reads or writes is bounded on its own.
pub(super) struct Conn {
    /// Writes pass straight through tokio's `BufReader`.
    pub(super) stream: BufReader<TcpStream>,
}

impl Conn {
    fn new(stream: TcpStream) -> Self {
        Self {
            stream: BufReader::with_capacity(READ_BUFFER, stream),
        }
    }

    /// A connection whose first request, `text`, the server has accepted.
    /// A spare connection that fails it (the server closed it since it was
    /// checked) is replaced by a fresh one, and `text` sent once more: a
    /// first request only picks a device or asks the server, so nothing
    /// has been done twice.
    pub(super) async fn first_request(server: &Dialer, text: &str) -> Result<Self, ExchangeError> {
        let (stream, spare) = server.connect().await?;
        let mut conn = Self::new(stream);
        match conn.request(text).await {
            Ok(()) => Ok(conn),
            Err(ExchangeError::Io(_)) if spare => {
                let mut conn = Self::new(fresh(server.addr).await?);
                conn.request(text).await?;
                Ok(conn)
            }
            Err(e) => Err(e),
        }
    }

    /// A connection switched to the device with `serial`
    /// (`host:transport:SERIAL`), ready for a service request.
    pub(super) async fn to_device(server: &Dialer, serial: &str) -> Result<Self, ExchangeError> {
        Self::first_request(server, &format!("host:transport:{serial}")).await
    }

    /// Send one request and read the server's `OKAY` (or its `FAIL`).
    pub(super) async fn request(&mut self, text: &str) -> Result<(), ExchangeError> {
        if text.len() > 0xffff {
            return Err(ExchangeError::Protocol(format!(
                "a request of {} bytes exceeds the protocol's 64 KiB",
                text.len()
            )));
        }
        let framed = format!("{:04x}{text}", text.len());
        self.stream.write_all(framed.as_bytes()).await?;
        let mut status = [0u8; 4];
        self.stream.read_exact(&mut status).await?;
        match &status {
            b"OKAY" => Ok(()),
            b"FAIL" => {
                let message = self.read_hex_body().await?;
                Err(ExchangeError::Refused(
                    String::from_utf8_lossy(&message).into_owned(),
                ))
            }
            other => Err(ExchangeError::Protocol(format!(
                "expected OKAY or FAIL, got {:?}",
                String::from_utf8_lossy(other)
            ))),
        }
    }

    /// A body prefixed with four hex digits of length.
    pub(super) async fn read_hex_body(&mut self) -> Result<Vec<u8>, ExchangeError> {
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len).await?;
        let len = std::str::from_utf8(&len)
            .ok()
            .and_then(|s| usize::from_str_radix(s, 16).ok())
            .ok_or_else(|| ExchangeError::Protocol(format!("bad length {len:?}")))?;
        let mut body = vec![0u8; len];
        self.stream.read_exact(&mut body).await?;
        Ok(body)
    }

    /// Shell v2 packets up to the exit status. The connection closing first
    /// means the command was cut short.
    async fn read_v2(&mut self) -> Result<Exchange, ExchangeError> {
        let mut out = Exchange::default();
        loop {
            let mut header = [0u8; SHELL_V2_HEADER];
            self.stream.read_exact(&mut header).await?;
            let (id, len) = super::wire::shell_v2_header(header);
            if out.stdout.len() + out.stderr.len() + len > MAX_OUTPUT {
                return Err(ExchangeError::TooLarge);
            }
            match id {
                SHELL_V2_STDOUT => self.append(&mut out.stdout, len).await?,
                SHELL_V2_STDERR => self.append(&mut out.stderr, len).await?,
                SHELL_V2_EXIT => {
                    if len != 1 {
                        return Err(ExchangeError::Protocol(format!(
                            "exit status packet of {len} bytes"
                        )));
                    }
                    out.exit = Some(self.stream.read_u8().await?);
                    return Ok(out);
                }
                // Other ids (stdin, close-stdin, window size) only flow to
                // the device; skip their payload if a device sends one.
                _ => self.append(&mut Vec::new(), len).await?,
            }
        }
    }

    async fn append(&mut self, into: &mut Vec<u8>, len: usize) -> io::Result<()> {
        let start = into.len();
        into.resize(start + len, 0);
        self.stream.read_exact(&mut into[start..]).await?;
        Ok(())
    }

    /// Everything until the device closes the stream (shell v1).
    async fn read_to_end(&mut self) -> Result<Vec<u8>, ExchangeError> {
        let mut out = Vec::new();
        // One byte past the limit tells a runaway command from one that
        // printed exactly MAX_OUTPUT.
        let limit = u64::try_from(MAX_OUTPUT)
            .unwrap_or(u64::MAX)
            .saturating_add(1);
        (&mut self.stream).take(limit).read_to_end(&mut out).await?;
        if out.len() > MAX_OUTPUT {
            return Err(ExchangeError::TooLarge);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    //! The exchange against a scripted adb server on loopback: each test
    //! checks the requests it receives and answers with fixed bytes. The
    //! scripted server is a task on the test's own runtime, so every test
    //! here also shows that an exchange needs no thread of its own.
    use super::*;
    use crate::adb::wire::shell_v2_packet;
    use crate::test_support::{accept_requests, loopback, read_request};
    use std::time::Duration;

    /// A one-connection server: reads `requests` (checking each), then
    /// writes `reply` and closes, or, when `hold` is set, keeps the
    /// connection open until the client closes it. Returns its address.
    async fn server(requests: &'static [&'static str], reply: Vec<u8>, hold: bool) -> SocketAddrV4 {
        serve(move |mut conn| async move {
            for expected in requests {
                let body = read_request(&mut conn).await;
                assert_eq!(body, *expected);
                if !expected.starts_with("host-serial:") {
                    conn.write_all(b"OKAY").await.unwrap();
                }
            }
            conn.write_all(&reply).await.unwrap();
            if hold {
                // Until the client closes its end (or sends something).
                let _ = conn.read(&mut [0u8; 1]).await;
            }
        })
        .await
    }

    /// A one-connection server on loopback that hands the connection to
    /// `answer` in a task of its own. Returns its address.
    async fn serve<F, Fut>(answer: F) -> SocketAddrV4
    where
        F: FnOnce(TcpStream) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let (listener, addr) = loopback().await;
        tokio::spawn(async move { answer(listener.accept().await.unwrap().0).await });
        addr
    }

    fn within(timeout: Duration) -> Instant {
        Instant::now() + timeout
    }

    /// A command to `addr` with `timeout` fails as timed out, within `limit`.
    async fn times_out_within(addr: SocketAddrV4, timeout: Duration, limit: Duration) {
        let started = Instant::now();
        let err = battery(addr, timeout).await.unwrap_err();
        let took = started.elapsed();
        assert!(
            matches!(&err, ExchangeError::Io(e) if e.kind() == io::ErrorKind::TimedOut),
            "{err:?}"
        );
        assert!(took < limit, "took {took:?}");
    }

    /// `dumpsys battery` through shell v2 on `emu-1` behind `addr`, with
    /// `timeout`.
    async fn battery(addr: SocketAddrV4, timeout: Duration) -> Result<Exchange, ExchangeError> {
        shell(
            &Dialer::new(addr),
            "emu-1",
            "dumpsys battery",
            Protocol::V2,
            within(timeout),
        )
        .await
    }

    const V2_REQUESTS: &[&str] = &["host:transport:emu-1", "shell,v2,raw:dumpsys battery"];
    const SECOND: Duration = Duration::from_secs(1);

    #[tokio::test]
    async fn v2_separates_the_streams_and_carries_the_exit_status() {
        let mut reply = shell_v2_packet(SHELL_V2_STDOUT, b"level: 5");
        reply.extend(shell_v2_packet(SHELL_V2_STDERR, b"warn"));
        reply.extend(shell_v2_packet(SHELL_V2_STDOUT, b"0\n"));
        reply.extend(shell_v2_packet(SHELL_V2_EXIT, &[3]));
        let addr = server(V2_REQUESTS, reply, true).await;
        // The server holds the connection open: the exchange ends at the
        // exit packet, not at the close.
        let out = battery(addr, SECOND).await.unwrap();
        assert_eq!(out.stdout, b"level: 50\n");
        assert_eq!(out.stderr, b"warn");
        assert_eq!(out.exit, Some(3));
    }

    /// The connection is closed after the answer, off the caller's path,
    /// but closed: the device's end sees it within a second.
    #[tokio::test]
    async fn a_finished_v2_exchange_closes_its_connection() {
        let (closed_tx, closed_rx) = tokio::sync::oneshot::channel();
        let addr = serve(|mut conn| async move {
            accept_requests(&mut conn, 2).await;
            conn.write_all(&shell_v2_packet(SHELL_V2_EXIT, &[0]))
                .await
                .unwrap();
            let closed = conn.read(&mut [0u8; 1]).await.map(|n| n == 0);
            let _ = closed_tx.send(closed);
        })
        .await;
        let out = battery(addr, SECOND).await.unwrap();
        assert_eq!(out.exit, Some(0));
        let closed = tokio::time::timeout(SECOND, closed_rx)
            .await
            .expect("the server saw the close within a second")
            .unwrap();
        assert!(closed.unwrap(), "an orderly close, not an error");
    }

    /// What [`numbering_server`] saw of a connection, by its number.
    #[derive(Debug, PartialEq)]
    enum Seen {
        Accepted(usize),
        /// The client closed it, after its command was answered.
        Closed(usize),
    }

    /// A server that answers every command `id` with its connection's
    /// number (0 for the first accepted) on stdout, or, for a connection
    /// whose number `drop_on_request` picks, reads the first request and
    /// closes without an answer. Returns its address and what it sees.
    async fn numbering_server(
        drop_on_request: fn(usize) -> bool,
    ) -> (SocketAddrV4, tokio::sync::mpsc::UnboundedReceiver<Seen>) {
        let (listener, addr) = loopback().await;
        let (seen, events) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            for number in 0.. {
                let (mut conn, _) = listener.accept().await.unwrap();
                let _ = seen.send(Seen::Accepted(number));
                let seen = seen.clone();
                tokio::spawn(async move {
                    if drop_on_request(number) {
                        let _ = read_request(&mut conn).await;
                        return;
                    }
                    accept_requests(&mut conn, 2).await;
                    let mut reply = shell_v2_packet(SHELL_V2_STDOUT, number.to_string().as_bytes());
                    reply.extend(shell_v2_packet(SHELL_V2_EXIT, &[0]));
                    conn.write_all(&reply).await.unwrap();
                    if conn.read(&mut [0u8; 1]).await.is_ok_and(|n| n == 0) {
                        let _ = seen.send(Seen::Closed(number));
                    }
                });
            }
        });
        (addr, events)
    }

    /// The next thing the server saw, within a second.
    async fn next_seen(events: &mut tokio::sync::mpsc::UnboundedReceiver<Seen>) -> Seen {
        tokio::time::timeout(SECOND, events.recv())
            .await
            .expect("the server saw something within a second")
            .expect("the server runs")
    }

    /// `id` on `emu-1` through `dialer`, shell v2, within a second.
    async fn id(dialer: &Arc<Dialer>) -> Result<Exchange, ExchangeError> {
        shell(dialer, "emu-1", "id", Protocol::V2, within(SECOND)).await
    }

    /// `id` through `dialer`: the number of the connection that carried it.
    async fn connection_number(dialer: &Arc<Dialer>) -> usize {
        let out = id(dialer).await.unwrap();
        String::from_utf8(out.stdout).unwrap().parse().unwrap()
    }

    /// Wait until `dialer` has stored a spare.
    async fn spare_opened(dialer: &Dialer) {
        tokio::time::timeout(SECOND, dialer.stored.notified())
            .await
            .expect("a spare connection within a second");
        assert!(dialer.has_spare());
    }

    /// The command after a finished one goes out on the connection opened
    /// ahead for it, not on a new one; and it opens the next.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_next_command_goes_out_on_the_connection_opened_ahead() {
        let (addr, mut seen) = numbering_server(|_| false).await;
        let dialer = Dialer::new(addr);
        assert_eq!(connection_number(&dialer).await, 0);
        spare_opened(&dialer).await;
        assert_eq!(connection_number(&dialer).await, 1, "the spare carried it");
        spare_opened(&dialer).await;
        assert_eq!(connection_number(&dialer).await, 2);
        spare_opened(&dialer).await;
        // Three commands and one spare, each connection accepted once: a
        // spare is opened only when none is held.
        let mut accepted = Vec::new();
        while accepted.len() < 4 {
            if let Seen::Accepted(n) = next_seen(&mut seen).await {
                accepted.push(n);
            }
        }
        assert_eq!(accepted, [0, 1, 2, 3]);
        while let Ok(event) = seen.try_recv() {
            assert!(matches!(event, Seen::Closed(_)), "{event:?}");
        }
    }

    /// A spare the server has closed since (it was restarted) is seen
    /// before use, and the command goes out on a fresh connection to the
    /// server now listening.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_spare_the_server_closed_is_not_used() {
        let (listener, addr) = loopback().await;
        let dialer = Dialer::new(addr);
        let first = tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            accept_requests(&mut conn, 2).await;
            conn.write_all(&shell_v2_packet(SHELL_V2_EXIT, &[0]))
                .await
                .unwrap();
            // The spare: accepted, then the server goes away.
            let (spare, _) = listener.accept().await.unwrap();
            drop((spare, listener));
        });
        let out = id(&dialer).await.unwrap();
        assert_eq!(out.exit, Some(0));
        first.await.unwrap();
        spare_opened(&dialer).await;
        // A new server on the same port; only it must see the command.
        let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
        tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            accept_requests(&mut conn, 2).await;
            conn.write_all(&shell_v2_packet(SHELL_V2_EXIT, &[7]))
                .await
                .unwrap();
            let _ = conn.read(&mut [0u8; 1]).await;
        });
        // Until the server's close has reached the spare: watched through a
        // second handle on it, so the spare itself stays held.
        let watch = {
            let spare = dialer.spare.lock().unwrap();
            let spare = spare.as_ref().expect("the spare is still held");
            TcpStream::from_std(spare.try_clone().unwrap()).unwrap()
        };
        tokio::time::timeout(SECOND, watch.readable())
            .await
            .expect("the close reached the spare within a second")
            .unwrap();
        drop(watch);
        assert!(
            dialer.take_spare().is_none(),
            "a closed spare is not handed out"
        );
        let out = id(&dialer).await.unwrap();
        assert_eq!(out.exit, Some(7));
    }

    /// A spare that dies between its check and its first request (the
    /// request went out, no answer came) is replaced, and the request sent
    /// again on a fresh connection: the command runs once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_spare_that_fails_its_first_request_is_replaced() {
        let (addr, _) = numbering_server(|n| n == 1).await;
        let dialer = Dialer::new(addr);
        assert_eq!(connection_number(&dialer).await, 0);
        spare_opened(&dialer).await;
        assert_eq!(connection_number(&dialer).await, 2, "a fresh connection");
    }

    /// A current-thread runtime closes a finished command's connection
    /// but opens no spare.
    #[tokio::test(flavor = "current_thread")]
    async fn a_current_thread_runtime_opens_no_spare() {
        let (addr, mut seen) = numbering_server(|_| false).await;
        let dialer = Dialer::new(addr);
        assert_eq!(connection_number(&dialer).await, 0);
        assert_eq!(next_seen(&mut seen).await, Seen::Accepted(0));
        // The finishing task has closed the connection; in the same turn it
        // would have started opening a spare, or stored one.
        assert_eq!(next_seen(&mut seen).await, Seen::Closed(0));
        assert!(!dialer.opening.load(Ordering::SeqCst));
        assert!(!dialer.has_spare());
        assert_eq!(connection_number(&dialer).await, 1);
    }

    /// A server on another host gets no spare (a router may drop an idle
    /// connection silently); one on this host does.
    #[test]
    fn only_a_server_on_this_host_gets_a_spare() {
        assert!(Dialer::new(SocketAddrV4::new([127, 0, 0, 1].into(), 5037)).ahead);
        assert!(!Dialer::new(SocketAddrV4::new([192, 168, 1, 20].into(), 5037)).ahead);
    }

    /// A fresh connection that fails its first request is an error: only
    /// a spare is retried.
    #[tokio::test]
    async fn a_fresh_connection_that_fails_its_first_request_is_an_error() {
        let (addr, _) = numbering_server(|_| true).await;
        let err = id(&Dialer::new(addr)).await.unwrap_err();
        assert!(
            matches!(&err, ExchangeError::Io(e) if e.kind() == io::ErrorKind::UnexpectedEof),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn a_close_before_the_exit_status_is_a_cut_short_command() {
        let addr = server(
            V2_REQUESTS,
            shell_v2_packet(SHELL_V2_STDOUT, b"level"),
            false,
        )
        .await;
        let err = battery(addr, SECOND).await.unwrap_err();
        assert!(
            matches!(&err, ExchangeError::Io(e) if e.kind() == io::ErrorKind::UnexpectedEof),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn a_silent_server_times_out_at_the_deadline() {
        let addr = server(V2_REQUESTS, Vec::new(), true).await;
        times_out_within(addr, Duration::from_millis(200), SECOND).await;
    }

    #[tokio::test]
    async fn a_trickling_server_cannot_stretch_the_deadline() {
        let addr = serve(|mut conn| async move {
            // OKAY, a byte at a time, then a stdout packet that never ends.
            for b in b"OKAY"
                .iter()
                .chain(b"OKAY")
                .chain(&[SHELL_V2_STDOUT, 100, 0, 0, 0])
            {
                if conn.write_all(&[*b]).await.is_err() {
                    return;
                }
            }
            for _ in 0..100 {
                tokio::time::sleep(Duration::from_millis(50)).await;
                if conn.write_all(b"x").await.is_err() {
                    return;
                }
            }
        })
        .await;
        times_out_within(addr, Duration::from_millis(300), Duration::from_millis(600)).await;
    }

    #[tokio::test]
    async fn a_deadline_already_past_starts_nothing() {
        let addr = server(V2_REQUESTS, shell_v2_packet(SHELL_V2_EXIT, &[0]), true).await;
        times_out_within(addr, Duration::ZERO, Duration::from_millis(100)).await;
    }

    /// The regression the async exchange guards: a caller that gives up
    /// (the device handle's timeout drops the call) closes the connection
    /// then, not at the exchange's own, later deadline.
    #[tokio::test]
    async fn a_caller_that_gives_up_closes_the_connection_at_once() {
        let (closed_tx, closed_rx) = tokio::sync::oneshot::channel();
        let addr = serve(|mut conn| async move {
            accept_requests(&mut conn, 2).await;
            // No output: read until the client closes its end.
            let closed = conn.read(&mut [0u8; 1]).await.map(|n| n == 0);
            let _ = closed_tx.send((closed, Instant::now()));
        })
        .await;
        let call = battery(addr, Duration::from_secs(30));
        let gave_up = tokio::time::timeout(Duration::from_millis(100), call).await;
        assert!(gave_up.is_err(), "the server never answers");
        let dropped_at = Instant::now();
        let (closed, at) = tokio::time::timeout(SECOND, closed_rx)
            .await
            .expect("the server saw the close within a second")
            .unwrap();
        assert!(closed.unwrap(), "an orderly close, not an error");
        assert!(at.duration_since(dropped_at) < SECOND);
    }

    /// Many commands in flight at once on a single-threaded runtime: the
    /// scripted server answers none of them until every one has connected,
    /// so this finishes only if no exchange holds the thread while it waits.
    #[tokio::test(flavor = "current_thread")]
    async fn many_exchanges_wait_at_once_on_one_thread() {
        const CALLS: usize = 50;
        let (listener, addr) = loopback().await;
        tokio::spawn(async move {
            let mut conns = Vec::new();
            for _ in 0..CALLS {
                let (mut conn, _) = listener.accept().await.unwrap();
                accept_requests(&mut conn, 2).await;
                conns.push(conn);
            }
            for (i, conn) in conns.iter_mut().enumerate() {
                let mut reply = shell_v2_packet(SHELL_V2_STDOUT, i.to_string().as_bytes());
                reply.extend(shell_v2_packet(SHELL_V2_EXIT, &[0]));
                conn.write_all(&reply).await.unwrap();
            }
            // Keep the connections until the test is over.
            std::future::pending::<()>().await;
        });
        let mut calls = tokio::task::JoinSet::new();
        for _ in 0..CALLS {
            let dialer = Dialer::new(addr);
            calls.spawn(async move {
                shell(&dialer, "emu-1", "id", Protocol::V2, within(SECOND * 5)).await
            });
        }
        let mut got: Vec<usize> = calls
            .join_all()
            .await
            .into_iter()
            .map(|out| {
                let out = out.unwrap();
                assert_eq!(out.exit, Some(0));
                String::from_utf8(out.stdout).unwrap().parse().unwrap()
            })
            .collect();
        got.sort_unstable();
        assert_eq!(got, (0..CALLS).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn fail_carries_the_servers_message() {
        let addr = serve(|mut conn| async move {
            let _ = read_request(&mut conn).await;
            conn.write_all(b"FAIL0013device unauthorized")
                .await
                .unwrap();
        })
        .await;
        let err = id(&Dialer::new(addr)).await.unwrap_err();
        assert!(
            matches!(&err, ExchangeError::Refused(m) if m == "device unauthorized"),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn v1_reads_until_the_device_closes() {
        let addr = server(
            &["host:transport:emu-1", "shell:id ; echo __dw_rc=$?"],
            b"uid=2000(shell)\n__dw_rc=0\n".to_vec(),
            false,
        )
        .await;
        let line = "id ; echo __dw_rc=$?";
        let out = shell(
            &Dialer::new(addr),
            "emu-1",
            line,
            Protocol::V1,
            within(SECOND),
        )
        .await
        .unwrap();
        assert_eq!(out.stdout, b"uid=2000(shell)\n__dw_rc=0\n");
        assert_eq!(out.exit, None);
    }

    #[tokio::test]
    async fn output_beyond_the_limit_is_refused_before_it_is_read() {
        let mut header = vec![SHELL_V2_STDOUT];
        header.extend_from_slice(&u32::try_from(MAX_OUTPUT + 1).unwrap().to_le_bytes());
        let addr = server(V2_REQUESTS, header, true).await;
        let err = battery(addr, SECOND).await.unwrap_err();
        assert!(matches!(err, ExchangeError::TooLarge), "{err:?}");
    }

    #[tokio::test]
    async fn v1_output_beyond_the_limit_is_refused() {
        let addr = serve(|mut conn| async move {
            accept_requests(&mut conn, 2).await;
            let chunk = vec![b'x'; 1024 * 1024];
            for _ in 0..=MAX_OUTPUT / chunk.len() {
                if conn.write_all(&chunk).await.is_err() {
                    return; // The client stopped reading: as it should.
                }
            }
        })
        .await;
        let err = shell(
            &Dialer::new(addr),
            "emu-1",
            "yes",
            Protocol::V1,
            within(SECOND * 10),
        )
        .await
        .unwrap_err();
        assert!(matches!(err, ExchangeError::TooLarge), "{err:?}");
    }

    #[tokio::test]
    async fn features_pick_the_protocol() {
        let addr = server(
            &["host-serial:emu-1:features"],
            b"OKAY0014cmd,shell_v2,stat_v2".to_vec(),
            false,
        )
        .await;
        let features = features(&Dialer::new(addr), "emu-1", within(SECOND))
            .await
            .unwrap();
        assert_eq!(features, ["cmd", "shell_v2", "stat_v2"]);
        assert_eq!(protocol_for(&features), Protocol::V2);
        assert_eq!(protocol_for(&[]), Protocol::V1);
    }

    #[tokio::test]
    async fn run_asks_for_the_features_once_then_adds_the_trailer_for_v1() {
        let (listener, addr) = loopback().await;
        tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            assert_eq!(read_request(&mut conn).await, "host-serial:emu-1:features");
            conn.write_all(b"OKAY0003cmd").await.unwrap();
            drop(conn);
            let (mut conn, _) = listener.accept().await.unwrap();
            assert_eq!(read_request(&mut conn).await, "host:transport:emu-1");
            conn.write_all(b"OKAY").await.unwrap();
            assert_eq!(read_request(&mut conn).await, "shell:id ; echo __dw_rc=$?");
            conn.write_all(b"OKAYx\n__dw_rc=0\n").await.unwrap();
        });
        let (protocol, out) = run(
            &Dialer::new(addr),
            "emu-1",
            "id".into(),
            None,
            within(SECOND),
        )
        .await
        .unwrap();
        assert_eq!(protocol, Protocol::V1);
        assert_eq!(out.stdout, b"x\n__dw_rc=0\n");
        assert_eq!(out.exit, None);
    }
}
