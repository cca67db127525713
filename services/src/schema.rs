//! A small JSON Schema subset: enough to describe every parameter and result
//! in the catalogue, to render standard JSON Schema for callers and language
//! models, and to validate untrusted JSON with errors that name the path.
//!
//! We keep our own type instead of a generic schema library because the
//! schemas must be inlined (no `$ref`) and stay inside the subset that OpenAI
//! strict mode, Anthropic and Gemini all accept. One renderer writes the
//! standard form and each provider's subset ([`Rules`], chosen by the
//! agent); text may be owned, for schemas built at run time (the agent's
//! tool lists).

use regex::Regex;
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

/// Text in a schema (a description, an enumeration value): `&'static` in
/// the catalogue, owned where a schema is built at run time (the agent's
/// tool lists name the configured devices and agents).
pub type Text = Cow<'static, str>;

/// The shape of one JSON value.
#[derive(Debug, Clone)]
pub enum Kind {
    /// A string, optionally restricted.
    String {
        /// Allowed values, if the string is an enumeration.
        values: Option<Vec<Text>>,
        /// A regular expression the whole string must match.
        pattern: Option<(&'static str, Arc<Regex>)>,
        /// Maximum length in characters.
        max_len: Option<usize>,
    },
    /// An integer with optional inclusive bounds.
    Integer {
        /// Inclusive minimum.
        min: Option<i64>,
        /// Inclusive maximum.
        max: Option<i64>,
    },
    /// Any JSON number.
    Number,
    /// `true` or `false`.
    Boolean,
    /// An object with known properties and no others.
    Object(Vec<Property>),
    /// An array whose items share one schema.
    Array(Box<Schema>),
}

/// A schema: a kind, a description and whether `null` is allowed.
#[derive(Debug, Clone)]
pub struct Schema {
    /// What the value is.
    pub kind: Kind,
    /// A one-line description for people and language models.
    pub description: Text,
    /// Whether `null` is accepted in place of the value (results only).
    pub nullable: bool,
}

/// One property of an object schema.
#[derive(Debug, Clone)]
pub struct Property {
    /// Property name.
    pub name: &'static str,
    /// Whether the property must be present.
    pub required: bool,
    /// The property's schema.
    pub schema: Schema,
}

/// A validation failure: where, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Dotted path to the offending value (`""` for the root).
    pub path: String,
    /// What is wrong.
    pub reason: String,
    /// Which kind of failure, so callers can map it to their own errors.
    pub kind: ViolationKind,
}

/// The kinds of validation failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ViolationKind {
    /// A property that the schema does not list.
    Unknown,
    /// A required property that is absent.
    Missing,
    /// A value of the wrong type or outside its bounds.
    Invalid,
}

/// Which JSON Schema keywords a rendering uses. [`Rules::STANDARD`] uses
/// them all; a reader that takes a subset (a language model provider's tool
/// format, chosen by the agent) turns some off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules {
    /// `pattern` and `maxLength` on strings.
    pub string_facets: bool,
    /// `additionalProperties: false` on every object.
    pub closed_objects: bool,
    /// Every property listed in `required`, an optional one typed
    /// `[T, "null"]` instead (OpenAI strict mode).
    pub all_required: bool,
    /// Leave out an object without properties (a reader that rejects
    /// them): the node renders as `None`, and so does an array of them; a
    /// property whose schema is left out is left out.
    pub omit_empty_objects: bool,
}

impl Rules {
    /// Standard JSON Schema (draft 2020-12 subset, no `$ref`).
    pub const STANDARD: Rules = Rules {
        string_facets: true,
        closed_objects: true,
        all_required: false,
        omit_empty_objects: false,
    };
}

impl Schema {
    fn new(kind: Kind, description: impl Into<Text>) -> Self {
        Self {
            kind,
            description: description.into(),
            nullable: false,
        }
    }

    /// A free string.
    pub fn string(description: impl Into<Text>) -> Self {
        Self::new(
            Kind::String {
                values: None,
                pattern: None,
                max_len: None,
            },
            description,
        )
    }

