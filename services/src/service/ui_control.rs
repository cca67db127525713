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
    ///
    /// The screen's actions are `low` by themselves: the app in front
    /// raises them (`[phone_services.ui]`, `policy::ui`), checked by the
    /// hub in the device's turn for every caller.
    UiControlAction {
        Tap = "tap" (Low, changes)
            "Tap the screen at (x, y) in screen pixels, or the centre of an element by its index in the latest screen.ui_tree (call ui_tree again after the screen changes; an index from an older tree is refused)."
        {
            /// Screen x (with y).
            x: Option<u32> = target_x(),
            /// Screen y (with x).
            y: Option<u32> = target_y(),
            /// An index from the latest `screen.ui_tree` (instead of x, y).
            element: Option<u32> = target_element(),
        }
        -> Touched
        example(Self::Tap { x: Some(540), y: Some(1200), element: None }),
        LongPress = "long_press" (Low, changes)
            "Touch and hold at (x, y) or on an element of the latest screen.ui_tree."
        {
            /// Screen x (with y).
            x: Option<u32> = target_x(),
            /// Screen y (with x).
            y: Option<u32> = target_y(),
            /// An index from the latest `screen.ui_tree` (instead of x, y).
            element: Option<u32> = target_element(),
            /// How long to hold (default 800).
            duration_ms: Option<u32> = Schema::integer("", Some(100), Some(10_000)),
        }
        -> Touched
        example(Self::LongPress { x: Some(540), y: Some(1200), element: None, duration_ms: None }),
        Swipe = "swipe" (Low, changes) "Drag a finger from one screen point to another." {
            /// Where the finger lands.
            from: Point = point("where the finger lands"),
            /// Where it lifts.
            to: Point = point("where the finger lifts"),
            /// Duration of the movement (default 300).
            duration_ms: Option<u32> = Schema::integer("", Some(10), Some(10_000)),
        }
        -> Swiped
        example(Self::Swipe {
            from: Point { x: 540, y: 1600 },
            to: Point { x: 540, y: 600 },
            duration_ms: None,
        }),
        Scroll = "scroll" (Low, changes)
            "Scroll the middle of the screen: down shows what is below, up what is above."
        {
            /// Which content to bring into view.
            direction: ScrollDirection,
        }
        -> Scrolled
        example(Self::Scroll { direction: ScrollDirection::Down }),
        Key = "key" (Low, changes)
            "Press a key: back, home, recents, enter, tab, delete (backspace), volume and d-pad keys. The power button is ui_control.power."
        {
            /// The key.
            key: Key,
        }
        -> KeyPressed
        example(Self::Key { key: Key::Back }),
        Power = "power" (High, changes)
            "Press the power button: turns the screen off or on, and a long press may offer to shut the phone down."
        -> KeyPressed,
        TypeText = "type_text" (Low, changes)
            "Type text into the focused text field (tap the field first). Any Unicode text, spaces, quotes and emoji included, up to 2000 characters."
        {
            /// The text to type.
            text: String = Schema::pattern("", TEXT_PATTERN, TYPE_TEXT_MAX),
        }
        -> TextTyped
        example(Self::TypeText { text: "hello".into() }),
        GetClipboard = "get_clipboard" (Medium, reads)
            "Read the text on the phone's clipboard (it may hold what the person copied: a password, a code). Over ADB it needs the on-device UI server (docs/screen-component.md)."
        -> ClipboardText,
        SetClipboard = "set_clipboard" (Medium, changes)
            "Put text on the phone's clipboard, replacing what is there. Over ADB it needs the on-device UI server (docs/screen-component.md)."
        {
            /// The text to put on the clipboard.
            text: String = Schema::pattern("", TEXT_PATTERN, TYPE_TEXT_MAX),
        }
        -> ClipboardSet
        example(Self::SetClipboard { text: "hello".into() }),
    }
);

/// Matches any text without NUL or the other C0 controls except tab and
/// newline (which a text field takes).
const TEXT_PATTERN: &str = r"^[^\x00-\x08\x0B-\x1F\x7F]*$";

records! {
    /// What `tap` and `long_press` answer: where the finger went.
    Touched {
        /// Screen x in pixels.
        x: u32,
        /// Screen y in pixels.
        y: u32,
        /// The element of the latest `screen.ui_tree` touched, when one was given.
        element: Option<u32>,
    }

    /// What `swipe` answers.
    Swiped {
        /// Where the finger landed.
        from: Point = point(""),
        /// Where it lifted.
        to: Point = point(""),
        /// How long the movement took.
        duration_ms: u32,
    }

    /// What `scroll` answers.
    Scrolled {
        /// The direction given: `up`, `down`, `left` or `right`.
        direction: String,
    }

    /// What `key` and `power` answer.
    KeyPressed {
        /// The key pressed: a `key` name, or `power`.
        key: String,
    }

    /// What `type_text` answers.
    TextTyped {
        /// The characters typed.
        typed: u64,
        /// How: `input_text`, `clipboard_paste` or `ime_broadcast`.
        method: String,
    }

    /// What `get_clipboard` answers.
    ClipboardText {
        /// The clipboard's text; absent when it holds no text.
        text: Option<String>,
        /// Which path answered: `ui_server` (the on-device UI server) or
        /// `companion`.
        via: Option<String>,
    }

    /// What `set_clipboard` answers.
    ClipboardSet {
        /// The characters put on the clipboard.
        length: u64,
        /// Which path answered: `ui_server` (the on-device UI server) or
        /// `companion`.
        via: Option<String>,
    }
}

pub(super) fn spec() -> ServiceSpec {
    ServiceSpec {
        node_type: "uiControl",
        id: "ui_control",
        description: "Touch and type on the screen: tap, long press, swipe, scroll, keys, text, the clipboard.",
        actions: UiControlAction::specs(),
        state: None,
        home_assistant: Vec::new(),
        companion_event: None,
    }
}

/// Where `tap` and `long_press` touch: x with y, or an element.
fn target_x() -> Schema {
    Schema::integer(
        "screen x in pixels (give x and y, or element)",
        Some(0),
        Some(20_000),
    )
}

fn target_y() -> Schema {
    Schema::integer("screen y in pixels", Some(0), Some(20_000))
}

fn target_element() -> Schema {
    Schema::integer(
        "index of an element in the latest screen.ui_tree of this phone; its centre is used",
        Some(0),
        Some(100_000),
    )
}

field_types!(
    Point => point(""),
    ScrollDirection => Schema::enumeration("", &ScrollDirection::ALL.map(ScrollDirection::as_str)),
    Key => Schema::enumeration("", &Key::ALL.map(Key::as_str)),
);

/// A screen point, `{x, y}`.
fn point(description: &'static str) -> Schema {
    Schema::object(
        description,
        vec![
            req(
                "x",
                Schema::integer("screen x in pixels", Some(0), Some(20_000)),
            ),
            req("y", target_y()),
        ],
    )
}
