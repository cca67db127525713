//! Host services of the adb server that concern no one device: pairing a
//! phone for wireless debugging (`host:pair`) and the phones it sees over
//! mDNS (`host:mdns:check`, `host:mdns:services`).
//!
//! These services came with platform-tools 30 (Android 11's wireless
//! debugging). An older server, such as Debian 12's adb 29.0.6, answers
//! `FAIL` `unknown host service` to each of them: that is
//! [`HostError::Unsupported`], which tells a caller to install a newer adb
//! rather than to retry.
//!
//! The requests and replies, as adb 36.0.0 answers them (driven on a
//! private port, and read in the server's source, `services.cpp` and
//! `client/transport_mdns.cpp`):
//!
//! - `host:pair:CODE:HOST:PORT` → `OKAY`, then either a hex-length string
//!   `Successfully paired to HOST:PORT [guid=adb-…]`, or `FAIL` and a
//!   hex-length message (`Failed: Unable to start pairing client.` when
//!   nothing answers on the port, `Failed: Wrong password or connection
//!   was dropped.` for a wrong code). Servers 30 to 33 sent the failure as
//!   a plain string after the `OKAY`; a reply that does not start with
//!   `Successful` is a failure either way. The server waits for the phone
//!   without a limit of its own (a port that accepts and stays silent held
//!   the request for as long as the client waited), so every request here
//!   runs under the caller's timeout.
//! - `host:mdns:check` → `OKAY` and a string: `mdns daemon version
//!   [Openscreen discovery 0.0.0]`, or `ERROR: mdns discovery disabled`.
//! - `host:connect:TARGET` → `OKAY` and a string: `connected to …`,
//!   `already connected to …` or `failed to connect to …`. TARGET may be
//!   a phone's mDNS service name, `INSTANCE._adb-tls-connect._tcp`, which
//!   the server (platform-tools 30+) connects at the address it sees
//!   announced now, and lists under that name (`socket_spec.cpp`).
//! - `host:mdns:services` → `OKAY` and a string, one line per service:
//!   `INSTANCE\tSERVICE\tIPV4:PORT` (`adb-R5CT…-AbCdEf\t_adb-tls-connect._tcp\t192.168.1.40:37123`).
//!
//! The pairing code travels only inside the request to the server, on its
//! socket: it is never logged, and [`PairingCode`]'s `Debug` hides it.
//!
//! Every request is one connection through `exchange`'s async client, so
//! nothing here blocks a thread, and each runs under one deadline.

use super::exchange::{Conn, Dialer, ExchangeError, bounded};
use droidwarden_services::{ErrorCode, WireError};
use std::fmt;
use std::net::SocketAddrV4;
use std::time::Duration;
use tokio::time::Instant;

/// The host services this module asks for, by request.
const PAIR: &str = "host:pair";
const CONNECT: &str = "host:connect";
const DISCONNECT: &str = "host:disconnect";
const MDNS_CHECK: &str = "host:mdns:check";
const MDNS_SERVICES: &str = "host:mdns:services";

/// The mDNS service type a phone announces while its "Pair device with
/// pairing code" dialog is open.
pub const PAIRING_SERVICE: &str = "_adb-tls-pairing._tcp";
/// The mDNS service type of a phone's wireless debugging connect port.
pub const CONNECT_SERVICE: &str = "_adb-tls-connect._tcp";
/// The mDNS service type of adbd listening on TCP the legacy way
/// (`adb tcpip 5555`).
pub const LEGACY_SERVICE: &str = "_adb._tcp";

/// The address of a phone's pairing (or connect) port: `HOST:PORT`, where
/// HOST is an IPv4 address or a host name and PORT is 1–65535.
///
/// ```
/// use droidwarden_bridge::adb::host::PhoneAddress;
/// assert!(PhoneAddress::try_from("192.168.1.40:37123").is_ok());
/// assert!(PhoneAddress::try_from("pixel.lan:41000").is_ok());
/// assert!(PhoneAddress::try_from("192.168.1.40").is_err()); // no port
/// assert!(PhoneAddress::try_from("192.168.1.40:0").is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhoneAddress {
    host: String,
    port: u16,
}

