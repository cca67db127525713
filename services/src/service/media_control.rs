//! The `media_control` service.

use super::*;

actions!(
    /// `media_control` actions.
    MediaAction {
        Status = "status" (Low, reads)
            "Read media sessions: which app is playing, state, title and artist."
        -> MediaStatus,
        Play = "play" (Low, changes) "Resume or start playback." -> MediaKey,
        Pause = "pause" (Low, changes) "Pause playback." -> MediaKey,
        Next = "next" (Low, changes) "Skip to the next track." -> MediaKey,
        Previous = "previous" (Low, changes) "Go back to the previous track." -> MediaKey,
        Stop = "stop" (Low, changes) "Stop playback." -> MediaKey,
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
        -> PlayUrl
        example(Self::PlayUrl { url: "https://example.org/stream.mp3".into() }),
    }
);

records! {
    /// What `media_control.status` answers, from `dumpsys media_session`.
    MediaStatus {
        /// The media sessions, in printed order.
        sessions: Vec<MediaSession> = list::<MediaSession>(""),
        /// Whether any session is playing.
        playing: bool = Schema::boolean("whether any session is playing"),
    }

    /// One media session.
    MediaSession {
        /// The package that owns the session.
        package: String = Schema::string(""),
        /// The session is active (accepts media buttons and transport controls).
        active: bool = Schema::boolean(""),
        /// `playing`, `paused`, `stopped`, `buffering`, `none`, `error`,
        /// `connecting`, `fast_forwarding`, `rewinding`, `skipping_to_previous`,
        /// `skipping_to_next`, `skipping_to_queue_item`, or `unknown`.
        state: String = Schema::string("playing, paused, stopped, buffering, none"),
        /// Title of the current item.
        title: Option<String> = Schema::string(""),
        /// Artist (the description's subtitle) of the current item.
        artist: Option<String> = Schema::string(""),
    }

    /// What the media key actions answer.
    MediaKey {
        /// The media key sent, e.g. `play`.
        dispatched: String = Schema::string("the media key sent"),
    }

    /// What `media_control.play_url` answers.
    PlayUrl {
        /// The URL opened.
        url: String = Schema::string(""),
        /// `ok`, `timeout`, or whatever `am start` printed as `Status:`.
        status: String = Schema::string(""),
    }
}

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
