//! Each action's device commands and result, against a scripted shell that
//! answers with real device output from the fixtures.

use super::*;
use droidwarden_services::{Catalogue, ErrorCode};
use serde_json::json;

/// Answers each command line (argv joined by spaces) from a script and
/// records what it was asked, in order.
#[derive(Default)]
pub(super) struct ScriptedShell {
    answers: HashMap<String, ShellOutput>,
    pub(super) asked: Mutex<Vec<Vec<String>>>,
    muted: Mutex<HashMap<u8, i64>>,
    binary: HashMap<String, Vec<u8>>,
    snapshot: Mutex<Option<UiSnapshot>>,
}

impl ScriptedShell {
    pub(super) fn answer(mut self, command: &str, stdout: &str) -> Self {
        self.answers.insert(
            command.to_owned(),
            ShellOutput {
                stdout: stdout.to_owned(),
                ..ShellOutput::default()
            },
        );
        self
    }

    pub(super) fn fail(mut self, command: &str, stdout: &str, stderr: &str, exit: i32) -> Self {
        self.answers.insert(
            command.to_owned(),
            ShellOutput {
                stdout: stdout.to_owned(),
                stderr: stderr.to_owned(),
                exit,
            },
        );
        self
    }

    /// Panics if any command asked so far contains `part`.
    pub(super) fn never_asked(&self, part: &str) {
        let asked = self.asked();
        assert!(asked.iter().all(|c| !c.contains(part)), "{part}: {asked:?}");
    }

    pub(super) fn asked(&self) -> Vec<String> {
        self.asked
            .lock()
            .unwrap()
            .iter()
            .map(|a| a.join(" "))
            .collect()
    }
}

impl Shell for ScriptedShell {
    fn device_name(&self) -> &str {
        "scripted"
    }

    fn muted_levels(&self) -> &Mutex<HashMap<u8, i64>> {
        &self.muted
    }

    fn run_binary<'a>(
        &'a self,
        argv: &'a [&'a str],
    ) -> BoxFuture<'a, Result<BinaryOutput, BridgeError>> {
        Box::pin(async move {
            let line = argv.join(" ");
            self.asked
                .lock()
                .unwrap()
                .push(argv.iter().map(|a| (*a).to_owned()).collect());
            let stdout = self.binary.get(&line).cloned().unwrap_or_default();
            Ok(BinaryOutput {
                stdout,
                ..BinaryOutput::default()
            })
        })
    }

    fn ui_snapshot(&self) -> &Mutex<Option<UiSnapshot>> {
        &self.snapshot
    }

    fn run<'a>(&'a self, argv: &'a [&'a str]) -> BoxFuture<'a, Result<ShellOutput, BridgeError>> {
        Box::pin(async move {
            self.asked
                .lock()
                .unwrap()
                .push(argv.iter().map(|s| s.to_string()).collect());
            let line = argv.join(" ");
            Ok(self.answers.get(&line).cloned().unwrap_or(ShellOutput {
                stdout: String::new(),
                // What mksh prints on Android 10 and later.
                stderr: format!("/system/bin/sh: {}: inaccessible or not found\n", argv[0]),
                exit: 127,
            }))
        })
    }
}

fn cmd(service: &str, action: &str, params: Value) -> Command {
    Catalogue::get().parse(service, action, &params).unwrap()
}

/// `name` (`service.action`) with `params` on `sh`, its result checked
/// against the action's documented shape.
pub(super) async fn run(
    sh: &ScriptedShell,
    name: &str,
    params: Value,
) -> Result<Value, BridgeError> {
    let (service, action) = name.split_once('.').expect("service.action");
    let command = cmd(service, action, params);
    let result = execute(sh, &command).await;
    if let Ok(value) = &result {
        let (_, spec) = Catalogue::get().action(service, action).unwrap();
        if let Err(v) = spec.result.validate(value) {
            panic!(
                "{service}.{action} result {value} breaks its documented shape at {}: {}",
                v.path, v.reason
            );
        }
    }
    result
}

/// `app_launcher.launch` of `package` (and `activity`, when given).
async fn launch(
    sh: &ScriptedShell,
    package: &str,
    activity: Option<&str>,
) -> Result<Value, BridgeError> {
    let mut params = json!({ "package": package });
    if let Some(activity) = activity {
        params["activity"] = json!(activity);
    }
    run(sh, "app_launcher.launch", params).await
}

/// The command that asks for `package`'s launcher activities.
fn query_launcher(package: &str) -> String {
    format!(
        "cmd package query-activities --brief -a android.intent.action.MAIN -c android.intent.category.LAUNCHER {package}"
    )
}

/// What `am start -W` prints for a cold start of `component`.
fn started(component: &str, total_ms: u32, wait_ms: u32) -> String {
    format!(
        "Starting: Intent {{ cmp={component} }}\nStatus: ok\nLaunchState: COLD\nActivity: {component}\nTotalTime: {total_ms}\nWaitTime: {wait_ms}\nComplete\n"
    )
}

