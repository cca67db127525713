//! The phone's state: everything a command can read or change.
//!
//! `PhoneState` is plain data (serde-serialisable, `Default` describes a
//! plausible phone). It knows nothing about ADB, the shell or formatting:
//! the command handlers in `phone` read and mutate it, the control port
//! serialises it and patches it by dotted path. Every struct rejects unknown
//! fields so that a control-port `set` with a misspelt key fails loudly instead
//! of being ignored.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::clock;

/// The whole emulated phone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhoneState {
    /// Build and identity properties (what `getprop` and the ADB banner show).
    pub props: DeviceProps,
    /// The battery.
    pub battery: Battery,
    /// Wi-Fi radio, connection and scan results.
    pub wifi: Wifi,
    /// Bluetooth adapter and bonded devices.
    pub bluetooth: Bluetooth,
    /// Airplane mode (`settings global airplane_mode_on`).
    pub airplane_mode: bool,
    /// Radio states saved when airplane mode turned on, restored when it turns off.
    pub airplane_saved: Option<SavedRadios>,
    /// Stream volumes and ringer mode.
    pub audio: Audio,
    /// Screen, brightness, timeout and rotation.
    pub display: Display,
    /// Battery saver (`settings global low_power`, `cmd power set-mode`).
    pub power_save: bool,
    /// Installed packages.
    pub packages: Vec<Package>,
    /// The resumed activity as a short component, e.g. `com.example/.Main`.
    pub foreground: String,
    /// Last known location fix.
    pub location: Location,
    /// The active media session, if any app has one.
    pub media: Option<MediaSession>,
    /// Current sensor readings.
    pub sensors: Sensors,
    /// Camera devices.
    pub cameras: Vec<Camera>,
    /// Memory figures for `/proc/meminfo`.
    pub memory: Memory,
    /// Wall-clock time of boot, epoch milliseconds (uptime is now minus this).
    pub boot_epoch_ms: u64,
    /// Settings that are not mapped onto a typed field, per namespace.
    pub settings: Settings,
    /// Notifications, files and started intents (issue #13's services).
    #[serde(default)]
    pub content: crate::content::PhoneContent,
    /// What the screen shows beyond the foreground app (see `phone::screen`).
    #[serde(default)]
    pub ui: UiState,
    /// The torch, speech and vibrations (the `alerts` service).
    #[serde(default)]
    pub alerts: Alerts,
}

/// What the phone did to be noticed: the torch, what it said, how it
/// vibrated, and until when it rings to be found.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Alerts {
    /// Whether the torch is on.
    pub torch: bool,
    /// Every text spoken, oldest first.
    pub spoken: Vec<String>,
    /// Every vibration's duration in milliseconds, oldest first.
    pub vibrations: Vec<u32>,
    /// Until when the phone rings to be found (epoch ms), once asked to.
    pub find_until_ms: Option<u64>,
}

/// The screen's own state: the launcher's text field, the notification
/// shade, the keyboards, the last UI dump.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct UiState {
    /// The text in the home screen's search field.
    pub text: String,
    /// Whether that field has the input focus.
    pub text_focused: bool,
    /// Whether the notification shade is pulled down.
    pub shade_open: bool,
    /// Whether the ADB keyboard IME (`com.android.adbkeyboard/.AdbIME`) is
    /// installed (it takes text as a broadcast).
    pub adb_ime_installed: bool,
    /// Fail this many `uiautomator dump` runs with "could not get idle state".
    pub dump_not_idle: u32,
    /// Whether the lock screen (keyguard) shows: touches and typing land on
    /// it and do nothing; `dumpsys window` says so. Set it through the
    /// control port (`ui.locked`) to lock or unlock the phone.
    pub locked: bool,
    /// The clipboard's text (`None`: empty), which the on-device UI server
    /// reads, sets and pastes.
    pub clipboard: Option<String>,
    /// The on-device UI server dies at this many of its next requests,
    /// without answering (a crash mid-call).
    pub ui_server_dies: u32,
}

impl Default for UiState {
    fn default() -> Self {
        Self {
            text: String::new(),
            text_focused: false,
            shade_open: false,
            adb_ime_installed: true,
            dump_not_idle: 0,
            locked: false,
            clipboard: None,
            ui_server_dies: 0,
        }
    }
}

