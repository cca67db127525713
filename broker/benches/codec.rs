//! Benchmark: our MQTT codec beside `rumqttc`'s (`mqttbytes`), decoding
//! what clients send and encoding what the broker sends, on the same
//! packets.
//!
//! Run with `cargo bench -p droidwarden-broker --bench codec`.
//!
//! Client packets are made by `rumqttc`'s own client-side encoders, so both
//! codecs read real client bytes. Each sample times a batch of operations
//! (decoding a buffer holding [`BATCH`] copies of the packet, or encoding
//! [`BATCH`] packets into a reserved buffer); buffers are built outside the
//! timed part. The two codecs run interleaved, alternating which goes
//! first, one sample each per round, so that noise on a shared machine falls
//! on both alike. Prints the median and the 10th and 90th percentiles in
//! nanoseconds per packet, and the ratio of the medians (rumqttc / ours).
//!
//! A third column, "rumqttc+layer", is what replacing our codec would
//! cost: `rumqttc`'s codec plus the thin layer a replacement needs, that is
//! the checks `rumqttc` leaves out but a layer can still make after it
//! (UTF-8 of MQTT 5 topics, U+0000, topic names, packet identifier 0,
//! DUP on QoS 0, Topic Alias and Subscription Identifier from a client,
//! property values) and the conversion between its types and the ones the
//! state machine takes (`ClientPacket`, `ServerPacket`). The gaps no layer
//! can close are in `tests/rumqttc_codec.rs`.

use bytes::{Bytes, BytesMut};
use droidwarden_broker::codec::{
    self, ClientPacket, ConnAck, Connect, ConnectProperties, LastWill, ProtocolVersion, Publish,
    PublishProperties, QoS, RetainHandling, ServerPacket, Subscribe, SubscriptionOptions,
};
use droidwarden_broker::topic;
use rumqttc::mqttbytes::{QoS as V4QoS, v4};
use rumqttc::v5::mqttbytes::{QoS as V5QoS, v5};
use std::hint::black_box;
use std::time::Instant;

/// Packets per sample.
const BATCH: usize = 2_000;
/// Samples per codec and case.
const ROUNDS: usize = 200;
/// Rounds run first and thrown away.
const WARMUP: usize = 20;
const MAX: usize = 1 << 24;

const TOPIC: &str = "droidwarden/devices/kitchen-tablet/services/battery/state";

fn payload() -> Bytes {
    // About 200 bytes of JSON, the size of a state message.
    let json = r#"{"level":87,"charging":true,"plugged":"ac","health":"good","temperature_c":31.5,"voltage_mv":4312,"technology":"Li-ion","updated":"2026-11-24T10:15:02Z","source":"dumpsys","device":"kitchen-tablet"}"#;
    Bytes::from_static(json.as_bytes())
}

// --- client packets, as rumqttc's client writes them ----------------------

fn publish_v311(qos: V4QoS) -> Vec<u8> {
    let mut p = v4::Publish::new(TOPIC, qos, payload().to_vec());
    if qos != V4QoS::AtMostOnce {
        p.pkid = 7;
    }
    let mut buf = BytesMut::new();
    p.write(&mut buf).expect("encode");
    buf.to_vec()
}

fn publish_v5_props() -> v5::PublishProperties {
    v5::PublishProperties {
        content_type: Some("application/json".into()),
        user_properties: vec![("device".into(), "kitchen-tablet".into())],
        ..Default::default()
    }
}

fn publish_v5(qos: V5QoS) -> Vec<u8> {
    let mut p = v5::Publish::new(TOPIC, qos, payload(), Some(publish_v5_props()));
    if qos != V5QoS::AtMostOnce {
        p.pkid = 7;
    }
    let mut buf = BytesMut::new();
    p.write(&mut buf).expect("encode");
    buf.to_vec()
}

fn connect_v5() -> Vec<u8> {
    let connect = v5::Connect {
        keep_alive: 30,
        client_id: "home-assistant-5f3c".into(),
        clean_start: false,
        properties: Some(v5::ConnectProperties {
            session_expiry_interval: Some(3600),
            receive_maximum: Some(100),
            max_packet_size: Some(1 << 20),
            ..Default::default()
        }),
    };
    let will = v5::LastWill::new(
        "homeassistant/status",
        "offline",
        V5QoS::AtLeastOnce,
        true,
        None,
    );
    let login = v5::Login::new("automation", "correct horse battery staple");
    let mut buf = BytesMut::new();
    connect
        .write(&Some(will), &Some(login), &mut buf)
        .expect("encode");
    buf.to_vec()
}

