//! One shell command through the adb server, on the call path.
//!
//! The adb server speaks a small text protocol on its TCP port: a request
//! is four hex digits of length and the request text; the server answers
//! `OKAY`, or `FAIL` with a hex-length message. A shell command is two
//! requests on one connection: `host:transport:SERIAL` picks the device,
//! then `shell,v2,raw:COMMAND` (shell protocol v2: framed stdout, stderr
//! and the exit status) or, for devices older than Android 7, `shell:COMMAND`
//! (raw bytes, stderr merged, no exit status: the caller adds a trailer).
//!
//! `adb_client` 3.2 still does discovery and connection management; this
//! exchange replaces its `shell_command` on the call path because that one
//! opens a second connection before every command (to ask the server for
//! the device's features), drops the exit status it has just read, and has
//! no read timeouts. Here the features are asked once per device
//! ([`features`]), the exit status comes from the v2 packet, and every read
//! and write has a deadline, so a worker thread on a silent connection is
//! freed soon after its caller has given up.
//!
//! Blocking `std::net` I/O: run only on the device's worker threads.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, SocketAddrV4, TcpStream};
use std::time::{Duration, Instant};

/// Shell protocol v2 packet id: standard output.
const V2_STDOUT: u8 = 1;
/// Shell protocol v2 packet id: standard error.
const V2_STDERR: u8 = 2;
/// Shell protocol v2 packet id: the exit status (one byte).
const V2_EXIT: u8 = 3;

/// Most output one command may produce. Every action's output is a few
/// kilobytes (a package list of a few hundred apps is ~30 KB); anything near
/// this is a runaway command, not an answer.
pub(crate) const MAX_OUTPUT: usize = 16 * 1024 * 1024;

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
    /// The connection failed, timed out, or closed before the command
    /// finished.
    #[error("{0}")]
    Io(#[from] io::Error),
    /// The reply did not follow the protocol.
    #[error("malformed reply from the adb server: {0}")]
    Protocol(String),
    /// More output than [`MAX_OUTPUT`].
    #[error("the command printed more than {} MiB", MAX_OUTPUT / (1024 * 1024))]
    TooLarge,
}

/// Run `command` on the device with `serial`, finishing within `timeout`.
pub(crate) fn shell(
    server: SocketAddrV4,
    serial: &str,
    command: &str,
    protocol: Protocol,
    timeout: Duration,
) -> Result<Exchange, ExchangeError> {
    let mut conn = Conn::open(server, timeout)?;
    conn.request(&format!("host:transport:{serial}"))?;
    match protocol {
        Protocol::V2 => {
            conn.request(&format!("shell,v2,raw:{command}"))?;
            conn.read_v2()
        }
        Protocol::V1 => {
            conn.request(&format!("shell:{command}"))?;
            let stdout = conn.read_to_end()?;
            Ok(Exchange {
                stdout,
                ..Exchange::default()
            })
        }
    }
}

/// Run the quoted command `line` on the device, in the protocol it speaks:
/// `known`, or else learned from its features first. One deadline covers
/// both exchanges. Returns the protocol used with the output.
pub(crate) fn run(
    server: SocketAddrV4,
    serial: &str,
    line: String,
    known: Option<Protocol>,
    timeout: Duration,
) -> Result<(Protocol, Exchange), ExchangeError> {
    let deadline = Instant::now() + timeout;
    let protocol = match known {
        Some(p) => p,
        None => protocol_for(&features(server, serial, timeout)?),
    };
    let line = match protocol {
        Protocol::V2 => line,
        Protocol::V1 => super::shell::with_trailer(line),
    };
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(out_of_time().into());
    }
    shell(server, serial, &line, protocol, left).map(|out| (protocol, out))
}

/// The device's features as the adb server knows them (`shell_v2`, `cmd`, …).
pub(crate) fn features(
    server: SocketAddrV4,
    serial: &str,
    timeout: Duration,
) -> Result<Vec<String>, ExchangeError> {
    let mut conn = Conn::open(server, timeout)?;
    conn.request(&format!("host-serial:{serial}:features"))?;
    let body = conn.read_hex_body()?;
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

fn out_of_time() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "the adb exchange ran out of time")
}

