//! The MQTT wire format, server side: [`decode`] turns what a client sends
//! (MQTT 3.1, 3.1.1 or 5.0) into a [`ClientPacket`], and
//! [`ServerPacket::encode`] writes what a server sends in the version the
//! client connected with.
//!
//! Only the packets a server receives are decoded and only those it sends
//! are encoded: a broker never decodes a CONNACK, so there is no code for it.
//! Everything the specifications call a Malformed Packet or a Protocol Error
//! at the packet level is rejected here, so the state machine only ever sees
//! well-formed packets. This codec speaks for *this* broker: properties the
//! broker never offers (topic aliases, enhanced authentication through AUTH)
//! are refused here rather than parsed and ignored.

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// The largest value the Remaining Length field can hold (four bytes).
pub const MAX_REMAINING_LENGTH: usize = 268_435_455;

/// The MQTT protocol version a client connected with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProtocolVersion {
    /// MQTT 3.1 (protocol name `MQIsdp`, level 3); handled as 3.1.1.
    V3_1,
    /// MQTT 3.1.1 (level 4).
    V3_1_1,
    /// MQTT 5.0 (level 5).
    V5,
}

impl ProtocolVersion {
    /// Whether packets carry MQTT 5 properties and reason codes.
    #[must_use]
    pub fn is_v5(self) -> bool {
        self == Self::V5
    }
}

/// Quality of service of a message or a subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum QoS {
    /// At most once: no acknowledgement.
    AtMostOnce = 0,
    /// At least once: PUBACK.
    AtLeastOnce = 1,
    /// Exactly once: PUBREC, PUBREL, PUBCOMP.
    ExactlyOnce = 2,
}

impl QoS {
    fn from_bits(bits: u8) -> Option<QoS> {
        match bits {
            0 => Some(QoS::AtMostOnce),
            1 => Some(QoS::AtLeastOnce),
            2 => Some(QoS::ExactlyOnce),
            _ => None,
        }
    }
}

/// MQTT 5 reason codes this broker sends, and the MQTT 3.1.1 CONNACK return
/// codes. Kept as plain bytes because the same number means different things
/// in the two versions; the state machine picks the right one per version.
pub mod reason {
    /// Success, normal disconnection, granted QoS 0.
    pub const SUCCESS: u8 = 0x00;
    /// SUBACK: granted QoS 1.
    pub const GRANTED_QOS_1: u8 = 0x01;
    /// DISCONNECT from a client: disconnect and publish the Will Message.
    pub const DISCONNECT_WITH_WILL: u8 = 0x04;
    /// UNSUBACK: there was no such subscription.
    pub const NO_SUBSCRIPTION_EXISTED: u8 = 0x11;
    /// Unspecified error (also the MQTT 3.1.1 SUBACK failure code).
    pub const UNSPECIFIED_ERROR: u8 = 0x80;
    /// Malformed packet.
    pub const MALFORMED_PACKET: u8 = 0x81;
    /// Protocol error.
    pub const PROTOCOL_ERROR: u8 = 0x82;
    /// CONNACK: unsupported protocol version.
    pub const UNSUPPORTED_PROTOCOL_VERSION: u8 = 0x84;
    /// CONNACK: client identifier not valid.
    pub const CLIENT_IDENTIFIER_NOT_VALID: u8 = 0x85;
    /// CONNACK: bad user name or password.
    pub const BAD_USER_NAME_OR_PASSWORD: u8 = 0x86;
    /// CONNACK, PUBACK, PUBREC, SUBACK: not authorized.
    pub const NOT_AUTHORIZED: u8 = 0x87;
    /// CONNACK: bad authentication method.
    pub const BAD_AUTHENTICATION_METHOD: u8 = 0x8C;
    /// DISCONNECT: keep alive timeout.
    pub const KEEP_ALIVE_TIMEOUT: u8 = 0x8D;
    /// DISCONNECT: server shutting down.
    pub const SERVER_SHUTTING_DOWN: u8 = 0x8B;
    /// DISCONNECT: session taken over by another connection.
    pub const SESSION_TAKEN_OVER: u8 = 0x8E;
    /// SUBACK, UNSUBACK: topic filter invalid.
    pub const TOPIC_FILTER_INVALID: u8 = 0x8F;
    /// PUBCOMP: packet identifier not found.
    pub const PACKET_IDENTIFIER_NOT_FOUND: u8 = 0x92;
    /// DISCONNECT: the client sent more unacknowledged QoS 2 messages than
    /// the Receive Maximum the broker announced.
    pub const RECEIVE_MAXIMUM_EXCEEDED: u8 = 0x93;
    /// DISCONNECT: topic alias invalid.
    pub const TOPIC_ALIAS_INVALID: u8 = 0x94;
    /// DISCONNECT: packet too large.
    pub const PACKET_TOO_LARGE: u8 = 0x95;
    /// PUBACK, PUBREC, SUBACK: quota exceeded.
    pub const QUOTA_EXCEEDED: u8 = 0x97;
    /// CONNACK: connection rate exceeded (too many failed logins).
    pub const CONNECTION_RATE_EXCEEDED: u8 = 0x9F;
    /// SUBACK: shared subscriptions not supported.
    pub const SHARED_SUBSCRIPTIONS_NOT_SUPPORTED: u8 = 0x9E;
    /// MQTT 3.1.1 CONNACK: unacceptable protocol version.
    pub const V3_UNACCEPTABLE_PROTOCOL_VERSION: u8 = 0x01;
    /// MQTT 3.1.1 CONNACK: identifier rejected.
    pub const V3_IDENTIFIER_REJECTED: u8 = 0x02;
    /// MQTT 3.1.1 CONNACK: server unavailable.
    pub const V3_SERVER_UNAVAILABLE: u8 = 0x03;
    /// MQTT 3.1.1 CONNACK: bad user name or password.
    pub const V3_BAD_USER_NAME_OR_PASSWORD: u8 = 0x04;
    /// MQTT 3.1.1 CONNACK: not authorized.
    pub const V3_NOT_AUTHORIZED: u8 = 0x05;
}

