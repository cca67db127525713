//! The embedded MQTT broker's driver: sockets and tasks around the
//! `droidwarden-broker` state machine (see docs/embedded-broker.md).
//!
//! With no `[mqtt] url`, `droidwarden daemon` starts this broker so that it
//! works on a machine with nothing else installed. The broker has no
//! authentication and keeps nothing on disk, so it listens on loopback unless
//! the configuration explicitly allows otherwise.
//!
//! Shape: one accept task; one task per connection, which decodes packets
//! and writes what it is sent; and one router task that owns the
//! [`Broker`] state machine and is the only one to touch sessions. Every
//! task is spawned through the daemon's [`TaskTracker`] and stops on the
//! shutdown token: the listener closes at once, clients are disconnected
//! (MQTT 5 clients are told "server shutting down").

use droidwarden_broker::codec::{self, ClientPacket, Connect, DecodeError, ProtocolVersion};
use droidwarden_broker::{
    Action, Broker, BytesMut, ConnId, Input, Limits, LossCause, ServerPacket,
};
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The default listen address: loopback, the standard MQTT port.
pub(crate) const DEFAULT_LISTEN: SocketAddr =
    SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 1883);

/// How long a new TCP connection has to send CONNECT.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one write to a client may take before it counts as gone.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a connection that ended on the reading side may still flush
/// what the broker queued for it (such as a DISCONNECT with a reason).
const DRAIN_TIMEOUT: Duration = Duration::from_secs(2);
/// How often the state machine is told that time passed (delayed wills,
/// session expiry): their unit is the second.
const TICK: Duration = Duration::from_secs(1);
/// Pause after a failed `accept` (such as running out of file descriptors),
/// so that the loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// Connections to router: a full queue makes connection tasks wait, which
/// slows their clients down through TCP; nothing is dropped. 256 lets every
/// connection of a household have packets queued at once.
const INPUT_CAPACITY: usize = 256;
/// Router to one connection, beyond the retained messages: see
/// [`output_capacity`].
const OUTPUT_HEADROOM: usize = 1024;
/// Largest batch of packets written with one `write_all`.
const WRITE_BATCH: usize = 64 * 1024;

/// Where and how the embedded broker listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BrokerConfig {
    /// Address to listen on; port 0 picks a free port.
    pub(crate) listen: SocketAddr,
    /// Allow an address other than loopback. The broker has no
    /// authentication, so anyone who can reach it can drive the phones.
    pub(crate) allow_remote: bool,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig {
            listen: DEFAULT_LISTEN,
            allow_remote: false,
        }
    }
}

impl From<SocketAddr> for BrokerConfig {
    /// Listen on `listen`, which must be loopback.
    fn from(listen: SocketAddr) -> Self {
        BrokerConfig {
            listen,
            allow_remote: false,
        }
    }
}

/// Why the broker did not start.
#[derive(Debug)]
#[non_exhaustive]
pub(crate) enum BrokerError {
    /// The address is not loopback and `allow_remote` is not set.
    RemoteNotAllowed {
        /// The refused address.
        listen: SocketAddr,
    },
    /// The address could not be bound (in use, not local, no permission).
    Bind {
        /// The address.
        listen: SocketAddr,
        /// What the system said.
        source: io::Error,
    },
}

impl fmt::Display for BrokerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BrokerError::RemoteNotAllowed { listen } => write!(
                f,
                "the embedded broker has no authentication and listens on loopback only; \
                 {listen} is not loopback (set [broker] allow_remote = true to insist)"
            ),
            BrokerError::Bind { listen, source } if source.kind() == io::ErrorKind::AddrInUse => {
                write!(
                    f,
                    "cannot listen on {listen}: another program already uses this port \
                     (often Mosquitto, e.g. Home Assistant's). Either use that broker: \
                     set [mqtt] url = \"mqtt://{listen}\" (and its username and password), \
                     or move the embedded one: set [broker] listen to a free port, \
                     e.g. \"127.0.0.1:1884\""
                )
            }
            BrokerError::Bind { listen, source } => {
                write!(f, "cannot listen on {listen}: {source}")
            }
        }
    }
}

