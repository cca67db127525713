//! The `ui_control` service over ADB: touches, swipes, keys and text. The
//! decisions behind `tap {element}` and `type_text` are in the doc of
//! `screen.rs`, which keeps the UI tree a `tap {element}` refers to.

use super::screen::{screen_look, screen_look_for_action, snapshot};
use super::*;
use base64::Engine as _;
use droidwarden_services::{
    CatalogueError, ClipboardSet, ClipboardText, ErrorCode, Key, KeyPressed, ScrollDirection,
    Scrolled, Swiped, TextTyped, Touched, UiControlAction,
};
use serde_json::json;

/// The IME `type_text` uses for text `input text` cannot type.
pub const ADB_IME: &str = "com.android.adbkeyboard/.AdbIME";

/// The broadcast action that IME types from (base64 of UTF-8).
pub const ADB_IME_B64_ACTION: &str = "ADB_INPUT_B64";

/// At most this many characters go into one `input text`.
const INPUT_TEXT_CHUNK: usize = 100;

fn invalid(action: &str, param: &str, reason: String) -> BridgeError {
    BridgeError::Catalogue(CatalogueError::InvalidParameter {
        service: "ui_control".into(),
        action: action.into(),
        param: param.into(),
        reason,
    })
}

/// The point a touch goes to: `(x, y)`, or the centre of `element`.
fn target(
    sh: &dyn Shell,
    action: &str,
    x: Option<u32>,
    y: Option<u32>,
    element: Option<u32>,
) -> Result<(u32, u32), BridgeError> {
    match (x, y, element) {
        (Some(x), Some(y), None) => Ok((x, y)),
        (None, None, Some(index)) => {
            let guard = snapshot(sh);
            let device = sh.device_name();
            let Some(tree) = guard.as_ref().filter(|t| t.at.elapsed() < SNAPSHOT_TTL) else {
                return Err(invalid(
                    action,
                    "element",
                    format!(
                        "element {index} cannot be resolved: no screen.ui_tree of {device} is current (none was read, the screen changed since, or it is older than {} s); call screen.ui_tree and use an index from it",
                        SNAPSHOT_TTL.as_secs()
                    ),
                ));
            };
            let b = tree.bounds.get(index as usize).ok_or_else(|| {
                invalid(
                    action,
                    "element",
                    format!(
                        "element {index} is not in the latest screen.ui_tree of {device}, which has {} elements (0 to {})",
                        tree.bounds.len(),
                        tree.bounds.len().saturating_sub(1)
                    ),
                )
            })?;
            let cx = ((b[0] + b[2]) / 2).max(0);
            let cy = ((b[1] + b[3]) / 2).max(0);
            Ok((cx as u32, cy as u32))
        }
        (_, _, Some(_)) => Err(invalid(
            action,
            "element",
            "give either element or x and y, not both".into(),
        )),
        _ => Err(invalid(
            action,
            if x.is_none() { "x" } else { "y" },
            "give x and y together, or element".into(),
        )),
    }
}

/// Refuses a UI action the screen cannot take: `screen_off` while it is
/// off (unless the transport wakes it first: [`Shell::wake_for_ui`]),
/// `locked` while the lock screen shows, so that a tap never lands on the
/// lock screen and "succeeds". `power` is always let through (it is how a
/// screen is turned on or off). A phone whose state cannot be read is let
/// through as before: the guard answers what the phone says, and never
/// blocks a phone that says nothing.
async fn ready_for_ui(sh: &dyn Shell, action: &UiControlAction) -> Result<(), BridgeError> {
    // Taken first: the reading before `power` must not outlive it.
    let look = screen_look_for_action(sh);
    if matches!(action, UiControlAction::Power) {
        return Ok(());
    }
    let device = sh.device_name();
    let mut look = match look.await {
        Ok(look) => look,
        Err(e) => {
            tracing::debug!(device, error = %e, "screen state unreadable; the UI action goes ahead");
            return Ok(());
        }
    };
    if !look.screen_on && sh.wake_for_ui() {
        keyevent(sh, "KEYCODE_WAKEUP").await?;
        look = screen_look(sh).await?;
    }
    if !look.screen_on {
        return Err(refused(
            ErrorCode::ScreenOff,
            format!(
                "{device}: the screen is off, so nothing was touched; turn it on with screen_control.wake (or set [adb] wake_for_ui = true) and try again"
            ),
        ));
    }
    if look.locked == Some(true) {
        return Err(refused(
            ErrorCode::Locked,
            format!(
                "{device}: the lock screen shows, so nothing was touched; a person must unlock the phone (droidwarden types no PIN), then try again"
            ),
        ));
    }
    Ok(())
}