fn subscribe_v5() -> Vec<u8> {
    let filters = [
        "droidwarden/devices/+/services/+/state",
        "droidwarden/reply/#",
        "homeassistant/status",
    ]
    .map(|f| v5::Filter::new(f, V5QoS::AtLeastOnce));
    let mut s = v5::Subscribe::new_many(filters, None);
    s.pkid = 3;
    let mut buf = BytesMut::new();
    s.write(&mut buf).expect("encode");
    buf.to_vec()
}

// --- server packets, in each codec's types --------------------------------

fn ours_publish(qos: QoS, v5: bool) -> ServerPacket {
    ServerPacket::Publish(Publish {
        dup: false,
        qos,
        retain: false,
        topic: TOPIC.into(),
        packet_id: if qos == QoS::AtMostOnce { 0 } else { 7 },
        payload: payload(),
        properties: if v5 {
            PublishProperties {
                content_type: Some("application/json".into()),
                user_properties: vec![("device".into(), "kitchen-tablet".into())],
                ..PublishProperties::default()
            }
        } else {
            PublishProperties::default()
        },
    })
}

fn ours_connack() -> ServerPacket {
    ServerPacket::ConnAck(ConnAck {
        session_present: false,
        code: codec::reason::SUCCESS,
        assigned_client_identifier: Some("auto-1a2b3c4d".into()),
        maximum_packet_size: Some(16 << 20),
        session_expiry_interval: None,
        shared_subscription_unavailable: true,
        receive_maximum: Some(64),
        response_information: None,
    })
}

fn rumqttc_connack() -> v5::ConnAck {
    v5::ConnAck {
        session_present: false,
        code: v5::ConnectReturnCode::Success,
        properties: Some(v5::ConnAckProperties {
            session_expiry_interval: None,
            receive_max: Some(64),
            max_qos: None,
            retain_available: None,
            max_packet_size: Some(16 << 20),
            assigned_client_identifier: Some("auto-1a2b3c4d".into()),
            topic_alias_max: None,
            reason_string: None,
            user_properties: Vec::new(),
            wildcard_subscription_available: None,
            subscription_identifiers_available: None,
            shared_subscription_available: Some(0),
            server_keep_alive: None,
            response_information: None,
            server_reference: None,
            authentication_method: None,
            authentication_data: None,
        }),
    }
}

// --- the thin layer a replacement would need --------------------------------

fn no_nul(s: &str) -> Option<()> {
    (!s.contains('\0')).then_some(())
}

fn topic_name(s: &str) -> Option<()> {
    no_nul(s)?;
    topic::validate_name(s).ok()
}

fn pairs_ok(pairs: &[(String, String)]) -> Option<()> {
    pairs
        .iter()
        .all(|(k, v)| no_nul(k).is_some() && no_nul(v).is_some())
        .then_some(())
}

fn qos4(q: V4QoS) -> QoS {
    match q {
        V4QoS::AtMostOnce => QoS::AtMostOnce,
        V4QoS::AtLeastOnce => QoS::AtLeastOnce,
        V4QoS::ExactlyOnce => QoS::ExactlyOnce,
    }
}

fn qos5(q: V5QoS) -> QoS {
    match q {
        V5QoS::AtMostOnce => QoS::AtMostOnce,
        V5QoS::AtLeastOnce => QoS::AtLeastOnce,
        V5QoS::ExactlyOnce => QoS::ExactlyOnce,
    }
}

fn v5_publish_properties(p: Option<v5::PublishProperties>) -> Option<PublishProperties> {
    let Some(p) = p else {
        return Some(PublishProperties::default());
    };
    if p.topic_alias.is_some()
        || !p.subscription_identifiers.is_empty()
        || p.payload_format_indicator.is_some_and(|b| b > 1)
    {
        return None;
    }
    if let Some(t) = &p.response_topic {
        topic_name(t)?;
    }
    if let Some(t) = &p.content_type {
        no_nul(t)?;
    }
    pairs_ok(&p.user_properties)?;
    Some(PublishProperties {
        payload_format_indicator: p.payload_format_indicator,
        message_expiry_interval: p.message_expiry_interval,
        response_topic: p.response_topic,
        correlation_data: p.correlation_data,
        user_properties: p.user_properties,
        subscription_identifiers: Vec::new(),
        content_type: p.content_type,
    })
}

