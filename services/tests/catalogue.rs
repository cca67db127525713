//! Catalogue integrity: one source of truth, every action reachable by both
//! names, and untrusted parameters rejected with errors that name them.

use droidwarden_services::{Catalogue, CatalogueError, Command, ErrorCode, RingerMode, Stream};
use serde_json::{Value, json};

const EXPECTED: &[(&str, &str, &[&str])] = &[
    ("batteryMonitor", "battery", &["status"]),
    ("networkMonitor", "network", &["status"]),
    ("systemInfo", "system_info", &["info"]),
    (
        "location",
        "location",
        &["current", "start_tracking", "stop_tracking"],
    ),
    ("appLauncher", "app_launcher", &["launch", "stop"]),
    ("appList", "app_list", &["list"]),
    (
        "wifiAutomation",
        "wifi_automation",
        &["status", "enable", "disable", "scan"],
    ),
    (
        "bluetoothAutomation",
        "bluetooth_automation",
        &["status", "enable", "disable", "paired_devices"],
    ),
    (
        "audioAutomation",
        "audio_automation",
        &["get_volume", "set_volume", "mute", "unmute", "ringer_mode"],
    ),
    (
        "deviceStateAutomation",
        "device_state",
        &["status", "screen_on", "screen_off", "power_save"],
    ),
    (
        "screenControlAutomation",
        "screen_control",
        &[
            "status",
            "set_brightness",
            "auto_brightness",
            "set_timeout",
            "wake",
        ],
    ),
    (
        "airplaneModeControl",
        "airplane_mode",
        &["status", "enable", "disable"],
    ),
    (
        "motionDetection",
        "motion_detection",
        &["current_motion", "orientation"],
    ),
    (
        "environmentalSensors",
        "environmental_sensors",
        &["ambient_conditions", "proximity"],
    ),
    (
        "cameraControl",
        "camera_control",
        &["camera_info", "take_photo"],
    ),
    (
        "mediaControl",
        "media_control",
        &[
            "status", "play", "pause", "next", "previous", "stop", "play_url",
        ],
    ),
    ("notificationReader", "notifications", &["list"]),
    (
        "intentLauncher",
        "intents",
        &["open_url", "share_text", "start_activity"],
    ),
    ("fileTransfer", "files", &["pull"]),
    (
        "appManager",
        "app_manager",
        &["install", "uninstall", "clear_data"],
    ),
    ("telephony", "telephony", &["sms_send", "dial"]),
    ("shellRunner", "shell", &["run"]),
    (
        "screenReader",
        "screen",
        &["screenshot", "ui_tree", "foreground_app"],
    ),
    (
        "uiControl",
        "ui_control",
        &[
            "tap",
            "long_press",
            "swipe",
            "scroll",
            "key",
            "power",
            "type_text",
            "get_clipboard",
            "set_clipboard",
        ],
    ),
    (
        "phoneAlerts",
        "alerts",
        &["torch", "speak", "vibrate", "find_my_phone"],
    ),
];

#[test]
fn the_sixteen_services_map_node_types_to_ids() {
    let cat = Catalogue::get();
    assert_eq!(cat.services().len(), EXPECTED.len());
    for (node_type, id, actions) in EXPECTED {
        let by_node = cat.service(node_type).unwrap();
        let by_id = cat.service(id).unwrap();
        assert_eq!(by_node.id, *id);
        assert!(
            std::ptr::eq(by_node, by_id),
            "{node_type} and {id} must be one spec"
        );
        let names: Vec<&str> = by_id.actions.iter().map(|a| a.name).collect();
        for action in *actions {
            assert!(names.contains(action), "{id} lacks {action}");
        }
    }
}