impl PhoneAddress {
    /// The host part.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }
}

impl fmt::Display for PhoneAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

impl TryFrom<&str> for PhoneAddress {
    type Error = HostError;

    fn try_from(text: &str) -> Result<Self, HostError> {
        let bad = |why: &str| HostError::InvalidAddress {
            given: text.chars().take(80).collect(),
            why: why.to_owned(),
        };
        // Six digits alone are a pairing code given first: not echoed.
        if text.len() == 6 && text.bytes().all(|b| b.is_ascii_digit()) {
            return Err(HostError::InvalidAddress {
                given: "******".into(),
                why: "that looks like the pairing code: give the address first, HOST:PORT CODE"
                    .into(),
            });
        }
        let (host, port) = text
            .rsplit_once(':')
            .ok_or_else(|| bad("expected HOST:PORT, e.g. 192.168.1.40:37123"))?;
        if host.is_empty() {
            return Err(bad("the host is missing"));
        }
        if host.len() > 253 {
            return Err(bad("the host is longer than 253 characters"));
        }
        // Letters, digits, dots and dashes: an IPv4 address or a DNS name.
        // Anything else (a second colon, spaces, a `;`) is a typo or an
        // attempt to smuggle words into the request.
        if !host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
            || host.starts_with(['.', '-'])
        {
            return Err(bad(
                "the host must be an IPv4 address or a host name (letters, digits, dots, dashes)",
            ));
        }
        let port = port
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| bad("the port must be a number from 1 to 65535"))?;
        Ok(Self {
            host: host.to_owned(),
            port,
        })
    }
}

/// A wireless debugging pairing code: the six digits the phone shows in
/// "Pair device with pairing code". A secret: its `Debug` shows no digit
/// and it has no `Display`.
///
/// ```
/// use droidwarden_bridge::adb::host::PairingCode;
/// assert!(PairingCode::try_from("482915".to_owned()).is_ok());
/// assert!(PairingCode::try_from("48291".to_owned()).is_err());
/// assert_eq!(format!("{:?}", PairingCode::try_from("482915".to_owned()).unwrap()), "PairingCode(******)");
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct PairingCode(String);

impl fmt::Debug for PairingCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PairingCode(******)")
    }
}

impl TryFrom<String> for PairingCode {
    type Error = HostError;

    fn try_from(code: String) -> Result<Self, HostError> {
        let code = code.trim();
        // The error never repeats what was typed: it may be the code with
        // a typo.
        if code.len() == 6 && code.bytes().all(|b| b.is_ascii_digit()) {
            Ok(Self(code.to_owned()))
        } else {
            Err(HostError::InvalidCode)
        }
    }
}

/// Why a host request failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// The address given for the phone is not `HOST:PORT`; nothing was sent.
    #[error("invalid phone address {given:?}: {why}")]
    InvalidAddress {
        /// What was given (at most 80 characters of it).
        given: String,
        /// What is wrong with it.
        why: String,
    },
    /// The pairing code is not six digits; nothing was sent.
    #[error(
        "the pairing code must be the 6 digits the phone shows under Wireless debugging > Pair device with pairing code"
    )]
    InvalidCode,
    /// The server does not know the service: it is older than
    /// platform-tools 30. Trying again will not help; a newer adb will.
    #[error("the adb server at {server} does not know {service} (it answered {reply:?})")]
    Unsupported {
        /// The server's address.
        server: SocketAddrV4,
        /// The request, without its arguments (`host:pair`).
        service: &'static str,
        /// The server's own words (`unknown host service`).
        reply: String,
    },
    /// The server could not be reached (nothing listens, connection reset).
    #[error("the adb server at {server} cannot be reached: {reason}")]
    Unreachable {
        /// The server's address.
        server: SocketAddrV4,
        /// What the connection saw.
        reason: String,
    },
    /// No answer within the time allowed.
    #[error("the adb server at {server} gave no answer to {service} within {} ms{}", after.as_millis(), if *service == PAIR { " (is the address the phone's pairing port? a port that accepts and never answers holds the server until the phone gives up)" } else { "" })]
    TimedOut {
        /// The server's address.
        server: SocketAddrV4,
        /// The request, without its arguments.
        service: &'static str,
        /// The limit that passed.
        after: Duration,
    },
    /// The server tried to pair and the phone did not accept: a wrong or
    /// expired code, a pairing dialog closed, nothing listening on the port.
    #[error("pairing with {target} failed: {message} ({advice})")]
    PairingFailed {
        /// The phone's pairing address.
        target: String,
        /// The server's words (`Failed: Wrong password or connection was dropped.`).
        message: String,
        /// What to check, from those words.
        advice: &'static str,
    },
    /// The server refused the request for another reason, in its words.
    #[error("the adb server at {server} refused {service}: {message}")]
    Refused {
        /// The server's address.
        server: SocketAddrV4,
        /// The request, without its arguments.
        service: &'static str,
        /// The server's words.
        message: String,
    },
    /// The reply did not follow the protocol.
    #[error("malformed reply from the adb server at {server}: {detail}")]
    Protocol {
        /// The server's address.
        server: SocketAddrV4,
        /// What was wrong.
        detail: String,
    },
}

