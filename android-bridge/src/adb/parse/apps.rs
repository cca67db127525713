//! Apps: `cmd package query-activities` and `resolve-activity`, `am start
//! -W`, `pm list packages` and `pm path`.
//!
//! When several activities match an intent, `resolve-activity` does not pick
//! one: it names the system chooser, `android/com.android.internal.app.
//! ResolverActivity` (a vendor may ship its own chooser class). That is never
//! an app's launcher activity, so [`resolve_activity_brief`] refuses it, and
//! launching reads the whole list from `query-activities` instead
//! ([`launcher_activities`]).

pub use droidwarden_services::InstalledPackage;
use serde::Serialize;

use super::device_error::{DeviceFailure, FailureKind, classify_device_error};
use super::error::ParseError;
use super::text::{failure_error, grouped_uint, listing, reject_device_error};

/// The outcome of `am start [-W]`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AmStart {
    /// `ok`, `timeout`, or whatever `Status:` said; `ok` without `-W`.
    pub status: String,
    /// `LaunchState:` as printed, e.g. `COLD`, `WARM`, `HOT`, `UNKNOWN (-1)`.
    pub launch_state: Option<String>,
    /// `Activity:`, the activity that ended up on top (may be another app's).
    pub activity: Option<String>,
    /// `TotalTime:` in milliseconds.
    pub total_time_ms: Option<u64>,
    /// `WaitTime:` in milliseconds.
    pub wait_time_ms: Option<u64>,
}

/// Parses `cmd package resolve-activity --brief …` into `pkg/.Activity`.
///
/// The brief form prints a `priority=…` line then the component. The full
/// form (without `--brief`) is read too, from `packageName=` and `name=`.
///
/// # Errors
/// [`ParseError::NotFound`] for `No activity found`,
/// [`ParseError::Malformed`] when the answer is the system chooser (several
/// activities match and none was chosen),
/// [`ParseError::MissingField`] when no component is printed,
/// [`ParseError::Device`] for a device error message.
pub fn resolve_activity_brief(output: &str) -> Result<String, ParseError> {
    reject_device_error(output)?;
    if output.lines().any(|l| l.trim() == "No activity found") {
        return Err(ParseError::NotFound {
            what: "activity".into(),
        });
    }
    let component = brief_component(output)
        .or_else(|| full_component(output))
        .ok_or(ParseError::MissingField {
            command: "cmd package resolve-activity",
            field: "component",
        })?;
    if is_chooser(&component) {
        return Err(ParseError::malformed(
            "cmd package resolve-activity",
            "several activities match; the phone named its chooser",
            &component,
        ));
    }
    Ok(component)
}

/// Parses `cmd package query-activities [--brief|--components] …`: every
/// matching activity's component, in the phone's order (best match first,
/// the order `PackageManager.getLaunchIntentForPackage` takes the first of).
///
/// Reads the brief form (`N activities found:`, then per activity `Activity
/// #i:`, a `priority=…` line and the component), the `--components` form
/// (one component a line) and the full form (`packageName=` and `name=` of
/// each `ActivityInfo:`). The system chooser is never listed by a query,
/// but would be dropped if it were.
///
/// # Errors
/// [`ParseError::NotFound`] for `No activities found`,
/// [`ParseError::Malformed`] when the output has text but no component,
/// [`ParseError::Device`] for a device error message.
pub fn launcher_activities(output: &str) -> Result<Vec<String>, ParseError> {
    reject_device_error(output)?;
    if output.lines().any(|l| l.trim() == "No activities found") {
        return Err(ParseError::NotFound {
            what: "activity".into(),
        });
    }
    let mut components: Vec<String> = output
        .lines()
        .map(str::trim)
        .filter(|l| is_component(l))
        .map(str::to_owned)
        .collect();
    if components.is_empty() {
        components = full_components(output);
    }
    components.retain(|c| !is_chooser(c));
    if components.is_empty() {
        return Err(ParseError::malformed(
            "cmd package query-activities",
            "no activity component",
            output,
        ));
    }
    Ok(components)
}

/// The package of `pkg/cls` (also of `pkg/.Short`).
pub fn component_package(component: &str) -> Option<&str> {
    component
        .split_once('/')
        .map(|(pkg, _)| pkg.trim())
        .filter(|p| !p.is_empty())
}