/// Why bytes from a client were refused. Every variant ends the connection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The bytes do not form a valid packet.
    #[error("malformed packet: {0}")]
    Malformed(&'static str),
    /// A well-formed packet that the protocol does not allow here.
    #[error("protocol error: {0}")]
    Protocol(&'static str),
    /// The packet is larger than the broker accepts.
    #[error("packet of {size} bytes exceeds the maximum of {max} bytes")]
    TooLarge {
        /// Size of the whole packet, header included.
        size: usize,
        /// The limit in force.
        max: usize,
    },
    /// A CONNECT with a protocol name or level this broker does not speak.
    #[error("unsupported protocol level {level}")]
    UnsupportedProtocol {
        /// The protocol level the client asked for.
        level: u8,
    },
    /// A PUBLISH used a topic alias; this broker allows none.
    #[error("topic alias used but none allowed")]
    TopicAliasInvalid,
}

impl DecodeError {
    /// The MQTT 5 reason code that tells a client why it is disconnected.
    #[must_use]
    pub fn reason_code(&self) -> u8 {
        match self {
            DecodeError::Malformed(_) => reason::MALFORMED_PACKET,
            DecodeError::Protocol(_) => reason::PROTOCOL_ERROR,
            DecodeError::TooLarge { .. } => reason::PACKET_TOO_LARGE,
            DecodeError::UnsupportedProtocol { .. } => reason::UNSUPPORTED_PROTOCOL_VERSION,
            DecodeError::TopicAliasInvalid => reason::TOPIC_ALIAS_INVALID,
        }
    }
}

/// A packet sent by a client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientPacket {
    /// CONNECT.
    Connect(Box<Connect>),
    /// PUBLISH.
    Publish(Publish),
    /// PUBACK for a QoS 1 message the broker sent.
    PubAck {
        /// The acknowledged packet identifier.
        packet_id: u16,
    },
    /// PUBREL, the second step of a QoS 2 publish from the client.
    PubRel {
        /// The released packet identifier.
        packet_id: u16,
    },
    /// PUBREC for a QoS 2 message the broker sent: received.
    PubRec {
        /// The packet identifier.
        packet_id: u16,
        /// Reason code (MQTT 5; 0 otherwise): 0x80 and above, the client
        /// refused the message and the exchange ends there.
        reason: u8,
    },
    /// PUBCOMP, the end of a QoS 2 message the broker sent.
    PubComp {
        /// The packet identifier.
        packet_id: u16,
    },
    /// SUBSCRIBE.
    Subscribe(Subscribe),
    /// UNSUBSCRIBE.
    Unsubscribe(Unsubscribe),
    /// PINGREQ.
    PingReq,
    /// DISCONNECT.
    Disconnect(Disconnect),
}

/// A CONNECT packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connect {
    /// The protocol version, which fixes the encoding of every later packet.
    pub version: ProtocolVersion,
    /// Clean Session (3.1.1) or Clean Start (5).
    pub clean_start: bool,
    /// Keep alive in seconds; 0 turns the keep-alive check off.
    pub keep_alive: u16,
    /// The client identifier; may be empty.
    pub client_id: String,
    /// The Will Message, if any.
    pub will: Option<LastWill>,
    /// User name.
    pub username: Option<String>,
    /// Password.
    pub password: Option<Bytes>,
    /// MQTT 5 properties (defaults for older versions).
    pub properties: ConnectProperties,
}

/// CONNECT properties (MQTT 5); an MQTT 3.1.1 client gets the defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectProperties {
    /// Session Expiry Interval in seconds; `u32::MAX` means never.
    pub session_expiry_interval: u32,
    /// How many unacknowledged QoS 1 and 2 messages the client accepts.
    pub receive_maximum: u16,
    /// The largest packet the client accepts.
    pub maximum_packet_size: Option<u32>,
    /// Whether an authentication method was given (not supported).
    pub authentication_method: Option<String>,
    /// Request Response Information: the client wants the CONNACK to say
    /// where responses may be published.
    pub request_response_information: bool,
    /// User properties.
    pub user_properties: Vec<(String, String)>,
}

impl Default for ConnectProperties {
    fn default() -> Self {
        ConnectProperties {
            session_expiry_interval: 0,
            receive_maximum: u16::MAX,
            maximum_packet_size: None,
            authentication_method: None,
            request_response_information: false,
            user_properties: Vec::new(),
        }
    }
}

/// A Will Message from CONNECT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastWill {
    /// Topic to publish on.
    pub topic: String,
    /// Payload.
    pub payload: Bytes,
    /// QoS.
    pub qos: QoS,
    /// Whether the message is retained.
    pub retain: bool,
    /// Will Delay Interval in seconds (MQTT 5).
    pub delay_interval: u32,
    /// Properties the will is published with (MQTT 5).
    pub properties: PublishProperties,
}

/// A PUBLISH packet, from a client or to one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Publish {
    /// Redelivery of an earlier attempt.
    pub dup: bool,
    /// QoS.
    pub qos: QoS,
    /// Retain flag.
    pub retain: bool,
    /// Topic name (never contains wildcards).
    pub topic: String,
    /// Packet identifier; 0 for QoS 0.
    pub packet_id: u16,
    /// Payload.
    pub payload: Bytes,
    /// MQTT 5 properties.
    pub properties: PublishProperties,
}

/// PUBLISH and Will properties (MQTT 5).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PublishProperties {
    /// Payload Format Indicator (0 bytes, 1 UTF-8).
    pub payload_format_indicator: Option<u8>,
    /// Message Expiry Interval in seconds.
    pub message_expiry_interval: Option<u32>,
    /// Response Topic.
    pub response_topic: Option<String>,
    /// Correlation Data.
    pub correlation_data: Option<Bytes>,
    /// User properties, in order.
    pub user_properties: Vec<(String, String)>,
    /// Subscription Identifiers (only on PUBLISH from the broker).
    pub subscription_identifiers: Vec<u32>,
    /// Content Type.
    pub content_type: Option<String>,
}

/// A SUBSCRIBE packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscribe {
    /// Packet identifier.
    pub packet_id: u16,
    /// Subscription Identifier (MQTT 5).
    pub subscription_identifier: Option<u32>,
    /// Topic filters with their options, in order (at least one).
    pub filters: Vec<(String, SubscriptionOptions)>,
}

/// Options of one subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubscriptionOptions {
    /// Maximum QoS requested.
    pub qos: QoS,
    /// Do not send the client its own messages (MQTT 5).
    pub no_local: bool,
    /// Keep the retain flag of forwarded messages (MQTT 5).
    pub retain_as_published: bool,
    /// When to send retained messages (MQTT 5).
    pub retain_handling: RetainHandling,
}