impl HostError {
    /// The error as it leaves the process: a stable code and a retryable
    /// flag. An adb too old for the service is `unsupported_action` (not
    /// retryable: only another adb helps).
    pub fn to_wire(&self) -> WireError {
        let code = match self {
            Self::InvalidAddress { .. } | Self::InvalidCode => ErrorCode::InvalidParams,
            Self::Unsupported { .. } => ErrorCode::UnsupportedAction,
            Self::Unreachable { .. } => ErrorCode::DeviceOffline,
            Self::TimedOut { .. } => ErrorCode::Timeout,
            Self::PairingFailed { .. } | Self::Refused { .. } => ErrorCode::DeviceError,
            Self::Protocol { .. } => ErrorCode::Internal,
        };
        WireError::new(code, self.to_string())
    }
}

/// What a successful pairing answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paired {
    /// The server's words: `Successfully paired to HOST:PORT [guid=…]`.
    pub message: String,
    /// The phone's id for wireless debugging (`adb-SERIAL-xxxxxx`): the
    /// name of its `_adb-tls-connect._tcp` service, under which a server
    /// that sees it over mDNS connects it by itself.
    pub guid: Option<String>,
}

/// What kind of service a phone announces over mDNS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ServiceKind {
    /// A pairing port, open while the phone's pairing dialog is shown
    /// ([`PAIRING_SERVICE`]).
    Pairing,
    /// A wireless debugging connect port ([`CONNECT_SERVICE`]).
    Connect,
    /// adbd on TCP the legacy way, `adb tcpip` ([`LEGACY_SERVICE`]).
    Legacy,
    /// Another service type.
    Other,
}

impl ServiceKind {
    /// The kind of the mDNS service type `service`.
    pub fn of(service: &str) -> Self {
        match service.trim_end_matches('.') {
            PAIRING_SERVICE => Self::Pairing,
            CONNECT_SERVICE => Self::Connect,
            LEGACY_SERVICE => Self::Legacy,
            _ => Self::Other,
        }
    }

    /// A word for people: `pairing`, `connect`, `legacy`, `other`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pairing => "pairing",
            Self::Connect => "connect",
            Self::Legacy => "legacy",
            Self::Other => "other",
        }
    }
}

/// One service the adb server sees over mDNS.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MdnsService {
    /// The instance name (`adb-R5CT…-AbCdEf`), the phone's id for wireless
    /// debugging.
    pub instance: String,
    /// The service type (`_adb-tls-connect._tcp`).
    pub service: String,
    /// What the service is for.
    pub kind: ServiceKind,
    /// Where it listens: `IPV4:PORT`.
    pub address: String,
}

impl MdnsService {
    /// The serial a server gives the phone when it connects it through
    /// this service by name (`INSTANCE.SERVICE`), as after pairing.
    pub fn serial(&self) -> String {
        format!("{}.{}", self.instance, self.service)
    }
}

