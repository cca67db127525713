//! [`PhoneApi`]: the phones as a caller that does not decide approvals
//! itself reaches them (the MCP server), with three implementations, one
//! per place the phones can be:
//!
//! - [`InDaemon`]: inside the daemon, over its hub and the approval gate
//!   (`gate::call_checked`), approvals answered by the agent;
//! - [`Remote`]: the running daemon from another process, through
//!   [`DaemonApi`] (the D-Bus client implements it);
//! - [`Local`]: this process straight to the adb server, through a hub of
//!   its own (`--local`): the same phone policy and order, and no one to
//!   ask, so an action that needs a person is refused.
//!
//! The caller holds an `Arc<dyn PhoneApi>` and never asks which one it
//! has: what differs (who may be asked, how long a call may take, what a
//! device list costs) is each implementation's.

use crate::assistant::{Assistant, HubTools, services_of};
use crate::hub::{Call, Hub};
use droidwarden_agent::policy::Verdict;
use droidwarden_agent::{ApprovalPolicy, BoxFuture, DeviceSummary, ToolHost as _};
use droidwarden_bridge::adb::{AdbConfig, AdbTransport};
use droidwarden_bridge::{BridgeError, DeviceInfo, Registry};
use droidwarden_services::{Command, ErrorCode, PhonePolicy, WireError};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// How long a daemon's bound on a device's calls is reused before it is
/// asked again.
const BOUND_FOR: Duration = Duration::from_secs(2);

/// A person's answer to an approval request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Run it.
    Approve,
    /// Do not; the reason recorded.
    Deny(String),
}

/// The phones, wherever they are (see the module documentation).
pub trait PhoneApi: Send + Sync + std::fmt::Debug {
    /// Every device (`name`, `transport`, `online`, …).
    fn devices(&self) -> BoxFuture<'_, Result<Vec<DeviceInfo>, WireError>>;

    /// The devices as tools see them: names, services, online.
    fn summaries(&self) -> BoxFuture<'_, Result<Vec<DeviceSummary>, WireError>> {
        Box::pin(async move {
            Ok(self
                .devices()
                .await?
                .into_iter()
                .map(|d| DeviceSummary {
                    name: d.name.as_str().to_owned(),
                    services: services_of(d.transport),
                    online: d.online,
                })
                .collect())
        })
    }

    /// The state of `device`: its device record, or, from the daemon, its
    /// entry in the status table (the last status of each service).
    fn device_state<'a>(
        &'a self,
        device: &'a str,
    ) -> BoxFuture<'a, Result<Option<Value>, WireError>> {
        Box::pin(async move {
            self.devices()
                .await?
                .into_iter()
                .find(|d| d.name.as_str() == device)
                .map(serde_json::to_value)
                .transpose()
                .map_err(|e| WireError::new(ErrorCode::Internal, format!("device state: {e}")))
        })
    }

    /// The approval policy of whoever decides, when a person can be asked
    /// at all; `None`: no one to ask (an action that needs a person is
    /// refused).
    fn approval_policy(&self) -> Option<Arc<ApprovalPolicy>>;

    /// Run `command` on `device` under the approval policy; when it waits
    /// for a person, the request's id goes to `on_approval` first (so the
    /// caller can ask the person itself: MCP elicitation).
    fn call<'a>(
        &'a self,
        device: Option<&'a str>,
        command: Command,
        on_approval: Option<oneshot::Sender<String>>,
    ) -> BoxFuture<'a, Result<Value, WireError>>;

    /// Record `answer` to approval request `approval_id` on behalf of `by`
    /// (where the way in cannot vouch for `by`, it records who it knows:
    /// the daemon records a D-Bus caller's uid).
    fn answer<'a>(
        &'a self,
        approval_id: &'a str,
        answer: &'a Answer,
        by: &'a str,
    ) -> BoxFuture<'a, Result<(), WireError>>;
}

impl dyn PhoneApi {
    /// Whether `command` may wait for a person's approval: the policy asks
    /// about it and someone can be asked.
    pub fn may_ask(&self, command: &Command) -> bool {
        self.approval_policy().is_some_and(|policy| {
            matches!(
                policy.decide(
                    command.service_id(),
                    command.action_name(),
                    command.spec().risk
                ),
                Verdict::Ask
            )
        })
    }

    /// How long an approval may wait; zero when no one can be asked.
    pub fn approval_wait(&self) -> Duration {
        self.approval_policy()
            .map_or(Duration::ZERO, |policy| policy.timeout)
    }
}

