//! The embedded MQTT broker's driver: sockets and tasks around the
//! `droidwarden-broker` state machine (see docs/embedded-broker.md).
//!
//! With no `[mqtt] url`, `droidwarden daemon` starts this broker so that it
//! works on a machine with nothing else installed. Clients log in with a
//! user from `<state dir>/mqtt-users.json` ([`crate::mqtt_users`]), whose
//! role the state machine enforces on every publish, subscription and
//! delivery (`droidwarden_broker::access`); `[broker] anonymous = true`
//! turns that off. The broker has no TLS and keeps nothing on disk, so it
//! listens on loopback unless the configuration explicitly allows
//! otherwise.
//!
//! Passwords are checked here, in the connection's task, before the
//! CONNECT reaches the state machine (with the verdict): PBKDF2 runs on the
//! blocking pool, one at a time, successes are cached, and a source that
//! keeps failing for a user is refused for a growing while (see
//! [`crate::mqtt_users`]). Before CONNECT, a connection may send at most
//! [`PRE_CONNECT_MAX_PACKET`] bytes, and at most [`MAX_PENDING_CONNECTS`]
//! connections may be waiting for their CONNECT at once: a new one then
//! takes the place of the oldest still sending its CONNECT, and under
//! pressure the CONNECT deadline shrinks, so that idle sockets cannot keep
//! real clients out.
//!
//! Flow control is the state machine's ([`Action::Pause`]): the driver
//! stops reading a paused connection's socket (TCP then slows the client
//! down) until it is told to resume. Drops and refusals the machine reports
//! are logged here at `warn`, rate-limited, and drops are counted for
//! metrics ([`BrokerStats`]).
//!
//! Shape: one accept task; one task per connection, which decodes packets
//! and writes what it is sent; and one router task that owns the
//! [`Broker`] state machine and is the only one to touch sessions. Every
//! task is spawned through the daemon's [`TaskTracker`] and stops on the
//! shutdown token: the listener closes at once, clients are disconnected
//! (MQTT 5 clients are told "server shutting down").

use crate::mqtt_users::Users;
use droidwarden_broker::codec::{self, ClientPacket, Connect, DecodeError, ProtocolVersion};
use droidwarden_broker::{
    Action, Broker, BytesMut, ConnId, Denied, Dropped, Input, Limits, Login, LossCause, Operation,
    Policy, Refusal, ServerPacket,
};
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The default listen address: loopback, the standard MQTT port.
pub(crate) const DEFAULT_LISTEN: SocketAddr =
    SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 1883);

/// How long a new TCP connection has to send CONNECT.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The same when half the places for connections waiting for CONNECT are
/// taken: a real client sends its CONNECT within milliseconds, so only
/// idle sockets feel it.
const CONNECT_TIMEOUT_UNDER_PRESSURE: Duration = Duration::from_secs(2);
/// The largest first packet (CONNECT) accepted. A CONNECT holds a client
/// id, credentials and a Will: a few hundred bytes in practice. A client
/// announcing more is dropped from the fixed header, so an unauthenticated
/// connection never makes the broker hold more than this.
pub(crate) const PRE_CONNECT_MAX_PACKET: usize = 64 * 1024;
/// Connections that have not completed CONNECT (and the password check)
/// at one time. With [`PRE_CONNECT_MAX_PACKET`] this bounds what strangers
/// can make the broker hold to 4 MiB. When all are taken, a new connection
/// takes the place of the oldest one still sending its CONNECT (never of
/// one whose password is being checked); only when every place is in a
/// password check is the new one closed.
pub(crate) const MAX_PENDING_CONNECTS: usize = 64;
/// At most one warning per kind of refusal or drop and account in this
/// time; the next one says how many were left out.
const WARN_EVERY: Duration = Duration::from_secs(60);
/// Distinct keys the warning limiter remembers (a bound on its memory).
const WARN_KEYS: usize = 1024;
/// How long one write to a client may take before it counts as gone.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a connection that ended on the reading side may still flush
/// what the broker queued for it (such as a DISCONNECT with a reason).
const DRAIN_TIMEOUT: Duration = Duration::from_secs(2);
/// How often the state machine is told that time passed (delayed wills,
/// session expiry): their unit is the second.
const TICK: Duration = Duration::from_secs(1);
/// At shutdown, how long the router keeps routing what clients sent just
/// before, at most, and how long the connections may stay quiet before it
/// stops early.
const SHUTDOWN_DRAIN: Duration = Duration::from_millis(500);
const SHUTDOWN_QUIET: Duration = Duration::from_millis(50);
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

/// Where and how the embedded broker listens, and who may do what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BrokerConfig {
    /// Address to listen on; port 0 picks a free port.
    pub(crate) listen: SocketAddr,
    /// Allow an address other than loopback. The broker has no TLS, so
    /// passwords and commands would cross the network in clear.
    pub(crate) allow_remote: bool,
    /// Topic prefixes and whether anonymous clients are let in.
    pub(crate) policy: Policy,
    /// The user file (`<state dir>/mqtt-users.json`); unused with
    /// anonymous access.
    pub(crate) users_file: Option<PathBuf>,
}

impl Default for BrokerConfig {
    /// Loopback, port 1883, authentication required, no users yet.
    fn default() -> Self {
        BrokerConfig {
            listen: DEFAULT_LISTEN,
            allow_remote: false,
            policy: Policy {
                anonymous: false,
                ..Policy::open()
            },
            users_file: None,
        }
    }
}