impl std::error::Error for BrokerError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BrokerError::Bind { source, .. } => Some(source),
            BrokerError::RemoteNotAllowed { .. } => None,
        }
    }
}

/// Binds the listener and starts the broker's tasks on `tracker`. Returns
/// the bound address (the real port when the configuration asked for port
/// 0) once the broker accepts connections. It runs until `shutdown` is
/// cancelled; the listener closes at once and `tracker.wait()` returns once
/// every broker task has stopped.
///
/// # Errors
///
/// [`BrokerError::RemoteNotAllowed`] for a non-loopback address without
/// `allow_remote`; [`BrokerError::Bind`] when the address cannot be bound.
pub(crate) async fn start(
    config: impl Into<BrokerConfig>,
    shutdown: CancellationToken,
    tracker: &TaskTracker,
) -> Result<SocketAddr, BrokerError> {
    let config = config.into();
    let listen = config.listen;
    if !listen.ip().to_canonical().is_loopback() {
        if !config.allow_remote {
            return Err(BrokerError::RemoteNotAllowed { listen });
        }
        tracing::warn!(
            %listen,
            "the embedded MQTT broker listens beyond loopback; it has no authentication \
             and no TLS, so anyone who can reach it can drive the phones"
        );
    }
    let listener = TcpListener::bind(listen)
        .await
        .map_err(|source| BrokerError::Bind { listen, source })?;
    let local_addr = listener
        .local_addr()
        .map_err(|source| BrokerError::Bind { listen, source })?;
    let limits = Limits::default();
    let (inputs, inputs_rx) = mpsc::channel(INPUT_CAPACITY);
    tracker.spawn(route(inputs_rx, limits.clone(), shutdown.clone()));
    tracker.spawn(accept(listener, inputs, limits, tracker.clone(), shutdown));
    Ok(local_addr)
}

/// What connection tasks tell the router.
#[derive(Debug)]
enum RouterMsg {
    /// A connection sent CONNECT; `out` is where its packets go.
    Connect {
        conn: ConnId,
        connect: Box<Connect>,
        out: mpsc::Sender<ServerPacket>,
    },
    /// Anything else.
    Input(Input),
}

/// A subscription to `#` releases every retained message at once, so one
/// connection's queue holds at least all of them; beyond that, a client
/// that does not read is disconnected rather than let memory grow.
fn output_capacity(limits: &Limits) -> usize {
    limits.max_retained + OUTPUT_HEADROOM
}

async fn accept(
    listener: TcpListener,
    inputs: mpsc::Sender<RouterMsg>,
    limits: Limits,
    tracker: TaskTracker,
    shutdown: CancellationToken,
) {
    let mut next_conn: ConnId = 0;
    loop {
        let accepted = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, peer)) => {
                next_conn += 1;
                tracker.spawn(connection(
                    stream,
                    peer,
                    next_conn,
                    inputs.clone(),
                    limits.clone(),
                    shutdown.clone(),
                ));
            }
            Err(e) => {
                tracing::warn!(error = %e, "embedded broker: accept failed");
                tokio::select! {
                    () = shutdown.cancelled() => break,
                    () = tokio::time::sleep(ACCEPT_BACKOFF) => {}
                }
            }
        }
    }
    // Dropping the listener closes the port now, not when clients leave.
    drop(listener);
    tracing::debug!("embedded broker stopped listening");
}

