//! Seeing and touching the screen, end to end: the real adb server, an
//! emulated phone that draws its screen, mosquitto, and `droidwarden daemon`
//! as a process (the UI tree `tap {element}` resolves against lives in the
//! daemon, so these calls go through its MQTT `cmd/call`).

use base64::Engine as _;
use droidwarden_e2e::Sim;
use droidwarden_e2e::phone_rig::{P, PhoneRig, PhoneRigOptions, WAIT};
use serde_json::{Value, json};

/// The text the issue asks for: quotes, a percent, a shell variable, a
/// semicolon, CJK and an emoji.
const HOSTILE_TEXT: &str = "Grüße, \"quoted\" 100% $HOME; 你好 👋";

/// Field order is drop order.
fn rig() -> PhoneRig {
    PhoneRig::start("")
}

trait Screen {
    fn element(&self, pred: impl Fn(&Value) -> bool) -> u64;
}

impl Screen for PhoneRig {
    /// The index of the first element of a fresh `ui_tree` matching `pred`.
    fn element(&self, pred: impl Fn(&Value) -> bool) -> u64 {
        let tree = self.ok("screen", "ui_tree", json!({}));
        find_element(&tree, pred)["index"].as_u64().expect("index")
    }
}

/// The first element of the `ui_tree` result `tree` matching `pred`.
///
/// # Panics
/// When none does, showing the tree.
fn find_element(tree: &Value, pred: impl Fn(&Value) -> bool) -> &Value {
    tree["elements"]
        .as_array()
        .expect("elements")
        .iter()
        .find(|e| pred(e))
        .unwrap_or_else(|| panic!("no such element in {}", tree["text"]))
}

fn decode(result: &Value) -> image::DynamicImage {
    let data = base64::engine::general_purpose::STANDARD
        .decode(result["data_base64"].as_str().expect("data_base64"))
        .expect("base64");
    assert_eq!(data.len() as u64, result["bytes"].as_u64().unwrap());
    image::load_from_memory(&data).expect("a decodable image")
}

#[test]
fn a_screenshot_is_a_scaled_image_with_its_original_size_and_factor() {
    let r = rig();
    let shot = r.ok("screen", "screenshot", json!({}));
    assert_eq!(shot["format"], "jpeg");
    assert_eq!(shot["mime_type"], "image/jpeg");
    assert_eq!(
        (
            shot["original_width"].as_u64(),
            shot["original_height"].as_u64()
        ),
        (Some(1080), Some(2400))
    );
    let img = decode(&shot);
    assert_eq!(
        (u64::from(img.width()), u64::from(img.height())),
        (
            shot["width"].as_u64().unwrap(),
            shot["height"].as_u64().unwrap()
        )
    );
    assert_eq!(img.height(), 1024, "the longest side is the default 1024");
    let scale = shot["scale"].as_f64().unwrap();
    assert!(
        (scale - f64::from(img.width()) / 1080.0).abs() < 1e-9,
        "{scale}"
    );
    assert!((1080.0 * scale).round() as u32 == img.width());

    let png = r.ok(
        "screen",
        "screenshot",
        json!({"format": "png", "max_side": 300}),
    );
    let img = decode(&png);
    assert_eq!(png["mime_type"], "image/png");
    assert_eq!((img.width(), img.height()), (135, 300));
    // What the phone ran: one screencap, read as raw bytes.
    assert!(r.sim.commands().iter().any(|c| c == &["screencap", "-p"]));

    let bad = r.call("screen", "screenshot", json!({"format": "gif"}));
    assert_eq!(bad["error"]["code"], "invalid_params", "{bad}");
}

