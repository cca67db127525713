//! The crate's one error type.

use std::net::SocketAddr;
use std::path::PathBuf;

/// Everything that can go wrong starting or steering the emulated phone.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// A listening socket could not be opened.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The operating system's reason.
        #[source]
        source: std::io::Error,
    },
    /// The replay directory or its index is unusable.
    #[error("replay index {path}: {reason}")]
    Replay {
        /// The `index.json` path.
        path: PathBuf,
        /// What is wrong, naming the entry where it applies.
        reason: String,
    },
    /// The command-log file could not be opened for appending.
    #[error("cannot open command log {path}: {source}")]
    CommandLog {
        /// The file asked for.
        path: PathBuf,
        /// The operating system's reason.
        #[source]
        source: std::io::Error,
    },
    /// A configuration value is invalid.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// A control request is invalid (bad path, wrong value type…).
    #[error("{0}")]
    Control(String),
    /// The simulator has been shut down.
    #[error("the simulator is shut down")]
    ShutDown,
}