/// Whether the server's mDNS discovery runs, in its words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MdnsCheck {
    /// Discovery runs (`mdns daemon version [Openscreen discovery 0.0.0]`).
    Running(String),
    /// Discovery is off (`ERROR: mdns discovery disabled`, e.g. with
    /// `ADB_MDNS=0` in the server's environment).
    Disabled(String),
}

/// Ask the adb server at `server` to pair with the phone's pairing port
/// `target` using `code`, within `timeout`.
///
/// # Errors
/// [`HostError::Unsupported`] from a server older than platform-tools 30;
/// [`HostError::PairingFailed`] when the phone did not accept (wrong or
/// expired code, nothing listening); [`HostError::Unreachable`],
/// [`HostError::TimedOut`] or [`HostError::Protocol`] otherwise.
pub async fn pair(
    server: SocketAddrV4,
    target: &PhoneAddress,
    code: &PairingCode,
    timeout: Duration,
) -> Result<Paired, HostError> {
    let request = format!("{PAIR}:{}:{target}", code.0);
    let reply = ask(server, PAIR, &request, timeout, |mut conn| async move {
        // After the OKAY: a string, or FAIL and a string (adb 34+).
        let mut head = [0u8; 4];
        tokio::io::AsyncReadExt::read_exact(&mut conn.stream, &mut head).await?;
        if &head == b"FAIL" {
            let message = conn.read_hex_body().await?;
            return Ok(Err(String::from_utf8_lossy(&message).into_owned()));
        }
        let len = std::str::from_utf8(&head)
            .ok()
            .and_then(|s| usize::from_str_radix(s, 16).ok())
            .ok_or_else(|| ExchangeError::Protocol(format!("bad length {head:?}")))?;
        let mut body = vec![0u8; len];
        tokio::io::AsyncReadExt::read_exact(&mut conn.stream, &mut body).await?;
        Ok(Ok(String::from_utf8_lossy(&body).into_owned()))
    })
    .await?;
    pair_outcome(target, reply)
}

/// The outcome of a pairing reply: `Ok` with the string after the `OKAY`,
/// `Err` with the message after a `FAIL`.
fn pair_outcome(target: &PhoneAddress, reply: Result<String, String>) -> Result<Paired, HostError> {
    match reply {
        Ok(message) if message.starts_with("Successful") => {
            let guid = message
                .split_once("[guid=")
                .and_then(|(_, rest)| rest.split_once(']'))
                .map(|(guid, _)| guid.to_owned())
                .filter(|g| !g.is_empty());
            Ok(Paired {
                message: message.trim().to_owned(),
                guid,
            })
        }
        Ok(message) | Err(message) => Err(HostError::PairingFailed {
            target: target.to_string(),
            advice: pairing_advice(&message),
            message: message.trim().to_owned(),
        }),
    }
}

/// What to check after a failed pairing, from the server's words.
fn pairing_advice(message: &str) -> &'static str {
    if message.contains("Unable to start pairing client") {
        "nothing answered on that port: use the address the phone shows under Wireless debugging > \
         Pair device with pairing code while that dialog is open; the port changes each time it opens"
    } else if message.contains("Wrong password") {
        "the phone refused the code, or closed the dialog: open \"Pair device with pairing code\" again \
         and use the new code and port"
    } else {
        "check the pairing address and code on the phone, with its pairing dialog open"
    }
}

/// Whether `target` is the mDNS service name of a phone's wireless
/// debugging connect port, `INSTANCE._adb-tls-connect._tcp` (the serial a
/// server gives a phone it connects by name): an adb server of
/// platform-tools 30 or newer that sees the service connects it at the
/// address announced now, so the name stays valid when the phone's port
/// changes.
///
/// ```
/// use droidwarden_bridge::adb::host::is_service_name;
/// assert!(is_service_name("adb-R5CT-AbCdEf._adb-tls-connect._tcp"));
/// assert!(!is_service_name("192.168.1.40:41000"));
/// assert!(!is_service_name("._adb-tls-connect._tcp"));
/// ```
pub fn is_service_name(target: &str) -> bool {
    target
        .strip_suffix(CONNECT_SERVICE)
        .and_then(|rest| rest.strip_suffix('.'))
        .is_some_and(|instance| {
            !instance.is_empty()
                && instance.len() <= 63
                && instance
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        })
}