/// Identity and build properties.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceProps {
    /// `ro.product.model`.
    pub model: String,
    /// `ro.product.manufacturer`.
    pub manufacturer: String,
    /// `ro.product.brand`.
    pub brand: String,
    /// `ro.product.device`.
    pub device: String,
    /// `ro.product.name`.
    pub name: String,
    /// `ro.build.version.release`.
    pub android_version: String,
    /// `ro.build.version.sdk`.
    pub sdk: u32,
    /// `ro.build.id`.
    pub build_id: String,
    /// `ro.serialno`.
    pub serial: String,
    /// Any further properties, added to or overriding the generated list.
    pub extra: BTreeMap<String, String>,
}

/// Battery charging status (`BatteryManager.BATTERY_STATUS_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BatteryStatus {
    /// 1.
    Unknown,
    /// 2.
    Charging,
    /// 3.
    Discharging,
    /// 4.
    NotCharging,
    /// 5.
    Full,
}

impl BatteryStatus {
    /// The integer `dumpsys battery` prints.
    pub fn code(self) -> u8 {
        match self {
            Self::Unknown => 1,
            Self::Charging => 2,
            Self::Discharging => 3,
            Self::NotCharging => 4,
            Self::Full => 5,
        }
    }
}

/// Battery health (`BatteryManager.BATTERY_HEALTH_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BatteryHealth {
    /// 1.
    Unknown,
    /// 2.
    Good,
    /// 3.
    Overheat,
    /// 4.
    Dead,
    /// 5.
    OverVoltage,
    /// 6.
    UnspecifiedFailure,
    /// 7.
    Cold,
}

impl BatteryHealth {
    /// The integer `dumpsys battery` prints.
    pub fn code(self) -> u8 {
        match self {
            Self::Unknown => 1,
            Self::Good => 2,
            Self::Overheat => 3,
            Self::Dead => 4,
            Self::OverVoltage => 5,
            Self::UnspecifiedFailure => 6,
            Self::Cold => 7,
        }
    }
}

/// What the phone is plugged into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Plugged {
    /// On battery.
    None,
    /// A wall charger.
    Ac,
    /// A USB port.
    Usb,
    /// A wireless charger.
    Wireless,
}

impl Plugged {
    /// `BatteryManager.BATTERY_PLUGGED_*` (0 when unplugged).
    pub fn plug_type(self) -> u8 {
        match self {
            Self::None => 0,
            Self::Ac => 1,
            Self::Usb => 2,
            Self::Wireless => 4,
        }
    }
}

/// The battery.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Battery {
    /// Charge level, 0..=scale.
    pub level: u8,
    /// Always 100 on real phones.
    pub scale: u8,
    /// Charging status.
    pub status: BatteryStatus,
    /// Health.
    pub health: BatteryHealth,
    /// Power source.
    pub plugged: Plugged,
    /// Whether a battery is present.
    pub present: bool,
    /// Temperature in tenths of a degree Celsius.
    pub temperature: i32,
    /// Voltage in millivolts.
    pub voltage: u32,
    /// Chemistry, e.g. `Li-ion`.
    pub technology: String,
    /// Design capacity in microampere-hours (for `Charge counter`).
    pub capacity_uah: u64,
    /// Values forced with `dumpsys battery set|unplug`, until `reset`
    /// (the dump says `(UPDATES STOPPED …)`, as BatteryService does).
    #[serde(default)]
    pub updates_stopped: bool,
}

/// One access point seen by a Wi-Fi scan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScanResult {
    /// BSSID, lower-case colon hex.
    pub bssid: String,
    /// SSID (empty for a hidden network).
    pub ssid: String,
    /// Centre frequency in MHz.
    pub frequency: u32,
    /// Signal level in dBm.
    pub rssi: i32,
    /// Capability flags, e.g. `[RSN-PSK-CCMP][ESS]`.
    pub flags: String,
    /// How long before the last scan this AP was last seen, in milliseconds.
    pub age_ms: u64,
}

