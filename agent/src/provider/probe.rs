//! Whether the configured model can be reached, asked cheaply: one `GET`
//! of the provider's model list (OpenAI-compatible `{base_url}/models`,
//! Anthropic `{base_url}/v1/models`, Gemini `{base_url}/v1beta/models`)
//! with the configured key, under one time limit. No tokens are spent and
//! nothing of the conversation is sent. The daemon's health report asks
//! it (and caches the answer); the agent's own calls never wait for it.

use super::config::{LlmConfig, ProviderKind};
use super::http::{self, Wire};
use super::{Anthropic, Gemini, OpenAi};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// What the probe found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reach", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ModelReach {
    /// The endpoint answered the model list with success.
    Reachable {
        /// The HTTP status (200).
        status: u16,
    },
    /// The endpoint answered but refused the key (401 or 403).
    KeyRefused {
        /// The HTTP status.
        status: u16,
    },
    /// The endpoint answered with another error status. A server without
    /// a model list (some OpenAI-compatible ones answer 404) still shows
    /// it is up.
    Answered {
        /// The HTTP status.
        status: u16,
    },
    /// No answer: nothing listens, the name does not resolve, TLS failed,
    /// or no answer within the limit.
    Unreachable {
        /// Why, in words (no key, no URL query).
        reason: String,
    },
    /// The key could not be read (its variable unset, its file missing).
    NoKey {
        /// Which variable or file, never its value.
        reason: String,
    },
}

impl ModelReach {
    /// Whether the model's server answered at all.
    pub fn answers(&self) -> bool {
        matches!(
            self,
            Self::Reachable { .. } | Self::KeyRefused { .. } | Self::Answered { .. }
        )
    }
}

/// The URL of the model list of `cfg`'s provider.
pub fn models_url(cfg: &LlmConfig) -> String {
    match cfg.provider {
        ProviderKind::Openai => format!("{}/models", cfg.base_url),
        ProviderKind::Anthropic => format!("{}/v1/models", cfg.base_url),
        ProviderKind::Gemini => format!("{}/v1beta/models", cfg.base_url),
    }
}

/// Ask `cfg`'s endpoint for its model list, within `limit` (connecting
/// included).
pub async fn probe(cfg: &LlmConfig, limit: Duration) -> ModelReach {
    let key = match cfg.api_key.load() {
        Ok(key) => key,
        Err(e) => {
            return ModelReach::NoKey {
                reason: e.to_string(),
            };
        }
    };
    let key = key.as_ref().map(|k| k.expose());
    let headers = match cfg.provider {
        ProviderKind::Openai => OpenAi::headers(key),
        ProviderKind::Anthropic => Anthropic::headers(key),
        ProviderKind::Gemini => Gemini::headers(key),
    };
    let client = match http::client(cfg) {
        Ok(client) => client,
        Err(e) => {
            return ModelReach::Unreachable {
                reason: e.to_string(),
            };
        }
    };
    let mut request = client.get(models_url(cfg)).timeout(limit);
    for (name, value) in headers {
        request = request.header(name, value);
    }
    if cfg.provider == ProviderKind::Anthropic {
        request = request.header("anthropic-version", "2023-06-01");
    }
    match tokio::time::timeout(limit, request.send()).await {
        Err(_) => ModelReach::Unreachable {
            reason: format!("no answer within {} ms", limit.as_millis()),
        },
        Ok(Err(e)) => ModelReach::Unreachable {
            // Without the URL: a Gemini key may travel in a query.
            reason: if e.is_timeout() {
                format!("no answer within {} ms", limit.as_millis())
            } else if e.is_connect() {
                format!("cannot connect to {}", host_of(&cfg.base_url))
            } else {
                e.without_url().to_string()
            },
        },
        Ok(Ok(response)) => {
            let status = response.status().as_u16();
            match status {
                200..=299 => ModelReach::Reachable { status },
                401 | 403 => ModelReach::KeyRefused { status },
                _ => ModelReach::Answered { status },
            }
        }
    }
}

/// `scheme://host:port` of a URL, for messages.
fn host_of(url: &str) -> &str {
    let after = url.find("://").map_or(0, |i| i + 3);
    let end = url[after..].find('/').map_or(url.len(), |i| after + i);
    &url[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_is_cut_from_the_url() {
        assert_eq!(host_of("http://127.0.0.1:8080/v1"), "http://127.0.0.1:8080");
        assert_eq!(
            host_of("https://api.anthropic.com"),
            "https://api.anthropic.com"
        );
    }

    #[tokio::test]
    async fn nothing_listening_is_unreachable_within_the_limit() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let cfg = LlmConfig::try_from(super::super::config::RawLlmConfig {
            provider: Some(ProviderKind::Openai),
            base_url: Some(format!("http://127.0.0.1:{port}/v1")),
            model: Some("m".into()),
            ..Default::default()
        })
        .unwrap();
        let started = std::time::Instant::now();
        let reach = probe(&cfg, Duration::from_millis(500)).await;
        assert!(matches!(reach, ModelReach::Unreachable { .. }), "{reach:?}");
        assert!(!reach.answers());
        assert!(started.elapsed() < Duration::from_secs(2));
    }
}
