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

#[test]
fn push_writes_only_inside_push_dirs_with_one_bounded_source() {
    let p = PhonePolicy::try_from(raw(json!({
        "host_dirs": ["/srv/share/"],
        "max_push_bytes": 10,
    })))
    .unwrap();
    assert_eq!(p.host_files.dirs, ["/srv/share"]);
    let push = |params: Value| cmd("files", "push", params);
    let ok = push(json!({"path": "/sdcard/Download/a.txt", "text": "héllo"}));
    assert_eq!(code(&p, &ok), None);
    for (params, want) in [
        // Outside the phone directories.
        (
            json!({"path": "/sdcard/DCIM/a.txt", "text": "x"}),
            ErrorCode::Denied,
        ),
        (
            json!({"path": "/sdcard/Download/../x", "text": "x"}),
            ErrorCode::InvalidParams,
        ),
        // No source, two sources.
        (
            json!({"path": "/sdcard/Download/a"}),
            ErrorCode::InvalidParams,
        ),
        (
            json!({"path": "/sdcard/Download/a", "text": "x", "content_base64": "eA=="}),
            ErrorCode::InvalidParams,
        ),
        // Over max_push_bytes (10): 11 bytes of text, 12 of base64.
        (
            json!({"path": "/sdcard/Download/a", "text": "hello world"}),
            ErrorCode::Denied,
        ),
        (
            json!({"path": "/sdcard/Download/a", "content_base64": "AAAAAAAAAAAAAAAA"}),
            ErrorCode::Denied,
        ),
        (
            json!({"path": "/sdcard/Download/a", "content_base64": "AAA"}),
            ErrorCode::InvalidParams,
        ),
        // Host files only under host_dirs.
        (
            json!({"path": "/sdcard/Download/a", "host_path": "/etc/shadow"}),
            ErrorCode::Denied,
        ),
        (
            json!({"path": "/sdcard/Download/a", "host_path": "/srv/share/../../etc/shadow"}),
            ErrorCode::InvalidParams,
        ),
        (
            json!({"path": "/sdcard/Download/a", "host_path": "/srv/shared/x"}),
            ErrorCode::Denied,
        ),
    ] {
        assert_eq!(code(&p, &push(params.clone())), Some(want), "{params}");
    }
    let host = push(json!({"path": "/sdcard/Download/a", "host_path": "/srv/share/sub/x.pdf"}));
    assert_eq!(code(&p, &host), None);
    // No host directory by default: every host path is refused, naming the key.
    let err = PhonePolicy::default().check(&host).unwrap_err();
    assert_eq!(err.code, ErrorCode::Denied);
    assert!(err.message.contains("host_dirs"), "{err}");
}

#[test]
fn install_takes_one_apk_on_the_phone_or_under_host_dirs() {
    let p = PhonePolicy::try_from(raw(json!({"host_dirs": ["/srv/apks"]}))).unwrap();
    let install = |params: Value| cmd("app_manager", "install", params);
    assert_eq!(
        code(&p, &install(json!({"host_path": "/srv/apks/game.apk"}))),
        None
    );
    for (params, want) in [
        (json!({}), ErrorCode::InvalidParams),
        (
            json!({"host_path": "/srv/apks/a.apk", "apk_path": "/data/local/tmp/a.apk"}),
            ErrorCode::InvalidParams,
        ),
        (
            json!({"host_path": "/srv/apks/notes.txt"}),
            ErrorCode::InvalidParams,
        ),
        (json!({"host_path": "/home/me/a.apk"}), ErrorCode::Denied),
    ] {
        assert_eq!(code(&p, &install(params.clone())), Some(want), "{params}");
    }
}

#[test]
fn size_bounds_are_checked_when_configured() {
    for bad in [
        json!({"max_push_bytes": 0}),
        json!({"max_apk_bytes": 5_000_000_000u64}),
    ] {
        let err = PhonePolicy::try_from(raw(bad.clone())).unwrap_err();
        assert!(err.key.starts_with("phone_services.max_"), "{bad}: {err}");
    }
    assert!(PhonePolicy::try_from(raw(json!({"host_dirs": ["relative"]}))).is_err());
}

