//! The `wifi_automation` service over ADB; switching uses `svc wifi`, a
//! scan `cmd wifi start-scan` then `list-scan-results`.
//!
//! Wi-Fi: `dumpsys wifi` and `cmd wifi list-scan-results`.
//!
//! `dumpsys wifi` is thousands of lines; what matters is the `Wi-Fi is
//! enabled|disabled` line and the `mWifiInfo SSID: …, BSSID: …, …` line of
//! the active client (pre-Android-10 builds also print `mNetworkInfo [type:
//! WIFI[], state: CONNECTED/CONNECTED, … extra: "SSID", …]`). Android 11+ also
//! dumps *stopped* client instances under `… Graveyard` headings; their
//! `mWifiInfo` describes a past connection and is ignored.

use super::*;
use crate::adb::parse::ParseError;
use crate::adb::parse::text::{
    grouped_int, leading_int, non_placeholder, reject_device_error, unquote,
};
use droidwarden_services::{WifiAction, WifiScan, WifiToggle};

pub(super) async fn run(sh: &dyn Shell, action: &WifiAction) -> Result<Value, BridgeError> {
    match action {
        WifiAction::Status => answer(read(sh, &["dumpsys", "wifi"], wifi).await?),
        WifiAction::Enable | WifiAction::Disable => {
            let enable = matches!(action, WifiAction::Enable);
            ok(
                sh,
                &["svc", "wifi", if enable { "enable" } else { "disable" }],
            )
            .await?;
            answer(WifiToggle { enabled: enable })
        }
        WifiAction::Scan => {
            ok(sh, &["cmd", "wifi", "start-scan"]).await?;
            let networks = read(sh, &["cmd", "wifi", "list-scan-results"], wifi_scan).await?;
            answer(WifiScan { networks })
        }
    }
}

pub use droidwarden_services::{WifiNetwork, WifiStatus};

const COMMAND: &str = "dumpsys wifi";

/// Parses `dumpsys wifi` (or the `mNetworkInfo` line grepped from it).
///
/// # Errors
/// [`ParseError::MissingField`] when the output says neither whether Wi-Fi is
/// enabled nor that it is connected, [`ParseError::Device`] for a device
/// error message.
pub fn wifi(output: &str) -> Result<WifiStatus, ParseError> {
    reject_device_error(output)?;
    let mut status = active_wifi_info(output)
        .map(parse_wifi_info)
        .unwrap_or_default();
    if let Some((connected, ssid)) = network_info(output) {
        status.connected |= connected;
        status.ssid = status.ssid.or(ssid);
    }
    status.enabled = match enabled_state(output) {
        Some(enabled) => enabled,
        None if status.connected => true,
        None => {
            return Err(ParseError::MissingField {
                command: COMMAND,
                field: "Wi-Fi is enabled",
            });
        }
    };
    Ok(status)
}

/// The first `mWifiInfo` line before any graveyard of stopped instances.
fn active_wifi_info(output: &str) -> Option<&str> {
    output
        .lines()
        .take_while(|l| !l.contains("Graveyard"))
        .find_map(|l| l.trim_start().strip_prefix("mWifiInfo "))
}

