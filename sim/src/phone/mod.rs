//! The emulated phone: its state, command log and replay table, and the
//! handlers that answer each device command in the format real phones print.
//!
//! `Phone::run` feeds a command line to the mini shell with a `PhoneHost`,
//! which records every simple command and dispatches it on `argv[0]`. The
//! handlers are pure functions of `(&mut PhoneState, args)`; they never do
//! I/O, so each is unit-tested directly. Networking lives in `adb` and
//! `control`.
//!
//! The state sits behind a `std::sync::Mutex`, not an async one: every
//! critical section is a short, synchronous read or update (a handler runs
//! to completion without awaiting), so the lock is never held across an
//! `.await` and a blocking mutex is both correct and cheaper, as in
//! mini-redis's `Db`.

/// `writeln!` into a `String`, which cannot fail.
macro_rules! wl {
    ($buf:expr) => {{
        $buf.push('\n');
    }};
    ($buf:expr, $($arg:tt)*) => {{
        use std::fmt::Write as _;
        let _ = writeln!($buf, $($arg)*);
    }};
}

mod activity;
mod content;
mod dumpsys;
mod files;
mod package;
mod screen;
mod services;
mod settings;
mod tools;
pub(crate) mod ui_server;

use std::fs::File;
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::clock;
use crate::log::{CommandLog, LogEntry};
use crate::replay::Replay;
use crate::shell::{self, CommandResult, Host, Output, RunOutcome};
use crate::state::PhoneState;
// Components are read as the bridge reads them.
pub(crate) use droidwarden_bridge::adb::parse::split_component;

pub(crate) use files::MAX_FILE;

/// The phone (shared by every connection and the control port).
#[derive(Debug)]
pub(crate) struct Phone {
    state: Mutex<PhoneState>,
    log: Mutex<CommandLog>,
    replay: Option<Replay>,
    /// Bumped after every update and every command line, so watchers (the
    /// companion app's battery events) wake up and compare what they care
    /// about instead of polling.
    changes: tokio::sync::watch::Sender<u64>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic in a handler cannot leave the plain-data state half-updated in
    // a way that matters to a test fake; keep serving.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Phone {
    /// A phone in `state`, answering from `replay` first, logging to `log_file` too.
    pub(crate) fn new(state: PhoneState, replay: Option<Replay>, log_file: Option<File>) -> Self {
        Self {
            state: Mutex::new(state),
            log: Mutex::new(CommandLog::new(log_file)),
            replay,
            changes: tokio::sync::watch::Sender::new(0),
        }
    }

    /// Wakes whoever watches the state.
    fn changed(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A receiver woken after every update or command line.
    pub(crate) fn watch_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Runs one read-only command against a copy of the state: not logged,
    /// not replayed, never changing anything. For the companion app's own
    /// observations (events), which are not device commands anyone sent.
    pub(crate) fn peek(&self, argv: &[&str]) -> CommandResult {
        let argv: Vec<String> = argv.iter().map(|a| (*a).to_owned()).collect();
        let mut copy = self.state();
        dispatch(&mut copy, &argv, &[])
    }

    /// A snapshot of the state.
    pub(crate) fn state(&self) -> PhoneState {
        lock(&self.state).clone()
    }

    /// Reads the state under the lock, without copying all of it.
    pub(crate) fn read<R>(&self, f: impl FnOnce(&PhoneState) -> R) -> R {
        f(&lock(&self.state))
    }

    /// Runs `f` on the state under the lock.
    pub(crate) fn update<R>(&self, f: impl FnOnce(&mut PhoneState) -> R) -> R {
        let result = f(&mut lock(&self.state));
        self.changed();
        result
    }

    /// The command log, oldest first.
    pub(crate) fn log_entries(&self) -> Vec<LogEntry> {
        lock(&self.log).entries()
    }

    /// Empties the command log.
    pub(crate) fn clear_log(&self) {
        lock(&self.log).clear();
    }

    /// One request to the on-device UI server (`ui_server`), answered from
    /// the phone's state.
    pub(crate) fn ui_server(&self, req: &ui_server::Request) -> ui_server::Served {
        self.update(|st| ui_server::serve(st, req))
    }

    /// Runs a command line as the device shell would.
    pub(crate) fn run(&self, command: &str) -> RunOutcome {
        let outcome = shell::run(
            command,
            &mut PhoneHost {
                phone: self,
                fail_next: None,
            },
        );
        self.changed();
        outcome
    }

    /// Runs a command line whose first non-builtin command fails with
    /// `exit` and `stderr` without touching the state; the rest of the line
    /// runs as usual, as it would on a phone where that command failed.
    pub(crate) fn run_failing_first(&self, command: &str, exit: u8, stderr: &str) -> RunOutcome {
        let outcome = shell::run(
            command,
            &mut PhoneHost {
                phone: self,
                fail_next: Some((exit, stderr.to_owned())),
            },
        );
        self.changed();
        outcome
    }
}

struct PhoneHost<'a> {
    phone: &'a Phone,
    fail_next: Option<(u8, String)>,
}

