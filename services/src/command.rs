//! Parameter types shared by several services' actions. The typed
//! [`Command`](crate::Command) and the action enums live with their services
//! (`crate::service`).

use serde::{Deserialize, Serialize};

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
