//! The emulated phone's screen: what it shows, drawn as a real PNG for
//! `screencap -p` and described in uiautomator's XML for `uiautomator
//! dump`, and how touches, keys and text change it.
//!
//! One function, [`layout`], says what is on screen for the current state;
//! the picture, the XML and the hit testing of `input tap` all read it, so
//! they cannot disagree. Pages: the launcher (a search field and app
//! icons), Settings (Wi-Fi and Bluetooth rows whose switches drive the same
//! state `dumpsys wifi` and `svc wifi` use), any other app (its title), and
//! the notification shade over them (quick tiles and notifications).
//!
//! Text is drawn with the public-domain 8×8 bitmap font of the `font8x8`
//! crate (Latin, Latin-1, Greek, Hiragana and box drawing), three times
//! enlarged; characters it lacks are drawn as an empty box, as a phone
//! without the font would. The XML always carries the exact text.

use std::collections::BTreeMap;

use base64::Engine as _;
use font8x8::UnicodeFonts as _;
use image::{ImageEncoder as _, Rgb, RgbImage};

use super::services::{set_bluetooth, set_wifi};
use super::{fail, ok_text};
use crate::shell::{CommandResult, Output};
use crate::state::PhoneState;

/// The IME that takes text as a broadcast.
pub(crate) const ADB_IME: &str = "com.android.adbkeyboard/.AdbIME";
const LATIN_IME: &str =
    "com.google.android.inputmethod.latin/com.android.inputmethod.latin.LatinIME";
const LAUNCHER: &str = "com.android.launcher3";
const SYSTEMUI: &str = "com.android.systemui";
const SETTINGS: &str = "com.android.settings";

/// The launcher's apps: label and component.
const APPS: [(&str, &str); 5] = [
    ("Settings", "com.android.settings/.Settings"),
    (
        "Chrome",
        "com.android.chrome/com.google.android.apps.chrome.Main",
    ),
    (
        "Camera",
        "com.android.camera2/com.android.camera.CameraLauncher",
    ),
    (
        "Contacts",
        "com.android.contacts/.activities.PeopleActivity",
    ),
    ("Clock", "com.android.deskclock/.DeskClock"),
];

/// Key names `input keyevent` takes beyond the ones the rest of the phone
/// reacts to.
pub(crate) const MORE_KEYCODES: [(&str, u32); 9] = [
    ("NOTIFICATION", 83),
    ("SEARCH", 84),
    ("PAGE_UP", 92),
    ("PAGE_DOWN", 93),
    ("ESCAPE", 111),
    ("FORWARD_DEL", 112),
    ("MOVE_HOME", 122),
    ("MOVE_END", 123),
    ("SETTINGS", 176),
];

/// What a tap on a widget does.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Tap {
    Open(&'static str),
    Wifi,
    Bluetooth,
    FocusText,
    Key(u32),
    CloseShade,
}

/// One element on screen.
#[derive(Debug, Clone, Default)]
pub(crate) struct Widget {
    pub(crate) depth: usize,
    pub(crate) class: &'static str,
    pub(crate) text: String,
    pub(crate) desc: String,
    pub(crate) id: String,
    pub(crate) package: &'static str,
    pub(crate) bounds: [i32; 4],
    pub(crate) clickable: bool,
    pub(crate) checkable: bool,
    pub(crate) checked: bool,
    pub(crate) focusable: bool,
    pub(crate) focused: bool,
    on_tap: Option<Tap>,
}

impl Widget {
    fn new(depth: usize, class: &'static str, package: &'static str, bounds: [i32; 4]) -> Self {
        Self {
            depth,
            class,
            package,
            bounds,
            ..Self::default()
        }
    }

    fn text(mut self, text: impl Into<String>) -> Self {
        self.text = text.into();
        self
    }

    fn desc(mut self, desc: impl Into<String>) -> Self {
        self.desc = desc.into();
        self
    }

    fn id(mut self, id: impl Into<String>) -> Self {
        self.id = id.into();
        self
    }

