//! Window manager state: display rotation and the focused app.
//!
//! `dumpsys window displays` prints the rotation as `mRotation=ROTATION_90`
//! (Android 10+, inside the display configuration), `mCurrentRotation=` or, on
//! old releases, `mRotation=1` (a quarter-turn count). The focused window and
//! app are `mCurrentFocus=Window{… u0 pkg/cls}` and
//! `mFocusedApp=ActivityRecord{… u0 pkg/.Act t7}`; multi-display phones print
//! one of each per display, `null` for a display without focus.

pub use droidwarden_services::DeviceOrientation;

use super::apps::split_component;
use super::error::ParseError;
use super::text::{reject_device_error, token_after};

const COMMAND: &str = "dumpsys window displays";

/// Parses the rotation of the first display in `dumpsys window displays`.
///
/// Rotation 0 is portrait on phones but landscape on tablets and TVs whose
/// natural orientation is landscape. The natural orientation is read from
/// the display's `init=WxH` size or, failing that, from the `port`/`land`
/// qualifier of the configuration printed beside the rotation; when neither
/// is present the display is taken to be naturally portrait. For a naturally
/// landscape display, Android's default mapping makes 270 portrait and 90
/// reverse portrait.
///
/// # Errors
/// [`ParseError::MissingField`] without a rotation field,
/// [`ParseError::Malformed`] for a rotation that is not a quarter turn, and
/// [`ParseError::Device`] for a device error message.
pub fn rotation(output: &str) -> Result<DeviceOrientation, ParseError> {
    reject_device_error(output)?;
    let raw = output
        .lines()
        .find_map(|l| token_after(l, "mCurrentRotation=").or_else(|| token_after(l, "mRotation=")))
        .ok_or(ParseError::MissingField {
            command: COMMAND,
            field: "mRotation",
        })?;
    let rotation_deg =
        degrees(raw).ok_or_else(|| ParseError::malformed(COMMAND, "mRotation", raw))?;
    let landscape_natural = natural_landscape(output, rotation_deg).unwrap_or(false);
    Ok(DeviceOrientation {
        rotation_deg,
        orientation: orientation_name(rotation_deg, landscape_natural).to_owned(),
    })
}

/// `ROTATION_90` → 90; `1` → 90 (old quarter-turn count).
fn degrees(raw: &str) -> Option<u16> {
    let raw = raw.trim_end_matches(|c: char| !c.is_ascii_alphanumeric());
    let deg = match raw.strip_prefix("ROTATION_") {
        Some(deg) => deg.parse().ok()?,
        None => raw.parse::<u16>().ok().filter(|q| *q < 4)? * 90,
    };
    matches!(deg, 0 | 90 | 180 | 270).then_some(deg)
}

/// Whether the display's unrotated shape is wider than tall.
fn natural_landscape(output: &str, rotation_deg: u16) -> Option<bool> {
    let init = output.lines().find_map(|l| token_after(l, "init="));
    if let Some((w, h)) = init.and_then(|s| s.split_once('x')) {
        let digits = |s: &str| {
            s.trim_end_matches(|c: char| !c.is_ascii_digit())
                .parse::<u32>()
                .ok()
        };
        if let (Some(w), Some(h)) = (digits(w), digits(h)) {
            return Some(w > h);
        }
    }
    let config = output.lines().find(|l| {
        l.contains("mCurConfiguration=")
            || l.contains("overrideConfig=")
            || l.contains("mGlobalConfiguration=")
    })?;
    let words: Vec<&str> = config.split_whitespace().collect();
    let current_land = if words.contains(&"land") {
        true
    } else if words.contains(&"port") {
        false
    } else {
        return None;
    };
    let quarter_turned = rotation_deg % 180 == 90;
    Some(current_land != quarter_turned)
}

fn orientation_name(deg: u16, landscape_natural: bool) -> &'static str {
    match (landscape_natural, deg) {
        (false, 0) | (true, 270) => "portrait",
        (false, 90) | (true, 0) => "landscape",
        (false, 180) | (true, 90) => "reverse_portrait",
        _ => "reverse_landscape",
    }
}

/// Whether the screen is on and whether the lock screen shows, as the
/// window manager's display policy reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KeyguardState {
    /// `mAwake=` (Android 10+ `DisplayPolicy`); `None` when not printed.
    pub awake: Option<bool>,
    /// Whether a lock screen shows; `None` when no keyguard field is
    /// printed (an older release, a fragment).
    pub locked: Option<bool>,
}

/// The `key=value` fields that say a lock screen shows, across releases:
/// `isKeyguardShowing` and `mDreamingLockscreen` (`DisplayPolicy`, Android
/// 10+, in `dumpsys window displays`), `mKeyguardShowing` and the
/// per-display `KeyguardShowing` (`KeyguardController`, `dumpsys activity
/// activities` and `dumpsys window`), `mShowingLockscreen` and
/// `isStatusBarKeyguard` (`PhoneWindowManager`, Android 9 and earlier,
/// `dumpsys window policy`).
const KEYGUARD_KEYS: &[&str] = &[
    "isKeyguardShowing",
    "mDreamingLockscreen",
    "mKeyguardShowing",
    "KeyguardShowing",
    "mShowingLockscreen",
    "isStatusBarKeyguard",
];