#[test]
fn tap_by_ui_tree_index_turns_wifi_off_and_the_wifi_service_agrees() {
    let r = rig();
    assert_eq!(
        r.ok("wifi_automation", "status", json!({}))["enabled"],
        true
    );
    let front = r.ok("screen", "foreground_app", json!({}));
    assert_eq!(front["package"], "com.android.launcher3", "{front}");

    let settings = r.element(|e| e["text"] == "Settings" && e["clickable"] == true);
    let tapped = r.ok("ui_control", "tap", json!({"element": settings}));
    assert_eq!(tapped["element"], settings);
    assert_eq!(
        r.ok("screen", "foreground_app", json!({}))["package"],
        "com.android.settings"
    );

    // The index of the last tree is gone with the tap: the screen changed.
    let stale = r.call("ui_control", "tap", json!({"element": settings}));
    assert_eq!(stale["error"]["code"], "invalid_params", "{stale}");
    assert!(
        stale["error"]["message"]
            .as_str()
            .unwrap()
            .contains("ui_tree"),
        "{stale}"
    );

    let tree = r.ok("screen", "ui_tree", json!({}));
    let switch = find_element(&tree, |e| e["class"] == "Switch");
    assert_eq!(switch["checked"], true, "{}", tree["text"]);
    let wifi = find_element(&tree, |e| e["text"] == "Wi-Fi")["index"].clone();
    let unknown = r.call("ui_control", "tap", json!({"element": 999}));
    assert_eq!(unknown["error"]["code"], "invalid_params", "{unknown}");
    r.ok("ui_control", "tap", json!({"element": wifi}));

    assert_eq!(r.sim.state()["wifi"]["enabled"], false);
    assert_eq!(
        r.ok("wifi_automation", "status", json!({}))["enabled"],
        false
    );
    let after = r.element(|e| e["class"] == "Switch");
    let tree = r.ok("screen", "ui_tree", json!({}));
    assert_eq!(
        tree["elements"][after as usize]["checked"], false,
        "{}",
        tree["text"]
    );

    // Both at once, or neither, is a clear error before anything runs.
    r.sim.clear_log();
    for params in [
        json!({"x": 1, "y": 2, "element": 0}),
        json!({"x": 5}),
        json!({}),
    ] {
        let bad = r.call("ui_control", "tap", params.clone());
        assert_eq!(bad["error"]["code"], "invalid_params", "{params}: {bad}");
    }
    assert!(
        r.sim.commands().iter().all(|c| c[0] != "input"),
        "{:?}",
        r.sim.commands()
    );

    // Back goes home; the key enum has no power, which is its own action.
    r.ok("ui_control", "key", json!({"key": "back"}));
    assert_eq!(
        r.ok("screen", "foreground_app", json!({}))["package"],
        "com.android.launcher3"
    );
    let power = r.call("ui_control", "key", json!({"key": "power"}));
    assert_eq!(power["error"]["code"], "invalid_params", "{power}");
}

/// Issue #29's lock state: a locked or sleeping phone answers `locked` /
/// `screen_off` to UI actions and is not touched; after a wake and an
/// unlock the same tap works. The state comes from the phone's own dumps
/// (`dumpsys window displays`), read through the real adb server.
#[test]
fn a_locked_or_sleeping_phone_refuses_ui_actions_until_woken_and_unlocked() {
    let r = rig();
    let settings = r.element(|e| e["text"] == "Settings" && e["clickable"] == true);
    let tree = r.ok("screen", "ui_tree", json!({}));
    let point = find_element(&tree, |e| e["index"] == settings)["center"].clone();
    let tap = json!({"x": point[0], "y": point[1]});
    let status = r.ok("screen_control", "status", json!({}));
    assert_eq!(
        (status["screen_on"].clone(), status["locked"].clone()),
        (json!(true), json!(false)),
        "{status}"
    );

    let set = |path: &str, value: Value| {
        let answer = r
            .sim
            .control(json!({"op": "set", "path": path, "value": value}));
        assert_eq!(answer["ok"], true, "{answer}");
    };
    set("ui.locked", json!(true));
    r.sim.clear_log();
    for (action, params) in [
        ("tap", tap.clone()),
        (
            "swipe",
            json!({"from": {"x": 500, "y": 10}, "to": {"x": 500, "y": 900}}),
        ),
        ("type_text", json!({"text": "hello"})),
        ("key", json!({"key": "home"})),
    ] {
        let refused = r.call("ui_control", action, params);
        assert_eq!(refused["error"]["code"], "locked", "{action}: {refused}");
        assert_eq!(refused["error"]["retryable"], false, "{refused}");
    }
    assert!(
        r.sim.commands().iter().all(|c| c[0] != "input"),
        "nothing may touch a locked phone: {:?}",
        r.sim.commands()
    );
    let status = r.ok("screen_control", "status", json!({}));
    assert_eq!(status["locked"], true, "{status}");

    // Asleep (and locked): `screen_off`, then a wake leaves it locked.
    set("display.screen_on", json!(false));
    let refused = r.call("ui_control", "tap", tap.clone());
    assert_eq!(refused["error"]["code"], "screen_off", "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("screen_control.wake"),
        "{refused}"
    );
    r.ok("screen_control", "wake", json!({}));
    assert_eq!(r.sim.state()["display"]["screen_on"], true);
    let refused = r.call("ui_control", "tap", tap.clone());
    assert_eq!(refused["error"]["code"], "locked", "{refused}");
    assert_eq!(
        r.ok("screen", "foreground_app", json!({}))["package"],
        "com.android.launcher3"
    );

    // Unlocked by a person: the same tap opens Settings.
    set("ui.locked", json!(false));
    r.ok("ui_control", "tap", tap);
    assert_eq!(
        r.ok("screen", "foreground_app", json!({}))["package"],
        "com.android.settings"
    );
}

