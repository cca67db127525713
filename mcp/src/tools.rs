//! The phones as MCP tools: the agent's own tools (`droidwarden_agent::tools`,
//! toolkit or direct mode, planned and validated by the same code) with
//! what MCP adds on top — an output schema, annotations, and a `device`
//! argument that is always there — plus `list_devices`. Like the agent's,
//! the device tools carry a compact index of the actions and a free-form
//! `parameters`; `describe_action` gives an action's full schema.

use droidwarden_agent::tools::schema::Dialect;
use droidwarden_agent::tools::{
    DESCRIBE_TOOL, DIRECT_PREFIX, TOOLKIT_TOOL, ToolMode, ToolSchemas, Toolset,
};
use droidwarden_agent::{DeviceSummary, ToolCall};
use droidwarden_services::{ActionSpec, Catalogue, Risk, ServiceSpec, WireError};
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{Map, Value, json};
use std::sync::Arc;

/// The tool that lists the devices.
pub(crate) const LIST_DEVICES: &str = "list_devices";

/// The tools for one set of devices.
#[derive(Debug, Clone)]
pub(crate) struct McpTools {
    toolset: Toolset,
    tools: Vec<Tool>,
}

impl McpTools {
    /// Build the tools for `devices` in `mode`, carrying `schemas`.
    pub(crate) fn new(mode: ToolMode, schemas: ToolSchemas, devices: &[DeviceSummary]) -> Self {
        let toolset = Toolset::new(mode, devices, false).with_schemas(schemas);
        let mut tools: Vec<Tool> = toolset
            .specs()
            .iter()
            .map(|spec| {
                if spec.name == DESCRIBE_TOOL {
                    return describe_tool(
                        &spec.description,
                        spec.parameters_for(Dialect::Anthropic),
                    );
                }
                let services = covered(&spec.name, devices);
                let mut input = spec
                    .parameters_for(Dialect::Anthropic)
                    .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
                add_device(&mut input, devices);
                let actions: Vec<&ActionSpec> =
                    services.iter().flat_map(|s| s.actions.iter()).collect();
                let title = match services.as_slice() {
                    [one] if spec.name != TOOLKIT_TOOL => format!("Android: {}", one.id),
                    _ => "Android phones".to_owned(),
                };
                let read_only = actions.iter().all(|a| !a.mutates);
                let annotations = ToolAnnotations::with_title(title.clone())
                    .read_only(read_only)
                    .destructive(actions.iter().any(|a| a.risk == Risk::High))
                    .idempotent(read_only)
                    .open_world(false);
                Tool::new(
                    spec.name.clone(),
                    spec.description.clone(),
                    Arc::new(object(input)),
                )
                .with_title(title)
                // With the index, the result is not spelt out per action
                // (the union of every result schema is most of a full
                // list's size): any JSON, as structuredContent carries it.
                .with_raw_output_schema(Arc::new(object(output_schema(
                    if schemas == ToolSchemas::Full {
                        &actions
                    } else {
                        &[]
                    },
                ))))
                .with_annotations(annotations)
            })
            .collect();
        tools.push(
            Tool::new(
                LIST_DEVICES,
                "The phones droidwarden knows: name, transport, whether each is online, and the services it offers.",
                Arc::new(object(json!({
                    "type": "object",
                    "properties": {},
                    "additionalProperties": false
                }))),
            )
            .with_title("List phones")
            .with_raw_output_schema(Arc::new(object(json!({
                "type": "object",
                "properties": {
                    "devices": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "name": {"type": "string"},
                                "online": {"type": "boolean"},
                                "services": {"type": "array", "items": {"type": "string"}}
                            },
                            "required": ["name", "online", "services"]
                        }
                    }
                },
                "required": ["devices"]
            }))))
            .with_annotations(
                ToolAnnotations::with_title("List phones")
                    .read_only(true)
                    .destructive(false)
                    .idempotent(true)
                    .open_world(false),
            ),
        );
        Self { toolset, tools }
    }

    /// The tools, for `tools/list`.
    pub(crate) fn tools(&self) -> &[Tool] {
        &self.tools
    }

    /// Plan a call of tool `name` with `arguments` as the agent plans a
    /// model's call: the catalogue's validation and errors.
    ///
    /// # Errors
    /// The wire error the agent's model would see.
    pub(crate) fn plan(
        &self,
        name: &str,
        arguments: &Map<String, Value>,
    ) -> Result<droidwarden_agent::tools::Planned, WireError> {
        self.toolset.plan(&ToolCall {
            id: "mcp".into(),
            name: name.to_owned(),
            arguments: Value::Object(arguments.clone()).to_string(),
            signature: None,
        })
    }
}

