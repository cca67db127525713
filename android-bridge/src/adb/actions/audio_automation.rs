//! The `audio_automation` service over ADB: volumes read from `dumpsys
//! audio` and set through `cmd media_session volume`, and the ringer mode.
//!
//! Stream volumes from `dumpsys audio`.
//!
//! Each stream has a block:
//!
//! ```text
//! - STREAM_MUSIC:
//!    Muted: false
//!    Min: 0
//!    Max: 15
//!    streamVolume:9                       (Android 12+ only)
//!    Current: 2 (speaker): 9, 400 (hdmi): 15, 40000000 (default): 15
//!    Devices: hdmi                        (Android 12+: `speaker(2)`)
//! ```
//!
//! A header may read `- STREAM_DTMF (aliased to: STREAM_RING):`. When
//! `streamVolume` is absent the index is the `Current` entry of the device in
//! `Devices`, else of `speaker`, else of `default`. Android 4.x prints
//! `Current:` entries without names (`2: 9, 40000000: 15`) and `Mute count`
//! instead of `Muted`. Newer releases also print volume groups
//! (`- VOLUME GROUP AUDIO_STREAM_MUSIC:`), used when no stream block matches.

use super::*;
use crate::adb::parse::ParseError;
use crate::adb::parse::text::{colon_value, parse_bool, reject_device_error};
use droidwarden_services::{AudioAction, AudioMute, AudioVolume, Ringer, RingerMode, Stream};
use serde::Serialize;

pub(super) async fn run(sh: &dyn Shell, action: &AudioAction) -> Result<Value, BridgeError> {
    match action {
        AudioAction::GetVolume { stream } => answer(volume(sh, *stream).await?),
        AudioAction::SetVolume { stream, level } => {
            let current = volume(sh, *stream).await?;
            set_volume(sh, *stream, index_for(*level, current.min, current.max)).await?;
            answer(volume(sh, *stream).await?)
        }
        AudioAction::Mute { stream } | AudioAction::Unmute { stream } => {
            let stream = stream.unwrap_or(Stream::Music);
            let mute = matches!(action, AudioAction::Mute { .. });
            answer(mute_stream(sh, stream, mute).await?)
        }
        AudioAction::RingerMode { mode } => {
            let arg = match mode {
                RingerMode::Normal => "NORMAL",
                RingerMode::Vibrate => "VIBRATE",
                RingerMode::Silent => "SILENT",
            };
            ok(sh, &["cmd", "audio", "set-ringer-mode", arg]).await?;
            answer(Ringer { mode: *mode })
        }
    }
}

fn percent(index: i64, min: i64, max: i64) -> i64 {
    if max <= min {
        return 0;
    }
    (((index - min) * 100) as f64 / (max - min) as f64).round() as i64
}

fn index_for(level: u8, min: i64, max: i64) -> i64 {
    min + ((i64::from(level) * (max - min)) as f64 / 100.0).round() as i64
}

async fn volume(sh: &dyn Shell, stream: Stream) -> Result<AudioVolume, BridgeError> {
    let v = read(sh, &["dumpsys", "audio"], |out| {
        audio_stream(out, stream.dumpsys_name())
    })
    .await?;
    Ok(AudioVolume {
        stream,
        level: percent(v.index, v.min, v.max),
        index: v.index,
        min: v.min,
        max: v.max,
        muted: v.muted,
    })
}

/// Set `stream`'s volume index (between its min and max).
async fn set_volume(sh: &dyn Shell, stream: Stream, index: i64) -> Result<(), BridgeError> {
    let (id, index) = (stream.android_id().to_string(), index.to_string());
    let argv = [
        "cmd",
        "media_session",
        "volume",
        "--stream",
        &id,
        "--set",
        &index,
    ];
    ok(sh, &argv).await.map(drop)
}