/// Issue #29's observation step: the screenshot, the tree (whose indexes
/// `tap {element}` takes), the app in front and the lock state in one call.
#[test]
fn one_observation_gives_the_image_the_tree_the_app_and_the_lock_state() {
    let r = rig();
    let seen = r.ok("screen", "observe", json!({"max_side": 512}));
    assert_eq!(
        (seen["screen_on"].clone(), seen["locked"].clone()),
        (json!(true), json!(false)),
        "{seen}"
    );
    assert_eq!(seen["foreground"]["package"], "com.android.launcher3");
    let shot = &seen["screenshot"];
    assert_eq!(shot["height"], 512, "{shot}");
    assert_eq!(decode(shot).height(), 512);
    let settings = find_element(&seen["tree"], |e| e["text"] == "Settings")["index"].clone();
    r.ok("ui_control", "tap", json!({"element": settings}));
    assert_eq!(
        r.ok("screen", "foreground_app", json!({}))["package"],
        "com.android.settings"
    );
    // Without the image; and on a sleeping screen, no tree.
    let text_only = r.ok("screen", "observe", json!({"with_image": false}));
    assert!(text_only["screenshot"].is_null(), "{text_only}");
    assert!(text_only["tree"]["count"].as_u64().unwrap() > 0);
    let answer = r
        .sim
        .control(json!({"op": "set", "path": "display.screen_on", "value": false}));
    assert_eq!(answer["ok"], true);
    let dark = r.ok("screen", "observe", json!({"with_image": false}));
    assert_eq!(dark["screen_on"], false, "{dark}");
    assert!(dark["tree"].is_null(), "{dark}");
}

/// The command log's argvs, each as the phone's shell parsed it.
fn logged(sim: &Sim) -> Vec<Vec<String>> {
    sim.commands()
}

