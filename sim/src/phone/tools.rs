//! Toybox-style tools: `getprop`, `cat`, `ip`, `echo`, `sleep`, `id`,
//! `uptime`, `df`, `wm` and the filters used in pipes (`grep`, `head`,
//! `tail`, `wc`), listed in [`run`]. Outputs follow the real device
//! fixtures; values come from the state.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::time::Duration;

use crate::clock;
use crate::shell::{CommandResult, Output};
use crate::state::PhoneState;

use super::{done, fail, ok_text};

/// Runs `tool` when it is one of these; `None` when the phone has no such
/// tool here (the dispatcher tries the others, then says "not found").
pub(crate) fn run(
    st: &PhoneState,
    tool: &str,
    args: &[String],
    stdin: &[u8],
) -> Option<CommandResult> {
    Some(match tool {
        "getprop" => getprop(st, args),
        "cat" => cat(st, args, stdin),
        "ip" => ip(st, args),
        "echo" => echo(args),
        "true" => CommandResult::default(),
        "false" => CommandResult::new(Output::default(), 1),
        "sleep" => sleep(args),
        "id" => id(),
        "uptime" => uptime(st),
        "df" => df(st),
        "wm" => wm(st, args),
        "grep" => grep(st, args, stdin),
        "head" | "tail" => head_tail(st, tool, args, stdin),
        "wc" => wc(st, args, stdin),
        _ => return None,
    })
}

/// All system properties, sorted, as `getprop` lists them.
pub(crate) fn properties(st: &PhoneState) -> BTreeMap<String, String> {
    let p = &st.props;
    let fingerprint = format!(
        "{}/{}/{}:{}/{}/11228894:user/release-keys",
        p.brand, p.name, p.device, p.android_version, p.build_id
    );
    let mut m = BTreeMap::new();
    let mut set = |k: &str, v: String| {
        m.insert(k.to_owned(), v);
    };
    set("bluetooth.device.class_of_device", "90,2,12".to_owned());
    set("dalvik.vm.heapgrowthlimit", "256m".to_owned());
    set("dalvik.vm.heapsize", "512m".to_owned());
    set("dalvik.vm.usejit", "true".to_owned());
    set("dev.bootcomplete", "1".to_owned());
    set("gsm.sim.state", "LOADED".to_owned());
    set("gsm.operator.alpha", "T-Mobile".to_owned());
    set("init.svc.adbd", "running".to_owned());
    set("net.bt.name", "Android".to_owned());
    set("persist.sys.timezone", "Etc/UTC".to_owned());
    set("persist.sys.usb.config", "adb".to_owned());
    set("ro.adb.secure", "1".to_owned());
    set("ro.boot.serialno", p.serial.clone());
    set("ro.build.characteristics", "nosdcard".to_owned());
    set("ro.build.date.utc", "1704747600".to_owned());
    set(
        "ro.build.description",
        format!(
            "{}-user {} {} 11228894 release-keys",
            p.name, p.android_version, p.build_id
        ),
    );
    set("ro.build.display.id", p.build_id.clone());
    set("ro.build.fingerprint", fingerprint);
    set("ro.build.id", p.build_id.clone());
    set("ro.build.tags", "release-keys".to_owned());
    set("ro.build.type", "user".to_owned());
    set("ro.build.user", "android-build".to_owned());
    set("ro.build.version.codename", "REL".to_owned());
    set("ro.build.version.incremental", "11228894".to_owned());
    set("ro.build.version.release", p.android_version.clone());
    set(
        "ro.build.version.release_or_codename",
        p.android_version.clone(),
    );
    set("ro.build.version.sdk", p.sdk.to_string());
    set("ro.build.version.security_patch", "2024-02-05".to_owned());
    set("ro.debuggable", "0".to_owned());
    set("ro.hardware", p.device.clone());
    set("ro.opengles.version", "196610".to_owned());
    set("ro.product.board", p.device.clone());
    set("ro.product.brand", p.brand.clone());
    set("ro.product.cpu.abi", "arm64-v8a".to_owned());
    set(
        "ro.product.cpu.abilist",
        "arm64-v8a,armeabi-v7a,armeabi".to_owned(),
    );
    set("ro.product.device", p.device.clone());
    set("ro.product.locale", "en-US".to_owned());
    set("ro.product.manufacturer", p.manufacturer.clone());
    set("ro.product.model", p.model.clone());
    set("ro.product.name", p.name.clone());
    set("ro.product.vendor.brand", p.brand.clone());
    set("ro.product.vendor.device", p.device.clone());
    set("ro.product.vendor.manufacturer", p.manufacturer.clone());
    set("ro.product.vendor.model", p.model.clone());
    set("ro.product.vendor.name", p.name.clone());
    set("ro.secure", "1".to_owned());
    set("ro.serialno", p.serial.clone());
    set("ro.sf.lcd_density", st.display.density.to_string());
    set("service.bootanim.exit", "1".to_owned());
    set("sys.boot_completed", "1".to_owned());
    set("sys.usb.config", "adb".to_owned());
    set("wifi.interface", "wlan0".to_owned());
    for (k, v) in &p.extra {
        m.insert(k.clone(), v.clone());
    }
    m
}

