//! Every MQTT topic droidwarden uses, in one place. `docs/mqtt-api.md`
//! documents them.

/// Topic names under the configured prefix (and Home Assistant's, when
/// discovery is on).
#[derive(Debug, Clone)]
pub(crate) struct Topics {
    prefix: String,
    /// Home Assistant's discovery prefix, when discovery is on.
    discovery: Option<String>,
}

impl Topics {
    pub(crate) fn new(prefix: &str) -> Self {
        Self {
            prefix: prefix.to_owned(),
            discovery: None,
        }
    }

    /// The same topics with Home Assistant discovery under `ha_prefix`.
    pub(crate) fn with_discovery(mut self, ha_prefix: Option<&str>) -> Self {
        self.discovery = ha_prefix.map(str::to_owned);
        self
    }

    /// Home Assistant's status topic (`<discovery prefix>/status`: its
    /// birth message `online` when it connects), when discovery is on.
    pub(crate) fn ha_status(&self) -> Option<String> {
        self.discovery.as_ref().map(|ha| format!("{ha}/status"))
    }

    /// Whether `topic` is Home Assistant's status topic.
    pub(crate) fn is_ha_status(&self, topic: &str) -> bool {
        self.discovery
            .as_deref()
            .and_then(|ha| topic.strip_prefix(ha))
            == Some("/status")
    }

    /// The daemon's own availability (retained, with an `offline` will).
    pub(crate) fn availability(&self) -> String {
        format!("{}/availability", self.prefix)
    }

    /// The daemon's own health (retained, as `droidwarden status --json`'s
    /// `daemon`).
    pub(crate) fn health(&self) -> String {
        format!("{}/health", self.prefix)
    }

    /// Commands: `<prefix>/cmd/#`.
    pub(crate) fn commands_filter(&self) -> String {
        format!("{}/cmd/#", self.prefix)
    }

    /// The command name of a topic under `<prefix>/cmd/`.
    pub(crate) fn command_name<'a>(&self, topic: &'a str) -> Option<&'a str> {
        topic.strip_prefix(&self.prefix)?.strip_prefix("/cmd/")
    }

    pub(crate) fn reply(&self, id: &str) -> String {
        format!("{}/reply/{id}", self.prefix)
    }

    /// An agent session's progress events.
    pub(crate) fn session_events(&self, session: &str) -> String {
        format!("{}/sessions/{session}/events", self.prefix)
    }

    /// A pending approval request (retained until answered or expired).
    pub(crate) fn approval(&self, approval_id: &str) -> String {
        format!("{}/approvals/{approval_id}", self.prefix)
    }

    /// The only place MQTT 5 response topics may point to:
    /// `<prefix>/responses/` (the embedded broker announces it as the
    /// Response Information).
    pub(crate) fn responses_prefix(&self) -> String {
        format!("{}/responses/", self.prefix)
    }

    /// Where rejected requests whose id could not be read are reported.
    pub(crate) fn errors(&self) -> String {
        format!("{}/errors", self.prefix)
    }

    /// An automation's runs: each run's outcome (retained: the last one).
    pub(crate) fn automation_runs(&self, name: &str) -> String {
        format!("{}/automations/{name}/runs", self.prefix)
    }

    /// An automation's enabled state for Home Assistant: `ON` / `OFF`
    /// (retained).
    pub(crate) fn automation_enabled(&self, name: &str) -> String {
        format!("{}/automations/{name}/enabled", self.prefix)
    }

    /// Home Assistant's switch: `ON` / `OFF` enables or disables.
    pub(crate) fn automation_set(&self, name: &str) -> String {
        format!("{}/automations/{name}/set", self.prefix)
    }

    /// Home Assistant's button: `PRESS` runs it now.
    pub(crate) fn automation_run(&self, name: &str) -> String {
        format!("{}/automations/{name}/run", self.prefix)
    }

    /// Both control topics: `<prefix>/automations/+/set` and `…/+/run`.
    pub(crate) fn automation_controls_filter(&self) -> String {
        format!("{}/automations/+/+", self.prefix)
    }

    /// `(name, "set" | "run")` of an automation control topic.
    pub(crate) fn parse_automation_control<'a>(
        &self,
        topic: &'a str,
    ) -> Option<(&'a str, &'a str)> {
        let rest = topic
            .strip_prefix(&self.prefix)?
            .strip_prefix("/automations/")?;
        let (name, control) = rest.split_once('/')?;
        (matches!(control, "set" | "run") && !name.is_empty()).then_some((name, control))
    }

    pub(crate) fn device_availability(&self, device: &str) -> String {
        format!("{}/devices/{device}/availability", self.prefix)
    }

    pub(crate) fn status(&self, device: &str, service: &str) -> String {
        format!("{}/devices/{device}/services/{service}/status", self.prefix)
    }

    pub(crate) fn state(&self, device: &str, service: &str) -> String {
        format!("{}/devices/{device}/services/{service}/state", self.prefix)
    }

    /// The status of the last call on any service of a device.
    pub(crate) fn last_status(&self, device: &str) -> String {
        format!("{}/devices/{device}/status", self.prefix)
    }

    /// Home Assistant command topics: `<prefix>/devices/+/ha/+/set`.
    pub(crate) fn ha_commands_filter(&self) -> String {
        format!("{}/devices/+/ha/+/set", self.prefix)
    }

    /// What companion phones publish: `<prefix>/companion/#`.
    pub(crate) fn companion_filter(&self) -> String {
        format!("{}/companion/#", self.prefix)
    }

    pub(crate) fn companion_request(&self, companion_id: &str) -> String {
        format!("{}/companion/{companion_id}/request", self.prefix)
    }

    /// `(companion id, rest)` of a topic under `<prefix>/companion/`, e.g.
    /// `("alice", "event/battery")`.
    pub(crate) fn parse_companion<'a>(&self, topic: &'a str) -> Option<(&'a str, &'a str)> {
        let rest = topic
            .strip_prefix(&self.prefix)?
            .strip_prefix("/companion/")?;
        rest.split_once('/')
    }

    /// Events a phone pushed: `<prefix>/devices/<device>/events/<kind>`.
    pub(crate) fn device_event(&self, device: &str, kind: &str) -> String {
        format!("{}/devices/{device}/events/{kind}", self.prefix)
    }

    pub(crate) fn ha_command(&self, device: &str, object_id: &str) -> String {
        format!("{}/devices/{device}/ha/{object_id}/set", self.prefix)
    }

    /// `(device, object id)` of a Home Assistant command topic.
    pub(crate) fn parse_ha_command<'a>(&self, topic: &'a str) -> Option<(&'a str, &'a str)> {
        let rest = topic
            .strip_prefix(&self.prefix)?
            .strip_prefix("/devices/")?;
        let (device, rest) = rest.split_once("/ha/")?;
        let object = rest.strip_suffix("/set")?;
        (!device.contains('/') && !object.contains('/')).then_some((device, object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_round_trip() {
        let t = Topics::new("dw");
        assert_eq!(t.command_name("dw/cmd/call"), Some("call"));
        assert_eq!(t.command_name("other/cmd/call"), None);
        let topic = t.ha_command("kitchen", "wifi");
        assert_eq!(t.parse_ha_command(&topic), Some(("kitchen", "wifi")));
        assert_eq!(t.parse_ha_command("dw/devices/a/b/ha/wifi/set"), None);
    }
}