#[test]
fn type_text_of_any_unicode_arrives_intact_and_never_unquoted() {
    let r = rig();
    let field = r.element(|e| e["class"] == "EditText");
    r.ok("ui_control", "tap", json!({"element": field}));
    assert_eq!(r.sim.state()["ui"]["text_focused"], true);

    r.sim.clear_log();
    let typed = r.ok("ui_control", "type_text", json!({"text": HOSTILE_TEXT}));
    assert_eq!(typed["method"], "ime_broadcast", "{typed}");
    assert_eq!(typed["typed"], HOSTILE_TEXT.chars().count());
    assert_eq!(r.sim.state()["ui"]["text"], HOSTILE_TEXT);
    // The user's keyboard is back.
    assert_eq!(
        r.sim.state()["settings"]["secure"]["default_input_method"],
        "com.google.android.inputmethod.latin/com.android.inputmethod.latin.LatinIME"
    );
    // The UI tree shows it exactly.
    let tree = r.ok("screen", "ui_tree", json!({}));
    assert!(
        tree["elements"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["text"] == HOSTILE_TEXT),
        "{}",
        tree["text"]
    );
    let log = logged(&r.sim);
    let programs: Vec<&str> = log.iter().map(|c| c[0].as_str()).collect();
    assert!(
        programs
            .iter()
            // `dumpsys window displays`: the app in front, read before
            // every screen action ([phone_services.ui]).
            .all(|p| ["ime", "settings", "am", "uiautomator", "cat", "dumpsys"].contains(p)),
        "{log:?}"
    );
    let broadcast = log.iter().find(|c| c[0] == "am").expect("the broadcast");
    let msg = broadcast.last().unwrap();
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(msg)
        .unwrap();
    assert_eq!(String::from_utf8(decoded).unwrap(), HOSTILE_TEXT);

    // ASCII goes through `input text`, each chunk one literal argument.
    let ascii = " and 100% sure: %s 'it''s' `id` $(reboot); \"x\"";
    r.sim.clear_log();
    let typed = r.ok("ui_control", "type_text", json!({"text": ascii}));
    assert_eq!(typed["method"], "input_text");
    assert_eq!(
        r.sim.state()["ui"]["text"],
        format!("{HOSTILE_TEXT}{ascii}")
    );
    // Besides the readings before the action (`dumpsys window displays`:
    // the lock state, and the app in front for [phone_services.ui]), only
    // `input text`.
    let log: Vec<Vec<String>> = logged(&r.sim)
        .into_iter()
        .filter(|c| c[..] != ["dumpsys", "window", "displays"])
        .collect();
    assert!(
        log.iter()
            .all(|c| c.len() == 3 && c[0] == "input" && c[1] == "text"),
        "{log:?}"
    );
    let sent: String = log.iter().map(|c| c[2].as_str()).collect();
    assert_eq!(sent, ascii);

    // Without the IME, text `input text` cannot type is refused whole.
    r.sim
        .control(json!({"op": "set", "path": "ui.adb_ime_installed", "value": false}));
    r.sim.clear_log();
    let refused = r.call("ui_control", "type_text", json!({"text": "ünïcödé"}));
    assert_eq!(refused["error"]["code"], "unsupported_action", "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("nothing was typed")
    );
    assert_eq!(
        r.sim.state()["ui"]["text"],
        format!("{HOSTILE_TEXT}{ascii}")
    );
    assert!(
        logged(&r.sim)
            .iter()
            .all(|c| c[0] != "input" && c[0] != "am")
    );

    // Control characters are refused by the schema.
    let nul = r.call("ui_control", "type_text", json!({"text": "a\u{0}b"}));
    assert_eq!(nul["error"]["code"], "invalid_params", "{nul}");
}

#[test]
fn a_screen_that_will_not_settle_is_tried_again_then_a_retryable_error() {
    let r = rig();
    r.sim
        .control(json!({"op": "set", "path": "ui.dump_not_idle", "value": 2}));
    let tree = r.ok("screen", "ui_tree", json!({}));
    assert!(tree["count"].as_u64().unwrap() > 3);
    r.sim
        .control(json!({"op": "set", "path": "ui.dump_not_idle", "value": 10}));
    let busy = r.call("screen", "ui_tree", json!({}));
    assert_eq!(busy["error"]["code"], "device_error", "{busy}");
    assert_eq!(busy["error"]["retryable"], true, "{busy}");

    // Swipes, scrolls and the shade.
    r.sim
        .control(json!({"op": "set", "path": "ui.dump_not_idle", "value": 0}));
    r.ok(
        "ui_control",
        "swipe",
        json!({"from": {"x": 540, "y": 20}, "to": {"x": 540, "y": 1400}}),
    );
    assert_eq!(r.sim.state()["ui"]["shade_open"], true);
    let tile = r.element(|e| e["description"] == "Wi-Fi");
    r.ok("ui_control", "tap", json!({"element": tile}));
    assert_eq!(r.sim.state()["wifi"]["enabled"], false);
    r.ok("ui_control", "key", json!({"key": "back"}));
    assert_eq!(r.sim.state()["ui"]["shade_open"], false);
    r.ok("ui_control", "scroll", json!({"direction": "down"}));
    r.ok("ui_control", "long_press", json!({"x": 540, "y": 230}));
    assert_eq!(r.sim.state()["ui"]["text_focused"], true);
}

// ---------------------------------------------------------------------------
// The agent sees the screen: a scripted model over real HTTP, in each
// provider's wire format.

use droidwarden_agent::testing::{RecordedRequest, Responder, ScriptStep};
use droidwarden_agent::{ModelReply, ProviderKind};

