//! Google's adb 36, from the PyPI adbutils wheel (`scripts/test` installs
//! it): the server with pairing and mDNS host services that Debian's adb
//! 29 lacks. Used by the pairing e2e tests and the mDNS port-move bench.

use crate::{KillOnDrop, free_port, run_with_timeout, wait_exit, wait_for};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Longer than any adb command here may take.
const LIMIT: Duration = Duration::from_secs(20);

/// The adb program inside the PyPI adbutils wheel.
pub fn program() -> PathBuf {
    let out = run_with_timeout(
        {
            let mut c = Command::new("python3");
            c.args([
                "-c",
                "import adbutils, os; print(os.path.join(os.path.dirname(adbutils.__file__), 'binaries', 'adb'))",
            ]);
            c
        },
        LIMIT,
    );
    assert!(
        out.status.success(),
        "the PyPI adbutils wheel is missing (scripts/test installs it: python3 -m pip install adbutils): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// An adb 36 server on a free port with its own HOME, killed on drop.
#[derive(Debug)]
pub struct NewAdb {
    /// The adb program.
    pub program: PathBuf,
    /// The server's HOME (its keys).
    pub home: tempfile::TempDir,
    /// The server's port.
    pub port: u16,
}

impl NewAdb {
    /// Starts the server and waits until it accepts connections.
    pub fn start() -> Self {
        let program = program();
        let home = tempfile::tempdir().unwrap();
        let port = free_port();
        let mut start = Command::new(&program);
        start
            .env("HOME", home.path())
            .env("ANDROID_ADB_SERVER_PORT", port.to_string())
            .args(["-P", &port.to_string(), "start-server"]);
        let out = run_with_timeout(start, LIMIT);
        assert!(
            out.status.success(),
            "adb 36 start-server: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        wait_for("the adb 36 server", Duration::from_secs(10), || {
            TcpStream::connect(("127.0.0.1", port)).ok()
        });
        Self {
            program,
            home,
            port,
        }
    }

    /// `adb -P PORT ARGS…` against this server: its standard output.
    pub fn run(&self, args: &[&str]) -> String {
        let mut cmd = Command::new(&self.program);
        cmd.env("HOME", self.home.path())
            .args(["-P", &self.port.to_string()])
            .args(args);
        let out = run_with_timeout(cmd, LIMIT);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Whether `adb mdns services` lists `instance` of
    /// `_adb-tls-connect._tcp` at `127.0.0.1:port`.
    pub fn sees_connect_service(&self, instance: &str, port: u16) -> bool {
        let line = format!("{instance}\t_adb-tls-connect._tcp\t127.0.0.1:{port}");
        self.run(&["mdns", "services"]).contains(&line)
    }
}

impl Drop for NewAdb {
    fn drop(&mut self) {
        if let Ok(child) = Command::new(&self.program)
            .env("HOME", self.home.path())
            .args(["-P", &self.port.to_string(), "kill-server"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
        {
            let mut child = KillOnDrop::from(child);
            wait_exit(&mut child, Duration::from_secs(5));
        }
    }
}