/// Regression: the design this comes from keyed three services differently
/// from their node types' mapped ids, so only `status` was ever reachable.
#[test]
fn every_action_is_reachable_by_node_type_and_by_service_id() {
    let cat = Catalogue::get();
    for spec in cat.services() {
        for action in &spec.actions {
            for name in [spec.node_type, spec.id] {
                let cmd = cat
                    .parse(name, action.name, &action.example)
                    .unwrap_or_else(|e| panic!("{name}.{}: {e}", action.name));
                assert_eq!(cmd.service_id(), spec.id);
                assert_eq!(cmd.action_name(), action.name);
                assert_eq!(
                    cmd.params_json(),
                    action.example,
                    "{}.{}",
                    spec.id,
                    action.name
                );
            }
            action.params_schema().validate(&action.example).unwrap();
            assert!(!action.description.is_empty());
            assert!(
                action.description.ends_with('.'),
                "{}.{}",
                spec.id,
                action.name
            );
            assert!(
                action.mutates
                    || action.params.iter().all(|p| !p.required)
                    || action.name == "get_volume"
                    || (spec.id, action.name) == ("files", "pull")
            );
        }
    }
}

#[test]
fn schemas_render_as_closed_objects() {
    for spec in Catalogue::get().services() {
        for action in &spec.actions {
            let params = action.params_schema().to_json();
            assert_eq!(params["type"], "object");
            assert_eq!(params["additionalProperties"], false);
            let result = action.result.to_json();
            assert_eq!(result["type"], "object", "{}.{}", spec.id, action.name);
            assert!(
                !result["properties"].as_object().unwrap().is_empty(),
                "{}.{} documents no result",
                spec.id,
                action.name
            );
        }
    }
}

/// Every described property of a rendered schema, with the path where it
/// stands, and its description (empty when it has none).
fn descriptions(schema: &Value, at: &str, out: &mut Vec<(String, String)>) {
    if let Some(props) = schema["properties"].as_object() {
        for (name, sub) in props {
            let path = format!("{at}.{name}");
            let text = sub["description"].as_str().unwrap_or_default();
            out.push((path.clone(), text.to_owned()));
            descriptions(sub, &path, out);
        }
    }
    if schema["items"].is_object() {
        descriptions(&schema["items"], &format!("{at}[]"), out);
    }
}

/// A field's doc comment is its catalogue description unless its schema
/// gives one, so rustdoc must be written for the caller: every parameter
/// and result field is described, and no description speaks Rust.
#[test]
fn every_field_is_described_for_the_caller() {
    let mut found = Vec::new();
    for spec in Catalogue::get().services() {
        for action in &spec.actions {
            let at = format!("{}.{}", spec.id, action.name);
            descriptions(&action.params_schema().to_json(), &at, &mut found);
            descriptions(&action.result.to_json(), &at, &mut found);
        }
    }
    assert!(found.len() > 300, "only {} fields", found.len());
    for (at, text) in found {
        assert!(!text.trim().is_empty(), "{at} has no description");
        for rust in [
            "None", "Some(", "[`", "Self::", "crate::", "Vec<", "Option<",
        ] {
            assert!(!text.contains(rust), "{at} speaks Rust ({rust}): {text}");
        }
    }
}

/// Every `pattern` in a rendered schema, with the path where it stands.
fn patterns(schema: &Value, at: &str, out: &mut Vec<(String, String)>) {
    if let Some(p) = schema["pattern"].as_str() {
        out.push((at.to_owned(), p.to_owned()));
    }
    if let Some(props) = schema["properties"].as_object() {
        for (name, sub) in props {
            patterns(sub, &format!("{at}.{name}"), out);
        }
    }
    if schema["items"].is_object() {
        patterns(&schema["items"], &format!("{at}[]"), out);
    }
}

