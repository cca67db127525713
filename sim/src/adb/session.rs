//! The device side of one ADB connection as a state machine.
//!
//! `Session` consumes messages from the host and finished service output and
//! returns the actions to perform (messages to send, services to start). It
//! does no I/O, so the handshake, stream bookkeeping and flow control (one
//! WRTE in flight per stream until the host's OKAY) are unit-tested without a
//! runtime. The async driver in `conn` performs the actions.

use std::collections::{BTreeMap, VecDeque};

use super::message::{
    A_AUTH, A_CLSE, A_CNXN, A_OKAY, A_OPEN, A_VERSION, A_WRTE, AUTH_RSAPUBLICKEY, AUTH_SIGNATURE,
    AUTH_TOKEN, MAX_PAYLOAD, Message,
};
use super::service::{ServiceKind, ServiceRequest, parse_service};

/// What the driver must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Action {
    /// Write this message to the host.
    Send(Message),
    /// Run a service; report its framed output with `Session::on_output`
    /// (for `sync:`, set up its state machine: its input follows in
    /// [`Action::Input`]s).
    Start {
        /// Our id of the new stream.
        local_id: u32,
        /// The service and its command.
        request: ServiceRequest,
    },
    /// The host closed a stream that was still open here: whatever serves
    /// it stops (a `tcp:` connection, a long-running command).
    Closed {
        /// Our id of the stream.
        local_id: u32,
    },
    /// Bytes the host wrote to an interactive (`sync:` or `tcp:`) stream;
    /// report the answer with `Session::on_reply`.
    Input {
        /// Our id of the stream.
        local_id: u32,
        /// The bytes.
        data: Vec<u8>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for the host's CNXN.
    AwaitConnect,
    /// We sent AUTH(TOKEN); waiting for a signature or key.
    AwaitAuth,
    /// Connected: streams may be opened.
    Online,
}

#[derive(Debug)]
struct StreamState {
    remote_id: u32,
    /// A `sync:` stream: the host's writes are requests, not stdin.
    interactive: bool,
    pending: VecDeque<Vec<u8>>,
    awaiting_okay: bool,
    finished: bool,
}

/// One connection's protocol state.
#[derive(Debug)]
pub(crate) struct Session {
    banner: Vec<u8>,
    /// Whether the banner offers the `shell_v2` feature.
    shell_v2: bool,
    auth: bool,
    /// The phone's user has not accepted this host's key: signatures are
    /// refused and a public key waits, for ever, for the prompt's answer
    /// (adb lists the phone `unauthorized`).
    prompt: bool,
    auth_token: Vec<u8>,
    phase: Phase,
    host_max: u32,
    streams: BTreeMap<u32, StreamState>,
    next_id: u32,
}

impl Session {
    /// A fresh session. `banner` is the CNXN payload (`device::…`); with
    /// `auth` the device asks the host to sign `auth_token` first.
    pub(crate) fn new(banner: Vec<u8>, auth: bool, auth_token: Vec<u8>) -> Self {
        let shell_v2 = String::from_utf8_lossy(&banner)
            .split(';')
            .filter_map(|prop| prop.strip_prefix("features="))
            .any(|list| list.split(',').any(|f| f == "shell_v2"));
        Self {
            banner,
            shell_v2,
            auth,
            prompt: false,
            auth_token,
            phase: Phase::AwaitConnect,
            host_max: 4096,
            streams: BTreeMap::new(),
            next_id: 1,
        }
    }

    /// With `prompt`, a session whose user never accepts the host's key
    /// (implies asking for authentication).
    pub(crate) fn prompting(mut self, prompt: bool) -> Self {
        self.prompt = prompt;
        self.auth |= prompt;
        self
    }

    /// The largest WRTE payload for this connection: min(host, device).
    pub(crate) fn max_payload(&self) -> usize {
        self.host_max.min(MAX_PAYLOAD) as usize
    }

    /// Whether the handshake is complete.
    pub(crate) fn is_online(&self) -> bool {
        self.phase == Phase::Online
    }

