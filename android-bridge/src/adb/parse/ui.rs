//! The screen: `uiautomator dump` output, `wm size`, and `screencap -p`'s
//! PNG.
//!
//! `uiautomator dump [FILE]` writes the window hierarchy as XML
//! (`<hierarchy rotation="0"><node index="0" text="" resource-id=""
//! class="…" package="…" content-desc="" checkable="false" … bounds="[0,0][1080,2400]">`)
//! and prints `UI hierchary dumped to: FILE` (Android's own spelling) on
//! standard output. What goes wrong on real phones, and what is read here:
//!
//! - `ERROR: could not get idle state.` when the screen keeps animating
//!   (a video, a spinner): [`dump_outcome`] says [`DumpOutcome::NotIdle`] and
//!   the caller tries again; `ERROR: null root node returned by
//!   UiTestAutomationBridge.` (the screen is changing windows) is the same.
//! - The file named on the command line is not always where the dump went:
//!   old releases wrote `/storage/emulated/legacy/window_dump.xml` whatever
//!   was asked. The path is read from the `dumped to:` line.
//! - Some builds print the XML itself on standard output (`dump /dev/tty`
//!   through a terminal, or exec-out builds): [`dump_outcome`] takes the XML
//!   from the output when it is there, and the file is not read.
//!
//! [`ui_elements`] turns the XML into the compact numbered list a model
//! reads; the numbers are what `ui_control.tap {element}` takes.

pub use droidwarden_services::{UiElement, UiTree};

use super::error::ParseError;

const DUMP: &str = "uiautomator dump";

/// What `uiautomator dump FILE` said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DumpOutcome {
    /// The dump is in this file (the path the tool printed).
    File(String),
    /// The XML was printed on standard output.
    Inline(String),
    /// The screen did not settle (`could not get idle state`, `null root
    /// node`): try again.
    NotIdle(String),
}

/// Reads `uiautomator dump` output (standard output and error together).
///
/// # Errors
/// [`ParseError::Malformed`] for an `ERROR:` line other than the retryable
/// ones, and [`ParseError::MissingField`] when neither a path nor XML is in
/// the output.
pub fn dump_outcome(output: &str) -> Result<DumpOutcome, ParseError> {
    if let Some(xml) = xml_slice(output) {
        return Ok(DumpOutcome::Inline(xml.to_owned()));
    }
    for line in output.lines() {
        let line = line.trim();
        let lower = line.to_ascii_lowercase();
        if lower.contains("could not get idle state") || lower.contains("null root node") {
            return Ok(DumpOutcome::NotIdle(line.chars().take(200).collect()));
        }
        if lower.starts_with("error") || lower.contains("exception") {
            return Err(ParseError::malformed(DUMP, "the dump failed", line));
        }
    }
    output
        .lines()
        .find_map(|l| {
            let (_, path) = l.split_once("dumped to:")?;
            let path = path.trim();
            (path.starts_with('/') && !path.contains(['\'', '\n'])).then(|| path.to_owned())
        })
        .map(DumpOutcome::File)
        .ok_or(ParseError::MissingField {
            command: DUMP,
            field: "UI hierchary dumped to:",
        })
}

/// Reads the output of `uiautomator dump ASKED && cat ASKED` run as one
/// device command (standard output and error apart): the XML `cat` printed
/// counts only when the tool said it wrote to `ASKED` and reported no
/// error, so a file left by an earlier dump is never taken for this one.
/// The tool writing elsewhere (old releases) is [`DumpOutcome::File`] with
/// its path; XML printed by the tool itself (`/dev/tty` builds) is
/// [`DumpOutcome::Inline`].
///
/// # Errors
/// As [`dump_outcome`].
pub fn dump_then_cat_outcome(
    stdout: &str,
    stderr: &str,
    asked: &str,
) -> Result<DumpOutcome, ParseError> {
    let xml = xml_slice(stdout);
    // The tool's own words: everything but the XML.
    let message = match xml {
        Some(x) => {
            let at = stdout.find(x).unwrap_or(0);
            format!("{}\n{}\n{stderr}", &stdout[..at], &stdout[at + x.len()..])
        }
        None => format!("{stdout}\n{stderr}"),
    };
    let said = dump_outcome(&message);
    match (said, xml) {
        (Ok(DumpOutcome::File(path)), Some(xml)) if path == asked || path == "/dev/tty" => {
            Ok(DumpOutcome::Inline(xml.to_owned()))
        }
        (Ok(outcome), _) => Ok(outcome),
        // No `dumped to:` line, but XML: a build that prints the dump only.
        (Err(ParseError::MissingField { .. }), Some(xml)) => {
            Ok(DumpOutcome::Inline(xml.to_owned()))
        }
        (Err(e), _) => Err(e),
    }
}

