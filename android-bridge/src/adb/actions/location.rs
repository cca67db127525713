//! The `location` service over ADB (tracking needs the companion app).
//!
//! `dumpsys location`: the last known fix.
//!
//! Android 12+ prints `last location=Location[PROVIDER LAT,LON hAcc=… et=…
//! alt=… vel=… bear=… …]` inside each provider's block; older releases list
//! `PROVIDER: Location[…]` under `Last Known Locations:` and spell accuracy
//! `acc=`. Unknown values print as `???`. `Location.toString` formats the
//! coordinates with the default locale, so a German phone prints
//! `52,520008,13,404954`; that is read too.

use super::*;
use crate::adb::parse::ParseError;
use crate::adb::parse::text::reject_device_error;
use droidwarden_services::{Command, LocationAction};

pub(super) async fn run(sh: &dyn Shell, action: &LocationAction) -> Result<Value, BridgeError> {
    match action {
        LocationAction::Current => {
            let fix = read(sh, &["dumpsys", "location"], location).await?;
            let fix = fix.ok_or_else(|| BridgeError::NotFound {
                message: "the phone has no last known location (is location turned off?)".into(),
            })?;
            answer(fix)
        }
        LocationAction::StartTracking { .. } | LocationAction::StopTracking => {
            Err(unsupported(sh, &Command::Location(action.clone())))
        }
    }
}

pub use droidwarden_services::LocationFix;

/// Providers in order of preference.
const PREFERENCE: &[&str] = &["gps", "fused", "network"];

/// Parses `dumpsys location` into the best last known fix.
///
/// The fix of the `gps` provider is preferred, then `fused`, then `network`,
/// then any other. `Ok(None)` when every provider's last location is `null`.
///
/// # Errors
/// [`ParseError::MissingField`] when the output has no location state at all,
/// [`ParseError::Device`] for a device error message.
pub fn location(output: &str) -> Result<Option<LocationFix>, ParseError> {
    reject_device_error(output)?;
    let known = [
        "last location=",
        "Last Known Locations",
        "Location Manager State",
    ];
    if !known.iter().any(|k| output.contains(k)) {
        return Err(ParseError::MissingField {
            command: "dumpsys location",
            field: "last location",
        });
    }
    let fixes: Vec<LocationFix> = output.lines().filter_map(fix_line).collect();
    let rank = |f: &LocationFix| {
        PREFERENCE
            .iter()
            .position(|p| *p == f.provider)
            .unwrap_or(PREFERENCE.len())
    };
    // `min_by_key` keeps the first of equals: the first fix printed per rank.
    Ok(fixes.into_iter().min_by_key(rank))
}

/// A `Location[…]` on a `last location=` line or a `Last Known Locations` entry.
fn fix_line(line: &str) -> Option<LocationFix> {
    let at = line.find("Location[")?;
    let before = line[..at].trim_end();
    let wanted = before.ends_with("last location=") || before.ends_with(':');
    if !wanted {
        return None;
    }
    parse_location(&line[at + "Location[".len()..])
}

/// `gps 37.421998,-122.084000 hAcc=5.0 et=… alt=5.0 vel=0.0 bear=0.0 {Bundle…}]`
fn parse_location(body: &str) -> Option<LocationFix> {
    let mut tokens = body.split_whitespace();
    let provider = tokens.next()?.to_owned();
    let (latitude, longitude) = coordinates(tokens.next()?)?;
    let mut fix = LocationFix {
        provider,
        latitude,
        longitude,
        altitude_m: None,
        accuracy_m: None,
        speed_mps: None,
        bearing_deg: None,
    };
    for token in tokens.take_while(|t| !t.starts_with('{')) {
        let Some((key, value)) = token.trim_end_matches(']').split_once('=') else {
            continue;
        };
        let value = value.parse::<f64>().ok().filter(|v| v.is_finite());
        match key {
            "hAcc" | "acc" => fix.accuracy_m = value,
            "alt" => fix.altitude_m = value,
            "vel" => fix.speed_mps = value,
            "bear" => fix.bearing_deg = value,
            _ => {}
        }
    }
    Some(fix)
}

/// `37.421998,-122.084000`, or `37,421998,-122,084000` from a comma locale.
fn coordinates(token: &str) -> Option<(f64, f64)> {
    let parts: Vec<&str> = token.split(',').collect();
    let (lat, lon) = match parts.as_slice() {
        [lat, lon] => ((*lat).to_owned(), (*lon).to_owned()),
        [a, b, c, d] => (format!("{a}.{b}"), format!("{c}.{d}")),
        _ => return None,
    };
    let lat: f64 = lat.parse().ok()?;
    let lon: f64 = lon.parse().ok()?;
    let valid = (-90.0..=90.0).contains(&lat) && (-180.0..=180.0).contains(&lon);
    valid.then_some((lat, lon))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fix(provider: &str, lat: f64, lon: f64, rest: [Option<f64>; 4]) -> LocationFix {
        LocationFix {
            provider: provider.into(),
            latitude: lat,
            longitude: lon,
            altitude_m: rest[0],
            accuracy_m: rest[1],
            speed_mps: rest[2],
            bearing_deg: rest[3],
        }
    }

    #[test]
    fn fixture_prefers_gps() {
        let text = fixture!("dumpsys-location/adbjsoncli-emulator-17.txt");
        assert_eq!(
            location(text),
            Ok(Some(fix(
                "gps",
                37.421998,
                -122.084,
                [Some(5.0), Some(5.0), Some(0.0), Some(0.0)]
            )))
        );
    }

    #[test]
    fn preference_and_null() {
        let fused_only = "\
Location Manager State:
    network provider:
      last location=Location[network 48.1,11.5 hAcc=30.0 et=+1m alt=??? ]
    fused provider:
      last location=Location[fused 48.137154,11.576124 hAcc=12.5 et=+5m alt=519.0 vel=1.5 bear=270.0]
    gps provider:
      last location=null
";
        assert_eq!(
            location(fused_only),
            Ok(Some(fix(
                "fused",
                48.137154,
                11.576124,
                [Some(519.0), Some(12.5), Some(1.5), Some(270.0)]
            )))
        );
        let none = "Location Manager State:\n  gps provider:\n    last location=null\n";
        assert_eq!(location(none), Ok(None));
        assert!(location("").is_err());
    }

    #[test]
    fn old_format_and_comma_locale() {
        let text = "\
  Last Known Locations:
    passive: Location[gps 52,520008,13,404954 acc=20 et=+2h alt=34.0 vel=??? bear=??? {Bundle[mParcelledData.dataSize=96]}]
";
        assert_eq!(
            location(text),
            Ok(Some(fix(
                "gps",
                52.520008,
                13.404954,
                [Some(34.0), Some(20.0), None, None]
            )))
        );
    }

    #[test]
    fn reads_any_text_without_panicking() {
        crate::adb::parse::tests::each_sample(|text| {
            let _ = location(text);
        });
    }
}