const BATTERY: &str = fixture!("dumpsys-battery/adbjsoncli-emulator-17.txt");
const AUDIO: &str = fixture!("dumpsys-audio/redroid-rockchip-issue17-streams-fragment.txt");

#[tokio::test]
async fn battery_status_reads_dumpsys_battery() {
    let sh = ScriptedShell::default().answer("dumpsys battery", BATTERY);
    let v = run(&sh, "batteryMonitor.status", json!({})).await.unwrap();
    assert_eq!(v["level_percent"], 100);
    assert_eq!(sh.asked(), ["dumpsys battery"]);
}

#[tokio::test]
async fn launch_resolves_the_launcher_activity_first() {
    let sh = ScriptedShell::default()
        .answer(
            &query_launcher("org.videolan.vlc"),
            "1 activities found:\n  Activity #0:\n    priority=0 preferredOrder=0 match=0x108000 specificIndex=-1 isDefault=false\n    org.videolan.vlc/.StartActivity\n",
        )
        .answer(
            "am start -W -n org.videolan.vlc/.StartActivity",
            &started("org.videolan.vlc/.StartActivity", 412, 415),
        );
    let v = launch(&sh, "org.videolan.vlc", None).await.unwrap();
    assert_eq!(v["component"], "org.videolan.vlc/.StartActivity");
    assert_eq!(v["status"], "ok");
    assert_eq!(v["total_time_ms"], 412);
}

#[tokio::test]
async fn launch_with_an_activity_goes_straight_to_am_start() {
    let sh = ScriptedShell::default().answer("am start -W -n com.x.y/.Main", "Status: ok\n");
    launch(&sh, "com.x.y", Some("Main")).await.unwrap();
    assert_eq!(sh.asked(), ["am start -W -n com.x.y/.Main"]);
    let sh =
        ScriptedShell::default().answer("am start -W -n com.x.y/com.x.y.ui.Home", "Status: ok\n");
    launch(&sh, "com.x.y", Some("com.x.y.ui.Home"))
        .await
        .unwrap();
}

#[tokio::test]
async fn an_unresolvable_launch_is_not_found() {
    let sh =
        ScriptedShell::default().answer(&query_launcher("com.not.there"), "No activities found\n");
    let err = launch(&sh, "com.not.there", None).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::NotFound, "{err}");
    let sh = ScriptedShell::default().answer(
        "am start -W -n org.mozilla.fenix/.App",
        fixture!("am-start-errors/fenix-issue7925-pixel2-10.txt"),
    );
    let err = launch(&sh, "org.mozilla.fenix", Some(".App"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::NotFound, "{err}");
}