/// `getprop [NAME [DEFAULT]]`.
pub(crate) fn getprop(st: &PhoneState, args: &[String]) -> CommandResult {
    let props = properties(st);
    match args {
        [] => {
            let mut out = String::new();
            for (k, v) in &props {
                let _ = writeln!(out, "[{k}]: [{v}]");
            }
            ok_text(out)
        }
        [name] => ok_text(format!("{}\n", props.get(name).map_or("", String::as_str))),
        [name, default] => ok_text(format!("{}\n", props.get(name).unwrap_or(default))),
        _ => fail("", "getprop: Max 2 arguments (see \"getprop --help\")\n", 1),
    }
}

/// The contents of a file the phone can show (`cat`, `<`, `grep FILE`).
pub(crate) fn read_file(st: &PhoneState, path: &str) -> Option<Vec<u8>> {
    let text = match path {
        "/dev/null" => String::new(),
        "/proc/meminfo" => meminfo(st),
        "/proc/uptime" => {
            let up = st.uptime_ms() as f64 / 1000.0;
            format!("{up:.2} {:.2}\n", up * 6.4)
        }
        "/proc/version" => "Linux version 5.10.198-android13-4-00050-g12f3388846c3-ab11108232 (build-user@build-host) (Android (9796371, based on r487747) clang version 17.0.0, LLD 17.0.0) #1 SMP PREEMPT Mon Jan 8 21:00:00 UTC 2024\n".to_owned(),
        "/proc/loadavg" => "0.52 0.61 0.58 2/1843 23541\n".to_owned(),
        "/sys/class/power_supply/battery/capacity" => format!("{}\n", st.battery.level),
        "/sys/class/power_supply/battery/status" => {
            let s = match st.battery.status {
                crate::state::BatteryStatus::Unknown => "Unknown",
                crate::state::BatteryStatus::Charging => "Charging",
                crate::state::BatteryStatus::Discharging => "Discharging",
                crate::state::BatteryStatus::NotCharging => "Not charging",
                crate::state::BatteryStatus::Full => "Full",
            };
            format!("{s}\n")
        }
        _ => return super::screen::read_file(st, path),
    };
    Some(text.into_bytes())
}

fn meminfo(st: &PhoneState) -> String {
    let m = &st.memory;
    let total = m.total_kb;
    let free = m.free_kb.min(total);
    let available = m.available_kb.min(total);
    let cached = available.saturating_sub(free) * 3 / 4;
    let buffers = available.saturating_sub(free) / 40;
    let rows: [(&str, u64); 24] = [
        ("MemTotal", total),
        ("MemFree", free),
        ("MemAvailable", available),
        ("Buffers", buffers),
        ("Cached", cached),
        ("SwapCached", 34_936),
        ("Active", total / 4),
        ("Inactive", total / 5),
        ("Active(anon)", total / 9),
        ("Inactive(anon)", total / 11),
        ("Active(file)", total / 7),
        ("Inactive(file)", total / 10),
        ("Unevictable", 6_344),
        ("Mlocked", 2_744),
        ("SwapTotal", total / 2),
        ("SwapFree", total / 3),
        ("Dirty", 144),
        ("Writeback", 0),
        ("AnonPages", total / 6),
        ("Mapped", total / 10),
        ("Shmem", 27_588),
        ("KReclaimable", 58_560),
        ("Slab", 134_108),
        ("CommitLimit", total / 2 + total / 4),
    ];
    let mut out = String::new();
    for (name, kb) in rows {
        let label = format!("{name}:");
        let _ = writeln!(out, "{label:<15} {kb:>8} kB");
    }
    out
}