/// The Wi-Fi radio and its connection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Wifi {
    /// Radio on.
    pub enabled: bool,
    /// Associated and with an address (only meaningful while enabled).
    pub connected: bool,
    /// SSID of the current (or, when disconnected, last saved) network.
    pub ssid: String,
    /// BSSID of the current access point.
    pub bssid: String,
    /// Signal level in dBm.
    pub rssi: i32,
    /// Link speed in Mbps.
    pub link_speed: u32,
    /// Frequency in MHz.
    pub frequency: u32,
    /// IPv4 address.
    pub ip: String,
    /// IPv4 prefix length.
    pub prefix_len: u8,
    /// Default gateway.
    pub gateway: String,
    /// The interface's MAC address.
    pub mac: String,
    /// Scan results.
    pub scan_results: Vec<ScanResult>,
    /// Epoch milliseconds of the last scan.
    pub last_scan_epoch_ms: u64,
}

/// Bluetooth device type, as `dumpsys bluetooth_manager` tags bonded devices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BluetoothKind {
    /// BR/EDR only.
    #[default]
    Classic,
    /// Low energy only.
    Le,
    /// Both.
    Dual,
}

/// A bonded (paired) Bluetooth device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BondedDevice {
    /// Address, upper-case colon hex.
    pub address: String,
    /// Remote name.
    pub name: String,
    /// Device type (defaults to classic).
    #[serde(default)]
    pub kind: BluetoothKind,
}

/// The Bluetooth adapter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bluetooth {
    /// Adapter on.
    pub enabled: bool,
    /// Adapter name.
    pub name: String,
    /// Adapter address.
    pub address: String,
    /// Bonded devices.
    pub bonded: Vec<BondedDevice>,
    /// Epoch milliseconds of the last enable (for `time since enabled`).
    pub enabled_since_epoch_ms: u64,
}

/// Radios to restore when airplane mode turns off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedRadios {
    /// Wi-Fi was on.
    pub wifi: bool,
    /// Bluetooth was on.
    pub bluetooth: bool,
}

/// One audio stream's volume.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamVolume {
    /// Current index.
    pub index: u32,
    /// Lowest index.
    pub min: u32,
    /// Highest index.
    pub max: u32,
    /// Muted.
    pub muted: bool,
}

impl StreamVolume {
    const fn new(index: u32, min: u32, max: u32) -> Self {
        Self {
            index,
            min,
            max,
            muted: false,
        }
    }
}

/// Volumes of the streams the daemon controls, by `AudioManager.STREAM_*`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Volumes {
    /// Stream 0.
    pub voice_call: StreamVolume,
    /// Stream 1.
    pub system: StreamVolume,
    /// Stream 2.
    pub ring: StreamVolume,
    /// Stream 3.
    pub music: StreamVolume,
    /// Stream 4.
    pub alarm: StreamVolume,
    /// Stream 5.
    pub notification: StreamVolume,
    /// Stream 8.
    pub dtmf: StreamVolume,
    /// Stream 10.
    pub accessibility: StreamVolume,
}

/// The streams in `Volumes`, with their `AudioManager` numbers and
/// `AudioSystem.STREAM_NAMES` names, in stream order.
pub const STREAMS: [(u32, &str); 8] = [
    (0, "STREAM_VOICE_CALL"),
    (1, "STREAM_SYSTEM"),
    (2, "STREAM_RING"),
    (3, "STREAM_MUSIC"),
    (4, "STREAM_ALARM"),
    (5, "STREAM_NOTIFICATION"),
    (8, "STREAM_DTMF"),
    (10, "STREAM_ACCESSIBILITY"),
];

impl Volumes {
    /// The volume of stream `n`, if the phone models it.
    pub fn get(&self, n: u32) -> Option<&StreamVolume> {
        Some(match n {
            0 => &self.voice_call,
            1 => &self.system,
            2 => &self.ring,
            3 => &self.music,
            4 => &self.alarm,
            5 => &self.notification,
            8 => &self.dtmf,
            10 => &self.accessibility,
            _ => return None,
        })
    }

    /// Mutable access to the volume of stream `n`.
    pub fn get_mut(&mut self, n: u32) -> Option<&mut StreamVolume> {
        Some(match n {
            0 => &mut self.voice_call,
            1 => &mut self.system,
            2 => &mut self.ring,
            3 => &mut self.music,
            4 => &mut self.alarm,
            5 => &mut self.notification,
            8 => &mut self.dtmf,
            10 => &mut self.accessibility,
            _ => return None,
        })
    }
}