    /// A string that must match `pattern` (anchored by the caller) and be at
    /// most `max_len` characters long. Bound the length with `max_len`, not
    /// with a counted repetition in the pattern: `[^\x00]{0,4095}` compiles
    /// to megabytes of automaton, `[^\x00]*` to a few hundred bytes.
    ///
    /// # Panics
    /// If `pattern` is not a valid regular expression; patterns are
    /// compile-time constants checked by the catalogue's tests.
    pub fn pattern(description: impl Into<Text>, pattern: &'static str, max_len: usize) -> Self {
        Self::new(
            Kind::String {
                values: None,
                pattern: Some((pattern, compiled(pattern))),
                max_len: Some(max_len),
            },
            description,
        )
    }

    /// A string enumeration.
    pub fn enumeration(description: impl Into<Text>, values: &[&'static str]) -> Self {
        Self::one_of(description, values.iter().copied())
    }

    /// A string enumeration of values known at run time.
    pub fn one_of(
        description: impl Into<Text>,
        values: impl IntoIterator<Item = impl Into<Text>>,
    ) -> Self {
        Self::new(
            Kind::String {
                values: Some(values.into_iter().map(Into::into).collect()),
                pattern: None,
                max_len: None,
            },
            description,
        )
    }

    /// An integer within inclusive bounds.
    pub fn integer(description: impl Into<Text>, min: Option<i64>, max: Option<i64>) -> Self {
        Self::new(Kind::Integer { min, max }, description)
    }

    /// Any number.
    pub fn number(description: impl Into<Text>) -> Self {
        Self::new(Kind::Number, description)
    }

    /// A boolean.
    pub fn boolean(description: impl Into<Text>) -> Self {
        Self::new(Kind::Boolean, description)
    }

    /// An object with exactly these properties.
    pub fn object(description: impl Into<Text>, properties: Vec<Property>) -> Self {
        Self::new(Kind::Object(properties), description)
    }

    /// An array of `items`.
    pub fn array(description: impl Into<Text>, items: Schema) -> Self {
        Self::new(Kind::Array(Box::new(items)), description)
    }

    /// The same schema, also accepting `null`.
    pub fn or_null(mut self) -> Self {
        self.nullable = true;
        self
    }

    /// Render as standard JSON Schema (draft 2020-12 subset, no `$ref`).
    pub fn to_json(&self) -> Value {
        // The standard rules leave no node out, so `render` always has a
        // schema here; `{}` (anything) would be the harmless answer if
        // they ever did.
        self.render(Rules::STANDARD)
            .unwrap_or_else(|| Value::Object(Map::new()))
    }

    /// Render with `rules`. `None` only when the rules leave this node out
    /// (an object without properties, under `omit_empty_objects`).
    pub fn render(&self, rules: Rules) -> Option<Value> {
        self.render_as(rules, self.nullable)
    }

    fn render_as(&self, rules: Rules, nullable: bool) -> Option<Value> {
        let mut out = Map::new();
        let type_name = match &self.kind {
            Kind::String {
                values,
                pattern,
                max_len,
            } => {
                if let Some(values) = values {
                    keywords::enumeration(&mut out, values.iter().map(|v| &**v), nullable);
                }
                if rules.string_facets {
                    keywords::string_facets(&mut out, pattern.as_ref().map(|(p, _)| *p), *max_len);
                }
                "string"
            }
            Kind::Integer { min, max } => {
                keywords::bounds(&mut out, *min, *max);
                "integer"
            }
            Kind::Number => "number",
            Kind::Boolean => "boolean",
            Kind::Object(props) => {
                let mut properties = Map::new();
                let mut required = Vec::new();
                for p in props {
                    // Where every property is required, an optional one may
                    // be null instead.
                    let optional_null = rules.all_required && !p.required;
                    let Some(rendered) = p
                        .schema
                        .render_as(rules, p.schema.nullable || optional_null)
                    else {
                        continue;
                    };
                    properties.insert(p.name.to_owned(), rendered);
                    if p.required || rules.all_required {
                        required.push(p.name);
                    }
                }
                if rules.omit_empty_objects && properties.is_empty() {
                    return None;
                }
                keywords::object(&mut out, properties, required, rules.closed_objects);
                "object"
            }
            Kind::Array(items) => {
                out.insert("items".into(), items.render(rules)?);
                "array"
            }
        };
        Some(keywords::finish(
            out,
            type_name,
            nullable,
            &self.description,
        ))
    }

    /// Validate `value`, returning the first violation found.
    ///
    /// # Errors
    /// A [`Violation`] naming the path of the first offending value.
    pub fn validate(&self, value: &Value) -> Result<(), Violation> {
        self.validate_at(value, "")
    }

    fn validate_at(&self, value: &Value, path: &str) -> Result<(), Violation> {
        let invalid = |reason: String| Violation {
            path: path.to_owned(),
            reason,
            kind: ViolationKind::Invalid,
        };
        if value.is_null() {
            return if self.nullable {
                Ok(())
            } else {
                Err(invalid(format!("expected {}, got null", self.type_name())))
            };
        }
        match &self.kind {
            Kind::String {
                values,
                pattern,
                max_len,
            } => {
                let s = value.as_str().ok_or_else(|| {
                    invalid(format!("expected a string, got {}", json_type(value)))
                })?;
                if let Some(values) = values
                    && !values.iter().any(|v| v == s)
                {
                    return Err(invalid(format!("must be one of: {}", values.join(", "))));
                }
                if let Some(max) = max_len
                    && s.chars().count() > *max
                {
                    return Err(invalid(format!("longer than {max} characters")));
                }
                if let Some((source, re)) = pattern
                    && !re.is_match(s)
                {
                    return Err(invalid(format!("does not match the pattern {source}")));
                }
                Ok(())
            }
            Kind::Integer { min, max } => {
                let n = value.as_i64().ok_or_else(|| {
                    invalid(format!("expected an integer, got {}", describe(value)))
                })?;
                if min.is_some_and(|m| n < m) || max.is_some_and(|m| n > m) {
                    return Err(invalid(format!(
                        "{n} is out of range {}..={}",
                        min.map_or("".into(), |m| m.to_string()),
                        max.map_or("".into(), |m| m.to_string())
                    )));
                }
                Ok(())
            }
            Kind::Number => value
                .is_number()
                .then_some(())
                .ok_or_else(|| invalid(format!("expected a number, got {}", json_type(value)))),
            Kind::Boolean => value
                .is_boolean()
                .then_some(())
                .ok_or_else(|| invalid(format!("expected true or false, got {}", describe(value)))),
            Kind::Array(items) => {
                let arr = value.as_array().ok_or_else(|| {
                    invalid(format!("expected an array, got {}", json_type(value)))
                })?;
                for (i, item) in arr.iter().enumerate() {
                    items.validate_at(item, &join(path, &i.to_string()))?;
                }
                Ok(())
            }
            Kind::Object(props) => {
                let obj = value.as_object().ok_or_else(|| {
                    invalid(format!("expected an object, got {}", json_type(value)))
                })?;
                for key in obj.keys() {
                    if !props.iter().any(|p| p.name == key) {
                        return Err(Violation {
                            path: join(path, key),
                            reason: "unknown property".into(),
                            kind: ViolationKind::Unknown,
                        });
                    }
                }
                for prop in props {
                    match obj.get(prop.name) {
                        Some(v) => prop.schema.validate_at(v, &join(path, prop.name))?,
                        None if prop.required => {
                            return Err(Violation {
                                path: join(path, prop.name),
                                reason: "required".into(),
                                kind: ViolationKind::Missing,
                            });
                        }
                        None => {}
                    }
                }
                Ok(())
            }
        }
    }

    fn type_name(&self) -> &'static str {
        match self.kind {
            Kind::String { .. } => "a string",
            Kind::Integer { .. } => "an integer",
            Kind::Number => "a number",
            Kind::Boolean => "a boolean",
            Kind::Object(_) => "an object",
            Kind::Array(_) => "an array",
        }
    }
}

