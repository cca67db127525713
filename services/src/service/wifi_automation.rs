//! The `wifi_automation` service.

use super::*;

actions!(
    /// `wifi_automation` actions.
    WifiAction {
        Status = "status" (Low, reads)
            "Read Wi-Fi: on or off, connected network (SSID, BSSID, signal, speed, frequency) and IP address."
        -> WifiStatus,
        Enable = "enable" (Medium, changes) "Turn Wi-Fi on."
        -> WifiToggle,
        Disable = "disable" (High, changes)
            "Turn Wi-Fi off. May cut the daemon off from a phone reached over Wi-Fi."
        -> WifiToggle,
        Scan = "scan" (Low, reads)
            "Scan for Wi-Fi networks and list them with signal strength and security."
        -> WifiScan,
    }
);

records! {
    /// Wi-Fi state from `dumpsys wifi`: what `wifi_automation.status`
    /// answers and the `wifi` event carries. The default is off: disabled,
    /// not connected, nothing known.
    #[derive(Default)]
    WifiStatus {
        /// Wi-Fi is switched on.
        enabled: bool,
        /// Associated and authenticated to a network (supplicant `COMPLETED`).
        connected: bool,
        /// Network name, quotes removed.
        ssid: Option<String>,
        /// Access point hardware address.
        bssid: Option<String>,
        /// The phone's IPv4 address on the network.
        ip: Option<String>,
        /// Signal strength in dBm.
        rssi_dbm: Option<i32>,
        /// Link speed in Mbit/s.
        link_speed_mbps: Option<i32>,
        /// Channel frequency in MHz.
        frequency_mhz: Option<i32>,
        /// The phone's Wi-Fi hardware address as Wi-Fi reports it.
        mac: Option<String>,
    }

    /// What turning Wi-Fi on or off answers.
    WifiToggle {
        /// Whether Wi-Fi is now on.
        enabled: bool,
    }

    /// What `wifi_automation.scan` answers.
    WifiScan {
        /// The access points found.
        networks: Vec<WifiNetwork>,
    }

    /// One access point from `cmd wifi list-scan-results`.
    WifiNetwork {
        /// Network name; empty for a hidden network.
        ssid: String,
        /// Access point hardware address.
        bssid: String,
        /// Channel frequency in MHz.
        frequency_mhz: i32,
        /// Signal strength in dBm.
        rssi_dbm: i32,
        /// Capability flags as printed, e.g. `[WPA2-PSK-CCMP][RSN-PSK-CCMP][ESS]`.
        security: String,
        /// Seconds since the access point was last seen; null when unknown or
        /// printed as `>1000.0`.
        age_s: Option<f64>,
    }
}

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
