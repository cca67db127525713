//! Images in tool results: a screenshot reaches the model as an image, not
//! as base64 text, and never reaches the store.
//!
//! A device result with `data_base64` and an image `mime_type` (the
//! `screen.screenshot` result) is split in the tool result path
//! ([`detach`]): the image goes to a bounded in-memory stash under a fresh
//! reference, and the result text keeps `image: {ref, mime_type, bytes}`
//! only. That text is what the conversation, checkpoints, events and the
//! memory archive hold. When a request is built, each provider asks
//! [`attached`] for the images of the conversation's tool results, newest
//! first, within [`LlmConfig::max_image_bytes`](crate::LlmConfig) per
//! request, and sends them in its own format (OpenAI-compatible `image_url`
//! data URLs, Anthropic image blocks, Gemini `inline_data`). An image no
//! longer in the stash (the daemon restarted, or it was evicted) or over
//! the budget is simply not sent: the model still reads the reference and
//! the size, and can take a new screenshot.

use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, LazyLock, Mutex};

use crate::message::Message;

/// The most image bytes (base64) the stash keeps, across every run.
const STASH_BYTES: usize = 64 * 1024 * 1024;

/// One image kept for the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// `image/jpeg` or `image/png`.
    pub mime_type: String,
    /// The image, base64.
    pub data_base64: Arc<str>,
}

#[derive(Debug, Default)]
struct Stash {
    images: HashMap<String, Image>,
    order: VecDeque<String>,
    bytes: usize,
}

static STASH: LazyLock<Mutex<Stash>> = LazyLock::new(Mutex::default);

fn stash() -> std::sync::MutexGuard<'static, Stash> {
    STASH.lock().unwrap_or_else(|e| e.into_inner())
}

fn new_ref() -> String {
    format!("img-{}", droidwarden_services::unique_suffix())
}

/// Moves an image out of a tool result into the stash, leaving a
/// reference. Results without an image are returned unchanged. The image
/// is the result's own (`screen.screenshot`) or its `screenshot`'s
/// (`screen.observe`); either way the reference is the result's `image`.
pub fn detach(mut result: Value) -> Value {
    let Some(obj) = result.as_object_mut() else {
        return result;
    };
    if let Some(Value::Object(shot)) = obj.get_mut("screenshot")
        && let Some(image) = stash_image(shot)
    {
        obj.insert("image".into(), image);
        return result;
    }
    if let Some(image) = stash_image(obj) {
        obj.insert("image".into(), image);
    }
    result
}

/// Takes `data_base64` out of `obj` when it holds an image, stashes it and
/// answers the reference to put in its place.
fn stash_image(obj: &mut serde_json::Map<String, Value>) -> Option<Value> {
    let mime = obj
        .get("mime_type")
        .and_then(Value::as_str)
        .filter(|m| m.starts_with("image/"))
        .map(str::to_owned);
    let (Some(mime), Some(Value::String(data))) = (mime, obj.get("data_base64")) else {
        return None;
    };
    let data: Arc<str> = Arc::from(data.as_str());
    obj.remove("data_base64");
    let reference = new_ref();
    let size = data.len();
    let image = serde_json::json!({
        "ref": reference,
        "mime_type": mime,
        "base64_bytes": size,
        "note": "the image itself is attached for you to see",
    });
    let mut s = stash();
    s.images.insert(
        reference.clone(),
        Image {
            mime_type: mime,
            data_base64: data,
        },
    );
    s.order.push_back(reference);
    s.bytes += size;
    while s.bytes > STASH_BYTES {
        let Some(old) = s.order.pop_front() else {
            break;
        };
        if let Some(img) = s.images.remove(&old) {
            s.bytes -= img.data_base64.len();
        }
    }
    Some(image)
}

/// For a model without vision, the command to run instead of `command`:
/// `screen.ui_tree` for `screen.screenshot`, `screen.observe` without its
/// image for `screen.observe` (the tree, the app in front, the lock state).
pub fn without_vision(
    command: &droidwarden_services::Command,
    vision: bool,
) -> Option<droidwarden_services::Command> {
    use droidwarden_services::{Command, ScreenReaderAction};
    match command {
        Command::ScreenReader(ScreenReaderAction::Screenshot { .. }) if !vision => {
            Some(Command::ScreenReader(ScreenReaderAction::UiTree {
                visible_only: None,
                max_nodes: None,
            }))
        }
        Command::ScreenReader(ScreenReaderAction::Observe {
            max_side,
            format,
            quality,
            max_nodes,
            with_image,
        }) if !vision && *with_image != Some(false) => {
            Some(Command::ScreenReader(ScreenReaderAction::Observe {
                max_side: *max_side,
                format: *format,
                quality: *quality,
                max_nodes: *max_nodes,
                with_image: Some(false),
            }))
        }
        _ => None,
    }
}

/// A UI tree given in place of a screenshot, saying so.
pub fn noted_tree(mut tree: Value) -> Value {
    if let Some(obj) = tree.as_object_mut() {
        obj.insert(
            "note".into(),
            Value::String(
                "this model takes no images (no vision): the screen's UI tree is given instead of the screenshot".into(),
            ),
        );
    }
    tree
}

