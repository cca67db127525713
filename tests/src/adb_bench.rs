//! What the in-process ADB benchmarks (`benches/adb_call.rs`,
//! `benches/screen.rs`) share: an emulated phone behind the real adb
//! server, listed by the bridge's own ADB transport on a two-worker
//! runtime, and the raw adb-server exchange the calls are measured against.
//!
//! Only the bridge's public API is used, so the benchmarks still build
//! against older bridges for comparisons.

use crate::{AdbServer, Sim, SimOptions};
use droidwarden_bridge::adb::{AdbConfig, AdbTransport};
use droidwarden_bridge::{DeviceHandle, Registry};
use droidwarden_services::Command;
use std::io::{Read, Write};
use std::net::{SocketAddrV4, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Field order is drop order: the handle and the transport go before the
/// runtime, the phone before its adb server.
#[allow(missing_debug_implementations)] // reason: holds processes and a runtime; nothing to print
pub struct InProcessPhone {
    /// The phone's device handle, as the daemon calls it.
    pub device: DeviceHandle,
    /// The transport that listed the phone ([`AdbTransport::refresh`] lists
    /// phones connected later).
    pub transport: AdbTransport,
    /// The registry the transport fills.
    pub registry: Arc<Registry>,
    /// Two workers, as on the machines the targets are stated for.
    pub runtime: tokio::runtime::Runtime,
    /// The phone's adb serial (`127.0.0.1:PORT`).
    pub serial: String,
    /// The emulated phone.
    pub sim: Sim,
    /// The real adb server.
    pub adb: AdbServer,
}

impl InProcessPhone {
    /// Start the adb server and a default phone, connect it, and list it
    /// through an in-process [`AdbTransport`].
    ///
    /// # Panics
    /// When any part does not come up or the phone is not listed.
    pub fn start() -> Self {
        let adb = AdbServer::start();
        let sim = adb.phone(SimOptions::default());
        let serial = sim.serial();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let (transport, registry, device) = listed(&runtime, adb.port, &serial);
        Self {
            device,
            transport,
            registry,
            runtime,
            serial,
            sim,
            adb,
        }
    }

    /// The phone through a transport of its own on `runtime`, as a
    /// process that makes one call has it (`droidwarden call --local`):
    /// nothing shared with [`Self::device`]'s transport, such as the
    /// connection it keeps opened ahead. Keep the transport while the
    /// handle is used.
    ///
    /// # Panics
    /// When the phone is not listed.
    pub fn own_transport(
        &self,
        runtime: &tokio::runtime::Runtime,
    ) -> (AdbTransport, Arc<Registry>, DeviceHandle) {
        listed(runtime, self.adb.port, &self.serial)
    }

    /// The adb server's address.
    pub fn server(&self) -> SocketAddrV4 {
        SocketAddrV4::new([127, 0, 0, 1].into(), self.adb.port)
    }

    /// `command` on the phone as a task on the runtime, as the daemon runs
    /// calls, timed inside the task (the hand-offs between the caller's
    /// thread and the runtime left out).
    ///
    /// # Panics
    /// When the call fails.
    pub fn call_as_task(&self, command: &Command) -> Duration {
        let (device, command) = (self.device.clone(), command.clone());
        let task = self.runtime.spawn(async move {
            let start = Instant::now();
            device.call(&command).await.expect("call succeeds");
            start.elapsed()
        });
        self.runtime.block_on(task).expect("the call's task")
    }

    /// The same raw exchange as [`Self::raw`] with tokio's sockets, as a
    /// task on the runtime, timed inside the task: the floor of any async
    /// client, so that a call's cost over [`Self::raw`] splits into the
    /// runtime's I/O and the bridge's own work.
    ///
    /// # Panics
    /// When the server refuses a request or the connection fails.
    pub fn raw_as_task(&self, service: &'static str) -> Duration {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        async fn request(stream: &mut tokio::net::TcpStream, request: &str) {
            let framed = format!("{:04x}{request}", request.len());
            stream
                .write_all(framed.as_bytes())
                .await
                .expect("write request");
            let mut status = [0u8; 4];
            stream.read_exact(&mut status).await.expect("read status");
            assert_eq!(&status, b"OKAY", "adb server refused {request}");
        }
        let (server, transport) = (self.server(), format!("host:transport:{}", self.serial));
        let task = self.runtime.spawn(async move {
            let start = Instant::now();
            let mut stream = tokio::net::TcpStream::connect(server)
                .await
                .expect("connect adb server");
            stream.set_nodelay(true).expect("nodelay");
            request(&mut stream, &transport).await;
            request(&mut stream, service).await;
            let mut reply = Vec::with_capacity(4096);
            stream.read_to_end(&mut reply).await.expect("read reply");
            assert!(reply.len() > 100);
            start.elapsed()
        });
        self.runtime.block_on(task).expect("the raw task")
    }

    /// One raw exchange with the adb server on a connection of its own:
    /// `host:transport:SERIAL`, then `service` (`exec:…`,
    /// `shell,v2,raw:…`); the reply, read into a buffer of `capacity`
    /// bytes to begin with.
    ///
    /// # Panics
    /// When the server refuses a request or the connection fails.
    pub fn raw(&self, service: &str, capacity: usize) -> Vec<u8> {
        let mut stream =
            TcpStream::connect(("127.0.0.1", self.adb.port)).expect("connect adb server");
        stream.set_nodelay(true).expect("nodelay");
        request(&mut stream, &format!("host:transport:{}", self.serial));
        request(&mut stream, service);
        let mut reply = Vec::with_capacity(capacity);
        stream.read_to_end(&mut reply).expect("read reply");
        reply
    }
}

/// A transport for the adb server on `port`, on `runtime`, that has
/// listed the phone `serial`; its registry; the phone's handle.
fn listed(
    runtime: &tokio::runtime::Runtime,
    port: u16,
    serial: &str,
) -> (AdbTransport, Arc<Registry>, DeviceHandle) {
    let registry = Arc::new(Registry::new());
    let transport = AdbTransport::new(
        AdbConfig {
            server: SocketAddrV4::new([127, 0, 0, 1].into(), port),
            start_server: false,
            ..AdbConfig::default()
        },
        Arc::clone(&registry),
    );
    runtime.block_on(transport.refresh()).expect("list devices");
    let device = registry.select(Some(serial)).expect("the sim is listed");
    (transport, registry, device)
}

/// Send one request and expect `OKAY`.
fn request(stream: &mut TcpStream, request: &str) {
    write!(stream, "{:04x}{request}", request.len()).expect("write request");
    let mut status = [0u8; 4];
    stream.read_exact(&mut status).expect("read status");
    assert_eq!(&status, b"OKAY", "adb server refused {request}");
}

/// A duration in milliseconds.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Print the median and 90th percentile of `samples` under `name`, one
/// line as every in-process benchmark prints it, and return the median.
///
/// # Panics
/// When `samples` is empty.
pub fn median(name: &str, mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    let m = samples[samples.len() / 2];
    let p90 = samples[samples.len() * 9 / 10];
    println!(
        "{name:<58} median {:>8.2} ms   p90 {:>8.2} ms   (n={})",
        ms(m),
        ms(p90),
        samples.len()
    );
    m
}
