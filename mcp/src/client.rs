//! MCP servers as agent tools (`[[mcp.servers]]`): the daemon is an MCP
//! *client* of each configured server, a stdio child process (`command`) or
//! a Streamable HTTP endpoint (`url`, `client_http.rs`).
//!
//! At start each server is connected, initialized, and its `tools/list`
//! cached. Each allowed tool is offered to the agent as
//! `mcp_<server>_<tool>` with the server's own input schema; its risk (the
//! server's `risk` patterns, default `medium`, at least `high` for a tool
//! annotated `destructiveHint`) goes through the agent's approval policy as
//! `mcp.<offered name>`. A tool matched by `deny` (or, when `allow` is set,
//! not matched by it) is never offered. The cache is refreshed on
//! `notifications/tools/list_changed` (unscoped from servers of earlier
//! protocol versions, or through a `subscriptions/listen` stream on
//! 2026-07-28).
//!
//! A supervisor task per server reconnects (restarts a child) with capped
//! backoff when the connection ends, a call finds it broken, or (HTTP) a
//! periodic check fails; meanwhile its tools are not offered to new runs and
//! a run that had them gets a clear error. Calls are bounded by `timeout_s`,
//! retried with capped backoff when the request could not be sent, and
//! their results cut at `max_result_chars`. See docs/mcp.md.

use droidwarden_agent::tools::extra::ExtraTool;
use droidwarden_bridge::backoff::Backoff;
use droidwarden_services::{ErrorCode, Risk, WireError};
use rmcp::model::ProtocolVersion;
use rmcp::model::{
    CallToolRequestParams, ClientConfig, Implementation, ServerNotification, SubscriptionFilter,
};
use rmcp::service::{NotificationContext, Peer, RoleClient};
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt as _, ServiceError};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
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
/// Retries of a call whose request could not be sent: 250 ms doubling to
/// 2 s, at most this many, and never past the call's `timeout_s`.
const CALL_RETRIES: u32 = 3;
const CALL_RETRY: Backoff = Backoff {
    first: Duration::from_millis(250),
    max: Duration::from_secs(2),
};
/// How often an HTTP server is checked (a `tools/list`, which also catches a
/// missed list change) while nothing else shows it is gone.
const HTTP_CHECK: Duration = Duration::from_secs(10);

/// One `[[mcp.servers]]` entry as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawServer {
    name: Option<String>,
    command: Option<String>,
    args: Option<Vec<String>>,
    env: Option<BTreeMap<String, String>>,
    url: Option<String>,
    token_file: Option<String>,
    #[serde(default)]
    allow: Vec<String>,
    #[serde(default)]
    deny: Vec<String>,
    #[serde(default)]
    risk: BTreeMap<String, String>,
    timeout_s: Option<u64>,
    max_result_chars: Option<usize>,
}

/// How a server is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// A child process speaking MCP on its standard input and output.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Extra environment.
        env: BTreeMap<String, String>,
    },
    /// A Streamable HTTP endpoint.
    Http {
        /// Its URL.
        url: String,
        /// A file holding the bearer token.
        token_file: Option<PathBuf>,
    },
}

/// One MCP server, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// Its name (`[a-z0-9_]`, the middle of `mcp_<server>_<tool>`).
    pub name: String,
    /// How it is reached.
    pub transport: Transport,
    /// Tool-name patterns offered (empty: all).
    pub allow: Vec<String>,
    /// Tool-name patterns never offered.
    pub deny: Vec<String>,
    /// Risk per tool-name pattern, first match wins.
    pub risk: Vec<(String, Risk)>,
    /// Call timeout.
    pub timeout: Duration,
    /// Longest result, in characters.
    pub max_result_chars: usize,
}