    fn tap(mut self, tap: Tap) -> Self {
        self.clickable = true;
        self.focusable = true;
        self.on_tap = Some(tap);
        self
    }

    fn contains(&self, x: i32, y: i32) -> bool {
        let [l, t, r, b] = self.bounds;
        x >= l && x < r && y >= t && y < b
    }
}

/// The screen's size in its current rotation.
fn size(st: &PhoneState) -> (i32, i32) {
    let d = &st.display;
    let (w, h) = (d.width as i32, d.height as i32);
    if d.rotation % 2 == 1 { (h, w) } else { (w, h) }
}

fn app_label(package: &str) -> String {
    APPS.iter()
        .find(|(_, c)| c.split('/').next() == Some(package))
        .map_or_else(|| package.to_owned(), |(l, _)| (*l).to_owned())
}

/// Everything on screen, in drawing (and document) order.
pub(crate) fn layout(st: &PhoneState) -> Vec<Widget> {
    let (w, h) = size(st);
    let fg = st.foreground_package().to_owned();
    let mut out = Vec::new();
    let package: &'static str = if st.ui.shade_open {
        SYSTEMUI
    } else if fg == SETTINGS {
        SETTINGS
    } else if fg == LAUNCHER {
        LAUNCHER
    } else {
        "android"
    };
    out.push(Widget::new(
        0,
        "android.widget.FrameLayout",
        package,
        [0, 0, w, h],
    ));
    out.push(
        Widget::new(1, "android.widget.TextView", SYSTEMUI, [24, 10, 300, 80])
            .text("12:00")
            .id("com.android.systemui:id/clock"),
    );
    if st.ui.shade_open {
        shade(st, w, h, &mut out);
    } else if fg == LAUNCHER {
        home(st, w, &mut out);
    } else if fg == SETTINGS {
        settings(st, w, &mut out);
    } else {
        out.push(
            Widget::new(
                1,
                "android.widget.TextView",
                "android",
                [48, 140, w - 48, 260],
            )
            .text(app_label(&fg))
            .id("android:id/title"),
        );
    }
    let nav = h - 130;
    for (i, (desc, key)) in [("Back", 4), ("Home", 3), ("Overview", 187)]
        .into_iter()
        .enumerate()
    {
        let left = w / 3 * i as i32;
        out.push(
            Widget::new(
                1,
                "android.widget.ImageView",
                SYSTEMUI,
                [left, nav, left + w / 3, h],
            )
            .desc(desc)
            .id(format!("com.android.systemui:id/{}", desc.to_lowercase()))
            .tap(Tap::Key(key)),
        );
    }
    out
}

fn home(st: &PhoneState, w: i32, out: &mut Vec<Widget>) {
    let mut field = Widget::new(
        1,
        "android.widget.EditText",
        LAUNCHER,
        [60, 160, w - 60, 300],
    )
    .text(st.ui.text.clone())
    .id("com.android.launcher3:id/search_box")
    .tap(Tap::FocusText);
    field.focused = st.ui.text_focused;
    out.push(field);
    let cell = w / 4;
    for (i, (label, component)) in APPS.iter().enumerate() {
        let (col, row) = (i as i32 % 4, i as i32 / 4);
        let (l, t) = (col * cell, 420 + row * 320);
        out.push(
            Widget::new(
                1,
                "android.widget.TextView",
                LAUNCHER,
                [l + 10, t, l + cell - 10, t + 280],
            )
            .text(*label)
            .desc(*label)
            .id("com.android.launcher3:id/icon")
            .tap(Tap::Open(component)),
        );
    }
}

