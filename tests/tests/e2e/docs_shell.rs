//! Every shell example of the README and the docs is either run by a test
//! or says, beside it, why it cannot run here: each ```` ```sh ````,
//! ```` ```console ````, ```` ```bash ```` block is preceded by a marker,
//! `<!-- shell: run by FILE -->` (FILE exists and reads that document) or
//! `<!-- shell: not run: WHY -->`. A new block without one fails the first
//! test below, so an example cannot be added untested without saying so.
//! `docs/benchmarks.md` is exempt: its blocks are the commands that made
//! the figures beside them.
//!
//! The blocks marked `run by tests/tests/e2e/docs_shell.rs` run here, as
//! written, against the real daemon and an emulated phone: the D-Bus API's
//! `busctl` and `gdbus` examples (with the private test bus for `--user`
//! and `--session`), the MQTT accounts of `docs/mqtt-access.md` and
//! `docs/companion-termux.md`, the README's MQTT example, and the agent's
//! graph.

use droidwarden_e2e::dbus::{PrivateBus, no_bus_env};
use droidwarden_e2e::mqtt::Daemon;
use droidwarden_e2e::{AdbServer, P, SimOptions, WAIT, bin_dir, free_port, run_with_timeout};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// What runs the marked blocks of this file.
const HERE: &str = "tests/tests/e2e/docs_shell.rs";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .to_path_buf()
}

/// One shell block: where, its marker, its text.
#[derive(Debug)]
struct Block {
    file: String,
    line: usize,
    marker: Option<String>,
    body: String,
}

/// The shell blocks of `file` (relative to the repository).
fn blocks(file: &str) -> Vec<Block> {
    let text = std::fs::read_to_string(repo().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let fence = lines[i].trim_start();
        let shell = ["```sh", "```console", "```bash", "```shell"].contains(&fence);
        if !fence.starts_with("```") {
            i += 1;
            continue;
        }
        let start = i;
        i += 1;
        let mut body = String::new();
        while i < lines.len() && !lines[i].trim_start().starts_with("```") {
            body.push_str(lines[i]);
            body.push('\n');
            i += 1;
        }
        i += 1;
        if !shell {
            continue;
        }
        let marker = lines[..start]
            .iter()
            .rev()
            .find(|l| !l.trim().is_empty())
            .and_then(|l| l.trim().strip_prefix("<!-- shell:"))
            .and_then(|l| l.strip_suffix("-->"))
            .map(|m| m.trim().to_owned());
        out.push(Block {
            file: file.to_owned(),
            line: start + 1,
            marker,
            body,
        });
    }
    out
}

/// Every document with shell examples.
fn documents() -> Vec<String> {
    let mut docs = vec![
        "README.md".to_owned(),
        "systemd/README.md".to_owned(),
        "packaging/README.md".to_owned(),
    ];
    let mut more: Vec<String> = std::fs::read_dir(repo().join("docs"))
        .expect("docs/")
        .filter_map(Result::ok)
        .map(|e| format!("docs/{}", e.file_name().to_string_lossy()))
        .filter(|f| f.ends_with(".md") && f != "docs/benchmarks.md")
        .collect();
    more.sort();
    docs.extend(more);
    docs
}

