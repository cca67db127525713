//! MCP servers as agent tools (`[[mcp.servers]]`): the daemon is an MCP
//! *client* of each configured stdio server.
//!
//! At start each server is spawned (argv only, never a shell), initialized,
//! and its `tools/list` cached. Each allowed tool is offered to the agent as
//! `mcp_<server>_<tool>` with the server's own input schema; its risk (the
//! server's `risk` patterns, default `medium`, at least `high` for a tool
//! annotated `destructiveHint`) goes through the agent's approval policy as
//! `mcp.<offered name>`. A tool matched by `deny` (or, when `allow` is set,
//! not matched by it) is never offered.
//!
//! A supervisor task per server restarts it with capped backoff when it
//! exits; meanwhile its tools answer with a clear error. Calls are bounded by
//! `timeout_s`, results cut at `max_result_chars`. See docs/mcp.md.

use droidwarden_agent::tools::extra::ExtraTool;
use droidwarden_bridge::backoff::Backoff;
use droidwarden_services::{ErrorCode, Risk, WireError};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{Peer, RoleClient};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Default call timeout.
const DEFAULT_TIMEOUT_S: u64 = 30;
/// Default result size.
const DEFAULT_MAX_RESULT_CHARS: usize = 20_000;
/// Longest offered tool name (OpenAI's and Gemini's limit).
const MAX_TOOL_NAME: usize = 64;
/// Restart waits: 1 s doubling to 60 s.
const RESTART: Backoff = Backoff {
    first: Duration::from_secs(1),
    max: Duration::from_secs(60),
};

/// One `[[mcp.servers]]` entry as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawServer {
    name: Option<String>,
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    allow: Vec<String>,
    #[serde(default)]
    deny: Vec<String>,
    #[serde(default)]
    risk: BTreeMap<String, String>,
    timeout_s: Option<u64>,
    max_result_chars: Option<usize>,
}

/// One MCP server, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServerConfig {
    /// Its name (`[a-z0-9_]`, the middle of `mcp_<server>_<tool>`).
    pub(crate) name: String,
    /// The program.
    pub(crate) command: String,
    /// Its arguments.
    pub(crate) args: Vec<String>,
    /// Extra environment.
    pub(crate) env: BTreeMap<String, String>,
    /// Tool-name patterns offered (empty: all).
    pub(crate) allow: Vec<String>,
    /// Tool-name patterns never offered.
    pub(crate) deny: Vec<String>,
    /// Risk per tool-name pattern, first match wins.
    pub(crate) risk: Vec<(String, Risk)>,
    /// Call timeout.
    pub(crate) timeout: Duration,
    /// Longest result, in characters.
    pub(crate) max_result_chars: usize,
}

/// Check `[[mcp.servers]]`. Errors name the key (`mcp.servers[1].command`).
pub(crate) fn check_servers(raw: Vec<RawServer>) -> Result<Vec<ServerConfig>, String> {
    let mut out: Vec<ServerConfig> = Vec::new();
    for (i, r) in raw.into_iter().enumerate() {
        let key = |k: &str| format!("mcp.servers[{i}].{k}");
        let name = r.name.ok_or_else(|| format!("{}: required", key("name")))?;
        if name.is_empty()
            || name.len() > 24
            || !name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        {
            return Err(format!(
                "{}: {name:?} must be 1 to 24 characters of a-z, 0-9 and _",
                key("name")
            ));
        }
        if out.iter().any(|s| s.name == name) {
            return Err(format!("{}: {name:?} is used twice", key("name")));
        }
        let command = r
            .command
            .filter(|c| !c.trim().is_empty())
            .ok_or_else(|| format!("{}: required (the server's program)", key("command")))?;
        for (k, list) in [("allow", &r.allow), ("deny", &r.deny)] {
            if let Some(p) = list.iter().find(|p| p.trim().is_empty()) {
                return Err(format!("{}: empty pattern {p:?}", key(k)));
            }
        }
        let mut risk = Vec::new();
        for (pattern, level) in r.risk {
            let level: Risk =
                serde_json::from_value(Value::String(level.clone())).map_err(|_| {
                    format!(
                        "{}: {level:?} is not a risk (low, medium, high or critical)",
                        key(&format!("risk.{pattern}"))
                    )
                })?;
            risk.push((pattern, level));
        }
        let timeout_s = r.timeout_s.unwrap_or(DEFAULT_TIMEOUT_S);
        if !(1..=3600).contains(&timeout_s) {
            return Err(format!(
                "{}: {timeout_s} must be 1 to 3600 seconds",
                key("timeout_s")
            ));
        }
        let max_result_chars = r.max_result_chars.unwrap_or(DEFAULT_MAX_RESULT_CHARS);
        if !(100..=1_000_000).contains(&max_result_chars) {
            return Err(format!(
                "{}: {max_result_chars} must be 100 to 1000000",
                key("max_result_chars")
            ));
        }
        out.push(ServerConfig {
            name,
            command,
            args: r.args,
            env: r.env,
            allow: r.allow,
            deny: r.deny,
            risk,
            timeout: Duration::from_secs(timeout_s),
            max_result_chars,
        });
    }
    Ok(out)
}

