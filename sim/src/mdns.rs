//! The emulated phone's mDNS announcement, as Android 11+ announces
//! wireless debugging: the service `_adb-tls-connect._tcp` under an
//! instance name like a real phone's (`adb-SERIAL-xxxxxx`), at the phone's
//! ADB address. When the phone moves to another port (the control port's
//! `{"op":"move"}`, as a phone whose wireless debugging was turned off and
//! on), the new port is announced under the same name, so an adb server
//! (platform-tools 30+) that follows the instance finds it again.
//!
//! # Why a responder of its own
//!
//! A phone on the test machine lives at 127.0.0.1, but Google's adb 36
//! (openscreen discovery) listens and queries on the host's *non-loopback*
//! interfaces only (observed: it joins 224.0.0.251 on `eth0` alone and
//! sends its queries there). A general responder (the `mdns-sd` crate, used
//! before) answers a query only with addresses in the subnet of the
//! interface it came in on, so it never answered adb's queries for the
//! loopback phone; adb took the PTR of the announcement, asked for the
//! instance's SRV/TXT on `eth0`, got no answer, and listed the phone only
//! while another mDNS client's queries drew answers on loopback. It also
//! did not answer adb's `ANY` question on the service type.
//!
//! This responder therefore announces and answers on *every* IPv4
//! interface of the host, with the phone's own address whatever the
//! interface. A phone on a loopback address is announced with IP TTL 0:
//! the kernel hands such multicast to listeners on this host (it loops it
//! back on each interface) and never puts it on a wire, so other machines
//! never see a phone at 127.0.0.1.
//!
//! What it does, after RFC 6762: three unsolicited announcements, one and
//! then two seconds apart, at the start and after every move (§8.3); the
//! unique records (SRV, TXT, A) carry the cache-flush bit, so a listener
//! replaces the old port with the new one without a goodbye first (§8.4 —
//! a goodbye followed at once by the new record made adb 36 forget the
//! phone); answers to PTR, SRV, TXT, A/AAAA and ANY questions for its
//! names and to the service-type enumeration (`_services._dns-sd._udp`),
//! multicast at most once a second (§6), the rest of the set in the
//! additional section; legacy unicast answers to a querier whose source
//! port is not 5353 (§6.7: id and question echoed, TTLs capped at 10 s, no
//! cache-flush bit); a goodbye (TTL 0) when the phone goes away. Left out,
//! as a test phone with a unique name needs none of it: probing for name
//! conflicts (§8.1), known-answer suppression (§7.1), the random 20–120 ms
//! delay before answers with shared records (§6), IPv6 multicast, and a
//! unicast reply to the QU bit (answered by multicast, which §5.4 allows).
//!
//! The protocol logic ([`reply`], [`announcement`], [`goodbye`]) is pure
//! and unit-tested; a task on the caller's runtime drives the socket.

use crate::error::SimError;
use socket2::{Domain, Protocol, SockRef, Socket, Type};
use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::Duration;
use tokio::net::UdpSocket;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The service type of a phone's wireless debugging connect port.
pub(crate) const CONNECT_SERVICE: &str = "_adb-tls-connect._tcp.local.";
/// The DNS-SD service-type enumeration name (RFC 6763 §9).
const META_QUERY: &str = "_services._dns-sd._udp.local.";
/// The mDNS IPv4 group and port.
const GROUP: Ipv4Addr = Ipv4Addr::new(224, 0, 0, 251);
const MDNS_PORT: u16 = 5353;
/// TTLs as RFC 6762 §10 recommends: 120 s for records naming a host
/// (SRV, A), 75 minutes for the others (PTR, TXT).
const HOST_TTL: u32 = 120;
const OTHER_TTL: u32 = 4500;
/// The cap on a legacy unicast answer's TTLs (§6.7).
const LEGACY_TTL: u32 = 10;
/// The gaps after the first and second of three announcements (§8.3: at
/// least two, one second apart, each gap at least twice the one before).
const ANNOUNCE_GAPS: [Duration; 2] = [Duration::from_secs(1), Duration::from_secs(2)];
/// §6: a record is multicast on an interface at most once a second.
const MULTICAST_SPACING: Duration = Duration::from_secs(1);
/// A pause after a failed receive, so a failing socket cannot spin.
const RECV_ERROR_PAUSE: Duration = Duration::from_millis(100);

const TYPE_A: u16 = 1;
const TYPE_PTR: u16 = 12;
const TYPE_TXT: u16 = 16;
const TYPE_AAAA: u16 = 28;
const TYPE_SRV: u16 = 33;
const TYPE_ANY: u16 = 255;
const CLASS_IN: u16 = 1;
const CLASS_ANY: u16 = 255;
/// The top bit of a record's class: cache-flush (unique record); of a
/// question's class: unicast response wanted (QU).
const CLASS_TOP_BIT: u16 = 0x8000;
/// Header flags of a response: QR and AA.
const FLAGS_RESPONSE: u16 = 0x8400;
/// Header bits that mark a message as a response (QR) or not a standard
/// query (opcode).
const FLAGS_NOT_QUERY: u16 = 0xF800;

