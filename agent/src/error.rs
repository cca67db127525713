//! The crate's one error type. Every variant keeps what a caller needs to
//! react (status, retry hint, the id that was not found); [`AgentError::to_wire`]
//! turns it into the stable [`WireError`] the outside world sees.

use droidwarden_services::{ErrorCode, WireError};
use std::time::Duration;

/// Which limit a model call ran into ([`AgentError::Timeout`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TimeoutKind {
    /// Connecting (`[llm] connect_timeout_s`).
    Connect,
    /// No answer began in time (`[llm] first_byte_timeout_s`): the model
    /// was still reading the prompt, or the server was busy.
    FirstByte,
    /// The answer stopped (`[llm] idle_timeout_s`).
    Idle,
    /// The whole request took too long (`[llm] request_timeout_s`).
    Total,
}

/// What a model or its server cannot do ([`AgentError::Unsupported`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ModelFeature {
    /// Images (a text-only model, or llama.cpp without a projector).
    Images,
    /// Tool calls (a model without tool support, or llama.cpp without
    /// `--jinja`).
    Tools,
}

impl ModelFeature {
    fn describe(self) -> &'static str {
        match self {
            Self::Images => {
                "takes no images (screenshots are read as the screen's UI tree instead; [llm] vision = false says so from the start)"
            }
            Self::Tools => {
                "cannot call tools (llama.cpp: start llama-server with --jinja; Ollama: use a model with tool support)"
            }
        }
    }
}

