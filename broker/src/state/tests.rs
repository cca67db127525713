//! The state machine without a runtime: packets in, actions out.

use super::*;
use crate::codec::{ConnectProperties, SubscriptionOptions, Unsubscribe};

const V3: ProtocolVersion = ProtocolVersion::V3_1_1;
const V5: ProtocolVersion = ProtocolVersion::V5;

struct Harness {
    broker: Broker,
    now: Instant,
}

impl Harness {
    fn new() -> Harness {
        Harness::with_limits(Limits::default())
    }

    fn with_limits(limits: Limits) -> Harness {
        Harness {
            broker: Broker::new(limits, Policy::open()),
            now: Instant::now(),
        }
    }

    /// A broker that requires credentials, prefix `dw`.
    fn authenticated() -> Harness {
        let policy = Policy {
            prefix: "dw".into(),
            ha_prefix: "homeassistant".into(),
            anonymous: false,
            vouch_to: Some("daemon".into()),
        };
        Harness {
            broker: Broker::new(Limits::default(), policy),
            now: Instant::now(),
        }
    }

    /// Connects as `user` with `role`, after `edit`.
    fn login(
        &mut self,
        conn: ConnId,
        version: ProtocolVersion,
        login: Login,
        edit: impl FnOnce(&mut Connect),
    ) -> Vec<Action> {
        let mut c = Connect {
            version,
            clean_start: true,
            keep_alive: 60,
            client_id: format!("client-{conn}"),
            will: None,
            username: Some("someone".into()),
            password: Some(Bytes::from_static(b"secret")),
            properties: ConnectProperties::default(),
        };
        edit(&mut c);
        self.step(Input::Connect {
            conn,
            connect: Box::new(c),
            login,
        })
    }

    fn step(&mut self, input: Input) -> Vec<Action> {
        self.broker.step(self.now, input)
    }

    fn packet(&mut self, conn: ConnId, packet: ClientPacket) -> Vec<Action> {
        self.step(Input::Packet { conn, packet })
    }

    fn connect_with(&mut self, conn: ConnId, edit: impl FnOnce(&mut Connect)) -> Vec<Action> {
        let mut c = Connect {
            version: V3,
            clean_start: true,
            keep_alive: 60,
            client_id: format!("client-{conn}"),
            will: None,
            username: None,
            password: None,
            properties: ConnectProperties::default(),
        };
        edit(&mut c);
        self.packet(conn, ClientPacket::Connect(Box::new(c)))
    }

    fn connect(&mut self, conn: ConnId, version: ProtocolVersion) -> Vec<Action> {
        self.connect_with(conn, |c| c.version = version)
    }

    fn subscribe(&mut self, conn: ConnId, filter: &str, qos: QoS) -> Vec<Action> {
        self.subscribe_with(conn, filter, |o| o.qos = qos)
    }

    fn subscribe_with(
        &mut self,
        conn: ConnId,
        filter: &str,
        edit: impl FnOnce(&mut SubscriptionOptions),
    ) -> Vec<Action> {
        let mut options = SubscriptionOptions {
            qos: QoS::AtMostOnce,
            no_local: false,
            retain_as_published: false,
            retain_handling: RetainHandling::OnSubscribe,
        };
        edit(&mut options);
        self.packet(
            conn,
            ClientPacket::Subscribe(Subscribe {
                packet_id: 1,
                subscription_identifier: None,
                filters: vec![(filter.to_owned(), options)],
            }),
        )
    }

    fn publish(
        &mut self,
        conn: ConnId,
        topic: &str,
        payload: &str,
        qos: QoS,
        retain: bool,
    ) -> Vec<Action> {
        self.packet(
            conn,
            ClientPacket::Publish(publish(topic, payload, qos, retain)),
        )
    }
}

fn publish(topic: &str, payload: &str, qos: QoS, retain: bool) -> Publish {
    Publish {
        dup: false,
        qos,
        retain,
        topic: topic.to_owned(),
        packet_id: if qos == QoS::AtMostOnce { 0 } else { 7 },
        payload: Bytes::copy_from_slice(payload.as_bytes()),
        properties: PublishProperties::default(),
    }
}

fn will(topic: &str, payload: &str) -> LastWill {
    LastWill {
        topic: topic.to_owned(),
        payload: Bytes::copy_from_slice(payload.as_bytes()),
        qos: QoS::AtLeastOnce,
        retain: false,
        delay_interval: 0,
        properties: PublishProperties::default(),
    }
}

/// The PUBLISH packets sent to `conn`.
fn publishes(actions: &[Action], conn: ConnId) -> impl Iterator<Item = &Publish> {
    actions.iter().filter_map(move |a| match a {
        Action::Send {
            conn: c,
            packet: ServerPacket::Publish(p),
        } if *c == conn => Some(p),
        _ => None,
    })
}

/// The PUBLISH packets sent to `conn`, as (topic, payload, qos, retain).
fn published(actions: &[Action], conn: ConnId) -> Vec<(String, String, QoS, bool)> {
    publishes(actions, conn)
        .map(|p| {
            (
                p.topic.clone(),
                String::from_utf8_lossy(&p.payload).into_owned(),
                p.qos,
                p.retain,
            )
        })
        .collect()
}

fn connack(actions: &[Action]) -> &ConnAck {
    actions
        .iter()
        .find_map(|a| match a {
            Action::Send {
                packet: ServerPacket::ConnAck(ack),
                ..
            } => Some(ack),
            _ => None,
        })
        .expect("a CONNACK")
}

fn closes(actions: &[Action], conn: ConnId) -> bool {
    actions.contains(&Action::Close { conn })
}

#[test]
fn routes_through_wildcards_with_granted_qos() {
    let mut h = Harness::new();
    h.connect(1, V3);
    h.connect(2, V5);
    let actions = h.subscribe(1, "home/+/volume", QoS::ExactlyOnce);
    assert!(actions.contains(&Action::Send {
        conn: 1,
        packet: ServerPacket::SubAck {
            packet_id: 1,
            codes: vec![2]
        }
    }));
    h.subscribe(2, "home/#", QoS::AtMostOnce);
    let actions = h.publish(3, "home/kitchen/volume", "40", QoS::AtLeastOnce, false);
    assert!(actions.is_empty(), "unknown connection is ignored");
    h.connect(3, V3);
    let actions = h.publish(3, "home/kitchen/volume", "40", QoS::AtLeastOnce, false);
    assert_eq!(
        published(&actions, 1),
        vec![(
            "home/kitchen/volume".into(),
            "40".into(),
            QoS::AtLeastOnce,
            false
        )]
    );
    assert_eq!(published(&actions, 2)[0].2, QoS::AtMostOnce);
    assert!(actions.contains(&Action::Send {
        conn: 3,
        packet: ServerPacket::PubAck {
            packet_id: 7,
            reason: 0
        }
    }));
    let actions = h.publish(3, "office/x/volume", "1", QoS::AtMostOnce, false);
    assert!(published(&actions, 1).is_empty());
}