/// What is announced: one phone's names and ADB address.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Records {
    instance: String,
    addr: SocketAddr,
}

impl Records {
    /// `INSTANCE._adb-tls-connect._tcp.local.`
    fn service_name(&self) -> String {
        format!("{}.{CONNECT_SERVICE}", self.instance)
    }

    /// `INSTANCE.local.`: the host name the SRV record points at.
    fn host_name(&self) -> String {
        format!("{}.local.", self.instance)
    }
}

/// One record of the set, by kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    /// The service type → the instance (shared).
    Ptr,
    /// The instance → host name and port (unique).
    Srv,
    /// The instance's (empty) key/value text (unique).
    Txt,
    /// The host name → the phone's address, A or AAAA (unique).
    Addr,
    /// The service-type enumeration → the service type (shared).
    Meta,
}

/// The records a phone's full answer carries.
const FULL_SET: [Kind; 4] = [Kind::Ptr, Kind::Srv, Kind::Txt, Kind::Addr];

/// How the records' TTLs and cache-flush bits are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// A multicast answer or announcement.
    Multicast,
    /// A legacy unicast answer: TTLs capped, no cache-flush bit.
    Legacy,
    /// A goodbye: every TTL 0.
    Goodbye,
}

/// A question of a query, its name lower-cased with a trailing dot.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Question {
    name: String,
    qtype: u16,
    class: u16,
}

/// A parsed query: its id and questions.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Query {
    id: u16,
    questions: Vec<Question>,
}

/// Where a reply goes.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Destination {
    /// The group, on every interface (subject to §6's spacing).
    Multicast(BTreeSet<Kind>),
    /// Straight back to a legacy querier.
    Unicast(SocketAddr, Vec<u8>),
}

/// Reads a possibly compressed name at `pos`: the name (lower-case, with
/// a trailing dot) and the position after it. `None` for a malformed name,
/// a pointer loop, or a name over 255 bytes.
fn read_name(packet: &[u8], mut pos: usize) -> Option<(String, usize)> {
    let mut name = String::new();
    let mut end = None;
    // Pointers must go backwards and are bounded in number: a packet
    // whose pointers and labels form a cycle is refused.
    let mut jumps = 0;
    loop {
        let len = *packet.get(pos)?;
        match len & 0xC0 {
            0x00 if len == 0 => {
                if name.is_empty() {
                    name.push('.');
                }
                return Some((name, end.unwrap_or(pos + 1)));
            }
            0x00 => {
                let label = packet.get(pos + 1..pos + 1 + usize::from(len))?;
                name.push_str(&String::from_utf8_lossy(label).to_lowercase());
                name.push('.');
                if name.len() > 255 {
                    return None;
                }
                pos += 1 + usize::from(len);
            }
            0xC0 => {
                let low = *packet.get(pos + 1)?;
                let target = usize::from(u16::from_be_bytes([len & 0x3F, low]));
                jumps += 1;
                if target >= pos || jumps > 64 {
                    return None;
                }
                end.get_or_insert(pos + 2);
                pos = target;
            }
            _ => return None,
        }
    }
}

fn read_u16(packet: &[u8], pos: usize) -> Option<u16> {
    Some(u16::from_be_bytes([
        *packet.get(pos)?,
        *packet.get(pos + 1)?,
    ]))
}

/// The query in `packet`; `None` for a response, another opcode or a
/// malformed packet. Only the questions are read.
fn parse_query(packet: &[u8]) -> Option<Query> {
    let id = read_u16(packet, 0)?;
    let flags = read_u16(packet, 2)?;
    if flags & FLAGS_NOT_QUERY != 0 {
        return None;
    }
    let count = read_u16(packet, 4)?;
    let mut pos = 12;
    let mut questions = Vec::new();
    for _ in 0..count {
        let (name, after) = read_name(packet, pos)?;
        let qtype = read_u16(packet, after)?;
        let class = read_u16(packet, after + 2)?;
        questions.push(Question { name, qtype, class });
        pos = after + 4;
    }
    Some(Query { id, questions })
}

/// The records of `records` that answer `question`.
fn answers_for(records: &Records, question: &Question) -> Vec<Kind> {
    if !matches!(question.class & !CLASS_TOP_BIT, CLASS_IN | CLASS_ANY) {
        return Vec::new();
    }
    let any = question.qtype == TYPE_ANY;
    let name = question.name.as_str();
    let address_type = if records.addr.is_ipv4() {
        TYPE_A
    } else {
        TYPE_AAAA
    };
    let mut kinds = Vec::new();
    if name == CONNECT_SERVICE && (any || question.qtype == TYPE_PTR) {
        kinds.push(Kind::Ptr);
    }
    if name == META_QUERY && (any || question.qtype == TYPE_PTR) {
        kinds.push(Kind::Meta);
    }
    if name == records.service_name().to_lowercase() {
        if any || question.qtype == TYPE_SRV {
            kinds.push(Kind::Srv);
        }
        if any || question.qtype == TYPE_TXT {
            kinds.push(Kind::Txt);
        }
    }
    if name == records.host_name().to_lowercase() && (any || question.qtype == address_type) {
        kinds.push(Kind::Addr);
    }
    kinds
}