/// `rumqttc`'s MQTT 3.1.1 codec, checked and converted.
fn layer_v4(buf: &mut BytesMut) -> Option<ClientPacket> {
    let first = *buf.first()?;
    match v4::Packet::read(buf, MAX).ok()? {
        v4::Packet::Publish(p) => {
            if first & 0x08 != 0 && p.qos == V4QoS::AtMostOnce {
                return None;
            }
            topic_name(&p.topic)?;
            Some(ClientPacket::Publish(Publish {
                dup: p.dup,
                qos: qos4(p.qos),
                retain: p.retain,
                topic: p.topic,
                packet_id: p.pkid,
                payload: p.payload,
                properties: PublishProperties::default(),
            }))
        }
        _ => None,
    }
}

/// `rumqttc`'s MQTT 5 codec, checked and converted.
fn layer_v5(buf: &mut BytesMut) -> Option<ClientPacket> {
    let first = *buf.first()?;
    match v5::Packet::read(buf, None).ok()? {
        v5::Packet::Publish(p) => {
            if first & 0x08 != 0 && p.qos == V5QoS::AtMostOnce {
                return None;
            }
            let topic = std::str::from_utf8(&p.topic).ok()?;
            topic_name(topic)?;
            Some(ClientPacket::Publish(Publish {
                dup: p.dup,
                qos: qos5(p.qos),
                retain: p.retain,
                topic: topic.to_owned(),
                packet_id: p.pkid,
                payload: p.payload,
                properties: v5_publish_properties(p.properties)?,
            }))
        }
        v5::Packet::Subscribe(s) if first == 0x82 && s.pkid != 0 => {
            let (id, user) = match s.properties {
                Some(p) => (p.id, p.user_properties),
                None => (None, Vec::new()),
            };
            pairs_ok(&user)?;
            let subscription_identifier = match id {
                Some(0) => return None,
                Some(id) => Some(u32::try_from(id).ok()?),
                None => None,
            };
            let mut filters = Vec::with_capacity(s.filters.len());
            for f in s.filters {
                no_nul(&f.path)?;
                let options = SubscriptionOptions {
                    qos: qos5(f.qos),
                    no_local: f.nolocal,
                    retain_as_published: f.preserve_retain,
                    retain_handling: match f.retain_forward_rule {
                        v5::RetainForwardRule::OnEverySubscribe => RetainHandling::OnSubscribe,
                        v5::RetainForwardRule::OnNewSubscribe => RetainHandling::OnNewSubscription,
                        v5::RetainForwardRule::Never => RetainHandling::Never,
                    },
                };
                filters.push((f.path, options));
            }
            Some(ClientPacket::Subscribe(Subscribe {
                packet_id: s.pkid,
                subscription_identifier,
                filters,
            }))
        }
        _ => None,
    }
}

/// `rumqttc`'s MQTT 5 CONNECT, checked and converted.
fn layer_connect_v5(buf: &mut BytesMut) -> Option<ClientPacket> {
    if buf.first() != Some(&0x10) {
        return None;
    }
    let v5::Packet::Connect(c, will, login) = v5::Packet::read(buf, None).ok()? else {
        return None;
    };
    no_nul(&c.client_id)?;
    let mut properties = ConnectProperties::default();
    if let Some(p) = c.properties {
        if p.receive_maximum == Some(0)
            || p.max_packet_size == Some(0)
            || p.request_response_info.is_some_and(|b| b > 1)
            || p.request_problem_info.is_some_and(|b| b > 1)
        {
            return None;
        }
        pairs_ok(&p.user_properties)?;
        properties.session_expiry_interval = p.session_expiry_interval.unwrap_or(0);
        properties.receive_maximum = p.receive_maximum.unwrap_or(u16::MAX);
        properties.maximum_packet_size = p.max_packet_size;
        properties.authentication_method = p.authentication_method;
        properties.request_response_information = p.request_response_info == Some(1);
        properties.user_properties = p.user_properties;
    }
    let will = match will {
        Some(w) => {
            let topic = std::str::from_utf8(&w.topic).ok()?;
            topic_name(topic)?;
            let (delay_interval, props) = match w.properties {
                Some(p) => (
                    p.delay_interval.unwrap_or(0),
                    v5_publish_properties(Some(v5::PublishProperties {
                        payload_format_indicator: p.payload_format_indicator,
                        message_expiry_interval: p.message_expiry_interval,
                        topic_alias: None,
                        response_topic: p.response_topic,
                        correlation_data: p.correlation_data,
                        user_properties: p.user_properties,
                        subscription_identifiers: Vec::new(),
                        content_type: p.content_type,
                    }))?,
                ),
                None => (0, PublishProperties::default()),
            };
            Some(LastWill {
                topic: topic.to_owned(),
                payload: w.message,
                qos: qos5(w.qos),
                retain: w.retain,
                delay_interval,
                properties: props,
            })
        }
        None => None,
    };
    let (username, password) = match login {
        Some(l) => {
            no_nul(&l.username)?;
            (
                (!l.username.is_empty()).then_some(l.username),
                (!l.password.is_empty()).then(|| Bytes::from(l.password)),
            )
        }
        None => (None, None),
    };
    Some(ClientPacket::Connect(Box::new(Connect {
        version: ProtocolVersion::V5,
        clean_start: c.clean_start,
        keep_alive: c.keep_alive,
        client_id: c.client_id,
        will,
        username,
        password,
        properties,
    })))
}

