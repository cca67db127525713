//! `dumpsys SERVICE`: the service dumps the daemon parses.
//!
//! Each dump copies the structure of a real device's output (see the
//! fixtures under `android-bridge/fixtures/android/`) and fills in values
//! from the state. Where no fixture exists (scan results, cameras, recent
//! sensor events, a playing media session, bonded devices) the format follows
//! the AOSP code that prints it. An unknown service answers
//! `Can't find service: X` on stdout with exit status 0, like real `dumpsys`.

use crate::clock::{self, android_duration, java_float};
use crate::shell::CommandResult;
use crate::state::{BluetoothKind, Facing, PhoneState, Plugged, STREAMS};

use super::{fail, ok_text, short_component, split_component};

/// Services `dumpsys -l` and `cmd -l` list (the ones this phone implements).
pub(crate) const SERVICES: [&str; 15] = [
    "activity",
    "audio",
    "battery",
    "bluetooth_manager",
    "connectivity",
    "input",
    "location",
    "media.camera",
    "media_session",
    "package",
    "power",
    "sensorservice",
    "settings",
    "wifi",
    "window",
];

/// Services with a dump (`dumpsys` answers `Can't find service` for the
/// rest rather than pretending with an empty dump).
const DUMPABLE: [&str; 11] = [
    "activity",
    "audio",
    "battery",
    "bluetooth_manager",
    "location",
    "media.camera",
    "media_session",
    "power",
    "sensorservice",
    "wifi",
    "window",
];

/// `dumpsys [-l] [-t TIMEOUT] [SERVICE [ARGS…]]`.
pub(crate) fn run(st: &mut PhoneState, args: &[String]) -> CommandResult {
    let mut rest = args;
    while let Some(first) = rest.first() {
        match first.as_str() {
            "-t" | "-T" => rest = rest.get(2..).unwrap_or_default(),
            "--proto" | "--priority" => rest = &rest[1..],
            _ => break,
        }
    }
    let Some(service) = rest.first() else {
        let mut out = String::new();
        for name in DUMPABLE {
            wl!(
                out,
                "-------------------------------------------------------------------------------"
            );
            wl!(out, "DUMP OF SERVICE {name}:");
            out.push_str(&dump(st, name, &[]).unwrap_or_default());
        }
        return ok_text(out);
    };
    if service == "-l" {
        let mut out = String::from("Currently running services:\n");
        for name in SERVICES {
            wl!(out, "  {name}");
        }
        return ok_text(out);
    }
    let sub = &rest[1..];
    if service == "battery" && !sub.is_empty() {
        return battery_command(st, sub);
    }
    match dump(st, service, sub) {
        Some(text) => ok_text(text),
        None => ok_text(format!("Can't find service: {service}\n")),
    }
}

fn dump(st: &PhoneState, service: &str, args: &[String]) -> Option<String> {
    Some(match service {
        "battery" => battery(st),
        "wifi" => wifi(st),
        "bluetooth_manager" => bluetooth(st),
        "audio" => audio(st),
        "power" => power(st),
        "location" => location(st),
        "sensorservice" => sensors(st),
        "media_session" => media_session(st),
        "media.camera" => cameras(st),
        "window" => window(st, args),
        "activity" => activities(st),
        "notification" => super::content::dumpsys_notification(st, args),
        _ => return None,
    })
}

/// `dumpsys battery set|unplug|reset …` (the real debug interface).
fn battery_command(st: &mut PhoneState, args: &[String]) -> CommandResult {
    let usage = "Battery service (battery) commands:\n  help\n    Print this help text.\n  get [-f] [ac|usb|wireless|dock|status|level|temp|present|counter|invalid]\n  set [-f] [ac|usb|wireless|dock|status|level|temp|present|counter|invalid] <value>\n    Force a battery property value, freezing battery state.\n  unplug [-f]\n    Force battery unplugged, freezing battery state.\n  reset [-f]\n    Unfreeze battery state, returning to current hardware values.\n";
    let b = &mut st.battery;
    match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["unplug"] => {
            b.plugged = Plugged::None;
            b.updates_stopped = true;
        }
        // The real reset also returns to the hardware's values; the
        // emulated battery has no others.
        ["reset"] => b.updates_stopped = false,
        ["set", key, value] => {
            let Ok(n) = value.parse::<i64>() else {
                return fail("", &format!("Bad value: {value}\n"), 255);
            };
            let on = n != 0;
            match *key {
                "level" => b.level = n.clamp(0, i64::from(b.scale)) as u8,
                "temp" => b.temperature = n as i32,
                "present" => b.present = on,
                "ac" => b.plugged = if on { Plugged::Ac } else { Plugged::None },
                "usb" => b.plugged = if on { Plugged::Usb } else { Plugged::None },
                "wireless" => b.plugged = if on { Plugged::Wireless } else { Plugged::None },
                "status" => {
                    use crate::state::BatteryStatus as S;
                    b.status = match n {
                        2 => S::Charging,
                        3 => S::Discharging,
                        4 => S::NotCharging,
                        5 => S::Full,
                        _ => S::Unknown,
                    };
                }
                _ => return fail(&format!("Unknown set option: {key}\n"), "", 255),
            }
            b.updates_stopped = true;
        }
        _ => return fail(usage, "", 255),
    }
    ok_text("")
}

fn battery(st: &PhoneState) -> String {
    let b = &st.battery;
    let plugged = b.plugged != Plugged::None;
    let mut s = String::from("Current Battery Service state:\n");
    if b.updates_stopped {
        wl!(s, "  (UPDATES STOPPED -- use 'reset' to restart)");
    }
    wl!(s, "  AC powered: {}", b.plugged == Plugged::Ac);
    wl!(s, "  USB powered: {}", b.plugged == Plugged::Usb);
    wl!(s, "  Wireless powered: {}", b.plugged == Plugged::Wireless);
    wl!(s, "  Dock powered: false");
    wl!(
        s,
        "  Max charging current: {}",
        if plugged { 3_000_000 } else { 0 }
    );
    wl!(
        s,
        "  Max charging voltage: {}",
        if plugged { 5_000_000 } else { 0 }
    );
    wl!(
        s,
        "  Charge counter: {}",
        b.capacity_uah * u64::from(b.level) / u64::from(b.scale.max(1))
    );
    wl!(s, "  status: {}", b.status.code());
    wl!(s, "  health: {}", b.health.code());
    wl!(s, "  present: {}", b.present);
    wl!(s, "  level: {}", b.level);
    wl!(s, "  scale: {}", b.scale);
    wl!(s, "  voltage: {}", b.voltage);
    wl!(s, "  temperature: {}", b.temperature);
    wl!(s, "  technology: {}", b.technology);
    if st.props.sdk >= 35 {
        let charging_state = match b.status {
            crate::state::BatteryStatus::Charging => 1,
            crate::state::BatteryStatus::Full => 2,
            _ => 0,
        };
        wl!(s, "  Charging state: {charging_state}");
        wl!(s, "  Charging policy: 0");
        wl!(s, "  Capacity level: -1");
    }
    s
}

/// The RSSI column of `ScanResultUtil.dumpScanResults` for a two-chain radio.
fn rssi_column(rssi: i32) -> String {
    format!("{:5}({}:{:3}/{}:{:3})", rssi, 0, rssi - 1, 1, rssi - 6)
}