fn settings(st: &PhoneState, w: i32, out: &mut Vec<Widget>) {
    out.push(
        Widget::new(
            1,
            "android.widget.TextView",
            SETTINGS,
            [48, 120, w - 48, 260],
        )
        .text("Settings")
        .id("com.android.settings:id/homepage_title"),
    );
    let wifi_summary = match (st.wifi.enabled, st.wifi.connected) {
        (false, _) => "Off".to_owned(),
        (true, true) => format!("Connected to {}", st.wifi.ssid),
        (true, false) => "Not connected".to_owned(),
    };
    let bt_summary = if st.bluetooth.enabled { "On" } else { "Off" };
    let rows = [
        ("Wi-Fi", wifi_summary, st.wifi.enabled, Tap::Wifi),
        (
            "Bluetooth",
            bt_summary.to_owned(),
            st.bluetooth.enabled,
            Tap::Bluetooth,
        ),
    ];
    for (i, (title, summary, on, tap)) in rows.into_iter().enumerate() {
        let top = 300 + i as i32 * 200;
        out.push(
            Widget::new(
                1,
                "android.widget.LinearLayout",
                SETTINGS,
                [0, top, w, top + 190],
            )
            .tap(tap),
        );
        out.push(
            Widget::new(
                2,
                "android.widget.TextView",
                SETTINGS,
                [48, top + 30, w - 260, top + 100],
            )
            .text(title)
            .id("android:id/title"),
        );
        out.push(
            Widget::new(
                2,
                "android.widget.TextView",
                SETTINGS,
                [48, top + 105, w - 260, top + 165],
            )
            .text(summary)
            .id("android:id/summary"),
        );
        let mut switch = Widget::new(
            2,
            "android.widget.Switch",
            SETTINGS,
            [w - 220, top + 45, w - 48, top + 145],
        )
        .id("android:id/switch_widget");
        switch.checkable = true;
        switch.checked = on;
        out.push(switch);
    }
}

fn shade(st: &PhoneState, w: i32, h: i32, out: &mut Vec<Widget>) {
    out.push(
        Widget::new(1, "android.widget.FrameLayout", SYSTEMUI, [0, 90, w, h / 2])
            .id("com.android.systemui:id/notification_panel"),
    );
    let tiles = [
        ("Wi-Fi", st.wifi.enabled, Tap::Wifi),
        ("Bluetooth", st.bluetooth.enabled, Tap::Bluetooth),
    ];
    for (i, (label, on, tap)) in tiles.into_iter().enumerate() {
        let l = 40 + i as i32 * (w / 2);
        let mut tile = Widget::new(
            2,
            "android.widget.Switch",
            SYSTEMUI,
            [l, 120, l + w / 2 - 80, 280],
        )
        .text(label)
        .desc(label)
        .tap(tap);
        tile.checkable = true;
        tile.checked = on;
        out.push(tile);
    }
    // The notifications `dumpsys notification` lists, newest first.
    for (i, n) in st.content.notifications.iter().rev().enumerate() {
        let app = app_label(&n.package);
        let title = n.title.clone().unwrap_or_default();
        let text = n.text.clone().unwrap_or_default();
        let top = 320 + i as i32 * 200;
        if top + 190 > h / 2 {
            break;
        }
        out.push(
            Widget::new(
                2,
                "android.widget.FrameLayout",
                SYSTEMUI,
                [40, top, w - 40, top + 190],
            )
            .id("com.android.systemui:id/expandableNotificationRow")
            .tap(Tap::CloseShade),
        );
        // The app, the title and the text, one line each.
        let lines = [
            (app, "android:id/app_name_text", 15, 60),
            (title, "android:id/title", 65, 120),
            (text, "android:id/text", 125, 180),
        ];
        for (line, id, from, to) in lines {
            let bounds = [70, top + from, w - 70, top + to];
            out.push(
                Widget::new(3, "android.widget.TextView", SYSTEMUI, bounds)
                    .text(line)
                    .id(id),
            );
        }
    }
}

