//! Typed commands: what a validated request becomes. Transports match on
//! these enums, so adding an action forces every transport to say how it
//! performs it (or that it cannot).

use crate::names::PackageName;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// An audio stream, as Android names them (`AudioManager.STREAM_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stream {
    /// Media playback (the default for mute/unmute).
    Music,
    /// Ringtone.
    Ring,
    /// Alarms.
    Alarm,
    /// Notifications.
    Notification,
    /// Phone calls.
    VoiceCall,
    /// System sounds.
    System,
    /// Dial-pad tones.
    Dtmf,
    /// Accessibility prompts.
    Accessibility,
}

impl Stream {
    /// Every stream, in the order the catalogue lists them.
    pub const ALL: [Stream; 8] = [
        Stream::Music,
        Stream::Ring,
        Stream::Alarm,
        Stream::Notification,
        Stream::VoiceCall,
        Stream::System,
        Stream::Dtmf,
        Stream::Accessibility,
    ];

    /// The snake_case wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Music => "music",
            Self::Ring => "ring",
            Self::Alarm => "alarm",
            Self::Notification => "notification",
            Self::VoiceCall => "voice_call",
            Self::System => "system",
            Self::Dtmf => "dtmf",
            Self::Accessibility => "accessibility",
        }
    }

    /// Android's `AudioManager.STREAM_*` number.
    pub fn android_id(self) -> u8 {
        match self {
            Self::VoiceCall => 0,
            Self::System => 1,
            Self::Ring => 2,
            Self::Music => 3,
            Self::Alarm => 4,
            Self::Notification => 5,
            Self::Dtmf => 8,
            Self::Accessibility => 10,
        }
    }

    /// The name `dumpsys audio` uses, e.g. `STREAM_MUSIC`.
    pub fn dumpsys_name(self) -> &'static str {
        match self {
            Self::Music => "STREAM_MUSIC",
            Self::Ring => "STREAM_RING",
            Self::Alarm => "STREAM_ALARM",
            Self::Notification => "STREAM_NOTIFICATION",
            Self::VoiceCall => "STREAM_VOICE_CALL",
            Self::System => "STREAM_SYSTEM",
            Self::Dtmf => "STREAM_DTMF",
            Self::Accessibility => "STREAM_ACCESSIBILITY",
        }
    }
}

/// The phone's ringer mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RingerMode {
    /// Rings and vibrates as configured.
    Normal,
    /// Vibrates only.
    Vibrate,
    /// Silent.
    Silent,
}

impl RingerMode {
    /// Every mode.
    pub const ALL: [RingerMode; 3] = [RingerMode::Normal, RingerMode::Vibrate, RingerMode::Silent];

    /// The snake_case wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Normal => "normal",
            Self::Vibrate => "vibrate",
            Self::Silent => "silent",
        }
    }
}