impl Host for PhoneHost<'_> {
    fn record(&mut self, argv: &[String]) {
        lock(&self.phone.log).record(clock::now_ms(), argv);
    }

    fn exec(&mut self, argv: &[String], stdin: &[u8]) -> CommandResult {
        if let Some((exit, stderr)) = self.fail_next.take() {
            let mut out = Output::default();
            out.err(&stderr);
            if !stderr.is_empty() && !stderr.ends_with('\n') {
                out.err("\n");
            }
            return CommandResult::new(out, exit);
        }
        if let Some(recorded) = self.phone.replay.as_ref().and_then(|r| r.lookup(argv)) {
            let mut out = Output::default();
            out.out(&recorded.stdout);
            out.err(&recorded.stderr);
            return CommandResult::new(out, recorded.exit);
        }
        let mut state = lock(&self.phone.state);
        dispatch(&mut state, argv, stdin)
    }

    fn read_file(&self, path: &str) -> Option<Vec<u8>> {
        tools::read_file(&lock(&self.phone.state), path)
    }
}

/// Directories whose binaries may be named by full path.
const BIN_DIRS: [&str; 4] = ["/system/bin/", "/system/xbin/", "/vendor/bin/", "/bin/"];

/// Runs one command against the state.
pub(crate) fn dispatch(st: &mut PhoneState, argv: &[String], stdin: &[u8]) -> CommandResult {
    let name = argv[0].as_str();
    let base = BIN_DIRS
        .iter()
        .find_map(|d| name.strip_prefix(d))
        .filter(|b| !b.contains('/'))
        .unwrap_or(name);
    let args = &argv[1..];
    match base {
        "dumpsys" => dumpsys::run(st, args),
        "settings" => settings::run(st, args),
        "svc" => services::svc(st, args),
        "cmd" => services::cmd(st, args),
        "am" => activity::am(st, args),
        "pm" => package::pm(st, args),
        "input" => services::input(st, args),
        "stat" => content::stat(st, args),
        "base64" => content::base64(st, args),
        "ls" => files::ls(st, args),
        "rm" => files::rm(st, args),
        "screencap" => screen::screencap(st, args),
        "uiautomator" => screen::uiautomator(st, args),
        "ime" => screen::ime(st, args),
        // The small toybox tools list themselves, so a new one is written
        // in one place.
        _ => tools::run(st, base, args, stdin).unwrap_or_else(|| not_found(st, name)),
    }
}

/// What `/system/bin/sh` prints for a missing command: mksh on Android 10
/// and later says "inaccessible or not found"; older shells said "not found".
fn not_found(st: &PhoneState, name: &str) -> CommandResult {
    let what = if st.props.sdk >= 29 {
        "inaccessible or not found"
    } else {
        "not found"
    };
    let mut out = Output::default();
    out.errln(format!("{}: {name}: {what}", shell::SH));
    CommandResult::new(out, 127)
}

/// Stdout text, exit 0.
pub(crate) fn ok_text(text: impl AsRef<str>) -> CommandResult {
    let mut out = Output::default();
    out.out(text.as_ref());
    CommandResult::new(out, 0)
}

/// Stdout and stderr text with a status.
pub(crate) fn fail(stdout: &str, stderr: &str, status: u8) -> CommandResult {
    let mut out = Output::default();
    out.out(stdout);
    out.err(stderr);
    CommandResult::new(out, status)
}

/// An output with a status.
pub(crate) fn done(out: Output, status: u8) -> CommandResult {
    CommandResult::new(out, status)
}

