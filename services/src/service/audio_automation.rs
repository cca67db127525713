//! The `audio_automation` service.

use super::*;

actions!(
    /// `audio_automation` actions.
    AudioAction {
        /// Read one stream's volume.
        GetVolume = "get_volume" {
            /// The stream.
            stream: Stream,
        },
        /// Set one stream's volume, in percent of its range.
        SetVolume = "set_volume" {
            /// The stream.
            stream: Stream,
            /// 0–100.
            level: u8,
        },
        /// Mute a stream (music by default).
        Mute = "mute" {
            /// The stream.
            stream: Option<Stream>,
        },
        /// Unmute a stream (music by default).
        Unmute = "unmute" {
            /// The stream.
            stream: Option<Stream>,
        },
        /// Set the ringer mode.
        RingerMode = "ringer_mode" {
            /// The mode.
            mode: RingerMode,
        },
    }
);

pub(super) fn spec() -> ServiceSpec {
    ServiceSpec {
        node_type: "audioAutomation",
        id: "audio_automation",
        description: "Volume per stream, mute and ringer mode.",
        actions: {
            let volume = || {
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
            };
            let mute = |name, risk, description| {
                action(name, risk, true, description)
                    .param("stream", false, stream_schema("stream (default music)"))
                    .returns(vec![
                        req("stream", stream_schema("")),
                        req("muted", Schema::boolean("")),
                        req(
                            "level",
                            Schema::integer(
                                "volume in percent after the change",
                                Some(0),
                                Some(100),
                            ),
                        ),
                    ])
                    .example(json!({"stream": "music"}))
            };
            vec![
                action(
                    "get_volume",
                    Risk::Low,
                    false,
                    "Read one stream's volume in percent (0-100) and its mute state.",
                )
                .param("stream", true, stream_schema("the audio stream"))
                .returns(volume())
                .example(json!({"stream": "music"})),
                action(
                    "set_volume",
                    Risk::Low,
                    true,
                    "Set one stream's volume in percent (0-100) of its range.",
                )
                .param("stream", true, stream_schema("the audio stream"))
                .param(
                    "level",
                    true,
                    Schema::integer("volume in percent", Some(0), Some(100)),
                )
                .returns(volume())
                .example(json!({"stream": "music", "level": 40})),
                mute(
                    "mute",
                    Risk::Medium,
                    "Mute a stream (music unless given); unmute restores its level.",
                ),
                mute(
                    "unmute",
                    Risk::Low,
                    "Unmute a stream (music unless given), restoring the level it had.",
                ),
                action(
                    "ringer_mode",
                    Risk::Medium,
                    true,
                    "Set the ringer: normal, vibrate or silent.",
                )
                .param(
                    "mode",
                    true,
                    Schema::enumeration("ringer mode", &RingerMode::ALL.map(RingerMode::as_str)),
                )
                .returns(vec![req(
                    "mode",
                    Schema::enumeration("", &RingerMode::ALL.map(RingerMode::as_str)),
                )])
                .example(json!({"mode": "vibrate"})),
            ]
        },
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