/// The XML `uiautomator dump` writes for the current screen.
pub(crate) fn dump_xml(st: &PhoneState) -> String {
    let widgets = layout(st);
    let rotation = st.display.rotation.min(3);
    let mut s = format!(
        "<?xml version='1.0' encoding='UTF-8' standalone='yes' ?><hierarchy rotation=\"{rotation}\">"
    );
    // Sibling counters per depth, for each node's `index`.
    let mut counters: Vec<usize> = vec![0];
    let mut open = 0usize;
    for wd in &widgets {
        while open > wd.depth {
            s.push_str("</node>");
            open -= 1;
        }
        counters.truncate(wd.depth + 1);
        counters.resize(wd.depth + 1, 0);
        let index = counters[wd.depth];
        counters[wd.depth] += 1;
        let [l, t, r, b] = wd.bounds;
        s.push_str(&format!(
            "<node index=\"{index}\" text=\"{}\" resource-id=\"{}\" class=\"{}\" package=\"{}\" content-desc=\"{}\" checkable=\"{}\" checked=\"{}\" clickable=\"{}\" enabled=\"true\" focusable=\"{}\" focused=\"{}\" scrollable=\"false\" long-clickable=\"false\" password=\"false\" selected=\"false\" bounds=\"[{l},{t}][{r},{b}]\">",
            escape(&wd.text),
            escape(&wd.id),
            wd.class,
            wd.package,
            escape(&wd.desc),
            wd.checkable,
            wd.checked,
            wd.clickable,
            wd.focusable,
            wd.focused,
        ));
        open = wd.depth + 1;
    }
    for _ in 0..open {
        s.push_str("</node>");
    }
    s.push_str("</hierarchy>");
    s
}

/// XML attribute escaping, as Android's serializer does it.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            c if (c as u32) < 0x20 && c != '\t' => {}
            c => out.push(c),
        }
    }
    out
}

const GLYPH_SCALE: i32 = 3;

/// Draws the current screen.
pub(crate) fn render(st: &PhoneState) -> RgbImage {
    let (w, h) = size(st);
    let (w, h) = (w.max(1) as u32, h.max(1) as u32);
    let wallpaper = if st.ui.shade_open || st.foreground_package() == LAUNCHER {
        Rgb([32, 56, 96])
    } else {
        Rgb([250, 250, 250])
    };
    let mut img = RgbImage::from_pixel(w, h, wallpaper);
    if !st.display.screen_on {
        return RgbImage::from_pixel(w, h, Rgb([0, 0, 0]));
    }
    if st.ui.locked {
        // The lock screen: a plain dark face the app never shows through.
        return RgbImage::from_pixel(w, h, Rgb([12, 20, 40]));
    }
    let dark_text = !(st.ui.shade_open || st.foreground_package() == LAUNCHER);
    let ink = if dark_text {
        Rgb([20, 20, 20])
    } else {
        Rgb([255, 255, 255])
    };
    fill(&mut img, [0, 0, w as i32, 90], Rgb([10, 10, 10]));
    fill(
        &mut img,
        [0, h as i32 - 130, w as i32, h as i32],
        Rgb([10, 10, 10]),
    );
    for wd in layout(st) {
        let [l, t, r, b] = wd.bounds;
        match wd.class {
            "android.widget.EditText" => {
                fill(&mut img, wd.bounds, Rgb([240, 240, 240]));
                let border = if wd.focused {
                    Rgb([26, 115, 232])
                } else {
                    Rgb([160, 160, 160])
                };
                outline(&mut img, wd.bounds, border);
                let (text, colour) = if wd.text.is_empty() {
                    ("Search", Rgb([140, 140, 140]))
                } else {
                    (wd.text.as_str(), Rgb([20, 20, 20]))
                };
                draw_text(&mut img, l + 24, (t + b) / 2 - 12, r - 24, text, colour);
            }
            "android.widget.Switch" => {
                let on = wd.checked;
                let track = if on {
                    Rgb([26, 115, 232])
                } else {
                    Rgb([170, 170, 170])
                };
                if wd.text.is_empty() {
                    fill(&mut img, wd.bounds, track);
                    let knob = if on {
                        [r - (b - t), t, r, b]
                    } else {
                        [l, t, l + (b - t), b]
                    };
                    fill(&mut img, inset(knob, 8), Rgb([255, 255, 255]));
                } else {
                    fill(&mut img, wd.bounds, track);
                    draw_text(
                        &mut img,
                        l + 24,
                        (t + b) / 2 - 12,
                        r - 24,
                        &wd.text,
                        Rgb([255, 255, 255]),
                    );
                }
            }
            "android.widget.ImageView" => {
                let (cx, cy) = ((l + r) / 2, (t + b) / 2);
                outline(
                    &mut img,
                    [cx - 30, cy - 30, cx + 30, cy + 30],
                    Rgb([230, 230, 230]),
                );
            }
            "android.widget.TextView" if wd.id == "com.android.launcher3:id/icon" => {
                let (cx, top) = ((l + r) / 2, t + 20);
                let hue = wd
                    .text
                    .bytes()
                    .fold(0u32, |a, c| a.wrapping_mul(31).wrapping_add(u32::from(c)));
                let colour = Rgb([
                    (hue % 200) as u8 + 40,
                    (hue / 7 % 200) as u8 + 40,
                    (hue / 13 % 200) as u8 + 40,
                ]);
                fill(&mut img, [cx - 80, top, cx + 80, top + 160], colour);
                let width = wd.text.chars().count() as i32 * 8 * GLYPH_SCALE;
                draw_text(
                    &mut img,
                    cx - width / 2,
                    top + 190,
                    r,
                    &wd.text,
                    Rgb([255, 255, 255]),
                );
            }
            "android.widget.TextView" => {
                let colour = if wd.package == SYSTEMUI && wd.id.ends_with(":id/clock") {
                    Rgb([255, 255, 255])
                } else {
                    ink
                };
                draw_text(&mut img, l, t + 8, r, &wd.text, colour);
            }
            "android.widget.FrameLayout" if wd.depth > 0 => {
                fill(&mut img, wd.bounds, Rgb([60, 64, 72]));
            }
            "android.widget.LinearLayout" => {
                fill(&mut img, [l, b - 2, r, b], Rgb([220, 220, 220]));
            }
            _ => {}
        }
    }
    img
}