/// The AOSP scan-result table (`cmd wifi list-scan-results`, `dumpsys wifi`).
pub(crate) fn scan_table(st: &PhoneState) -> String {
    let now = clock::now_ms();
    let mut s = String::from(
        "    BSSID              Frequency      RSSI           Age(sec)     SSID                                 Flags\n",
    );
    for r in &st.wifi.scan_results {
        let seen = st.wifi.last_scan_epoch_ms.saturating_sub(r.age_ms);
        let age_ms = now.saturating_sub(seen);
        let age = if age_ms > 1_000_000 {
            ">1000.0".to_owned()
        } else {
            format!("{:.3}", age_ms as f64 / 1000.0)
        };
        let ssid: String = r.ssid.chars().take(32).collect();
        wl!(
            s,
            "  {:>17}  {:>9}  {:>18}   {:>7}    {:<32}  {}",
            r.bssid,
            r.frequency,
            rssi_column(r.rssi),
            age,
            ssid,
            r.flags
        );
    }
    s
}

fn signal_level(rssi: i32) -> u8 {
    match rssi {
        r if r >= -55 => 4,
        r if r >= -66 => 3,
        r if r >= -77 => 2,
        r if r >= -88 => 1,
        _ => 0,
    }
}

/// The `WifiInfo.toString()` line (`mWifiInfo …`, `cmd wifi status`).
pub(crate) fn wifi_info(st: &PhoneState) -> String {
    let w = &st.wifi;
    if w.enabled && w.connected {
        let flags = w
            .scan_results
            .iter()
            .find(|r| r.bssid == w.bssid)
            .map_or("[RSN-PSK-CCMP][ESS]", |r| r.flags.as_str());
        let security = if flags.contains("SAE") {
            4
        } else if flags.contains("PSK") {
            2
        } else {
            0
        };
        let standard = if w.frequency >= 5000 { "11ac" } else { "11n" };
        format!(
            "SSID: \"{}\", BSSID: {}, MAC: {}, IP: /{}, Security type: {security}, Supplicant state: COMPLETED, Wi-Fi standard: {standard}, RSSI: {}, Link speed: {}Mbps, Tx Link speed: {}Mbps, Max Supported Tx Link speed: {}Mbps, Rx Link speed: {}Mbps, Max Supported Rx Link speed: {}Mbps, Frequency: {}MHz, Net ID: 0, Metered hint: false, score: 60, isUsable: true, CarrierMerged: false, SubscriptionId: -1, IsPrimary: 1, Trusted: true, Restricted: false, Ephemeral: false, OEM paid: false, OEM private: false, OSU AP: false, FQDN: <none>, Provider friendly name: <none>, Requesting package name: <none>",
            w.ssid,
            w.bssid,
            w.mac,
            w.ip,
            w.rssi,
            w.link_speed,
            w.link_speed,
            w.link_speed * 2,
            w.link_speed * 9 / 10,
            w.link_speed * 2,
            w.frequency
        )
    } else {
        format!(
            "SSID: <unknown ssid>, BSSID: <none>, MAC: {}, IP: null, Security type: -1, Supplicant state: DISCONNECTED, Wi-Fi standard: unknown, RSSI: -127, Link speed: -1Mbps, Tx Link speed: -1Mbps, Max Supported Tx Link speed: -1Mbps, Rx Link speed: -1Mbps, Max Supported Rx Link speed: -1Mbps, Frequency: -1MHz, Net ID: -1, Metered hint: false, score: 0, isUsable: true, CarrierMerged: false, SubscriptionId: -1, IsPrimary: 0, Trusted: false, Restricted: false, Ephemeral: false, OEM paid: false, OEM private: false, OSU AP: false, FQDN: <none>, Provider friendly name: <none>, Requesting package name: <none>",
            w.mac
        )
    }
}

fn wifi(st: &PhoneState) -> String {
    let w = &st.wifi;
    let mut s = String::new();
    wl!(s, "Verbose logging is off");
    wl!(s, "mVerboseLoggingLevel 0");
    wl!(s, "Stay-awake conditions: 0");
    wl!(s, "mInIdleMode false");
    wl!(s, "mScanPending false");
    wl!(
        s,
        "SupportedFeatures: [WIFI_FEATURE_INFRA, WIFI_FEATURE_INFRA_5G, WIFI_FEATURE_P2P, WIFI_FEATURE_MOBILE_HOTSPOT, WIFI_FEATURE_WPA3_SAE, WIFI_FEATURE_OWE, WIFI_FEATURE_AP_RAND_MAC, WIFI_FEATURE_MBO, WIFI_FEATURE_WPA_PERSONAL]"
    );
    wl!(s, "SettingsStore:");
    let wifi_state = match (w.enabled, st.airplane_mode) {
        (true, false) => 1,
        (false, false) => 0,
        (true, true) => 2,
        (false, true) => 3,
    };
    wl!(s, "WifiState {wifi_state}");
    wl!(s, "AirplaneModeOn {}", st.airplane_mode);
    wl!(s, "ScanAlwaysAvailable false");
    wl!(s, "WifiScoringState true");
    wl!(s, "WifiPasspointState true");
    wl!(s, "WifiMultiInternetMode 0");
    wl!(s, "WifiStateApm false");
    wl!(s, "WifiStateBt false");
    wl!(s, "WifiStateUser 0");
    wl!(s, "AirplaneModeEnhancementEnabled true");
    wl!(s, "SatelliteModeOn false");
    wl!(s, "Dump of WifiActiveModeWarden");
    let mode = if w.enabled {
        "EnabledState"
    } else {
        "DisabledState"
    };
    wl!(s, "Current wifi mode: {mode}");
    wl!(
        s,
        "Wi-Fi is {}",
        if w.enabled { "enabled" } else { "disabled" }
    );
    wl!(s, "NumActiveModeManagers: {}", u8::from(w.enabled));
    wl!(s, "mIsMultiplePrimaryBugreportTaken: false");
    wl!(s, "WifiController:");
    wl!(s, " total records=0");
    wl!(s, " curState={mode}");
    let connected = w.enabled && w.connected;
    if w.enabled {
        wl!(s, "Dump of ClientModeManager id=134341");
        wl!(s, "current StateMachine mode: ConnectModeState");
        wl!(s, "mRole: ROLE_CLIENT_PRIMARY");
        wl!(s, "mPreviousRole: null");
        wl!(s, "mTargetRoleChangeInfo: null");
        wl!(s, "mClientInterfaceName: wlan0");
        wl!(s, "mIfaceIsUp: true");
        wl!(s, "mSecondaryInternet: false");
        wl!(s, "mIsDbs: false");
        wl!(s, "Dump of ClientModeImpl id=134435");
        wl!(s, "WifiClientModeImpl:");
        wl!(s, " total records=0");
        wl!(
            s,
            "curState={}",
            if connected {
                "L3ConnectedState"
            } else {
                "DisconnectedState"
            }
        );
    } else {
        wl!(s, "Dump of ActiveModeWarden.Graveyard");
        wl!(s, "Stopped ClientModeManagers: 0 total");
        wl!(s);
        wl!(s, "No active ClientModeImpl instance");
        wl!(s, "Dump of ConcreteClientModeManager.Graveyard");
        wl!(s, "Stopped ClientModeImpls: 1 total");
        wl!(s, "Dump of ClientModeImpl id=134435");
        wl!(s, "WifiClientModeImpl:");
        wl!(s, " total records=0");
        wl!(s, "curState=DisconnectedState");
    }
    wl!(s, "mAuthFailureInSupplicantBroadcast false");
    wl!(s, "mAuthFailureReason 0");
    wl!(s);
    wl!(s, "mIsRestrictedNetworkDebug false");
    if connected {
        wl!(
            s,
            "mLinkProperties {{InterfaceName: wlan0 LinkAddresses: [ {}/{} ] DnsAddresses: [ /{} ] Domains: lan MTU: 1500 Routes: [ 0.0.0.0/0 -> {} wlan0 mtu 1500 ]}}",
            w.ip,
            w.prefix_len,
            w.gateway,
            w.gateway
        );
    } else {
        wl!(
            s,
            "mLinkProperties {{LinkAddresses: [ ] DnsAddresses: [ ] Domains: null MTU: 0 Routes: [ ]}}"
        );
    }
    wl!(s, "mWifiInfo {}", wifi_info(st));
    wl!(
        s,
        "mLastSignalLevel {}",
        if connected {
            i32::from(signal_level(w.rssi))
        } else {
            -1
        }
    );
    wl!(
        s,
        "mLastBssid {}",
        if connected { w.bssid.as_str() } else { "null" }
    );
    wl!(s, "mLastNetworkId {}", if connected { 0 } else { -1 });
    wl!(s);
    if w.enabled && !w.scan_results.is_empty() {
        wl!(s, "Latest scan results:");
        s.push_str(&scan_table(st));
    }
    s
}

