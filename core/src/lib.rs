//! droidwarden's core: the one path from any caller to a phone.
//!
//! - [`hub`]: the call hub. Every caller (MQTT, D-Bus, MCP, the agent,
//!   automations) admits a call here, which checks the phone-services
//!   policy, picks the device, takes the call's place in that device's
//!   order, runs it within one time bound ([`hub::call_bound`]) and
//!   publishes its `executing` → `success` | `error` status.
//! - [`sequencer`]: each device's arrival order (changes one at a time,
//!   reads alongside).
//! - [`delivery`]: the durable store of command ids and calls in flight,
//!   so a repeated id is answered, not run again, and a crash leaves no
//!   stale `executing`.
//! - `foreground`: the app in front of each device, read in the device's
//!   turn before a screen action, and the gate it feeds (the UI rules of
//!   `[phone_services.ui]`, `approval_required` above a caller's clearance).
//! - [`poll`]: the periodic state reads behind the retained state topics.
//! - [`assistant`]: the LLM agent hosted over the hub ([`assistant::HubTools`]
//!   is its `ToolHost`, so the agent's calls take the same path), its runs,
//!   approvals and notices.
//! - [`accept`]: the accept loop of the daemon's small TCP servers (a bound
//!   on connections at once, an end at shutdown).
//! - [`private`]: files written as one user in a directory another may
//!   control: created exclusively, never through a link, mode 0600.
//! - [`gate`]: the approval gate for callers not trusted to decide by
//!   themselves (MCP clients, in the daemon or through D-Bus): the agent's
//!   policy, a person's approval, app grants.
//!
//! Architecture invariant: this crate knows no protocol. It never parses
//! an MQTT payload, a D-Bus message or a CLI argument, and never writes a
//! reply; the adapters in the daemon turn their input into a
//! [`hub::Call`] and the hub's typed results into their own wire forms.
#![warn(missing_docs)]

pub mod accept;
pub mod assistant;
pub mod delivery;
mod foreground;
pub mod gate;
pub mod hub;
pub mod notification_events;
pub mod phones;
pub mod poll;
pub mod private;
pub mod sequencer;
