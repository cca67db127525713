//! The `ui_control` service: touch and type on the phone's screen.

use super::*;

/// A point on the screen, in screen pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Point {
    /// Pixels from the left edge.
    pub x: u32,
    /// Pixels from the top edge.
    pub y: u32,
}

/// Which way a scroll moves the content into view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScrollDirection {
    /// Show what is above (the finger moves down).
    Up,
    /// Show what is below (the finger moves up).
    Down,
    /// Show what is to the left.
    Left,
    /// Show what is to the right.
    Right,
}

impl ScrollDirection {
    /// Every direction, in the catalogue's order.
    pub const ALL: [ScrollDirection; 4] = [Self::Up, Self::Down, Self::Left, Self::Right];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Up => "up",
            Self::Down => "down",
            Self::Left => "left",
            Self::Right => "right",
        }
    }
}

/// The keys `ui_control.key` may press: navigation and editing keys, never
/// power (that is `ui_control.power`, of higher risk).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Key {
    /// Back.
    Back,
    /// Home screen.
    Home,
    /// The recent apps.
    Recents,
    /// Enter / confirm.
    Enter,
    /// Tab, next field.
    Tab,
    /// Backspace: delete before the cursor.
    Delete,
    /// Delete after the cursor.
    ForwardDelete,
    /// Escape.
    Escape,
    /// Menu.
    Menu,
    /// Search.
    Search,
    /// Space.
    Space,
    /// Volume up.
    VolumeUp,
    /// Volume down.
    VolumeDown,
    /// Mute the speaker.
    VolumeMute,
    /// D-pad up.
    DpadUp,
    /// D-pad down.
    DpadDown,
    /// D-pad left.
    DpadLeft,
    /// D-pad right.
    DpadRight,
    /// D-pad centre (select).
    DpadCenter,
    /// Page up.
    PageUp,
    /// Page down.
    PageDown,
    /// Cursor to the start of the line.
    MoveHome,
    /// Cursor to the end of the line.
    MoveEnd,
    /// Open the notification shade.
    Notifications,
}

impl Key {
    /// Every key, in the catalogue's order.
    pub const ALL: [Key; 24] = [
        Self::Back,
        Self::Home,
        Self::Recents,
        Self::Enter,
        Self::Tab,
        Self::Delete,
        Self::ForwardDelete,
        Self::Escape,
        Self::Menu,
        Self::Search,
        Self::Space,
        Self::VolumeUp,
        Self::VolumeDown,
        Self::VolumeMute,
        Self::DpadUp,
        Self::DpadDown,
        Self::DpadLeft,
        Self::DpadRight,
        Self::DpadCenter,
        Self::PageUp,
        Self::PageDown,
        Self::MoveHome,
        Self::MoveEnd,
        Self::Notifications,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Back => "back",
            Self::Home => "home",
            Self::Recents => "recents",
            Self::Enter => "enter",
            Self::Tab => "tab",
            Self::Delete => "delete",
            Self::ForwardDelete => "forward_delete",
            Self::Escape => "escape",
            Self::Menu => "menu",
            Self::Search => "search",
            Self::Space => "space",
            Self::VolumeUp => "volume_up",
            Self::VolumeDown => "volume_down",
            Self::VolumeMute => "volume_mute",
            Self::DpadUp => "dpad_up",
            Self::DpadDown => "dpad_down",
            Self::DpadLeft => "dpad_left",
            Self::DpadRight => "dpad_right",
            Self::DpadCenter => "dpad_center",
            Self::PageUp => "page_up",
            Self::PageDown => "page_down",
            Self::MoveHome => "move_home",
            Self::MoveEnd => "move_end",
            Self::Notifications => "notifications",
        }
    }

    /// Android's `KeyEvent.KEYCODE_*` name, as `input keyevent` takes it.
    pub fn android_keycode(self) -> &'static str {
        match self {
            Self::Back => "KEYCODE_BACK",
            Self::Home => "KEYCODE_HOME",
            Self::Recents => "KEYCODE_APP_SWITCH",
            Self::Enter => "KEYCODE_ENTER",
            Self::Tab => "KEYCODE_TAB",
            Self::Delete => "KEYCODE_DEL",
            Self::ForwardDelete => "KEYCODE_FORWARD_DEL",
            Self::Escape => "KEYCODE_ESCAPE",
            Self::Menu => "KEYCODE_MENU",
            Self::Search => "KEYCODE_SEARCH",
            Self::Space => "KEYCODE_SPACE",
            Self::VolumeUp => "KEYCODE_VOLUME_UP",
            Self::VolumeDown => "KEYCODE_VOLUME_DOWN",
            Self::VolumeMute => "KEYCODE_VOLUME_MUTE",
            Self::DpadUp => "KEYCODE_DPAD_UP",
            Self::DpadDown => "KEYCODE_DPAD_DOWN",
            Self::DpadLeft => "KEYCODE_DPAD_LEFT",
            Self::DpadRight => "KEYCODE_DPAD_RIGHT",
            Self::DpadCenter => "KEYCODE_DPAD_CENTER",
            Self::PageUp => "KEYCODE_PAGE_UP",
            Self::PageDown => "KEYCODE_PAGE_DOWN",
            Self::MoveHome => "KEYCODE_MOVE_HOME",
            Self::MoveEnd => "KEYCODE_MOVE_END",
            Self::Notifications => "KEYCODE_NOTIFICATION",
        }
    }
}

/// The longest text `type_text` takes, in characters.
pub const TYPE_TEXT_MAX: usize = 2000;

