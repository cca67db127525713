//! The broker as a state machine: [`Broker::step`] takes one [`Input`] (a
//! decoded packet from a connection, a lost connection, a clock tick) and
//! returns the [`Action`]s a driver performs (send this packet to that
//! connection, close that connection).
//!
//! It owns sessions, subscriptions, retained messages and Will Messages. It
//! does no I/O, reads no clock (the driver passes `now`) and knows nothing
//! of sockets: a connection is a [`ConnId`] the driver chose. Everything is
//! in memory and bounded by [`Limits`]; nothing survives the process.
//!
//! Access control ([`crate::access`]) is applied here, so that it is tested
//! without sockets: a CONNECT comes with the driver's verdict on its
//! credentials ([`Login`]); a PUBLISH, a Will or a subscription the client's
//! role does not allow is refused, and every delivery (live or retained) is
//! checked against the subscriber's read rights.
//!
//! Subscriptions are matched through one index of every session's filters
//! by topic level (`index.rs`): a publish costs what its topic's
//! matching filters cost, not what every client's subscriptions add up to.
//! A client holds at most [`Limits::max_subscriptions`] filters.
//!
//! Nothing a publisher was told it delivered is dropped while its
//! subscribers are connected: when a QoS 1 message finds a connected
//! subscriber's queue beyond [`Limits::max_queued`], it is queued all the
//! same and the publisher is held back ([`Action::Pause`], and its PUBACKs
//! withheld) until that queue has room again. Only a session whose client
//! is away, or a queue at the hard bound [`Limits::max_queued_connected`]
//! (reached only by publishers that ignore flow control), refuses a
//! message, and says so ([`Action::Dropped`]; an MQTT 5 publisher gets
//! "quota exceeded"). `docs/embedded-broker.md` ("Flow control") has the
//! reasoning, including why this cannot deadlock.

use crate::access::{Grants, PUBLISHER_PROPERTY, Policy, Principal, Role};
use crate::codec::{
    ClientPacket, ConnAck, Connect, DecodeError, Disconnect, LastWill, ProtocolVersion, Publish,
    PublishProperties, QoS, RetainHandling, ServerPacket, Subscribe, SubscriptionOptions,
    Unsubscribe, reason,
};
use crate::index::FilterIndex;
use crate::topic;
use bytes::Bytes;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A connection, as numbered by the driver. Never reused while the broker runs.
pub type ConnId = u64;

/// Bounds on what clients can make the broker hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// The largest packet accepted, header included (told to MQTT 5 clients).
    pub max_packet_size: u32,
    /// Unacknowledged QoS 1 messages sent to one client at a time (an MQTT 5
    /// client's smaller Receive Maximum wins).
    pub max_inflight: u16,
    /// QoS 1 messages queued per session beyond the in-flight window while
    /// its client is away: new ones beyond it are dropped (and reported,
    /// [`Action::Dropped`]). For a connected client it is where flow control
    /// begins: a publisher whose message makes the queue longer is held
    /// back until it is no longer.
    pub max_queued: usize,
    /// The hard bound of a connected client's queue: only publishers that
    /// ignore flow control (sending on while their PUBACKs are withheld)
    /// can reach it; beyond it messages are dropped and reported.
    pub max_queued_connected: usize,
    /// How long a connected subscriber may hold publishers back without
    /// acknowledging anything, in seconds, before it is disconnected as a
    /// slow consumer (its session then keeps what it holds, within
    /// `max_queued`).
    pub max_stall_secs: u32,
    /// Topic filters one session may hold; further new filters are refused
    /// in the SUBACK (MQTT 5: quota exceeded).
    pub max_subscriptions: usize,
    /// The longest a session outlives its connection, in seconds. Also
    /// applies to MQTT 3.1.1 persistent sessions (clean session 0), which the
    /// protocol would otherwise keep for ever.
    pub max_session_expiry: u32,
    /// Number of retained topics; retained messages on new topics beyond it
    /// are delivered but not retained.
    pub max_retained: usize,
    /// Unacknowledged QoS 2 messages a client may have sent (awaiting
    /// PUBREL); announced to MQTT 5 clients as the broker's Receive Maximum.
    /// One more ends the connection (MQTT 5: reason 0x93). QoS 1 messages
    /// are acknowledged as they are read, so they never accumulate.
    pub receive_maximum: u16,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            // Phone screenshots are a few MiB; this leaves room for them.
            max_packet_size: 16 * 1024 * 1024,
            max_inflight: 256,
            max_queued: 1000,
            max_queued_connected: 10_000,
            max_stall_secs: 30,
            max_subscriptions: 1000,
            max_session_expiry: 24 * 60 * 60,
            max_retained: 10_000,
            receive_maximum: 64,
        }
    }
}

/// Why a connection ended without a normal DISCONNECT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LossCause {
    /// The client closed the connection, or it failed.
    PeerClosed,
    /// Nothing arrived within one and a half keep-alive periods.
    KeepAliveTimeout,
    /// The client did not read what it was sent fast enough.
    SlowConsumer,
    /// The client sent bytes that are not an acceptable packet.
    Violation(DecodeError),
    /// A new connection with the same client identifier took the session
    /// over (the broker's own decision; drivers do not report it).
    TakenOver,
    /// The client sent more unacknowledged QoS 2 messages than the Receive
    /// Maximum (the broker's own decision).
    ReceiveMaximumExceeded,
    /// The client's user was removed or changed (drivers report it, see
    /// [`Input::Revoke`]).
    Revoked,
}

/// The driver's verdict on the credentials of a CONNECT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Login {
    /// No user name: accepted only when the policy allows anonymous access.
    Anonymous,
    /// Valid credentials: this is who the client is.
    User(Principal),
    /// A user name with a wrong password, or an unknown user.
    BadCredentials,
    /// Not checked: too many failed logins from this source for this
    /// user lately (the driver's back-off). Refused as "connection rate
    /// exceeded" (MQTT 3.1.1: "server unavailable").
    Throttled,
}

/// What a client was refused; for the driver to log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// CONNECT (credentials, or a client identifier held by another user).
    Connect,
    /// A Will Message on a topic the client may not publish to.
    Will,
    /// A PUBLISH.
    Publish,
    /// A SUBSCRIBE filter.
    Subscribe,
}