impl Property {
    /// A required property.
    pub fn required(name: &'static str, schema: Schema) -> Self {
        Self {
            name,
            required: true,
            schema,
        }
    }

    /// An optional property.
    pub fn optional(name: &'static str, schema: Schema) -> Self {
        Self {
            name,
            required: false,
            schema,
        }
    }
}

/// A result record: a type whose JSON is an action's result or part of one,
/// declared with its schema in one place (the service modules' `records!`).
pub trait Record: serde::Serialize {
    /// The record's fields, in declaration order.
    fn properties() -> Vec<Property>;

    /// The record as an object schema.
    fn schema(description: impl Into<Text>) -> Schema {
        Schema::object(description, Self::properties())
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// Why a text is not a JSON object; each caller words the message for its
/// own input ("tool arguments …", "request …").
#[derive(Debug, thiserror::Error)]
pub enum NotAnObject {
    /// It does not parse as JSON.
    #[error("is not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    /// It is JSON of another type, named as [`json_type`] names it.
    #[error("is JSON {0} instead of an object")]
    Other(&'static str),
}

/// Parse `text` as a JSON object.
pub fn object_from_slice(text: &[u8]) -> Result<Map<String, Value>, NotAnObject> {
    match serde_json::from_slice::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(NotAnObject::Other(json_type(&other))),
        Err(e) => Err(NotAnObject::NotJson(e)),
    }
}

/// The JSON type name of a value, for error messages.
pub fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn describe(value: &Value) -> String {
    match value {
        Value::Number(n) => n.to_string(),
        Value::String(s) if s.chars().count() <= 40 => format!("the string {s:?}"),
        other => json_type(other).to_owned(),
    }
}

/// The compiled form of a catalogue pattern, compiled once per process
/// however many parameters share it.
fn compiled(pattern: &'static str) -> Arc<Regex> {
    static COMPILED: LazyLock<Mutex<HashMap<&'static str, Arc<Regex>>>> =
        LazyLock::new(Mutex::default);
    let mut compiled = COMPILED.lock().unwrap_or_else(PoisonError::into_inner);
    Arc::clone(compiled.entry(pattern).or_insert_with(|| {
        Arc::new(Regex::new(pattern).expect("catalogue patterns are valid regular expressions"))
    }))
}

/// JSON Schema keywords, each written in one place for [`Schema::render`]
/// (whatever [`Rules`] it follows).
mod keywords {
    use serde_json::{Map, Value, json};

    /// `enum`. A nullable enumeration lists `null` too: `enum` restricts
    /// whatever `type` says, so without it `null` would fail.
    pub(super) fn enumeration<'a>(
        out: &mut Map<String, Value>,
        values: impl IntoIterator<Item = &'a str>,
        nullable: bool,
    ) {
        let mut list: Vec<Value> = values.into_iter().map(|v| json!(v)).collect();
        if nullable {
            list.push(Value::Null);
        }
        out.insert("enum".into(), Value::Array(list));
    }

    /// `pattern` and `maxLength`, where given.
    pub(super) fn string_facets(
        out: &mut Map<String, Value>,
        pattern: Option<&str>,
        max_len: Option<usize>,
    ) {
        if let Some(p) = pattern {
            out.insert("pattern".into(), json!(p));
        }
        if let Some(m) = max_len {
            out.insert("maxLength".into(), json!(m));
        }
    }

    /// `minimum` and `maximum` (inclusive), where given.
    pub(super) fn bounds(out: &mut Map<String, Value>, min: Option<i64>, max: Option<i64>) {
        if let Some(m) = min {
            out.insert("minimum".into(), json!(m));
        }
        if let Some(m) = max {
            out.insert("maximum".into(), json!(m));
        }
    }

    /// `properties`, `required` and, when `closed`,
    /// `additionalProperties: false`.
    pub(super) fn object<S: AsRef<str>>(
        out: &mut Map<String, Value>,
        properties: Map<String, Value>,
        required: impl IntoIterator<Item = S>,
        closed: bool,
    ) {
        let required: Vec<Value> = required.into_iter().map(|n| json!(n.as_ref())).collect();
        out.insert("properties".into(), Value::Object(properties));
        out.insert("required".into(), Value::Array(required));
        if closed {
            out.insert("additionalProperties".into(), json!(false));
        }
    }

    /// Add `type` (`[T, "null"]` when nullable) and a non-empty
    /// `description`, and close the node.
    pub(super) fn finish(
        mut out: Map<String, Value>,
        type_name: &str,
        nullable: bool,
        description: &str,
    ) -> Value {
        let ty = if nullable {
            json!([type_name, "null"])
        } else {
            json!(type_name)
        };
        out.insert("type".into(), ty);
        if !description.is_empty() {
            out.insert("description".into(), json!(description));
        }
        Value::Object(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_object_parses_and_anything_else_is_named() {
        let map = object_from_slice(br#"{"a": 1}"#).unwrap();
        assert_eq!(map["a"], 1);
        let err = object_from_slice(b"[1]").unwrap_err();
        assert_eq!(err.to_string(), "is JSON an array instead of an object");
        let err = object_from_slice(b"{").unwrap_err();
        assert!(matches!(err, NotAnObject::NotJson(_)), "{err}");
        assert!(err.to_string().starts_with("is not JSON: "), "{err}");
    }

    fn params() -> Schema {
        Schema::object(
            "",
            vec![
                Property::required("level", Schema::integer("", Some(0), Some(100))),
                Property::optional("stream", Schema::enumeration("", &["music", "ring"])),
                Property::optional("name", Schema::pattern("", "^[a-z]+$", 5)),
            ],
        )
    }

    fn check(input: Value, expected: Result<(), (&str, ViolationKind)>) {
        let got = params()
            .validate(&input)
            .map_err(|v| (v.path.clone(), v.kind));
        let expected = expected.map_err(|(p, k)| (p.to_owned(), k));
        assert_eq!(got, expected, "input {input}");
    }

    #[test]
    fn validation_names_the_path() {
        use ViolationKind::*;
        check(json!({"level": 5}), Ok(()));
        check(json!({"level": 5, "stream": "ring", "name": "abc"}), Ok(()));
        check(json!({}), Err(("level", Missing)));
        check(json!({"level": 101}), Err(("level", Invalid)));
        check(json!({"level": -1}), Err(("level", Invalid)));
        check(json!({"level": 1.5}), Err(("level", Invalid)));
        check(json!({"level": "5"}), Err(("level", Invalid)));
        check(json!({"level": null}), Err(("level", Invalid)));
        check(json!({"level": 5, "extra": 1}), Err(("extra", Unknown)));
        check(
            json!({"level": 5, "stream": "loud"}),
            Err(("stream", Invalid)),
        );
        check(
            json!({"level": 5, "name": "abcdef"}),
            Err(("name", Invalid)),
        );
        check(json!({"level": 5, "name": "ab1"}), Err(("name", Invalid)));
        check(json!([1]), Err(("", Invalid)));
    }

    #[test]
    fn a_pattern_is_compiled_once_for_all_its_parameters() {
        let (a, b) = (
            Schema::pattern("a", "^[a-z]*$", 8),
            Schema::pattern("b", "^[a-z]*$", 9),
        );
        let (
            Kind::String {
                pattern: Some((_, a)),
                ..
            },
            Kind::String {
                pattern: Some((_, b)),
                ..
            },
        ) = (&a.kind, &b.kind)
        else {
            panic!("patterns")
        };
        assert!(Arc::ptr_eq(a, b));
    }

    #[test]
    fn rules_choose_the_keywords() {
        let schema = Schema::object(
            "",
            vec![
                Property::optional("name", Schema::pattern("", "^[a-z]+$", 5)),
                Property::optional("empty", Schema::object("", Vec::new())),
            ],
        );
        let strict = Rules {
            string_facets: false,
            all_required: true,
            ..Rules::STANDARD
        };
        let s = schema.render(strict).unwrap();
        assert_eq!(s["required"], json!(["name", "empty"]));
        assert_eq!(s["properties"]["name"], json!({"type": ["string", "null"]}));
        let subset = Rules {
            closed_objects: false,
            omit_empty_objects: true,
            ..Rules::STANDARD
        };
        let s = schema.render(subset).unwrap();
        assert_eq!(s["properties"].as_object().unwrap().len(), 1);
        assert!(s.get("additionalProperties").is_none());
        assert_eq!(Schema::object("", Vec::new()).render(subset), None);
    }

    #[test]
    fn renders_standard_json_schema() {
        let s = params().to_json();
        assert_eq!(s["type"], "object");
        assert_eq!(s["required"], json!(["level"]));
        assert_eq!(s["additionalProperties"], false);
        assert_eq!(s["properties"]["level"]["maximum"], 100);
        assert_eq!(s["properties"]["stream"]["enum"], json!(["music", "ring"]));
        let nullable = Schema::integer("", None, None).or_null().to_json();
        assert_eq!(nullable["type"], json!(["integer", "null"]));
        // A nullable enumeration accepts null under any JSON Schema validator.
        let plugged = Schema::enumeration("", &["ac", "usb"]).or_null().to_json();
        assert_eq!(plugged["enum"], json!(["ac", "usb", null]));
    }
}
