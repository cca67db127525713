use super::*;
use crate::tools::schema::Dialect;
use serde_json::json;

fn dev(name: &str, services: &[&str]) -> DeviceSummary {
    DeviceSummary {
        name: name.into(),
        services: services.iter().map(|s| (*s).to_owned()).collect(),
        online: true,
    }
}

fn all(name: &str) -> DeviceSummary {
    let ids: Vec<&str> = Catalogue::get().services().iter().map(|s| s.id).collect();
    dev(name, &ids)
}

fn sets() -> Vec<(&'static str, Toolset)> {
    vec![
        (
            "toolkit/1",
            Toolset::new(ToolMode::Toolkit, &[all("phone")], true),
        ),
        (
            "toolkit/2",
            Toolset::new(
                ToolMode::Toolkit,
                &[all("kitchen"), dev("bedroom", &["battery"])],
                true,
            ),
        ),
        (
            "direct/1",
            Toolset::new(ToolMode::Direct, &[all("phone")], true),
        ),
        (
            "direct/2",
            Toolset::new(ToolMode::Direct, &[all("kitchen"), all("bedroom")], false),
        ),
    ]
}

fn keys(v: &Value) -> Vec<String> {
    v.as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

/// Check every node of a rendered schema with `node` (which answers
/// whether to look inside), descending into properties and items.
fn walk(
    v: &Value,
    path: &str,
    errors: &mut Vec<String>,
    node: fn(&Value, &str, &mut Vec<String>) -> bool,
) {
    if !node(v, path, errors) {
        return;
    }
    for k in keys(&v["properties"]) {
        walk(&v["properties"][&k], &format!("{path}.{k}"), errors, node);
    }
    if let Some(items) = v.get("items") {
        walk(items, &format!("{path}[]"), errors, node);
    }
}

/// The keywords every provider takes.
const COMMON_KEYWORDS: &[&str] = &[
    "type",
    "description",
    "enum",
    "properties",
    "required",
    "items",
    "minimum",
    "maximum",
];

/// Every keyword of the node is a common one or in `extra`; `why` ends the
/// message for one that is not.
fn only_keywords(v: &Value, path: &str, extra: &[&str], why: &str, errors: &mut Vec<String>) {
    for k in keys(v) {
        if !COMMON_KEYWORDS.contains(&k.as_str()) && !extra.contains(&k.as_str()) {
            errors.push(format!("{path}: keyword {k} {why}"));
        }
    }
}

/// Every name in `required` is a property.
fn required_are_properties(v: &Value, path: &str, errors: &mut Vec<String>) {
    let props = keys(&v["properties"]);
    for r in v["required"].as_array().into_iter().flatten() {
        if !props.iter().any(|p| Some(p.as_str()) == r.as_str()) {
            errors.push(format!("{path}: required {r} is not a property"));
        }
    }
}

/// OpenAI strict mode: closed objects, every property required, optional
/// ones nullable, only documented keywords.
fn openai_strict_node(v: &Value, path: &str, errors: &mut Vec<String>) -> bool {
    const EXTRA: &[&str] = &["additionalProperties", "anyOf"];
    only_keywords(v, path, EXTRA, "not supported in strict mode", errors);
    let types: Vec<&str> = match &v["type"] {
        Value::String(s) => vec![s.as_str()],
        Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
        _ => {
            errors.push(format!("{path}: no type"));
            return false;
        }
    };
    if let Value::Array(a) = &v["type"]
        && !(a.len() == 2 && types[1] == "null")
    {
        errors.push(format!("{path}: type arrays must be [T, \"null\"]"));
    }
    if let Some(e) = v.get("enum").and_then(Value::as_array)
        && types.contains(&"null")
        && !e.contains(&Value::Null)
    {
        errors.push(format!("{path}: nullable enum without null"));
    }
    if types.contains(&"object") {
        let mut props = keys(&v["properties"]);
        let mut required: Vec<String> = v["required"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|x| x.as_str().map(str::to_owned))
            .collect();
        props.sort();
        required.sort();
        if props != required {
            errors.push(format!(
                "{path}: required {required:?} must list every property {props:?}"
            ));
        }
        if v["additionalProperties"] != json!(false) {
            errors.push(format!("{path}: additionalProperties must be false"));
        }
    }
    true
}

/// Anthropic: standard JSON Schema with our keywords.
fn anthropic_node(v: &Value, path: &str, errors: &mut Vec<String>) -> bool {
    const EXTRA: &[&str] = &["additionalProperties", "pattern", "maxLength"];
    only_keywords(v, path, EXTRA, "is unexpected", errors);
    required_are_properties(v, path, errors);
    true
}

/// Gemini's OpenAPI subset: no additionalProperties, no type arrays, enums
/// on strings only, objects with properties.
fn gemini_node(v: &Value, path: &str, errors: &mut Vec<String>) -> bool {
    const EXTRA: &[&str] = &["nullable", "format"];
    only_keywords(v, path, EXTRA, "not in Gemini's schema subset", errors);
    let Some(t) = v["type"].as_str() else {
        errors.push(format!("{path}: type must be a single string"));
        return false;
    };
    if !["string", "number", "integer", "boolean", "array", "object"].contains(&t) {
        errors.push(format!("{path}: unknown type {t}"));
    }
    if v.get("enum").is_some() && t != "string" {
        errors.push(format!("{path}: enum on a non-string"));
    }
    if t == "object" {
        if keys(&v["properties"]).is_empty() {
            errors.push(format!("{path}: object without properties"));
        }
        required_are_properties(v, path, errors);
    }
    true
}

#[test]
fn the_provider_checks_catch_what_each_provider_rejects() {
    let bad = json!({
        "type": "object",
        "properties": {
            "a": {"type": "string", "pattern": "^x$"},
            "b": {"type": "object", "properties": {}, "required": ["c"]},
        },
        "required": ["a"],
    });
    let errors = |node| {
        let mut errors = Vec::new();
        walk(&bad, "t", &mut errors, node);
        errors
    };
    assert_eq!(
        errors(openai_strict_node),
        [
            "t: required [\"a\"] must list every property [\"a\", \"b\"]",
            "t: additionalProperties must be false",
            "t.a: keyword pattern not supported in strict mode",
            "t.b: required [\"c\"] must list every property []",
            "t.b: additionalProperties must be false",
        ]
    );
    assert_eq!(
        errors(anthropic_node),
        ["t.b: required \"c\" is not a property"]
    );
    assert_eq!(
        errors(gemini_node),
        [
            "t.a: keyword pattern not in Gemini's schema subset",
            "t.b: object without properties",
            "t.b: required \"c\" is not a property",
        ]
    );
}

#[test]
fn generated_schemas_follow_each_providers_rules() {
    for (label, set) in sets() {
        assert!(!set.is_empty());
        for spec in set.specs().iter() {
            let mut errors = Vec::new();
            let openai = spec
                .parameters_for(Dialect::OpenAiStrict)
                .expect("always rendered");
            assert_eq!(openai["type"], "object");
            walk(&openai, &spec.name, &mut errors, openai_strict_node);
            let anthropic = spec
                .parameters_for(Dialect::Anthropic)
                .expect("always rendered");
            assert_eq!(anthropic["type"], "object");
            walk(&anthropic, &spec.name, &mut errors, anthropic_node);
            match spec.parameters_for(Dialect::Gemini) {
                Some(g) => walk(&g, &spec.name, &mut errors, gemini_node),
                None => assert_eq!(
                    spec.name, TIME_TOOL,
                    "only parameterless tools omit parameters"
                ),
            }
            assert!(errors.is_empty(), "{label}/{}: {errors:#?}", spec.name);
        }
    }
}

#[test]
fn device_property_only_with_several_devices() {
    let one = Toolset::new(ToolMode::Toolkit, &[all("phone")], false);
    let p = one.specs()[0].parameters_for(Dialect::Anthropic).unwrap();
    assert!(p["properties"].get("device").is_none());
    let two = Toolset::new(ToolMode::Toolkit, &[all("kitchen"), all("bedroom")], false);
    let p = two.specs()[0]
        .parameters_for(Dialect::OpenAiStrict)
        .unwrap();
    assert_eq!(
        p["properties"]["device"]["enum"],
        json!(["kitchen", "bedroom", null])
    );
    // The description is the index: each service's actions on one line,
    // with their parameters (`*` required) and risk above low.
    let index = &two.specs()[0].description;
    for s in Catalogue::get().services() {
        assert!(index.contains(&format!("\n{}: ", s.id)), "{}", s.id);
    }
    assert!(
        index.contains("\naudio_automation: get_volume(stream*), set_volume(stream*,level*), mute(stream)[medium],"),
        "{index}"
    );
    assert!(index.contains("disable[high], scan"), "{index}");
    assert!(
        index.contains("Phones (\"device\"): kitchen, bedroom."),
        "{index}"
    );
}

#[test]
fn direct_mode_has_one_tool_per_available_service_with_its_actions_indexed() {
    let set = Toolset::new(
        ToolMode::Direct,
        &[dev("phone", &["battery", "audio_automation"])],
        false,
    );
    let names: Vec<&str> = set.specs().iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        ["android_battery", "android_audio_automation", DESCRIBE_TOOL]
    );
    let p = set.specs()[1].parameters_for(Dialect::Gemini).unwrap();
    assert_eq!(p["properties"]["action"]["type"], "string");
    assert!(
        set.specs()[1]
            .description
            .contains(": get_volume(stream*), set_volume(stream*,level*), mute(stream)[medium],")
    );
}