#[test]
fn every_shell_example_is_run_by_a_test_or_says_why_not() {
    let mut problems = Vec::new();
    let mut counted = (0, 0);
    for doc in documents() {
        for block in blocks(&doc) {
            let at = format!("{}:{}", block.file, block.line);
            match block.marker.as_deref() {
                None => problems.push(format!(
                    "{at}: no `<!-- shell: run by FILE -->` or `<!-- shell: not run: WHY -->` before it"
                )),
                Some(m) if m.starts_with("not run:") => {
                    if m.trim_start_matches("not run:").trim().len() < 10 {
                        problems.push(format!("{at}: say why it is not run"));
                    }
                    counted.1 += 1;
                }
                Some(m) => match m.strip_prefix("run by ") {
                    Some(runner) => {
                        let text = std::fs::read_to_string(repo().join(runner.trim()))
                            .unwrap_or_default();
                        let name = Path::new(&block.file)
                            .file_name()
                            .map(|n| n.to_string_lossy().into_owned())
                            .unwrap_or_default();
                        if !text.contains(&name) {
                            problems.push(format!(
                                "{at}: {runner} does not exist or never reads {name}"
                            ));
                        }
                        counted.0 += 1;
                    }
                    None => problems.push(format!("{at}: unknown marker {m:?}")),
                },
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // The scan finds what it should (a scan that found nothing passes).
    assert!(counted.0 >= 6 && counted.1 >= 10, "{counted:?}");
    eprintln!(
        "shell examples: {} run, {} not run (each says why)",
        counted.0, counted.1
    );
}

/// The blocks of `doc` this file runs.
fn runnable(doc: &str) -> Vec<Block> {
    let mine: Vec<Block> = blocks(doc)
        .into_iter()
        .filter(|b| b.marker.as_deref() == Some(&format!("run by {HERE}")))
        .collect();
    assert!(!mine.is_empty(), "{doc} has no block marked run by {HERE}");
    mine
}

/// `$ command` lines of a console block (continuations joined), each with
/// the output shown after it.
fn commands(body: &str) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    let mut continuing = false;
    for line in body.lines() {
        if let Some(cmd) = line.strip_prefix("$ ") {
            out.push((cmd.trim_end_matches('\\').trim().to_owned(), Vec::new()));
            continuing = line.ends_with('\\');
        } else if continuing && let Some((cmd, _)) = out.last_mut() {
            cmd.push(' ');
            cmd.push_str(line.trim().trim_end_matches('\\').trim());
            continuing = line.ends_with('\\');
        } else if let Some((_, shown)) = out.last_mut()
            && !line.trim().is_empty()
        {
            shown.push(line.to_owned());
        }
    }
    out
}

/// `sh -c script` in `dir` with the build's binaries first on PATH, and
/// `stdin` as its standard input.
fn sh(script: &str, dir: &Path, env: &[(&str, &str)], stdin: &str) -> std::process::Output {
    let path = format!(
        "{}:{}",
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let input = dir.join(format!(".stdin-{}", free_port()));
    std::fs::write(&input, stdin).expect("write stdin");
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(format!("exec <'{}'\n{script}", input.display()))
        .current_dir(dir)
        .env("PATH", path)
        .env_remove("RUST_LOG")
        .envs(env.iter().copied());
    let out = run_with_timeout(cmd, Duration::from_secs(60));
    let _ = std::fs::remove_file(&input);
    out
}

#[test]
fn the_dbus_api_examples_run_as_written() {
    let bus = PrivateBus::session();
    let adb = AdbServer::shared();
    let sim = adb.phone(SimOptions {
        model: Some("Pixel 8".into()),
        ..SimOptions::default()
    });
    let config = format!(
        "{}[adb]\npoll_interval_ms = 300\nconnect = [\"{s}\"]\n[[devices]]\nname = \"phone\"\ntransport = \"adb\"\nserial = \"{s}\"\n",
        droidwarden_e2e::mqtt::ANY_BROKER_PORT,
        s = sim.serial()
    );
    let _daemon = Daemon::start_with_env(
        &adb,
        &config,
        tempfile::tempdir().unwrap(),
        &bus.daemon_env(),
    );
    bus.wait_for_daemon(WAIT);
    droidwarden_e2e::wait_for("the phone online", WAIT, || {
        let out = bus.gdbus_call("ListDevices", &[]).ok()?;
        out.contains(r#""online":true"#).then_some(())
    });
    let dir = tempfile::tempdir().unwrap();
    let runtime = tempfile::tempdir().unwrap();
    let mut ran = 0;
    for block in runnable("docs/dbus-api.md") {
        for (command, shown) in commands(&block.body) {
            let at = format!("docs/dbus-api.md:{}: {command}", block.line);
            let daemonless = command.starts_with("droidwarden ");
            let script = command
                .replace(
                    "busctl --user",
                    &format!("busctl --address={}", bus.address),
                )
                .replace(
                    "gdbus call --session",
                    &format!("gdbus call --address {}", bus.address),
                );
            let out = if daemonless {
                // As on a machine where no daemon runs: no bus, no socket.
                let env = no_bus_env(runtime.path());
                let env: Vec<(&str, &str)> = env
                    .iter()
                    .copied()
                    .filter(|(k, _)| *k != "DROIDWARDEN__DBUS__BUS")
                    .chain([("DROIDWARDEN__STATE__DIR", dir.path().to_str().unwrap())])
                    .collect();
                sh(&script, dir.path(), &env, "")
            } else {
                sh(&script, dir.path(), &[], "")
            };
            let stdout = String::from_utf8_lossy(&out.stdout);
            let stderr = String::from_utf8_lossy(&out.stderr);
            let first = shown.first().map(String::as_str).unwrap_or_default();
            if let Some(error) = first.strip_prefix("Error: ") {
                // gdbus's error: the same error name.
                let name = error.split(':').nth(1).unwrap_or_default().trim();
                assert!(!out.status.success(), "{at}: succeeded: {stdout}");
                assert!(stderr.contains(name), "{at}: wanted {name}: {stderr}");
            } else if first.starts_with("{\"error\"") {
                let shown: Value = serde_json::from_str(first).expect("the doc's JSON");
                let got: Value = serde_json::from_str(stdout.trim())
                    .unwrap_or_else(|e| panic!("{at}: not JSON ({e}): {stdout}{stderr}"));
                assert_eq!(got["error"]["code"], shown["error"]["code"], "{at}: {got}");
                assert!(
                    got["error"]["message"]
                        .as_str()
                        .is_some_and(|m| m.contains("daemon is not running")),
                    "{at}: {got}"
                );
            } else {
                assert!(out.status.success(), "{at}: {stdout}{stderr}");
                if first.starts_with('{') {
                    let got: Value = serde_json::from_str(&stdout)
                        .unwrap_or_else(|e| panic!("{at}: not JSON ({e}): {stdout}"));
                    assert!(got["devices"].is_array(), "{at}: {got}");
                } else {
                    // busctl's answers: the same types, line by line.
                    for (want, got) in shown.iter().zip(stdout.lines()) {
                        let (want, got) = (want.split(' ').next(), got.split(' ').next());
                        assert_eq!(want, got, "{at}: {stdout}");
                    }
                }
            }
            ran += 1;
        }
    }
    assert!(ran >= 6, "{ran} D-Bus examples ran");
}

#[test]
fn the_mqtt_account_examples_run_as_written() {
    let state = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("alice.pw"), "alice-pixel-password-42\n").unwrap();
    let env = [("DROIDWARDEN__STATE__DIR", state.path().to_str().unwrap())];
    let mut names = Vec::new();
    for doc in ["docs/mqtt-access.md", "docs/companion-termux.md"] {
        for block in runnable(doc) {
            // Earlier blocks of the page made their users already.
            let script = format!("set -e\n{}", block.body);
            let out = sh(&script, dir.path(), &env, "approver-password-1234\n");
            assert!(
                out.status.success(),
                "{doc}:{}: {}{}",
                block.line,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            names.push(format!("{doc}:{}", block.line));
        }
    }
    let listed = sh("droidwarden mqtt-user list --json", dir.path(), &env, "");
    let users: Value = serde_json::from_slice(&listed.stdout).expect("mqtt-user list --json");
    let text = users.to_string();
    for user in ["homeassistant", "approver", "me", "alice-pixel"] {
        assert!(text.contains(&format!("\"{user}\"")), "{user}: {text}");
    }
    // mqtt-access.md removed alice (the companion page made alice-pixel).
    assert!(!text.contains("\"alice\""), "{text}");
    assert!(names.len() >= 2, "{names:?}");
}

#[test]
fn the_readme_mqtt_example_runs_against_the_embedded_broker() {
    let adb = AdbServer::shared();
    let sim = adb.phone(SimOptions::default());
    let port = free_port();
    let config = format!(
        "[broker]\nlisten = \"127.0.0.1:{port}\"\n[adb]\npoll_interval_ms = 300\nconnect = [\"{s}\"]\n\
         [[devices]]\nname = \"kitchen-tablet\"\ntransport = \"adb\"\nserial = \"{s}\"\n",
        s = sim.serial()
    );
    let daemon = Daemon::start(&adb, &config);
    let state = daemon.state_dir.path().to_str().unwrap().to_owned();
    droidwarden_e2e::wait_for("the embedded broker", WAIT, || {
        std::net::TcpStream::connect(("127.0.0.1", port)).ok()
    });
    let block = runnable("README.md")
        .into_iter()
        .find(|b| b.body.contains("mosquitto_pub"))
        .expect("the README's MQTT block");
    // As written, with the broker's port (the README's is the default,
    // 1883), the replies kept in a file, and the command sent again until
    // the subscriber (started in the background, as written) has its reply:
    // the README's reader is a person, who waits.
    let body = block
        .body
        .replace(
            "mosquitto_sub ",
            &format!("mosquitto_sub -p {port} -C 1 -W 30 "),
        )
        .replace("mosquitto_pub ", &format!("mosquitto_pub -p {port} "))
        .replace(" -v &\n", " -v > replies &\n");
    let (head, publish) = body.split_at(body.find("mosquitto_pub").expect("a publish"));
    let script = format!(
        "set -e\n: > replies\n{head}for _ in $(seq 1 150); do\n{publish}\n[ -s replies ] && break\nsleep 0.2\ndone\nwait\ncat replies\n"
    );
    let dir = tempfile::tempdir().unwrap();
    let env = [("DROIDWARDEN__STATE__DIR", state.as_str())];
    let out = sh(&script, dir.path(), &env, "");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reply = stdout
        .lines()
        .find(|l| l.starts_with(&format!("{P}/reply/r1 ")))
        .unwrap_or_else(|| panic!("no reply: {stdout}"));
    let reply: Value = serde_json::from_str(reply.split_once(' ').unwrap().1).unwrap();
    assert_eq!(reply["ok"], true, "{reply}");
}

#[test]
fn the_agent_graph_example_shows_what_the_binary_prints() {
    let block = runnable("docs/agent.md").remove(0);
    let dir = tempfile::tempdir().unwrap();
    for (command, shown) in commands(&block.body) {
        let out = sh(&command, dir.path(), &[], "");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let got: Vec<&str> = stdout.lines().collect();
        assert_eq!(got, shown, "{command}");
    }
}
