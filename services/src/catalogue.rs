//! The catalogue itself: every service, its actions, their parameter and
//! result schemas, risk levels and descriptions written for a language model.

use crate::command::{RingerMode, Stream};
use crate::error::CatalogueError;
use crate::schema::{Property, Schema, ViolationKind};
use crate::{Command, names::ServiceId};
use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::LazyLock;

/// Android package names: dot-separated Java identifiers, two segments or more.
pub(crate) static PACKAGE_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(PACKAGE_PATTERN).expect("the package pattern is a valid regular expression")
});
const PACKAGE_PATTERN: &str = r"^[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z][A-Za-z0-9_]*)+$";
/// An activity: `.Main`, `Main` or a fully qualified class name (inner classes with `$`).
const ACTIVITY_PATTERN: &str = r"^\.?[A-Za-z_][A-Za-z0-9_$]*(\.[A-Za-z_][A-Za-z0-9_$]*)*$";
/// http or https only, and only the printable ASCII characters RFC 3986
/// allows in a URL (unreserved, reserved and `%` for percent-encoding),
/// except the quote `'`. Everything else — whitespace, quotes, backslashes,
/// C0 and C1 control characters, and every non-ASCII character, among them
/// Unicode format characters such as U+202E (right-to-left override),
/// U+200B (zero width space) and U+FEFF — is refused by construction: a
/// list of characters allowed cannot forget one that is dangerous.
/// Non-ASCII text in a URL must be percent-encoded, as RFC 3986 requires.
const URL_PATTERN: &str =
    r"^https?://[A-Za-z0-9.\-]+(:[0-9]{1,5})?(/[A-Za-z0-9\-._~:/?#\[\]@!$&()*+,;=%]*)?$";
const FILENAME_PATTERN: &str = r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$";

/// How much harm an action can do; approval policy is expressed in these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Risk {
    /// Reads, or harmless and easily undone (media keys, volume, brightness).
    Low,
    /// Noticeable or privacy-relevant (launching apps, location, toggling Bluetooth).
    Medium,
    /// Can cut the phone off or capture private data (Wi-Fi off, airplane mode, camera).
    High,
}

impl Risk {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
        }
    }
}

/// One parameter of an action.
#[derive(Debug, Clone)]
pub struct ParamSpec {
    /// The parameter name.
    pub name: &'static str,
    /// Whether it must be given.
    pub required: bool,
    /// Its schema, with description and bounds.
    pub schema: Schema,
}

/// One action of a service.
#[derive(Debug, Clone)]
pub struct ActionSpec {
    /// The action name, snake_case.
    pub name: &'static str,
    /// One line for a language model: what it does and what it returns.
    pub description: &'static str,
    /// How much harm it can do.
    pub risk: Risk,
    /// Whether it changes the device's state.
    pub mutates: bool,
    /// Its parameters.
    pub params: Vec<ParamSpec>,
    /// The shape of a successful result.
    pub result: Schema,
    /// An example of valid parameters.
    pub example: Value,
}

impl ActionSpec {
    /// The parameters as one JSON object schema.
    pub fn params_schema(&self) -> Schema {
        Schema::object(
            "",
            self.params
                .iter()
                .map(|p| Property {
                    name: p.name,
                    required: p.required,
                    schema: p.schema.clone(),
                })
                .collect(),
        )
    }

    /// A JSON description: name, description, risk, mutates, parameter and
    /// result schemas.
    pub fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "description": self.description,
            "risk": self.risk,
            "mutates": self.mutates,
            "params": self.params_schema().to_json(),
            "result": self.result.to_json(),
            "example": self.example,
        })
    }
}

/// One service: an Android capability.
#[derive(Debug, Clone)]
pub struct ServiceSpec {
    /// camelCase node type, e.g. `batteryMonitor`.
    pub node_type: &'static str,
    /// snake_case service id, e.g. `battery`.
    pub id: &'static str,
    /// One line for people and language models.
    pub description: &'static str,
    /// The service's actions.
    pub actions: Vec<ActionSpec>,
}

impl ServiceSpec {
    /// The action of that name, if any.
    pub fn action(&self, name: &str) -> Option<&ActionSpec> {
        self.actions.iter().find(|a| a.name == name)
    }

