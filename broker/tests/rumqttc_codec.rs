//! Our codec beside the packet codec of `rumqttc` 0.25 (`mqttbytes::v4` and
//! `v5::mqttbytes::v5`), packet by packet, as a server reads them.
//!
//! Issue #12 asked whether the broker could reuse the codec of the MQTT
//! client we already ship instead of its own. This file is the evidence
//! behind the answer in `docs/embedded-broker.md` ("Why our own codec"):
//! each case feeds the same bytes to both and states what each does. Our
//! side is what the broker needs; the `rumqttc` side records the gap. If an
//! upgrade of `rumqttc` makes a case fail, the gap has closed: update the
//! table in the documentation and look at the question again.
//!
//! `rumqttc` is read the way its own `Codec::decode` reads it: an
//! `InsufficientBytes` error means "wait for more bytes". When that error
//! comes from inside a packet that was already taken off the buffer, the
//! packet is lost without an error ([`Rumqttc::Swallowed`]).

use bytes::BytesMut;
use droidwarden_broker::codec::{self, ClientPacket, DecodeError, ProtocolVersion};
use rumqttc::mqttbytes::v4;
use rumqttc::v5::mqttbytes::v5;

const MAX: usize = 1 << 20;

/// What `rumqttc` made of the bytes.
#[derive(Debug, PartialEq, Eq)]
enum Rumqttc {
    /// Decoded into a packet.
    Accepted,
    /// Refused with an error.
    Refused,
    /// Consumed the packet's bytes but reported that more were needed, so a
    /// driver waits for a packet that is gone: no error, no answer.
    Swallowed,
    /// Waits for more bytes without consuming any.
    Waits,
}

/// What our codec made of the bytes.
#[derive(Debug, PartialEq, Eq)]
enum Ours {
    /// Decoded into a packet.
    Accepted,
    /// Refused: the driver closes the connection (MQTT 5 clients are told
    /// why with a DISCONNECT reason code).
    Refused,
}

/// Which module of `rumqttc` a server would hand the bytes to.
#[derive(Debug, Clone, Copy)]
enum Module {
    V4,
    V5,
}

fn rumqttc_reads(module: Module, bytes: &[u8]) -> Rumqttc {
    let mut buf = BytesMut::from(bytes);
    let (ok, insufficient) = match module {
        Module::V4 => match v4::Packet::read(&mut buf, MAX) {
            Ok(_) => (true, false),
            Err(rumqttc::mqttbytes::Error::InsufficientBytes(_)) => (false, true),
            Err(_) => (false, false),
        },
        Module::V5 => match v5::Packet::read(&mut buf, Some(MAX as u32)) {
            Ok(_) => (true, false),
            Err(rumqttc::v5::mqttbytes::Error::InsufficientBytes(_)) => (false, true),
            Err(_) => (false, false),
        },
    };
    match (ok, insufficient) {
        (true, _) => Rumqttc::Accepted,
        (false, true) if buf.len() < bytes.len() => Rumqttc::Swallowed,
        (false, true) => Rumqttc::Waits,
        (false, false) => Rumqttc::Refused,
    }
}

fn ours_reads(version: Option<ProtocolVersion>, bytes: &[u8]) -> (Ours, Option<ClientPacket>) {
    let mut buf = BytesMut::from(bytes);
    match codec::decode(&mut buf, version, MAX) {
        Ok(Some(packet)) => (Ours::Accepted, Some(packet)),
        Ok(None) => panic!("our codec waits for more bytes on a whole packet"),
        Err(_) => (Ours::Refused, None),
    }
}

/// One packet: the fixed header's first byte, the remaining length, the body.
fn packet(first: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![first];
    let mut len = body.len();
    loop {
        let mut byte = u8::try_from(len & 0x7F).unwrap();
        len >>= 7;
        if len > 0 {
            byte |= 0x80;
        }
        out.push(byte);
        if len == 0 {
            break;
        }
    }
    out.extend_from_slice(body);
    out
}