/// What to do with `packet`, received from `from`: `None` when it is not
/// a query for this phone.
fn reply(records: &Records, packet: &[u8], from: SocketAddr) -> Option<Destination> {
    let query = parse_query(packet)?;
    let answers: BTreeSet<Kind> = query
        .questions
        .iter()
        .flat_map(|q| answers_for(records, q))
        .collect();
    if answers.is_empty() {
        return None;
    }
    if from.port() == MDNS_PORT {
        return Some(Destination::Multicast(answers));
    }
    Some(Destination::Unicast(
        from,
        message(records, &answers, Mode::Legacy, Some(&query)),
    ))
}

/// The unsolicited announcement of the whole set (§8.3).
fn announcement(records: &Records) -> Vec<u8> {
    message(
        records,
        &FULL_SET.into_iter().collect(),
        Mode::Multicast,
        None,
    )
}

/// The goodbye: the whole set with TTL 0 (§10.1).
fn goodbye(records: &Records) -> Vec<u8> {
    message(
        records,
        &FULL_SET.into_iter().collect(),
        Mode::Goodbye,
        None,
    )
}

fn put_name(buf: &mut Vec<u8>, name: &str) {
    for label in name.split('.').filter(|l| !l.is_empty()) {
        // Labels are the checked instance name, fixed names or labels read
        // from a query (each at most 63 bytes there); longer ones are cut.
        let bytes = &label.as_bytes()[..label.len().min(63)];
        buf.push(u8::try_from(bytes.len()).unwrap_or(63));
        buf.extend_from_slice(bytes);
    }
    buf.push(0);
}

/// A response carrying `answers`, and the rest of the phone's set as
/// additional records; a legacy answer echoes `query`'s id and questions.
fn message(
    records: &Records,
    answers: &BTreeSet<Kind>,
    mode: Mode,
    query: Option<&Query>,
) -> Vec<u8> {
    let additional: Vec<Kind> = if answers.iter().any(|k| FULL_SET.contains(k)) {
        FULL_SET
            .into_iter()
            .filter(|k| !answers.contains(k))
            .collect()
    } else {
        Vec::new()
    };
    let questions = match (mode, query) {
        (Mode::Legacy, Some(query)) => query.questions.as_slice(),
        _ => &[],
    };
    let id = match (mode, query) {
        (Mode::Legacy, Some(query)) => query.id,
        _ => 0,
    };
    let mut buf = Vec::with_capacity(512);
    for field in [
        id,
        FLAGS_RESPONSE,
        u16::try_from(questions.len()).unwrap_or(u16::MAX),
        u16::try_from(answers.len()).unwrap_or(u16::MAX),
        0,
        u16::try_from(additional.len()).unwrap_or(u16::MAX),
    ] {
        buf.extend_from_slice(&field.to_be_bytes());
    }
    for q in questions {
        put_name(&mut buf, &q.name);
        buf.extend_from_slice(&q.qtype.to_be_bytes());
        buf.extend_from_slice(&(q.class & !CLASS_TOP_BIT).to_be_bytes());
    }
    for kind in answers.iter().chain(additional.iter()) {
        put_record(&mut buf, records, *kind, mode);
    }
    buf
}

fn put_record(buf: &mut Vec<u8>, records: &Records, kind: Kind, mode: Mode) {
    let service = records.service_name();
    let host = records.host_name();
    let (name, rtype, unique, ttl) = match kind {
        Kind::Ptr => (CONNECT_SERVICE, TYPE_PTR, false, OTHER_TTL),
        Kind::Meta => (META_QUERY, TYPE_PTR, false, OTHER_TTL),
        Kind::Srv => (service.as_str(), TYPE_SRV, true, HOST_TTL),
        Kind::Txt => (service.as_str(), TYPE_TXT, true, OTHER_TTL),
        Kind::Addr if records.addr.is_ipv4() => (host.as_str(), TYPE_A, true, HOST_TTL),
        Kind::Addr => (host.as_str(), TYPE_AAAA, true, HOST_TTL),
    };
    let (ttl, flush) = match mode {
        Mode::Multicast => (ttl, unique),
        Mode::Legacy => (ttl.min(LEGACY_TTL), false),
        Mode::Goodbye => (0, unique),
    };
    let mut rdata = Vec::new();
    match kind {
        Kind::Ptr => put_name(&mut rdata, &service),
        Kind::Meta => put_name(&mut rdata, CONNECT_SERVICE),
        Kind::Srv => {
            rdata.extend_from_slice(&[0, 0, 0, 0]); // priority, weight
            rdata.extend_from_slice(&records.addr.port().to_be_bytes());
            put_name(&mut rdata, &host);
        }
        // No keys: one empty string (RFC 6763 §6.1).
        Kind::Txt => rdata.push(0),
        Kind::Addr => match records.addr.ip() {
            IpAddr::V4(ip) => rdata.extend_from_slice(&ip.octets()),
            IpAddr::V6(ip) => rdata.extend_from_slice(&ip.octets()),
        },
    }
    put_name(buf, name);
    buf.extend_from_slice(&rtype.to_be_bytes());
    let class = if flush {
        CLASS_IN | CLASS_TOP_BIT
    } else {
        CLASS_IN
    };
    buf.extend_from_slice(&class.to_be_bytes());
    buf.extend_from_slice(&ttl.to_be_bytes());
    // At most a 255-byte name and a few bytes more.
    buf.extend_from_slice(&u16::try_from(rdata.len()).unwrap_or(0).to_be_bytes());
    buf.extend_from_slice(&rdata);
}

