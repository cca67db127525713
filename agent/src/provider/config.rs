//! `[llm]`: which provider, where, which model, and how (timeouts, key,
//! tools, images), as written ([`RawLlmConfig`]) and checked
//! ([`LlmConfig`]); errors name the key. Re-exported by `crate::config`.

use crate::error::AgentError;
use crate::secret::KeySource;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

/// Which wire protocol the model speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderKind {
    /// OpenAI-compatible Chat Completions (OpenAI, Ollama, llama.cpp, vLLM,
    /// OpenRouter …).
    Openai,
    /// Anthropic Messages.
    Anthropic,
    /// Google Gemini `generateContent`.
    Gemini,
}

impl ProviderKind {
    /// The provider's name, as in the configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Openai => "openai",
            Self::Anthropic => "anthropic",
            Self::Gemini => "gemini",
        }
    }

    /// The public endpoint used when `base_url` is not set.
    pub fn default_base_url(self) -> &'static str {
        match self {
            Self::Openai => "https://api.openai.com/v1",
            Self::Anthropic => "https://api.anthropic.com",
            Self::Gemini => "https://generativelanguage.googleapis.com",
        }
    }
}

/// Whether to make the model call a tool (`[llm] tool_choice`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides (the default).
    #[default]
    Auto,
    /// A run's first model call must call a tool (OpenAI-compatible
    /// `tool_choice: "required"`, which llama.cpp enforces with a grammar;
    /// Anthropic `{"type": "any"}`; Gemini mode `ANY`); later calls are
    /// free to answer. Only for a run with phones, in react mode.
    RequiredFirst,
    /// Every model call that offers tools constrains the reply to one JSON
    /// object: a call of an offered tool, with the arguments that tool
    /// takes (for the phones' tools, one real service, action and its
    /// parameters), or `{"answer": "…"}` (OpenAI-compatible
    /// `response_format` with a JSON schema, which llama.cpp, vLLM and
    /// Ollama turn into a grammar). For small local models that write
    /// their calls as text, often with names that do not exist: they can
    /// then write only calls that parse and name real actions. OpenAI-
    /// compatible servers only.
    Schema,
}

/// Whether the model takes images (`[llm] vision`): `true`, `false` or
/// `"auto"` (the default). Written as a boolean or the word `auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Vision {
    /// Send screenshots as images.
    On,
    /// Never send images: a screenshot call runs `screen.ui_tree` instead.
    Off,
    /// Ask llama.cpp's `GET /props` (`modalities.vision`) when the
    /// endpoint has one; otherwise send images until the model refuses one.
    #[default]
    Auto,
}

impl Serialize for Vision {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::On => s.serialize_bool(true),
            Self::Off => s.serialize_bool(false),
            Self::Auto => s.serialize_str("auto"),
        }
    }
}

impl<'de> Deserialize<'de> for Vision {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            Flag(bool),
            Word(String),
        }
        match Written::deserialize(d)? {
            Written::Flag(true) => Ok(Self::On),
            Written::Flag(false) => Ok(Self::Off),
            Written::Word(w) if w == "auto" => Ok(Self::Auto),
            Written::Word(w) => Err(serde::de::Error::custom(format!(
                "vision must be true, false or \"auto\", got {w:?}"
            ))),
        }
    }
}

