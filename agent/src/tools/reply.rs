//! The shape of a reply when the provider constrains it (`[llm]
//! tool_choice = "schema"`): one JSON object, either a call of an offered
//! tool, `{"name": "<tool>", "arguments": {…}}`, with the arguments that
//! tool takes — for the phones' tools one branch per action, so the
//! service, the action and its parameters are real ones — or the answer,
//! `{"answer": "…"}`.
//!
//! Small local models write their calls as text, often naming services and
//! actions that do not exist; held to this schema (llama.cpp turns it into
//! a grammar) they can write only calls that parse, which
//! [`crate::recover`] reads as calls with the usual validation, policy and
//! approvals, and answers, which [`answer_of`] unwraps.
//!
//! A grammar has the model write an object's properties in the order the
//! schema gives them, so the schema is serialized here with its keys in
//! that order (`serde_json::Value` would sort them): the tool's name before
//! its arguments, the phone and the service before the action, the action
//! before its parameters. Each choice then narrows the next.

use super::schema::Dialect;
use super::{DESCRIBE_TOOL, DIRECT_PREFIX, TOOLKIT_TOOL, Toolset};
use droidwarden_services::ActionSpec;
use droidwarden_services::schema::Rules;
use serde_json::{Value, json};

/// The answer branch's only key.
pub const ANSWER_KEY: &str = "answer";

/// The longest answer a constrained reply may write: a small model held
/// to JSON can otherwise loop inside the string until its token limit.
const MAX_ANSWER_CHARS: u32 = 2000;

/// How the action parameters are rendered for a grammar: enums and bounds
/// kept, string patterns left out (a server's grammar converter may not
/// take every regular expression; the catalogue checks them anyway).
const GRAMMAR: Rules = Rules {
    string_facets: false,
    closed_objects: true,
    all_required: false,
    omit_empty_objects: false,
};

/// Where a run is, for what its next constrained reply may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyStage {
    /// A run's first reply about the phones: a phone action, nothing else.
    First,
    /// A call of any tool offered, or the answer.
    Any,
    /// Only the answer: the model repeated a call it had made already in
    /// this run, so another call would only bring back what it has.
    Answer,
}

impl ReplyStage {
    /// The stage of a reply after `calls` (the run's tool calls so far, in
    /// order, by name and arguments): [`ReplyStage::Answer`] when the last
    /// model reply's calls had all been made before, with the same
    /// arguments (compared as JSON, so spacing and key order do not
    /// count), else [`ReplyStage::Any`].
    pub fn after<'a>(
        last: &[(&'a str, &'a str)],
        earlier: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Self {
        if last.is_empty() {
            return Self::Any;
        }
        let value = |args: &str| serde_json::from_str::<Value>(args).ok();
        let earlier: Vec<(&str, Option<Value>)> =
            earlier.into_iter().map(|(n, a)| (n, value(a))).collect();
        let repeated = last.iter().all(|(name, args)| {
            let args = value(args);
            earlier.iter().any(|(n, a)| n == name && *a == args)
        });
        if repeated { Self::Answer } else { Self::Any }
    }
}

/// A JSON schema node whose object keys keep their order.
enum Node {
    /// An object schema: its properties, in order, all required, closed.
    Object(Vec<(String, Node)>),
    /// `anyOf` these.
    AnyOf(Vec<Node>),
    /// Any other schema, as it is (its own key order does not matter).
    Leaf(Value),
}

