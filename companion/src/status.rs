//! What the running companion is doing, kept in a small JSON file beside
//! the log so `droidwarden-companion status` can print one clear line.
//!
//! The file is rewritten (to a temporary file, then renamed) when the
//! state changes, at most once a second; it holds no request contents.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// The connection's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Trying to reach the broker for the first time.
    Connecting,
    /// Subscribed and announced `online`.
    Online,
    /// The connection was lost; trying again.
    Reconnecting,
    /// Stopped on purpose (a signal).
    Stopped,
}

/// The file's content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// The process id.
    pub pid: u32,
    /// The connection's state.
    pub state: State,
    /// Since when (Unix epoch ms).
    pub since_ms: u64,
    /// `host:port` of the broker.
    pub broker: String,
    /// The companion id.
    pub companion_id: String,
    /// Requests answered with a result.
    pub performed: u64,
    /// Requests answered with an error.
    pub refused: u64,
    /// When the last request arrived (Unix epoch ms).
    pub last_request_ms: Option<u64>,
    /// Events published.
    pub events: u64,
    /// The last connection error, if any since the last connection.
    pub last_error: Option<String>,
}

fn now_ms() -> u64 {
    droidwarden_services::time::epoch_ms(SystemTime::now())
}

/// Keeps the snapshot and writes it.
#[derive(Debug)]
pub struct Reporter {
    snapshot: Mutex<Snapshot>,
    changed: Notify,
    path: PathBuf,
}

impl Reporter {
    /// A reporter writing to `path`, starting as [`State::Connecting`].
    pub fn new(path: PathBuf, broker: String, companion_id: String) -> Arc<Self> {
        Arc::new(Self {
            snapshot: Mutex::new(Snapshot {
                pid: std::process::id(),
                state: State::Connecting,
                since_ms: now_ms(),
                broker,
                companion_id,
                performed: 0,
                refused: 0,
                last_request_ms: None,
                events: 0,
                last_error: None,
            }),
            changed: Notify::new(),
            path,
        })
    }

    fn update(&self, f: impl FnOnce(&mut Snapshot)) {
        // A panic while holding the lock leaves a snapshot still worth writing.
        f(&mut self.snapshot.lock().unwrap_or_else(PoisonError::into_inner));
        self.changed.notify_one();
    }

    /// The connection is now `state` (`error`: why it was lost).
    pub fn set_state(&self, state: State, error: Option<String>) {
        self.update(|s| {
            if s.state != state {
                s.state = state;
                s.since_ms = now_ms();
            }
            if state == State::Online {
                s.last_error = None;
            } else if error.is_some() {
                s.last_error = error;
            }
        });
    }

    /// A request was answered, with a result (`ok`) or an error.
    pub fn answered(&self, ok: bool) {
        self.update(|s| {
            if ok {
                s.performed += 1;
            } else {
                s.refused += 1;
            }
            s.last_request_ms = Some(now_ms());
        });
    }

    /// An event was published.
    pub fn event_sent(&self) {
        self.update(|s| s.events += 1);
    }

