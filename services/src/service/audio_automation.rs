//! The `audio_automation` service.

use super::*;

actions!(
    /// `audio_automation` actions.
    AudioAction {
        GetVolume = "get_volume" (Low, reads)
            "Read one stream's volume in percent (0-100) and its mute state."
        {
            /// The audio stream.
            stream: Stream,
        }
        -> AudioVolume
        example(Self::GetVolume { stream: Stream::Music }),
        SetVolume = "set_volume" (Low, changes)
            "Set one stream's volume in percent (0-100) of its range."
        {
            /// The audio stream.
            stream: Stream,
            /// Volume in percent.
            level: u8 = Schema::integer("", Some(0), Some(100)),
        }
        -> AudioVolume
        example(Self::SetVolume { stream: Stream::Music, level: 40 }),
        Mute = "mute" (Medium, changes)
            "Mute a stream (music unless given); unmute restores its level."
        {
            /// The stream.
            stream: Option<Stream> = muted_stream(),
        }
        -> AudioMute
        example(Self::Mute { stream: Some(Stream::Music) }),
        Unmute = "unmute" (Low, changes)
            "Unmute a stream (music unless given), restoring the level it had."
        {
            /// The stream.
            stream: Option<Stream> = muted_stream(),
        }
        -> AudioMute
        example(Self::Unmute { stream: Some(Stream::Music) }),
        RingerMode = "ringer_mode" (Medium, changes) "Set the ringer: normal, vibrate or silent." {
            /// Ringer mode.
            mode: RingerMode,
        }
        -> Ringer
        example(Self::RingerMode { mode: RingerMode::Vibrate }),
    }
);

records! {
    /// What the volume actions answer: one stream's volume.
    AudioVolume {
        /// The stream, e.g. `music`.
        stream: Stream,
        /// The volume in percent of the stream's range.
        level: i64 = Schema::integer(
            "volume in percent of the stream's range",
            Some(0),
            Some(100),
        ),
        /// Android's volume index.
        index: i64,
        /// The lowest index.
        min: i64,
        /// The highest index.
        max: i64,
        /// Whether the stream is muted.
        muted: bool,
    }

    /// What `mute` and `unmute` answer.
    AudioMute {
        /// The stream, e.g. `music`.
        stream: Stream,
        /// Whether the stream is now muted.
        muted: bool,
        /// The volume in percent after the change.
        level: i64 = Schema::integer("", Some(0), Some(100)),
    }

    /// What `audio_automation.ringer_mode` answers.
    Ringer {
        /// The ringer mode now set.
        mode: RingerMode,
    }
}

/// The stream `mute` and `unmute` act on.
fn muted_stream() -> Schema {
    stream_schema("stream (default music)")
}

pub(super) fn spec() -> ServiceSpec {
    ServiceSpec {
        node_type: "audioAutomation",
        id: "audio_automation",
        description: "Volume per stream, mute and ringer mode.",
        actions: AudioAction::specs(),
        state: Some(|| {
            Command::Audio(AudioAction::GetVolume {
                stream: Stream::Music,
            })
        }),
        home_assistant: vec![
            ha_sensor(
                "media_volume_level",
                "Media volume level",
                "level",
                None,
                Some("%"),
            ),
            HaEntity {
                object_id: "media_volume",
                name: "Media volume",
                kind: HaKind::Number {
                    field: "level",
                    max: 100,
                    step: HaStep::PhoneSteps,
                    unit: Some("%"),
                    // Within 0..=100 by construction of the slider.
                    set: |level| {
                        Command::Audio(AudioAction::SetVolume {
                            stream: Stream::Music,
                            level: level.min(100) as u8,
                        })
                    },
                },
            },
        ],
        companion_event: None,
    }
}
