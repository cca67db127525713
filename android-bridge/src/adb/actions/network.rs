//! The `network` service over ADB.
//!
//! Network state: `ip addr show`, `ip route`, `ip route get` and airplane
//! mode.
//!
//! Android ships iproute2's `ip`, whose output has been stable for a decade:
//! a link line `N: IFACE: <FLAGS> mtu … state STATE …`, then indented
//! `link/ether`, `inet` and `inet6` lines.
//!
//! Which interface carries the phone's traffic is not fixed: `wlan0` on most
//! phones, but `eth0` on a TV box on a cable, `rmnet0`/`rmnet_data0` on
//! mobile data, and other Wi-Fi names on some vendors. The interface of the
//! default route says. Android 5 and later keep default routes in one table
//! per network (chosen by policy rules), so the main table `ip route` prints
//! usually has none; `ip route get ADDRESS` asks the kernel which route a
//! packet would take, rules included ([`ip_route_get`]). [`uplink`] then
//! picks that interface's link from `ip addr show`.

use super::*;
use crate::adb::parse::ParseError;
use crate::adb::parse::text::{listing, reject_device_error, token_after};
use droidwarden_services::{NetworkAction, NetworkStatus};

/// The link that carries the phone's traffic (named by the default route,
/// not assumed to be `wlan0`), the main routing table, the default gateway
/// and airplane mode.
pub(super) async fn run(sh: &dyn Shell, action: &NetworkAction) -> Result<Value, BridgeError> {
    let NetworkAction::Status = action;
    let routes = read(sh, &["ip", "route"], ip_route).await?;
    let default = match routes.iter().find(|r| r.destination == "default") {
        Some(route) => Some(route.clone()),
        // Android 5+ keeps default routes in per-network tables.
        None => default_route(sh).await?,
    };
    let links = read(sh, &["ip", "addr", "show"], ip_addrs).await?;
    let interface = default.as_ref().and_then(|r| r.interface.as_deref());
    let link = uplink(&links, interface).ok_or_else(|| BridgeError::UnexpectedOutput {
        command: "ip addr show".into(),
        detail: "no network interface other than loopback".into(),
    })?;
    let airplane = setting(sh, "global", "airplane_mode_on").await?;
    answer(NetworkStatus {
        wifi: link.clone(),
        routes,
        default_gateway: default.and_then(|r| r.gateway),
        airplane_mode: airplane.as_deref() == Some("1"),
    })
}

/// An address no route is asked *for*: `ip route get` only looks the route
/// up, nothing is sent. Any public IPv4 address gives the default route.
const ROUTE_PROBE: &str = "8.8.8.8";

/// The route the phone would use to reach the internet, from `ip route get`
/// (policy rules included); `None` when there is none (offline: `Network is
/// unreachable`, a non-zero exit) or the phone will not say.
async fn default_route(sh: &dyn Shell) -> Result<Option<NetworkRoute>, BridgeError> {
    match read(sh, &["ip", "route", "get", ROUTE_PROBE], ip_route_get).await {
        Ok(route) => Ok(Some(route)),
        // No route, an `unreachable` one, or an answer we cannot read: the
        // status is still worth reporting, without a default interface.
        Err(
            BridgeError::Device { .. }
            | BridgeError::NotFound { .. }
            | BridgeError::PermissionDenied { .. }
            | BridgeError::UnexpectedOutput { .. },
        ) => Ok(None),
        Err(other) => Err(other),
    }
}

pub use droidwarden_services::{NetworkLink, NetworkRoute};

/// Parses `ip addr show IFACE` (the first interface if several are listed).
///
/// # Errors
/// [`ParseError::NotFound`] for `Device "X" does not exist.`,
/// [`ParseError::MissingField`] when there is no link line, and
/// [`ParseError::Device`] for a device error message.
pub fn ip_addr(output: &str) -> Result<NetworkLink, ParseError> {
    ip_addrs(output)?
        .into_iter()
        .next()
        .ok_or(ParseError::MissingField {
            command: "ip addr",
            field: "link",
        })
}