/// `cat [FILE...]` (stdin when no file or `-`).
pub(crate) fn cat(st: &PhoneState, args: &[String], stdin: &[u8]) -> CommandResult {
    let mut out = Output::default();
    let mut status = 0;
    let files: Vec<&String> = args
        .iter()
        .filter(|a| !a.starts_with('-') || a.as_str() == "-")
        .collect();
    if files.is_empty() {
        out.out(stdin);
    }
    for f in files {
        if f == "-" {
            out.out(stdin);
            continue;
        }
        match read_file(st, f) {
            Some(bytes) => out.out(bytes),
            None => {
                out.errln(format!("cat: {f}: No such file or directory"));
                status = 1;
            }
        }
    }
    done(out, status)
}

fn parse_ipv4(s: &str) -> Option<u32> {
    s.parse::<Ipv4Addr>().ok().map(u32::from)
}

fn prefix_mask(prefix: u8) -> u32 {
    if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(prefix.min(32)))
    }
}

/// The EUI-64 link-local address for a MAC.
fn link_local(mac: &str) -> Option<String> {
    let b: Vec<u8> = mac
        .split(':')
        .map(|h| u8::from_str_radix(h, 16))
        .collect::<Result<_, _>>()
        .ok()?;
    if b.len() != 6 {
        return None;
    }
    let groups = [
        (u16::from(b[0] ^ 0x02) << 8) | u16::from(b[1]),
        (u16::from(b[2]) << 8) | 0xff,
        0xfe00 | u16::from(b[3]),
        (u16::from(b[4]) << 8) | u16::from(b[5]),
    ];
    Some(format!(
        "fe80::{:x}:{:x}:{:x}:{:x}",
        groups[0], groups[1], groups[2], groups[3]
    ))
}

const WLAN_INDEX: u32 = 18;

fn lo_block(family: Family) -> String {
    let mut s = String::from(
        "1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN group default qlen 1000\n    link/loopback 00:00:00:00:00:00 brd 00:00:00:00:00:00\n",
    );
    if family != Family::V6 {
        s.push_str(
            "    inet 127.0.0.1/8 scope host lo\n       valid_lft forever preferred_lft forever\n",
        );
    }
    if family != Family::V4 {
        s.push_str(
            "    inet6 ::1/128 scope host \n       valid_lft forever preferred_lft forever\n",
        );
    }
    s
}

fn wlan_block(st: &PhoneState, family: Family) -> String {
    let w = &st.wifi;
    let mut s = String::new();
    if !w.enabled {
        let _ = writeln!(
            s,
            "{WLAN_INDEX}: wlan0: <BROADCAST,MULTICAST> mtu 1500 qdisc mq state DOWN group default qlen 1000"
        );
        let _ = writeln!(s, "    link/ether {} brd ff:ff:ff:ff:ff:ff", w.mac);
        return s;
    }
    if !w.connected {
        let _ = writeln!(
            s,
            "{WLAN_INDEX}: wlan0: <NO-CARRIER,BROADCAST,MULTICAST,UP> mtu 1500 qdisc mq state DOWN group default qlen 1000"
        );
        let _ = writeln!(s, "    link/ether {} brd ff:ff:ff:ff:ff:ff", w.mac);
        return s;
    }
    let _ = writeln!(
        s,
        "{WLAN_INDEX}: wlan0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc mq state UP group default qlen 3000"
    );
    let _ = writeln!(s, "    link/ether {} brd ff:ff:ff:ff:ff:ff", w.mac);
    if family != Family::V6 {
        match parse_ipv4(&w.ip) {
            Some(ip) => {
                let brd = Ipv4Addr::from(ip | !prefix_mask(w.prefix_len));
                let _ = writeln!(
                    s,
                    "    inet {}/{} brd {brd} scope global wlan0",
                    w.ip, w.prefix_len
                );
            }
            None => {
                let _ = writeln!(s, "    inet {}/{} scope global wlan0", w.ip, w.prefix_len);
            }
        }
        s.push_str("       valid_lft forever preferred_lft forever\n");
    }
    if family != Family::V4
        && let Some(ll) = link_local(&w.mac)
    {
        let _ = writeln!(
            s,
            "    inet6 {ll}/64 scope link \n       valid_lft forever preferred_lft forever"
        );
    }
    s
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    Any,
    V4,
    V6,
}