/// The router: the only owner of the broker state.
async fn route(mut inputs: mpsc::Receiver<RouterMsg>, limits: Limits, shutdown: CancellationToken) {
    let mut broker = Broker::new(limits);
    let mut outputs: HashMap<ConnId, mpsc::Sender<ServerPacket>> = HashMap::new();
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let input = tokio::select! {
            biased;
            () = shutdown.cancelled() => break,
            msg = inputs.recv() => match msg {
                Some(RouterMsg::Connect { conn, connect, out }) => {
                    tracing::debug!(conn, client_id = %connect.client_id, version = ?connect.version, "MQTT client connecting");
                    outputs.insert(conn, out);
                    Input::Packet { conn, packet: ClientPacket::Connect(connect) }
                }
                Some(RouterMsg::Input(input)) => input,
                None => break,
            },
            _ = tick.tick() => Input::Tick,
        };
        let actions = broker.step(Instant::now(), input);
        perform(&mut broker, &mut outputs, actions);
    }
    let actions = broker.shutdown();
    perform(&mut broker, &mut outputs, actions);
    // Dropping the senders lets every writer flush and close its socket.
    outputs.clear();
}

/// Performs the state machine's actions. Sending never waits: a client
/// whose queue is full is disconnected as a slow consumer, which is fed back
/// to the machine (its Will is published).
fn perform(
    broker: &mut Broker,
    outputs: &mut HashMap<ConnId, mpsc::Sender<ServerPacket>>,
    actions: Vec<Action>,
) {
    let mut pending = VecDeque::from(actions);
    while let Some(action) = pending.pop_front() {
        match action {
            Action::Send { conn, packet } => {
                let Some(out) = outputs.get(&conn) else {
                    continue;
                };
                let cause = match out.try_send(packet) {
                    Ok(()) => continue,
                    Err(mpsc::error::TrySendError::Full(_)) => {
                        tracing::warn!(
                            conn,
                            "MQTT client does not read fast enough; disconnecting it"
                        );
                        LossCause::SlowConsumer
                    }
                    Err(mpsc::error::TrySendError::Closed(_)) => LossCause::PeerClosed,
                };
                outputs.remove(&conn);
                pending.extend(broker.step(Instant::now(), Input::Lost { conn, cause }));
            }
            Action::Close { conn } => {
                outputs.remove(&conn);
            }
        }
    }
}

/// How a connection's reading side ended.
#[derive(Debug)]
enum ReadEnd {
    /// End of stream.
    Closed,
    /// A read failed.
    Io(io::Error),
    /// Nothing within the keep-alive (or CONNECT) deadline.
    Timeout,
    /// Bytes that are not an acceptable packet.
    Violation(DecodeError),
}

/// Reads until `buf` holds one whole packet.
async fn read_packet(
    rd: &mut OwnedReadHalf,
    buf: &mut BytesMut,
    version: Option<ProtocolVersion>,
    max_packet_size: usize,
) -> Result<ClientPacket, ReadEnd> {
    loop {
        match codec::decode(buf, version, max_packet_size) {
            Ok(Some(packet)) => return Ok(packet),
            Ok(None) => {}
            Err(e) => return Err(ReadEnd::Violation(e)),
        }
        buf.reserve(8 * 1024);
        match rd.read_buf(buf).await {
            Ok(0) => return Err(ReadEnd::Closed),
            Ok(_) => {}
            Err(e) => return Err(ReadEnd::Io(e)),
        }
    }
}

/// Like [`read_packet`], failing with [`ReadEnd::Timeout`] after `limit`.
async fn read_packet_within(
    rd: &mut OwnedReadHalf,
    buf: &mut BytesMut,
    version: Option<ProtocolVersion>,
    max_packet_size: usize,
    limit: Option<Duration>,
) -> Result<ClientPacket, ReadEnd> {
    let read = read_packet(rd, buf, version, max_packet_size);
    match limit {
        Some(limit) => tokio::time::timeout(limit, read)
            .await
            .unwrap_or(Err(ReadEnd::Timeout)),
        None => read.await,
    }
}