/// Ask the server to connect `target` (`host:connect:TARGET`): `HOST:PORT`
/// or a phone's mDNS service name ([`is_service_name`]). Returns the
/// server's words (`connected to …`, `already connected to …`).
///
/// # Errors
/// [`HostError::Refused`] when the server could not connect it (`failed to
/// connect to …`, or a name it does not see over mDNS);
/// [`HostError::Unreachable`], [`HostError::TimedOut`] otherwise.
pub async fn connect(
    server: SocketAddrV4,
    target: &str,
    timeout: Duration,
) -> Result<String, HostError> {
    let words = request(server, CONNECT, &format!("{CONNECT}:{target}"), timeout).await?;
    if words.starts_with("connected") || words.starts_with("already connected") {
        Ok(words)
    } else {
        Err(HostError::Refused {
            server,
            service: CONNECT,
            message: words,
        })
    }
}

/// Ask the server to drop its connection to `target`
/// (`host:disconnect:TARGET`), so that the next [`connect`] looks the
/// phone up again. A target it does not know is no error.
///
/// # Errors
/// [`HostError::Unreachable`], [`HostError::TimedOut`].
pub async fn disconnect(
    server: SocketAddrV4,
    target: &str,
    timeout: Duration,
) -> Result<(), HostError> {
    match request(
        server,
        DISCONNECT,
        &format!("{DISCONNECT}:{target}"),
        timeout,
    )
    .await
    {
        Ok(_) | Err(HostError::Refused { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Whether the server's mDNS discovery runs (`host:mdns:check`).
///
/// # Errors
/// [`HostError::Unsupported`] from a server older than platform-tools 30;
/// [`HostError::Unreachable`], [`HostError::TimedOut`] otherwise.
pub async fn mdns_check(server: SocketAddrV4, timeout: Duration) -> Result<MdnsCheck, HostError> {
    let text = query(server, MDNS_CHECK, timeout).await?;
    let text = text.trim().to_owned();
    Ok(if text.starts_with("ERROR") {
        MdnsCheck::Disabled(text)
    } else {
        MdnsCheck::Running(text)
    })
}

/// The services the server sees over mDNS (`host:mdns:services`).
///
/// # Errors
/// As [`mdns_check`].
pub async fn mdns_services(
    server: SocketAddrV4,
    timeout: Duration,
) -> Result<Vec<MdnsService>, HostError> {
    Ok(parse_services(
        &query(server, MDNS_SERVICES, timeout).await?,
    ))
}

/// The lines of a `host:mdns:services` reply; a line without its three
/// tab-separated fields is skipped.
pub fn parse_services(text: &str) -> Vec<MdnsService> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split('\t').map(str::trim);
            let (instance, service, address) = (fields.next()?, fields.next()?, fields.next()?);
            if instance.is_empty() || service.is_empty() || address.is_empty() {
                return None;
            }
            Some(MdnsService {
                instance: instance.to_owned(),
                service: service.to_owned(),
                kind: ServiceKind::of(service),
                address: address.to_owned(),
            })
        })
        .collect()
}

/// A request answered by `OKAY` and one hex-length string.
async fn query(
    server: SocketAddrV4,
    service: &'static str,
    timeout: Duration,
) -> Result<String, HostError> {
    request(server, service, service, timeout).await
}

/// `request` (the service `service` with its arguments), answered by
/// `OKAY` and one hex-length string.
async fn request(
    server: SocketAddrV4,
    service: &'static str,
    request: &str,
    timeout: Duration,
) -> Result<String, HostError> {
    ask(server, service, request, timeout, |mut conn| async move {
        let body = conn.read_hex_body().await?;
        Ok(String::from_utf8_lossy(&body).into_owned())
    })
    .await
}

/// Send `request` (the service `service` with its arguments) on a new
/// connection to `server`, then read the rest of the reply with `read`,
/// all within `timeout`.
async fn ask<T, F, Fut>(
    server: SocketAddrV4,
    service: &'static str,
    request: &str,
    timeout: Duration,
    read: F,
) -> Result<T, HostError>
where
    F: FnOnce(Conn) -> Fut,
    Fut: std::future::Future<Output = Result<T, ExchangeError>>,
{
    let dialer = Dialer::new(server);
    let deadline = Instant::now() + timeout;
    // A connection of its own, closed when the reply has been read (or the
    // deadline passed): these requests are rare, so no spare is kept.
    let outcome = bounded(deadline, async {
        let conn = Conn::first_request(&dialer, request).await?;
        read(conn).await
    })
    .await;
    outcome.map_err(|e| host_error(server, service, timeout, e))
}

/// An exchange error as a host error for `service`.
fn host_error(
    server: SocketAddrV4,
    service: &'static str,
    timeout: Duration,
    e: ExchangeError,
) -> HostError {
    match e {
        ExchangeError::Refused(reply) if reply.starts_with("unknown host service") => {
            HostError::Unsupported {
                server,
                service,
                reply,
            }
        }
        ExchangeError::Refused(message) | ExchangeError::SyncFailed(message) => {
            HostError::Refused {
                server,
                service,
                message,
            }
        }
        ExchangeError::Io(io) if io.kind() == std::io::ErrorKind::TimedOut => HostError::TimedOut {
            server,
            service,
            after: timeout,
        },
        ExchangeError::Io(io) => HostError::Unreachable {
            server,
            reason: io.to_string(),
        },
        ExchangeError::Protocol(detail) => HostError::Protocol { server, detail },
        ExchangeError::TooLarge => HostError::Protocol {
            server,
            detail: "a reply too large".into(),
        },
    }
}

#[cfg(test)]
mod tests {
    //! The host requests against a scripted server on loopback, and the
    //! pure parts on the real replies of adb 36 and adb 29.
    use super::*;
    use crate::test_support::{loopback, read_request};
    use tokio::io::AsyncWriteExt;

    /// A one-connection server that checks the request and answers `reply`.
    async fn server(expected: &'static str, reply: &'static [u8]) -> SocketAddrV4 {
        let (listener, addr) = loopback().await;
        tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            assert_eq!(read_request(&mut conn).await, expected);
            conn.write_all(reply).await.unwrap();
            let _ = tokio::io::AsyncReadExt::read(&mut conn, &mut [0u8; 1]).await;
        });
        addr
    }

    fn target() -> PhoneAddress {
        PhoneAddress::try_from("192.168.1.40:37123").unwrap()
    }

    fn code() -> PairingCode {
        PairingCode::try_from("482915".to_owned()).unwrap()
    }

    const SECOND: Duration = Duration::from_secs(1);

    #[tokio::test]
    async fn a_pairing_success_is_read_with_its_guid() {
        let addr = server(
            "host:pair:482915:192.168.1.40:37123",
            b"OKAY0040Successfully paired to 192.168.1.40:37123 [guid=adb-R5CT-AbCdEf]",
        )
        .await;
        let paired = pair(addr, &target(), &code(), SECOND).await.unwrap();
        assert_eq!(paired.guid.as_deref(), Some("adb-R5CT-AbCdEf"));
    }

    #[tokio::test]
    async fn a_pairing_failure_after_okay_is_a_failure_in_either_form() {
        // adb 36: FAIL after the OKAY; adb 30–33: a plain string.
        for reply in [
            &b"OKAYFAIL0027Failed: Unable to start pairing client."[..],
            &b"OKAY0027Failed: Unable to start pairing client."[..],
        ] {
            let reply: &'static [u8] = reply;
            let addr = server("host:pair:482915:192.168.1.40:37123", reply).await;
            let err = pair(addr, &target(), &code(), SECOND).await.unwrap_err();
            assert!(
                matches!(&err, HostError::PairingFailed { message, .. } if message == "Failed: Unable to start pairing client."),
                "{err:?}"
            );
            assert!(!err.to_string().contains("482915"), "{err}");
        }
    }

    #[tokio::test]
    async fn an_old_server_is_unsupported() {
        let addr = server("host:mdns:check", b"FAIL0014unknown host service").await;
        let err = mdns_check(addr, SECOND).await.unwrap_err();
        assert!(
            matches!(
                err,
                HostError::Unsupported {
                    service: MDNS_CHECK,
                    ..
                }
            ),
            "{err:?}"
        );
        assert_eq!(err.to_wire().code, ErrorCode::UnsupportedAction);
        assert!(!err.to_wire().retryable);
    }

    #[tokio::test]
    async fn a_silent_server_times_out() {
        let (listener, addr) = loopback().await;
        tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            let _ = read_request(&mut conn).await;
            conn.write_all(b"OKAY").await.unwrap();
            let _ = tokio::io::AsyncReadExt::read(&mut conn, &mut [0u8; 1]).await;
        });
        let started = std::time::Instant::now();
        let err = pair(addr, &target(), &code(), Duration::from_millis(200))
            .await
            .unwrap_err();
        assert!(matches!(err, HostError::TimedOut { .. }), "{err:?}");
        assert!(started.elapsed() < SECOND);
    }

    #[tokio::test]
    async fn connect_by_name_reads_the_servers_words() {
        let name = "adb-SIM-AbCdEf._adb-tls-connect._tcp";
        let addr = server(
            "host:connect:adb-SIM-AbCdEf._adb-tls-connect._tcp",
            b"OKAY0031connected to adb-SIM-AbCdEf._adb-tls-connect._tcp",
        )
        .await;
        let words = connect(addr, name, SECOND).await.unwrap();
        assert!(words.starts_with("connected to"), "{words}");
        let addr = server(
            "host:connect:adb-SIM-AbCdEf._adb-tls-connect._tcp",
            b"OKAY0040failed to connect to 'adb-SIM-AbCdEf._adb-tls-connect._tcp:5555'",
        )
        .await;
        let err = connect(addr, name, SECOND).await.unwrap_err();
        assert!(matches!(err, HostError::Refused { .. }), "{err:?}");
    }

    #[test]
    fn addresses_are_checked() {
        for good in ["192.168.1.40:37123", "pixel-8.lan:5555", "10.0.0.2:65535"] {
            assert!(PhoneAddress::try_from(good).is_ok(), "{good}");
        }
        for bad in [
            "192.168.1.40",
            "192.168.1.40:",
            ":37123",
            "192.168.1.40:0",
            "192.168.1.40:65536",
            "192.168.1.40:port",
            "a b:5555",
            "host;rm:5555",
            "::1:5555",
            "-x:5555",
            "482915",
        ] {
            assert!(
                matches!(
                    PhoneAddress::try_from(bad),
                    Err(HostError::InvalidAddress { .. })
                ),
                "{bad}"
            );
        }
        let err = PhoneAddress::try_from("482915").unwrap_err().to_string();
        assert!(!err.contains("482915"), "{err}");
    }

    #[test]
    fn codes_are_six_digits_and_never_shown() {
        assert!(PairingCode::try_from(" 482915\n".to_owned()).is_ok());
        for bad in ["", "48291", "4829150", "48291a", "48 915"] {
            let err = PairingCode::try_from(bad.to_owned()).unwrap_err();
            assert!(matches!(err, HostError::InvalidCode), "{bad}");
            assert_eq!(err.to_wire().code, ErrorCode::InvalidParams);
        }
        assert!(!format!("{:?}", code()).contains("482915"));
    }

    #[test]
    fn the_services_list_is_parsed() {
        let text = "adb-R5CT-AbCdEf\t_adb-tls-pairing._tcp\t192.168.1.40:37123\n\
                    adb-R5CT-AbCdEf\t_adb-tls-connect._tcp\t192.168.1.40:41000\n\
                    adb-old\t_adb._tcp\t192.168.1.41:5555\n\
                    broken line\n";
        let services = parse_services(text);
        let kinds: Vec<_> = services.iter().map(|s| s.kind).collect();
        assert_eq!(
            kinds,
            [
                ServiceKind::Pairing,
                ServiceKind::Connect,
                ServiceKind::Legacy
            ]
        );
        assert_eq!(
            services[1].serial(),
            "adb-R5CT-AbCdEf._adb-tls-connect._tcp"
        );
        assert_eq!(services[1].address, "192.168.1.40:41000");
        assert!(parse_services("").is_empty());
    }
}