#[tokio::test]
async fn stopping_an_app_that_is_not_installed_is_not_found() {
    let sh = ScriptedShell::default().fail("pm path com.gone.app", "", "", 1);
    let err = run(&sh, "app_launcher.stop", json!({"package": "com.gone.app"}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::NotFound);
    assert_eq!(
        sh.asked(),
        ["pm path com.gone.app"],
        "nothing is force-stopped"
    );
}

/// The volume changes `sh` was asked for, in order.
fn volume_sets(sh: &ScriptedShell) -> Vec<String> {
    sh.asked()
        .into_iter()
        .filter(|c| c.contains("--set"))
        .collect()
}

#[tokio::test]
async fn set_volume_scales_percent_to_the_streams_range_and_reads_back() {
    let sh = ScriptedShell::default()
        .answer("dumpsys audio", AUDIO)
        .answer("cmd media_session volume --stream 8 --set 8", "");
    // STREAM_DTMF in this fixture: min 0, max 15; 50 % of 15 rounds to 8.
    let v = run(
        &sh,
        "audio_automation.set_volume",
        json!({"stream": "dtmf", "level": 50}),
    )
    .await
    .unwrap();
    assert_eq!(v["max"], 15);
    assert_eq!(
        sh.asked(),
        [
            "dumpsys audio",
            "cmd media_session volume --stream 8 --set 8",
            "dumpsys audio"
        ]
    );
}

#[tokio::test]
async fn mute_remembers_the_level_and_unmute_restores_it() {
    // STREAM_DTMF in this fixture: streamVolume 5, range 0..=15.
    let set = |level: u8| format!("cmd media_session volume --stream 8 --set {level}");
    let sh = ScriptedShell::default()
        .answer("dumpsys audio", AUDIO)
        .answer(&set(0), "")
        .answer(&set(5), "");
    run(&sh, "audio_automation.mute", json!({"stream": "dtmf"}))
        .await
        .unwrap();
    assert_eq!(volume_sets(&sh), [set(0)]);
    assert_eq!(sh.muted.lock().unwrap().get(&8), Some(&5));

    // The phone is now silent on that stream; unmute restores the saved 5.
    let muted_audio = AUDIO.replacen("streamVolume:5", "streamVolume:0", 2);
    let sh2 = ScriptedShell::default()
        .answer("dumpsys audio", &muted_audio)
        .answer(&set(5), "");
    *sh2.muted.lock().unwrap() = sh.muted.lock().unwrap().clone();
    run(&sh2, "audio_automation.unmute", json!({"stream": "dtmf"}))
        .await
        .unwrap();
    assert_eq!(volume_sets(&sh2), [set(5)]);
    // Nothing remembered and the stream is audible: unmute changes nothing.
    let sh = ScriptedShell::default().answer("dumpsys audio", AUDIO);
    run(&sh, "audio_automation.unmute", json!({"stream": "dtmf"}))
        .await
        .unwrap();
    sh.never_asked("--set");
}

#[tokio::test]
async fn phone_errors_become_structured_errors() {
    let sh = ScriptedShell::default().fail(
        "svc wifi disable",
        "",
        "java.lang.SecurityException: Permission Denial: not allowed to change wifi state\n",
        1,
    );
    let err = run(&sh, "wifi_automation.disable", json!({}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::PermissionDenied, "{err}");

    // The scripted shell answers unknown commands like Android's sh.
    let sh = ScriptedShell::default();
    let err = run(&sh, "camera_control.camera_info", json!({}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::UnsupportedAction, "{err}");

    let sh = ScriptedShell::default()
        .answer("dumpsys media.camera", "Can't find service: media.camera\n");
    let err = run(&sh, "camera_control.camera_info", json!({}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::UnsupportedAction, "{err}");

    let sh = ScriptedShell::default().fail(
        "settings put system screen_brightness 10",
        "",
        "Error: something odd\n",
        255,
    );
    let err = run(&sh, "screen_control.set_brightness", json!({"level": 10}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::DeviceError, "{err}");
    assert!(err.to_string().contains("something odd"), "{err}");
}

#[tokio::test]
async fn play_url_passes_the_url_as_one_argument() {
    let url = "https://example.org/a b";
    assert!(
        Catalogue::get()
            .parse("media_control", "play_url", &json!({"url": url}))
            .is_err()
    );
    let url = "https://example.org/live?x=1&y=$(id);z";
    let sh = ScriptedShell::default().answer(
        &format!("am start -W -a android.intent.action.VIEW -d {url}"),
        "Starting: Intent { act=android.intent.action.VIEW dat=https://example.org/... }\nStatus: ok\n",
    );
    let v = run(&sh, "media_control.play_url", json!({"url": url}))
        .await
        .unwrap();
    assert_eq!(v["status"], "ok");
    let asked = sh.asked.lock().unwrap().clone();
    assert_eq!(asked[0].last().unwrap(), url, "the URL is one argv element");
}

#[tokio::test]
async fn a_number_setting_that_is_garbage_is_a_device_error_not_null() {
    let garbage = format!("\u{1b}[2J{}\n", "\u{fffd}#".repeat(3000));
    for key in ["screen_brightness", "screen_off_timeout"] {
        let mut sh = with_dump(
            "dumpsys power",
            fixture!("dumpsys-power/adbjsoncli-emulator-17.txt"),
        );
        sh = sh.answer(&format!("settings get system {key}"), &garbage);
        let err = run(&sh, "screen_control.status", json!({}))
            .await
            .unwrap_err();
        let wire = err.to_wire();
        assert_eq!(wire.code, ErrorCode::DeviceError, "{key}: {wire:?}");
        assert!(
            wire.message.chars().count() < 300,
            "{key}: {}",
            wire.message
        );
        assert!(
            !wire.message.chars().any(char::is_control),
            "{key}: {:?}",
            wire.message
        );
    }
    // Unset is still null.
    let sh = with_dump(
        "dumpsys power",
        fixture!("dumpsys-power/adbjsoncli-emulator-17.txt"),
    )
    .answer("settings get system screen_brightness", "null\n");
    let v = run(&sh, "screen_control.status", json!({})).await.unwrap();
    assert_eq!(v["brightness"], Value::Null, "{v}");
}

/// Every action that reads a `dumpsys`, as `service.action`, with the
/// service it dumps (`dumpsys SERVICE`).
const DUMPSYS_READS: &[(&str, &str)] = &[
    ("batteryMonitor.status", "battery"),
    ("location.current", "location"),
    ("wifi_automation.status", "wifi"),
    ("bluetooth_automation.status", "bluetooth_manager"),
    ("bluetooth_automation.paired_devices", "bluetooth_manager"),
    ("audio_automation.get_volume", "audio"),
    ("audio_automation.mute", "audio"),
    ("device_state.status", "power"),
    ("screen_control.status", "power"),
    ("motion_detection.current_motion", "sensorservice"),
    ("motion_detection.orientation", "window displays"),
    ("environmental_sensors.ambient_conditions", "sensorservice"),
    ("environmental_sensors.proximity", "sensorservice"),
    ("camera_control.camera_info", "media.camera"),
    ("media_control.status", "media_session"),
];

/// A shell that answers `dump` with `stdout` and every setting with `0`.
fn with_dump(dump: &str, stdout: &str) -> ScriptedShell {
    let mut sh = ScriptedShell::default().answer(dump, stdout);
    for (namespace, key) in [
        ("global", "low_power"),
        ("system", "screen_brightness"),
        ("system", "screen_brightness_mode"),
        ("system", "screen_off_timeout"),
    ] {
        sh = sh.answer(&format!("settings get {namespace} {key}"), "0\n");
    }
    sh
}

/// Each of [`DUMPSYS_READS`] with its dump printing `stdout`: the error it
/// fails with (panics if one succeeds).
async fn dump_read_errors(stdout: &str) -> Vec<(&'static str, BridgeError)> {
    let mut errors = Vec::new();
    for &(name, dump) in DUMPSYS_READS {
        let (service, action) = name.split_once('.').unwrap();
        let (_, spec) = Catalogue::get().action(service, action).unwrap();
        let sh = with_dump(&format!("dumpsys {dump}"), stdout);
        match run(&sh, name, spec.example.clone()).await {
            Ok(v) => panic!("{name} read {v} from {stdout:?}"),
            Err(err) => errors.push((name, err)),
        }
    }
    errors
}

#[tokio::test]
async fn a_dump_cut_short_by_its_timeout_is_a_retryable_error_not_a_value() {
    // The real value is 5000 mV; the dump stops at "voltage: 50".
    let cut = fixture!("dumpsys-battery/droidwarden-timeout-10000ms-mid-line.txt");
    let sh = ScriptedShell::default().answer("dumpsys battery", cut);
    let err = run(&sh, "batteryMonitor.status", json!({}))
        .await
        .unwrap_err();
    assert!(matches!(err, BridgeError::IncompleteOutput { .. }), "{err}");
    let wire = err.to_wire();
    assert_eq!(wire.code, ErrorCode::DeviceError);
    assert!(wire.retryable, "{wire:?}");
    assert!(
        wire.message
            .contains("*** SERVICE 'battery' DUMP TIMEOUT (10000ms) EXPIRED ***"),
        "{}",
        wire.message
    );

    // Every action that reads a dump, with every form of the marker.
    for marker in [
        "*** SERVICE DUMP TIMEOUT EXPIRED ***",
        "*** SERVICE 'x' DUMP TIMEOUT (10s) EXPIRED ***",
        "*** SERVICE 'x' DUMP TIMEOUT (10000ms) EXPIRED ***",
    ] {
        let cut = format!("Header:\n  value: 1\n  cut her\n{marker}\n\n");
        for (name, err) in dump_read_errors(&cut).await {
            assert!(
                err.retryable() && err.code() == ErrorCode::DeviceError,
                "{name}: {err}"
            );
        }
    }
}

/// `audio_automation.get_volume` of the music stream.
async fn music_volume(sh: &ScriptedShell) -> Result<Value, BridgeError> {
    run(
        sh,
        "audio_automation.get_volume",
        json!({"stream": "music"}),
    )
    .await
}

#[tokio::test]
async fn a_dump_that_stops_mid_line_or_loses_its_service_is_retryable() {
    // The real level is 100; the dump stops at "mBatteryLevel=1".
    let cut = fixture!("dumpsys-power/droidwarden-cut-mid-line.txt");
    let sh = with_dump("dumpsys power", cut);
    let err = run(&sh, "device_state.status", json!({}))
        .await
        .unwrap_err();
    assert!(err.retryable(), "{err}");
    assert!(err.to_string().contains("mBatteryLevel=1"), "{err}");

    let sh = ScriptedShell::default().fail(
        "dumpsys audio",
        "- STREAM_MUSIC:\n   Muted: false\n",
        "Error with service 'audio' while dumping: DEAD_OBJECT\n",
        0,
    );
    let err = music_volume(&sh).await.unwrap_err();
    assert!(err.retryable(), "{err}");
}

#[tokio::test]
async fn an_empty_dump_is_a_device_error_not_not_found() {
    let empty = fixture!("dumpsys-audio/droidwarden-empty.txt");
    let sh = ScriptedShell::default().answer("dumpsys audio", empty);
    let err = music_volume(&sh).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::DeviceError, "{err}");
    assert!(
        err.to_string().contains("`dumpsys audio` printed nothing"),
        "{err}"
    );

    for stdout in ["", "\n"] {
        for (name, err) in dump_read_errors(stdout).await {
            assert_eq!(err.code(), ErrorCode::DeviceError, "{name}: {err}");
            assert!(!err.retryable(), "{name}: {err}");
        }
    }
}

const TWO_LAUNCHERS: &str =
    fixture!("cmd-package-query-activities-brief/droidwarden-two-launcher-activities.txt");

#[tokio::test]
async fn launching_an_app_with_several_launcher_activities_never_starts_the_chooser() {
    let chooser = fixture!("cmd-package-resolve-activity-brief/droidwarden-resolver-chooser.txt");
    let chooser_started = started(
        "android/com.android.internal.app.ResolverActivity",
        230,
        233,
    );
    let sh = ScriptedShell::default()
        // What the phone says when asked the way the bridge used to ask.
        .answer(
            "cmd package resolve-activity --brief -c android.intent.category.LAUNCHER com.example.twoicons",
            chooser,
        )
        .answer(
            "am start -W -n android/com.android.internal.app.ResolverActivity",
            &chooser_started,
        )
        .answer(&query_launcher("com.example.twoicons"), TWO_LAUNCHERS)
        .answer(
            "am start -W -n com.example.twoicons/.MainActivity",
            &started("com.example.twoicons/.MainActivity", 300, 302),
        );
    let v = launch(&sh, "com.example.twoicons", None).await.unwrap();
    assert_eq!(v["component"], "com.example.twoicons/.MainActivity");
    sh.never_asked("ResolverActivity");
}

#[tokio::test]
async fn a_launch_that_leaves_another_packages_activity_on_top_is_not_success() {
    // Real output: `Activity:` names the Portal's launcher, not encapp.
    let sh = ScriptedShell::default().answer(
        "am start -W -n com.facebook.encapp/.MainActivity",
        fixture!("am-start/am-start-W-ok-encapp-readme-portal-unknown.txt"),
    );
    let err = launch(&sh, "com.facebook.encapp", Some(".MainActivity"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::DeviceError, "{err}");
    assert!(
        err.to_string().contains(
            "com.facebook.alohaapps.launcher/com.facebook.aloha.app.home.touch.HomeActivity"
        ),
        "{err}"
    );

    // A query answered with another package's activity is never launched.
    let sh = ScriptedShell::default().answer(
        &query_launcher("com.example.twoicons"),
        "1 activities found:\n  Activity #0:\n    com.other.app/.Main\n",
    );
    let err = launch(&sh, "com.example.twoicons", None).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::NotFound, "{err}");
    sh.never_asked("am start");
}

const ETH_ROUTE: &str = fixture!("ip-route/gateway-pr17-eth0-android-unknown.txt");
const ETH_ROUTE_GET: &str = fixture!("ip-route-get/gateway-pr17-eth0-android-unknown.txt");
const ETH_ADDRS: &str = fixture!("ip-addr-show/droidwarden-tvbox-eth0-no-wlan.txt");

/// A shell answering `network.status`'s reads, but for `ip route get`.
fn network_shell(route: &str, addrs: &str, airplane: bool) -> ScriptedShell {
    ScriptedShell::default()
        .answer("ip route", route)
        .answer("ip addr show", addrs)
        .answer(
            "settings get global airplane_mode_on",
            if airplane { "1\n" } else { "0\n" },
        )
}

#[tokio::test]
async fn network_status_reports_the_default_routes_interface_on_ethernet() {
    let sh =
        network_shell(ETH_ROUTE, ETH_ADDRS, false).answer("ip route get 8.8.8.8", ETH_ROUTE_GET);
    let v = run(&sh, "network.status", json!({})).await.unwrap();
    assert_eq!(v["wifi"]["interface"], "eth0");
    assert_eq!(v["wifi"]["ipv4"], "10.0.1.36");
    assert_eq!(v["wifi"]["carrier"], true);
    assert_eq!(v["default_gateway"], "10.0.1.1");
    assert_eq!(v["routes"][0]["interface"], "eth0");
    sh.never_asked("wlan0");
}

#[tokio::test]
async fn network_status_on_mobile_data_and_offline() {
    let addrs = fixture!("ip-addr-show/droidwarden-phone-mobile-data-wlan0-off.txt");
    let sh = network_shell("", addrs, false).answer(
        "ip route get 8.8.8.8",
        fixture!("ip-route-get/evidence-dw20260905-huawei-rmnet0-cellular-unknown.txt"),
    );
    let v = run(&sh, "network.status", json!({})).await.unwrap();
    assert_eq!(v["wifi"]["interface"], "rmnet0");
    assert_eq!(v["default_gateway"], "10.121.106.242");

    // Offline: no route at all and no link up with an address; the Wi-Fi
    // link is shown, down.
    let sh = network_shell(
        "",
        fixture!("ip-addr-show-wlan0/emulator-runner-issue211-ci-emulator-10.txt"),
        true,
    )
    .fail(
        "ip route get 8.8.8.8",
        "",
        fixture!("ip-route-get/droidwarden-unreachable.txt"),
        2,
    );
    let v = run(&sh, "network.status", json!({})).await.unwrap();
    assert_eq!(v["wifi"]["interface"], "wlan0");
    assert_eq!(v["wifi"]["up"], false);
    assert_eq!(v["default_gateway"], Value::Null);
    assert_eq!(v["airplane_mode"], true);

    // A main table with a default route (Android 4, TV boxes): no lookup.
    let main_table = "default via 10.0.1.1 dev eth0  metric 204\n10.0.1.0/24 dev eth0  proto kernel  scope link  src 10.0.1.36\n";
    let sh = network_shell(main_table, ETH_ADDRS, false);
    let v = run(&sh, "network.status", json!({})).await.unwrap();
    assert_eq!(v["wifi"]["interface"], "eth0");
    assert_eq!(v["default_gateway"], "10.0.1.1");
    sh.never_asked("ip route get");
}

#[tokio::test]
async fn network_status_without_a_route_shows_the_link_that_is_up_with_an_address() {
    // `ip route get` fails (no answer the bridge can use), but rmnet0 is
    // up with an address: that is the link to show, not the down wlan0.
    let addrs = fixture!("ip-addr-show/droidwarden-phone-mobile-data-wlan0-off.txt");
    let sh = network_shell("", addrs, false).fail(
        "ip route get 8.8.8.8",
        "",
        fixture!("ip-route-get/droidwarden-unreachable.txt"),
        2,
    );
    let v = run(&sh, "network.status", json!({})).await.unwrap();
    assert_eq!(v["wifi"]["interface"], "rmnet0");
    assert_eq!(v["wifi"]["up"], true);
    assert_eq!(v["wifi"]["ipv4"], "10.121.106.242");
    assert_eq!(v["default_gateway"], Value::Null);
}

/// `am start -W` of a share or view intent that Android answered with its
/// chooser: the person has not picked an app yet.
fn chooser_started(class: &str) -> String {
    format!(
        "Starting: Intent {{ act=android.intent.action.SEND typ=text/plain (has extras) }}\nStatus: ok\nLaunchState: COLD\nActivity: {class}\nTotalTime: 180\nWaitTime: 184\nComplete\n"
    )
}

const SHARE: &str =
    "am start -W -a android.intent.action.SEND -t text/plain --es android.intent.extra.TEXT hello";

#[tokio::test]
async fn share_text_that_lands_on_the_chooser_says_so_and_shares_nothing() {
    for chooser in [
        "android/com.android.internal.app.ResolverActivity",
        "android/com.android.internal.app.ChooserActivity",
        "com.android.intentresolver/.ChooserActivity",
    ] {
        let sh = ScriptedShell::default().answer(SHARE, &chooser_started(chooser));
        let v = run(&sh, "intents.share_text", json!({"text": "hello"}))
            .await
            .unwrap();
        assert_eq!(v["shared"], false, "{chooser}: {v}");
        assert_eq!(v["chooser"], true, "{chooser}: {v}");
    }
    // One app takes text (or the person chose "always"): it has the text.
    let app = "com.google.android.apps.messaging/.ui.conversationlist.ShareIntentActivity";
    let sh = ScriptedShell::default().answer(SHARE, &chooser_started(app));
    let v = run(&sh, "intents.share_text", json!({"text": "hello"}))
        .await
        .unwrap();
    assert_eq!(
        (v["shared"].clone(), v["chooser"].clone()),
        (json!(true), json!(false))
    );
}

#[tokio::test]
async fn open_url_and_start_activity_that_land_on_the_chooser_say_so() {
    let resolver = "android/com.android.internal.app.ResolverActivity";
    let browser = "com.android.chrome/com.google.android.apps.chrome.Main";
    let open = "am start -W -a android.intent.action.VIEW -c android.intent.category.BROWSABLE -d https://example.org/";
    let start = "am start -W -a android.intent.action.VIEW -d geo:0,0?q=cafe";
    let open_params = json!({"url": "https://example.org/"});
    let start_params = json!({"action": "android.intent.action.VIEW", "data": "geo:0,0?q=cafe"});
    for (argv, landed_on, action, params, chooser) in [
        (open, resolver, "intents.open_url", &open_params, true),
        (
            start,
            resolver,
            "intents.start_activity",
            &start_params,
            true,
        ),
        (open, browser, "intents.open_url", &open_params, false),
    ] {
        let sh = ScriptedShell::default().answer(argv, &chooser_started(landed_on));
        let v = run(&sh, action, params.clone()).await.unwrap();
        assert_eq!(
            v["chooser"], chooser,
            "{action} landing on {landed_on}: {v}"
        );
    }
}

#[tokio::test]
async fn a_battery_faked_with_dumpsys_battery_set_is_flagged_simulated() {
    // The real Android 17 dump with the line BatteryService prints under
    // its header while `dumpsys battery set|unplug` holds the values
    // (inserted here; no public output shows it whole).
    let faked = BATTERY.replacen(
        "Current Battery Service state:\n",
        "Current Battery Service state:\n  (UPDATES STOPPED -- use 'reset' to restart)\n",
        1,
    );
    assert_ne!(faked, BATTERY);
    let sh = ScriptedShell::default().answer("dumpsys battery", &faked);
    let v = run(&sh, "battery.status", json!({})).await.unwrap();
    assert_eq!(v["simulated"], true, "{v}");
    assert_eq!(v["level_percent"], 100);
    let sh = ScriptedShell::default().answer("dumpsys battery", BATTERY);
    let v = run(&sh, "battery.status", json!({})).await.unwrap();
    assert_eq!(v["simulated"], false, "{v}");
}

#[tokio::test]
async fn power_save_comes_from_the_dump_when_the_setting_is_unset() {
    // The real Android 17 fragment, then the battery saver state machine's
    // block as later releases print it (synthetic values).
    let dump = format!(
        "{}\nBattery saver state machine:\n  Enabled=true\n    full=true\n    adaptive=false\n  mState=2\n",
        fixture!("dumpsys-power/adbjsoncli-emulator-17.txt")
    );
    let sh = ScriptedShell::default()
        .answer("dumpsys power", &dump)
        .answer("settings get global low_power", "null\n");
    let v = run(&sh, "device_state.status", json!({})).await.unwrap();
    assert_eq!(v["power_save"], true, "{v}");
    // The setting, when set, still speaks first.
    let sh = ScriptedShell::default()
        .answer("dumpsys power", &dump)
        .answer("settings get global low_power", "0\n");
    let v = run(&sh, "device_state.status", json!({})).await.unwrap();
    assert_eq!(v["power_save"], false, "{v}");
}

#[tokio::test]
async fn a_permission_denied_line_on_stderr_does_not_fail_a_whole_answer() {
    // Synthetic noise beside the real battery dump, exit status 0.
    let sh = ScriptedShell::default().fail("dumpsys battery", BATTERY, "Permission denied\n", 0);
    let v = run(&sh, "battery.status", json!({})).await.unwrap();
    assert_eq!(v["level_percent"], 100);
    // With a failed exit, or nothing on stdout, the denial stands.
    for (stdout, exit) in [(BATTERY, 1), ("", 0)] {
        let sh =
            ScriptedShell::default().fail("dumpsys battery", stdout, "Permission denied\n", exit);
        let err = run(&sh, "battery.status", json!({})).await.unwrap_err();
        assert_eq!(err.code(), ErrorCode::PermissionDenied, "{err}");
    }
}

// ---------------------------------------------------------------------------
// The screen, over real uiautomator output.

const DIALOG_DUMP: &str = fixture!("uiautomator-dump/autotickexitbox-dialog-unknown.xml");
const FOCUS: &str =
    fixture!("dumpsys-window-grep-focus/appium-adb-issue797-galaxy-flip4-mFocusedApp-12.txt");
const LATIN: &str = "com.google.android.inputmethod.latin/com.android.inputmethod.latin.LatinIME";

#[tokio::test]
async fn ui_tree_follows_the_path_the_tool_printed_and_retries_while_not_idle() {
    let legacy = "/storage/emulated/legacy/window_dump.xml";
    let sh = ScriptedShell::default()
        .answer(
            &format!("uiautomator dump {DUMP_PATH}"),
            &format!("UI hierchary dumped to: {legacy}\n"),
        )
        .answer(&format!("cat {legacy}"), DIALOG_DUMP);
    let tree = run(&sh, "screen.ui_tree", json!({})).await.unwrap();
    assert!(tree["count"].as_u64().unwrap() > 0);
    // The scripted shell runs `dump && cat` as two commands; the file it
    // asked for is not read as the dump, since the tool wrote elsewhere.
    assert_eq!(
        sh.asked(),
        [
            format!("uiautomator dump {DUMP_PATH}"),
            format!("cat {DUMP_PATH}"),
            format!("cat {legacy}")
        ]
    );
    // The tree is what tap {element} resolves against: its centre.
    let first = &tree["elements"][0];
    let tapped = run(&sh, "ui_control.tap", json!({"element": 0})).await;
    // `input tap` is not scripted: the phone says the command is missing,
    // after the element was resolved to its centre.
    assert!(tapped.is_err());
    assert_eq!(
        sh.asked().last().unwrap(),
        &format!("input tap {} {}", first["center"][0], first["center"][1])
    );

    let busy = ScriptedShell::default().fail(
        &format!("uiautomator dump {DUMP_PATH}"),
        "",
        "ERROR: could not get idle state.\n",
        1,
    );
    let err = run(&busy, "screen.ui_tree", json!({})).await.unwrap_err();
    assert!(err.retryable(), "{err}");
    assert_eq!(busy.asked().len(), 3, "three dumps, then the error");
}

#[tokio::test]
async fn foreground_app_reads_the_focused_activity() {
    let sh = ScriptedShell::default().answer("dumpsys window displays", FOCUS);
    let v = run(&sh, "screen.foreground_app", json!({})).await.unwrap();
    assert_eq!(v["package"], "jp.naver.line.android");
    assert_eq!(
        v["activity"],
        "jp.naver.line.android.activity.main.MainActivity"
    );
}

#[tokio::test]
async fn type_text_selects_the_broadcast_ime_for_unicode_and_restores_the_keyboard() {
    let text = "Grüße 👋";
    let b64 = "R3LDvMOfZSDwn5GL";
    let sh = ScriptedShell::default()
        .answer("ime list -s", &format!("{LATIN}\n{ADB_IME}\n"))
        .answer("settings get secure default_input_method", &format!("{LATIN}\n"))
        .answer(&format!("ime set {ADB_IME}"), "")
        .answer(
            &format!("am broadcast -a {ADB_IME_B64_ACTION} --es msg {b64}"),
            "Broadcasting: Intent { act=ADB_INPUT_B64 flg=0x400000 (has extras) }\nBroadcast completed: result=0\n",
        )
        .answer(&format!("ime set {LATIN}"), "");
    let v = run(&sh, "ui_control.type_text", json!({"text": text}))
        .await
        .unwrap();
    assert_eq!(v, json!({"typed": 7, "method": "ime_broadcast"}));
    assert_eq!(sh.asked().last().unwrap(), &format!("ime set {LATIN}"));

    let without = ScriptedShell::default().answer("ime list -s", &format!("{LATIN}\n"));
    let err = run(&without, "ui_control.type_text", json!({"text": text}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::UnsupportedAction);
    // The lock-state read (unanswered here: the action goes ahead), then
    // the keyboard list, and nothing typed.
    assert_eq!(without.asked(), ["dumpsys window displays", "ime list -s"]);
}

/// `docs/adb-commands.md` says what each action runs: every catalogue
/// action has a row in its command table (`service.action {params}`, or
/// `service.a / b` for several), and every row names a real action. A new
/// action cannot go undocumented; a renamed one cannot leave a stale row.
#[test]
fn the_command_table_documents_every_action() {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/adb-commands.md"
    ))
    .expect("docs/adb-commands.md");
    let table = doc
        .split("| service.action |")
        .nth(1)
        .and_then(|rest| rest.split("\n\n").next())
        .expect("the command table");
    let mut documented = std::collections::BTreeSet::new();
    for row in table.lines().skip(2) {
        let cell = row
            .trim_start_matches('|')
            .split(" | ")
            .next()
            .unwrap_or("");
        let names = cell.split('{').next().unwrap_or("").trim();
        let mut parts = names.split(" / ");
        let first = parts.next().unwrap_or("");
        let (service, action) = first
            .split_once('.')
            .unwrap_or_else(|| panic!("a row that names no action: {row}"));
        documented.insert(format!("{service}.{action}"));
        for more in parts {
            documented.insert(format!("{service}.{}", more.trim()));
        }
    }
    let catalogue: std::collections::BTreeSet<String> = Catalogue::get()
        .services()
        .iter()
        .flat_map(|s| {
            s.actions
                .iter()
                .map(move |a| format!("{}.{}", s.id, a.name))
        })
        .collect();
    let undocumented: Vec<_> = catalogue.difference(&documented).collect();
    let stale: Vec<_> = documented.difference(&catalogue).collect();
    assert!(
        undocumented.is_empty(),
        "no row in docs/adb-commands.md: {undocumented:?}"
    );
    assert!(stale.is_empty(), "rows for no catalogue action: {stale:?}");
}

/// Vibration: the vibrator manager's command on Android 12+, the single
/// vibrator's on older phones (chosen by the missing service); the torch,
/// speech and finding the phone need an app.
#[tokio::test]
async fn alerts_vibrate_over_adb_and_the_rest_needs_the_app() {
    let sh = ScriptedShell::default().answer("cmd vibrator_manager synced -f oneshot 700", "");
    let result = run(&sh, "alerts.vibrate", json!({"ms": 700}))
        .await
        .unwrap();
    assert_eq!(result, json!({"ms": 700}));
    assert_eq!(sh.asked(), ["cmd vibrator_manager synced -f oneshot 700"]);

    let sh = ScriptedShell::default()
        .fail(
            "cmd vibrator_manager synced -f oneshot 1000",
            "",
            "cmd: Can't find service: vibrator_manager\n",
            20,
        )
        .answer("cmd vibrator vibrate -f 1000", "");
    let result = run(&sh, "alerts.vibrate", json!({})).await.unwrap();
    assert_eq!(result, json!({"ms": 1000}));
    assert_eq!(
        sh.asked(),
        [
            "cmd vibrator_manager synced -f oneshot 1000",
            "cmd vibrator vibrate -f 1000"
        ]
    );

    for (action, params) in [
        ("alerts.torch", json!({"on": true})),
        ("alerts.speak", json!({"text": "hello"})),
        ("alerts.find_my_phone", json!({})),
    ] {
        let sh = ScriptedShell::default();
        let err = run(&sh, action, params).await.unwrap_err();
        assert_eq!(err.code(), ErrorCode::UnsupportedAction, "{action}: {err}");
        assert!(sh.asked().is_empty(), "{action}: nothing runs");
    }
}
