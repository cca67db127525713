//! The `audio_automation` service.

use super::*;

actions!(
    /// `audio_automation` actions.
    AudioAction {
        GetVolume = "get_volume" (Low, reads)
            "Read one stream's volume in percent (0-100) and its mute state."
        {
            /// The stream.
            stream: Stream = stream_schema("the audio stream"),
        }
        returns(volume())
        example(Self::GetVolume { stream: Stream::Music }),
        SetVolume = "set_volume" (Low, changes)
            "Set one stream's volume in percent (0-100) of its range."
        {
            /// The stream.
            stream: Stream = stream_schema("the audio stream"),
            /// 0–100.
            level: u8 = Schema::integer("volume in percent", Some(0), Some(100)),
        }
        returns(volume())
        example(Self::SetVolume { stream: Stream::Music, level: 40 }),
        Mute = "mute" (Medium, changes)
            "Mute a stream (music unless given); unmute restores its level."
        {
            /// The stream.
            stream: Option<Stream> = muted_stream(),
        }
        returns(muted())
        example(Self::Mute { stream: Some(Stream::Music) }),
        Unmute = "unmute" (Low, changes)
            "Unmute a stream (music unless given), restoring the level it had."
        {
            /// The stream.
            stream: Option<Stream> = muted_stream(),
        }
        returns(muted())
        example(Self::Unmute { stream: Some(Stream::Music) }),
        RingerMode = "ringer_mode" (Medium, changes) "Set the ringer: normal, vibrate or silent." {
            /// The mode.
            mode: RingerMode =
                Schema::enumeration("ringer mode", &RingerMode::ALL.map(RingerMode::as_str)),
        }
        returns(vec![req(
            "mode",
            Schema::enumeration("", &RingerMode::ALL.map(RingerMode::as_str)),
        )])
        example(Self::RingerMode { mode: RingerMode::Vibrate }),
    }
);

/// What the volume actions answer.
fn volume() -> Vec<Property> {
    vec![
        req("stream", stream_schema("")),
        req(
            "level",
            Schema::integer(
                "volume in percent of the stream's range",
                Some(0),
                Some(100),
            ),
        ),
        req(
            "index",
            Schema::integer("Android's volume index", None, None),
        ),
        req("min", Schema::integer("", None, None)),
        req("max", Schema::integer("", None, None)),
        req("muted", Schema::boolean("")),
    ]
}

/// The stream `mute` and `unmute` act on.
fn muted_stream() -> Schema {
    stream_schema("stream (default music)")
}

/// What `mute` and `unmute` answer.
fn muted() -> Vec<Property> {
    vec![
        req("stream", stream_schema("")),
        req("muted", Schema::boolean("")),
        req(
            "level",
            Schema::integer("volume in percent after the change", Some(0), Some(100)),
        ),
    ]
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