/// Splits an activity component `pkg/cls` into its package and full class
/// name, a class written `.Short` being relative to the package. `None`
/// without a `/` or with either side empty.
pub fn split_component(component: &str) -> Option<(String, String)> {
    let (package, class) = component.split_once('/')?;
    if package.is_empty() || class.is_empty() {
        return None;
    }
    let class = if class.starts_with('.') {
        format!("{package}{class}")
    } else {
        class.to_owned()
    };
    Some((package.to_owned(), class))
}

/// The system's "open with" chooser: AOSP's
/// `android/com.android.internal.app.ResolverActivity` (or any activity of
/// the `android` package: the system's own dialogs), Android 14's
/// `com.android.intentresolver/.ChooserActivity`, or a vendor's own
/// `…ResolverActivity` / `…ChooserActivity`.
///
/// The one check for "Android asked the person to pick an app": a
/// resolved launcher activity that names it is refused, and an `am start
/// -W` that leaves it on top delivered nothing yet (`intents`).
pub fn is_chooser(component: &str) -> bool {
    let class = component.rsplit('/').next().unwrap_or(component);
    component_package(component) == Some("android")
        || class.ends_with("ResolverActivity")
        || class.ends_with("ChooserActivity")
}

fn brief_component(output: &str) -> Option<String> {
    output
        .lines()
        .map(str::trim)
        .find(|l| is_component(l))
        .map(str::to_owned)
}

/// `pkg/cls` with no spaces, `=` or `:`; both halves non-empty.
fn is_component(s: &str) -> bool {
    match s.split_once('/') {
        Some((pkg, cls)) => {
            !pkg.is_empty()
                && !cls.is_empty()
                && !s.contains(|c: char| c.is_whitespace() || c == '=' || c == ':')
        }
        None => false,
    }
}

/// The first `name=` and `packageName=` of the `ActivityInfo:` block.
fn full_component(output: &str) -> Option<String> {
    let block = &output[output.find("ActivityInfo:")?..];
    block_component(block)
}

/// The component of each `ActivityInfo:` block, in order.
fn full_components(output: &str) -> Vec<String> {
    output
        .split("ActivityInfo:")
        .skip(1)
        .filter_map(block_component)
        .collect()
}

/// `packageName=`/`name=` of the `ActivityInfo:` block `block` starts with
/// (its `ApplicationInfo:` sub-block repeats `packageName=` but has no
/// `name=`, so the first of each is the activity's).
fn block_component(block: &str) -> Option<String> {
    let field = |key: &str| {
        block
            .lines()
            .find_map(|l| l.trim().strip_prefix(key).map(str::trim))
            .filter(|v| !v.is_empty())
    };
    Some(format!("{}/{}", field("packageName=")?, field("name=")?))
}

/// Parses `am start` output, with or without `-W`.
///
/// # Errors
/// [`ParseError::NotFound`] for `unable to resolve Intent`, `Activity class
/// {…} does not exist` and similar (which old `am` prints with exit status 0),
/// [`ParseError::Device`] for other device errors such as a permission
/// denial or any other `Error:` line, and [`ParseError::MissingField`] when
/// neither `Status:` nor `Starting:` is printed.
pub fn am_start(output: &str) -> Result<AmStart, ParseError> {
    if let Some(failure) = classify_device_error(output, "", 0) {
        return Err(failure_error(failure));
    }
    // Any other `Error: …` means the activity was not started.
    if let Some(line) = output.lines().find(|l| l.starts_with("Error")) {
        return Err(ParseError::Device(DeviceFailure {
            kind: FailureKind::Other,
            message: super::device_error::excerpt(line),
        }));
    }
    let field = |key: &str| {
        output
            .lines()
            .find_map(|l| l.trim().strip_prefix(key).map(str::trim))
    };
    let millis = |key: &str| field(key).and_then(grouped_uint);
    let status = match field("Status:") {
        Some(s) => s.to_owned(),
        None if field("Starting:").is_some() => "ok".to_owned(),
        None => {
            return Err(ParseError::MissingField {
                command: "am start",
                field: "Status",
            });
        }
    };
    Ok(AmStart {
        status,
        launch_state: field("LaunchState:").map(str::to_owned),
        activity: field("Activity:").map(str::to_owned),
        total_time_ms: millis("TotalTime:"),
        wait_time_ms: millis("WaitTime:"),
    })
}