/// `HH:MM:SS.mmm` for a duration (`time since enabled`).
fn hms_duration(ms: u64) -> String {
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        ms / 3_600_000,
        (ms / 60_000) % 60,
        (ms / 1000) % 60,
        ms % 1000
    )
}

fn bluetooth(st: &PhoneState) -> String {
    let b = &st.bluetooth;
    let now = clock::now_ms();
    let mut s = String::from("Bluetooth Status\n");
    wl!(s, "  enabled: {}", b.enabled);
    wl!(s, "  state: {}", if b.enabled { "ON" } else { "OFF" });
    wl!(s, "  address: {}", b.address);
    wl!(s, "  name: {}", b.name);
    if b.enabled {
        wl!(
            s,
            "  time since enabled: {}",
            hms_duration(now.saturating_sub(b.enabled_since_epoch_ms))
        );
    }
    wl!(s);
    wl!(s, "Enable log:");
    let stamp = |ms: u64| clock::log_stamp(ms).chars().take(14).collect::<String>();
    wl!(
        s,
        "  {}  Enabled  due to SYSTEM_BOOT by android",
        stamp(st.boot_epoch_ms + 9_000)
    );
    if b.enabled_since_epoch_ms > st.boot_epoch_ms + 9_000 {
        let state = if b.enabled { "Enabled" } else { "Disabled" };
        wl!(
            s,
            "  {} {state:>8}  due to APPLICATION_REQUEST by com.android.shell",
            stamp(b.enabled_since_epoch_ms)
        );
    }
    wl!(s);
    wl!(s, "Bluetooth crashed 0 times");
    wl!(s);
    wl!(s, "0 BLE apps registered");
    wl!(s);
    wl!(s, "BluetoothManagerService:");
    wl!(s, "  mEnable:{}", b.enabled);
    wl!(s, "  mQuietEnable:false");
    wl!(s, "  mEnableExternal:{}", b.enabled);
    wl!(s, "  mQuietEnableExternal:false");
    wl!(s);
    if !b.enabled {
        wl!(s, "Bluetooth Service not connected");
        return s;
    }
    wl!(s);
    wl!(s, "AdapterProperties");
    wl!(s, "  Name: {}", b.name);
    wl!(s, "  Address: {}", b.address);
    wl!(s, "  BluetoothClass: 5a020c");
    wl!(s, "  ScanMode: SCAN_MODE_CONNECTABLE");
    wl!(s, "  ConnectionState: STATE_DISCONNECTED");
    wl!(s, "  State: ON");
    wl!(s, "  MaxConnectedAudioDevices: 5");
    wl!(s, "  A2dpOffloadEnabled: false");
    wl!(s, "  Discovering: false");
    wl!(s, "  DiscoveryEndMs: 0");
    wl!(s, "  Bonded devices:");
    for d in &b.bonded {
        let kind = match d.kind {
            BluetoothKind::Classic => " BR/EDR ",
            BluetoothKind::Le => "  LE  ",
            BluetoothKind::Dual => " DUAL ",
        };
        wl!(s, "    {} [{kind}] {}", d.address, d.name);
    }
    wl!(s);
    wl!(s, "Enabled Profile Services:");
    for p in [
        "A2dpService",
        "AvrcpTargetService",
        "BatteryService",
        "HeadsetService",
        "HidHostService",
        "GattService",
        "PanService",
    ] {
        wl!(s, "  {p}");
    }
    wl!(s);
    wl!(s, "AdapterState:");
    wl!(s, " total records=0");
    wl!(s, "curState=OnState");
    s
}

fn audio(st: &PhoneState) -> String {
    let a = &st.audio;
    let now = clock::civil(clock::now_ms());
    let mut s = String::new();
    wl!(
        s,
        "MediaFocusControl dump time: {:02}:{:02}:{:02}",
        now.hour,
        now.minute,
        now.second
    );
    wl!(s);
    wl!(s, "Audio Focus stack entries (last is top of stack):");
    wl!(s);
    wl!(s, "No external focus policy");
    wl!(s);
    wl!(s, "Stream volumes (device: index)");
    for (n, name) in STREAMS {
        let Some(v) = a.volumes.get(n) else { continue };
        wl!(s, "- {name}:");
        wl!(s, "   Muted: {}", v.muted);
        wl!(s, "   Muted Internally: {}", v.muted);
        wl!(s, "   Min: {}", v.min);
        wl!(s, "   Max: {}", v.max);
        wl!(s, "   streamVolume:{}", v.index);
        wl!(
            s,
            "   Current: 2 (speaker): {}, 40000000 (default): {}",
            v.index,
            v.index
        );
        wl!(s, "   Devices: speaker(2)");
        wl!(s, "   Volume Group: AUDIO_{name}");
        wl!(s);
    }
    wl!(s, "- mute affected streams = 0x2f");
    wl!(s, "- user mutable streams = 0x6f");
    wl!(s);
    wl!(s, "Ringer mode: ");
    wl!(s, "- mode (internal) = {}", a.ringer_mode.name());
    wl!(s, "- mode (external) = {}", a.ringer_mode.name());
    wl!(s, "- zen mode:OFF");
    wl!(
        s,
        "- ringer mode affected streams = 0x1a6 (STREAM_SYSTEM STREAM_RING STREAM_NOTIFICATION STREAM_SYSTEM_ENFORCED STREAM_DTMF)"
    );
    let muted = if a.ringer_mode == crate::state::RingerMode::Normal {
        "0x0"
    } else {
        "0x24"
    };
    wl!(s, "- ringer mode muted streams = {muted}");
    wl!(s, "- delegate = ZenModeHelper");
    s
}

