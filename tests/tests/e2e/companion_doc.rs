//! `docs/companion-protocol.md` lists the parameter and result schemas of
//! the phone services' actions for app authors; this keeps that list equal
//! to the catalogue, so the document cannot drift from what the daemon
//! sends and checks.

use droidwarden_services::Catalogue;
use serde_json::Value;

/// The services whose actions the document spells out.
const LISTED: [&str; 7] = [
    "screen",
    "ui_control",
    "notifications",
    "intents",
    "files",
    "app_manager",
    "alerts",
];

/// `(heading, [json blocks])` for every `#### \`service.action\`` heading.
fn sections(doc: &str) -> Vec<(String, Vec<Value>)> {
    let mut out = Vec::new();
    for part in doc.split("\n#### `").skip(1) {
        let (name, rest) = part.split_once('`').expect("a closing backtick");
        let rest = rest.split("\n## ").next().unwrap_or(rest);
        let blocks = rest
            .split("```json\n")
            .skip(1)
            .map(|b| {
                let body = b.split_once("\n```").expect("a closed block").0;
                serde_json::from_str(body)
                    .unwrap_or_else(|e| panic!("{name}: not JSON ({e}):\n{body}"))
            })
            .collect();
        out.push((name.to_owned(), blocks));
    }
    out
}

/// `"key": value` for each entry of `map`, keys sorted, values on one line.
fn entries(map: &serde_json::Map<String, Value>) -> Vec<String> {
    let mut entries: Vec<_> = map.iter().collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    entries
        .into_iter()
        .map(|(k, v)| format!("{}: {}", Value::from(k.as_str()), compact(v)))
        .collect()
}

/// `value` on one line, keys sorted, as the document writes a property.
fn compact(value: &Value) -> String {
    match value {
        Value::Object(map) => format!("{{{}}}", entries(map).join(", ")),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(compact).collect();
            format!("[{}]", items.join(", "))
        }
        other => other.to_string(),
    }
}

/// A schema as the document lays it out: a line per top-level key, a line
/// per property.
fn layout(schema: &Value) -> String {
    const ORDER: [&str; 5] = [
        "type",
        "description",
        "properties",
        "required",
        "additionalProperties",
    ];
    let Value::Object(top) = schema else {
        return compact(schema);
    };
    let mut keys: Vec<&String> = top.keys().collect();
    keys.sort_by_key(|k| ORDER.iter().position(|o| o == k).unwrap_or(ORDER.len()));
    let lines: Vec<String> = keys
        .into_iter()
        .map(|key| match (key.as_str(), &top[key]) {
            ("properties", Value::Object(props)) => {
                // An empty object keeps its blank line, as the document has it.
                let props: Vec<String> =
                    entries(props).iter().map(|e| format!("    {e}")).collect();
                format!("  \"properties\": {{\n{}\n  }}", props.join(",\n"))
            }
            (_, value) => format!("  {}: {}", Value::from(key.as_str()), compact(value)),
        })
        .collect();
    format!("{{\n{}\n}}", lines.join(",\n"))
}

/// `doc` with the JSON blocks of each listed action replaced by `expected`'s.
fn rewritten(doc: &str, expected: &[(String, Vec<Value>)]) -> String {
    let mut parts = doc.split("\n#### `");
    let mut out = parts.next().unwrap_or_default().to_owned();
    for part in parts {
        let name = part.split_once('`').map_or("", |(n, _)| n);
        let mut blocks = expected
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, b)| b.iter())
            .into_iter()
            .flatten();
        let mut pieces = part.split("```json\n");
        out.push_str("\n#### `");
        out.push_str(pieces.next().unwrap_or_default());
        for piece in pieces {
            let rest = piece.split_once("\n```").map_or("", |(_, rest)| rest);
            let body = blocks.next().map(layout).unwrap_or_default();
            out.push_str(&format!("```json\n{body}\n```{rest}"));
        }
    }
    out
}

/// With `DROIDWARDEN_BLESS=1` the document's blocks are first rewritten from
/// the catalogue (after a change to the schemas), then checked as always.
#[test]
fn the_documented_action_schemas_are_the_catalogues() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/companion-protocol.md");
    let mut doc = std::fs::read_to_string(path).expect("docs/companion-protocol.md");
    let mut expected = Vec::new();
    for service in LISTED {
        let spec = Catalogue::get()
            .services()
            .iter()
            .find(|s| s.id == service)
            .expect("a listed service exists");
        for action in &spec.actions {
            expected.push((
                format!("{service}.{}", action.name),
                vec![action.params_schema().to_json(), action.result.to_json()],
            ));
        }
    }
    if std::env::var_os("DROIDWARDEN_BLESS").is_some_and(|v| v == "1") {
        doc = rewritten(&doc, &expected);
        std::fs::write(path, &doc).expect("docs/companion-protocol.md written");
    }
    let documented = sections(&doc);
    let names =
        |list: &[(String, Vec<Value>)]| list.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(
        names(&documented),
        names(&expected),
        "the document lists other actions than the catalogue, or in another order"
    );
    for ((name, blocks), (_, want)) in documented.iter().zip(&expected) {
        assert_eq!(
            blocks, want,
            "{name}: the documented schemas differ from the catalogue's; the catalogue says:\nparams: {}\nresult: {}",
            want[0], want[1]
        );
    }
}
