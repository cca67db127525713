//! Prometheus metrics on `[metrics] listen` (off by default, loopback
//! unless `allow_remote`): `GET /metrics` answers the OpenMetrics text
//! format, which Prometheus, VictoriaMetrics, Grafana Agent and Home
//! Assistant's Prometheus integration read.
//!
//! Everything is counted from streams the daemon already has — the hub's
//! bus (every call's `executing` → `success | error`), the registry's
//! availability events, the agent's notices and activity, the embedded
//! broker's counters (clients, dropped messages) — so no call path knows metrics exist. The
//! encoding is the `prometheus-client` crate's; the HTTP side is a few
//! lines on a `TcpListener`: one request per connection, its head bounded
//! in size and time.

use crate::approvals::OpenCount;
use crate::assistant::{Activity, Notice};
use crate::broker::BrokerStats;
use crate::events::{Event, Events, Stream};
use crate::hub::{BusEvent, CallState, Hub};
use droidwarden_agent::EventKind;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Metric, Registry};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The largest request head read; a scraper sends a few hundred bytes.
const MAX_REQUEST: usize = 8 * 1024;
/// How long a client has to send its request and read the answer.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);
/// Scrapes served at once; more wait in the listen backlog.
const MAX_CLIENTS: usize = 16;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    device: String,
    service: String,
    action: String,
    /// `success`, or the error's wire code.
    outcome: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServiceLabels {
    device: String,
    service: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DeviceLabels {
    device: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TokenLabels {
    kind: String,
}

fn seconds_buckets() -> Histogram {
    // 1 ms … ~33 s: a local adb call is a few ms, a companion phone waking
    // from doze or a model's answer tens of seconds.
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

/// `metric`, registered under `name`: the registry keeps a clone that
/// shares its value, so what is counted on the one returned is encoded.
fn registered<M: Metric + Clone>(registry: &mut Registry, name: &str, help: &str, metric: M) -> M {
    registry.register(name, help, metric.clone());
    metric
}

/// Every metric, and the registry that encodes them.
#[derive(Debug)]
pub(crate) struct Metrics {
    registry: Registry,
    calls: Family<CallLabels, Counter>,
    call_seconds: Family<ServiceLabels, Histogram, fn() -> Histogram>,
    in_flight: Family<DeviceLabels, Gauge>,
    devices_known: Gauge,
    devices_online: Gauge,
    agent_runs: Family<OutcomeLabels, Counter>,
    agent_run_seconds: Histogram,
    model_seconds: Histogram,
    agent_tokens: Family<TokenLabels, Counter>,
    agent_active_runs: Gauge,
    agent_pending_approvals: Gauge,
    broker_clients: Gauge,
    broker_dropped: Counter,
}

impl Metrics {
    pub(crate) fn new() -> Self {
        let mut registry = Registry::with_prefix("droidwarden");
        let r = &mut registry;
        Self {
            calls: registered(
                r,
                "calls",
                "Calls on a phone, by device, service, action and outcome (success or the error code)",
                Family::<CallLabels, Counter>::default(),
            ),
            call_seconds: registered(
                r,
                "call_duration_seconds",
                "How long calls took, from executing to success or error (a queued call's wait included)",
                Family::<ServiceLabels, Histogram, fn() -> Histogram>::new_with_constructor(
                    seconds_buckets,
                ),
            ),
            in_flight: registered(
                r,
                "calls_in_flight",
                "Calls started and not finished, per device (waiting in a queue or running)",
                Family::<DeviceLabels, Gauge>::default(),
            ),
            devices_known: registered(
                r,
                "devices_known",
                "Devices the daemon knows",
                Gauge::default(),
            ),
            devices_online: registered(r, "devices_online", "Devices online now", Gauge::default()),
            agent_runs: registered(
                r,
                "agent_runs",
                "Agent runs finished, by outcome (final or error)",
                Family::<OutcomeLabels, Counter>::default(),
            ),
            agent_run_seconds: registered(
                r,
                "agent_run_duration_seconds",
                "Agent runs, from their first event to their answer or error",
                seconds_buckets(),
            ),
            model_seconds: registered(
                r,
                "llm_response_seconds",
                "The language model's latency within a run: from a tool result to the model's next step",
                seconds_buckets(),
            ),
            agent_tokens: registered(
                r,
                "llm_tokens",
                "Tokens the language model reported, by kind (input or output)",
                Family::<TokenLabels, Counter>::default(),
            ),
            agent_active_runs: registered(
                r,
                "agent_active_runs",
                "Agent runs being driven now",
                Gauge::default(),
            ),
            agent_pending_approvals: registered(
                r,
                "agent_pending_approvals",
                "Actions waiting for a person's approval: the agent's and the automations'",
                Gauge::default(),
            ),
            broker_clients: registered(
                r,
                "broker_clients",
                "Clients connected to the embedded MQTT broker",
                Gauge::default(),
            ),
            broker_dropped: registered(
                r,
                "broker_dropped_messages",
                "QoS 1/2 messages the embedded MQTT broker could not queue for a subscriber (its client away with a full queue, or publishers ignoring flow control)",
                Counter::default(),
            ),
            registry,
        }
    }

    /// Copies the embedded broker's counters.
    fn on_broker(&self, broker: &BrokerStats) {
        let clients = broker.clients.load(Ordering::Relaxed);
        self.broker_clients
            .set(i64::try_from(clients).unwrap_or(i64::MAX));
        // The broker counts from its start, as this counter does.
        let dropped = broker.dropped_messages.load(Ordering::Relaxed);
        let counted = self.broker_dropped.get();
        if dropped > counted {
            self.broker_dropped.inc_by(dropped - counted);
        }
    }

    /// The OpenMetrics text.
    pub(crate) fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    fn on_bus(&self, event: &BusEvent) {
        let BusEvent::Status(status) = event else {
            return;
        };
        let device = DeviceLabels {
            device: status.device.to_string(),
        };
        match status.state {
            CallState::Executing => {
                self.in_flight.get_or_create(&device).inc();
            }
            CallState::Success | CallState::Error => {
                self.in_flight.get_or_create(&device).dec();
                let outcome = match &status.error {
                    Some(e) => e.code.as_str().to_owned(),
                    None => "success".to_owned(),
                };
                self.calls
                    .get_or_create(&CallLabels {
                        device: device.device.clone(),
                        service: status.service.to_owned(),
                        action: status.action.to_owned(),
                        outcome,
                    })
                    .inc();
                if let Some(duration) = status.duration {
                    self.call_seconds
                        .get_or_create(&ServiceLabels {
                            device: device.device,
                            service: status.service.to_owned(),
                        })
                        .observe(duration.as_secs_f64());
                }
            }
        }
    }

    fn on_devices(&self, hub: &Hub) {
        let list = hub.registry().list();
        let online = list.iter().filter(|d| d.online).count();
        self.devices_known
            .set(i64::try_from(list.len()).unwrap_or(i64::MAX));
        self.devices_online
            .set(i64::try_from(online).unwrap_or(i64::MAX));
    }

    fn on_activity(&self, activity: &Activity) {
        self.agent_active_runs
            .set(i64::try_from(activity.runs).unwrap_or(i64::MAX));
    }

    fn on_approvals(&self, open: &OpenCount) {
        self.agent_pending_approvals
            .set(i64::try_from(open.total()).unwrap_or(i64::MAX));
    }
}

/// When each run was first seen and when it last waited on the model.
#[derive(Debug, Default)]
struct Runs {
    by_id: HashMap<String, (Instant, Option<Instant>)>,
}

impl Runs {
    /// At most this many runs are tracked (a flood cannot grow the map).
    const MAX: usize = 4096;

    fn on_notice(&mut self, metrics: &Metrics, notice: &Notice) {
        let Notice::Event(event) = notice else {
            return;
        };
        let now = Instant::now();
        if self.by_id.len() >= Self::MAX && !self.by_id.contains_key(&event.run_id) {
            return;
        }
        let (started, model_since) = self
            .by_id
            .entry(event.run_id.clone())
            .or_insert((now, None));
        let model_answered = |since: &mut Option<Instant>| {
            if let Some(since) = since.take() {
                metrics
                    .model_seconds
                    .observe(now.duration_since(since).as_secs_f64());
            }
        };
        match &event.kind {
            EventKind::ToolResult { .. } => *model_since = Some(now),
            EventKind::ToolCall { .. } | EventKind::TextDelta { .. } => model_answered(model_since),
            EventKind::Final { usage, .. } => {
                model_answered(model_since);
                let started = *started;
                self.finish(metrics, &event.run_id, "final", started, now);
                metrics
                    .agent_tokens
                    .get_or_create(&TokenLabels {
                        kind: "input".into(),
                    })
                    .inc_by(usage.input_tokens);
                metrics
                    .agent_tokens
                    .get_or_create(&TokenLabels {
                        kind: "output".into(),
                    })
                    .inc_by(usage.output_tokens);
            }
            EventKind::Error { .. } => {
                let started = *started;
                self.finish(metrics, &event.run_id, "error", started, now);
            }
            // A skill's run ends without `final` or `error` (its result is
            // its parent's tool result): forget it, count nothing.
            EventKind::SkillFinished { .. } => {
                self.by_id.remove(&event.run_id);
            }
            _ => {}
        }
    }

    fn finish(
        &mut self,
        metrics: &Metrics,
        run: &str,
        outcome: &str,
        started: Instant,
        now: Instant,
    ) {
        self.by_id.remove(run);
        metrics
            .agent_runs
            .get_or_create(&OutcomeLabels {
                outcome: outcome.into(),
            })
            .inc();
        metrics
            .agent_run_seconds
            .observe(now.duration_since(started).as_secs_f64());
    }
}

/// Keep the metrics current until `shutdown`, from the event centre's
/// events.
pub(crate) async fn collect(
    metrics: Arc<Metrics>,
    hub: Hub,
    mut events: Events,
    broker: Option<Arc<BrokerStats>>,
    shutdown: CancellationToken,
) {
    let runs = Mutex::new(Runs::default());
    let mut approvals = OpenCount::default();
    metrics.on_devices(&hub);
    // The broker's count is read, not pushed: a slow tick is plenty.
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            event = events.next() => match event {
                Some(event) if approvals.on_event(&event) => {
                    if let Event::Activity(now) = &event {
                        metrics.on_activity(now);
                    }
                    metrics.on_approvals(&approvals);
                }
                Some(Event::Bus(event)) => metrics.on_bus(&event),
                Some(Event::Device(_) | Event::Lagged { stream: Stream::Devices, .. }) => {
                    metrics.on_devices(&hub);
                }
                Some(Event::Notice(notice)) => runs.lock().unwrap_or_else(|e| e.into_inner()).on_notice(&metrics, &notice),
                Some(Event::Activity(now)) => metrics.on_activity(&now),
                Some(Event::Lagged { .. } | Event::Automation(_)) => {}
                None => return,
            },
            _ = tick.tick() => {
                if let Some(broker) = &broker {
                    metrics.on_broker(broker);
                }
            }
        }
    }
}

/// Bind `listen`, refusing addresses beyond loopback unless `allow_remote`.
///
/// # Errors
/// The address is refused or cannot be bound.
pub(crate) async fn bind(listen: SocketAddr, allow_remote: bool) -> Result<TcpListener, String> {
    if !listen.ip().to_canonical().is_loopback() && !allow_remote {
        return Err(format!(
            "{listen} is not a loopback address; metrics tell who drives which phone (set [metrics] allow_remote = true to serve them anyway)"
        ));
    }
    TcpListener::bind(listen)
        .await
        .map_err(|e| format!("cannot listen on {listen}: {e}"))
}

/// Answer scrapes until `shutdown`.
pub(crate) async fn serve(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    tracker: TaskTracker,
    shutdown: CancellationToken,
) {
    crate::accept::serve_connections(
        listener,
        MAX_CLIENTS,
        "metrics",
        &tracker,
        &shutdown,
        |stream, _| {
            let metrics = Arc::clone(&metrics);
            async move {
                if tokio::time::timeout(CLIENT_TIMEOUT, answer(stream, &metrics))
                    .await
                    .is_err()
                {
                    tracing::debug!("a metrics client was too slow");
                }
            }
        },
    )
    .await;
}

/// One HTTP/1.1 request, one answer, then close.
async fn answer(mut stream: TcpStream, metrics: &Metrics) {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        if head.len() > MAX_REQUEST {
            let _ = respond(
                &mut stream,
                "431 Request Header Fields Too Large",
                "text/plain",
                "",
            )
            .await;
            return;
        }
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let line = head.split(|b| *b == b'\r').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split(' ');
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let _ = match (method, path) {
        ("GET" | "HEAD", "/metrics") => {
            let body = if method == "HEAD" {
                String::new()
            } else {
                metrics.encode()
            };
            respond(
                &mut stream,
                "200 OK",
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
                &body,
            )
            .await
        }
        ("GET" | "HEAD", _) => {
            respond(&mut stream, "404 Not Found", "text/plain", "see /metrics\n").await
        }
        _ => respond(&mut stream, "405 Method Not Allowed", "text/plain", "").await,
    };
}

async fn respond(
    stream: &mut TcpStream,
    status: &str,
    content_type: &str,
    body: &str,
) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hub::StatusEvent;
    use droidwarden_services::{DeviceName, ErrorCode, WireError};
    use std::time::SystemTime;

    fn status(state: CallState, error: Option<WireError>) -> BusEvent {
        BusEvent::Status(StatusEvent {
            device: DeviceName::try_from("kitchen").unwrap(),
            service: "battery",
            action: "status",
            state,
            started_at: SystemTime::now(),
            finished_at: None,
            duration: (state != CallState::Executing).then(|| Duration::from_millis(12)),
            error,
        })
    }

    #[test]
    fn the_broker_s_counters_are_copied() {
        let m = Metrics::new();
        let stats = BrokerStats::default();
        stats.clients.store(3, Ordering::Relaxed);
        stats.dropped_messages.store(5, Ordering::Relaxed);
        m.on_broker(&stats);
        m.on_broker(&stats);
        let text = m.encode();
        assert!(text.contains("droidwarden_broker_clients 3"), "{text}");
        assert!(
            text.contains("droidwarden_broker_dropped_messages_total 5"),
            "{text}"
        );
    }

    #[test]
    fn calls_are_counted_by_outcome_timed_and_tracked_in_flight() {
        let m = Metrics::new();
        m.on_bus(&status(CallState::Executing, None));
        m.on_bus(&status(CallState::Executing, None));
        assert!(
            m.encode()
                .contains("droidwarden_calls_in_flight{device=\"kitchen\"} 2")
        );
        m.on_bus(&status(CallState::Success, None));
        m.on_bus(&status(
            CallState::Error,
            Some(WireError::new(ErrorCode::Timeout, "slow")),
        ));
        let text = m.encode();
        assert!(
            text.contains("droidwarden_calls_in_flight{device=\"kitchen\"} 0"),
            "{text}"
        );
        assert!(text.contains(
            "droidwarden_calls_total{device=\"kitchen\",service=\"battery\",action=\"status\",outcome=\"success\"} 1"
        ), "{text}");
        assert!(text.contains("outcome=\"timeout\"} 1"), "{text}");
        assert!(
            text.contains(
                "droidwarden_call_duration_seconds_count{device=\"kitchen\",service=\"battery\"} 2"
            ),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
