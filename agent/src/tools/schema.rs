//! Tool parameter schemas, built once in a neutral form and rendered for
//! each provider's rules.
//!
//! The three providers accept different subsets of JSON Schema:
//!
//! * **OpenAI strict mode**: every property listed in `required`, optional
//!   ones typed `["T", "null"]`, `additionalProperties: false` on every
//!   object, and only the keywords it documents (we emit `type`,
//!   `description`, `enum`, `properties`, `required`,
//!   `additionalProperties`, `items`, `minimum`, `maximum`).
//! * **Anthropic** `input_schema`: ordinary JSON Schema with an object at the
//!   root; we keep patterns and lengths there.
//! * **Gemini** (an OpenAPI 3.0 subset): no `additionalProperties`, no type
//!   arrays (`nullable: true` instead), `enum` on strings only, and objects
//!   must have properties (an empty object is left out).
//!
//! Validation never depends on what a provider enforced: every call is
//! checked again by the catalogue before it runs.

use droidwarden_services::schema::keywords;
use serde_json::{Map, Value};

/// Which provider's rules to render for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// OpenAI Chat Completions with `strict: true`.
    OpenAiStrict,
    /// Anthropic Messages `input_schema`.
    Anthropic,
    /// Gemini `functionDeclarations[].parameters`.
    Gemini,
}

/// One schema node.
#[derive(Debug, Clone, PartialEq)]
pub struct SchemaNode {
    /// The shape.
    pub kind: NodeKind,
    /// Description for the model (may be empty).
    pub description: String,
}

/// The shapes a node can have.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeKind {
    /// A string, optionally an enumeration, a pattern and a maximum length.
    String {
        /// Allowed values.
        values: Option<Vec<String>>,
        /// Regular expression (rendered for Anthropic only).
        pattern: Option<String>,
        /// Maximum length (rendered for Anthropic only).
        max_len: Option<usize>,
    },
    /// An integer with inclusive bounds.
    Integer {
        /// Minimum.
        min: Option<i64>,
        /// Maximum.
        max: Option<i64>,
    },
    /// Any number.
    Number,
    /// A boolean.
    Boolean,
    /// An object with known properties and no others.
    Object(Vec<Prop>),
    /// An array.
    Array(Box<SchemaNode>),
    /// A JSON Schema given whole by someone else (an MCP server's tool
    /// `inputSchema`), rendered as it is for every provider.
    Raw(Value),
}

/// A property of an object node.
#[derive(Debug, Clone, PartialEq)]
pub struct Prop {
    /// Name.
    pub name: String,
    /// Whether it must be given.
    pub required: bool,
    /// Its schema.
    pub schema: SchemaNode,
}

impl SchemaNode {
    /// A node of `kind` with a description.
    pub fn new(kind: NodeKind, description: impl Into<String>) -> Self {
        Self {
            kind,
            description: description.into(),
        }
    }

    /// A free string.
    pub fn string(description: impl Into<String>) -> Self {
        Self::new(
            NodeKind::String {
                values: None,
                pattern: None,
                max_len: None,
            },
            description,
        )
    }

    /// A string enumeration.
    pub fn enumeration(description: impl Into<String>, values: Vec<String>) -> Self {
        Self::new(
            NodeKind::String {
                values: Some(values),
                pattern: None,
                max_len: None,
            },
            description,
        )
    }

    /// An object.
    pub fn object(description: impl Into<String>, props: Vec<Prop>) -> Self {
        Self::new(NodeKind::Object(props), description)
    }

    /// Convert a catalogue schema.
    pub fn from_catalogue(schema: &droidwarden_services::schema::Schema) -> Self {
        use droidwarden_services::schema::Kind;
        let kind = match &schema.kind {
            Kind::String {
                values,
                pattern,
                max_len,
            } => NodeKind::String {
                values: values
                    .as_ref()
                    .map(|v| v.iter().map(|s| (*s).to_owned()).collect()),
                pattern: pattern.as_ref().map(|(p, _)| (*p).to_owned()),
                max_len: *max_len,
            },
            Kind::Integer { min, max } => NodeKind::Integer {
                min: *min,
                max: *max,
            },
            Kind::Number => NodeKind::Number,
            Kind::Boolean => NodeKind::Boolean,
            Kind::Object(props) => NodeKind::Object(
                props
                    .iter()
                    .map(|p| Prop {
                        name: p.name.to_owned(),
                        required: p.required,
                        schema: Self::from_catalogue(&p.schema),
                    })
                    .collect(),
            ),
            Kind::Array(items) => NodeKind::Array(Box::new(Self::from_catalogue(items))),
        };
        Self::new(kind, schema.description)
    }

