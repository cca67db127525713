//! `droidwarden services [SERVICE [ACTION]]`: the catalogue for people.
//!
//! Without names, one line per action. With a service (id or node type),
//! each of its actions in full: risk, parameters and the result's fields,
//! with their types, bounds and descriptions, as the catalogue's schemas
//! (the services' records) say, and an example `droidwarden call`. With
//! `--json`, the same selection as JSON (the whole catalogue without names).

use droidwarden_bridge::TransportKind;
use droidwarden_bridge::adb::quote;
use droidwarden_services::schema::{Kind, Property, Schema};
use droidwarden_services::{ActionSpec, Catalogue, ServiceSpec, WireError};
use serde_json::{Value, json};
use std::fmt::Write as _;

/// What `droidwarden services` prints for `service` and `action` (either
/// may be absent; an action needs a service): text, or JSON.
///
/// # Errors
/// An unknown service or action, listing the valid names.
pub(crate) fn render(
    service: Option<&str>,
    action: Option<&str>,
    as_json: bool,
) -> Result<String, WireError> {
    let catalogue = Catalogue::get();
    let Some(service) = service else {
        return Ok(if as_json {
            pretty(&json!({ "services": droidwarden_bridge::services_json() }))
        } else {
            overview(catalogue)
        });
    };
    let spec = catalogue.service(service).map_err(WireError::from)?;
    let actions: Vec<&ActionSpec> = match action {
        Some(action) => vec![
            catalogue
                .action(spec.id, action)
                .map_err(WireError::from)?
                .1,
        ],
        None => spec.actions.iter().collect(),
    };
    if as_json {
        return Ok(pretty(&match (action, actions.first()) {
            (Some(_), Some(one)) => droidwarden_bridge::action_json(spec, one),
            _ => droidwarden_bridge::service_json(spec),
        }));
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} ({}) — {}",
        spec.id, spec.node_type, spec.description
    );
    for a in actions {
        out.push('\n');
        describe_action(&mut out, spec, a);
    }
    Ok(out)
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default() + "\n"
}

/// One line per action, every service.
fn overview(catalogue: &Catalogue) -> String {
    let mut out = String::new();
    for s in catalogue.services() {
        let _ = writeln!(out, "{} ({}) — {}", s.id, s.node_type, s.description);
        for a in &s.actions {
            let params: Vec<String> = a
                .params
                .iter()
                .map(|p| {
                    if p.required {
                        p.name.to_owned()
                    } else {
                        format!("{}?", p.name)
                    }
                })
                .collect();
            let _ = writeln!(
                out,
                "  {:<20} {:<6} {}{}{}",
                a.name,
                a.risk.as_str(),
                if params.is_empty() {
                    String::new()
                } else {
                    format!("{{{}}} ", params.join(", "))
                },
                a.description,
                companion_only(s, a)
            );
        }
    }
    out.push_str("\n`droidwarden services SERVICE [ACTION]` shows parameters and results.\n");
    out
}

fn companion_only(service: &ServiceSpec, action: &ActionSpec) -> &'static str {
    match TransportKind::Adb.unsupported_reason(service.id, action.name) {
        Some(_) => " [companion only]",
        None => "",
    }
}

/// One action in full.
fn describe_action(out: &mut String, service: &ServiceSpec, a: &ActionSpec) {
    let _ = writeln!(
        out,
        "{}.{} — {} risk, {}{}",
        service.id,
        a.name,
        a.risk.as_str(),
        if a.mutates {
            "changes the phone"
        } else {
            "reads"
        },
        companion_only(service, a)
    );
    let _ = writeln!(out, "  {}", a.description);
    if a.params.is_empty() {
        out.push_str("  Parameters: none\n");
    } else {
        out.push_str("  Parameters:\n");
        for p in &a.params {
            let name = if p.required {
                p.name.to_owned()
            } else {
                format!("{} (optional)", p.name)
            };
            field(out, 2, &name, &p.schema);
        }
    }
    match &a.result.kind {
        Kind::Object(fields) if !fields.is_empty() => {
            out.push_str("  Result:\n");
            fields_of(out, 2, fields);
        }
        _ => out.push_str("  Result: {}\n"),
    }
    let _ = writeln!(
        out,
        "  Example: droidwarden call {} {}{}",
        service.id,
        a.name,
        example_words(&a.example)
    );
}

fn fields_of(out: &mut String, depth: usize, fields: &[Property]) {
    for f in fields {
        field(out, depth, f.name, &f.schema);
    }
}

/// `name  type  description`, then the fields of an object (or of an
/// array's objects), one level deeper.
fn field(out: &mut String, depth: usize, name: &str, schema: &Schema) {
    let indent = "  ".repeat(depth);
    let width = 24usize.saturating_sub(indent.len()).max(name.len() + 1);
    let _ = write!(out, "{indent}{name:<width$} {}", type_of(schema));
    if !schema.description.is_empty() {
        let _ = write!(out, " — {}", schema.description);
    }
    out.push('\n');
    match &schema.kind {
        Kind::Object(fields) => fields_of(out, depth + 1, fields),
        Kind::Array(items) => {
            if let Kind::Object(fields) = &items.kind {
                fields_of(out, depth + 1, fields);
            }
        }
        _ => {}
    }
}