/// The image reference a tool result's text carries, if any.
fn reference(content: &str) -> Option<String> {
    if !content.contains("\"img-") {
        return None;
    }
    let value: Value = serde_json::from_str(content).ok()?;
    value["image"]["ref"].as_str().map(str::to_owned)
}

/// What the note of an image reference says to a model that takes no
/// images.
const NOT_SHOWN: &str = "this model takes no images, so this screenshot cannot be shown: read the screen as text with the screen service's ui_tree action";

/// `messages` for a model that takes no images: each screenshot's result
/// says it cannot be shown, and how to read the screen instead (the
/// result's note otherwise says the image is attached).
pub fn for_text_model(mut messages: Vec<Message>) -> Vec<Message> {
    for m in &mut messages {
        if let Message::Tool { content, .. } = m
            && reference(content).is_some()
            && let Ok(mut value) = serde_json::from_str::<Value>(content)
        {
            value["image"]["note"] = Value::String(NOT_SHOWN.into());
            *content = value.to_string();
        }
    }
    messages
}

/// The images to send with `messages`, by tool call id: the newest first
/// while their base64 size stays within `max_bytes` (an image that does not
/// fit is left out, and so is every older one).
pub fn attached(messages: &[Message], max_bytes: usize) -> HashMap<String, Image> {
    let mut out = HashMap::new();
    let mut budget = max_bytes;
    let s = stash();
    for m in messages.iter().rev() {
        let Message::Tool {
            call_id,
            content,
            is_error: false,
            ..
        } = m
        else {
            continue;
        };
        let Some(image) = reference(content).and_then(|r| s.images.get(&r).cloned()) else {
            continue;
        };
        if image.data_base64.len() > budget {
            break;
        }
        budget -= image.data_base64.len();
        out.insert(call_id.clone(), image);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(call_id: &str, content: &Value) -> Message {
        Message::Tool {
            call_id: call_id.into(),
            name: "android_screen".into(),
            content: content.to_string(),
            is_error: false,
        }
    }

    #[test]
    fn an_image_leaves_the_text_and_comes_back_for_the_request_within_the_budget() {
        let a = detach(
            json!({"mime_type": "image/jpeg", "width": 10, "data_base64": "QUJD".repeat(100)}),
        );
        assert!(a.get("data_base64").is_none());
        assert_eq!(a["width"], 10);
        assert_eq!(a["image"]["base64_bytes"], 400);
        let b = detach(json!({"mime_type": "image/png", "data_base64": "WFla".repeat(50)}));
        let plain = detach(json!({"level": 50}));
        assert_eq!(plain, json!({"level": 50}));
        let messages = vec![tool("c1", &a), tool("c2", &plain), tool("c3", &b)];
        let all = attached(&messages, 10_000);
        assert_eq!(all.len(), 2);
        assert_eq!(all["c1"].mime_type, "image/jpeg");
        assert_eq!(&*all["c3"].data_base64, "WFla".repeat(50));
        // The newest first: only it fits.
        let some = attached(&messages, 300);
        assert_eq!(some.keys().collect::<Vec<_>>(), vec!["c3"]);
        assert!(attached(&messages, 0).is_empty());
        // A reference the stash does not know (a restarted daemon) is text only.
        let unknown = tool("c4", &json!({"image": {"ref": "img-gone"}}));
        assert!(attached(&[unknown], 10_000).is_empty());
        // A text-only model is told the image cannot be shown.
        let text = for_text_model(messages);
        let Message::Tool { content, .. } = &text[0] else {
            panic!()
        };
        assert!(content.contains("cannot be shown") && content.contains("ui_tree"));
        assert!(!content.contains("attached for you"));
        assert_eq!(text[1], tool("c2", &plain));
    }

    #[test]
    fn an_observation_leaves_its_screenshot_image_and_keeps_the_rest() {
        let seen = detach(json!({
            "screen_on": true,
            "locked": false,
            "tree": {"count": 1, "text": "[0] Button \"OK\""},
            "screenshot": {"mime_type": "image/jpeg", "width": 10, "data_base64": "QUJD".repeat(10)},
        }));
        assert!(seen["screenshot"].get("data_base64").is_none());
        assert_eq!(seen["screenshot"]["width"], 10);
        assert_eq!(seen["tree"]["count"], 1);
        assert_eq!(seen["image"]["base64_bytes"], 40);
        let all = attached(&[tool("o1", &seen)], 10_000);
        assert_eq!(&*all["o1"].data_base64, "QUJD".repeat(10));
        // Without an image (a text-only model's observation) nothing moves.
        let text_only = json!({"screen_on": true, "screenshot": null, "tree": {"count": 0}});
        assert_eq!(detach(text_only.clone()), text_only);
    }

    #[test]
    fn a_text_model_observes_without_the_image() {
        use droidwarden_services::{Command, ScreenReaderAction};
        let observe = Command::ScreenReader(ScreenReaderAction::Observe {
            max_side: Some(512),
            format: None,
            quality: None,
            max_nodes: Some(50),
            with_image: None,
        });
        assert_eq!(without_vision(&observe, true), None);
        let Some(Command::ScreenReader(ScreenReaderAction::Observe {
            max_side,
            max_nodes,
            with_image,
            ..
        })) = without_vision(&observe, false)
        else {
            panic!("an observation stays an observation");
        };
        assert_eq!(
            (max_side, max_nodes, with_image),
            (Some(512), Some(50), Some(false))
        );
    }
}