/// Check `[[mcp.servers]]`. Errors name the key (`mcp.servers[1].command`).
pub fn check_servers(raw: Vec<RawServer>) -> Result<Vec<ServerConfig>, String> {
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
        let transport = match (r.command, r.url) {
            (Some(_), Some(_)) => {
                return Err(format!(
                    "{}: set either command (a stdio server) or url (Streamable HTTP), not both",
                    key("url")
                ));
            }
            (None, None) => {
                return Err(format!(
                    "{}: required (the server's program), or url for a Streamable HTTP server",
                    key("command")
                ));
            }
            (Some(command), None) => {
                if command.trim().is_empty() {
                    return Err(format!("{}: empty", key("command")));
                }
                if r.token_file.is_some() {
                    return Err(format!(
                        "{}: only for a url server (give a stdio server its secrets in env)",
                        key("token_file")
                    ));
                }
                Transport::Stdio {
                    command,
                    args: r.args.unwrap_or_default(),
                    env: r.env.unwrap_or_default(),
                }
            }
            (None, Some(url)) => {
                for (k, set) in [("args", r.args.is_some()), ("env", r.env.is_some())] {
                    if set {
                        return Err(format!(
                            "{}: only for a command server, not with url",
                            key(k)
                        ));
                    }
                }
                let token_file = match r.token_file {
                    Some(f) if f.trim().is_empty() => {
                        return Err(format!("{}: empty", key("token_file")));
                    }
                    f => f.map(PathBuf::from),
                };
                let url = super::client_http::check_url(&url, token_file.is_some())
                    .map_err(|e| format!("{}: {e}", key("url")))?;
                Transport::Http { url, token_file }
            }
        };
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
            transport,
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
    /// The live connection and its number; `None` while (re)connecting.
    peer: Mutex<Option<(u64, Peer<RoleClient>)>>,
    /// The last `tools/list`; offered only while `peer` is set.
    tools: Mutex<Vec<CachedTool>>,
    /// Poked when the server says its tool list changed.
    changed: Arc<Notify>,
    /// Poked when a call found the connection broken.
    broken: Notify,
    /// The number of the connection a call found broken (a stale poke
    /// about an earlier connection is ignored).
    broken_connection: AtomicU64,
}

impl Server {
    fn peer(&self) -> Option<(u64, Peer<RoleClient>)> {
        self.peer.lock().ok().and_then(|p| p.clone())
    }

    fn set_peer(&self, peer: Option<(u64, Peer<RoleClient>)>) {
        if let Ok(mut p) = self.peer.lock() {
            *p = peer;
        }
    }

    fn set_tools(&self, tools: Vec<CachedTool>) {
        if let Ok(mut t) = self.tools.lock() {
            *t = tools;
        }
    }

    fn what(&self) -> &'static str {
        match self.config.transport {
            Transport::Stdio { .. } => "is not running (it is being restarted)",
            Transport::Http { .. } => "is not reachable (reconnecting)",
        }
    }
}

/// The configured MCP servers, connected.
#[derive(Debug, Clone, Default)]
pub struct McpClients {
    servers: Arc<Vec<Arc<Server>>>,
}