/// Reads the screen and lock state from `dumpsys window displays` (or
/// `dumpsys window`, `dumpsys window policy`, `dumpsys activity
/// activities`): locked when any keyguard field is `true`, unlocked when
/// some are printed and none is. Fields are matched as whole
/// whitespace-separated `key=value` words, so `mKeyguardShowing` is never
/// read as `KeyguardShowing`.
///
/// # Errors
/// [`ParseError::Device`] for a device error message.
pub fn keyguard(output: &str) -> Result<KeyguardState, ParseError> {
    reject_device_error(output)?;
    let mut state = KeyguardState::default();
    for (key, value) in output
        .lines()
        .flat_map(str::split_whitespace)
        .filter_map(|word| word.split_once('='))
    {
        let value = match value {
            "true" => true,
            "false" => false,
            _ => continue,
        };
        if key == "mAwake" {
            state.awake = state.awake.or(Some(value));
        } else if KEYGUARD_KEYS.contains(&key) {
            state.locked = Some(state.locked.unwrap_or(false) || value);
        }
    }
    Ok(state)
}

/// Line starts that name the focused or resumed activity.
const FOCUS_KEYS: &[&str] = &[
    "mCurrentFocus=",
    "mFocusedApp=",
    "mResumedActivity:",
    "ResumedActivity:",
    "topResumedActivity=",
];

/// Parses the focused app's package from `dumpsys window` (or `dumpsys
/// activity activities`) output; the last non-`null` focus line wins.
///
/// Windows without a package (`Window{… u0 NotificationShade}`) count as no
/// focus.
///
/// # Errors
/// [`ParseError::Device`] for a device error message.
pub fn focused_app(output: &str) -> Result<Option<String>, ParseError> {
    reject_device_error(output)?;
    Ok(output
        .lines()
        .filter_map(|l| {
            let line = l.trim_start();
            let key = FOCUS_KEYS.iter().find(|k| line.starts_with(**k))?;
            record_package(&line[key.len()..])
        })
        .next_back())
}

/// Parses the focused app's package and activity class from the same
/// lines as [`focused_app`]: `(package, full activity class)`, with a
/// `.Short` class expanded within its package. The activity records
/// (`mFocusedApp=`, resumed activities) win over the focused window, which
/// may be a dialog or a system window of another package.
///
/// # Errors
/// [`ParseError::Device`] for a device error message.
pub fn focused_component(output: &str) -> Result<Option<(String, String)>, ParseError> {
    reject_device_error(output)?;
    let found = |window: bool| {
        output
            .lines()
            .filter_map(|l| {
                let line = l.trim_start();
                let key = FOCUS_KEYS.iter().find(|k| line.starts_with(**k))?;
                if (*key == "mCurrentFocus=") != window {
                    return None;
                }
                record_component(&line[key.len()..])
            })
            .next_back()
    };
    Ok(found(false).or_else(|| found(true)))
}

/// `Window{4879fe9 u0 pkg/cls}` or `ActivityRecord{… u0 pkg/.Act t2}` → `pkg`.
fn record_package(record: &str) -> Option<String> {
    record_component(record).map(|(pkg, _)| pkg)
}