#[test]
fn retained_messages_reach_late_subscribers_until_cleared() {
    let mut h = Harness::new();
    h.connect(1, V3);
    h.publish(1, "dw/status", "online", QoS::AtLeastOnce, true);
    h.connect(2, V3);
    let actions = h.subscribe(2, "dw/#", QoS::AtLeastOnce);
    assert_eq!(
        published(&actions, 2),
        vec![("dw/status".into(), "online".into(), QoS::AtLeastOnce, true)]
    );
    // A live retained message goes to existing subscribers with retain 0.
    let actions = h.publish(1, "dw/status", "busy", QoS::AtMostOnce, true);
    assert!(!published(&actions, 2)[0].3);
    // An empty retained payload clears the topic.
    h.publish(1, "dw/status", "", QoS::AtMostOnce, true);
    h.connect(3, V3);
    assert!(published(&h.subscribe(3, "#", QoS::AtLeastOnce), 3).is_empty());
}

#[test]
fn retain_handling_and_retain_as_published() {
    let mut h = Harness::new();
    h.connect(1, V5);
    h.publish(1, "r", "x", QoS::AtMostOnce, true);
    h.connect(2, V5);
    let never = h.subscribe_with(2, "r", |o| o.retain_handling = RetainHandling::Never);
    assert!(published(&never, 2).is_empty());
    let again = h.subscribe_with(2, "r", |o| {
        o.retain_handling = RetainHandling::OnNewSubscription
    });
    assert!(published(&again, 2).is_empty(), "subscription existed");
    h.subscribe_with(2, "r", |o| o.retain_as_published = true);
    let live = h.publish(1, "r", "y", QoS::AtMostOnce, true);
    assert!(published(&live, 2)[0].3);
}

#[test]
fn will_is_published_on_abnormal_disconnect_only() {
    let mut h = Harness::new();
    h.connect(1, V3);
    h.subscribe(1, "wills/#", QoS::AtLeastOnce);
    h.connect_with(2, |c| c.will = Some(will("wills/2", "gone")));
    let actions = h.step(Input::Lost {
        conn: 2,
        cause: LossCause::PeerClosed,
    });
    assert!(closes(&actions, 2));
    assert_eq!(
        published(&actions, 1),
        vec![("wills/2".into(), "gone".into(), QoS::AtLeastOnce, false)]
    );
    // A normal DISCONNECT discards the will.
    h.connect_with(3, |c| c.will = Some(will("wills/3", "gone")));
    let actions = h.packet(
        3,
        ClientPacket::Disconnect(Disconnect {
            reason: 0,
            session_expiry_interval: None,
        }),
    );
    assert!(closes(&actions, 3));
    assert!(published(&actions, 1).is_empty());
    assert_eq!(h.broker.connection_count(), 1);
}

#[test]
fn v5_disconnect_with_will_and_protocol_errors() {
    let mut h = Harness::new();
    h.connect(1, V3);
    h.subscribe(1, "w", QoS::AtMostOnce);
    h.connect_with(2, |c| {
        c.version = V5;
        c.will = Some(will("w", "asked"));
    });
    let actions = h.packet(
        2,
        ClientPacket::Disconnect(Disconnect {
            reason: reason::DISCONNECT_WITH_WILL,
            session_expiry_interval: None,
        }),
    );
    assert_eq!(published(&actions, 1).len(), 1);

    h.connect_with(3, |c| {
        c.version = V5;
        c.will = Some(will("w", "violation"));
    });
    let actions = h.step(Input::Lost {
        conn: 3,
        cause: LossCause::Violation(DecodeError::Malformed("test")),
    });
    assert_eq!(
        actions[0],
        Action::Send {
            conn: 3,
            packet: ServerPacket::Disconnect {
                reason: reason::MALFORMED_PACKET
            }
        }
    );
    assert_eq!(published(&actions, 1).len(), 1);
}

#[test]
fn delayed_will_is_cancelled_by_a_reconnect_and_sent_when_due() {
    let mut h = Harness::new();
    h.connect(1, V3);
    h.subscribe(1, "w", QoS::AtMostOnce);
    let connect = |c: &mut Connect| {
        c.version = V5;
        c.clean_start = false;
        c.client_id = "phone".into();
        c.properties.session_expiry_interval = 60;
        c.will = Some(LastWill {
            delay_interval: 10,
            ..will("w", "late")
        });
    };
    h.connect_with(2, connect);
    let lost = Input::Lost {
        conn: 2,
        cause: LossCause::PeerClosed,
    };
    assert!(published(&h.step(lost.clone()), 1).is_empty());
    h.now += Duration::from_secs(5);
    assert!(published(&h.step(Input::Tick), 1).is_empty());
    let actions = h.connect_with(3, connect);
    assert!(connack(&actions).session_present);
    h.now += Duration::from_secs(20);
    assert!(published(&h.step(Input::Tick), 1).is_empty(), "cancelled");

    h.step(Input::Lost {
        conn: 3,
        cause: LossCause::PeerClosed,
    });
    h.now += Duration::from_secs(11);
    assert_eq!(published(&h.step(Input::Tick), 1).len(), 1, "due");
    h.now += Duration::from_secs(60);
    h.step(Input::Tick);
    assert_eq!(h.broker.session_count(), 1, "session of client 1 only");
}

#[test]
fn takeover_closes_the_older_connection() {
    let mut h = Harness::new();
    h.connect(1, V3);
    h.subscribe(1, "w", QoS::AtMostOnce);
    h.connect_with(2, |c| {
        c.version = V5;
        c.client_id = "same".into();
        c.will = Some(will("w", "old"));
    });
    let actions = h.connect_with(3, |c| c.client_id = "same".into());
    assert_eq!(
        actions[0],
        Action::Send {
            conn: 2,
            packet: ServerPacket::Disconnect {
                reason: reason::SESSION_TAKEN_OVER
            }
        }
    );
    assert!(closes(&actions, 2));
    assert_eq!(published(&actions, 1).len(), 1, "old connection's will");
    assert!(!connack(&actions).session_present);
    // The old connection's late reports change nothing.
    let late = h.step(Input::Lost {
        conn: 2,
        cause: LossCause::PeerClosed,
    });
    assert!(late.is_empty());
    assert_eq!(h.broker.connection_count(), 2);
}