fn inset(b: [i32; 4], by: i32) -> [i32; 4] {
    [b[0] + by, b[1] + by, b[2] - by, b[3] - by]
}

fn fill(img: &mut RgbImage, b: [i32; 4], colour: Rgb<u8>) {
    let (w, h) = (img.width() as i32, img.height() as i32);
    for y in b[1].max(0)..b[3].min(h) {
        for x in b[0].max(0)..b[2].min(w) {
            img.put_pixel(x as u32, y as u32, colour);
        }
    }
}

fn outline(img: &mut RgbImage, b: [i32; 4], colour: Rgb<u8>) {
    for (l, t, r, bt) in [
        (b[0], b[1], b[2], b[1] + 3),
        (b[0], b[3] - 3, b[2], b[3]),
        (b[0], b[1], b[0] + 3, b[3]),
        (b[2] - 3, b[1], b[2], b[3]),
    ] {
        fill(img, [l, t, r, bt], colour);
    }
}

fn glyph(c: char) -> Option<[u8; 8]> {
    font8x8::BASIC_FONTS
        .get(c)
        .or_else(|| font8x8::LATIN_FONTS.get(c))
        .or_else(|| font8x8::GREEK_FONTS.get(c))
        .or_else(|| font8x8::HIRAGANA_FONTS.get(c))
        .or_else(|| font8x8::BOX_FONTS.get(c))
        .or_else(|| font8x8::MISC_FONTS.get(c))
}

/// Draws `text` from (`x`, `y`), clipped at `right`.
fn draw_text(img: &mut RgbImage, x: i32, y: i32, right: i32, text: &str, colour: Rgb<u8>) {
    let step = 8 * GLYPH_SCALE;
    for (i, c) in text.chars().enumerate() {
        let gx = x + i as i32 * step;
        if gx + step > right {
            break;
        }
        match glyph(c) {
            Some(rows) => {
                for (row, bits) in rows.iter().enumerate() {
                    for col in 0..8 {
                        if bits & (1 << col) != 0 {
                            let px = gx + col * GLYPH_SCALE;
                            let py = y + row as i32 * GLYPH_SCALE;
                            fill(img, [px, py, px + GLYPH_SCALE, py + GLYPH_SCALE], colour);
                        }
                    }
                }
            }
            None if c == ' ' => {}
            None => outline(img, [gx + 2, y, gx + step - 2, y + step], colour),
        }
    }
}

