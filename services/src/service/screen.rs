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
        -> ScreenCapture
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
        -> UiTree
        example(Self::UiTree { visible_only: Some(true), max_nodes: None }),
        ForegroundApp = "foreground_app" (Low, reads) "Read which app and activity are in front."
        -> ForegroundActivity,
    }
);

records! {
    /// What `screen.screenshot` answers: the encoded image and how it maps
    /// onto the screen.
    ScreenCapture {
        /// `jpeg` or `png`.
        format: String = Schema::enumeration("", &["jpeg", "png"]),
        /// `image/jpeg` or `image/png`.
        mime_type: String = Schema::string("image/jpeg or image/png"),
        /// The returned image's width in pixels.
        width: u32 = Schema::integer("width of the returned image", Some(1), None),
        /// The returned image's height in pixels.
        height: u32 = Schema::integer("height of the returned image", Some(1), None),
        /// The screen's width in pixels.
        original_width: u32 = Schema::integer("screen width in pixels", Some(1), None),
        /// The screen's height in pixels.
        original_height: u32 = Schema::integer("screen height in pixels", Some(1), None),
        /// Returned size / screen size: screen x = image x / scale.
        scale: f64 = Schema::number("returned size / screen size; screen x = image x / scale"),
        /// The size of the encoded image.
        bytes: u64 = Schema::integer("size of the encoded image", Some(0), None),
        /// The encoded image, standard base64.
        data_base64: String = Schema::string("the encoded image, base64"),
    }

    /// What `screen.ui_tree` answers: the numbered element list of one dump.
    UiTree {
        /// Elements listed.
        count: usize = Schema::integer("elements listed", Some(0), None),
        /// Nodes in the dump.
        total: usize = Schema::integer("nodes in the dump", Some(0), None),
        /// Whether `max_nodes` cut the list short.
        truncated: bool = Schema::boolean("max_nodes cut the list short"),
        /// The screen's width, from the root node's bounds.
        screen_width: Option<i32> = Schema::integer("", Some(0), None),
        /// The screen's height.
        screen_height: Option<i32> = Schema::integer("", Some(0), None),
        /// The elements, in document order.
        elements: Vec<UiElement> = Schema::array("", UiElement::schema("one on-screen element")),
        /// One line per element, for reading.
        text: String = Schema::string("the same list, one line per element, for reading"),
    }

    /// One element of the screen, as a model reads it.
    UiElement {
        /// Its number in this list: what `ui_control.tap {element}` takes.
        index: u32 = Schema::integer("pass to ui_control.tap as element", Some(0), None),
        /// The class's short name (`Button` for `android.widget.Button`).
        class: String = Schema::string("short class name, e.g. Button"),
        /// Its text, if any.
        text: Option<String> = Schema::string(""),
        /// Its content description, if any.
        description: Option<String> = Schema::string("content description"),
        /// Its resource id, if any.
        resource_id: Option<String> = Schema::string(""),
        /// The app it belongs to.
        package: Option<String> = Schema::string(""),
        /// `[left, top, right, bottom]` in screen pixels.
        bounds: [i32; 4] = Schema::array(
            "[left, top, right, bottom] in screen pixels",
            Schema::integer("", None, None),
        ),
        /// The centre, `[x, y]`.
        center: [i32; 2] =
            Schema::array("[x, y] in screen pixels", Schema::integer("", None, None)),
        /// Whether tapping it does something.
        clickable: bool = Schema::boolean(""),
        /// Whether it has an on/off state.
        checkable: bool = Schema::boolean(""),
        /// Whether it is on.
        checked: bool = Schema::boolean(""),
        /// Whether it takes input.
        enabled: bool = Schema::boolean(""),
        /// Whether it has the input focus.
        focused: bool = Schema::boolean(""),
        /// Whether it scrolls.
        scrollable: bool = Schema::boolean(""),
    }

    /// What `screen.foreground_app` answers: the app and activity in front.
    ForegroundActivity {
        /// The app's package.
        package: String = Schema::string(""),
        /// The activity class.
        activity: String = Schema::string("the activity class"),
        /// `package/activity`.
        component: String = Schema::string("package/activity"),
    }
}

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
