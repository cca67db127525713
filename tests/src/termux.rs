//! The Termux side of the companion tests and benches: a home directory
//! with stand-in `termux-*` programs on `PATH` that print real recorded
//! outputs (`companion/fixtures/termux/`, see `SOURCES.md` there) and log
//! their argv, and the real `droidwarden-companion` binary configured for
//! it.

use crate::{WAIT, binary};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

/// The companion id the stand-in phone uses.
pub const ID: &str = "termux-phone";
/// A number on both allowlists (the daemon's and the companion's) of the tests.
pub const FRIEND: &str = "+4915112345678";

/// A recorded output in `companion/fixtures/termux/`.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../companion/fixtures/termux")
        .join(name)
}

/// A stand-in `name` that logs its argv to `log` and runs `output` (shell).
pub fn stand_in(dir: &Path, log: &Path, name: &str, output: &str) {
    let script = format!(
        // The line is built first and appended with one write, so stand-ins
        // running at the same time do not interleave their lines.
        "#!/bin/sh\nline=$(printf '['; sep=''; for a in \"$(basename \"$0\")\" \"$@\"; do printf '%s\"%s\"' \"$sep\" \"$(printf '%s' \"$a\" | sed 's/\\\\/\\\\\\\\/g; s/\"/\\\\\"/g')\"; sep=','; done; printf ']')\nprintf '%s\\n' \"$line\" >> '{}'\n{output}\n",
        log.display()
    );
    let path = dir.join(name);
    std::fs::write(&path, script).unwrap();
    let mut perms = std::fs::metadata(&path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&path, perms).unwrap();
}

/// A running companion; killed (SIGKILL) when dropped.
#[derive(Debug)]
pub struct Companion(pub Child);

impl Companion {
    /// SIGTERM, and wait for it to exit.
    pub fn terminate(mut self) -> Option<std::process::ExitStatus> {
        let pid = self.0.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        crate::wait_exit(&mut self.0, WAIT)
    }
}

impl Drop for Companion {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The phone's side: a Termux-like home with the stand-ins and the
/// companion's configuration.
#[derive(Debug)]
pub struct Termux {
    /// The home directory.
    pub dir: tempfile::TempDir,
    /// The stand-ins' directory.
    pub bin: PathBuf,
    /// The argv log.
    pub log: PathBuf,
    /// The companion's configuration file.
    pub config: PathBuf,
}

impl Termux {
    /// Stand-ins for every command the companion runs except
    /// `termux-wifi-enable` (which `check` must report missing), and a
    /// configuration for `broker_port` with `extra` lines.
    pub fn new(broker_port: u16, extra: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let log = dir.path().join("argv.log");
        let cat = |name: &str| format!("cat '{}'", fixture(name).display());
        let notifications = dir.path().join("notifications.json");
        std::fs::copy(fixture("notification-list.json"), &notifications).unwrap();
        for (name, output) in [
            ("termux-battery-status", cat("battery-status.json")),
            (
                "termux-volume",
                format!("if [ $# -eq 0 ]; then {}; fi", cat("volume.json")),
            ),
            (
                "termux-notification-list",
                format!("cat '{}'", notifications.display()),
            ),
            (
                "termux-wifi-connectioninfo",
                cat("wifi-connectioninfo.json"),
            ),
            ("termux-location", cat("location.json")),
            // The real command writes the JPEG to its last argument.
            (
                "termux-camera-photo",
                "for f; do :; done; printf 'JPEG' > \"$f\"".to_owned(),
            ),
            (
                "termux-sms-send",
                format!("cat > '{}'", dir.path().join("sms-text").display()),
            ),
            // The clipboard kept in a file: set reads standard input, get
            // prints it as it is (nothing when empty).
            (
                "termux-clipboard-set",
                format!("cat > '{}'", dir.path().join("clipboard").display()),
            ),
            (
                "termux-clipboard-get",
                format!(
                    "cat '{}' 2>/dev/null || true",
                    dir.path().join("clipboard").display()
                ),
            ),
            // Speech read from standard input, kept in a file (each run
            // replaces it).
            (
                "termux-tts-speak",
                format!("cat > '{}'", dir.path().join("spoken").display()),
            ),
            ("termux-torch", "true".into()),
            ("termux-vibrate", "true".into()),
            ("termux-brightness", "true".into()),
            ("termux-open-url", "true".into()),
            ("termux-telephony-call", "true".into()),
            ("termux-wake-lock", "true".into()),
            ("termux-wake-unlock", "true".into()),
            // Android 14.
            ("getprop", "echo 34".into()),
        ] {
            stand_in(&bin, &log, name, &output);
        }
        let config = dir.path().join("config.toml");
        std::fs::write(
            &config,
            format!(
                "broker = \"mqtt://127.0.0.1:{broker_port}\"\ncompanion_id = \"{ID}\"\ncommand_timeout_s = 5\nallowed_numbers = [\"{FRIEND}\"]\nphoto_dir = \"{}\"\nlog_file = \"{}\"\n{extra}\n",
                dir.path().join("photos").display(),
                dir.path().join("state/companion.log").display(),
            ),
        )
        .unwrap();
        Self {
            dir,
            bin,
            log,
            config,
        }
    }

    /// `droidwarden-companion --config …` with the stand-ins first on `PATH`.
    pub fn command(&self) -> Command {
        let path = format!(
            "{}:{}",
            self.bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut cmd = Command::new(binary("droidwarden-companion"));
        cmd.args(["--config", self.config.to_str().unwrap()])
            .env("PATH", path)
            .env("HOME", self.dir.path())
            .stdin(Stdio::null());
        cmd
    }

    /// Start `droidwarden-companion run`.
    pub fn start(&self) -> Companion {
        Companion(
            self.command()
                .arg("run")
                .env("DROIDWARDEN_COMPANION_LOG", "debug")
                .stdout(Stdio::null())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("start droidwarden-companion"),
        )
    }

    /// `droidwarden-companion ARGS`, bounded.
    pub fn cli(&self, args: &[&str]) -> Output {
        let mut cmd = self.command();
        cmd.args(args);
        crate::run_with_timeout(cmd, WAIT)
    }

    /// Every stand-in run so far, each its argv as a JSON array.
    pub fn argv(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        // A stand-in may be writing its line right now: complete lines only.
        let complete = text.rfind('\n').map_or("", |end| &text[..end]);
        complete
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
            .collect()
    }

    /// The argv lines of `program`.
    pub fn runs_of(&self, program: &str) -> Vec<Value> {
        self.argv()
            .into_iter()
            .filter(|a| a[0] == program)
            .collect()
    }

    /// What `termux-notification-list` prints from now on.
    pub fn set_notifications(&self, json: &str) {
        let tmp = self.dir.path().join("notifications.tmp");
        std::fs::write(&tmp, json).unwrap();
        std::fs::rename(&tmp, self.dir.path().join("notifications.json")).unwrap();
    }

    /// The text the last `termux-sms-send` read on standard input.
    pub fn sms_text(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("sms-text")).unwrap_or_default()
    }

    /// What the last `termux-tts-speak` read on standard input.
    pub fn spoken(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("spoken")).unwrap_or_default()
    }

    /// The companion's log file.
    pub fn companion_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("state/companion.log")).unwrap_or_default()
    }
}