/// `screencap [-p]`: the current screen as PNG (`-p`) on standard output.
pub(crate) fn screencap(st: &PhoneState, args: &[String]) -> CommandResult {
    if !args.iter().any(|a| a == "-p") || args.iter().any(|a| !a.starts_with('-')) {
        return fail(
            "",
            "usage: screencap [-hp] [-d display-id] [FILENAME]\n   -p: save the file as a png.\n(this emulated phone writes PNG to standard output only)\n",
            1,
        );
    }
    let img = render(st);
    let mut png = Vec::new();
    let encoder = image::codecs::png::PngEncoder::new_with_quality(
        &mut png,
        image::codecs::png::CompressionType::Fast,
        image::codecs::png::FilterType::Sub,
    );
    if let Err(e) = encoder.write_image(
        img.as_raw(),
        img.width(),
        img.height(),
        image::ExtendedColorType::Rgb8,
    ) {
        return fail("", &format!("screencap: {e}\n"), 1);
    }
    let mut out = Output::default();
    out.out(png);
    CommandResult::new(out, 0)
}

/// `uiautomator dump [--compressed] [FILE]`.
pub(crate) fn uiautomator(st: &mut PhoneState, args: &[String]) -> CommandResult {
    if args.first().map(String::as_str) != Some("dump") {
        return fail(
            "",
            "Usage: uiautomator <subcommand> [options]\n\nAvailable subcommands:\n\nhelp: displays help message\n\ndump: creates an XML dump of current UI hierarchy\n",
            1,
        );
    }
    if st.ui.dump_not_idle > 0 {
        st.ui.dump_not_idle -= 1;
        return fail("", "ERROR: could not get idle state.\n", 1);
    }
    let asked = args[1..].iter().find(|a| !a.starts_with("--"));
    // Android 4.3 and older wrote to the legacy location whatever was asked.
    let path = if st.props.sdk <= 18 {
        "/storage/emulated/legacy/window_dump.xml".to_owned()
    } else {
        asked
            .cloned()
            .unwrap_or_else(|| "/sdcard/window_dump.xml".to_owned())
    };
    let xml = dump_xml(st);
    if path == "/dev/tty" {
        return ok_text(format!("{xml}UI hierchary dumped to: /dev/tty\n"));
    }
    st.content.files.insert(path.clone(), xml.into_bytes());
    ok_text(format!("UI hierchary dumped to: {path}\n"))
}

/// A file on the phone's storage (`uiautomator dump` writes there too).
pub(crate) fn read_file(st: &PhoneState, path: &str) -> Option<Vec<u8>> {
    st.content.files.get(path).cloned()
}

fn current_ime(st: &PhoneState) -> String {
    st.settings
        .secure
        .get("default_input_method")
        .cloned()
        .unwrap_or_else(|| LATIN_IME.to_owned())
}

fn imes(st: &PhoneState) -> Vec<&'static str> {
    let mut list = vec![LATIN_IME];
    if st.ui.adb_ime_installed {
        list.push(ADB_IME);
    }
    list
}

/// `ime list -s`, `ime set ID`.
pub(crate) fn ime(st: &mut PhoneState, args: &[String]) -> CommandResult {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.as_slice() {
        ["list", flags @ ..] if flags.contains(&"-s") => ok_text(
            imes(st)
                .iter()
                .map(|i| format!("{i}\n"))
                .collect::<String>(),
        ),
        ["set", id] | ["set", "--user", _, id] => {
            if imes(st).contains(id) {
                st.settings
                    .secure
                    .insert("default_input_method".into(), (*id).to_owned());
                ok_text(format!("Input method {id} selected for user #0\n"))
            } else {
                fail(
                    &format!("Unknown input method {id} cannot be selected for user #0\n"),
                    "",
                    255,
                )
            }
        }
        _ => fail(
            "",
            "ime <command>:\n  list [-a] [-s]\n  enable [--user <USER_ID>] <ID>\n  set [--user <USER_ID>] <ID>\n",
            255,
        ),
    }
}