/// Android's shell volume tool only knows `--adj raise|same|lower` (it
/// rejects `mute`), so muting sets the stream to its minimum and remembers
/// the level it had; unmuting restores that level, or half the range when
/// nothing was remembered (the daemon was restarted, or the phone was muted
/// by hand).
async fn mute_stream(sh: &dyn Shell, stream: Stream, mute: bool) -> Result<AudioMute, BridgeError> {
    let AudioVolume {
        index, min, max, ..
    } = volume(sh, stream).await?;
    let id = stream.android_id();
    let target = {
        let mut saved = sh.muted_levels().lock().unwrap_or_else(|e| e.into_inner());
        if mute {
            if index > min {
                saved.insert(id, index);
            }
            Some(min)
        } else {
            match saved.remove(&id) {
                Some(level) => Some(level),
                None if index <= min => Some(index_for(50, min, max)),
                None => None,
            }
        }
    };
    if let Some(target) = target.filter(|t| *t != index) {
        set_volume(sh, stream, target).await?;
    }
    let after = volume(sh, stream).await?;
    Ok(AudioMute {
        stream: after.stream,
        muted: mute,
        level: after.level,
    })
}

const COMMAND: &str = "dumpsys audio";

/// The volume of one audio stream.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StreamVolume {
    /// The stream, e.g. `STREAM_MUSIC`.
    pub stream: String,
    /// The current volume index.
    pub index: i64,
    /// The lowest index.
    pub min: i64,
    /// The highest index.
    pub max: i64,
    /// The stream is muted.
    pub muted: bool,
}

/// Parses the volume of `stream` (`STREAM_MUSIC`, or just `music`) from
/// `dumpsys audio`.
///
/// # Errors
/// [`ParseError::NotFound`] when the output has no block for the stream,
/// [`ParseError::MissingField`] when the block lacks `Min`, `Max` or a
/// readable current index, and [`ParseError::Device`] for a device error.
pub fn audio_stream(output: &str, stream: &str) -> Result<StreamVolume, ParseError> {
    reject_device_error(output)?;
    let stream = normalise(stream);
    let blocks = blocks(output);
    let block = blocks
        .iter()
        .find(|b| b.name == stream)
        .or_else(|| blocks.iter().find(|b| is_group_for(b, &stream)))
        .ok_or_else(|| ParseError::NotFound {
            what: format!("audio stream {stream}"),
        })?;
    let field = |key: &'static str| {
        block
            .lines
            .iter()
            .find_map(|l| colon_value(l, key))
            .ok_or(ParseError::MissingField {
                command: COMMAND,
                field: key,
            })
            .and_then(|v| {
                v.parse::<i64>()
                    .map_err(|_| ParseError::malformed(COMMAND, key, v))
            })
    };
    Ok(StreamVolume {
        min: field("Min")?,
        max: field("Max")?,
        index: index(block)?,
        muted: muted(block),
        stream,
    })
}

/// `music` / `stream_music` → `STREAM_MUSIC`.
fn normalise(stream: &str) -> String {
    let upper = stream.trim().to_ascii_uppercase();
    if upper.starts_with("STREAM_") {
        upper
    } else {
        format!("STREAM_{upper}")
    }
}

/// A `- NAME:` header and the indented lines under it.
#[derive(Debug)]
struct Block<'a> {
    name: String,
    lines: Vec<&'a str>,
}

fn blocks(output: &str) -> Vec<Block<'_>> {
    let mut blocks: Vec<Block<'_>> = Vec::new();
    let mut open = false;
    for line in output.lines() {
        if let Some(name) = header(line) {
            blocks.push(Block {
                name,
                lines: Vec::new(),
            });
            open = true;
        } else if line.trim().is_empty() || !line.starts_with(char::is_whitespace) {
            open = false;
        } else if let (true, Some(block)) = (open, blocks.last_mut()) {
            block.lines.push(line);
        }
    }
    blocks
}