/// `ip [-4|-6] addr|route …` (the iproute2 subset phones ship).
pub(crate) fn ip(st: &PhoneState, args: &[String]) -> CommandResult {
    let mut family = Family::Any;
    let mut rest = args;
    while let Some(first) = rest.first() {
        match first.as_str() {
            "-4" => family = Family::V4,
            "-6" => family = Family::V6,
            _ => break,
        }
        rest = &rest[1..];
    }
    let Some(object) = rest.first() else {
        return fail(
            "",
            "Usage: ip [ OPTIONS ] OBJECT { COMMAND | help }\nwhere  OBJECT := { link | address | addrlabel | route | rule | neigh | ntable |\n                   tunnel | tuntap | maddress | mroute | mrule | monitor | xfrm |\n                   netns | l2tp | fou | macsec | tcp_metrics | token | netconf | ila |\n                   vrf | sr | nexthop }\n",
            255,
        );
    };
    let sub = &rest[1..];
    let is = |s: &str, full: &str| !s.is_empty() && full.starts_with(s);
    if is(object, "address") {
        let mut words = sub.iter().map(String::as_str).peekable();
        if matches!(words.peek(), Some(&("show" | "list" | "ls" | "s"))) {
            words.next();
        }
        if words.peek() == Some(&"dev") {
            words.next();
        }
        return match words.next() {
            None => ok_text(format!("{}{}", lo_block(family), wlan_block(st, family))),
            Some("lo") => ok_text(lo_block(family)),
            Some("wlan0") => ok_text(wlan_block(st, family)),
            Some(other) => fail("", &format!("Device \"{other}\" does not exist.\n"), 1),
        };
    }
    if is(object, "route") && sub.first().is_some_and(|s| s == "get") {
        return route_get(st, family, &sub[1..]);
    }
    if is(object, "route") {
        let w = &st.wifi;
        if family == Family::V6 || !(w.enabled && w.connected) {
            return ok_text("");
        }
        let Some(ip) = parse_ipv4(&w.ip) else {
            return ok_text("");
        };
        let net = Ipv4Addr::from(ip & prefix_mask(w.prefix_len));
        return ok_text(format!(
            "{net}/{} dev wlan0 proto kernel scope link src {}\n",
            w.prefix_len, w.ip
        ));
    }
    fail(
        "",
        &format!("Object \"{object}\" is unknown, try \"ip help\".\n"),
        255,
    )
}

/// Android's routing table for the Wi-Fi network (netd names it by the
/// network id, 1000 + netId, on Android 11 and later).
const WLAN_TABLE: u32 = 1021;

/// `ip route get ADDRESS`: what the kernel answers for the shell user (uid
/// 2000). Android keeps the default route in the network's own table, which
/// the policy rules pick; the main table `ip route` prints has none.
fn route_get(st: &PhoneState, family: Family, args: &[String]) -> CommandResult {
    let Some(target) = args.first() else {
        return fail(
            "",
            "Command line is not complete. Try option \"help\"\n",
            255,
        );
    };
    let Some(addr) = parse_ipv4(target) else {
        if family == Family::V6 || target.contains(':') {
            return fail("", "RTNETLINK answers: Network is unreachable\n", 2);
        }
        return fail(
            "",
            &format!("Error: any valid prefix is expected rather than \"{target}\".\n"),
            1,
        );
    };
    let w = &st.wifi;
    let ip = parse_ipv4(&w.ip).filter(|_| w.enabled && w.connected);
    let Some(ip) = ip else {
        return fail("", "RTNETLINK answers: Network is unreachable\n", 2);
    };
    let mask = prefix_mask(w.prefix_len);
    let via = if addr & mask == ip & mask {
        String::new()
    } else {
        format!("via {} ", w.gateway)
    };
    ok_text(format!(
        "{target} {via}dev wlan0 table {WLAN_TABLE} src {} uid 2000 \n    cache \n",
        w.ip
    ))
}

/// `echo [-n] [-e] ARGS…`.
pub(crate) fn echo(args: &[String]) -> CommandResult {
    let mut newline = true;
    let mut escapes = false;
    let mut i = 0;
    while let Some(a) = args.get(i) {
        let flags = a
            .strip_prefix('-')
            .filter(|f| !f.is_empty() && f.chars().all(|c| "neE".contains(c)));
        let Some(flags) = flags else { break };
        for c in flags.chars() {
            match c {
                'n' => newline = false,
                'e' => escapes = true,
                _ => escapes = false,
            }
        }
        i += 1;
    }
    let mut text = args[i..].join(" ");
    if escapes {
        let (t, stop) = unescape(&text);
        text = t;
        if stop {
            newline = false;
        }
    }
    if newline {
        text.push('\n');
    }
    ok_text(text)
}