/// `am broadcast -a ACTION [--es KEY VALUE]…`: the ADB keyboard's text
/// broadcasts type into the focused field when that IME is the active one.
pub(crate) fn broadcast(st: &mut PhoneState, args: &[String]) -> CommandResult {
    let mut action = None;
    let mut extras = BTreeMap::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-a" => action = it.next().cloned(),
            "--es" => {
                if let (Some(k), Some(v)) = (it.next(), it.next()) {
                    extras.insert(k.clone(), v.clone());
                }
            }
            "--user" | "-p" | "-n" => {
                it.next();
            }
            _ => {}
        }
    }
    let action = action.unwrap_or_default();
    let active = current_ime(st) == ADB_IME && st.ui.adb_ime_installed;
    if active && st.ui.text_focused && st.ui.shade_open.eq(&false) {
        let text = match action.as_str() {
            "ADB_INPUT_B64" => extras.get("msg").and_then(|m| {
                base64::engine::general_purpose::STANDARD
                    .decode(m)
                    .ok()
                    .and_then(|b| String::from_utf8(b).ok())
            }),
            "ADB_INPUT_TEXT" => extras.get("msg").cloned(),
            _ => None,
        };
        if let Some(text) = text {
            st.ui.text.push_str(&text);
        }
    }
    let has_extras = if extras.is_empty() {
        ""
    } else {
        " (has extras)"
    };
    ok_text(format!(
        "Broadcasting: Intent {{ act={action} flg=0x400000{has_extras} }}\nBroadcast completed: result=0\n"
    ))
}

fn perform(st: &mut PhoneState, tap: Tap) {
    match tap {
        Tap::Open(component) => {
            st.ui.text_focused = false;
            st.foreground = component.to_owned();
            if let Some(p) = component.split('/').next().and_then(|p| st.package_mut(p)) {
                p.running = true;
            }
        }
        Tap::Wifi => {
            let on = !st.wifi.enabled;
            set_wifi(st, on);
        }
        Tap::Bluetooth => {
            let on = !st.bluetooth.enabled;
            set_bluetooth(st, on);
        }
        Tap::FocusText => st.ui.text_focused = true,
        Tap::Key(code) => {
            key(st, code);
        }
        Tap::CloseShade => st.ui.shade_open = false,
    }
}

/// `input tap X Y`: the topmost widget under the finger that reacts.
pub(crate) fn tap(st: &mut PhoneState, x: i32, y: i32) {
    // Off, or on the lock screen: the touch reaches no app.
    if !st.display.screen_on || st.ui.locked {
        return;
    }
    let hit = layout(st)
        .into_iter()
        .rev()
        .find(|w| w.on_tap.is_some() && w.contains(x, y));
    match hit.and_then(|w| w.on_tap) {
        Some(t) => perform(st, t),
        None if st.ui.shade_open && y > size(st).1 / 2 => st.ui.shade_open = false,
        None => st.ui.text_focused = false,
    }
}

/// `input swipe X1 Y1 X2 Y2`: a pull from the status bar opens the shade,
/// a push up closes it, a swipe that does not move is a long press.
pub(crate) fn swipe(st: &mut PhoneState, from: (i32, i32), to: (i32, i32)) {
    if !st.display.screen_on || st.ui.locked {
        return;
    }
    if from == to {
        tap(st, from.0, from.1);
    } else if from.1 < 90 && to.1 > from.1 + 200 {
        st.ui.shade_open = true;
    } else if st.ui.shade_open && to.1 + 200 < from.1 {
        st.ui.shade_open = false;
    }
}

/// `input text TEXT` as Android's `input` does it: `%s` is a space, and
/// characters the virtual keyboard map lacks (anything but ASCII) are lost.
pub(crate) fn text(st: &mut PhoneState, text: &str) {
    if !st.ui.text_focused || st.ui.shade_open || st.ui.locked || !st.display.screen_on {
        return;
    }
    let typed = text.replace("%s", " ");
    st.ui
        .text
        .extend(typed.chars().filter(|c| (' '..='~').contains(c)));
}