/// One client connection, from TCP accept to close.
async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    conn: ConnId,
    router: mpsc::Sender<RouterMsg>,
    limits: Limits,
    shutdown: CancellationToken,
) {
    // MQTT packets are small and latency matters more than batching here.
    let _ = stream.set_nodelay(true);
    let (mut rd, mut wr) = stream.into_split();
    let max_packet_size = limits.max_packet_size as usize;
    let mut buf = BytesMut::with_capacity(4096);
    let first = tokio::select! {
        () = shutdown.cancelled() => return,
        first = read_packet_within(&mut rd, &mut buf, None, max_packet_size, Some(CONNECT_TIMEOUT)) => first,
    };
    let connect = match first {
        Ok(ClientPacket::Connect(connect)) => connect,
        Err(ReadEnd::Violation(DecodeError::UnsupportedProtocol { level })) => {
            tracing::debug!(conn, %peer, level, "MQTT client speaks an unsupported protocol level");
            let refusal = codec::unsupported_protocol_connack();
            let _ = tokio::time::timeout(WRITE_TIMEOUT, wr.write_all(&refusal)).await;
            return;
        }
        other => {
            tracing::debug!(conn, %peer, outcome = ?other.err(), "connection closed before a valid CONNECT");
            return;
        }
    };
    let version = connect.version;
    // MQTT 3.1.1 §3.1.2.10: one and a half keep-alive periods.
    let keep_alive = (connect.keep_alive > 0)
        .then(|| Duration::from_millis(u64::from(connect.keep_alive) * 1500));
    let (out, out_rx) = mpsc::channel(output_capacity(&limits));
    if router
        .send(RouterMsg::Connect { conn, connect, out })
        .await
        .is_err()
    {
        return;
    }

    let writer = write_packets(wr, out_rx, version);
    tokio::pin!(writer);
    let reader = {
        let router = router.clone();
        async move {
            loop {
                match read_packet_within(
                    &mut rd,
                    &mut buf,
                    Some(version),
                    max_packet_size,
                    keep_alive,
                )
                .await
                {
                    Ok(packet) => {
                        let input = Input::Packet { conn, packet };
                        if router.send(RouterMsg::Input(input)).await.is_err() {
                            return None;
                        }
                    }
                    Err(end) => return Some(end),
                }
            }
        }
    };
    tokio::select! {
        end = reader => {
            if let Some(end) = end {
                let cause = match end {
                    ReadEnd::Closed => LossCause::PeerClosed,
                    ReadEnd::Io(e) => {
                        tracing::debug!(conn, %peer, error = %e, "MQTT connection read failed");
                        LossCause::PeerClosed
                    }
                    ReadEnd::Timeout => LossCause::KeepAliveTimeout,
                    ReadEnd::Violation(e) => LossCause::Violation(e),
                };
                tracing::debug!(conn, %peer, ?cause, "MQTT connection ended");
                let _ = router.send(RouterMsg::Input(Input::Lost { conn, cause })).await;
            }
            // Flush what the broker still sends (such as a DISCONNECT
            // that says why) until it closes this connection.
            let _ = tokio::time::timeout(DRAIN_TIMEOUT, &mut writer).await;
        }
        written = &mut writer => {
            // The broker closed the connection, or writing failed; in the
            // first case the broker has forgotten it and ignores this.
            if let Err(e) = written {
                tracing::debug!(conn, %peer, error = %e, "MQTT connection write failed");
            }
            let lost = Input::Lost { conn, cause: LossCause::PeerClosed };
            let _ = router.send(RouterMsg::Input(lost)).await;
        }
    }
}

