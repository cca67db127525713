//! Tool calls written as text. Small local models often answer with a
//! call in their text instead of a native tool call: `{"name":
//! "android_device", "arguments": {…}}` bare or in a ```json fence, or
//! wrapped the way their chat template taught them (`<tool_call>…</tool_call>`
//! for Qwen and Hermes, `<|python_tag|>` and `<function=name>{…}</function>`
//! for Llama 3, `[TOOL_CALLS]` for Mistral) when the server did not parse it.
//!
//! [`recover`] reads the model's own reply text — never a tool result, so a
//! "call" inside a notification or a screen's text is never run — and
//! returns the calls it holds, each to a tool the run offers. The calls then
//! go through the same validation, policy and approvals as native ones
//! ([`crate::graph`]). Text that looks like a failed attempt (a wrapper with
//! no valid JSON inside, a call to a tool the run does not have) is
//! reported as such, so the model can be told what a call must look like.
//!
//! Pure: no I/O, no state.

use crate::message::ToolCall;
use serde_json::{Map, Value};

/// What the reply text holds.
#[derive(Debug, Clone, PartialEq)]
pub enum Recovery {
    /// Plain text: no call, no attempt at one.
    Text,
    /// Calls to offered tools.
    Calls {
        /// The calls (ids left empty: the graph gives fresh ones).
        calls: Vec<ToolCall>,
        /// How they were written: `tool_call_tag`, `python_tag`,
        /// `function_tag`, `tool_calls_marker`, `fenced_json` or `json`.
        format: &'static str,
        /// The text around them (what the model said besides the calls).
        rest: String,
    },
    /// Something that looks like an attempt at a call but is none; the
    /// reason, for the model.
    Failed(String),
}

/// The most calls taken from one reply (a model that writes a long list
/// of "calls" is not making calls).
const MAX_CALLS: usize = 8;

/// The most `{` positions tried when looking for a bare JSON call in
/// prose: bounds the work on a long reply.
const MAX_STARTS: usize = 32;

/// Read `text` for tool calls to the tools `offered` (their names).
/// `toolkit` names the toolkit tool when the run has it: a bare object of
/// its arguments (`{"service_id": …, "action": …}`) is taken as a call to
/// it.
pub fn recover(text: &str, offered: &[&str], toolkit: Option<&str>) -> Recovery {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Recovery::Text;
    }
    for (open, close, format) in WRAPPERS {
        if let Some(found) = wrapped(trimmed, open, close) {
            return judge(found, format, offered, toolkit, open);
        }
    }
    if let Some(found) = function_tags(trimmed) {
        return judge(found, "function_tag", offered, toolkit, "<function=");
    }
    if let Some(found) = fenced(trimmed) {
        // A fence that holds something other than a call (an example, a
        // result) is plain text.
        return loose(judge(found, "fenced_json", offered, toolkit, "```"));
    }
    // Prose that merely contains a JSON object is an answer, unless the
    // object is shaped as a call.
    bare(trimmed).map_or(Recovery::Text, |found| {
        loose(judge(found, "json", offered, toolkit, "the JSON"))
    })
}

/// Outside a wrapper, only a clear attempt (a call object to an unknown
/// tool) counts as a failed call; any other JSON is part of an answer.
fn loose(judged: Recovery) -> Recovery {
    match judged {
        Recovery::Failed(why) if why.starts_with(UNKNOWN_TOOL) => Recovery::Failed(why),
        Recovery::Failed(_) => Recovery::Text,
        other => other,
    }
}

/// How a failure naming a tool that does not exist begins.
const UNKNOWN_TOOL: &str = "there is no tool named";

/// The wrapped formats: opening marker, closing marker (empty: to the end
/// of the text or the next opening marker), format name.
const WRAPPERS: [(&str, &str, &str); 4] = [
    ("<tool_call>", "</tool_call>", "tool_call_tag"),
    ("<|python_tag|>", "<|eom_id|>", "python_tag"),
    ("[TOOL_CALLS]", "", "tool_calls_marker"),
    ("<function_call>", "</function_call>", "tool_call_tag"),
];