#[test]
fn persistent_session_keeps_subscriptions_and_resends_unacked() {
    let mut h = Harness::new();
    let persistent = |c: &mut Connect| {
        c.clean_start = false;
        c.client_id = "ha".into();
    };
    h.connect_with(1, persistent);
    h.subscribe(1, "t", QoS::AtLeastOnce);
    h.connect(2, V3);
    let first = h.publish(2, "t", "a", QoS::AtLeastOnce, false);
    assert_eq!(published(&first, 1).len(), 1);
    h.step(Input::Lost {
        conn: 1,
        cause: LossCause::PeerClosed,
    });
    // Queued while away; QoS 0 is not kept.
    h.publish(2, "t", "b", QoS::AtLeastOnce, false);
    h.publish(2, "t", "c", QoS::AtMostOnce, false);
    let actions = h.connect_with(3, persistent);
    assert!(connack(&actions).session_present);
    let resent: Vec<_> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Send {
                packet: ServerPacket::Publish(p),
                ..
            } => Some((String::from_utf8_lossy(&p.payload).into_owned(), p.dup)),
            _ => None,
        })
        .collect();
    assert_eq!(resent, vec![("a".into(), true), ("b".into(), false)]);
    // A clean session discards it.
    h.step(Input::Lost {
        conn: 3,
        cause: LossCause::PeerClosed,
    });
    let actions = h.connect_with(4, |c| c.client_id = "ha".into());
    assert!(!connack(&actions).session_present);
    assert!(published(&h.publish(2, "t", "d", QoS::AtMostOnce, false), 4).is_empty());
}

#[test]
fn receive_maximum_limits_messages_in_flight() {
    let mut h = Harness::new();
    h.connect_with(1, |c| {
        c.version = V5;
        c.properties.receive_maximum = 2;
    });
    h.subscribe(1, "t", QoS::AtLeastOnce);
    h.connect(2, V3);
    let mut sent = 0;
    for i in 0..4 {
        sent += published(
            &h.publish(2, "t", &i.to_string(), QoS::AtLeastOnce, false),
            1,
        )
        .len();
    }
    assert_eq!(sent, 2);
    let actions = h.packet(1, ClientPacket::PubAck { packet_id: 1 });
    assert_eq!(
        published(&actions, 1),
        vec![("t".into(), "2".into(), QoS::AtLeastOnce, false)]
    );
}

#[test]
fn qos2_from_a_client_is_delivered_once() {
    let mut h = Harness::new();
    h.connect(1, V3);
    h.subscribe(1, "t", QoS::AtLeastOnce);
    h.connect(2, V3);
    let first = h.publish(2, "t", "x", QoS::ExactlyOnce, false);
    assert_eq!(published(&first, 1).len(), 1);
    let mut again = publish("t", "x", QoS::ExactlyOnce, false);
    again.dup = true;
    let second = h.packet(2, ClientPacket::Publish(again));
    assert!(published(&second, 1).is_empty());
    assert!(second.contains(&Action::Send {
        conn: 2,
        packet: ServerPacket::PubRec {
            packet_id: 7,
            reason: 0
        }
    }));
    let rel = h.packet(2, ClientPacket::PubRel { packet_id: 7 });
    assert_eq!(
        rel,
        vec![Action::Send {
            conn: 2,
            packet: ServerPacket::PubComp {
                packet_id: 7,
                reason: 0
            }
        }]
    );
}

/// QoS 2 towards a subscriber: PUBLISH, PUBREC, PUBREL, PUBCOMP; the
/// message holds its place in the window until PUBCOMP, and after a
/// reconnection a received one gets its PUBREL again (not the message), a
/// sent one the message again (DUP). A PUBREC that refuses ends it; one
/// for an unknown id is answered "not found".
#[test]
fn qos2_to_a_subscriber_completes_in_four_steps_across_a_reconnection() {
    let mut h = Harness::new();
    let persistent = |c: &mut Connect| {
        c.version = V5;
        c.clean_start = false;
        c.client_id = "ha".into();
        c.properties.session_expiry_interval = 600;
        c.properties.receive_maximum = 1;
    };
    h.connect_with(1, persistent);
    h.subscribe(1, "t", QoS::ExactlyOnce);
    h.connect(2, V3);
    // The publisher's own QoS 2 exchanges each end with its PUBREL (the
    // harness's publishes all use packet identifier 7).
    let publish2 = |h: &mut Harness, payload: &str| {
        let actions = h.publish(2, "t", payload, QoS::ExactlyOnce, false);
        h.packet(2, ClientPacket::PubRel { packet_id: 7 });
        actions
    };
    let first = publish2(&mut h, "a");
    let sent: Vec<_> = publishes(&first, 1).cloned().collect();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].qos, QoS::ExactlyOnce);
    let id = sent[0].packet_id;
    // Receive Maximum 1: the next waits for PUBCOMP, not PUBREC.
    assert!(published(&publish2(&mut h, "b"), 1).is_empty());
    let rec = h.packet(
        1,
        ClientPacket::PubRec {
            packet_id: id,
            reason: 0,
        },
    );
    assert_eq!(
        rec,
        vec![Action::Send {
            conn: 1,
            packet: ServerPacket::PubRel {
                packet_id: id,
                reason: 0
            }
        }]
    );
    // A PUBACK is not the end of a QoS 2 message.
    assert!(published(&h.packet(1, ClientPacket::PubAck { packet_id: id }), 1).is_empty());
    // Away and back before PUBCOMP: PUBREL again, not the message.
    h.step(Input::Lost {
        conn: 1,
        cause: LossCause::PeerClosed,
    });
    let back = h.connect_with(3, persistent);
    assert!(connack(&back).session_present);
    assert!(back.contains(&Action::Send {
        conn: 3,
        packet: ServerPacket::PubRel {
            packet_id: id,
            reason: 0
        }
    }));
    assert!(published(&back, 3).is_empty(), "{back:?}");
    // PUBCOMP: "b" takes its place in the window.
    let comp = h.packet(3, ClientPacket::PubComp { packet_id: id });
    let next: Vec<_> = publishes(&comp, 3).cloned().collect();
    assert_eq!(next.len(), 1, "{comp:?}");
    assert_eq!(String::from_utf8_lossy(&next[0].payload), "b");
    // Away before PUBREC: the message again, as a duplicate.
    h.step(Input::Lost {
        conn: 3,
        cause: LossCause::PeerClosed,
    });
    let again = h.connect_with(4, persistent);
    let resent: Vec<_> = publishes(&again, 4).cloned().collect();
    assert_eq!(resent.len(), 1);
    assert!(resent[0].dup && resent[0].qos == QoS::ExactlyOnce);
    // A refusing PUBREC ends it without PUBREL; an unknown id is "not found".
    let refused = h.packet(
        4,
        ClientPacket::PubRec {
            packet_id: resent[0].packet_id,
            reason: 0x80,
        },
    );
    assert!(refused.is_empty(), "{refused:?}");
    let unknown = h.packet(
        4,
        ClientPacket::PubRec {
            packet_id: 999,
            reason: 0,
        },
    );
    assert_eq!(
        unknown,
        vec![Action::Send {
            conn: 4,
            packet: ServerPacket::PubRel {
                packet_id: 999,
                reason: reason::PACKET_IDENTIFIER_NOT_FOUND
            }
        }]
    );
    // The window is free: the next message goes at once.
    assert_eq!(published(&publish2(&mut h, "c"), 4).len(), 1);
}