/// A counted repetition such as `{0,4095}` over a character class compiles
/// to an automaton of megabytes (it once took the daemon from 16 to 40 MB
/// at start); lengths are bounded by `maxLength` instead.
#[test]
fn patterns_bound_lengths_with_max_length_not_counted_repetitions() {
    let counted = regex::Regex::new(r"\{(\d*),?(\d*)\}").unwrap();
    let mut found = Vec::new();
    for spec in Catalogue::get().services() {
        for action in &spec.actions {
            let at = format!("{}.{}", spec.id, action.name);
            patterns(&action.params_schema().to_json(), &at, &mut found);
        }
    }
    assert!(!found.is_empty());
    for (at, pattern) in found {
        for c in counted.captures_iter(&pattern) {
            let bound: u32 = [&c[1], &c[2]]
                .iter()
                .filter_map(|n| n.parse().ok())
                .max()
                .unwrap_or(0);
            assert!(bound <= 255, "{at}: {pattern} repeats up to {bound} times");
        }
    }
}

#[test]
fn enum_values_in_schemas_match_the_typed_commands() {
    let cat = Catalogue::get();
    for stream in Stream::ALL {
        let cmd = cat
            .parse(
                "audio_automation",
                "get_volume",
                &json!({"stream": stream.as_str()}),
            )
            .unwrap();
        assert_eq!(
            cmd,
            Command::Audio(droidwarden_services::AudioAction::GetVolume { stream })
        );
    }
    for mode in RingerMode::ALL {
        cat.parse(
            "audioAutomation",
            "ringer_mode",
            &json!({"mode": mode.as_str()}),
        )
        .unwrap();
    }
}

fn rejects(service: &str, action: &str, params: Value) -> CatalogueError {
    match Catalogue::get().parse(service, action, &params) {
        Ok(cmd) => panic!("{service}.{action} {params} was accepted as {cmd:?}"),
        Err(e) => e,
    }
}

#[test]
fn bad_parameters_are_rejected_naming_the_parameter() {
    let cases: Vec<(&str, &str, Value, &str)> = vec![
        (
            "audio_automation",
            "set_volume",
            json!({"stream": "music", "level": 101}),
            "level",
        ),
        (
            "audio_automation",
            "set_volume",
            json!({"stream": "music", "level": "50"}),
            "level",
        ),
        (
            "audio_automation",
            "set_volume",
            json!({"stream": "music", "level": 50.5}),
            "level",
        ),
        (
            "audio_automation",
            "set_volume",
            json!({"stream": "music"}),
            "level",
        ),
        (
            "audio_automation",
            "set_volume",
            json!({"stream": "loud", "level": 5}),
            "stream",
        ),
        (
            "audio_automation",
            "set_volume",
            json!({"stream": "music", "level": 5, "volume": 5}),
            "volume",
        ),
        (
            "screen_control",
            "set_brightness",
            json!({"level": 256}),
            "level",
        ),
        (
            "screen_control",
            "set_brightness",
            json!({"level": -1}),
            "level",
        ),
        ("screen_control", "set_timeout", json!({"ms": 10}), "ms"),
        (
            "device_state",
            "power_save",
            json!({"enabled": "yes"}),
            "enabled",
        ),
        ("battery", "status", json!({"verbose": true}), "verbose"),
        ("app_launcher", "launch", json!({}), "package"),
        (
            "app_launcher",
            "launch",
            json!({"package": "com.x;reboot"}),
            "package",
        ),
        (
            "app_launcher",
            "launch",
            json!({"package": "com.x", "activity": ".Main; reboot"}),
            "activity",
        ),
        (
            "app_launcher",
            "launch",
            json!({"package": "com.x", "activity": null}),
            "activity",
        ),
        (
            "media_control",
            "play_url",
            json!({"url": "javascript:alert(1)"}),
            "url",
        ),
        (
            "media_control",
            "play_url",
            json!({"url": "file:///sdcard/x"}),
            "url",
        ),
        (
            "media_control",
            "play_url",
            json!({"url": "https://a.b/x y"}),
            "url",
        ),
        (
            "media_control",
            "play_url",
            json!({"url": "https://a.b/'x'"}),
            "url",
        ),
        // C1 controls (U+009B is a one-byte CSI on many terminals), Unicode
        // format characters (bidi overrides, zero-width, BOM) and line
        // separators: none may hide in a URL.
        (
            "media_control",
            "play_url",
            json!({"url": "https://a.b/\u{9b}31m"}),
            "url",
        ),
        (
            "media_control",
            "play_url",
            json!({"url": "https://a.b/\u{85}x"}),
            "url",
        ),
        (
            "media_control",
            "play_url",
            json!({"url": "https://a.b/gpj.\u{202e}exe"}),
            "url",
        ),
        (
            "media_control",
            "play_url",
            json!({"url": "https://a.b/x\u{200b}y"}),
            "url",
        ),
        (
            "media_control",
            "play_url",
            json!({"url": "https://a.b/\u{feff}"}),
            "url",
        ),
        (
            "media_control",
            "play_url",
            json!({"url": "https://a.b/x\u{2028}y"}),
            "url",
        ),
        (
            "media_control",
            "play_url",
            json!({"url": "https://a.b/\u{e0041}"}),
            "url",
        ),
        (
            "media_control",
            "play_url",
            json!({"url": format!("https://a.b/{}", "x".repeat(3000))}),
            "url",
        ),
        (
            "camera_control",
            "take_photo",
            json!({"filename": "../etc/passwd"}),
            "filename",
        ),
    ];
    for (service, action, params, param) in cases {
        let err = rejects(service, action, params.clone());
        assert_eq!(
            err.code(),
            ErrorCode::InvalidParams,
            "{service}.{action} {params}: {err}"
        );
        assert!(err.to_string().contains(param), "{err} should name {param}");
    }
}