/// Why the broker did not start.
#[derive(Debug)]
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
    /// The user file could not be read.
    Users(anyhow::Error),
}

impl fmt::Display for BrokerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BrokerError::RemoteNotAllowed { listen } => write!(
                f,
                "the embedded broker has no TLS and listens on loopback only; \
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
            BrokerError::Users(e) => write!(f, "cannot read the MQTT user file: {e:#}"),
        }
    }
}

impl std::error::Error for BrokerError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BrokerError::Bind { source, .. } => Some(source),
            BrokerError::RemoteNotAllowed { .. } | BrokerError::Users(_) => None,
        }
    }
}

/// A started broker.
#[derive(Debug)]
pub(crate) struct Started {
    /// The bound address (the real port when port 0 was asked for).
    pub(crate) addr: SocketAddr,
    /// Reloads the user file (SIGHUP); `None` with anonymous access.
    pub(crate) users: Option<UsersHandle>,
    /// The broker's counters (connected clients, dropped messages), for
    /// metrics.
    pub(crate) clients: Arc<BrokerStats>,
}

/// What the embedded broker counts, read by the metrics task.
#[derive(Debug, Default)]
pub(crate) struct BrokerStats {
    /// Clients connected now.
    pub(crate) clients: AtomicUsize,
    /// QoS 1/2 messages a subscriber's session could not take (its client
    /// away with a full queue, or a full hard bound), since start.
    pub(crate) dropped_messages: AtomicU64,
}

/// Binds the listener and starts the broker's tasks on `tracker`. Returns
/// the bound address once the broker accepts connections. It runs until
/// `shutdown` is cancelled; the listener closes at once and
/// `tracker.wait()` returns once every broker task has stopped.
///
/// # Errors
///
/// [`BrokerError::RemoteNotAllowed`] for a non-loopback address without
/// `allow_remote`; [`BrokerError::Bind`] when the address cannot be bound;
/// [`BrokerError::Users`] when the user file exists but cannot be read.
pub(crate) async fn start(
    config: BrokerConfig,
    shutdown: CancellationToken,
    tracker: &TaskTracker,
) -> Result<Started, BrokerError> {
    let listen = config.listen;
    if !listen.ip().to_canonical().is_loopback() {
        if !config.allow_remote {
            return Err(BrokerError::RemoteNotAllowed { listen });
        }
        tracing::warn!(
            %listen,
            "the embedded MQTT broker listens beyond loopback; it has no TLS, so \
             passwords and commands cross the network in clear"
        );
    }
    let users = if config.policy.anonymous {
        tracing::warn!(
            "the embedded MQTT broker lets clients in without credentials ([broker] anonymous = true): \
             any local process can drive the phones and approve the agent's actions"
        );
        None
    } else {
        let file = config.users_file.clone().unwrap_or_default();
        let users = tokio::task::spawn_blocking(move || Users::open(file))
            .await
            .map_err(|e| BrokerError::Users(e.into()))?
            .map_err(BrokerError::Users)?;
        Some(Arc::new(users))
    };
    let listener = TcpListener::bind(listen)
        .await
        .map_err(|source| BrokerError::Bind { listen, source })?;
    let local_addr = listener
        .local_addr()
        .map_err(|source| BrokerError::Bind { listen, source })?;
    let limits = Limits::default();
    let (inputs, inputs_rx) = mpsc::channel(INPUT_CAPACITY);
    let clients = Arc::new(BrokerStats::default());
    tracker.spawn(route(
        inputs_rx,
        limits.clone(),
        config.policy,
        Arc::clone(&clients),
        shutdown.clone(),
    ));
    let handle = users.as_ref().map(|users| UsersHandle {
        users: Arc::clone(users),
        router: inputs.clone(),
    });
    tracker.spawn(accept(
        listener,
        inputs,
        limits,
        users,
        tracker.clone(),
        shutdown,
    ));
    Ok(Started {
        addr: local_addr,
        users: handle,
        clients,
    })
}

/// Reloads the embedded broker's user file on demand (SIGHUP).
#[derive(Debug, Clone)]
pub(crate) struct UsersHandle {
    users: Arc<Users>,
    router: mpsc::Sender<RouterMsg>,
}

impl UsersHandle {
    /// Reads the user file again if it changed; removed or changed users
    /// are disconnected. Called from the daemon's main loop, so bounded by
    /// [`RELOAD_TIMEOUT`]: a file system that hangs is logged and the
    /// change waits for the next connection attempt.
    pub(crate) async fn reload(&self) {
        let users = Arc::clone(&self.users);
        let refresh = tokio::task::spawn_blocking(move || users.refresh());
        match tokio::time::timeout(RELOAD_TIMEOUT, refresh).await {
            Ok(changed) => revoke(&self.router, changed.unwrap_or_default()).await,
            Err(_) => tracing::warn!(
                "the MQTT user file was not read within {RELOAD_TIMEOUT:?}; \
                 changes apply at the next connection"
            ),
        }
    }
}

/// How long a SIGHUP waits for the user file, and anyone for the router to
/// take a revocation.
const RELOAD_TIMEOUT: Duration = Duration::from_secs(5);