/// A length-prefixed string or binary value.
fn s(value: &[u8]) -> Vec<u8> {
    let mut out = u16::try_from(value.len()).unwrap().to_be_bytes().to_vec();
    out.extend_from_slice(value);
    out
}

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// A CONNECT body: protocol name and level, flags, keep-alive 60, then
/// `rest` (properties for MQTT 5, client id, will, login).
fn connect(name: &[u8], level: u8, flags: u8, rest: &[u8]) -> Vec<u8> {
    packet(0x10, &cat(&[&s(name), &[level, flags, 0, 60], rest]))
}

struct Case {
    name: &'static str,
    /// The version our codec decodes with (`None`: the first packet).
    version: Option<ProtocolVersion>,
    module: Module,
    bytes: Vec<u8>,
    ours: Ours,
    rumqttc: Rumqttc,
}

fn case(
    name: &'static str,
    version: Option<ProtocolVersion>,
    bytes: Vec<u8>,
    ours: Ours,
    rumqttc: Rumqttc,
) -> Case {
    let module = match version {
        Some(ProtocolVersion::V5) => Module::V5,
        Some(_) => Module::V4,
        // A server would pick the module from the CONNECT's protocol level.
        None if bytes.get(8) == Some(&5) => Module::V5,
        None => Module::V4,
    };
    Case {
        name,
        version,
        module,
        bytes,
        ours,
        rumqttc,
    }
}