/// A socket timeout reads as `WouldBlock` on Linux: call it what it is.
fn timed_out(e: io::Error) -> io::Error {
    if e.kind() == io::ErrorKind::WouldBlock {
        out_of_time()
    } else {
        e
    }
}

/// One connection to the adb server with an overall deadline.
struct Conn {
    stream: TcpStream,
    deadline: Instant,
    /// When the socket's timeouts were last set to what was left then.
    armed_at: Option<Instant>,
}

/// How far past the deadline one read may run before the socket's timeouts
/// are set again: re-arming before every read would add two system calls to
/// each, and most exchanges finish well within this.
const ARM_SLACK: Duration = Duration::from_millis(20);

impl Conn {
    fn open(server: SocketAddrV4, timeout: Duration) -> io::Result<Self> {
        let deadline = Instant::now() + timeout;
        let stream = TcpStream::connect_timeout(&SocketAddr::V4(server), timeout)?;
        stream.set_nodelay(true)?;
        Ok(Self {
            stream,
            deadline,
            armed_at: None,
        })
    }

    /// Bound the next read or write by what is left of the deadline (within
    /// [`ARM_SLACK`]).
    fn arm(&mut self) -> io::Result<()> {
        let now = Instant::now();
        let left = self.deadline.saturating_duration_since(now);
        if left.is_zero() {
            return Err(out_of_time());
        }
        if self
            .armed_at
            .is_some_and(|at| now.duration_since(at) < ARM_SLACK)
        {
            return Ok(());
        }
        self.stream.set_read_timeout(Some(left))?;
        self.stream.set_write_timeout(Some(left))?;
        self.armed_at = Some(now);
        Ok(())
    }