    fn connect_message(&self) -> Message {
        Message::new(A_CNXN, A_VERSION, MAX_PAYLOAD, self.banner.clone())
    }

    /// Handles one message from the host.
    pub(crate) fn on_message(&mut self, msg: Message) -> Vec<Action> {
        match msg.command {
            A_CNXN => {
                // A (re)connect resets every stream, as adbd does.
                self.streams.clear();
                self.host_max = if msg.arg1 == 0 { 4096 } else { msg.arg1 };
                if self.auth {
                    self.phase = Phase::AwaitAuth;
                    vec![Action::Send(Message::new(
                        A_AUTH,
                        AUTH_TOKEN,
                        0,
                        self.auth_token.clone(),
                    ))]
                } else {
                    self.phase = Phase::Online;
                    vec![Action::Send(self.connect_message())]
                }
            }
            // A signature is refused as adbd refuses one it cannot check
            // (a new token), and a public key shows the prompt, which no
            // one answers.
            A_AUTH if self.phase == Phase::AwaitAuth && self.prompt => match msg.arg0 {
                AUTH_SIGNATURE => vec![Action::Send(Message::new(
                    A_AUTH,
                    AUTH_TOKEN,
                    0,
                    self.auth_token.clone(),
                ))],
                _ => Vec::new(),
            },
            A_AUTH if self.phase == Phase::AwaitAuth => match msg.arg0 {
                // Any signature is accepted, and so is a public key (a real
                // phone would ask its user; this one always says yes).
                AUTH_SIGNATURE | AUTH_RSAPUBLICKEY => {
                    self.phase = Phase::Online;
                    vec![Action::Send(self.connect_message())]
                }
                _ => Vec::new(),
            },
            A_OPEN if self.is_online() => self.on_open(msg),
            A_OKAY if self.is_online() => {
                let local = msg.arg1;
                match self.streams.get_mut(&local) {
                    Some(s) if s.remote_id == msg.arg0 => {
                        s.awaiting_okay = false;
                        self.pump(local)
                    }
                    _ => Vec::new(),
                }
            }
            A_WRTE if self.is_online() => match self.streams.get(&msg.arg1) {
                // A request to the file service: acknowledge, hand it over.
                Some(s) if s.interactive => vec![
                    Action::Send(Message::new(A_OKAY, msg.arg1, s.remote_id, Vec::new())),
                    Action::Input {
                        local_id: msg.arg1,
                        data: msg.data,
                    },
                ],
                // Stdin (or v2 close-stdin / window-size packets): acknowledge, ignore.
                Some(s) => vec![Action::Send(Message::new(
                    A_OKAY,
                    msg.arg1,
                    s.remote_id,
                    Vec::new(),
                ))],
                // A WRTE on a stream we already closed: ignore.
                None => Vec::new(),
            },
            A_CLSE if self.is_online() => {
                // The host closed the stream, or echoes our CLSE: forget it.
                match self.streams.remove(&msg.arg1) {
                    Some(_) => vec![Action::Closed { local_id: msg.arg1 }],
                    None => Vec::new(),
                }
            }
            _ => Vec::new(),
        }
    }

    fn on_open(&mut self, msg: Message) -> Vec<Action> {
        let remote_id = msg.arg0;
        let Some(request) = parse_service(&msg.data, self.shell_v2) else {
            return vec![Action::Send(Message::new(A_CLSE, 0, remote_id, Vec::new()))];
        };
        let local_id = self.next_id;
        self.next_id = self.next_id.checked_add(1).unwrap_or(1);
        let tcp = matches!(request.kind, ServiceKind::Tcp(_));
        self.streams.insert(
            local_id,
            StreamState {
                remote_id,
                interactive: request.kind == ServiceKind::Sync || tcp,
                pending: VecDeque::new(),
                awaiting_okay: false,
                finished: false,
            },
        );
        if tcp {
            // Whether something listens on the port decides between OKAY
            // and CLSE: the driver answers with `accept` or `refuse`.
            return vec![Action::Start { local_id, request }];
        }
        vec![
            Action::Send(Message::new(A_OKAY, local_id, remote_id, Vec::new())),
            Action::Start { local_id, request },
        ]
    }

