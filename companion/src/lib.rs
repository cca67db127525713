//! droidwarden-companion: the companion app of `docs/companion-protocol.md`
//! for an unrooted phone with Termux and the Termux:API add-on.
//!
//! - [`config`] reads `config.toml` (two stages: raw, then validated).
//! - [`respond`] is the app's side of the protocol without MQTT: one request
//!   payload in, one response payload out, checked with the catalogue as
//!   the daemon's side expects.
//! - [`termux`] maps each offered catalogue action to a Termux:API command
//!   line (an argv, never a shell string) and parses its JSON into the
//!   catalogue's result record; pure functions.
//! - [`exec`] runs one argv with a time limit.
//! - [`session`] owns the MQTT connection: will, subscribe, announce,
//!   reconnect with capped backoff, TLS; events; the wake lock.
//! - [`watch`] turns readings of the notification list into events.
//! - [`status`] keeps the status file behind `droidwarden-companion status`.
//! - [`check`] is the first-run check of commands and permissions.
//!
//! Architecture invariant: the protocol's payload rules and the catalogue
//! come from `droidwarden-bridge` and `droidwarden-services`, shared with
//! the daemon and the emulated phone; this crate adds only the Termux side.
#![deny(missing_docs)]

pub mod check;
pub mod config;
pub mod exec;
pub mod respond;
pub mod session;
pub mod status;
pub mod termux;
pub mod watch;

/// What can go wrong outside a single request (whose failures are answers).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CompanionError {
    /// The configuration file has a problem; the message names the key.
    #[error("configuration: {0}")]
    Config(String),
    /// TLS could not be set up (a CA file that cannot be read or parsed).
    #[error("TLS: {0}")]
    Tls(String),
}
