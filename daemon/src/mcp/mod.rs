//! MCP (the Model Context Protocol), through the official Rust SDK
//! (`rmcp`), which no other module uses.
//!
//! * `server.rs` — `droidwarden mcp`: the phones as an MCP server over
//!   stdio, through the daemon (D-Bus) or `--local`.
//! * `tools.rs` — the agent's catalogue tools as MCP tools (input and
//!   output schemas, annotations, `device`, `list_devices`).
//! * `gate.rs` — inside the daemon: the approval policy for calls from
//!   MCP clients (`CallChecked` on D-Bus).
//!
//! See docs/mcp.md.

pub(crate) mod gate;
mod server;
mod tools;

use crate::cli::Target;
use crate::config::Config;
use droidwarden_agent::tools::ToolMode;
use rmcp::ServiceExt;
use serde::Deserialize;
use std::process::ExitCode;

/// `[mcp]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawMcpConfig {
    /// `toolkit` (default) or `direct`.
    tool_mode: Option<ToolMode>,
}

/// `[mcp]`, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct McpConfig {
    /// How the phones are offered as tools.
    pub(crate) tool_mode: ToolMode,
}

impl From<RawMcpConfig> for McpConfig {
    fn from(raw: RawMcpConfig) -> Self {
        Self {
            tool_mode: raw.tool_mode.unwrap_or(ToolMode::Toolkit),
        }
    }
}

/// `droidwarden mcp`.
#[derive(Debug, clap::Args)]
pub(crate) struct McpArgs {
    /// Offer the phones as one `android_device` tool (toolkit) or one
    /// `android_<service>` tool per service (direct); default `[mcp] tool_mode`.
    #[arg(long, value_parser = ["toolkit", "direct"])]
    tool_mode: Option<String>,
    #[command(flatten)]
    target: Target,
}

/// Serve MCP on stdio until the client closes it.
pub(crate) async fn run(args: McpArgs, config: Config) -> ExitCode {
    let mode = match args.tool_mode.as_deref() {
        Some("direct") => ToolMode::Direct,
        Some(_) => ToolMode::Toolkit,
        None => config.mcp.tool_mode,
    };
    let backend = if args.target.local {
        server::Backend::local(&config)
    } else {
        match crate::cli::daemon(args.target.bus, &config, true).await {
            Ok(client) => server::Backend::Daemon {
                client,
                approval_wait: config.agent.approval.timeout,
            },
            Err(e) => {
                eprintln!("droidwarden mcp: {}", e.message);
                return ExitCode::FAILURE;
            }
        }
    };
    let service = match server::PhoneServer::new(backend, mode)
        .serve(rmcp::transport::stdio())
        .await
    {
        Ok(service) => service,
        Err(e) => {
            eprintln!("droidwarden mcp: the client did not initialise: {e}");
            return ExitCode::FAILURE;
        }
    };
    match service.waiting().await {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("droidwarden mcp: {e}");
            ExitCode::FAILURE
        }
    }
}
