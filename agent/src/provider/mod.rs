//! Language-model providers behind one trait we own.
//!
//! [`Provider::complete`] sends the conversation and the tools, streams text
//! through a callback and returns the whole [`ModelReply`]. Three wire
//! formats: [`OpenAi`] (Chat Completions, also Ollama, llama.cpp, vLLM,
//! OpenRouter …), [`Anthropic`] (Messages) and [`Gemini`]
//! (`generateContent`). Each has limits that follow progress (connect,
//! first byte, idle, an optional overall cap) and retries (see `http.rs`);
//! bad keys, unknown models, refusals no retry changes (no images, no
//! tools, a context window too small) are their own [`AgentError`]
//! variants.
//!
//! The request and response translations are public (`request_body`,
//! `parse_response`) so tests can check them against documented payloads.

mod anthropic;
pub mod config;
mod gemini;
mod http;
mod openai;
pub mod probe;
pub(crate) mod sse;

pub use anthropic::Anthropic;
pub use gemini::Gemini;
pub use openai::OpenAi;

use crate::error::AgentError;
use crate::host::BoxFuture;
use crate::message::{Message, ModelReply};
use crate::tools::schema::ToolSpec;
use config::{LlmConfig, ProviderKind};
use std::sync::Arc;

/// What is sent to the model.
#[derive(Debug, Clone)]
pub struct ChatRequest {
    /// System prompt (may be empty).
    pub system: String,
    /// The conversation.
    pub messages: Vec<Message>,
    /// The tools (empty: none). Shared with the run's toolset.
    pub tools: Arc<[ToolSpec]>,
    /// Ask the provider to make the model call a tool (`[llm]
    /// tool_choice = "required_first"`, on a run's first call).
    pub require_tool: bool,
    /// The JSON schema the reply must follow, serialized with its keys in
    /// the order the reply writes them (`[llm] tool_choice = "schema"`:
    /// [`crate::tools::Toolset::reply_schema`]); `None`: free.
    pub reply_schema: Option<std::sync::Arc<str>>,
}

/// The text callback: each piece of answer text as it streams in (the
/// whole text at once when not streaming).
pub type TextSink<'a> = &'a (dyn Fn(&str) + Send + Sync);

/// What a model call gives back.
pub type ReplyFuture<'a> = BoxFuture<'a, Result<ModelReply, AgentError>>;

/// A language model.
pub trait Provider: Send + Sync + std::fmt::Debug {
    /// `openai`, `anthropic`, `gemini` or a test name.
    fn name(&self) -> &'static str;

    /// Send `request`; call `on_text` with answer text as it arrives.
    ///
    /// # Errors
    /// [`AgentError::Auth`], [`AgentError::ModelNotFound`],
    /// [`AgentError::RateLimited`], [`AgentError::Http`],
    /// [`AgentError::Connect`], [`AgentError::Timeout`],
    /// [`AgentError::StreamCut`], [`AgentError::Unsupported`],
    /// [`AgentError::ContextExceeded`] or [`AgentError::BadResponse`],
    /// after the configured retries (none once text was streamed).
    fn complete<'a>(&'a self, request: &'a ChatRequest, on_text: TextSink<'a>) -> ReplyFuture<'a>;

    /// Whether the model takes images now (`[llm] vision`, what the server
    /// said, whether the model refused one); without, the agent answers a
    /// screenshot call with the screen's UI tree.
    fn vision(&self) -> bool {
        true
    }

    /// Whether a run's first model call must call a tool (`[llm]
    /// tool_choice = "required_first"`).
    fn requires_first_tool_call(&self) -> bool {
        false
    }

    /// Whether every model call's reply is constrained to a tool call or
    /// an answer (`[llm] tool_choice = "schema"`).
    fn constrains_replies(&self) -> bool {
        false
    }
}

/// Build the configured provider, reading its API key (environment or file).
///
/// # Errors
/// [`AgentError::Secret`] when the key cannot be read; [`AgentError::Client`]
/// when TLS cannot be set up.
pub fn from_config(cfg: &LlmConfig) -> Result<Arc<dyn Provider>, AgentError> {
    let key = cfg.api_key.load()?;
    Ok(match cfg.provider {
        ProviderKind::Openai => Arc::new(OpenAi::new(cfg, key)?),
        ProviderKind::Anthropic => Arc::new(Anthropic::new(cfg, key)?),
        ProviderKind::Gemini => Arc::new(Gemini::new(cfg, key)?),
    })
}

/// Parse tool-call arguments into a JSON object for providers that want an
/// object (Anthropic `input`, Gemini `args`): malformed text becomes `{}`
/// (the call itself was already answered with an error).
pub(crate) fn arguments_object(text: &str) -> serde_json::Value {
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(v @ serde_json::Value::Object(_)) => v,
        _ => serde_json::json!({}),
    }
}