/// Our PUBLISH in `rumqttc`'s MQTT 3.1.1 type, written.
fn write_v4_publish(p: &Publish, buf: &mut BytesMut) {
    let packet = v4::Publish {
        dup: p.dup,
        qos: match p.qos {
            QoS::AtMostOnce => V4QoS::AtMostOnce,
            QoS::AtLeastOnce => V4QoS::AtLeastOnce,
            QoS::ExactlyOnce => V4QoS::ExactlyOnce,
        },
        retain: p.retain,
        topic: p.topic.clone(),
        pkid: p.packet_id,
        payload: p.payload.clone(),
    };
    drop(packet.write(buf));
}

/// Our PUBLISH in `rumqttc`'s MQTT 5 type, written.
fn write_v5_publish(p: &Publish, buf: &mut BytesMut) {
    let props = &p.properties;
    let packet = v5::Publish {
        dup: p.dup,
        qos: match p.qos {
            QoS::AtMostOnce => V5QoS::AtMostOnce,
            QoS::AtLeastOnce => V5QoS::AtLeastOnce,
            QoS::ExactlyOnce => V5QoS::ExactlyOnce,
        },
        retain: p.retain,
        topic: Bytes::copy_from_slice(p.topic.as_bytes()),
        pkid: p.packet_id,
        payload: p.payload.clone(),
        properties: Some(v5::PublishProperties {
            payload_format_indicator: props.payload_format_indicator,
            message_expiry_interval: props.message_expiry_interval,
            topic_alias: None,
            response_topic: props.response_topic.clone(),
            correlation_data: props.correlation_data.clone(),
            user_properties: props.user_properties.clone(),
            subscription_identifiers: props
                .subscription_identifiers
                .iter()
                .map(|&id| id as usize)
                .collect(),
            content_type: props.content_type.clone(),
        }),
    };
    drop(packet.write(buf));
}

// --- timing ---------------------------------------------------------------

/// One way of doing a batch: prepares its input untimed, then returns the
/// time of the batch in nanoseconds per packet.
type Way<'a> = Box<dyn FnMut() -> f64 + 'a>;

/// Times `run` over a batch, in nanoseconds per packet.
fn per_packet(run: impl FnOnce()) -> f64 {
    let start = Instant::now();
    run();
    start.elapsed().as_nanos() as f64 / BATCH as f64
}

fn percentile(sorted: &[f64], p: usize) -> f64 {
    sorted[(sorted.len() - 1) * p / 100]
}