    /// Fill `buf`, each read bounded by what is left of the deadline (so a
    /// device that trickles bytes cannot stretch the exchange past it).
    fn read_exact(&mut self, buf: &mut [u8]) -> io::Result<()> {
        let mut filled = 0;
        while filled < buf.len() {
            self.arm()?;
            match self.stream.read(&mut buf[filled..]) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the connection closed",
                    ));
                }
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(timed_out(e)),
            }
        }
        Ok(())
    }

    /// Send one request and read the server's `OKAY` (or its `FAIL`).
    fn request(&mut self, text: &str) -> Result<(), ExchangeError> {
        if text.len() > 0xffff {
            return Err(ExchangeError::Protocol(format!(
                "a request of {} bytes exceeds the protocol's 64 KiB",
                text.len()
            )));
        }
        self.arm()?;
        let framed = format!("{:04x}{text}", text.len());
        self.stream
            .write_all(framed.as_bytes())
            .map_err(timed_out)?;
        let mut status = [0u8; 4];
        self.read_exact(&mut status)?;
        match &status {
            b"OKAY" => Ok(()),
            b"FAIL" => {
                let message = self.read_hex_body()?;
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
    fn read_hex_body(&mut self) -> Result<Vec<u8>, ExchangeError> {
        let mut len = [0u8; 4];
        self.read_exact(&mut len)?;
        let len = std::str::from_utf8(&len)
            .ok()
            .and_then(|s| usize::from_str_radix(s, 16).ok())
            .ok_or_else(|| ExchangeError::Protocol(format!("bad length {len:?}")))?;
        let mut body = vec![0u8; len];
        self.read_exact(&mut body)?;
        Ok(body)
    }

    /// Shell v2 packets up to the exit status. The connection closing first
    /// means the command was cut short.
    fn read_v2(&mut self) -> Result<Exchange, ExchangeError> {
        let mut out = Exchange::default();
        loop {
            let mut header = [0u8; 5];
            self.read_exact(&mut header)?;
            let len = u32::from_le_bytes([header[1], header[2], header[3], header[4]]) as usize;
            if out.stdout.len() + out.stderr.len() + len > MAX_OUTPUT {
                return Err(ExchangeError::TooLarge);
            }
            match header[0] {
                V2_STDOUT => self.append(&mut out.stdout, len)?,
                V2_STDERR => self.append(&mut out.stderr, len)?,
                V2_EXIT => {
                    if len != 1 {
                        return Err(ExchangeError::Protocol(format!(
                            "exit status packet of {len} bytes"
                        )));
                    }
                    let mut status = [0u8; 1];
                    self.read_exact(&mut status)?;
                    out.exit = Some(status[0]);
                    return Ok(out);
                }
                // Other ids (stdin, close-stdin, window size) only flow to
                // the device; skip their payload if a device sends one.
                _ => self.append(&mut Vec::new(), len)?,
            }
        }
    }

    fn append(&mut self, into: &mut Vec<u8>, len: usize) -> io::Result<()> {
        let start = into.len();
        into.resize(start + len, 0);
        self.read_exact(&mut into[start..])
    }

    /// Everything until the device closes the stream (shell v1).
    fn read_to_end(&mut self) -> Result<Vec<u8>, ExchangeError> {
        let mut out = Vec::new();
        let mut buf = [0u8; 16 * 1024];
        loop {
            self.arm()?;
            let n = self.stream.read(&mut buf).map_err(timed_out)?;
            if n == 0 {
                return Ok(out);
            }
            if out.len() + n > MAX_OUTPUT {
                return Err(ExchangeError::TooLarge);
            }
            out.extend_from_slice(&buf[..n]);
        }
    }
}

#[cfg(test)]
mod tests {
    //! The exchange against a scripted adb server on loopback: each test
    //! checks the requests it receives and answers with fixed bytes.
    use super::*;
    use std::net::{Ipv4Addr, TcpListener};
    use std::thread;

    /// A one-connection server: reads `requests` (checking each), then
    /// writes `reply` and closes, or, when `hold` is set, keeps the
    /// connection open until the client closes it. Returns its address.
    fn server(requests: &'static [&'static str], reply: Vec<u8>, hold: bool) -> SocketAddrV4 {
        serve(move |mut conn| {
            for expected in requests {
                let mut len = [0u8; 4];
                conn.read_exact(&mut len).unwrap();
                let len = usize::from_str_radix(std::str::from_utf8(&len).unwrap(), 16).unwrap();
                let mut body = vec![0u8; len];
                conn.read_exact(&mut body).unwrap();
                assert_eq!(std::str::from_utf8(&body).unwrap(), *expected);
                if !expected.starts_with("host-serial:") {
                    conn.write_all(b"OKAY").unwrap();
                }
            }
            conn.write_all(&reply).unwrap();
            if hold {
                // Until the client closes its end (or sends something).
                let _ = conn.read(&mut [0u8; 1]);
            }
        })
    }

    /// A one-connection server on loopback that hands the connection to
    /// `answer` on its own thread. Returns its address.
    fn serve(answer: impl FnOnce(TcpStream) + Send + 'static) -> SocketAddrV4 {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let SocketAddr::V4(addr) = listener.local_addr().unwrap() else {
            unreachable!("bound to IPv4")
        };
        thread::spawn(move || answer(listener.accept().unwrap().0));
        addr
    }

    /// A command to `addr` with `timeout` fails as timed out, within `limit`.
    fn times_out_within(addr: SocketAddrV4, timeout: Duration, limit: Duration) {
        let started = Instant::now();
        let err = shell(addr, "emu-1", "dumpsys battery", Protocol::V2, timeout).unwrap_err();
        let took = started.elapsed();
        assert!(
            matches!(&err, ExchangeError::Io(e) if e.kind() == io::ErrorKind::TimedOut),
            "{err:?}"
        );
        assert!(took < limit, "took {took:?}");
    }

    fn packet(id: u8, data: &[u8]) -> Vec<u8> {
        let mut p = vec![id];
        p.extend_from_slice(&u32::try_from(data.len()).unwrap().to_le_bytes());
        p.extend_from_slice(data);
        p
    }

    const V2_REQUESTS: &[&str] = &["host:transport:emu-1", "shell,v2,raw:dumpsys battery"];
    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn v2_separates_the_streams_and_carries_the_exit_status() {
        let mut reply = packet(V2_STDOUT, b"level: 5");
        reply.extend(packet(V2_STDERR, b"warn"));
        reply.extend(packet(V2_STDOUT, b"0\n"));
        reply.extend(packet(V2_EXIT, &[3]));
        let addr = server(V2_REQUESTS, reply, true);
        // The server holds the connection open: the exchange ends at the
        // exit packet, not at the close.
        let out = shell(addr, "emu-1", "dumpsys battery", Protocol::V2, SECOND).unwrap();
        assert_eq!(out.stdout, b"level: 50\n");
        assert_eq!(out.stderr, b"warn");
        assert_eq!(out.exit, Some(3));
    }

    #[test]
    fn a_close_before_the_exit_status_is_a_cut_short_command() {
        let addr = server(V2_REQUESTS, packet(V2_STDOUT, b"level"), false);
        let err = shell(addr, "emu-1", "dumpsys battery", Protocol::V2, SECOND).unwrap_err();
        assert!(
            matches!(&err, ExchangeError::Io(e) if e.kind() == io::ErrorKind::UnexpectedEof),
            "{err:?}"
        );
    }

    #[test]
    fn a_silent_server_times_out_at_the_deadline() {
        let addr = server(V2_REQUESTS, Vec::new(), true);
        times_out_within(addr, Duration::from_millis(200), Duration::from_secs(1));
    }

    #[test]
    fn a_trickling_server_cannot_stretch_the_deadline() {
        let addr = serve(|mut conn| {
            // OKAY, a byte at a time, then a stdout packet that never ends.
            for b in b"OKAY"
                .iter()
                .chain(b"OKAY")
                .chain(&[V2_STDOUT, 100, 0, 0, 0])
            {
                if conn.write_all(&[*b]).is_err() {
                    return;
                }
            }
            for _ in 0..100 {
                thread::sleep(Duration::from_millis(50));
                if conn.write_all(b"x").is_err() {
                    return;
                }
            }
        });
        times_out_within(addr, Duration::from_millis(300), Duration::from_millis(600));
    }

    #[test]
    fn fail_carries_the_servers_message() {
        let addr = serve(|mut conn| {
            let mut request = [0u8; 4 + 20];
            conn.read_exact(&mut request).unwrap();
            conn.write_all(b"FAIL0013device unauthorized").unwrap();
        });
        let err = shell(addr, "emu-1", "id", Protocol::V2, SECOND).unwrap_err();
        assert!(
            matches!(&err, ExchangeError::Refused(m) if m == "device unauthorized"),
            "{err:?}"
        );
    }

    #[test]
    fn v1_reads_until_the_device_closes() {
        let addr = server(
            &["host:transport:emu-1", "shell:id ; echo __dw_rc=$?"],
            b"uid=2000(shell)\n__dw_rc=0\n".to_vec(),
            false,
        );
        let out = shell(addr, "emu-1", "id ; echo __dw_rc=$?", Protocol::V1, SECOND).unwrap();
        assert_eq!(out.stdout, b"uid=2000(shell)\n__dw_rc=0\n");
        assert_eq!(out.exit, None);
    }

    #[test]
    fn output_beyond_the_limit_is_refused_before_it_is_read() {
        let mut header = vec![V2_STDOUT];
        header.extend_from_slice(&u32::try_from(MAX_OUTPUT + 1).unwrap().to_le_bytes());
        let addr = server(V2_REQUESTS, header, true);
        let err = shell(addr, "emu-1", "dumpsys battery", Protocol::V2, SECOND).unwrap_err();
        assert!(matches!(err, ExchangeError::TooLarge), "{err:?}");
    }

    #[test]
    fn features_pick_the_protocol() {
        let addr = server(
            &["host-serial:emu-1:features"],
            b"OKAY0014cmd,shell_v2,stat_v2".to_vec(),
            false,
        );
        let features = features(addr, "emu-1", SECOND).unwrap();
        assert_eq!(features, ["cmd", "shell_v2", "stat_v2"]);
        assert_eq!(protocol_for(&features), Protocol::V2);
        assert_eq!(protocol_for(&[]), Protocol::V1);
    }
}
