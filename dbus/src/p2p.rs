//! The D-Bus API without a bus: `org.droidwarden.Daemon1` served
//! peer-to-peer on a Unix socket, `api.sock`, in the daemon's runtime
//! directory (`$RUNTIME_DIRECTORY` under systemd) or else its state
//! directory. A fresh server has no session bus, and the system bus needs
//! a policy file; the socket is what lets the CLI reach the daemon there.
//!
//! This module owns the socket file (a stale one is replaced, a live one
//! is never taken: that is a second daemon), the accepted connections (at
//! most [`MAX_PEERS`], each with a bounded handshake) and the set of live
//! connections that [`super::run`] sends every signal to. Access is the
//! file system's: the socket is 0600, so the daemon's user and root, in a
//! directory others cannot enter; the `EXTERNAL` handshake only checks
//! that a client is who the kernel says it is. (Not 0660 for the
//! droidwarden group: the system unit's `PrivateUsers=yes` maps every
//! other user to `nobody`, so a group member's handshake would fail
//! anyway; such users have the system bus and its policy.) What a call
//! does is left to [`super::Daemon1`], the same object the bus serves.
//!
//! The CLI's side, finding the socket, is [`candidates`] and
//! [`super::client::Client::over_socket`].

use super::{CALL_GRACE, Daemon1, PATH};
use futures_util::StreamExt as _;
use std::collections::HashMap;
use std::os::unix::fs::{FileTypeExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use zbus::object_server::SignalEmitter;

/// The socket's file name, in the runtime or the state directory.
pub const SOCKET_NAME: &str = "api.sock";
/// Where the system unit's runtime directory puts the socket; the CLI, not
/// being in the unit, has no `$RUNTIME_DIRECTORY` to find it by.
const SYSTEM_SOCKET: &str = "/run/droidwarden/api.sock";
/// At most this many clients at once: each costs a task and a few
/// buffers, and the CLI needs one per command.
const MAX_PEERS: usize = 64;
/// How long a client may take for the authentication handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the check for a live daemon on an existing socket may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a connection may take to close at shutdown.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);
/// The pause after a failed `accept` (out of file descriptors), so that
/// the loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(200);

/// Where the daemon puts its socket: `$RUNTIME_DIRECTORY/api.sock` under
/// systemd, else `<state dir>/api.sock`.
pub fn daemon_path(state_dir: &Path) -> PathBuf {
    runtime_directory().map_or_else(|| state_dir.join(SOCKET_NAME), |d| d.join(SOCKET_NAME))
}

/// Where the CLI looks for the socket, in order: the daemon's own rule
/// ([`daemon_path`]: the state directory, or `$RUNTIME_DIRECTORY` inside a
/// unit), the system unit's `/run/droidwarden/api.sock` and the user
/// unit's `$XDG_RUNTIME_DIR/droidwarden/api.sock`. Duplicates removed.
pub fn candidates(state_dir: &Path) -> Vec<PathBuf> {
    let mut paths = vec![daemon_path(state_dir), PathBuf::from(SYSTEM_SOCKET)];
    if let Some(xdg) = std::env::var_os("XDG_RUNTIME_DIR").filter(|v| !v.is_empty()) {
        paths.push(Path::new(&xdg).join("droidwarden").join(SOCKET_NAME));
    }
    let mut seen = Vec::new();
    for path in paths {
        if !seen.contains(&path) {
            seen.push(path);
        }
    }
    seen
}

fn runtime_directory() -> Option<PathBuf> {
    let dirs = std::env::var_os("RUNTIME_DIRECTORY")?;
    // systemd may pass several, colon-separated; the first is ours.
    let first = dirs.to_string_lossy().split(':').next()?.to_owned();
    (!first.is_empty()).then(|| PathBuf::from(first))
}

/// The socket, bound and not yet accepting, and what each connection
/// needs. Dropping it removes the socket file.
#[derive(Debug)]
pub(super) struct Server {
    /// `None` once [`Server::serve`] has stopped listening.
    listener: Option<UnixListener>,
    path: PathBuf,
    /// Whether the socket file is still ours to remove (once removed, the
    /// path may already be a new daemon's).
    owned: bool,
    iface: Daemon1,
    peers: Peers,
    slots: Arc<Semaphore>,
    tasks: TaskTracker,
}

/// The live peer-to-peer connections, for signals.
#[derive(Debug, Clone, Default)]
pub(super) struct Peers {
    inner: Arc<Mutex<PeerSet>>,
}

#[derive(Debug, Default)]
struct PeerSet {
    next: u64,
    conns: HashMap<u64, (zbus::Connection, CancellationToken)>,
}

/// Where one signal goes: the bus (`peer: None`) or one socket client.
#[derive(Debug)]
pub(super) struct Target {
    pub(super) emitter: SignalEmitter<'static>,
    pub(super) peer: Option<u64>,
}

impl Peers {
    fn insert(&self, conn: zbus::Connection, stop: CancellationToken) -> u64 {
        let mut set = self.lock();
        set.next += 1;
        let id = set.next;
        set.conns.insert(id, (conn, stop));
        id
    }

    fn remove(&self, id: u64) {
        self.lock().conns.remove(&id);
    }

    /// Disconnect a client that does not take its signals in: one stuck
    /// reader must not hold up every other client's signals.
    pub(super) fn evict(&self, id: u64) {
        if let Some((_, stop)) = self.lock().conns.remove(&id) {
            tracing::warn!(
                peer = id,
                "an API socket client does not read its signals; disconnecting it"
            );
            stop.cancel();
        }
    }

    /// A target for the object on every live connection. The lock is held
    /// only to clone the handles (a std mutex: never across an await).
    pub(super) fn targets(&self) -> Vec<Target> {
        self.lock()
            .conns
            .iter()
            .filter_map(|(id, (conn, _))| {
                SignalEmitter::new(conn, PATH).ok().map(|emitter| Target {
                    emitter,
                    peer: Some(*id),
                })
            })
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PeerSet> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Bind the socket at `path` for `iface`.
///
/// An existing socket file is removed first when nothing answers on it
/// (left by a daemon that crashed); when something does, another daemon
/// runs and this one must not start.
///
/// # Errors
/// Another daemon answers on `path`, `path` is something other than a
/// socket, or the socket cannot be bound or given its mode.
pub(super) async fn bind(path: PathBuf, iface: Daemon1) -> Result<Server, String> {
    if let Ok(meta) = tokio::fs::symlink_metadata(&path).await {
        if !meta.file_type().is_socket() {
            return Err(format!(
                "{} exists and is not a socket; remove it or free the path",
                path.display()
            ));
        }
        match tokio::time::timeout(PROBE_TIMEOUT, UnixStream::connect(&path)).await {
            Ok(Err(_)) => {
                tracing::info!(socket = %path.display(), "removing a stale API socket");
                tokio::fs::remove_file(&path)
                    .await
                    .map_err(|e| format!("cannot remove the stale {}: {e}", path.display()))?;
            }
            // Something accepted (or is too busy to): a daemon is there.
            Ok(Ok(_)) | Err(_) => {
                return Err(format!(
                    "another droidwarden daemon answers on {}: is one already running?",
                    path.display()
                ));
            }
        }
    }
    if let Some(dir) = path.parent()
        && let Ok(meta) = tokio::fs::metadata(dir).await
        && meta.permissions().mode() & 0o007 != 0
    {
        tracing::warn!(dir = %dir.display(), "the API socket's directory is open to every user; only the socket's own mode protects it");
    }
    let listener = UnixListener::bind(&path).map_err(|e| {
        // sockaddr_un holds 108 bytes, the terminating NUL included.
        let long = path.as_os_str().len() > 107;
        format!(
            "cannot listen on {}: {e}{}",
            path.display(),
            if long {
                " (a socket path is limited to 107 bytes: choose a shorter one with --socket)"
            } else {
                ""
            }
        )
    })?;
    // The owner's (and root's) alone, whatever the umask.
    if let Err(e) = tokio::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).await
    {
        let _ = std::fs::remove_file(&path);
        return Err(format!("cannot set the mode of {}: {e}", path.display()));
    }
    Ok(Server {
        listener: Some(listener),
        path,
        owned: true,
        iface,
        peers: Peers::default(),
        slots: Arc::new(Semaphore::new(MAX_PEERS)),
        tasks: TaskTracker::new(),
    })
}

impl Server {
    /// The socket's path.
    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// The connections signals go to.
    pub(super) fn peers(&self) -> Peers {
        self.peers.clone()
    }

    /// Accept clients until `shutdown`; then stop listening, remove the
    /// socket and close the connections once their calls are done
    /// (bounded by the daemon's grace for calls).
    pub(super) async fn serve(mut self, shutdown: CancellationToken) {
        let Some(listener) = self.listener.take() else {
            return;
        };
        // A server names itself with a GUID in the handshake; one per
        // start is what a bus does too.
        let guid = zbus::Guid::generate();
        loop {
            let accepted = tokio::select! {
                () = shutdown.cancelled() => break,
                accepted = listener.accept() => accepted,
            };
            let stream = match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot accept on the API socket");
                    tokio::select! {
                        () = shutdown.cancelled() => break,
                        () = tokio::time::sleep(ACCEPT_BACKOFF) => continue,
                    }
                }
            };
            // The file's mode is the first guard; the kernel's word on who
            // connected is the second (a socket file made wider, or a
            // descriptor passed on, must not let another user in).
            match stream.peer_cred().map(|c| c.uid()) {
                Ok(uid) if peer_allowed(uid) => {}
                Ok(uid) => {
                    tracing::warn!(
                        uid,
                        "refused an API socket client: only the daemon's user and root may connect"
                    );
                    continue;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "refused an API socket client: its uid is unknown");
                    continue;
                }
            }
            let Ok(slot) = Arc::clone(&self.slots).try_acquire_owned() else {
                tracing::warn!(max = MAX_PEERS, "too many API socket clients; refusing one");
                continue;
            };
            self.tasks.spawn(peer(
                stream,
                slot,
                guid.clone(),
                self.iface.clone(),
                self.peers.clone(),
                shutdown.clone(),
            ));
        }
        // No new client from here on: stop listening and remove the file
        // now, not after the calls in flight.
        drop(listener);
        self.remove_socket();
        self.tasks.close();
        // Each connection waits for the calls in flight, then closes.
        if tokio::time::timeout(CALL_GRACE + CLOSE_TIMEOUT, self.tasks.wait())
            .await
            .is_err()
        {
            tracing::debug!("API socket connections still open at shutdown");
        }
        tracing::debug!(socket = %self.path.display(), "API socket closed");
    }
}