/// The XML document inside `text`, from `<?xml` or `<hierarchy` to the end
/// of `</hierarchy>`: the tool's message may follow it on the same stream.
pub fn xml_slice(text: &str) -> Option<&str> {
    let start = text.find("<?xml").or_else(|| text.find("<hierarchy"))?;
    let end = text.rfind("</hierarchy>")? + "</hierarchy>".len();
    (end > start).then(|| &text[start..end])
}

/// Parses a `uiautomator dump` XML document into a numbered list.
///
/// With `visible_only`, layout containers that show nothing (no text, no
/// description, not clickable, checkable, scrollable or focused), nodes of
/// zero size, nodes entirely off screen and nodes marked
/// `visible-to-user="false"` are left out. At most `max_nodes` are listed.
///
/// # Errors
/// [`ParseError::Malformed`] for text that is not XML or has no
/// `<hierarchy>` root.
pub fn ui_elements(xml: &str, visible_only: bool, max_nodes: usize) -> Result<UiTree, ParseError> {
    let xml = xml_slice(xml).unwrap_or(xml);
    let doc = roxmltree::Document::parse(xml)
        .map_err(|e| ParseError::malformed(DUMP, "not XML", &e.to_string()))?;
    let root = doc.root_element();
    if root.tag_name().name() != "hierarchy" {
        return Err(ParseError::malformed(
            DUMP,
            "the root is not <hierarchy>",
            root.tag_name().name(),
        ));
    }
    let nodes: Vec<roxmltree::Node<'_, '_>> = root
        .descendants()
        .filter(|n| n.is_element() && n.tag_name().name() == "node")
        .collect();
    let screen = nodes
        .iter()
        .filter_map(|n| bounds(n.attribute("bounds")?))
        .map(|b| (b[2], b[3]))
        .fold(None, |acc: Option<(i32, i32)>, (w, h)| {
            Some(acc.map_or((w, h), |(aw, ah)| (aw.max(w), ah.max(h))))
        });
    let mut elements = Vec::new();
    let mut truncated = false;
    for node in &nodes {
        let flag = |name: &str| node.attribute(name) == Some("true");
        let text_of = |name: &str| {
            node.attribute(name)
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        };
        let Some(b) = node.attribute("bounds").and_then(bounds) else {
            continue;
        };
        let text = text_of("text");
        let description = text_of("content-desc");
        let (clickable, checkable, scrollable, focused) = (
            flag("clickable") || flag("long-clickable"),
            flag("checkable"),
            flag("scrollable"),
            flag("focused"),
        );
        if visible_only {
            let shows = text.is_some() || description.is_some();
            let usable = clickable || checkable || scrollable || focused;
            let sized = b[2] > b[0] && b[3] > b[1];
            let on_screen =
                screen.is_none_or(|(w, h)| b[0] < w && b[1] < h && b[2] > 0 && b[3] > 0);
            let hidden = node.attribute("visible-to-user") == Some("false");
            if !(shows || usable) || !sized || !on_screen || hidden {
                continue;
            }
        }
        if elements.len() >= max_nodes {
            truncated = true;
            break;
        }
        let class = node.attribute("class").unwrap_or("");
        elements.push(UiElement {
            index: u32::try_from(elements.len()).unwrap_or(u32::MAX),
            class: class.rsplit('.').next().unwrap_or(class).to_owned(),
            text,
            description,
            resource_id: text_of("resource-id"),
            package: text_of("package"),
            bounds: b,
            center: [(b[0] + b[2]) / 2, (b[1] + b[3]) / 2],
            clickable,
            checkable,
            checked: flag("checked"),
            enabled: flag("enabled"),
            focused,
            scrollable,
        });
    }
    let text = elements.iter().map(line).collect::<Vec<_>>().join("\n");
    Ok(UiTree {
        count: elements.len(),
        total: nodes.len(),
        truncated,
        screen_width: screen.map(|s| s.0),
        screen_height: screen.map(|s| s.1),
        elements,
        text,
        via: None,
    })
}

/// `[3] Switch "Wi-Fi" desc="…" id=android:id/switch_widget @(960,420) [900,380][1020,460] clickable checked`
fn line(e: &UiElement) -> String {
    let mut s = format!("[{}] {}", e.index, e.class);
    if let Some(t) = &e.text {
        s.push_str(&format!(" {t:?}"));
    }
    if let Some(d) = &e.description {
        s.push_str(&format!(" desc={d:?}"));
    }
    if let Some(id) = &e.resource_id {
        s.push_str(&format!(" id={id}"));
    }
    let b = e.bounds;
    s.push_str(&format!(
        " @({},{}) [{},{}][{},{}]",
        e.center[0], e.center[1], b[0], b[1], b[2], b[3]
    ));
    for (on, name) in [
        (e.clickable, "clickable"),
        (e.checkable && !e.checked, "unchecked"),
        (e.checked, "checked"),
        (!e.enabled, "disabled"),
        (e.focused, "focused"),
        (e.scrollable, "scrollable"),
    ] {
        if on {
            s.push(' ');
            s.push_str(name);
        }
    }
    s
}