#[test]
fn parameters_must_be_an_object() {
    for params in [json!([1]), json!("x"), json!(3), json!(true)] {
        let err = rejects("battery", "status", params);
        assert!(
            matches!(err, CatalogueError::ParamsNotObject { .. }),
            "{err}"
        );
    }
    Catalogue::get()
        .parse("battery", "status", &Value::Null)
        .unwrap();
}

#[test]
fn unknown_names_list_the_valid_ones() {
    let err = rejects("batery", "status", json!({}));
    assert_eq!(err.code(), ErrorCode::UnknownService);
    let text = err.to_string();
    assert!(
        text.contains("battery (batteryMonitor)") && text.contains("media_control (mediaControl)"),
        "{text}"
    );
    let err = rejects("battery", "explode", json!({}));
    assert_eq!(err.code(), ErrorCode::UnknownAction);
    assert!(err.to_string().contains("valid actions: status"));
}

#[test]
fn optional_parameters_stay_absent_rather_than_invented() {
    let cmd = Catalogue::get()
        .parse("audio_automation", "mute", &json!({}))
        .unwrap();
    assert_eq!(cmd.params_json(), json!({}));
    assert_eq!(
        cmd,
        Command::Audio(droidwarden_services::AudioAction::Mute { stream: None })
    );
}

#[test]
fn risk_levels_gate_the_dangerous_actions() {
    use droidwarden_services::Risk;
    let cat = Catalogue::get();
    for (service, action, risk) in [
        ("battery", "status", Risk::Low),
        ("wifi_automation", "disable", Risk::High),
        ("airplane_mode", "enable", Risk::High),
        ("camera_control", "take_photo", Risk::High),
        ("app_launcher", "launch", Risk::Medium),
    ] {
        assert_eq!(
            cat.action(service, action).unwrap().1.risk,
            risk,
            "{service}.{action}"
        );
    }
    for spec in cat.services() {
        for action in &spec.actions {
            if !action.mutates {
                assert!(
                    action.risk <= Risk::Medium,
                    "a read is never high risk: {}.{}",
                    spec.id,
                    action.name
                );
            }
        }
    }
}

