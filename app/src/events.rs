//! The event centre: the one place where the daemon's event streams — the
//! hub's bus (call statuses, states, phone events), the registry's device
//! events and the agent's notices and activity — become one [`Event`] enum.
//!
//! Every consumer (the MQTT publisher, the D-Bus signals, the main loop,
//! the metrics) takes an [`Events`] from [`Centre::subscribe`] and reads
//! `events.next().await` in its own loop, instead of selecting over the
//! same three receivers and handling lagging three times. A new stream or
//! event kind is added here, once; each consumer's `match` then says what
//! it does with it.
//!
//! Fan-out stays on the streams' own broadcast channels (each [`Events`]
//! holds its own receivers): there is no extra task or copy between a
//! call's status and its MQTT topic, a slow consumer only lags itself, and
//! a consumer subscribes only to the streams it wants (the main loop never
//! wakes for a call's status). The receivers are taken when
//! [`Centre::subscribe`] is called, so a consumer that subscribes before it
//! becomes visible (D-Bus, before it owns its name) misses nothing.
//!
//! What this module does not do: decide anything. It owns no state beyond
//! the receivers and does no I/O.

use crate::assistant::{Activity, Assistant, Notice};
use crate::automations::{AutomationEvent, Automations};
use crate::hub::{BusEvent, Hub};
use droidwarden_bridge::DeviceEvent;
use tokio::sync::broadcast::{Receiver, error::RecvError};
use tokio::sync::watch;

/// Something happened in the daemon that some consumer may show.
#[derive(Debug, Clone)]
pub enum Event {
    /// A call's status, a service's state or a phone's event (the hub's bus).
    Bus(BusEvent),
    /// A device came, went, changed availability or was removed.
    Device(DeviceEvent),
    /// An agent run's event, an approval closed, a resumed run finished.
    Notice(Notice),
    /// The agent's runs and open approvals changed.
    Activity(Activity),
    /// An automation's run started, waits, ended or was skipped or missed;
    /// or the automations' list changed.
    Automation(AutomationEvent),
    /// This consumer fell behind `stream` and missed events (already
    /// logged, with how many): what it keeps about that stream should be
    /// read afresh.
    Lagged {
        /// The stream that overflowed.
        stream: Stream,
    },
}

/// One of the streams the centre merges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// The hub's bus: [`Event::Bus`].
    Bus,
    /// The registry's device events: [`Event::Device`].
    Devices,
    /// The agent's notices: [`Event::Notice`].
    Notices,
    /// The automations' runs: [`Event::Automation`].
    Automations,
}

impl Stream {
    fn as_str(self) -> &'static str {
        match self {
            Self::Bus => "bus",
            Self::Devices => "devices",
            Self::Notices => "notices",
            Self::Automations => "automations",
        }
    }
}

/// Which streams a consumer reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Streams {
    /// [`Event::Bus`].
    pub bus: bool,
    /// [`Event::Device`].
    pub devices: bool,
    /// [`Event::Notice`].
    pub notices: bool,
    /// [`Event::Activity`].
    pub activity: bool,
    /// [`Event::Automation`].
    pub automations: bool,
}

impl Streams {
    /// Every stream.
    pub const ALL: Self = Self {
        bus: true,
        devices: true,
        notices: true,
        activity: true,
        automations: true,
    };
}

/// Where consumers subscribe: the sources of every stream.
#[derive(Debug, Clone)]
pub struct Centre {
    hub: Hub,
    assistant: Option<Assistant>,
    automations: Option<Automations>,
}

impl Centre {
    /// The centre over the hub (bus and registry) and the agent, when there
    /// is one.
    pub fn new(hub: Hub, assistant: Option<Assistant>) -> Self {
        Self {
            hub,
            assistant,
            automations: None,
        }
    }

    /// The centre with the automations' runs as a stream too.
    pub fn with_automations(mut self, automations: Automations) -> Self {
        self.automations = Some(automations);
        self
    }

    /// A new consumer named `name` (in its log lines) reading `streams`,
    /// from now on.
    pub fn subscribe(&self, name: &'static str, streams: Streams) -> Events {
        let notices = self.assistant.as_ref().filter(|_| streams.notices);
        let activity = self.assistant.as_ref().filter(|_| streams.activity);
        Events {
            name,
            bus: streams.bus.then(|| self.hub.subscribe()),
            devices: streams.devices.then(|| self.hub.registry().subscribe()),
            notices: notices.map(Assistant::subscribe),
            activity: activity.map(Assistant::activity),
            automations: self
                .automations
                .as_ref()
                .filter(|_| streams.automations)
                .map(Automations::subscribe),
        }
    }
}