macro_rules! actions {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident $({ $($(#[$fdoc:meta])* $field:ident : $ty:ty),* $(,)? })?),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(tag = "action", content = "params", rename_all = "snake_case", deny_unknown_fields)]
        pub enum $name {
            $($(#[$vdoc])* $variant $({ $($(#[$fdoc])* $field: $ty),* })?),*
        }
    };
}

actions!(
    /// `battery` actions.
    BatteryAction {
        /// Level, charging state, health, temperature, voltage.
        Status,
    }
);
actions!(
    /// `network` actions.
    NetworkAction {
        /// Interfaces, addresses, routes, airplane mode.
        Status,
    }
);
actions!(
    /// `system_info` actions.
    SystemInfoAction {
        /// Model, Android version, memory, uptime.
        Info,
    }
);
actions!(
    /// `location` actions.
    LocationAction {
        /// The last known position.
        Current,
        /// Start pushing location updates (companion app).
        StartTracking {
            /// Seconds between updates.
            interval_s: Option<u32>,
        },
        /// Stop pushing location updates.
        StopTracking,
    }
);
actions!(
    /// `app_launcher` actions.
    AppLauncherAction {
        /// Start an app.
        Launch {
            /// The package to start.
            package: PackageName,
            /// A specific activity (`.Main` or a full class name).
            activity: Option<String>,
        },
        /// Force-stop an app.
        Stop {
            /// The package to stop.
            package: PackageName,
        },
    }
);
actions!(
    /// `app_list` actions.
    AppListAction {
        /// List installed packages.
        List {
            /// Include system packages.
            include_system: Option<bool>,
            /// Include disabled packages.
            include_disabled: Option<bool>,
        },
    }
);
actions!(
    /// `wifi_automation` actions.
    WifiAction {
        /// Wi-Fi state and current connection.
        Status,
        /// Turn Wi-Fi on.
        Enable,
        /// Turn Wi-Fi off.
        Disable,
        /// Scan for networks.
        Scan,
    }
);
actions!(
    /// `bluetooth_automation` actions.
    BluetoothAction {
        /// Bluetooth state.
        Status,
        /// Turn Bluetooth on.
        Enable,
        /// Turn Bluetooth off.
        Disable,
        /// Bonded devices.
        PairedDevices,
    }
);
actions!(
    /// `audio_automation` actions.
    AudioAction {
        /// Read one stream's volume.
        GetVolume {
            /// The stream.
            stream: Stream,
        },
        /// Set one stream's volume, in percent of its range.
        SetVolume {
            /// The stream.
            stream: Stream,
            /// 0–100.
            level: u8,
        },
        /// Mute a stream (music by default).
        Mute {
            /// The stream.
            stream: Option<Stream>,
        },
        /// Unmute a stream (music by default).
        Unmute {
            /// The stream.
            stream: Option<Stream>,
        },
        /// Set the ringer mode.
        RingerMode {
            /// The mode.
            mode: RingerMode,
        },
    }
);
actions!(
    /// `device_state` actions.
    DeviceStateAction {
        /// Screen, power and power-save state.
        Status,
        /// Wake the screen.
        ScreenOn,
        /// Turn the screen off.
        ScreenOff,
        /// Battery saver on or off.
        PowerSave {
            /// Whether battery saver should be on.
            enabled: bool,
        },
    }
);
actions!(
    /// `screen_control` actions.
    ScreenAction {
        /// Brightness, auto brightness, timeout, screen state.
        Status,
        /// Set the brightness.
        SetBrightness {
            /// 0–255.
            level: u8,
        },
        /// Automatic brightness on or off.
        AutoBrightness {
            /// Whether automatic brightness should be on.
            enabled: bool,
        },
        /// Set the screen-off timeout.
        SetTimeout {
            /// Milliseconds.
            ms: u32,
        },
        /// Wake the screen.
        Wake,
    }
);
actions!(
    /// `airplane_mode` actions.
    AirplaneModeAction {
        /// Whether airplane mode is on.
        Status,
        /// Turn airplane mode on.
        Enable,
        /// Turn airplane mode off.
        Disable,
    }
);
actions!(
    /// `motion_detection` actions.
    MotionAction {
        /// Accelerometer and gyroscope readings.
        CurrentMotion,
        /// Screen rotation.
        Orientation,
    }
);
actions!(
    /// `environmental_sensors` actions.
    EnvironmentAction {
        /// Light, pressure, temperature, humidity.
        AmbientConditions,
        /// Proximity sensor.
        Proximity,
    }
);
actions!(
    /// `camera_control` actions.
    CameraAction {
        /// Cameras and which way they face.
        CameraInfo,
        /// Take a photo (companion app).
        TakePhoto {
            /// File name for the photo.
            filename: Option<String>,
        },
    }
);
actions!(
    /// `media_control` actions.
    MediaAction {
        /// Media sessions and what is playing.
        Status,
        /// Play.
        Play,
        /// Pause.
        Pause,
        /// Next track.
        Next,
        /// Previous track.
        Previous,
        /// Stop.
        Stop,
        /// Open an http(s) URL for playback.
        PlayUrl {
            /// The URL.
            url: String,
        },
    }
);

/// A validated, typed request for one service action.
///
/// Build it with [`crate::Catalogue::parse`]; the variant names the service,
/// the inner enum the action and its parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)] // reason: each variant is documented by its inner enum.
pub enum Command {
    Battery(BatteryAction),
    Network(NetworkAction),
    SystemInfo(SystemInfoAction),
    Location(LocationAction),
    AppLauncher(AppLauncherAction),
    AppList(AppListAction),
    Wifi(WifiAction),
    Bluetooth(BluetoothAction),
    Audio(AudioAction),
    DeviceState(DeviceStateAction),
    Screen(ScreenAction),
    AirplaneMode(AirplaneModeAction),
    Motion(MotionAction),
    Environment(EnvironmentAction),
    Camera(CameraAction),
    Media(MediaAction),
}

impl Command {
    /// The service id this command belongs to.
    pub fn service_id(&self) -> &'static str {
        match self {
            Self::Battery(_) => "battery",
            Self::Network(_) => "network",
            Self::SystemInfo(_) => "system_info",
            Self::Location(_) => "location",
            Self::AppLauncher(_) => "app_launcher",
            Self::AppList(_) => "app_list",
            Self::Wifi(_) => "wifi_automation",
            Self::Bluetooth(_) => "bluetooth_automation",
            Self::Audio(_) => "audio_automation",
            Self::DeviceState(_) => "device_state",
            Self::Screen(_) => "screen_control",
            Self::AirplaneMode(_) => "airplane_mode",
            Self::Motion(_) => "motion_detection",
            Self::Environment(_) => "environmental_sensors",
            Self::Camera(_) => "camera_control",
            Self::Media(_) => "media_control",
        }
    }

    fn inner_json(&self) -> Value {
        let value = match self {
            Self::Battery(a) => serde_json::to_value(a),
            Self::Network(a) => serde_json::to_value(a),
            Self::SystemInfo(a) => serde_json::to_value(a),
            Self::Location(a) => serde_json::to_value(a),
            Self::AppLauncher(a) => serde_json::to_value(a),
            Self::AppList(a) => serde_json::to_value(a),
            Self::Wifi(a) => serde_json::to_value(a),
            Self::Bluetooth(a) => serde_json::to_value(a),
            Self::Audio(a) => serde_json::to_value(a),
            Self::DeviceState(a) => serde_json::to_value(a),
            Self::Screen(a) => serde_json::to_value(a),
            Self::AirplaneMode(a) => serde_json::to_value(a),
            Self::Motion(a) => serde_json::to_value(a),
            Self::Environment(a) => serde_json::to_value(a),
            Self::Camera(a) => serde_json::to_value(a),
            Self::Media(a) => serde_json::to_value(a),
        };
        // Serializing plain enums of strings, integers and booleans cannot fail.
        value.unwrap_or(Value::Null)
    }

    /// The action name, e.g. `set_volume`.
    pub fn action_name(&self) -> String {
        self.inner_json()["action"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// The parameters as a JSON object, with absent optional parameters left out.
    pub fn params_json(&self) -> Value {
        let mut params = match self.inner_json().get_mut("params") {
            Some(p) => p.take(),
            None => Value::Object(Default::default()),
        };
        if let Some(obj) = params.as_object_mut() {
            obj.retain(|_, v| !v.is_null());
        }
        params
    }

    /// Build the typed command for `service_id` from `{"action", "params"}`
    /// JSON that has already been validated against the catalogue's schema.
    pub(crate) fn from_validated(service_id: &str, tagged: Value) -> serde_json::Result<Self> {
        use serde_json::from_value as v;
        Ok(match service_id {
            "battery" => Self::Battery(v(tagged)?),
            "network" => Self::Network(v(tagged)?),
            "system_info" => Self::SystemInfo(v(tagged)?),
            "location" => Self::Location(v(tagged)?),
            "app_launcher" => Self::AppLauncher(v(tagged)?),
            "app_list" => Self::AppList(v(tagged)?),
            "wifi_automation" => Self::Wifi(v(tagged)?),
            "bluetooth_automation" => Self::Bluetooth(v(tagged)?),
            "audio_automation" => Self::Audio(v(tagged)?),
            "device_state" => Self::DeviceState(v(tagged)?),
            "screen_control" => Self::Screen(v(tagged)?),
            "airplane_mode" => Self::AirplaneMode(v(tagged)?),
            "motion_detection" => Self::Motion(v(tagged)?),
            "environmental_sensors" => Self::Environment(v(tagged)?),
            "camera_control" => Self::Camera(v(tagged)?),
            "media_control" => Self::Media(v(tagged)?),
            other => {
                return Err(serde::de::Error::custom(format!(
                    "no typed command for service {other}"
                )));
            }
        })
    }
}