/// Why something was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The client's role does not allow it (or its credentials are wrong).
    NotAuthorized,
    /// The client holds [`Limits::max_subscriptions`] filters already.
    TooManySubscriptions,
    /// The client's source failed to log in too often; refused without a
    /// password check ([`Login::Throttled`]).
    Throttled,
}

/// A refusal, for the driver to log (the client has already been told).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denied {
    /// The connection.
    pub conn: ConnId,
    /// The client identifier it gave.
    pub client_id: String,
    /// The user it logged in as, if any.
    pub user: Option<String>,
    /// What was refused.
    pub operation: Operation,
    /// The topic or filter concerned (empty for CONNECT).
    pub topic: String,
    /// Why.
    pub refusal: Refusal,
}

/// A QoS 1 or 2 message a session could not take, for the driver to log
/// and count. An MQTT 5 publisher was told "quota exceeded".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dropped {
    /// The subscriber's client identifier.
    pub client_id: String,
    /// The user that owns the subscriber's session, if any.
    pub user: Option<String>,
    /// The message's topic.
    pub topic: String,
    /// Whether the subscriber was connected (then its queue was at the hard
    /// bound [`Limits::max_queued_connected`]; else at
    /// [`Limits::max_queued`]).
    pub connected: bool,
}

/// Something that happened, for [`Broker::step`].
#[derive(Debug, Clone)]
pub enum Input {
    /// A packet arrived on a connection. The first one is always CONNECT.
    Packet {
        /// The connection.
        conn: ConnId,
        /// The decoded packet.
        packet: ClientPacket,
    },
    /// A connection ended, or must end, other than by DISCONNECT. Its Will
    /// Message is published.
    Lost {
        /// The connection.
        conn: ConnId,
        /// Why.
        cause: LossCause,
    },
    /// A CONNECT with the driver's verdict on its credentials. (A CONNECT
    /// in [`Input::Packet`] counts as [`Login::Anonymous`].)
    Connect {
        /// The connection.
        conn: ConnId,
        /// The packet.
        connect: Box<Connect>,
        /// Who the client is, as far as the driver could tell.
        login: Login,
    },
    /// These users were removed or changed: their connections are closed
    /// (their Will Messages published) and their sessions forgotten.
    Revoke {
        /// The user names.
        users: Vec<String>,
    },
    /// Time passed: delayed Will Messages and expired sessions are due.
    /// Drivers send one about every second.
    Tick,
}

/// Something for the driver to do, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(
    clippy::large_enum_variant,
    reason = "actions live for one step and are moved once; boxing would cost an allocation per packet"
)]
pub enum Action {
    /// Send a packet on a connection.
    Send {
        /// The connection.
        conn: ConnId,
        /// The packet.
        packet: ServerPacket,
    },
    /// Close a connection after sending everything queued for it. The broker
    /// has already forgotten it; later inputs for it are ignored.
    Close {
        /// The connection.
        conn: ConnId,
    },
    /// Something was refused: only to be logged.
    Denied(Denied),
    /// A message was dropped for a subscriber: to be logged and counted.
    Dropped(Dropped),
    /// Stop reading from a connection (flow control: a publisher that
    /// sent more than the Receive Maximum while its PUBACKs are withheld).
    /// Packets already read may still arrive and are handled.
    Pause {
        /// The connection.
        conn: ConnId,
    },
    /// Read from a paused connection again.
    Resume {
        /// The connection.
        conn: ConnId,
    },
    /// A client held publishers back for [`Limits::max_stall_secs`]
    /// without acknowledging anything and is being disconnected as a slow
    /// consumer (a [`Action::Close`] follows): to be logged.
    Stuck {
        /// The connection.
        conn: ConnId,
        /// Its client identifier.
        client_id: String,
        /// The user it logged in as, if any.
        user: Option<String>,
        /// Messages waiting in its queue.
        queued: usize,
    },
}

/// Who published a message: its client identifier and login.
struct Publisher<'a> {
    client_id: &'a str,
    user: Option<String>,
}

/// A published message as the broker holds it, shared by every delivery.
#[derive(Debug)]
struct Message {
    topic: String,
    payload: Bytes,
    qos: QoS,
    retain: bool,
    /// Properties to forward (never subscription identifiers).
    properties: PublishProperties,
    expires_at: Option<Instant>,
    /// Client identifier of the publisher, for the No Local option.
    publisher: String,
    /// The login the publisher connected as (`None`: anonymous).
    publisher_user: Option<String>,
    /// A command to the daemon ([`Policy::is_command`]), set by `route`.
    command: bool,
}

impl Message {
    /// A message `publisher` publishes (or its will) at `now`: it expires
    /// after its Message Expiry Interval, when it has one.
    fn published(
        now: Instant,
        publisher: Publisher<'_>,
        topic: String,
        payload: Bytes,
        qos: QoS,
        retain: bool,
        properties: PublishProperties,
    ) -> Self {
        let expires_at = properties
            .message_expiry_interval
            .map(|secs| now + Duration::from_secs(u64::from(secs)));
        Self {
            topic,
            payload,
            qos,
            retain,
            properties,
            expires_at,
            publisher: publisher.client_id.to_owned(),
            publisher_user: publisher.user,
            command: false,
        }
    }

    /// `None` when expired, else the Message Expiry Interval to forward.
    fn remaining_expiry(&self, now: Instant) -> Option<Option<u32>> {
        match self.expires_at {
            None => Some(None),
            Some(at) if at <= now => None,
            Some(at) => {
                let left = at - now;
                let secs = left.as_secs() + u64::from(left.subsec_nanos() > 0);
                Some(Some(u32::try_from(secs).unwrap_or(u32::MAX)))
            }
        }
    }
}

/// One message on its way to one session.
#[derive(Debug, Clone)]
struct Outgoing {
    message: Arc<Message>,
    qos: QoS,
    retain: bool,
    subscription_ids: Vec<u32>,
}

#[derive(Debug, Clone)]
struct Subscription {
    options: SubscriptionOptions,
    id: Option<u32>,
}