fn power(st: &PhoneState) -> String {
    let d = &st.display;
    let up = st.uptime_ms();
    let awake = d.screen_on;
    let mut s = String::new();
    wl!(s, "POWER MANAGER (dumpsys power)");
    wl!(s);
    wl!(s, "Power Manager State:");
    wl!(s, "  Settings power_manager_constants:");
    wl!(s, "    no_cached_wake_locks=true");
    wl!(s, "  mDirty=0x0");
    wl!(
        s,
        "  mWakefulness={}",
        if awake { "Awake" } else { "Asleep" }
    );
    wl!(s, "  mWakefulnessChanging=false");
    wl!(s, "  mIsPowered={}", st.battery.plugged != Plugged::None);
    wl!(s, "  mPlugType={}", st.battery.plugged.plug_type());
    wl!(s, "  mBatteryLevel={}", st.battery.level);
    wl!(s, "  mDreamsBatteryLevelDrain=0");
    wl!(s, "  mDockState=0");
    wl!(s, "  mStayOn=false");
    wl!(s, "  mProximityPositive=false");
    wl!(s, "  mBootCompleted=true");
    wl!(s, "  mSystemReady=true");
    wl!(s, "  mHalAutoSuspendModeEnabled=false");
    wl!(s, "  mHalInteractiveModeEnabled={awake}");
    wl!(s, "  mWakeLockSummary=0x{}", if awake { 1 } else { 0 });
    wl!(s, "  mNotifyLongScheduled=(none)");
    wl!(s, "  mRequestWaitForNegativeProximity=false");
    wl!(s, "  mSandmanScheduled=false");
    wl!(s, "  mBatteryLevelLow={}", st.battery.level <= 15);
    wl!(s, "  mLightDeviceIdleMode=false");
    wl!(s, "  mDeviceIdleMode=false");
    wl!(s, "  mDeviceIdleWhitelist=[2000, 10201]");
    wl!(s, "  mDeviceIdleTempWhitelist=[]");
    wl!(s, "  mLowPowerStandbyActive=false");
    wl!(
        s,
        "  mLastWakeTime={} ({} ms ago)",
        up.saturating_sub(60_000),
        60_000
    );
    wl!(s, "  mLastSleepTime=0 ({up} ms ago)");
    wl!(s, "  mLastSleepReason=application");
    wl!(s, "  mScreenBrightnessBoostInProgress=false");
    wl!(s, "  mHoldingWakeLockSuspendBlocker=false");
    wl!(s, "  mHoldingDisplaySuspendBlocker={awake}");
    wl!(s);
    wl!(s, "Settings and Configuration:");
    wl!(s, "  mDecoupleHalAutoSuspendModeFromDisplayConfig=false");
    wl!(s, "  mDecoupleHalInteractiveModeFromDisplayConfig=true");
    wl!(s, "  mTheaterModeEnabled=false");
    wl!(s, "  mDreamsSupportedConfig=true");
    wl!(s, "  mDreamsEnabledSetting=true");
    wl!(s, "  mDozeAfterScreenOff=true");
    wl!(s, "  mStayOnWhilePluggedInSetting=0");
    wl!(s, "  mScreenBrightnessMinimum=0.0");
    wl!(s, "  mScreenBrightnessMaximum=1.0");
    wl!(
        s,
        "  mScreenBrightnessDefault={}",
        java_float(f64::from(d.brightness) / 255.0)
    );
    wl!(s, "  mDoubleTapWakeEnabled=false");
    wl!(s, "  mForegroundProfile=0");
    wl!(s, "  mUserId=0");
    wl!(s);
    wl!(s, "Attentive timeout: -1 ms");
    wl!(s, "Sleep timeout: -1 ms");
    wl!(s, "Screen off timeout: {} ms", d.screen_off_timeout_ms);
    wl!(
        s,
        "Screen dim duration: {} ms",
        (d.screen_off_timeout_ms / 5).min(7000)
    );
    wl!(s);
    wl!(s, "UID states (changing=false changed=false):");
    wl!(s, "  UID 1000:   ACTIVE  count=0 state=0");
    wl!(s);
    wl!(
        s,
        "Display Power: state={}",
        if awake { "ON" } else { "OFF" }
    );
    wl!(s);
    wl!(s, "Battery saver state machine:");
    wl!(s, "  Enabled={}", st.power_save);
    wl!(s, "  full={}", st.power_save);
    wl!(s, "  adaptive=false");
    wl!(s, "  mState={}", if st.power_save { "ON" } else { "OFF" });
    wl!(s, "  mBootCompleted=true");
    wl!(s, "  mSettingsLoaded=true");
    wl!(s, "  mBatteryStatusSet=true");
    wl!(s, "  mIsPowered={}", st.battery.plugged != Plugged::None);
    wl!(s, "  mBatteryLevel={}", st.battery.level);
    wl!(s, "  mIsBatteryLevelLow={}", st.battery.level <= 15);
    wl!(s, "  mSettingBatterySaverEnabled={}", st.power_save);
    s
}

/// `Location.toString()` for a provider, or `null` when it has no fix.
fn location_string(st: &PhoneState, provider: &str) -> String {
    let l = &st.location;
    let has = match provider {
        "fused" => true,
        "passive" => true,
        p => p == l.provider,
    };
    if !has {
        return "null".to_owned();
    }
    let name = if provider == "passive" {
        l.provider.as_str()
    } else {
        provider
    };
    let mut s = format!(
        "Location[{name} {:.6},{:.6} hAcc={} et={} alt={} vAcc=0.5",
        l.latitude,
        l.longitude,
        java_float(l.accuracy),
        android_duration(l.fix_elapsed_ms as i64),
        java_float(l.altitude)
    );
    s.push_str(&format!(" vel={} sAcc=0.5", java_float(l.speed)));
    if name == "gps" {
        s.push_str(&format!(
            " bear={} bAcc=30.0 {{Bundle[{{satellites=9, maxCn0=38, meanCn0=31}}]}}",
            java_float(l.bearing)
        ));
    } else if name != "network" {
        s.push_str(&format!(" bear={}", java_float(l.bearing)));
    }
    s.push(']');
    s
}

fn location(st: &PhoneState) -> String {
    let on = st.location.enabled;
    let mut s = String::from("Location Manager State:\n");
    wl!(s, "  User Info:");
    wl!(s, "    current users: u[0]");
    wl!(s, "  Location Settings:");
    wl!(s, "    Location Setting: {on}");
    wl!(s, "    Location Allow/Deny Packages:");
    wl!(s, "  Location Providers:");
    for (provider, identity, props) in [
        (
            "passive",
            "1000/android[LocationService]",
            "ProviderProperties[powerUsage=Low, accuracy=Fine]",
        ),
        (
            "network",
            "10146/com.google.android.gms[network_location_provider]",
            "ProviderProperties[powerUsage=Medium, accuracy=Fine, requires=network, supports=[altitude]]",
        ),
        (
            "fused",
            "10146/com.google.android.gms[fused_location_provider]",
            "ProviderProperties[powerUsage=Low, accuracy=Fine, supports=[bearing,speed,altitude]]",
        ),
        (
            "gps",
            "1000/android[GnssService]",
            "ProviderProperties[powerUsage=High, accuracy=Fine, requires=satellite, supports=[bearing,speed,altitude]]",
        ),
    ] {
        wl!(s, "    {provider} provider:");
        wl!(
            s,
            "      service: {}",
            if provider == "passive" {
                "registered"
            } else {
                "ProviderRequest[OFF]"
            }
        );
        wl!(s, "      last location={}", location_string(st, provider));
        wl!(s, "      enabled={on}");
        wl!(s, "      allowed={on}");
        wl!(s, "      identity={identity}");
        wl!(s, "      properties={props}");
    }
    wl!(s, "  Historical Aggregate Location Provider Data:");
    wl!(s, "  GNSS Manager:");
    wl!(s, "    GNSS Hardware Model Name: {} GNSS", st.props.model);
    wl!(s, "  Geofence Manager:");
    wl!(s, "    service: unregistered");
    wl!(s, "  Event Log:");
    let fix_at = st.boot_epoch_ms + st.location.fix_elapsed_ms;
    wl!(
        s,
        "    {}: {} provider received location[1]",
        clock::log_stamp(fix_at),
        st.location.provider
    );
    s
}