/// Every JSON object inside `value`, strings holding JSON included (tool
/// results travel as JSON text in OpenAI and Anthropic requests).
fn objects(value: &Value, out: &mut Vec<Value>) {
    match value {
        Value::Object(map) => {
            out.push(value.clone());
            map.values().for_each(|v| objects(v, out));
        }
        Value::Array(items) => items.iter().for_each(|v| objects(v, out)),
        Value::String(s) if s.starts_with('{') => {
            if let Ok(inner) = serde_json::from_str::<Value>(s) {
                objects(&inner, out);
            }
        }
        _ => {}
    }
}

/// The newest UI tree among the tool results of a request.
fn tree_in(request: &RecordedRequest) -> Option<Value> {
    let mut all = Vec::new();
    objects(&request.body, &mut all);
    all.into_iter().rev().find(|o| o["elements"].is_array())
}

/// The images a request carries, in the provider's own format: (mime, base64).
fn images_in(kind: ProviderKind, request: &RecordedRequest) -> Vec<(String, String)> {
    let mut all = Vec::new();
    objects(&request.body, &mut all);
    all.iter()
        .filter_map(|o| match kind {
            ProviderKind::Openai if o["type"] == "image_url" => {
                let url = o["image_url"]["url"].as_str()?;
                let (head, data) = url.strip_prefix("data:")?.split_once(";base64,")?;
                Some((head.to_owned(), data.to_owned()))
            }
            ProviderKind::Anthropic if o["type"] == "image" => Some((
                o["source"]["media_type"].as_str()?.to_owned(),
                o["source"]["data"].as_str()?.to_owned(),
            )),
            ProviderKind::Gemini => {
                let d = o.get("inline_data")?;
                Some((
                    d["mime_type"].as_str()?.to_owned(),
                    d["data"].as_str()?.to_owned(),
                ))
            }
            _ => None,
        })
        .collect()
}

fn agent_rig(kind: ProviderKind, mode: &str, llm_extra: &str) -> PhoneRig {
    let options = PhoneRigOptions {
        llm: Some(kind),
        ..PhoneRigOptions::default()
    };
    PhoneRig::start_with(
        options,
        &format!(
            "{llm_extra}\n[agent]\ntool_mode = \"{mode}\"\n[agent.approval]\nallow = [\"screen.*\", \"ui_control.tap\"]\n"
        ),
    )
}

/// A tool call in the mode's shape.
fn tool(mode: &str, service: &str, action: &str, params: Value) -> (String, String) {
    if mode == "toolkit" {
        (
            "android_device".into(),
            json!({"device": "phone", "service_id": service, "action": action, "parameters": params})
                .to_string(),
        )
    } else {
        (
            format!("android_{service}"),
            json!({"device": "phone", "action": action, "parameters": params}).to_string(),
        )
    }
}