#[test]
fn no_local_and_subscription_identifiers() {
    let mut h = Harness::new();
    h.connect(1, V5);
    h.packet(
        1,
        ClientPacket::Subscribe(Subscribe {
            packet_id: 2,
            subscription_identifier: Some(42),
            filters: vec![(
                "t/#".into(),
                SubscriptionOptions {
                    qos: QoS::AtMostOnce,
                    no_local: true,
                    retain_as_published: false,
                    retain_handling: RetainHandling::OnSubscribe,
                },
            )],
        }),
    );
    assert!(published(&h.publish(1, "t/a", "own", QoS::AtMostOnce, false), 1).is_empty());
    h.connect(2, V3);
    let actions = h.publish(2, "t/a", "other", QoS::AtMostOnce, false);
    let Some(Action::Send {
        packet: ServerPacket::Publish(p),
        ..
    }) = actions.first()
    else {
        panic!("no publish: {actions:?}");
    };
    assert_eq!(p.properties.subscription_identifiers, vec![42]);
}

#[test]
fn refuses_bad_filters_shared_subscriptions_and_unknown_unsubscribes() {
    let mut h = Harness::new();
    h.connect(1, V5);
    h.connect(2, V3);
    for (conn, expected) in [(1, reason::SHARED_SUBSCRIPTIONS_NOT_SUPPORTED), (2, 0x80)] {
        let actions = h.subscribe(conn, "$share/g/t", QoS::AtMostOnce);
        assert_eq!(
            actions,
            vec![Action::Send {
                conn,
                packet: ServerPacket::SubAck {
                    packet_id: 1,
                    codes: vec![expected]
                }
            }]
        );
    }
    let actions = h.subscribe(1, "a/#/b", QoS::AtMostOnce);
    assert!(
        matches!(&actions[0], Action::Send { packet: ServerPacket::SubAck { codes, .. }, .. } if codes == &[reason::TOPIC_FILTER_INVALID])
    );
    h.subscribe(1, "a", QoS::AtMostOnce);
    let actions = h.packet(
        1,
        ClientPacket::Unsubscribe(Unsubscribe {
            packet_id: 3,
            filters: vec!["a".into(), "b".into()],
        }),
    );
    assert_eq!(
        actions,
        vec![Action::Send {
            conn: 1,
            packet: ServerPacket::UnsubAck {
                packet_id: 3,
                codes: vec![0, reason::NO_SUBSCRIPTION_EXISTED]
            }
        }]
    );
    assert!(published(&h.publish(2, "a", "x", QoS::AtMostOnce, false), 1).is_empty());
}

#[test]
fn client_identifiers_empty_and_refused() {
    let mut h = Harness::new();
    let actions = h.connect_with(1, |c| {
        c.client_id.clear();
        c.clean_start = false;
    });
    assert_eq!(connack(&actions).code, reason::V3_IDENTIFIER_REJECTED);
    assert!(closes(&actions, 1));
    let actions = h.connect_with(2, |c| {
        c.version = V5;
        c.client_id.clear();
    });
    let ack = connack(&actions);
    assert_eq!(ack.code, 0);
    assert!(ack.assigned_client_identifier.is_some());
    let actions = h.connect_with(3, |c| {
        c.version = V5;
        c.properties.authentication_method = Some("SCRAM-SHA-1".into());
    });
    assert_eq!(connack(&actions).code, reason::BAD_AUTHENTICATION_METHOD);
}

#[test]
fn messages_larger_than_the_client_accepts_are_dropped() {
    let mut h = Harness::new();
    h.connect_with(1, |c| {
        c.version = V5;
        c.properties.maximum_packet_size = Some(64);
    });
    h.subscribe(1, "t", QoS::AtLeastOnce);
    h.connect(2, V3);
    let big = "x".repeat(100);
    assert!(published(&h.publish(2, "t", &big, QoS::AtLeastOnce, false), 1).is_empty());
    assert_eq!(
        published(&h.publish(2, "t", "small", QoS::AtLeastOnce, false), 1).len(),
        1
    );
}

#[test]
fn expired_messages_are_not_delivered() {
    let mut h = Harness::new();
    h.connect(1, V5);
    let mut p = publish("t", "soon stale", QoS::AtMostOnce, true);
    p.properties.message_expiry_interval = Some(5);
    h.packet(1, ClientPacket::Publish(p));
    h.connect(2, V5);
    let fresh = h.subscribe(2, "t", QoS::AtMostOnce);
    let Some(Action::Send {
        packet: ServerPacket::Publish(p),
        ..
    }) = fresh.get(1)
    else {
        panic!("retained message expected: {fresh:?}");
    };
    assert_eq!(p.properties.message_expiry_interval, Some(5));
    h.now += Duration::from_secs(6);
    h.connect(3, V5);
    assert!(published(&h.subscribe(3, "t", QoS::AtMostOnce), 3).is_empty());
}

#[test]
fn shutdown_tells_v5_clients() {
    let mut h = Harness::new();
    h.connect(1, V3);
    h.connect(2, V5);
    let actions = h.broker.shutdown();
    assert_eq!(
        actions,
        vec![
            Action::Close { conn: 1 },
            Action::Send {
                conn: 2,
                packet: ServerPacket::Disconnect {
                    reason: reason::SERVER_SHUTTING_DOWN
                }
            },
            Action::Close { conn: 2 },
        ]
    );
    assert_eq!(h.broker.connection_count(), 0);
}

/// A broker keeping 3 messages for an absent client: `away`'s persistent
/// session, subscribed to `t`, whose connection (1) is gone; and how it
/// logs in again.
fn absent_client() -> (Harness, impl Fn(&mut Connect)) {
    let mut h = Harness::with_limits(Limits {
        max_queued: 3,
        ..Limits::default()
    });
    let persistent = |c: &mut Connect| {
        c.clean_start = false;
        c.client_id = "away".into();
    };
    h.connect_with(1, persistent);
    h.subscribe(1, "t", QoS::AtLeastOnce);
    h.step(Input::Lost {
        conn: 1,
        cause: LossCause::PeerClosed,
    });
    (h, persistent)
}

#[test]
fn queue_is_bounded_for_absent_clients() {
    let (mut h, persistent) = absent_client();
    h.connect(2, V3);
    for i in 0..10 {
        h.publish(2, "t", &i.to_string(), QoS::AtLeastOnce, false);
    }
    let actions = h.connect_with(3, persistent);
    let payloads: Vec<_> = published(&actions, 3).into_iter().map(|p| p.1).collect();
    // What was queued first was promised first: newer messages are refused.
    assert_eq!(payloads, vec!["0", "1", "2"]);
}

fn user(name: &str, role: Role) -> Login {
    Login::User(Principal {
        user: Some(name.into()),
        role,
    })
}

fn automation() -> Login {
    user("ha", Role::Automation { approve: false })
}

fn phone(id: &str) -> Login {
    user(
        id,
        Role::Phone {
            companion_id: id.into(),
        },
    )
}

fn pub_ack(actions: &[Action], conn: ConnId) -> Option<u8> {
    actions.iter().find_map(|a| match a {
        Action::Send {
            conn: c,
            packet: ServerPacket::PubAck { reason, .. },
        } if *c == conn => Some(*reason),
        _ => None,
    })
}

