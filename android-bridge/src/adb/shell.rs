//! Building device command lines safely, and reading their results.
//!
//! Every argument is quoted for the device's POSIX shell, so a parameter is
//! always exactly one literal argument: nothing a caller (or a language
//! model) typed is ever interpreted by the phone's shell. On devices without
//! shell protocol v2 (before Android 7) the exit status is carried in a
//! trailer, whose absence also reveals output cut short by a dropped
//! connection.

/// The marker of the exit-status trailer appended to every command.
pub(crate) const RC_MARKER: &str = "__dw_rc=";

/// Quote one argument for a POSIX shell (`mksh`/`toybox sh` on Android).
///
/// Words made only of characters that no shell treats specially are left as
/// they are, for readable logs; everything else is wrapped in single quotes,
/// inside which a shell interprets nothing, with each `'` written as `'\''`.
pub fn quote(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-./:=,@%+".contains(&b));
    if plain {
        arg.to_owned()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

/// The command line for `argv`: each word quoted, joined by spaces.
pub(crate) fn command_line(argv: &[&str]) -> String {
    argv.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" ")
}

/// `line` followed by the exit-status trailer, for devices whose shell
/// reports no exit status (shell protocol v1).
pub(crate) fn with_trailer(mut line: String) -> String {
    line.push_str(" ; echo ");
    line.push_str(RC_MARKER);
    line.push_str("$?");
    line
}

/// The result of one device command.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShellOutput {
    /// Standard output, without the trailer.
    pub stdout: String,
    /// Standard error (merged into stdout by devices without shell v2).
    pub stderr: String,
    /// The command's exit status.
    pub exit: i32,
}

/// Split the trailer off raw stdout (bytes: the output may be an image).
/// The trailer is the last `__dw_rc=` and what follows it. `None` when the
/// trailer is missing or malformed: the output was cut short.
pub(crate) fn split_trailer_bytes(mut stdout: Vec<u8>) -> Option<(Vec<u8>, i32)> {
    let marker = RC_MARKER.as_bytes();
    let at = stdout.windows(marker.len()).rposition(|w| w == marker)?;
    let status = std::str::from_utf8(&stdout[at + marker.len()..]).ok()?;
    let exit = status.trim().parse::<i32>().ok()?;
    stdout.truncate(at);
    Some((stdout, exit))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_leaves_plain_words_and_wraps_everything_else() {
        let cases = [
            ("dumpsys", "dumpsys"),
            ("com.spotify.music/.Main", "com.spotify.music/.Main"),
            ("", "''"),
            ("a b", "'a b'"),
            ("a;reboot", "'a;reboot'"),
            ("$(id)", "'$(id)'"),
            ("`id`", "'`id`'"),
            ("it's", r"'it'\''s'"),
            ("a\nb", "'a\nb'"),
            ("*", "'*'"),
            ("~root", "'~root'"),
            ("x&&y|z", "'x&&y|z'"),
            ("ünïcödé", "'ünïcödé'"),
        ];
        for (input, expected) in cases {
            assert_eq!(quote(input), expected, "{input:?}");
        }
    }

    #[test]
    fn the_trailer_follows_the_quoted_command_line() {
        let line = command_line(&["am", "start", "-d", "https://x/?a=1&b=2"]);
        assert_eq!(line, "am start -d 'https://x/?a=1&b=2'");
        assert_eq!(
            with_trailer(line),
            "am start -d 'https://x/?a=1&b=2' ; echo __dw_rc=$?"
        );
    }

    #[test]
    fn the_trailer_carries_the_exit_status() {
        assert_eq!(
            split_trailer_bytes(b"hello\n__dw_rc=0\n".to_vec()),
            Some((b"hello\n".to_vec(), 0))
        );
        assert_eq!(
            split_trailer_bytes(b"no newline__dw_rc=127\n".to_vec()),
            Some((b"no newline".to_vec(), 127))
        );
        assert_eq!(
            split_trailer_bytes(b"__dw_rc=1\n__dw_rc=3\n".to_vec()),
            Some((b"__dw_rc=1\n".to_vec(), 3))
        );
        assert_eq!(split_trailer_bytes(b"cut short".to_vec()), None);
        assert_eq!(
            split_trailer_bytes(b"\x89PNG\xff\n__dw_rc=0\n".to_vec()),
            Some((b"\x89PNG\xff\n".to_vec(), 0))
        );
        assert_eq!(split_trailer_bytes(b"cut".to_vec()), None);
        assert_eq!(split_trailer_bytes(b"__dw_rc=".to_vec()), None);
    }
}