/// Every fact other crates derive from a service is declared with it, and
/// consistent: its state read is one of its own reads, its Home Assistant
/// controls send its own actions, entity ids and companion event names are
/// unique.
#[test]
fn each_service_declares_its_state_entities_and_companion_event_consistently() {
    use droidwarden_services::home_assistant::HaKind;
    let mut object_ids = std::collections::HashSet::new();
    let mut events = std::collections::HashSet::new();
    for spec in Catalogue::get().services() {
        if let Some(state) = spec.state {
            let read = state();
            assert_eq!(read.service_id(), spec.id);
            assert!(
                !read.mutates(),
                "{}: the state read must not change the phone",
                spec.id
            );
            assert!(read.is_state_read());
        }
        for entity in &spec.home_assistant {
            assert!(
                object_ids.insert(entity.object_id),
                "{} twice",
                entity.object_id
            );
            let commands: Vec<Command> = match &entity.kind {
                HaKind::Switch { on, off, .. } => vec![on(), off()],
                HaKind::Number { set, max, .. } => vec![set(0), set(*max)],
                HaKind::Button { press } => vec![press()],
                HaKind::Sensor { .. } | HaKind::BinarySensor { .. } => Vec::new(),
            };
            for command in commands {
                assert_eq!(command.service_id(), spec.id, "{}", entity.object_id);
                // A control's command passes the catalogue's own validation.
                Catalogue::get()
                    .parse(spec.id, command.action_name(), &command.params_json())
                    .unwrap();
            }
            if !matches!(entity.kind, HaKind::Button { .. }) {
                assert!(
                    spec.state.is_some(),
                    "{} shows a state it never reads",
                    entity.object_id
                );
            }
        }
        if let Some(event) = spec.companion_event {
            assert!(events.insert(event), "{event} twice");
            assert!(
                spec.state.is_some(),
                "{event} reports a state the service never reads"
            );
        }
    }
    // Location is pushed by the companion app, so it must have a state read.
    let location = Catalogue::get().service("location").unwrap();
    assert!(location.state.is_some() && location.companion_event == Some("location"));
}

/// A Home Assistant entity shows a field of its service's state: the field
/// must be in the state read's result record, of a kind the entity can
/// show. A misspelt field would leave the entity `unknown` for ever.
#[test]
fn every_home_assistant_entity_shows_a_field_of_its_services_state() {
    use droidwarden_services::home_assistant::{HaKind, HaStep};
    use droidwarden_services::schema::Kind;
    let mut checked = 0;
    for spec in Catalogue::get().services() {
        let properties = match spec.state.map(|state| &state().spec().result.kind) {
            Some(Kind::Object(properties)) => properties.as_slice(),
            _ => &[],
        };
        let kind_of = |field: &str| {
            properties
                .iter()
                .find(|p| p.name == field)
                .map(|p| &p.schema.kind)
                .unwrap_or_else(|| panic!("{}: the state has no field {field:?}", spec.id))
        };
        for entity in &spec.home_assistant {
            let (field, fits): (&str, fn(&Kind) -> bool) = match &entity.kind {
                HaKind::Sensor { field, .. } => (field, |k| {
                    matches!(k, Kind::Integer { .. } | Kind::Number | Kind::String { .. })
                }),
                HaKind::BinarySensor { field, .. } | HaKind::Switch { field, .. } => {
                    (field, |k| matches!(k, Kind::Boolean))
                }
                HaKind::Number { field, step, .. } => {
                    if *step == HaStep::PhoneSteps {
                        assert!(
                            matches!(kind_of("max"), Kind::Integer { .. }),
                            "{}: steps need the state's max",
                            entity.object_id
                        );
                    }
                    (field, |k| matches!(k, Kind::Integer { .. } | Kind::Number))
                }
                HaKind::Button { .. } => continue,
            };
            let kind = kind_of(field);
            assert!(
                fits(kind),
                "{}: {field} is {kind:?}, which this entity cannot show",
                entity.object_id
            );
            checked += 1;
        }
    }
    assert!(checked >= 5, "only {checked} entities show a field");
}