/// `echo -e` escapes; returns the text and whether `\c` cut it short.
fn unescape(s: &str) -> (String, bool) {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('\\') => out.push('\\'),
            Some('a') => out.push('\x07'),
            Some('b') => out.push('\x08'),
            Some('c') => return (out, true),
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    (out, false)
}

/// `sleep SECONDS` (fractions and `s`/`m`/`h`/`d` suffixes, like toybox).
pub(crate) fn sleep(args: &[String]) -> CommandResult {
    let [arg] = args else {
        return fail("", "sleep: Needs 1 argument\n", 1);
    };
    let (num, mult) = match arg.char_indices().last() {
        Some((i, 's')) => (&arg[..i], 1.0),
        Some((i, 'm')) => (&arg[..i], 60.0),
        Some((i, 'h')) => (&arg[..i], 3600.0),
        Some((i, 'd')) => (&arg[..i], 86_400.0),
        _ => (arg.as_str(), 1.0),
    };
    match num.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => CommandResult {
            output: Output::default(),
            status: 0,
            delay: Duration::from_secs_f64((v * mult).min(86_400.0)),
        },
        _ => fail("", &format!("sleep: bad number '{arg}'\n"), 1),
    }
}

/// `id`.
pub(crate) fn id() -> CommandResult {
    ok_text(
        "uid=2000(shell) gid=2000(shell) groups=2000(shell),1004(input),1007(log),1011(adb),1015(sdcard_rw),1028(sdcard_r),1078(ext_data_rw),1079(ext_obb_rw),3001(net_bt_admin),3002(net_bt),3003(inet),3006(net_bw_stats),3009(readproc),3011(uhid),3012(readtracefs) context=u:r:shell:s0\n",
    )
}

/// `uptime` (toybox format, no user count).
pub(crate) fn uptime(st: &PhoneState) -> CommandResult {
    let now = clock::civil(clock::now_ms());
    let up_min = st.uptime_ms() / 60_000;
    let (days, hours, minutes) = (up_min / 1440, (up_min / 60) % 24, up_min % 60);
    let mut s = format!(" {:02}:{:02}:{:02} up ", now.hour, now.minute, now.second);
    if days > 0 {
        let _ = write!(s, "{days} day{}, ", if days == 1 { "" } else { "s" });
    }
    if hours > 0 {
        let _ = write!(s, "{hours:2}:{minutes:02}, ");
    } else {
        let _ = write!(s, "{minutes} min, ");
    }
    s.push_str(" load average: 0.52, 0.61, 0.58\n");
    ok_text(s)
}

/// `wm size` / `wm density`.
/// `df`: toybox's `1K-blocks` table on Android 6 and later, the old
/// toolbox table (mount point first, human sizes) before.
pub(crate) fn df(st: &PhoneState) -> CommandResult {
    if st.props.sdk < 23 {
        return ok_text(
            "Filesystem             Size   Used   Free   Blksize\n\
             /dev                   362M    76K   362M   4096\n\
             /system                568M   312M   256M   4096\n\
             /data                   27G    19G     8G   4096\n\
             /mnt/sdcard             27G    19G     8G   4096\n",
        );
    }
    ok_text(
        "Filesystem                1K-blocks     Used Available Use% Mounted on\n\
         /dev/block/dm-0             5358244  5342116         0 100% /\n\
         tmpfs                       3842164     1308   3840856   1% /dev\n\
         /dev/block/dm-5           116050044 41837360  74081612  37% /data\n\
         /dev/fuse                 116050044 41837360  74081612  37% /storage/emulated\n",
    )
}

pub(crate) fn wm(st: &PhoneState, args: &[String]) -> CommandResult {
    match args.first().map(String::as_str) {
        Some("size") => ok_text(format!(
            "Physical size: {}x{}\n",
            st.display.width, st.display.height
        )),
        Some("density") => ok_text(format!("Physical density: {}\n", st.display.density)),
        _ => fail(
            "Window manager (window) commands:\n  help\n      Print this help text.\n  size [reset|WxH|WdpxHdp] [-d DISPLAY_ID]\n    Return or override display size.\n  density [reset|DENSITY] [-d DISPLAY_ID]\n    Return or override display density.\n",
            "",
            255,
        ),
    }
}

