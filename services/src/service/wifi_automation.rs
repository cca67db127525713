//! The `wifi_automation` service.

use super::*;

actions!(
    /// `wifi_automation` actions.
    WifiAction {
        Status = "status" (Low, reads)
            "Read Wi-Fi: on or off, connected network (SSID, BSSID, signal, speed, frequency) and IP address."
        returns(vec![
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
        Enable = "enable" (Medium, changes) "Turn Wi-Fi on."
        returns(toggle_result(IS_ON)),
        Disable = "disable" (High, changes)
            "Turn Wi-Fi off. May cut the daemon off from a phone reached over Wi-Fi."
        returns(toggle_result(IS_ON)),
        Scan = "scan" (Low, reads)
            "Scan for Wi-Fi networks and list them with signal strength and security."
        returns(vec![list_of("networks", "", vec![
            req("ssid", Schema::string("empty for a hidden network")),
            req("bssid", Schema::string("")),
            req("frequency_mhz", Schema::integer("", None, None)),
            req("rssi_dbm", Schema::integer("", None, None)),
            req("security", Schema::string("capability flags")),
            opt("age_s", Schema::number("seconds since the network was last seen")),
        ])]),
    }
);

/// What `enabled` means in the switch actions' results.
const IS_ON: &str = "Wi-Fi is on";

pub(super) fn spec() -> ServiceSpec {
    ServiceSpec {
        node_type: "wifiAutomation",
        id: "wifi_automation",
        description: "Wi-Fi state, connection and scanning.",
        actions: WifiAction::specs(),
        state: Some(|| Command::Wifi(WifiAction::Status)),
        home_assistant: vec![
            ha_binary(
                "wifi_connected",
                "Wi-Fi connected",
                "connected",
                Some("connectivity"),
            ),
            ha_switch(
                "wifi",
                "Wi-Fi",
                || Command::Wifi(WifiAction::Enable),
                || Command::Wifi(WifiAction::Disable),
            ),
        ],
        companion_event: Some("wifi"),
    }
}