/// Partitions whose apps are system apps.
const SYSTEM_PARTITIONS: &[&str] = &[
    "/system/",
    "/system_ext/",
    "/product/",
    "/vendor/",
    "/apex/",
    "/odm/",
    "/oem/",
];

/// Parses `pm list packages`, with or without `-f` (and tolerates `-U`/`-i`
/// suffixes such as ` uid:10123` or `  installer=…`).
///
/// With `-f` a line reads `package:/path/base.apk=name`; the path may itself
/// contain `=`, so the name is taken after the last one.
///
/// # Errors
/// [`ParseError::Malformed`] when the output has text but no `package:` line,
/// [`ParseError::Device`] for a device error message.
pub fn package_list(output: &str) -> Result<Vec<InstalledPackage>, ParseError> {
    listing(output, "pm list packages", "no package: line", package_line)
}

fn package_line(line: &str) -> Option<InstalledPackage> {
    // `-U` and `-i` append ` uid:N` / `  installer=X` after whitespace.
    let main = line
        .trim()
        .strip_prefix("package:")?
        .split_whitespace()
        .next()?;
    let entry = match main.rsplit_once('=') {
        Some((path, name)) if path.starts_with('/') && !name.is_empty() => InstalledPackage {
            package: name.to_owned(),
            path: Some(path.to_owned()),
            system_app: SYSTEM_PARTITIONS.iter().any(|p| path.starts_with(p)),
        },
        _ => InstalledPackage {
            package: main.to_owned(),
            path: None,
            system_app: false,
        },
    };
    Some(entry)
}

