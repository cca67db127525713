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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolCall;
    use crate::tools::schema::Dialect;
    use crate::tools::{Planned, ToolMode, Toolset};
    use serde_json::json;

    fn tool(name: &str, risk: Risk) -> ExtraTool {
        ExtraTool {
            name: name.into(),
            description: "d".into(),
            schema: json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
            risk,
        }
    }

    fn call(name: &str, args: &str) -> ToolCall {
        ToolCall::new("c1", name, args)
    }

    #[test]
    fn extra_tools_are_offered_as_given_and_planned_with_their_risk() {
        let set = Toolset::new(ToolMode::Toolkit, &[], true).with_extra(vec![
            tool("mcp_s_echo", Risk::Low),
            tool("mcp_s_wipe", Risk::High),
            // A name already taken is skipped.
            tool("calculator", Risk::Low),
        ]);
        let spec = set
            .specs()
            .iter()
            .find(|s| s.name == "mcp_s_echo")
            .expect("offered");
        for dialect in [Dialect::OpenAiStrict, Dialect::Anthropic, Dialect::Gemini] {
            assert_eq!(
                spec.parameters_for(dialect).expect("schema")["required"],
                json!(["text"])
            );
        }
        assert_eq!(
            set.specs()
                .iter()
                .filter(|s| s.name == "calculator")
                .count(),
            1
        );
        let planned = set
            .plan(&call("mcp_s_wipe", r#"{"text": "x"}"#))
            .expect("planned");
        assert_eq!(
            planned,
            Planned::Extra {
                tool: "mcp_s_wipe".into(),
                arguments: json!({"text": "x"}),
                risk: Risk::High,
            }
        );
        assert!(set.plan(&call("mcp_s_other", "{}")).is_err());
        assert!(set.plan(&call("mcp_s_echo", "[1]")).is_err());
    }
}