/// `ui_control.*`.
pub(super) async fn run(sh: &dyn Shell, action: &UiControlAction) -> Result<Value, BridgeError> {
    ready_for_ui(sh, action).await?;
    match action {
        UiControlAction::Tap { x, y, element } => {
            let (x, y) = target(sh, "tap", *x, *y, *element)?;
            forget(sh);
            let (xs, ys) = (x.to_string(), y.to_string());
            ok(sh, &["input", "tap", &xs, &ys]).await?;
            answer(Touched {
                x,
                y,
                element: *element,
            })
        }
        UiControlAction::LongPress {
            x,
            y,
            element,
            duration_ms,
        } => {
            let (x, y) = target(sh, "long_press", *x, *y, *element)?;
            forget(sh);
            let (xs, ys) = (x.to_string(), y.to_string());
            let ms = duration_ms.unwrap_or(800).to_string();
            ok(sh, &["input", "swipe", &xs, &ys, &xs, &ys, &ms]).await?;
            answer(Touched {
                x,
                y,
                element: *element,
            })
        }
        UiControlAction::Swipe {
            from,
            to,
            duration_ms,
        } => {
            let ms = duration_ms.unwrap_or(300);
            swipe(sh, (from.x, from.y), (to.x, to.y), ms).await?;
            answer(Swiped {
                from: *from,
                to: *to,
                duration_ms: ms,
            })
        }
        UiControlAction::Scroll { direction } => {
            let known = snapshot(sh).as_ref().and_then(|t| t.screen);
            let (w, h) = match known {
                Some((w, h)) => (w.max(1) as u32, h.max(1) as u32),
                None => read(sh, &["wm", "size"], parse::wm_size).await?,
            };
            let (cx, cy) = (w / 2, h / 2);
            let (dx, dy) = (w / 4, h / 4);
            // The finger moves against the content: to see below, drag up.
            let (from, to) = match direction {
                ScrollDirection::Down => ((cx, cy + dy), (cx, cy - dy)),
                ScrollDirection::Up => ((cx, cy - dy), (cx, cy + dy)),
                ScrollDirection::Right => ((cx + dx, cy), (cx - dx, cy)),
                ScrollDirection::Left => ((cx - dx, cy), (cx + dx, cy)),
            };
            swipe(sh, from, to, 300).await?;
            answer(Scrolled {
                direction: direction.as_str().to_owned(),
            })
        }
        UiControlAction::Key { key } => {
            forget(sh);
            keyevent(sh, key.android_keycode()).await?;
            answer(KeyPressed {
                key: key.as_str().to_owned(),
            })
        }
        UiControlAction::Power => {
            forget(sh);
            keyevent(sh, "KEYCODE_POWER").await?;
            answer(KeyPressed {
                key: "power".to_owned(),
            })
        }
        UiControlAction::TypeText { text } => type_text(sh, text).await,
        UiControlAction::GetClipboard => {
            let text = sh
                .ui_rpc("getClipboard", json!([]))
                .await
                .map_err(|e| clipboard_error(sh, "get_clipboard", e))?;
            answer(ClipboardText {
                text: text.as_str().map(str::to_owned),
                via: Some(super::screen::VIA_UI_SERVER.to_owned()),
            })
        }
        UiControlAction::SetClipboard { text } => {
            set_clipboard(sh, text)
                .await
                .map_err(|e| clipboard_error(sh, "set_clipboard", e))?;
            answer(ClipboardSet {
                length: text.chars().count() as u64,
                via: Some(super::screen::VIA_UI_SERVER.to_owned()),
            })
        }
    }
}

