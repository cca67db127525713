//! The async driver for one ADB TCP connection.
//!
//! A reader task turns bytes into `Message`s; service tasks run shell
//! commands; both report to this loop over one channel, and the loop feeds
//! the `Session` state machine and writes what it says to write. Faults
//! (delay, drop, fail) are applied here, per shell request.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::io;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::OwnedReadHalf;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::message::{HEADER_LEN, Header, Message, command_name};
use super::service::{ServiceKind, ServiceRequest, frame_output};
use super::session::{Action, Session};
use super::sync::{SyncFs, SyncMachine};
use crate::fault::OneShot;
use crate::phone::ui_server::{self, Parsed, Served};
use crate::shell::Fd;
use crate::sim::Shared;
use crate::state::PhoneState;
use std::collections::{HashMap, VecDeque};

/// Events for the connection loop.
#[derive(Debug)]
enum Event {
    /// A message from the host.
    Message(Message),
    /// The host closed the connection or sent garbage.
    Closed(String),
    /// A service finished; here are its WRTE payloads.
    Done {
        local_id: u32,
        payloads: Vec<Vec<u8>>,
    },
}

/// Capacity of the event channel. The reader blocks when it is full, which
/// pushes back on a host that writes faster than we answer; 64 is far more
/// than the handful of streams an adb server keeps open at once.
const EVENTS: usize = 64;

/// The first SDK level whose adbd speaks shell protocol v2 (Android 7).
const SHELL_V2_SDK: u32 = 24;

/// The CNXN banner for the phone as it is now. Like a real adbd, a phone
/// before Android 7 lists no features, so hosts fall back to `shell:`.
pub(crate) fn banner(st: &PhoneState) -> Vec<u8> {
    let mut banner = format!(
        "device::ro.product.name={};ro.product.model={};ro.product.device={};",
        st.props.name, st.props.model, st.props.device
    );
    if st.props.sdk >= SHELL_V2_SDK {
        banner.push_str("features=shell_v2,cmd");
    }
    banner.into_bytes()
}

/// Twenty unpredictable bytes for AUTH(TOKEN), from std's randomly keyed hasher.
fn auth_token() -> Vec<u8> {
    let mut token = Vec::with_capacity(24);
    for i in 0..3u64 {
        let mut h = RandomState::new().build_hasher();
        h.write_u64(i);
        token.extend_from_slice(&h.finish().to_le_bytes());
    }
    token.truncate(20);
    token
}

async fn read_message(reader: &mut OwnedReadHalf) -> io::Result<Message> {
    let mut header = [0u8; HEADER_LEN];
    reader.read_exact(&mut header).await?;
    let h = Header::decode(&header)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
    let mut data = vec![0u8; h.data_length as usize];
    reader.read_exact(&mut data).await?;
    Ok(Message::new(h.command, h.arg0, h.arg1, data))
}

async fn read_loop(mut reader: OwnedReadHalf, tx: mpsc::Sender<Event>, cancel: CancellationToken) {
    loop {
        let result = tokio::select! {
            () = cancel.cancelled() => return,
            r = read_message(&mut reader) => r,
        };
        let event = match result {
            Ok(m) => Event::Message(m),
            Err(e) => Event::Closed(e.to_string()),
        };
        let last = matches!(event, Event::Closed(_));
        if tx.send(event).await.is_err() || last {
            return;
        }
    }
}

/// Sleeps, unless cancelled first; `false` when cancelled.
async fn pause(d: Duration, cancel: &CancellationToken) -> bool {
    tokio::select! {
        () = cancel.cancelled() => false,
        () = tokio::time::sleep(d) => true,
    }
}

async fn run_service(
    shared: Arc<Shared>,
    local_id: u32,
    request: ServiceRequest,
    faults: (Option<Duration>, Option<OneShot>),
    max_payload: usize,
    tx: mpsc::Sender<Event>,
    cancel: CancellationToken,
) {
    let (delay, one_shot) = faults;
    // Frozen: held until thawed, then run even if the client has gone
    // (what it sent is still in the phone's buffers).
    shared.thawed().await;
    if let Some(d) = delay
        && !pause(d, &cancel).await
    {
        return;
    }
    let fail = match one_shot {
        Some(OneShot::Fail { exit, stderr }) => {
            tracing::info!(command = %request.command, exit, "fault: the first command fails");
            Some((exit, stderr))
        }
        // Drops are handled before the stream is even acknowledged.
        Some(OneShot::Drop) | None => None,
    };
    tracing::debug!(command = %request.command, kind = ?request.kind, "shell request");
    // The shell is synchronous and may append to the command-log file, so it
    // runs on the blocking pool.
    let phone = Arc::clone(&shared);
    let command = request.command.clone();
    let Ok(outcome) = tokio::task::spawn_blocking(move || match fail {
        Some((exit, stderr)) => phone.phone.run_failing_first(&command, exit, &stderr),
        None => phone.phone.run(&command),
    })
    .await
    else {
        return;
    };
    if !outcome.delay.is_zero() && !pause(outcome.delay, &cancel).await {
        return;
    }
    let (chunks, exit) = (outcome.output.into_chunks(), outcome.status);
    let payloads = frame_output(request.kind, &chunks, exit, max_payload);
    let _ = tx.send(Event::Done { local_id, payloads }).await;
}