/// What was found: the JSON texts of the calls and the text around them.
struct Found {
    bodies: Vec<Body>,
    rest: String,
}

/// One call's text: JSON (a call object, or an array of them), or a
/// `<function=name>` call's name and JSON arguments.
enum Body {
    Json(String),
    Named(String, String),
}

fn wrapped(text: &str, open: &str, close: &str) -> Option<Found> {
    if !text.contains(open) {
        return None;
    }
    let mut bodies = Vec::new();
    let mut rest = String::new();
    let mut tail = text;
    while let Some(start) = tail.find(open) {
        rest.push_str(&tail[..start]);
        let after = &tail[start + open.len()..];
        let end = if close.is_empty() {
            after.find(open).unwrap_or(after.len())
        } else {
            after
                .find(close)
                .or_else(|| after.find(open))
                .unwrap_or(after.len())
        };
        bodies.push(Body::Json(after[..end].trim().to_owned()));
        tail = &after[end..];
        if let Some(t) = tail.strip_prefix(close).filter(|_| !close.is_empty()) {
            tail = t;
        }
        // Llama's end-of-turn markers are not text.
        for marker in ["<|eot_id|>", "<|eom_id|>"] {
            if let Some(t) = tail.strip_prefix(marker) {
                tail = t;
            }
        }
    }
    rest.push_str(tail);
    Some(Found {
        bodies,
        rest: rest.trim().to_owned(),
    })
}

/// Llama 3's `<function=name>{"arg": …}</function>`.
fn function_tags(text: &str) -> Option<Found> {
    const OPEN: &str = "<function=";
    const CLOSE: &str = "</function>";
    if !text.contains(OPEN) {
        return None;
    }
    let mut bodies = Vec::new();
    let mut rest = String::new();
    let mut tail = text;
    while let Some(start) = tail.find(OPEN) {
        rest.push_str(&tail[..start]);
        let after = &tail[start + OPEN.len()..];
        let (name, args) = after.split_once('>').unwrap_or((after, ""));
        let end = args.find(CLOSE).unwrap_or(args.len());
        bodies.push(Body::Named(
            name.trim().to_owned(),
            args[..end].trim().to_owned(),
        ));
        tail = args[end..].strip_prefix(CLOSE).unwrap_or(&args[end..]);
    }
    rest.push_str(tail);
    Some(Found {
        bodies,
        rest: rest.trim().to_owned(),
    })
}

/// The first ``` fence (```json or bare) whose content is JSON.
fn fenced(text: &str) -> Option<Found> {
    let start = text.find("```")?;
    let after = &text[start + 3..];
    let line_end = after.find('\n')?;
    let lang = after[..line_end].trim();
    if !(lang.is_empty() || lang.eq_ignore_ascii_case("json")) {
        return None;
    }
    let inner = &after[line_end + 1..];
    let end = inner.find("```").unwrap_or(inner.len());
    let body = inner[..end].trim();
    if !(body.starts_with('{') || body.starts_with('[')) {
        return None;
    }
    let close = (end + 3).min(inner.len());
    let rest = format!("{}{}", &text[..start], &inner[close..]);
    Some(Found {
        bodies: vec![Body::Json(body.to_owned())],
        rest: rest.trim().to_owned(),
    })
}

/// A JSON object or array in the text, as a whole or inside prose.
fn bare(text: &str) -> Option<Found> {
    for (i, c) in text
        .char_indices()
        .filter(|(_, c)| *c == '{' || *c == '[')
        .take(MAX_STARTS)
    {
        let mut values = serde_json::Deserializer::from_str(&text[i..]).into_iter::<Value>();
        let Some(Ok(value)) = values.next() else {
            continue;
        };
        let end = i + values.byte_offset();
        // A `[` that opens prose ("[see below]") or an array of numbers is
        // not a call; only objects (or arrays of them) are considered.
        if c == '['
            && !value
                .as_array()
                .is_some_and(|a| a.iter().all(Value::is_object))
        {
            continue;
        }
        let rest = format!("{}{}", &text[..i], &text[end..]);
        return Some(Found {
            bodies: vec![Body::Json(text[i..end].to_owned())],
            rest: rest.trim().to_owned(),
        });
    }
    None
}

