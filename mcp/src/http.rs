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

use super::server::PhoneServer;
use bytes::Bytes;
use droidwarden_agent::tools::ToolMode;
use droidwarden_core::assistant::Assistant;
use droidwarden_core::hub::Hub;
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
pub const PATH: &str = "/mcp";
/// The largest request body accepted.
const MAX_BODY: usize = 1024 * 1024;
/// Connections served at once.
const MAX_CLIENTS: usize = 64;
/// How long a connection may take to send its request head: a client
/// sends it in one go, so a slow one holds a connection slot only briefly.
const HEADER_TIMEOUT: Duration = Duration::from_secs(3);
/// How long a request's body may take to arrive once its head has.
const BODY_TIMEOUT: Duration = Duration::from_secs(5);

/// `[mcp] listen` and its guards, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpSettings {
    /// Where to listen.
    pub listen: SocketAddr,
    /// Whether a non-loopback address is allowed.
    pub allow_remote: bool,
    /// The file holding the bearer token clients must send (required
    /// beyond loopback).
    pub token_file: Option<PathBuf>,
    /// Ask approvals inside clients that can elicit (`[mcp] elicitation`).
    pub elicitation: bool,
    /// The person the token belongs to (`[mcp] token_owner`): without one
    /// nobody vouches for who a client is, and its approvals are never
    /// asked in the client itself.
    pub token_owner: Option<String>,
}

impl HttpSettings {
    /// Who answers approvals asked inside this endpoint's clients: the
    /// token's owner, when elicitation is on and a token guards the
    /// endpoint; otherwise nobody (the client would approve itself).
    pub fn elicitor(&self) -> Option<String> {
        match (&self.token_file, &self.token_owner) {
            (Some(_), Some(owner)) if self.elicitation => {
                Some(format!("{owner:?} (holder of the MCP token)"))
            }
            _ => None,
        }
    }
}

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// Bind the listener and read the token.
///
/// # Errors
/// The address cannot be bound, or the token file cannot be read or is
/// empty: what went wrong, naming the file but never its content.
pub async fn bind(settings: &HttpSettings) -> Result<(TcpListener, Option<String>), String> {
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
pub async fn serve(
    listener: TcpListener,
    settings: HttpSettings,
    token: Option<String>,
    hub: Hub,
    assistant: Option<Assistant>,
    mode: ToolMode,
    schemas: droidwarden_agent::tools::ToolSchemas,
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
    let elicitor = settings.elicitor();
    if settings.elicitation && elicitor.is_none() {
        tracing::info!(
            "MCP over HTTP: approvals wait for droidwarden approve; they are asked inside clients only with [mcp] token_file and token_owner"
        );
    }
    let service = StreamableHttpService::new(
        move || {
            // The agent's skills as they are now (built-in ones when the
            // agent is off), for each new session.
            let skills = assistant.as_ref().map_or_else(
                || Arc::new(droidwarden_agent::skills::SkillSet::builtin()),
                droidwarden_core::assistant::Assistant::skills,
            );
            let phones = droidwarden_core::phones::InDaemon::new(hub.clone(), assistant.clone());
            Ok(PhoneServer::new(Arc::new(phones), mode)
                .with_schemas(schemas)
                .with_skills(skills)
                .with_elicitation(elicitor.clone(), Arc::clone(&pending))
                .with_tasks(session_tracker.clone(), session_shutdown.clone()))
        },
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let token: Option<Arc<str>> = token.map(Arc::from);
    tracing::info!(listen = %settings.listen, path = PATH, "MCP over Streamable HTTP");
    let connections = shutdown.clone();
    droidwarden_core::accept::serve_connections(
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
                        let request = match read_body(request).await {
                            Ok(request) => request,
                            Err(answer) => return Ok(answer),
                        };
                        let response = tower_service::Service::call(&mut service, request).await?;
                        Ok(response.map(|body| {
                            body.map_frame(|frame| {
                                frame.map_data(|data| {
                                    super::jsonrpc::outbound_sse(&data).map_or(data, Bytes::from)
                                })
                            })
                            .boxed()
                        }))
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

/// The request with its whole body read, within [`BODY_TIMEOUT`] and
/// [`MAX_BODY`] (a client that trickles its body cannot hold a connection
/// slot for long), and its JSON-RPC checked where the SDK would answer
/// wrongly: a body that is not JSON is `-32700 Parse error` (not a
/// plain-text 415), and `tools/call` arguments that are not an object are
/// `-32602 Invalid params` (not "method not found").
///
/// # Errors
/// The answer to send instead.
async fn read_body(request: Request<Incoming>) -> Result<Request<Full<Bytes>>, Response<Body>> {
    let (parts, body) = request.into_parts();
    let limited = http_body_util::Limited::new(body, MAX_BODY);
    let bytes = match tokio::time::timeout(BODY_TIMEOUT, limited.collect()).await {
        Ok(Ok(collected)) => collected.to_bytes(),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
            return Err(plain(
                StatusCode::PAYLOAD_TOO_LARGE,
                "the request body is larger than 1 MiB",
            ));
        }
        Ok(Err(_)) => {
            return Err(plain(
                StatusCode::BAD_REQUEST,
                "the request body was cut off",
            ));
        }
        Err(_) => {
            return Err(plain(
                StatusCode::REQUEST_TIMEOUT,
                "the request body did not arrive in time",
            ));
        }
    };
    if parts.method == hyper::Method::POST
        && let Some(answer) = rpc_error(&bytes)
    {
        return Err(answer);
    }
    Ok(Request::from_parts(parts, Full::new(bytes)))
}

/// A JSON-RPC error for a POSTed body the SDK would answer wrongly
/// ([`super::jsonrpc::check`]): 400 for one that is not JSON, else 200.
fn rpc_error(body: &[u8]) -> Option<Response<Body>> {
    let refusal = super::jsonrpc::check(body)?;
    let mut answer = Response::new(Full::new(Bytes::from(refusal.body.to_string())).boxed());
    *answer.status_mut() = if refusal.parse_error {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::OK
    };
    answer.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    Some(answer)
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
    use super::{rpc_error, same};

    #[test]
    fn bodies_the_sdk_would_answer_wrongly_get_json_rpc_errors() {
        let read = |body: &[u8]| {
            let answer = rpc_error(body)?;
            let status = answer.status();
            Some(status)
        };
        assert_eq!(read(b"{not json"), Some(hyper::StatusCode::BAD_REQUEST));
        let bad_args = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"android_device","arguments":[1]}}"#;
        assert_eq!(read(bad_args), Some(hyper::StatusCode::OK));
        for fine in [
            &br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","arguments":{}}}"#[..],
            br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x"}}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#,
            br#"[{"jsonrpc":"2.0","method":"notifications/initialized"}]"#,
        ] {
            assert!(rpc_error(fine).is_none());
        }
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(same(b"secret", b"secret"));
        assert!(!same(b"secret", b"secreT"));
        assert!(!same(b"secret", b"secret2"));
        assert!(!same(b"", b"x"));
    }
}
