//! Tools beyond the catalogue that the host offers as they are (the
//! daemon's MCP servers' tools): a name, a description, a raw JSON Schema
//! and a risk that goes through the approval policy as
//! `mcp.<name>` (see [`EXTRA_SERVICE`]).

use droidwarden_services::Risk;
use serde_json::Value;

/// The "service" an extra tool is approved under: the policy sees
/// `mcp.<tool name>`, so `deny = ["mcp.*"]` refuses them all.
pub const EXTRA_SERVICE: &str = "mcp";

/// One extra tool as the host offers it.
#[derive(Debug, Clone, PartialEq)]
pub struct ExtraTool {
    /// The tool's name for the model (unique; e.g. `mcp_files_read`).
    pub name: String,
    /// Description for the model.
    pub description: String,
    /// Its input JSON Schema (an object schema), rendered as it is.
    pub schema: Value,
    /// Its risk, for the approval policy.
    pub risk: Risk,
}
