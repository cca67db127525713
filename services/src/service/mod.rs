//! The services, one module each. A module holds every fact about its
//! service: node type, id, description, the action enum and each action's
//! parameter and result schemas, risk and description, the read that gives
//! its state, its Home Assistant entities and the companion event that
//! reports its state. [`ServiceSpec`]'s fields have no defaults, so a new
//! service that forgets one of them does not compile.
//!
//! Everything else derives from here: the [`Catalogue`](crate::Catalogue)
//! (`all`), the typed [`Command`] (the `services!` list below), the hub's
//! state reads and polls, Home Assistant discovery and the companion
//! protocol's state events.
//!
//! Adding a service: a new module here and one line in `services!`.
//! Adding an action: one entry in the module's `actions!`, which holds its
//! name, parameters and their schemas, risk, description, result and
//! example (see the macro).

// Every module builds its spec from the same vocabulary.
use crate::catalogue::{
    ACTIVITY_PATTERN, ActionSpec, FILENAME_PATTERN, PACKAGE_PATTERN, ParamSpec, Risk, ServiceSpec,
    URL_PATTERN,
};
use crate::command::{RingerMode, Stream};
use crate::home_assistant::{HaEntity, HaKind, HaStep};
use crate::names::{NameError, PackageName};
use crate::schema::{Property, Record, Schema};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// One action enum per service, and each action's catalogue entry, from
/// one declaration per action:
///
/// ```text
/// Variant = "wire_name" (Risk, reads | changes) "catalogue description" {
///     /// Field doc.
///     field: Type = parameter_schema,
/// } -> ResultRecord example(Self::Variant { field: value }),
/// ```
///
/// The field block, the result and `example` are optional (no parameters,
/// an empty result object, `{}`). A parameter is required unless its type
/// is an `Option`, and its schema is its type's unless `= schema` says
/// otherwise ([`FieldType`]); its name is the field's, and its doc comment
/// describes it where the schema does not. The result is a
/// record of [`records!`], whose fields are both what the catalogue
/// documents and what a transport fills in. The description is also the
/// variant's rustdoc.
///
/// Generates the enum with the serde shape `{"action", "params"}`,
/// [`name`](BatteryAction::name), `NAMES` and the [`ActionSpec`]s in
/// declaration order (`specs`, for the module's `spec()`).
macro_rules! actions {
    (@mutates reads) => { false };
    (@mutates changes) => { true };
    (@or $default:expr) => { $default };
    (@or $default:expr, $given:expr) => { $given };
    (
        $(#[$doc:meta])*
        $name:ident {
            $(
                $variant:ident = $wire:literal ($risk:ident, $effect:ident) $description:literal
                $({ $($(#[doc = $fdoc:literal])* $field:ident : $ty:ty $(= $schema:expr)?),* $(,)? })?
                $(-> $record:ident)?
                $(example($example:expr))?
            ),* $(,)?
        }
    ) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(tag = "action", content = "params", deny_unknown_fields)]
        pub enum $name {
            $(#[doc = $description] #[serde(rename = $wire)] $variant $({ $($(#[doc = $fdoc])* $field: $ty),* })?),*
        }

        impl $name {
            /// Every action's wire name, in declaration order.
            pub const NAMES: &'static [&'static str] = &[$($wire),*];

            /// The action's wire name, e.g. `set_volume`.
            pub fn name(&self) -> &'static str {
                match self {
                    $(Self::$variant { .. } => $wire),*
                }
            }

            /// Every action's catalogue entry, in declaration order.
            fn specs() -> Vec<ActionSpec> {
                vec![$(
                    ActionSpec {
                        name: $wire,
                        description: $description,
                        risk: Risk::$risk,
                        mutates: actions!(@mutates $effect),
                        params: vec![$($(ParamSpec {
                            name: stringify!($field),
                            required: !<$ty as FieldType>::OPTIONAL,
                            schema: field_schema!($ty, [$($fdoc),*] $(, $schema)?),
                        }),*)?],
                        result: Schema::object(
                            "",
                            actions!(@or Vec::new() $(, <$record as Record>::properties())?),
                        ),
                        example: actions!(@or json!({}) $(, example_of(|| Ok($example)))?),
                    }
                ),*]
            }
        }
    };
}

/// A result record: a struct whose JSON is an action's result (or one part
/// of it), with its schema from the same declaration, so the bridge that
/// fills it in and the catalogue that documents it cannot name a field
/// differently:
///
/// ```text
/// /// Rustdoc.
/// Name {
///     /// Field doc.
///     field: Type,
///     /// Field doc.
///     bounded: u8 = Schema::integer("", Some(0), Some(100)),
/// }
/// ```
///
/// A field is required; an `Option` field may be `null`. Its schema is its
/// type's ([`FieldType`]) unless `= schema` says otherwise, for bounds or
/// allowed values. Its doc comment is its description in the catalogue
/// where its schema gives none, so each field is described once.
/// Generates the struct (public fields, serde) and its [`Record`] impl.
macro_rules! records {
    ($(
        $(#[$doc:meta])*
        $name:ident {
            $($(#[doc = $fdoc:literal])* $field:ident : $ty:ty $(= $schema:expr)?),* $(,)?
        }
    )*) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        pub struct $name {
            $($(#[doc = $fdoc])* pub $field: $ty,)*
        }

        impl Record for $name {
            fn properties() -> Vec<Property> {
                vec![$(result_field::<$ty>(
                    stringify!($field),
                    field_schema!($ty, [$($fdoc),*] $(, $schema)?),
                )),*]
            }
        }

        impl FieldType for $name {
            const OPTIONAL: bool = false;

            fn schema() -> Schema {
                <$name as Record>::schema("")
            }
        }
    )*};
}

/// A field's schema: `$schema` when given, else its type's; described by
/// its doc comment (`$doc`) when the schema says nothing itself.
macro_rules! field_schema {
    ($ty:ty, $doc:expr) => {
        described(<$ty as FieldType>::schema(), &$doc)
    };
    ($ty:ty, $doc:expr, $schema:expr) => {
        described($schema, &$doc)
    };
}

/// What a field's type says about it, for parameters and results alike:
/// whether it is optional (an `Option` is, every other type is not; a
/// parameter is required unless optional, a result field may be `null` only
/// if optional), and its schema unless the field gives one.
trait FieldType {
    /// Whether the type is an `Option`.
    const OPTIONAL: bool;

    /// The schema of a field of this type, without a description.
    fn schema() -> Schema;
}

impl<T: FieldType> FieldType for Option<T> {
    const OPTIONAL: bool = true;

    fn schema() -> Schema {
        T::schema()
    }
}

impl<T: FieldType> FieldType for Vec<T> {
    const OPTIONAL: bool = false;

    fn schema() -> Schema {
        Schema::array("", T::schema())
    }
}

/// The types of fields that are never optional, with their schemas
/// (records, and parameter types that live in a service module, add
/// themselves). A field of a type not listed does not compile: add it (or
/// wrap it in `Option`).
macro_rules! field_types {
    ($($ty:ty => $schema:expr),* $(,)?) => {
        $(impl FieldType for $ty {
            const OPTIONAL: bool = false;

            fn schema() -> Schema {
                $schema
            }
        })*
    };
}

field_types!(
    bool => Schema::boolean(""),
    u8 => Schema::integer("", Some(0), Some(255)),
    u16 => Schema::integer("", Some(0), Some(65_535)),
    u32 => Schema::integer("", Some(0), None),
    u64 => Schema::integer("", Some(0), None),
    usize => Schema::integer("", Some(0), None),
    i32 => Schema::integer("", None, None),
    i64 => Schema::integer("", None, None),
    f64 => Schema::number(""),
    String => Schema::string(""),
    [i32; 2] => Schema::array("", Schema::integer("", None, None)),
    [i32; 4] => Schema::array("", Schema::integer("", None, None)),
);
// Parameter types of the catalogue's own.
field_types!(
    PackageName => package_param(),
    Stream => stream_schema(""),
    RingerMode => Schema::enumeration("", &RingerMode::ALL.map(RingerMode::as_str)),
);

/// `schema`, described by `doc` (a field's doc comment, line by line) when
/// it says nothing itself.
fn described(mut schema: Schema, doc: &[&'static str]) -> Schema {
    if schema.description.is_empty() {
        let text: Vec<&str> = doc.iter().map(|line| line.trim()).collect();
        schema.description = text.join(" ").into();
    }
    schema
}

/// A result field's property: always present, `null` allowed for an `Option`.
fn result_field<T: FieldType>(name: &'static str, schema: Schema) -> Property {
    if T::OPTIONAL {
        Property::required(name, schema.or_null())
    } else {
        Property::required(name, schema)
    }
}

mod airplane_mode;
mod alerts;
mod app_launcher;
mod app_list;
mod app_manager;
mod audio_automation;
mod battery;
mod bluetooth_automation;
mod camera_control;
mod device_state;
mod environmental_sensors;
mod files;
mod intents;
mod location;
mod media_control;
mod motion_detection;
mod network;
mod notifications;
mod phone_params;
mod screen;
mod screen_control;
mod shell;
mod system_info;
mod telephony;
mod ui_control;
mod wifi_automation;

pub use screen::{ImageFormat, SCREENSHOT_MAX_SIDE, SCREENSHOT_QUALITY, UI_TREE_MAX_NODES};
pub use ui_control::{Key, Point, ScrollDirection, TYPE_TEXT_MAX};

/// The list of services: `Variant(module::ActionEnum)`, in catalogue order.
/// Generates [`Command`], its lookups, and the catalogue's service list.
macro_rules! services {
    ($($variant:ident($module:ident::$action:ident)),* $(,)?) => {
        $(pub use $module::*;)*

        /// A validated, typed request for one service action.
        ///
        /// Build it with [`crate::Catalogue::parse`] (untrusted input) or
        /// directly from the action enums (code that knows what it wants).
        /// The variant names the service, the inner enum the action and its
        /// parameters; [`Command::spec`] gives the action's catalogue entry.
        #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        #[allow(missing_docs)] // reason: each variant is documented by its inner enum.
        pub enum Command {
            $($variant($action)),*
        }

        /// The services' positions in the catalogue.
        #[derive(Clone, Copy)]
        enum Position {
            $($variant),*
        }

        impl Command {
            /// This command's service's position in the catalogue.
            fn position(&self) -> usize {
                match self {
                    $(Self::$variant(_) => Position::$variant as usize),*
                }
            }

            /// The action's wire name, e.g. `set_volume`.
            pub fn action_name(&self) -> &'static str {
                match self {
                    $(Self::$variant(a) => a.name()),*
                }
            }

            /// The parameters as a JSON object, absent optional ones left out.
            pub fn params_json(&self) -> Value {
                match self {
                    $(Self::$variant(a) => params_of(a)),*
                }
            }

            /// The typed command of the service at `position` from
            /// `{"action", "params"}` JSON already validated against its schema.
            pub(crate) fn from_validated(position: usize, tagged: Value) -> serde_json::Result<Self> {
                $(
                    if position == Position::$variant as usize {
                        return serde_json::from_value(tagged).map(Self::$variant);
                    }
                )*
                Err(serde::de::Error::custom(format!("no service at position {position}")))
            }
        }

        /// Every service's spec, in catalogue order.
        pub(crate) fn all() -> Vec<ServiceSpec> {
            vec![$($module::spec()),*]
        }

        /// Every service's action names, in catalogue order, as its enum
        /// declares them.
        #[cfg(test)]
        pub(crate) fn action_names() -> Vec<&'static [&'static str]> {
            vec![$($action::NAMES),*]
        }
    };
}

services! {
    Battery(battery::BatteryAction),
    Network(network::NetworkAction),
    SystemInfo(system_info::SystemInfoAction),
    Location(location::LocationAction),
    AppLauncher(app_launcher::AppLauncherAction),
    AppList(app_list::AppListAction),
    Wifi(wifi_automation::WifiAction),
    Bluetooth(bluetooth_automation::BluetoothAction),
    Audio(audio_automation::AudioAction),
    DeviceState(device_state::DeviceStateAction),
    Screen(screen_control::ScreenAction),
    AirplaneMode(airplane_mode::AirplaneModeAction),
    Motion(motion_detection::MotionAction),
    Environment(environmental_sensors::EnvironmentAction),
    Camera(camera_control::CameraAction),
    Media(media_control::MediaAction),
    Notifications(notifications::NotificationsAction),
    Intents(intents::IntentsAction),
    Files(files::FilesAction),
    AppManager(app_manager::AppManagerAction),
    Telephony(telephony::TelephonyAction),
    Shell(shell::ShellAction),
    ScreenReader(screen::ScreenReaderAction),
    UiControl(ui_control::UiControlAction),
    Alerts(alerts::AlertsAction),
}

pub use files::{MAX_INLINE_PUSH_BYTES, base64_decoded_len};
pub use intents::{Extra, ExtraType};
use phone_params::*;
pub use shell::Argv;

impl Command {
    /// The service this command belongs to.
    pub fn service(&self) -> &'static ServiceSpec {
        &crate::Catalogue::get().services()[self.position()]
    }

    /// The service id, e.g. `wifi_automation`.
    pub fn service_id(&self) -> &'static str {
        self.service().id
    }

    /// The action's catalogue entry: risk, whether it changes the device,
    /// schemas.
    pub fn spec(&self) -> &'static ActionSpec {
        let name = self.action_name();
        self.service()
            .actions
            .iter()
            .find(|a| a.name == name)
            // A test checks that every enum's NAMES are its spec's actions.
            .expect("every action of an enum has a spec")
    }

    /// Whether the command changes the device's state.
    pub fn mutates(&self) -> bool {
        self.spec().mutates
    }

    /// Whether this is its service's state read (see [`ServiceSpec::state`]).
    pub fn is_state_read(&self) -> bool {
        self.service().state.is_some_and(|state| state() == *self)
    }
}

// ---------------------------------------------------------------------------
// Helpers that keep each action to a few lines.

/// An action's parameters (`{"action", "params"}` serialized) as a JSON
/// object, absent optional parameters left out.
fn params_of(action: &impl Serialize) -> Value {
    // Serializing enums of strings, integers and booleans cannot fail.
    let mut tagged = serde_json::to_value(action).unwrap_or(Value::Null);
    let mut params = match tagged.get_mut("params") {
        Some(p) => p.take(),
        None => Value::Object(Default::default()),
    };
    if let Some(obj) = params.as_object_mut() {
        obj.retain(|_, v| !v.is_null());
    }
    params
}

fn req(name: &'static str, schema: Schema) -> Property {
    Property::required(name, schema)
}

fn stream_schema(description: &'static str) -> Schema {
    Schema::enumeration(description, &Stream::ALL.map(Stream::as_str))
}

fn package_param() -> Schema {
    Schema::pattern(
        "Android package name, e.g. org.videolan.vlc",
        PACKAGE_PATTERN,
        255,
    )
}

/// An action's example as its parameters. Names in an example are checked
/// like any others (`"org.videolan.vlc".try_into()?`); one that is not
/// valid gives an example no schema accepts, which the catalogue tests
/// refuse, instead of a panic or a quietly empty example.
fn example_of<T: Serialize>(build: impl FnOnce() -> Result<T, NameError>) -> Value {
    match build() {
        Ok(example) => params_of(&example),
        Err(e) => json!({ "invalid_example": e.to_string() }),
    }
}

/// A Home Assistant reading of a state field.
fn ha_sensor(
    object_id: &'static str,
    name: &'static str,
    field: &'static str,
    device_class: Option<&'static str>,
    unit: Option<&'static str>,
) -> HaEntity {
    HaEntity {
        object_id,
        name,
        kind: HaKind::Sensor {
            field,
            device_class,
            unit,
        },
    }
}

/// A Home Assistant on/off reading of a boolean state field.
fn ha_binary(
    object_id: &'static str,
    name: &'static str,
    field: &'static str,
    device_class: Option<&'static str>,
) -> HaEntity {
    HaEntity {
        object_id,
        name,
        kind: HaKind::BinarySensor {
            field,
            device_class,
        },
    }
}

/// A Home Assistant button that sends `press`.
fn ha_button(object_id: &'static str, name: &'static str, press: fn() -> Command) -> HaEntity {
    HaEntity {
        object_id,
        name,
        kind: HaKind::Button { press },
    }
}

/// A Home Assistant switch over a service's `enabled` state, turned on and
/// off by the service's `enable` and `disable` actions.
fn ha_switch(
    object_id: &'static str,
    name: &'static str,
    on: fn() -> Command,
    off: fn() -> Command,
) -> HaEntity {
    HaEntity {
        object_id,
        name,
        kind: HaKind::Switch {
            field: "enabled",
            on,
            off,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Catalogue;

    #[test]
    fn every_action_enum_lists_its_services_actions_in_order() {
        let services = Catalogue::get().services();
        let names = action_names();
        assert_eq!(services.len(), names.len());
        for (service, names) in services.iter().zip(names) {
            let spec_names: Vec<&str> = service.actions.iter().map(|a| a.name).collect();
            assert_eq!(spec_names, names, "{}", service.id);
        }
    }

    /// A field's schema is its type's unless it gives one; it is described
    /// once: by its schema, or else by its doc comment (lines joined).
    #[test]
    fn a_record_fields_schema_follows_its_type_and_its_doc_describes_it() {
        let property = |fields: &[Property], name: &str| {
            let field = fields.iter().find(|p| p.name == name);
            field.map(|p| p.schema.to_json()).unwrap_or_default()
        };
        let disk = Filesystem::properties();
        assert_eq!(
            property(&disk, "mount"),
            json!({"type": "string", "description": "Where it is mounted, e.g. `/data`."})
        );
        assert_eq!(
            property(&disk, "size_bytes"),
            json!({"type": "integer", "minimum": 0, "description": "Total size."})
        );
        assert_eq!(
            property(&disk, "use_percent")["description"],
            "Used, in percent of the size (rounded; `df`'s own figure when it prints one)."
        );
        let battery = BatteryStatus::properties();
        assert_eq!(
            property(&battery, "status")["description"],
            "charging status",
            "a schema's own description wins"
        );
        assert_eq!(property(&battery, "level_percent")["maximum"], 100);
        let wifi = WifiScan::properties();
        assert_eq!(property(&wifi, "networks")["type"], "array");
        assert_eq!(property(&wifi, "networks")["items"]["type"], "object");
    }
}