    /// The highest risk among the service's actions.
    pub fn max_risk(&self) -> Risk {
        self.actions
            .iter()
            .map(|a| a.risk)
            .max()
            .unwrap_or(Risk::Low)
    }

    /// A JSON description of the service and all its actions.
    pub fn to_json(&self) -> Value {
        json!({
            "service_id": self.id,
            "node_type": self.node_type,
            "description": self.description,
            "actions": self.actions.iter().map(ActionSpec::to_json).collect::<Vec<_>>(),
        })
    }
}

/// The catalogue of every service. Obtain it with [`Catalogue::get`].
#[derive(Debug)]
pub struct Catalogue {
    services: Vec<ServiceSpec>,
}

static CATALOGUE: LazyLock<Catalogue> = LazyLock::new(|| Catalogue { services: build() });

impl Catalogue {
    /// The catalogue (built once, on first use).
    pub fn get() -> &'static Catalogue {
        &CATALOGUE
    }

    /// Every service, in catalogue order.
    pub fn services(&self) -> &[ServiceSpec] {
        &self.services
    }

    /// Look a service up by service id (`wifi_automation`) or node type
    /// (`wifiAutomation`).
    ///
    /// # Errors
    /// [`CatalogueError::UnknownService`] listing every valid name.
    pub fn service(&self, name: &str) -> Result<&ServiceSpec, CatalogueError> {
        self.services
            .iter()
            .find(|s| s.id == name || s.node_type == name)
            .ok_or_else(|| CatalogueError::UnknownService {
                given: name.chars().take(80).collect(),
                valid: self
                    .services
                    .iter()
                    .map(|s| format!("{} ({})", s.id, s.node_type))
                    .collect(),
            })
    }

    /// The service id for a node type or service id.
    ///
    /// # Errors
    /// [`CatalogueError::UnknownService`] listing every valid name.
    pub fn service_id(&self, name: &str) -> Result<ServiceId, CatalogueError> {
        let spec = self.service(name)?;
        Ok(ServiceId::try_from(spec.id).expect("catalogue service ids are valid"))
    }

    /// Look up an action of a service.
    ///
    /// # Errors
    /// Unknown service or unknown action, each listing the valid names.
    pub fn action(
        &self,
        service: &str,
        action: &str,
    ) -> Result<(&ServiceSpec, &ActionSpec), CatalogueError> {
        let spec = self.service(service)?;
        let action_spec = spec
            .action(action)
            .ok_or_else(|| CatalogueError::UnknownAction {
                service: spec.id.to_owned(),
                given: action.chars().take(80).collect(),
                valid: spec.actions.iter().map(|a| a.name.to_owned()).collect(),
            })?;
        Ok((spec, action_spec))
    }

    /// Turn untrusted input into a typed [`Command`]. `params` may be `null`
    /// (no parameters) or an object.
    ///
    /// # Errors
    /// Unknown service or action; parameters that are not an object, unknown,
    /// missing, of the wrong type or out of bounds — each naming the parameter.
    pub fn parse(
        &self,
        service: &str,
        action: &str,
        params: &Value,
    ) -> Result<Command, CatalogueError> {
        let (spec, action_spec) = self.action(service, action)?;
        let empty = Value::Object(Default::default());
        let params = if params.is_null() { &empty } else { params };
        let err_ctx = |param: String, reason: String, kind: ViolationKind| match kind {
            ViolationKind::Unknown => CatalogueError::UnknownParameter {
                service: spec.id.to_owned(),
                action: action_spec.name.to_owned(),
                param,
                valid: action_spec
                    .params
                    .iter()
                    .map(|p| p.name.to_owned())
                    .collect(),
            },
            ViolationKind::Missing => CatalogueError::MissingParameter {
                service: spec.id.to_owned(),
                action: action_spec.name.to_owned(),
                param,
            },
            ViolationKind::Invalid => CatalogueError::InvalidParameter {
                service: spec.id.to_owned(),
                action: action_spec.name.to_owned(),
                param,
                reason,
            },
        };
        if !params.is_object() {
            return Err(CatalogueError::ParamsNotObject {
                service: spec.id.to_owned(),
                action: action_spec.name.to_owned(),
                got: crate::schema::json_type(params),
            });
        }
        action_spec
            .params_schema()
            .validate(params)
            .map_err(|v| err_ctx(v.path, v.reason, v.kind))?;
        let tagged = if action_spec.params.is_empty() {
            json!({ "action": action_spec.name })
        } else {
            json!({ "action": action_spec.name, "params": params })
        };
        Command::from_validated(spec.id, tagged)
            .map_err(|e| err_ctx(String::new(), e.to_string(), ViolationKind::Invalid))
    }
}

