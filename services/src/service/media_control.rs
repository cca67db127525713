//! The `media_control` service.

use super::*;

actions!(
    /// `media_control` actions.
    MediaAction {
        Status = "status" (Low, reads)
            "Read media sessions: which app is playing, state, title and artist."
        returns(vec![
            list_of(
                "sessions",
                "",
                vec![
                    req("package", Schema::string("")),
                    req("active", Schema::boolean("")),
                    req("state", Schema::string("playing, paused, stopped, buffering, none")),
                    opt("title", Schema::string("")),
                    opt("artist", Schema::string("")),
                ],
            ),
            req("playing", Schema::boolean("whether any session is playing")),
        ]),
        Play = "play" (Low, changes) "Resume or start playback." returns(dispatched()),
        Pause = "pause" (Low, changes) "Pause playback." returns(dispatched()),
        Next = "next" (Low, changes) "Skip to the next track." returns(dispatched()),
        Previous = "previous" (Low, changes) "Go back to the previous track." returns(dispatched()),
        Stop = "stop" (Low, changes) "Stop playback." returns(dispatched()),
        PlayUrl = "play_url" (Medium, changes)
            "Open an http or https URL for playback in the phone's default app."
        {
            /// The URL.
            url: String = Schema::pattern(
                "http(s) URL; non-ASCII characters percent-encoded",
                URL_PATTERN,
                2048,
            ),
        }
        returns(vec![
            req("url", Schema::string("")),
            req("status", Schema::string("")),
        ])
        example(Self::PlayUrl { url: "https://example.org/stream.mp3".into() }),
    }
);

pub(super) fn spec() -> ServiceSpec {
    ServiceSpec {
        node_type: "mediaControl",
        id: "media_control",
        description: "Media playback.",
        actions: MediaAction::specs(),
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
