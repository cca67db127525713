//! `docs/companion-protocol.md` lists the parameter and result schemas of
//! the phone services' actions for app authors; this keeps that list equal
//! to the catalogue, so the document cannot drift from what the daemon
//! sends and checks.

use droidwarden_services::Catalogue;
use serde_json::Value;

/// The services whose actions the document spells out.
const LISTED: [&str; 6] = [
    "screen",
    "ui_control",
    "notifications",
    "intents",
    "files",
    "app_manager",
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

#[test]
fn the_documented_action_schemas_are_the_catalogues() {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/companion-protocol.md"
    ))
    .expect("docs/companion-protocol.md");
    let documented = sections(&doc);
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