/// A schema's type in a few words: `integer 0–100`, `one of: a, b`,
/// `list of objects`, `list, each integer`, `…, or null`.
fn type_of(schema: &Schema) -> String {
    let base = match &schema.kind {
        Kind::String {
            values: Some(values),
            ..
        } => format!("one of: {}", values.join(", ")),
        Kind::String { max_len, .. } => match max_len {
            Some(max) => format!("string (at most {max} characters)"),
            None => "string".to_owned(),
        },
        Kind::Integer { min, max } => match (min, max) {
            (Some(min), Some(max)) => format!("integer {min}–{max}"),
            (Some(min), None) => format!("integer ≥ {min}"),
            (None, Some(max)) => format!("integer ≤ {max}"),
            (None, None) => "integer".to_owned(),
        },
        Kind::Number => "number".to_owned(),
        Kind::Boolean => "boolean".to_owned(),
        Kind::Object(_) => "object".to_owned(),
        Kind::Array(items) => match &items.kind {
            Kind::Object(_) => "list of objects".to_owned(),
            _ => format!("list, each {}", type_of(items)),
        },
    };
    if schema.nullable {
        format!("{base}, or null")
    } else {
        base
    }
}

/// An example's parameters as `droidwarden call` words: ` key=value` each,
/// quoted for a POSIX shell where needed (the bridge's own quoting).
fn example_words(example: &Value) -> String {
    example_pairs(example)
        .iter()
        .map(|pair| format!(" {}", quote(pair)))
        .collect()
}

/// An example's parameters as the `KEY=VALUE` words `droidwarden call`
/// reads (a string as it is, anything else as JSON).
pub(crate) fn example_pairs(example: &Value) -> Vec<String> {
    let Some(params) = example.as_object() else {
        return Vec::new();
    };
    params
        .iter()
        .map(|(key, value)| match value {
            Value::String(s) => format!("{key}={s}"),
            other => format!("{key}={other}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The line whose first word is `name`, its words joined by one space,
    /// and how deep it is indented.
    fn line(text: &str, name: &str) -> (usize, String) {
        let line = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no line for {name} in:\n{text}"));
        let indent = line.len() - line.trim_start().len();
        (
            indent,
            line.split_whitespace().collect::<Vec<_>>().join(" "),
        )
    }

    #[test]
    fn an_action_in_full_shows_its_result_fields_from_the_record() {
        let text = render(Some("battery"), Some("status"), false).unwrap();
        assert!(text.starts_with("battery (batteryMonitor) — "), "{text}");
        assert!(text.contains("battery.status — low risk, reads"), "{text}");
        assert!(text.contains("  Parameters: none"), "{text}");
        assert_eq!(
            line(&text, "level_percent"),
            (
                4,
                "level_percent integer 0–100 — Charge in percent: `level * 100 / scale`, clamped to 0–100."
                    .into()
            )
        );
        assert_eq!(
            line(&text, "plugged").1,
            "plugged one of: ac, usb, wireless, dock, or null — The power source: `ac`, `usb`, `wireless` or `dock`; null on battery."
        );
        assert!(
            text.contains("Example: droidwarden call battery status\n"),
            "{text}"
        );
    }

    #[test]
    fn nested_records_and_parameters_are_indented_under_their_field() {
        let text = render(Some("deviceStateAutomation"), Some("storage"), false).unwrap();
        assert_eq!(
            line(&text, "data"),
            (
                4,
                "data object, or null — App data, `/data`; null when the phone has none.".into()
            )
        );
        assert_eq!(
            line(&text, "mount"),
            (
                6,
                "mount string — Where it is mounted, e.g. `/data`.".into()
            )
        );
        // A bound that follows from the field's type (`u64`).
        assert_eq!(
            line(&text, "size_bytes").1,
            "size_bytes integer ≥ 0 — Total size."
        );
        let text = render(Some("audio_automation"), Some("set_volume"), false).unwrap();
        assert_eq!(line(&text, "stream").0, 4, "{text}");
        assert!(
            line(&text, "level").1.starts_with("level integer 0–100"),
            "{text}"
        );
        assert!(
            text.contains("Example: droidwarden call audio_automation set_volume"),
            "{text}"
        );
        let shell = render(Some("shell"), Some("run"), false).unwrap();
        assert!(
            line(&shell, "argv")
                .1
                .starts_with("argv list, each string (at most 1024 characters)"),
            "{shell}"
        );
    }

    #[test]
    fn a_service_lists_every_action_and_json_selects_the_same() {
        let text = render(Some("wifi_automation"), None, false).unwrap();
        for action in ["status", "enable", "disable", "scan"] {
            assert!(
                text.contains(&format!("wifi_automation.{action} — ")),
                "{text}"
            );
        }
        let one: Value =
            serde_json::from_str(&render(Some("wifi_automation"), Some("disable"), true).unwrap())
                .unwrap();
        assert_eq!(one["name"], "disable");
        assert_eq!(one["risk"], "high");
        assert!(one["transports"].is_array());
        let all: Value = serde_json::from_str(&render(None, None, true).unwrap()).unwrap();
        assert_eq!(
            all["services"].as_array().map(Vec::len),
            Some(Catalogue::get().services().len())
        );
    }

    #[test]
    fn unknown_names_are_refused_listing_the_valid_ones() {
        let e = render(Some("toaster"), None, false).unwrap_err();
        assert!(e.message.contains("battery"), "{}", e.message);
        let e = render(Some("battery"), Some("explode"), false).unwrap_err();
        assert!(e.message.contains("status"), "{}", e.message);
    }

    #[test]
    fn example_words_are_quoted_for_a_shell() {
        assert_eq!(
            example_words(&json!({"package": "org.videolan.vlc", "level": 40})),
            " level=40 package=org.videolan.vlc"
        );
        assert_eq!(
            example_words(&json!({"text": "it's here"})),
            r" 'text=it'\''s here'"
        );
    }
}