#[derive(Debug)]
struct Session {
    conn: Option<ConnId>,
    version: ProtocolVersion,
    /// The user that owns the session (`None`: anonymous).
    user: Option<String>,
    /// Whether its commands carry who published them
    /// ([`Policy::vouch_to`]).
    told_publishers: bool,
    /// What the client may publish and read.
    grants: Arc<Grants>,
    subscriptions: BTreeMap<String, Subscription>,
    will: Option<LastWill>,
    /// Sent QoS 1 and 2 messages awaiting PUBACK (QoS 1) or PUBREC and
    /// then PUBCOMP (QoS 2), oldest first.
    inflight: VecDeque<(u16, Outgoing)>,
    /// The QoS 2 messages among them whose PUBREC came: PUBREL was sent,
    /// PUBCOMP awaited (after a reconnection, PUBREL is sent again, not the
    /// message).
    released: HashSet<u16>,
    /// QoS 1 messages waiting for room in the in-flight window.
    queue: VecDeque<Outgoing>,
    /// Publishers held back until `queue` is within [`Limits::max_queued`]
    /// again (only while the client is connected).
    holding: Vec<ConnId>,
    /// Since when it holds publishers back without acknowledging anything.
    holding_since: Option<Instant>,
    next_packet_id: u16,
    /// QoS 2 messages from the client that were delivered and await PUBREL.
    awaiting_pubrel: HashSet<u16>,
    receive_maximum: u16,
    max_packet_size: Option<u32>,
    /// Seconds the session outlives its connection.
    expiry: u32,
    expires_at: Option<Instant>,
}

impl Session {
    fn new(version: ProtocolVersion) -> Session {
        Session {
            conn: None,
            version,
            user: None,
            told_publishers: false,
            grants: Arc::new(Grants::default()),
            subscriptions: BTreeMap::new(),
            will: None,
            inflight: VecDeque::new(),
            released: HashSet::new(),
            queue: VecDeque::new(),
            holding: Vec::new(),
            holding_since: None,
            next_packet_id: 0,
            awaiting_pubrel: HashSet::new(),
            receive_maximum: u16::MAX,
            max_packet_size: None,
            expiry: 0,
            expires_at: None,
        }
    }

    /// Sends or queues one message; says whether the queue is now beyond
    /// its soft bound, or refused it.
    fn deliver(
        &mut self,
        now: Instant,
        o: Outgoing,
        limits: &Limits,
        out: &mut Vec<Action>,
    ) -> Queued {
        if o.qos == QoS::AtMostOnce {
            // QoS 0 is sent now or never: it is not kept for absent clients.
            self.send(now, &o, 0, false, out);
            return Queued::Taken;
        }
        let connected = self.conn.is_some();
        let bound = if connected {
            limits.max_queued_connected
        } else {
            limits.max_queued
        };
        if self.queue.len() >= bound {
            // What is queued was promised first: the newcomer is refused
            // (and its publisher told, if it speaks MQTT 5).
            return Queued::Refused;
        }
        self.queue.push_back(o);
        self.pump(now, limits, out);
        if connected && self.queue.len() > limits.max_queued {
            Queued::Full
        } else {
            Queued::Taken
        }
    }

    /// Moves queued QoS 1 messages into the in-flight window.
    fn pump(&mut self, now: Instant, limits: &Limits, out: &mut Vec<Action>) {
        if self.conn.is_none() {
            return;
        }
        let window = usize::from(self.receive_maximum.min(limits.max_inflight).max(1));
        while self.inflight.len() < window {
            let Some(o) = self.queue.pop_front() else {
                break;
            };
            let packet_id = self.next_packet_id();
            if self.send(now, &o, packet_id, false, out) {
                self.inflight.push_back((packet_id, o));
            }
        }
    }

    /// Resends unacknowledged messages after the client came back (and
    /// PUBREL for QoS 2 messages it had received).
    fn resume(&mut self, now: Instant, limits: &Limits, out: &mut Vec<Action>) {
        let inflight = std::mem::take(&mut self.inflight);
        for (packet_id, o) in inflight {
            if self.released.contains(&packet_id) {
                if let Some(conn) = self.conn {
                    out.push(Action::Send {
                        conn,
                        packet: ServerPacket::PubRel {
                            packet_id,
                            reason: reason::SUCCESS,
                        },
                    });
                }
                self.inflight.push_back((packet_id, o));
            } else if self.send(now, &o, packet_id, true, out) {
                self.inflight.push_back((packet_id, o));
            } else {
                self.released.remove(&packet_id);
            }
        }
        self.pump(now, limits, out);
    }

    /// The client is done with message `packet_id` (PUBACK for QoS 1,
    /// PUBCOMP or a refusing PUBREC for QoS 2): it leaves the window, and
    /// queued messages move in. True when it was in flight.
    fn acknowledged(
        &mut self,
        now: Instant,
        packet_id: u16,
        qos: QoS,
        limits: &Limits,
        out: &mut Vec<Action>,
    ) -> bool {
        let before = self.inflight.len();
        self.inflight
            .retain(|(id, o)| !(*id == packet_id && o.qos == qos));
        let done = self.inflight.len() < before;
        if done {
            self.released.remove(&packet_id);
            if self.holding_since.is_some() {
                // Progress: the client is slow, not stuck.
                self.holding_since = Some(now);
            }
            self.pump(now, limits, out);
        }
        done
    }

    /// Sends one PUBLISH if the client is connected. Returns false when the
    /// message was dropped instead: expired, or larger than the client's
    /// Maximum Packet Size (which MQTT 5 says to treat as delivered).
    fn send(
        &mut self,
        now: Instant,
        o: &Outgoing,
        packet_id: u16,
        dup: bool,
        out: &mut Vec<Action>,
    ) -> bool {
        let Some(conn) = self.conn else {
            return false;
        };
        let Some(expiry) = o.message.remaining_expiry(now) else {
            return false;
        };
        let mut properties = PublishProperties::default();
        if self.version.is_v5() {
            properties = o.message.properties.clone();
            properties.message_expiry_interval = expiry;
            properties
                .subscription_identifiers
                .clone_from(&o.subscription_ids);
            if self.told_publishers && o.message.command {
                // Only the broker says who published: a property of that
                // name from the client is dropped, not forwarded.
                properties
                    .user_properties
                    .retain(|(name, _)| name != PUBLISHER_PROPERTY);
                if let Some(user) = &o.message.publisher_user {
                    properties
                        .user_properties
                        .push((PUBLISHER_PROPERTY.to_owned(), user.clone()));
                }
            }
        }
        let packet = ServerPacket::Publish(Publish {
            dup,
            qos: o.qos,
            retain: o.retain,
            topic: o.message.topic.clone(),
            packet_id,
            payload: o.message.payload.clone(),
            properties,
        });
        if let Some(max) = self.max_packet_size
            && packet.encoded_len(self.version) > max as usize
        {
            return false;
        }
        out.push(Action::Send { conn, packet });
        true
    }