/// Ringer mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RingerMode {
    /// Rings.
    Normal,
    /// Vibrates only.
    Vibrate,
    /// Silent.
    Silent,
}

impl RingerMode {
    /// The name `dumpsys audio` prints.
    pub fn name(self) -> &'static str {
        match self {
            Self::Normal => "NORMAL",
            Self::Vibrate => "VIBRATE",
            Self::Silent => "SILENT",
        }
    }
}

/// Audio state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Audio {
    /// Per-stream volumes.
    pub volumes: Volumes,
    /// Ringer mode.
    pub ringer_mode: RingerMode,
}

/// Screen state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Display {
    /// `screen_brightness`, 0..=255.
    pub brightness: u8,
    /// `screen_brightness_mode`: 0 manual, 1 automatic.
    pub brightness_mode: u8,
    /// `screen_off_timeout` in milliseconds.
    pub screen_off_timeout_ms: u64,
    /// Screen on (wakefulness `Awake`) or off (`Asleep`).
    pub screen_on: bool,
    /// Display rotation, 0..=3 (`Surface.ROTATION_*`).
    pub rotation: u8,
    /// Natural (portrait) width in pixels.
    pub width: u32,
    /// Natural (portrait) height in pixels.
    pub height: u32,
    /// Density in dpi.
    pub density: u32,
}

/// An installed package.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Package {
    /// Package name.
    pub package: String,
    /// Path of the base APK.
    pub apk_path: String,
    /// Part of the system image.
    pub system: bool,
    /// Enabled (disabled packages cannot be launched).
    pub enabled: bool,
    /// Fully-qualified class of the `MAIN`/`LAUNCHER` activity, if any.
    pub launcher_activity: Option<String>,
    /// Further exported activities (fully-qualified class names).
    #[serde(default)]
    pub activities: Vec<String>,
    /// Linux uid.
    pub uid: u32,
    /// Has a running process.
    #[serde(default)]
    pub running: bool,
}

impl Package {
    /// Whether `class` (fully qualified) is an activity of this package.
    pub fn has_activity(&self, class: &str) -> bool {
        self.launcher_activity.as_deref() == Some(class)
            || self.activities.iter().any(|a| a == class)
    }
}

/// Last known location fix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Location {
    /// Location services on (`secure location_mode` 3 or 0).
    pub enabled: bool,
    /// Latitude in degrees.
    pub latitude: f64,
    /// Longitude in degrees.
    pub longitude: f64,
    /// Altitude in metres.
    pub altitude: f64,
    /// Horizontal accuracy in metres.
    pub accuracy: f64,
    /// Speed in m/s.
    pub speed: f64,
    /// Bearing in degrees.
    pub bearing: f64,
    /// Provider of the fix: `gps`, `network` or `fused`.
    pub provider: String,
    /// Milliseconds after boot when the fix was taken.
    pub fix_elapsed_ms: u64,
}

/// Playback state of a media session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlaybackState {
    /// `PlaybackState.STATE_STOPPED` (1).
    Stopped,
    /// `STATE_PAUSED` (2).
    Paused,
    /// `STATE_PLAYING` (3).
    Playing,
}

impl PlaybackState {
    /// The `PlaybackState.STATE_*` integer.
    pub fn code(self) -> u8 {
        match self {
            Self::Stopped => 1,
            Self::Paused => 2,
            Self::Playing => 3,
        }
    }

    /// The name `PlaybackState.toString()` prints on Android 13+.
    pub fn name(self) -> &'static str {
        match self {
            Self::Stopped => "STOPPED",
            Self::Paused => "PAUSED",
            Self::Playing => "PLAYING",
        }
    }
}

/// A track in a media queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Track {
    /// Title.
    pub title: String,
    /// Artist.
    pub artist: String,
}

/// The active media session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MediaSession {
    /// Owning package.
    pub package: String,
    /// Playback state.
    pub state: PlaybackState,
    /// Current title.
    pub title: String,
    /// Current artist.
    pub artist: String,
    /// Playback position in milliseconds.
    pub position_ms: u64,
    /// The queue `next`/`previous` move through (may be empty).
    #[serde(default)]
    pub queue: Vec<Track>,
}

