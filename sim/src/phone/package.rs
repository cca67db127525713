//! `pm` / `cmd package`: `list packages`, `path`, `resolve-activity`,
//! `query-activities`, `enable` and `disable-user`, in `PackageManagerShellCommand`'s formats.

use crate::shell::CommandResult;
use crate::state::PhoneState;

use super::activity::{Intent, Resolved, resolve};
use super::{arg_expected, fail, java_exception, ok_text, short_component};

const RESOLVE_HEADER: &str =
    "priority=0 preferredOrder=0 match=0x108000 specificIndex=-1 isDefault=false";

fn list_packages(st: &PhoneState, args: &[String]) -> CommandResult {
    let (mut with_path, mut disabled, mut enabled, mut system, mut third, mut uid, mut installer) =
        (false, false, false, false, false, false, false);
    let mut filter: Option<&str> = None;
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        i += 1;
        match a {
            "--user" => i += 1,
            "--show-versioncode" | "--apex-only" | "--uid" => {}
            _ if a.starts_with('-') && a.len() > 1 => {
                for f in a[1..].chars() {
                    match f {
                        'f' => with_path = true,
                        'd' => disabled = true,
                        'e' => enabled = true,
                        's' => system = true,
                        '3' => third = true,
                        'U' => uid = true,
                        'i' => installer = true,
                        'u' | 'a' => {}
                        _ => return fail(&format!("Error: Unknown option: {a}\n"), "", 255),
                    }
                }
            }
            _ => filter = Some(a),
        }
    }
    let mut out = String::new();
    for p in &st.packages {
        if (disabled && p.enabled)
            || (enabled && !p.enabled)
            || (system && !p.system)
            || (third && p.system)
        {
            continue;
        }
        if filter.is_some_and(|f| !p.package.contains(f)) {
            continue;
        }
        out.push_str("package:");
        if with_path {
            out.push_str(&p.apk_path);
            out.push('=');
        }
        out.push_str(&p.package);
        if installer {
            out.push_str(if p.system {
                "  installer=null"
            } else {
                "  installer=com.android.vending"
            });
        }
        if uid {
            out.push_str(&format!(" uid:{}", p.uid));
        }
        out.push('\n');
    }
    ok_text(out)
}

fn resolve_activity(st: &PhoneState, args: &[String]) -> CommandResult {
    let (intent, opts) = match Intent::parse(args) {
        Ok(v) => v,
        Err(e) => return java_exception("resolve-activity", &e),
    };
    let Resolved::Activity(pkg, class) = resolve(st, &intent) else {
        return ok_text("No activity found\n");
    };
    let component = short_component(&pkg, &class);
    if opts.components {
        return ok_text(format!("{component}\n"));
    }
    if opts.brief {
        return ok_text(format!("{RESOLVE_HEADER}\n{component}\n"));
    }
    let Some(p) = st.package(&pkg) else {
        return ok_text("No activity found\n");
    };
    let mut s = format!("{RESOLVE_HEADER}\nActivityInfo:\n");
    wl!(s, "  name={class}");
    wl!(s, "  packageName={pkg}");
    wl!(
        s,
        "  labelRes=0x7f110029 nonLocalizedLabel=null icon=0x0 banner=0x0"
    );
    wl!(s, "  enabled=true exported=true directBootAware=false");
    wl!(
        s,
        "  taskAffinity={pkg} targetActivity=null persistableMode=PERSIST_ROOT_ONLY"
    );
    wl!(
        s,
        "  launchMode=0 flags=0x200 privateFlags=0x0 theme=0x7f120132"
    );
    wl!(
        s,
        "  screenOrientation=-1 configChanges=0x40000da3 softInputMode=0x0"
    );
    wl!(s, "  lockTaskLaunchMode=LOCK_TASK_LAUNCH_MODE_DEFAULT");
    wl!(s, "  resizeMode=RESIZE_MODE_RESIZEABLE");
    wl!(s, "  ApplicationInfo:");
    wl!(s, "    packageName={pkg}");
    wl!(
        s,
        "    labelRes=0x7f110029 nonLocalizedLabel=null icon=0x7f0e0000 banner=0x0"
    );
    wl!(s, "    processName={pkg}");
    wl!(s, "    taskAffinity={pkg}");
    wl!(
        s,
        "    uid={} flags=0x{} privateFlags=0x0 theme=0x0",
        p.uid,
        if p.system { "38c8be45" } else { "3888be44" }
    );
    wl!(s, "    sourceDir={}", p.apk_path);
    wl!(s, "    enabled={}", p.enabled);
    ok_text(s)
}