fn lines(data: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(data);
    let mut v: Vec<String> = text.split('\n').map(str::to_owned).collect();
    if v.last().is_some_and(String::is_empty) {
        v.pop();
    }
    v
}

/// Converts a basic regular expression to the `regex` crate's syntax.
fn bre_to_regex(p: &str) -> String {
    let mut out = String::new();
    let mut chars = p.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(n @ ('(' | ')' | '{' | '}' | '|' | '+' | '?')) => out.push(n),
                Some(n) => {
                    out.push('\\');
                    out.push(n);
                }
                None => out.push_str("\\\\"),
            },
            '(' | ')' | '{' | '}' | '|' | '+' | '?' => {
                out.push('\\');
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}

/// `grep [-EFivcqn] [-A N] [-e] PATTERN [FILE…]`.
pub(crate) fn grep(st: &PhoneState, args: &[String], stdin: &[u8]) -> CommandResult {
    let (mut extended, mut fixed, mut icase, mut invert, mut count, mut quiet, mut number) =
        (false, false, false, false, false, false, false);
    let mut after = 0usize;
    let mut pattern: Option<String> = None;
    let mut files = Vec::new();
    let mut i = 0;
    let mut options_done = false;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        if options_done || !a.starts_with('-') || a == "-" {
            if pattern.is_none() {
                pattern = Some(a.clone());
            } else {
                files.push(a.clone());
            }
            continue;
        }
        if a == "--" {
            options_done = true;
            continue;
        }
        let mut flags = a[1..].chars();
        while let Some(f) = flags.next() {
            match f {
                'E' => extended = true,
                'F' => fixed = true,
                'i' => icase = true,
                'v' => invert = true,
                'c' => count = true,
                'q' => quiet = true,
                'n' => number = true,
                'e' | 'A' => {
                    let rest: String = flags.by_ref().collect();
                    let value = if rest.is_empty() {
                        let Some(v) = args.get(i) else {
                            return fail(
                                "",
                                &format!("grep: option requires an argument -- '{f}'\n"),
                                2,
                            );
                        };
                        i += 1;
                        v.clone()
                    } else {
                        rest
                    };
                    if f == 'e' {
                        pattern = Some(value);
                    } else {
                        match value.parse() {
                            Ok(n) => after = n,
                            Err(_) => {
                                return fail(
                                    "",
                                    &format!("grep: invalid context length argument '{value}'\n"),
                                    2,
                                );
                            }
                        }
                    }
                    break;
                }
                other => return fail("", &format!("grep: Unknown option '{other}'\n"), 2),
            }
        }
    }
    let Some(pattern) = pattern else {
        return fail("", "grep: Needs 1 argument\n", 2);
    };
    let source = if fixed {
        regex::escape(&pattern)
    } else if extended {
        pattern.clone()
    } else {
        bre_to_regex(&pattern)
    };
    let re = match regex::RegexBuilder::new(&source)
        .case_insensitive(icase)
        .build()
    {
        Ok(re) => re,
        Err(e) => return fail("", &format!("grep: bad regex '{pattern}': {e}\n"), 2),
    };
    let mut out = Output::default();
    let mut status = 1;
    let mut inputs: Vec<(Option<String>, Vec<u8>)> = Vec::new();
    if files.is_empty() {
        inputs.push((None, stdin.to_vec()));
    }
    let multi = files.len() > 1;
    for f in &files {
        match read_file(st, f) {
            Some(bytes) => inputs.push((multi.then(|| f.clone()), bytes)),
            None => out.errln(format!("grep: {f}: No such file or directory")),
        }
    }
    for (name, data) in inputs {
        let prefix = name.map(|n| format!("{n}:")).unwrap_or_default();
        let mut matches = 0usize;
        let mut trailing = 0usize;
        for (n, line) in lines(&data).iter().enumerate() {
            let hit = re.is_match(line) != invert;
            if hit {
                matches += 1;
                status = 0;
                trailing = after;
            } else if trailing > 0 {
                trailing -= 1;
            } else {
                continue;
            }
            if !count && !quiet {
                let num = if number {
                    format!("{}:", n + 1)
                } else {
                    String::new()
                };
                out.outln(format!("{prefix}{num}{line}"));
            }
        }
        if count && !quiet {
            out.outln(format!("{prefix}{matches}"));
        }
    }
    if quiet {
        out = Output::default();
    }
    done(out, status)
}