/// Sensors with recent events: (handle, name, values, continuous).
fn sensor_events(st: &PhoneState) -> Vec<(u32, &'static str, Vec<f64>, bool)> {
    let x = &st.sensors;
    vec![
        (
            0,
            "Goldfish 3-axis Accelerometer",
            x.accelerometer.to_vec(),
            true,
        ),
        (1, "Goldfish 3-axis Gyroscope", x.gyroscope.to_vec(), true),
        (
            4,
            "Goldfish Ambient Temperature sensor",
            vec![x.ambient_temperature],
            false,
        ),
        (5, "Goldfish Proximity sensor", vec![x.proximity], false),
        (6, "Goldfish Light sensor", vec![x.light], false),
        (7, "Goldfish Pressure sensor", vec![x.pressure], true),
        (8, "Goldfish Humidity sensor", vec![x.humidity], false),
    ]
}

const SENSOR_LIST: &str = "0000000000) Goldfish 3-axis Accelerometer | The Android Open Source Project | ver: 1 | type: android.sensor.accelerometer(1) | perm: n/a | flags: 0x00000050
\tcontinuous | minRate=2.00Hz | maxRate=100.00Hz | no batching | non-wakeUp | data-injection, has-additional-info, 
0x00000001) Goldfish 3-axis Gyroscope | The Android Open Source Project | ver: 1 | type: android.sensor.gyroscope(4) | perm: n/a | flags: 0x00000050
\tcontinuous | minRate=2.00Hz | maxRate=100.00Hz | no batching | non-wakeUp | data-injection, has-additional-info, 
0x00000002) Goldfish 3-axis Magnetic field sensor | The Android Open Source Project | ver: 1 | type: android.sensor.magnetic_field(2) | perm: n/a | flags: 0x00000010
\tcontinuous | minRate=2.00Hz | maxRate=100.00Hz | no batching | non-wakeUp | data-injection, 
0x00000004) Goldfish Ambient Temperature sensor | The Android Open Source Project | ver: 1 | type: android.sensor.ambient_temperature(13) | perm: n/a | flags: 0x00000012
\ton-change | maxDelay=0us | minDelay=0us | no batching | non-wakeUp | data-injection, 
0x00000005) Goldfish Proximity sensor | The Android Open Source Project | ver: 1 | type: android.sensor.proximity(8) | perm: n/a | flags: 0x00000013
\ton-change | maxDelay=0us | minDelay=0us | no batching | wakeUp | data-injection, 
0x00000006) Goldfish Light sensor     | The Android Open Source Project | ver: 1 | type: android.sensor.light(5) | perm: n/a | flags: 0x00000012
\ton-change | maxDelay=0us | minDelay=0us | no batching | non-wakeUp | data-injection, 
0x00000007) Goldfish Pressure sensor  | The Android Open Source Project | ver: 1 | type: android.sensor.pressure(6) | perm: n/a | flags: 0x00000010
\tcontinuous | minRate=2.00Hz | maxRate=100.00Hz | no batching | non-wakeUp | data-injection, 
0x00000008) Goldfish Humidity sensor  | The Android Open Source Project | ver: 1 | type: android.sensor.relative_humidity(12) | perm: n/a | flags: 0x00000012
\ton-change | maxDelay=0us | minDelay=0us | no batching | non-wakeUp | data-injection, 
0x5f676172) Game Rotation Vector Sensor | AOSP            | ver: 3 | type: android.sensor.game_rotation_vector(15) | perm: n/a | flags: 0x00000000
\tcontinuous | maxDelay=0us | maxRate=100.00Hz | no batching | non-wakeUp | 
0x5f677276) Gravity Sensor            | AOSP            | ver: 3 | type: android.sensor.gravity(9) | perm: n/a | flags: 0x00000000
\tcontinuous | maxDelay=0us | maxRate=100.00Hz | no batching | non-wakeUp | 
";

fn sensors(st: &PhoneState) -> String {
    let now = clock::now_ms();
    let up = st.uptime_ms();
    let mut s = String::new();
    wl!(s, "Captured at: {}", clock::hms_millis(now));
    wl!(s, "Sensor Device:");
    wl!(s, "Total 8 h/w sensors, 8 running 0 disabled clients:");
    wl!(
        s,
        "0x00000000) active-count = 1; sampling_period(ms) = {{66.7}}, selected = 66.67 ms; batching_period(ms) = {{100.0}}, selected = 100.00 ms"
    );
    wl!(s, "Sensor List:");
    s.push_str(SENSOR_LIST);
    wl!(s, "Fusion States:");
    wl!(
        s,
        "9-axis fusion disabled (0 clients), gyro-rate= 200.00Hz, q=< 0, 0, 0, 0 > (0), b=< 0, 0, 0 >"
    );
    wl!(
        s,
        "game fusion(no mag) disabled (0 clients), gyro-rate= 200.00Hz, q=< 0, 0, 0, 0 > (0), b=< 0, 0, 0 >"
    );
    wl!(
        s,
        "geomag fusion (no gyro) disabled (0 clients), gyro-rate= 200.00Hz, q=< 0, 0, 0, 0 > (0), b=< 0, 0, 0 >"
    );
    wl!(s, "Recent Sensor events:");
    for (_, name, values, continuous) in sensor_events(st) {
        let count = if continuous { 10u64 } else { 1 };
        wl!(s, "{name}: last {count} events");
        for j in 1..=count {
            // Newest first, 66.7 ms apart, the newest 20 ms ago.
            let back_ms = 20 + (j - 1) * 66;
            let ts = up.saturating_sub(back_ms) as f64 / 1000.0;
            let wall = clock::hms_millis(now.saturating_sub(back_ms));
            s.push_str(&format!("\t{j:2} (ts={ts:.9}, wall={wall}) "));
            for v in &values {
                s.push_str(&format!("{v:.2}, "));
            }
            s.push('\n');
        }
    }
    wl!(s, "Active sensors:");
    wl!(
        s,
        "Goldfish 3-axis Accelerometer (handle=0x00000000, connections=1)"
    );
    wl!(s, "Socket Buffer size = 984 events");
    wl!(s, "WakeLock Status: not held ");
    wl!(s, "Mode : NORMAL");
    wl!(s, "Sensor Privacy: disabled");
    s
}

