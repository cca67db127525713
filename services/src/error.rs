//! The catalogue's error type: why a (service, action, parameters) request
//! could not become a [`crate::Command`].

use crate::wire::{ErrorCode, WireError};

/// A request that the catalogue rejects. Every variant names what was wrong
/// and, where it helps the caller correct itself, what would have been valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CatalogueError {
    /// No service has that node type or service id.
    #[error("unknown service {given:?}; valid services: {}", valid.join(", "))]
    UnknownService {
        /// What the caller asked for.
        given: String,
        /// Every valid service, as `service_id (nodeType)`.
        valid: Vec<String>,
    },
    /// The service has no action of that name.
    #[error("service {service} has no action {given:?}; valid actions: {}", valid.join(", "))]
    UnknownAction {
        /// The service id.
        service: String,
        /// What the caller asked for.
        given: String,
        /// The service's actions.
        valid: Vec<String>,
    },
    /// The parameters are not a JSON object.
    #[error("parameters for {service}.{action} must be a JSON object, got {got}")]
    ParamsNotObject {
        /// The service id.
        service: String,
        /// The action name.
        action: String,
        /// The JSON type that was given instead.
        got: &'static str,
    },
    /// A parameter the action does not take.
    #[error(
        "{service}.{action} has no parameter {param:?}; {}",
        expected_list(valid)
    )]
    UnknownParameter {
        /// The service id.
        service: String,
        /// The action name.
        action: String,
        /// The unexpected parameter.
        param: String,
        /// The parameters the action does take.
        valid: Vec<String>,
    },
    /// A required parameter is absent.
    #[error("{service}.{action} requires parameter {param:?}")]
    MissingParameter {
        /// The service id.
        service: String,
        /// The action name.
        action: String,
        /// The missing parameter.
        param: String,
    },
    /// A parameter has the wrong type or is out of bounds.
    #[error("invalid parameter {param:?} for {service}.{action}: {reason}")]
    InvalidParameter {
        /// The service id.
        service: String,
        /// The action name.
        action: String,
        /// The parameter (a JSON-pointer-like path for nested values).
        param: String,
        /// What is wrong with it.
        reason: String,
    },
}

fn expected_list(valid: &[String]) -> String {
    if valid.is_empty() {
        "it takes no parameters".to_owned()
    } else {
        format!("valid parameters: {}", valid.join(", "))
    }
}

impl CatalogueError {
    /// The stable wire code for this error.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::UnknownService { .. } => ErrorCode::UnknownService,
            Self::UnknownAction { .. } => ErrorCode::UnknownAction,
            Self::ParamsNotObject { .. }
            | Self::UnknownParameter { .. }
            | Self::MissingParameter { .. }
            | Self::InvalidParameter { .. } => ErrorCode::InvalidParams,
        }
    }
}

impl From<CatalogueError> for WireError {
    fn from(err: CatalogueError) -> Self {
        WireError::new(err.code(), err.to_string())
    }
}