/// The responder's socket: port 5353 shared with every other mDNS
/// listener on the host, in the group on every IPv4 interface that takes
/// it; the interfaces joined are where it multicasts.
struct Responder {
    socket: std::net::UdpSocket,
    interfaces: Vec<Ipv4Addr>,
}

impl Responder {
    fn open(host_only: bool) -> std::io::Result<Self> {
        let socket = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
        socket.set_reuse_address(true)?;
        socket.set_reuse_port(true)?;
        socket.bind(&SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, MDNS_PORT).into())?;
        socket.set_multicast_loop_v4(true)?;
        // 0: looped back to this host's listeners, never sent on a wire.
        socket.set_multicast_ttl_v4(if host_only { 0 } else { 255 })?;
        socket.set_nonblocking(true)?;
        let mut interfaces = Vec::new();
        for interface in if_addrs::get_if_addrs()? {
            let IpAddr::V4(ip) = interface.ip() else {
                continue;
            };
            // Only those known to be down are left out: loopback's state,
            // and that of many virtual interfaces, reads "unknown".
            if interface.oper_status == if_addrs::IfOperStatus::Down {
                continue;
            }
            match socket.join_multicast_v4(&GROUP, &ip) {
                Ok(()) => interfaces.push(ip),
                Err(e) => {
                    tracing::debug!(interface = %interface.name, error = %e, "mDNS: not joined")
                }
            }
        }
        if interfaces.is_empty() {
            return Err(std::io::Error::other(
                "no IPv4 interface takes the mDNS group",
            ));
        }
        Ok(Self {
            socket: socket.into(),
            interfaces,
        })
    }
}

/// Multicasts `packet` on every interface in `interfaces` (a failure on one
/// is logged and the others still get it). The socket is non-blocking and
/// the datagrams small: this never waits.
fn multicast(socket: &std::net::UdpSocket, interfaces: &[Ipv4Addr], packet: &[u8]) {
    let sock = SockRef::from(socket);
    for ip in interfaces {
        let sent = sock
            .set_multicast_if_v4(ip)
            .and_then(|()| socket.send_to(packet, (GROUP, MDNS_PORT)));
        if let Err(e) = sent {
            tracing::debug!(interface = %ip, error = %e, "mDNS: not sent");
        }
    }
}