fn cases() -> Vec<Case> {
    use Ours as O;
    use Rumqttc as R;
    let v3 = Some(ProtocolVersion::V3_1_1);
    let v5 = Some(ProtocolVersion::V5);
    let no_props: &[u8] = &[0];
    vec![
        // --- CONNECT ---------------------------------------------------
        case(
            "MQTT 3.1 CONNECT (MQIsdp, level 3)",
            None,
            connect(b"MQIsdp", 3, 0x02, &s(b"c")),
            O::Accepted,
            R::Refused,
        ),
        case(
            "CONNECT with fixed-header flags 0x1",
            None,
            {
                let mut b = connect(b"MQTT", 4, 0x02, &s(b"c"));
                b[0] = 0x11;
                b
            },
            O::Refused,
            R::Accepted,
        ),
        case(
            "CONNECT reserved flag (bit 0) set",
            None,
            connect(b"MQTT", 4, 0x03, &s(b"c")),
            O::Refused,
            R::Accepted,
        ),
        case(
            "3.1.1 CONNECT: password without user name",
            None,
            connect(b"MQTT", 4, 0x42, &cat(&[&s(b"c"), &s(b"pw")])),
            O::Refused,
            R::Accepted,
        ),
        case(
            "CONNECT: binary (non-UTF-8) password",
            None,
            connect(
                b"MQTT",
                4,
                0xC2,
                &cat(&[&s(b"c"), &s(b"u"), &s(&[0xFF, 0x00])]),
            ),
            O::Accepted,
            R::Refused,
        ),
        case(
            "CONNECT: client id containing U+0000",
            None,
            connect(b"MQTT", 4, 0x02, &s(b"a\0b")),
            O::Refused,
            R::Accepted,
        ),
        case(
            "CONNECT: client id not UTF-8",
            None,
            connect(b"MQTT", 4, 0x02, &s(&[0xC3])),
            O::Refused,
            R::Refused,
        ),
        case(
            "CONNECT: will topic with a wildcard",
            None,
            connect(b"MQTT", 4, 0x06, &cat(&[&s(b"c"), &s(b"a/#"), &s(b"x")])),
            O::Refused,
            R::Accepted,
        ),
        case(
            "CONNECT: trailing bytes after the last field",
            None,
            connect(b"MQTT", 4, 0x02, &cat(&[&s(b"c"), &[1, 2, 3]])),
            O::Refused,
            R::Accepted,
        ),
        case(
            "CONNECT: protocol level 6",
            None,
            connect(b"MQTT", 6, 0x02, &s(b"c")),
            O::Refused,
            R::Refused,
        ),
        case(
            "MQTT 5 CONNECT: will topic not UTF-8",
            None,
            connect(
                b"MQTT",
                5,
                0x06,
                &cat(&[no_props, &s(b"c"), no_props, &s(&[0xFF]), &s(b"x")]),
            ),
            O::Refused,
            R::Accepted,
        ),
        case(
            "MQTT 5 CONNECT: Receive Maximum 0",
            None,
            connect(b"MQTT", 5, 0x02, &cat(&[&[3, 0x21, 0, 0], &s(b"c")])),
            O::Refused,
            R::Accepted,
        ),
        case(
            "MQTT 5 CONNECT: Request Response Information 2",
            None,
            connect(b"MQTT", 5, 0x02, &cat(&[&[2, 0x19, 2], &s(b"c")])),
            O::Refused,
            R::Accepted,
        ),
        case(
            "MQTT 5 CONNECT: Session Expiry Interval twice",
            None,
            connect(
                b"MQTT",
                5,
                0x02,
                &cat(&[&[10, 0x11, 0, 0, 0, 1, 0x11, 0, 0, 0, 2], &s(b"c")]),
            ),
            O::Refused,
            R::Accepted,
        ),
        case(
            "MQTT 5 CONNECT: a property running past the property length",
            None,
            // Property length 1, but Session Expiry Interval takes 5 bytes.
            connect(b"MQTT", 5, 0x02, &cat(&[&[1, 0x11, 0, 0, 0, 9], &s(b"c")])),
            O::Refused,
            R::Accepted,
        ),
        // --- after an MQTT 3.1.1 CONNECT ----------------------------------
        case(
            "PUBLISH QoS 0 with DUP set",
            v3,
            packet(0x38, &cat(&[&s(b"a"), b"x"])),
            O::Refused,
            R::Accepted,
        ),
        case(
            "PUBLISH to a topic with a wildcard",
            v3,
            packet(0x30, &cat(&[&s(b"a/#"), b"x"])),
            O::Refused,
            R::Accepted,
        ),
        case(
            "PUBLISH to an empty topic",
            v3,
            packet(0x30, &cat(&[&s(b""), b"x"])),
            O::Refused,
            R::Accepted,
        ),
        case(
            "PUBLISH to a topic containing U+0000",
            v3,
            packet(0x30, &cat(&[&s(b"a\0"), b"x"])),
            O::Refused,
            R::Accepted,
        ),
        case(
            "PUBLISH QoS 3",
            v3,
            packet(0x36, &cat(&[&s(b"a"), &[0, 1]])),
            O::Refused,
            R::Refused,
        ),
        case(
            "SUBSCRIBE with fixed-header flags 0 (must be 2)",
            v3,
            packet(0x80, &cat(&[&[0, 1], &s(b"a"), &[1]])),
            O::Refused,
            R::Accepted,
        ),
        case(
            "3.1.1 SUBSCRIBE: reserved option bits set",
            v3,
            packet(0x82, &cat(&[&[0, 1], &s(b"a"), &[0x25]])),
            O::Refused,
            R::Accepted,
        ),
        case(
            "SUBSCRIBE with packet identifier 0",
            v3,
            packet(0x82, &cat(&[&[0, 0], &s(b"a"), &[1]])),
            O::Refused,
            R::Accepted,
        ),
        case(
            "UNSUBSCRIBE without a topic filter",
            v3,
            packet(0xA2, &[0, 1]),
            O::Refused,
            R::Accepted,
        ),
        case(
            "PUBREL with fixed-header flags 0 (must be 2)",
            v3,
            packet(0x60, &[0, 1]),
            O::Refused,
            R::Accepted,
        ),
        case(
            "PUBACK with trailing bytes",
            v3,
            packet(0x40, &[0, 1, 9]),
            O::Refused,
            R::Accepted,
        ),
        case(
            "PINGREQ with a body",
            v3,
            packet(0xC0, &[0]),
            O::Refused,
            R::Accepted,
        ),
        case(
            "a second CONNECT",
            v3,
            connect(b"MQTT", 4, 0x02, &s(b"c")),
            O::Refused,
            R::Accepted,
        ),
        case(
            "a CONNACK from a client",
            v3,
            packet(0x20, &[0, 0]),
            O::Refused,
            R::Accepted,
        ),
        case(
            "remaining length of five bytes",
            v3,
            vec![0x30, 0xFF, 0xFF, 0xFF, 0xFF, 0x01],
            O::Refused,
            R::Refused,
        ),
        // --- after an MQTT 5 CONNECT --------------------------------------
        case(
            "MQTT 5 DISCONNECT without a body (e0 00: normal disconnection)",
            v5,
            packet(0xE0, &[]),
            O::Accepted,
            R::Refused,
        ),
        case(
            "MQTT 5 DISCONNECT 0x04 (publish the Will), no property length",
            v5,
            packet(0xE0, &[0x04]),
            O::Accepted,
            R::Swallowed,
        ),
        case(
            "MQTT 5 DISCONNECT 0x04 (publish the Will), empty properties",
            v5,
            packet(0xE0, &[0x04, 0]),
            O::Accepted,
            R::Accepted,
        ),
        case(
            "MQTT 5 PUBLISH with a Topic Alias",
            v5,
            packet(0x30, &cat(&[&s(b"a"), &[3, 0x23, 0, 1], b"x"])),
            O::Refused,
            R::Accepted,
        ),
        case(
            "MQTT 5 PUBLISH with a Subscription Identifier from a client",
            v5,
            packet(0x30, &cat(&[&s(b"a"), &[2, 0x0B, 1], b"x"])),
            O::Refused,
            R::Accepted,
        ),
        case(
            "MQTT 5 PUBLISH topic not UTF-8",
            v5,
            packet(0x30, &cat(&[&s(&[0xFF]), no_props, b"x"])),
            O::Refused,
            R::Accepted,
        ),
        case(
            "MQTT 5 PUBLISH Payload Format Indicator 2",
            v5,
            packet(0x30, &cat(&[&s(b"a"), &[2, 0x01, 2], b"x"])),
            O::Refused,
            R::Accepted,
        ),
        case(
            "MQTT 5 PUBLISH Message Expiry Interval twice",
            v5,
            packet(
                0x30,
                &cat(&[&s(b"a"), &[10, 0x02, 0, 0, 0, 1, 0x02, 0, 0, 0, 2], b"x"]),
            ),
            O::Refused,
            R::Accepted,
        ),
        case(
            "MQTT 5 PUBLISH: a property running past the property length",
            v5,
            // Property length 2, Message Expiry Interval takes 5: three
            // bytes of the payload are read as the property's value.
            packet(0x30, &cat(&[&s(b"a"), &[2, 0x02], b"payload"])),
            O::Refused,
            R::Accepted,
        ),
        case(
            "MQTT 5 SUBSCRIBE ending after its packet identifier",
            v5,
            packet(0x82, &[0, 1]),
            O::Refused,
            R::Swallowed,
        ),
        case(
            "MQTT 5 UNSUBSCRIBE ending after its packet identifier",
            v5,
            packet(0xA2, &[0, 1]),
            O::Refused,
            R::Swallowed,
        ),
        case(
            "MQTT 5 PUBLISH ending after its topic",
            v5,
            packet(0x30, &s(b"a")),
            O::Refused,
            R::Swallowed,
        ),
        case(
            "MQTT 5 SUBSCRIBE: reserved option bits 6-7 set",
            v5,
            packet(0x82, &cat(&[&[0, 1], no_props, &s(b"a"), &[0xC1]])),
            O::Refused,
            R::Accepted,
        ),
        case(
            "MQTT 5 SUBSCRIBE: Subscription Identifier 0",
            v5,
            packet(0x82, &cat(&[&[0, 1], &[2, 0x0B, 0], &s(b"a"), &[1]])),
            O::Refused,
            R::Accepted,
        ),
        case(
            "MQTT 5 PUBREC from a client (for a QoS 2 message the broker sent)",
            v5,
            packet(0x50, &[0, 1]),
            O::Accepted,
            R::Accepted,
        ),
        case(
            "MQTT 5 PUBREC from a client: packet identifier 0",
            v5,
            packet(0x50, &[0, 0]),
            O::Refused,
            R::Accepted,
        ),
        case(
            "MQTT 5 AUTH",
            v5,
            packet(0xF0, &[0x18, 0]),
            O::Refused,
            R::Refused,
        ),
        case(
            "MQTT 5 PUBACK: unknown property 0x50",
            v5,
            packet(0x40, &[0, 1, 0, 2, 0x50, 0]),
            O::Refused,
            R::Refused,
        ),
    ]
}