/// `[l,t][r,b]` → `[l, t, r, b]`.
fn bounds(text: &str) -> Option<[i32; 4]> {
    let nums: Vec<i32> = text
        .split(['[', ']', ','])
        .filter(|s| !s.is_empty())
        .map(|s| s.trim().parse().ok())
        .collect::<Option<_>>()?;
    match nums[..] {
        [l, t, r, b] => Some([l, t, r, b]),
        _ => None,
    }
}

/// The display size from `wm size`: the override when one is set, else the
/// physical size.
///
/// # Errors
/// [`ParseError::MissingField`] without a size line.
pub fn wm_size(output: &str) -> Result<(u32, u32), ParseError> {
    wm_value(
        output,
        "wm size",
        ("Override size:", "Physical size:"),
        |v| {
            let (w, h) = v.split_once('x')?;
            Some((w.trim().parse().ok()?, h.trim().parse().ok()?))
        },
    )
}

/// What a `wm` query (`wm size`, `wm density`) prints: the value after
/// `override_key` when an override is set, else after `physical_key`, each
/// read by `read`.
///
/// # Errors
/// [`ParseError::MissingField`] when neither line reads.
pub(crate) fn wm_value<T>(
    output: &str,
    command: &'static str,
    (override_key, physical_key): (&str, &'static str),
    read: impl Fn(&str) -> Option<T>,
) -> Result<T, ParseError> {
    let value = |key: &str| {
        output
            .lines()
            .find_map(|l| read(l.trim().strip_prefix(key)?.trim()))
    };
    value(override_key)
        .or_else(|| value(physical_key))
        .ok_or(ParseError::MissingField {
            command,
            field: physical_key,
        })
}

/// The PNG signature every `screencap -p` output starts with.
pub const PNG_SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";

/// `screencap -p` output as PNG bytes. Through a terminal (the old `adb
/// shell` without shell protocol v2) every `\n` byte became `\r\n`; such
/// output is recognised by its signature (`\x89PNG\r\r\n`) and repaired.
///
/// # Errors
/// [`ParseError::Malformed`] when the output is not a PNG (an error message,
/// an empty screen on a phone that forbids capture).
pub fn screencap_png(output: &[u8]) -> Result<std::borrow::Cow<'_, [u8]>, ParseError> {
    if output.starts_with(PNG_SIGNATURE) {
        return Ok(std::borrow::Cow::Borrowed(output));
    }
    if output.starts_with(b"\x89PNG\r\r\n") {
        let mut fixed = Vec::with_capacity(output.len());
        let mut i = 0;
        while i < output.len() {
            if output[i] == b'\r' && output.get(i + 1) == Some(&b'\n') {
                i += 1;
                continue;
            }
            fixed.push(output[i]);
            i += 1;
        }
        return Ok(std::borrow::Cow::Owned(fixed));
    }
    let head = String::from_utf8_lossy(&output[..output.len().min(120)]).into_owned();
    Err(ParseError::malformed(
        "screencap -p",
        "not a PNG image",
        if head.trim().is_empty() {
            "(no output)"
        } else {
            &head
        },
    ))
}

#[cfg(test)]
mod dump_then_cat_tests {
    use super::*;

    const ASKED: &str = "/data/local/tmp/d.xml";
    const XML: &str = "<?xml version='1.0' encoding='UTF-8' standalone='yes' ?><hierarchy rotation=\"0\"><node text=\"error: none\" /></hierarchy>";