/// Puts `text` on the clipboard and reads it back: a server that took the
/// call but not the text (as Android 10 and later may refuse a background
/// clipboard read) is not trusted with a paste.
async fn set_clipboard(sh: &dyn Shell, text: &str) -> Result<(), UiRpcError> {
    sh.ui_rpc("setClipboard", json!([null, text])).await?;
    let back = sh.ui_rpc("getClipboard", json!([])).await?;
    if back.as_str() != Some(text) {
        return Err(UiRpcError::Rpc {
            code: 0,
            message: "the clipboard did not keep the text (the phone may not let the server read it back)".into(),
        });
    }
    Ok(())
}

/// What a clipboard action answers when the on-device UI server gave no
/// result: `unsupported_action` with the reason when it is off or cannot
/// run, a device error otherwise.
fn clipboard_error(sh: &dyn Shell, action: &'static str, e: UiRpcError) -> BridgeError {
    match e {
        UiRpcError::Unavailable(why) => BridgeError::Unsupported {
            device: sh.device_name().to_owned(),
            service: "ui_control".into(),
            action,
            transport: "adb",
            reason: format!(
                "no shell command reads or sets the clipboard on stock Android; it needs the on-device UI server, and {why}"
            ),
        },
        other => BridgeError::Device {
            message: other.to_string(),
            exit: None,
        },
    }
}

fn forget(sh: &dyn Shell) {
    snapshot(sh).take();
}

async fn swipe(
    sh: &dyn Shell,
    from: (u32, u32),
    to: (u32, u32),
    ms: u32,
) -> Result<(), BridgeError> {
    forget(sh);
    let args = [from.0, from.1, to.0, to.1, ms].map(|n| n.to_string());
    let mut argv = vec!["input", "swipe"];
    argv.extend(args.iter().map(String::as_str));
    ok(sh, &argv).await.map(drop)
}

/// One step of typing without an IME.
#[derive(Debug, PartialEq, Eq)]
enum Piece<'a> {
    /// `input text` of this (printable ASCII, at most one `%`, at its end).
    Text(&'a str),
    /// A key event.
    Key(Key),
}

/// Splits `text` into what `input text` and key events can type, or `None`
/// when it has a character neither can (non-ASCII, controls but `\n`, `\t`).
fn plain_pieces<'t>(text: &'t str) -> Option<Vec<Piece<'t>>> {
    let mut pieces = Vec::new();
    let mut start = 0;
    let flush = |pieces: &mut Vec<Piece<'t>>, from: usize, to: usize| {
        if to > from {
            pieces.push(Piece::Text(&text[from..to]));
        }
    };
    for (i, c) in text.char_indices() {
        match c {
            ' '..='~' => {
                let len = i + 1 - start;
                if c == '%' || len >= INPUT_TEXT_CHUNK {
                    flush(&mut pieces, start, i + 1);
                    start = i + 1;
                }
            }
            '\n' | '\t' => {
                flush(&mut pieces, start, i);
                pieces.push(Piece::Key(if c == '\n' { Key::Enter } else { Key::Tab }));
                start = i + 1;
            }
            _ => return None,
        }
    }
    flush(&mut pieces, start, text.len());
    Some(pieces)
}

