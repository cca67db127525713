//! The phone services' device commands against the scripted shell of
//! `tests.rs`: real `dumpsys notification` output, the refusals the bridge
//! makes on its own, and `pm` failures.

use super::tests::{ScriptedShell, run};
use super::*;
use droidwarden_services::ErrorCode;
use serde_json::json;

const REDACTED_17: &str = fixture!("dumpsys-notification/adbjsoncli-emulator-17.txt");
const NOREDACT_14: &str = fixture!("dumpsys-notification/noredact-composed-14.txt");
const LIST: &str = "dumpsys notification --noredact";

#[tokio::test]
async fn notifications_from_a_real_dump_and_a_filtered_one() {
    let sh = ScriptedShell::default().answer(LIST, REDACTED_17);
    let v = run(&sh, "notifications.list", json!({})).await.unwrap();
    assert_eq!(v["count"], 2);
    assert_eq!(sh.asked(), [LIST]);
    let sh = ScriptedShell::default().answer(LIST, NOREDACT_14);
    let v = run(
        &sh,
        "notifications.list",
        json!({"package": "org.videolan.vlc"}),
    )
    .await
    .unwrap();
    assert_eq!(v["count"], 1);
    assert_eq!(v["notifications"][0]["ongoing"], true);
}

#[tokio::test]
async fn a_denied_dump_is_permission_denied_even_with_exit_0() {
    // What `dumpsys` prints to a caller without android.permission.DUMP:
    // the denial on stdout, exit status 0.
    let denial = "Permission Denial: can't dump NotificationManager from from pid=4242, uid=10190 due to missing android.permission.DUMP permission\n";
    let sh = ScriptedShell::default().answer(LIST, denial);
    let err = run(&sh, "notifications.list", json!({})).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::PermissionDenied, "{err}");
    // The same denial after the manager's header (synthetic): still the
    // denial, never an empty list.
    let after_header = format!("Current Notification Manager state:\n{denial}");
    let sh = ScriptedShell::default().answer(LIST, &after_header);
    let err = run(&sh, "notifications.list", json!({})).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::PermissionDenied, "{err}");
    // A dump cut by its timeout is retryable, never a short list.
    let cut = format!(
        "{}\n*** SERVICE 'notification' DUMP TIMEOUT (10000ms) EXPIRED ***\n",
        &NOREDACT_14[..400]
    );
    let sh = ScriptedShell::default().answer(LIST, &cut);
    let err = run(&sh, "notifications.list", json!({})).await.unwrap_err();
    assert!(err.retryable(), "{err}");
    // An app's text that starts a line with "Error:" is text, not a failure.
    let text = NOREDACT_14.replace("Ref: 100% done; $HOME)", "Error: card declined)");
    let sh = ScriptedShell::default().answer(LIST, &text);
    let v = run(
        &sh,
        "notifications.list",
        json!({"package": "com.example.bank"}),
    )
    .await
    .unwrap();
    assert!(
        v["notifications"][0]["text"]
            .as_str()
            .unwrap()
            .ends_with("\nError: card declined")
    );
}

#[tokio::test]
async fn the_bridge_refuses_dangerous_schemes_and_dot_dot_by_itself() {
    let sh = ScriptedShell::default();
    let schemes = [
        "javascript:alert(1)",
        "FILE:///sdcard/x",
        "content://sms/inbox",
    ]
    .map(|url| ("intents.open_url", json!({ "url": url }), ErrorCode::Denied));
    let dot_dot = [
        (
            "files.pull",
            json!({"path": "/sdcard/Download/../../data/x"}),
        ),
        (
            "app_manager.install",
            json!({"apk_path": "/data/local/tmp/../x.apk"}),
        ),
    ]
    .map(|(name, params)| (name, params, ErrorCode::InvalidParams));
    for (name, params, code) in schemes.into_iter().chain(dot_dot) {
        let shown = params.to_string();
        let err = run(&sh, name, params).await.unwrap_err();
        assert_eq!(err.code(), code, "{name} {shown}: {err}");
    }
    assert!(sh.asked().is_empty(), "{:?}", sh.asked());
}

#[tokio::test]
async fn pull_checks_the_size_before_reading() {
    let path = "/sdcard/Download/big.bin";
    let stat = format!("stat -L -c %s %F {path}");
    let sh =
        ScriptedShell::default().answer(&stat, &format!("{} regular file\n", MAX_PULL_BYTES + 1));
    let err = run(&sh, "files.pull", json!({ "path": path }))
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::Denied, "{err}");
    assert_eq!(sh.asked().len(), 1);
    let sh = ScriptedShell::default().answer(&stat, "4096 directory\n");
    let err = run(&sh, "files.pull", json!({ "path": path }))
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::InvalidParams, "{err}");
    let sh = ScriptedShell::default()
        .answer(&stat, "5 regular file\n")
        .answer(&format!("base64 -w 0 {path}"), "aGVsbG8=\n");
    let v = run(&sh, "files.pull", json!({ "path": path }))
        .await
        .unwrap();
    assert_eq!(v["size_bytes"], 5);
    assert_eq!(v["content_base64"], "aGVsbG8=");
}

#[tokio::test]
async fn pm_failures_carry_androids_words() {
    let sh = ScriptedShell::default().fail(
        "pm install -r /data/local/tmp/a.apk",
        "Failure [INSTALL_FAILED_INSUFFICIENT_STORAGE]\n",
        "",
        1,
    );
    let err = run(
        &sh,
        "app_manager.install",
        json!({"apk_path": "/data/local/tmp/a.apk"}),
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), ErrorCode::DeviceError);
    assert!(
        err.to_string()
            .contains("INSTALL_FAILED_INSUFFICIENT_STORAGE"),
        "{err}"
    );
    let sh = ScriptedShell::default().fail("pm path com.gone.app", "", "", 1);
    let err = run(
        &sh,
        "app_manager.uninstall",
        json!({"package": "com.gone.app"}),
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), ErrorCode::NotFound);
    assert_eq!(sh.asked(), ["pm path com.gone.app"]);
}

#[tokio::test]
async fn extras_are_three_argv_elements_each() {
    let sh = ScriptedShell::default();
    let _ = run(
        &sh,
        "intents.start_activity",
        json!({"action": "a.B", "extras": [
            {"key": "n", "type": "int", "value": "7"},
            {"key": "s", "type": "string", "value": "x y; z"},
        ]}),
    )
    .await;
    let asked = sh.asked.lock().unwrap().clone();
    assert_eq!(
        asked,
        vec![vec![
            "am", "start", "-W", "-a", "a.B", "--ei", "n", "7", "--es", "s", "x y; z"
        ]]
    );
}