/// The running daemon as another process reaches it (the D-Bus client
/// implements it, over the bus or the private socket). Each method is one
/// call of the daemon's API (docs/dbus-api.md).
pub trait DaemonApi: Send + Sync + std::fmt::Debug {
    /// `ListDevices`.
    fn list_devices(&self) -> BoxFuture<'_, Result<Vec<DeviceInfo>, WireError>>;
    /// `device`'s entry in `Status` (the last status of each service).
    fn device_state<'a>(
        &'a self,
        device: &'a str,
    ) -> BoxFuture<'a, Result<Option<Value>, WireError>>;
    /// `CallTimeout`: the daemon's bound on a call on `device`.
    fn call_bound<'a>(&'a self, device: Option<&'a str>) -> BoxFuture<'a, Duration>;
    /// `CallCheckedTicket`: `command` under the approval policy (waiting
    /// up to `approval_wait` for a person, then up to `bound`), sending
    /// the approval request's id to `on_approval` when it waits for one.
    fn call_checked<'a>(
        &'a self,
        device: Option<&'a str>,
        command: &'a Command,
        approval_wait: Duration,
        bound: Duration,
        on_approval: Option<oneshot::Sender<String>>,
    ) -> BoxFuture<'a, Result<Value, WireError>>;
    /// `Approve`.
    fn approve<'a>(&'a self, approval_id: &'a str) -> BoxFuture<'a, Result<(), WireError>>;
    /// `Deny`.
    fn deny<'a>(
        &'a self,
        approval_id: &'a str,
        reason: &'a str,
    ) -> BoxFuture<'a, Result<(), WireError>>;
}

/// Inside the daemon: its hub, the approval gate, and the agent (when on)
/// for approvals.
#[derive(Debug, Clone)]
pub struct InDaemon {
    hub: Hub,
    assistant: Option<Assistant>,
}

impl InDaemon {
    /// The phones of `hub`, approvals through `assistant` (none when the
    /// agent is off: an action that needs a person is refused).
    pub fn new(hub: Hub, assistant: Option<Assistant>) -> Self {
        Self { hub, assistant }
    }
}

impl PhoneApi for InDaemon {
    fn devices(&self) -> BoxFuture<'_, Result<Vec<DeviceInfo>, WireError>> {
        Box::pin(std::future::ready(Ok(self.hub.registry().list())))
    }

    fn summaries(&self) -> BoxFuture<'_, Result<Vec<DeviceSummary>, WireError>> {
        Box::pin(std::future::ready(Ok(
            HubTools::new(self.hub.clone()).devices()
        )))
    }

    fn approval_policy(&self) -> Option<Arc<ApprovalPolicy>> {
        self.assistant.as_ref().map(|a| a.agent().approval_policy())
    }

    fn call<'a>(
        &'a self,
        device: Option<&'a str>,
        command: Command,
        on_approval: Option<oneshot::Sender<String>>,
    ) -> BoxFuture<'a, Result<Value, WireError>> {
        let call = Call {
            device: device.map(str::to_owned),
            command,
        };
        Box::pin(async move {
            match on_approval {
                None => crate::gate::call_checked(&self.hub, self.assistant.as_ref(), call).await,
                Some(tell) => {
                    crate::gate::call_checked_with(
                        &self.hub,
                        self.assistant.as_ref(),
                        call,
                        move |id| {
                            let _ = tell.send(id.to_owned());
                        },
                    )
                    .await
                }
            }
        })
    }

    fn answer<'a>(
        &'a self,
        approval_id: &'a str,
        answer: &'a Answer,
        by: &'a str,
    ) -> BoxFuture<'a, Result<(), WireError>> {
        Box::pin(async move {
            let Some(assistant) = &self.assistant else {
                return Err(crate::assistant::disabled());
            };
            match answer {
                Answer::Approve => assistant.approve(approval_id, by).await.map(|_| ()),
                Answer::Deny(reason) => assistant.deny(approval_id, reason, by).await.map(|_| ()),
            }
        })
    }
}

/// The running daemon from another process, through `client`; approvals
/// wait up to the policy's timeout.
#[derive(Debug)]
pub struct Remote {
    client: Arc<dyn DaemonApi>,
    /// `[agent.approval]` as this process read it: which calls may wait
    /// for a person, so that only those take the path that can ask the
    /// caller (the daemon's own policy still decides).
    policy: Arc<ApprovalPolicy>,
    /// The daemon's bound on a call, per device, and when it was read.
    bounds: Mutex<HashMap<String, (Instant, Duration)>>,
}