async fn type_text(sh: &dyn Shell, text: &str) -> Result<Value, BridgeError> {
    let typed = text.chars().count() as u64;
    if let Some(pieces) = plain_pieces(text) {
        for piece in pieces {
            match piece {
                Piece::Text(t) => ok(sh, &["input", "text", t]).await.map(drop)?,
                Piece::Key(k) => keyevent(sh, k.android_keycode()).await?,
            }
        }
        return answer(TextTyped {
            typed,
            method: "input_text".to_owned(),
        });
    }
    let imes = ok(sh, &["ime", "list", "-s"]).await?;
    if !imes.lines().any(|l| l.trim() == ADB_IME) {
        return paste(sh, text, typed).await;
    }
    let current = setting(sh, "secure", "default_input_method").await?;
    let switch = current.as_deref() != Some(ADB_IME);
    if switch {
        ok(sh, &["ime", "set", ADB_IME]).await?;
    }
    let b64 = base64::engine::general_purpose::STANDARD.encode(text.as_bytes());
    let sent = ok(
        sh,
        &[
            "am",
            "broadcast",
            "-a",
            ADB_IME_B64_ACTION,
            "--es",
            "msg",
            &b64,
        ],
    )
    .await;
    if switch && let Some(previous) = current.as_deref().filter(|p| !p.is_empty()) {
        // Restore the user's keyboard even when the broadcast failed.
        ok(sh, &["ime", "set", previous]).await?;
    }
    let out = sent?;
    if !out.contains("Broadcast completed") {
        return Err(BridgeError::UnexpectedOutput {
            command: format!("am broadcast -a {ADB_IME_B64_ACTION} --es msg …"),
            detail: out.chars().take(200).collect(),
        });
    }
    answer(TextTyped {
        typed,
        method: "ime_broadcast".to_owned(),
    })
}

/// Types `text` through the on-device UI server: the clipboard set (and
/// read back), pasted into the focused field, then given back what it held
/// before. Nothing is typed unless the clipboard holds exactly `text`; a
/// paste whose answer was lost is reported as such, never retried another
/// way (it may have typed).
async fn paste(sh: &dyn Shell, text: &str, typed: u64) -> Result<Value, BridgeError> {
    let nothing_typed = |why: String| BridgeError::MissingOnPhone {
        device: sh.device_name().to_owned(),
        message: format!(
            "the text has characters `input text` cannot type (non-ASCII or control characters), the ADB keyboard IME ({ADB_IME}) is not installed, and the on-device UI server cannot paste it ({why}); install and enable the ADB Keyboard app, or allow the on-device UI server ([adb] ui_server_jar, docs/screen-component.md), or use the companion app; nothing was typed"
        ),
    };
    let previous = match sh.ui_rpc("getClipboard", json!([])).await {
        Ok(v) => v.as_str().map(str::to_owned),
        Err(e) => return Err(nothing_typed(e.to_string())),
    };
    if let Err(e) = set_clipboard(sh, text).await {
        restore_clipboard(sh, previous.as_deref()).await;
        return Err(nothing_typed(e.to_string()));
    }
    let pasted = sh.ui_rpc("pasteClipboard", json!([])).await;
    restore_clipboard(sh, previous.as_deref()).await;
    match pasted {
        Ok(_) => answer(TextTyped {
            typed,
            method: "clipboard_paste".to_owned(),
        }),
        Err(UiRpcError::Unavailable(why)) => Err(nothing_typed(why)),
        Err(e) => Err(BridgeError::Device {
            message: format!(
                "{e}; the text may or may not have been pasted: read the screen before typing again"
            ),
            exit: None,
        }),
    }
}

