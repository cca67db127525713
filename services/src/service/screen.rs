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
    /// Every format, in the catalogue's order.
    pub const ALL: [ImageFormat; 2] = [Self::Jpeg, Self::Png];

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

field_types!(ImageFormat => Schema::enumeration("", &ImageFormat::ALL.map(ImageFormat::as_str)));

/// The default longest side of a screenshot, in pixels.
pub const SCREENSHOT_MAX_SIDE: u32 = 1024;
/// The default JPEG quality of a screenshot.
pub const SCREENSHOT_QUALITY: u8 = 80;
/// The default number of elements a UI tree lists at most.
pub const UI_TREE_MAX_NODES: u32 = 200;

actions!(
    /// `screen` actions.
    ///
    /// The screen's actions are `low` by themselves: the app in front
    /// raises them (`[phone_services.ui]`, `policy::ui`), checked by the
    /// hub in the device's turn for every caller.
    ScreenReaderAction {
        Screenshot = "screenshot" (Low, reads)
            "Capture the screen as an image scaled so its longest side is max_side pixels (default 1024, JPEG). The result gives the original size and the scale factor: a point (x, y) in the image is (x / scale, y / scale) on the screen, which is what ui_control.tap takes. Everything on screen is captured, private content included."
        {
            /// Longest side of the returned image in pixels (default 1024).
            max_side: Option<u32> = Schema::integer("", Some(64), Some(4096)),
            /// Image format (default jpeg).
            format: Option<ImageFormat>,
            /// JPEG quality (default 80).
            quality: Option<u8> = Schema::integer("", Some(1), Some(100)),
        }
        -> ScreenCapture
        example(Self::Screenshot {
            max_side: Some(1024),
            format: Some(ImageFormat::Jpeg),
            quality: None,
        }),
        UiTree = "ui_tree" (Low, reads)
            "List the elements on screen, numbered: index, class, text or content description, resource id, bounds [left, top, right, bottom] in screen pixels, centre, and whether each is clickable, checked, enabled, focused or scrollable. Pass an index to ui_control.tap as element. Cheaper than a screenshot and exact for text."
        {
            /// Only elements that show something or can be used (default true); false lists every
            /// layout node.
            visible_only: Option<bool>,
            /// At most this many elements (default 200).
            max_nodes: Option<u32> = Schema::integer("", Some(1), Some(2000)),
        }
        -> UiTree
        example(Self::UiTree { visible_only: Some(true), max_nodes: None }),
        ForegroundApp = "foreground_app" (Low, reads) "Read which app and activity are in front."
        -> ForegroundActivity,
        Observe = "observe" (Medium, reads)
            "One look at the screen for a UI step: the screenshot (scaled as screen.screenshot does), the numbered element list (as screen.ui_tree, so ui_control.tap takes its indexes), the app in front, and whether the screen is on and locked. Use it instead of calling screenshot, ui_tree and foreground_app one after the other."
        {
            /// Longest side of the returned image in pixels (default 1024).
            max_side: Option<u32> = Schema::integer("", Some(64), Some(4096)),
            /// Image format (default jpeg).
            format: Option<ImageFormat>,
            /// JPEG quality (default 80).
            quality: Option<u8> = Schema::integer("", Some(1), Some(100)),
            /// At most this many elements (default 200).
            max_nodes: Option<u32> = Schema::integer("", Some(1), Some(2000)),
            /// Whether to take the screenshot (default true); false answers
            /// the rest only, for a reader that takes no images.
            with_image: Option<bool>,
        }
        -> ScreenObservation
        example(Self::Observe {
            max_side: Some(1024),
            format: None,
            quality: None,
            max_nodes: None,
            with_image: None,
        }),
    }
);

records! {
    /// What `screen.screenshot` answers: the encoded image and how it maps
    /// onto the screen.
    ScreenCapture {
        /// `jpeg` or `png`.
        format: ImageFormat,
        /// `image/jpeg` or `image/png`.
        mime_type: String,
        /// The returned image's width in pixels.
        width: u32 = Schema::integer("", Some(1), None),
        /// The returned image's height in pixels.
        height: u32 = Schema::integer("", Some(1), None),
        /// The screen's width in pixels.
        original_width: u32 = Schema::integer("", Some(1), None),
        /// The screen's height in pixels.
        original_height: u32 = Schema::integer("", Some(1), None),
        /// Returned size / screen size: screen x = image x / scale.
        scale: f64,
        /// The size of the encoded image.
        bytes: u64,
        /// The encoded image, standard base64.
        data_base64: String,
    }

    /// What `screen.ui_tree` answers: the numbered element list of one dump.
    UiTree {
        /// Elements listed.
        count: usize,
        /// Nodes in the dump.
        total: usize,
        /// Whether `max_nodes` cut the list short.
        truncated: bool,
        /// The screen's width, from the root node's bounds.
        screen_width: Option<i32> = Schema::integer("", Some(0), None),
        /// The screen's height.
        screen_height: Option<i32> = Schema::integer("", Some(0), None),
        /// The elements, in document order.
        elements: Vec<UiElement>,
        /// One line per element, for reading.
        text: String,
        /// Which path read the screen: `ui_server` (the on-device UI
        /// server, docs/screen-component.md) or `uiautomator_dump`.
        via: Option<String>,
    }

    /// One element of the screen, as a model reads it.
    UiElement {
        /// Its number in this list: what `ui_control.tap {element}` takes.
        index: u32,
        /// The class's short name (`Button` for `android.widget.Button`).
        class: String,
        /// Its text, if any.
        text: Option<String>,
        /// Its content description, if any.
        description: Option<String>,
        /// Its resource id, if any.
        resource_id: Option<String>,
        /// The app it belongs to.
        package: Option<String>,
        /// `[left, top, right, bottom]` in screen pixels.
        bounds: [i32; 4],
        /// The centre, `[x, y]` in screen pixels.
        center: [i32; 2],
        /// Whether tapping it does something.
        clickable: bool,
        /// Whether it has an on/off state.
        checkable: bool,
        /// Whether it is on.
        checked: bool,
        /// Whether it takes input.
        enabled: bool,
        /// Whether it has the input focus.
        focused: bool,
        /// Whether it scrolls.
        scrollable: bool,
    }

    /// What `screen.observe` answers: one look at the screen.
    ScreenObservation {
        /// Whether the screen is on.
        screen_on: bool,
        /// Whether the lock screen shows; null when the phone does not say.
        locked: Option<bool>,
        /// The app in front; null when no app has the focus.
        foreground: Option<ForegroundActivity>,
        /// The screenshot, as `screen.screenshot` answers it; null when
        /// `with_image` is false.
        screenshot: Option<ScreenCapture>,
        /// The elements on screen (visible ones), as `screen.ui_tree`
        /// answers them; null when the screen is off (nothing to read).
        tree: Option<UiTree>,
    }

    /// What `screen.foreground_app` answers: the app and activity in front.
    ForegroundActivity {
        /// The app's package.
        package: String,
        /// The activity class.
        activity: String,
        /// `package/activity`.
        component: String,
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
