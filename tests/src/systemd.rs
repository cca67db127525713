//! systemd pieces of the harness: a notify socket that records what the
//! daemon tells the service manager, and the daemon run as a service would
//! be (its own environment, a configuration file that can be rewritten,
//! signals).

use crate::{AdbServer, wait_for};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One datagram received on a [`NotifySocket`].
#[derive(Debug, Clone)]
pub struct Notice {
    /// When it arrived.
    pub at: Instant,
    /// Its text: `KEY=VALUE` lines.
    pub text: String,
}

impl Notice {
    /// The value of `key` in this notice, if present.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.text
            .lines()
            .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
    }

    /// Whether the notice sets `key` to `value`.
    pub fn has(&self, key: &str, value: &str) -> bool {
        self.get(key) == Some(value)
    }
}

/// A unix datagram socket standing in for systemd's `$NOTIFY_SOCKET`; a
/// thread records every notice until the socket is dropped.
#[derive(Debug)]
pub struct NotifySocket {
    path: PathBuf,
    notices: Arc<Mutex<Vec<Notice>>>,
    stop: Arc<AtomicBool>,
    _dir: tempfile::TempDir,
}

impl NotifySocket {
    /// Bind a socket in a fresh temporary directory.
    ///
    /// # Panics
    /// When the socket cannot be bound.
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("notify");
        let socket = UnixDatagram::bind(&path).expect("bind the notify socket");
        // A short timeout so the thread notices when the socket is dropped.
        socket
            .set_read_timeout(Some(Duration::from_millis(100)))
            .expect("read timeout");
        let notices: Arc<Mutex<Vec<Notice>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        {
            let notices = Arc::clone(&notices);
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 64 * 1024];
                while !stop.load(Ordering::Relaxed) {
                    if let Ok(n) = socket.recv(&mut buf) {
                        notices.lock().unwrap().push(Notice {
                            at: Instant::now(),
                            text: String::from_utf8_lossy(&buf[..n]).into_owned(),
                        });
                    }
                }
            });
        }
        Self {
            path,
            notices,
            stop,
            _dir: dir,
        }
    }

    /// The socket's path, for `NOTIFY_SOCKET`.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every notice so far, oldest first.
    pub fn notices(&self) -> Vec<Notice> {
        self.notices.lock().unwrap().clone()
    }

    /// How many notices arrived so far (an index for [`wait_from`](Self::wait_from)).
    pub fn count(&self) -> usize {
        self.notices.lock().unwrap().len()
    }

    /// Wait for a notice matching `pred` at index `from` or later; returns
    /// its index and the notice.
    pub fn wait_from(
        &self,
        from: usize,
        what: &str,
        deadline: Duration,
        pred: impl Fn(&Notice) -> bool,
    ) -> (usize, Notice) {
        wait_for(what, deadline, || {
            self.notices
                .lock()
                .unwrap()
                .iter()
                .enumerate()
                .skip(from)
                .find(|(_, n)| pred(n))
                .map(|(i, n)| (i, n.clone()))
        })
    }
}

impl Default for NotifySocket {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for NotifySocket {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// `droidwarden daemon` run as systemd would run it: extra environment
/// (`NOTIFY_SOCKET`, `WATCHDOG_USEC` …), a configuration file that can be
/// rewritten before a reload, and signals. SIGTERM on drop.
#[derive(Debug)]
pub struct Service {
    child: Child,
    config: PathBuf,
    state_dir: tempfile::TempDir,
    log: PathBuf,
}

impl Service {
    /// Start the daemon with `config_toml` against `adb`, with `env` added
    /// to its environment. Its `[state] dir` is a temporary directory and
    /// standard error goes to a log file. systemd's variables are removed
    /// from the inherited environment first, so only `env` sets them.
    ///
    /// # Panics
    /// When the daemon cannot be spawned.
    pub fn start(adb: &AdbServer, config_toml: &str, env: &[(&str, &str)]) -> Self {
        Self::start_inner(adb, config_toml, env, false)
    }

    /// [`start`](Self::start) with `JOURNAL_STREAM` naming the log file, as
    /// systemd names the journal stream it connects to standard error.
    pub fn start_journaled(adb: &AdbServer, config_toml: &str, env: &[(&str, &str)]) -> Self {
        Self::start_inner(adb, config_toml, env, true)
    }

    fn start_inner(
        adb: &AdbServer,
        config_toml: &str,
        env: &[(&str, &str)],
        journaled: bool,
    ) -> Self {
        use std::os::unix::fs::MetadataExt;
        let state_dir = tempfile::tempdir().expect("state dir");
        let config = state_dir.path().join("config.toml");
        let log = state_dir.path().join("daemon.log");
        let log_file = std::fs::File::create(&log).expect("log file");
        let meta = log_file.metadata().expect("log file metadata");
        let journal_stream = format!("{}:{}", meta.dev(), meta.ino());
        write_config(&config, state_dir.path(), config_toml);
        let mut cmd = crate::daemon_command(adb, &config);
        for key in [
            "NOTIFY_SOCKET",
            "WATCHDOG_USEC",
            "WATCHDOG_PID",
            "JOURNAL_STREAM",
            "CREDENTIALS_DIRECTORY",
        ] {
            cmd.env_remove(key);
        }
        if journaled {
            cmd.env("JOURNAL_STREAM", &journal_stream);
        }
        for (key, value) in env {
            cmd.env(key, value);
        }
        let child = crate::spawn_daemon(&mut cmd, log_file);
        Self {
            child,
            config,
            state_dir,
            log,
        }
    }

    /// The daemon's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The log file (its device and inode stand for the journal stream).
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The state directory.
    pub fn state_dir(&self) -> &Path {
        self.state_dir.path()
    }

    /// Replace the configuration file (atomically: the daemon never reads
    /// half a file), keeping the `[state] dir` of this run.
    pub fn write_config(&self, config_toml: &str) {
        write_config(&self.config, self.state_dir.path(), config_toml);
    }

    /// Send a signal by name (`HUP`, `TERM`, `INT`).
    pub fn signal(&self, name: &str) {
        crate::send_signal(self.child.id(), name);
    }

    /// Wait (bounded) for the process to exit; its exit code.
    pub fn wait_exit(&mut self, deadline: Duration) -> Option<i32> {
        crate::wait_exit(&mut self.child, deadline).and_then(|s| s.code())
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            crate::terminate(&mut self.child, Duration::from_secs(30));
        }
        if std::thread::panicking() {
            eprintln!("--- daemon log ---\n{}", self.log());
        }
    }
}

fn write_config(path: &Path, state_dir: &Path, config_toml: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(
        &tmp,
        format!(
            "{config_toml}\n[state]\ndir = \"{}\"\n",
            state_dir.display()
        ),
    )
    .expect("write config");
    std::fs::rename(&tmp, path).expect("replace config");
}
