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
        /// The link of the default route's interface (Wi-Fi, Ethernet or
        /// mobile data; `wlan0` when there is no default route).
        wifi: NetworkLink,
        /// The main routing table.
        routes: Vec<NetworkRoute>,
        /// The gateway of the default route, when there is one.
        default_gateway: Option<String>,
        /// Whether airplane mode is on.
        airplane_mode: bool,
    }

    /// One network interface as `ip addr show` reports it.
    NetworkLink {
        /// Interface name, e.g. `wlan0` (any `@peer` suffix removed).
        interface: String,
        /// The interface is administratively up (`UP` flag) and its state is not `DOWN`.
        up: bool,
        /// A link is present: no `NO-CARRIER` flag, and `LOWER_UP` or state `UP`.
        carrier: bool,
        /// First IPv4 address, without the prefix length.
        ipv4: Option<String>,
        /// Prefix length of `ipv4`.
        prefix_len: Option<u8> = Schema::integer("", Some(0), Some(32)),
        /// IPv6 addresses, without prefix lengths.
        ipv6: Vec<String>,
        /// Hardware address from the `link/ether` line.
        mac: Option<String>,
    }

    /// One line of `ip route`.
    NetworkRoute {
        /// Destination prefix, or `default`.
        destination: String,
        /// Next hop (`via`).
        gateway: Option<String>,
        /// Output interface (`dev`).
        interface: Option<String>,
        /// Preferred source address (`src`).
        source: Option<String>,
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
