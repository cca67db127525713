//! Running one Termux:API command: an argv (program first, never a shell
//! string), a time limit, bounded output.
//!
//! Termux:API commands are small shell scripts around the `termux-api`
//! helper, which asks the Termux:API app over a broadcast and prints its
//! answer; the program is looked up in `PATH` like any other.

use std::process::Stdio;
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// The most output read from one command. The largest answer expected here
/// (a long notification list) is tens of KiB.
const MAX_OUTPUT: u64 = 512 * 1024;

/// What a command printed and how it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    /// Standard output (lossy UTF-8, at most [`MAX_OUTPUT`] bytes).
    pub stdout: String,
    /// Standard error (lossy UTF-8, at most [`MAX_OUTPUT`] bytes).
    pub stderr: String,
    /// The exit status; `None` when a signal ended it.
    pub status: Option<i32>,
}

/// Why a command gave no output to parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExecError {
    /// The program is not installed (not in `PATH`).
    #[error("{0} is not installed (pkg install termux-api)")]
    NotFound(String),
    /// It could not be started for another reason.
    #[error("cannot start {program}: {reason}")]
    Spawn {
        /// The program.
        program: String,
        /// The operating system's reason.
        reason: String,
    },
    /// It ran longer than the time limit and was killed.
    #[error("{program} did not finish within {limit:?}")]
    Timeout {
        /// The program.
        program: String,
        /// The limit.
        limit: Duration,
    },
}

/// Run `argv` (program first) with no stdin and wait at most `limit`.
///
/// # Errors
/// [`ExecError`] when `argv` is empty, or the command cannot start or runs
/// too long (it is killed).
pub async fn run(argv: &[String], limit: Duration) -> Result<Output, ExecError> {
    run_inner(argv, None, limit).await
}

/// Run `argv` with `input` on its standard input (then closed) and wait at
/// most `limit`.
///
/// # Errors
/// As [`run`].
pub async fn run_with_input(
    argv: &[String],
    input: &[u8],
    limit: Duration,
) -> Result<Output, ExecError> {
    run_inner(argv, Some(input), limit).await
}

async fn run_inner(
    argv: &[String],
    input: Option<&[u8]>,
    limit: Duration,
) -> Result<Output, ExecError> {
    let Some(program) = argv.first().cloned() else {
        return Err(ExecError::Spawn {
            program: String::new(),
            reason: "no program to run".into(),
        });
    };
    let mut child = tokio::process::Command::new(&program)
        .args(&argv[1..])
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => ExecError::NotFound(program.clone()),
            _ => ExecError::Spawn {
                program: program.clone(),
                reason: e.to_string(),
            },
        })?;
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(ExecError::Spawn {
            program,
            reason: "its output could not be captured".into(),
        });
    };
    let (mut stdout, mut stderr) = (stdout.take(MAX_OUTPUT), stderr.take(MAX_OUTPUT));
    let stdin = child.stdin.take();
    let work = async {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let feed = async {
            if let (Some(mut stdin), Some(input)) = (stdin, input) {
                use tokio::io::AsyncWriteExt;
                // A program that exits without reading it all is its own
                // business; its status says how it went.
                let _ = stdin.write_all(input).await;
                let _ = stdin.shutdown().await;
            }
        };
        let (r1, r2, status, ()) = tokio::join!(
            stdout.read_to_end(&mut out),
            stderr.read_to_end(&mut err),
            child.wait(),
            feed
        );
        // A read error leaves what was read; the status says whether it ran.
        let _ = (r1, r2);
        (out, err, status.ok().and_then(|s| s.code()))
    };
    match tokio::time::timeout(limit, work).await {
        Ok((out, err, status)) => Ok(Output {
            stdout: String::from_utf8_lossy(&out).into_owned(),
            stderr: String::from_utf8_lossy(&err).into_owned(),
            status,
        }),
        // Dropping the child (kill_on_drop) kills it.
        Err(_) => Err(ExecError::Timeout { program, limit }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    #[tokio::test]
    async fn runs_an_argv_without_a_shell() {
        let out = run(&argv(&["echo", "a; b", "$(id)"]), Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(out.stdout, "a; b $(id)\n");
        assert_eq!(out.status, Some(0));
    }

    #[tokio::test]
    async fn input_goes_to_standard_input() {
        let out = run_with_input(&argv(&["cat"]), b"-n a\\c $(id)", Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(out.stdout, "-n a\\c $(id)");
    }

    #[tokio::test]
    async fn missing_programs_and_slow_ones() {
        let err = run(&argv(&["termux-no-such-thing"]), Duration::from_secs(5))
            .await
            .unwrap_err();
        assert_eq!(err, ExecError::NotFound("termux-no-such-thing".into()));
        let err = run(&argv(&["sleep", "5"]), Duration::from_millis(100))
            .await
            .unwrap_err();
        assert!(matches!(err, ExecError::Timeout { .. }), "{err}");
    }
}