/// Parses `pm path PKG`: one path per APK (split APKs give several). An
/// unknown package prints nothing, which is an empty list.
///
/// # Errors
/// [`ParseError::Malformed`] when the output has text but no `package:` line,
/// [`ParseError::Device`] for a device error message.
pub fn pm_path(output: &str) -> Result<Vec<String>, ParseError> {
    listing(output, "pm path", "no package: line", |line| {
        let path = line.trim().strip_prefix("package:")?.trim();
        (!path.is_empty()).then(|| path.to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::AM_START_ERRORS;
    use super::*;
    use crate::adb::parse::failure;

    #[test]
    fn components_split_into_package_and_full_class() {
        assert_eq!(
            split_component("com.a/.Main"),
            Some(("com.a".to_owned(), "com.a.Main".to_owned()))
        );
        assert_eq!(
            split_component("com.a/x.Y"),
            Some(("com.a".to_owned(), "x.Y".to_owned()))
        );
        assert_eq!(split_component("com.a"), None);
        assert_eq!(split_component("com.a/"), None);
        assert_eq!(split_component("/.Main"), None);
    }

    #[test]
    fn resolve_activity_fixtures() {
        let cases = [
            (
                fixture!("cmd-package-resolve-activity-brief/facebook-cheatsheet-unknown.txt"),
                "com.facebook.katana/.LoginActivity",
            ),
            (
                fixture!("cmd-package-resolve-activity-brief/ocentra-proof-emulator-15.txt"),
                "ca.ocentra.parent.agent/.MainActivity",
            ),
            // Without --brief (the fragment is cut inside ApplicationInfo).
            (
                fixture!("cmd-package-resolve-activity/airsdk-issue1430-11plus.txt"),
                "air.com.distriqt.test/air.com.distriqt.test.AIRAppEntry",
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(resolve_activity_brief(text), Ok(expected.to_owned()));
        }
    }

    #[test]
    fn resolve_activity_errors() {
        assert_eq!(
            resolve_activity_brief("No activity found\n"),
            Err(ParseError::NotFound {
                what: "activity".into()
            })
        );
        assert_eq!(
            failure(resolve_activity_brief("priority=0 preferredOrder=0\n")),
            "missing_field"
        );
    }

    #[test]
    fn a_missing_package_service_is_a_device_error() {
        let missing = "cmd: Can't find service: package\n";
        assert_eq!(failure(resolve_activity_brief(missing)), "device");
        assert_eq!(failure(launcher_activities(missing)), "device");
    }

    #[test]
    fn resolve_activity_never_returns_the_chooser() {
        let chooser =
            fixture!("cmd-package-resolve-activity-brief/droidwarden-resolver-chooser.txt");
        assert_eq!(failure(resolve_activity_brief(chooser)), "malformed");
        for vendor in [
            "priority=0\ncom.huawei.android.internal.app/.HwResolverActivity\n",
            "priority=0\nandroid/com.android.internal.app.ChooserActivity\n",
        ] {
            assert!(resolve_activity_brief(vendor).is_err(), "{vendor}");
        }
    }

    #[test]
    fn query_activities_fixtures_and_forms() {
        let two =
            fixture!("cmd-package-query-activities-brief/droidwarden-two-launcher-activities.txt");
        assert_eq!(
            launcher_activities(two),
            Ok(vec![
                "com.example.twoicons/.MainActivity".to_owned(),
                "com.example.twoicons/com.example.twoicons.widgets.ConfigureActivity".to_owned(),
            ])
        );
        let none = fixture!("cmd-package-query-activities-brief/droidwarden-none.txt");
        assert_eq!(
            launcher_activities(none),
            Err(ParseError::NotFound {
                what: "activity".into()
            })
        );
        // `--components`.
        assert_eq!(
            launcher_activities("com.a/.Main\ncom.b/com.b.Home\n"),
            Ok(vec![
                "com.a/.Main".to_owned(),
                "com.b/com.b.Home".to_owned()
            ])
        );
        // The full form: each ActivityInfo's packageName and name.
        let full = "2 activities found:\n  Activity #0:\n    priority=0 preferredOrder=0 match=0x108000 specificIndex=-1 isDefault=false\n    ActivityInfo:\n      name=com.a.Main\n      packageName=com.a\n      ApplicationInfo:\n        packageName=com.a\n  Activity #1:\n    ActivityInfo:\n      name=com.a.Second\n      packageName=com.a\n";
        assert_eq!(
            launcher_activities(full),
            Ok(vec![
                "com.a/com.a.Main".to_owned(),
                "com.a/com.a.Second".to_owned()
            ])
        );
        assert_eq!(
            failure(launcher_activities("1 activities found:\n  Activity #0:\n")),
            "malformed"
        );
        assert_eq!(component_package("com.a/.Main"), Some("com.a"));
        assert_eq!(component_package("/.Main"), None);
        assert_eq!(component_package("com.a"), None);
    }

    #[test]
    fn am_start_reads_grouped_times_whole() {
        // Synthetic, hostile: a slow start whose times are grouped by thousands.
        let text = "Starting: Intent { cmp=com.a/.Main }\nStatus: ok\nActivity: com.a/.Main\nTotalTime: 12,345\nWaitTime: 12,400\nComplete\n";
        let started = am_start(text).expect("parses");
        assert_eq!(started.total_time_ms, Some(12_345));
        assert_eq!(started.wait_time_ms, Some(12_400));
    }

    #[test]
    fn am_start_fixtures() {
        let ok = fixture!("am-start/am-start-W-ok-encapp-readme-portal-unknown.txt");
        assert_eq!(
            am_start(ok),
            Ok(AmStart {
                status: "ok".into(),
                launch_state: Some("COLD".into()),
                activity: Some("com.facebook.alohaapps.launcher/com.facebook.aloha.app.home.touch.HomeActivity".into()),
                total_time_ms: Some(1479),
                wait_time_ms: Some(1482),
            })
        );
        let timeout = fixture!("am-start/am-start-W-timeout-argent-pr691-unknown.txt");
        assert_eq!(
            am_start(timeout),
            Ok(AmStart {
                status: "timeout".into(),
                launch_state: Some("UNKNOWN (-1)".into()),
                activity: Some("com.anonymous.myapp/.MainActivity".into()),
                total_time_ms: None,
                wait_time_ms: Some(11639),
            })
        );
    }

    #[test]
    fn am_start_error_fixtures() {
        for &(text, what) in AM_START_ERRORS {
            assert_eq!(
                am_start(text),
                Err(ParseError::NotFound {
                    what: what.to_owned()
                })
            );
        }
    }

    #[test]
    fn am_start_other_forms() {
        let plain =
            "Starting: Intent { act=android.intent.action.VIEW dat=https://example.org/... }\n";
        let started = am_start(plain).expect("parses");
        assert_eq!(
            (started.status.as_str(), started.total_time_ms),
            ("ok", None)
        );
        let brought = "Starting: Intent { cmp=com.x/.Main }\nWarning: Activity not started, its current task has been brought to the front\n";
        assert_eq!(am_start(brought).map(|s| s.status), Ok("ok".into()));
        let denied = "Starting: Intent { cmp=com.x/.Secret }\njava.lang.SecurityException: Permission Denial: starting Intent { cmp=com.x/.Secret } not exported from uid 10099\n";
        assert_eq!(failure(am_start(denied)), "device");
        let unknown = "Starting: Intent { cmp=com.x/.Main }\nError: Activity not started, unknown error code 102\n";
        assert_eq!(
            am_start(unknown),
            Err(ParseError::Device(DeviceFailure {
                kind: FailureKind::Other,
                message: "Error: Activity not started, unknown error code 102".into(),
            }))
        );
        assert_eq!(failure(am_start("")), "missing_field");
    }

    #[test]
    fn package_list_fixtures() {
        let full = fixture!("pm-list-packages-f/metasploit-pr14140-genymotion-unknown.txt");
        let entries = package_list(full).expect("parses");
        assert_eq!(entries.len(), 16);
        assert_eq!(
            entries[0],
            InstalledPackage {
                package: "com.android.providers.downloads".into(),
                path: Some("/system/priv-app/DownloadProvider/DownloadProvider.apk".into()),
                system_app: true,
            }
        );
        assert_eq!(
            entries[2],
            InstalledPackage {
                package: "com.phonegap.camerasample".into(),
                path: Some("/data/app/com.phonegap.camerasample-2/base.apk".into()),
                system_app: false,
            }
        );
        assert_eq!(entries[10].package, "android");
        assert_eq!(entries.iter().filter(|e| e.system_app).count(), 15);

        let short = fixture!("pm-list-packages/cmd-package-list-grep-encapp-readme-unknown.txt");
        assert_eq!(
            package_list(short),
            Ok(vec![InstalledPackage {
                package: "com.facebook.encapp".into(),
                path: None,
                system_app: false
            }])
        );
    }

    #[test]
    fn package_list_edge_cases() {
        let text = "\
package:/data/app/~~kk1svdk5INu5m4M4-QsY2g==/com.viewer.comicscreen-PWjfAUbzQksNJTP1RBzzAg==/base.apk=com.viewer.comicscreen
package:/system_ext/priv-app/Settings/Settings.apk=com.android.settings uid:1000
package:/apex/com.android.btservices/app/Bluetooth/Bluetooth.apk=com.android.bluetooth
package:com.example.plain  installer=com.android.vending
package:/data/app/com.x-1/base.apk=com.x  installer=com.android.vending
";
        let entries = package_list(text).expect("parses");
        assert_eq!(entries[0].package, "com.viewer.comicscreen");
        assert!(!entries[0].system_app);
        assert_eq!(
            (entries[1].package.as_str(), entries[1].system_app),
            ("com.android.settings", true)
        );
        assert!(entries[2].system_app);
        assert_eq!(entries[3].package, "com.example.plain");
        assert_eq!(entries[4].package, "com.x");
        assert_eq!(
            entries[4].path.as_deref(),
            Some("/data/app/com.x-1/base.apk")
        );
        assert_eq!(package_list(""), Ok(vec![]));
        assert!(package_list("Error: unknown option -z\n").is_err());
    }

    #[test]
    fn pm_path_fixture() {
        let split = fixture!("pm-path/adbutils-pr91-split-apk-11plus.txt");
        assert_eq!(
            pm_path(split),
            Ok(vec![
                "/data/app/~~kk1svdk5INu5m4M4-QsY2g==/com.viewer.comicscreen-PWjfAUbzQksNJTP1RBzzAg==/base.apk".to_owned(),
                "/data/app/~~kk1svdk5INu5m4M4-QsY2g==/com.viewer.comicscreen-PWjfAUbzQksNJTP1RBzzAg==/split_config.arm64_v8a.apk".to_owned(),
            ])
        );
        assert_eq!(pm_path(""), Ok(vec![]));
    }
}
