//! `settings get|put|delete|list [--user U] NAMESPACE [KEY [VALUE]]`.
//!
//! A handful of keys are views onto typed state (airplane mode, battery
//! saver, Wi-Fi, Bluetooth, screen brightness and timeout, location); every
//! other key lives in the per-namespace maps. A missing key reads as `null`,
//! as on a real phone.

use crate::clock;
use crate::shell::CommandResult;
use crate::state::PhoneState;

use super::{fail, java_exception, ok_text};

fn bool_str(b: bool) -> String {
    if b { "1" } else { "0" }.to_owned()
}

/// The value of a key mapped onto typed state, if the key is one of those.
fn get_mapped(st: &PhoneState, ns: &str, key: &str) -> Option<String> {
    Some(match (ns, key) {
        ("global", "airplane_mode_on") => bool_str(st.airplane_mode),
        ("global", "low_power") => bool_str(st.power_save),
        ("global", "wifi_on") => bool_str(st.wifi.enabled),
        ("global", "bluetooth_on") => bool_str(st.bluetooth.enabled),
        ("system", "screen_brightness") => st.display.brightness.to_string(),
        ("system", "screen_brightness_mode") => st.display.brightness_mode.to_string(),
        ("system", "screen_off_timeout") => st.display.screen_off_timeout_ms.to_string(),
        ("secure", "location_mode") => if st.location.enabled { "3" } else { "0" }.to_owned(),
        _ => return None,
    })
}

const MAPPED: [(&str, &str); 8] = [
    ("global", "airplane_mode_on"),
    ("global", "low_power"),
    ("global", "wifi_on"),
    ("global", "bluetooth_on"),
    ("system", "screen_brightness"),
    ("system", "screen_brightness_mode"),
    ("system", "screen_off_timeout"),
    ("secure", "location_mode"),
];

/// Writes a mapped key; `Err` carries the settings provider's complaint.
fn put_mapped(st: &mut PhoneState, ns: &str, key: &str, value: &str) -> Option<Result<(), String>> {
    if !MAPPED.contains(&(ns, key)) {
        return None;
    }
    let invalid = || Err(format!("Invalid value: {value} for setting: {key}"));
    let int = value.trim().parse::<i64>();
    Some(match (key, int) {
        (_, Err(_)) => invalid(),
        ("airplane_mode_on", Ok(n)) => {
            st.airplane_mode = n != 0;
            Ok(())
        }
        ("low_power", Ok(n)) => {
            st.power_save = n != 0;
            Ok(())
        }
        ("wifi_on", Ok(n)) => {
            st.wifi.enabled = n != 0;
            st.wifi.connected = st.wifi.enabled && !st.wifi.ssid.is_empty();
            Ok(())
        }
        ("bluetooth_on", Ok(n)) => {
            st.bluetooth.enabled = n != 0;
            st.bluetooth.enabled_since_epoch_ms = clock::now_ms();
            Ok(())
        }
        ("screen_brightness", Ok(n)) => match u8::try_from(n) {
            Ok(b) => {
                st.display.brightness = b;
                Ok(())
            }
            Err(_) => invalid(),
        },
        ("screen_brightness_mode", Ok(n @ (0 | 1))) => {
            st.display.brightness_mode = n as u8;
            Ok(())
        }
        ("screen_off_timeout", Ok(n)) if n >= 0 => {
            st.display.screen_off_timeout_ms = n as u64;
            Ok(())
        }
        ("location_mode", Ok(n @ 0..=3)) => {
            st.location.enabled = n != 0;
            Ok(())
        }
        _ => invalid(),
    })
}

fn help() -> String {
    "Settings provider (settings) commands:\n  help\n      Print this help text.\n  get [--user <USER_ID> | current] NAMESPACE KEY\n      Retrieve the current value of KEY.\n  put [--user <USER_ID> | current] NAMESPACE KEY VALUE [TAG] [default]\n      Change the contents of KEY to VALUE.\n  delete [--user <USER_ID> | current] NAMESPACE KEY\n      Delete the entry for KEY.\n  list [--user <USER_ID> | current] NAMESPACE\n      Print all defined keys.\n      NAMESPACE is one of {system, secure, global}, case-insensitive\n".to_owned()
}