/// Tells the router to disconnect `users`, if any (bounded: the router
/// takes one message at a time and never waits itself).
async fn revoke(router: &mpsc::Sender<RouterMsg>, users: Vec<String>) {
    if !users.is_empty() {
        tracing::info!(?users, "MQTT users removed or changed: disconnecting them");
        let revoke = router.send(RouterMsg::Input(Input::Revoke { users }));
        if tokio::time::timeout(RELOAD_TIMEOUT, revoke).await.is_err() {
            tracing::warn!("the embedded broker did not take the revocation in time");
        }
    }
}

/// What connection tasks tell the router.
#[derive(Debug)]
enum RouterMsg {
    /// A connection sent CONNECT; `login` is who its credentials say it
    /// is, `out` where its packets go.
    Connect {
        conn: ConnId,
        connect: Box<Connect>,
        login: Login,
        out: mpsc::Sender<ServerPacket>,
        /// Set while the router wants its reader to stop (flow control).
        paused: watch::Sender<bool>,
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
    users: Option<Arc<Users>>,
    tracker: TaskTracker,
    shutdown: CancellationToken,
) {
    let waiting = Arc::new(Waiting::default());
    let mut next_conn: ConnId = 0;
    loop {
        let accepted = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, peer)) => {
                next_conn += 1;
                let (place, connect_timeout) = Waiting::admit(&waiting, next_conn);
                let conn = Conn {
                    id: next_conn,
                    peer,
                    router: inputs.clone(),
                    limits: limits.clone(),
                    users: users.clone(),
                    place,
                    connect_timeout,
                };
                tracker.spawn(connection(stream, conn, shutdown.clone()));
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

/// The connections reading their CONNECT, oldest first, and the places
/// for password checks ([`MAX_PENDING_CONNECTS`] each).
#[derive(Debug)]
struct Waiting {
    reading: Mutex<VecDeque<(ConnId, CancellationToken)>>,
    checks: Arc<Semaphore>,
}

impl Default for Waiting {
    fn default() -> Self {
        Waiting {
            reading: Mutex::new(VecDeque::new()),
            checks: Arc::new(Semaphore::new(MAX_PENDING_CONNECTS)),
        }
    }
}

impl Waiting {
    /// A place for connection `id` and its CONNECT deadline. With every
    /// place taken, the oldest connection still reading its CONNECT is
    /// evicted for it: a real client sends its CONNECT at once and has
    /// moved on by then.
    fn admit(this: &Arc<Waiting>, id: ConnId) -> (WaitingPlace, Duration) {
        let mut reading = this.reading.lock().unwrap_or_else(|e| e.into_inner());
        if reading.len() >= MAX_PENDING_CONNECTS
            && let Some((evicted, evict)) = reading.pop_front()
        {
            tracing::debug!(
                conn = evicted,
                "the oldest connection waiting for its CONNECT makes room for a new one"
            );
            evict.cancel();
        }
        let deadline = if reading.len() >= MAX_PENDING_CONNECTS / 2 {
            CONNECT_TIMEOUT_UNDER_PRESSURE
        } else {
            CONNECT_TIMEOUT
        };
        let evict = CancellationToken::new();
        reading.push_back((id, evict.clone()));
        let place = WaitingPlace {
            waiting: Arc::clone(this),
            id,
            evict,
        };
        (place, deadline)
    }
}

/// A connection's place among the [`Waiting`] ones, given back when
/// dropped.
#[derive(Debug)]
struct WaitingPlace {
    waiting: Arc<Waiting>,
    id: ConnId,
    /// Cancelled when a newer connection took this place.
    evict: CancellationToken,
}

impl WaitingPlace {
    /// Waits for a place among the password checks (still evictable
    /// meanwhile), then leaves the readers: its check is not cut short.
    async fn check(&self) -> Option<OwnedSemaphorePermit> {
        let permit = Arc::clone(&self.waiting.checks)
            .acquire_owned()
            .await
            .ok()?;
        self.leave();
        Some(permit)
    }

    fn leave(&self) {
        let mut reading = self
            .waiting
            .reading
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        reading.retain(|(id, _)| *id != self.id);
    }
}

impl Drop for WaitingPlace {
    fn drop(&mut self) {
        self.leave();
    }
}

/// A connected client's queues, as the router holds them.
#[derive(Debug)]
struct Outlet {
    /// Packets for its writer.
    packets: mpsc::Sender<ServerPacket>,
    /// Whether its reader must stop reading (flow control).
    paused: watch::Sender<bool>,
}

/// The router: the only owner of the broker state.
async fn route(
    mut inputs: mpsc::Receiver<RouterMsg>,
    limits: Limits,
    policy: Policy,
    stats: Arc<BrokerStats>,
    shutdown: CancellationToken,
) {
    let mut router = Router {
        broker: Broker::new(limits, policy.clone()),
        policy,
        outputs: HashMap::new(),
        warnings: WarnLimiter::default(),
        stats,
    };
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let input = tokio::select! {
            biased;
            () = shutdown.cancelled() => break,
            msg = inputs.recv() => match msg {
                Some(msg) => router.input(msg),
                None => break,
            },
            _ = tick.tick() => Input::Tick,
        };
        router.step(input);
    }
    // What clients sent just before the stop still counts: the daemon's own
    // goodbye (`offline`, then DISCONNECT) is sent right before the broker
    // is told to stop, and subscribers must see it. Route what arrives until
    // the connections fall quiet, briefly.
    let drain_end = tokio::time::Instant::now() + SHUTDOWN_DRAIN;
    while let Ok(Ok(Some(msg))) = tokio::time::timeout_at(
        drain_end,
        tokio::time::timeout(SHUTDOWN_QUIET, inputs.recv()),
    )
    .await
    {
        let input = router.input(msg);
        router.step(input);
    }
    let actions = router.broker.shutdown();
    router.perform(actions);
    // Dropping the senders lets every writer flush and close its socket.
    router.outputs.clear();
}

/// The router's state: the machine, the connections' queues, and what the
/// log and the metrics are told.
#[derive(Debug)]
struct Router {
    broker: Broker,
    /// For the log lines of refusals: who would have been allowed.
    policy: Policy,
    outputs: HashMap<ConnId, Outlet>,
    warnings: WarnLimiter,
    stats: Arc<BrokerStats>,
}

impl Router {
    /// The machine's input for a router message; a connecting client's
    /// queues are registered first.
    fn input(&mut self, msg: RouterMsg) -> Input {
        match msg {
            RouterMsg::Connect {
                conn,
                connect,
                login,
                out,
                paused,
            } => {
                tracing::debug!(
                    conn,
                    client_id = %connect.client_id,
                    user = connect.username.as_deref().unwrap_or(""),
                    version = ?connect.version,
                    "MQTT client connecting"
                );
                self.outputs.insert(
                    conn,
                    Outlet {
                        packets: out,
                        paused,
                    },
                );
                Input::Connect {
                    conn,
                    connect,
                    login,
                }
            }
            RouterMsg::Input(input) => input,
        }
    }