/// screenshot → ui_tree → tap the Settings icon by its index → verify with
/// foreground_app → answer.
fn screen_task(kind: ProviderKind, mode: &str) {
    let r = agent_rig(kind, mode, "");
    let step = |call: (String, String)| ScriptStep::Reply(ModelReply::tool_calls(vec![call]));
    let m = mode.to_owned();
    r.llm()
        .push(step(tool(mode, "screen", "screenshot", json!({}))));
    r.llm()
        .push(step(tool(mode, "screen", "ui_tree", json!({}))));
    r.llm()
        .push(ScriptStep::Compute(Responder::new(move |request| {
            // A failure here answers in words, which the test then reports.
            let Some(tree) = tree_in(request) else {
                return ModelReply::text(format!("no UI tree in {}", request.body));
            };
            let Some(settings) = tree["elements"]
                .as_array()
                .and_then(|all| all.iter().find(|e| e["text"] == "Settings"))
            else {
                return ModelReply::text(format!("no Settings icon in {tree}"));
            };
            let settings = settings["index"].clone();
            ModelReply::tool_calls(vec![tool(
                &m,
                "ui_control",
                "tap",
                json!({"element": settings}),
            )])
        })));
    r.llm()
        .push(step(tool(mode, "screen", "foreground_app", json!({}))));
    r.llm().push(ScriptStep::Compute(Responder::new(|request| {
        let mut all = Vec::new();
        objects(&request.body, &mut all);
        let package = all
            .iter()
            .rev()
            .find_map(|o| {
                o["package"]
                    .as_str()
                    .filter(|_| o.get("activity").is_some())
            })
            .unwrap_or("nothing")
            .to_owned();
        ModelReply::text(format!("In front: {package}"))
    })));

    let reply = r.probe.request(
        P,
        "ask",
        json!({"id": format!("ask-{}-{mode}", kind.as_str()), "prompt": "open the settings"}),
    );
    assert_eq!(reply["ok"], true, "{reply}");
    assert_eq!(
        reply["result"]["text"], "In front: com.android.settings",
        "{reply}"
    );
    assert_eq!(
        r.sim.state()["foreground"]
            .as_str()
            .unwrap()
            .split('/')
            .next(),
        Some("com.android.settings")
    );

    let requests = r.llm().requests();
    assert_eq!(requests.len(), 5, "one request per step");
    // The screenshot reached the model as an image in the provider's
    // format, from the request after the screenshot on.
    assert!(images_in(kind, &requests[0]).is_empty());
    let images = images_in(kind, &requests[1]);
    assert_eq!(images.len(), 1, "{}", requests[1].body);
    let (mime, data) = &images[0];
    assert_eq!(mime, "image/jpeg");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .expect("base64");
    let img = image::load_from_memory(&bytes).expect("a JPEG");
    assert_eq!(img.height(), 1024);
    // Never as base64 text in a tool result: only the reference and size.
    for request in &requests {
        let text = request.body.to_string();
        assert!(!text.contains("data_base64"), "base64 text in a request");
    }
    let session = reply["result"]["session"].as_str().expect("session");
    let events = r.probe.wait_session_end(P, session, WAIT);
    let shot = events
        .iter()
        .find(|e| e["event"] == "tool_result" && e.to_string().contains("img-"))
        .expect("the screenshot's result event");
    assert!(
        !shot.to_string().contains(&data[..64]),
        "the image left the daemon in an event"
    );
}

#[test]
fn an_agent_task_sees_and_taps_the_screen_openai_toolkit_mode() {
    screen_task(ProviderKind::Openai, "toolkit");
}

#[test]
fn an_agent_task_sees_and_taps_the_screen_anthropic_direct_mode() {
    screen_task(ProviderKind::Anthropic, "direct");
}

#[test]
fn an_agent_task_sees_and_taps_the_screen_gemini_direct_mode() {
    screen_task(ProviderKind::Gemini, "direct");
}

#[test]
fn a_model_without_vision_gets_the_ui_tree_for_a_screenshot() {
    let r = agent_rig(ProviderKind::Openai, "toolkit", "vision = false");
    r.llm()
        .push(ScriptStep::Reply(ModelReply::tool_calls(vec![tool(
            "toolkit",
            "screen",
            "screenshot",
            json!({}),
        )])));
    r.llm().push(ScriptStep::Reply(ModelReply::text("seen")));
    let reply = r.probe.request(
        P,
        "ask",
        json!({"id": "ask-novision", "prompt": "what is on screen?"}),
    );
    assert_eq!(reply["ok"], true, "{reply}");
    let requests = r.llm().requests();
    assert!(images_in(ProviderKind::Openai, &requests[1]).is_empty());
    let tree = tree_in(&requests[1]).expect("the UI tree instead");
    assert!(tree["note"].as_str().unwrap().contains("vision"));
    assert!(r.sim.commands().iter().all(|c| c[0] != "screencap"));
}

#[test]
fn a_companion_phone_offers_the_same_screen_actions_through_the_protocol() {
    let r = PhoneRig::start_companion("");
    let alice = &r.sim;
    let shot = r.ok("screen", "screenshot", json!({"max_side": 512}));
    let img = decode(&shot);
    assert_eq!((img.width(), img.height()), (230, 512));
    let tree = r.ok("screen", "ui_tree", json!({}));
    let settings = find_element(&tree, |e| e["text"] == "Settings")["index"].clone();
    r.ok("ui_control", "tap", json!({"element": settings}));
    assert_eq!(
        r.ok("screen", "foreground_app", json!({}))["package"],
        "com.android.settings"
    );
    let field_text = "Grüße 👋";
    r.ok("ui_control", "key", json!({"key": "home"}));
    r.ok("ui_control", "tap", json!({"x": 540, "y": 230}));
    r.ok("ui_control", "type_text", json!({"text": field_text}));
    assert_eq!(alice.state()["ui"]["text"], field_text);
}
