//! Every configuration example in the README and `docs/` is a working
//! configuration: each ```` ```toml ```` block is run through
//! `droidwarden config check`.
//!
//! The examples are fragments of a person's configuration, so two things
//! the fragment cannot hold are supplied: a `[[devices]]` entry (an ADB
//! phone) for each device it names without defining, and a file for each
//! `${CREDENTIALS_DIRECTORY}/<name>` it reads (systemd's credentials
//! directory, set for the check). A block that is not meant to pass says
//! so on the line before its fence: `<!-- not checked: <why> -->`.

use droidwarden_e2e::{binary, run_with_timeout};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// One ```` ```toml ```` block of a document.
struct Example {
    file: String,
    line: usize,
    toml: String,
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the repository")
        .to_path_buf()
}

/// The README and every `docs/*.md`, in name order.
fn documents() -> Vec<PathBuf> {
    let mut docs: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .expect("docs/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    docs.insert(0, repo().join("README.md"));
    docs
}

/// The toml blocks of `text`, except those marked not checked (the
/// marker must give a reason).
fn examples(file: &str, text: &str) -> Vec<Example> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim() == "```toml" {
            let end = (i + 1..lines.len())
                .find(|&j| lines[j].trim() == "```")
                .unwrap_or_else(|| panic!("{file}:{}: an unclosed ```toml block", i + 1));
            let marker = i
                .checked_sub(1)
                .map(|p| lines[p].trim())
                .filter(|l| l.starts_with("<!-- not checked:"));
            if let Some(marker) = marker {
                let why = marker
                    .trim_start_matches("<!-- not checked:")
                    .trim_end_matches("-->")
                    .trim();
                assert!(
                    !why.is_empty(),
                    "{file}:{i}: say why the block is not checked"
                );
            } else {
                out.push(Example {
                    file: file.to_owned(),
                    line: i + 1,
                    toml: lines[i + 1..end].join("\n"),
                });
            }
            i = end;
        }
        i += 1;
    }
    out
}

/// The values of `key = "…"` in `toml` (a plain scan: examples write
/// device names and credential paths as literal strings).
fn string_values(toml: &str, key: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (at, _) in toml.match_indices(key) {
        let before = toml[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let rest = toml[at + key.len()..].trim_start();
        let Some(rest) = rest.strip_prefix('=') else {
            continue;
        };
        let Some(rest) = rest.trim_start().strip_prefix('"') else {
            continue;
        };
        if let Some(end) = rest.find('"') {
            found.insert(rest[..end].to_owned());
        }
    }
    found
}

/// The configuration file to check: the example, then a phone for each
/// device it names but does not define (appended: a table added before
/// the example would take its top-level keys).
fn with_context(example: &Example) -> String {
    let defined = string_values(&example.toml, "name");
    let mut config = format!("{}\n", example.toml);
    for (n, device) in string_values(&example.toml, "device")
        .into_iter()
        .filter(|d| !defined.contains(d))
        .enumerate()
    {
        config.push_str(&format!(
            "\n[[devices]]\nname = \"{device}\"\ntransport = \"adb\"\nserial = \"127.0.0.1:{}\"\n",
            5601 + n
        ));
    }
    config
}

#[test]
fn every_configuration_example_in_the_docs_passes_config_check() {
    let mut checked = 0;
    let mut failures = Vec::new();
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).expect("read the document");
        let name = doc
            .strip_prefix(repo())
            .unwrap_or(&doc)
            .display()
            .to_string();
        for example in examples(&name, &text) {
            let dir = tempfile::tempdir().expect("temp dir");
            let credentials = dir.path().join("credentials");
            std::fs::create_dir(&credentials).expect("credentials dir");
            for value in string_values(&example.toml, "password_file")
                .into_iter()
                .chain(string_values(&example.toml, "token_file"))
                .chain(string_values(&example.toml, "api_key_file"))
            {
                if let Some(file) = value.strip_prefix("${CREDENTIALS_DIRECTORY}/") {
                    std::fs::write(credentials.join(file), "secret\n").expect("a credential");
                }
            }
            let config = dir.path().join("config.toml");
            std::fs::write(&config, with_context(&example)).expect("write the example");
            let mut cmd = Command::new(binary("droidwarden"));
            cmd.arg("--config")
                .arg(&config)
                .args(["config", "check"])
                .env("HOME", dir.path())
                .env("CREDENTIALS_DIRECTORY", &credentials)
                .env("DROIDWARDEN__STATE__DIR", dir.path().join("state"))
                .env("DROIDWARDEN__DBUS__BUS", "none")
                .env_remove("DROIDWARDEN_CONFIG");
            let out = run_with_timeout(cmd, Duration::from_secs(30));
            checked += 1;
            if !out.status.success() {
                failures.push(format!(
                    "{}:{}: {}",
                    example.file,
                    example.line,
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
        }
    }
    assert!(
        checked >= 15,
        "only {checked} examples found: is the scan broken?"
    );
    assert!(
        failures.is_empty(),
        "{} of {checked} configuration examples fail `config check`:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn the_scan_finds_blocks_markers_and_missing_devices() {
    let text = "intro\n```toml\n[[automations]]\nname = \"a\"\naction = { device = \"kitchen\" }\n```\n<!-- not checked: needs a file -->\n```toml\nbroken =\n```\n```sh\nnot toml\n```\n";
    let found = examples("doc.md", text);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].line, 2);
    let config = with_context(&found[0]);
    assert!(
        config.contains("name = \"kitchen\"\ntransport = \"adb\""),
        "{config}"
    );
    assert_eq!(
        string_values("x_device = \"no\"\ndevice = \"yes\"", "device"),
        BTreeSet::from(["yes".to_owned()])
    );
}
