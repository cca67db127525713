//! droidwarden's MCP adapter (the Model Context Protocol), through the
//! official Rust SDK (`rmcp`), which no other crate uses.
//!
//! * `server.rs` — the phones as an MCP server over a
//!   `droidwarden_core::phones::PhoneApi`: inside the daemon over the hub
//!   (`http.rs`), or in `droidwarden mcp` over the daemon's API (the D-Bus
//!   client) or `--local`; the binary serves it on standard input and
//!   output (`daemon/src/mcp_stdio.rs`, with [`jsonrpc`]'s line checks).
//! * `tools.rs` — the agent's catalogue tools as MCP tools (input and
//!   output schemas, annotations, `device`, `list_devices`).
//! * `client.rs` — `[[mcp.servers]]`: MCP servers' tools offered to the
//!   agent (the daemon as an MCP client).
//! * `client_http.rs` — `[[mcp.servers]] url`: the Streamable HTTP
//!   transport of the client (TLS, bearer token).
//! * `prompts.rs` — the daemon's skills as MCP prompts.
//! * The approval policy for calls from MCP clients (in the daemon, and
//!   `CallChecked` on D-Bus) is the core's: `droidwarden_core::gate`.
//! * `elicit.rs` — an approval asked inside the MCP client (elicitation,
//!   both protocol eras), recorded as the daemon approval's decision.
//! * `subscribe.rs` — `resources/subscribe` for clients of protocol
//!   2025-11-25 and earlier: a watcher per connection.
//!
//! See docs/mcp.md.
//!
//! Architecture invariant: this crate knows MCP and nothing of the other
//! ways in (MQTT, D-Bus, the CLI): it reaches phones only through the
//! core's `PhoneApi`, whichever of its implementations it is given.

pub mod client;
mod client_http;
pub mod elicit;
pub mod http;
pub mod jsonrpc;
mod prompts;
pub mod server;
mod subscribe;
mod tools;

use droidwarden_agent::tools::ToolMode;
use serde::Deserialize;

/// `[mcp]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMcpConfig {
    /// `toolkit` (default) or `direct`.
    tool_mode: Option<ToolMode>,
    /// `index` (default: a compact index and `describe_action`) or `full`
    /// (every action's schema in `tools/list`).
    tool_schemas: Option<droidwarden_agent::tools::ToolSchemas>,
    /// `host:port` for Streamable HTTP; empty or absent: off.
    listen: Option<String>,
    /// Allow a non-loopback `listen`.
    allow_remote: Option<bool>,
    /// A file holding the bearer token (required beyond loopback).
    token_file: Option<String>,
    /// Ask approvals inside MCP clients that can elicit (default true).
    elicitation: Option<bool>,
    /// The person the HTTP endpoint's token belongs to: only then may its
    /// clients answer approvals themselves (elicitation).
    token_owner: Option<String>,
    /// `[[mcp.servers]]`: MCP servers whose tools the agent may use.
    #[serde(default)]
    servers: Vec<client::RawServer>,
}

/// `[mcp]`, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpConfig {
    /// How the phones are offered as tools.
    pub tool_mode: ToolMode,
    /// How much of the catalogue's schemas the tools carry.
    pub tool_schemas: droidwarden_agent::tools::ToolSchemas,
    /// Streamable HTTP in the daemon; `None`: off.
    pub http: Option<http::HttpSettings>,
    /// MCP servers whose tools the agent may use (`client.rs`).
    pub servers: Vec<client::ServerConfig>,
    /// Ask approvals inside MCP clients that can elicit (`elicit.rs`).
    pub elicitation: bool,
}

impl TryFrom<RawMcpConfig> for McpConfig {
    type Error = String;