/// One consumer's merged view of the streams it subscribed to.
#[derive(Debug)]
pub struct Events {
    name: &'static str,
    bus: Option<Receiver<BusEvent>>,
    devices: Option<Receiver<DeviceEvent>>,
    notices: Option<Receiver<Notice>>,
    activity: Option<watch::Receiver<Activity>>,
    automations: Option<Receiver<AutomationEvent>>,
}

/// The next item of an optional receiver; never ready without one.
async fn next_of<T: Clone>(rx: &mut Option<Receiver<T>>) -> Result<T, RecvError> {
    match rx.as_mut() {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

impl Events {
    /// The agent's activity now, when this consumer reads it and there is
    /// an agent.
    pub fn activity(&self) -> Option<Activity> {
        self.activity.as_ref().map(|rx| *rx.borrow())
    }

    /// The next event; `None` once the hub's bus or the registry — which
    /// live as long as the daemon — are gone. The agent's streams ending
    /// only ends those streams. Cancel-safe: use it in `select!`.
    pub async fn next(&mut self) -> Option<Event> {
        loop {
            let (stream, lagged) = tokio::select! {
                event = next_of(&mut self.bus) => match event {
                    Ok(event) => return Some(Event::Bus(event)),
                    Err(RecvError::Closed) => return None,
                    Err(RecvError::Lagged(n)) => (Stream::Bus, n),
                },
                event = next_of(&mut self.devices) => match event {
                    Ok(event) => return Some(Event::Device(event)),
                    Err(RecvError::Closed) => return None,
                    Err(RecvError::Lagged(n)) => (Stream::Devices, n),
                },
                notice = next_of(&mut self.notices) => match notice {
                    Ok(notice) => return Some(Event::Notice(notice)),
                    Err(RecvError::Closed) => {
                        self.notices = None;
                        continue;
                    }
                    Err(RecvError::Lagged(n)) => (Stream::Notices, n),
                },
                run = next_of(&mut self.automations) => match run {
                    Ok(run) => return Some(Event::Automation(run)),
                    Err(RecvError::Closed) => {
                        self.automations = None;
                        continue;
                    }
                    Err(RecvError::Lagged(n)) => (Stream::Automations, n),
                },
                changed = async {
                    match self.activity.as_mut() {
                        Some(rx) => rx.changed().await.map(|()| *rx.borrow_and_update()),
                        None => std::future::pending().await,
                    }
                } => match changed {
                    Ok(activity) => return Some(Event::Activity(activity)),
                    Err(_) => {
                        self.activity = None;
                        continue;
                    }
                },
            };
            tracing::warn!(
                consumer = self.name,
                stream = stream.as_str(),
                missed = lagged,
                "fell behind an event stream"
            );
            return Some(Event::Lagged { stream });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use droidwarden_bridge::Registry;
    use droidwarden_services::DeviceName;
    use std::sync::Arc;

    #[tokio::test]
    async fn one_stream_of_events_and_lagging_said_once() {
        let hub = Hub::new(Arc::new(Registry::new()), None);
        let centre = Centre::new(hub.clone(), None);
        let mut all = centre.subscribe("test", Streams::ALL);
        let mut quiet = centre.subscribe(
            "quiet",
            Streams {
                bus: false,
                ..Streams::ALL
            },
        );
        let device = DeviceName::try_from("kitchen").unwrap();
        hub.announce_event(device.clone(), "battery", serde_json::json!({"level": 5}));
        let Some(Event::Bus(BusEvent::PhoneEvent { kind, .. })) = all.next().await else {
            panic!("expected the phone event")
        };
        assert_eq!(kind, "battery");
        // A consumer that did not ask for the bus never wakes for it.
        let nothing = tokio::time::timeout(std::time::Duration::from_millis(20), quiet.next());
        assert!(nothing.await.is_err());
        // Overflow the bus (4096): the consumer is told once, then goes on.
        for _ in 0..5000 {
            hub.announce_event(device.clone(), "battery", serde_json::json!({}));
        }
        let Some(Event::Lagged { stream }) = all.next().await else {
            panic!("expected the lag")
        };
        assert_eq!(stream, Stream::Bus);
        assert!(matches!(all.next().await, Some(Event::Bus(_))));
    }
}
