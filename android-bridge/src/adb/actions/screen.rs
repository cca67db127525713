//! The `screen` service over ADB: screenshots, the UI tree and the app in
//! front; and the UI tree snapshot that `ui_control`'s `tap {element}` uses.
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
//! - **`ui_tree`** asks the on-device UI server first (`Shell::ui_rpc`,
//!   `docs/screen-component.md`: fast, no "could not get idle state") and
//!   reads `uiautomator dump` when it gives nothing; the result's `via`
//!   says which answered.
//! - **Screenshots** are `screencap -p` read as raw bytes (exec-out), then
//!   decoded, scaled and encoded off the async runtime ([`Shell::offload`]).

use super::*;
use droidwarden_services::{
    Command, ForegroundActivity, ImageFormat, SCREENSHOT_MAX_SIDE, SCREENSHOT_QUALITY,
    ScreenCapture, ScreenObservation, ScreenReaderAction, UI_TREE_MAX_NODES, UiTree,
};

use base64::Engine as _;

use std::time::{Duration, Instant};

/// How long a UI tree may be used for `tap {element}`.
pub const SNAPSHOT_TTL: Duration = Duration::from_secs(120);

/// Where `uiautomator dump` is asked to write: a directory the shell user
/// may always write to, unlike `/sdcard` on some phones.
pub const DUMP_PATH: &str = "/data/local/tmp/droidwarden_window_dump.xml";

/// How many times `uiautomator dump` is run while the screen will not settle.
const DUMP_ATTEMPTS: usize = 3;

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

pub(super) fn snapshot(sh: &dyn Shell) -> std::sync::MutexGuard<'_, Option<UiSnapshot>> {
    sh.ui_snapshot().lock().unwrap_or_else(|e| e.into_inner())
}

/// Forgets the phone's UI tree before any change of another service, and
/// its last window reading before any command but the UI action it is
/// kept for.
pub(super) fn forget_tree(sh: &dyn Shell, command: &Command) {
    // The reading serves the very next command only, when that is a UI
    // action (whose guard takes it): anything in between, even a read,
    // leaves time for the screen to change.
    if !matches!(
        command,
        Command::UiControl(_) | Command::ScreenReader(ScreenReaderAction::ForegroundApp)
    ) {
        take_window_reading(sh);
    }
    // `ui_control` forgets the tree itself, after resolving its own target.
    if command.mutates() && !matches!(command, Command::UiControl(_)) {
        snapshot(sh).take();
    }
}

/// How long a `dumpsys window displays` read for the app in front stands
/// for the guard of the UI action right after it (the next command on the
/// phone, nothing in between). The hub reads the app in the device's turn
/// just before the action, so the reading is milliseconds old when the
/// guard takes it; anything older is read again.
pub const WINDOW_READING_TTL: Duration = Duration::from_secs(1);

/// One `dumpsys window displays` output and when it was read: the app in
/// front, the screen and the lock state all come from it, so the reading
/// the hub makes for the policy (`screen.foreground_app` within
/// [`crate::for_next_action`]) also serves the guard of the UI action that
/// comes right after it, and a UI action costs one reading, not two. A
/// caller's own `foreground_app` keeps nothing.
#[derive(Debug, Clone)]
pub struct WindowReading {
    at: Instant,
    output: String,
}

/// Keeps `output` as the phone's latest window reading.
fn keep_window_reading(sh: &dyn Shell, output: &str) {
    if let Some(slot) = sh.window_reading() {
        *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(WindowReading {
            at: Instant::now(),
            output: output.to_owned(),
        });
    }
}

/// Takes the phone's latest window reading: its output when it is younger
/// than [`WINDOW_READING_TTL`]. Taken, it serves one guard only.
fn take_window_reading(sh: &dyn Shell) -> Option<String> {
    let slot = sh.window_reading()?;
    let reading = slot.lock().unwrap_or_else(|e| e.into_inner()).take()?;
    (reading.at.elapsed() < WINDOW_READING_TTL).then_some(reading.output)
}