/// Parses `ip addr show` (every interface), in the order listed.
///
/// # Errors
/// [`ParseError::NotFound`] for `Device "X" does not exist.`,
/// [`ParseError::MissingField`] when there is no link line, and
/// [`ParseError::Device`] for a device error message.
pub fn ip_addrs(output: &str) -> Result<Vec<NetworkLink>, ParseError> {
    reject_device_error(output)?;
    if let Some(line) = output.lines().find(|l| l.contains("does not exist")) {
        return Err(ParseError::NotFound {
            what: line.trim().trim_end_matches('.').to_owned(),
        });
    }
    let mut links: Vec<NetworkLink> = Vec::new();
    for line in output.lines() {
        if let Some(header) = link_header(line) {
            links.push(header);
        } else if let Some(link) = links.last_mut() {
            address_line(link, line);
        }
    }
    if links.is_empty() {
        return Err(ParseError::MissingField {
            command: "ip addr",
            field: "link",
        });
    }
    Ok(links)
}

/// The link that carries the phone's traffic, from `ip addr show`'s links
/// and the default route's interface (`None` when there is no default
/// route, e.g. offline).
///
/// Without a default route (offline, or `ip route get` would not say) the
/// answer is still the link most likely to carry traffic: a link that is up
/// with an address (an IPv4 one, or an IPv6 one beyond the link), `wlan0`
/// first among those, then one with a carrier, then the first listed; a
/// down `wlan0` beside an `rmnet0` that is up would name the wrong link.
/// With no link up and addressed: `wlan0` when the phone has one (Wi-Fi
/// off or not connected), else the first Wi-Fi or Ethernet link, else the
/// first link that is not loopback. `None` only when there is no such link
/// at all.
pub fn uplink<'a>(
    links: &'a [NetworkLink],
    default_interface: Option<&str>,
) -> Option<&'a NetworkLink> {
    let named = |name: &str| links.iter().find(|l| l.interface == name);
    let real = || links.iter().filter(|l| l.interface != "lo");
    let live = || real().filter(|l| l.up && addressed(l));
    default_interface
        .filter(|name| *name != "lo")
        .and_then(named)
        .or_else(|| live().find(|l| l.interface == "wlan0"))
        .or_else(|| live().find(|l| l.carrier))
        .or_else(|| live().next())
        .or_else(|| named("wlan0"))
        .or_else(|| {
            real().find(|l| {
                ["wlan", "eth", "en", "wl"]
                    .iter()
                    .any(|p| l.interface.starts_with(p))
            })
        })
        .or_else(|| real().next())
}

/// The link has an address other hosts can reach it at: IPv4, or IPv6
/// outside `fe80::/10` (every link that is up has a link-local one).
fn addressed(link: &NetworkLink) -> bool {
    let routable_v6 = |a: &String| {
        let a = a.to_ascii_lowercase();
        !["fe8", "fe9", "fea", "feb"]
            .iter()
            .any(|p| a.starts_with(p))
            && a != "::1"
    };
    link.ipv4.is_some() || link.ipv6.iter().any(routable_v6)
}

/// `3: wlan0: <NO-CARRIER,BROADCAST,MULTICAST,UP> mtu 1500 … state DOWN …`
fn link_header(line: &str) -> Option<NetworkLink> {
    let mut tokens = line.split_whitespace();
    let index = tokens.next()?.strip_suffix(':')?;
    if index.is_empty() || !index.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let name = tokens.next()?.strip_suffix(':')?;
    let interface = name.split('@').next().unwrap_or(name).to_owned();
    let flags: Vec<&str> = tokens
        .next()?
        .strip_prefix('<')?
        .strip_suffix('>')?
        .split(',')
        .collect();
    let state = token_after(line, "state ").unwrap_or("UNKNOWN");
    let has = |f: &str| flags.contains(&f);
    Some(NetworkLink {
        interface,
        up: has("UP") && state != "DOWN",
        carrier: !has("NO-CARRIER") && (has("LOWER_UP") || state == "UP"),
        ipv4: None,
        prefix_len: None,
        ipv6: Vec::new(),
        mac: None,
    })
}