    fn next_packet_id(&mut self) -> u16 {
        loop {
            self.next_packet_id = self.next_packet_id.checked_add(1).unwrap_or(1);
            let id = self.next_packet_id;
            if !self.inflight.iter().any(|(used, _)| *used == id) {
                return id;
            }
        }
    }
}

/// The reason code of an acknowledgement (PUBREL, PUBCOMP) for a packet
/// identifier that was, or was not, waiting for it.
fn known(found: bool) -> u8 {
    if found {
        reason::SUCCESS
    } else {
        reason::PACKET_IDENTIFIER_NOT_FOUND
    }
}

/// What routing a message did, for its publisher's acknowledgement.
#[derive(Debug, Default)]
struct Routed {
    /// Connected subscribers whose queues are now beyond the soft bound.
    full: Vec<String>,
    /// Whether some subscriber could not take it.
    refused: bool,
}

/// What became of a message given to a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Queued {
    /// Sent, or queued within the soft bound.
    Taken,
    /// Queued beyond [`Limits::max_queued`]: its publisher waits.
    Full,
    /// Not queued: the session's queue is at its hard bound.
    Refused,
}

/// A connection that completed CONNECT.
#[derive(Debug)]
struct Connection {
    version: ProtocolVersion,
    client_id: String,
    /// Sessions whose full queues hold this publisher back.
    blocked_by: HashSet<String>,
    /// PUBACK and PUBREC packets withheld while it is held back, in the
    /// order of their PUBLISH (which is the order they must go out in).
    held: VecDeque<ServerPacket>,
    /// Whether the driver was told to stop reading it.
    paused: bool,
}

#[derive(Debug)]
struct DelayedWill {
    due: Instant,
    client_id: String,
    will: LastWill,
}

/// The broker's whole state. See the module documentation.
#[derive(Debug)]
pub struct Broker {
    limits: Limits,
    policy: Policy,
    /// Connections that completed CONNECT.
    conns: HashMap<ConnId, Connection>,
    sessions: HashMap<String, Session>,
    /// Every session's filters, by topic level.
    index: FilterIndex,
    retained: BTreeMap<String, Arc<Message>>,
    delayed_wills: Vec<DelayedWill>,
    next_auto_id: u64,
}

impl Broker {
    /// An empty broker that enforces `policy`.
    #[must_use]
    pub fn new(limits: Limits, policy: Policy) -> Broker {
        Broker {
            limits,
            policy,
            conns: HashMap::new(),
            sessions: HashMap::new(),
            index: FilterIndex::default(),
            retained: BTreeMap::new(),
            delayed_wills: Vec::new(),
            next_auto_id: 0,
        }
    }

    /// The limits in force.
    #[must_use]
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Number of connected clients.
    #[must_use]
    pub fn connection_count(&self) -> usize {
        self.conns.len()
    }

    /// Number of sessions, connected or waiting for their client.
    #[must_use]
    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    /// Handles one input at time `now`.
    pub fn step(&mut self, now: Instant, input: Input) -> Vec<Action> {
        let mut out = Vec::new();
        match input {
            Input::Packet {
                conn,
                packet: ClientPacket::Connect(connect),
            } => self.login(now, conn, connect, Login::Anonymous, &mut out),
            Input::Connect {
                conn,
                connect,
                login,
            } => self.login(now, conn, connect, login, &mut out),
            Input::Revoke { users } => self.revoke(now, &users, &mut out),
            Input::Packet { conn, packet } => {
                if self.conns.contains_key(&conn) {
                    self.packet(now, conn, packet, &mut out);
                }
            }
            Input::Lost { conn, cause } => self.lose(now, conn, &cause, &mut out),
            Input::Tick => self.tick(now, &mut out),
        }
        out
    }

    /// Disconnects every client (MQTT 5 clients are told why). Sessions and
    /// wills are discarded with the broker.
    pub fn shutdown(&mut self) -> Vec<Action> {
        let mut out = Vec::new();
        let mut conns: Vec<_> = self.conns.drain().collect();
        conns.sort_unstable_by_key(|(conn, _)| *conn);
        for (conn, c) in conns {
            if c.version.is_v5() {
                out.push(Action::Send {
                    conn,
                    packet: ServerPacket::Disconnect {
                        reason: reason::SERVER_SHUTTING_DOWN,
                    },
                });
            }
            out.push(Action::Close { conn });
        }
        out
    }

    fn login(
        &mut self,
        now: Instant,
        conn: ConnId,
        connect: Box<Connect>,
        login: Login,
        out: &mut Vec<Action>,
    ) {
        if self.conns.contains_key(&conn) {
            let error = DecodeError::Protocol("second CONNECT");
            self.lose(now, conn, &LossCause::Violation(error), out);
        } else {
            self.connect(now, conn, *connect, login, out);
        }
    }

