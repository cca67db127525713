//! The droidwarden service catalogue: the single source of truth for what a
//! phone can be asked to do.
//!
//! A *service* is one Android capability (`battery`, `wifi_automation`, …),
//! known by a snake_case service id and a camelCase node type. Each
//! service has *actions*; each action has typed parameters described by a
//! JSON Schema, a documented result shape, a [`Risk`] level and whether it
//! changes the device.
//!
//! Each service is one module of `service/`, holding every fact about it
//! (see [`ServiceSpec`]); the catalogue, the typed [`Command`] and what
//! other crates derive (state reads, Home Assistant entities, companion
//! events) all come from those modules.
//!
//! Callers turn untrusted input — an MQTT payload, CLI arguments, a language
//! model's tool call — into a typed [`Command`] with [`Catalogue::parse`].
//! Nothing is silently defaulted from bad input: unknown or missing
//! parameters are errors that name the parameter.
//!
//! Architecture invariant: this crate does no I/O, spawns nothing and knows
//! no transport. It is vocabulary shared by every other crate, and so holds
//! the little every crate computes alike: names and their charsets, and
//! wall-clock time ([`time`]).
#![deny(missing_docs)]

mod catalogue;
mod command;
mod error;
pub mod home_assistant;
mod names;
mod policy;
pub mod schema;
mod service;
pub mod time;
mod wire;

pub use catalogue::{ActionSpec, Catalogue, ParamSpec, Risk, ServiceSpec};
pub use command::{RingerMode, Stream};
pub use error::CatalogueError;
pub use names::{CompanionId, DeviceName, NameError, PackageName, unique_suffix};
pub use policy::{
    HostFiles, MAX_CONFIGURABLE_BYTES, PhonePolicy, PolicyConfigError, REFUSED_SCHEMES,
    RawPhoneServices, check_push_shape, normalize_number, percent_decode, plain_absolute_path,
    refuse_dangerous_scheme, ui, url_scheme,
};
pub use schema::Record;
pub use service::*;
pub use wire::{ErrorCode, WireError};
