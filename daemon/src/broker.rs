//! Starting the embedded MQTT broker (see docs/embedded-broker.md).

use std::net::SocketAddr;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Start the embedded broker on `listen`; returns the bound address.
pub(crate) async fn start(
    listen: SocketAddr,
    _stop: CancellationToken,
    _tracker: &TaskTracker,
) -> Result<SocketAddr, String> {
    Err(format!(
        "no embedded broker is built in yet; set [mqtt] url (wanted {listen})"
    ))
}
