//! The `intents` service over ADB: `am start` of a view, send or explicit
//! activity intent. Dangerous schemes are refused here too, so the transport
//! used on its own refuses them.
//!
//! When several apps take an intent and none is the default, `am start -W`
//! reports `Status: ok` with Android's chooser on top
//! (`android/com.android.internal.app.ResolverActivity`, Android 14's
//! `com.android.intentresolver/.ChooserActivity`): nothing has been shared
//! or opened yet, the person still has to pick an app. Every result says
//! so (`chooser`), with the same check that keeps app launching off the
//! chooser ([`parse::is_chooser`]).

use super::*;
use droidwarden_services::{
    ActivityStarted, ErrorCode, IntentsAction, TextShared, UrlOpened, refuse_dangerous_scheme,
};

pub(super) async fn run(sh: &dyn Shell, action: &IntentsAction) -> Result<Value, BridgeError> {
    match action {
        IntentsAction::OpenUrl { url } => {
            refuse_dangerous_scheme(url).map_err(wire)?;
            // BROWSABLE: only activities that accept links from a browser.
            let started = view(sh, url, Some("android.intent.category.BROWSABLE")).await?;
            answer(UrlOpened {
                url: url.clone(),
                chooser: chooser(&started),
                status: started.status,
                activity: started.activity,
            })
        }
        IntentsAction::ShareText { text } => {
            let argv = [
                "am",
                "start",
                "-W",
                "-a",
                "android.intent.action.SEND",
                "-t",
                "text/plain",
                "--es",
                "android.intent.extra.TEXT",
                text.as_str(),
            ];
            let started = am_start(sh, &argv).await?;
            let chooser = chooser(&started);
            answer(TextShared {
                shared: !chooser,
                chooser,
                length: text.chars().count() as u64,
            })
        }
        IntentsAction::StartActivity {
            component,
            action,
            data,
            extras,
        } => {
            if component.is_none() && action.is_none() {
                return Err(refused(
                    ErrorCode::InvalidParams,
                    "start_activity needs a component or an action",
                ));
            }
            if let Some(data) = data {
                refuse_dangerous_scheme(data).map_err(wire)?;
            }
            let mut argv: Vec<&str> = vec!["am", "start", "-W"];
            if let Some(c) = component {
                argv.extend(["-n", c.as_str()]);
            }
            if let Some(a) = action {
                argv.extend(["-a", a.as_str()]);
            }
            if let Some(d) = data {
                argv.extend(["-d", d.as_str()]);
            }
            for extra in extras.iter().flatten() {
                argv.extend([extra.kind().am_option(), extra.key(), extra.value()]);
            }
            let started = am_start(sh, &argv).await?;
            let asked = component.as_deref().or(action.as_deref()).unwrap_or("");
            answer(ActivityStarted {
                component: asked.to_owned(),
                chooser: chooser(&started),
                status: started.status,
                activity: started.activity,
            })
        }
    }
}

/// Whether `am start -W` left Android's chooser on top: the intent waits
/// for the person to pick an app.
fn chooser(started: &parse::AmStart) -> bool {
    started.activity.as_deref().is_some_and(parse::is_chooser)
}

pub(super) async fn am_start(sh: &dyn Shell, argv: &[&str]) -> Result<parse::AmStart, BridgeError> {
    read(sh, argv, parse::am_start).await
}

/// Start the activity that views `url` (of `category`, when given) and
/// wait for it to be shown.
pub(super) async fn view(
    sh: &dyn Shell,
    url: &str,
    category: Option<&str>,
) -> Result<parse::AmStart, BridgeError> {
    let mut argv = vec!["am", "start", "-W", "-a", "android.intent.action.VIEW"];
    if let Some(category) = category {
        argv.extend(["-c", category]);
    }
    argv.extend(["-d", url]);
    read(sh, &argv, parse::am_start).await
}