/// `… u0 pkg/.Act …` → `(pkg, pkg.Act)`.
fn record_component(record: &str) -> Option<(String, String)> {
    let tokens: Vec<&str> = record.split_whitespace().collect();
    tokens.windows(2).find_map(|w| {
        let user = w[0].strip_prefix('u')?;
        if user.is_empty() || !user.chars().all(|c| c.is_ascii_digit()) {
            return None;
        }
        split_component(w[1].trim_end_matches('}'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const DISPLAYS: &str =
        fixture!("dumpsys-window/adbjsoncli-emulator-17-window-displays-head.txt");
    const ANDROID4: &str = fixture!("dumpsys-window/uiautomator2-issue200-android4.txt");
    const KODI: &str = fixture!("dumpsys-window/python-androidtv-pr329-kodi-tv-unknown.txt");

    fn orientation(rotation_deg: u16, name: &str) -> DeviceOrientation {
        DeviceOrientation {
            rotation_deg,
            orientation: name.into(),
        }
    }

    #[test]
    fn rotation_fixtures() {
        assert_eq!(rotation(DISPLAYS), Ok(orientation(0, "portrait")));
        // A 1920x720 head unit: rotation 0 with a `land` configuration.
        assert_eq!(rotation(ANDROID4), Ok(orientation(0, "landscape")));
        assert_eq!(
            rotation(KODI),
            Err(ParseError::MissingField {
                command: COMMAND,
                field: "mRotation"
            })
        );
    }

    #[test]
    fn rotation_forms() {
        let cases = [
            (
                "  init=1080x2424 420dpi\n  mRotation=ROTATION_90 mAltOrientation=false\n",
                Some(orientation(90, "landscape")),
            ),
            (
                "  mCurrentRotation=ROTATION_180\n",
                Some(orientation(180, "reverse_portrait")),
            ),
            (
                "  mRotation=3 mAltOrientation=false\n",
                Some(orientation(270, "reverse_landscape")),
            ),
            (
                "  init=1920x1080 320dpi\n  mRotation=ROTATION_0}\n",
                Some(orientation(0, "landscape")),
            ),
            (
                "  init=2560x1600 320dpi\n  mRotation=ROTATION_270\n",
                Some(orientation(270, "portrait")),
            ),
            ("  mDisplayRotation=ROTATION_90\n", None),
            ("  mRotation=7\n", None),
            ("  mRotation=ROTATION_45\n", None),
        ];
        for (text, expected) in cases {
            assert_eq!(rotation(text).ok(), expected, "{text:?}");
        }
    }

    #[test]
    fn keyguard_state_from_real_dumps_and_every_release_s_fields() {
        let policy =
            fixture!("dumpsys-activity-activities/blog-activitymanager-displaypolicy-fragment.txt");
        let controller = fixture!(
            "dumpsys-activity-activities/blog-activitymanager-keyguardcontroller-fragment.txt"
        );
        let unlocked_awake = KeyguardState {
            awake: Some(true),
            locked: Some(false),
        };
        assert_eq!(keyguard(policy), Ok(unlocked_awake));
        assert_eq!(
            keyguard(controller),
            Ok(KeyguardState {
                awake: None,
                locked: Some(false)
            })
        );
        // The head of a real `dumpsys window displays` names neither.
        assert_eq!(keyguard(DISPLAYS), Ok(KeyguardState::default()));
        let cases = [
            // Android 10+ DisplayPolicy, locked and asleep.
            (
                "    mAwake=false mScreenOnEarly=false mScreenOnFully=false\n    mShowingDream=false mDreamingLockscreen=true\n    isKeyguardShowing=true\n",
                Some(false),
                Some(true),
            ),
            // The lock screen shows on an awake screen.
            (
                "    mAwake=true\n    isKeyguardShowing=true\n",
                Some(true),
                Some(true),
            ),
            // Android 9 and earlier: PhoneWindowManager's fields.
            (
                "    mShowingLockscreen=true mShowingDream=false mDreamingLockscreen=true\n",
                None,
                Some(true),
            ),
            ("    isStatusBarKeyguard=false\n", None, Some(false)),
            // The per-display line alone, and values that are no booleans.
            (
                "   KeyguardShowing=true AodShowing=false\n",
                None,
                Some(true),
            ),
            ("    isKeyguardShowing=maybe mAwake=1\n", None, None),
        ];
        for (text, awake, locked) in cases {
            assert_eq!(
                keyguard(text),
                Ok(KeyguardState { awake, locked }),
                "{text:?}"
            );
        }
        assert!(matches!(
            keyguard("Can't find service: window\n"),
            Err(ParseError::Device(_))
        ));
    }

    #[test]
    fn focused_app_fixtures() {
        let cases = [
            (DISPLAYS, Some("com.google.android.apps.nexuslauncher")),
            // mCurrentFocus is the launcher, the later mFocusedApp names the app.
            (ANDROID4, Some("com.example")),
            // `dumpsys window windows` has no focus lines in this fragment.
            (KODI, None),
            (
                fixture!(
                    "dumpsys-window-grep-focus/appium-adb-issue797-galaxy-flip4-mCurrentFocus-12.txt"
                ),
                Some("jp.naver.line.android"),
            ),
            (
                fixture!(
                    "dumpsys-window-grep-focus/appium-adb-issue797-galaxy-flip4-mFocusedApp-12.txt"
                ),
                Some("jp.naver.line.android"),
            ),
            (
                fixture!("dumpsys-activity-activities/adbjsoncli-emulator-17-head.txt"),
                Some("com.google.android.apps.nexuslauncher"),
            ),
            (
                fixture!("dumpsys-activity-activities/adbjsoncli-emulator-17-resumed-section.txt"),
                Some("com.google.android.apps.nexuslauncher"),
            ),
            ("  mCurrentFocus=Window{abc u0 NotificationShade}\n", None),
            ("  mCurrentFocus=null\n", None),
        ];
        for (text, expected) in cases {
            assert_eq!(focused_app(text), Ok(expected.map(str::to_owned)));
        }
    }

    #[test]
    fn focused_component_prefers_the_activity_record() {
        let text = "  mCurrentFocus=Window{5e9b13b u0 jp.naver.line.android/jp.naver.line.android.activity.main.MainActivity}\n  mFocusedApp=ActivityRecord{a646676 u0 jp.naver.line.android/.activity.main.MainActivity t285}\n";
        assert_eq!(
            focused_component(text),
            Ok(Some((
                "jp.naver.line.android".into(),
                "jp.naver.line.android.activity.main.MainActivity".into()
            )))
        );
        let window_only =
            "  mCurrentFocus=Window{4879fe9 u0 com.a/com.a.Main}\n  mFocusedApp=null\n";
        assert_eq!(
            focused_component(window_only),
            Ok(Some(("com.a".into(), "com.a.Main".into())))
        );
        assert_eq!(focused_component("  mCurrentFocus=null\n"), Ok(None));
    }
}
