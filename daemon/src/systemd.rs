//! Everything the daemon says to, or learns from, systemd: the notify
//! protocol, start-up readiness, the watchdog period, and whether standard
//! error is the journal.
//!
//! The notify protocol is a few `KEY=VALUE` lines in one datagram to the
//! socket named by `$NOTIFY_SOCKET` (a path, or an abstract name written
//! with a leading `@`). We write the datagram ourselves instead of using
//! the `sd-notify` crate: it is a dozen lines, and that crate (0.5) does not
//! reach abstract sockets. Without `$NOTIFY_SOCKET` every notice is a no-op,
//! so the daemon behaves the same from a terminal.
//!
//! What the daemon sends (see `daemon.rs` for when):
//! - `READY=1` once every part registered in [`Readiness`] is up;
//! - `STATUS=…` with the number of devices online, whenever it changes;
//! - `WATCHDOG=1` from the main loop at half of `$WATCHDOG_USEC`;
//! - `RELOADING=1` with `MONOTONIC_USEC=` on SIGHUP, `READY=1` after;
//! - `STOPPING=1` first thing on SIGTERM or SIGINT.
//!
//! This module knows nothing of the daemon's parts; it is the only one
//! that knows systemd's variables and message format.

use droidwarden_bridge::DeviceInfo;
use std::ffi::OsStr;
use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::watch;

/// Sends notices to the service manager, or nothing when there is none.
#[derive(Debug)]
pub(crate) struct Notifier {
    target: Option<Target>,
    /// The last `STATUS=` sent, so that an unchanged status is not resent.
    status: Mutex<String>,
}

#[derive(Debug)]
struct Target {
    socket: UnixDatagram,
    address: SocketAddr,
}

impl Notifier {
    /// A notifier for `$NOTIFY_SOCKET`; a no-op when it is unset or
    /// unusable (logged).
    pub(crate) fn from_env() -> Self {
        Self::new(std::env::var_os("NOTIFY_SOCKET").as_deref())
    }

    /// A notifier for `socket` (`None` or empty: a no-op).
    pub(crate) fn new(socket: Option<&OsStr>) -> Self {
        let target = socket.filter(|s| !s.is_empty()).and_then(|s| {
            match Target::open(s) {
                Ok(target) => Some(target),
                Err(e) => {
                    tracing::warn!(socket = %s.to_string_lossy(), error = %e, "cannot use NOTIFY_SOCKET; not notifying systemd");
                    None
                }
            }
        });
        Self {
            target,
            status: Mutex::new(String::new()),
        }
    }

    /// Whether a service manager listens.
    pub(crate) fn enabled(&self) -> bool {
        self.target.is_some()
    }

    /// `READY=1`, with the status.
    pub(crate) fn ready(&self, status: &str) {
        *self.last_status() = status.to_owned();
        self.send(&format!("READY=1\nSTATUS={status}\n"));
    }

    /// `STATUS=…`, unless it is the status already sent.
    pub(crate) fn status(&self, status: &str) {
        {
            let mut last = self.last_status();
            if *last == status {
                return;
            }
            status.clone_into(&mut last);
        }
        self.send(&format!("STATUS={status}\n"));
    }

    /// `RELOADING=1` with `MONOTONIC_USEC=` (systemd 253 and later require
    /// both in one message); `READY=1` must follow.
    pub(crate) fn reloading(&self) {
        self.send(&format!(
            "RELOADING=1\nMONOTONIC_USEC={}\nSTATUS=reloading the configuration\n",
            monotonic_usec()
        ));
        self.last_status().clear();
    }

    /// `STOPPING=1`.
    pub(crate) fn stopping(&self) {
        self.send("STOPPING=1\nSTATUS=stopping: finishing calls in flight\n");
    }

    /// `WATCHDOG=1`.
    pub(crate) fn watchdog(&self) {
        self.send("WATCHDOG=1\n");
    }