/// `SSID: "Home, sweet", BSSID: aa:…, MAC: …, IP: /192.168.1.5, Supplicant
/// state: COMPLETED, RSSI: -55, Link speed: 433Mbps, Frequency: 5180MHz, …`
///
/// The SSID may itself contain `, `, so it is cut at `, BSSID: `.
fn parse_wifi_info(info: &str) -> WifiStatus {
    let (ssid, rest) = match info.split_once(", BSSID: ") {
        Some((ssid, rest)) => (ssid, format!("BSSID: {rest}")),
        None => info
            .split_once(", ")
            .map_or((info, String::new()), |(s, r)| (s, r.to_owned())),
    };
    let ssid = ssid
        .strip_prefix("SSID:")
        .map(str::trim)
        .unwrap_or_default();
    let fields: Vec<(&str, &str)> = rest
        .split(", ")
        .filter_map(|f| f.split_once(": "))
        .map(|(k, v)| (k.trim(), v.trim()))
        .collect();
    let get = |key: &str| fields.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
    let number = |key: &str, unknown: i64| {
        get(key)
            .and_then(leading_int)
            .filter(|v| *v != unknown)
            .and_then(|v| i32::try_from(v).ok())
    };
    WifiStatus {
        enabled: false,
        connected: get("Supplicant state") == Some("COMPLETED"),
        ssid: non_placeholder(unquote(ssid)),
        bssid: get("BSSID").and_then(non_placeholder),
        ip: get("IP").and_then(ip_value),
        rssi_dbm: number("RSSI", -127),
        link_speed_mbps: number("Link speed", -1),
        frequency_mhz: number("Frequency", -1),
        // WifiInfo.DEFAULT_MAC_ADDRESS stands for "not available".
        mac: get("MAC")
            .filter(|m| *m != "02:00:00:00:00:00")
            .and_then(non_placeholder),
    }
}

/// `/192.168.1.5` → `192.168.1.5`; `null` and `0.0.0.0` → `None`.
fn ip_value(value: &str) -> Option<String> {
    let ip = value.trim().trim_start_matches('/');
    non_placeholder(ip).filter(|ip| ip != "0.0.0.0")
}

/// `mNetworkInfo [type: WIFI[], state: CONNECTED/CONNECTED, … extra: "SSID", …]`
fn network_info(output: &str) -> Option<(bool, Option<String>)> {
    let line = output
        .lines()
        .find(|l| l.trim_start().starts_with("mNetworkInfo"))?;
    let state = line.split_once("state: ")?.1;
    let connected = state.starts_with("CONNECTED");
    let ssid = line
        .split_once("extra: \"")
        .and_then(|(_, rest)| rest.split_once("\", "))
        .and_then(|(ssid, _)| non_placeholder(ssid));
    Some((connected, ssid))
}

/// `Wi-Fi is enabled` (also `Wifi is …` from `cmd wifi status`), else the
/// persisted `WifiState N` of the settings store (1 on, 2 on in airplane mode).
fn enabled_state(output: &str) -> Option<bool> {
    let said = output.lines().find_map(|l| {
        let t = l.trim();
        t.strip_prefix("Wi-Fi is ")
            .or_else(|| t.strip_prefix("Wifi is "))
            .and_then(|s| match s {
                "enabled" => Some(true),
                "disabled" | "disabling" | "enabling" => Some(false),
                _ => None,
            })
    });
    said.or_else(|| {
        output
            .lines()
            .find_map(|l| match l.trim().strip_prefix("WifiState ")? {
                "1" | "2" => Some(true),
                "0" | "3" => Some(false),
                _ => None,
            })
    })
}

/// Parses `cmd wifi list-scan-results`.
///
/// Rows are `BSSID FREQ RSSI AGE SSID FLAGS`. The RSSI may carry per-antenna
/// values (`-61(0:-62/1:-67)`), the age may use a decimal comma or read
/// `>1000.0` / `___?___`, the SSID may contain spaces or be empty (hidden),
/// and the flags are the trailing `[…]` group.
///
/// # Errors
/// [`ParseError::Malformed`] when the output has text but neither a header nor
/// a row, [`ParseError::Device`] for a device error message.
pub fn wifi_scan(output: &str) -> Result<Vec<WifiNetwork>, ParseError> {
    reject_device_error(output)?;
    // AOSP's WifiShellCommand prints this instead of a table when the list is empty.
    if output.trim() == "No scan results" {
        return Ok(Vec::new());
    }
    let rows: Vec<WifiNetwork> = output.lines().filter_map(scan_row).collect();
    let has_header = output.lines().any(|l| l.trim_start().starts_with("BSSID"));
    if rows.is_empty() && !has_header && !output.trim().is_empty() {
        return Err(ParseError::malformed(
            "cmd wifi list-scan-results",
            "no scan rows",
            output,
        ));
    }
    Ok(rows)
}