/// `[llm]` as written in the file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLlmConfig {
    /// `openai`, `anthropic` or `gemini`.
    pub provider: Option<ProviderKind>,
    /// Endpoint root; see [`ProviderKind::default_base_url`].
    pub base_url: Option<String>,
    /// Model name.
    pub model: Option<String>,
    /// Environment variable holding the API key.
    pub api_key_env: Option<String>,
    /// File holding the API key.
    pub api_key_file: Option<PathBuf>,
    /// TCP/TLS connect timeout, seconds (default 10).
    pub connect_timeout_s: Option<f64>,
    /// Longest wait for the first byte of an answer, seconds (default
    /// 600): the model reads the whole prompt first, which takes minutes
    /// on a slow CPU.
    pub first_byte_timeout_s: Option<f64>,
    /// Longest silence between two pieces of an answer once it began,
    /// seconds (default 120).
    pub idle_timeout_s: Option<f64>,
    /// The older name of `idle_timeout_s`, still accepted.
    pub read_timeout_s: Option<f64>,
    /// An optional cap on a whole request, streamed answer included,
    /// seconds (default: none; the progress limits above bound it).
    pub request_timeout_s: Option<f64>,
    /// Retries after the first attempt on 429, 5xx and connection errors (default 4).
    pub max_retries: Option<u32>,
    /// Longest `Retry-After` we wait for, seconds (default 60).
    pub max_retry_wait_s: Option<f64>,
    /// Stream answers (text deltas as they come; default true).
    pub stream: Option<bool>,
    /// Maximum answer tokens, sent to every provider (default 1024, or
    /// `thinking_budget` + 1024).
    pub max_tokens: Option<u32>,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Anthropic extended thinking budget in tokens (off when unset).
    pub thinking_budget: Option<u32>,
    /// OpenAI: send tools with `strict: true` (default: true for OpenAI's
    /// own API, false for compatible servers, which ignore or reject it).
    pub strict_tools: Option<bool>,
    /// `auto` (default) or `required_first`: the first model call of a run
    /// must call a tool (constrained by the server where it can).
    pub tool_choice: Option<ToolChoice>,
    /// Whether the model takes images: `true`, `false` or `"auto"`
    /// (default); without, a screenshot call gives the screen's UI tree.
    pub vision: Option<Vision>,
    /// The most image bytes (base64) sent with one model request (default
    /// 4 MiB); older screenshots beyond it are left out.
    pub max_image_bytes: Option<u64>,
}

/// The validated `[llm]` section.
#[derive(Debug, Clone, PartialEq)]
pub struct LlmConfig {
    /// The wire protocol.
    pub provider: ProviderKind,
    /// Endpoint root, without a trailing slash.
    pub base_url: String,
    /// Model name.
    pub model: String,
    /// Where the key comes from.
    pub api_key: KeySource,
    /// Connect timeout.
    pub connect_timeout: Duration,
    /// Longest wait for an answer's first byte (the prompt is processed
    /// meanwhile).
    pub first_byte_timeout: Duration,
    /// Longest silence between two pieces of an answer.
    pub idle_timeout: Duration,
    /// Optional cap on a whole request.
    pub request_timeout: Option<Duration>,
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// Longest `Retry-After` honoured.
    pub max_retry_wait: Duration,
    /// Whether to stream.
    pub stream: bool,
    /// Maximum answer tokens.
    pub max_tokens: u32,
    /// Temperature.
    pub temperature: Option<f64>,
    /// Anthropic thinking budget.
    pub thinking_budget: Option<u32>,
    /// OpenAI strict tools.
    pub strict_tools: bool,
    /// Whether the first model call of a run must call a tool.
    pub tool_choice: ToolChoice,
    /// Whether the model takes images (`[llm] vision`).
    pub vision: Vision,
    /// The most image bytes (base64) sent with one request.
    pub max_image_bytes: usize,
}

/// Default `first_byte_timeout_s`. A 2-core CPU processes a prompt at
/// about 20 tokens/s with a small (1.5-3 B, Q4) model: the agent's cold
/// prompt with the toolkit and a few turns is about 5,600 tokens, so 280 s
/// before the first byte. 600 s leaves room for twice that.
pub const DEFAULT_FIRST_BYTE_S: f64 = 600.0;

/// Default `idle_timeout_s`. Such a CPU generates 2-5 tokens/s, and
/// llama.cpp may hold a tool call back until it parses (100-200 tokens),
/// so a minute without a byte can still be progress; two minutes of
/// silence after the answer began is a stuck server.
pub const DEFAULT_IDLE_S: f64 = 120.0;

pub(crate) fn secs(
    key: &str,
    v: Option<f64>,
    default: f64,
    max: f64,
) -> Result<Duration, AgentError> {
    let v = v.unwrap_or(default);
    if !(v > 0.0 && v <= max) {
        return Err(AgentError::Config {
            key: key.into(),
            reason: format!("must be more than 0 and at most {max} seconds, got {v}"),
        });
    }
    Ok(Duration::from_secs_f64(v))
}

pub(crate) fn config_err(key: &str, reason: impl Into<String>) -> AgentError {
    AgentError::Config {
        key: key.into(),
        reason: reason.into(),
    }
}

impl TryFrom<RawLlmConfig> for LlmConfig {
    type Error = AgentError;

