//! A fake phone for tests of this crate and of the crates above it (the
//! daemon's hub): every command takes a set time, is logged, and answers
//! a fixed result; the phone can go offline, queue while offline, offer a
//! probe read, and freeze (commands and probes hang until it thaws).
//! Behind the `testing` feature, as the agent crate's fakes are.

use crate::device::BoxFuture;
use crate::{BridgeError, Device, DeviceInfo, TransportKind};
use droidwarden_services::{Command, DeviceName};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A phone reached over ADB (by its capabilities) whose every command takes
/// `delay`. See the module documentation.
#[derive(Debug)]
pub struct FakePhone {
    name: DeviceName,
    delay: Duration,
    online: AtomicBool,
    queues: AtomicBool,
    probes: AtomicBool,
    frozen: tokio::sync::watch::Sender<bool>,
    running: AtomicUsize,
    max_running: AtomicUsize,
    log: Mutex<Vec<String>>,
    params: Mutex<Vec<Value>>,
}

impl FakePhone {
    /// An online phone named `name` whose commands each take `delay`.
    ///
    /// # Panics
    /// When `name` is not a valid device name.
    pub fn new(name: &str, delay: Duration) -> Arc<Self> {
        Arc::new(Self {
            name: DeviceName::try_from(name).expect("a valid device name"),
            delay,
            online: AtomicBool::new(true),
            queues: AtomicBool::new(false),
            probes: AtomicBool::new(false),
            frozen: tokio::sync::watch::channel(false).0,
            running: AtomicUsize::new(0),
            max_running: AtomicUsize::new(0),
            log: Mutex::new(Vec::new()),
            params: Mutex::new(Vec::new()),
        })
    }

    /// Take the phone away, or bring it back.
    pub fn set_online(&self, online: bool) {
        self.online.store(online, Ordering::SeqCst);
    }

    /// Accept calls while offline and hold them (as the companion
    /// transport does).
    pub fn set_queues_while_offline(&self, queues: bool) {
        self.queues.store(queues, Ordering::SeqCst);
    }

    /// Offer a probe read (as the ADB transport does).
    pub fn set_probes(&self, probes: bool) {
        self.probes.store(probes, Ordering::SeqCst);
    }

    /// Freeze (`true`): commands and probes hang until thawed (`false`).
    pub fn set_frozen(&self, frozen: bool) {
        self.frozen.send_replace(frozen);
    }

    /// The most commands that ran at once so far.
    pub fn max_running(&self) -> usize {
        self.max_running.load(Ordering::SeqCst)
    }

    /// What the phone ran, in order: `service.action` for each command,
    /// `probe` for each probe read.
    pub fn log(&self) -> Vec<String> {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The parameters of each command the phone ran, in order.
    pub fn params(&self) -> Vec<Value> {
        self.params
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    async fn thawed(&self) {
        let _ = self.frozen.subscribe().wait_for(|frozen| !frozen).await;
    }

    fn record(&self, entry: String) {
        self.log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(entry);
    }
}

impl Device for FakePhone {
    fn info(&self) -> DeviceInfo {
        DeviceInfo {
            name: self.name.clone(),
            transport: TransportKind::Adb,
            online: self.online.load(Ordering::SeqCst),
            serial: self.name.to_string(),
            model: None,
            state_detail: None,
        }
    }

    fn execute<'a>(&'a self, command: &'a Command) -> BoxFuture<'a, Result<Value, BridgeError>> {
        Box::pin(async move {
            self.thawed().await;
            let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
            self.max_running.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(self.delay).await;
            self.running.fetch_sub(1, Ordering::SeqCst);
            self.record(format!(
                "{}.{}",
                command.service_id(),
                command.action_name()
            ));
            self.params
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(command.params_json());
            Ok(json!({"ok": true}))
        })
    }

    fn queues_while_offline(&self) -> bool {
        self.queues.load(Ordering::SeqCst)
    }

    fn probe(&self) -> Option<BoxFuture<'_, Result<(), BridgeError>>> {
        self.probes.load(Ordering::SeqCst).then(|| {
            Box::pin(async move {
                self.thawed().await;
                self.record("probe".into());
                Ok(())
            }) as BoxFuture<'_, _>
        })
    }
}