/// Everything that can go wrong in the agent runtime.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// A configuration value is invalid; `key` names it (e.g. `llm.model`).
    #[error("invalid configuration {key}: {reason}")]
    Config {
        /// The dotted configuration key.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An API key could not be read. Never contains the key itself.
    #[error("API key from {source_name} {reason}")]
    Secret {
        /// The environment variable or file, described.
        source_name: String,
        /// Why it could not be used.
        reason: String,
    },
    /// The provider rejected the credentials (HTTP 401 or 403, or Gemini's
    /// 400 "API key not valid").
    #[error("{provider} rejected the API key (HTTP {status}): {message}")]
    Auth {
        /// Provider name.
        provider: &'static str,
        /// HTTP status.
        status: u16,
        /// The provider's message.
        message: String,
    },
    /// The provider does not know the model (HTTP 404).
    #[error("{provider} does not know model {model:?}: {message}")]
    ModelNotFound {
        /// Provider name.
        provider: &'static str,
        /// The configured model.
        model: String,
        /// The provider's message.
        message: String,
    },
    /// Still rate limited (HTTP 429) after every retry, or the provider asked
    /// for a longer wait than allowed.
    #[error("{provider} rate limit after {attempts} attempt(s){}", retry_after.map(|d| format!("; retry after {} s", d.as_secs())).unwrap_or_default())]
    RateLimited {
        /// Provider name.
        provider: &'static str,
        /// Attempts made.
        attempts: u32,
        /// The provider's last `Retry-After`, if any.
        retry_after: Option<Duration>,
    },
    /// Any other HTTP error status from the provider (after retries for 5xx).
    #[error("{provider} answered HTTP {status} after {attempts} attempt(s): {message}")]
    Http {
        /// Provider name.
        provider: &'static str,
        /// HTTP status.
        status: u16,
        /// Attempts made.
        attempts: u32,
        /// The provider's message.
        message: String,
    },
    /// The provider could not be reached, or the connection failed (after retries).
    #[error("cannot reach {provider} after {attempts} attempt(s): {message}")]
    Connect {
        /// Provider name.
        provider: &'static str,
        /// Attempts made.
        attempts: u32,
        /// What failed.
        message: String,
    },
    /// A provider call timed out: connecting, waiting for the answer to
    /// begin, between two pieces of it, or overall. `partial` says whether
    /// text had already been shown (then it is not retried).
    #[error("{provider} timed out after {attempts} attempt(s){}: {message}", if *partial { " (partial text already streamed)" } else { "" })]
    Timeout {
        /// Provider name.
        provider: &'static str,
        /// Attempts made.
        attempts: u32,
        /// Which limit.
        kind: TimeoutKind,
        /// Whether text deltas had been emitted.
        partial: bool,
        /// What happened, naming the limit.
        message: String,
    },
    /// The model or its server cannot do what the request needs (images,
    /// tools); no retry can change that.
    #[error("the {provider} model {}: {message}", feature.describe())]
    Unsupported {
        /// Provider name.
        provider: &'static str,
        /// What it cannot do.
        feature: ModelFeature,
        /// The provider's message.
        message: String,
    },
    /// The request is larger than the model's context window.
    #[error(
        "the conversation does not fit the {provider} model's context window (use fewer [agent] memory_turns, a smaller max_result_chars, or a larger context on the server): {message}"
    )]
    ContextExceeded {
        /// Provider name.
        provider: &'static str,
        /// The provider's message.
        message: String,
    },
    /// A streamed answer ended before it was complete. `partial` says whether
    /// text had already been shown (then it is not retried: the text would
    /// be duplicated).
    #[error("{provider} stream ended early after {attempts} attempt(s){}: {message}", if *partial { " (partial text already streamed)" } else { "" })]
    StreamCut {
        /// Provider name.
        provider: &'static str,
        /// Attempts made.
        attempts: u32,
        /// Whether text deltas had been emitted.
        partial: bool,
        /// What happened.
        message: String,
    },
    /// The provider answered something we cannot parse.
    #[error("unexpected answer from {provider}: {message}")]
    BadResponse {
        /// Provider name.
        provider: &'static str,
        /// What was wrong.
        message: String,
    },
    /// Building the HTTP client failed (TLS set-up).
    #[error("HTTP client set-up failed: {0}")]
    Client(String),
    /// SQLite failed.
    #[error("session store: {0}")]
    Store(#[from] rusqlite::Error),
    /// A group commit failed; the work of this call was rolled back.
    #[error("session store commit failed: {0}")]
    StoreCommit(String),
    /// The store's thread is gone (the store was closed or panicked).
    #[error("session store is closed")]
    StoreClosed,
    /// A file-system problem with the store directory.
    #[error("session store directory {path}: {source}")]
    StoreDir {
        /// The directory.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A checkpoint could not be (de)serialized.
    #[error("checkpoint encoding: {0}")]
    Encoding(#[from] serde_json::Error),
    /// No approval has that id.
    #[error("no approval {0:?}")]
    UnknownApproval(String),
    /// The approval was already answered, or expired.
    #[error("approval {id:?} is already {status}")]
    ApprovalClosed {
        /// The approval id.
        id: String,
        /// `approved`, `denied` or `expired`.
        status: String,
    },
    /// An approval from the account that asked for the run: a machine
    /// account may deny its own run's requests, never approve them.
    #[error(
        "approval {id:?} was asked for by {account}, so it cannot approve it: the approval must come from someone else (a person on the CLI or D-Bus, or another account)"
    )]
    SelfApproval {
        /// The approval id.
        id: String,
        /// The account that asked, and answered.
        account: String,
    },
    /// No grant has that id.
    #[error("no grant {0:?}")]
    UnknownGrant(String),
    /// The grant was already revoked, or its run has ended.
    #[error("grant {0:?} was already revoked or its run has ended")]
    GrantClosed(String),
    /// The answer cannot be applied to this request (a grant for an action
    /// it cannot cover, edits that fail validation or change the action).
    #[error("{0}")]
    InvalidAnswer(String),
    /// No session has that id.
    #[error("no session {0:?}")]
    UnknownSession(String),
    /// No run has that id, or it already finished.
    #[error("no resumable run {0:?}")]
    UnknownRun(String),
    /// The run is already being driven in this process.
    #[error("run {0:?} is already running")]
    RunBusy(String),
    /// A skill cannot be run: unknown, disabled, bad input, or tools that
    /// do not exist. The wire error is what the caller sees.
    #[error("{}", .0.message)]
    Skill(WireError),
    /// Too many runs are going and waiting already
    /// (`[agent] max_concurrent_runs` + `max_queued`); nothing was stored
    /// or sent to the model. Retryable.
    #[error(
        "the agent is busy: {running} run(s) going and {queued} waiting (limits: max_concurrent_runs = {max_running}, max_queued = {max_queued}); nothing was started, try again later"
    )]
    Busy {
        /// Runs holding a slot.
        running: usize,
        /// Runs waiting for one.
        queued: usize,
        /// `max_concurrent_runs`.
        max_running: usize,
        /// `max_queued`.
        max_queued: usize,
    },
    /// The prompt is empty or too long.
    #[error("invalid prompt: {0}")]
    InvalidPrompt(String),
    /// A session or run id is malformed.
    #[error("invalid id {0:?}: use 1-64 letters, digits, '-' or '_'")]
    InvalidId(String),
    /// Shutdown was requested; the run is checkpointed and can be resumed.
    #[error("run {run_id} interrupted by shutdown; resumable")]
    Interrupted {
        /// The run, to resume later.
        run_id: String,
    },
}

