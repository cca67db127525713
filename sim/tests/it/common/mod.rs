//! What the sim's integration tests share.

use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;

/// The line the `droidwarden-sim` binary prints on its piped standard
/// output once it is ready (`droidwarden-sim ready adb=… control=…`),
/// within `deadline`.
pub(crate) async fn ready_line(child: &mut Child, deadline: Duration) -> String {
    let stdout = child.stdout.take().expect("piped stdout");
    let mut lines = BufReader::new(stdout).lines();
    tokio::time::timeout(deadline, lines.next_line())
        .await
        .expect("ready line within the deadline")
        .expect("readable stdout")
        .expect("a ready line")
}