/// Writes what the router sends until it drops the sender, then closes
/// the sending side of the socket.
async fn write_packets(
    mut wr: OwnedWriteHalf,
    mut packets: mpsc::Receiver<ServerPacket>,
    version: ProtocolVersion,
) -> io::Result<()> {
    let mut buf = BytesMut::with_capacity(8 * 1024);
    while let Some(packet) = packets.recv().await {
        packet.encode(version, &mut buf);
        while buf.len() < WRITE_BATCH {
            match packets.try_recv() {
                Ok(packet) => packet.encode(version, &mut buf),
                Err(_) => break,
            }
        }
        tokio::time::timeout(WRITE_TIMEOUT, wr.write_all(&buf))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "write timed out"))??;
        buf.clear();
    }
    let _ = tokio::time::timeout(WRITE_TIMEOUT, wr.shutdown()).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    //! The broker against real clients: `mosquitto_sub`/`mosquitto_pub`
    //! (MQTT 3.1.1 and 5) and `rumqttc`, the client the daemon uses.

    use super::*;
    use rumqttc::{AsyncClient, Event, EventLoop, MqttOptions, Packet, QoS};
    use std::process::Stdio;
    use tokio::io::{AsyncBufReadExt, BufReader, Lines};
    use tokio::process::{Child, ChildStdout, Command};
    use tokio::time::timeout;

    /// Every wait in these tests ends by then.
    const DEADLINE: Duration = Duration::from_secs(15);

    struct Running {
        addr: SocketAddr,
        shutdown: CancellationToken,
        tracker: TaskTracker,
    }

    impl Drop for Running {
        fn drop(&mut self) {
            self.shutdown.cancel();
        }
    }

    async fn running() -> Running {
        let shutdown = CancellationToken::new();
        let tracker = TaskTracker::new();
        let config = BrokerConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            allow_remote: false,
        };
        let addr = start(config, shutdown.clone(), &tracker)
            .await
            .expect("the broker starts");
        assert_ne!(addr.port(), 0);
        Running {
            addr,
            shutdown,
            tracker,
        }
    }

    /// One message as `mosquitto_sub -F 'MSG %q %r %t %p'` prints it.
    #[derive(Debug, PartialEq, Eq)]
    struct Received {
        qos: u8,
        retain: bool,
        topic: String,
        payload: String,
    }

    fn received(qos: u8, retain: bool, topic: &str, payload: &str) -> Received {
        Received {
            qos,
            retain,
            topic: topic.into(),
            payload: payload.into(),
        }
    }

    /// A `mosquitto_sub` whose subscriptions the broker has acknowledged.
    struct Sub {
        child: Child,
        lines: Lines<BufReader<ChildStdout>>,
    }

    impl Sub {
        async fn start(addr: SocketAddr, version: &str, args: &[&str]) -> Sub {
            // mosquitto_sub buffers its debug lines when stdout is a pipe;
            // line buffering lets the SUBACK line through at once.
            let mut child = Command::new("stdbuf")
                .args(["-oL", "mosquitto_sub"])
                .args([
                    "-h",
                    "127.0.0.1",
                    "-p",
                    &addr.port().to_string(),
                    "-V",
                    version,
                ])
                .args(["-d", "-F", "MSG %q %r %t %p"])
                .args(args)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .expect("mosquitto_sub (Debian package mosquitto-clients) runs");
            let stdout = child.stdout.take().expect("piped stdout");
            let mut lines = BufReader::new(stdout).lines();
            timeout(DEADLINE, async {
                while let Some(line) = lines.next_line().await.expect("readable output") {
                    if line.contains("received SUBACK") {
                        return;
                    }
                }
                panic!("mosquitto_sub exited before its SUBACK");
            })
            .await
            .expect("SUBACK within the deadline");
            Sub { child, lines }
        }

        async fn next(&mut self) -> Received {
            timeout(DEADLINE, async {
                while let Some(line) = self.lines.next_line().await.expect("readable output") {
                    let Some(rest) = line.strip_prefix("MSG ") else {
                        continue;
                    };
                    let mut parts = rest.splitn(4, ' ');
                    let mut part = || parts.next().unwrap_or_default().to_owned();
                    return Received {
                        qos: part().parse().expect("a QoS"),
                        retain: part() == "1",
                        topic: part(),
                        payload: part(),
                    };
                }
                panic!("mosquitto_sub exited while a message was awaited");
            })
            .await
            .expect("a message within the deadline")
        }
    }

    async fn mosquitto_pub(addr: SocketAddr, version: &str, args: &[&str]) {
        let status = timeout(
            DEADLINE,
            Command::new("mosquitto_pub")
                .args([
                    "-h",
                    "127.0.0.1",
                    "-p",
                    &addr.port().to_string(),
                    "-V",
                    version,
                ])
                .args(args)
                .stdin(Stdio::null())
                .kill_on_drop(true)
                .status(),
        )
        .await
        .expect("mosquitto_pub within the deadline")
        .expect("mosquitto_pub runs");
        assert!(status.success(), "mosquitto_pub {args:?}: {status}");
    }

    /// A connected `rumqttc` client; the event loop is driven by the
    /// helpers below, with a deadline on every wait.
    async fn rumqttc_client(
        addr: SocketAddr,
        id: &str,
        edit: impl FnOnce(&mut MqttOptions),
    ) -> (AsyncClient, EventLoop) {
        let mut options = MqttOptions::new(id, "127.0.0.1", addr.port());
        options.set_max_packet_size(1 << 20, 1 << 20);
        edit(&mut options);
        let (client, mut events) = AsyncClient::new(options, 16);
        wait_for(&mut events, |p| matches!(p, Packet::ConnAck(_))).await;
        (client, events)
    }

    /// Polls until a packet from the broker satisfies `want`, and returns it.
    async fn wait_for(events: &mut EventLoop, want: impl Fn(&Packet) -> bool) -> Packet {
        timeout(DEADLINE, async {
            loop {
                match events.poll().await {
                    Ok(Event::Incoming(packet)) if want(&packet) => return packet,
                    Ok(_) => {}
                    Err(e) => panic!("rumqttc: {e}"),
                }
            }
        })
        .await
        .expect("the packet within the deadline")
    }

    /// An MQTT 3.1.1 CONNECT, clean session, with an optional Will.
    fn raw_connect(client_id: &str, keep_alive: u16, will: Option<(&str, &str)>) -> Vec<u8> {
        fn string(out: &mut Vec<u8>, s: &str) {
            out.extend_from_slice(&u16::try_from(s.len()).unwrap().to_be_bytes());
            out.extend_from_slice(s.as_bytes());
        }
        let mut body = Vec::new();
        string(&mut body, "MQTT");
        body.push(4);
        body.push(if will.is_some() { 0x06 } else { 0x02 });
        body.extend_from_slice(&keep_alive.to_be_bytes());
        string(&mut body, client_id);
        if let Some((topic, payload)) = will {
            string(&mut body, topic);
            string(&mut body, payload);
        }
        let mut packet = vec![0x10, u8::try_from(body.len()).unwrap()];
        packet.extend_from_slice(&body);
        packet
    }

    /// Reads until the broker closes the connection; returns what it sent.
    async fn read_until_closed(stream: &mut TcpStream) -> Vec<u8> {
        let mut all = Vec::new();
        timeout(DEADLINE, stream.read_to_end(&mut all))
            .await
            .expect("the broker closes the connection within the deadline")
            .expect("a clean close");
        all
    }

    #[tokio::test]
    async fn wildcard_subscriptions_in_3_1_1_and_5() {
        let broker = running().await;
        for version in ["mqttv311", "mqttv5"] {
            let mut sub =
                Sub::start(broker.addr, version, &["-t", "home/+/volume", "-t", "dw/#"]).await;
            for topic in [
                "other/kitchen/volume",
                "home/kitchen/volume",
                "home/kitchen/x/volume",
                "dw/a/b",
            ] {
                mosquitto_pub(broker.addr, version, &["-t", topic, "-m", topic]).await;
            }
            assert_eq!(
                sub.next().await,
                received(0, false, "home/kitchen/volume", "home/kitchen/volume")
            );
            assert_eq!(sub.next().await, received(0, false, "dw/a/b", "dw/a/b"));
        }
    }

    #[tokio::test]
    async fn retained_messages_reach_late_subscribers_and_can_be_cleared() {
        let broker = running().await;
        let addr = broker.addr;
        mosquitto_pub(
            addr,
            "mqttv311",
            &["-t", "dw/kitchen/status", "-m", "online", "-r", "-q", "1"],
        )
        .await;
        for version in ["mqttv311", "mqttv5"] {
            let mut late = Sub::start(addr, version, &["-t", "dw/+/status", "-q", "1"]).await;
            assert_eq!(
                late.next().await,
                received(1, true, "dw/kitchen/status", "online")
            );
        }
        // A retained message with an empty payload clears the topic.
        mosquitto_pub(addr, "mqttv5", &["-t", "dw/kitchen/status", "-n", "-r"]).await;
        let mut later = Sub::start(addr, "mqttv311", &["-t", "dw/#"]).await;
        // Retained messages come right after SUBACK, so a live marker
        // published now arrives first only if nothing was retained.
        mosquitto_pub(addr, "mqttv311", &["-t", "dw/marker", "-m", "live"]).await;
        assert_eq!(later.next().await, received(0, false, "dw/marker", "live"));
    }

    #[tokio::test]
    async fn will_is_published_when_a_client_dies() {
        let broker = running().await;
        for version in ["mqttv311", "mqttv5"] {
            let mut watcher = Sub::start(broker.addr, version, &["-t", "dw/will/#"]).await;
            let topic = format!("dw/will/{version}");
            let mut victim = Sub::start(
                broker.addr,
                version,
                &[
                    "-t",
                    "unused",
                    "--will-topic",
                    &topic,
                    "--will-payload",
                    "gone",
                    "--will-qos",
                    "1",
                ],
            )
            .await;
            victim.child.start_kill().expect("kill mosquitto_sub");
            let _ = victim.child.wait().await;
            assert_eq!(watcher.next().await, received(0, false, &topic, "gone"));
        }
    }

    #[tokio::test]
    async fn qos1_and_a_256_kib_payload_with_rumqttc() {
        let broker = running().await;
        let (subscriber, mut sub_events) = rumqttc_client(broker.addr, "dw-test-sub", |_| {}).await;
        subscriber
            .subscribe("big/#", QoS::AtLeastOnce)
            .await
            .unwrap();
        wait_for(&mut sub_events, |p| matches!(p, Packet::SubAck(_))).await;
        let mut mosquitto = Sub::start(broker.addr, "mqttv5", &["-t", "big/#", "-q", "1"]).await;

        let (publisher, mut pub_events) = rumqttc_client(broker.addr, "dw-test-pub", |_| {}).await;
        let payload: Vec<u8> = (0..256 * 1024).map(|i| b'a' + (i % 26) as u8).collect();
        publisher
            .publish("big/screenshot", QoS::AtLeastOnce, false, payload.clone())
            .await
            .unwrap();
        wait_for(&mut pub_events, |p| matches!(p, Packet::PubAck(_))).await;

        let Packet::Publish(got) =
            wait_for(&mut sub_events, |p| matches!(p, Packet::Publish(_))).await
        else {
            unreachable!()
        };
        assert_eq!(got.qos, QoS::AtLeastOnce);
        assert_eq!(got.topic, "big/screenshot");
        assert_eq!(&got.payload[..], &payload[..]);
        let got = mosquitto.next().await;
        assert_eq!(
            (got.qos, got.topic.as_str(), got.payload.len()),
            (1, "big/screenshot", payload.len())
        );
        assert_eq!(got.payload.as_bytes(), &payload[..]);
    }

    #[tokio::test]
    async fn keep_alive_timeout_closes_the_connection_and_publishes_the_will() {
        let broker = running().await;
        let mut watcher = Sub::start(broker.addr, "mqttv311", &["-t", "dw/will"]).await;
        let mut silent = TcpStream::connect(broker.addr).await.unwrap();
        silent
            .write_all(&raw_connect("silent", 1, Some(("dw/will", "timeout"))))
            .await
            .unwrap();
        let sent = read_until_closed(&mut silent).await;
        assert_eq!(sent, [0x20, 2, 0, 0], "only the CONNACK, then the close");
        assert_eq!(
            watcher.next().await,
            received(0, false, "dw/will", "timeout")
        );
    }

    #[tokio::test]
    async fn oversized_packets_and_garbage_end_the_connection() {
        let broker = running().await;
        let mut client = TcpStream::connect(broker.addr).await.unwrap();
        client
            .write_all(&raw_connect("big", 60, None))
            .await
            .unwrap();
        // A PUBLISH announcing 200 MiB: refused from its header alone.
        client
            .write_all(&[0x30, 0x80, 0x80, 0x80, 0x64])
            .await
            .unwrap();
        assert_eq!(read_until_closed(&mut client).await, [0x20, 2, 0, 0]);

        let mut garbage = TcpStream::connect(broker.addr).await.unwrap();
        garbage.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        assert!(read_until_closed(&mut garbage).await.is_empty());

        let mut future = TcpStream::connect(broker.addr).await.unwrap();
        future
            .write_all(&[0x10, 10, 0, 4, b'M', b'Q', b'T', b'T', 6, 2, 0, 60])
            .await
            .unwrap();
        assert_eq!(
            read_until_closed(&mut future).await,
            codec::unsupported_protocol_connack()
        );
    }

    #[tokio::test]
    async fn a_second_connection_takes_the_session_over() {
        let broker = running().await;
        let (_first, mut first_events) = rumqttc_client(broker.addr, "same-id", |_| {}).await;
        let (_second, _second_events) = rumqttc_client(broker.addr, "same-id", |_| {}).await;
        let ended = timeout(DEADLINE, async {
            loop {
                if first_events.poll().await.is_err() {
                    return;
                }
            }
        })
        .await;
        assert!(ended.is_ok(), "the first connection is closed");
    }

    #[tokio::test]
    async fn shutdown_closes_the_listener_and_the_connections() {
        let broker = running().await;
        let (_client, mut events) = rumqttc_client(broker.addr, "dw-test-shutdown", |_| {}).await;
        let mut v5 = Sub::start(broker.addr, "mqttv5", &["-t", "x"]).await;
        broker.shutdown.cancel();
        broker.tracker.close();
        timeout(DEADLINE, broker.tracker.wait())
            .await
            .expect("every broker task stops");
        assert!(
            TcpStream::connect(broker.addr).await.is_err(),
            "nothing listens any more"
        );
        let closed = timeout(DEADLINE, async {
            loop {
                if events.poll().await.is_err() {
                    return;
                }
            }
        })
        .await;
        assert!(closed.is_ok(), "the client saw the connection close");
        // mosquitto_sub gives up after "server shutting down".
        let status = timeout(DEADLINE, v5.child.wait())
            .await
            .expect("mosquitto_sub exits");
        assert!(status.is_ok());
    }

    #[tokio::test]
    async fn refuses_addresses_beyond_loopback_unless_allowed() {
        let tracker = TaskTracker::new();
        let shutdown = CancellationToken::new();
        for listen in ["0.0.0.0:0", "[::]:0", "192.0.2.1:1883"] {
            let config = BrokerConfig {
                listen: listen.parse().unwrap(),
                allow_remote: false,
            };
            let refused = start(config, shutdown.clone(), &tracker).await;
            assert!(
                matches!(refused, Err(BrokerError::RemoteNotAllowed { .. })),
                "{listen}"
            );
        }
        // Loopback in every spelling is fine.
        for listen in ["127.0.0.1:0", "[::ffff:127.0.0.1]:0"] {
            let config = BrokerConfig {
                listen: listen.parse().unwrap(),
                allow_remote: false,
            };
            let (Err(BrokerError::Bind { .. }) | Ok(_)) =
                start(config, shutdown.clone(), &tracker).await
            else {
                panic!("{listen} refused as remote");
            };
        }
        // With allow_remote, the address is used (192.0.2.1 is not ours).
        let config = BrokerConfig {
            listen: "192.0.2.1:0".parse().unwrap(),
            allow_remote: true,
        };
        let not_ours = start(config, shutdown.clone(), &tracker).await;
        assert!(matches!(not_ours, Err(BrokerError::Bind { .. })));
        shutdown.cancel();
        tracker.close();
        timeout(DEADLINE, tracker.wait()).await.expect("stopped");
    }
}