/// Sensor readings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sensors {
    /// m/s², x y z.
    pub accelerometer: [f64; 3],
    /// rad/s, x y z.
    pub gyroscope: [f64; 3],
    /// Illuminance in lux.
    pub light: f64,
    /// Pressure in hPa.
    pub pressure: f64,
    /// Ambient temperature in °C.
    pub ambient_temperature: f64,
    /// Relative humidity in %.
    pub humidity: f64,
    /// Proximity in cm (the maximum range means "far").
    pub proximity: f64,
}

/// Which way a camera faces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Facing {
    /// Rear camera.
    Back,
    /// Selfie camera.
    Front,
    /// USB or other external camera.
    External,
}

/// A camera device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Camera {
    /// Camera id, e.g. `0`.
    pub id: String,
    /// Facing.
    pub facing: Facing,
    /// Has a flash unit.
    #[serde(default)]
    pub has_flash: bool,
    /// Sensor orientation in degrees.
    #[serde(default)]
    pub orientation: u32,
}

/// Memory figures in kB.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Memory {
    /// `MemTotal`.
    pub total_kb: u64,
    /// `MemFree`.
    pub free_kb: u64,
    /// `MemAvailable`.
    pub available_kb: u64,
}

/// Unmapped settings, `settings get|put|list` namespaces.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// `settings … global`.
    pub global: BTreeMap<String, String>,
    /// `settings … system`.
    pub system: BTreeMap<String, String>,
    /// `settings … secure`.
    pub secure: BTreeMap<String, String>,
}

impl PhoneState {
    /// The package called `name`, if installed.
    pub fn package(&self, name: &str) -> Option<&Package> {
        self.packages.iter().find(|p| p.package == name)
    }

    /// Mutable access to the package called `name`.
    pub fn package_mut(&mut self, name: &str) -> Option<&mut Package> {
        self.packages.iter_mut().find(|p| p.package == name)
    }

    /// Milliseconds since boot, now.
    pub fn uptime_ms(&self) -> u64 {
        clock::now_ms().saturating_sub(self.boot_epoch_ms)
    }

    /// The package of the foreground activity.
    pub fn foreground_package(&self) -> &str {
        self.foreground.split('/').next().unwrap_or_default()
    }

    /// The launcher (home) component.
    pub const HOME: &'static str = "com.android.launcher3/.uioverrides.QuickstepLauncher";
}

/// The SDK level of an Android release string, if known.
pub fn sdk_for_release(release: &str) -> Option<u32> {
    let major = release.split('.').next().unwrap_or(release);
    Some(match major {
        "5" => 21,
        "6" => 23,
        "7" => 24,
        "8" => 26,
        "9" => 28,
        "10" => 29,
        "11" => 30,
        "12" => 31,
        "12L" => 32,
        "13" => 33,
        "14" => 34,
        "15" => 35,
        "16" => 36,
        "17" => 37,
        _ => return None,
    })
}

fn system_pkg(package: &str, apk: &str, launcher: Option<&str>, uid: u32) -> Package {
    Package {
        package: package.to_owned(),
        apk_path: apk.to_owned(),
        system: true,
        enabled: true,
        launcher_activity: launcher.map(str::to_owned),
        activities: Vec::new(),
        uid,
        running: false,
    }
}

pub(crate) fn user_pkg(package: &str, dir: &str, launcher: Option<&str>, uid: u32) -> Package {
    Package {
        package: package.to_owned(),
        apk_path: format!("/data/app/{dir}/{package}-{}/base.apk", apk_suffix(package)),
        system: false,
        enabled: true,
        launcher_activity: launcher.map(str::to_owned),
        activities: Vec::new(),
        uid,
        running: false,
    }
}

/// A stable base64-looking directory suffix derived from the package name,
/// shaped like the random `-<22 chars>==` suffix of Android 11+ installs.
pub(crate) fn apk_suffix(package: &str) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut out = String::with_capacity(24);
    for i in 0..22u64 {
        for b in package.bytes() {
            h ^= u64::from(b) ^ i;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        out.push(char::from(ALPHABET[(h % 64) as usize]));
    }
    out.push_str("==");
    out
}