fn sub_ack(actions: &[Action]) -> Vec<u8> {
    actions
        .iter()
        .find_map(|a| match a {
            Action::Send {
                packet: ServerPacket::SubAck { codes, .. },
                ..
            } => Some(codes.clone()),
            _ => None,
        })
        .expect("a SUBACK")
}

#[test]
fn connect_without_valid_credentials_is_refused_with_the_versions_code() {
    let mut h = Harness::authenticated();
    for (version, login, code) in [
        (V3, Login::Anonymous, reason::V3_NOT_AUTHORIZED),
        (
            V3,
            Login::BadCredentials,
            reason::V3_BAD_USER_NAME_OR_PASSWORD,
        ),
        (V5, Login::Anonymous, reason::NOT_AUTHORIZED),
        (V5, Login::BadCredentials, reason::BAD_USER_NAME_OR_PASSWORD),
    ] {
        let actions = h.login(1, version, login.clone(), |_| {});
        assert_eq!(connack(&actions).code, code, "{version:?} {login:?}");
        assert!(closes(&actions, 1));
        assert!(actions.iter().any(|a| matches!(
            a,
            Action::Denied(Denied {
                operation: Operation::Connect,
                ..
            })
        )));
    }
    // A CONNECT that did not go through the driver's check is anonymous.
    let actions = h.connect(1, V5);
    assert_eq!(connack(&actions).code, reason::NOT_AUTHORIZED);
    assert_eq!(h.broker.connection_count(), 0);
    let actions = h.login(1, V5, automation(), |_| {});
    assert_eq!(connack(&actions).code, reason::SUCCESS);
}

#[test]
fn anonymous_access_when_the_policy_allows_it() {
    let mut h = Harness::new();
    let actions = h.step(Input::Connect {
        conn: 1,
        connect: Box::new(Connect {
            version: V5,
            clean_start: true,
            keep_alive: 0,
            client_id: "x".into(),
            will: Some(will("dw/companion/a/online", "offline")),
            username: None,
            password: None,
            properties: ConnectProperties::default(),
        }),
        login: Login::Anonymous,
    });
    assert_eq!(connack(&actions).code, reason::SUCCESS);
}

#[test]
fn a_will_on_a_forbidden_topic_is_refused_at_connect() {
    let mut h = Harness::authenticated();
    let actions = h.login(1, V5, phone("alice"), |c| {
        c.will = Some(will("dw/companion/bob/online", "offline"));
    });
    assert_eq!(connack(&actions).code, reason::NOT_AUTHORIZED);
    let actions = h.login(1, V3, phone("alice"), |c| {
        c.will = Some(will("dw/companion/alice/online", "offline"));
    });
    assert_eq!(connack(&actions).code, reason::SUCCESS);
}

#[test]
fn forbidden_publishes_are_dropped_and_v5_is_told() {
    let mut h = Harness::authenticated();
    h.login(1, V5, user("admin", Role::Admin), |_| {});
    h.subscribe(1, "#", QoS::AtLeastOnce);
    h.login(2, V5, automation(), |_| {});
    h.login(3, V3, automation(), |_| {});
    // Automation may not approve, nor forge a phone's response.
    for topic in [
        "dw/cmd/approve",
        "dw/companion/a/response",
        "dw/availability",
    ] {
        let actions = h.publish(2, topic, "x", QoS::AtLeastOnce, false);
        assert_eq!(
            pub_ack(&actions, 2),
            Some(reason::NOT_AUTHORIZED),
            "{topic}"
        );
        assert!(published(&actions, 1).is_empty(), "{topic}");
        assert!(actions.iter().any(|a| matches!(
            a,
            Action::Denied(Denied {
                operation: Operation::Publish,
                ..
            })
        )));
        // MQTT 3.1.1: acknowledged, dropped.
        let actions = h.publish(3, topic, "x", QoS::AtLeastOnce, false);
        assert_eq!(pub_ack(&actions, 3), Some(reason::SUCCESS), "{topic}");
        assert!(published(&actions, 1).is_empty(), "{topic}");
        // QoS 0: nothing at all.
        let actions = h.publish(2, topic, "x", QoS::AtMostOnce, false);
        assert!(published(&actions, 1).is_empty(), "{topic}");
    }
    // A forbidden retained message is not retained either.
    h.publish(2, "dw/availability", "fake", QoS::AtLeastOnce, true);
    let actions = h.subscribe(1, "dw/availability", QoS::AtLeastOnce);
    assert!(published(&actions, 1).is_empty());
    let actions = h.publish(2, "dw/cmd/call", "{}", QoS::AtLeastOnce, false);
    assert_eq!(pub_ack(&actions, 2), Some(reason::SUCCESS));
    assert_eq!(published(&actions, 1).len(), 1);
    // With the grant, approvals go through.
    h.login(
        4,
        V5,
        user("ha2", Role::Automation { approve: true }),
        |_| {},
    );
    let actions = h.publish(4, "dw/cmd/approve", "{}", QoS::AtLeastOnce, false);
    assert_eq!(published(&actions, 1).len(), 1);
    // A refused QoS 2 message awaits no PUBREL in MQTT 5.
    let actions = h.publish(2, "dw/cmd/approve", "x", QoS::ExactlyOnce, false);
    assert!(actions.contains(&Action::Send {
        conn: 2,
        packet: ServerPacket::PubRec {
            packet_id: 7,
            reason: reason::NOT_AUTHORIZED
        }
    }));
}

#[test]
fn a_phone_cannot_speak_or_listen_for_another() {
    let mut h = Harness::authenticated();
    h.login(1, V5, user("daemon", Role::Admin), |_| {});
    h.subscribe(1, "dw/companion/#", QoS::AtLeastOnce);
    h.login(2, V5, phone("alice"), |_| {});
    h.login(3, V3, phone("bob"), |_| {});
    let actions = h.publish(
        2,
        "dw/companion/bob/response",
        "forged",
        QoS::AtLeastOnce,
        false,
    );
    assert_eq!(pub_ack(&actions, 2), Some(reason::NOT_AUTHORIZED));
    assert!(published(&actions, 1).is_empty());
    let actions = h.publish(
        2,
        "dw/companion/alice/response",
        "mine",
        QoS::AtLeastOnce,
        false,
    );
    assert_eq!(published(&actions, 1).len(), 1);
    // Subscribing to another phone's requests is refused (v5 0x87, v3 0x80).
    let actions = h.subscribe(2, "dw/companion/bob/request", QoS::AtLeastOnce);
    assert_eq!(sub_ack(&actions), vec![reason::NOT_AUTHORIZED]);
    let actions = h.subscribe(3, "dw/companion/alice/request", QoS::AtLeastOnce);
    assert_eq!(sub_ack(&actions), vec![reason::UNSPECIFIED_ERROR]);
    // A wildcard is granted, but only the phone's own requests arrive.
    let actions = h.subscribe(2, "dw/companion/+/request", QoS::AtLeastOnce);
    assert_eq!(sub_ack(&actions), vec![1]);
    let actions = h.publish(
        1,
        "dw/companion/bob/request",
        "for bob",
        QoS::AtLeastOnce,
        false,
    );
    assert!(published(&actions, 2).is_empty());
    let actions = h.publish(
        1,
        "dw/companion/alice/request",
        "for alice",
        QoS::AtLeastOnce,
        false,
    );
    assert_eq!(published(&actions, 2).len(), 1);
}