/// `settings …`.
pub(crate) fn run(st: &mut PhoneState, args: &[String]) -> CommandResult {
    let mut words: Vec<&str> = Vec::new();
    let mut i = 0;
    while i < args.len() {
        if args[i] == "--user" {
            i += 2;
            continue;
        }
        words.push(args[i].as_str());
        i += 1;
    }
    let Some(verb) = words.first().map(|v| v.to_ascii_lowercase()) else {
        return fail(&help(), "", 255);
    };
    if verb == "help" || verb == "-h" {
        return ok_text(help());
    }
    if !["get", "put", "delete", "list"].contains(&verb.as_str()) {
        return fail("", &format!("Invalid command: {}\n", words[0]), 255);
    }
    let Some(ns_raw) = words.get(1) else {
        return fail("", "Bad arguments\n", 255);
    };
    let ns = ns_raw.to_ascii_lowercase();
    if !["global", "system", "secure"].contains(&ns.as_str()) {
        return fail("", &format!("Invalid namespace '{ns_raw}'\n"), 255);
    }
    match (verb.as_str(), &words[2..]) {
        ("list", []) => {
            let mut all = map_of(st, &ns).clone();
            for (space, key) in MAPPED {
                if space == ns
                    && let Some(v) = get_mapped(st, space, key)
                {
                    all.insert(key.to_owned(), v);
                }
            }
            let mut out = String::new();
            for (k, v) in all {
                wl!(out, "{k}={v}");
            }
            ok_text(out)
        }
        ("get", [key]) => {
            let value = get_mapped(st, &ns, key)
                .or_else(|| map_of(st, &ns).get(*key).cloned())
                .unwrap_or_else(|| "null".to_owned());
            ok_text(format!("{value}\n"))
        }
        ("put", [key, value, ..]) => match put_mapped(st, &ns, key, value) {
            Some(Ok(())) => ok_text(""),
            Some(Err(reason)) => java_exception(
                "put",
                &format!("java.lang.IllegalArgumentException: {reason}"),
            ),
            None => {
                map_of_mut(st, &ns).insert((*key).to_owned(), (*value).to_owned());
                ok_text("")
            }
        },
        ("delete", [key]) => {
            let n = u8::from(map_of_mut(st, &ns).remove(*key).is_some());
            ok_text(format!("Deleted {n} rows\n"))
        }
        _ => fail("", "Bad arguments\n", 255),
    }
}

fn map_of_mut<'a>(
    st: &'a mut PhoneState,
    ns: &str,
) -> &'a mut std::collections::BTreeMap<String, String> {
    match ns {
        "system" => &mut st.settings.system,
        "secure" => &mut st.settings.secure,
        _ => &mut st.settings.global,
    }
}

fn map_of<'a>(st: &'a PhoneState, ns: &str) -> &'a std::collections::BTreeMap<String, String> {
    match ns {
        "system" => &st.settings.system,
        "secure" => &st.settings.secure,
        _ => &st.settings.global,
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{phone, run};

    #[test]
    fn mapped_keys_read_and_write_state() {
        let p = phone();
        assert_eq!(run(&p, "settings get global airplane_mode_on").0, "0\n");
        assert_eq!(run(&p, "settings get system screen_brightness").0, "102\n");
        run(&p, "settings put system screen_brightness 200");
        run(&p, "settings put system screen_brightness_mode 0");
        run(&p, "settings put system screen_off_timeout 30000");
        run(&p, "settings put global low_power 1");
        let s = p.state();
        assert_eq!(
            (
                s.display.brightness,
                s.display.brightness_mode,
                s.display.screen_off_timeout_ms,
                s.power_save
            ),
            (200, 0, 30_000, true)
        );
        assert_eq!(run(&p, "settings get global low_power").0, "1\n");
    }

    #[test]
    fn invalid_values_are_rejected() {
        let p = phone();
        let (_, err, status) = run(&p, "settings put system screen_brightness 300");
        assert_eq!(status, 255);
        assert!(err.contains(
            "java.lang.IllegalArgumentException: Invalid value: 300 for setting: screen_brightness"
        ));
        assert_eq!(p.state().display.brightness, 102);
        assert_eq!(
            run(&p, "settings put system screen_brightness_mode 2").2,
            255
        );
    }

    #[test]
    fn other_keys_use_the_map_and_missing_is_null() {
        let p = phone();
        assert_eq!(run(&p, "settings get secure nope").0, "null\n");
        run(&p, "settings put secure my_key 'a b'");
        assert_eq!(run(&p, "settings get secure my_key").0, "a b\n");
        assert_eq!(run(&p, "settings --user 0 get secure my_key").0, "a b\n");
        let list = run(&p, "settings list global").0;
        assert!(list.contains("airplane_mode_on=0\n"));
        assert!(list.contains("adb_enabled=1\n"));
        assert_eq!(
            run(&p, "settings delete secure my_key").0,
            "Deleted 1 rows\n"
        );
    }

    #[test]
    fn bad_arguments() {
        let p = phone();
        assert_eq!(
            run(&p, "settings get bogus x"),
            (String::new(), "Invalid namespace 'bogus'\n".to_owned(), 255)
        );
        assert_eq!(run(&p, "settings get global").2, 255);
        assert_eq!(run(&p, "settings frob global").2, 255);
    }
}