impl Remote {
    /// The daemon behind `client`, with `approval` as this process read it.
    pub fn new(client: Arc<dyn DaemonApi>, approval: ApprovalPolicy) -> Self {
        Self {
            client,
            policy: Arc::new(approval),
            bounds: Mutex::default(),
        }
    }

    /// The daemon's bound on a call on `device`, reused for [`BOUND_FOR`].
    async fn bound(&self, device: Option<&str>) -> Duration {
        let key = device.unwrap_or_default().to_owned();
        let cached = self
            .bounds
            .lock()
            .ok()
            .and_then(|b| b.get(&key).copied())
            .filter(|(at, _)| at.elapsed() < BOUND_FOR);
        if let Some((_, bound)) = cached {
            return bound;
        }
        let bound = self.client.call_bound(device).await;
        if let Ok(mut b) = self.bounds.lock() {
            b.insert(key, (Instant::now(), bound));
        }
        bound
    }
}

impl PhoneApi for Remote {
    fn devices(&self) -> BoxFuture<'_, Result<Vec<DeviceInfo>, WireError>> {
        self.client.list_devices()
    }

    fn device_state<'a>(
        &'a self,
        device: &'a str,
    ) -> BoxFuture<'a, Result<Option<Value>, WireError>> {
        self.client.device_state(device)
    }

    fn approval_policy(&self) -> Option<Arc<ApprovalPolicy>> {
        Some(Arc::clone(&self.policy))
    }

    fn call<'a>(
        &'a self,
        device: Option<&'a str>,
        command: Command,
        on_approval: Option<oneshot::Sender<String>>,
    ) -> BoxFuture<'a, Result<Value, WireError>> {
        Box::pin(async move {
            let bound = self.bound(device).await;
            self.client
                .call_checked(device, &command, self.policy.timeout, bound, on_approval)
                .await
        })
    }

    fn answer<'a>(
        &'a self,
        approval_id: &'a str,
        answer: &'a Answer,
        _by: &'a str,
    ) -> BoxFuture<'a, Result<(), WireError>> {
        // The daemon records this process's uid as who answered.
        match answer {
            Answer::Approve => self.client.approve(approval_id),
            Answer::Deny(reason) => self.client.deny(approval_id, reason),
        }
    }
}

/// This process straight to the adb server, through a hub of its own (the
/// phone policy, the app in front, each device's order); no one to ask.
#[derive(Debug)]
pub struct Local {
    hub: Hub,
    adb: AdbTransport,
    /// `[agent.approval]`: what may run without a person.
    policy: ApprovalPolicy,
}

impl Local {
    /// The phones of the adb server of `adb`, under the phone policy
    /// `phone`, running what `approval` allows without a person.
    pub fn new(adb: AdbConfig, phone: PhonePolicy, approval: ApprovalPolicy) -> Self {
        let registry = Arc::new(Registry::new());
        let adb = AdbTransport::new(adb, Arc::clone(&registry));
        Self {
            hub: Hub::new(registry, None).with_phone_policy(phone),
            adb,
            policy: approval,
        }
    }

    /// What the adb server sees now: every device (marked offline with
    /// the reason when the server cannot be asked), and that error.
    pub async fn refreshed(&self) -> (Vec<DeviceInfo>, Option<BridgeError>) {
        let error = self.adb.refresh().await.err();
        if let Some(e) = &error {
            tracing::warn!(error = %e, "could not list devices");
        }
        (self.hub.registry().list(), error)
    }

    /// A person's call from this process (`droidwarden call --local`): the
    /// phone policy, the app in front and the device's order as for every
    /// caller, and no approval step (the person at the terminal is who
    /// would approve). `mcp --local` calls it once the approval policy
    /// let the call through.
    ///
    /// # Errors
    /// The policy's refusal before the adb server is asked; the adb
    /// server's error when no phone can be reached (or adb is missing);
    /// the call's own errors.
    pub async fn call_by_person(
        &self,
        device: Option<&str>,
        command: Command,
    ) -> Result<Value, WireError> {
        self.hub.check_policy(&command)?;
        if let (_, Some(e)) = self.refreshed().await {
            // Every device is now offline with this reason; a named one is
            // reported precisely by the call itself.
            if device.is_none() || matches!(e, BridgeError::AdbMissing { .. }) {
                return Err(e.to_wire());
            }
        }
        self.hub
            .call(Call {
                device: device.map(str::to_owned),
                command,
            })
            .await
    }
}