    fn last_status(&self) -> std::sync::MutexGuard<'_, String> {
        self.status.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn send(&self, message: &str) {
        let Some(target) = &self.target else {
            return;
        };
        // Non-blocking: a service manager that does not read its socket
        // must not stall the async runtime; a lost notice is logged.
        if let Err(e) = target
            .socket
            .send_to_addr(message.as_bytes(), &target.address)
        {
            tracing::warn!(error = %e, notice = message.lines().next().unwrap_or_default(), "cannot notify systemd");
        }
    }
}

impl Target {
    fn open(socket: &OsStr) -> io::Result<Self> {
        let bytes = socket.as_bytes();
        let address = match bytes.strip_prefix(b"@") {
            Some(name) => SocketAddr::from_abstract_name(name)?,
            None => SocketAddr::from_pathname(socket)?,
        };
        let socket = UnixDatagram::unbound()?;
        socket.set_nonblocking(true)?;
        Ok(Self { socket, address })
    }
}

/// `CLOCK_MONOTONIC` in microseconds, as systemd expects in
/// `MONOTONIC_USEC=` (std's `Instant` uses that clock but does not expose
/// its value).
fn monotonic_usec() -> u128 {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    let seconds = u128::try_from(now.tv_sec).unwrap_or(0);
    let nanos = u128::try_from(now.tv_nsec).unwrap_or(0);
    seconds * 1_000_000 + nanos / 1_000
}

/// How often to send `WATCHDOG=1`: half of `$WATCHDOG_USEC`, when the
/// watchdog is on and meant for this process (`$WATCHDOG_PID` absent or
/// ours).
pub(crate) fn watchdog_period() -> Option<Duration> {
    watchdog_period_from(
        std::env::var("WATCHDOG_USEC").ok().as_deref(),
        std::env::var("WATCHDOG_PID").ok().as_deref(),
        std::process::id(),
    )
}

fn watchdog_period_from(usec: Option<&str>, pid: Option<&str>, me: u32) -> Option<Duration> {
    if let Some(pid) = pid
        && pid.trim().parse::<u32>().ok() != Some(me)
    {
        return None;
    }
    let usec = usec?.trim().parse::<u64>().ok().filter(|u| *u > 0)?;
    Some(Duration::from_micros(usec / 2))
}

/// What `STATUS=` says about devices.
pub(crate) fn device_status(devices: &[DeviceInfo]) -> String {
    let online = devices.iter().filter(|d| d.online).count();
    format!("{online}/{} devices online", devices.len())
}

/// The agent's part of `STATUS=`: runs going and approvals waiting.
pub(crate) fn agent_status(runs: usize, approvals: usize) -> String {
    format!(
        "; {runs} agent run{} active, {}",
        if runs == 1 { "" } else { "s" },
        pending_approvals(approvals)
    )
}

/// The status line's part for approval requests when the agent is off
/// (the automations' requests).
pub(crate) fn approvals_status(approvals: usize) -> String {
    format!("; {}", pending_approvals(approvals))
}

fn pending_approvals(approvals: usize) -> String {
    format!(
        "{approvals} approval{} pending",
        if approvals == 1 { "" } else { "s" }
    )
}

/// The parts that must be up before the daemon tells systemd it is ready.
///
/// Each part registers itself while the daemon starts, then reports that
/// it is up: [`Readiness::require`] hands out a [`ReadyFlag`] to set, and
/// [`Readiness::require_watch`] takes a part's own `watch` flag. The D-Bus
/// API, for one, plugs in with
/// `let dbus_ready = readiness.require("D-Bus");` and `dbus_ready.set()`
/// once its name is owned.
#[derive(Debug, Default)]
pub(crate) struct Readiness {
    parts: Vec<(&'static str, watch::Receiver<bool>)>,
}

/// A part's "I am up" switch (see [`Readiness`]). Dropping it unset means
/// the part gave up: the daemon never becomes ready.
#[derive(Debug)]
#[allow(
    dead_code,
    reason = "the hook for parts that report readiness themselves (D-Bus)"
)]
pub(crate) struct ReadyFlag(watch::Sender<bool>);