/// `parameters` is free-form: an open object for standard readers, JSON
/// text where the dialect has no open object. Its real schema comes from
/// `describe_action`, and with every error of the action.
#[test]
fn parameters_are_free_form_and_describe_action_gives_the_schema() {
    let set = Toolset::new(ToolMode::Toolkit, &[all("phone")], false);
    let spec = &set.specs()[0];
    let rendered = |d| spec.parameters_for(d).unwrap()["properties"]["parameters"]["type"].clone();
    assert_eq!(rendered(Dialect::Anthropic), "object");
    assert_eq!(rendered(Dialect::OpenAiStrict), json!(["string", "null"]));
    assert_eq!(rendered(Dialect::Gemini), "string");
    // JSON text is taken as the object.
    let p = set
        .plan(&call(
            TOOLKIT_TOOL,
            r#"{"service_id":"audio_automation","action":"set_volume","parameters":"{\"stream\":\"music\",\"level\":40}"}"#,
        ))
        .unwrap();
    assert!(matches!(p, Planned::Device { ref call, .. } if call.0.params_json()["level"] == 40));
    // Parameters written beside service_id and action are moved in.
    let p = set
        .plan(&call(
            TOOLKIT_TOOL,
            r#"{"service_id":"audio_automation","action":"set_volume","stream":"music","level":40}"#,
        ))
        .unwrap();
    assert!(
        matches!(p, Planned::Device { ref call, .. } if call.0.params_json()["stream"] == "music")
    );
    // describe_action: the action's schema, risk and an example.
    let described = set
        .plan(&call(
            DESCRIBE_TOOL,
            r#"{"service_id":"audio_automation","action":"set_volume"}"#,
        ))
        .unwrap()
        .run_local(0)
        .unwrap()
        .unwrap();
    assert_eq!(
        described["parameters"]["properties"]["level"]["maximum"],
        100
    );
    assert_eq!(
        described["parameters"]["required"],
        json!(["stream", "level"])
    );
    assert_eq!(described["risk"], "low");
    assert_eq!(described["example"]["parameters"]["level"], 40);
    let all_of = set
        .plan(&call(DESCRIBE_TOOL, r#"{"service_id":"wifi_automation"}"#))
        .unwrap()
        .run_local(0)
        .unwrap()
        .unwrap();
    assert_eq!(all_of["actions"].as_array().unwrap().len(), 4);
    check_err(
        &set,
        DESCRIBE_TOOL,
        r#"{"service_id":"wifi_automation","action":"explode"}"#,
        ErrorCode::UnknownAction,
        "valid actions",
    );
    // An error of the action teaches its parameters.
    check_err(
        &set,
        TOOLKIT_TOOL,
        r#"{"service_id":"audio_automation","action":"set_volume","parameters":{"stream":"music"}}"#,
        ErrorCode::InvalidParams,
        r#"audio_automation.set_volume takes {"level":"integer 0..100, required","stream":"string, one of "#,
    );
}

/// The whole toolkit surface for two phones with every service stays
/// small: a guard on the index's size (the real token counts are
/// measured by `tests/benches/prompt_size.rs`; ~3.5 characters a token).
#[test]
fn the_lean_surface_stays_small() {
    let set = Toolset::new(ToolMode::Toolkit, &[all("kitchen"), all("bedroom")], true);
    let chars: usize = set
        .specs()
        .iter()
        .map(|s| {
            let params = s
                .parameters_for(Dialect::Anthropic)
                .unwrap_or_default()
                .to_string();
            s.name.len() + s.description.len() + params.len()
        })
        .sum();
    assert!(chars < 4600, "{chars} characters");
}

fn call(name: &str, args: &str) -> ToolCall {
    ToolCall::new("c1", name, args)
}

fn check_err(set: &Toolset, name: &str, args: &str, code: ErrorCode, needle: &str) {
    let err = set.plan(&call(name, args)).expect_err(args);
    assert_eq!(err.code, code, "{args}: {err}");
    assert!(
        err.message.contains(needle),
        "{args}: {:?} lacks {needle:?}",
        err.message
    );
}

#[test]
fn planning_validates_and_explains() {
    let set = Toolset::new(
        ToolMode::Toolkit,
        &[
            all("kitchen"),
            dev("bedroom", &["battery", "audio_automation"]),
        ],
        true,
    );
    let ok = set
        .plan(&call(TOOLKIT_TOOL, r#"{"device":"bedroom","service_id":"audio_automation","action":"set_volume","parameters":{"stream":"music","level":40,"mode":null}}"#))
        .unwrap();
    assert_eq!(
        ok,
        Planned::Device {
            device: Some("bedroom".into()),
            call: DeviceCall(
                Catalogue::get()
                    .parse(
                        "audio_automation",
                        "set_volume",
                        &json!({"stream": "music", "level": 40})
                    )
                    .unwrap()
            ),
            risk: Risk::Low,
            mutates: true,
        }
    );
    // Only the kitchen offers Wi-Fi: no device needed.
    let wifi = set
        .plan(&call(
            TOOLKIT_TOOL,
            r#"{"service_id":"wifi_automation","action":"status"}"#,
        ))
        .unwrap();
    assert!(matches!(wifi, Planned::Device { device: Some(ref d), .. } if d == "kitchen"));
    use ErrorCode::*;
    check_err(
        &set,
        TOOLKIT_TOOL,
        r#"{"service_id":"battery","action":"status""#,
        InvalidParams,
        "not valid JSON",
    );
    check_err(
        &set,
        TOOLKIT_TOOL,
        "[1]",
        InvalidParams,
        "must be a JSON object",
    );
    check_err(
        &set,
        "android_launch_rockets",
        "{}",
        InvalidRequest,
        "unknown tool",
    );
    check_err(
        &set,
        TOOLKIT_TOOL,
        r#"{"service_id":"battery","action":"status"}"#,
        DeviceAmbiguous,
        "kitchen, bedroom",
    );
    check_err(
        &set,
        TOOLKIT_TOOL,
        r#"{"device":"attic","service_id":"battery","action":"status"}"#,
        DeviceNotFound,
        "attic",
    );
    check_err(
        &set,
        TOOLKIT_TOOL,
        r#"{"device":"bedroom","service_id":"wifi_automation","action":"status"}"#,
        UnsupportedAction,
        "does not offer",
    );
    check_err(
        &set,
        TOOLKIT_TOOL,
        r#"{"device":"kitchen","service_id":"audio_automation","action":"set_volume","parameters":{"stream":"music"}}"#,
        InvalidParams,
        "\"level\"",
    );
    check_err(
        &set,
        TOOLKIT_TOOL,
        r#"{"device":"kitchen","service_id":"audio_automation","action":"set_volume","parameters":{"stream":"music","level":400}}"#,
        InvalidParams,
        "out of range",
    );
    check_err(
        &set,
        TOOLKIT_TOOL,
        r#"{"device":"kitchen","service_id":"audio_automation","action":"explode"}"#,
        UnknownAction,
        "valid actions",
    );
    check_err(
        &set,
        TOOLKIT_TOOL,
        r#"{"device":"kitchen","service_id":"teleport","action":"go"}"#,
        UnknownService,
        "teleport",
    );
    // A stray argument is taken as a parameter, which the catalogue
    // refuses (naming it and what the action takes).
    check_err(
        &set,
        TOOLKIT_TOOL,
        r#"{"device":"kitchen","service_id":"battery","action":"status","extra":1}"#,
        InvalidParams,
        "extra",
    );
    check_err(&set, CALCULATOR_TOOL, r#"{}"#, InvalidParams, "expression");
    // A value of the wrong type is reported as such, not as missing.
    for (tool, args, needle) in [
        (
            TOOLKIT_TOOL,
            r#"{"device":"kitchen","service_id":5,"action":"status"}"#,
            "\"service_id\" must be a string, got a number",
        ),
        (
            TOOLKIT_TOOL,
            r#"{"device":"kitchen","service_id":"battery","action":["status"]}"#,
            "\"action\" must be a string, got an array",
        ),
        (
            CALCULATOR_TOOL,
            r#"{"expression":12}"#,
            "\"expression\" must be a string, got a number",
        ),
    ] {
        check_err(&set, tool, args, InvalidParams, needle);
        let err = set.plan(&call(tool, args)).unwrap_err();
        assert!(!err.message.contains("required"), "{args}: {err}");
    }
    check_err(
        &set,
        TOOLKIT_TOOL,
        r#"{"device":"kitchen","action":"status"}"#,
        InvalidParams,
        "\"service_id\" is required (a string)",
    );
    assert_eq!(
        set.plan(&call(CALCULATOR_TOOL, r#"{"expression":"1+1"}"#))
            .unwrap()
            .run_local(0)
            .unwrap()
            .unwrap()["result"],
        2.0
    );
    assert!(set.plan(&call(TIME_TOOL, "")).is_ok());
    // Direct tools are not offered in toolkit mode.
    check_err(
        &set,
        "android_battery",
        r#"{"action":"status"}"#,
        InvalidRequest,
        "available tools: android_device, describe_action, current_time, calculator",
    );
}

#[test]
fn direct_planning() {
    use ErrorCode::*;
    let set = Toolset::new(
        ToolMode::Direct,
        &[dev("phone", &["battery", "app_launcher"])],
        false,
    );
    let p = set
        .plan(&call(
            "android_app_launcher",
            r#"{"action":"launch","parameters":{"package":"org.videolan.vlc","activity":null}}"#,
        ))
        .unwrap();
    assert!(
        matches!(p, Planned::Device { ref call, risk: Risk::Medium, .. } if call.0.service_id() == "app_launcher")
    );
    check_err(
        &set,
        "android_app_launcher",
        r#"{"action":"launch","parameters":{"package":"x; reboot"}}"#,
        InvalidParams,
        "package",
    );
    check_err(
        &set,
        "android_wifi_automation",
        r#"{"action":"status"}"#,
        InvalidRequest,
        "unknown tool",
    );
    check_err(
        &set,
        CALCULATOR_TOOL,
        r#"{"expression":"1"}"#,
        InvalidRequest,
        "unknown tool",
    );
}

#[test]
fn no_devices_and_no_builtins_means_no_tools() {
    assert!(Toolset::new(ToolMode::Toolkit, &[], false).is_empty());
    assert_eq!(Toolset::new(ToolMode::Direct, &[], true).specs().len(), 2);
}

#[test]
fn delegate_calls_take_a_mode_and_status_takes_a_task_id() {
    let raw = crate::delegation::RawDelegateConfig {
        name: Some("netcheck".into()),
        description: Some("Checks Wi-Fi.".into()),
        system_prompt: Some("You check Wi-Fi.".into()),
        tools: Some(vec!["wifi_automation.status".into()]),
        mode: Some("background".into()),
        ..crate::delegation::RawDelegateConfig::default()
    };
    let agents = crate::delegation::validate(vec![raw]).expect("valid");
    let set = Toolset::new(ToolMode::Toolkit, &[all("phone")], true).with_delegates(&agents);
    let spec = set
        .specs()
        .iter()
        .find(|s| s.name == "delegate_to_netcheck")
        .expect("delegate tool");
    assert!(
        spec.description
            .contains("By default it runs in the background")
    );
    assert!(set.specs().iter().any(|s| s.name == "delegation_status"));
    match set.plan(&call(
        "delegate_to_netcheck",
        r#"{"task": "check", "mode": "wait"}"#,
    )) {
        Ok(Planned::Delegate { mode, .. }) => {
            assert_eq!(mode, Some(crate::delegation::DelegateMode::Wait));
        }
        other => panic!("{other:?}"),
    }
    check_err(
        &set,
        "delegate_to_netcheck",
        r#"{"task": "check", "mode": "later"}"#,
        ErrorCode::InvalidParams,
        "\"mode\" must be",
    );
    assert_eq!(
        set.plan(&call("delegation_status", r#"{"task_id": "t-1a2b"}"#))
            .expect("status"),
        Planned::DelegationStatus {
            task_id: "t-1a2b".into()
        }
    );
    for bad in [
        r#"{"task_id": "../../etc"}"#,
        r#"{"task_id": ""}"#,
        r#"{"task_id": 7}"#,
        r#"{}"#,
    ] {
        let err = set.plan(&call("delegation_status", bad)).expect_err(bad);
        assert_eq!(err.code, ErrorCode::InvalidParams, "{bad}: {err}");
    }
    // A delegated agent's run has neither tool and is told why.
    let child = Toolset::for_child(
        ToolMode::Toolkit,
        &[all("phone")],
        std::sync::Arc::new(SkillSet::builtin()),
        SkillScope::agent("netcheck", agents[0].allowed.clone()),
        1,
        3,
    );
    assert!(child.specs().iter().all(|s| !s.name.starts_with("delegat")));
    for tool in ["delegate_to_netcheck", "delegation_status"] {
        check_err(
            &child,
            tool,
            r#"{"task": "again"}"#,
            ErrorCode::PermissionDenied,
            "delegation depth limit reached",
        );
    }
}

/// A constrained reply is one call of an offered tool, with a real
/// service, action and parameters, or the answer; each branch is closed.
#[test]
fn the_reply_schema_offers_every_action_every_tool_and_the_answer() {
    use super::reply::answer_of;
    let set = Toolset::new(ToolMode::Toolkit, &[all("kitchen"), all("bedroom")], true);
    let written = set.reply_schema(super::reply::ReplyStage::Any);
    let schema: Value = serde_json::from_str(&written).unwrap();
    // Keys in the order the reply writes them: the tool's name, then the
    // phone, the service, the action and its parameters.
    let first_call = &written[..written.find("\"parameters\"").unwrap()];
    let at = |key: &str| first_call.find(&format!("\"{key}\":")).unwrap();
    assert!(at("name") < at("arguments"));
    assert!(at("device") < at("service_id") && at("service_id") < at("action"));
    let branches = schema["anyOf"].as_array().unwrap();
    let actions: usize = set.services.iter().map(|s| s.actions.len()).sum();
    // Every tool but the toolkit (one branch per action) and
    // describe_action (the schema holds the parameters).
    let other_tools = set.specs().len() - 2;
    assert_eq!(branches.len(), actions + other_tools + 1);
    assert!(
        branches
            .iter()
            .all(|b| b["properties"]["name"]["const"] != DESCRIBE_TOOL)
    );
    assert!(
        branches
            .iter()
            .all(|b| b["additionalProperties"] == false && b["type"] == "object")
    );
    let wifi_off = branches
        .iter()
        .find(|b| {
            let args = &b["properties"]["arguments"]["properties"];
            args["service_id"]["const"] == "wifi_automation" && args["action"]["const"] == "disable"
        })
        .expect("a branch for wifi_automation.disable");
    let args = &wifi_off["properties"]["arguments"];
    assert_eq!(wifi_off["properties"]["name"]["const"], TOOLKIT_TOOL);
    assert_eq!(
        args["properties"]["device"]["enum"],
        json!(["kitchen", "bedroom"])
    );
    assert_eq!(
        args["required"],
        json!(["device", "service_id", "action", "parameters"])
    );
    let brightness = branches
        .iter()
        .map(|b| &b["properties"]["arguments"]["properties"])
        .find(|a| a["action"]["const"] == "set_brightness")
        .expect("set_brightness");
    assert_eq!(brightness["parameters"]["required"], json!(["level"]));
    assert!(
        branches
            .iter()
            .any(|b| b["properties"]["name"]["const"] == "calculator")
    );
    assert_eq!(branches.last().unwrap()["required"], json!(["answer"]));
    // A run's first reply about the phones: a phone action, nothing else.
    let first: Value =
        serde_json::from_str(&set.reply_schema(super::reply::ReplyStage::First)).unwrap();
    assert_eq!(first["anyOf"].as_array().unwrap().len(), actions);
    // After a repeated call: the answer alone.
    let answer: Value =
        serde_json::from_str(&set.reply_schema(super::reply::ReplyStage::Answer)).unwrap();
    assert_eq!(answer["anyOf"].as_array().unwrap().len(), 1);
    assert_eq!(answer["anyOf"][0]["required"], json!(["answer"]));
    // A call in that shape is read as the call; the answer is unwrapped.
    let written = json!({"name": TOOLKIT_TOOL, "arguments": {"device": "kitchen", "service_id": "wifi_automation", "action": "disable", "parameters": {}}});
    let offered: Vec<&str> = set.specs().iter().map(|s| s.name.as_str()).collect();
    assert!(matches!(
        crate::recover::recover(&written.to_string(), &offered, Some(TOOLKIT_TOOL)),
        crate::recover::Recovery::Calls { ref calls, .. } if calls.len() == 1
    ));
    assert_eq!(
        answer_of("{\"answer\": \"Wi-Fi is off.\"}").as_deref(),
        Some("Wi-Fi is off.")
    );
    assert_eq!(answer_of("{\"answer\": \"x\", \"more\": 1}"), None);
    assert_eq!(answer_of("The answer is {\"answer\": 1}"), None);
}

#[test]
fn a_repeated_call_leaves_only_the_answer() {
    use super::reply::ReplyStage;
    let read = (
        "android_device",
        r#"{"service_id": "battery", "action": "status"}"#,
    );
    let same = (
        "android_device",
        r#"{"action":"status","service_id":"battery"}"#,
    );
    let other = (
        "android_device",
        r#"{"service_id": "wifi_automation", "action": "status"}"#,
    );
    assert_eq!(ReplyStage::after(&[read], []), ReplyStage::Any);
    assert_eq!(ReplyStage::after(&[same], [read]), ReplyStage::Answer);
    assert_eq!(ReplyStage::after(&[same, other], [read]), ReplyStage::Any);
    assert_eq!(ReplyStage::after(&[], [read]), ReplyStage::Any);
}
