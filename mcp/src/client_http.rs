//! `[[mcp.servers]]` with `url`: the Streamable HTTP side of the daemon's
//! MCP client (rmcp's transport over our own reqwest client).
//!
//! TLS is rustls with `ring`, verified against the operating system's roots
//! (as the agent's providers do), redirects are not followed (a redirect
//! would replay the bearer token and the session id elsewhere), and the
//! bearer token is read from `token_file` at each (re)connection so a
//! rotated token is picked up. The token never reaches a log or an error
//! message.

use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// TCP connect bound for each request.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest JSON response or SSE event accepted (a result the model gets is
/// cut far shorter, at `max_result_chars`; this bounds the memory).
const MAX_RESPONSE_BYTES: usize = 8 * 1024 * 1024;
/// Longest token file read.
const MAX_TOKEN_BYTES: u64 = 16 * 1024;

/// Check a configured `url`: `http` or `https` with a host. A token is
/// refused over plain `http` beyond loopback, where anyone on the path
/// could read it.
///
/// # Errors
/// What is wrong with it, for the caller to prefix with the key.
pub(crate) fn check_url(text: &str, has_token: bool) -> Result<String, String> {
    let url = reqwest::Url::parse(text.trim())
        .map_err(|e| format!("{text:?} is not a URL such as http://127.0.0.1:8000/mcp ({e})"))?;
    match url.scheme() {
        "http" | "https" => {}
        other => return Err(format!("{text:?}: scheme {other:?} is not http or https")),
    }
    let Some(host) = url.host_str().filter(|h| !h.is_empty()) else {
        return Err(format!("{text:?} has no host"));
    };
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!(
            "{text:?}: no credentials in the URL (use token_file for a bearer token)"
        ));
    }
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    if has_token && url.scheme() == "http" && !loopback {
        return Err(format!(
            "{text:?}: a bearer token would cross the network in clear; use https beyond loopback"
        ));
    }
    Ok(url.to_string())
}

/// Read the bearer token (its first line, trimmed).
///
/// # Errors
/// The file cannot be read or holds no token; the message names the file,
/// never its content.
pub(crate) async fn read_token(path: &Path) -> Result<String, String> {
    use tokio::io::AsyncReadExt as _;
    let file = tokio::fs::File::open(path)
        .await
        .map_err(|e| format!("token_file {}: {e}", path.display()))?;
    let mut text = String::new();
    file.take(MAX_TOKEN_BYTES)
        .read_to_string(&mut text)
        .await
        .map_err(|e| format!("token_file {}: {e}", path.display()))?;
    let token = text.lines().next().unwrap_or_default().trim().to_owned();
    if token.is_empty() {
        return Err(format!("token_file {}: empty", path.display()));
    }
    Ok(token)
}

/// The HTTP client: rustls with `ring` and the system's roots, no
/// redirects, no idle pool (rmcp's advice against delayed-ACK stalls).
fn client() -> Result<reqwest::Client, String> {
    let crypto = Arc::new(rustls::crypto::ring::default_provider());
    let verifier =
        rustls_platform_verifier::Verifier::new(crypto.clone()).map_err(|e| e.to_string())?;
    let tls = rustls::ClientConfig::builder_with_provider(crypto)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .connect_timeout(CONNECT_TIMEOUT)
        .pool_max_idle_per_host(0)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| format!("HTTP client: {e}"))
}

/// The transport to `url`, with the token when there is one.
///
/// # Errors
/// The token cannot be read or the client cannot be built.
pub(crate) async fn transport(
    url: &str,
    token_file: Option<&Path>,
) -> Result<StreamableHttpClientTransport<reqwest::Client>, String> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(url)
        .max_json_response_size(MAX_RESPONSE_BYTES)
        .max_sse_event_size(MAX_RESPONSE_BYTES)
        .reinit_on_expired_session(true);
    if let Some(path) = token_file {
        config = config.auth_header(read_token(path).await?);
    }
    Ok(StreamableHttpClientTransport::with_client(
        client()?,
        config,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked() {
        assert_eq!(
            check_url("http://127.0.0.1:8000/mcp", true).unwrap(),
            "http://127.0.0.1:8000/mcp"
        );
        assert!(check_url("https://tools.example.org/mcp", true).is_ok());
        assert!(check_url("http://tools.example.org/mcp", false).is_ok());
        let clear = check_url("http://tools.example.org/mcp", true).unwrap_err();
        assert!(clear.contains("https"), "{clear}");
        assert!(check_url("http://localhost:9/mcp", true).is_ok());
        assert!(
            check_url("ftp://x/mcp", false)
                .unwrap_err()
                .contains("scheme")
        );
        assert!(check_url("not a url", false).is_err());
        assert!(
            check_url("http://u:p@127.0.0.1/mcp", false)
                .unwrap_err()
                .contains("token_file")
        );
    }

    #[tokio::test]
    async fn tokens_are_read_and_never_shown() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t");
        std::fs::write(&path, "s3cret-token\n").unwrap();
        assert_eq!(read_token(&path).await.unwrap(), "s3cret-token");
        std::fs::write(&path, "\n").unwrap();
        let err = read_token(&path).await.unwrap_err();
        assert!(err.contains("empty"), "{err}");
        let err = read_token(&dir.path().join("none")).await.unwrap_err();
        assert!(err.contains("token_file"), "{err}");
    }
}