/// Every way to the phone's calls and messages passes telephony's rules:
/// intents by action, by data scheme (encoded or not) or by the dialer's
/// component, and links — for every caller, since the hub checks here.
#[test]
fn intents_and_links_that_call_or_text_pass_the_telephony_rules() {
    let start = |params: Value| cmd("intents", "start_activity", params);
    let open = |url: &str| cmd("intents", "open_url", json!({ "url": url }));
    let reaching = [
        start(json!({"action": "android.intent.action.CALL", "data": "tel:+19005550100"})),
        start(json!({"action": "android.intent.action.VIEW", "data": "TEL:+19005550100"})),
        start(
            json!({"action": "android.intent.action.SENDTO", "data": "smsto:+19005550100",
            "extras": [{"key": "sms_body", "type": "string", "value": "hi"}]}),
        ),
        start(json!({"action": "android.intent.action.VIEW", "data": "sms:+1900%2C+1901?body=x"})),
        start(json!({"action": "android.intent.action.DIAL", "data": "tel:*%2306%23"})),
        start(json!({"action": "android.intent.action.VIEW", "data": "mms://+19005550100"})),
        start(json!({"action": "android.intent.action.VIEW", "data": "voicemail:1"})),
        start(json!({"action": "android.intent.action.CALL"})),
        start(json!({"action": "android.intent.action.call_privileged", "data": "geo:0,0"})),
        start(json!({"component": "com.android.server.telecom/.components.UserCallActivity"})),
        start(
            json!({"component": "com.google.android.apps.messaging/.ui.ConversationListActivity"}),
        ),
    ];
    let off = PhonePolicy::default();
    for c in &reaching {
        assert_eq!(code(&off, c), Some(ErrorCode::Disabled), "{c:?}");
    }
    // A link: its scheme must be allowed, and then telephony decides too.
    let tel_links =
        PhonePolicy::try_from(raw(json!({"url_schemes": ["https", "tel", "sms"]}))).unwrap();
    assert_eq!(
        code(&tel_links, &open("tel:+19005550100")),
        Some(ErrorCode::Disabled)
    );
    assert_eq!(code(&tel_links, &open("https://example.org/tel:1")), None);

    // Telephony on: only allowlisted numbers, and nothing unchecked.
    let on = PhonePolicy::try_from(raw(json!({
        "url_schemes": ["https", "tel"],
        "telephony": {"enabled": true, "allowed_numbers": ["+49 151 1234-5678"]},
    })))
    .unwrap();
    for c in &reaching {
        assert_eq!(code(&on, c), Some(ErrorCode::Denied), "{c:?}");
    }
    let allowed = [
        start(json!({"action": "android.intent.action.CALL", "data": "tel:+4915112345678"})),
        start(
            json!({"action": "android.intent.action.SENDTO", "data": "smsto:+49%20151%2012345678?body=x"}),
        ),
        open("tel:+49-151-1234-5678"),
    ];
    for c in &allowed {
        assert_eq!(code(&on, c), None, "{c:?}");
    }
    // One recipient outside the list refuses the whole intent.
    let two = start(
        json!({"action": "android.intent.action.SENDTO", "data": "sms:+4915112345678,+19005550100"}),
    );
    assert_eq!(code(&on, &two), Some(ErrorCode::Denied));
    // Intents that reach no telephony are untouched.
    for c in [
        start(json!({"action": "android.intent.action.VIEW", "data": "geo:0,0?q=cafe"})),
        start(json!({"component": "com.example.notes/.MainActivity"})),
        start(
            json!({"action": "android.intent.action.VIEW", "data": "https://example.org/?tel=1"}),
        ),
    ] {
        assert_eq!(code(&off, &c), None, "{c:?}");
    }
}
