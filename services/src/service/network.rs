//! The `network` service.

use super::*;

actions!(
    /// `network` actions.
    NetworkAction {
        Status = "status" (Low, reads)
            "Read the network: Wi-Fi link state and address, routes and the default gateway, airplane mode."
        -> NetworkStatus,
    }
);

records! {
    /// What `network.status` answers.
    NetworkStatus {
        /// The link of the default route's interface.
        wifi: NetworkLink = NetworkLink::schema(
            "the link of the default route's interface (Wi-Fi, Ethernet or mobile data; wlan0 when there is no default route)",
        ),
        /// The main routing table.
        routes: Vec<NetworkRoute> = list::<NetworkRoute>("routing table"),
        /// The gateway of the default route, when there is one.
        default_gateway: Option<String> = Schema::string("gateway of the default route"),
        /// Whether airplane mode is on.
        airplane_mode: bool = Schema::boolean(""),
    }

    /// One network interface as `ip addr show` reports it.
    NetworkLink {
        /// Interface name, e.g. `wlan0` (any `@peer` suffix removed).
        interface: String = Schema::string(""),
        /// The interface is administratively up (`UP` flag) and its state is not `DOWN`.
        up: bool = Schema::boolean("link administratively up"),
        /// A link is present: no `NO-CARRIER` flag, and `LOWER_UP` or state `UP`.
        carrier: bool = Schema::boolean("connected to a network"),
        /// First IPv4 address, without the prefix length.
        ipv4: Option<String> = Schema::string("IPv4 address"),
        /// Prefix length of `ipv4`.
        prefix_len: Option<u8> = Schema::integer("", Some(0), Some(32)),
        /// IPv6 addresses, without prefix lengths.
        ipv6: Vec<String> = Schema::array("IPv6 addresses", Schema::string("")),
        /// Hardware address from the `link/ether` line.
        mac: Option<String> = Schema::string("MAC address"),
    }

    /// One line of `ip route`.
    NetworkRoute {
        /// Destination prefix, or `default`.
        destination: String = Schema::string(""),
        /// Next hop (`via`).
        gateway: Option<String> = Schema::string(""),
        /// Output interface (`dev`).
        interface: Option<String> = Schema::string(""),
        /// Preferred source address (`src`).
        source: Option<String> = Schema::string(""),
    }
}

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