/// `screen.*`.
pub(super) async fn run(sh: &dyn Shell, action: &ScreenReaderAction) -> Result<Value, BridgeError> {
    match action {
        ScreenReaderAction::Screenshot {
            max_side,
            format,
            quality,
        } => screenshot(sh, *max_side, *format, *quality).await,
        ScreenReaderAction::UiTree {
            visible_only,
            max_nodes,
        } => answer(ui_tree(sh, visible_only.unwrap_or(true), *max_nodes).await?),
        ScreenReaderAction::ForegroundApp => {
            let argv = ["dumpsys", "window", "displays"];
            let out = ok(sh, &argv).await?;
            let found = parsed(sh.device_name(), &argv, parse::focused_component(&out))?;
            if crate::device::reading_for_next_action() {
                keep_window_reading(sh, &out);
            }
            let (package, activity) = found.ok_or_else(|| BridgeError::NotFound {
                message: "no app has the focus (the screen may be off or locked)".into(),
            })?;
            answer(foreground(package, activity))
        }
        ScreenReaderAction::Observe {
            max_side,
            format,
            quality,
            max_nodes,
            with_image,
        } => observe(sh, *max_side, *format, *quality, *max_nodes, *with_image).await,
    }
}

fn foreground(package: String, activity: String) -> ForegroundActivity {
    let component = format!("{package}/{activity}");
    ForegroundActivity {
        package,
        activity,
        component,
    }
}

/// What one `dumpsys window displays` says about the screen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ScreenLook {
    /// Whether the screen is on (`mAwake`, else `dumpsys power`).
    pub(super) screen_on: bool,
    /// Whether the lock screen shows; `None` when the dump does not say.
    pub(super) locked: Option<bool>,
    /// The focused app, `(package, activity)`.
    pub(super) foreground: Option<(String, String)>,
}

/// Reads the screen's state: one `dumpsys window displays` (Android 10+
/// prints the display policy's `mAwake` and keyguard fields beside the
/// focus), and `dumpsys power` only when it names no `mAwake` (older
/// releases).
pub(super) async fn screen_look(sh: &dyn Shell) -> Result<ScreenLook, BridgeError> {
    let argv = ["dumpsys", "window", "displays"];
    let out = ok(sh, &argv).await?;
    look_of(sh, &out).await
}

/// [`screen_look`] for a UI action's guard: the window reading the app in
/// front was just read from ([`WindowReading`]), when there is one, else a
/// new one. The reading is taken when this is called, not when the future
/// is first polled.
pub(super) fn screen_look_for_action(
    sh: &dyn Shell,
) -> impl Future<Output = Result<ScreenLook, BridgeError>> + '_ {
    let kept = take_window_reading(sh);
    async move {
        match kept {
            Some(out) => look_of(sh, &out).await,
            None => screen_look(sh).await,
        }
    }
}

/// The screen's state in `out`, a `dumpsys window displays` output.
async fn look_of(sh: &dyn Shell, out: &str) -> Result<ScreenLook, BridgeError> {
    let argv = ["dumpsys", "window", "displays"];
    let keyguard = parsed(sh.device_name(), &argv, parse::keyguard(out))?;
    let foreground = parsed(sh.device_name(), &argv, parse::focused_component(out))?;
    let screen_on = match keyguard.awake {
        Some(awake) => awake,
        None => {
            read(sh, &["dumpsys", "power"], parse::power)
                .await?
                .screen_on
        }
    };
    Ok(ScreenLook {
        screen_on,
        locked: keyguard.locked,
        foreground,
    })
}

/// `screen.screenshot`: `screencap -p` read as bytes, scaled and encoded
/// off the async runtime.
async fn screenshot(
    sh: &dyn Shell,
    max_side: Option<u32>,
    format: Option<ImageFormat>,
    quality: Option<u8>,
) -> Result<Value, BridgeError> {
    let argv = ["screencap", "-p"];
    let out = sh.run_binary(&argv).await?;
    let text_err = String::from_utf8_lossy(&out.stdout[..out.stdout.len().min(400)]).into_owned();
    if let Some(failure) = parse::classify_device_error(&text_err, &out.stderr, out.exit) {
        return Err(from_failure(sh.device_name(), failure, Some(out.exit)));
    }
    let png = parsed(sh.device_name(), &argv, parse::screencap_png(&out.stdout))?.into_owned();
    let max_side = max_side.unwrap_or(SCREENSHOT_MAX_SIDE);
    let format = format.unwrap_or(ImageFormat::Jpeg);
    let quality = quality.unwrap_or(SCREENSHOT_QUALITY);
    sh.offload(Box::new(move || {
        let shot = render_screenshot(&png, max_side, format, quality).map_err(|detail| {
            BridgeError::UnexpectedOutput {
                command: "screencap -p".into(),
                detail,
            }
        })?;
        answer(shot.capture())
    }))
    .await
}