fn scan_row(line: &str) -> Option<WifiNetwork> {
    let (fields, rest) = leading_fields(line, 4)?;
    let bssid = fields[0];
    if bssid.len() != 17 || bssid.matches(':').count() != 5 {
        return None;
    }
    // Grouped digits (`5,745`) are read whole; the age's comma, below, is
    // a decimal comma (a fraction of seconds is printed, never thousands).
    let frequency_mhz = i32::try_from(grouped_int(fields[1])?).ok()?;
    let rssi_dbm = i32::try_from(leading_int(fields[2])?).ok()?;
    let age_s = fields[3]
        .replace(',', ".")
        .parse()
        .ok()
        .filter(|a: &f64| a.is_finite());
    let (ssid, security) = split_flags(rest.trim_end());
    Some(WifiNetwork {
        bssid: bssid.to_owned(),
        ssid: unquote(ssid.trim()).to_owned(),
        frequency_mhz,
        rssi_dbm,
        security: security.to_owned(),
        age_s,
    })
}

/// The first `n` whitespace-separated fields and the untouched rest of the line.
fn leading_fields(line: &str, n: usize) -> Option<(Vec<&str>, &str)> {
    let mut fields = Vec::with_capacity(n);
    let mut rest = line;
    for _ in 0..n {
        let start = rest.find(|c: char| !c.is_whitespace())?;
        let token = &rest[start..];
        let end = token.find(char::is_whitespace).unwrap_or(token.len());
        fields.push(&token[..end]);
        rest = &token[end..];
    }
    Some((fields, rest))
}