fn default_packages() -> Vec<Package> {
    let mut packages = vec![
        system_pkg("android", "/system/framework/framework-res.apk", None, 1000),
        system_pkg(
            "com.android.systemui",
            "/system_ext/priv-app/SystemUIGoogle/SystemUIGoogle.apk",
            None,
            10_129,
        ),
        system_pkg(
            "com.android.settings",
            "/system_ext/priv-app/SettingsGoogle/SettingsGoogle.apk",
            Some("com.android.settings.Settings"),
            1000,
        ),
        system_pkg(
            "com.android.chrome",
            "/product/app/Chrome/Chrome.apk",
            Some("com.google.android.apps.chrome.Main"),
            10_160,
        ),
        system_pkg(
            "com.android.camera2",
            "/product/app/Camera2/Camera2.apk",
            Some("com.android.camera.CameraLauncher"),
            10_131,
        ),
        system_pkg(
            "com.android.contacts",
            "/product/priv-app/Contacts/Contacts.apk",
            Some("com.android.contacts.activities.PeopleActivity"),
            10_133,
        ),
        system_pkg(
            "com.android.deskclock",
            "/product/app/DeskClock/DeskClock.apk",
            Some("com.android.deskclock.DeskClock"),
            10_134,
        ),
        system_pkg(
            "com.android.phone",
            "/system/priv-app/TeleService/TeleService.apk",
            None,
            1001,
        ),
        system_pkg(
            "com.android.bluetooth",
            "/apex/com.android.btservices/app/Bluetooth/Bluetooth.apk",
            None,
            1002,
        ),
        system_pkg(
            "com.android.providers.downloads",
            "/system/priv-app/DownloadProvider/DownloadProvider.apk",
            None,
            10_078,
        ),
        system_pkg(
            "com.android.shell",
            "/system/priv-app/Shell/Shell.apk",
            None,
            2000,
        ),
    ];
    let mut launcher3 = system_pkg(
        "com.android.launcher3",
        "/system_ext/priv-app/NexusLauncherRelease/NexusLauncherRelease.apk",
        None,
        10_150,
    );
    launcher3.activities = vec!["com.android.launcher3.uioverrides.QuickstepLauncher".to_owned()];
    launcher3.running = true;
    packages.push(launcher3);
    // Where SENDTO sms: and CALL tel: go (issue #13's telephony).
    let mut messaging = system_pkg(
        "com.google.android.apps.messaging",
        "/product/app/PrebuiltBugle/PrebuiltBugle.apk",
        Some("com.google.android.apps.messaging.ui.ConversationListActivity"),
        10_154,
    );
    messaging.activities = vec![
        "com.google.android.apps.messaging.ui.conversation.LaunchConversationActivity".to_owned(),
    ];
    let mut telecom = system_pkg(
        "com.android.server.telecom",
        "/system/priv-app/Telecom/Telecom.apk",
        None,
        1000,
    );
    telecom.activities = vec!["com.android.server.telecom.components.UserCallActivity".to_owned()];
    packages.extend([messaging, telecom]);
    for p in &mut packages {
        if p.package == "com.android.systemui" || p.package == "com.android.phone" {
            p.running = true;
        }
    }

    let mut spotify = user_pkg(
        "com.spotify.music",
        "~~Xk3v9Q0bLm2Rz7Tq1aYw8A==",
        Some("com.spotify.music.MainActivity"),
        10_201,
    );
    spotify.running = true;
    let mut vlc = user_pkg(
        "org.videolan.vlc",
        "~~pQ7sWm4Zc1Vb8Nt5Ry2Lkw==",
        Some("org.videolan.vlc.StartActivity"),
        10_202,
    );
    vlc.activities = vec!["org.videolan.vlc.gui.video.VideoPlayerActivity".to_owned()];
    let notes = user_pkg(
        "com.example.notes",
        "~~Hc6Yd0Ju3Kf9Ge2Sa7Tb1Q==",
        Some("com.example.notes.MainActivity"),
        10_203,
    );
    let mut legacy = user_pkg(
        "com.example.legacy",
        "~~Lm2Nb5Vc8Xz1As4Df7Gh0Q==",
        Some("com.example.legacy.HomeActivity"),
        10_204,
    );
    legacy.enabled = false;
    packages.extend([spotify, vlc, notes, legacy]);
    packages.sort_by(|a, b| a.package.cmp(&b.package));
    packages
}