fn media_session(st: &PhoneState) -> String {
    let mut s = String::from("MEDIA SESSION SERVICE (dumpsys media_session)\n\n");
    wl!(s, "1 sessions listeners.");
    wl!(s, "Global priority session is null");
    wl!(s, "User Records:");
    wl!(s, "Record for full_user=0");
    wl!(s, "  Volume key long-press listener: null");
    wl!(s, "  Volume key long-press listener package: ");
    wl!(s, "  Media key listener: null");
    wl!(s, "  Media key listener package: ");
    wl!(
        s,
        "  OnMediaKeyEventDispatchedListener: added 0 listener(s)"
    );
    wl!(
        s,
        "  OnMediaKeyEventSessionChangedListener: added 0 listener(s)"
    );
    match &st.media {
        None => {
            wl!(s, "  Last MediaButtonReceiver: null");
            wl!(s, "  Media button session is null");
            wl!(s, "  Sessions Stack - have 0 sessions:");
            wl!(s, "Audio playback (lastly played comes first)");
        }
        Some(m) => {
            let uid = st.package(&m.package).map_or(10_999, |p| p.uid);
            let tag = format!(
                "{} media session",
                m.package.rsplit('.').next().unwrap_or("app")
            );
            let id = format!("{}/{tag} (userId=0)", m.package);
            wl!(
                s,
                "  Last MediaButtonReceiver: MBR {{ComponentInfo{{{}/.MediaButtonReceiver}}, type=1}}",
                m.package
            );
            wl!(s, "  Media button session is {id}");
            wl!(s, "  Sessions Stack - have 1 sessions:");
            wl!(s, "    {tag} {id}");
            wl!(
                s,
                "      ownerPid={}, ownerUid={uid}, userId=0",
                4000 + uid % 1000
            );
            wl!(s, "      package={}", m.package);
            wl!(s, "      launchIntent=null");
            wl!(
                s,
                "      mediaButtonReceiver=MBR {{ComponentInfo{{{}/.MediaButtonReceiver}}, type=1}}",
                m.package
            );
            wl!(s, "      active=true");
            wl!(s, "      flags=3");
            wl!(s, "      rating type=0");
            wl!(s, "      controllers: 2");
            let now_up = st.uptime_ms();
            wl!(
                s,
                "      state=PlaybackState {{state={}({}), position={}, buffered position=0, speed={}, updated={now_up}, actions=3669839, custom actions=[], active item id=-1, error=null}}",
                m.state.name(),
                m.state.code(),
                m.position_ms,
                if m.state == crate::state::PlaybackState::Playing {
                    "1.0"
                } else {
                    "0.0"
                }
            );
            wl!(
                s,
                "      audioAttrs=AudioAttributes: usage=USAGE_MEDIA content=CONTENT_TYPE_MUSIC flags=0x800 tags= bundle=null"
            );
            wl!(
                s,
                "      volumeType=LOCAL, controlType=ABSOLUTE, max=0, current=0, volumeControlId=null"
            );
            wl!(
                s,
                "      metadata: size=4, description={}, {}, null",
                m.title,
                m.artist
            );
            wl!(s, "      queueTitle=null, size={}", m.queue.len());
            wl!(s, "Audio playback (lastly played comes first)");
            if m.state == crate::state::PlaybackState::Playing {
                wl!(s, "  uid={uid} packages={}", m.package);
            }
        }
    }
    wl!(s, "Media session config:");
    wl!(
        s,
        "  media_session_calback_fgs_allowlist_duration_ms: [cur: 10000, def: 10000]"
    );
    s
}

fn cameras(st: &PhoneState) -> String {
    let n = st.cameras.len();
    let mut s = String::from("== Service global info: ==\n\n");
    wl!(s, "Number of camera devices: {n}");
    wl!(s, "Number of normal camera devices: {n}");
    wl!(s, "Number of public camera devices visible to API1: {n}");
    for (i, c) in st.cameras.iter().enumerate() {
        wl!(s, "    Device {i} maps to \"{}\"", c.id);
    }
    wl!(s, "Active Camera Clients:");
    wl!(s, "[]");
    wl!(s, "Allowed user IDs: 0");
    wl!(s);
    wl!(s, "== Camera service events log (most recent at top): ==");
    wl!(
        s,
        "  {} : USER_SWITCH previous allowed user IDs: <None>, current allowed user IDs: 0",
        clock::log_stamp(st.boot_epoch_ms + 12_000)
            .chars()
            .take(14)
            .collect::<String>()
    );
    for c in &st.cameras {
        wl!(s);
        wl!(s, "== Camera device {} dynamic info: ==", c.id);
        wl!(s, "  Device {} is closed, no client instance", c.id);
    }
    wl!(s);
    wl!(
        s,
        "== Camera Provider HAL internal/0 (v2.7, remote) static info: {n} devices: =="
    );
    for c in &st.cameras {
        let (facing, lens) = match c.facing {
            Facing::Back => ("Back", 1),
            Facing::Front => ("Front", 0),
            Facing::External => ("External", 2),
        };
        wl!(
            s,
            "== Camera HAL device device@3.7/internal/{} (v3.7) static information: ==",
            c.id
        );
        wl!(s, "  Resource cost: 100");
        wl!(s, "  Conflicting devices: None");
        wl!(s, "  API1 info:");
        wl!(s, "    Has a flash unit: {}", c.has_flash);
        wl!(s, "    Facing: {facing}");
        wl!(s, "    Orientation: {}", c.orientation);
        wl!(s, "  API2 camera characteristics:");
        wl!(s, "      android.lens.facing (80005): byte[1]");
        wl!(s, "        [{lens} ]");
        wl!(s, "      android.sensor.orientation (e000e): int32[1]");
        wl!(s, "        [{} ]", c.orientation);
        wl!(s, "      android.flash.info.available (50000): byte[1]");
        wl!(s, "        [{} ]", u8::from(c.has_flash));
    }
    s
}

/// `dumpsys activity [activities]`: the resumed activity, as in the
/// Android 17 fixture's head and resumed sections.
fn activities(st: &PhoneState) -> String {
    let fg = &st.foreground;
    let (pkg, full) = split_component(fg).unwrap_or_else(|| (fg.clone(), fg.clone()));
    let short = short_component(&pkg, &full);
    let home = st.foreground == PhoneState::HOME;
    let uid = st.package(&pkg).map_or(10_000, |p| p.uid);
    let record = format!("ActivityRecord{{165322630 u0 {short} t12}}");
    let mut s = String::from("ACTIVITY MANAGER ACTIVITIES (dumpsys activity activities)\n");
    wl!(s, "Display #0 (activities from top to bottom):");
    if home {
        wl!(
            s,
            "  * Task{{14a2074 #1 type=home U=0 visible=true visibleRequested=true mode=fullscreen translucent=false sz=1}}"
        );
    } else {
        wl!(
            s,
            "  * Task{{14a2074 #12 type=standard A={uid}:{pkg} U=0 visible=true visibleRequested=true mode=fullscreen translucent=false sz=1}}"
        );
    }
    wl!(s, "    isSleeping={}", !st.display.screen_on);
    wl!(s, "    topResumedActivity={record}");
    wl!(s, "    * Hist  #0: {record}");
    wl!(s);
    wl!(
        s,
        "  Resumed activities in task display areas (from top to bottom):"
    );
    wl!(s, "    Resumed: {record}");
    wl!(s);
    wl!(s, "  ResumedActivity: {record}");
    s
}

