//! One accept loop for the daemon's small TCP servers (the metrics
//! endpoint, MCP over HTTP): a bound on connections served at once, and an
//! end at shutdown.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Accept connections on `listener` until `shutdown`, at most `max_clients`
/// served at once (the next accept waits for a free place), each served by
/// the future `serve` makes, on `tracker`. A failed accept (a connection
/// reset before it was taken) is logged at debug level and skipped.
pub async fn serve_connections<F, Fut>(
    listener: TcpListener,
    max_clients: usize,
    what: &'static str,
    tracker: &TaskTracker,
    shutdown: &CancellationToken,
    mut serve: F,
) where
    F: FnMut(TcpStream, SocketAddr) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let clients = Arc::new(Semaphore::new(max_clients));
    loop {
        let permit = tokio::select! {
            () = shutdown.cancelled() => return,
            permit = Arc::clone(&clients).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => return,
            },
        };
        let (stream, peer) = tokio::select! {
            () = shutdown.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::debug!(server = what, error = %e, "accept failed");
                    continue;
                }
            },
        };
        let connection = serve(stream, peer);
        tracker.spawn(async move {
            let _permit = permit;
            connection.await;
        });
    }
}