/// Runs the ways interleaved, rotating which goes first, and prints one
/// line: ours first, every other way with its ratio to ours.
fn compare(name: &str, mut ways: Vec<(&str, Way<'_>)>) {
    let n = ways.len();
    let mut samples = vec![Vec::with_capacity(ROUNDS); n];
    for round in 0..WARMUP + ROUNDS {
        for k in 0..n {
            let i = (round + k) % n;
            let ns = (ways[i].1)();
            if round >= WARMUP {
                samples[i].push(ns);
            }
        }
    }
    let mut line = format!("{name:<34}");
    let mut ours = 0.0;
    for (i, s) in samples.iter_mut().enumerate() {
        s.sort_by(f64::total_cmp);
        let median = percentile(s, 50);
        if i == 0 {
            ours = median;
        }
        line += &format!(
            " | {} {median:>6.1} ({:>6.1}–{:>6.1})",
            ways[i].0,
            percentile(s, 10),
            percentile(s, 90)
        );
        if i > 0 {
            line += &format!(" ×{:.2}", median / ours);
        }
    }
    println!("{line}");
}

/// A buffer holding `BATCH` copies of `packet`.
fn repeated(packet: &[u8]) -> BytesMut {
    let mut buf = BytesMut::with_capacity(packet.len() * BATCH);
    for _ in 0..BATCH {
        buf.extend_from_slice(packet);
    }
    buf
}

/// Decoding `BATCH` copies of `packet`, which follows a CONNECT of
/// `version`, in a row.
fn decode_case(name: &str, packet: &[u8], version: ProtocolVersion) {
    let layer: fn(&mut BytesMut) -> Option<ClientPacket> = match version {
        ProtocolVersion::V5 => layer_v5,
        _ => layer_v4,
    };
    same_as_ours(name, packet, Some(version), layer);

    let ours: Way<'_> = Box::new(|| {
        let mut buf = repeated(packet);
        per_packet(|| {
            while let Ok(Some(p)) = codec::decode(&mut buf, Some(version), MAX) {
                black_box(p);
            }
        })
    });
    let theirs: Way<'_> = Box::new(|| {
        let mut buf = repeated(packet);
        per_packet(|| match version {
            ProtocolVersion::V5 => {
                while let Ok(p) = v5::Packet::read(&mut buf, None) {
                    black_box(p);
                }
            }
            _ => {
                while let Ok(p) = v4::Packet::read(&mut buf, MAX) {
                    black_box(p);
                }
            }
        })
    });
    let layered: Way<'_> = Box::new(|| {
        let mut buf = repeated(packet);
        per_packet(|| {
            while let Some(p) = layer(&mut buf) {
                black_box(p);
            }
        })
    });
    compare_decoders(name, ours, theirs, layered);
}

fn decode_connect_case(name: &str, packet: &[u8]) {
    same_as_ours(name, packet, None, layer_connect_v5);
    // A CONNECT is only ever the first packet: decode one per buffer.
    let ours = each_in_own_buffer(packet, |buf| codec::decode(buf, None, MAX).ok());
    let theirs = each_in_own_buffer(packet, |buf| v5::Packet::read(buf, None).ok());
    let layered = each_in_own_buffer(packet, layer_connect_v5);
    compare_decoders(name, ours, theirs, layered);
}

/// Checks that our codec reads `packet` (after a CONNECT of `version`;
/// `None`: as the first packet) and that `layer` gives what we give, or
/// the comparison means nothing.
fn same_as_ours(
    name: &str,
    packet: &[u8],
    version: Option<ProtocolVersion>,
    layer: fn(&mut BytesMut) -> Option<ClientPacket>,
) {
    let ours_one = codec::decode(&mut BytesMut::from(packet), version, MAX);
    let Ok(Some(ours_one)) = ours_one else {
        panic!("{name}: our codec refused it");
    };
    assert_eq!(layer(&mut BytesMut::from(packet)), Some(ours_one), "{name}");
}

/// Decoding `BATCH` copies of `packet` with `decode`, each copy in a
/// buffer of its own.
fn each_in_own_buffer<'a, T>(
    packet: &'a [u8],
    decode: impl Fn(&mut BytesMut) -> T + 'a,
) -> Way<'a> {
    Box::new(move || {
        let mut bufs = vec![BytesMut::from(packet); BATCH];
        per_packet(|| {
            for buf in &mut bufs {
                black_box(decode(buf));
            }
        })
    })
}

/// Prints our decoder beside `rumqttc`'s, bare and with the layer.
fn compare_decoders<'a>(name: &str, ours: Way<'a>, theirs: Way<'a>, layered: Way<'a>) {
    compare(
        name,
        vec![
            ("ours", ours),
            ("rumqttc", theirs),
            ("rumqttc+layer", layered),
        ],
    );
}

/// A way of writing one packet into a buffer.
type Write<'a> = &'a dyn Fn(&mut BytesMut);

