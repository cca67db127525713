use super::*;
use crate::Catalogue;
use serde_json::{Value, json};

fn cmd(service: &str, action: &str, params: Value) -> Command {
    Catalogue::get().parse(service, action, &params).unwrap()
}

fn code(policy: &PhonePolicy, c: &Command) -> Option<ErrorCode> {
    policy.check(c).err().map(|e| e.code)
}

fn raw(toml_like: Value) -> RawPhoneServices {
    serde_json::from_value(toml_like).unwrap()
}

#[test]
fn open_url_allows_only_listed_schemes_and_never_dangerous_ones() {
    let p = PhonePolicy::default();
    let open = |url: &str| cmd("intents", "open_url", json!({ "url": url }));
    assert_eq!(code(&p, &open("https://example.org/a?b=c")), None);
    assert_eq!(code(&p, &open("HTTP://example.org")), None);
    for bad in [
        "javascript:alert(1)",
        "JavaScript:alert(1)",
        "file:///data/data/x",
        "content://sms/inbox",
        "intent://x#Intent;end",
        "data:text/html,<b>",
    ] {
        let err = p.check(&open(bad)).unwrap_err();
        assert_eq!(err.code, ErrorCode::Denied, "{bad}");
        assert!(err.message.contains("never opened"), "{err}");
    }
    let err = p.check(&open("market://details?id=a.b")).unwrap_err();
    assert_eq!(err.code, ErrorCode::Denied);
    assert!(err.message.contains("http, https"), "{err}");
    let p = PhonePolicy::try_from(raw(json!({"url_schemes": ["https", "Market"]}))).unwrap();
    assert_eq!(code(&p, &open("market://details?id=a.b")), None);
    assert_eq!(
        code(&p, &open("http://example.org")),
        Some(ErrorCode::Denied)
    );
}

#[test]
fn dangerous_schemes_cannot_be_configured() {
    for s in ["javascript", "FILE", "content", "intent"] {
        let err = PhonePolicy::try_from(raw(json!({ "url_schemes": [s] }))).unwrap_err();
        assert_eq!(err.key, "phone_services.url_schemes");
    }
    assert!(PhonePolicy::try_from(raw(json!({"url_schemes": ["ht tp"]}))).is_err());
}

#[test]
fn pull_and_install_stay_inside_their_directories() {
    let p = PhonePolicy::default();
    let pull = |path: &str| cmd("files", "pull", json!({ "path": path }));
    assert_eq!(code(&p, &pull("/sdcard/Download/a b.txt")), None);
    assert_eq!(code(&p, &pull("/sdcard/Download/sub/x")), None);
    for (path, want) in [
        ("/sdcard/Download", ErrorCode::Denied),
        ("/sdcard/Download/", ErrorCode::InvalidParams),
        ("/sdcard/Downloads/x", ErrorCode::Denied),
        ("/sdcard/Download/../../data/x", ErrorCode::InvalidParams),
        ("/sdcard/Download/./x", ErrorCode::InvalidParams),
        ("/sdcard/Download//x", ErrorCode::InvalidParams),
        ("/data/system/users/0.xml", ErrorCode::Denied),
    ] {
        assert_eq!(code(&p, &pull(path)), Some(want), "{path}");
    }
    let install = |path: &str| cmd("app_manager", "install", json!({ "apk_path": path }));
    assert_eq!(code(&p, &install("/data/local/tmp/app.apk")), None);
    assert_eq!(
        code(&p, &install("/data/local/tmp/app.sh")),
        Some(ErrorCode::InvalidParams)
    );
    assert_eq!(
        code(&p, &install("/sdcard/Download/app.apk")),
        Some(ErrorCode::Denied)
    );
    let err = PhonePolicy::try_from(raw(json!({"pull_dirs": ["/sdcard/../data"]}))).unwrap_err();
    assert_eq!(err.key, "phone_services.pull_dirs");
    assert!(PhonePolicy::try_from(raw(json!({"pull_dirs": ["/"]}))).is_err());
}

#[test]
fn telephony_and_shell_are_off_until_enabled() {
    let p = PhonePolicy::default();
    let dial = cmd("telephony", "dial", json!({"number": "+4915112345678"}));
    let run = cmd("shell", "run", json!({"argv": ["id"]}));
    assert_eq!(code(&p, &dial), Some(ErrorCode::Disabled));
    assert_eq!(code(&p, &run), Some(ErrorCode::Disabled));
    assert!(
        p.check(&run)
            .unwrap_err()
            .message
            .contains("[phone_services.shell] enabled = true")
    );
    let p = PhonePolicy::try_from(raw(json!({
        "telephony": {"enabled": true, "allowed_numbers": ["+49 151 1234-5678"]},
        "shell": {"enabled": true},
    })))
    .unwrap();
    assert_eq!(code(&p, &dial), None);
    assert_eq!(code(&p, &run), None);
    let other = cmd(
        "telephony",
        "sms_send",
        json!({"number": "+4915100000000", "text": "hi"}),
    );
    assert_eq!(code(&p, &other), Some(ErrorCode::Denied));
    assert!(
        PhonePolicy::try_from(raw(json!({"telephony": {"allowed_numbers": ["call me"]}}))).is_err()
    );
}

#[test]
fn start_activity_needs_a_target_and_refuses_dangerous_data() {
    let p = PhonePolicy::default();
    let start = |params: Value| cmd("intents", "start_activity", params);
    assert_eq!(code(&p, &start(json!({}))), Some(ErrorCode::InvalidParams));
    assert_eq!(
        code(
            &p,
            &start(json!({"action": "android.intent.action.VIEW", "data": "geo:0,0?q=x"}))
        ),
        None
    );
    assert_eq!(
        code(
            &p,
            &start(json!({"action": "android.intent.action.VIEW", "data": "javascript:alert(1)"}))
        ),
        Some(ErrorCode::Denied)
    );
}

#[test]
fn extras_and_argv_are_typed() {
    let parse = |params: Value| Catalogue::get().parse("intents", "start_activity", &params);
    let ok = parse(json!({"action": "a.B", "extras": [
        {"key": "n", "type": "int", "value": "-5"},
        {"key": "b", "type": "bool", "value": "true"},
        {"key": "s", "type": "string", "value": "it's $HOME"},
    ]}));
    assert!(ok.is_ok(), "{ok:?}");
    for bad in [
        json!({"key": "n", "type": "int", "value": "5; reboot"}),
        json!({"key": "b", "type": "bool", "value": "yes"}),
        json!({"key": "f", "type": "float", "value": "NaN"}),
        json!({"key": "a b", "type": "string", "value": "x"}),
        json!({"key": "k", "type": "bytes", "value": "x"}),
    ] {
        assert!(
            parse(json!({"action": "a.B", "extras": [bad.clone()]})).is_err(),
            "{bad}"
        );
    }
    let run = |argv: Value| Catalogue::get().parse("shell", "run", &json!({ "argv": argv }));
    assert!(run(json!(["ls", "-l", "a b"])).is_ok());
    assert!(run(json!([])).is_err());
    assert!(run(json!("id; reboot")).is_err());
    assert!(run(json!(vec!["x"; 65])).is_err());
    assert!(run(json!(["a\u{0}b"])).is_err());
}