#[test]
fn wildcard_subscribers_get_only_what_they_may_read() {
    let mut h = Harness::authenticated();
    h.login(1, V5, user("daemon", Role::Admin), |_| {});
    h.login(2, V3, automation(), |_| {});
    // Retained, then live: neither reaches automation on a companion topic.
    h.publish(
        1,
        "dw/companion/alice/online",
        "online",
        QoS::AtLeastOnce,
        true,
    );
    h.publish(1, "dw/availability", "online", QoS::AtLeastOnce, true);
    let actions = h.subscribe(2, "#", QoS::AtLeastOnce);
    assert_eq!(sub_ack(&actions), vec![1]);
    assert_eq!(
        published(&actions, 2),
        vec![(
            "dw/availability".into(),
            "online".into(),
            QoS::AtLeastOnce,
            true
        )]
    );
    let actions = h.publish(
        1,
        "dw/companion/alice/request",
        "r",
        QoS::AtLeastOnce,
        false,
    );
    assert!(published(&actions, 2).is_empty());
    let actions = h.publish(1, "dw/reply/1", "r", QoS::AtLeastOnce, false);
    assert_eq!(published(&actions, 2).len(), 1);
    let actions = h.subscribe(2, "dw/companion/#", QoS::AtLeastOnce);
    assert_eq!(sub_ack(&actions), vec![reason::UNSPECIFIED_ERROR]);
}

#[test]
fn another_user_cannot_take_a_client_identifier_over() {
    let mut h = Harness::authenticated();
    h.login(1, V5, phone("alice"), |c| c.client_id = "alice".into());
    let actions = h.login(2, V5, phone("bob"), |c| c.client_id = "alice".into());
    assert_eq!(connack(&actions).code, reason::NOT_AUTHORIZED);
    assert!(!closes(&actions, 1));
    // An admin may (the daemon's own client identifier stays its own).
    let actions = h.login(5, V5, user("daemon", Role::Admin), |c| {
        c.client_id = "alice".into()
    });
    assert_eq!(connack(&actions).code, reason::SUCCESS);
    assert!(!connack(&actions).session_present);
    assert!(closes(&actions, 1));
    // A parked session is not inherited by another user.
    h.login(3, V3, automation(), |c| {
        c.client_id = "script".into();
        c.clean_start = false;
    });
    h.subscribe(3, "dw/#", QoS::AtLeastOnce);
    h.step(Input::Lost {
        conn: 3,
        cause: LossCause::PeerClosed,
    });
    let actions = h.login(4, V3, user("other", Role::Admin), |c| {
        c.client_id = "script".into();
        c.clean_start = false;
    });
    assert!(!connack(&actions).session_present);
}

#[test]
fn revoked_users_are_disconnected() {
    let mut h = Harness::authenticated();
    h.login(1, V5, phone("alice"), |_| {});
    h.login(2, V5, phone("bob"), |_| {});
    let actions = h.step(Input::Revoke {
        users: vec!["alice".into()],
    });
    assert!(actions.contains(&Action::Send {
        conn: 1,
        packet: ServerPacket::Disconnect {
            reason: reason::NOT_AUTHORIZED
        }
    }));
    assert!(closes(&actions, 1));
    assert!(!closes(&actions, 2));
    assert_eq!(h.broker.connection_count(), 1);
}

#[test]
fn connack_announces_receive_maximum_and_response_information() {
    let mut h = Harness::authenticated();
    let actions = h.login(1, V5, automation(), |c| {
        c.properties.request_response_information = true;
    });
    let ack = connack(&actions);
    assert_eq!(ack.receive_maximum, Some(64));
    assert_eq!(ack.response_information.as_deref(), Some("dw/responses/"));
    let actions = h.login(2, V5, automation(), |_| {});
    assert_eq!(connack(&actions).response_information, None);
}

#[test]
fn exceeding_the_receive_maximum_with_qos2_disconnects() {
    let mut h = Harness::with_limits(Limits {
        receive_maximum: 3,
        ..Limits::default()
    });
    h.connect(1, V5);
    for id in 1..=3 {
        let mut p = publish("t", "x", QoS::ExactlyOnce, false);
        p.packet_id = id;
        let actions = h.packet(1, ClientPacket::Publish(p));
        assert!(!closes(&actions, 1));
    }
    // A retransmission of one already held is fine.
    let mut p = publish("t", "x", QoS::ExactlyOnce, false);
    p.packet_id = 2;
    assert!(!closes(&h.packet(1, ClientPacket::Publish(p)), 1));
    let mut p = publish("t", "x", QoS::ExactlyOnce, false);
    p.packet_id = 4;
    let actions = h.packet(1, ClientPacket::Publish(p));
    assert!(actions.contains(&Action::Send {
        conn: 1,
        packet: ServerPacket::Disconnect {
            reason: reason::RECEIVE_MAXIMUM_EXCEEDED
        }
    }));
    assert!(closes(&actions, 1));
    // Released ones make room again.
    h.connect(2, V5);
    for id in 1..=10u16 {
        let mut p = publish("t", "x", QoS::ExactlyOnce, false);
        p.packet_id = id;
        assert!(!closes(&h.packet(2, ClientPacket::Publish(p)), 2));
        h.packet(2, ClientPacket::PubRel { packet_id: id });
    }
}

/// The user properties of the PUBLISH packets sent to `conn`.
fn user_properties(actions: &[Action], conn: ConnId) -> Vec<Vec<(String, String)>> {
    publishes(actions, conn)
        .map(|p| p.properties.user_properties.clone())
        .collect()
}