actions!(
    /// `ui_control` actions.
    UiControlAction {
        /// Tap a point or an element of the latest UI tree.
        Tap = "tap" {
            /// Screen x (with y).
            x: Option<u32>,
            /// Screen y (with x).
            y: Option<u32>,
            /// An index from the latest `screen.ui_tree` (instead of x, y).
            element: Option<u32>,
        },
        /// Touch and hold a point or an element.
        LongPress = "long_press" {
            /// Screen x (with y).
            x: Option<u32>,
            /// Screen y (with x).
            y: Option<u32>,
            /// An index from the latest `screen.ui_tree` (instead of x, y).
            element: Option<u32>,
            /// How long to hold (default 800 ms).
            duration_ms: Option<u32>,
        },
        /// Drag a finger from one point to another.
        Swipe = "swipe" {
            /// Where the finger lands.
            from: Point,
            /// Where it lifts.
            to: Point,
            /// How long the movement takes (default 300 ms).
            duration_ms: Option<u32>,
        },
        /// Scroll the content in the middle of the screen.
        Scroll = "scroll" {
            /// Which content to bring into view.
            direction: ScrollDirection,
        },
        /// Press a navigation or editing key.
        Key = "key" {
            /// The key.
            key: Key,
        },
        /// Press the power button.
        Power = "power",
        /// Type text into the focused field.
        TypeText = "type_text" {
            /// Any Unicode text.
            text: String,
        },
    }
);

/// Matches any text without NUL or the other C0 controls except tab and
/// newline (which a text field takes).
const TEXT_PATTERN: &str = r"^[^\x00-\x08\x0B-\x1F\x7F]*$";

pub(super) fn spec() -> ServiceSpec {
    let target = |a: ActionSpec| {
        a.param(
            "x",
            false,
            Schema::integer("screen x in pixels (give x and y, or element)", Some(0), Some(20_000)),
        )
        .param(
            "y",
            false,
            Schema::integer("screen y in pixels", Some(0), Some(20_000)),
        )
        .param(
            "element",
            false,
            Schema::integer(
                "index of an element in the latest screen.ui_tree of this phone; its centre is used",
                Some(0),
                Some(100_000),
            ),
        )
    };
    let point = |description| {
        Schema::object(
            description,
            vec![
                req(
                    "x",
                    Schema::integer("screen x in pixels", Some(0), Some(20_000)),
                ),
                req(
                    "y",
                    Schema::integer("screen y in pixels", Some(0), Some(20_000)),
                ),
            ],
        )
    };
    let touched = || {
        vec![
            req("x", Schema::integer("", Some(0), None)),
            req("y", Schema::integer("", Some(0), None)),
            opt(
                "element",
                Schema::integer("the element tapped", Some(0), None),
            ),
        ]
    };
    ServiceSpec {
        node_type: "uiControl",
        id: "ui_control",
        description: "Touch and type on the screen: tap, long press, swipe, scroll, keys, text.",
        actions: vec![
            target(action(
                "tap",
                Risk::Medium,
                true,
                "Tap the screen at (x, y) in screen pixels, or the centre of an element by its index in the latest screen.ui_tree (call ui_tree again after the screen changes; an index from an older tree is refused).",
            ))
            .returns(touched())
            .example(json!({"x": 540, "y": 1200})),
            target(action(
                "long_press",
                Risk::Medium,
                true,
                "Touch and hold at (x, y) or on an element of the latest screen.ui_tree.",
            ))
            .param(
                "duration_ms",
                false,
                Schema::integer("how long to hold (default 800)", Some(100), Some(10_000)),
            )
            .returns(touched())
            .example(json!({"x": 540, "y": 1200})),
            action(
                "swipe",
                Risk::Medium,
                true,
                "Drag a finger from one screen point to another.",
            )
            .param("from", true, point("where the finger lands"))
            .param("to", true, point("where the finger lifts"))
            .param(
                "duration_ms",
                false,
                Schema::integer("duration of the movement (default 300)", Some(10), Some(10_000)),
            )
            .returns(vec![
                req("from", point("")),
                req("to", point("")),
                req("duration_ms", Schema::integer("", Some(0), None)),
            ])
            .example(json!({"from": {"x": 540, "y": 1600}, "to": {"x": 540, "y": 600}})),
            action(
                "scroll",
                Risk::Medium,
                true,
                "Scroll the middle of the screen: down shows what is below, up what is above.",
            )
            .param(
                "direction",
                true,
                Schema::enumeration("which content to bring into view", &ScrollDirection::ALL.map(ScrollDirection::as_str)),
            )
            .returns(vec![req("direction", Schema::string(""))])
            .example(json!({"direction": "down"})),
            action(
                "key",
                Risk::Medium,
                true,
                "Press a key: back, home, recents, enter, tab, delete (backspace), volume and d-pad keys. The power button is ui_control.power.",
            )
            .param(
                "key",
                true,
                Schema::enumeration("the key", &Key::ALL.map(Key::as_str)),
            )
            .returns(vec![req("key", Schema::string("the key pressed"))])
            .example(json!({"key": "back"})),
            action(
                "power",
                Risk::High,
                true,
                "Press the power button: turns the screen off or on, and a long press may offer to shut the phone down.",
            )
            .returns(vec![req("key", Schema::string("the key pressed"))]),
            action(
                "type_text",
                Risk::Medium,
                true,
                "Type text into the focused text field (tap the field first). Any Unicode text, spaces, quotes and emoji included, up to 2000 characters.",
            )
            .param(
                "text",
                true,
                Schema::pattern("the text to type", TEXT_PATTERN, TYPE_TEXT_MAX),
            )
            .returns(vec![
                req("typed", Schema::integer("characters typed", Some(0), None)),
                req("method", Schema::string("how: input_text, clipboard_paste or ime_broadcast")),
            ])
            .example(json!({"text": "hello"})),
        ],
        state: None,
        home_assistant: Vec::new(),
        companion_event: None,
    }
}