/// `describe_action`: reads the catalogue only.
fn describe_tool(description: &str, input: Option<Value>) -> Tool {
    let input = input.unwrap_or_else(|| json!({"type": "object", "properties": {}}));
    Tool::new(
        DESCRIBE_TOOL,
        description.to_owned(),
        Arc::new(object(input)),
    )
    .with_title("Describe an action")
    .with_annotations(
        ToolAnnotations::with_title("Describe an action")
            .read_only(true)
            .destructive(false)
            .idempotent(true)
            .open_world(false),
    )
}

/// The services a tool covers (the toolkit: every service a device offers).
fn covered(tool: &str, devices: &[DeviceSummary]) -> Vec<&'static ServiceSpec> {
    let offered = |s: &&ServiceSpec| devices.iter().any(|d| d.services.iter().any(|x| x == s.id));
    let all = Catalogue::get().services().iter().filter(offered);
    if tool == TOOLKIT_TOOL {
        all.collect()
    } else {
        let id = tool.strip_prefix(DIRECT_PREFIX).unwrap_or(tool);
        all.filter(|s| s.id == id).collect()
    }
}

/// `device`: an enum of the known devices, always offered (the agent's
/// tools leave it out when there is only one).
fn add_device(input: &mut Value, devices: &[DeviceSummary]) {
    if devices.is_empty() {
        return;
    }
    let Some(props) = input.get_mut("properties").and_then(Value::as_object_mut) else {
        return;
    };
    props.entry("device").or_insert_with(|| {
        json!({
            "type": "string",
            "enum": devices.iter().map(|d| d.name.as_str()).collect::<Vec<_>>(),
            "description": "which phone; may be left out when only one phone offers the service"
        })
    });
}

/// The result of a device tool: which device and action answered, and
/// the action's result (one of the covered actions' result schemas).
fn output_schema(actions: &[&ActionSpec]) -> Value {
    let mut results: Vec<Value> = Vec::new();
    for a in actions {
        let schema = a.result.to_json();
        if !results.contains(&schema) {
            results.push(schema);
        }
    }
    let result = match results.len() {
        0 => json!({}),
        1 => results.remove(0),
        _ => json!({ "anyOf": results }),
    };
    json!({
        "type": "object",
        "properties": {
            "device": {"type": ["string", "null"], "description": "the phone that answered"},
            "service": {"type": "string"},
            "action": {"type": "string"},
            "result": result
        },
        "required": ["service", "action", "result"]
    })
}

fn object(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phone(name: &str, services: &[&str]) -> DeviceSummary {
        DeviceSummary {
            name: name.into(),
            services: services.iter().map(|s| (*s).to_owned()).collect(),
            online: true,
        }
    }

    #[test]
    fn direct_tools_carry_schemas_and_annotations() {
        let devices = [phone("pixel", &["battery", "wifi_automation"])];
        let tools = McpTools::new(ToolMode::Direct, ToolSchemas::Index, &devices);
        let names: Vec<&str> = tools.tools().iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(
            names,
            [
                "android_battery",
                "android_wifi_automation",
                DESCRIBE_TOOL,
                LIST_DEVICES
            ]
        );
        let describe = &tools.tools()[2];
        assert_eq!(
            describe.annotations.as_ref().unwrap().read_only_hint,
            Some(true)
        );
        assert!(describe.input_schema["properties"].get("device").is_none());
        let battery = &tools.tools()[0];
        let annotations = battery.annotations.as_ref().unwrap();
        assert_eq!(annotations.read_only_hint, Some(true));
        assert_eq!(annotations.destructive_hint, Some(false));
        assert_eq!(
            battery.input_schema["properties"]["device"]["enum"],
            json!(["pixel"])
        );
        let out = battery.output_schema.as_ref().unwrap();
        assert_eq!(out["type"], "object");
        assert!(out["properties"]["result"].is_object());
        let wifi = &tools.tools()[1];
        assert_eq!(
            wifi.annotations.as_ref().unwrap().read_only_hint,
            Some(false)
        );
    }

    #[test]
    fn calls_are_planned_by_the_agents_rules() {
        let devices = [phone("pixel", &["battery"])];
        let tools = McpTools::new(ToolMode::Toolkit, ToolSchemas::Index, &devices);
        let args = |v: Value| v.as_object().unwrap().clone();
        let planned = tools
            .plan(
                TOOLKIT_TOOL,
                &args(json!({"service_id": "battery", "action": "status"})),
            )
            .unwrap();
        assert!(matches!(
            planned,
            droidwarden_agent::tools::Planned::Device { device: Some(ref d), .. } if d == "pixel"
        ));
        let err = tools
            .plan(
                TOOLKIT_TOOL,
                &args(json!({"service_id": "battery", "action": "explode"})),
            )
            .unwrap_err();
        assert_eq!(err.code, droidwarden_services::ErrorCode::UnknownAction);
    }
}
