//! The `intents` service: open links, share text and start activities.

use super::*;

actions!(
    /// `intents` actions.
    IntentsAction {
        OpenUrl = "open_url" (Medium, changes)
            "Open a link in the app that handles it (browser, maps, store). Only the schemes the daemon allows (http and https by default) are accepted; javascript:, file:, content: and intent: links are always refused."
        {
            /// The link, e.g. `https://example.org/page`.
            url: String = Schema::pattern("", ANY_URL_PATTERN, 2048),
        }
        -> UrlOpened
        example(Self::OpenUrl { url: "https://example.org/".into() }),
        ShareText = "share_text" (Medium, changes)
            "Share text with another app: Android hands it to the one app that takes text (or the default), or shows its chooser for the person to pick one (then `chooser` is true and nothing is shared yet)."
        {
            /// The text to share.
            text: String = text_param("the text to share", 4000),
        }
        -> TextShared
        example(Self::ShareText { text: "Meet at 7, usual place".into() }),
        StartActivity = "start_activity" (High, changes)
            "Start an activity with an explicit intent: a component and/or an action, an optional data URI and typed extras. Needs at least a component or an action."
        {
            /// `package/.Activity` or `package/full.ClassName`.
            component: Option<String> = Schema::pattern(
                "",
                COMPONENT_PATTERN,
                511,
            ),
            /// Intent action, e.g. `android.intent.action.VIEW`.
            action: Option<String> = Schema::pattern(
                "",
                INTENT_ACTION_PATTERN,
                255,
            ),
            /// Data URI, e.g. `geo:0,0?q=cafe`.
            data: Option<String> = Schema::pattern("", ANY_URL_PATTERN, 2048),
            /// Extras, each {key, type, value}.
            extras: Option<Vec<Extra>>,
        }
        -> ActivityStarted
        example(Self::StartActivity {
            component: Some("com.example.notes/.MainActivity".into()),
            action: None,
            data: None,
            extras: Some(vec![
                Extra { key: "note_id".into(), kind: ExtraType::Int, value: "42".into() },
                Extra { key: "title".into(), kind: ExtraType::String, value: "Shopping".into() },
            ]),
        }),
    }
);

/// The type of an intent extra, as `am start` spells its options.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExtraType {
    /// `--es`: a string.
    String,
    /// `--ei`: a 32-bit integer.
    Int,
    /// `--el`: a 64-bit integer.
    Long,
    /// `--ef`: a float.
    Float,
    /// `--ez`: a boolean (`true` or `false`).
    Bool,
}

impl ExtraType {
    /// Every type's wire name.
    pub const NAMES: [&'static str; 5] = ["string", "int", "long", "float", "bool"];

    /// The `am start` option that carries an extra of this type.
    pub fn am_option(self) -> &'static str {
        match self {
            Self::String => "--es",
            Self::Int => "--ei",
            Self::Long => "--el",
            Self::Float => "--ef",
            Self::Bool => "--ez",
        }
    }
}

/// One intent extra: a key, a type and a value written as a string that
/// must read as that type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RawExtra", into = "RawExtra")]
pub struct Extra {
    key: String,
    kind: ExtraType,
    value: String,
}

field_types!(
    Extra => Schema::object(
        "one extra",
        vec![
            req("key", Schema::pattern("the extra's key", EXTRA_KEY_PATTERN, 255)),
            req("type", Schema::enumeration("the value's type", &ExtraType::NAMES)),
            req(
                "value",
                text_param("the value, written as a string: \"42\", \"true\", \"1.5\"", 4000),
            ),
        ],
    ),
);

impl Extra {
    /// The extra's key.
    pub fn key(&self) -> &str {
        &self.key
    }
    /// The extra's type.
    pub fn kind(&self) -> ExtraType {
        self.kind
    }
    /// The value, checked to read as [`Extra::kind`].
    pub fn value(&self) -> &str {
        &self.value
    }
}

#[derive(Serialize, Deserialize)]
struct RawExtra {
    key: String,
    #[serde(rename = "type")]
    kind: ExtraType,
    value: String,
}

impl TryFrom<RawExtra> for Extra {
    type Error = String;
    fn try_from(raw: RawExtra) -> Result<Self, String> {
        let fits = match raw.kind {
            ExtraType::String => true,
            ExtraType::Int => raw.value.parse::<i32>().is_ok(),
            ExtraType::Long => raw.value.parse::<i64>().is_ok(),
            ExtraType::Float => raw.value.parse::<f32>().is_ok_and(f32::is_finite),
            ExtraType::Bool => matches!(raw.value.as_str(), "true" | "false"),
        };
        if !fits {
            return Err(format!(
                "extra {:?}: {:?} is not a valid {} value",
                raw.key,
                raw.value.chars().take(40).collect::<String>(),
                ExtraType::NAMES[raw.kind as usize]
            ));
        }
        Ok(Self {
            key: raw.key,
            kind: raw.kind,
            value: raw.value,
        })
    }
}

impl From<Extra> for RawExtra {
    fn from(e: Extra) -> Self {
        Self {
            key: e.key,
            kind: e.kind,
            value: e.value,
        }
    }
}

records! {
    /// What `intents.open_url` answers.
    UrlOpened {
        /// The link, as given.
        url: String,
        /// `am start`'s status: `ok` or `timeout`.
        status: String,
        /// The activity that opened it, when `am start` names one.
        activity: Option<String>,
        /// Whether Android's chooser is showing instead, for the person to
        /// pick the app: nothing has opened the link yet.
        chooser: bool,
    }

    /// What `intents.share_text` answers.
    TextShared {
        /// Whether an app received the text; `false` while Android's chooser
        /// waits for the person to pick one (`chooser`).
        shared: bool,
        /// Whether Android's chooser is showing for the person to pick an
        /// app: nothing has been shared yet.
        chooser: bool,
        /// The characters shared.
        length: u64,
    }

    /// What `intents.start_activity` answers.
    ActivityStarted {
        /// What was asked for: the component, else the intent action.
        component: String,
        /// `am start`'s status: `ok` or `timeout`.
        status: String,
        /// The activity on top afterwards, when `am start` names one.
        activity: Option<String>,
        /// Whether Android's chooser is showing instead, for the person to
        /// pick the app: the intent has reached no app yet.
        chooser: bool,
    }
}

pub(super) fn spec() -> ServiceSpec {
    ServiceSpec {
        node_type: "intentLauncher",
        id: "intents",
        description: "Open links, share text and start activities with intents.",
        actions: IntentsAction::specs(),
        state: None,
        home_assistant: Vec::new(),
        companion_event: None,
    }
}