/// Runs the responder until `cancel`: announces whatever `records` holds
/// (again after each change) and answers what `socket` receives, sending
/// through `sender` (the same socket).
async fn run(
    socket: UdpSocket,
    sender: std::net::UdpSocket,
    interfaces: Vec<Ipv4Addr>,
    mut records: watch::Receiver<Records>,
    cancel: CancellationToken,
) {
    let send = |packet: &[u8]| multicast(&sender, &interfaces, packet);
    let mut current = records.borrow_and_update().clone();
    // Announcements left, and when the next one is due.
    let mut announce = (ANNOUNCE_GAPS.len() + 1, Instant::now());
    let mut last_multicast: Option<Instant> = None;
    // An answer held back by §6's spacing: when it goes, and what it says.
    let mut pending: Option<(Instant, BTreeSet<Kind>)> = None;
    let mut buf = vec![0u8; 9000];
    loop {
        let announce_at = announce.1;
        let pending_at = pending.as_ref().map(|(at, _)| *at);
        tokio::select! {
            () = cancel.cancelled() => return,
            changed = records.changed() => {
                if changed.is_err() {
                    return;
                }
                current = records.borrow_and_update().clone();
                announce = (ANNOUNCE_GAPS.len() + 1, Instant::now());
            }
            () = tokio::time::sleep_until(announce_at), if announce.0 > 0 => {
                send(&announcement(&current));
                let sent = ANNOUNCE_GAPS.len() + 1 - announce.0;
                announce.0 -= 1;
                announce.1 = Instant::now() + ANNOUNCE_GAPS.get(sent).copied().unwrap_or_default();
                last_multicast = Some(Instant::now());
            }
            () = tokio::time::sleep_until(pending_at.unwrap_or_else(Instant::now)), if pending_at.is_some() => {
                if let Some((_, kinds)) = pending.take() {
                    send(&message(&current, &kinds, Mode::Multicast, None));
                    last_multicast = Some(Instant::now());
                }
            }
            received = socket.recv_from(&mut buf) => match received {
                Ok((len, from)) => match buf.get(..len).and_then(|p| reply(&current, p, from)) {
                    Some(Destination::Unicast(to, packet)) => {
                        if let Err(e) = sender.send_to(&packet, to) {
                            tracing::debug!(%to, error = %e, "mDNS: legacy answer not sent");
                        }
                    }
                    Some(Destination::Multicast(kinds)) => {
                        let now = Instant::now();
                        match last_multicast.map(|at| at + MULTICAST_SPACING) {
                            Some(free) if free > now => {
                                let (_, held) = pending.get_or_insert_with(|| (free, BTreeSet::new()));
                                held.extend(kinds);
                            }
                            _ => {
                                send(&message(&current, &kinds, Mode::Multicast, None));
                                last_multicast = Some(now);
                            }
                        }
                    }
                    None => {}
                },
                Err(e) => {
                    tracing::debug!(error = %e, "mDNS: receive failed");
                    tokio::time::sleep(RECV_ERROR_PAUSE).await;
                }
            },
        }
    }
}

/// One phone's announcement; withdrawn (a goodbye) when dropped.
pub(crate) struct Announcer {
    records: watch::Sender<Records>,
    cancel: CancellationToken,
    /// The responder's socket, for the goodbye sent from `drop`.
    socket: std::net::UdpSocket,
    interfaces: Vec<Ipv4Addr>,
}

impl std::fmt::Debug for Announcer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Announcer")
            .field("records", &*self.records.borrow())
            .field("interfaces", &self.interfaces)
            .finish_non_exhaustive()
    }
}

/// Checks that `addr` can be announced: a concrete address.
fn announceable(addr: SocketAddr) -> Result<(), SimError> {
    if addr.ip().is_unspecified() {
        return Err(SimError::Config(format!(
            "cannot announce {addr} over mDNS: bind the phone to a concrete address"
        )));
    }
    Ok(())
}

impl Announcer {
    /// A responder announcing `addr` as `instance`, on the current tokio
    /// runtime.
    ///
    /// # Errors
    /// `SimError::Config` when the name is not a valid instance name, the
    /// address is unspecified, there is no runtime, or the responder's
    /// socket cannot be opened.
    pub(crate) fn start(instance: &str, addr: SocketAddr) -> Result<Self, SimError> {
        if instance.is_empty()
            || instance.len() > 63
            || !instance
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(SimError::Config(format!(
                "invalid mDNS instance name {instance:?} (letters, digits, '-' and '_', at most 63)"
            )));
        }
        announceable(addr)?;
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|e| SimError::Config(format!("the mDNS responder needs a runtime: {e}")))?;
        let responder = Responder::open(addr.ip().is_loopback())
            .map_err(|e| SimError::Config(format!("cannot start the mDNS responder: {e}")))?;
        let err = |e: std::io::Error| SimError::Config(format!("mDNS socket: {e}"));
        // One socket: the task receives through the runtime and sends, as
        // `drop` does, through plain handles of it.
        let sender = responder.socket.try_clone().map_err(err)?;
        let socket =
            UdpSocket::from_std(responder.socket.try_clone().map_err(err)?).map_err(err)?;
        let (records, receiver) = watch::channel(Records {
            instance: instance.to_owned(),
            addr,
        });
        let cancel = CancellationToken::new();
        runtime.spawn(run(
            socket,
            sender,
            responder.interfaces.clone(),
            receiver,
            cancel.clone(),
        ));
        tracing::info!(%instance, %addr, interfaces = ?responder.interfaces, "announced over mDNS");
        Ok(Self {
            records,
            cancel,
            socket: responder.socket,
            interfaces: responder.interfaces,
        })
    }

    /// Announce `addr` instead of whatever was announced before: the same
    /// name, the new port, three announcements again. No goodbye first:
    /// the SRV record is unique (cache-flush), so a listener replaces the
    /// old port with the new one, whereas a goodbye followed at once by the
    /// new record raced the listener's deletion of the goodbye's records
    /// (adb 36 then forgot the phone).
    ///
    /// # Errors
    /// `SimError::Config` when the address is unspecified.
    pub(crate) fn announce(&mut self, addr: SocketAddr) -> Result<(), SimError> {
        announceable(addr)?;
        self.records.send_modify(|records| records.addr = addr);
        tracing::info!(instance = %self.records.borrow().instance, %addr, "announced over mDNS");
        Ok(())
    }
}