/// Gives the clipboard back what it held before a paste (best effort: the
/// text typed stays there when this fails).
async fn restore_clipboard(sh: &dyn Shell, previous: Option<&str>) {
    if let Some(previous) = previous
        && let Err(e) = sh.ui_rpc("setClipboard", json!([null, previous])).await
    {
        tracing::debug!(device = %sh.device_name(), error = %e, "the clipboard was not restored");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_splits_after_every_percent_and_keys_for_newlines() {
        assert_eq!(
            plain_pieces("100% sure %s\nok\tgo"),
            Some(vec![
                Piece::Text("100%"),
                Piece::Text(" sure %"),
                Piece::Text("s"),
                Piece::Key(Key::Enter),
                Piece::Text("ok"),
                Piece::Key(Key::Tab),
                Piece::Text("go"),
            ])
        );
        assert_eq!(plain_pieces(""), Some(vec![]));
        assert_eq!(plain_pieces("Grüße"), None);
        assert_eq!(plain_pieces("a\u{7}"), None);
        let long = "a".repeat(250);
        let pieces = plain_pieces(&long).unwrap();
        assert_eq!(pieces.len(), 3);
    }

    /// A phone whose screen and lock state follow the keys it is sent, as
    /// `dumpsys window displays` reports them (the display policy's lines).
    #[derive(Default)]
    struct Phone {
        awake: std::sync::atomic::AtomicBool,
        locked: std::sync::atomic::AtomicBool,
        asked: Mutex<Vec<String>>,
        muted: Mutex<HashMap<u8, i64>>,
        snapshot: Mutex<Option<super::super::UiSnapshot>>,
        window: Mutex<Option<super::super::WindowReading>>,
    }

    impl Shell for Phone {
        fn device_name(&self) -> &str {
            "kitchen"
        }

        fn run<'a>(
            &'a self,
            argv: &'a [&'a str],
        ) -> crate::device::BoxFuture<'a, Result<super::super::ShellOutput, BridgeError>> {
            use std::sync::atomic::Ordering::SeqCst;
            let line = argv.join(" ");
            self.asked.lock().unwrap().push(line.clone());
            let stdout = match line.as_str() {
                "dumpsys window displays" => format!(
                    "  mCurrentFocus=Window{{1a2b u0 com.example.mail/com.example.mail.Inbox}}\n  DisplayPolicy\n    mAwake={} mScreenOnEarly=true mScreenOnFully=true\n    isKeyguardShowing={}\n",
                    self.awake.load(SeqCst),
                    self.locked.load(SeqCst)
                ),
                "input keyevent KEYCODE_WAKEUP" => {
                    self.awake.store(true, SeqCst);
                    String::new()
                }
                _ => String::new(),
            };
            Box::pin(std::future::ready(Ok(super::super::ShellOutput {
                stdout,
                ..Default::default()
            })))
        }

        fn muted_levels(&self) -> &Mutex<HashMap<u8, i64>> {
            &self.muted
        }

        fn run_binary<'a>(
            &'a self,
            _: &'a [&'a str],
        ) -> crate::device::BoxFuture<'a, Result<super::super::BinaryOutput, BridgeError>> {
            Box::pin(std::future::ready(Ok(Default::default())))
        }

        fn ui_snapshot(&self) -> &Mutex<Option<super::super::UiSnapshot>> {
            &self.snapshot
        }

        fn window_reading(&self) -> Option<&Mutex<Option<super::super::WindowReading>>> {
            Some(&self.window)
        }
    }

    /// The same phone, with `[adb] wake_for_ui` on.
    struct Waking(Phone);

    impl Shell for Waking {
        fn device_name(&self) -> &str {
            self.0.device_name()
        }
        fn run<'a>(
            &'a self,
            argv: &'a [&'a str],
        ) -> crate::device::BoxFuture<'a, Result<super::super::ShellOutput, BridgeError>> {
            self.0.run(argv)
        }
        fn muted_levels(&self) -> &Mutex<HashMap<u8, i64>> {
            self.0.muted_levels()
        }
        fn run_binary<'a>(
            &'a self,
            argv: &'a [&'a str],
        ) -> crate::device::BoxFuture<'a, Result<super::super::BinaryOutput, BridgeError>> {
            self.0.run_binary(argv)
        }
        fn ui_snapshot(&self) -> &Mutex<Option<super::super::UiSnapshot>> {
            self.0.ui_snapshot()
        }
        fn wake_for_ui(&self) -> bool {
            true
        }
    }

    fn code(result: Result<Value, BridgeError>) -> String {
        match result {
            Err(BridgeError::Refused(e)) => e.code.as_str().to_owned(),
            other => format!("{other:?}"),
        }
    }

    fn tapped(asked: &Mutex<Vec<String>>) -> bool {
        asked
            .lock()
            .unwrap()
            .iter()
            .any(|c| c.starts_with("input tap"))
    }

    #[tokio::test]
    async fn a_sleeping_or_locked_screen_is_not_touched() {
        use std::sync::atomic::Ordering::SeqCst;
        let tap = UiControlAction::Tap {
            x: Some(10),
            y: Some(20),
            element: None,
        };
        let phone = Phone::default();
        assert_eq!(code(run(&phone, &tap).await), "screen_off");
        phone.awake.store(true, SeqCst);
        phone.locked.store(true, SeqCst);
        assert_eq!(code(run(&phone, &tap).await), "locked");
        assert!(!tapped(&phone.asked));
        // `power` is how a screen is turned on: it is never held back.
        phone.awake.store(false, SeqCst);
        run(&phone, &UiControlAction::Power).await.unwrap();
        phone.awake.store(true, SeqCst);
        phone.locked.store(false, SeqCst);
        run(&phone, &tap).await.unwrap();
        assert!(tapped(&phone.asked));

        // With wake_for_ui: woken first, then touched; still `locked` when
        // the lock screen shows after the wake.
        let waking = Waking(Phone::default());
        run(&waking, &tap).await.unwrap();
        let asked = waking.0.asked.lock().unwrap().clone();
        let wake = asked
            .iter()
            .position(|c| c == "input keyevent KEYCODE_WAKEUP");
        let touch = asked.iter().position(|c| c.starts_with("input tap"));
        assert!(wake.is_some() && wake < touch, "{asked:?}");
        let waking = Waking(Phone::default());
        waking.0.locked.store(true, SeqCst);
        assert_eq!(code(run(&waking, &tap).await), "locked");
        assert!(!tapped(&waking.0.asked));
    }

    fn window_reads(asked: &Mutex<Vec<String>>) -> usize {
        asked
            .lock()
            .unwrap()
            .iter()
            .filter(|c| *c == "dumpsys window displays")
            .count()
    }

    /// The hub's reading of the app in front before a UI action.
    async fn gate_read(phone: &Phone) -> Value {
        use droidwarden_services::ScreenReaderAction;
        let read = super::super::screen::run(phone, &ScreenReaderAction::ForegroundApp);
        crate::for_next_action(read).await.unwrap()
    }

    /// The reading of the app in front that the hub makes before a UI
    /// action serves the action's lock guard: one `dumpsys window
    /// displays` per action, not two. It serves one guard only, and a
    /// change by another service drops it.
    #[tokio::test]
    async fn the_app_reading_before_a_ui_action_serves_its_guard() {
        use droidwarden_services::{BatteryAction, Command, ScreenReaderAction, WifiAction};
        use std::sync::atomic::Ordering::SeqCst;
        let tap = UiControlAction::Tap {
            x: Some(10),
            y: Some(20),
            element: None,
        };
        let phone = Phone::default();
        phone.awake.store(true, SeqCst);
        let app = gate_read(&phone).await;
        assert_eq!(app["package"], "com.example.mail");
        run(&phone, &tap).await.unwrap();
        assert_eq!(window_reads(&phone.asked), 1);
        assert!(tapped(&phone.asked));
        // Taken by that guard: the next action reads again.
        run(&phone, &tap).await.unwrap();
        assert_eq!(window_reads(&phone.asked), 2);
        // A change of another service in between drops the reading: the
        // phone may show something else now (here, the lock screen).
        gate_read(&phone).await;
        let _ = super::super::execute(&phone, &Command::Wifi(WifiAction::Disable)).await;
        phone.locked.store(true, SeqCst);
        assert_eq!(code(run(&phone, &tap).await), "locked");
        assert_eq!(window_reads(&phone.asked), 4);
        // So does any other command in between, even a read: it serves the
        // very next command only.
        phone.locked.store(false, SeqCst);
        gate_read(&phone).await;
        let _ = super::super::execute(&phone, &Command::Battery(BatteryAction::Status)).await;
        phone.locked.store(true, SeqCst);
        assert_eq!(code(run(&phone, &tap).await), "locked");
        assert_eq!(window_reads(&phone.asked), 6);
        // A caller's own read of the app in front keeps nothing.
        phone.locked.store(false, SeqCst);
        super::super::screen::run(&phone, &ScreenReaderAction::ForegroundApp)
            .await
            .unwrap();
        phone.locked.store(true, SeqCst);
        assert_eq!(code(run(&phone, &tap).await), "locked");
        assert_eq!(window_reads(&phone.asked), 8);
    }
}