fn default_settings() -> Settings {
    let map = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect::<BTreeMap<_, _>>()
    };
    Settings {
        global: map(&[
            ("adb_enabled", "1"),
            ("airplane_mode_radios", "cell,bluetooth,uwb,wifi,wimax"),
            ("airplane_mode_toggleable_radios", "bluetooth,wifi"),
            ("auto_time", "1"),
            ("auto_time_zone", "1"),
            ("boot_count", "5"),
            ("data_roaming", "0"),
            ("development_settings_enabled", "1"),
            ("device_name", "Pixel 7"),
            ("device_provisioned", "1"),
            ("mobile_data", "1"),
            ("stay_on_while_plugged_in", "0"),
            ("wifi_scan_always_enabled", "0"),
            ("window_animation_scale", "1.0"),
        ]),
        system: map(&[
            ("accelerometer_rotation", "1"),
            ("dtmf_tone", "1"),
            ("font_scale", "1.0"),
            ("haptic_feedback_enabled", "1"),
            ("sound_effects_enabled", "1"),
            ("time_12_24", "24"),
        ]),
        secure: map(&[
            ("android_id", "6f1c2a9be04d7731"),
            (
                "default_input_method",
                "com.google.android.inputmethod.latin/com.android.inputmethod.latin.LatinIME",
            ),
            ("doze_enabled", "1"),
            ("screensaver_enabled", "0"),
            ("skip_first_use_hints", "1"),
            ("user_setup_complete", "1"),
        ]),
    }
}

