//! `droidwarden-sim`: an emulated Android phone for droidwarden's tests.
//!
//! The phone speaks the ADB device protocol over TCP, so the real adb server
//! accepts it with `adb connect 127.0.0.1:PORT`, and it answers the device
//! commands the daemon sends (see `docs/adb-commands.md`) in the formats real
//! phones print, computed from a [`PhoneState`] that the commands read and
//! change. A mini POSIX shell splits each command line the way
//! `/system/bin/sh` would and records every simple command in a command log,
//! so tests can prove exactly which argv reached the device.
//!
//! Tests steer the phone in-process through [`SimHandle`] or from another
//! process through the JSON control port: read and patch the state, read the
//! command log, inject faults (delays, dropped connections, failures) and make
//! the phone disappear and come back.
//!
//! In companion mode the phone also runs the droidwarden companion app: an
//! MQTT client speaking `docs/companion-protocol.md` that answers requests
//! against the same state (through the same device commands, so ADB and
//! companion views agree), announces its presence with a retained last will
//! and pushes battery and location events.
//!
//! ```no_run
//! # async fn demo() -> Result<(), droidwarden_sim::SimError> {
//! use droidwarden_sim::{Sim, SimConfig};
//!
//! let sim = Sim::start(SimConfig::default()).await?;
//! println!("adb connect {}", sim.adb_addr().expect("ADB is on by default"));
//! sim.update_state(|s| s.battery.level = 15);
//! assert_eq!(sim.execute("dumpsys battery").exit, 0);
//! sim.shutdown().await;
//! # Ok(())
//! # }
//! ```
//!
//! What this crate deliberately does not do: it never talks to a real phone,
//! and it does not implement `sync:`, port forwarding or interactive shells.
//! The ADB side knows nothing about the daemon's types; only companion mode
//! uses the catalogue (`droidwarden-services`, to read requests as the real
//! app would) and the bridge's pure parsers (`droidwarden_bridge::adb::parse`,
//! to give exactly the result shapes the ADB transport gives).

#![deny(missing_docs)]

mod adb;
mod clock;
mod companion;
pub mod content;
mod control;
mod error;
mod fault;
mod log;
mod mdns;
mod phone;
mod replay;
mod shell;
mod sim;
pub mod state;

pub use companion::CompanionSettings;
pub use error::SimError;
pub use fault::Fault;
pub use log::LogEntry;
pub use sim::{ShellOutput, Sim, SimConfig, SimHandle};
pub use state::PhoneState;
