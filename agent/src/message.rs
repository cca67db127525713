//! The conversation in a provider-neutral shape. Providers translate it to
//! their wire formats and back; the agent graph and the store only see this.

use serde::{Deserialize, Serialize};

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// What the user said.
    User {
        /// The text.
        text: String,
    },
    /// What the model answered: text, optional reasoning kept apart from the
    /// answer, and tool calls.
    Assistant {
        /// The answer text (never contains thinking).
        text: String,
        /// Reasoning blocks, kept so providers that need them back (Anthropic
        /// with tools) get them; never shown as the answer.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        thinking: Vec<Thinking>,
        /// Tool calls requested in this message.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call.
    Tool {
        /// The id of the call this answers.
        call_id: String,
        /// The tool's name (Gemini matches results by name).
        name: String,
        /// The result as text (usually JSON), already truncated.
        content: String,
        /// Whether the call failed (the content is then a wire error).
        is_error: bool,
    },
}

/// A block of model reasoning.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Thinking {
    /// The reasoning text (may be a summary).
    pub text: String,
    /// The provider's signature, to send the block back unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

impl ToolCall {
    /// A call without a thought signature.
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
            signature: None,
        }
    }
}

/// A tool call requested by the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The call id (the provider's, or one we made up when it has none).
    pub id: String,
    /// The tool name, exactly as the model wrote it.
    pub name: String,
    /// The arguments as the raw JSON text the model produced: parsed and
    /// validated later, so malformed JSON becomes a readable tool error.
    pub arguments: String,
    /// Gemini's thought signature, sent back with the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

/// Token usage of one or more model calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
}

impl Usage {
    /// Add another call's usage.
    pub fn add(&mut self, other: Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
    }
}

/// A complete model answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelReply {
    /// Answer text (thinking excluded).
    pub text: String,
    /// Reasoning blocks.
    #[serde(default)]
    pub thinking: Vec<Thinking>,
    /// Tool calls.
    #[serde(default)]
    pub tool_calls: Vec<ToolCall>,
    /// Tokens used.
    #[serde(default)]
    pub usage: Usage,
    /// The provider's stop reason (`stop`, `end_turn`, `tool_use`, `STOP` …).
    #[serde(default)]
    pub stop_reason: Option<String>,
}

impl ModelReply {
    /// A plain text answer.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            ..Self::default()
        }
    }

    /// An answer that calls these tools.
    pub fn with_calls(calls: Vec<ToolCall>) -> Self {
        Self {
            tool_calls: calls,
            ..Self::default()
        }
    }

    /// An answer that calls tools: `(name, arguments JSON text)` pairs; ids
    /// are `call_0`, `call_1` ….
    pub fn tool_calls<S: Into<String>>(calls: impl IntoIterator<Item = (S, S)>) -> Self {
        Self::with_calls(
            calls
                .into_iter()
                .enumerate()
                .map(|(i, (name, arguments))| ToolCall::new(format!("call_{i}"), name, arguments))
                .collect(),
        )
    }
}

/// A message with the time it was added.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimedMessage {
    /// Unix milliseconds.
    pub at_ms: u64,
    /// The message.
    #[serde(flatten)]
    pub message: Message,
}