// ---------------------------------------------------------------------------
// The data. Helpers keep each action to a few lines.

fn action(name: &'static str, risk: Risk, mutates: bool, description: &'static str) -> ActionSpec {
    ActionSpec {
        name,
        description,
        risk,
        mutates,
        params: Vec::new(),
        result: Schema::object("", Vec::new()),
        example: json!({}),
    }
}

impl ActionSpec {
    fn param(mut self, name: &'static str, required: bool, schema: Schema) -> Self {
        self.params.push(ParamSpec {
            name,
            required,
            schema,
        });
        self
    }

    fn returns(mut self, properties: Vec<Property>) -> Self {
        self.result = Schema::object("", properties);
        self
    }

    fn example(mut self, example: Value) -> Self {
        self.example = example;
        self
    }
}

fn req(name: &'static str, schema: Schema) -> Property {
    Property::required(name, schema)
}

/// A result field a device may leave out: present, possibly `null`.
fn opt(name: &'static str, schema: Schema) -> Property {
    Property::required(name, schema.or_null())
}

fn stream_schema(description: &'static str) -> Schema {
    Schema::enumeration(description, &Stream::ALL.map(Stream::as_str))
}

fn toggle_result(what: &'static str) -> Vec<Property> {
    vec![req("enabled", Schema::boolean(what))]
}

fn vec3() -> Schema {
    Schema::object(
        "x, y, z",
        vec![
            req("x", Schema::number("")),
            req("y", Schema::number("")),
            req("z", Schema::number("")),
        ],
    )
}

fn package_param() -> Schema {
    Schema::pattern(
        "Android package name, e.g. org.videolan.vlc",
        PACKAGE_PATTERN,
        255,
    )
}

fn media_key(name: &'static str, description: &'static str) -> ActionSpec {
    action(name, Risk::Low, true, description).returns(vec![req(
        "dispatched",
        Schema::string("the media key sent"),
    )])
}