impl PhoneApi for Local {
    fn devices(&self) -> BoxFuture<'_, Result<Vec<DeviceInfo>, WireError>> {
        Box::pin(async move {
            match self.refreshed().await {
                (_, Some(e @ BridgeError::AdbMissing { .. })) => Err(e.to_wire()),
                (list, _) => Ok(list),
            }
        })
    }

    fn approval_policy(&self) -> Option<Arc<ApprovalPolicy>> {
        None
    }

    fn call<'a>(
        &'a self,
        device: Option<&'a str>,
        command: Command,
        _on_approval: Option<oneshot::Sender<String>>,
    ) -> BoxFuture<'a, Result<Value, WireError>> {
        Box::pin(async move {
            let spec = command.spec();
            match self
                .policy
                .decide(command.service_id(), command.action_name(), spec.risk)
            {
                Verdict::Allow => {}
                Verdict::Deny(reason) => return Err(WireError::new(ErrorCode::Denied, reason)),
                Verdict::Ask => {
                    return Err(WireError::new(
                        ErrorCode::Denied,
                        format!(
                            "{}.{} ({} risk) needs a person's approval, and `--local` has no one to ask: run it through the daemon, or allow it in [agent.approval] allow",
                            command.service_id(),
                            command.action_name(),
                            spec.risk.as_str()
                        ),
                    ));
                }
            }
            self.call_by_person(device, command).await
        })
    }

    fn answer<'a>(
        &'a self,
        _approval_id: &'a str,
        _answer: &'a Answer,
        _by: &'a str,
    ) -> BoxFuture<'a, Result<(), WireError>> {
        Box::pin(std::future::ready(Err(WireError::new(
            ErrorCode::InvalidRequest,
            "--local has no approvals",
        ))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use droidwarden_bridge::DeviceHandle;
    use droidwarden_bridge::testing::FakePhone;
    use droidwarden_services::Catalogue;
    use serde_json::json;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn command(service: &str, action: &str) -> Command {
        Catalogue::get().parse(service, action, &json!({})).unwrap()
    }

    /// The daemon's hub with one fake phone, the agent off.
    fn in_daemon() -> (Arc<dyn PhoneApi>, Arc<FakePhone>) {
        let registry = Arc::new(Registry::new());
        let phone = FakePhone::new("phone", Duration::from_millis(1));
        registry.insert(DeviceHandle::new(phone.clone(), Duration::from_secs(60)));
        let phones: Arc<dyn PhoneApi> = Arc::new(InDaemon::new(Hub::new(registry, None), None));
        (phones, phone)
    }

    #[tokio::test]
    async fn in_the_daemon_without_the_agent_no_one_is_asked() {
        let (phones, phone) = in_daemon();
        let names: Vec<String> = phones
            .summaries()
            .await
            .unwrap()
            .into_iter()
            .map(|d| d.name)
            .collect();
        assert_eq!(names, ["phone"]);
        assert_eq!(
            phones.device_state("phone").await.unwrap().unwrap()["name"],
            "phone"
        );
        assert_eq!(phones.device_state("attic").await.unwrap(), None);
        // Low risk runs; a change that needs a person is refused, not
        // asked about, and never reaches the phone.
        let off = command("wifi_automation", "disable");
        assert!(!phones.may_ask(&off));
        assert_eq!(phones.approval_wait(), Duration::ZERO);
        phones
            .call(Some("phone"), command("battery", "status"), None)
            .await
            .unwrap();
        let refused = phones.call(Some("phone"), off, None).await.unwrap_err();
        assert_eq!(refused.code, ErrorCode::Denied, "{refused:?}");
        assert_eq!(phone.log(), ["battery.status"]);
        let answered = phones
            .answer("r-1-a1", &Answer::Approve, "someone")
            .await
            .unwrap_err();
        assert_eq!(answered.code, ErrorCode::InvalidRequest, "{answered:?}");
    }

    /// A daemon that answers every call at once and counts what it is
    /// asked.
    #[derive(Debug, Default)]
    struct CountingDaemon {
        bounds: AtomicUsize,
        calls: AtomicUsize,
        answers: Mutex<Vec<String>>,
    }

    impl DaemonApi for CountingDaemon {
        fn list_devices(&self) -> BoxFuture<'_, Result<Vec<DeviceInfo>, WireError>> {
            Box::pin(std::future::ready(Ok(Vec::new())))
        }
        fn device_state<'a>(
            &'a self,
            _: &'a str,
        ) -> BoxFuture<'a, Result<Option<Value>, WireError>> {
            Box::pin(std::future::ready(Ok(Some(json!({"from": "status"})))))
        }
        fn call_bound<'a>(&'a self, _: Option<&'a str>) -> BoxFuture<'a, Duration> {
            self.bounds.fetch_add(1, Ordering::SeqCst);
            Box::pin(std::future::ready(Duration::from_secs(30)))
        }
        fn call_checked<'a>(
            &'a self,
            _: Option<&'a str>,
            _: &'a Command,
            approval_wait: Duration,
            bound: Duration,
            on_approval: Option<oneshot::Sender<String>>,
        ) -> BoxFuture<'a, Result<Value, WireError>> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            if let Some(tell) = on_approval {
                let _ = tell.send("ap-1".into());
            }
            let answer = json!({"wait": approval_wait.as_secs(), "bound": bound.as_secs()});
            Box::pin(std::future::ready(Ok(answer)))
        }
        fn approve<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), WireError>> {
            self.answers.lock().unwrap().push(format!("approve {id}"));
            Box::pin(std::future::ready(Ok(())))
        }
        fn deny<'a>(&'a self, id: &'a str, why: &'a str) -> BoxFuture<'a, Result<(), WireError>> {
            self.answers
                .lock()
                .unwrap()
                .push(format!("deny {id}: {why}"));
            Box::pin(std::future::ready(Ok(())))
        }
    }

    #[tokio::test]
    async fn the_remote_daemon_decides_and_its_bound_is_asked_once() {
        let daemon = Arc::new(CountingDaemon::default());
        let policy = ApprovalPolicy {
            timeout: Duration::from_secs(90),
            ..ApprovalPolicy::default()
        };
        let phones: Arc<dyn PhoneApi> = Arc::new(Remote::new(daemon.clone(), policy));
        let off = command("wifi_automation", "disable");
        assert!(phones.may_ask(&off));
        assert!(!phones.may_ask(&command("battery", "status")));
        assert_eq!(phones.approval_wait(), Duration::from_secs(90));
        let (tell, told) = oneshot::channel();
        let first = phones.call(None, off.clone(), Some(tell)).await.unwrap();
        assert_eq!(first, json!({"wait": 90, "bound": 30}));
        assert_eq!(told.await.unwrap(), "ap-1");
        phones.call(None, off, None).await.unwrap();
        assert_eq!(daemon.calls.load(Ordering::SeqCst), 2);
        assert_eq!(daemon.bounds.load(Ordering::SeqCst), 1, "reused");
        assert_eq!(
            phones.device_state("phone").await.unwrap(),
            Some(json!({"from": "status"}))
        );
        phones.answer("a", &Answer::Approve, "me").await.unwrap();
        phones
            .answer("b", &Answer::Deny("no".into()), "me")
            .await
            .unwrap();
        assert_eq!(*daemon.answers.lock().unwrap(), ["approve a", "deny b: no"]);
    }

    #[tokio::test]
    async fn local_refuses_what_needs_a_person_before_the_phone() {
        let adb = AdbConfig {
            server: "127.0.0.1:9".parse().unwrap(),
            start_server: false,
            ..AdbConfig::default()
        };
        let phones: Arc<dyn PhoneApi> = Arc::new(Local::new(
            adb,
            PhonePolicy::default(),
            ApprovalPolicy::default(),
        ));
        assert!(!phones.may_ask(&command("wifi_automation", "disable")));
        let refused = phones
            .call(Some("phone"), command("wifi_automation", "disable"), None)
            .await
            .unwrap_err();
        assert_eq!(refused.code, ErrorCode::Denied);
        assert!(refused.message.contains("no one to ask"), "{refused:?}");
        let answered = phones
            .answer("a", &Answer::Approve, "me")
            .await
            .unwrap_err();
        assert_eq!(answered.code, ErrorCode::InvalidRequest);
    }

    /// A person's `call --local`: the phone policy refuses first, before
    /// the adb server is asked; an unreachable server is the answer when
    /// no phone is named.
    #[tokio::test]
    async fn a_persons_local_call_meets_the_phone_policy_first() {
        let adb = AdbConfig {
            server: "127.0.0.1:9".parse().unwrap(),
            start_server: false,
            ..AdbConfig::default()
        };
        let local = Local::new(adb, PhonePolicy::default(), ApprovalPolicy::default());
        let dial = Catalogue::get()
            .parse("telephony", "dial", &json!({"number": "+15550100"}))
            .unwrap();
        let refused = local.call_by_person(None, dial).await.unwrap_err();
        assert_eq!(refused.code, ErrorCode::Disabled, "{refused:?}");
        let unreachable = local
            .call_by_person(None, command("battery", "status"))
            .await
            .unwrap_err();
        assert_ne!(unreachable.code, ErrorCode::Disabled, "{unreachable:?}");
        let (devices, error) = local.refreshed().await;
        assert!(devices.is_empty() && error.is_some());
    }
}