    #[test]
    fn the_xml_counts_only_when_the_tool_wrote_where_asked() {
        let fresh = format!("UI hierchary dumped to: {ASKED}\n{XML}");
        assert_eq!(
            dump_then_cat_outcome(&fresh, "", ASKED).unwrap(),
            DumpOutcome::Inline(XML.to_owned())
        );
        // An error and exit 0, then the file of an earlier dump: not idle.
        let stale = XML.to_owned();
        assert!(matches!(
            dump_then_cat_outcome(&stale, "ERROR: could not get idle state.\n", ASKED).unwrap(),
            DumpOutcome::NotIdle(_)
        ));
        // Written elsewhere: whatever `cat` printed is not it.
        let legacy = "/storage/emulated/legacy/window_dump.xml";
        let moved = format!("UI hierchary dumped to: {legacy}\n{XML}");
        assert_eq!(
            dump_then_cat_outcome(&moved, "", ASKED).unwrap(),
            DumpOutcome::File(legacy.to_owned())
        );
        // Printed by the tool, the message after it.
        let tty = format!("{XML}UI hierchary dumped to: /dev/tty\n");
        assert_eq!(
            dump_then_cat_outcome(&tty, "", ASKED).unwrap(),
            DumpOutcome::Inline(XML.to_owned())
        );
        assert!(dump_then_cat_outcome("", "ERROR: boom\n", ASKED).is_err());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIALOG: &str = fixture!("uiautomator-dump/autotickexitbox-dialog-unknown.xml");
    const FEED: &str = fixture!("uiautomator-dump/bluestacks-doomscroller-landscape-unknown.xml");
    const GAME: &str = fixture!("uiautomator-dump/jeremy-mossa-scripts-game-landscape-unknown.xml");

    #[test]
    fn a_dialog_lists_its_text_and_buttons() {
        let tree = ui_elements(DIALOG, true, 200).unwrap();
        assert!(tree.count > 0 && tree.count < tree.total, "{tree:#?}");
        assert!(!tree.truncated);
        let buttons: Vec<&UiElement> = tree
            .elements
            .iter()
            .filter(|e| e.class == "Button")
            .collect();
        assert!(!buttons.is_empty(), "{}", tree.text);
        for b in buttons {
            assert!(b.clickable);
            assert!(b.bounds[0] < b.center[0] && b.center[0] < b.bounds[2]);
        }
        for (i, e) in tree.elements.iter().enumerate() {
            assert_eq!(e.index as usize, i);
        }
        assert_eq!(tree.text.lines().count(), tree.count);
    }

    #[test]
    fn every_node_is_listed_when_not_only_visible_and_the_limit_cuts() {
        let all = ui_elements(FEED, false, 10_000).unwrap();
        assert_eq!(all.count, all.total);
        let cut = ui_elements(FEED, false, 5).unwrap();
        assert_eq!(cut.count, 5);
        assert!(cut.truncated);
        let visible = ui_elements(FEED, true, 10_000).unwrap();
        assert!(visible.count < all.count);
        // The largest bounds give the screen (as dumped, whatever the rotation).
        assert_eq!(
            (visible.screen_width, visible.screen_height),
            (Some(1080), Some(1920))
        );
    }

    #[test]
    fn a_game_surface_has_almost_nothing_to_list() {
        let tree = ui_elements(GAME, true, 200).unwrap();
        assert!(tree.total >= 1);
        assert!(tree.count <= tree.total);
    }

    #[test]
    fn not_xml_is_malformed_never_a_panic() {
        for bad in [
            "",
            "ERROR: null",
            "<hierarchy>",
            "<foo/>",
            "<hierarchy><node bounds='[a]'/>",
        ] {
            let _ = ui_elements(bad, true, 10);
        }
        assert!(ui_elements("<foo/>", true, 10).is_err());
        assert!(ui_elements("garbage", true, 10).is_err());
    }

    #[test]
    fn dump_messages() {
        assert_eq!(
            dump_outcome("UI hierchary dumped to: /sdcard/window_dump.xml\n"),
            Ok(DumpOutcome::File("/sdcard/window_dump.xml".into()))
        );
        assert_eq!(
            dump_outcome("UI hierchary dumped to: /storage/emulated/legacy/window_dump.xml\n"),
            Ok(DumpOutcome::File(
                "/storage/emulated/legacy/window_dump.xml".into()
            ))
        );
        assert!(matches!(
            dump_outcome("ERROR: could not get idle state.\n"),
            Ok(DumpOutcome::NotIdle(_))
        ));
        assert!(matches!(
            dump_outcome("ERROR: null root node returned by UiTestAutomationBridge.\n"),
            Ok(DumpOutcome::NotIdle(_))
        ));
        let inline = format!("{DIALOG}UI hierchary dumped to: /dev/tty\n");
        assert_eq!(
            dump_outcome(&inline),
            Ok(DumpOutcome::Inline(DIALOG.into()))
        );
        assert!(dump_outcome("Killed\n").is_err());
        assert!(dump_outcome("ERROR: could not create file\n").is_err());
    }

    #[test]
    fn window_size() {
        let fixture = fixture!("wm-size/dipendrasharma-guide-example-unknown.txt");
        assert_eq!(wm_size(fixture), Ok((720, 1600)));
        assert_eq!(
            wm_size("Physical size: 1080x2400\nOverride size: 720x1600\n"),
            Ok((720, 1600))
        );
        assert!(wm_size("").is_err());
    }

    #[test]
    fn screencap_through_a_terminal_is_repaired() {
        let png = b"\x89PNG\r\n\x1a\nrest\n";
        assert_eq!(&*screencap_png(png).unwrap(), png);
        let mangled = b"\x89PNG\r\r\n\x1a\r\nrest\r\n";
        assert_eq!(&*screencap_png(mangled).unwrap(), png);
        assert!(screencap_png(b"").is_err());
        assert!(screencap_png(b"/system/bin/sh: screencap: not found").is_err());
    }
}