fn build() -> Vec<ServiceSpec> {
    vec![
        ServiceSpec {
            node_type: "batteryMonitor",
            id: "battery",
            description: "Battery level, charging state and health.",
            actions: vec![action("status", Risk::Low, false, "Read the battery: level in percent, charging status, plug type, health, temperature and voltage.")
                .returns(vec![
                    req("level_percent", Schema::integer("charge in percent", Some(0), Some(100))),
                    req("level", Schema::integer("raw level", None, None)),
                    req("scale", Schema::integer("raw scale", None, None)),
                    req("status", Schema::enumeration("charging status", &["charging", "discharging", "not_charging", "full", "unknown"])),
                    req("health", Schema::enumeration("battery health", &["good", "overheat", "dead", "over_voltage", "failure", "cold", "unknown"])),
                    opt("plugged", Schema::enumeration("power source", &["ac", "usb", "wireless", "dock"])),
                    req("charging", Schema::boolean("whether it is charging")),
                    req("present", Schema::boolean("whether a battery is present")),
                    opt("temperature_c", Schema::number("temperature in °C")),
                    opt("voltage_mv", Schema::integer("voltage in mV", None, None)),
                    opt("technology", Schema::string("battery chemistry")),
                ])],
        },
        ServiceSpec {
            node_type: "networkMonitor",
            id: "network",
            description: "Network interfaces, addresses and routes.",
            actions: vec![action("status", Risk::Low, false, "Read the network: Wi-Fi link state and address, routes and the default gateway, airplane mode.")
                .returns(vec![
                    req("wifi", Schema::object("the wlan0 link", vec![
                        req("interface", Schema::string("")),
                        req("up", Schema::boolean("link administratively up")),
                        req("carrier", Schema::boolean("connected to a network")),
                        opt("ipv4", Schema::string("IPv4 address")),
                        opt("prefix_len", Schema::integer("", Some(0), Some(32))),
                        req("ipv6", Schema::array("IPv6 addresses", Schema::string(""))),
                        opt("mac", Schema::string("MAC address")),
                    ])),
                    req("routes", Schema::array("routing table", Schema::object("", vec![
                        req("destination", Schema::string("")),
                        opt("gateway", Schema::string("")),
                        opt("interface", Schema::string("")),
                        opt("source", Schema::string("")),
                    ]))),
                    opt("default_gateway", Schema::string("gateway of the default route")),
                    req("airplane_mode", Schema::boolean("")),
                ])],
        },
        ServiceSpec {
            node_type: "systemInfo",
            id: "system_info",
            description: "Device model, Android version, memory and uptime.",
            actions: vec![action("info", Risk::Low, false, "Read device facts: model, manufacturer, Android version and SDK level, build, memory and uptime.")
                .returns(vec![
                    req("model", Schema::string("")),
                    req("manufacturer", Schema::string("")),
                    req("brand", Schema::string("")),
                    req("device", Schema::string("")),
                    req("android_version", Schema::string("")),
                    opt("sdk", Schema::integer("API level", None, None)),
                    req("build_id", Schema::string("")),
                    opt("serial", Schema::string("")),
                    opt("memory_total_kb", Schema::integer("", Some(0), None)),
                    opt("memory_available_kb", Schema::integer("", Some(0), None)),
                    opt("uptime_s", Schema::number("seconds since boot")),
                ])],
        },
        ServiceSpec {
            node_type: "location",
            id: "location",
            description: "The phone's position.",
            actions: vec![
                action("current", Risk::Medium, false, "Read the phone's last known position (latitude, longitude, accuracy, provider).")
                    .returns(vec![
                        req("provider", Schema::string("gps, fused or network")),
                        req("latitude", Schema::number("")),
                        req("longitude", Schema::number("")),
                        opt("altitude_m", Schema::number("")),
                        opt("accuracy_m", Schema::number("")),
                        opt("speed_mps", Schema::number("")),
                        opt("bearing_deg", Schema::number("")),
                    ]),
                action("start_tracking", Risk::High, true, "Start pushing position updates at an interval (companion app only).")
                    .param("interval_s", false, Schema::integer("seconds between updates", Some(10), Some(86_400)))
                    .returns(vec![req("tracking", Schema::boolean("")), opt("interval_s", Schema::integer("", None, None))])
                    .example(json!({"interval_s": 60})),
                action("stop_tracking", Risk::Low, true, "Stop pushing position updates (companion app only).")
                    .returns(vec![req("tracking", Schema::boolean(""))]),
            ],
        },
        ServiceSpec {
            node_type: "appLauncher",
            id: "app_launcher",
            description: "Start and stop apps.",
            actions: vec![
                action("launch", Risk::Medium, true, "Start an installed app by package name, optionally a specific activity.")
                    .param("package", true, package_param())
                    .param("activity", false, Schema::pattern("activity class, e.g. .MainActivity", ACTIVITY_PATTERN, 255))
                    .returns(vec![
                        req("package", Schema::string("")),
                        req("component", Schema::string("the started package/activity")),
                        req("status", Schema::string("ok or timeout")),
                        opt("launch_state", Schema::string("COLD, WARM or HOT")),
                        opt("total_time_ms", Schema::integer("", Some(0), None)),
                    ])
                    .example(json!({"package": "org.videolan.vlc"})),
                action("stop", Risk::Medium, true, "Force-stop an app by package name.")
                    .param("package", true, package_param())
                    .returns(vec![req("package", Schema::string("")), req("stopped", Schema::boolean(""))])
                    .example(json!({"package": "org.videolan.vlc"})),
            ],
        },
        ServiceSpec {
            node_type: "appList",
            id: "app_list",
            description: "Installed apps.",
            actions: vec![action("list", Risk::Low, false, "List installed packages; user apps only unless include_system is true.")
                .param("include_system", false, Schema::boolean("include system packages (default false)"))
                .param("include_disabled", false, Schema::boolean("include disabled packages (default false)"))
                .returns(vec![
                    req("count", Schema::integer("", Some(0), None)),
                    req("packages", Schema::array("", Schema::object("", vec![
                        req("package", Schema::string("")),
                        opt("path", Schema::string("APK path")),
                        req("system_app", Schema::boolean("")),
                    ]))),
                ])
                .example(json!({"include_system": false}))],
        },
        ServiceSpec {
            node_type: "wifiAutomation",
            id: "wifi_automation",
            description: "Wi-Fi state, connection and scanning.",
            actions: vec![
                action("status", Risk::Low, false, "Read Wi-Fi: on or off, connected network (SSID, BSSID, signal, speed, frequency) and IP address.")
                    .returns(vec![
                        req("enabled", Schema::boolean("")),
                        req("connected", Schema::boolean("")),
                        opt("ssid", Schema::string("")),
                        opt("bssid", Schema::string("")),
                        opt("ip", Schema::string("")),
                        opt("rssi_dbm", Schema::integer("signal strength", None, None)),
                        opt("link_speed_mbps", Schema::integer("", None, None)),
                        opt("frequency_mhz", Schema::integer("", None, None)),
                        opt("mac", Schema::string("")),
                    ]),
                action("enable", Risk::Medium, true, "Turn Wi-Fi on.").returns(toggle_result("Wi-Fi is on")),
                action("disable", Risk::High, true, "Turn Wi-Fi off. May cut the daemon off from a phone reached over Wi-Fi.").returns(toggle_result("Wi-Fi is on")),
                action("scan", Risk::Low, false, "Scan for Wi-Fi networks and list them with signal strength and security.")
                    .returns(vec![req("networks", Schema::array("", Schema::object("", vec![
                        req("ssid", Schema::string("empty for a hidden network")),
                        req("bssid", Schema::string("")),
                        req("frequency_mhz", Schema::integer("", None, None)),
                        req("rssi_dbm", Schema::integer("", None, None)),
                        req("security", Schema::string("capability flags")),
                        opt("age_s", Schema::number("seconds since the network was last seen")),
                    ])))]),
            ],
        },
        ServiceSpec {
            node_type: "bluetoothAutomation",
            id: "bluetooth_automation",
            description: "Bluetooth state and bonded devices.",
            actions: vec![
                action("status", Risk::Low, false, "Read Bluetooth: on or off, adapter state, name and address.")
                    .returns(vec![
                        req("enabled", Schema::boolean("")),
                        req("state", Schema::string("ON, OFF, TURNING_ON, TURNING_OFF")),
                        opt("name", Schema::string("")),
                        opt("address", Schema::string("")),
                    ]),
                action("enable", Risk::Medium, true, "Turn Bluetooth on.").returns(toggle_result("Bluetooth is on")),
                action("disable", Risk::Medium, true, "Turn Bluetooth off.").returns(toggle_result("Bluetooth is on")),
                action("paired_devices", Risk::Low, false, "List bonded (paired) Bluetooth devices.")
                    .returns(vec![req("devices", Schema::array("", Schema::object("", vec![
                        req("address", Schema::string("")),
                        opt("name", Schema::string("null when the phone has no name for it")),
                    ])))]),
            ],
        },
        ServiceSpec {
            node_type: "audioAutomation",
            id: "audio_automation",
            description: "Volume per stream, mute and ringer mode.",
            actions: {
                let volume = || vec![
                    req("stream", stream_schema("")),
                    req("level", Schema::integer("volume in percent of the stream's range", Some(0), Some(100))),
                    req("index", Schema::integer("Android's volume index", None, None)),
                    req("min", Schema::integer("", None, None)),
                    req("max", Schema::integer("", None, None)),
                    req("muted", Schema::boolean("")),
                ];
                let mute = |name, risk, description| action(name, risk, true, description)
                    .param("stream", false, stream_schema("stream (default music)"))
                    .returns(vec![
                        req("stream", stream_schema("")),
                        req("muted", Schema::boolean("")),
                        req("level", Schema::integer("volume in percent after the change", Some(0), Some(100))),
                    ])
                    .example(json!({"stream": "music"}));
                vec![
                    action("get_volume", Risk::Low, false, "Read one stream's volume in percent (0-100) and its mute state.")
                        .param("stream", true, stream_schema("the audio stream"))
                        .returns(volume())
                        .example(json!({"stream": "music"})),
                    action("set_volume", Risk::Low, true, "Set one stream's volume in percent (0-100) of its range.")
                        .param("stream", true, stream_schema("the audio stream"))
                        .param("level", true, Schema::integer("volume in percent", Some(0), Some(100)))
                        .returns(volume())
                        .example(json!({"stream": "music", "level": 40})),
                    mute("mute", Risk::Medium, "Mute a stream (music unless given); unmute restores its level."),
                    mute("unmute", Risk::Low, "Unmute a stream (music unless given), restoring the level it had."),
                    action("ringer_mode", Risk::Medium, true, "Set the ringer: normal, vibrate or silent.")
                        .param("mode", true, Schema::enumeration("ringer mode", &RingerMode::ALL.map(RingerMode::as_str)))
                        .returns(vec![req("mode", Schema::enumeration("", &RingerMode::ALL.map(RingerMode::as_str)))])
                        .example(json!({"mode": "vibrate"})),
                ]
            },
        },
        ServiceSpec {
            node_type: "deviceStateAutomation",
            id: "device_state",
            description: "Screen power and battery saver.",
            actions: vec![
                action("status", Risk::Low, false, "Read power state: screen on or off, wakefulness, plugged in, battery saver.")
                    .returns(vec![
                        req("screen_on", Schema::boolean("")),
                        req("wakefulness", Schema::string("Awake, Asleep, Dreaming, Dozing")),
                        req("plugged", Schema::boolean("")),
                        opt("power_save", Schema::boolean("battery saver")),
                        opt("battery_level", Schema::integer("", None, None)),
                    ]),
                action("screen_on", Risk::Low, true, "Wake the screen.").returns(vec![req("screen_on", Schema::boolean(""))]),
                action("screen_off", Risk::Medium, true, "Turn the screen off.").returns(vec![req("screen_on", Schema::boolean(""))]),
                action("power_save", Risk::Medium, true, "Turn battery saver on or off.")
                    .param("enabled", true, Schema::boolean("whether battery saver should be on"))
                    .returns(vec![req("power_save", Schema::boolean(""))])
                    .example(json!({"enabled": true})),
            ],
        },
        ServiceSpec {
            node_type: "screenControlAutomation",
            id: "screen_control",
            description: "Brightness and screen timeout.",
            actions: vec![
                action("status", Risk::Low, false, "Read the screen: brightness (0-255), auto brightness, timeout in ms, on or off.")
                    .returns(vec![
                        req("brightness", Schema::integer("", Some(0), Some(255)).or_null()),
                        req("auto_brightness", Schema::boolean("")),
                        req("timeout_ms", Schema::integer("", Some(0), None).or_null()),
                        req("screen_on", Schema::boolean("")),
                    ]),
                action("set_brightness", Risk::Low, true, "Set the screen brightness, 0-255.")
                    .param("level", true, Schema::integer("brightness 0-255", Some(0), Some(255)))
                    .returns(vec![req("brightness", Schema::integer("", Some(0), Some(255)))])
                    .example(json!({"level": 128})),
                action("auto_brightness", Risk::Low, true, "Turn automatic brightness on or off.")
                    .param("enabled", true, Schema::boolean("whether auto brightness should be on"))
                    .returns(vec![req("auto_brightness", Schema::boolean(""))])
                    .example(json!({"enabled": true})),
                action("set_timeout", Risk::Low, true, "Set the screen-off timeout in milliseconds (5000 to 86400000).")
                    .param("ms", true, Schema::integer("timeout in milliseconds", Some(5_000), Some(86_400_000)))
                    .returns(vec![req("timeout_ms", Schema::integer("", Some(0), None))])
                    .example(json!({"ms": 60000})),
                action("wake", Risk::Low, true, "Wake the screen.").returns(vec![req("screen_on", Schema::boolean(""))]),
            ],
        },
        ServiceSpec {
            node_type: "airplaneModeControl",
            id: "airplane_mode",
            description: "Airplane mode.",
            actions: vec![
                action("status", Risk::Low, false, "Read whether airplane mode is on.").returns(toggle_result("airplane mode is on")),
                action("enable", Risk::High, true, "Turn airplane mode on. Cuts all radios; a phone reached over the network will drop.").returns(toggle_result("airplane mode is on")),
                action("disable", Risk::Medium, true, "Turn airplane mode off.").returns(toggle_result("airplane mode is on")),
            ],
        },
        ServiceSpec {
            node_type: "motionDetection",
            id: "motion_detection",
            description: "Motion sensors and orientation.",
            actions: vec![
                action("current_motion", Risk::Low, false, "Read the accelerometer and gyroscope and whether the phone is moving.")
                    .returns(vec![
                        opt("accelerometer", vec3()),
                        opt("gyroscope", vec3()),
                        opt("moving", Schema::boolean("")),
                    ]),
                action("orientation", Risk::Low, false, "Read the screen rotation (0, 90, 180, 270) and orientation.")
                    .returns(vec![
                        req("rotation_deg", Schema::integer("", Some(0), Some(270))),
                        req("orientation", Schema::enumeration("", &["portrait", "landscape", "reverse_portrait", "reverse_landscape"])),
                    ]),
            ],
        },
        ServiceSpec {
            node_type: "environmentalSensors",
            id: "environmental_sensors",
            description: "Light, pressure, temperature, humidity and proximity.",
            actions: vec![
                action("ambient_conditions", Risk::Low, false, "Read ambient light (lux), pressure (hPa), temperature (°C) and humidity (%) where the phone has the sensors.")
                    .returns(vec![
                        opt("light_lux", Schema::number("")),
                        opt("pressure_hpa", Schema::number("")),
                        opt("temperature_c", Schema::number("")),
                        opt("humidity_percent", Schema::number("")),
                        req("available", Schema::array("sensor kinds present", Schema::string(""))),
                    ]),
                action("proximity", Risk::Low, false, "Read the proximity sensor: distance in cm and whether something is near.")
                    .returns(vec![
                        req("available", Schema::boolean("")),
                        opt("distance_cm", Schema::number("")),
                        opt("near", Schema::boolean("")),
                    ]),
            ],
        },
        ServiceSpec {
            node_type: "cameraControl",
            id: "camera_control",
            description: "Cameras.",
            actions: vec![
                action("camera_info", Risk::Low, false, "List the cameras and which way each faces.")
                    .returns(vec![
                        req("count", Schema::integer("", Some(0), None)),
                        req("cameras", Schema::array("", Schema::object("", vec![
                            req("id", Schema::string("")),
                            req("facing", Schema::string("back, front or external")),
                        ]))),
                    ]),
                action("take_photo", Risk::High, true, "Take a photo and store it on the phone (companion app only).")
                    .param("filename", false, Schema::pattern("file name, e.g. door.jpg", FILENAME_PATTERN, 128))
                    .returns(vec![req("path", Schema::string("where the photo was stored"))])
                    .example(json!({"filename": "door.jpg"})),
            ],
        },
        ServiceSpec {
            node_type: "mediaControl",
            id: "media_control",
            description: "Media playback.",
            actions: vec![
                action("status", Risk::Low, false, "Read media sessions: which app is playing, state, title and artist.")
                    .returns(vec![
                        req("sessions", Schema::array("", Schema::object("", vec![
                            req("package", Schema::string("")),
                            req("active", Schema::boolean("")),
                            req("state", Schema::string("playing, paused, stopped, buffering, none")),
                            opt("title", Schema::string("")),
                            opt("artist", Schema::string("")),
                        ]))),
                        req("playing", Schema::boolean("whether any session is playing")),
                    ]),
                media_key("play", "Resume or start playback."),
                media_key("pause", "Pause playback."),
                media_key("next", "Skip to the next track."),
                media_key("previous", "Go back to the previous track."),
                media_key("stop", "Stop playback."),
                action("play_url", Risk::Medium, true, "Open an http or https URL for playback in the phone's default app.")
                    .param("url", true, Schema::pattern("http(s) URL; non-ASCII characters percent-encoded", URL_PATTERN, 2048))
                    .returns(vec![req("url", Schema::string("")), req("status", Schema::string(""))])
                    .example(json!({"url": "https://example.org/stream.mp3"})),
            ],
        },
    ]
}