fn address_line(info: &mut NetworkLink, line: &str) {
    let mut tokens = line.split_whitespace();
    match (tokens.next(), tokens.next()) {
        (Some("link/ether"), Some(mac)) => info.mac = Some(mac.to_owned()),
        (Some("inet"), Some(addr)) if info.ipv4.is_none() => {
            let (ip, prefix) = split_prefix(addr);
            info.ipv4 = Some(ip.to_owned());
            info.prefix_len = prefix;
        }
        (Some("inet6"), Some(addr)) => info.ipv6.push(split_prefix(addr).0.to_owned()),
        _ => {}
    }
}

fn split_prefix(addr: &str) -> (&str, Option<u8>) {
    match addr.split_once('/') {
        Some((ip, len)) => (ip, len.parse().ok()),
        None => (addr, None),
    }
}

/// Route types that may precede the destination in `ip route` output.
const ROUTE_TYPES: &[&str] = &[
    "unicast",
    "local",
    "broadcast",
    "multicast",
    "throw",
    "unreachable",
    "prohibit",
    "blackhole",
    "nat",
    "anycast",
];

/// Parses `ip route` (any table). An empty table is an empty list.
///
/// # Errors
/// [`ParseError::Malformed`] when the output has text but no route line, and
/// [`ParseError::Device`] for a device error message.
pub fn ip_route(output: &str) -> Result<Vec<NetworkRoute>, ParseError> {
    listing(output, "ip route", "no route line", route_line)
}

/// Parses `ip route get ADDRESS`: the route the kernel would use, e.g.
/// `8.8.8.8 via 10.0.1.1 dev eth0  src 10.0.1.36  uid 2000` (Android 5+
/// adds `table N`; a `cache` line follows). Its `destination` is the
/// address asked about.
///
/// # Errors
/// [`ParseError::NotFound`] for an `unreachable` (or `prohibit`, `blackhole`,
/// `throw`) route, [`ParseError::MissingField`] when no line names an
/// interface (`dev`), and [`ParseError::Device`] for a device error
/// message. (No route at all is
/// `RTNETLINK answers: Network is unreachable` with a non-zero exit status,
/// which the caller sees before this parser.)
pub fn ip_route_get(output: &str) -> Result<NetworkRoute, ParseError> {
    reject_device_error(output)?;
    let first = output.split_whitespace().next().unwrap_or_default();
    if ["unreachable", "prohibit", "blackhole", "throw"].contains(&first) {
        return Err(ParseError::NotFound {
            what: format!(
                "route ({})",
                output.lines().next().unwrap_or_default().trim()
            ),
        });
    }
    output
        .lines()
        .filter_map(route_line)
        .find(|r| r.interface.is_some())
        .ok_or(ParseError::MissingField {
            command: "ip route get",
            field: "dev",
        })
}