impl Default for PhoneState {
    fn default() -> Self {
        let now = clock::now_ms();
        let boot = now.saturating_sub(2 * 3_600_000 + 13 * 60_000 + 27_000);
        Self {
            props: DeviceProps {
                model: "Pixel 7".to_owned(),
                manufacturer: "Google".to_owned(),
                brand: "google".to_owned(),
                device: "panther".to_owned(),
                name: "panther".to_owned(),
                android_version: "14".to_owned(),
                sdk: 34,
                build_id: "UQ1A.240205.004".to_owned(),
                serial: "DWSIM0001".to_owned(),
                extra: BTreeMap::new(),
            },
            battery: Battery {
                level: 85,
                scale: 100,
                status: BatteryStatus::Discharging,
                health: BatteryHealth::Good,
                plugged: Plugged::None,
                present: true,
                temperature: 265,
                voltage: 4012,
                technology: "Li-ion".to_owned(),
                capacity_uah: 4_355_000,
                updates_stopped: false,
            },
            wifi: Wifi {
                enabled: true,
                connected: true,
                ssid: "HomeNet".to_owned(),
                bssid: "a4:2b:b0:11:22:33".to_owned(),
                rssi: -55,
                link_speed: 433,
                frequency: 5180,
                ip: "192.168.1.23".to_owned(),
                prefix_len: 24,
                gateway: "192.168.1.1".to_owned(),
                mac: "9a:3f:21:c4:5e:77".to_owned(),
                scan_results: vec![
                    ScanResult {
                        bssid: "a4:2b:b0:11:22:33".to_owned(),
                        ssid: "HomeNet".to_owned(),
                        frequency: 5180,
                        rssi: -55,
                        flags: "[RSN-PSK-CCMP][ESS]".to_owned(),
                        age_ms: 310,
                    },
                    ScanResult {
                        bssid: "a4:2b:b0:11:22:34".to_owned(),
                        ssid: "HomeNet".to_owned(),
                        frequency: 2437,
                        rssi: -61,
                        flags: "[RSN-PSK-CCMP][ESS]".to_owned(),
                        age_ms: 1_204,
                    },
                    ScanResult {
                        bssid: "5c:e9:31:8a:0f:c2".to_owned(),
                        ssid: "Neighbour-5G".to_owned(),
                        frequency: 5240,
                        rssi: -72,
                        flags: "[RSN-SAE-CCMP][ESS][MFPR][MFPC]".to_owned(),
                        age_ms: 2_619,
                    },
                    ScanResult {
                        bssid: "02:1a:11:f0:44:9d".to_owned(),
                        ssid: "CafeGuest".to_owned(),
                        frequency: 2412,
                        rssi: -80,
                        flags: "[ESS]".to_owned(),
                        age_ms: 3_622,
                    },
                ],
                last_scan_epoch_ms: now.saturating_sub(20_000),
            },
            bluetooth: Bluetooth {
                enabled: true,
                name: "Pixel 7".to_owned(),
                address: "F8:0F:F9:12:34:56".to_owned(),
                bonded: vec![
                    BondedDevice {
                        address: "41:42:B2:14:0C:C4".to_owned(),
                        name: "AirPods Pro".to_owned(),
                        kind: BluetoothKind::Dual,
                    },
                    BondedDevice {
                        address: "00:1B:66:A1:B2:C3".to_owned(),
                        name: "JBL Flip 5".to_owned(),
                        kind: BluetoothKind::Classic,
                    },
                ],
                enabled_since_epoch_ms: boot + 9_000,
            },
            airplane_mode: false,
            airplane_saved: None,
            audio: Audio {
                volumes: Volumes {
                    voice_call: StreamVolume::new(4, 1, 5),
                    system: StreamVolume::new(5, 0, 7),
                    ring: StreamVolume::new(5, 0, 7),
                    music: StreamVolume::new(8, 0, 15),
                    alarm: StreamVolume::new(6, 1, 7),
                    notification: StreamVolume::new(5, 0, 7),
                    dtmf: StreamVolume::new(11, 0, 15),
                    accessibility: StreamVolume::new(8, 1, 15),
                },
                ringer_mode: RingerMode::Normal,
            },
            display: Display {
                brightness: 102,
                brightness_mode: 1,
                screen_off_timeout_ms: 60_000,
                screen_on: true,
                rotation: 0,
                width: 1080,
                height: 2400,
                density: 420,
            },
            power_save: false,
            packages: default_packages(),
            foreground: Self::HOME.to_owned(),
            location: Location {
                enabled: true,
                latitude: 37.421_998,
                longitude: -122.084,
                altitude: 5.0,
                accuracy: 5.0,
                speed: 0.0,
                bearing: 0.0,
                provider: "gps".to_owned(),
                fix_elapsed_ms: 315_101,
            },
            media: Some(MediaSession {
                package: "com.spotify.music".to_owned(),
                state: PlaybackState::Paused,
                title: "Bohemian Rhapsody".to_owned(),
                artist: "Queen".to_owned(),
                position_ms: 42_000,
                queue: vec![
                    Track {
                        title: "Bohemian Rhapsody".to_owned(),
                        artist: "Queen".to_owned(),
                    },
                    Track {
                        title: "Clair de Lune".to_owned(),
                        artist: "Claude Debussy".to_owned(),
                    },
                    Track {
                        title: "Take Five".to_owned(),
                        artist: "The Dave Brubeck Quartet".to_owned(),
                    },
                ],
            }),
            sensors: Sensors {
                accelerometer: [0.0, 9.81, 0.0],
                gyroscope: [0.0, 0.0, 0.0],
                light: 120.0,
                pressure: 1013.25,
                ambient_temperature: 22.5,
                humidity: 45.0,
                proximity: 5.0,
            },
            cameras: vec![
                Camera {
                    id: "0".to_owned(),
                    facing: Facing::Back,
                    has_flash: true,
                    orientation: 90,
                },
                Camera {
                    id: "1".to_owned(),
                    facing: Facing::Front,
                    has_flash: false,
                    orientation: 270,
                },
            ],
            memory: Memory {
                total_kb: 7_813_212,
                free_kb: 612_340,
                available_kb: 3_412_880,
            },
            boot_epoch_ms: boot,
            settings: default_settings(),
            content: crate::content::PhoneContent::sample(boot),
            ui: UiState::default(),
            alerts: Alerts::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_state_round_trips_through_json() {
        let state = PhoneState::default();
        let json = serde_json::to_value(&state).expect("serialise");
        let back: PhoneState = serde_json::from_value(json).expect("deserialise");
        assert_eq!(back, state);
    }

    #[test]
    fn unknown_fields_are_rejected() {
        let mut json = serde_json::to_value(PhoneState::default()).expect("serialise");
        json["battery"]["levle"] = serde_json::json!(3);
        assert!(serde_json::from_value::<PhoneState>(json).is_err());
    }

    #[test]
    fn sdk_levels() {
        assert_eq!(sdk_for_release("14"), Some(34));
        assert_eq!(sdk_for_release("11.0.1"), Some(30));
        assert_eq!(sdk_for_release("6.0.1"), Some(23));
        assert_eq!(sdk_for_release("4.4"), None);
        assert_eq!(sdk_for_release("banana"), None);
    }
}