    /// Closes the connections and forgets the sessions of `users`.
    fn revoke(&mut self, now: Instant, users: &[String], out: &mut Vec<Action>) {
        let owned = |s: &Session| s.user.as_ref().is_some_and(|u| users.contains(u));
        let mut conns: Vec<ConnId> = self
            .sessions
            .values()
            .filter(|s| owned(s))
            .filter_map(|s| s.conn)
            .collect();
        conns.sort_unstable();
        for conn in conns {
            self.lose(now, conn, &LossCause::Revoked, out);
        }
        let ids: Vec<String> = self
            .sessions
            .iter()
            .filter(|(_, s)| owned(s))
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            self.end_session(now, &id, out);
        }
    }

    fn connect(
        &mut self,
        now: Instant,
        conn: ConnId,
        c: Connect,
        login: Login,
        out: &mut Vec<Action>,
    ) {
        let v5 = c.version.is_v5();
        let refuse = |code: u8, out: &mut Vec<Action>| {
            out.push(Action::Send {
                conn,
                packet: ServerPacket::ConnAck(ConnAck {
                    code,
                    ..ConnAck::default()
                }),
            });
            out.push(Action::Close { conn });
        };
        if v5 && c.properties.authentication_method.is_some() {
            return refuse(reason::BAD_AUTHENTICATION_METHOD, out);
        }
        let (bad_credentials, not_authorized) = if v5 {
            (reason::BAD_USER_NAME_OR_PASSWORD, reason::NOT_AUTHORIZED)
        } else {
            (
                reason::V3_BAD_USER_NAME_OR_PASSWORD,
                reason::V3_NOT_AUTHORIZED,
            )
        };
        let given_id = c.client_id.clone();
        let denied = |operation, user: &Option<String>, topic: &str| {
            Action::Denied(Denied {
                conn,
                client_id: given_id.clone(),
                user: user.clone(),
                operation,
                topic: topic.to_owned(),
                refusal: Refusal::NotAuthorized,
            })
        };
        let principal = match login {
            Login::User(principal) => principal,
            Login::Anonymous if self.policy.anonymous => Principal::anonymous(),
            Login::Anonymous => {
                out.push(denied(Operation::Connect, &None, ""));
                return refuse(not_authorized, out);
            }
            Login::BadCredentials => {
                out.push(denied(Operation::Connect, &c.username, ""));
                return refuse(bad_credentials, out);
            }
            Login::Throttled => {
                out.push(Action::Denied(Denied {
                    conn,
                    client_id: given_id.clone(),
                    user: c.username.clone(),
                    operation: Operation::Connect,
                    topic: String::new(),
                    refusal: Refusal::Throttled,
                }));
                return refuse(
                    if v5 {
                        reason::CONNECTION_RATE_EXCEEDED
                    } else {
                        reason::V3_SERVER_UNAVAILABLE
                    },
                    out,
                );
            }
        };
        let grants = Arc::new(self.policy.grants(&principal));
        if let Some(will) = &c.will
            && !grants.may_publish(&will.topic)
        {
            out.push(denied(Operation::Will, &principal.user, &will.topic));
            return refuse(not_authorized, out);
        }
        let mut client_id = c.client_id;
        let mut assigned = None;
        if client_id.is_empty() {
            if !v5 && !c.clean_start {
                return refuse(reason::V3_IDENTIFIER_REJECTED, out);
            }
            client_id = self.new_client_id();
            if v5 {
                assigned = Some(client_id.clone());
            }
        }
        let requested_expiry = if v5 {
            c.properties.session_expiry_interval
        } else if c.clean_start {
            0
        } else {
            u32::MAX
        };
        let expiry = requested_expiry.min(self.limits.max_session_expiry);

        // A client identifier belongs to the user whose session holds it: a
        // different user may not take a live connection over (except an
        // admin, so that nobody can keep the daemon's own client identifier
        // from it), and never inherits a session's subscriptions and queue.
        let mut clean_start = c.clean_start;
        if let Some(session) = self.sessions.get(&client_id)
            && session.user != principal.user
        {
            if session.conn.is_some() && principal.role != Role::Admin {
                out.push(denied(Operation::Connect, &principal.user, ""));
                return refuse(not_authorized, out);
            }
            clean_start = true;
        }

        // Session takeover: the older connection goes, as if it had been
        // lost (its Will Message is published, MQTT 3.1.1 §3.1.4).
        if let Some(old) = self.sessions.get(&client_id).and_then(|s| s.conn) {
            self.lose(now, old, &LossCause::TakenOver, out);
        }

        let session_present = if clean_start || !self.sessions.contains_key(&client_id) {
            self.end_session(now, &client_id, out);
            self.sessions
                .insert(client_id.clone(), Session::new(c.version));
            false
        } else {
            // Resuming before a delayed Will was due cancels it (MQTT 5 §3.1.3.2.2).
            self.delayed_wills.retain(|w| w.client_id != client_id);
            true
        };
        let Some(session) = self.sessions.get_mut(&client_id) else {
            return;
        };
        session.conn = Some(conn);
        session.version = c.version;
        session.told_publishers = self.policy.is_told_publishers(&principal);
        session.user = principal.user;
        session.grants = grants;
        session.will = c.will;
        session.expiry = expiry;
        session.expires_at = None;
        session.receive_maximum = c.properties.receive_maximum;
        session.max_packet_size = c.properties.maximum_packet_size;
        self.conns.insert(
            conn,
            Connection {
                version: c.version,
                client_id,
                blocked_by: HashSet::new(),
                held: VecDeque::new(),
                paused: false,
            },
        );
        out.push(Action::Send {
            conn,
            packet: ServerPacket::ConnAck(ConnAck {
                session_present,
                code: reason::SUCCESS,
                assigned_client_identifier: assigned,
                maximum_packet_size: Some(self.limits.max_packet_size),
                session_expiry_interval: (v5 && expiry != requested_expiry).then_some(expiry),
                shared_subscription_unavailable: true,
                receive_maximum: Some(self.limits.receive_maximum),
                response_information: (v5 && c.properties.request_response_information)
                    .then(|| self.policy.response_information()),
            }),
        });
        if session_present {
            session.resume(now, &self.limits, out);
        }
    }

    fn new_client_id(&mut self) -> String {
        loop {
            self.next_auto_id += 1;
            let id = format!("droidwarden-auto-{}", self.next_auto_id);
            if !self.sessions.contains_key(&id) {
                return id;
            }
        }
    }

    fn packet(&mut self, now: Instant, conn: ConnId, packet: ClientPacket, out: &mut Vec<Action>) {
        let Some((version, client_id)) = self
            .conns
            .get(&conn)
            .map(|c| (c.version, c.client_id.clone()))
        else {
            return;
        };
        match packet {
            ClientPacket::Connect(_) => {}
            ClientPacket::Publish(p) => self.publish(now, conn, &client_id, p, out),
            ClientPacket::PubAck { packet_id } => {
                if let Some(session) = self.sessions.get_mut(&client_id) {
                    session.acknowledged(now, packet_id, QoS::AtLeastOnce, &self.limits, out);
                }
                self.release(&client_id, false, out);
            }
            ClientPacket::PubRec {
                packet_id,
                reason: code,
            } => {
                let Some(session) = self.sessions.get_mut(&client_id) else {
                    return;
                };
                let sent = session
                    .inflight
                    .iter()
                    .any(|(id, o)| *id == packet_id && o.qos == QoS::ExactlyOnce);
                if code >= 0x80 {
                    // The client refused it: the exchange ends here.
                    session.acknowledged(now, packet_id, QoS::ExactlyOnce, &self.limits, out);
                    self.release(&client_id, false, out);
                    return;
                }
                if sent {
                    session.released.insert(packet_id);
                }
                out.push(Action::Send {
                    conn,
                    packet: ServerPacket::PubRel {
                        packet_id,
                        reason: known(sent),
                    },
                });
            }
            ClientPacket::PubComp { packet_id } => {
                if let Some(session) = self.sessions.get_mut(&client_id)
                    && session.released.contains(&packet_id)
                {
                    session.acknowledged(now, packet_id, QoS::ExactlyOnce, &self.limits, out);
                }
                self.release(&client_id, false, out);
            }
            ClientPacket::PubRel { packet_id } => {
                let found = self
                    .sessions
                    .get_mut(&client_id)
                    .is_some_and(|s| s.awaiting_pubrel.remove(&packet_id));
                out.push(Action::Send {
                    conn,
                    packet: ServerPacket::PubComp {
                        packet_id,
                        reason: known(found),
                    },
                });
            }
            ClientPacket::Subscribe(s) => self.subscribe(now, conn, version, &client_id, s, out),
            ClientPacket::Unsubscribe(u) => self.unsubscribe(conn, &client_id, u, out),
            ClientPacket::PingReq => out.push(Action::Send {
                conn,
                packet: ServerPacket::PingResp,
            }),
            ClientPacket::Disconnect(d) => self.disconnect(now, conn, &client_id, &d, out),
        }
    }

    fn publish(
        &mut self,
        now: Instant,
        conn: ConnId,
        client_id: &str,
        p: Publish,
        out: &mut Vec<Action>,
    ) {
        let packet_id = p.packet_id;
        let qos = p.qos;
        let Some(session) = self.sessions.get_mut(client_id) else {
            return;
        };
        let v5 = session.version.is_v5();
        if qos == QoS::ExactlyOnce
            && !session.awaiting_pubrel.contains(&packet_id)
            && session.awaiting_pubrel.len() >= usize::from(self.limits.receive_maximum)
        {
            return self.lose(now, conn, &LossCause::ReceiveMaximumExceeded, out);
        }
        let permitted = session.grants.may_publish(&p.topic);
        // MQTT 3.1.1 has no way to refuse a PUBLISH: the flow completes as
        // usual and the message is dropped (§3.3.5 allows it). MQTT 5 says
        // "not authorized" in the acknowledgement, and a refused QoS 2
        // message awaits no PUBREL.
        let awaits_pubrel = permitted || !v5;
        let duplicate = qos == QoS::ExactlyOnce
            && !(awaits_pubrel && session.awaiting_pubrel.insert(packet_id));
        let mut routed = Routed::default();
        if !permitted {
            out.push(Action::Denied(Denied {
                conn,
                client_id: client_id.to_owned(),
                user: session.user.clone(),
                operation: Operation::Publish,
                topic: p.topic.clone(),
                refusal: Refusal::NotAuthorized,
            }));
        } else if !duplicate {
            let publisher = Publisher {
                client_id,
                user: session.user.clone(),
            };
            let message = Message::published(
                now,
                publisher,
                p.topic,
                p.payload,
                qos,
                p.retain,
                p.properties,
            );
            routed = self.route(now, message, Some(conn), out);
        }
        let reason = if !v5 {
            // MQTT 3.1.1 has no way to say "not authorized" or "quota
            // exceeded" here; both are logged by the driver.
            reason::SUCCESS
        } else if !permitted {
            reason::NOT_AUTHORIZED
        } else if routed.refused {
            reason::QUOTA_EXCEEDED
        } else {
            reason::SUCCESS
        };
        let ack = match qos {
            QoS::AtMostOnce => None,
            QoS::AtLeastOnce => Some(ServerPacket::PubAck { packet_id, reason }),
            QoS::ExactlyOnce => Some(ServerPacket::PubRec { packet_id, reason }),
        };
        self.acknowledge(now, conn, routed.full, ack, out);
    }

    /// Sends a publisher its acknowledgement, or withholds it while full
    /// queues of connected subscribers (`full`, and any from before) hold
    /// the publisher back. A publisher that sends on beyond the Receive
    /// Maximum regardless is paused, unless its own session holds someone
    /// back: a paused connection's acknowledgements are not read, so a
    /// queue it holds would never drain. That rule keeps the waits from
    /// ever forming a cycle.
    fn acknowledge(
        &mut self,
        now: Instant,
        conn: ConnId,
        full: Vec<String>,
        ack: Option<ServerPacket>,
        out: &mut Vec<Action>,
    ) {
        for subscriber in full {
            let Some(c) = self.conns.get_mut(&conn) else {
                return;
            };
            if !c.blocked_by.insert(subscriber.clone()) {
                continue;
            }
            let Some(session) = self.sessions.get_mut(&subscriber) else {
                continue;
            };
            if session.holding.is_empty() {
                session.holding_since = Some(now);
            }
            session.holding.push(conn);
            // A session that holds someone back must be read from.
            if let Some(sub_conn) = session.conn {
                self.unpause(sub_conn, out);
            }
        }
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        if let Some(packet) = ack {
            if c.blocked_by.is_empty() && c.held.is_empty() {
                out.push(Action::Send { conn, packet });
            } else {
                c.held.push_back(packet);
            }
        }
        let holds_someone = self
            .sessions
            .get(&c.client_id)
            .is_some_and(|s| !s.holding.is_empty());
        if !c.paused && !holds_someone && c.held.len() > usize::from(self.limits.receive_maximum) {
            c.paused = true;
            out.push(Action::Pause { conn });
        }
    }

    fn unpause(&mut self, conn: ConnId, out: &mut Vec<Action>) {
        if let Some(c) = self.conns.get_mut(&conn)
            && c.paused
        {
            c.paused = false;
            out.push(Action::Resume { conn });
        }
    }

    /// Lets the publishers `client_id`'s session holds back go on, once its
    /// queue is within bounds again, or in any case (`always`) when its
    /// client left or the session ends.
    fn release(&mut self, client_id: &str, always: bool, out: &mut Vec<Action>) {
        let Some(session) = self.sessions.get_mut(client_id) else {
            return;
        };
        if session.holding.is_empty() || (!always && session.queue.len() > self.limits.max_queued) {
            return;
        }
        let holding = std::mem::take(&mut session.holding);
        session.holding_since = None;
        for conn in holding {
            let Some(c) = self.conns.get_mut(&conn) else {
                continue;
            };
            c.blocked_by.remove(client_id);
            if c.blocked_by.is_empty() {
                out.extend(c.held.drain(..).map(|packet| Action::Send { conn, packet }));
                self.unpause(conn, out);
            }
        }
    }

    /// Retains (or clears) and forwards a message to every matching session.
    /// `publisher` is the connection it came from (`None`: a Will).
    fn route(
        &mut self,
        now: Instant,
        mut message: Message,
        publisher: Option<ConnId>,
        out: &mut Vec<Action>,
    ) -> Routed {
        message.command = self.policy.is_command(&message.topic);
        let message = Arc::new(message);
        if message.retain {
            if message.payload.is_empty() {
                self.retained.remove(&message.topic);
            } else if self.retained.len() < self.limits.max_retained
                || self.retained.contains_key(&message.topic)
            {
                self.retained
                    .insert(message.topic.clone(), Arc::clone(&message));
            }
        }
        // Which filters of which sessions match, from the index.
        let mut matched: BTreeMap<String, Vec<String>> = BTreeMap::new();
        self.index
            .for_each_match(&message.topic, |client_id, filter| {
                matched
                    .entry(client_id.to_owned())
                    .or_default()
                    .push(filter.to_owned());
            });
        let mut routed = Routed::default();
        for (client_id, filters) in matched {
            let Some(session) = self.sessions.get_mut(&client_id) else {
                continue;
            };
            if !session.grants.may_read(&message.topic) {
                continue;
            }
            let mut best: Option<QoS> = None;
            let mut retain_as_published = false;
            let mut subscription_ids = Vec::new();
            for filter in &filters {
                let Some(sub) = session.subscriptions.get(filter) else {
                    continue;
                };
                if sub.options.no_local && message.publisher == client_id {
                    continue;
                }
                best = best.max(Some(sub.options.qos));
                retain_as_published |= sub.options.retain_as_published;
                subscription_ids.extend(sub.id);
            }
            let Some(granted) = best else {
                continue;
            };
            let o = Outgoing {
                qos: message.qos.min(granted),
                // Live messages go out with retain 0 unless the
                // subscriber asked otherwise (MQTT 3.1.1 §3.3.1.3).
                retain: message.retain && retain_as_published,
                message: Arc::clone(&message),
                subscription_ids,
            };
            match session.deliver(now, o, &self.limits, out) {
                Queued::Taken => {}
                Queued::Full => {
                    if publisher.is_some() {
                        routed.full.push(client_id);
                    }
                }
                Queued::Refused => {
                    routed.refused = true;
                    out.push(Action::Dropped(Dropped {
                        user: session.user.clone(),
                        topic: message.topic.clone(),
                        connected: session.conn.is_some(),
                        client_id,
                    }));
                }
            }
        }
        routed
    }

    fn subscribe(
        &mut self,
        now: Instant,
        conn: ConnId,
        version: ProtocolVersion,
        client_id: &str,
        s: Subscribe,
        out: &mut Vec<Action>,
    ) {
        let v5 = version.is_v5();
        self.retained
            .retain(|_, m| m.remaining_expiry(now).is_some());
        let Some(session) = self.sessions.get_mut(client_id) else {
            return;
        };
        let mut codes = Vec::with_capacity(s.filters.len());
        let mut retained = Vec::new();
        // A refused subscription, for the driver's warning.
        let denied = |user: &_, refusal, filter: &str| {
            Action::Denied(Denied {
                conn,
                client_id: client_id.to_owned(),
                user: Clone::clone(user),
                operation: Operation::Subscribe,
                topic: filter.to_owned(),
                refusal,
            })
        };
        for (filter, options) in s.filters {
            let failure = if topic::validate_filter(&filter).is_err() {
                Some(reason::TOPIC_FILTER_INVALID)
            } else if filter.starts_with("$share/") {
                Some(reason::SHARED_SUBSCRIPTIONS_NOT_SUPPORTED)
            } else if !session.grants.may_subscribe(&filter) {
                out.push(denied(&session.user, Refusal::NotAuthorized, &filter));
                Some(reason::NOT_AUTHORIZED)
            } else if session.subscriptions.len() >= self.limits.max_subscriptions
                && !session.subscriptions.contains_key(&filter)
            {
                out.push(denied(
                    &session.user,
                    Refusal::TooManySubscriptions,
                    &filter,
                ));
                Some(reason::QUOTA_EXCEEDED)
            } else {
                None
            };
            if let Some(code) = failure {
                codes.push(if v5 { code } else { reason::UNSPECIFIED_ERROR });
                continue;
            }
            codes.push(options.qos as u8);
            let existed = session
                .subscriptions
                .insert(
                    filter.clone(),
                    Subscription {
                        options,
                        id: s.subscription_identifier,
                    },
                )
                .is_some();
            if !existed {
                self.index.insert(&filter, client_id);
            }
            let send_retained = match options.retain_handling {
                RetainHandling::OnSubscribe => true,
                RetainHandling::OnNewSubscription => !existed,
                RetainHandling::Never => false,
            };
            if send_retained {
                // Only topics that begin with the filter's literal levels
                // can match: a range of the sorted map, not all of it.
                let literal = filter
                    .find(['+', '#'])
                    .map_or(&filter[..], |i| &filter[..i]);
                let candidates = self
                    .retained
                    .range::<str, _>((
                        std::ops::Bound::Included(literal),
                        std::ops::Bound::Unbounded,
                    ))
                    .take_while(|(name, _)| name.starts_with(literal))
                    .map(|(_, message)| message);
                for message in candidates {
                    if topic::matches(&filter, &message.topic)
                        && session.grants.may_read(&message.topic)
                    {
                        retained.push(Outgoing {
                            qos: message.qos.min(options.qos),
                            retain: true,
                            message: Arc::clone(message),
                            subscription_ids: s.subscription_identifier.into_iter().collect(),
                        });
                    }
                }
            }
        }
        out.push(Action::Send {
            conn,
            packet: ServerPacket::SubAck {
                packet_id: s.packet_id,
                codes,
            },
        });
        for o in retained {
            let message = Arc::clone(&o.message);
            if session.deliver(now, o, &self.limits, out) == Queued::Refused {
                out.push(Action::Dropped(Dropped {
                    client_id: client_id.to_owned(),
                    user: session.user.clone(),
                    topic: message.topic.clone(),
                    connected: session.conn.is_some(),
                }));
            }
        }
    }

    fn unsubscribe(
        &mut self,
        conn: ConnId,
        client_id: &str,
        u: Unsubscribe,
        out: &mut Vec<Action>,
    ) {
        let Some(session) = self.sessions.get_mut(client_id) else {
            return;
        };
        let codes = u
            .filters
            .iter()
            .map(|filter| {
                if session.subscriptions.remove(filter).is_some() {
                    self.index.remove(filter, client_id);
                    reason::SUCCESS
                } else if topic::validate_filter(filter).is_err() {
                    reason::TOPIC_FILTER_INVALID
                } else {
                    reason::NO_SUBSCRIPTION_EXISTED
                }
            })
            .collect();
        out.push(Action::Send {
            conn,
            packet: ServerPacket::UnsubAck {
                packet_id: u.packet_id,
                codes,
            },
        });
    }

    fn disconnect(
        &mut self,
        now: Instant,
        conn: ConnId,
        client_id: &str,
        d: &Disconnect,
        out: &mut Vec<Action>,
    ) {
        let max_expiry = self.limits.max_session_expiry;
        let Some(session) = self.sessions.get_mut(client_id) else {
            return;
        };
        if let Some(expiry) = d.session_expiry_interval {
            if session.expiry == 0 && expiry != 0 {
                let error = DecodeError::Protocol("session expiry set at DISCONNECT after 0");
                return self.lose(now, conn, &LossCause::Violation(error), out);
            }
            session.expiry = expiry.min(max_expiry);
        }
        // A normal DISCONNECT discards the Will, unless an MQTT 5 client
        // asks for it to be published.
        if d.reason != reason::DISCONNECT_WITH_WILL {
            session.will = None;
        }
        self.lose(now, conn, &LossCause::PeerClosed, out);
    }

    /// Forgets a connection: tells an MQTT 5 client why when there is a
    /// reason to tell, closes it, publishes or schedules its Will and ends
    /// or parks its session.
    fn lose(&mut self, now: Instant, conn: ConnId, cause: &LossCause, out: &mut Vec<Action>) {
        let Some(Connection {
            version,
            client_id,
            blocked_by,
            ..
        }) = self.conns.remove(&conn)
        else {
            return;
        };
        // Its withheld acknowledgements go with it: a persistent client
        // sends those messages again, as after any lost connection.
        for subscriber in blocked_by {
            if let Some(session) = self.sessions.get_mut(&subscriber) {
                session.holding.retain(|held| *held != conn);
                if session.holding.is_empty() {
                    session.holding_since = None;
                }
            }
        }
        let reason = match cause {
            LossCause::KeepAliveTimeout => Some(reason::KEEP_ALIVE_TIMEOUT),
            LossCause::TakenOver => Some(reason::SESSION_TAKEN_OVER),
            LossCause::Violation(e) => Some(e.reason_code()),
            LossCause::ReceiveMaximumExceeded => Some(reason::RECEIVE_MAXIMUM_EXCEEDED),
            LossCause::Revoked => Some(reason::NOT_AUTHORIZED),
            LossCause::PeerClosed | LossCause::SlowConsumer => None,
        };
        if let (true, Some(reason)) = (version.is_v5(), reason) {
            out.push(Action::Send {
                conn,
                packet: ServerPacket::Disconnect { reason },
            });
        }
        out.push(Action::Close { conn });
        // Nobody waits for a client that is not there: its session is now
        // bounded by `max_queued`, and refuses beyond it.
        self.release(&client_id, true, out);
        let Some(session) = self.sessions.get_mut(&client_id) else {
            return;
        };
        session.conn = None;
        let expiry = session.expiry;
        if let Some(will) = session.will.take() {
            let delay = will.delay_interval.min(expiry);
            if delay == 0 {
                self.publish_will(now, &client_id, will, out);
            } else {
                self.delayed_wills.push(DelayedWill {
                    due: now + Duration::from_secs(u64::from(delay)),
                    client_id: client_id.clone(),
                    will,
                });
            }
        }
        if expiry == 0 {
            self.end_session(now, &client_id, out);
        } else if let Some(session) = self.sessions.get_mut(&client_id) {
            session.expires_at = Some(now + Duration::from_secs(u64::from(expiry)));
        }
    }

    /// Removes a session; a Will still waiting for its delay goes out now.
    fn end_session(&mut self, now: Instant, client_id: &str, out: &mut Vec<Action>) {
        self.release(client_id, true, out);
        if let Some(session) = self.sessions.remove(client_id) {
            for filter in session.subscriptions.keys() {
                self.index.remove(filter, client_id);
            }
        }
        if let Some(i) = self
            .delayed_wills
            .iter()
            .position(|w| w.client_id == client_id)
        {
            let w = self.delayed_wills.swap_remove(i);
            self.publish_will(now, client_id, w.will, out);
        }
    }

    fn publish_will(
        &mut self,
        now: Instant,
        client_id: &str,
        will: LastWill,
        out: &mut Vec<Action>,
    ) {
        // A Will is published after its client is gone: it is not said to
        // be anyone's (a told session sees no publisher, only the way in).
        let publisher = Publisher {
            client_id,
            user: None,
        };
        let message = Message::published(
            now,
            publisher,
            will.topic,
            will.payload,
            will.qos,
            will.retain,
            will.properties,
        );
        self.route(now, message, None, out);
    }

    fn tick(&mut self, now: Instant, out: &mut Vec<Action>) {
        let (due, waiting) = std::mem::take(&mut self.delayed_wills)
            .into_iter()
            .partition(|w| w.due <= now);
        self.delayed_wills = waiting;
        for w in due {
            self.publish_will(now, &w.client_id, w.will, out);
        }
        let expired: Vec<String> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.conn.is_none() && s.expires_at.is_some_and(|at| at <= now))
            .map(|(id, _)| id.clone())
            .collect();
        for client_id in expired {
            self.end_session(now, &client_id, out);
        }
        // A connected client that holds publishers back and acknowledges
        // nothing for this long is not slow but stuck: it goes, so that
        // the publishers go on (its session keeps what it can).
        let stall = Duration::from_secs(u64::from(self.limits.max_stall_secs));
        let mut stuck: Vec<(ConnId, String, Option<String>, usize)> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.holding_since.is_some_and(|since| now >= since + stall))
            .filter_map(|(id, s)| Some((s.conn?, id.clone(), s.user.clone(), s.queue.len())))
            .collect();
        stuck.sort_unstable_by_key(|(conn, ..)| *conn);
        for (conn, client_id, user, queued) in stuck {
            out.push(Action::Stuck {
                conn,
                client_id,
                user,
                queued,
            });
            self.lose(now, conn, &LossCause::SlowConsumer, out);
        }
    }
}

#[cfg(test)]
mod tests;
