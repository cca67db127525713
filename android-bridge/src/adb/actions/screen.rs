//! The `screen` and `ui_control` services over a [`Shell`]: screenshots,
//! the UI tree, the app in front, touches, keys and text.
//!
//! The device commands are in `docs/adb-commands.md` ("Screen" and "Touch
//! and type"). Three decisions are worth knowing:
//!
//! - **`tap {element}`** resolves an index of the latest `ui_tree` read on
//!   the same phone ([`UiSnapshot`], kept by the [`Shell`]). Any other change
//!   made through the bridge (a tap, a swipe, a key, an app launched …)
//!   forgets it, as does time ([`SNAPSHOT_TTL`]): the screen may have
//!   changed, and an index into an old list would touch whatever is there
//!   now. `type_text` keeps it (typing moves no element).
//! - **`type_text`** never relies on `input text` for what it cannot type.
//!   Printable ASCII goes through `input text` in chunks that each end at a
//!   `%` (the tool turns `%s` into a space, and only within one argument),
//!   newlines and tabs as key events. Text with anything else (non-ASCII,
//!   other controls) goes whole through the ADB keyboard IME
//!   (`com.android.adbkeyboard/.AdbIME`, an IME that takes text as a base64
//!   broadcast): selected for the broadcast if another IME is active, and
//!   the previous one restored afterwards. Without that IME such text is
//!   refused before anything is typed, with an error saying what to install
//!   (the companion app types any text natively).
//! - **Screenshots** are `screencap -p` read as raw bytes (exec-out), then
//!   decoded, scaled and encoded off the async runtime ([`Shell::offload`]).

use super::*;
use base64::Engine as _;
use droidwarden_services::{
    CatalogueError, ForegroundActivity, ImageFormat, Key, KeyPressed, SCREENSHOT_MAX_SIDE,
    SCREENSHOT_QUALITY, ScreenCapture, ScreenReaderAction, ScrollDirection, Scrolled, Swiped,
    TextTyped, Touched, UI_TREE_MAX_NODES, UiControlAction,
};
use std::time::{Duration, Instant};

/// How long a UI tree may be used for `tap {element}`.
pub const SNAPSHOT_TTL: Duration = Duration::from_secs(120);

/// Where `uiautomator dump` is asked to write: a directory the shell user
/// may always write to, unlike `/sdcard` on some phones.
pub const DUMP_PATH: &str = "/data/local/tmp/droidwarden_window_dump.xml";

/// How many times `uiautomator dump` is run while the screen will not settle.
const DUMP_ATTEMPTS: usize = 3;

/// The IME `type_text` uses for text `input text` cannot type.
pub const ADB_IME: &str = "com.android.adbkeyboard/.AdbIME";

/// The broadcast action that IME types from (base64 of UTF-8).
pub const ADB_IME_B64_ACTION: &str = "ADB_INPUT_B64";

/// At most this many characters go into one `input text`.
const INPUT_TEXT_CHUNK: usize = 100;

/// The latest UI tree of one phone: what `tap {element}` resolves against.
#[derive(Debug, Clone)]
pub struct UiSnapshot {
    /// Each element's bounds `[l, t, r, b]`, by index.
    pub bounds: Vec<[i32; 4]>,
    /// The screen size the tree reported.
    pub screen: Option<(i32, i32)>,
    /// When it was read.
    pub at: Instant,
}

/// A screenshot, scaled and encoded.
#[derive(Debug, Clone, PartialEq)]
pub struct Screenshot {
    /// The encoded image.
    pub bytes: Vec<u8>,
    /// Its format.
    pub format: ImageFormat,
    /// Its size.
    pub width: u32,
    /// Its size.
    pub height: u32,
    /// The screen's size.
    pub original_width: u32,
    /// The screen's size.
    pub original_height: u32,
    /// `width / original_width`.
    pub scale: f64,
}

impl Screenshot {
    /// The `screen.screenshot` result: the image in base64 and its sizes.
    pub fn capture(&self) -> ScreenCapture {
        ScreenCapture {
            format: self.format,
            mime_type: self.format.mime().to_owned(),
            width: self.width,
            height: self.height,
            original_width: self.original_width,
            original_height: self.original_height,
            scale: self.scale,
            bytes: self.bytes.len() as u64,
            data_base64: base64::engine::general_purpose::STANDARD.encode(&self.bytes),
        }
    }
}

