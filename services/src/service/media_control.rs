//! The `media_control` service.

use super::*;

actions!(
    /// `media_control` actions.
    MediaAction {
        /// Media sessions and what is playing.
        Status = "status",
        /// Play.
        Play = "play",
        /// Pause.
        Pause = "pause",
        /// Next track.
        Next = "next",
        /// Previous track.
        Previous = "previous",
        /// Stop.
        Stop = "stop",
        /// Open an http(s) URL for playback.
        PlayUrl = "play_url" {
            /// The URL.
            url: String,
        },
    }
);

pub(super) fn spec() -> ServiceSpec {
    ServiceSpec {
        node_type: "mediaControl",
        id: "media_control",
        description: "Media playback.",
        actions: vec![
            action(
                "status",
                Risk::Low,
                false,
                "Read media sessions: which app is playing, state, title and artist.",
            )
            .returns(vec![
                list_of(
                    "sessions",
                    "",
                    vec![
                        req("package", Schema::string("")),
                        req("active", Schema::boolean("")),
                        req(
                            "state",
                            Schema::string("playing, paused, stopped, buffering, none"),
                        ),
                        opt("title", Schema::string("")),
                        opt("artist", Schema::string("")),
                    ],
                ),
                req("playing", Schema::boolean("whether any session is playing")),
            ]),
            media_key("play", "Resume or start playback."),
            media_key("pause", "Pause playback."),
            media_key("next", "Skip to the next track."),
            media_key("previous", "Go back to the previous track."),
            media_key("stop", "Stop playback."),
            action(
                "play_url",
                Risk::Medium,
                true,
                "Open an http or https URL for playback in the phone's default app.",
            )
            .param(
                "url",
                true,
                Schema::pattern(
                    "http(s) URL; non-ASCII characters percent-encoded",
                    URL_PATTERN,
                    2048,
                ),
            )
            .returns(vec![
                req("url", Schema::string("")),
                req("status", Schema::string("")),
            ])
            .example(json!({"url": "https://example.org/stream.mp3"})),
        ],
        state: Some(|| Command::Media(MediaAction::Status)),
        home_assistant: vec![
            ha_button("media_play", "Play", || Command::Media(MediaAction::Play)),
            ha_button("media_pause", "Pause", || {
                Command::Media(MediaAction::Pause)
            }),
        ],
        companion_event: Some("media"),
    }
}