#[test]
fn each_case_reads_as_recorded() {
    let mut wrong = Vec::new();
    for c in cases() {
        let (ours, _) = ours_reads(c.version, &c.bytes);
        let theirs = rumqttc_reads(c.module, &c.bytes);
        if ours != c.ours || theirs != c.rumqttc {
            wrong.push(format!(
                "{}: ours {ours:?} (recorded {:?}), rumqttc {theirs:?} (recorded {:?})",
                c.name, c.ours, c.rumqttc
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "cases that no longer read as recorded:\n{}",
        wrong.join("\n")
    );
}

/// The packet a server most often reads from an MQTT 5 client, `e0 00`, is
/// a normal DISCONNECT; `rumqttc` refuses it, so a broker on its codec
/// would publish the Will of every client that says goodbye properly.
#[test]
fn a_bodyless_mqtt5_disconnect_is_a_normal_disconnection() {
    let (_, packet) = ours_reads(Some(ProtocolVersion::V5), &[0xE0, 0x00]);
    let Some(ClientPacket::Disconnect(d)) = packet else {
        panic!("not a DISCONNECT");
    };
    assert_eq!(d.reason, codec::reason::SUCCESS);
    assert_eq!(rumqttc_reads(Module::V5, &[0xE0, 0x00]), Rumqttc::Refused);
}

/// A property that claims fewer bytes than it has shifts the payload: what
/// `rumqttc` hands on is not what the client sent.
#[test]
fn a_property_past_its_length_does_not_shift_the_payload() {
    let bytes = packet(0x30, &cat(&[&s(b"a"), &[2, 0x02], b"payload"]));
    let mut buf = BytesMut::from(&bytes[..]);
    let Ok(v5::Packet::Publish(p)) = v5::Packet::read(&mut buf, None) else {
        panic!("rumqttc refused it");
    };
    assert_eq!(&p.payload[..], b"oad", "rumqttc delivers a cut payload");
    assert_eq!(
        p.properties.and_then(|p| p.message_expiry_interval),
        Some(u32::from_be_bytes(*b"payl"))
    );
    let mut buf = BytesMut::from(&bytes[..]);
    assert!(matches!(
        codec::decode(&mut buf, Some(ProtocolVersion::V5), MAX),
        Err(DecodeError::Malformed(_))
    ));
}

/// The size limit covers the whole packet and is applied before its body is
/// buffered; `rumqttc` compares only the Remaining Length with it.
#[test]
fn the_size_limit_counts_the_fixed_header() {
    let bytes = packet(0x30, &cat(&[&s(b"a"), &[0u8; 7]]));
    let limit = bytes.len() - 1;
    let mut buf = BytesMut::from(&bytes[..]);
    assert!(matches!(
        codec::decode(&mut buf, Some(ProtocolVersion::V3_1_1), limit),
        Err(DecodeError::TooLarge { .. })
    ));
    let mut buf = BytesMut::from(&bytes[..]);
    assert!(v4::Packet::read(&mut buf, limit).is_ok());
}

/// Bytes that are not MQTT are refused from the first byte; `rumqttc`
/// waits for a fixed header.
#[test]
fn non_mqtt_input_is_refused_from_its_first_byte() {
    assert_eq!(ours_reads(None, b"G").0, Ours::Refused);
    assert_eq!(rumqttc_reads(Module::V4, b"G"), Rumqttc::Waits);
}