    /// A copy of the snapshot.
    pub fn snapshot(&self) -> Snapshot {
        self.snapshot
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    async fn write(&self) {
        let body = match serde_json::to_vec_pretty(&self.snapshot()) {
            Ok(body) => body,
            Err(_) => return,
        };
        if let Some(dir) = self.path.parent() {
            let _ = tokio::fs::create_dir_all(dir).await;
        }
        let tmp = self.path.with_extension("json.tmp");
        let written = async {
            tokio::fs::write(&tmp, &body).await?;
            tokio::fs::rename(&tmp, &self.path).await
        };
        if let Err(e) = written.await {
            tracing::debug!(error = %e, path = %self.path.display(), "cannot write the status file");
        }
    }

    /// Write the file whenever it changed, at most once a second, until
    /// `shutdown`; then once more.
    pub async fn run(self: Arc<Self>, shutdown: CancellationToken) {
        loop {
            self.write().await;
            tokio::select! {
                () = shutdown.cancelled() => break,
                () = self.changed.notified() => {}
            }
            tokio::select! {
                () = shutdown.cancelled() => break,
                () = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
        }
        self.write().await;
    }
}

/// Read the status file at `path`.
pub fn read(path: &Path) -> Option<Snapshot> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

fn ago(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..=59 => format!("{s} s ago"),
        60..=3599 => format!("{} min ago", s / 60),
        3600..=86_399 => format!("{} h ago", s / 3600),
        _ => format!("{} days ago", s / 86_400),
    }
}

/// The status line for `snapshot` (`None`: never ran), whose process is
/// `alive` or not, at `now_ms`.
pub fn line(snapshot: Option<&Snapshot>, alive: bool, now_ms: u64) -> String {
    let Some(s) = snapshot else {
        return "droidwarden-companion has not run yet (no status file); start it with `sv up droidwarden-companion` or `droidwarden-companion`".into();
    };
    let since = ago(now_ms.saturating_sub(s.since_ms));
    if !alive || s.state == State::Stopped {
        let how = if s.state == State::Stopped {
            "stopped"
        } else {
            "ended without stopping"
        };
        return format!(
            "stopped: not running (companion {} for {}; {how} {since})",
            s.companion_id, s.broker
        );
    }
    let requests = match s.last_request_ms {
        Some(at) => format!(
            "; {} requests performed, {} refused or failed, last {}",
            s.performed,
            s.refused,
            ago(now_ms.saturating_sub(at))
        ),
        None => "; no requests yet".into(),
    };
    let error = s
        .last_error
        .as_deref()
        .map(|e| format!(" (last error: {e})"))
        .unwrap_or_default();
    match s.state {
        State::Online => format!(
            "online: connected to {} as {} since {since} (pid {}){requests}; {} events sent",
            s.broker, s.companion_id, s.pid, s.events
        ),
        State::Connecting => format!(
            "connecting: trying to reach {} as {} since {since} (pid {}){error}",
            s.broker, s.companion_id, s.pid
        ),
        State::Reconnecting => format!(
            "offline: lost {} {since}, reconnecting (pid {}){error}{requests}",
            s.broker, s.pid
        ),
        State::Stopped => unreachable_stopped(),
    }
}

/// Handled above; kept total without a panic.
fn unreachable_stopped() -> String {
    "stopped".into()
}

/// Whether process `pid` is running (Linux and Android: `/proc/<pid>`).
pub fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(state: State) -> Snapshot {
        Snapshot {
            pid: 42,
            state,
            since_ms: 1_000,
            broker: "home.example:8883".into(),
            companion_id: "alice-pixel".into(),
            performed: 3,
            refused: 1,
            last_request_ms: Some(61_000),
            events: 5,
            last_error: Some("connection refused".into()),
        }
    }

    #[test]
    fn one_clear_line_per_state() {
        let now = 121_000;
        assert_eq!(
            line(Some(&snap(State::Online)), true, now),
            "online: connected to home.example:8883 as alice-pixel since 2 min ago (pid 42); 3 requests performed, 1 refused or failed, last 1 min ago; 5 events sent"
        );
        assert!(
            line(Some(&snap(State::Reconnecting)), true, now)
                .starts_with("offline: lost home.example:8883 2 min ago, reconnecting (pid 42) (last error: connection refused)")
        );
        assert!(line(Some(&snap(State::Online)), false, now).starts_with("stopped: not running"));
        assert!(line(None, false, now).contains("has not run yet"));
    }

    #[tokio::test]
    async fn the_file_follows_the_state() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/status.json");
        let r = Reporter::new(path.clone(), "h:1883".into(), "a".into());
        let stop = CancellationToken::new();
        let task = tokio::spawn(Arc::clone(&r).run(stop.clone()));
        r.set_state(State::Online, None);
        r.answered(true);
        stop.cancel();
        task.await.unwrap();
        let s = read(&path).unwrap();
        assert_eq!(
            (s.state, s.performed, s.pid),
            (State::Online, 1, std::process::id())
        );
        assert!(alive(s.pid));
    }
}
