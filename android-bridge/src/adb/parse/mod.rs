//! Parsers from Android shell output to typed results.
//!
//! Each device command the ADB transport runs (see `docs/adb-commands.md`)
//! prints text whose shape varies between Android releases and vendors. This
//! module owns turning that text into typed values; it does no I/O, knows
//! nothing about ADB connections, and leaves mapping failures to wire error
//! codes to its caller.
//!
//! Every parser is a pure function `fn(&str) -> Result<T, ParseError>` (a few
//! helpers work on an already parsed value). None of them panics on any input:
//! unreadable text gives a [`ParseError`], and a fragment gives what can be
//! read from it where the result type allows `None`. The tests read the real
//! outputs stored under `fixtures/android/` (see `SOURCES.md` there).
//!
//! [`dump_complete`] recognises a `dumpsys` run that exited 0 with a dump
//! that cannot be trusted (cut short by its own timeout, the service lost
//! mid-dump, or nothing printed at all); it is meant to be applied to every
//! `dumpsys` run before its parser.
//!
//! [`classify_device_error`] recognises the error messages all commands share
//! (permission denials, missing services or commands, missing activities) and
//! is meant to be applied to every command's stdout, stderr and exit status
//! before its parser.

mod apps;
mod cmd;
mod device_error;
mod dump;
mod error;
mod pm;
mod power;
mod sensors;
mod settings;
pub(crate) mod text;
mod ui;
mod window;

pub use apps::{
    AmStart, InstalledPackage, am_start, component_package, is_chooser, launcher_activities,
    package_list, pm_path, resolve_activity_brief, split_component,
};
pub use cmd::cmd_success;
pub(crate) use device_error::excerpt;
pub use device_error::{DeviceFailure, FailureKind, classify_device_error, dump_denial};
pub use dump::dump_complete;
pub use error::ParseError;
#[cfg(test)]
pub(crate) use error::failure;
pub use pm::{InstallFailure, InstallFailureKind, install_failure, pm_outcome};
pub use power::{PowerState, power};
pub use sensors::{
    AmbientConditions, MotionReading, ProximityReading, SensorDump, SensorInfo, Vec3, ambient,
    motion, proximity, sensors,
};
pub use settings::{getprop_value, setting_number, setting_value};
pub(crate) use ui::wm_value;
pub use ui::{
    DumpOutcome, PNG_SIGNATURE, UiElement, UiTree, dump_outcome, dump_then_cat_outcome,
    screencap_png, ui_elements, wm_size, xml_slice,
};
pub use window::{
    DeviceOrientation, KeyguardState, focused_app, focused_component, keyguard, rotation,
};

#[cfg(test)]
pub(crate) mod tests;