impl Node {
    fn write(&self, out: &mut String) {
        match self {
            Self::Object(props) => {
                out.push_str(r#"{"type":"object","properties":{"#);
                for (i, (key, node)) in props.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&json!(key).to_string());
                    out.push(':');
                    node.write(out);
                }
                out.push_str(r#"},"required":"#);
                let keys: Vec<&str> = props.iter().map(|(k, _)| k.as_str()).collect();
                out.push_str(&json!(keys).to_string());
                out.push_str(r#","additionalProperties":false}"#);
            }
            Self::AnyOf(branches) => {
                out.push_str(r#"{"anyOf":["#);
                for (i, branch) in branches.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    branch.write(out);
                }
                out.push_str("]}");
            }
            Self::Leaf(value) => out.push_str(&value.to_string()),
        }
    }
}

/// `{"name": tool, "arguments": arguments}`.
fn call(tool: &str, arguments: Node) -> Node {
    Node::Object(vec![
        ("name".into(), Node::Leaf(json!({ "const": tool }))),
        ("arguments".into(), arguments),
    ])
}

impl Toolset {
    /// The JSON schema a constrained reply follows, serialized (see the
    /// module documentation): one branch per tool offered — per action for
    /// the phones' tools — and the answer, as `stage` allows.
    /// `describe_action` is never a branch: the schema already holds every
    /// action's parameters, so the reply cannot get them wrong.
    pub fn reply_schema(&self, stage: ReplyStage) -> String {
        let first = stage == ReplyStage::First;
        let mut branches = Vec::new();
        for spec in self.specs().iter() {
            if stage == ReplyStage::Answer {
                break;
            }
            if spec.name == DESCRIBE_TOOL {
                continue;
            }
            if spec.name == TOOLKIT_TOOL {
                for service in &self.services {
                    for action in &service.actions {
                        let arguments = self.action_arguments(Some(service.id), action);
                        branches.push(call(&spec.name, arguments));
                    }
                }
                continue;
            }
            let direct = spec
                .name
                .strip_prefix(DIRECT_PREFIX)
                .and_then(|id| self.services.iter().find(|s| s.id == id));
            match direct {
                Some(service) => {
                    for action in &service.actions {
                        branches.push(call(&spec.name, self.action_arguments(None, action)));
                    }
                }
                None if first => {}
                None => {
                    let arguments = spec
                        .parameters_for(Dialect::Anthropic)
                        .unwrap_or_else(|| json!({"type": "object"}));
                    branches.push(call(&spec.name, Node::Leaf(arguments)));
                }
            }
        }
        if !first {
            let answer = json!({"type": "string", "maxLength": MAX_ANSWER_CHARS});
            branches.push(Node::Object(vec![(ANSWER_KEY.into(), Node::Leaf(answer))]));
        }
        let mut out = String::new();
        Node::AnyOf(branches).write(&mut out);
        out
    }

    /// The arguments of a phone tool's call of `action`: the phone (named
    /// when there are several), the service (`service_id`, for the toolkit
    /// tool), the action, and its parameters.
    fn action_arguments(&self, service_id: Option<&str>, action: &ActionSpec) -> Node {
        let mut props = Vec::new();
        if self.devices.len() > 1 {
            let names: Vec<&str> = self.devices.iter().map(|d| d.name.as_str()).collect();
            props.push(("device".into(), Node::Leaf(json!({ "enum": names }))));
        }
        if let Some(id) = service_id {
            props.push(("service_id".into(), Node::Leaf(json!({ "const": id }))));
        }
        props.push(("action".into(), Node::Leaf(json!({ "const": action.name }))));
        let parameters = action
            .params_schema()
            .render(GRAMMAR)
            .unwrap_or_else(|| json!({"type": "object"}));
        props.push(("parameters".into(), Node::Leaf(parameters)));
        Node::Object(props)
    }
}

/// The answer in a constrained reply, `{"answer": "…"}` and nothing else;
/// `None` for any other text.
pub fn answer_of(text: &str) -> Option<String> {
    let trimmed = text.trim();
    if !trimmed.starts_with('{') {
        return None;
    }
    match serde_json::from_str::<Value>(trimmed).ok()? {
        Value::Object(map) if map.len() == 1 => map.get(ANSWER_KEY)?.as_str().map(str::to_owned),
        _ => None,
    }
}