/// Text pasted into the focused field (the on-device UI server's
/// `pasteClipboard`): every character arrives, as an app's paste takes it.
/// `false` when no field has the focus.
pub(crate) fn paste(st: &mut PhoneState, text: &str) -> bool {
    if !st.display.screen_on || !st.ui.text_focused || st.ui.shade_open {
        return false;
    }
    st.ui.text.push_str(text);
    true
}

/// A key press the screen reacts to; `true` when it used it up.
pub(crate) fn key(st: &mut PhoneState, code: u32) -> bool {
    match code {
        4 if st.ui.shade_open => st.ui.shade_open = false,
        4 if st.ui.text_focused => st.ui.text_focused = false,
        3 | 4 => {
            st.ui.shade_open = false;
            st.ui.text_focused = false;
            return false;
        }
        83 => st.ui.shade_open = true,
        67 if st.ui.text_focused => {
            st.ui.text.pop();
        }
        62 if st.ui.text_focused => st.ui.text.push(' '),
        _ => return false,
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find<'a>(xml: &'a str, text: &str) -> &'a str {
        let at = xml
            .find(&format!("text=\"{text}\""))
            .expect("text in the dump");
        let start = xml[..at].rfind("<node").unwrap();
        let end = start + xml[start..].find('>').unwrap();
        &xml[start..=end]
    }

    fn centre(node: &str) -> (i32, i32) {
        let b = node.split("bounds=\"").nth(1).unwrap();
        let nums: Vec<i32> = b
            .split(|c: char| !c.is_ascii_digit())
            .filter(|s| !s.is_empty())
            .take(4)
            .map(|n| n.parse().unwrap())
            .collect();
        ((nums[0] + nums[2]) / 2, (nums[1] + nums[3]) / 2)
    }

    #[test]
    fn tapping_settings_then_the_wifi_row_turns_wifi_off() {
        let mut st = PhoneState::default();
        assert!(st.wifi.enabled);
        let (x, y) = centre(find(&dump_xml(&st), "Settings"));
        tap(&mut st, x, y);
        assert_eq!(st.foreground_package(), SETTINGS);
        let xml = dump_xml(&st);
        assert!(xml.contains("checked=\"true\""));
        let (x, y) = centre(find(&xml, "Wi-Fi"));
        tap(&mut st, x, y);
        assert!(!st.wifi.enabled);
        assert!(find(&dump_xml(&st), "Off").contains("android:id/summary"));
        key(&mut st, 4);
        super::super::services::input(&mut st, &["keyevent".into(), "BACK".into()]);
        assert_eq!(st.foreground_package(), LAUNCHER);
    }

    #[test]
    fn typed_text_is_escaped_in_the_dump_and_drawn() {
        let mut st = PhoneState::default();
        st.ui.text_focused = true;
        text(&mut st, "a%sb \"q\" <&>");
        assert_eq!(st.ui.text, "a b \"q\" <&>");
        let xml = dump_xml(&st);
        assert!(
            xml.contains("text=\"a b &quot;q&quot; &lt;&amp;&gt;\""),
            "{xml}"
        );
        text(&mut st, "Grüße");
        assert!(st.ui.text.ends_with("Gre"), "input text loses non-ASCII");
        let img = render(&st);
        assert_eq!((img.width(), img.height()), (1080, 2400));
    }

    #[test]
    fn the_dump_nests_rows_and_closes_every_node() {
        let mut st = PhoneState {
            foreground: "com.android.settings/.Settings".into(),
            ..PhoneState::default()
        };
        let xml = dump_xml(&st);
        assert_eq!(
            xml.matches("<node ").count(),
            xml.matches("</node>").count()
        );
        assert!(xml.starts_with(
            "<?xml version='1.0' encoding='UTF-8' standalone='yes' ?><hierarchy rotation=\"0\">"
        ));
        st.ui.shade_open = true;
        assert!(dump_xml(&st).contains("notification_panel"));
    }
}