#[test]
fn the_daemon_is_told_who_published_a_command_and_nobody_can_forge_it() {
    let mut h = Harness::authenticated();
    let daemon = user("daemon", Role::Admin);
    h.login(1, V5, daemon, |c| c.client_id = "droidwarden".into());
    h.subscribe(1, "dw/#", QoS::AtMostOnce);
    // Another admin reading everything, and a v3.1.1 session of the
    // daemon's own user (no properties in that version).
    h.login(2, V5, user("alice", Role::Admin), |_| {});
    h.subscribe(2, "dw/#", QoS::AtMostOnce);
    h.login(3, V3, user("daemon", Role::Admin), |_| {});
    h.subscribe(3, "dw/#", QoS::AtMostOnce);
    h.login(
        4,
        V5,
        user("ha", Role::Automation { approve: true }),
        |_| {},
    );

    let mut approve = publish("dw/cmd/approve", "{}", QoS::AtMostOnce, false);
    approve.properties.user_properties = vec![
        ("k".into(), "v".into()),
        (PUBLISHER_PROPERTY.into(), "root".into()),
    ];
    let actions = h.packet(4, ClientPacket::Publish(approve.clone()));
    assert_eq!(
        user_properties(&actions, 1),
        vec![vec![
            ("k".to_owned(), "v".to_owned()),
            (PUBLISHER_PROPERTY.to_owned(), "ha".to_owned()),
        ]],
        "the daemon's session hears the login, never the client's word"
    );
    assert_eq!(
        user_properties(&actions, 2),
        vec![approve.properties.user_properties.clone()],
        "every other session gets the user properties as published"
    );
    assert_eq!(published(&actions, 3).len(), 1);
    assert_eq!(user_properties(&actions, 3), vec![Vec::new()]);

    // Only commands are stamped: elsewhere the daemon reads what was sent.
    let mut other = publish("dw/devices/x/ha/y/set", "ON", QoS::AtMostOnce, false);
    other.properties.user_properties = vec![(PUBLISHER_PROPERTY.into(), "root".into())];
    let actions = h.packet(4, ClientPacket::Publish(other.clone()));
    assert_eq!(
        user_properties(&actions, 1),
        vec![other.properties.user_properties.clone()]
    );
    // A topic that only starts like the prefix is not a command.
    assert!(!h.broker.policy.is_command("dwx/cmd/approve"));
    assert!(h.broker.policy.is_command("dw/cmd/call"));
}

#[test]
fn a_will_on_a_command_topic_is_nobody_s_word() {
    let mut h = Harness::authenticated();
    h.login(1, V5, user("daemon", Role::Admin), |_| {});
    h.subscribe(1, "dw/cmd/#", QoS::AtMostOnce);
    let mut forged = will("dw/cmd/approve", "{}");
    forged.properties.user_properties = vec![(PUBLISHER_PROPERTY.into(), "root".into())];
    h.login(2, V5, user("ha", Role::Automation { approve: true }), |c| {
        c.will = Some(forged);
    });
    let actions = h.step(Input::Lost {
        conn: 2,
        cause: LossCause::PeerClosed,
    });
    assert_eq!(published(&actions, 1).len(), 1, "{actions:?}");
    assert_eq!(user_properties(&actions, 1), vec![Vec::new()]);
}

/// A QoS 1 PUBLISH with its own packet identifier.
fn numbered(topic: &str, packet_id: u16) -> ClientPacket {
    let mut p = publish(topic, &packet_id.to_string(), QoS::AtLeastOnce, false);
    p.packet_id = packet_id;
    ClientPacket::Publish(p)
}

/// The packet identifiers of the PUBACKs sent to `conn`, in order.
fn pub_acks(actions: &[Action], conn: ConnId) -> Vec<u16> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Send {
                conn: c,
                packet: ServerPacket::PubAck { packet_id, .. },
            } if *c == conn => Some(*packet_id),
            _ => None,
        })
        .collect()
}

/// A subscriber that acknowledges every message it has, one at a time,
/// until nothing more comes; returns the payloads it received and every
/// action the broker took meanwhile.
fn drain(h: &mut Harness, conn: ConnId, first: &[Action]) -> (Vec<String>, Vec<Action>) {
    let mut waiting: VecDeque<(u16, String)> = publishes(first, conn)
        .map(|p| {
            (
                p.packet_id,
                String::from_utf8_lossy(&p.payload).into_owned(),
            )
        })
        .collect();
    let mut received = Vec::new();
    let mut all = Vec::new();
    while let Some((packet_id, payload)) = waiting.pop_front() {
        received.push(payload);
        let actions = h.packet(conn, ClientPacket::PubAck { packet_id });
        waiting.extend(publishes(&actions, conn).map(|p| {
            (
                p.packet_id,
                String::from_utf8_lossy(&p.payload).into_owned(),
            )
        }));
        all.extend(actions);
    }
    (received, all)
}

/// The issue's burst: a publisher much faster than its subscriber. Nothing
/// is dropped: beyond the queue's bound the publisher's PUBACKs are
/// withheld (so it stops, its window full), and given as room returns.
#[test]
fn a_burst_to_a_connected_subscriber_is_held_back_not_dropped() {
    let mut h = Harness::with_limits(Limits {
        max_queued: 10,
        max_inflight: 4,
        ..Limits::default()
    });
    h.connect(1, V5);
    h.subscribe(1, "cmd/#", QoS::AtLeastOnce);
    h.connect(2, V3);
    let mut first = Vec::new();
    let mut acked = Vec::new();
    for packet_id in 1..=40 {
        let actions = h.packet(2, numbered("cmd/call", packet_id));
        acked.extend(pub_acks(&actions, 2));
        first.extend(actions);
    }
    // 4 in flight and 10 queued are acknowledged; the rest wait.
    assert_eq!(acked, (1..=14).collect::<Vec<u16>>());
    let (received, actions) = drain(&mut h, 1, &first);
    let expected: Vec<String> = (1..=40).map(|i: u16| i.to_string()).collect();
    assert_eq!(received, expected, "every message, in order");
    acked.extend(pub_acks(&actions, 2));
    assert_eq!(
        acked,
        (1..=40).collect::<Vec<u16>>(),
        "every PUBACK, in order"
    );
}

/// The cap on filters per client: the 1001st new filter is refused.
#[test]
fn subscriptions_per_client_are_capped() {
    let mut h = Harness::new();
    for (conn, version, refused) in [(1, V5, reason::QUOTA_EXCEEDED), (2, V3, 0x80)] {
        h.connect(conn, version);
        let options = SubscriptionOptions {
            qos: QoS::AtMostOnce,
            no_local: false,
            retain_as_published: false,
            retain_handling: RetainHandling::OnSubscribe,
        };
        let filters = (0..1001).map(|i| (format!("f/{i}"), options)).collect();
        let actions = h.packet(
            conn,
            ClientPacket::Subscribe(Subscribe {
                packet_id: 1,
                subscription_identifier: None,
                filters,
            }),
        );
        let codes = sub_ack(&actions);
        assert_eq!(codes.len(), 1001);
        assert!(codes[..1000].iter().all(|c| *c == 0), "{version:?}");
        assert_eq!(codes[1000], refused, "{version:?}");
        // A filter it holds may be subscribed again; one gone makes room.
        assert_eq!(sub_ack(&h.subscribe(conn, "f/3", QoS::AtMostOnce)), [0]);
        h.packet(
            conn,
            ClientPacket::Unsubscribe(Unsubscribe {
                packet_id: 2,
                filters: vec!["f/4".into()],
            }),
        );
        assert_eq!(sub_ack(&h.subscribe(conn, "g", QoS::AtMostOnce)), [0]);
        assert_ne!(sub_ack(&h.subscribe(conn, "h", QoS::AtMostOnce)), [0]);
    }
}

fn paused(actions: &[Action], conn: ConnId) -> bool {
    actions.contains(&Action::Pause { conn })
}

fn resumed(actions: &[Action], conn: ConnId) -> bool {
    actions.contains(&Action::Resume { conn })
}

