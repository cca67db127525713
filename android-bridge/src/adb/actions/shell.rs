//! The `shell` service over ADB: one argv, run as the shell user, its
//! output bounded by [`MAX_SHELL_OUTPUT`].

use super::*;
use droidwarden_services::{ShellAction, ShellRun};

/// The most output `shell.run` returns per stream.
pub const MAX_SHELL_OUTPUT: usize = 64 * 1024;

/// At most `max` bytes of `text`, cut at a character boundary.
fn bounded(text: &str, max: usize) -> (&str, bool) {
    if text.len() <= max {
        return (text, false);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (&text[..end], true)
}

pub(super) async fn run(sh: &dyn Shell, action: &ShellAction) -> Result<Value, BridgeError> {
    let ShellAction::Run { argv } = action;
    let argv: Vec<&str> = argv.as_slice().iter().map(String::as_str).collect();
    let out = sh.run(&argv).await?;
    let (stdout, cut_out) = bounded(&out.stdout, MAX_SHELL_OUTPUT);
    let (stderr, cut_err) = bounded(&out.stderr, MAX_SHELL_OUTPUT);
    answer(ShellRun {
        exit: i64::from(out.exit),
        stdout: stdout.to_owned(),
        stderr: stderr.to_owned(),
        truncated: cut_out || cut_err,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_is_cut_at_a_character_boundary() {
        assert_eq!(bounded("héllo", 2), ("h", true));
        assert_eq!(bounded("abc", 3), ("abc", false));
    }
}