const ROTATIONS: [&str; 4] = ["ROTATION_0", "ROTATION_90", "ROTATION_180", "ROTATION_270"];

fn window(st: &PhoneState, args: &[String]) -> String {
    let d = &st.display;
    let rotation = usize::from(d.rotation.min(3));
    let landscape = rotation % 2 == 1;
    let (w, h) = if landscape {
        (d.height, d.width)
    } else {
        (d.width, d.height)
    };
    let (wdp, hdp) = (w * 160 / d.density.max(1), h * 160 / d.density.max(1));
    let fg = &st.foreground;
    let (pkg, full) = split_component(fg).unwrap_or_else(|| (fg.clone(), fg.clone()));
    let short = short_component(&pkg, &full);
    let mut s = String::new();
    let what = args.first().map_or("displays", String::as_str);
    if what == "windows" {
        wl!(s, "WINDOW MANAGER WINDOWS (dumpsys window windows)");
        wl!(s, "  Window #0 Window{{4879fe9 u0 {pkg}/{full}}}:");
        wl!(
            s,
            "    mDisplayId=0 rootTaskId=12 mSession=Session{{40887aa 4242:u0a10150}}"
        );
        wl!(s);
    } else {
        wl!(
            s,
            "WINDOW MANAGER DISPLAY CONTENTS (dumpsys window displays)"
        );
    }
    wl!(s, "  Display: mDisplayId=0 (organized)");
    wl!(
        s,
        "    init={}x{} {}dpi mMinSizeOfResizeableTaskDp=220 cur={w}x{h} app={w}x{h} rng={}x{}-{}x{}",
        d.width,
        d.height,
        d.density,
        d.width.min(d.height),
        d.width.min(d.height),
        d.width.max(d.height),
        d.width.max(d.height)
    );
    wl!(s, "    deferred=false mLayoutNeeded=false");
    wl!(
        s,
        "  overrideConfig={{1.0 310mcc260mnc [en_US] ldltr sw{}dp w{wdp}dp h{hdp}dp {}dpi nrml long {} finger -keyb/v/h -nav/h winConfig={{ mBounds=Rect(0, 0 - {w}, {h}) mAppBounds=Rect(0, 0 - {w}, {h}) mMaxBounds=Rect(0, 0 - {w}, {h}) mDisplayRotation={} mWindowingMode=fullscreen mActivityType=undefined mAlwaysOnTop=undefined mRotation={}}} s.35 fontWeightAdjustment=0}}",
        wdp.min(hdp),
        d.density,
        if landscape { "land" } else { "port" },
        ROTATIONS[rotation],
        ROTATIONS[rotation]
    );
    wl!(
        s,
        "  mHasSetIgnoreOrientationRequest=false ignoreOrientationRequest=false"
    );
    if d.screen_on {
        wl!(s, "  mSleeping=false mAllSleepTokens=[]");
    } else {
        wl!(s, "  mSleeping=true mAllSleepTokens=[Display-off]");
    }
    wl!(s, "  mLayoutSeq=105");
    wl!(s, "  mCurrentFocus=Window{{4879fe9 u0 {pkg}/{full}}}");
    wl!(
        s,
        "  mFocusedApp=ActivityRecord{{165322630 u0 {short} t12}}"
    );
    wl!(s, "  mFixedRotationLaunchingApp=null");
    wl!(s);
    // The display policy, as Android 10+ prints it in this dump (the
    // fields real phones show: see the bridge's DisplayPolicy fixture).
    let (awake, locked) = (d.screen_on, st.ui.locked);
    wl!(s, "  DisplayPolicy");
    wl!(
        s,
        "    mCarDockEnablesAccelerometer=true mDeskDockEnablesAccelerometer=true"
    );
    wl!(
        s,
        "    mDockMode=EXTRA_DOCK_STATE_UNDOCKED mLidState=LID_ABSENT"
    );
    wl!(
        s,
        "    mAwake={awake} mScreenOnEarly={awake} mScreenOnFully={awake}"
    );
    wl!(
        s,
        "    mKeyguardDrawComplete=true mWindowManagerDrawComplete=true"
    );
    wl!(s, "    mHdmiPlugged=false");
    wl!(s, "    mLastBehavior=DEFAULT");
    wl!(
        s,
        "    mShowingDream=false mDreamingLockscreen={}",
        locked && !awake
    );
    wl!(s, "    mStatusBar=Window{{78729c5 u0 StatusBar}}");
    wl!(
        s,
        "    mExpandedPanel=Window{{81f848a u0 NotificationShade}}"
    );
    wl!(s, "    isKeyguardShowing={locked}");
    wl!(s);
    wl!(s, "  DisplayRotation");
    wl!(
        s,
        "    mCurrentAppOrientation=SCREEN_ORIENTATION_UNSPECIFIED"
    );
    wl!(s, "    mLastOrientation=-1");
    wl!(s, "    mRotation={rotation} mDeferredRotationPauseCount=0");
    wl!(
        s,
        "    mLandscapeRotation=ROTATION_90 mSeascapeRotation=ROTATION_270"
    );
    wl!(
        s,
        "    mPortraitRotation=ROTATION_0 mUpsideDownRotation=ROTATION_180"
    );
    wl!(
        s,
        "    mUserRotationMode=USER_ROTATION_FREE mUserRotation={} mCameraRotationMode=0 mAllowAllRotations=unknown",
        ROTATIONS[rotation]
    );
    s
}

#[cfg(test)]
mod tests {
    use super::super::tests::{phone, run};

    #[test]
    fn battery_dump_follows_state() {
        let p = phone();
        let (out, _, status) = run(&p, "dumpsys battery");
        assert_eq!(status, 0);
        assert!(out.starts_with("Current Battery Service state:\n  AC powered: false\n"));
        assert!(out.contains("\n  level: 85\n  scale: 100\n"));
        assert!(out.contains("\n  status: 3\n"));
        p.update(|s| {
            s.battery.level = 42;
            s.battery.plugged = crate::state::Plugged::Usb;
        });
        let (out, _, _) = run(&p, "dumpsys battery");
        assert!(out.contains("  USB powered: true\n"));
        assert!(out.contains("  level: 42\n"));
        assert!(!out.contains("UPDATES STOPPED"));
        run(&p, "dumpsys battery set level 7; dumpsys battery unplug");
        assert_eq!(p.state().battery.level, 7);
        assert_eq!(p.state().battery.plugged, crate::state::Plugged::None);
        // Values forced this way are flagged as the real BatteryService does.
        let (out, _, _) = run(&p, "dumpsys battery");
        assert!(out.starts_with(
            "Current Battery Service state:\n  (UPDATES STOPPED -- use 'reset' to restart)\n  AC powered: false\n"
        ));
        run(&p, "dumpsys battery reset");
        let (out, _, _) = run(&p, "dumpsys battery");
        assert!(!out.contains("UPDATES STOPPED"));
    }

    #[test]
    fn unknown_service() {
        assert_eq!(
            run(&phone(), "dumpsys telephony"),
            (
                "Can't find service: telephony\n".to_owned(),
                String::new(),
                0
            )
        );
    }