/// `cmd package query-activities [--brief|--components] INTENT`, in
/// `PackageManagerShellCommand.runQueryIntentActivities`'s format: `N
/// activities found:` then `  Activity #i:` and, with `--brief`, the
/// `priority=…` line and the component; `--components` prints only the
/// components. A launcher intent (`MAIN`/`LAUNCHER`, optionally `-p` or a
/// bare package) lists every enabled package's launcher activity.
fn query_activities(st: &PhoneState, args: &[String]) -> CommandResult {
    let (intent, opts) = match Intent::parse(args) {
        Ok(v) => v,
        Err(e) => return java_exception("query-activities", &e),
    };
    let launcherish = intent.component.is_none()
        && intent.data.is_none()
        && matches!(
            intent.action.as_deref(),
            None | Some(super::activity::ACTION_MAIN)
        )
        && !intent.categories.is_empty()
        && intent.categories.iter().all(|c| {
            c == super::activity::CATEGORY_LAUNCHER || c == "android.intent.category.DEFAULT"
        });
    let found: Vec<(String, String)> = if launcherish {
        st.packages
            .iter()
            .filter(|p| p.enabled)
            .filter(|p| {
                intent
                    .package
                    .as_deref()
                    .is_none_or(|want| want == p.package)
            })
            .filter_map(|p| Some((p.package.clone(), p.launcher_activity.clone()?)))
            .collect()
    } else {
        match resolve(st, &intent) {
            Resolved::Activity(pkg, class) => vec![(pkg, class)],
            Resolved::Unresolved | Resolved::ClassNotFound => Vec::new(),
        }
    };
    if found.is_empty() {
        return ok_text("No activities found\n");
    }
    let mut s = String::new();
    if opts.components {
        for (pkg, class) in &found {
            wl!(s, "{}", short_component(pkg, class));
        }
        return ok_text(s);
    }
    wl!(s, "{} activities found:", found.len());
    for (i, (pkg, class)) in found.iter().enumerate() {
        wl!(s, "  Activity #{i}:");
        if opts.brief {
            wl!(s, "    {RESOLVE_HEADER}");
            wl!(s, "    {}", short_component(pkg, class));
        } else {
            wl!(s, "    {RESOLVE_HEADER}");
            wl!(s, "    ActivityInfo:");
            wl!(s, "      name={class}");
            wl!(s, "      packageName={pkg}");
            wl!(s, "      enabled=true exported=true directBootAware=false");
        }
    }
    ok_text(s)
}

fn set_enabled(st: &mut PhoneState, sub: &str, args: &[String]) -> CommandResult {
    let pkg = args.iter().rfind(|a| !a.starts_with('-')).cloned();
    let Some(pkg) = pkg else {
        return arg_expected(sub, sub);
    };
    let Some(p) = st.package_mut(&pkg) else {
        return java_exception(
            sub,
            &format!("java.lang.IllegalArgumentException: Unknown package: {pkg}"),
        );
    };
    let enable = sub == "enable";
    p.enabled = enable;
    if !enable {
        super::activity::force_stop(st, &pkg);
    }
    ok_text(format!(
        "Package {pkg} new state: {}\n",
        if enable { "enabled" } else { "disabled-user" }
    ))
}

const HELP: &str = "Package manager (package) commands:\n  help\n    Print this help text.\n  path [--user USER_ID] PACKAGE\n    Print the path to the .apk of the given PACKAGE.\n  list packages [-f] [-d] [-e] [-s] [-3] [-i] [-l] [-u] [-U] [--user USER_ID] [FILTER]\n    Prints all packages; optionally only those whose name contains\n    the text in FILTER.\n  resolve-activity [--brief] [--components] [--user USER_ID] INTENT\n    Prints the activity that resolves to the given INTENT.\n  query-activities [--brief] [--components] [--user USER_ID] INTENT\n    Prints all activities that can handle the given INTENT.\n";

