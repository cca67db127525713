//! The daemon's MCP endpoint over Streamable HTTP (`[mcp] listen`, off by
//! default): the same server as `droidwarden mcp`, inside the daemon, on
//! `http://<listen>/mcp`.
//!
//! Guards, in order: the path (only `/mcp`), the bearer token when one is
//! configured (required beyond loopback), then the SDK's own checks — the
//! `Host` header (loopback names unless `allow_remote`, against DNS
//! rebinding) and the `Origin` header (a browser page may reach the
//! endpoint only from a loopback origin), as the specification requires —
//! and a bound on the request body.

use super::server::{Backend, PhoneServer};
use crate::assistant::Assistant;
use crate::hub::Hub;
use bytes::Bytes;
use droidwarden_agent::tools::ToolMode;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The one path served.
pub(crate) const PATH: &str = "/mcp";
/// The largest request body accepted.
const MAX_BODY: usize = 1024 * 1024;
/// Connections served at once.
const MAX_CLIENTS: usize = 64;
/// How long a connection may take to send its request head.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// `[mcp] listen` and its guards, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HttpSettings {
    /// Where to listen.
    pub(crate) listen: SocketAddr,
    /// Whether a non-loopback address is allowed.
    pub(crate) allow_remote: bool,
    /// The file holding the bearer token clients must send (required
    /// beyond loopback).
    pub(crate) token_file: Option<PathBuf>,
    /// Ask approvals inside clients that can elicit (`[mcp] elicitation`).
    pub(crate) elicitation: bool,
}

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// Bind the listener and read the token.
///
/// # Errors
/// The address cannot be bound, or the token file cannot be read or is
/// empty: what went wrong, naming the file but never its content.
pub(crate) async fn bind(settings: &HttpSettings) -> Result<(TcpListener, Option<String>), String> {
    let token = match &settings.token_file {
        None => None,
        Some(path) => {
            let text = tokio::fs::read_to_string(path)
                .await
                .map_err(|e| format!("cannot read the MCP token file {}: {e}", path.display()))?;
            let token = text.trim().to_owned();
            if token.is_empty() {
                return Err(format!("the MCP token file {} is empty", path.display()));
            }
            Some(token)
        }
    };
    let listener = TcpListener::bind(settings.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", settings.listen))?;
    Ok((listener, token))
}

/// Serve MCP on `listener` until `shutdown`.
#[allow(clippy::too_many_arguments)] // reason: the daemon's wiring, called once.
pub(crate) async fn serve(
    listener: TcpListener,
    settings: HttpSettings,
    token: Option<String>,
    hub: Hub,
    assistant: Option<Assistant>,
    mode: ToolMode,
    tracker: TaskTracker,
    shutdown: CancellationToken,
) {
    let mut config = StreamableHttpServerConfig::default()
        .with_cancellation_token(shutdown.child_token())
        .with_max_request_body_bytes(MAX_BODY)
        .with_allowed_origins([
            "http://localhost:*",
            "http://127.0.0.1:*",
            "http://[::1]:*",
            "https://localhost:*",
        ])
        .enforce_origin_validation();
    if settings.allow_remote {
        // Beyond loopback the token guards the endpoint; the Host check
        // would refuse every name the daemon is reached by.
        config = config.disable_allowed_hosts();
    }
    let (session_tracker, session_shutdown) = (tracker.clone(), shutdown.clone());
    // One table of calls waiting for a 2026-07-28 client's retry for the
    // whole endpoint: those requests are stateless, each its own session.
    let pending = Arc::new(super::elicit::Pending::default());
    let elicitation = settings.elicitation;
    let service = StreamableHttpService::new(
        move || {
            // The agent's skills as they are now (built-in ones when the
            // agent is off), for each new session.
            let skills = assistant.as_ref().map_or_else(
                || Arc::new(droidwarden_agent::skills::SkillSet::builtin()),
                crate::assistant::Assistant::skills,
            );
            Ok(PhoneServer::new(
                Backend::Hub {
                    hub: hub.clone(),
                    assistant: assistant.clone(),
                },
                mode,
            )
            .with_skills(skills)
            .with_elicitation(elicitation, Arc::clone(&pending))
            .with_tasks(session_tracker.clone(), session_shutdown.clone()))
        },
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let token: Option<Arc<str>> = token.map(Arc::from);
    tracing::info!(listen = %settings.listen, path = PATH, "MCP over Streamable HTTP");
    let connections = shutdown.clone();
    crate::accept::serve_connections(
        listener,
        MAX_CLIENTS,
        "mcp",
        &tracker,
        &shutdown,
        |stream, peer| {
            let service = service.clone();
            let token = token.clone();
            let shutdown = connections.clone();
            async move {
                let handler = hyper::service::service_fn(move |request: Request<Incoming>| {
                    let mut service = service.clone();
                    let token = token.clone();
                    async move {
                        if let Some(refused) = guard(&request, token.as_deref()) {
                            return Ok::<_, Infallible>(refused);
                        }
                        tower_service::Service::call(&mut service, request).await
                    }
                });
                let connection = hyper::server::conn::http1::Builder::new()
                    .timer(hyper_util::rt::TokioTimer::new())
                    .header_read_timeout(HEADER_TIMEOUT)
                    .serve_connection(TokioIo::new(stream), handler);
                tokio::pin!(connection);
                tokio::select! {
                    result = connection.as_mut() => {
                        if let Err(e) = result {
                            tracing::debug!(peer = %peer, error = %e, "MCP connection ended");
                        }
                    }
                    () = shutdown.cancelled() => {
                        connection.as_mut().graceful_shutdown();
                        let _ = tokio::time::timeout(Duration::from_secs(2), connection).await;
                    }
                }
            }
        },
    )
    .await;
}

/// The path and the bearer token: `Some(answer)` refuses the request.
fn guard(request: &Request<Incoming>, token: Option<&str>) -> Option<Response<Body>> {
    if request.uri().path() != PATH {
        return Some(plain(
            StatusCode::NOT_FOUND,
            "not found: MCP is served on /mcp",
        ));
    }
    let expected = token?;
    let given = request
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if given.is_some_and(|given| same(given.as_bytes(), expected.as_bytes())) {
        return None;
    }
    let mut answer = plain(StatusCode::UNAUTHORIZED, "a valid bearer token is required");
    answer.headers_mut().insert(
        hyper::header::WWW_AUTHENTICATE,
        hyper::header::HeaderValue::from_static("Bearer"),
    );
    Some(answer)
}

/// Constant-time comparison (the token's length is not a secret).
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn plain(status: StatusCode, text: &'static str) -> Response<Body> {
    let mut answer = Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    *answer.status_mut() = status;
    answer.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    answer
}

#[cfg(test)]
mod tests {
    use super::same;

    #[test]
    fn tokens_compare_whole() {
        assert!(same(b"secret", b"secret"));
        assert!(!same(b"secret", b"secreT"));
        assert!(!same(b"secret", b"secret2"));
        assert!(!same(b"", b"x"));
    }
}
