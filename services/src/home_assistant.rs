//! How a service appears in Home Assistant: its entities, what each shows
//! from the service's state and which command each control sends. Pure
//! data, declared by each service module; the daemon turns it into
//! discovery configs and turns Home Assistant's command payloads into
//! [`Command`]s.

use crate::Command;

/// One Home Assistant entity of a service. Its `object_id` is part of the
/// entity's unique id and of its command topic, so it never changes once
/// released.
#[derive(Debug, Clone)]
pub struct HaEntity {
    /// Unique among every service's entities, e.g. `wifi`.
    pub object_id: &'static str,
    /// The name Home Assistant shows, e.g. `Wi-Fi`.
    pub name: &'static str,
    /// What kind of entity, and how it reads and controls the service.
    pub kind: HaKind,
}

/// The kind of a Home Assistant entity and what it is wired to. `field`s
/// name a top-level field of the service's state (the result of its state
/// read).
#[derive(Debug, Clone)]
pub enum HaKind {
    /// A numeric or text reading.
    Sensor {
        /// The state field shown.
        field: &'static str,
        /// Home Assistant's device class, if one fits.
        device_class: Option<&'static str>,
        /// The unit, if any.
        unit: Option<&'static str>,
    },
    /// An on/off reading of a boolean field.
    BinarySensor {
        /// The boolean state field.
        field: &'static str,
        /// Home Assistant's device class, if one fits.
        device_class: Option<&'static str>,
    },
    /// An on/off control over a boolean field (payloads `ON` and `OFF`).
    Switch {
        /// The boolean state field.
        field: &'static str,
        /// The command for `ON`.
        on: fn() -> Command,
        /// The command for `OFF`.
        off: fn() -> Command,
    },
    /// A slider over a numeric field (payload: a number).
    Number {
        /// The numeric state field.
        field: &'static str,
        /// The slider's range.
        max: u32,
        /// How the slider moves.
        step: HaStep,
        /// The unit, if any.
        unit: Option<&'static str>,
        /// The command for a value within `0..=max`.
        set: fn(u32) -> Command,
    },
    /// A button (payload `PRESS`).
    Button {
        /// The command a press sends.
        press: fn() -> Command,
    },
}

/// How a [`HaKind::Number`] slider moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HaStep {
    /// By one.
    One,
    /// In the phone's own steps: the state's `max` field (its number of
    /// steps over the 0–100 % range) once a state read has told it, by one
    /// until then.
    PhoneSteps,
}

impl HaKind {
    /// Home Assistant's component name.
    pub fn component(&self) -> &'static str {
        match self {
            Self::Sensor { .. } => "sensor",
            Self::BinarySensor { .. } => "binary_sensor",
            Self::Switch { .. } => "switch",
            Self::Number { .. } => "number",
            Self::Button { .. } => "button",
        }
    }
}