/// What an `android.os.ShellCommand` prints when a handler throws: the
/// exception on stderr and exit status 255 (`-1`).
pub(crate) fn java_exception(command: &str, exception: &str) -> CommandResult {
    fail(
        "",
        &format!(
            "Exception occurred while executing '{command}':\n{exception}\n\tat com.android.modules.utils.BasicShellCommandHandler.getNextArgRequired(BasicShellCommandHandler.java:295)\n\tat android.os.ShellCommand.exec(ShellCommand.java:38)\n"
        ),
        255,
    )
}

/// The exception for a missing required argument after `prev`.
pub(crate) fn arg_expected(command: &str, prev: &str) -> CommandResult {
    java_exception(
        command,
        &format!("java.lang.IllegalArgumentException: Argument expected after \"{prev}\""),
    )
}

/// `pkg/.Rest` when the class is inside the package, else `pkg/class`
/// (`ComponentName.flattenToShortString`).
pub(crate) fn short_component(package: &str, class: &str) -> String {
    match class.strip_prefix(package) {
        Some(rest) if rest.starts_with('.') => format!("{package}/{rest}"),
        _ => format!("{package}/{class}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shell::Fd;

    pub(crate) fn run(phone: &Phone, cmd: &str) -> (String, String, u8) {
        let o = phone.run(cmd);
        (
            String::from_utf8_lossy(&o.output.stream(Fd::Stdout)).into_owned(),
            String::from_utf8_lossy(&o.output.stream(Fd::Stderr)).into_owned(),
            o.status,
        )
    }

    /// A phone in the default state, without companion or screen.
    pub(crate) fn phone() -> Phone {
        Phone::new(PhoneState::default(), None, None)
    }

    #[test]
    fn unknown_command_is_127_never_success() {
        let p = phone();
        assert_eq!(
            run(&p, "frobnicate --now"),
            (
                String::new(),
                "/system/bin/sh: frobnicate: inaccessible or not found\n".to_owned(),
                127
            )
        );
        p.update(|s| s.props.sdk = 23);
        assert_eq!(run(&p, "nope").1, "/system/bin/sh: nope: not found\n");
    }

    #[test]
    fn full_paths_resolve() {
        let p = phone();
        assert_eq!(run(&p, "/system/bin/echo hi").0, "hi\n");
        assert_eq!(run(&p, "/system/bin/nope").2, 127);
    }

    #[test]
    fn every_command_is_logged_including_substitutions() {
        let p = phone();
        run(&p, "echo \"$(getprop ro.serialno)\"; echo __dw_rc=$?");
        let argvs: Vec<Vec<String>> = p.log_entries().into_iter().map(|e| e.argv).collect();
        assert_eq!(
            argvs,
            vec![
                vec!["getprop".to_owned(), "ro.serialno".to_owned()],
                vec!["echo".to_owned(), "DWSIM0001".to_owned()],
                vec!["echo".to_owned(), "__dw_rc=0".to_owned()],
            ]
        );
        let seqs: Vec<u64> = p.log_entries().iter().map(|e| e.seq).collect();
        assert_eq!(seqs, vec![1, 2, 3]);
        p.clear_log();
        assert!(p.log_entries().is_empty());
    }

    #[test]
    fn replay_answers_win_and_are_logged() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            dir.path().join("index.json"),
            r#"[{"command":"dumpsys battery","stdout":"b.txt","stderr":null,"exit":0}]"#,
        )
        .expect("index");
        std::fs::write(dir.path().join("b.txt"), "recorded\n").expect("file");
        let replay = Replay::load(dir.path()).expect("replay");
        let p = Phone::new(PhoneState::default(), Some(replay), None);
        assert_eq!(run(&p, "'dumpsys' 'battery'").0, "recorded\n");
        assert!(run(&p, "dumpsys battery --unplug").2 != 127);
        assert_eq!(
            p.log_entries()[0].argv,
            vec!["dumpsys".to_owned(), "battery".to_owned()]
        );
    }

    #[test]
    fn components() {
        assert_eq!(short_component("com.a", "com.a.Main"), "com.a/.Main");
        assert_eq!(short_component("com.a", "org.b.Main"), "com.a/org.b.Main");
        assert_eq!(short_component("com.a", "com.ab.Main"), "com.a/com.ab.Main");
    }
}