impl Drop for Announcer {
    fn drop(&mut self) {
        self.cancel.cancel();
        multicast(
            &self.socket,
            &self.interfaces,
            &goodbye(&self.records.borrow()),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phone(port: u16) -> Records {
        Records {
            instance: "adb-SIM1-abc123".into(),
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
        }
    }

    /// A query with `questions` (name, type, class), id `id`.
    fn query(id: u16, questions: &[(&str, u16, u16)]) -> Vec<u8> {
        let mut buf = Vec::new();
        for field in [id, 0, u16::try_from(questions.len()).unwrap(), 0, 0, 0] {
            buf.extend_from_slice(&field.to_be_bytes());
        }
        for (name, qtype, class) in questions {
            put_name(&mut buf, name);
            buf.extend_from_slice(&qtype.to_be_bytes());
            buf.extend_from_slice(&class.to_be_bytes());
        }
        buf
    }

    /// A record of a response, its name lower-cased.
    #[derive(Debug, Clone, PartialEq)]
    struct Rr {
        name: String,
        rtype: u16,
        class: u16,
        ttl: u32,
        /// PTR: the name pointed at; SRV: "port target"; A: the address.
        data: String,
    }

    /// A response's id, question count, answers and additional records.
    fn parse_response(packet: &[u8]) -> (u16, u16, Vec<Rr>, Vec<Rr>) {
        let id = read_u16(packet, 0).unwrap();
        assert_eq!(read_u16(packet, 2).unwrap() & 0x8000, 0x8000, "a response");
        let qd = read_u16(packet, 4).unwrap();
        let an = read_u16(packet, 6).unwrap();
        let ns = read_u16(packet, 8).unwrap();
        let ar = read_u16(packet, 10).unwrap();
        let mut pos = 12;
        for _ in 0..qd {
            pos = read_name(packet, pos).unwrap().1 + 4;
        }
        let mut all = Vec::new();
        for _ in 0..an + ns + ar {
            let (name, after) = read_name(packet, pos).unwrap();
            let rtype = read_u16(packet, after).unwrap();
            let class = read_u16(packet, after + 2).unwrap();
            let ttl = u32::from_be_bytes(packet[after + 4..after + 8].try_into().unwrap());
            let len = usize::from(read_u16(packet, after + 8).unwrap());
            let start = after + 10;
            let data = match rtype {
                TYPE_PTR => read_name(packet, start).unwrap().0,
                TYPE_SRV => format!(
                    "{} {}",
                    read_u16(packet, start + 4).unwrap(),
                    read_name(packet, start + 6).unwrap().0
                ),
                TYPE_A => Ipv4Addr::from(<[u8; 4]>::try_from(&packet[start..start + 4]).unwrap())
                    .to_string(),
                _ => format!("{:?}", &packet[start..start + len]),
            };
            all.push(Rr {
                name,
                rtype,
                class,
                ttl,
                data,
            });
            pos = start + len;
        }
        let additional = all.split_off(usize::from(an + ns));
        (id, qd, all, additional)
    }

    const FROM_MDNS: SocketAddr =
        SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(192, 0, 2, 2), MDNS_PORT));

    fn multicast_kinds(reply: Option<Destination>) -> Vec<Kind> {
        match reply {
            Some(Destination::Multicast(kinds)) => kinds.into_iter().collect(),
            other => panic!("not a multicast answer: {other:?}"),
        }
    }

    #[test]
    fn instance_names_are_checked() {
        let addr: SocketAddr = "127.0.0.1:5555".parse().unwrap();
        for bad in ["", "a b", "adb-X-1._tcp", &"x".repeat(64)] {
            assert!(Announcer::start(bad, addr).is_err(), "{bad:?}");
        }
        let unspecified: SocketAddr = "0.0.0.0:5555".parse().unwrap();
        assert!(Announcer::start("adb-X-1", unspecified).is_err());
    }

    #[test]
    fn adb_36s_any_questions_are_answered() {
        // What adb 36 (openscreen) asks, captured: ANY on the service
        // type, then ANY on the instance, then ANY on the host name.
        let records = phone(41234);
        let cases = [
            (CONNECT_SERVICE.to_owned(), vec![Kind::Ptr]),
            (
                "ADB-sim1-ABC123._adb-tls-connect._tcp.local.".to_owned(),
                vec![Kind::Srv, Kind::Txt],
            ),
            ("adb-SIM1-abc123.local.".to_owned(), vec![Kind::Addr]),
        ];
        for (name, wanted) in cases {
            let packet = query(7, &[(&name, TYPE_ANY, CLASS_IN)]);
            assert_eq!(
                multicast_kinds(reply(&records, &packet, FROM_MDNS)),
                wanted,
                "{name}"
            );
        }
    }