    #[test]
    fn wifi_dump_follows_svc() {
        let p = phone();
        let (out, _, _) = run(&p, "dumpsys wifi");
        assert!(out.contains("\nWi-Fi is enabled\n"));
        assert!(out.contains("mWifiInfo SSID: \"HomeNet\", BSSID: a4:2b:b0:11:22:33"));
        assert!(out.contains("RSSI: -55, Link speed: 433Mbps"));
        run(&p, "svc wifi disable");
        let (out, _, _) = run(&p, "dumpsys wifi");
        assert!(out.contains("\nWi-Fi is disabled\n"));
        assert!(out.contains("mWifiInfo SSID: <unknown ssid>"));
    }

    #[test]
    fn bluetooth_bonded_devices() {
        let p = phone();
        let (out, _, _) = run(&p, "dumpsys bluetooth_manager");
        assert!(out.starts_with("Bluetooth Status\n  enabled: true\n  state: ON\n"));
        assert!(out.contains("  Bonded devices:\n    41:42:B2:14:0C:C4 [ DUAL ] AirPods Pro\n    00:1B:66:A1:B2:C3 [ BR/EDR ] JBL Flip 5\n"));
        run(&p, "cmd bluetooth_manager disable");
        let (out, _, _) = run(&p, "dumpsys bluetooth_manager");
        assert!(out.contains("  enabled: false\n  state: OFF\n"));
        assert!(!out.contains("Bonded devices"));
    }

    #[test]
    fn audio_streams() {
        let p = phone();
        let (out, _, _) = run(&p, "dumpsys audio");
        assert!(out.contains("- STREAM_MUSIC:\n   Muted: false\n   Muted Internally: false\n   Min: 0\n   Max: 15\n   streamVolume:8\n"));
        assert!(out.contains("- mode (internal) = NORMAL\n"));
    }

    #[test]
    fn power_and_screen() {
        let p = phone();
        assert!(
            run(&p, "dumpsys power")
                .0
                .contains("  mWakefulness=Awake\n")
        );
        run(&p, "input keyevent KEYCODE_SLEEP");
        let (out, _, _) = run(&p, "dumpsys power");
        assert!(out.contains("  mWakefulness=Asleep\n"));
        assert!(out.contains("Screen off timeout: 60000 ms\n"));
    }

    #[test]
    fn location_fix() {
        let (out, _, _) = run(&phone(), "dumpsys location");
        assert!(out.contains(
            "      last location=Location[gps 37.421998,-122.084000 hAcc=5.0 et=+5m15s101ms alt=5.0 vAcc=0.5 vel=0.0 sAcc=0.5 bear=0.0 bAcc=30.0"
        ));
        assert!(out.contains("      last location=Location[fused 37.421998,-122.084000 hAcc=5.0"));
        assert!(out.contains(
            "    network provider:\n      service: ProviderRequest[OFF]\n      last location=null\n"
        ));
    }

    #[test]
    fn sensor_events() {
        let p = phone();
        p.update(|s| s.sensors.accelerometer = [0.5, 9.7, 1.25]);
        let (out, _, _) = run(&p, "dumpsys sensorservice");
        assert!(out.contains(
            "Recent Sensor events:\nGoldfish 3-axis Accelerometer: last 10 events\n\t 1 (ts="
        ));
        let line = out
            .lines()
            .find(|l| l.starts_with("\t 1 (ts="))
            .expect("an event line");
        assert!(line.ends_with(") 0.50, 9.70, 1.25, "), "{line}");
        assert!(out.contains("Goldfish Light sensor: last 1 events\n"));
        assert!(out.contains(") 120.00, \n"));
    }

    #[test]
    fn media_session_dump() {
        let p = phone();
        run(&p, "cmd media_session dispatch play");
        let (out, _, _) = run(&p, "dumpsys media_session");
        assert!(out.contains("      package=com.spotify.music\n"));
        assert!(out.contains("state=PlaybackState {state=PLAYING(3), position=42000"));
        assert!(
            out.contains("      metadata: size=4, description=Bohemian Rhapsody, Queen, null\n")
        );
        run(&p, "am force-stop com.spotify.music");
        assert!(
            run(&p, "dumpsys media_session")
                .0
                .contains("Sessions Stack - have 0 sessions:")
        );
    }

    #[test]
    fn camera_dump() {
        let (out, _, _) = run(&phone(), "dumpsys media.camera");
        assert!(out.contains("Number of camera devices: 2\n"));
        assert!(out.contains("== Camera device 0 dynamic info: ==\n"));
        assert!(out.contains("    Facing: Back\n"));
        assert!(out.contains("    Facing: Front\n"));
    }

    #[test]
    fn window_rotation_and_focus() {
        let p = phone();
        p.update(|s| s.display.rotation = 1);
        let (out, _, _) = run(&p, "dumpsys window displays");
        assert!(out.contains("cur=2400x1080"));
        assert!(out.contains("mRotation=ROTATION_90}"));
        assert!(out.contains("    mRotation=1 mDeferredRotationPauseCount=0\n"));
        assert!(out.contains(
            "  mCurrentFocus=Window{4879fe9 u0 com.android.launcher3/com.android.launcher3.uioverrides.QuickstepLauncher}\n"
        ));
    }

    #[test]
    fn window_policy_follows_sleep_and_lock() {
        let p = phone();
        let (out, _, _) = run(&p, "dumpsys window displays");
        assert!(out.contains("    mAwake=true mScreenOnEarly=true mScreenOnFully=true\n"));
        assert!(out.contains("    isKeyguardShowing=false\n"));
        p.update(|s| s.ui.locked = true);
        let (out, _, _) = run(&p, "dumpsys window displays");
        assert!(out.contains("    isKeyguardShowing=true\n"));
        assert!(out.contains("mDreamingLockscreen=false\n"));
        // The power key puts it to sleep; the wake-up key wakes it, locked.
        run(&p, "input keyevent KEYCODE_POWER");
        let (out, _, _) = run(&p, "dumpsys window displays");
        assert!(out.contains("    mAwake=false mScreenOnEarly=false mScreenOnFully=false\n"));
        assert!(out.contains("mDreamingLockscreen=true\n"));
        run(&p, "input keyevent KEYCODE_WAKEUP");
        let (out, _, _) = run(&p, "dumpsys window displays");
        assert!(out.contains("    mAwake=true") && out.contains("isKeyguardShowing=true\n"));
        // A locked screen takes no touch.
        p.update(|s| s.ui.shade_open = false);
        run(&p, "input swipe 500 10 500 900");
        assert!(!p.state().ui.shade_open);
    }

    #[test]
    fn resumed_activity_follows_am_start() {
        let p = phone();
        run(&p, "am start -n com.example.notes/.MainActivity");
        let (out, _, _) = run(&p, "dumpsys activity activities");
        assert!(out.contains(
            "  ResumedActivity: ActivityRecord{165322630 u0 com.example.notes/.MainActivity t12}\n"
        ));
        assert_eq!(
            run(&p, "dumpsys connectivity").0,
            "Can't find service: connectivity\n"
        );
    }

    #[test]
    fn list_services() {
        assert!(run(&phone(), "dumpsys -l").0.contains("\n  media.camera\n"));
    }
}