/// When retained messages are sent for a new subscription (MQTT 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetainHandling {
    /// On every subscribe (the MQTT 3.1.1 behaviour).
    OnSubscribe,
    /// Only if the subscription did not exist.
    OnNewSubscription,
    /// Never.
    Never,
}

/// An UNSUBSCRIBE packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsubscribe {
    /// Packet identifier.
    pub packet_id: u16,
    /// Topic filters (at least one).
    pub filters: Vec<String>,
}

/// A DISCONNECT packet from a client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Disconnect {
    /// Reason code; 0 for MQTT 3.1.1.
    pub reason: u8,
    /// New Session Expiry Interval (MQTT 5).
    pub session_expiry_interval: Option<u32>,
}

/// A packet the broker sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerPacket {
    /// CONNACK.
    ConnAck(ConnAck),
    /// PUBLISH.
    Publish(Publish),
    /// PUBACK for a client's QoS 1 message.
    PubAck {
        /// Packet identifier.
        packet_id: u16,
        /// Reason code (MQTT 5 only).
        reason: u8,
    },
    /// PUBREC for a client's QoS 2 message.
    PubRec {
        /// Packet identifier.
        packet_id: u16,
        /// Reason code (MQTT 5 only).
        reason: u8,
    },
    /// PUBCOMP, the end of a client's QoS 2 publish.
    PubComp {
        /// Packet identifier.
        packet_id: u16,
        /// Reason code (MQTT 5 only).
        reason: u8,
    },
    /// PUBREL, the second step of a QoS 2 message the broker sent.
    PubRel {
        /// Packet identifier.
        packet_id: u16,
        /// Reason code (MQTT 5 only).
        reason: u8,
    },
    /// SUBACK.
    SubAck {
        /// Packet identifier.
        packet_id: u16,
        /// One code per filter: granted QoS or a failure code.
        codes: Vec<u8>,
    },
    /// UNSUBACK.
    UnsubAck {
        /// Packet identifier.
        packet_id: u16,
        /// One reason code per filter (MQTT 5 only).
        codes: Vec<u8>,
    },
    /// PINGRESP.
    PingResp,
    /// DISCONNECT from the server (MQTT 5 only; never sent to older clients).
    Disconnect {
        /// Reason code.
        reason: u8,
    },
}

/// A CONNACK packet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnAck {
    /// Whether an existing session was resumed.
    pub session_present: bool,
    /// Return code (3.1.1) or reason code (5).
    pub code: u8,
    /// Client identifier the broker chose for an empty one (MQTT 5).
    pub assigned_client_identifier: Option<String>,
    /// The largest packet the broker accepts (MQTT 5).
    pub maximum_packet_size: Option<u32>,
    /// Session Expiry Interval the broker uses when it differs (MQTT 5).
    pub session_expiry_interval: Option<u32>,
    /// Tell the client that shared subscriptions are not available (MQTT 5).
    pub shared_subscription_unavailable: bool,
    /// The most unacknowledged QoS 2 messages the client may send (MQTT 5).
    pub receive_maximum: Option<u16>,
    /// Response Information, for a client that asked for it (MQTT 5): the
    /// topic prefix under which responses are honoured.
    pub response_information: Option<String>,
}

// --- decoding -------------------------------------------------------------

/// Decodes one packet from the front of `buf`, removing its bytes.
///
/// `version` is `None` until CONNECT has been received: then only CONNECT is
/// accepted. Returns `Ok(None)` when `buf` does not yet hold a whole packet;
/// the size limit is checked as soon as the fixed header is complete, before
/// the body arrives.
///
/// # Errors
///
/// A [`DecodeError`] when the bytes are not an acceptable packet; the
/// connection must then be closed.
pub fn decode(
    buf: &mut BytesMut,
    version: Option<ProtocolVersion>,
    max_packet_size: usize,
) -> Result<Option<ClientPacket>, DecodeError> {
    // Refuse a first packet that is not CONNECT from its first byte, rather
    // than wait for a body that a non-MQTT client will never send.
    if version.is_none() && buf.first().is_some_and(|b| *b != 0x10) {
        return Err(match buf[0] >> 4 {
            1 => DecodeError::Malformed("CONNECT with flags set"),
            _ => DecodeError::Protocol("first packet is not CONNECT"),
        });
    }
    let Some((remaining, header_len)) = read_fixed_header(buf)? else {
        return Ok(None);
    };
    let size = header_len + remaining;
    if size > max_packet_size {
        return Err(DecodeError::TooLarge {
            size,
            max: max_packet_size,
        });
    }
    if buf.len() < size {
        buf.reserve(size - buf.len());
        return Ok(None);
    }
    let first = buf[0];
    let mut packet = buf.split_to(size).freeze();
    packet.advance(header_len);
    let mut r = Reader(packet);
    let kind = first >> 4;
    let flags = first & 0x0F;
    let Some(version) = version else {
        // The first byte was checked above: this is a CONNECT.
        return decode_connect(&mut r).map(Some);
    };
    let v5 = version.is_v5();
    let packet = match (kind, flags) {
        (1, 0) => return Err(DecodeError::Protocol("second CONNECT")),
        (3, _) => ClientPacket::Publish(decode_publish(&mut r, flags, v5)?),
        (4, 0) => ClientPacket::PubAck {
            packet_id: decode_ack(&mut r, v5)?,
        },
        (6, 2) => ClientPacket::PubRel {
            packet_id: decode_ack(&mut r, v5)?,
        },
        (5, 0) => {
            let (packet_id, reason) = decode_ack_with_reason(&mut r, v5)?;
            ClientPacket::PubRec { packet_id, reason }
        }
        (7, 0) => ClientPacket::PubComp {
            packet_id: decode_ack(&mut r, v5)?,
        },
        (8, 2) => ClientPacket::Subscribe(decode_subscribe(&mut r, v5)?),
        (10, 2) => ClientPacket::Unsubscribe(decode_unsubscribe(&mut r, v5)?),
        (12, 0) => ClientPacket::PingReq,
        (14, 0) => ClientPacket::Disconnect(decode_disconnect(&mut r, v5)?),
        (15, 0) if v5 => {
            return Err(DecodeError::Protocol(
                "AUTH without an authentication method",
            ));
        }
        (2 | 9 | 11 | 13, 0) => {
            return Err(DecodeError::Protocol("a server-to-client packet"));
        }
        _ => return Err(DecodeError::Malformed("unknown packet type or flags")),
    };
    r.finish()?;
    Ok(Some(packet))
}