impl ReadyFlag {
    /// The part is up.
    #[allow(
        dead_code,
        reason = "the hook for parts that report readiness themselves (D-Bus)"
    )]
    pub(crate) fn set(&self) {
        self.0.send_replace(true);
    }
}

impl Readiness {
    /// Register a part; readiness waits until its flag is set.
    #[allow(
        dead_code,
        reason = "the hook for parts that report readiness themselves (D-Bus)"
    )]
    pub(crate) fn require(&mut self, part: &'static str) -> ReadyFlag {
        let (tx, rx) = watch::channel(false);
        self.parts.push((part, rx));
        ReadyFlag(tx)
    }

    /// Register a part that reports through its own flag.
    pub(crate) fn require_watch(&mut self, part: &'static str, up: watch::Receiver<bool>) {
        self.parts.push((part, up));
    }

    /// The parts not up yet, for the status line.
    pub(crate) fn waiting_for(&self) -> Vec<&'static str> {
        self.parts
            .iter()
            .filter(|(_, up)| !*up.borrow())
            .map(|(part, _)| *part)
            .collect()
    }

    /// Wait until every part is up.
    ///
    /// # Errors
    /// The part that gave up (dropped its flag unset).
    pub(crate) async fn wait(&self) -> Result<(), &'static str> {
        for (part, up) in &self.parts {
            let mut up = up.clone();
            if up.wait_for(|up| *up).await.is_err() {
                return Err(part);
            }
        }
        Ok(())
    }
}

/// Whether standard error is connected to the journal: systemd sets
/// `$JOURNAL_STREAM` to the `device:inode` of the stream it connected, and
/// it still is ours only if fd 2 is that very stream (a redirection in a
/// shell script, or a child that inherited the variable, would differ).
pub(crate) fn stderr_is_journal() -> bool {
    use std::os::unix::fs::MetadataExt;
    let Some(stream) = std::env::var("JOURNAL_STREAM").ok() else {
        return false;
    };
    match std::fs::metadata("/proc/self/fd/2") {
        Ok(meta) => journal_stream_is(&stream, meta.dev(), meta.ino()),
        Err(_) => false,
    }
}

fn journal_stream_is(stream: &str, dev: u64, ino: u64) -> bool {
    let Some((d, i)) = stream.trim().split_once(':') else {
        return false;
    };
    d.parse::<u64>().ok() == Some(dev) && i.parse::<u64>().ok() == Some(ino)
}

#[cfg(test)]
mod tests {
    use super::*;
    use droidwarden_bridge::TransportKind;
    use droidwarden_services::DeviceName;
    use std::os::unix::ffi::OsStrExt;

    fn receive(socket: &UnixDatagram) -> String {
        let mut buf = [0u8; 4096];
        let n = socket.recv(&mut buf).expect("a notice");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }

    fn listener() -> (tempfile::TempDir, UnixDatagram, Notifier) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let socket = UnixDatagram::bind(&path).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let notifier = Notifier::new(Some(path.as_os_str()));
        (dir, socket, notifier)
    }

    #[test]
    fn notices_are_datagrams_of_key_value_lines() {
        let (_dir, socket, notifier) = listener();
        assert!(notifier.enabled());
        notifier.ready("1/2 devices online");
        assert_eq!(receive(&socket), "READY=1\nSTATUS=1/2 devices online\n");
        notifier.status("1/2 devices online");
        notifier.status("2/2 devices online");
        // The unchanged status was not sent again.
        assert_eq!(receive(&socket), "STATUS=2/2 devices online\n");
        notifier.watchdog();
        assert_eq!(receive(&socket), "WATCHDOG=1\n");
        notifier.reloading();
        let reloading = receive(&socket);
        let mut lines = reloading.lines();
        assert_eq!(lines.next(), Some("RELOADING=1"));
        let usec: u128 = lines
            .next()
            .and_then(|l| l.strip_prefix("MONOTONIC_USEC="))
            .and_then(|v| v.parse().ok())
            .expect("MONOTONIC_USEC right after RELOADING");
        let again = monotonic_usec();
        assert!(usec > 0 && usec <= again && again - usec < 5_000_000);
        notifier.stopping();
        assert!(receive(&socket).starts_with("STOPPING=1\n"));
    }

    #[test]
    fn abstract_sockets_are_reached() {
        let name = format!("droidwarden-test-{}", std::process::id());
        let address = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let socket = UnixDatagram::bind_addr(&address).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let notifier = Notifier::new(Some(OsStr::from_bytes(format!("@{name}").as_bytes())));
        notifier.watchdog();
        assert_eq!(receive(&socket), "WATCHDOG=1\n");
    }

    #[test]
    fn without_a_socket_nothing_happens() {
        let notifier = Notifier::new(None);
        assert!(!notifier.enabled());
        notifier.ready("x");
        notifier.stopping();
        assert!(!Notifier::new(Some(OsStr::new(""))).enabled());
        // A socket nobody listens on is not an error that stops the daemon.
        let gone = Notifier::new(Some(OsStr::new("/nonexistent/notify")));
        gone.watchdog();
    }

    #[test]
    fn the_watchdog_runs_at_half_its_period_and_only_for_us() {
        let check = |usec: Option<&str>, pid: Option<&str>, expected: Option<u64>| {
            assert_eq!(
                watchdog_period_from(usec, pid, 42),
                expected.map(Duration::from_millis),
                "{usec:?} {pid:?}"
            );
        };
        check(Some("30000000"), None, Some(15_000));
        check(Some("1000000"), Some("42"), Some(500));
        check(Some("1000000"), Some("43"), None);
        check(Some("1000000"), Some("x"), None);
        check(Some("0"), None, None);
        check(Some("soon"), None, None);
        check(None, Some("42"), None);
    }

    #[test]
    fn the_journal_stream_is_recognised_by_device_and_inode() {
        assert!(journal_stream_is("8:12345", 8, 12345));
        assert!(!journal_stream_is("8:12345", 8, 12346));
        assert!(!journal_stream_is("9:12345", 8, 12345));
        assert!(!journal_stream_is("garbage", 8, 12345));
        assert!(!journal_stream_is("", 8, 12345));
    }

    #[test]
    fn the_status_counts_devices_online() {
        let device = |name: &str, online| DeviceInfo {
            name: DeviceName::try_from(name).unwrap(),
            transport: TransportKind::Adb,
            online,
            serial: name.into(),
            model: None,
            state_detail: None,
        };
        assert_eq!(device_status(&[]), "0/0 devices online");
        assert_eq!(
            device_status(&[device("a", true), device("b", false)]),
            "1/2 devices online"
        );
    }

    #[tokio::test]
    async fn readiness_waits_for_every_part() {
        let mut readiness = Readiness::default();
        let (mqtt_tx, mqtt_rx) = watch::channel(false);
        readiness.require_watch("MQTT", mqtt_rx);
        let dbus = readiness.require("D-Bus");
        assert_eq!(readiness.waiting_for(), vec!["MQTT", "D-Bus"]);
        let wait = readiness.wait();
        tokio::pin!(wait);
        assert!(futures_poll_once(wait.as_mut()).await.is_none());
        mqtt_tx.send_replace(true);
        assert!(futures_poll_once(wait.as_mut()).await.is_none());
        dbus.set();
        assert_eq!(wait.await, Ok(()));
        assert!(readiness.waiting_for().is_empty());

        let mut readiness = Readiness::default();
        drop(readiness.require("D-Bus"));
        assert_eq!(readiness.wait().await, Err("D-Bus"));
        // No parts: ready at once.
        assert_eq!(Readiness::default().wait().await, Ok(()));
    }

    /// Poll a future once: `Some` with its output when it is done.
    async fn futures_poll_once<F: std::future::Future + Unpin>(f: F) -> Option<F::Output> {
        tokio::time::timeout(Duration::from_millis(20), f)
            .await
            .ok()
    }
}