    fn try_from(raw: RawLlmConfig) -> Result<Self, AgentError> {
        let provider = raw.provider.ok_or_else(|| {
            config_err("llm.provider", "is required: openai, anthropic or gemini")
        })?;
        let model = raw
            .model
            .filter(|m| !m.trim().is_empty())
            .ok_or_else(|| config_err("llm.model", "is required"))?;
        if model.len() > 200 || model.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(config_err(
                "llm.model",
                "must be a model name without spaces",
            ));
        }
        let base_url = raw
            .base_url
            .unwrap_or_else(|| provider.default_base_url().to_owned());
        let base_url = base_url.trim_end_matches('/').to_owned();
        if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
            return Err(config_err(
                "llm.base_url",
                "must start with http:// or https://",
            ));
        }
        let official = provider == ProviderKind::Openai && base_url == provider.default_base_url();
        let api_key = match (raw.api_key_env, raw.api_key_file) {
            (Some(_), Some(_)) => {
                return Err(config_err(
                    "llm.api_key_env",
                    "set api_key_env or api_key_file, not both",
                ));
            }
            (Some(env), None) if env.is_empty() => {
                return Err(config_err("llm.api_key_env", "must not be empty"));
            }
            (Some(env), None) => KeySource::Env(env),
            (None, Some(file)) => KeySource::File(file),
            (None, None) => KeySource::None,
        };
        // 1024 answer tokens: a tool call or a few paragraphs; on a CPU
        // that generates 3-5 tokens/s it is already minutes of output.
        let max_tokens = raw
            .max_tokens
            .unwrap_or_else(|| raw.thinking_budget.map_or(1024, |b| b.saturating_add(1024)));
        if max_tokens == 0 {
            return Err(config_err("llm.max_tokens", "must be at least 1"));
        }
        if let Some(t) = raw.temperature
            && !(0.0..=2.0).contains(&t)
        {
            return Err(config_err("llm.temperature", "must be between 0 and 2"));
        }
        if raw.tool_choice == Some(ToolChoice::Schema) && provider != ProviderKind::Openai {
            return Err(config_err(
                "llm.tool_choice",
                "\"schema\" constrains replies with an OpenAI-compatible response_format: it needs provider = \"openai\" (llama.cpp, vLLM, Ollama)",
            ));
        }
        if let Some(b) = raw.thinking_budget {
            if provider != ProviderKind::Anthropic {
                return Err(config_err(
                    "llm.thinking_budget",
                    "is only used with provider = \"anthropic\"",
                ));
            }
            if raw.temperature.is_some() {
                return Err(config_err(
                    "llm.temperature",
                    "cannot be set together with thinking_budget (Anthropic requires the default)",
                ));
            }
            if b < 1024 || b >= max_tokens {
                return Err(config_err(
                    "llm.thinking_budget",
                    "must be at least 1024 and less than max_tokens",
                ));
            }
        }
        Ok(Self {
            provider,
            base_url,
            model,
            api_key,
            connect_timeout: secs("llm.connect_timeout_s", raw.connect_timeout_s, 10.0, 300.0)?,
            first_byte_timeout: secs(
                "llm.first_byte_timeout_s",
                raw.first_byte_timeout_s,
                DEFAULT_FIRST_BYTE_S,
                7200.0,
            )?,
            idle_timeout: match (raw.idle_timeout_s, raw.read_timeout_s) {
                (Some(_), Some(_)) => {
                    return Err(config_err(
                        "llm.read_timeout_s",
                        "is the older name of idle_timeout_s: set one of them",
                    ));
                }
                (None, Some(old)) => secs("llm.read_timeout_s", Some(old), 0.0, 3600.0)?,
                (idle, None) => secs("llm.idle_timeout_s", idle, DEFAULT_IDLE_S, 3600.0)?,
            },
            request_timeout: raw
                .request_timeout_s
                .map(|t| secs("llm.request_timeout_s", Some(t), 0.0, 86_400.0))
                .transpose()?,
            max_retries: raw.max_retries.unwrap_or(4).min(20),
            max_retry_wait: secs("llm.max_retry_wait_s", raw.max_retry_wait_s, 60.0, 3600.0)?,
            stream: raw.stream.unwrap_or(true),
            max_tokens,
            temperature: raw.temperature,
            thinking_budget: raw.thinking_budget,
            // Strict function schemas are OpenAI's own: compatible servers
            // (llama.cpp, Ollama, vLLM) ignore the flag or follow the
            // schema's letter (every key required), so they get plain ones.
            strict_tools: raw.strict_tools.unwrap_or(official),
            tool_choice: raw.tool_choice.unwrap_or_default(),
            vision: raw.vision.unwrap_or_default(),
            max_image_bytes: raw
                .max_image_bytes
                .unwrap_or(4 * 1024 * 1024)
                .min(64 * 1024 * 1024) as usize,
        })
    }
}