    /// A `tcp:` stream found its port listening: tell the host it is open.
    pub(crate) fn accept(&mut self, local_id: u32) -> Vec<Action> {
        match self.streams.get(&local_id) {
            Some(s) => vec![Action::Send(Message::new(
                A_OKAY,
                local_id,
                s.remote_id,
                Vec::new(),
            ))],
            None => Vec::new(),
        }
    }

    /// A `tcp:` stream's port has no listener (connection refused): close
    /// it, as adbd does when its connect fails.
    pub(crate) fn refuse(&mut self, local_id: u32) -> Vec<Action> {
        match self.streams.remove(&local_id) {
            Some(s) => vec![Action::Send(Message::new(
                A_CLSE,
                0,
                s.remote_id,
                Vec::new(),
            ))],
            None => Vec::new(),
        }
    }

    /// Hands over a service's framed output; the stream closes once the host
    /// has acknowledged every payload.
    pub(crate) fn on_output(&mut self, local_id: u32, payloads: Vec<Vec<u8>>) -> Vec<Action> {
        self.on_reply(local_id, payloads, true)
    }

    /// Hands over an interactive stream's answer; with `close`, the stream
    /// closes once the host has acknowledged it.
    pub(crate) fn on_reply(
        &mut self,
        local_id: u32,
        payloads: Vec<Vec<u8>>,
        close: bool,
    ) -> Vec<Action> {
        let Some(s) = self.streams.get_mut(&local_id) else {
            return Vec::new();
        };
        s.pending
            .extend(payloads.into_iter().filter(|p| !p.is_empty()));
        s.finished = close;
        self.pump(local_id)
    }

