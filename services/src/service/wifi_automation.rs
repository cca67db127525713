//! The `wifi_automation` service.

use super::*;

actions!(
    /// `wifi_automation` actions.
    WifiAction {
        /// Wi-Fi state and current connection.
        Status = "status",
        /// Turn Wi-Fi on.
        Enable = "enable",
        /// Turn Wi-Fi off.
        Disable = "disable",
        /// Scan for networks.
        Scan = "scan",
    }
);

pub(super) fn spec() -> ServiceSpec {
    let [enable, disable] = switch_actions(
        "Wi-Fi is on",
        (Risk::Medium, "Turn Wi-Fi on."),
        (
            Risk::High,
            "Turn Wi-Fi off. May cut the daemon off from a phone reached over Wi-Fi.",
        ),
    );
    ServiceSpec {
        node_type: "wifiAutomation",
        id: "wifi_automation",
        description: "Wi-Fi state, connection and scanning.",
        actions: vec![
            action("status", Risk::Low, false, "Read Wi-Fi: on or off, connected network (SSID, BSSID, signal, speed, frequency) and IP address.")
                .returns(vec![
                    req("enabled", Schema::boolean("")),
                    req("connected", Schema::boolean("")),
                    opt("ssid", Schema::string("")),
                    opt("bssid", Schema::string("")),
                    opt("ip", Schema::string("")),
                    opt("rssi_dbm", Schema::integer("signal strength", None, None)),
                    opt("link_speed_mbps", Schema::integer("", None, None)),
                    opt("frequency_mhz", Schema::integer("", None, None)),
                    opt("mac", Schema::string("")),
                ]),
            enable,
            disable,
            action("scan", Risk::Low, false, "Scan for Wi-Fi networks and list them with signal strength and security.")
                .returns(vec![list_of("networks", "", vec![
                    req("ssid", Schema::string("empty for a hidden network")),
                    req("bssid", Schema::string("")),
                    req("frequency_mhz", Schema::integer("", None, None)),
                    req("rssi_dbm", Schema::integer("", None, None)),
                    req("security", Schema::string("capability flags")),
                    opt("age_s", Schema::number("seconds since the network was last seen")),
                ])]),
        ],
        state: Some(|| Command::Wifi(WifiAction::Status)),
        home_assistant: vec![
            ha_binary("wifi_connected", "Wi-Fi connected", "connected", Some("connectivity")),
            ha_switch("wifi", "Wi-Fi", || Command::Wifi(WifiAction::Enable), || Command::Wifi(WifiAction::Disable)),
        ],
        companion_event: Some("wifi"),
    }
}