/// `default via 10.0.2.2 dev wlan0 …` or `10.0.2.0/24 dev wlan0 … src 10.0.2.16`.
fn route_line(line: &str) -> Option<NetworkRoute> {
    let tokens: Vec<&str> = line.split_whitespace().collect();
    let skip = usize::from(tokens.first().is_some_and(|t| ROUTE_TYPES.contains(t)));
    let destination = (*tokens.get(skip)?).to_owned();
    let after = |key: &str| {
        tokens
            .windows(2)
            .find(|w| w[0] == key)
            .map(|w| w[1].to_owned())
    };
    let route = NetworkRoute {
        destination,
        gateway: after("via"),
        interface: after("dev"),
        source: after("src"),
    };
    (route.gateway.is_some() || route.interface.is_some()).then_some(route)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adb::parse::failure;

    #[test]
    fn ip_addr_fixtures() {
        let down = fixture!("ip-addr-show-wlan0/emulator-runner-issue211-ci-emulator-10.txt");
        assert_eq!(
            ip_addr(down),
            Ok(NetworkLink {
                interface: "wlan0".into(),
                up: false,
                carrier: false,
                ipv4: None,
                prefix_len: None,
                ipv6: vec![],
                mac: Some("02:00:00:00:00:00".into()),
            })
        );
        let up = fixture!("ip-addr-show-wlan0/emulator-runner-issue211-local-emulator-unknown.txt");
        assert_eq!(
            ip_addr(up),
            Ok(NetworkLink {
                interface: "wlan0".into(),
                up: true,
                carrier: true,
                ipv4: Some("10.0.2.16".into()),
                prefix_len: Some(24),
                ipv6: vec![],
                mac: Some("02:15:b2:00:00:00".into()),
            })
        );
    }

    #[test]
    fn ip_addr_full_output_and_errors() {
        let text = "\
17: wlan0@if18: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc mq state UP group default qlen 1000
    link/ether 02:15:b2:00:00:00 brd ff:ff:ff:ff:ff:ff link-netnsid 0
    inet 192.168.232.2/21 brd 192.168.239.255 scope global wlan0
       valid_lft forever preferred_lft forever
    inet6 fec0::15:b2ff:fe00:0/64 scope site dynamic noprefixroute
       valid_lft 86137sec preferred_lft 14137sec
    inet6 fe80::15:b2ff:fe00:0/64 scope link
       valid_lft forever preferred_lft forever
18: radio0: <BROADCAST,UP> mtu 1500 state UP
    inet 10.0.0.1/8 scope global radio0
";
        let info = ip_addr(text).expect("parses");
        assert_eq!(info.interface, "wlan0");
        assert_eq!(info.ipv4.as_deref(), Some("192.168.232.2"));
        assert_eq!(info.prefix_len, Some(21));
        assert_eq!(
            info.ipv6,
            vec!["fec0::15:b2ff:fe00:0", "fe80::15:b2ff:fe00:0"]
        );
        assert_eq!(
            ip_addr("Device \"wlan0\" does not exist.\n"),
            Err(ParseError::NotFound {
                what: "Device \"wlan0\" does not exist".into()
            })
        );
        assert_eq!(failure(ip_addr("")), "missing_field");
    }

    #[test]
    fn ip_route_fixture_and_default_route() {
        let hotspot = fixture!("ip-route/adb-wifi-issue4-hotspot-unknown.txt");
        assert_eq!(
            ip_route(hotspot),
            Ok(vec![NetworkRoute {
                destination: "192.168.43.0/24".into(),
                gateway: None,
                interface: Some("swlan0".into()),
                source: Some("192.168.43.1".into()),
            }])
        );
        let text = "default via 10.0.2.2 dev wlan0 proto dhcp\nbroadcast 10.0.2.255 dev wlan0 table local proto kernel scope link src 10.0.2.16\n";
        let routes = ip_route(text).expect("parses");
        assert_eq!(routes[0].destination, "default");
        assert_eq!(routes[0].gateway.as_deref(), Some("10.0.2.2"));
        assert_eq!(routes[1].destination, "10.0.2.255");
        assert_eq!(ip_route(""), Ok(vec![]));
        assert!(ip_route("garbage here\n").is_err());
    }

    const ETH_ROUTE: &str = fixture!("ip-route/gateway-pr17-eth0-android-unknown.txt");
    const ETH_ROUTE_GET: &str = fixture!("ip-route-get/gateway-pr17-eth0-android-unknown.txt");
    const ETH_ADDRS: &str = fixture!("ip-addr-show/droidwarden-tvbox-eth0-no-wlan.txt");
    const MOBILE_ADDRS: &str = fixture!("ip-addr-show/droidwarden-phone-mobile-data-wlan0-off.txt");

    #[test]
    fn ip_route_get_fixtures() {
        let cases = [
            (
                ETH_ROUTE_GET,
                "8.8.8.8",
                Some("10.0.1.1"),
                "eth0",
                "10.0.1.36",
            ),
            (
                fixture!("ip-route-get/evidence-dw20260905-huawei-rmnet0-cellular-unknown.txt"),
                "1.1.1.1",
                Some("10.121.106.242"),
                "rmnet0",
                "10.121.106.242",
            ),
            (
                fixture!("ip-route-get/evidence-dw20260905-huawei-wlan0-wifi-unknown.txt"),
                "1.1.1.1",
                Some("10.10.0.1"),
                "wlan0",
                "10.10.7.37",
            ),
            // On the local link there is no gateway.
            (
                "192.168.1.40 dev wlan0 table 1021 src 192.168.1.23 uid 2000 \n    cache \n",
                "192.168.1.40",
                None,
                "wlan0",
                "192.168.1.23",
            ),
        ];
        for (text, destination, gateway, interface, source) in cases {
            assert_eq!(
                ip_route_get(text),
                Ok(NetworkRoute {
                    destination: destination.into(),
                    gateway: gateway.map(str::to_owned),
                    interface: Some(interface.into()),
                    source: Some(source.into()),
                }),
                "{text}"
            );
        }
        assert_eq!(
            failure(ip_route_get("unreachable 8.8.8.8 table 1021 uid 2000\n")),
            "not_found"
        );
        assert_eq!(failure(ip_route_get("")), "missing_field");
    }

    #[test]
    fn the_uplink_is_the_default_routes_interface() {
        // A TV box on a cable: no wlan0 at all.
        let routes = ip_route(ETH_ROUTE).expect("parses");
        assert_eq!(routes[0].interface.as_deref(), Some("eth0"));
        assert!(routes.iter().all(|r| r.destination != "default"));
        let default = ip_route_get(ETH_ROUTE_GET).expect("parses");
        let links = ip_addrs(ETH_ADDRS).expect("parses");
        let names: Vec<&str> = links.iter().map(|l| l.interface.as_str()).collect();
        assert_eq!(names, ["lo", "dummy0", "sit0", "eth0"]);
        let link = uplink(&links, default.interface.as_deref()).expect("a link");
        assert_eq!(
            (link.interface.as_str(), link.ipv4.as_deref(), link.carrier),
            ("eth0", Some("10.0.1.36"), true)
        );
        // Offline, the connected Ethernet link is still the one to show.
        assert_eq!(
            uplink(&links, None).map(|l| l.interface.as_str()),
            Some("eth0")
        );

        // Mobile data with Wi-Fi off: the default route says rmnet0.
        let links = ip_addrs(MOBILE_ADDRS).expect("parses");
        let link = uplink(&links, Some("rmnet0")).expect("a link");
        assert_eq!(
            (
                link.interface.as_str(),
                link.ipv4.as_deref(),
                link.prefix_len
            ),
            ("rmnet0", Some("10.121.106.242"), Some(30))
        );
        // Without a default route: the link that is up with an address,
        // never the down wlan0 beside it.
        let link = uplink(&links, None).expect("a link");
        assert_eq!((link.interface.as_str(), link.up), ("rmnet0", true));
        // A default route on loopback or on an unlisted interface is ignored.
        assert_eq!(
            uplink(&links, Some("lo")).map(|l| l.interface.as_str()),
            Some("rmnet0")
        );
        assert_eq!(
            uplink(&links, Some("tun9")).map(|l| l.interface.as_str()),
            Some("rmnet0")
        );
        // No link up with an address: wlan0, down, as the one to show.
        let down = ip_addrs(fixture!(
            "ip-addr-show-wlan0/emulator-runner-issue211-ci-emulator-10.txt"
        ))
        .expect("parses");
        let link = uplink(&down, None).expect("a link");
        assert_eq!((link.interface.as_str(), link.up), ("wlan0", false));
        assert_eq!(uplink(&[], Some("wlan0")), None);
    }

    #[test]
    fn reads_any_text_without_panicking() {
        crate::adb::parse::tests::each_sample(|text| {
            let _ = ip_addr(text);
            let _ = ip_route(text);
            let _ = ip_route_get(text);
            if let Ok(links) = ip_addrs(text) {
                let _ = uplink(&links, text.lines().next());
            }
        });
    }
}