/// Encoding `BATCH` packets into one buffer; `layered`, when given, starts
/// from our `ServerPacket` and converts it first.
fn encode_case(
    name: &str,
    ours_packet: &ServerPacket,
    version: ProtocolVersion,
    theirs_write: Write<'_>,
    layered_write: Option<Write<'_>>,
) {
    let mut a = BytesMut::new();
    ours_packet.encode(version, &mut a);
    let mut b = BytesMut::new();
    theirs_write(&mut b);
    assert_eq!(a.len(), b.len(), "{name}: the two encodings differ in size");

    let size = a.len() * BATCH;
    let batch = |write: Write<'_>| -> f64 {
        let mut buf = BytesMut::with_capacity(size);
        per_packet(|| {
            for _ in 0..BATCH {
                write(&mut buf);
            }
            black_box(&buf);
        })
    };
    let ours_write = |buf: &mut BytesMut| ours_packet.encode(version, buf);
    let mut ways: Vec<(&str, Way<'_>)> = vec![
        ("ours", Box::new(|| batch(&ours_write))),
        ("rumqttc", Box::new(|| batch(theirs_write))),
    ];
    if let Some(layered) = layered_write {
        let mut c = BytesMut::new();
        layered(&mut c);
        assert_eq!(b, c, "{name}: the converted packet differs");
        ways.push(("rumqttc+layer", Box::new(move || batch(layered))));
    }
    compare(name, ways);
}

fn main() {
    println!(
        "ns per packet: median (p10–p90) of {ROUNDS} batches of {BATCH}, the ways interleaved; ×: ratio to ours"
    );
    let v3 = ProtocolVersion::V3_1_1;
    let v5 = ProtocolVersion::V5;

    // QoS 0 and 1 of each version (`as u8`: the QoS level's number).
    for qos in [V4QoS::AtMostOnce, V4QoS::AtLeastOnce] {
        let name = format!("decode PUBLISH QoS {}, 3.1.1", qos as u8);
        decode_case(&name, &publish_v311(qos), v3);
    }
    for qos in [V5QoS::AtMostOnce, V5QoS::AtLeastOnce] {
        let name = format!("decode PUBLISH QoS {}, 5 + 2 props", qos as u8);
        decode_case(&name, &publish_v5(qos), v5);
    }
    decode_connect_case("decode CONNECT 5 (will, login)", &connect_v5());
    decode_case("decode SUBSCRIBE 5, 3 filters", &subscribe_v5(), v5);

    let v4_publish = |qos| {
        let mut p = v4::Publish::new(TOPIC, qos, payload().to_vec());
        p.pkid = if qos == V4QoS::AtMostOnce { 0 } else { 7 };
        p
    };
    let encodes = [
        (QoS::AtMostOnce, V4QoS::AtMostOnce),
        (QoS::AtLeastOnce, V4QoS::AtLeastOnce),
    ];
    for (qos, theirs_qos) in encodes {
        let name = format!("encode PUBLISH QoS {}, 3.1.1", theirs_qos as u8);
        let ours = ours_publish(qos, false);
        let ServerPacket::Publish(ours_inner) = &ours else {
            unreachable!()
        };
        let theirs = v4_publish(theirs_qos);
        encode_case(
            &name,
            &ours,
            v3,
            &|buf| drop(theirs.write(buf)),
            Some(&|buf| write_v4_publish(ours_inner, buf)),
        );
    }
    let mut p5 = v5::Publish::new(
        TOPIC,
        V5QoS::AtLeastOnce,
        payload(),
        Some(publish_v5_props()),
    );
    p5.pkid = 7;
    let ours = ours_publish(QoS::AtLeastOnce, true);
    let ServerPacket::Publish(ours_inner) = &ours else {
        unreachable!()
    };
    encode_case(
        "encode PUBLISH QoS 1, 5 + 2 props",
        &ours,
        v5,
        &|buf| drop(p5.write(buf)),
        Some(&|buf| write_v5_publish(ours_inner, buf)),
    );
    let connack = rumqttc_connack();
    encode_case(
        "encode CONNACK 5, 4 props",
        &ours_connack(),
        v5,
        &|buf| drop(connack.write(buf)),
        None,
    );
    let suback = v5::SubAck {
        pkid: 3,
        return_codes: vec![v5::SubscribeReasonCode::Success(V5QoS::AtLeastOnce); 3],
        properties: None,
    };
    encode_case(
        "encode SUBACK 5, 3 codes",
        &ServerPacket::SubAck {
            packet_id: 3,
            codes: vec![1; 3],
        },
        v5,
        &|buf| drop(suback.write(buf)),
        None,
    );
}