/// `screen.ui_tree`: one dump (through the on-device UI server when it
/// answers, else `uiautomator dump`), numbered, and kept for `tap {element}`.
async fn ui_tree(
    sh: &dyn Shell,
    visible_only: bool,
    max_nodes: Option<u32>,
) -> Result<UiTree, BridgeError> {
    let (xml, via) = match server_dump(sh).await {
        Some(xml) => (xml, VIA_UI_SERVER),
        None => (ui_dump(sh).await?, VIA_UIAUTOMATOR_DUMP),
    };
    let max = max_nodes.unwrap_or(UI_TREE_MAX_NODES) as usize;
    let argv = ["uiautomator", "dump", DUMP_PATH];
    let mut tree = parsed(
        sh.device_name(),
        &argv,
        parse::ui_elements(&xml, visible_only, max),
    )?;
    tree.via = Some(via.to_owned());
    *snapshot(sh) = Some(UiSnapshot {
        bounds: tree.elements.iter().map(|e| e.bounds).collect(),
        screen: tree.screen_width.zip(tree.screen_height),
        at: Instant::now(),
    });
    Ok(tree)
}

/// `screen.observe`: the state, the screenshot and the tree. The three
/// reads are independent device commands, so they run at once (the
/// transport gives each its own exchange): the step costs the slowest of
/// them, not their sum. The tree of a screen that is off is left out (its
/// dump fails or lists nothing worth reading).
async fn observe(
    sh: &dyn Shell,
    max_side: Option<u32>,
    format: Option<ImageFormat>,
    quality: Option<u8>,
    max_nodes: Option<u32>,
    with_image: Option<bool>,
) -> Result<Value, BridgeError> {
    let image = async {
        if with_image == Some(false) {
            return Ok::<_, BridgeError>(None);
        }
        let value = screenshot(sh, max_side, format, quality).await?;
        serde_json::from_value::<ScreenCapture>(value)
            .map(Some)
            .map_err(|e| BridgeError::Internal(e.to_string()))
    };
    let (look, image, tree) = tokio::join!(screen_look(sh), image, ui_tree(sh, true, max_nodes));
    let look = look?;
    // A sleeping screen has nothing to list; what the dump said then
    // does not matter.
    let tree = if look.screen_on { Some(tree?) } else { None };
    answer(ScreenObservation {
        screen_on: look.screen_on,
        locked: look.locked,
        foreground: look.foreground.map(|(p, a)| foreground(p, a)),
        screenshot: image?,
        tree,
    })
}

/// `via` of a tree the on-device UI server read.
pub const VIA_UI_SERVER: &str = "ui_server";

/// `via` of a tree `uiautomator dump` read.
pub const VIA_UIAUTOMATOR_DUMP: &str = "uiautomator_dump";

/// How deep the on-device UI server walks the tree (the official client's
/// default).
const SERVER_DUMP_DEPTH: u32 = 50;

/// The hierarchy XML from the on-device UI server, or `None` when it gave
/// none (off, not started, died mid-call, an error or an empty dump): then
/// `uiautomator dump` reads the screen. Reading twice changes nothing, so
/// falling back is always safe here.
async fn server_dump(sh: &dyn Shell) -> Option<String> {
    match sh
        .ui_rpc(
            "dumpWindowHierarchy",
            serde_json::json!([false, SERVER_DUMP_DEPTH]),
        )
        .await
    {
        Ok(Value::String(xml)) if xml.contains("<node") => Some(xml),
        Ok(_) => {
            tracing::debug!(device = %sh.device_name(), "the on-device UI server dumped an empty tree; using uiautomator dump");
            None
        }
        Err(e) => {
            tracing::debug!(device = %sh.device_name(), error = %e, "using uiautomator dump");
            None
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

#[cfg(test)]
mod tests {
    use super::*;

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