/// Decodes a PNG screen capture, scales it so its longest side is at most
/// `max_side` (never up), and encodes it as `format`. Pure CPU work: run it
/// where blocking is allowed.
///
/// # Errors
/// A message when the PNG cannot be decoded or the image encoded.
pub fn render_screenshot(
    png: &[u8],
    max_side: u32,
    format: ImageFormat,
    quality: u8,
) -> Result<Screenshot, String> {
    use image::ImageEncoder as _;
    let decoded = image::load_from_memory_with_format(png, image::ImageFormat::Png)
        .map_err(|e| format!("the screen capture is not a readable PNG: {e}"))?;
    let (ow, oh) = (decoded.width(), decoded.height());
    let longest = ow.max(oh).max(1);
    let scaled = if longest > max_side {
        let factor = f64::from(max_side) / f64::from(longest);
        let w = ((f64::from(ow) * factor).round() as u32).max(1);
        let h = ((f64::from(oh) * factor).round() as u32).max(1);
        decoded.resize_exact(w, h, image::imageops::FilterType::Triangle)
    } else {
        decoded
    };
    let (w, h) = (scaled.width(), scaled.height());
    let mut bytes = Vec::new();
    match format {
        ImageFormat::Jpeg => {
            let rgb = scaled.into_rgb8();
            image::codecs::jpeg::JpegEncoder::new_with_quality(&mut bytes, quality.clamp(1, 100))
                .write_image(rgb.as_raw(), w, h, image::ExtendedColorType::Rgb8)
                .map_err(|e| format!("JPEG encoding failed: {e}"))?;
        }
        ImageFormat::Png => {
            let rgba = scaled.into_rgba8();
            image::codecs::png::PngEncoder::new(&mut bytes)
                .write_image(rgba.as_raw(), w, h, image::ExtendedColorType::Rgba8)
                .map_err(|e| format!("PNG encoding failed: {e}"))?;
        }
    }
    Ok(Screenshot {
        bytes,
        format,
        width: w,
        height: h,
        original_width: ow,
        original_height: oh,
        scale: f64::from(w) / f64::from(ow.max(1)),
    })
}

fn snapshot(sh: &dyn Shell) -> std::sync::MutexGuard<'_, Option<UiSnapshot>> {
    sh.ui_snapshot().lock().unwrap_or_else(|e| e.into_inner())
}

/// Forgets the phone's UI tree before any change of another service.
pub(super) fn forget_tree(sh: &dyn Shell, command: &Command) {
    // `ui_control` forgets it itself, after resolving its own target.
    if command.mutates() && !matches!(command, Command::UiControl(_)) {
        snapshot(sh).take();
    }
}

/// `screen.*`.
pub(super) async fn screen_reader(
    sh: &dyn Shell,
    action: &ScreenReaderAction,
) -> Result<Value, BridgeError> {
    match action {
        ScreenReaderAction::Screenshot {
            max_side,
            format,
            quality,
        } => {
            let argv = ["screencap", "-p"];
            let out = sh.run_binary(&argv).await?;
            let text_err =
                String::from_utf8_lossy(&out.stdout[..out.stdout.len().min(400)]).into_owned();
            if let Some(failure) = parse::classify_device_error(&text_err, &out.stderr, out.exit) {
                return Err(from_failure(sh.device_name(), failure, Some(out.exit)));
            }
            let png =
                parsed(sh.device_name(), &argv, parse::screencap_png(&out.stdout))?.into_owned();
            let max_side = max_side.unwrap_or(SCREENSHOT_MAX_SIDE);
            let format = format.unwrap_or(ImageFormat::Jpeg);
            let quality = quality.unwrap_or(SCREENSHOT_QUALITY);
            sh.offload(Box::new(move || {
                let shot =
                    render_screenshot(&png, max_side, format, quality).map_err(|detail| {
                        BridgeError::UnexpectedOutput {
                            command: "screencap -p".into(),
                            detail,
                        }
                    })?;
                answer(shot.capture())
            }))
            .await
        }
        ScreenReaderAction::UiTree {
            visible_only,
            max_nodes,
        } => {
            let xml = ui_dump(sh).await?;
            let max = max_nodes.unwrap_or(UI_TREE_MAX_NODES) as usize;
            let argv = ["uiautomator", "dump", DUMP_PATH];
            let tree = parsed(
                sh.device_name(),
                &argv,
                parse::ui_elements(&xml, visible_only.unwrap_or(true), max),
            )?;
            *snapshot(sh) = Some(UiSnapshot {
                bounds: tree.elements.iter().map(|e| e.bounds).collect(),
                screen: tree.screen_width.zip(tree.screen_height),
                at: Instant::now(),
            });
            answer(tree)
        }
        ScreenReaderAction::ForegroundApp => {
            let argv = ["dumpsys", "window", "displays"];
            let found = read(sh, &argv, parse::focused_component).await?;
            let (package, activity) = found.ok_or_else(|| BridgeError::NotFound {
                message: "no app has the focus (the screen may be off or locked)".into(),
            })?;
            let component = format!("{package}/{activity}");
            answer(ForegroundActivity {
                package,
                activity,
                component,
            })
        }
    }
}

