//! The `screen` service: what is on the phone's screen (a screenshot for a
//! model's eyes, the UI element tree, the app in front).

use super::*;

/// The image format of a screenshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ImageFormat {
    /// Lossless; larger.
    Png,
    /// Lossy; the default, a few times smaller than PNG for a model.
    Jpeg,
}

impl ImageFormat {
    /// The wire name, `png` or `jpeg`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Png => "png",
            Self::Jpeg => "jpeg",
        }
    }

    /// The MIME type, `image/png` or `image/jpeg`.
    pub fn mime(self) -> &'static str {
        match self {
            Self::Png => "image/png",
            Self::Jpeg => "image/jpeg",
        }
    }
}

/// The default longest side of a screenshot, in pixels.
pub const SCREENSHOT_MAX_SIDE: u32 = 1024;
/// The default JPEG quality of a screenshot.
pub const SCREENSHOT_QUALITY: u8 = 80;
/// The default number of elements a UI tree lists at most.
pub const UI_TREE_MAX_NODES: u32 = 200;

actions!(
    /// `screen` actions.
    ScreenReaderAction {
        Screenshot = "screenshot" (Medium, reads)
            "Capture the screen as an image scaled so its longest side is max_side pixels (default 1024, JPEG). The result gives the original size and the scale factor: a point (x, y) in the image is (x / scale, y / scale) on the screen, which is what ui_control.tap takes. Everything on screen is captured, private content included."
        {
            /// Longest side of the returned image in pixels (default 1024).
            max_side: Option<u32> = Schema::integer(
                "longest side of the returned image in pixels (default 1024)",
                Some(64),
                Some(4096),
            ),
            /// `jpeg` (default) or `png`.
            format: Option<ImageFormat> =
                Schema::enumeration("image format (default jpeg)", &["jpeg", "png"]),
            /// JPEG quality 1-100 (default 80).
            quality: Option<u8> = Schema::integer("JPEG quality (default 80)", Some(1), Some(100)),
        }
        returns(vec![
            req("format", Schema::enumeration("", &["jpeg", "png"])),
            req("mime_type", Schema::string("image/jpeg or image/png")),
            req("width", Schema::integer("width of the returned image", Some(1), None)),
            req("height", Schema::integer("height of the returned image", Some(1), None)),
            req("original_width", Schema::integer("screen width in pixels", Some(1), None)),
            req("original_height", Schema::integer("screen height in pixels", Some(1), None)),
            req("scale", Schema::number("returned size / screen size; screen x = image x / scale")),
            req("bytes", Schema::integer("size of the encoded image", Some(0), None)),
            req("data_base64", Schema::string("the encoded image, base64")),
        ])
        example(Self::Screenshot {
            max_side: Some(1024),
            format: Some(ImageFormat::Jpeg),
            quality: None,
        }),
        UiTree = "ui_tree" (Medium, reads)
            "List the elements on screen, numbered: index, class, text or content description, resource id, bounds [left, top, right, bottom] in screen pixels, centre, and whether each is clickable, checked, enabled, focused or scrollable. Pass an index to ui_control.tap as element. Cheaper than a screenshot and exact for text."
        {
            /// Only elements visible to the user (default true).
            visible_only: Option<bool> = Schema::boolean(
                "only elements that show something or can be used (default true); false lists every layout node",
            ),
            /// At most this many elements (default 200).
            max_nodes: Option<u32> =
                Schema::integer("at most this many elements (default 200)", Some(1), Some(2000)),
        }
        returns(vec![
            req("count", Schema::integer("elements listed", Some(0), None)),
            req("total", Schema::integer("nodes in the dump", Some(0), None)),
            req("truncated", Schema::boolean("max_nodes cut the list short")),
            req("screen_width", Schema::integer("", Some(0), None).or_null()),
            req("screen_height", Schema::integer("", Some(0), None).or_null()),
            req("elements", Schema::array("", ui_element())),
            req("text", Schema::string("the same list, one line per element, for reading")),
        ])
        example(Self::UiTree { visible_only: Some(true), max_nodes: None }),
        ForegroundApp = "foreground_app" (Low, reads) "Read which app and activity are in front."
        returns(vec![
            req("package", Schema::string("")),
            req("activity", Schema::string("the activity class")),
            req("component", Schema::string("package/activity")),
        ]),
    }
);

pub(super) fn spec() -> ServiceSpec {
    ServiceSpec {
        node_type: "screenReader",
        id: "screen",
        description: "See the screen: a screenshot, the list of on-screen elements, the app in front.",
        actions: ScreenReaderAction::specs(),
        state: Some(|| Command::ScreenReader(ScreenReaderAction::ForegroundApp)),
        home_assistant: Vec::new(),
        companion_event: None,
    }
}

fn ui_element() -> Schema {
    Schema::object(
        "one on-screen element",
        vec![
            req(
                "index",
                Schema::integer("pass to ui_control.tap as element", Some(0), None),
            ),
            req("class", Schema::string("short class name, e.g. Button")),
            opt("text", Schema::string("")),
            opt("description", Schema::string("content description")),
            opt("resource_id", Schema::string("")),
            opt("package", Schema::string("")),
            req(
                "bounds",
                Schema::array(
                    "[left, top, right, bottom] in screen pixels",
                    Schema::integer("", None, None),
                ),
            ),
            req(
                "center",
                Schema::array("[x, y] in screen pixels", Schema::integer("", None, None)),
            ),
            req("clickable", Schema::boolean("")),
            req("checkable", Schema::boolean("")),
            req("checked", Schema::boolean("")),
            req("enabled", Schema::boolean("")),
            req("focused", Schema::boolean("")),
            req("scrollable", Schema::boolean("")),
        ],
    )
}