impl McpClients {
    /// Start every server and wait (at most its `timeout_s`) for its first
    /// `tools/list`; a server that is not up by then keeps being retried in
    /// the background and offers its tools once it is.
    pub async fn start(
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
                changed: Arc::new(Notify::new()),
                broken: Notify::new(),
                broken_connection: AtomicU64::new(0),
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

    /// The tools offered to the agent: those of the servers connected now.
    pub fn tools(&self) -> Vec<ExtraTool> {
        self.servers
            .iter()
            .filter(|s| s.peer().is_some())
            .flat_map(|s| {
                s.tools
                    .lock()
                    .map(|t| t.iter().map(|c| c.offered.clone()).collect::<Vec<_>>())
                    .unwrap_or_default()
            })
            .collect()
    }

    /// Call offered tool `name`.
    pub async fn call(&self, name: &str, arguments: Value) -> Result<Value, WireError> {
        let found = self.servers.iter().find_map(|s| {
            let tools = s.tools.lock().ok()?;
            tools
                .iter()
                .find(|t| t.offered.name == name)
                .map(|t| (s.clone(), t.remote.clone()))
        });
        let Some((server, remote)) = found else {
            // A tool the run was offered that its server no longer lists.
            if let Some(s) = self
                .servers
                .iter()
                .find(|s| name.starts_with(&format!("mcp_{}_", s.config.name)))
            {
                return Err(WireError::new(
                    ErrorCode::InvalidRequest,
                    format!(
                        "unknown MCP tool {name}: MCP server {} no longer offers it (its tool list changed)",
                        s.config.name
                    ),
                ));
            }
            return Err(WireError::new(
                ErrorCode::InvalidRequest,
                format!("unknown MCP tool {name}"),
            ));
        };
        let cfg = &server.config;
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
        let deadline = tokio::time::Instant::now() + cfg.timeout;
        let timed_out = || {
            WireError::new(
                ErrorCode::Timeout,
                format!(
                    "MCP server {} did not answer {name} within {} s",
                    cfg.name,
                    cfg.timeout.as_secs()
                ),
            )
        };
        let mut attempt = 0;
        let result = loop {
            let Some((connection, peer)) = server.peer() else {
                return Err(WireError::new(
                    ErrorCode::Busy,
                    format!(
                        "MCP server {} {}; its tools are offered again once it is back",
                        cfg.name,
                        server.what()
                    ),
                ));
            };
            let error =
                match tokio::time::timeout_at(deadline, peer.call_tool(params.clone())).await {
                    Err(_) => return Err(timed_out()),
                    Ok(Ok(result)) => break result,
                    Ok(Err(e)) => e,
                };
            // Not sent (a refused connection, say): nothing ran, so it is
            // safe to send again.
            let unsent = matches!(error, ServiceError::TransportSend(_));
            let wait = CALL_RETRY.delay(attempt);
            if unsent
                && attempt < CALL_RETRIES
                && tokio::time::Instant::now() + wait < deadline
                && error.auth_challenge().is_none()
            {
                tracing::debug!(server = %cfg.name, tool = name, error = %error, "MCP call not sent; retrying");
                attempt += 1;
                tokio::time::sleep(wait).await;
                continue;
            }
            let gone = unsent || matches!(error, ServiceError::TransportClosed);
            if gone {
                server
                    .broken_connection
                    .store(connection, Ordering::Relaxed);
                server.broken.notify_one();
            }
            let reason = if error.auth_challenge().is_some() {
                "the server refused the bearer token (check token_file)".to_owned()
            } else if unsent {
                format!("could not reach it ({})", root_cause(&error))
            } else {
                error.to_string()
            };
            let mut e = WireError::new(
                ErrorCode::DeviceError,
                format!(
                    "MCP server {} failed {name}: {reason}{}",
                    cfg.name,
                    if gone {
                        " (the server is gone; reconnecting)"
                    } else {
                        ""
                    }
                ),
            );
            e.retryable = gone;
            return Err(e);
        };
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

/// The innermost cause of `error` (`Connection refused (os error 111)`),
/// without the transport's type names.
fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = error;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

/// `text` cut to `max` characters, and whether it was cut.
fn cut(text: &str, max: usize) -> (String, bool) {
    match text.char_indices().nth(max) {
        Some((at, _)) => (text[..at].to_owned(), true),
        None => (text.to_owned(), false),
    }
}

/// The client side of one connection: hears `notifications/tools/list_changed`
/// sent outside a `subscriptions/listen` stream (servers of protocol
/// versions before 2026-07-28).
#[derive(Debug, Clone)]
struct Listener {
    changed: Arc<Notify>,
}

impl ClientHandler for Listener {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.changed.notify_one();
    }

    fn get_info(&self) -> ClientConfig {
        let mut config = ClientConfig::default();
        config.client_info = Implementation::new("droidwarden", env!("CARGO_PKG_VERSION"));
        config
    }
}

/// On 2026-07-28 a server sends list changes only on a
/// `subscriptions/listen` stream the client opened: open one when the
/// server announces `tools.listChanged`, and poke `changed` for each. Never
/// returns while the stream is open; pending forever when there is none.
async fn listen_for_changes(peer: Peer<RoleClient>, changed: Arc<Notify>, name: String) {
    let info = peer.peer_info();
    let announces = info.as_ref().is_some_and(|i| {
        i.capabilities
            .tools
            .as_ref()
            .is_some_and(|t| t.list_changed == Some(true))
    });
    let modern = info
        .as_ref()
        .is_some_and(|i| !i.protocol_version.has_initialize());
    if announces && modern {
        let filter = SubscriptionFilter::builder().tools_list_changed().build();
        match peer.listen(filter).await {
            Ok(mut subscription) => {
                while let Ok(Some(n)) = subscription.next().await {
                    if matches!(n, ServerNotification::ToolListChangedNotification(_)) {
                        changed.notify_one();
                    }
                }
                tracing::debug!(server = %name, "MCP list-change stream ended");
            }
            Err(e) => {
                tracing::debug!(server = %name, error = %e, "MCP server refused subscriptions/listen");
            }
        }
    }
    std::future::pending::<()>().await;
}

/// Run one server: connect, list, follow list changes, reconnect.
async fn supervise(
    server: Arc<Server>,
    ready: tokio::sync::oneshot::Sender<()>,
    shutdown: CancellationToken,
) {
    let mut ready = Some(ready);
    let mut attempt = 0u32;
    let mut connection = 0u64;
    let name = server.config.name.clone();
    let http = matches!(server.config.transport, Transport::Http { .. });
    loop {
        let connected = tokio::select! {
            () = shutdown.cancelled() => return,
            r = tokio::time::timeout(server.config.timeout, connect(&server)) => r,
        };
        match connected {
            Ok(Ok((running, tools))) => {
                let peer = running.peer().clone();
                let protocol = peer
                    .peer_info()
                    .map(|i| i.protocol_version.to_string())
                    .unwrap_or_default();
                tracing::info!(server = %name, tools = tools.len(), protocol, "MCP server up");
                connection += 1;
                server.set_tools(tools);
                server.set_peer(Some((connection, peer.clone())));
                if let Some(r) = ready.take() {
                    let _ = r.send(());
                }
                attempt = 0;
                let token = running.cancellation_token();
                let waiting = running.waiting();
                tokio::pin!(waiting);
                let listen = listen_for_changes(peer.clone(), server.changed.clone(), name.clone());
                tokio::pin!(listen);
                let mut check =
                    tokio::time::interval_at(tokio::time::Instant::now() + HTTP_CHECK, HTTP_CHECK);
                let why = loop {
                    tokio::select! {
                        () = shutdown.cancelled() => {
                            server.set_peer(None);
                            token.cancel();
                            let _ = tokio::time::timeout(Duration::from_secs(5), waiting).await;
                            return;
                        }
                        _ = &mut waiting => break "exited",
                        () = &mut listen => {}
                        () = server.broken.notified() => {
                            if server.broken_connection.load(Ordering::Relaxed) == connection {
                                break "a call found the connection broken";
                            }
                        }
                        () = server.changed.notified() => {
                            if let Err(e) = refresh(&server, &peer).await {
                                tracing::warn!(server = %name, error = %e, "MCP tools/list after a change failed");
                                break "tools/list failed";
                            }
                        }
                        _ = check.tick(), if http => {
                            if let Err(e) = refresh(&server, &peer).await {
                                tracing::warn!(server = %name, error = %e, "MCP server check failed");
                                break "it stopped answering";
                            }
                        }
                    }
                };
                server.set_peer(None);
                token.cancel();
                tracing::warn!(server = %name, why, "MCP server connection lost; reconnecting");
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

/// List the tools again and replace the cache when the list changed.
async fn refresh(server: &Server, peer: &Peer<RoleClient>) -> Result<(), String> {
    let tools = tokio::time::timeout(server.config.timeout, list(&server.config, peer))
        .await
        .map_err(|_| "no answer in time".to_owned())??;
    let before: Vec<String> = server
        .tools
        .lock()
        .map(|t| t.iter().map(|c| c.offered.name.clone()).collect())
        .unwrap_or_default();
    let after: Vec<String> = tools.iter().map(|c| c.offered.name.clone()).collect();
    if before != after {
        tracing::info!(server = %server.config.name, tools = ?after, "MCP server tools changed");
    }
    server.set_tools(tools);
    Ok(())
}

type Running = rmcp::service::RunningService<RoleClient, Listener>;

/// The current protocol (`server/discover`), falling back to the
/// `initialize` handshake of earlier versions when the server answers
/// that it does not know it (or says nothing within 10 s).
fn lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: None,
    }
}

async fn connect(server: &Server) -> Result<(Running, Vec<CachedTool>), String> {
    let config = &server.config;
    let listener = Listener {
        changed: server.changed.clone(),
    };
    let running = match &config.transport {
        Transport::Stdio { command, args, env } => {
            let mut child = tokio::process::Command::new(command)
                .args(args)
                .envs(env)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::inherit())
                .kill_on_drop(true)
                .spawn()
                .map_err(|e| format!("cannot run {command}: {e}"))?;
            let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
                return Err("no pipes to the child".into());
            };
            let running = listener
                .serve_with_lifecycle((stdout, stdin), lifecycle())
                .await
                .map_err(|e| format!("initialize failed: {e}"))?;
            // Reap the child when it exits (kill_on_drop ends it with us).
            tokio::spawn(async move {
                let _ = child.wait().await;
            });
            running
        }
        Transport::Http { url, token_file } => {
            let transport = super::client_http::transport(url, token_file.as_deref()).await?;
            listener
                .serve_with_lifecycle(transport, lifecycle())
                .await
                .map_err(|e| {
                    if e.auth_challenge().is_some() {
                        format!("{url} refused the bearer token (check token_file)")
                    } else {
                        format!("initialize at {url} failed: {e}")
                    }
                })?
        }
    };
    let tools = list(config, running.peer()).await?;
    Ok((running, tools))
}

/// `tools/list`, filtered and shaped for the agent.
async fn list(config: &ServerConfig, peer: &Peer<RoleClient>) -> Result<Vec<CachedTool>, String> {
    let listed = peer
        .list_all_tools()
        .await
        .map_err(|e| format!("tools/list failed: {e}"))?;
    Ok(listed
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
        .collect())
}

/// The agent's tools beside the phones': these servers' tools.
impl droidwarden_core::assistant::ExtraTools for McpClients {
    fn tools(&self) -> Vec<ExtraTool> {
        McpClients::tools(self)
    }

    fn call<'a>(&'a self, name: &'a str, arguments: Value) -> droidwarden_agent::ToolFuture<'a> {
        Box::pin(McpClients::call(self, name, arguments))
    }
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

    /// A server named `s` with these parts.
    fn server(command: Option<&str>, url: Option<&str>, token_file: Option<&str>) -> RawServer {
        RawServer {
            name: Some("s".into()),
            command: command.map(Into::into),
            url: url.map(Into::into),
            token_file: token_file.map(Into::into),
            ..RawServer::default()
        }
    }

    #[test]
    fn exactly_one_of_command_and_url() {
        let local = Some("http://127.0.0.1:9/mcp");
        let cases = [
            (
                "both",
                server(Some("srv"), local, None),
                "mcp.servers[0].url: set either",
                "",
            ),
            (
                "neither",
                server(None, None, None),
                "mcp.servers[0].command: required",
                "url",
            ),
            (
                "args with url",
                RawServer {
                    args: Some(vec!["x".into()]),
                    ..server(None, local, None)
                },
                "mcp.servers[0].args",
                "",
            ),
            (
                "token with command",
                server(Some("srv"), None, Some("/etc/t")),
                "mcp.servers[0].token_file",
                "",
            ),
            (
                "bad url",
                server(None, Some("tools.example.org"), None),
                "mcp.servers[0].url",
                "",
            ),
            (
                "token in the clear",
                server(None, Some("http://tools.example.org/mcp"), Some("/etc/t")),
                "",
                "https",
            ),
        ];
        for (case, raw, prefix, needle) in cases {
            let err = check_servers(vec![raw]).unwrap_err();
            assert!(
                err.starts_with(prefix) && err.contains(needle),
                "{case}: {err}"
            );
        }
        let ok = server(None, Some("https://tools.example.org/mcp"), Some("/etc/t"));
        let cfg = check_servers(vec![ok]).unwrap().remove(0);
        assert_eq!(
            cfg.transport,
            Transport::Http {
                url: "https://tools.example.org/mcp".into(),
                token_file: Some("/etc/t".into()),
            }
        );
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