fn line_count_arg(args: &[String], default: usize) -> Result<(usize, Vec<String>), String> {
    let mut n = default;
    let mut files = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        if a == "-n" {
            let v = args
                .get(i)
                .ok_or_else(|| "option requires an argument -- 'n'".to_owned())?;
            i += 1;
            n = v.parse().map_err(|_| format!("invalid number '{v}'"))?;
        } else if let Some(v) = a.strip_prefix("-n").or_else(|| a.strip_prefix('-')) {
            n = v.parse().map_err(|_| format!("invalid number '{v}'"))?;
        } else {
            files.push(a.clone());
        }
    }
    Ok((n, files))
}

fn input_of(
    st: &PhoneState,
    files: &[String],
    stdin: &[u8],
    tool: &str,
) -> Result<Vec<u8>, String> {
    if files.is_empty() {
        return Ok(stdin.to_vec());
    }
    let mut data = Vec::new();
    for f in files {
        data.extend(
            read_file(st, f).ok_or_else(|| format!("{tool}: {f}: No such file or directory"))?,
        );
    }
    Ok(data)
}

/// `head [-n N] [FILE]` and `tail [-n N] [FILE]`.
pub(crate) fn head_tail(
    st: &PhoneState,
    tool: &str,
    args: &[String],
    stdin: &[u8],
) -> CommandResult {
    let (n, files) = match line_count_arg(args, 10) {
        Ok(v) => v,
        Err(e) => return fail("", &format!("{tool}: {e}\n"), 1),
    };
    let data = match input_of(st, &files, stdin, tool) {
        Ok(d) => d,
        Err(e) => return fail("", &format!("{e}\n"), 1),
    };
    let all = lines(&data);
    let picked: &[String] = if tool == "head" {
        &all[..n.min(all.len())]
    } else {
        &all[all.len().saturating_sub(n)..]
    };
    let mut text = String::new();
    for l in picked {
        text.push_str(l);
        text.push('\n');
    }
    ok_text(text)
}

