//! Tool parameter schemas: the catalogue's own [`Schema`] type (one
//! representation and one renderer, in `droidwarden_services::schema`),
//! rendered with the rules of each provider.
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

pub use droidwarden_services::schema::{Kind, Property, Rules, Schema};
use serde_json::Value;

/// Which provider's rules to render for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// OpenAI Chat Completions with `strict: true`.
    OpenAiStrict,
    /// Anthropic Messages `input_schema` (standard JSON Schema; also what
    /// OpenAI takes without strict mode).
    Anthropic,
    /// Gemini `functionDeclarations[].parameters`.
    Gemini,
}

impl Dialect {
    /// The JSON Schema keywords this provider accepts.
    pub fn rules(self) -> Rules {
        match self {
            Dialect::Anthropic => Rules::STANDARD,
            Dialect::OpenAiStrict => Rules {
                string_facets: false,
                all_required: true,
                ..Rules::STANDARD
            },
            Dialect::Gemini => Rules {
                string_facets: false,
                closed_objects: false,
                omit_empty_objects: true,
                ..Rules::STANDARD
            },
        }
    }
}

/// A tool's parameters.
#[derive(Debug, Clone)]
pub enum Parameters {
    /// A schema we build (from the catalogue, or for a built-in tool).
    Schema(Schema),
    /// A JSON Schema given whole by someone else (an MCP server's tool
    /// `inputSchema`), rendered as it is for every provider.
    Raw(Value),
    /// `schema` plus one free-form object property `key` (the device
    /// tools' `parameters`, whose exact shape depends on the action and is
    /// checked by the catalogue): an open object where the dialect has one,
    /// JSON text where it has not (OpenAI strict mode, Gemini).
    Open {
        /// The other properties.
        schema: Schema,
        /// The free-form property's name.
        key: &'static str,
        /// What it holds.
        description: &'static str,
    },
}

impl From<Schema> for Parameters {
    fn from(schema: Schema) -> Self {
        Parameters::Schema(schema)
    }
}

impl Parameters {
    /// Render for a provider. `None` only for Gemini when the schema is an
    /// object without properties (Gemini rejects those: leave it out).
    pub fn render(&self, dialect: Dialect) -> Option<Value> {
        match self {
            Parameters::Schema(schema) => schema.render(dialect.rules()),
            Parameters::Raw(schema) => Some(schema.clone()),
            Parameters::Open {
                schema,
                key,
                description,
            } => {
                let mut out = schema.render(dialect.rules())?;
                let free = match dialect {
                    Dialect::Anthropic => {
                        serde_json::json!({"type": "object", "description": description})
                    }
                    // Strict mode closes every object, and Gemini's subset
                    // has no object without properties: the object comes
                    // as JSON text there (the planner parses either).
                    Dialect::OpenAiStrict => serde_json::json!({
                        "type": ["string", "null"],
                        "description": format!("{description}, as JSON text"),
                    }),
                    Dialect::Gemini => serde_json::json!({
                        "type": "string",
                        "description": format!("{description}, as JSON text"),
                    }),
                };
                if let Some(props) = out.get_mut("properties").and_then(Value::as_object_mut) {
                    props.insert((*key).to_owned(), free);
                }
                if dialect == Dialect::OpenAiStrict
                    && let Some(required) = out.get_mut("required").and_then(Value::as_array_mut)
                {
                    required.push(Value::String((*key).to_owned()));
                }
                Some(out)
            }
        }
    }
}

/// Merge `other` into `into`, two schemas for the same parameter name used
/// by different actions: the same kind keeps the looser bounds and the
/// union of enum values; different kinds keep `into` (the catalogue
/// validates anyway).
pub fn merge(into: &mut Schema, other: &Schema) {
    fn looser<T: Copy>(a: Option<T>, b: Option<T>, pick: fn(T, T) -> T) -> Option<T> {
        Some(pick(a?, b?))
    }
    match (&mut into.kind, &other.kind) {
        (Kind::Integer { min, max }, Kind::Integer { min: m2, max: x2 }) => {
            *min = looser(*min, *m2, i64::min);
            *max = looser(*max, *x2, i64::max);
        }
        (
            Kind::String {
                values,
                pattern,
                max_len,
            },
            Kind::String {
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
            if pattern.as_ref().map(|(p, _)| *p) != p2.as_ref().map(|(p, _)| *p) {
                *pattern = None;
            }
            *max_len = looser(*max_len, *l2, usize::max);
        }
        _ => {}
    }
}

/// A tool as offered to a provider: its name, description and parameters
/// (rendered per provider dialect).
#[derive(Debug, Clone)]
pub struct ToolSpec {
    /// Tool name.
    pub name: String,
    /// Description for the model.
    pub description: String,
    /// Parameters (an object schema).
    pub parameters: Parameters,
}

impl ToolSpec {
    /// The parameters rendered for `dialect` (`None`: Gemini, no parameters).
    pub fn parameters_for(&self, dialect: Dialect) -> Option<serde_json::Value> {
        self.parameters.render(dialect)
    }
}