/// Whether a socket client running as `uid` may use the API: the daemon's
/// own user and root (who may read its state directory anyway).
fn peer_allowed(uid: u32) -> bool {
    uid == 0 || uid == rustix::process::geteuid().as_raw()
}

impl Server {
    /// Remove the socket file, once. It is ours: bound by this process (a
    /// live socket of another daemon is never bound over, see [`bind`]).
    /// A blocking call, but a single unlink in a directory of our own.
    fn remove_socket(&mut self) {
        if !std::mem::take(&mut self.owned) {
            return;
        }
        if let Err(e) = std::fs::remove_file(&self.path) {
            tracing::debug!(socket = %self.path.display(), error = %e, "cannot remove the API socket");
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.remove_socket();
    }
}

/// One client: the handshake, then serve the object until the client goes
/// or the daemon stops.
async fn peer(
    stream: UnixStream,
    _slot: OwnedSemaphorePermit,
    guid: zbus::Guid<'static>,
    iface: Daemon1,
    peers: Peers,
    shutdown: CancellationToken,
) {
    let calls = iface.calls.clone();
    let build = async {
        zbus::connection::Builder::unix_stream(stream)
            .server(guid)?
            .p2p()
            .serve_at(PATH, iface)?
            .serve_at(BUS_PATH, Hello)?
            .build()
            .await
    };
    // A client still in its handshake at shutdown is simply dropped.
    let handshake = tokio::select! {
        () = shutdown.cancelled() => return,
        handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, build) => handshake,
    };
    let conn = match handshake {
        Ok(Ok(conn)) => conn,
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "API socket handshake failed");
            return;
        }
        Err(_) => {
            tracing::debug!(
                "API socket client did not finish the handshake in {HANDSHAKE_TIMEOUT:?}"
            );
            return;
        }
    };
    // In the set at once, so that the signals of a call it makes next
    // (`Ask`'s events) reach it.
    let stop = shutdown.child_token();
    let id = peers.insert(conn.clone(), stop.clone());
    // Clients send no signals; this stream only tells when the connection
    // ends (the reader fails, then the stream closes). It needs no bus
    // (no AddMatch on a peer-to-peer connection), so it is there at once.
    let rule = zbus::MatchRule::builder()
        .msg_type(zbus::message::Type::Signal)
        .build();
    let closed = match tokio::time::timeout(
        HANDSHAKE_TIMEOUT,
        zbus::MessageStream::for_match_rule(rule, &conn, Some(1)),
    )
    .await
    {
        Ok(Ok(stream)) => stream,
        // The client has gone already (a quick command), or the
        // connection failed.
        _ => {
            peers.remove(id);
            let _ = tokio::time::timeout(CLOSE_TIMEOUT, conn.graceful_shutdown()).await;
            return;
        }
    };
    tracing::debug!(peer = id, "API socket client connected");
    let mut closed = closed;
    let stopping = loop {
        tokio::select! {
            () = stop.cancelled() => break shutdown.is_cancelled(),
            message = closed.next() => match message {
                Some(Ok(_)) => {}
                Some(Err(_)) | None => break false,
            },
        }
    };
    peers.remove(id);
    tracing::debug!(peer = id, "API socket client gone");
    if stopping {
        // A call in flight still has to send its reply on this connection.
        let _ = tokio::time::timeout(CALL_GRACE, calls.wait()).await;
    }
    drop(closed);
    let _ = tokio::time::timeout(CLOSE_TIMEOUT, conn.graceful_shutdown()).await;
}