/// `*` matches any run of characters; everything else itself.
fn glob(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == name;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !name.starts_with(first) || name.len() < first.len() + last.len() || !name.ends_with(last) {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

impl ServerConfig {
    fn offers(&self, tool: &str) -> bool {
        !self.deny.iter().any(|p| glob(p, tool))
            && (self.allow.is_empty() || self.allow.iter().any(|p| glob(p, tool)))
    }

    fn risk_of(&self, tool: &str, destructive: bool) -> Risk {
        let risk = self
            .risk
            .iter()
            .find(|(p, _)| glob(p, tool))
            .map_or(Risk::Medium, |(_, r)| *r);
        if destructive {
            risk.max(Risk::High)
        } else {
            risk
        }
    }

    fn offered_name(&self, tool: &str) -> String {
        let clean: String = tool
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        format!("mcp_{}_{clean}", self.name)
            .chars()
            .take(MAX_TOOL_NAME)
            .collect()
    }
}

/// A cached tool of one server.
#[derive(Debug, Clone)]
struct CachedTool {
    /// Its name on the server.
    remote: String,
    offered: ExtraTool,
}

#[derive(Debug)]
struct Server {
    config: ServerConfig,
    /// The live connection; `None` while (re)starting.
    peer: Mutex<Option<Peer<RoleClient>>>,
    /// The last `tools/list`, kept while the server restarts.
    tools: Mutex<Vec<CachedTool>>,
}

/// The configured MCP servers, connected.
#[derive(Debug, Clone, Default)]
pub(crate) struct McpClients {
    servers: Arc<Vec<Arc<Server>>>,
}

impl McpClients {
    /// Start every server and wait (at most its `timeout_s`) for its first
    /// `tools/list`; a server that is not up by then keeps being retried in
    /// the background and offers its tools once it is.
    pub(crate) async fn start(
        configs: &[ServerConfig],
        tracker: &TaskTracker,
        shutdown: &CancellationToken,
    ) -> Self {
        let mut servers = Vec::new();
        let mut firsts = Vec::new();
        for config in configs {
            let server = Arc::new(Server {
                config: config.clone(),
                peer: Mutex::new(None),
                tools: Mutex::new(Vec::new()),
            });
            let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
            tracker.spawn(supervise(server.clone(), ready_tx, shutdown.clone()));
            firsts.push((config.timeout, ready_rx));
            servers.push(server);
        }
        for (limit, ready) in firsts {
            let _ = tokio::time::timeout(limit, ready).await;
        }
        Self {
            servers: Arc::new(servers),
        }
    }

    /// The tools offered to the agent.
    pub(crate) fn tools(&self) -> Vec<ExtraTool> {
        self.servers
            .iter()
            .flat_map(|s| {
                s.tools
                    .lock()
                    .map(|t| t.iter().map(|c| c.offered.clone()).collect::<Vec<_>>())
                    .unwrap_or_default()
            })
            .collect()
    }

    /// Call offered tool `name`.
    pub(crate) async fn call(&self, name: &str, arguments: Value) -> Result<Value, WireError> {
        let found = self.servers.iter().find_map(|s| {
            let tools = s.tools.lock().ok()?;
            tools
                .iter()
                .find(|t| t.offered.name == name)
                .map(|t| (s.clone(), t.remote.clone()))
        });
        let Some((server, remote)) = found else {
            return Err(WireError::new(
                ErrorCode::InvalidRequest,
                format!("unknown MCP tool {name}"),
            ));
        };
        let cfg = &server.config;
        let peer = server.peer.lock().ok().and_then(|p| p.clone());
        let Some(peer) = peer else {
            return Err(WireError::new(
                ErrorCode::Busy,
                format!(
                    "MCP server {} is not running (it is being restarted); try again in a few seconds",
                    cfg.name
                ),
            ));
        };
        let arguments = match arguments {
            Value::Object(m) => m,
            Value::Null => Map::new(),
            _ => {
                return Err(WireError::new(
                    ErrorCode::InvalidParams,
                    "tool arguments must be a JSON object",
                ));
            }
        };
        let params = CallToolRequestParams::new(remote).with_arguments(arguments);
        let result = tokio::time::timeout(cfg.timeout, peer.call_tool(params))
            .await
            .map_err(|_| {
                WireError::new(
                    ErrorCode::Timeout,
                    format!(
                        "MCP server {} did not answer {name} within {} s",
                        cfg.name,
                        cfg.timeout.as_secs()
                    ),
                )
            })?
            .map_err(|e| {
                WireError::new(
                    ErrorCode::DeviceError,
                    format!("MCP server {} failed {name}: {e}", cfg.name),
                )
            })?;
        let result = serde_json::to_value(&result).unwrap_or(Value::Null);
        let text = result
            .get("content")
            .and_then(Value::as_array)
            .map(|blocks| {
                blocks
                    .iter()
                    .map(|b| match b.get("text").and_then(Value::as_str) {
                        Some(t) => t.to_owned(),
                        None => b.to_string(),
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default();
        let (text, truncated) = cut(&text, cfg.max_result_chars);
        if result.get("isError").and_then(Value::as_bool) == Some(true) {
            return Err(WireError::new(
                ErrorCode::DeviceError,
                format!("{name} failed: {text}"),
            ));
        }
        let mut out = json!({ "server": cfg.name, "content": text });
        if truncated {
            out["truncated"] = json!(true);
        }
        Ok(out)
    }
}

/// `text` cut to `max` characters, and whether it was cut.
fn cut(text: &str, max: usize) -> (String, bool) {
    match text.char_indices().nth(max) {
        Some((at, _)) => (text[..at].to_owned(), true),
        None => (text.to_owned(), false),
    }
}

/// Run one server: connect, list, wait for it to exit, restart.
async fn supervise(
    server: Arc<Server>,
    ready: tokio::sync::oneshot::Sender<()>,
    shutdown: CancellationToken,
) {
    let mut ready = Some(ready);
    let mut attempt = 0u32;
    let name = server.config.name.clone();
    loop {
        let connected = tokio::select! {
            () = shutdown.cancelled() => return,
            r = tokio::time::timeout(server.config.timeout, connect(&server.config)) => r,
        };
        match connected {
            Ok(Ok((running, tools))) => {
                tracing::info!(server = %name, tools = tools.len(), "MCP server up");
                if let Ok(mut t) = server.tools.lock() {
                    *t = tools;
                }
                if let Ok(mut p) = server.peer.lock() {
                    *p = Some(running.peer().clone());
                }
                if let Some(r) = ready.take() {
                    let _ = r.send(());
                }
                attempt = 0;
                let token = running.cancellation_token();
                let waiting = running.waiting();
                tokio::pin!(waiting);
                tokio::select! {
                    () = shutdown.cancelled() => {
                        token.cancel();
                        let _ = tokio::time::timeout(Duration::from_secs(5), waiting).await;
                        return;
                    }
                    _ = &mut waiting => {}
                }
                if let Ok(mut p) = server.peer.lock() {
                    *p = None;
                }
                tracing::warn!(server = %name, "MCP server exited; restarting");
            }
            Ok(Err(e)) => tracing::warn!(server = %name, error = %e, "MCP server failed to start"),
            Err(_) => tracing::warn!(server = %name, "MCP server did not start in time"),
        }
        if let Some(r) = ready.take() {
            let _ = r.send(());
        }
        let wait = RESTART.delay(attempt);
        attempt = attempt.saturating_add(1);
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
    }
}

type Running = rmcp::service::RunningService<RoleClient, ()>;

async fn connect(config: &ServerConfig) -> Result<(Running, Vec<CachedTool>), String> {
    let mut command = tokio::process::Command::new(&config.command);
    command
        .args(&config.args)
        .envs(&config.env)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true);
    let mut child = command
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", config.command))?;
    let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
        return Err("no pipes to the child".into());
    };
    let running = ().serve((stdout, stdin)).await.map_err(|e| format!("initialize failed: {e}"))?;
    // Reap the child when it exits (kill_on_drop ends it with us).
    tokio::spawn(async move {
        let _ = child.wait().await;
    });
    let listed = running
        .peer()
        .list_all_tools()
        .await
        .map_err(|e| format!("tools/list failed: {e}"))?;
    let tools = listed
        .into_iter()
        .filter(|t| config.offers(&t.name))
        .map(|t| {
            let destructive = t
                .annotations
                .as_ref()
                .and_then(|a| a.destructive_hint)
                .unwrap_or(false);
            let risk = config.risk_of(&t.name, destructive);
            let description = format!(
                "{} (MCP server {}, risk {})",
                t.description.as_deref().unwrap_or(&t.name),
                config.name,
                serde_json::to_value(risk)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default()
            );
            CachedTool {
                remote: t.name.to_string(),
                offered: ExtraTool {
                    name: config.offered_name(&t.name),
                    description,
                    schema: Value::Object((*t.input_schema).clone()),
                    risk,
                },
            }
        })
        .collect();
    Ok((running, tools))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob("*", "anything"));
        assert!(glob("delete_*", "delete_all"));
        assert!(!glob("delete_*", "read"));
        assert!(glob("*_file*", "read_file_now"));
        assert!(glob("echo", "echo"));
        assert!(!glob("echo", "echo2"));
        assert!(!glob("a*a", "a"));
    }

    #[test]
    fn config_errors_name_the_key() {
        let err = check_servers(vec![RawServer::default()]).unwrap_err();
        assert!(err.starts_with("mcp.servers[0].name"), "{err}");
        let raw = RawServer {
            name: Some("files".into()),
            command: Some("srv".into()),
            risk: [("x".to_owned(), "huge".to_owned())].into(),
            ..RawServer::default()
        };
        let err = check_servers(vec![raw]).unwrap_err();
        assert!(err.starts_with("mcp.servers[0].risk.x"), "{err}");
        let raw = RawServer {
            name: Some("Bad Name".into()),
            ..RawServer::default()
        };
        assert!(check_servers(vec![raw]).unwrap_err().contains("a-z"));
    }

    #[test]
    fn allow_deny_and_risk() {
        let raw = RawServer {
            name: Some("fs".into()),
            command: Some("srv".into()),
            deny: vec!["rm*".into()],
            risk: [("read*".to_owned(), "low".to_owned())].into(),
            ..RawServer::default()
        };
        let cfg = check_servers(vec![raw]).unwrap().remove(0);
        assert!(!cfg.offers("rmdir"));
        assert!(cfg.offers("read_file"));
        assert_eq!(cfg.risk_of("read_file", false), Risk::Low);
        assert_eq!(cfg.risk_of("read_file", true), Risk::High);
        assert_eq!(cfg.risk_of("write", false), Risk::Medium);
        assert_eq!(cfg.offered_name("a.b"), "mcp_fs_a_b");
        assert_eq!(cut("héllo", 2), ("hé".to_owned(), true));
    }
}
