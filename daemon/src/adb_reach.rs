//! Whether other local users can reach the adb server. The adb server
//! listens on TCP without authentication, so any process that can connect
//! to it reaches the phones around every droidwarden policy
//! (systemd/README.md, "The adb server trusts every local user"). The
//! firewall rule documented there closes it to everyone but root and the
//! service user; `droidwarden status`, run as root, checks whether that
//! holds by trying to connect as `nobody`.

use serde::Serialize;
use std::net::SocketAddrV4;
use std::time::Duration;

/// How long each connection attempt may take.
const ATTEMPT: Duration = Duration::from_secs(5);
/// The account the check connects as: `nobody`, which no policy allows.
const NOBODY: u32 = 65534;

/// What the check found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "other_users", rename_all = "snake_case")]
pub(crate) enum Reach {
    /// A process of another user connected: it can drive the phones.
    Open,
    /// The server answers root but not another user.
    Closed,
    /// Not checked, and why.
    Unchecked {
        /// Why not (not root, no server, no `setpriv`).
        why: String,
    },
}

impl Reach {
    /// A line for `droidwarden status`, when there is something to say.
    pub(crate) fn line(&self, server: SocketAddrV4) -> Option<String> {
        match self {
            Self::Open => Some(format!(
                "warning: the adb server at {server} accepts other local users (a process running as uid {NOBODY} connected): they can reach the phones around droidwarden's policies; allow only root and the service user (systemd/README.md, \"The adb server trusts every local user\")"
            )),
            Self::Closed => Some(format!(
                "the adb server at {server} refuses other local users (checked as uid {NOBODY})"
            )),
            Self::Unchecked { .. } => None,
        }
    }
}

/// Whether a process of another user can connect to the adb server at
/// `server`. Checked only as root (the check runs `setpriv` to become
/// `nobody`), and only when the server answers root.
pub(crate) async fn other_users(server: SocketAddrV4) -> Reach {
    let unchecked = |why: &str| Reach::Unchecked {
        why: why.to_owned(),
    };
    if !rustix::process::geteuid().is_root() {
        return unchecked("run as root to check whether other users can reach it");
    }
    let reached = tokio::time::timeout(ATTEMPT, tokio::net::TcpStream::connect(server)).await;
    if !matches!(reached, Ok(Ok(_))) {
        return unchecked("the adb server does not answer");
    }
    // bash's /dev/tcp opens the connection; the address is the
    // configuration's, passed as arguments, never spliced into the script.
    let attempt = tokio::process::Command::new("setpriv")
        .args([
            &format!("--reuid={NOBODY}"),
            &format!("--regid={NOBODY}"),
            "--clear-groups",
            "--",
            "bash",
            "-c",
            "exec 3<>\"/dev/tcp/$1/$2\"",
            "adb-reach",
            &server.ip().to_string(),
            &server.port().to_string(),
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .status();
    match tokio::time::timeout(ATTEMPT, attempt).await {
        Ok(Ok(status)) if status.success() => Reach::Open,
        // bash's own failure to connect (refused, unreachable).
        Ok(Ok(status)) if status.code() == Some(1) => Reach::Closed,
        Ok(Ok(status)) => unchecked(&format!("setpriv and bash could not run ({status})")),
        // A firewall that drops (rather than rejects) makes it wait.
        Err(_) => Reach::Closed,
        Ok(Err(e)) => unchecked(&format!("cannot run setpriv and bash: {e}")),
    }
}