    #[test]
    fn typed_questions_get_their_records_and_others_nothing() {
        let records = phone(41234);
        let service = records.service_name();
        let host = records.host_name();
        for (name, qtype, wanted) in [
            (CONNECT_SERVICE, TYPE_PTR, vec![Kind::Ptr]),
            (META_QUERY, TYPE_PTR, vec![Kind::Meta]),
            (service.as_str(), TYPE_SRV, vec![Kind::Srv]),
            (service.as_str(), TYPE_TXT, vec![Kind::Txt]),
            (host.as_str(), TYPE_A, vec![Kind::Addr]),
        ] {
            let packet = query(0, &[(name, qtype, CLASS_IN | CLASS_TOP_BIT)]);
            assert_eq!(
                multicast_kinds(reply(&records, &packet, FROM_MDNS)),
                wanted,
                "{name} {qtype}"
            );
        }
        for (name, qtype) in [
            (host.as_str(), TYPE_AAAA),
            (CONNECT_SERVICE, TYPE_SRV),
            ("_adb-tls-pairing._tcp.local.", TYPE_PTR),
            ("other-phone._adb-tls-connect._tcp.local.", TYPE_ANY),
        ] {
            let packet = query(0, &[(name, qtype, CLASS_IN)]);
            assert_eq!(reply(&records, &packet, FROM_MDNS), None, "{name} {qtype}");
        }
    }

    #[test]
    fn responses_and_malformed_packets_are_ignored() {
        let records = phone(41234);
        let ours = query(0, &[(CONNECT_SERVICE, TYPE_PTR, CLASS_IN)]);
        // Our own announcement, as every responder hears its own.
        assert_eq!(reply(&records, &announcement(&records), FROM_MDNS), None);
        // Truncated anywhere.
        for len in 0..ours.len() {
            assert_eq!(reply(&records, &ours[..len], FROM_MDNS), None, "{len}");
        }
        // A compression pointer to itself, and one pointing forwards.
        let mut looped = query(0, &[]);
        looped[5] = 1;
        looped.extend_from_slice(&[0xC0, 12, 0, 12, 0, 1]);
        assert_eq!(reply(&records, &looped, FROM_MDNS), None);
        let mut forward = query(0, &[]);
        forward[5] = 1;
        forward.extend_from_slice(&[0xC0, 14, 0, 0, 12, 0, 1]);
        assert_eq!(reply(&records, &forward, FROM_MDNS), None);
        // A name longer than 255 bytes.
        let long = format!("{}.local.", vec!["a".repeat(63); 5].join("."));
        let packet = query(0, &[(&long, TYPE_ANY, CLASS_IN)]);
        assert_eq!(reply(&records, &packet, FROM_MDNS), None);
    }

    #[test]
    fn compressed_question_names_are_read() {
        let records = phone(41234);
        // Two questions: the service type, then the instance as a label
        // and a pointer to the service type.
        let mut packet = query(0, &[(CONNECT_SERVICE, TYPE_PTR, CLASS_IN)]);
        packet[5] = 2;
        packet.push(15);
        packet.extend_from_slice(b"adb-SIM1-abc123");
        packet.extend_from_slice(&[0xC0, 12]);
        packet.extend_from_slice(&TYPE_SRV.to_be_bytes());
        packet.extend_from_slice(&CLASS_IN.to_be_bytes());
        assert_eq!(
            multicast_kinds(reply(&records, &packet, FROM_MDNS)),
            vec![Kind::Ptr, Kind::Srv]
        );
    }

    #[test]
    fn the_announcement_carries_the_whole_set_with_cache_flush_on_unique_records() {
        let records = phone(41234);
        let (id, questions, answers, additional) = parse_response(&announcement(&records));
        assert_eq!((id, questions), (0, 0));
        assert!(additional.is_empty());
        let service = records.service_name().to_lowercase();
        let host = records.host_name().to_lowercase();
        let wanted = [
            (
                CONNECT_SERVICE,
                TYPE_PTR,
                CLASS_IN,
                OTHER_TTL,
                service.clone(),
            ),
            (
                &service,
                TYPE_SRV,
                CLASS_IN | CLASS_TOP_BIT,
                HOST_TTL,
                format!("41234 {host}"),
            ),
            (
                &service,
                TYPE_TXT,
                CLASS_IN | CLASS_TOP_BIT,
                OTHER_TTL,
                "[0]".into(),
            ),
            (
                &host,
                TYPE_A,
                CLASS_IN | CLASS_TOP_BIT,
                HOST_TTL,
                "127.0.0.1".into(),
            ),
        ];
        assert_eq!(answers.len(), wanted.len());
        for (rr, (name, rtype, class, ttl, data)) in answers.iter().zip(wanted) {
            assert_eq!(
                (
                    rr.name.as_str(),
                    rr.rtype,
                    rr.class,
                    rr.ttl,
                    rr.data.as_str()
                ),
                (name, rtype, class, ttl, data.as_str())
            );
        }
        // The goodbye: the same records, every TTL 0.
        let (_, _, gone, _) = parse_response(&goodbye(&records));
        assert_eq!(gone.len(), 4);
        assert!(gone.iter().all(|rr| rr.ttl == 0), "{gone:?}");
    }