/// Splits `SSID   [FLAGS][…]` at the last whitespace before a trailing bracket group.
fn split_flags(rest: &str) -> (&str, &str) {
    match rest.rsplit_once(char::is_whitespace) {
        Some((ssid, flags)) if flags.starts_with('[') && flags.ends_with(']') => (ssid, flags),
        _ if rest.trim_start().starts_with('[') && rest.ends_with(']') => ("", rest.trim_start()),
        _ => (rest, ""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adb::parse::failure;

    #[test]
    fn dumpsys_fixture_disabled_with_graveyard() {
        // The only mWifiInfo line is a stopped client's, under a Graveyard.
        let text = fixture!("dumpsys-wifi/adbjsoncli-emulator-17.txt");
        assert_eq!(wifi(text), Ok(WifiStatus::default()));
    }

    #[test]
    fn network_info_grep_fixture() {
        let text = fixture!("dumpsys-wifi-grep/libimobiledevice-issue753-mNetworkInfo-unknown.txt");
        assert_eq!(
            wifi(text),
            Ok(WifiStatus {
                enabled: true,
                connected: true,
                ssid: Some("DexcomR&D".into()),
                ..WifiStatus::default()
            })
        );
    }

    #[test]
    fn connected_client() {
        let text = "\
Wi-Fi is enabled
Dump of ClientModeImpl id=9401
mWifiInfo SSID: \"Cafe, upstairs\", BSSID: 00:13:10:85:fe:01, MAC: 02:15:b4:00:00:00, IP: /10.0.2.16, Security type: 2, Supplicant state: COMPLETED, Wi-Fi standard: 11ac, RSSI: -50, Link speed: 433Mbps, Tx Link speed: 433Mbps, Frequency: 5180MHz, Net ID: 0
Dump of ConcreteClientModeManager.Graveyard
mWifiInfo SSID: \"Old\", BSSID: 00:00:00:00:00:01, MAC: 02:00:00:00:00:00, IP: null, Supplicant state: DISCONNECTED, RSSI: -127
";
        assert_eq!(
            wifi(text),
            Ok(WifiStatus {
                enabled: true,
                connected: true,
                ssid: Some("Cafe, upstairs".into()),
                bssid: Some("00:13:10:85:fe:01".into()),
                ip: Some("10.0.2.16".into()),
                rssi_dbm: Some(-50),
                link_speed_mbps: Some(433),
                frequency_mhz: Some(5180),
                mac: Some("02:15:b4:00:00:00".into()),
            })
        );
        assert_eq!(failure(wifi("nothing useful")), "missing_field");
        assert_eq!(wifi("WifiState 1\n").map(|w| w.enabled), Ok(true));
    }

    #[test]
    fn grouped_frequencies_are_read_whole_and_ambiguous_ones_refused() {
        // Synthetic, hostile: the connected client's line with its numbers
        // grouped by thousands, as locale-formatted builds print them.
        let grouped = "Wi-Fi is enabled\nmWifiInfo SSID: \"Home\", BSSID: 00:13:10:85:fe:01, Supplicant state: COMPLETED, RSSI: -50, Link speed: 1,201Mbps, Frequency: 5,745MHz, Net ID: 0\n";
        let status = wifi(grouped).expect("parses");
        assert_eq!(status.frequency_mhz, Some(5745));
        assert_eq!(status.link_speed_mbps, Some(1201));
        // 5,74 is no thousands group: unknown, never 5.
        let ambiguous = grouped.replace("5,745MHz", "5,74MHz");
        assert_eq!(wifi(&ambiguous).expect("parses").frequency_mhz, None);
        // The scan table's frequency column, grouped the same way.
        let table = "    BSSID              Frequency      RSSI           Age(sec)     SSID     Flags\n  aa:bb:cc:dd:ee:01       5,745        -45            2.3          HomeNet  [ESS]\n";
        let rows = wifi_scan(table).expect("parses");
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].frequency_mhz, 5745);
    }

    #[test]
    fn an_empty_scan_is_an_empty_list() {
        assert_eq!(wifi_scan("No scan results\n").unwrap(), Vec::new());
    }

    #[test]
    fn scan_results() {
        let text = "\
    BSSID              Frequency      RSSI           Age(sec)     SSID                                 Flags
  aa:bb:cc:dd:ee:01       5180        -45            2.3          HomeNet                              [WPA2-PSK-CCMP][RSN-PSK-CCMP][ESS]
  6c:cd:d6:f0:fd:cb       2457    -61(0:-62/1:-67)     3.300    Cafe Free WiFi                    [ESS]
  02:00:00:00:00:01       5180    -83(0:-83/1:-105)    47,180                                      [WPA2-PSK-CCMP][ESS]
  02:00:00:00:00:02       2412        -90              >1000.0    \"Quoted Net\"                    [RSN-SAE-CCMP][ESS][MFPR][MFPC]
";
        let rows = wifi_scan(text).expect("parses");
        assert_eq!(
            rows[0],
            WifiNetwork {
                bssid: "aa:bb:cc:dd:ee:01".into(),
                ssid: "HomeNet".into(),
                frequency_mhz: 5180,
                rssi_dbm: -45,
                security: "[WPA2-PSK-CCMP][RSN-PSK-CCMP][ESS]".into(),
                age_s: Some(2.3),
            }
        );
        assert_eq!(
            (rows[1].ssid.as_str(), rows[1].rssi_dbm),
            ("Cafe Free WiFi", -61)
        );
        assert_eq!((rows[2].ssid.as_str(), rows[2].age_s), ("", Some(47.18)));
        assert_eq!(rows[2].security, "[WPA2-PSK-CCMP][ESS]");
        assert_eq!((rows[3].ssid.as_str(), rows[3].age_s), ("Quoted Net", None));
        assert_eq!(rows.len(), 4);
        assert_eq!(wifi_scan(""), Ok(vec![]));
        assert!(wifi_scan("Wi-Fi scanner not ready\n").is_err());
    }

    #[test]
    fn reads_any_text_without_panicking() {
        crate::adb::parse::tests::each_sample(|text| {
            let _ = wifi(text);
            let _ = wifi_scan(text);
        });
    }
}