impl AgentError {
    /// Whether the model said it takes no images: the agent goes on
    /// without them.
    pub fn refused_images(&self) -> bool {
        matches!(
            self,
            Self::Unsupported {
                feature: ModelFeature::Images,
                ..
            }
        )
    }

    /// Whether the session store's directory or file could not be created
    /// or opened for writing (read-only or full file system, a file in the
    /// way, permissions): the daemon's start-up reports it as such.
    pub fn store_cannot_create(&self) -> bool {
        match self {
            Self::StoreDir { .. } => true,
            Self::Store(rusqlite::Error::SqliteFailure(f, _)) => matches!(
                f.code,
                rusqlite::ErrorCode::CannotOpen
                    | rusqlite::ErrorCode::ReadOnly
                    | rusqlite::ErrorCode::PermissionDenied
                    | rusqlite::ErrorCode::DiskFull
            ),
            _ => false,
        }
    }

    /// Whether this is a failure of the session store (I/O, SQLite, a
    /// checkpoint that cannot be read back).
    pub fn is_store_failure(&self) -> bool {
        matches!(
            self,
            Self::Store(_)
                | Self::StoreDir { .. }
                | Self::StoreClosed
                | Self::StoreCommit(_)
                | Self::Encoding(_)
        )
    }

    /// The stable wire form: a code from [`ErrorCode`], the message, and
    /// whether trying again later may help.
    pub fn to_wire(&self) -> WireError {
        let (code, retryable) = match self {
            Self::Config { .. } | Self::Secret { .. } | Self::Client(_) => {
                (ErrorCode::Internal, false)
            }
            Self::Auth { .. } => (ErrorCode::PermissionDenied, false),
            Self::ModelNotFound { .. } => (ErrorCode::NotFound, false),
            Self::RateLimited { .. } | Self::Connect { .. } | Self::StreamCut { .. } => {
                (ErrorCode::Internal, true)
            }
            // A prompt that took too long to read takes as long again.
            Self::Timeout { kind, .. } => (
                ErrorCode::Timeout,
                matches!(kind, TimeoutKind::Connect | TimeoutKind::Idle),
            ),
            Self::Unsupported { .. } => (ErrorCode::UnsupportedAction, false),
            Self::ContextExceeded { .. } => (ErrorCode::InvalidRequest, false),
            Self::Http { status, .. } if *status >= 500 || matches!(status, 408 | 409) => {
                (ErrorCode::Internal, true)
            }
            // The provider refused the request itself: the same request
            // is refused again.
            Self::Http { .. } => (ErrorCode::InvalidRequest, false),
            Self::BadResponse { .. } => (ErrorCode::Internal, false),
            Self::Store(_)
            | Self::StoreClosed
            | Self::StoreCommit(_)
            | Self::StoreDir { .. }
            | Self::Encoding(_) => (ErrorCode::Internal, false),
            Self::UnknownApproval(_) | Self::UnknownSession(_) | Self::UnknownRun(_) => {
                (ErrorCode::NotFound, false)
            }
            Self::ApprovalClosed { .. } | Self::RunBusy(_) | Self::GrantClosed(_) => {
                (ErrorCode::InvalidRequest, false)
            }
            Self::UnknownGrant(_) => (ErrorCode::NotFound, false),
            Self::SelfApproval { .. } => (ErrorCode::PermissionDenied, false),
            Self::InvalidAnswer(_) => (ErrorCode::InvalidParams, false),
            Self::InvalidId(_) | Self::InvalidPrompt(_) => (ErrorCode::InvalidParams, false),
            Self::Interrupted { .. } => (ErrorCode::Internal, true),
            Self::Busy { .. } => (ErrorCode::Busy, true),
            Self::Skill(e) => return e.clone(),
        };
        WireError {
            code,
            message: self.to_string(),
            retryable,
            details: None,
        }
    }
}