/// `wc [-lwc] [FILE]`.
pub(crate) fn wc(st: &PhoneState, args: &[String], stdin: &[u8]) -> CommandResult {
    let (flags, files): (Vec<&String>, Vec<&String>) =
        args.iter().partition(|a| a.starts_with('-') && a.len() > 1);
    let files: Vec<String> = files.into_iter().cloned().collect();
    let data = match input_of(st, &files, stdin, "wc") {
        Ok(d) => d,
        Err(e) => return fail("", &format!("{e}\n"), 1),
    };
    let text = String::from_utf8_lossy(&data);
    let counts = [
        ('l', data.iter().filter(|b| **b == b'\n').count()),
        ('w', text.split_whitespace().count()),
        ('c', data.len()),
    ];
    let wanted: String = flags.iter().flat_map(|f| f[1..].chars()).collect();
    let shown: Vec<usize> = counts
        .iter()
        .filter(|(c, _)| wanted.is_empty() || wanted.contains(*c))
        .map(|(_, n)| *n)
        .collect();
    let line = if shown.len() == 1 {
        shown[0].to_string()
    } else {
        shown
            .iter()
            .map(|n| format!("{n:7}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    ok_text(format!("{line}\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| (*x).to_owned()).collect()
    }

    fn text(r: &CommandResult) -> String {
        String::from_utf8_lossy(&r.output.stream(crate::shell::Fd::Stdout)).into_owned()
    }

    #[test]
    fn getprop_lists_and_reads() {
        let st = PhoneState::default();
        let all = text(&getprop(&st, &[]));
        assert!(all.contains("[ro.product.model]: [Pixel 7]\n"));
        assert!(all.contains("[ro.build.version.sdk]: [34]\n"));
        assert_eq!(text(&getprop(&st, &s(&["ro.serialno"]))), "DWSIM0001\n");
        assert_eq!(text(&getprop(&st, &s(&["no.such"]))), "\n");
        assert_eq!(text(&getprop(&st, &s(&["no.such", "dflt"]))), "dflt\n");
    }

    #[test]
    fn ip_addr_follows_wifi() {
        let mut st = PhoneState::default();
        let up = text(&ip(&st, &s(&["addr", "show", "wlan0"])));
        assert!(up.starts_with("18: wlan0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500"));
        assert!(up.contains("    inet 192.168.1.23/24 brd 192.168.1.255 scope global wlan0\n"));
        assert!(up.contains("inet6 fe80::983f:21ff:fec4:5e77/64 scope link"));
        assert_eq!(
            text(&ip(&st, &s(&["route"]))),
            "192.168.1.0/24 dev wlan0 proto kernel scope link src 192.168.1.23\n"
        );
        st.wifi.enabled = false;
        let down = text(&ip(&st, &s(&["addr", "show", "wlan0"])));
        assert!(down.contains("state DOWN"));
        assert!(!down.contains("inet "));
        assert_eq!(text(&ip(&st, &s(&["route"]))), "");
        assert_eq!(ip(&st, &s(&["addr", "show", "eth0"])).status, 1);
    }

    #[test]
    fn ip_route_get_names_the_default_route() {
        let mut st = PhoneState::default();
        assert_eq!(
            text(&ip(&st, &s(&["route", "get", "8.8.8.8"]))),
            "8.8.8.8 via 192.168.1.1 dev wlan0 table 1021 src 192.168.1.23 uid 2000 \n    cache \n"
        );
        // On the link itself: no gateway.
        assert_eq!(
            text(&ip(&st, &s(&["route", "get", "192.168.1.40"]))),
            "192.168.1.40 dev wlan0 table 1021 src 192.168.1.23 uid 2000 \n    cache \n"
        );
        st.wifi.connected = false;
        let offline = ip(&st, &s(&["route", "get", "8.8.8.8"]));
        assert_eq!(offline.status, 2);
        assert_eq!(ip(&st, &s(&["route", "get"])).status, 255);
    }

    #[test]
    fn echo_flags() {
        assert_eq!(text(&echo(&s(&["a", "b"]))), "a b\n");
        assert_eq!(text(&echo(&s(&["-n", "a"]))), "a");
        assert_eq!(text(&echo(&s(&["-e", "a\\tb"]))), "a\tb\n");
        assert_eq!(text(&echo(&s(&["-x"]))), "-x\n");
        assert_eq!(text(&echo(&[])), "\n");
    }

    #[test]
    fn grep_filters() {
        let st = PhoneState::default();
        let input = b"alpha\nBeta\ngamma (x)\n";
        assert_eq!(text(&grep(&st, &s(&["-i", "beta"]), input)), "Beta\n");
        assert_eq!(
            text(&grep(&st, &s(&["-E", "a$|^B"]), input)),
            "alpha\nBeta\n"
        );
        assert_eq!(text(&grep(&st, &s(&["(x)"]), input)), "gamma (x)\n");
        assert_eq!(text(&grep(&st, &s(&["-v", "-c", "a"]), input)), "0\n");
        assert_eq!(
            text(&grep(&st, &s(&["alpha", "-A", "1"]), input)),
            "alpha\nBeta\n"
        );
        assert_eq!(grep(&st, &s(&["zzz"]), input).status, 1);
        assert_eq!(grep(&st, &s(&["-E", "("]), input).status, 2);
        assert_eq!(
            text(&grep(&st, &s(&["MemTotal", "/proc/meminfo"]), b"")),
            "MemTotal:        7813212 kB\n"
        );
    }

    #[test]
    fn head_tail_wc() {
        let st = PhoneState::default();
        let input = b"1\n2\n3\n4\n";
        assert_eq!(
            text(&head_tail(&st, "head", &s(&["-n", "2"]), input)),
            "1\n2\n"
        );
        assert_eq!(text(&head_tail(&st, "tail", &s(&["-1"]), input)), "4\n");
        assert_eq!(text(&wc(&st, &s(&["-l"]), input)), "4\n");
    }

    #[test]
    fn sleep_reports_a_delay() {
        assert_eq!(sleep(&s(&["0.5"])).delay, Duration::from_millis(500));
        assert_eq!(sleep(&s(&["2m"])).delay, Duration::from_secs(120));
        assert_eq!(sleep(&s(&["x"])).status, 1);
        assert_eq!(sleep(&[]).status, 1);
    }

    #[test]
    fn proc_files() {
        let st = PhoneState::default();
        let up = String::from_utf8(read_file(&st, "/proc/uptime").expect("uptime")).expect("utf8");
        let secs: f64 = up
            .split(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .expect("number");
        assert!(secs > 7000.0);
        let cat_missing = cat(&st, &s(&["/nope"]), b"");
        assert_eq!(cat_missing.status, 1);
    }
}
