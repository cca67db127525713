//! The daemon's skills as MCP **prompts**: `prompts/list` offers each
//! enabled skill (its parameters as the prompt's arguments) and
//! `prompts/get` returns the skill's instructions with its input, for the
//! client's own model to carry out with droidwarden's tools. MCP clients
//! show prompts as commands the user picks (Claude Code's
//! `/mcp__droidwarden__bedtime`, VS Code's `/mcp.droidwarden.bedtime`), and
//! every phone action the model then takes is a tool call that passes the
//! same approval policy as the agent's. See docs/mcp.md.

use droidwarden_agent::skills::{Skill, SkillSet};
use rmcp::ErrorData as McpError;
use rmcp::model::{GetPromptResult, JsonObject, Prompt, PromptArgument, PromptMessage, Role};
use serde_json::{Map, Value};

/// The prompts: one per enabled skill.
pub(crate) fn list(skills: &SkillSet) -> Vec<Prompt> {
    skills
        .enabled()
        .map(|skill| {
            let arguments = arguments_of(skill);
            Prompt::new(
                skill.name.clone(),
                Some(skill.description.clone()),
                (!arguments.is_empty()).then_some(arguments),
            )
            .with_title(title_of(&skill.name))
        })
        .collect()
}

/// `bedtime` → `Bedtime`, `find-my-phone` → `Find my phone`.
fn title_of(name: &str) -> String {
    let text = name.replace('-', " ");
    let mut chars = text.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// The skill's parameters (its JSON Schema's properties) as prompt
/// arguments.
fn arguments_of(skill: &Skill) -> Vec<PromptArgument> {
    let Some(schema) = &skill.parameters else {
        return Vec::new();
    };
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|props| {
            props
                .iter()
                .map(|(name, prop)| {
                    let mut arg = PromptArgument::new(name.clone())
                        .with_required(required.contains(&&**name));
                    let kind = prop.get("type").and_then(Value::as_str);
                    let text = match (prop.get("description").and_then(Value::as_str), kind) {
                        (Some(d), Some(k)) if k != "string" => Some(format!("{d} ({k})")),
                        (Some(d), _) => Some(d.to_owned()),
                        (None, Some(k)) => Some(k.to_owned()),
                        (None, None) => None,
                    };
                    if let Some(text) = text {
                        arg = arg.with_description(text);
                    }
                    arg
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Prompt arguments are strings: read each as its parameter's type
/// (`3` for an integer, `true`, JSON for an object or array).
fn input_of(skill: &Skill, arguments: Option<JsonObject>) -> Result<Value, String> {
    let props = skill
        .parameters
        .as_ref()
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object);
    let mut input = Map::new();
    for (key, value) in arguments.unwrap_or_default() {
        let kind = props
            .and_then(|p| p.get(&key))
            .and_then(|p| p.get("type"))
            .and_then(Value::as_str);
        let value = match (&value, kind) {
            (Value::String(text), Some(k)) if k != "string" => serde_json::from_str(text.trim())
                .map_err(|_| {
                    format!(
                        "{key}: {:?} is not a {k}",
                        text.chars().take(80).collect::<String>()
                    )
                })?,
            _ => value,
        };
        input.insert(key, value);
    }
    let input = Value::Object(input);
    skill.check_input(&input)?;
    Ok(input)
}

/// `prompts/get`: the skill's instructions with its input.
///
/// # Errors
/// An unknown or disabled skill, or arguments that do not fit its
/// parameters: `-32602` (invalid params), as the specification asks.
pub(crate) fn get(
    skills: &SkillSet,
    name: &str,
    arguments: Option<JsonObject>,
) -> Result<GetPromptResult, McpError> {
    let skill = skills
        .enabled_skill(name)
        .map_err(|e| McpError::invalid_params(e, None))?;
    let input = input_of(skill, arguments).map_err(|e| McpError::invalid_params(e, None))?;
    let risk = skill
        .resolve_tools()
        .ok()
        .map(|allowed| skill.risk(&allowed).as_str().to_owned())
        .unwrap_or_else(|| "unknown".to_owned());
    let mut text = format!(
        "Carry out the droidwarden skill \"{name}\": {description}\n\nInput: {input}\n\n",
        description = skill.description,
    );
    if !skill.allowed_tools.is_empty() {
        text.push_str(&format!(
            "The skill may use only: {tools} (risk {risk}). A `service.action` entry is droidwarden's \
             android_device tool with that service_id and action (or the android_<service> tool with \
             that action); call list_devices to see the phones. Actions above the approval threshold \
             wait for the user's approval in droidwarden, and the call returns once it is given.\n\n",
            tools = skill.allowed_tools.join(" "),
        ));
    }
    text.push_str("Instructions:\n\n");
    text.push_str(skill.body.trim());
    Ok(
        GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)])
            .with_description(skill.description.clone()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn builtin_skills_are_prompts_with_their_parameters() {
        let skills = SkillSet::builtin();
        let prompts = list(&skills);
        let find = prompts
            .iter()
            .find(|p| p.name == "find-my-phone")
            .expect("find-my-phone");
        assert_eq!(find.title.as_deref(), Some("Find my phone"));
        let args = find.arguments.as_ref().expect("arguments");
        assert_eq!(args[0].name, "device");
        assert_eq!(args[0].required, Some(false));

        let got = get(
            &skills,
            "find-my-phone",
            Some(json!({"device": "kitchen"}).as_object().unwrap().clone()),
        )
        .expect("prompt");
        let text = serde_json::to_value(&got.messages[0]).unwrap()["content"]["text"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(text.contains(r#"Input: {"device":"kitchen"}"#), "{text}");
        assert!(text.contains("audio_automation.ringer_mode"), "{text}");
        assert!(text.contains("# Find my phone"), "{text}");
    }

    #[test]
    fn bad_names_and_arguments_are_invalid_params() {
        let skills = SkillSet::builtin();
        let err = get(&skills, "no-such-skill", None).unwrap_err();
        assert_eq!(err.code, rmcp::model::ErrorCode::INVALID_PARAMS);
        let err = get(
            &skills,
            "find-my-phone",
            Some(json!({"device": 3}).as_object().unwrap().clone()),
        )
        .unwrap_err();
        assert_eq!(err.code, rmcp::model::ErrorCode::INVALID_PARAMS);
        assert!(err.message.contains("device"), "{}", err.message);
    }
}
