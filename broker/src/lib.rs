//! `droidwarden-broker`: the small MQTT broker that `droidwarden daemon`
//! embeds when no external broker is configured.
//!
//! This crate is the protocol and nothing else: [`codec`] reads and writes
//! MQTT 3.1, 3.1.1 and 5.0 packets, [`topic`] validates and matches topics,
//! [`access`] says which role may publish and read which topics, and
//! [`state::Broker`] is the broker as a state machine (sessions,
//! subscriptions, retained messages, Will Messages, QoS 0, 1 and 2 both
//! ways, flow control that holds publishers back instead of dropping,
//! and access control on every publish, subscription and
//! delivery). It does no I/O, spawns nothing and reads no clock: the
//! daemon's `broker` module owns the sockets and tasks, checks passwords
//! and feeds the machine who each client is.
//!
//! Deliberately left out, because the embedded broker listens on loopback
//! for one household's clients: TLS, persistence across
//! restarts, shared subscriptions, topic aliases and enhanced authentication (refused with
//! the proper MQTT 5 reason codes). `docs/embedded-broker.md` explains the
//! choice of writing this rather than embedding an existing broker.

#![deny(missing_docs)]

pub mod access;
pub mod codec;
mod index;
pub mod state;
pub mod topic;

pub use access::{Grants, PUBLISHER_PROPERTY, Policy, Principal, Role};
/// The buffer types the codec reads and writes, re-exported so that drivers
/// use the same `bytes` version.
pub use bytes::{Bytes, BytesMut};
pub use codec::{ClientPacket, DecodeError, ProtocolVersion, ServerPacket, decode};
pub use state::{
    Action, Broker, ConnId, Denied, Dropped, Input, Limits, Login, LossCause, Operation, Refusal,
};