/// The phone's files, for the file service.
struct PhoneFs(Arc<Shared>);

impl SyncFs for PhoneFs {
    fn stat(&self, path: &str) -> Option<(u32, u32, u32)> {
        self.0.phone.sync_stat(path)
    }
    fn list(&self, path: &str) -> Vec<(String, u32, u32, u32)> {
        self.0.phone.sync_list(path)
    }
    fn read(&self, path: &str) -> Result<Vec<u8>, String> {
        self.0.phone.sync_read(path)
    }
    fn check_create(&self, path: &str) -> Result<(), String> {
        self.0.phone.sync_check_create(path)
    }
    fn write(&self, path: &str, bytes: Vec<u8>, _mtime: u32) -> Result<(), String> {
        self.0.phone.sync_write(path, bytes)
    }
    fn max_file(&self) -> usize {
        crate::phone::MAX_FILE
    }
}

/// Feed a `sync:` stream's machine on the blocking pool (its file effects
/// take the phone's lock and may append to the command-log file); the
/// machine comes back with its reply.
async fn feed_sync(
    shared: &Arc<Shared>,
    mut machine: SyncMachine,
    data: Vec<u8>,
) -> Option<(SyncMachine, super::sync::Reply)> {
    let fs = PhoneFs(Arc::clone(shared));
    tokio::task::spawn_blocking(move || {
        let reply = machine.feed(&data, &fs);
        (machine, reply)
    })
    .await
    .ok()
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Stops the UI server on `port` whose life is `life` (a newer one on the
/// same port is left alone).
fn stop_server(shared: &Shared, port: u16, life: &CancellationToken) {
    life.cancel();
    let mut servers = lock(&shared.ui_servers);
    if servers
        .get(&port)
        .is_some_and(CancellationToken::is_cancelled)
    {
        servers.remove(&port);
    }
}

/// Serves one connection until the host leaves, a drop fault fires or
/// `cancel` is cancelled. Helper tasks are spawned on `tracker`.
pub(crate) async fn serve_connection(
    stream: TcpStream,
    shared: Arc<Shared>,
    tracker: TaskTracker,
    cancel: CancellationToken,
) {
    let peer = stream
        .peer_addr()
        .map_or_else(|_| "?".to_owned(), |a| a.to_string());
    let _ = stream.set_nodelay(true);
    let (reader, mut writer) = stream.into_split();
    let (tx, mut rx) = mpsc::channel(EVENTS);
    let conn = cancel.child_token();
    // Stops the reader and the service tasks however this function returns.
    let _stop = conn.clone().drop_guard();
    tracker.spawn(read_loop(reader, tx.clone(), conn.clone()));
    let mut session = Session::new(banner(&shared.phone.state()), shared.auth, auth_token())
        .prompting(shared.auth_prompt);
    let mut syncs: HashMap<u32, SyncMachine> = HashMap::new();
    // The `tcp:` streams to a UI server, each with what it has received.
    let mut tcps: HashMap<u32, Vec<u8>> = HashMap::new();
    // The shell streams that launched a UI server: its port and life.
    let mut launches: HashMap<u32, (u16, CancellationToken)> = HashMap::new();
    tracing::info!(%peer, "adb connection");
    'serve: loop {
        let event = tokio::select! {
            () = conn.cancelled() => break,
            ev = rx.recv() => match ev {
                Some(ev) => ev,
                None => break,
            },
        };
        let actions = match event {
            Event::Message(m) => {
                tracing::trace!(%peer, message = ?m, "received");
                session.on_message(m)
            }
            Event::Done { local_id, payloads } => session.on_output(local_id, payloads),
            Event::Closed(reason) => {
                tracing::info!(%peer, %reason, "adb connection closed");
                break;
            }
        };
        // Faults are taken when a request arrives, before it is acknowledged,
        // so that a drop leaves the request entirely unanswered.
        let mut planned = Vec::with_capacity(actions.len());
        for action in actions {
            let faults = match &action {
                Action::Start { request, .. }
                    if matches!(
                        request.kind,
                        ServiceKind::ShellV2 | ServiceKind::ShellRaw | ServiceKind::Exec
                    ) =>
                {
                    let faults = shared.take_faults();
                    if matches!(faults.1, Some(OneShot::Drop)) {
                        tracing::info!(%peer, command = %request.command, "fault: dropping the connection instead of answering");
                        break 'serve;
                    }
                    faults
                }
                Action::Send(_)
                | Action::Start { .. }
                | Action::Input { .. }
                | Action::Closed { .. } => (None, None),
            };
            planned.push((action, faults));
        }
        let mut planned: VecDeque<_> = planned.into();
        while let Some((action, faults)) = planned.pop_front() {
            match action {
                Action::Send(m) => {
                    tracing::trace!(%peer, command = %command_name(m.command), bytes = m.data.len(), "send");
                    let bytes = m.encode();
                    let written = tokio::select! {
                        () = conn.cancelled() => break 'serve,
                        r = writer.write_all(&bytes) => r,
                    };
                    if let Err(e) = written {
                        tracing::info!(%peer, error = %e, "adb write failed");
                        break 'serve;
                    }
                }
                Action::Start { local_id, request } if request.kind == ServiceKind::Sync => {
                    tracing::debug!(%peer, "sync service");
                    syncs.insert(local_id, SyncMachine::default());
                }
                Action::Start { local_id, request }
                    if matches!(request.kind, ServiceKind::Tcp(_)) =>
                {
                    let ServiceKind::Tcp(port) = request.kind else {
                        continue;
                    };
                    let listening = lock(&shared.ui_servers)
                        .get(&port)
                        .is_some_and(|t| !t.is_cancelled());
                    let next = if listening {
                        tcps.insert(local_id, Vec::new());
                        session.accept(local_id)
                    } else {
                        tracing::debug!(%peer, port, "tcp: nothing listens");
                        session.refuse(local_id)
                    };
                    planned.extend(next.into_iter().map(|a| (a, (None, None))));
                }
                Action::Start { local_id, request }
                    if ui_server::launch(&request.command)
                        .is_some_and(|(jar, _)| shared.phone.sync_stat(&jar).is_some()) =>
                {
                    let Some((_, port)) = ui_server::launch(&request.command) else {
                        continue;
                    };
                    let life = conn.child_token();
                    let taken = {
                        let mut servers = lock(&shared.ui_servers);
                        match servers.get(&port) {
                            Some(t) if !t.is_cancelled() => true,
                            _ => {
                                servers.insert(port, life.clone());
                                false
                            }
                        }
                    };
                    if taken {
                        let chunks = [(
                            Fd::Stderr,
                            b"java.net.BindException: Address already in use\n".to_vec(),
                        )];
                        let payloads =
                            frame_output(request.kind, &chunks, 1, session.max_payload());
                        for next in session.on_output(local_id, payloads) {
                            planned.push_back((next, (None, None)));
                        }
                        continue;
                    }
                    tracing::info!(%peer, port, "the on-device UI server starts");
                    launches.insert(local_id, (port, life.clone()));
                    let (tx, kind, max) = (tx.clone(), request.kind, session.max_payload());
                    tracker.spawn(async move {
                        life.cancelled().await;
                        // Killed: what a shell prints for a process that died by SIGKILL.
                        let payloads =
                            frame_output(kind, &[(Fd::Stderr, b"Killed\n".to_vec())], 137, max);
                        let _ = tx.send(Event::Done { local_id, payloads }).await;
                    });
                }
                Action::Closed { local_id } => {
                    tcps.remove(&local_id);
                    if let Some((port, life)) = launches.remove(&local_id) {
                        tracing::info!(%peer, port, "the on-device UI server stops: its shell stream closed");
                        stop_server(&shared, port, &life);
                    }
                }
                Action::Input { local_id, data } if tcps.contains_key(&local_id) => {
                    let Some(buf) = tcps.get_mut(&local_id) else {
                        continue;
                    };
                    buf.extend_from_slice(&data);
                    let answer = match ui_server::parse_request(buf) {
                        Parsed::Partial => continue,
                        Parsed::Bad(reason) => {
                            ui_server::response(400, "Bad Request", "text/plain", reason.as_bytes())
                        }
                        Parsed::Whole(req) => match shared.phone.ui_server(&req) {
                            Served::Answer(bytes) => bytes,
                            Served::Died => {
                                tracing::info!(%peer, "the on-device UI server crashes mid-call");
                                let dead: Vec<(u16, CancellationToken)> = lock(&shared.ui_servers)
                                    .iter()
                                    .map(|(p, t)| (*p, t.clone()))
                                    .collect();
                                for (port, life) in dead {
                                    stop_server(&shared, port, &life);
                                }
                                Vec::new()
                            }
                        },
                    };
                    tcps.remove(&local_id);
                    let payloads = super::message::chunk(&answer, session.max_payload());
                    for next in session.on_reply(local_id, payloads, true) {
                        planned.push_back((next, (None, None)));
                    }
                }
                Action::Input { local_id, data } => {
                    let Some(machine) = syncs.remove(&local_id) else {
                        continue;
                    };
                    let Some((machine, reply)) = feed_sync(&shared, machine, data).await else {
                        break 'serve;
                    };
                    if reply.close {
                        tracing::debug!(%peer, "sync service done");
                    } else {
                        syncs.insert(local_id, machine);
                    }
                    let payloads = super::message::chunk(&reply.bytes, session.max_payload());
                    for next in session.on_reply(local_id, payloads, reply.close) {
                        planned.push_back((next, (None, None)));
                    }
                }
                Action::Start { local_id, request } => {
                    tracker.spawn(run_service(
                        Arc::clone(&shared),
                        local_id,
                        request,
                        faults,
                        session.max_payload(),
                        tx.clone(),
                        conn.clone(),
                    ));
                }
            }
        }
    }
    let _ = writer.shutdown().await;
}