/// Turn what was found into calls to offered tools, or say why not.
fn judge(
    found: Found,
    format: &'static str,
    offered: &[&str],
    toolkit: Option<&str>,
    marker: &str,
) -> Recovery {
    let mut calls = Vec::new();
    for body in found.bodies {
        let candidates = match body {
            Body::Named(name, args) => vec![(name, args)],
            Body::Json(text) => {
                let value = match serde_json::from_str::<Value>(&text) {
                    Ok(v) => v,
                    Err(e) => {
                        return Recovery::Failed(format!(
                            "the text after {marker} is not valid JSON ({e})"
                        ));
                    }
                };
                match calls_in(value, toolkit) {
                    Ok(found) => found,
                    Err(why) => return Recovery::Failed(why),
                }
            }
        };
        for (name, arguments) in candidates {
            if offered.contains(&name.as_str()) {
                calls.push(ToolCall::new(String::new(), name, arguments));
                continue;
            }
            if let Some(call) = toolkit.and_then(|tool| as_service_call(tool, &name, &arguments)) {
                calls.push(call);
                continue;
            }
            return Recovery::Failed(format!(
                "{UNKNOWN_TOOL} {:?}; the tools are: {}",
                name.chars().take(64).collect::<String>(),
                offered.join(", ")
            ));
        }
    }
    if calls.is_empty() {
        return Recovery::Failed(format!("no call was found after {marker}"));
    }
    calls.truncate(MAX_CALLS);
    Recovery::Calls {
        calls,
        format,
        rest: found.rest,
    }
}

/// A call that names a service instead of a tool — `{"name": "battery",
/// "arguments": {"action": "status"}}`, or `android_battery` in a run
/// that has the toolkit tool instead — as a call to the toolkit tool
/// `tool` with `service_id` set to that service. Only a service of the
/// catalogue qualifies, and only when the arguments are an object that
/// names no other service; the call then meets the toolkit's own
/// validation (an action missing or unknown is told to the model with the
/// service's actions), the policy and approvals like any other.
fn as_service_call(tool: &str, name: &str, arguments: &str) -> Option<ToolCall> {
    let bare = name.strip_prefix("android_").unwrap_or(name);
    let service = droidwarden_services::Catalogue::get().service(bare).ok()?;
    let mut args = match serde_json::from_str::<Value>(arguments).ok()? {
        Value::Object(map) => map,
        _ => return None,
    };
    match args.get("service_id") {
        None => {
            args.insert("service_id".into(), Value::String(service.id.to_owned()));
        }
        Some(Value::String(given))
            if droidwarden_services::Catalogue::get()
                .service(given)
                .is_ok_and(|s| s.id == service.id) => {}
        // Another service in the arguments: which one was meant is not
        // clear, so this is no call.
        Some(_) => return None,
    }
    Some(ToolCall::new(
        String::new(),
        tool.to_owned(),
        Value::Object(args).to_string(),
    ))
}