    fn step(&mut self, input: Input) {
        let actions = self.broker.step(Instant::now(), input);
        self.perform(actions);
        self.stats
            .clients
            .store(self.broker.connection_count(), Ordering::Relaxed);
    }

    /// Performs the state machine's actions. Sending never waits: a client
    /// whose queue is full is disconnected as a slow consumer, which is fed
    /// back to the machine (its Will is published).
    fn perform(&mut self, actions: Vec<Action>) {
        let mut pending = VecDeque::from(actions);
        while let Some(action) = pending.pop_front() {
            match action {
                Action::Send { conn, packet } => {
                    let Some(out) = self.outputs.get(&conn) else {
                        continue;
                    };
                    let cause = match out.packets.try_send(packet) {
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
                    self.outputs.remove(&conn);
                    pending.extend(
                        self.broker
                            .step(Instant::now(), Input::Lost { conn, cause }),
                    );
                }
                Action::Close { conn } => {
                    self.outputs.remove(&conn);
                }
                Action::Pause { conn } | Action::Resume { conn } => {
                    let pause = matches!(action, Action::Pause { .. });
                    if let Some(out) = self.outputs.get(&conn) {
                        tracing::debug!(conn, pause, "MQTT flow control");
                        out.paused.send_replace(pause);
                    }
                }
                Action::Stuck {
                    conn,
                    client_id,
                    user,
                    queued,
                } => tracing::warn!(
                    conn,
                    %client_id,
                    user = user.as_deref().unwrap_or("(anonymous)"),
                    queued,
                    "MQTT client held publishers back and acknowledged nothing for {}s; \
                     disconnecting it as a slow consumer",
                    self.broker.limits().max_stall_secs
                ),
                Action::Denied(denied) => self.denied(denied),
                Action::Dropped(dropped) => self.dropped(dropped),
            }
        }
    }

    /// Logs a refusal: at `warn`, rate-limited per account and kind, with
    /// what would have allowed it; failed logins at debug (the login
    /// back-off warns, `mqtt_users`).
    fn denied(&mut self, d: Denied) {
        let Denied {
            conn,
            client_id,
            user,
            operation,
            topic,
            refusal,
        } = d;
        let user = user.as_deref().unwrap_or("(anonymous)");
        if operation == Operation::Connect {
            tracing::debug!(conn, %client_id, user, ?refusal, "MQTT login refused");
            return;
        }
        // One line per account and topic refused; a client over its
        // filter cap is told once whatever the filters.
        let key = match refusal {
            Refusal::TooManySubscriptions => format!("{user}\u{0}{refusal:?}"),
            _ => format!("{user}\u{0}{operation:?}\u{0}{refusal:?}\u{0}{topic}"),
        };
        let Some(left_out) = self.warnings.allow(key, Instant::now()) else {
            return;
        };
        match refusal {
            Refusal::TooManySubscriptions => tracing::warn!(
                conn,
                %client_id,
                user,
                filter = %topic,
                limit = self.broker.limits().max_subscriptions,
                left_out,
                "MQTT subscription refused: the client holds the most filters one client may"
            ),
            Refusal::NotAuthorized | Refusal::Throttled => {
                let allowed = match operation {
                    Operation::Subscribe => self.policy.who_may_subscribe(&topic),
                    _ => self.policy.who_may_publish(&topic),
                };
                tracing::warn!(
                    conn,
                    %client_id,
                    user,
                    operation = ?operation,
                    %topic,
                    %allowed,
                    left_out,
                    "MQTT client not authorized: the account's role does not allow this; \
                     `allowed` says which role would (droidwarden mqtt-user, docs/mqtt-access.md)"
                );
            }
        }
    }

    /// Counts a dropped message, and logs it at `warn`, rate-limited per
    /// subscriber.
    fn dropped(&mut self, d: Dropped) {
        self.stats.dropped_messages.fetch_add(1, Ordering::Relaxed);
        let key = format!("dropped\u{0}{}", d.client_id);
        let Some(left_out) = self.warnings.allow(key, Instant::now()) else {
            return;
        };
        let limits = self.broker.limits();
        tracing::warn!(
            client_id = %d.client_id,
            user = d.user.as_deref().unwrap_or("(anonymous)"),
            topic = %d.topic,
            connected = d.connected,
            limit = if d.connected { limits.max_queued_connected } else { limits.max_queued },
            left_out,
            "MQTT message dropped for a subscriber whose queue is full \
             (MQTT 5 publishers were told \"quota exceeded\")"
        );
    }
}

/// At most one warning per key per [`WARN_EVERY`]: log floods from a
/// misbehaving client cannot drown the rest of the log.
#[derive(Debug, Default)]
struct WarnLimiter {
    /// When each key last logged, and how many were left out since.
    last: HashMap<String, (Instant, u64)>,
}

impl WarnLimiter {
    /// `Some(left out since the last one)` when a warning for `key` may be
    /// logged now; `None` to leave it out.
    fn allow(&mut self, key: String, now: Instant) -> Option<u64> {
        if self.last.len() >= WARN_KEYS && !self.last.contains_key(&key) {
            self.last
                .retain(|_, (at, _)| now.duration_since(*at) < WARN_EVERY);
            if self.last.len() >= WARN_KEYS {
                // Too many distinct keys at once: this one is left out
                // rather than memory grow.
                return None;
            }
        }
        match self.last.get_mut(&key) {
            Some((at, left_out)) if now.duration_since(*at) < WARN_EVERY => {
                *left_out += 1;
                None
            }
            Some((at, left_out)) => {
                *at = now;
                Some(std::mem::take(left_out))
            }
            None => {
                self.last.insert(key, (now, 0));
                Some(0)
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

/// What a connection task needs besides its socket.
#[derive(Debug)]
struct Conn {
    id: ConnId,
    peer: SocketAddr,
    router: mpsc::Sender<RouterMsg>,
    limits: Limits,
    /// `None`: anonymous access, credentials are not looked at.
    users: Option<Arc<Users>>,
    /// A place among the connections waiting for CONNECT, given back once
    /// the CONNECT has been read and checked.
    place: WaitingPlace,
    /// How long it has to send its CONNECT.
    connect_timeout: Duration,
}

/// One client connection, from TCP accept to close.
async fn connection(stream: TcpStream, c: Conn, shutdown: CancellationToken) {
    let Conn {
        id: conn,
        peer,
        router,
        limits,
        users,
        place,
        connect_timeout,
    } = c;
    // MQTT packets are small and latency matters more than batching here.
    let _ = stream.set_nodelay(true);
    let (mut rd, mut wr) = stream.into_split();
    let max_packet_size = limits.max_packet_size as usize;
    let mut buf = BytesMut::with_capacity(4096);
    let first_max = PRE_CONNECT_MAX_PACKET.min(max_packet_size);
    let first = tokio::select! {
        () = shutdown.cancelled() => return,
        () = place.evict.cancelled() => return,
        first = read_packet_within(&mut rd, &mut buf, None, first_max, Some(connect_timeout)) => first,
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
    let login = match &users {
        None => Login::Anonymous,
        Some(users) => {
            // A place among the password checks; until it comes, a newer
            // connection may still take this one's place.
            let permit = tokio::select! {
                () = shutdown.cancelled() => return,
                () = place.evict.cancelled() => return,
                permit = tokio::time::timeout(connect_timeout, place.check()) => permit,
            };
            let Ok(Some(_permit)) = permit else {
                tracing::debug!(conn, %peer, "no place for a password check in time; closing");
                return;
            };
            let check = users.login(
                peer.ip(),
                connect.username.clone(),
                connect.password.clone(),
            );
            let checked = tokio::select! {
                () = shutdown.cancelled() => return,
                checked = tokio::time::timeout(CONNECT_TIMEOUT, check) => checked,
            };
            let Ok((login, changed)) = checked else {
                tracing::debug!(conn, %peer, "password check did not finish in time; closing");
                return;
            };
            revoke(&router, changed).await;
            login
        }
    };
    drop(place);
    let (out, out_rx) = mpsc::channel(output_capacity(&limits));
    let (paused, mut paused_rx) = watch::channel(false);
    if router
        .send(RouterMsg::Connect {
            conn,
            connect,
            login,
            out,
            paused,
        })
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
                // Flow control: not a packet more while paused, and TCP
                // slows the client down. No keep-alive runs meanwhile: it is
                // the broker that waits, not the client.
                if paused_rx.wait_for(|paused| !*paused).await.is_err() {
                    return None;
                }
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

    /// A broker on a free loopback port with anonymous access.
    async fn running() -> Running {
        running_with(config("127.0.0.1:0", false)).await
    }

    fn config(listen: &str, allow_remote: bool) -> BrokerConfig {
        BrokerConfig {
            listen: listen.parse().unwrap(),
            allow_remote,
            policy: Policy::open(),
            users_file: None,
        }
    }

    async fn running_with(config: BrokerConfig) -> Running {
        let shutdown = CancellationToken::new();
        let tracker = TaskTracker::new();
        let addr = start(config, shutdown.clone(), &tracker)
            .await
            .expect("the broker starts")
            .addr;
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
                .args(to_broker(addr, version))
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

    /// The mosquitto client arguments that reach the broker at `addr`
    /// with protocol `version` (`mqttv311`, `mqttv5`).
    fn to_broker(addr: SocketAddr, version: &str) -> [String; 6] {
        [
            "-h".into(),
            "127.0.0.1".into(),
            "-p".into(),
            addr.port().to_string(),
            "-V".into(),
            version.into(),
        ]
    }

    /// `mosquitto_pub` with `args` to the broker at `addr`, expected to
    /// succeed.
    async fn mosquitto_pub(addr: SocketAddr, version: &str, args: &[&str]) {
        let status = mosquitto_pub_output(addr, version, args).await.status;
        assert!(status.success(), "mosquitto_pub {args:?}: {status}");
    }

    /// How `mosquitto_pub` with `args` to the broker at `addr` ended, and
    /// what it said.
    async fn mosquitto_pub_output(
        addr: SocketAddr,
        version: &str,
        args: &[&str],
    ) -> std::process::Output {
        timeout(
            DEADLINE,
            Command::new("mosquitto_pub")
                .args(to_broker(addr, version))
                .args(args)
                .stdin(Stdio::null())
                .kill_on_drop(true)
                .output(),
        )
        .await
        .expect("mosquitto_pub within the deadline")
        .expect("mosquitto_pub runs")
    }

    /// Whether the connection of `events` closes within `limit`.
    async fn closed_within(limit: Duration, events: &mut rumqttc::EventLoop) -> bool {
        timeout(limit, async { while events.poll().await.is_ok() {} })
            .await
            .is_ok()
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

    /// The CONNACK a fresh connection gets for user "ha" with password "pw".
    async fn good_login_connack(addr: SocketAddr) -> [u8; 4] {
        let mut ok = TcpStream::connect(addr).await.unwrap();
        ok.write_all(&raw_connect_as("ok", 60, None, Some(("ha", "pw"))))
            .await
            .unwrap();
        let mut connack = [0u8; 4];
        timeout(DEADLINE, ok.read_exact(&mut connack))
            .await
            .expect("a CONNACK within the deadline")
            .expect("a CONNACK, not a close");
        connack
    }

    /// An MQTT 3.1.1 CONNECT, clean session, with an optional Will.
    fn raw_connect(client_id: &str, keep_alive: u16, will: Option<(&str, &str)>) -> Vec<u8> {
        raw_connect_as(client_id, keep_alive, will, None)
    }

    /// [`raw_connect`] with a user name and password.
    fn raw_connect_as(
        client_id: &str,
        keep_alive: u16,
        will: Option<(&str, &str)>,
        login: Option<(&str, &str)>,
    ) -> Vec<u8> {
        fn string(out: &mut Vec<u8>, s: &str) {
            out.extend_from_slice(&u16::try_from(s.len()).unwrap().to_be_bytes());
            out.extend_from_slice(s.as_bytes());
        }
        let mut body = Vec::new();
        string(&mut body, "MQTT");
        body.push(4);
        let mut flags = if will.is_some() { 0x06 } else { 0x02 };
        if login.is_some() {
            flags |= 0xC0;
        }
        body.push(flags);
        body.extend_from_slice(&keep_alive.to_be_bytes());
        string(&mut body, client_id);
        if let Some((topic, payload)) = will {
            string(&mut body, topic);
            string(&mut body, payload);
        }
        if let Some((user, password)) = login {
            string(&mut body, user);
            string(&mut body, password);
        }
        let mut packet = vec![0x10, u8::try_from(body.len()).unwrap()];
        packet.extend_from_slice(&body);
        packet
    }

    /// Reads until the broker closes the connection; returns what it sent.
    async fn read_until_closed(stream: &mut TcpStream) -> Vec<u8> {
        read_until_closed_within(DEADLINE, stream).await
    }

    /// All the broker sends on `stream` until it closes the connection,
    /// which it must do within `limit`.
    async fn read_until_closed_within(limit: Duration, stream: &mut TcpStream) -> Vec<u8> {
        let mut all = Vec::new();
        timeout(limit, stream.read_to_end(&mut all))
            .await
            .expect("the broker closes the connection within the limit")
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
        let ended = closed_within(DEADLINE, &mut first_events).await;
        assert!(ended, "the first connection is closed");
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
        let closed = closed_within(DEADLINE, &mut events).await;
        assert!(closed, "the client saw the connection close");
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
            let config = config(listen, false);
            let refused = start(config, shutdown.clone(), &tracker).await;
            assert!(
                matches!(refused, Err(BrokerError::RemoteNotAllowed { .. })),
                "{listen}"
            );
        }
        // Loopback in every spelling is fine.
        for listen in ["127.0.0.1:0", "[::ffff:127.0.0.1]:0"] {
            let config = config(listen, false);
            let (Err(BrokerError::Bind { .. }) | Ok(_)) =
                start(config, shutdown.clone(), &tracker).await
            else {
                panic!("{listen} refused as remote");
            };
        }
        // With allow_remote, the address is used (192.0.2.1 is not ours).
        let config = config("192.0.2.1:0", true);
        let not_ours = start(config, shutdown.clone(), &tracker).await;
        assert!(matches!(not_ours, Err(BrokerError::Bind { .. })));
        shutdown.cancel();
        tracker.close();
        timeout(DEADLINE, tracker.wait()).await.expect("stopped");
    }

    /// A broker that requires credentials, with users `admin` (admin),
    /// `ha` (automation) and `alice` (phone), all with password `pw`.
    async fn authenticated() -> (Running, tempfile::TempDir) {
        use crate::mqtt_users::{RoleName, UserDb, UserRecord, hash_password};
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("mqtt-users.json");
        let mut db = UserDb::default();
        for (name, role) in [
            ("admin", RoleName::Admin),
            ("ha", RoleName::Automation),
            ("alice", RoleName::Phone),
        ] {
            db.insert(UserRecord {
                name: name.into(),
                role,
                companion_id: (role == RoleName::Phone).then(|| name.into()),
                grants: Vec::new(),
                password: hash_password(b"pw").unwrap(),
            });
        }
        db.save(&file).unwrap();
        let mut config = config("127.0.0.1:0", false);
        config.policy.anonymous = false;
        config.users_file = Some(file);
        (running_with(config).await, dir)
    }

    #[tokio::test]
    async fn connect_needs_valid_credentials() {
        let (broker, _dir) = authenticated().await;
        for (login, connack) in [
            (None, [0x20, 2, 0, 5]),
            (Some(("admin", "wrong")), [0x20, 2, 0, 4]),
            (Some(("nobody", "pw")), [0x20, 2, 0, 4]),
        ] {
            let mut client = TcpStream::connect(broker.addr).await.unwrap();
            client
                .write_all(&raw_connect_as("x", 60, None, login))
                .await
                .unwrap();
            assert_eq!(read_until_closed(&mut client).await, connack, "{login:?}");
        }
        // MQTT 5 clients get MQTT 5 reason codes.
        let refused = mosquitto_pub_output(
            broker.addr,
            "mqttv5",
            &["-u", "ha", "-P", "wrong", "-t", "x", "-m", "y"],
        )
        .await;
        assert!(!refused.status.success());
        let stderr = String::from_utf8_lossy(&refused.stderr).to_lowercase();
        assert!(stderr.contains("bad user name or password"), "{stderr}");
        // The right password gets in, also the second time (cached).
        for _ in 0..2 {
            assert_eq!(good_login_connack(broker.addr).await, [0x20, 2, 0, 0]);
        }
    }

    #[tokio::test]
    async fn wildcard_subscribers_only_receive_what_their_role_may_read() {
        let (broker, _dir) = authenticated().await;
        let login = |user: &'static str| ["-u", user, "-P", "pw"];
        let mut ha = Sub::start(
            broker.addr,
            "mqttv5",
            &[&login("ha")[..], &["-t", "#"]].concat(),
        )
        .await;
        let mut phone = Sub::start(
            broker.addr,
            "mqttv311",
            &[
                &login("alice")[..],
                &["-t", "droidwarden/companion/+/request"],
            ]
            .concat(),
        )
        .await;
        let admin = login("admin");
        for topic in [
            "droidwarden/companion/bob/request",
            "droidwarden/companion/alice/request",
            "droidwarden/availability",
        ] {
            mosquitto_pub(
                broker.addr,
                "mqttv5",
                &[&admin[..], &["-t", topic, "-m", topic]].concat(),
            )
            .await;
        }
        assert_eq!(
            phone.next().await,
            received(
                0,
                false,
                "droidwarden/companion/alice/request",
                "droidwarden/companion/alice/request"
            )
        );
        assert_eq!(
            ha.next().await,
            received(
                0,
                false,
                "droidwarden/availability",
                "droidwarden/availability"
            )
        );
    }

    /// The broker closes these at once; the bound only keeps a broken
    /// broker from passing after its 10 s CONNECT timeout.
    const CUT_OFF: Duration = Duration::from_secs(5);

    #[tokio::test]
    async fn a_large_first_packet_is_refused_from_its_header() {
        let broker = running().await;
        let mut client = TcpStream::connect(broker.addr).await.unwrap();
        // A CONNECT announcing 1 MiB: more than any CONNECT needs.
        client.write_all(&[0x10, 0x80, 0x80, 0x40]).await.unwrap();
        assert!(
            read_until_closed_within(CUT_OFF, &mut client)
                .await
                .is_empty()
        );
        // 1 MiB of bytes streamed at it: cut off, not buffered.
        let flood = TcpStream::connect(broker.addr).await.unwrap();
        let (mut rd, mut wr) = flood.into_split();
        let writer = tokio::spawn(async move {
            let mut chunk = vec![0x55u8; 16 * 1024];
            chunk[..4].copy_from_slice(&[0x10, 0xFF, 0xFF, 0x3F]);
            for _ in 0..64 {
                if wr.write_all(&chunk).await.is_err() {
                    return;
                }
                chunk[..4].fill(0x55);
            }
        });
        let mut rest = Vec::new();
        let closed = timeout(CUT_OFF, rd.read_to_end(&mut rest)).await;
        assert!(closed.is_ok(), "the broker closes the flooding connection");
        assert!(rest.is_empty());
        writer.abort();
    }

    /// 64 idle sockets (the issue's flood): a good login still gets in, in
    /// the place of the oldest of them.
    #[tokio::test]
    async fn idle_sockets_do_not_keep_a_good_login_out() {
        let broker = running().await;
        let mut idle = Vec::new();
        for _ in 0..MAX_PENDING_CONNECTS {
            let mut stream = TcpStream::connect(broker.addr).await.unwrap();
            // One byte of a CONNECT: the connection is waiting for the rest.
            stream.write_all(&[0x10]).await.unwrap();
            idle.push(stream);
        }
        let (_client, _events) = rumqttc_client(broker.addr, "during-the-flood", |_| {}).await;
        // Connections are accepted in order: the oldest idle one made room.
        assert!(
            read_until_closed_within(CUT_OFF, &mut idle[0])
                .await
                .is_empty()
        );
    }

    /// 64 parallel logins with a wrong password: a good login right behind
    /// them still gets in (guesses beyond the first few are refused
    /// unchecked, and a CONNECT waits for a place among the checks rather
    /// than being closed).
    #[tokio::test]
    async fn parallel_bad_logins_do_not_keep_a_good_login_out() {
        let (broker, _dir) = authenticated().await;
        let mut bad = Vec::new();
        for i in 0..MAX_PENDING_CONNECTS {
            let mut stream = TcpStream::connect(broker.addr).await.unwrap();
            stream
                .write_all(&raw_connect_as(
                    &format!("bad-{i}"),
                    60,
                    None,
                    Some(("admin", "wrong")),
                ))
                .await
                .unwrap();
            bad.push(stream);
        }
        assert_eq!(good_login_connack(broker.addr).await, [0x20, 2, 0, 0]);
    }

    /// The issue's burst at socket level: a publisher far faster than a
    /// subscriber that acknowledges nothing for a while. The publisher is
    /// held back once the subscriber's queue is full (64 in flight + 1000
    /// queued acknowledged, no more); once the subscriber reads on, every
    /// message arrives, in order, and every PUBACK.
    #[tokio::test]
    async fn a_burst_to_a_slow_subscriber_loses_nothing() {
        const TOTAL: usize = 1500;
        const ACKED_WHILE_STALLED: usize = 64 + 1000;
        let broker = running().await;
        let mut options = MqttOptions::new("slow-sub", "127.0.0.1", broker.addr.port());
        options.set_manual_acks(true);
        let (subscriber, mut sub_events) = AsyncClient::new(options, 4096);
        wait_for(&mut sub_events, |p| matches!(p, Packet::ConnAck(_))).await;
        subscriber
            .subscribe("burst/#", QoS::AtLeastOnce)
            .await
            .unwrap();
        wait_for(&mut sub_events, |p| matches!(p, Packet::SubAck(_))).await;

        let (publisher, mut pub_events) = rumqttc_client(broker.addr, "fast-pub", |_| {}).await;
        let (acks_tx, mut acks) = watch::channel(0usize);
        let pub_loop = tokio::spawn(async move {
            let mut n = 0;
            while let Ok(event) = pub_events.poll().await {
                if let Event::Incoming(Packet::PubAck(_)) = event {
                    n += 1;
                    acks_tx.send_replace(n);
                }
            }
        });
        let sender = tokio::spawn(async move {
            for i in 0..TOTAL {
                publisher
                    .publish("burst/call", QoS::AtLeastOnce, false, i.to_string())
                    .await
                    .unwrap();
            }
            publisher
        });

        let mut got = Vec::new();
        let mut unacked = Vec::new();
        let mut stalled = true;
        timeout(2 * DEADLINE, async {
            while got.len() < TOTAL {
                tokio::select! {
                    event = sub_events.poll() => match event {
                        Ok(Event::Incoming(Packet::Publish(p))) => {
                            got.push(String::from_utf8_lossy(&p.payload).into_owned());
                            if stalled {
                                unacked.push(p);
                            } else {
                                subscriber.try_ack(&p).unwrap();
                            }
                        }
                        Ok(_) => {}
                        Err(e) => panic!("rumqttc: {e}"),
                    },
                    // The subscriber reads on once the publisher is held.
                    held = acks.wait_for(|n| *n >= ACKED_WHILE_STALLED), if stalled => {
                        held.expect("the publisher's event loop runs");
                        stalled = false;
                        for p in unacked.drain(..) {
                            subscriber.try_ack(&p).unwrap();
                        }
                    }
                }
            }
        })
        .await
        .expect("every message within the deadline");
        let expected: Vec<String> = (0..TOTAL).map(|i| i.to_string()).collect();
        assert_eq!(got, expected, "every message, in order");
        timeout(DEADLINE, acks.wait_for(|n| *n == TOTAL))
            .await
            .expect("every PUBACK within the deadline")
            .expect("the publisher's event loop runs");
        let _publisher = sender.await.unwrap();
        pub_loop.abort();
    }

    #[test]
    fn warnings_are_rate_limited_per_key() {
        let mut w = WarnLimiter::default();
        let start = Instant::now();
        assert_eq!(w.allow("a".into(), start), Some(0));
        assert_eq!(w.allow("a".into(), start), None);
        assert_eq!(w.allow("a".into(), start + Duration::from_secs(59)), None);
        assert_eq!(w.allow("b".into(), start), Some(0), "another key");
        assert_eq!(w.allow("a".into(), start + WARN_EVERY), Some(2));
        for i in 0..2 * WARN_KEYS {
            w.allow(i.to_string(), start + WARN_EVERY);
        }
        assert!(w.last.len() <= WARN_KEYS, "bounded");
    }
}