    #[test]
    fn an_answer_puts_the_rest_of_the_set_in_the_additional_section() {
        let records = phone(41234);
        let packet = message(&records, &[Kind::Srv].into(), Mode::Multicast, None);
        let (_, _, answers, additional) = parse_response(&packet);
        assert_eq!(answers.len(), 1);
        assert_eq!(answers[0].rtype, TYPE_SRV);
        let types: Vec<u16> = additional.iter().map(|rr| rr.rtype).collect();
        assert_eq!(types, vec![TYPE_PTR, TYPE_TXT, TYPE_A]);
        // The enumeration's answer is alone.
        let packet = message(&records, &[Kind::Meta].into(), Mode::Multicast, None);
        let (_, _, answers, additional) = parse_response(&packet);
        assert_eq!(answers[0].data, CONNECT_SERVICE);
        assert!(additional.is_empty());
    }

    #[test]
    fn a_legacy_querier_gets_a_unicast_answer_echoing_its_id_and_question() {
        let records = phone(41234);
        let from: SocketAddr = "127.0.0.1:40000".parse().unwrap();
        let packet = query(0x4a17, &[(CONNECT_SERVICE, TYPE_PTR, CLASS_IN)]);
        let Some(Destination::Unicast(to, answer)) = reply(&records, &packet, from) else {
            panic!("not a unicast answer");
        };
        assert_eq!(to, from);
        let (id, questions, answers, additional) = parse_response(&answer);
        assert_eq!((id, questions), (0x4a17, 1));
        for rr in answers.iter().chain(&additional) {
            assert!(rr.ttl <= LEGACY_TTL, "{rr:?}");
            assert_eq!(rr.class, CLASS_IN, "no cache-flush bit: {rr:?}");
        }
    }

    /// A listener in the group on loopback, as a querier on this host.
    fn listener() -> std::net::UdpSocket {
        let socket = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).unwrap();
        socket.set_reuse_address(true).unwrap();
        socket.set_reuse_port(true).unwrap();
        socket
            .bind(&SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, MDNS_PORT).into())
            .unwrap();
        socket
            .join_multicast_v4(&GROUP, &Ipv4Addr::LOCALHOST)
            .unwrap();
        socket.set_multicast_if_v4(&Ipv4Addr::LOCALHOST).unwrap();
        socket.set_multicast_loop_v4(true).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        socket.into()
    }

    /// Waits (bounded) for a response naming `instance` whose SRV port
    /// `check` accepts, reading what `socket` receives.
    fn wait_for_srv(socket: &std::net::UdpSocket, instance: &str, check: impl Fn(u16) -> bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let mut buf = [0u8; 9000];
        while std::time::Instant::now() < deadline {
            let Ok((len, _)) = socket.recv_from(&mut buf) else {
                continue;
            };
            if read_u16(&buf, 2).is_none_or(|f| f & 0x8000 == 0) {
                continue;
            }
            let (_, _, answers, additional) = parse_response(&buf[..len]);
            let srv = answers
                .iter()
                .chain(&additional)
                .find(|rr| rr.rtype == TYPE_SRV && rr.name.starts_with(&instance.to_lowercase()));
            if let Some(port) = srv.and_then(|rr| rr.data.split(' ').next()?.parse().ok())
                && check(port)
            {
                return;
            }
        }
        panic!("no answer for {instance} in time");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_querier_on_this_host_hears_the_phone_and_its_new_port() {
        let instance = format!("adb-UNIT-{}", std::process::id());
        let listener = listener();
        let mut announcer =
            Announcer::start(&instance, "127.0.0.1:41001".parse().unwrap()).unwrap();
        let service = format!("{instance}.{CONNECT_SERVICE}");
        let name = instance.clone();
        let listener = tokio::task::spawn_blocking(move || {
            // The announcement.
            wait_for_srv(&listener, &name, |p| p == 41001);
            // A question from another port: only an answer comes back to it.
            let asker = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            SockRef::from(&asker)
                .set_multicast_if_v4(&Ipv4Addr::LOCALHOST)
                .unwrap();
            asker
                .set_read_timeout(Some(Duration::from_millis(200)))
                .unwrap();
            asker
                .send_to(
                    &query(0x1234, &[(&service, TYPE_SRV, CLASS_IN)]),
                    (GROUP, MDNS_PORT),
                )
                .unwrap();
            wait_for_srv(&asker, &name, |p| p == 41001);
            listener
        })
        .await
        .unwrap();
        announcer
            .announce("127.0.0.1:41002".parse().unwrap())
            .unwrap();
        tokio::task::spawn_blocking(move || wait_for_srv(&listener, &instance, |p| p == 41002))
            .await
            .unwrap();
    }
}