/// The `(name, arguments JSON text)` pairs of a parsed value: a call
/// object, an array of them, or `{"tool_calls": [...]}`.
fn calls_in(value: Value, toolkit: Option<&str>) -> Result<Vec<(String, String)>, String> {
    match value {
        Value::Array(items) => {
            let mut out = Vec::new();
            for item in items {
                out.extend(calls_in(item, toolkit)?);
            }
            Ok(out)
        }
        Value::Object(mut map) => {
            if let Some(Value::Array(items)) = map.remove("tool_calls") {
                return calls_in(Value::Array(items), toolkit);
            }
            if let Some(Value::Object(function)) = map.remove("function") {
                return calls_in(Value::Object(function), toolkit);
            }
            let name = ["name", "tool", "tool_name", "function_name"]
                .iter()
                .find_map(|k| map.get(*k).and_then(Value::as_str).map(str::to_owned));
            let args = ["arguments", "parameters", "args", "input", "tool_input"]
                .iter()
                .find_map(|k| map.get(*k).cloned());
            // A name alone, or with arguments: `{"name": "Bob", "phone":
            // …}` is a contact, not a call.
            if let Some(name) = name.filter(|_| args.is_some() || map.len() == 1) {
                let args = args.unwrap_or_else(|| Value::Object(Map::new()));
                let arguments = match args {
                    // Arguments as JSON text (OpenAI's own shape).
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                return Ok(vec![(name, arguments)]);
            }
            // The toolkit's arguments alone, without the tool's name.
            if let Some(tool) = toolkit
                && map.contains_key("service_id")
                && map.contains_key("action")
            {
                return Ok(vec![(tool.to_owned(), Value::Object(map).to_string())]);
            }
            Err("the JSON is not a tool call: it needs \"name\" and \"arguments\"".to_owned())
        }
        _ => Err("the JSON is not a tool call object".to_owned()),
    }
}

/// What a call written as text must look like, for the model that got it
/// wrong: `tool` and `example` name one of its tools.
pub fn how_to_call(why: &str, tool: &str, example: &Value) -> String {
    format!(
        "Your reply looked like a tool call, but it was not one: {why}. To call a tool, use the tool-calling interface, or reply with only this JSON object and nothing else: {{\"name\": \"{tool}\", \"arguments\": {example}}} (the tool's name, then its arguments as a JSON object). If you meant to answer the user, answer in plain words without JSON."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const OFFERED: &[&str] = &["android_device", "calculator"];

    fn calls(text: &str) -> (Vec<(String, Value)>, &'static str, String) {
        match recover(text, OFFERED, Some("android_device")) {
            Recovery::Calls {
                calls,
                format,
                rest,
            } => (
                calls
                    .into_iter()
                    .map(|c| (c.name, serde_json::from_str(&c.arguments).unwrap()))
                    .collect(),
                format,
                rest,
            ),
            other => panic!("{text}: {other:?}"),
        }
    }

    fn failed(text: &str) -> String {
        match recover(text, OFFERED, Some("android_device")) {
            Recovery::Failed(why) => why,
            other => panic!("{text}: {other:?}"),
        }
    }

    fn battery() -> Value {
        serde_json::json!({"service_id": "battery", "action": "status"})
    }

    #[test]
    fn the_formats_small_models_write_are_recovered() {
        let call = r#"{"name": "android_device", "arguments": {"service_id": "battery", "action": "status"}}"#;
        let cases: Vec<(String, &str)> = vec![
            (call.to_owned(), "json"),
            (format!("```json\n{call}\n```"), "fenced_json"),
            (format!("```\n{call}\n```"), "fenced_json"),
            (format!("<tool_call>\n{call}\n</tool_call>"), "tool_call_tag"),
            // Cut before the closing tag.
            (format!("<tool_call>\n{call}"), "tool_call_tag"),
            (format!("<|python_tag|>{call}<|eom_id|>"), "python_tag"),
            (format!("[TOOL_CALLS] [{call}]"), "tool_calls_marker"),
            (
                r#"<function=android_device>{"service_id": "battery", "action": "status"}</function>"#
                    .to_owned(),
                "function_tag",
            ),
            // Llama's "parameters", OpenAI's nested function with text arguments.
            (
                r#"{"name": "android_device", "parameters": {"service_id": "battery", "action": "status"}}"#
                    .to_owned(),
                "json",
            ),
            (
                r#"{"type": "function", "function": {"name": "android_device", "arguments": "{\"service_id\": \"battery\", \"action\": \"status\"}"}}"#
                    .to_owned(),
                "json",
            ),
            // The toolkit's arguments alone.
            (r#"{"service_id": "battery", "action": "status"}"#.to_owned(), "json"),
        ];
        for (text, format) in cases {
            let (found, got, _) = calls(&text);
            assert_eq!(got, format, "{text}");
            assert_eq!(
                found,
                vec![("android_device".to_owned(), battery())],
                "{text}"
            );
        }
    }

    #[test]
    fn prose_around_a_call_is_kept_and_several_calls_are_read() {
        let (found, format, rest) = calls(
            "Let me check both.\n<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\": \"1+1\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"android_device\", \"arguments\": {\"service_id\": \"battery\", \"action\": \"status\"}}\n</tool_call>",
        );
        assert_eq!(format, "tool_call_tag");
        assert_eq!(rest, "Let me check both.");
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].0, "calculator");
        let (found, _, rest) = calls(
            "I will read the battery: {\"name\": \"android_device\", \"arguments\": {\"service_id\": \"battery\", \"action\": \"status\"}} now.",
        );
        assert_eq!(found.len(), 1);
        assert_eq!(rest, "I will read the battery:  now.");
    }

    #[test]
    fn plain_answers_stay_answers() {
        for text in [
            "The battery is at 77 %.",
            "",
            "Result: {\"level_percent\": 77} — fully charged soon.",
            "```json\n{\"level_percent\": 77}\n```",
            "Options [1, 2, 3] are available.",
            "Use {braces} like this",
            "Bob's card: {\"name\": \"Bob\", \"phone\": \"+1 555\"}",
        ] {
            assert_eq!(
                recover(text, OFFERED, Some("android_device")),
                Recovery::Text,
                "{text}"
            );
        }
    }

    #[test]
    fn failed_attempts_are_told_apart() {
        assert!(failed("<tool_call>\n{\"name\": \"android_device\", \"arguments\": {\"service_id\": \n</tool_call>").contains("not valid JSON"));
        assert!(
            failed("<tool_call>{\"name\": \"send_money\", \"arguments\": {}}</tool_call>")
                .contains("\"send_money\"")
        );
        assert!(
            failed("{\"name\": \"wifi_off\", \"arguments\": {}}")
                .contains("no tool named \"wifi_off\"")
        );
        assert!(
            failed("```json\n{\"name\": \"wifi_off\", \"arguments\": {}}\n```")
                .contains("wifi_off")
        );
        assert!(failed("<tool_call>\n\n</tool_call>").contains("not valid JSON"));
        let told = how_to_call("x", "android_device", &battery());
        assert!(
            told.contains(r#"{"name": "android_device", "arguments": {"#),
            "{told}"
        );
    }

    #[test]
    fn long_lists_are_bounded() {
        let one = r#"{"name": "calculator", "arguments": {"expression": "1"}}"#;
        let many = format!("[{}]", vec![one; 50].join(","));
        let (found, _, _) = calls(&many);
        assert_eq!(found.len(), MAX_CALLS);
    }

    /// Small models name the service rather than the toolkit tool: such a
    /// call is the toolkit's, with the service filled in, and meets the
    /// toolkit's validation like any other; a name that is no service, or
    /// arguments naming another service, stay a failed call.
    #[test]
    fn a_call_naming_a_service_is_the_toolkits() {
        let (found, _, _) = calls(r#"{"name": "battery", "arguments": {"action": "status"}}"#);
        assert_eq!(found, [("android_device".to_owned(), battery())]);
        let (found, _, _) = calls(
            r#"<tool_call>{"name": "android_battery", "arguments": {"action": "status"}}</tool_call>"#,
        );
        assert_eq!(found, [("android_device".to_owned(), battery())]);
        // The node type names the service too; a repeated service_id agrees.
        let (found, _, _) = calls(
            r#"{"name": "batteryMonitor", "arguments": {"service_id": "battery", "action": "status"}}"#,
        );
        assert_eq!(found, [("android_device".to_owned(), battery())]);
        // No action: still the toolkit's call, whose validation tells the
        // model the service's actions.
        let (found, _, _) = calls(r#"{"name": "battery", "arguments": {"status": "discharging"}}"#);
        assert_eq!(
            found,
            [(
                "android_device".to_owned(),
                serde_json::json!({"service_id": "battery", "status": "discharging"})
            )]
        );
        for text in [
            r#"{"name": "set_screen_brightness", "arguments": {"level": 255}}"#,
            r#"{"name": "battery", "arguments": {"service_id": "wifi_automation", "action": "disable"}}"#,
            r#"{"name": "battery", "arguments": "not an object"}"#,
        ] {
            assert!(failed(text).starts_with(UNKNOWN_TOOL), "{text}");
        }
        // Without the toolkit tool nothing is renamed.
        assert!(matches!(
            recover(
                r#"{"name": "battery", "arguments": {"action": "status"}}"#,
                OFFERED,
                None
            ),
            Recovery::Failed(_)
        ));
    }
}
