//! The `media_control` service over ADB: media keys through `cmd
//! media_session dispatch`, a URL played through a view intent.
//!
//! Media sessions: `dumpsys media_session`.
//!
//! Each session record prints indented `key=value` lines, starting (after the
//! owner line) with `package=`:
//!
//! ```text
//!     package=com.spotify.music
//!     active=true
//!     state=PlaybackState {state=3, position=95000, buffered position=0, speed=1.0, …}
//!     metadata: size=9, description=Song, Artist, Album
//! ```
//!
//! Android 14+ may print the state as `state=PLAYING(3)`; API 24 prints
//! `metadata:size=…` without the space. The description is
//! `MediaDescription.toString()`, i.e. title, subtitle and description joined
//! by `, `: a title that itself contains `, ` cannot be told apart.

use super::*;
use crate::adb::parse::ParseError;
use crate::adb::parse::text::{non_placeholder, parse_bool, reject_device_error};
use droidwarden_services::{MediaAction, MediaKey, MediaStatus, PlayUrl};

pub(super) async fn run(sh: &dyn Shell, action: &MediaAction) -> Result<Value, BridgeError> {
    let key = match action {
        MediaAction::Status => {
            let sessions = read(sh, &["dumpsys", "media_session"], media_sessions).await?;
            let playing = sessions.iter().any(|s| s.state == "playing");
            return answer(MediaStatus { sessions, playing });
        }
        MediaAction::PlayUrl { url } => {
            let started = super::intents::view(sh, url, None).await?;
            return answer(PlayUrl {
                url: url.clone(),
                status: started.status,
            });
        }
        MediaAction::Play => "play",
        MediaAction::Pause => "pause",
        MediaAction::Next => "next",
        MediaAction::Previous => "previous",
        MediaAction::Stop => "stop",
    };
    ok(sh, &["cmd", "media_session", "dispatch", key]).await?;
    answer(MediaKey {
        dispatched: key.to_owned(),
    })
}

pub use droidwarden_services::MediaSession;

/// Parses `dumpsys media_session` into its sessions, in printed order.
///
/// # Errors
/// [`ParseError::MissingField`] when the output has no session records and
/// is not a media session dump at all, [`ParseError::Device`] for a device
/// error message.
pub fn media_sessions(output: &str) -> Result<Vec<MediaSession>, ParseError> {
    reject_device_error(output)?;
    let mut sessions: Vec<MediaSession> = Vec::new();
    for line in output.lines().map(str::trim) {
        if let Some(package) = line.strip_prefix("package=") {
            sessions.push(MediaSession {
                package: package.trim().to_owned(),
                active: false,
                state: "none".to_owned(),
                title: None,
                artist: None,
            });
        } else if let Some(session) = sessions.last_mut() {
            session_field(session, line);
        }
    }
    let is_dump = output.contains("MEDIA SESSION SERVICE") || output.contains("Sessions Stack");
    if sessions.is_empty() && !is_dump {
        return Err(ParseError::MissingField {
            command: "dumpsys media_session",
            field: "package",
        });
    }
    Ok(sessions)
}

fn session_field(session: &mut MediaSession, line: &str) {
    if let Some(active) = line.strip_prefix("active=") {
        session.active = parse_bool(active).unwrap_or(false);
    } else if let Some(state) = line.strip_prefix("state=") {
        session.state = playback_state(state).to_owned();
    } else if let Some(metadata) = line.strip_prefix("metadata:") {
        let (title, artist) = description(metadata);
        session.title = title;
        session.artist = artist;
    }
}

/// `null` → `none`; `PlaybackState {state=3, …}` or `{state=PLAYING(3), …}` → `playing`.
fn playback_state(value: &str) -> &'static str {
    let Some((_, rest)) = value.split_once("{state=") else {
        return if value.trim() == "null" {
            "none"
        } else {
            "unknown"
        };
    };
    let raw = rest.split([',', '}']).next().unwrap_or("").trim();
    let code = raw
        .split_once('(')
        .map_or(raw, |(_, n)| n.trim_end_matches(')'));
    match code.parse::<i64>() {
        Ok(n) => state_name(n),
        Err(_) => named_state(raw),
    }
}