/// Parses the fixed header: `(remaining length, header length)`, or `None`
/// when incomplete.
fn read_fixed_header(buf: &[u8]) -> Result<Option<(usize, usize)>, DecodeError> {
    let mut value = 0usize;
    for (i, &byte) in buf.iter().skip(1).take(4).enumerate() {
        value |= usize::from(byte & 0x7F) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok(Some((value, i + 2)));
        }
    }
    if buf.len() >= 5 {
        Err(DecodeError::Malformed(
            "remaining length longer than 4 bytes",
        ))
    } else {
        Ok(None)
    }
}

/// Reads the body of one packet; every read checks the bounds.
struct Reader(Bytes);

impl Reader {
    fn need(&self, n: usize) -> Result<(), DecodeError> {
        if self.0.remaining() < n {
            Err(DecodeError::Malformed("packet shorter than its contents"))
        } else {
            Ok(())
        }
    }
    fn u8(&mut self) -> Result<u8, DecodeError> {
        self.need(1)?;
        Ok(self.0.get_u8())
    }
    fn u16(&mut self) -> Result<u16, DecodeError> {
        self.need(2)?;
        Ok(self.0.get_u16())
    }
    fn u32(&mut self) -> Result<u32, DecodeError> {
        self.need(4)?;
        Ok(self.0.get_u32())
    }
    fn varint(&mut self) -> Result<u32, DecodeError> {
        let mut value = 0u32;
        for i in 0..4 {
            let byte = self.u8()?;
            value |= u32::from(byte & 0x7F) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(DecodeError::Malformed(
            "variable byte integer longer than 4 bytes",
        ))
    }
    fn binary(&mut self) -> Result<Bytes, DecodeError> {
        let len = usize::from(self.u16()?);
        self.need(len)?;
        Ok(self.0.split_to(len))
    }
    fn string(&mut self) -> Result<String, DecodeError> {
        let bytes = self.binary()?;
        let s = std::str::from_utf8(&bytes)
            .map_err(|_| DecodeError::Malformed("string is not valid UTF-8"))?;
        if s.contains('\0') {
            return Err(DecodeError::Malformed("string contains U+0000"));
        }
        Ok(s.to_owned())
    }
    fn rest(&mut self) -> Bytes {
        self.0.split_to(self.0.len())
    }
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    fn finish(&self) -> Result<(), DecodeError> {
        if self.is_empty() {
            Ok(())
        } else {
            Err(DecodeError::Malformed("trailing bytes after the packet"))
        }
    }
}

/// A decoded MQTT 5 property value; the identifier fixes its type.
enum Prop {
    Byte(u8),
    U16(u16),
    U32(u32),
    Var(u32),
    Str(String),
    Bin(Bytes),
    Pair(String, String),
}

/// Reads a property list, refusing identifiers not in `allowed` and
/// repeated ones (only User Property may repeat).
fn read_properties(r: &mut Reader, allowed: &[u8]) -> Result<Vec<(u8, Prop)>, DecodeError> {
    let len = r.varint()? as usize;
    r.need(len)?;
    let mut sub = Reader(r.0.split_to(len));
    let mut out: Vec<(u8, Prop)> = Vec::new();
    while !sub.is_empty() {
        let id = sub.varint()?;
        let id = u8::try_from(id).map_err(|_| DecodeError::Malformed("unknown property"))?;
        if !allowed.contains(&id) {
            return Err(DecodeError::Malformed(
                "property not allowed in this packet",
            ));
        }
        if id != 0x26 && out.iter().any(|(seen, _)| *seen == id) {
            return Err(DecodeError::Protocol("property included twice"));
        }
        let value = match id {
            0x01 | 0x17 | 0x19 | 0x24 | 0x25 | 0x28 | 0x29 | 0x2A => Prop::Byte(sub.u8()?),
            0x13 | 0x21 | 0x22 | 0x23 => Prop::U16(sub.u16()?),
            0x02 | 0x11 | 0x18 | 0x27 => Prop::U32(sub.u32()?),
            0x0B => Prop::Var(sub.varint()?),
            0x03 | 0x08 | 0x12 | 0x15 | 0x1A | 0x1C | 0x1F => Prop::Str(sub.string()?),
            0x09 | 0x16 => Prop::Bin(sub.binary()?),
            0x26 => Prop::Pair(sub.string()?, sub.string()?),
            _ => return Err(DecodeError::Malformed("unknown property")),
        };
        out.push((id, value));
    }
    Ok(out)
}

/// Fills publish properties; shared by PUBLISH and the Will.
fn publish_property(
    props: &mut PublishProperties,
    id: u8,
    value: Prop,
) -> Result<Option<Prop>, DecodeError> {
    match (id, value) {
        (0x01, Prop::Byte(b)) => {
            if b > 1 {
                return Err(DecodeError::Protocol("payload format indicator above 1"));
            }
            props.payload_format_indicator = Some(b);
        }
        (0x02, Prop::U32(v)) => props.message_expiry_interval = Some(v),
        (0x03, Prop::Str(s)) => props.content_type = Some(s),
        (0x08, Prop::Str(s)) => {
            if s.is_empty() || s.contains(['+', '#']) {
                return Err(DecodeError::Protocol("response topic is not a topic name"));
            }
            props.response_topic = Some(s);
        }
        (0x09, Prop::Bin(b)) => props.correlation_data = Some(b),
        (0x26, Prop::Pair(k, v)) => props.user_properties.push((k, v)),
        (_, other) => return Ok(Some(other)),
    }
    Ok(None)
}

fn decode_connect(r: &mut Reader) -> Result<ClientPacket, DecodeError> {
    let name = r.binary()?;
    let level = r.u8()?;
    let version = match (&name[..], level) {
        (b"MQTT", 4) => ProtocolVersion::V3_1_1,
        (b"MQTT", 5) => ProtocolVersion::V5,
        (b"MQIsdp", 3) => ProtocolVersion::V3_1,
        _ => return Err(DecodeError::UnsupportedProtocol { level }),
    };
    let v5 = version.is_v5();
    let flags = r.u8()?;
    if flags & 0x01 != 0 {
        return Err(DecodeError::Malformed("reserved CONNECT flag set"));
    }
    let clean_start = flags & 0x02 != 0;
    let will_flag = flags & 0x04 != 0;
    let will_qos = (flags >> 3) & 0x03;
    let will_retain = flags & 0x20 != 0;
    let has_password = flags & 0x40 != 0;
    let has_username = flags & 0x80 != 0;
    if !will_flag && (will_qos != 0 || will_retain) {
        return Err(DecodeError::Malformed("will QoS or retain without a will"));
    }
    let will_qos = QoS::from_bits(will_qos).ok_or(DecodeError::Malformed("will QoS 3"))?;
    if !v5 && has_password && !has_username {
        return Err(DecodeError::Malformed("password without user name"));
    }
    let keep_alive = r.u16()?;
    let mut properties = ConnectProperties::default();
    if v5 {
        for (id, value) in
            read_properties(r, &[0x11, 0x21, 0x27, 0x22, 0x19, 0x17, 0x26, 0x15, 0x16])?
        {
            match (id, value) {
                (0x11, Prop::U32(v)) => properties.session_expiry_interval = v,
                (0x21, Prop::U16(0)) => {
                    return Err(DecodeError::Protocol("receive maximum of 0"));
                }
                (0x21, Prop::U16(v)) => properties.receive_maximum = v,
                (0x27, Prop::U32(0)) => {
                    return Err(DecodeError::Protocol("maximum packet size of 0"));
                }
                (0x27, Prop::U32(v)) => properties.maximum_packet_size = Some(v),
                (0x17 | 0x19, Prop::Byte(b)) if b > 1 => {
                    return Err(DecodeError::Protocol("request flag above 1"));
                }
                (0x19, Prop::Byte(b)) => properties.request_response_information = b == 1,
                (0x15, Prop::Str(s)) => properties.authentication_method = Some(s),
                (0x26, Prop::Pair(k, v)) => properties.user_properties.push((k, v)),
                // Topic Alias Maximum, Request Problem Information and
                // authentication data are valid but change nothing: this
                // broker never sends topic aliases or problem details.
                _ => {}
            }
        }
    }
    let client_id = r.string()?;
    let will = if will_flag {
        let mut props = PublishProperties::default();
        let mut delay_interval = 0;
        if v5 {
            for (id, value) in read_properties(r, &[0x18, 0x01, 0x02, 0x03, 0x08, 0x09, 0x26])? {
                if let Some(Prop::U32(v)) = publish_property(&mut props, id, value)? {
                    delay_interval = v;
                }
            }
        }
        let topic = r.string()?;
        crate::topic::validate_name(&topic)
            .map_err(|_| DecodeError::Malformed("will topic is not a valid topic name"))?;
        let payload = r.binary()?;
        Some(LastWill {
            topic,
            payload,
            qos: will_qos,
            retain: will_retain,
            delay_interval,
            properties: props,
        })
    } else {
        None
    };
    let username = if has_username {
        Some(r.string()?)
    } else {
        None
    };
    let password = if has_password {
        Some(r.binary()?)
    } else {
        None
    };
    r.finish()?;
    Ok(ClientPacket::Connect(Box::new(Connect {
        version,
        clean_start,
        keep_alive,
        client_id,
        will,
        username,
        password,
        properties,
    })))
}

fn decode_publish(r: &mut Reader, flags: u8, v5: bool) -> Result<Publish, DecodeError> {
    let dup = flags & 0x08 != 0;
    let qos = QoS::from_bits((flags >> 1) & 0x03).ok_or(DecodeError::Malformed("PUBLISH QoS 3"))?;
    let retain = flags & 0x01 != 0;
    if qos == QoS::AtMostOnce && dup {
        return Err(DecodeError::Malformed("DUP set on a QoS 0 PUBLISH"));
    }
    let topic = r.string()?;
    let packet_id = if qos == QoS::AtMostOnce {
        0
    } else {
        match r.u16()? {
            0 => return Err(DecodeError::Malformed("packet identifier 0")),
            id => id,
        }
    };
    let mut properties = PublishProperties::default();
    if v5 {
        for (id, value) in read_properties(r, &[0x01, 0x02, 0x23, 0x08, 0x09, 0x26, 0x0B, 0x03])? {
            match publish_property(&mut properties, id, value)? {
                None => {}
                Some(Prop::U16(_)) => return Err(DecodeError::TopicAliasInvalid),
                Some(_) => {
                    return Err(DecodeError::Protocol(
                        "subscription identifier in a PUBLISH from a client",
                    ));
                }
            }
        }
    }
    // Checked after the properties so that a topic alias with an empty
    // topic is reported as the alias problem it is.
    crate::topic::validate_name(&topic)
        .map_err(|_| DecodeError::Malformed("PUBLISH topic is not a valid topic name"))?;
    Ok(Publish {
        dup,
        qos,
        retain,
        topic,
        packet_id,
        payload: r.rest(),
        properties,
    })
}

/// PUBACK and PUBREL: a packet identifier, and in MQTT 5 an optional reason
/// code and properties, which the broker does not act on.
fn decode_ack(r: &mut Reader, v5: bool) -> Result<u16, DecodeError> {
    decode_ack_with_reason(r, v5).map(|(packet_id, _)| packet_id)
}

/// An acknowledgement's packet identifier and reason code (0, success,
/// when left out, and always before MQTT 5).
fn decode_ack_with_reason(r: &mut Reader, v5: bool) -> Result<(u16, u8), DecodeError> {
    let packet_id = r.u16()?;
    if packet_id == 0 {
        return Err(DecodeError::Malformed("packet identifier 0"));
    }
    let mut reason = 0;
    if v5 && !r.is_empty() {
        reason = r.u8()?;
        if !r.is_empty() {
            read_properties(r, &[0x1F, 0x26])?;
        }
    }
    Ok((packet_id, reason))
}

fn decode_subscribe(r: &mut Reader, v5: bool) -> Result<Subscribe, DecodeError> {
    let packet_id = r.u16()?;
    if packet_id == 0 {
        return Err(DecodeError::Malformed("packet identifier 0"));
    }
    let mut subscription_identifier = None;
    if v5 {
        for (id, value) in read_properties(r, &[0x0B, 0x26])? {
            match (id, value) {
                (0x0B, Prop::Var(0)) => {
                    return Err(DecodeError::Protocol("subscription identifier 0"));
                }
                (0x0B, Prop::Var(v)) => subscription_identifier = Some(v),
                _ => {}
            }
        }
    }
    let mut filters = Vec::new();
    while !r.is_empty() {
        let filter = r.string()?;
        let options = r.u8()?;
        let reserved = if v5 { 0xC0 } else { 0xFC };
        if options & reserved != 0 {
            return Err(DecodeError::Malformed(
                "reserved subscription option bits set",
            ));
        }
        let qos =
            QoS::from_bits(options & 0x03).ok_or(DecodeError::Malformed("subscription QoS 3"))?;
        let retain_handling = match (options >> 4) & 0x03 {
            0 => RetainHandling::OnSubscribe,
            1 => RetainHandling::OnNewSubscription,
            2 => RetainHandling::Never,
            _ => return Err(DecodeError::Malformed("retain handling 3")),
        };
        filters.push((
            filter,
            SubscriptionOptions {
                qos,
                no_local: options & 0x04 != 0,
                retain_as_published: options & 0x08 != 0,
                retain_handling,
            },
        ));
    }
    if filters.is_empty() {
        return Err(DecodeError::Protocol("SUBSCRIBE without a topic filter"));
    }
    Ok(Subscribe {
        packet_id,
        subscription_identifier,
        filters,
    })
}

fn decode_unsubscribe(r: &mut Reader, v5: bool) -> Result<Unsubscribe, DecodeError> {
    let packet_id = r.u16()?;
    if packet_id == 0 {
        return Err(DecodeError::Malformed("packet identifier 0"));
    }
    if v5 {
        read_properties(r, &[0x26])?;
    }
    let mut filters = Vec::new();
    while !r.is_empty() {
        filters.push(r.string()?);
    }
    if filters.is_empty() {
        return Err(DecodeError::Protocol("UNSUBSCRIBE without a topic filter"));
    }
    Ok(Unsubscribe { packet_id, filters })
}

fn decode_disconnect(r: &mut Reader, v5: bool) -> Result<Disconnect, DecodeError> {
    let mut disconnect = Disconnect {
        reason: reason::SUCCESS,
        session_expiry_interval: None,
    };
    if v5 && !r.is_empty() {
        disconnect.reason = r.u8()?;
        if !r.is_empty() {
            for (id, value) in read_properties(r, &[0x11, 0x1F, 0x26])? {
                if let (0x11, Prop::U32(v)) = (id, value) {
                    disconnect.session_expiry_interval = Some(v);
                }
            }
        }
    }
    Ok(disconnect)
}

// --- encoding -------------------------------------------------------------

/// Where encoded bytes go: a buffer, or a counter that measures a packet
/// before it is written (the Remaining Length comes first on the wire).
trait Sink {
    fn put(&mut self, bytes: &[u8]);
    fn byte(&mut self, b: u8) {
        self.put(&[b]);
    }
    fn u16(&mut self, v: u16) {
        self.put(&v.to_be_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.put(&v.to_be_bytes());
    }
    fn varint(&mut self, mut v: usize) {
        loop {
            let mut byte = (v & 0x7F) as u8;
            v >>= 7;
            if v > 0 {
                byte |= 0x80;
            }
            self.byte(byte);
            if v == 0 {
                break;
            }
        }
    }
    /// A length-prefixed string or binary value. Callers pass values that
    /// came from a packet, where the same u16 prefix bounded them.
    fn binary(&mut self, b: &[u8]) {
        let len = u16::try_from(b.len()).unwrap_or(u16::MAX);
        self.u16(len);
        self.put(&b[..usize::from(len)]);
    }
}

impl Sink for BytesMut {
    fn put(&mut self, bytes: &[u8]) {
        self.put_slice(bytes);
    }
}

#[derive(Default)]
struct Counter(usize);

impl Sink for Counter {
    fn put(&mut self, bytes: &[u8]) {
        self.0 += bytes.len();
    }
}

fn varint_len(v: usize) -> usize {
    match v {
        0..=127 => 1,
        128..=16_383 => 2,
        16_384..=2_097_151 => 3,
        _ => 4,
    }
}

/// Writes a property list, length first.
fn write_properties<S: Sink>(s: &mut S, write: impl Fn(&mut dyn Sink)) {
    let mut counter = Counter::default();
    write(&mut counter);
    s.varint(counter.0);
    write(s);
}

impl dyn Sink + '_ {
    fn prop_byte(&mut self, id: u8, v: u8) {
        self.byte(id);
        self.byte(v);
    }
    fn prop_u16(&mut self, id: u8, v: u16) {
        self.byte(id);
        self.u16(v);
    }
    fn prop_u32(&mut self, id: u8, v: u32) {
        self.byte(id);
        self.u32(v);
    }
    fn prop_str(&mut self, id: u8, v: &str) {
        self.byte(id);
        self.binary(v.as_bytes());
    }
    fn prop_bin(&mut self, id: u8, v: &[u8]) {
        self.byte(id);
        self.binary(v);
    }
}

impl ServerPacket {
    /// Appends the packet, encoded for `version`, to `buf`.
    pub fn encode(&self, version: ProtocolVersion, buf: &mut BytesMut) {
        let mut counter = Counter::default();
        self.write_body(version, &mut counter);
        buf.reserve(1 + varint_len(counter.0) + counter.0);
        buf.put_u8(self.first_byte());
        Sink::varint(buf, counter.0);
        self.write_body(version, buf);
    }