/// A publisher that sends on while its PUBACKs are withheld (MQTT 3.1.1
/// has no Receive Maximum to stop it) is no longer read from until the
/// subscriber has caught up: still nothing is dropped.
#[test]
fn a_publisher_that_ignores_flow_control_is_paused_and_resumed() {
    let mut h = Harness::with_limits(Limits {
        max_queued: 10,
        max_inflight: 4,
        receive_maximum: 5,
        ..Limits::default()
    });
    h.connect(1, V5);
    h.subscribe(1, "cmd/#", QoS::AtLeastOnce);
    h.connect(2, V3);
    let mut first = Vec::new();
    let mut pauses = 0;
    for packet_id in 1..=30 {
        let actions = h.packet(2, numbered("cmd/call", packet_id));
        pauses += usize::from(paused(&actions, 2));
        first.extend(actions);
    }
    // 14 acknowledged, then 5 withheld are allowed; the 6th pauses it,
    // once. (What the driver had read already is still handled.)
    assert_eq!(pauses, 1);
    assert!(!resumed(&first, 2));
    let (received, actions) = drain(&mut h, 1, &first);
    assert_eq!(received.len(), 30, "nothing dropped");
    assert!(resumed(&actions, 2), "read again once there is room");
    let mut acked = pub_acks(&first, 2);
    acked.extend(pub_acks(&actions, 2));
    assert_eq!(acked, (1..=30).collect::<Vec<u16>>());
    assert!(
        !actions.iter().any(|a| matches!(a, Action::Dropped(_))),
        "no drop reported"
    );
}

/// The daemon both receives commands and publishes replies. Held back by
/// its own queue, or by a peer's that the peer's own publishing fills, a
/// client is never paused: its PUBACKs must still be read for the queues to
/// drain. Everything arrives once both acknowledge.
#[test]
fn clients_that_publish_and_subscribe_do_not_deadlock() {
    let mut h = Harness::with_limits(Limits {
        max_queued: 3,
        max_inflight: 2,
        receive_maximum: 2,
        ..Limits::default()
    });
    // Its own queue: client 1 publishes to a topic it reads.
    h.connect(1, V3);
    h.subscribe(1, "loop", QoS::AtLeastOnce);
    let mut first = Vec::new();
    for packet_id in 1..=20 {
        first.extend(h.packet(1, numbered("loop", packet_id)));
    }
    assert!(
        !paused(&first, 1),
        "a client holding itself back is read on"
    );
    let (received, actions) = drain(&mut h, 1, &first);
    assert_eq!(received.len(), 20);
    let mut acked = pub_acks(&first, 1);
    acked.extend(pub_acks(&actions, 1));
    assert_eq!(acked, (1..=20).collect::<Vec<u16>>());

    // A cycle: 2 floods what 3 reads, 3 floods what 2 reads, neither
    // acknowledging until both are done.
    h.connect(2, V3);
    h.connect(3, V3);
    h.subscribe(2, "to-2", QoS::AtLeastOnce);
    h.subscribe(3, "to-3", QoS::AtLeastOnce);
    let mut all = Vec::new();
    let mut paused_now: HashSet<ConnId> = HashSet::new();
    for packet_id in 1..=20 {
        for (from, to) in [(2, "to-3"), (3, "to-2")] {
            let actions = h.packet(from, numbered(to, packet_id));
            for a in &actions {
                match a {
                    Action::Pause { conn } => {
                        paused_now.insert(*conn);
                    }
                    Action::Resume { conn } => {
                        paused_now.remove(conn);
                    }
                    _ => {}
                }
            }
            assert!(paused_now.len() < 2, "both paused: a deadlock");
            all.extend(actions);
        }
    }
    // Both are read from, so both drain.
    let (to_2, _) = drain(&mut h, 2, &all);
    let (to_3, _) = drain(&mut h, 3, &all);
    assert_eq!((to_2.len(), to_3.len()), (20, 20));

    // A paused publisher is read from again as soon as its own queue
    // holds someone back: 5 floods 6 until paused, then 7 fills 5's queue.
    h.connect(5, V3);
    h.connect(6, V3);
    h.connect(7, V3);
    h.subscribe(5, "to-5", QoS::AtLeastOnce);
    h.subscribe(6, "to-6", QoS::AtLeastOnce);
    let mut was_paused = false;
    for packet_id in 1..=10 {
        was_paused |= paused(&h.packet(5, numbered("to-6", packet_id)), 5);
    }
    assert!(was_paused);
    let mut was_resumed = false;
    for packet_id in 1..=10 {
        was_resumed |= resumed(&h.packet(7, numbered("to-5", packet_id)), 5);
    }
    assert!(was_resumed, "5's acknowledgements must be read");
}

/// A session whose client is away keeps `max_queued` messages; newer ones
/// are refused, reported, and an MQTT 5 publisher is told "quota exceeded".
#[test]
fn an_absent_client_s_full_queue_refuses_and_reports() {
    let (mut h, _) = absent_client();
    h.connect(2, V5);
    let mut dropped = Vec::new();
    for i in 0..5u16 {
        let actions = h.packet(2, numbered("t", i + 1));
        let expected = if i < 3 {
            reason::SUCCESS
        } else {
            reason::QUOTA_EXCEEDED
        };
        assert_eq!(pub_ack(&actions, 2), Some(expected), "message {i}");
        dropped.extend(actions.into_iter().filter_map(|a| match a {
            Action::Dropped(d) => Some(d),
            _ => None,
        }));
    }
    assert_eq!(
        dropped,
        vec![
            Dropped {
                client_id: "away".into(),
                user: None,
                topic: "t".into(),
                connected: false,
            };
            2
        ]
    );
}

/// A connected subscriber that holds publishers back and acknowledges
/// nothing for `max_stall_secs` is disconnected; the publisher goes on.
#[test]
fn a_stuck_subscriber_is_disconnected_and_its_publishers_released() {
    let mut h = Harness::with_limits(Limits {
        max_queued: 2,
        max_inflight: 1,
        max_stall_secs: 30,
        ..Limits::default()
    });
    h.connect(1, V3);
    h.subscribe(1, "t", QoS::AtLeastOnce);
    h.connect(2, V3);
    let mut acked = Vec::new();
    for packet_id in 1..=6 {
        acked.extend(pub_acks(&h.packet(2, numbered("t", packet_id)), 2));
    }
    assert_eq!(acked, [1, 2, 3]);
    h.now += Duration::from_secs(29);
    assert!(!closes(&h.step(Input::Tick), 1), "slow is not stuck");
    // An acknowledgement is progress: the clock starts again.
    h.packet(1, ClientPacket::PubAck { packet_id: 1 });
    h.now += Duration::from_secs(29);
    assert!(!closes(&h.step(Input::Tick), 1));
    h.now += Duration::from_secs(1);
    let actions = h.step(Input::Tick);
    assert!(closes(&actions, 1), "stuck: disconnected");
    assert!(actions.contains(&Action::Stuck {
        conn: 1,
        client_id: "client-1".into(),
        user: None,
        queued: 4,
    }));
    assert_eq!(pub_acks(&actions, 2), [4, 5, 6], "the publisher goes on");
}