/// `PlaybackState.STATE_*`.
fn state_name(code: i64) -> &'static str {
    match code {
        0 => "none",
        1 => "stopped",
        2 => "paused",
        3 => "playing",
        4 => "fast_forwarding",
        5 => "rewinding",
        6 => "buffering",
        7 => "error",
        8 => "connecting",
        9 => "skipping_to_previous",
        10 => "skipping_to_next",
        11 => "skipping_to_queue_item",
        _ => "unknown",
    }
}

/// A state printed by name only (`PLAYING`).
fn named_state(name: &str) -> &'static str {
    let known = [
        "none",
        "stopped",
        "paused",
        "playing",
        "fast_forwarding",
        "rewinding",
        "buffering",
        "error",
        "connecting",
        "skipping_to_previous",
        "skipping_to_next",
        "skipping_to_queue_item",
    ];
    let lower = name.to_ascii_lowercase();
    known.into_iter().find(|k| *k == lower).unwrap_or("unknown")
}

/// ` size=3, description=Title, Artist, Album` → (title, artist).
fn description(metadata: &str) -> (Option<String>, Option<String>) {
    let Some((_, desc)) = metadata.split_once("description=") else {
        return (None, None);
    };
    let mut parts = desc.split(", ");
    let title = parts.next().and_then(non_placeholder);
    let artist = parts.next().and_then(non_placeholder);
    (title, artist)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adb::parse::failure;

    fn session(
        package: &str,
        active: bool,
        state: &str,
        title: Option<&str>,
        artist: Option<&str>,
    ) -> MediaSession {
        MediaSession {
            package: package.into(),
            active,
            state: state.into(),
            title: title.map(Into::into),
            artist: artist.map(Into::into),
        }
    }

    #[test]
    fn fixture_telecom_session_only() {
        let text = fixture!("dumpsys-media_session/adbjsoncli-emulator-17.txt");
        assert_eq!(
            media_sessions(text),
            Ok(vec![session(
                "com.android.server.telecom",
                false,
                "none",
                None,
                None
            )])
        );
    }

    #[test]
    fn playing_and_paused_sessions() {
        let text = "\
MEDIA SESSION SERVICE (dumpsys media_session)

  Sessions Stack - have 3 sessions:
    spotify-media-session com.spotify.music/spotify-media-session (userId=0)
      ownerPid=4242, ownerUid=10123, userId=0
      package=com.spotify.music
      launchIntent=PendingIntent{1a2b3c4: PendingIntentRecord{5d6e7f8 com.spotify.music startActivity}}
      active=true
      flags=3
      state=PlaybackState {state=3, position=95000, buffered position=0, speed=1.0, updated=1452600117, actions=7339771, custom actions=[], active item id=5, error=null}
      metadata: size=9, description=Bohemian Rhapsody, Queen, A Night at the Opera
    androidx.media3.session.id. com.google.android.youtube/androidx.media3.session.id. (userId=0)
      package=com.google.android.youtube
      active=false
      state=PlaybackState {state=PAUSED(2), position=12000, buffered position=15000, speed=0.0}
      metadata:size=5, description=Some video, null, null
    Netflix media session com.netflix.ninja/Netflix media session (userId=0)
      package=com.netflix.ninja
      active=false
      state=PlaybackState {state=6, position=0}
      metadata: null
";
        assert_eq!(
            media_sessions(text),
            Ok(vec![
                session(
                    "com.spotify.music",
                    true,
                    "playing",
                    Some("Bohemian Rhapsody"),
                    Some("Queen")
                ),
                session(
                    "com.google.android.youtube",
                    false,
                    "paused",
                    Some("Some video"),
                    None
                ),
                session("com.netflix.ninja", false, "buffering", None, None),
            ])
        );
    }

    #[test]
    fn states_and_errors() {
        for (value, expected) in [
            ("null", "none"),
            ("PlaybackState {state=1, position=0}", "stopped"),
            ("PlaybackState {state=0}", "none"),
            ("PlaybackState {state=PLAYING, position=0}", "playing"),
            ("PlaybackState {state=99}", "unknown"),
            ("garbage", "unknown"),
        ] {
            assert_eq!(playback_state(value), expected, "{value}");
        }
        assert_eq!(failure(media_sessions("hello")), "missing_field");
        assert_eq!(
            media_sessions("  Sessions Stack - have 0 sessions:\n"),
            Ok(vec![])
        );
    }

    #[test]
    fn reads_any_text_without_panicking() {
        crate::adb::parse::tests::each_sample(|text| {
            let _ = media_sessions(text);
        });
    }
}