    /// Merge two schemas for the same parameter name used by different
    /// actions: same kind keeps the looser bounds and the union of enum
    /// values; different kinds keep `self` (the catalogue validates anyway).
    pub fn merge(&mut self, other: &SchemaNode) {
        match (&mut self.kind, &other.kind) {
            (NodeKind::Integer { min, max }, NodeKind::Integer { min: m2, max: x2 }) => {
                *min = match (*min, *m2) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    _ => None,
                };
                *max = match (*max, *x2) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    _ => None,
                };
            }
            (
                NodeKind::String {
                    values,
                    pattern,
                    max_len,
                },
                NodeKind::String {
                    values: v2,
                    pattern: p2,
                    max_len: l2,
                },
            ) => {
                *values = match (values.take(), v2) {
                    (Some(mut a), Some(b)) => {
                        for v in b {
                            if !a.contains(v) {
                                a.push(v.clone());
                            }
                        }
                        Some(a)
                    }
                    _ => None,
                };
                if pattern.as_ref() != p2.as_ref() {
                    *pattern = None;
                }
                *max_len = match (*max_len, *l2) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    _ => None,
                };
            }
            _ => {}
        }
    }

    /// Whether two nodes have the same kind of value (ignoring bounds).
    pub fn same_type(&self, other: &SchemaNode) -> bool {
        std::mem::discriminant(&self.kind) == std::mem::discriminant(&other.kind)
    }

    /// Render for a provider. `None` only for Gemini when the node is an
    /// object without properties (Gemini rejects those: leave it out).
    pub fn render(&self, dialect: Dialect) -> Option<Value> {
        self.render_inner(dialect, false)
    }

    fn render_inner(&self, dialect: Dialect, nullable: bool) -> Option<Value> {
        if let NodeKind::Raw(schema) = &self.kind {
            return Some(schema.clone());
        }
        let strict = dialect == Dialect::OpenAiStrict;
        let mut out = Map::new();
        let type_name = match &self.kind {
            NodeKind::String {
                values,
                pattern,
                max_len,
            } => {
                if let Some(values) = values {
                    keywords::enumeration(
                        &mut out,
                        values.iter().map(String::as_str),
                        nullable && strict,
                    );
                }
                if dialect == Dialect::Anthropic {
                    keywords::string_facets(&mut out, pattern.as_deref(), *max_len);
                }
                "string"
            }
            NodeKind::Integer { min, max } => {
                keywords::bounds(&mut out, *min, *max);
                "integer"
            }
            NodeKind::Number => "number",
            NodeKind::Boolean => "boolean",
            NodeKind::Array(items) => {
                out.insert("items".into(), items.render_inner(dialect, false)?);
                "array"
            }
            NodeKind::Object(props) => {
                let mut properties = Map::new();
                let mut required = Vec::new();
                for p in props {
                    // In strict mode an optional property is required but
                    // may be null.
                    let Some(rendered) = p.schema.render_inner(dialect, strict && !p.required)
                    else {
                        continue;
                    };
                    properties.insert(p.name.clone(), rendered);
                    if p.required || strict {
                        required.push(p.name.as_str());
                    }
                }
                if dialect == Dialect::Gemini && properties.is_empty() {
                    return None;
                }
                keywords::object(&mut out, properties, required, dialect != Dialect::Gemini);
                "object"
            }
            NodeKind::Raw(_) => unreachable!("rendered above"),
        };
        Some(keywords::finish(
            out,
            type_name,
            nullable && strict,
            &self.description,
        ))
    }
}

impl Prop {
    /// A required property.
    pub fn required(name: impl Into<String>, schema: SchemaNode) -> Self {
        Self {
            name: name.into(),
            required: true,
            schema,
        }
    }

    /// An optional property.
    pub fn optional(name: impl Into<String>, schema: SchemaNode) -> Self {
        Self {
            name: name.into(),
            required: false,
            schema,
        }
    }
}