/// `- STREAM_DTMF (aliased to: STREAM_RING):` → `STREAM_DTMF`;
/// `- VOLUME GROUP AUDIO_STREAM_MUSIC:` → `VOLUME GROUP AUDIO_STREAM_MUSIC`.
fn header(line: &str) -> Option<String> {
    let rest = line
        .trim_start()
        .strip_prefix("- ")?
        .trim_end()
        .strip_suffix(':')?;
    let name = rest.split(" (").next().unwrap_or(rest).trim();
    (!name.is_empty()).then(|| name.to_owned())
}

fn is_group_for(block: &Block<'_>, stream: &str) -> bool {
    let Some(group) = block.name.strip_prefix("VOLUME GROUP ") else {
        return false;
    };
    group.strip_prefix("AUDIO_") == Some(stream)
        || block
            .lines
            .iter()
            .filter_map(|l| colon_value(l, "Streams"))
            .any(|s| s.split_whitespace().any(|t| t == stream))
}

fn muted(block: &Block<'_>) -> bool {
    let value = |key: &str| block.lines.iter().find_map(|l| colon_value(l, key));
    match (value("Muted"), value("Mute count")) {
        (Some(m), _) => parse_bool(m).unwrap_or(false),
        (None, Some(count)) => count.parse::<i64>().is_ok_and(|c| c > 0),
        (None, None) => false,
    }
}

fn index(block: &Block<'_>) -> Result<i64, ParseError> {
    let value = |key: &str| block.lines.iter().find_map(|l| colon_value(l, key));
    if let Some(v) = value("streamVolume").and_then(|v| v.parse().ok()) {
        return Ok(v);
    }
    let current = value("Current").map(current_entries).unwrap_or_default();
    let devices = value("Devices").unwrap_or("");
    devices
        .split(',')
        .map(|d| d.split('(').next().unwrap_or(d).trim())
        .chain(["speaker", "default"])
        .find_map(|device| lookup(&current, device))
        .ok_or(ParseError::MissingField {
            command: COMMAND,
            field: "Current",
        })
}

/// A `Current:` entry: device type in hex, optional device name, index.
#[derive(Debug)]
struct Entry<'a> {
    code: &'a str,
    name: Option<&'a str>,
    index: i64,
}

/// `2 (speaker): 9, 40000000 (default): 15` or, on Android 4.x, `2: 9, 40000000: 15`.
fn current_entries(value: &str) -> Vec<Entry<'_>> {
    value
        .split(',')
        .filter_map(|part| {
            let (key, index) = part.rsplit_once(':')?;
            let index = index.trim().parse().ok()?;
            let key = key.trim();
            let (code, name) = match key.split_once(" (") {
                Some((code, name)) => (code.trim(), Some(name.trim_end_matches(')').trim())),
                None => (key, None),
            };
            Some(Entry { code, name, index })
        })
        .collect()
}

