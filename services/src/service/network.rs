//! The `network` service.

use super::*;

actions!(
    /// `network` actions.
    NetworkAction {
        Status = "status" (Low, reads)
            "Read the network: Wi-Fi link state and address, routes and the default gateway, airplane mode."
        returns(vec![
            req("wifi", Schema::object("the link of the default route's interface (Wi-Fi, Ethernet or mobile data; wlan0 when there is no default route)", vec![
                req("interface", Schema::string("")),
                req("up", Schema::boolean("link administratively up")),
                req("carrier", Schema::boolean("connected to a network")),
                opt("ipv4", Schema::string("IPv4 address")),
                opt("prefix_len", Schema::integer("", Some(0), Some(32))),
                req("ipv6", Schema::array("IPv6 addresses", Schema::string(""))),
                opt("mac", Schema::string("MAC address")),
            ])),
            list_of("routes", "routing table", vec![
                req("destination", Schema::string("")),
                opt("gateway", Schema::string("")),
                opt("interface", Schema::string("")),
                opt("source", Schema::string("")),
            ]),
            opt("default_gateway", Schema::string("gateway of the default route")),
            req("airplane_mode", Schema::boolean("")),
        ]),
    }
);

pub(super) fn spec() -> ServiceSpec {
    ServiceSpec {
        node_type: "networkMonitor",
        id: "network",
        description: "Network interfaces, addresses and routes.",
        actions: NetworkAction::specs(),
        state: Some(|| Command::Network(NetworkAction::Status)),
        home_assistant: Vec::new(),
        companion_event: None,
    }
}