/// The XML of one `uiautomator dump`, tried again while the screen will not
/// settle. The dump and the read of its file are one device command
/// (`uiautomator dump FILE && cat FILE`: one round trip); the file the tool
/// names is read on its own only when it wrote somewhere else.
async fn ui_dump(sh: &dyn Shell) -> Result<String, BridgeError> {
    let argv = ["uiautomator", "dump", DUMP_PATH];
    let cat = ["cat", DUMP_PATH];
    let mut last = String::new();
    for _ in 0..DUMP_ATTEMPTS {
        let out = sh.run_then(&argv, &cat).await?;
        let outcome = parsed(
            sh.device_name(),
            &argv,
            parse::dump_then_cat_outcome(&out.stdout, &out.stderr, DUMP_PATH),
        );
        let outcome = match outcome {
            Ok(o) => o,
            Err(e) => {
                if let Some(failure) =
                    parse::classify_device_error(&out.stdout, &out.stderr, out.exit)
                {
                    return Err(from_failure(sh.device_name(), failure, Some(out.exit)));
                }
                return Err(e);
            }
        };
        match outcome {
            parse::DumpOutcome::Inline(xml) => return Ok(xml),
            parse::DumpOutcome::File(path) => {
                return ok(sh, &["cat", &path]).await;
            }
            parse::DumpOutcome::NotIdle(line) => last = line,
        }
    }
    Err(BridgeError::IncompleteOutput {
        command: argv.join(" "),
        detail: format!(
            "the screen did not settle after {DUMP_ATTEMPTS} tries ({last}); an animation or video keeps it busy: try again, or use screen.screenshot"
        ),
    })
}

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

/// `ui_control.*`.
pub(super) async fn ui_control(
    sh: &dyn Shell,
    action: &UiControlAction,
) -> Result<Value, BridgeError> {
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
        return Err(BridgeError::MissingOnPhone {
            device: sh.device_name().to_owned(),
            message: format!(
                "the text has characters `input text` cannot type (non-ASCII or control characters) and the ADB keyboard IME ({ADB_IME}) is not installed; install and enable the ADB Keyboard app, or use the companion app; nothing was typed"
            ),
        });
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

    fn png(w: u32, h: u32) -> Vec<u8> {
        let img = image::RgbaImage::from_fn(w, h, |x, y| {
            image::Rgba([(x % 256) as u8, (y % 256) as u8, 128, 255])
        });
        let mut out = std::io::Cursor::new(Vec::new());
        img.write_to(&mut out, image::ImageFormat::Png).unwrap();
        out.into_inner()
    }

    #[test]
    fn screenshots_scale_to_the_longest_side_and_report_the_factor() {
        let shot = render_screenshot(&png(1080, 2400), 1024, ImageFormat::Jpeg, 80).unwrap();
        assert_eq!((shot.original_width, shot.original_height), (1080, 2400));
        assert_eq!(shot.height, 1024);
        assert_eq!(shot.width, 461);
        assert!((shot.scale - 461.0 / 1080.0).abs() < 1e-9);
        let back = image::load_from_memory(&shot.bytes).unwrap();
        assert_eq!((back.width(), back.height()), (461, 1024));
        assert!(shot.bytes.starts_with(&[0xFF, 0xD8]));

        let small = render_screenshot(&png(300, 200), 1024, ImageFormat::Png, 80).unwrap();
        assert_eq!((small.width, small.height, small.scale), (300, 200, 1.0));
        assert!(small.bytes.starts_with(parse::PNG_SIGNATURE));
        assert!(render_screenshot(b"not a png", 1024, ImageFormat::Png, 80).is_err());
    }
}