/// Where tools that take any address for a bus's call `Hello`.
const BUS_PATH: &str = "/org/freedesktop/DBus";

/// Just enough of `org.freedesktop.DBus` for the standard tools, which
/// take an `--address` for a bus (`gdbus call --address`, `busctl
/// --address`): they say `Hello` first and may add match rules. There is
/// no bus: the one peer is the daemon, and every signal reaches every
/// connection, so the rules change nothing.
#[derive(Debug)]
struct Hello;

#[zbus::interface(name = "org.freedesktop.DBus")]
impl Hello {
    /// A unique name for the client, as a bus would give it.
    fn hello(&self) -> &str {
        ":1.1"
    }

    /// Accepted and ignored: every signal is sent anyway.
    fn add_match(&self, _rule: &str) {}

    /// Accepted and ignored.
    fn remove_match(&self, _rule: &str) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::iface;

    async fn client(path: &Path) -> zbus::Connection {
        let stream = UnixStream::connect(path).await.expect("connect");
        tokio::time::timeout(
            Duration::from_secs(5),
            zbus::connection::Builder::unix_stream(stream).p2p().build(),
        )
        .await
        .expect("handshake in time")
        .expect("handshake")
    }

    #[tokio::test]
    async fn a_live_socket_is_never_taken_and_a_stale_one_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(SOCKET_NAME);
        let first = bind(path.clone(), iface()).await.expect("bind");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let err = bind(path.clone(), iface()).await.unwrap_err();
        assert!(err.contains("another droidwarden daemon answers"), "{err}");
        drop(first);
        assert!(!path.exists(), "removed when the server goes");
        // What a killed daemon leaves: a socket file nobody listens on.
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        let again = bind(path.clone(), iface()).await.expect("stale replaced");
        drop(again);
        std::fs::write(&path, "not a socket").unwrap();
        let err = bind(path.clone(), iface()).await.unwrap_err();
        assert!(err.contains("is not a socket"), "{err}");
        let long = dir.path().join("x".repeat(120));
        let err = bind(long, iface()).await.unwrap_err();
        assert!(err.contains("--socket"), "{err}");
    }

    /// The kernel's word decides, not only the file's mode: another user
    /// who can reach the socket (made 0666 here) is refused before the
    /// handshake, the daemon's own user is served.
    #[tokio::test]
    async fn a_client_of_another_user_is_refused_even_when_the_file_lets_it_in() {
        // The system's Python: one another user can run (not a per-user
        // install under /root).
        const PYTHON: &str = "/usr/bin/python3";
        if !rustix::process::geteuid().is_root() || !Path::new(PYTHON).exists() {
            eprintln!("skipped: switching users needs root, and the client {PYTHON}");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = dir.path().join(SOCKET_NAME);
        let server = bind(path.clone(), iface()).await.expect("bind");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        let shutdown = CancellationToken::new();
        let serving = tokio::spawn(server.serve(shutdown.clone()));
        // The EXTERNAL handshake for the client's own uid; a served client
        // gets `OK <guid>`, a refused one a closed connection.
        let script = "import os,socket,sys\n\
            s=socket.socket(socket.AF_UNIX)\n\
            s.settimeout(5)\n\
            s.connect(sys.argv[1])\n\
            try:\n  s.sendall(b'\\0AUTH EXTERNAL '+str(os.getuid()).encode().hex().encode()+b'\\r\\n')\n  print(s.recv(100).decode(errors='replace').strip() or 'closed')\n\
            except OSError:\n  print('closed')\n";
        let hello = |uid: Option<u32>| {
            let path = path.clone();
            async move {
                let mut cmd = match uid {
                    Some(uid) => {
                        let mut cmd = tokio::process::Command::new("setpriv");
                        cmd.args([
                            format!("--reuid={uid}"),
                            format!("--regid={uid}"),
                            "--clear-groups".to_owned(),
                            PYTHON.to_owned(),
                        ]);
                        cmd
                    }
                    None => tokio::process::Command::new(PYTHON),
                };
                let out = tokio::time::timeout(
                    Duration::from_secs(10),
                    cmd.arg("-c").arg(script).arg(&path).output(),
                )
                .await
                .expect("the client finished")
                .expect("python3 runs");
                String::from_utf8_lossy(&out.stdout).trim().to_owned()
            }
        };
        assert!(hello(None).await.starts_with("OK "), "root is served");
        assert_eq!(hello(Some(65534)).await, "closed", "nobody is refused");
        shutdown.cancel();
        serving.await.unwrap();
    }

    #[tokio::test]
    async fn at_most_max_peers_clients_at_once() {
        use tokio::io::AsyncReadExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(SOCKET_NAME);
        let server = bind(path.clone(), iface()).await.expect("bind");
        let slots = Arc::clone(&server.slots);
        let shutdown = CancellationToken::new();
        let serving = tokio::spawn(server.serve(shutdown.clone()));
        // Clients that connect and say nothing hold a slot each (until
        // their handshake times out).
        let mut idle = Vec::new();
        for _ in 0..MAX_PEERS {
            idle.push(UnixStream::connect(&path).await.unwrap());
        }
        tokio::time::timeout(Duration::from_secs(5), async {
            while slots.available_permits() > 0 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("every slot taken");
        // One more is accepted and closed at once.
        let mut extra = UnixStream::connect(&path).await.unwrap();
        let mut buf = [0u8; 16];
        let read = tokio::time::timeout(Duration::from_secs(2), extra.read(&mut buf))
            .await
            .expect("closed in time");
        assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
        // Shutdown does not wait for handshakes.
        shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(2), serving)
            .await
            .expect("serve stops without waiting for handshakes")
            .unwrap();
        drop(idle);
    }

    #[tokio::test]
    async fn a_client_calls_and_receives_signals_then_leaves_the_set() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(SOCKET_NAME);
        let server = bind(path.clone(), iface()).await.expect("bind");
        let peers = server.peers();
        let shutdown = CancellationToken::new();
        let serving = tokio::spawn(server.serve(shutdown.clone()));
        let conn = client(&path).await;
        let reply = conn
            .call_method(
                None::<&str>,
                PATH,
                Some(crate::INTERFACE),
                "ListDevices",
                &(),
            )
            .await
            .expect("ListDevices");
        assert_eq!(reply.body().deserialize::<String>().unwrap(), "[]");
        let rule = zbus::MatchRule::builder()
            .msg_type(zbus::message::Type::Signal)
            .member("DeviceAvailabilityChanged")
            .unwrap()
            .build();
        let mut signals = zbus::MessageStream::for_match_rule(rule, &conn, Some(8))
            .await
            .unwrap();
        let targets = peers.targets();
        assert_eq!(targets.len(), 1);
        for target in targets {
            Daemon1::device_availability_changed(&target.emitter, "phone", true)
                .await
                .unwrap();
        }
        let signal = tokio::time::timeout(Duration::from_secs(5), signals.next())
            .await
            .expect("a signal in time")
            .expect("a signal")
            .unwrap();
        let (device, online): (String, bool) = signal.body().deserialize().unwrap();
        assert_eq!((device.as_str(), online), ("phone", true));
        drop(signals);
        drop(conn);
        tokio::time::timeout(Duration::from_secs(5), async {
            while !peers.targets().is_empty() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("the closed connection leaves the set");
        shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(10), serving)
            .await
            .expect("serve stops")
            .unwrap();
        assert!(!path.exists(), "the socket is removed at shutdown");
    }

    #[test]
    fn the_cli_looks_where_the_daemon_puts_it_first() {
        let state = Path::new("/tmp/state");
        let paths = candidates(state);
        assert_eq!(paths[0], daemon_path(state));
        assert!(paths.contains(&PathBuf::from(SYSTEM_SOCKET)));
        let mut unique = paths.clone();
        unique.dedup();
        assert_eq!(unique.len(), paths.len());
    }
}