    fn try_from(raw: RawMcpConfig) -> Result<Self, String> {
        let servers = client::check_servers(raw.servers)?;
        let token_file = raw
            .token_file
            .filter(|f| !f.trim().is_empty())
            .map(std::path::PathBuf::from);
        let allow_remote = raw.allow_remote.unwrap_or(false);
        let http = match raw.listen.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(text) => {
                let listen: std::net::SocketAddr = text.parse().map_err(|e| {
                    format!("mcp.listen: {text:?} is not an address such as 127.0.0.1:8765 ({e})")
                })?;
                if !listen.ip().to_canonical().is_loopback() {
                    if !allow_remote {
                        return Err(format!(
                            "mcp.listen: {listen} is not a loopback address; whoever reaches it drives the phones (set [mcp] allow_remote = true, and token_file, to serve it anyway)"
                        ));
                    }
                    if token_file.is_none() {
                        return Err(format!(
                            "mcp.token_file: required when mcp.listen ({listen}) is beyond loopback"
                        ));
                    }
                }
                let token_owner = raw
                    .token_owner
                    .as_deref()
                    .map(str::trim)
                    .filter(|o| !o.is_empty());
                if let Some(owner) = token_owner {
                    if token_file.is_none() {
                        return Err("mcp.token_owner: needs mcp.token_file (the token is what shows a client is that person)".to_owned());
                    }
                    if owner.chars().count() > 64 || owner.chars().any(char::is_control) {
                        return Err(
                            "mcp.token_owner: a person's name, at most 64 characters".to_owned()
                        );
                    }
                }
                Some(http::HttpSettings {
                    listen,
                    allow_remote,
                    token_file,
                    elicitation: raw.elicitation.unwrap_or(true),
                    token_owner: token_owner.map(str::to_owned),
                })
            }
        };
        if http.is_none() && raw.token_owner.is_some_and(|o| !o.trim().is_empty()) {
            return Err(
                "mcp.token_owner: only for the HTTP endpoint (set mcp.listen and mcp.token_file)"
                    .to_owned(),
            );
        }
        Ok(Self {
            tool_mode: raw.tool_mode.unwrap_or(ToolMode::Toolkit),
            tool_schemas: raw.tool_schemas.unwrap_or_default(),
            http,
            servers,
            elicitation: raw.elicitation.unwrap_or(true),
        })
    }
}

/// Start the Streamable HTTP endpoint when `[mcp] listen` is set; the
/// address it listens on (the real port when port 0 was asked for).
///
/// # Errors
/// The address cannot be bound or the token file cannot be read.
pub async fn start_http(
    config: &McpConfig,
    hub: &droidwarden_core::hub::Hub,
    assistant: Option<&droidwarden_core::assistant::Assistant>,
    tracker: &tokio_util::task::TaskTracker,
    shutdown: &tokio_util::sync::CancellationToken,
) -> Result<Option<std::net::SocketAddr>, String> {
    let Some(settings) = config.http.clone() else {
        return Ok(None);
    };
    let (listener, token) = http::bind(&settings).await?;
    let bound = listener.local_addr().map_err(|e| e.to_string())?;
    tracker.spawn(http::serve(
        listener,
        settings,
        token,
        hub.clone(),
        assistant.cloned(),
        config.tool_mode,
        config.tool_schemas,
        tracker.clone(),
        shutdown.clone(),
    ));
    Ok(Some(bound))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<McpConfig, String> {
        let raw: RawMcpConfig = toml_like(text);
        McpConfig::try_from(raw)
    }

    /// `[mcp]` keys as the configuration loader gives them.
    fn toml_like(text: &str) -> RawMcpConfig {
        serde_json::from_str(text).expect("raw [mcp]")
    }

    #[test]
    fn http_is_off_by_default_and_loopback_unless_allowed() {
        let off = parse("{}").unwrap();
        assert_eq!(off.http, None);
        assert!(off.elicitation);
        assert!(!parse(r#"{"elicitation": false}"#).unwrap().elicitation);
        assert_eq!(off.tool_mode, ToolMode::Toolkit);
        assert_eq!(parse(r#"{"listen": ""}"#).unwrap().http, None);
        let local = parse(r#"{"listen": "127.0.0.1:8765"}"#).unwrap();
        assert_eq!(local.http.unwrap().listen.port(), 8765);
        let remote = parse(r#"{"listen": "0.0.0.0:8765"}"#).unwrap_err();
        assert!(remote.contains("allow_remote"), "{remote}");
        let no_token = parse(r#"{"listen": "0.0.0.0:8765", "allow_remote": true}"#).unwrap_err();
        assert!(no_token.contains("token_file"), "{no_token}");
        let ok =
            parse(r#"{"listen": "0.0.0.0:8765", "allow_remote": true, "token_file": "/etc/t"}"#)
                .unwrap();
        assert!(ok.http.unwrap().allow_remote);
        assert!(parse(r#"{"listen": "kitchen"}"#).is_err());
        assert!(serde_json::from_str::<RawMcpConfig>(r#"{"nope": 1}"#).is_err());
    }
}