/// The entry for `device`, by name, or by `AudioSystem.DEVICE_OUT_*` code when
/// the entries carry no names.
fn lookup(entries: &[Entry<'_>], device: &str) -> Option<i64> {
    if let Some(e) = entries.iter().find(|e| e.name == Some(device)) {
        return Some(e.index);
    }
    let code = match device {
        "earpiece" => "1",
        "speaker" => "2",
        "headset" => "4",
        "headphone" => "8",
        "bt_a2dp" => "80",
        "hdmi" => "400",
        "default" => "40000000",
        _ => return None,
    };
    entries
        .iter()
        .find(|e| e.name.is_none() && e.code == code)
        .map(|e| e.index)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adb::parse::failure;

    fn volume(stream: &str, index: i64, min: i64, max: i64) -> StreamVolume {
        StreamVolume {
            stream: stream.into(),
            index,
            min,
            max,
            muted: false,
        }
    }

    #[test]
    fn shield_grep_fixture_uses_the_hdmi_entry() {
        let text = fixture!(
            "dumpsys-audio-grep-stream-music/python-androidtv-issue148-shield-unknown.txt"
        );
        assert_eq!(
            audio_stream(text, "STREAM_MUSIC"),
            Ok(volume("STREAM_MUSIC", 15, 0, 15))
        );
        // `Devices: speaker, hdmi` → the speaker entry.
        assert_eq!(
            audio_stream(text, "alarm"),
            Ok(volume("STREAM_ALARM", 4, 1, 7))
        );
        // The header cut off by grep -A 12 has no Min/Max.
        assert_eq!(
            failure(audio_stream(text, "STREAM_NOTIFICATION")),
            "missing_field"
        );
    }

    #[test]
    fn redroid_fixture_prefers_stream_volume() {
        let text = fixture!("dumpsys-audio/redroid-rockchip-issue17-streams-fragment.txt");
        let cases = [
            (
                "STREAM_BLUETOOTH_SCO",
                volume("STREAM_BLUETOOTH_SCO", 7, 0, 15),
            ),
            (
                "STREAM_SYSTEM_ENFORCED",
                volume("STREAM_SYSTEM_ENFORCED", 5, 0, 7),
            ),
            ("STREAM_DTMF", volume("STREAM_DTMF", 5, 0, 15)),
            ("STREAM_TTS", volume("STREAM_TTS", 15, 0, 15)),
            (
                "STREAM_ACCESSIBILITY",
                volume("STREAM_ACCESSIBILITY", 15, 1, 15),
            ),
        ];
        for (stream, expected) in cases {
            assert_eq!(audio_stream(text, stream), Ok(expected), "{stream}");
        }
        // `(aliased to: STREAM_MUSIC)` must not pass for a STREAM_MUSIC block.
        assert_eq!(
            audio_stream(text, "STREAM_MUSIC"),
            Err(ParseError::NotFound {
                what: "audio stream STREAM_MUSIC".into()
            })
        );
    }

    #[test]
    fn graphene_fixture_volume_groups() {
        let text = fixture!("dumpsys-audio/grapheneos-issue5743-volume-groups-fragment.txt");
        let cases = [
            ("STREAM_MUSIC", volume("STREAM_MUSIC", 25, 0, 25)),
            ("STREAM_DTMF", volume("STREAM_DTMF", 4, 0, 15)),
            // Found through the group's `Streams:` line.
            (
                "STREAM_SYSTEM_ENFORCED",
                volume("STREAM_SYSTEM_ENFORCED", 2, 0, 7),
            ),
            (
                "STREAM_NOTIFICATION",
                volume("STREAM_NOTIFICATION", 7, 0, 7),
            ),
        ];
        for (stream, expected) in cases {
            assert_eq!(audio_stream(text, stream), Ok(expected), "{stream}");
        }
    }

    #[test]
    fn old_format_without_names() {
        let text = "\
- STREAM_MUSIC:
   Mute count: 1
   Max: 15
   Min: 0
   Current: 2: 9, 4: 10, 40000000: 11, 
";
        let v = audio_stream(text, "STREAM_MUSIC").expect("parses");
        assert_eq!((v.index, v.muted), (9, true));
        assert_eq!(failure(audio_stream("", "music")), "not_found");
    }

    #[test]
    fn reads_any_text_without_panicking() {
        crate::adb::parse::tests::each_sample(|text| {
            for stream in ["STREAM_MUSIC", "ring", "", "VOLUME GROUP"] {
                let _ = audio_stream(text, stream);
            }
        });
    }

    #[test]
    fn percent_and_index_round_trip() {
        for (min, max) in [(0, 15), (1, 7), (0, 25), (0, 100)] {
            for level in [0u8, 1, 33, 50, 99, 100] {
                let index = index_for(level, min, max);
                assert!((min..=max).contains(&index));
                let back = percent(index, min, max);
                assert!(
                    (back - i64::from(level)).abs() <= 100 / (max - min) + 1,
                    "{level} {min}..{max} → {index} → {back}"
                );
            }
        }
        assert_eq!(percent(5, 5, 5), 0);
    }
}