    /// The size of the encoded packet, header included; compared with a
    /// client's Maximum Packet Size before sending.
    #[must_use]
    pub fn encoded_len(&self, version: ProtocolVersion) -> usize {
        let mut counter = Counter::default();
        self.write_body(version, &mut counter);
        1 + varint_len(counter.0) + counter.0
    }

    fn first_byte(&self) -> u8 {
        match self {
            ServerPacket::ConnAck(_) => 0x20,
            ServerPacket::Publish(p) => {
                0x30 | (u8::from(p.dup) << 3) | ((p.qos as u8) << 1) | u8::from(p.retain)
            }
            ServerPacket::PubAck { .. } => 0x40,
            ServerPacket::PubRec { .. } => 0x50,
            ServerPacket::PubComp { .. } => 0x70,
            ServerPacket::PubRel { .. } => 0x62,
            ServerPacket::SubAck { .. } => 0x90,
            ServerPacket::UnsubAck { .. } => 0xB0,
            ServerPacket::PingResp => 0xD0,
            ServerPacket::Disconnect { .. } => 0xE0,
        }
    }

    fn write_body(&self, version: ProtocolVersion, s: &mut impl Sink) {
        let v5 = version.is_v5();
        match self {
            ServerPacket::ConnAck(ack) => {
                s.byte(u8::from(ack.session_present));
                s.byte(ack.code);
                if v5 {
                    write_properties(s, |p| {
                        if let Some(v) = ack.session_expiry_interval {
                            p.prop_u32(0x11, v);
                        }
                        if let Some(v) = ack.receive_maximum {
                            p.prop_u16(0x21, v);
                        }
                        if let Some(id) = &ack.assigned_client_identifier {
                            p.prop_str(0x12, id);
                        }
                        if let Some(v) = ack.maximum_packet_size {
                            p.prop_u32(0x27, v);
                        }
                        if let Some(info) = &ack.response_information {
                            p.prop_str(0x1A, info);
                        }
                        if ack.shared_subscription_unavailable {
                            p.prop_byte(0x2A, 0);
                        }
                    });
                }
            }
            ServerPacket::Publish(p) => {
                s.binary(p.topic.as_bytes());
                if p.qos != QoS::AtMostOnce {
                    s.u16(p.packet_id);
                }
                if v5 {
                    let props = &p.properties;
                    write_properties(s, |w| {
                        if let Some(v) = props.payload_format_indicator {
                            w.prop_byte(0x01, v);
                        }
                        if let Some(v) = props.message_expiry_interval {
                            w.prop_u32(0x02, v);
                        }
                        if let Some(v) = &props.content_type {
                            w.prop_str(0x03, v);
                        }
                        if let Some(v) = &props.response_topic {
                            w.prop_str(0x08, v);
                        }
                        if let Some(v) = &props.correlation_data {
                            w.prop_bin(0x09, v);
                        }
                        for id in &props.subscription_identifiers {
                            w.byte(0x0B);
                            w.varint(*id as usize);
                        }
                        for (k, v) in &props.user_properties {
                            w.byte(0x26);
                            w.binary(k.as_bytes());
                            w.binary(v.as_bytes());
                        }
                    });
                }
                s.put(&p.payload);
            }
            ServerPacket::PubAck { packet_id, reason }
            | ServerPacket::PubRec { packet_id, reason }
            | ServerPacket::PubComp { packet_id, reason }
            | ServerPacket::PubRel { packet_id, reason } => {
                s.u16(*packet_id);
                // MQTT 5 lets a success code and empty properties be left out.
                if v5 && *reason != reason::SUCCESS {
                    s.byte(*reason);
                }
            }
            ServerPacket::SubAck { packet_id, codes } => {
                s.u16(*packet_id);
                if v5 {
                    s.varint(0);
                }
                s.put(codes);
            }
            ServerPacket::UnsubAck { packet_id, codes } => {
                s.u16(*packet_id);
                if v5 {
                    s.varint(0);
                    s.put(codes);
                }
            }
            ServerPacket::PingResp => {}
            ServerPacket::Disconnect { reason } => {
                if v5 {
                    s.byte(*reason);
                }
            }
        }
    }
}

/// The CONNACK that refuses an unsupported protocol level, in the MQTT 3.1.1
/// form every client version can read.
#[must_use]
pub fn unsupported_protocol_connack() -> [u8; 4] {
    [0x20, 0x02, 0x00, reason::V3_UNACCEPTABLE_PROTOCOL_VERSION]
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: usize = 1 << 20;

    fn decode_all(
        bytes: &[u8],
        version: Option<ProtocolVersion>,
    ) -> Result<Option<ClientPacket>, DecodeError> {
        let mut buf = BytesMut::from(bytes);
        let packet = decode(&mut buf, version, MAX)?;
        assert!(buf.is_empty() || packet.is_none(), "bytes left over");
        Ok(packet)
    }

    /// A CONNECT as `mosquitto_pub -V mqttv311 -i dw --will-topic w --will-payload x` sends it.
    const CONNECT_V311_WILL: &[u8] = &[
        0x10, 20, 0x00, 0x04, b'M', b'Q', b'T', b'T', 0x04, 0x06, 0x00, 0x3C, 0x00, 0x02, b'd',
        b'w', 0x00, 0x01, b'w', 0x00, 0x01, b'x',
    ];

    #[test]
    fn decodes_a_3_1_1_connect_with_will() {
        let Some(ClientPacket::Connect(c)) = decode_all(CONNECT_V311_WILL, None).unwrap() else {
            panic!("not a CONNECT");
        };
        assert_eq!(c.version, ProtocolVersion::V3_1_1);
        assert!(c.clean_start);
        assert_eq!(c.keep_alive, 60);
        assert_eq!(c.client_id, "dw");
        let will = c.will.unwrap();
        assert_eq!((will.topic.as_str(), &will.payload[..]), ("w", &b"x"[..]));
    }

    #[test]
    fn waits_for_a_whole_packet() {
        let mut buf = BytesMut::from(&[0x30, 0x85][..]);
        assert_eq!(
            decode(&mut buf, Some(ProtocolVersion::V3_1_1), MAX),
            Ok(None)
        );
        assert_eq!(buf.len(), 2, "nothing consumed");
    }

    #[test]
    fn refuses_a_packet_too_large_from_its_header_alone() {
        // Remaining length 268,435,455: only the header has arrived.
        let mut buf = BytesMut::from(&[0x30, 0xFF, 0xFF, 0xFF, 0x7F][..]);
        assert!(matches!(
            decode(&mut buf, Some(ProtocolVersion::V3_1_1), MAX),
            Err(DecodeError::TooLarge { .. })
        ));
        let mut buf = BytesMut::from(&[0x30, 0xFF, 0xFF, 0xFF, 0xFF, 0x01][..]);
        assert!(matches!(
            decode(&mut buf, Some(ProtocolVersion::V3_1_1), MAX),
            Err(DecodeError::Malformed(_))
        ));
    }

    #[test]
    fn first_packet_must_be_connect() {
        assert!(matches!(
            decode_all(&[0xC0, 0x00], None),
            Err(DecodeError::Protocol(_))
        ));
        // Known from the first byte, before any length arrives.
        assert!(matches!(
            decode_all(b"G", None),
            Err(DecodeError::Protocol(_))
        ));
    }

    #[test]
    fn refuses_unknown_protocol_levels() {
        let bytes = [0x10, 0x0C, 0, 4, b'M', b'Q', b'T', b'T', 6, 2, 0, 60, 0, 0];
        assert_eq!(
            decode_all(&bytes, None),
            Err(DecodeError::UnsupportedProtocol { level: 6 })
        );
    }

    #[test]
    fn decodes_publish_qos1_with_v5_properties() {
        let mut body = vec![0, 3, b'a', b'/', b'b', 0x12, 0x34];
        // Properties: content type "t", user property ("k","v").
        body.extend_from_slice(&[11, 0x03, 0, 1, b't', 0x26, 0, 1, b'k', 0, 1, b'v']);
        body.extend_from_slice(b"hi");
        let mut bytes = vec![0x32, u8::try_from(body.len()).unwrap()];
        bytes.extend_from_slice(&body);
        let Some(ClientPacket::Publish(p)) = decode_all(&bytes, Some(ProtocolVersion::V5)).unwrap()
        else {
            panic!("not a PUBLISH");
        };
        assert_eq!(p.qos, QoS::AtLeastOnce);
        assert_eq!(p.packet_id, 0x1234);
        assert_eq!(p.properties.content_type.as_deref(), Some("t"));
        assert_eq!(p.properties.user_properties, vec![("k".into(), "v".into())]);
        assert_eq!(&p.payload[..], b"hi");
    }

    #[test]
    fn refuses_bad_publishes() {
        let v = Some(ProtocolVersion::V3_1_1);
        // Wildcard in a topic name.
        assert!(decode_all(&[0x30, 0x03, 0, 1, b'#'], v).is_err());
        // QoS 3.
        assert!(decode_all(&[0x36, 0x05, 0, 1, b'a', 0, 1], v).is_err());
        // Packet identifier 0.
        assert!(decode_all(&[0x32, 0x05, 0, 1, b'a', 0, 0], v).is_err());
        // Topic alias in MQTT 5.
        assert_eq!(
            decode_all(
                &[0x30, 0x07, 0, 1, b'a', 3, 0x23, 0, 1],
                Some(ProtocolVersion::V5)
            ),
            Err(DecodeError::TopicAliasInvalid)
        );
    }

    #[test]
    fn decodes_subscribe_options() {
        // v5, packet id 1, subscription id 7, filter "a/#" with QoS 1,
        // no local, retain handling 2.
        let bytes = [0x82, 0x0B, 0, 1, 2, 0x0B, 7, 0, 3, b'a', b'/', b'#', 0x25];
        let Some(ClientPacket::Subscribe(s)) =
            decode_all(&bytes[..], Some(ProtocolVersion::V5)).unwrap()
        else {
            panic!("not a SUBSCRIBE");
        };
        assert_eq!(s.subscription_identifier, Some(7));
        let (filter, opts) = &s.filters[0];
        assert_eq!(filter, "a/#");
        assert_eq!(opts.qos, QoS::AtLeastOnce);
        assert!(opts.no_local);
        assert_eq!(opts.retain_handling, RetainHandling::Never);
        // The same options byte is malformed in 3.1.1.
        let v3 = [0x82, 0x08, 0, 1, 0, 3, b'a', b'/', b'#', 0x25];
        assert!(decode_all(&v3, Some(ProtocolVersion::V3_1_1)).is_err());
    }

    #[test]
    fn encodes_for_each_version() {
        let ack = ServerPacket::SubAck {
            packet_id: 9,
            codes: vec![1, 0x80],
        };
        let mut buf = BytesMut::new();
        ack.encode(ProtocolVersion::V3_1_1, &mut buf);
        assert_eq!(&buf[..], &[0x90, 4, 0, 9, 1, 0x80]);
        buf.clear();
        ack.encode(ProtocolVersion::V5, &mut buf);
        assert_eq!(&buf[..], &[0x90, 5, 0, 9, 0, 1, 0x80]);
        assert_eq!(ack.encoded_len(ProtocolVersion::V5), 7);

        let connack = ServerPacket::ConnAck(ConnAck {
            assigned_client_identifier: Some("x".into()),
            shared_subscription_unavailable: true,
            ..ConnAck::default()
        });
        buf.clear();
        connack.encode(ProtocolVersion::V5, &mut buf);
        assert_eq!(&buf[..], &[0x20, 9, 0, 0, 6, 0x12, 0, 1, b'x', 0x2A, 0]);

        let connack = ServerPacket::ConnAck(ConnAck {
            code: reason::NOT_AUTHORIZED,
            receive_maximum: Some(64),
            response_information: Some("d/".into()),
            ..ConnAck::default()
        });
        buf.clear();
        connack.encode(ProtocolVersion::V5, &mut buf);
        assert_eq!(
            &buf[..],
            &[0x20, 11, 0, 0x87, 8, 0x21, 0, 64, 0x1A, 0, 2, b'd', b'/']
        );
        buf.clear();
        connack.encode(ProtocolVersion::V3_1_1, &mut buf);
        assert_eq!(&buf[..], &[0x20, 2, 0, 0x87]);
    }

    #[test]
    fn decodes_request_response_information() {
        // MQTT 5 CONNECT, properties: Request Response Information = 1.
        let bytes = [
            0x10, 15, 0, 4, b'M', b'Q', b'T', b'T', 5, 0x02, 0, 60, 2, 0x19, 1, 0, 0,
        ];
        let mut buf = BytesMut::from(&bytes[..]);
        let Ok(Some(ClientPacket::Connect(c))) = decode(&mut buf, None, 1024) else {
            panic!("a CONNECT");
        };
        assert!(c.properties.request_response_information);
    }

    #[test]
    fn encodes_a_large_publish_with_a_multi_byte_length() {
        let publish = ServerPacket::Publish(Publish {
            dup: false,
            qos: QoS::AtLeastOnce,
            retain: true,
            topic: "t".into(),
            packet_id: 1,
            payload: Bytes::from(vec![7u8; 256 * 1024]),
            properties: PublishProperties::default(),
        });
        let mut buf = BytesMut::new();
        publish.encode(ProtocolVersion::V3_1_1, &mut buf);
        assert_eq!(buf.len(), publish.encoded_len(ProtocolVersion::V3_1_1));
        assert_eq!(buf[0], 0x33);
        assert_eq!(read_fixed_header(&buf).unwrap(), Some((256 * 1024 + 5, 4)));
    }
}
