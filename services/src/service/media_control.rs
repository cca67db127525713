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
            /// An http(s) URL; non-ASCII characters percent-encoded.
            url: String = Schema::pattern(
                "",
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
        sessions: Vec<MediaSession>,
        /// Whether any session is playing.
        playing: bool,
    }

    /// One media session.
    MediaSession {
        /// The package that owns the session.
        package: String,
        /// The session is active (accepts media buttons and transport controls).
        active: bool,
        /// `playing`, `paused`, `stopped`, `buffering`, `none`, `error`,
        /// `connecting`, `fast_forwarding`, `rewinding`, `skipping_to_previous`,
        /// `skipping_to_next`, `skipping_to_queue_item`, or `unknown`.
        state: String,
        /// Title of the current item.
        title: Option<String>,
        /// Artist (the description's subtitle) of the current item.
        artist: Option<String>,
    }

    /// What the media key actions answer.
    MediaKey {
        /// The media key sent, e.g. `play`.
        dispatched: String,
    }

    /// What `media_control.play_url` answers.
    PlayUrl {
        /// The URL opened.
        url: String,
        /// `ok`, `timeout`, or whatever `am start` printed as `Status:`.
        status: String,
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