/// `pm …` (also `cmd package …`).
pub(crate) fn pm(st: &mut PhoneState, args: &[String]) -> CommandResult {
    let Some(sub) = args.first() else {
        return fail(HELP, "", 255);
    };
    let rest = &args[1..];
    match sub.as_str() {
        "list" => match rest.first().map(String::as_str) {
            Some("packages" | "package") => list_packages(st, &rest[1..]),
            Some(other) => fail(&format!("Error: unknown list type '{other}'\n"), "", 255),
            None => arg_expected("list", "list"),
        },
        "path" => {
            let pkg = rest.iter().rfind(|a| !a.starts_with('-')).cloned();
            let Some(pkg) = pkg else {
                return arg_expected("path", "path");
            };
            match st.package(&pkg) {
                Some(p) => ok_text(format!("package:{}\n", p.apk_path)),
                None => fail("", "", 1),
            }
        }
        "resolve-activity" => resolve_activity(st, rest),
        "query-activities" => query_activities(st, rest),
        "enable" | "disable-user" | "disable" => set_enabled(st, sub, rest),
        "install" => super::content::pm_install(st, rest),
        "uninstall" => super::content::pm_uninstall(st, rest),
        "clear" => super::content::pm_clear(st, rest),
        "help" | "-h" => ok_text(HELP),
        other => fail(&format!("Unknown command: {other}\n"), "", 255),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{phone, run};

    #[test]
    fn list_filters() {
        let p = phone();
        let third = run(&p, "pm list packages -3").0;
        assert_eq!(
            third,
            "package:com.example.legacy\npackage:com.example.notes\npackage:com.spotify.music\npackage:org.videolan.vlc\n"
        );
        let enabled_third_paths = run(&p, "pm list packages -f -3 -e").0;
        assert!(
            enabled_third_paths
                .starts_with("package:/data/app/~~Hc6Yd0Ju3Kf9Ge2Sa7Tb1Q==/com.example.notes-")
        );
        assert!(enabled_third_paths.contains("/base.apk=com.example.notes\n"));
        assert!(!enabled_third_paths.contains("legacy"));
        assert_eq!(
            run(&p, "pm list packages -d").0,
            "package:com.example.legacy\n"
        );
        assert!(
            run(&p, "pm list packages -s")
                .0
                .contains("package:android\n")
        );
        assert!(
            run(&p, "pm list packages -f")
                .0
                .contains("package:/system/framework/framework-res.apk=android\n")
        );
        assert_eq!(
            run(&p, "pm list packages spotify").0,
            "package:com.spotify.music\n"
        );
        assert_eq!(run(&p, "pm list packages -x").2, 255);
    }

    #[test]
    fn path_of_known_and_unknown() {
        let p = phone();
        let (out, _, status) = run(&p, "pm path com.spotify.music");
        assert_eq!(status, 0);
        assert!(out.starts_with("package:/data/app/~~Xk3v9Q0bLm2Rz7Tq1aYw8A==/com.spotify.music-"));
        assert_eq!(
            run(&p, "pm path com.nope"),
            (String::new(), String::new(), 1)
        );
    }

    #[test]
    fn resolve_activity_brief() {
        let p = phone();
        assert_eq!(
            run(&p, "cmd package resolve-activity --brief -c android.intent.category.LAUNCHER com.spotify.music").0,
            "priority=0 preferredOrder=0 match=0x108000 specificIndex=-1 isDefault=false\ncom.spotify.music/.MainActivity\n"
        );
        assert_eq!(
            run(
                &p,
                "cmd package resolve-activity --brief -c android.intent.category.LAUNCHER com.nope"
            )
            .0,
            "No activity found\n"
        );
        assert_eq!(
            run(&p, "pm resolve-activity --brief com.android.systemui").0,
            "No activity found\n"
        );
        assert!(
            run(&p, "pm resolve-activity com.example.notes")
                .0
                .contains("  name=com.example.notes.MainActivity\n")
        );
    }

    #[test]
    fn query_activities_lists_launcher_activities() {
        let p = phone();
        assert_eq!(
            run(&p, "cmd package query-activities --brief -a android.intent.action.MAIN -c android.intent.category.LAUNCHER com.spotify.music").0,
            "1 activities found:\n  Activity #0:\n    priority=0 preferredOrder=0 match=0x108000 specificIndex=-1 isDefault=false\n    com.spotify.music/.MainActivity\n"
        );
        assert_eq!(
            run(&p, "cmd package query-activities --brief -a android.intent.action.MAIN -c android.intent.category.LAUNCHER com.nope").0,
            "No activities found\n"
        );
        // Without a package: every enabled app's launcher activity.
        let all = run(
            &p,
            "cmd package query-activities --components -a android.intent.action.MAIN -c android.intent.category.LAUNCHER",
        )
        .0;
        assert!(all.contains("com.spotify.music/.MainActivity\n"), "{all}");
        assert!(!all.contains("com.example.legacy"), "{all}");
        assert!(!all.contains("activities found"), "{all}");
    }

    #[test]
    fn disable_and_enable() {
        let p = phone();
        assert_eq!(
            run(&p, "pm disable-user com.example.notes").0,
            "Package com.example.notes new state: disabled-user\n"
        );
        assert_eq!(
            run(&p, "pm resolve-activity --brief com.example.notes").0,
            "No activity found\n"
        );
        run(&p, "pm enable com.example.notes");
        assert!(
            p.state()
                .package("com.example.notes")
                .is_some_and(|x| x.enabled)
        );
    }
}
