//! droidwarden's application layer: what every protocol adapter (MQTT,
//! D-Bus, the metrics) shares above the core and the automations.
//!
//! - [`events`]: the event centre, where the hub's bus, the devices'
//!   events, the agent's notices and the automations' outcomes become one
//!   [`events::Event`] stream per consumer.
//! - [`approvals`]: one list of what waits for a person, the agent's and
//!   the automations' requests alike, and one way to answer them.
//! - [`health`]: the daemon's own health report (`droidwarden status`,
//!   D-Bus `Status`, the MQTT `health` topic).
//! - [`wireless`]: pairing a phone and the phones the adb server sees over
//!   mDNS, for the CLI and D-Bus alike.
//!
//! Architecture invariant: like the core, this crate knows no protocol. It
//! turns the core's and the automations' state into typed values; the
//! adapters render them on their own wires.
#![warn(missing_docs)]

pub mod approvals;
pub mod events;
pub mod health;
pub mod wireless;

// The layers below, under the names the modules use.
use droidwarden_automations as automations;
use droidwarden_core::{assistant, hub};