    fn pump(&mut self, local_id: u32) -> Vec<Action> {
        let Some(s) = self.streams.get_mut(&local_id) else {
            return Vec::new();
        };
        if s.awaiting_okay {
            return Vec::new();
        }
        if let Some(payload) = s.pending.pop_front() {
            s.awaiting_okay = true;
            return vec![Action::Send(Message::new(
                A_WRTE,
                local_id,
                s.remote_id,
                payload,
            ))];
        }
        if s.finished {
            let remote = s.remote_id;
            self.streams.remove(&local_id);
            return vec![Action::Send(Message::new(
                A_CLSE,
                local_id,
                remote,
                Vec::new(),
            ))];
        }
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adb::service::ServiceKind;

    const BANNER: &[u8] = b"device::ro.product.model=Test;features=shell_v2,cmd";

    fn sent(actions: &[Action]) -> Vec<Message> {
        actions
            .iter()
            .filter_map(|a| match a {
                Action::Send(m) => Some(m.clone()),
                Action::Start { .. } | Action::Input { .. } | Action::Closed { .. } => None,
            })
            .collect()
    }

    fn connected(host_max: u32) -> Session {
        let mut s = Session::new(BANNER.to_vec(), false, vec![0; 20]);
        let out = s.on_message(Message::new(
            A_CNXN,
            A_VERSION,
            host_max,
            b"host::\0".to_vec(),
        ));
        assert_eq!(
            sent(&out),
            vec![Message::new(
                A_CNXN,
                A_VERSION,
                MAX_PAYLOAD,
                BANNER.to_vec()
            )]
        );
        s
    }

    #[test]
    fn cnxn_is_answered_with_our_cnxn() {
        let s = connected(1024 * 1024);
        assert!(s.is_online());
        assert_eq!(s.max_payload(), 256 * 1024);
        assert_eq!(connected(4096).max_payload(), 4096);
    }

    #[test]
    fn a_prompt_no_one_answers_never_connects() {
        let mut s = Session::new(b"device::".to_vec(), false, vec![7; 20]).prompting(true);
        let out = s.on_message(Message::new(
            A_CNXN,
            A_VERSION,
            MAX_PAYLOAD,
            b"host::".to_vec(),
        ));
        assert_eq!(
            out,
            vec![Action::Send(Message::new(
                A_AUTH,
                AUTH_TOKEN,
                0,
                vec![7; 20]
            ))]
        );
        // Each signature gets a new token; the key waits for the user.
        let out = s.on_message(Message::new(A_AUTH, AUTH_SIGNATURE, 0, vec![1; 256]));
        assert_eq!(
            out,
            vec![Action::Send(Message::new(
                A_AUTH,
                AUTH_TOKEN,
                0,
                vec![7; 20]
            ))]
        );
        assert!(
            s.on_message(Message::new(A_AUTH, AUTH_RSAPUBLICKEY, 0, b"key".to_vec()))
                .is_empty()
        );
        assert!(!s.is_online());
    }

    #[test]
    fn auth_token_then_any_signature_connects() {
        let mut s = Session::new(BANNER.to_vec(), true, vec![9; 20]);
        let out = s.on_message(Message::new(A_CNXN, A_VERSION, 4096, Vec::new()));
        assert_eq!(
            sent(&out),
            vec![Message::new(A_AUTH, AUTH_TOKEN, 0, vec![9; 20])]
        );
        assert!(!s.is_online());
        // OPEN before authentication is ignored.
        assert!(
            s.on_message(Message::new(A_OPEN, 1, 0, b"shell:ls\0".to_vec()))
                .is_empty()
        );
        let out = s.on_message(Message::new(A_AUTH, AUTH_SIGNATURE, 0, vec![1; 256]));
        assert_eq!(sent(&out)[0].command, A_CNXN);
        assert!(s.is_online());
    }

    #[test]
    fn unknown_service_is_closed() {
        let mut s = connected(4096);
        let out = s.on_message(Message::new(A_OPEN, 5, 0, b"framebuffer:\0".to_vec()));
        assert_eq!(sent(&out), vec![Message::new(A_CLSE, 0, 5, Vec::new())]);
    }

    #[test]
    fn sync_streams_hand_over_the_hosts_writes_and_stay_open() {
        let mut s = connected(4096);
        let out = s.on_message(Message::new(A_OPEN, 5, 0, b"sync:\0".to_vec()));
        let local = match &out[1] {
            Action::Start { local_id, request } => {
                assert_eq!(request.kind, ServiceKind::Sync);
                *local_id
            }
            other => panic!("{other:?}"),
        };
        let out = s.on_message(Message::new(A_WRTE, 5, local, b"STAT".to_vec()));
        assert_eq!(
            out,
            vec![
                Action::Send(Message::new(A_OKAY, local, 5, Vec::new())),
                Action::Input {
                    local_id: local,
                    data: b"STAT".to_vec()
                },
            ]
        );
        // A reply without close keeps the stream; with close, it ends.
        let out = s.on_reply(local, vec![b"answer".to_vec()], false);
        assert_eq!(sent(&out)[0].command, A_WRTE);
        assert!(
            s.on_message(Message::new(A_OKAY, 5, local, Vec::new()))
                .is_empty()
        );
        let out = s.on_reply(local, Vec::new(), true);
        assert_eq!(sent(&out), vec![Message::new(A_CLSE, local, 5, Vec::new())]);
    }

    #[test]
    fn open_write_flow_control_and_close() {
        let mut s = connected(4096);
        let out = s.on_message(Message::new(
            A_OPEN,
            42,
            0,
            b"shell,v2,raw:echo hi\0".to_vec(),
        ));
        assert_eq!(
            out[0],
            Action::Send(Message::new(A_OKAY, 1, 42, Vec::new()))
        );
        assert_eq!(
            out[1],
            Action::Start {
                local_id: 1,
                request: ServiceRequest {
                    kind: ServiceKind::ShellV2,
                    command: "echo hi".to_owned()
                }
            }
        );
        // Two payloads: only the first goes out until the host says OKAY.
        let out = s.on_output(1, vec![b"aa".to_vec(), b"bb".to_vec()]);
        assert_eq!(
            sent(&out),
            vec![Message::new(A_WRTE, 1, 42, b"aa".to_vec())]
        );
        // Host stdin while waiting is acknowledged.
        let out = s.on_message(Message::new(A_WRTE, 42, 1, vec![4, 0, 0, 0, 0]));
        assert_eq!(sent(&out), vec![Message::new(A_OKAY, 1, 42, Vec::new())]);
        let out = s.on_message(Message::new(A_OKAY, 42, 1, Vec::new()));
        assert_eq!(
            sent(&out),
            vec![Message::new(A_WRTE, 1, 42, b"bb".to_vec())]
        );
        let out = s.on_message(Message::new(A_OKAY, 42, 1, Vec::new()));
        assert_eq!(sent(&out), vec![Message::new(A_CLSE, 1, 42, Vec::new())]);
        // The host's echoed CLSE and a late WRTE on the closed stream are ignored.
        assert!(
            s.on_message(Message::new(A_WRTE, 42, 1, vec![4, 0, 0, 0, 0]))
                .is_empty()
        );
        assert!(
            s.on_message(Message::new(A_CLSE, 42, 1, Vec::new()))
                .is_empty()
        );
    }

    #[test]
    fn output_for_a_stream_the_host_closed_is_dropped() {
        let mut s = connected(4096);
        s.on_message(Message::new(A_OPEN, 7, 0, b"exec:ls\0".to_vec()));
        assert_eq!(
            s.on_message(Message::new(A_CLSE, 7, 1, Vec::new())),
            vec![Action::Closed { local_id: 1 }]
        );
        assert!(s.on_output(1, vec![b"x".to_vec()]).is_empty());
    }

    #[test]
    fn empty_output_closes_at_once() {
        let mut s = connected(4096);
        s.on_message(Message::new(A_OPEN, 3, 0, b"shell:true\0".to_vec()));
        let out = s.on_output(1, Vec::new());
        assert_eq!(sent(&out), vec![Message::new(A_CLSE, 1, 3, Vec::new())]);
    }

    #[test]
    fn tcp_streams_wait_for_a_listener_then_carry_bytes_both_ways() {
        let mut s = connected(4096);
        let out = s.on_message(Message::new(A_OPEN, 8, 0, b"tcp:9008\0".to_vec()));
        assert!(sent(&out).is_empty(), "no OKAY before the port is known");
        assert!(matches!(
            &out[0],
            Action::Start { request, .. } if request.kind == ServiceKind::Tcp(9008)
        ));
        assert_eq!(
            sent(&s.accept(1)),
            vec![Message::new(A_OKAY, 1, 8, Vec::new())]
        );
        let out = s.on_message(Message::new(A_WRTE, 8, 1, b"GET /ping".to_vec()));
        assert!(matches!(&out[1], Action::Input { local_id: 1, data } if data == b"GET /ping"));
        let out = s.on_reply(1, vec![b"pong".to_vec()], true);
        assert_eq!(
            sent(&out),
            vec![Message::new(A_WRTE, 1, 8, b"pong".to_vec())]
        );

        s.on_message(Message::new(A_OPEN, 9, 0, b"tcp:9009\0".to_vec()));
        assert_eq!(
            sent(&s.refuse(2)),
            vec![Message::new(A_CLSE, 0, 9, Vec::new())]
        );
        assert!(s.accept(2).is_empty());
    }

    #[test]
    fn stream_ids_are_distinct() {
        let mut s = connected(4096);
        s.on_message(Message::new(A_OPEN, 3, 0, b"shell:a\0".to_vec()));
        let out = s.on_message(Message::new(A_OPEN, 4, 0, b"shell:b\0".to_vec()));
        assert_eq!(sent(&out), vec![Message::new(A_OKAY, 2, 4, Vec::new())]);
    }
}
