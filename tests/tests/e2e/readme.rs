//! The README's quick start, run as written: the commands of its first
//! `sh` block, from a fresh `HOME`, with only what the README itself says
//! may change moved (the sim's port, the adb server's port through the
//! documented variables) and the binaries taken from this build instead of
//! a release build. Installing adb and building are left to the harness.

use droidwarden_e2e::{bin_dir, free_port, run_with_timeout, wait_for};
use std::process::Command;
use std::time::Duration;

/// The lines of the first ```sh block after `heading`.
fn commands_under(readme: &str, heading: &str) -> Vec<String> {
    let section = readme
        .split_once(heading)
        .unwrap_or_else(|| panic!("the README has no {heading:?}"))
        .1;
    let block = section
        .split_once("```sh\n")
        .and_then(|(_, rest)| rest.split_once("\n```"))
        .expect("a sh block")
        .0;
    block
        .lines()
        .map(|l| match l.find("  #") {
            Some(at) => l[..at].trim_end().to_owned(),
            None => l.trim_end().to_owned(),
        })
        .filter(|l| !l.is_empty())
        .collect()
}

#[test]
fn the_quick_start_works_as_written() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("README.md");
    let lines = commands_under(&readme, "## Quick start with an emulated phone");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("call --local battery status")),
        "{lines:?}"
    );
    let home = tempfile::tempdir().unwrap();
    let sim_port = free_port().to_string();
    let adb_port = free_port().to_string();
    let bin = format!("{}/", bin_dir().display());
    let mut script = String::from("set -eu\n");
    for line in &lines {
        // What the harness did already: install adb, build.
        if line.starts_with("sudo apt-get") || line.starts_with("cargo build") {
            continue;
        }
        let line = line
            .replace("target/release/", &bin)
            .replace("6555", &sim_port);
        script.push_str(&line);
        script.push('\n');
        if line.ends_with('&') {
            // Readiness of what was started in the background.
            script.push_str(&format!(
                "for i in $(seq 200); do (exec 3<>/dev/tcp/127.0.0.1/{sim_port}) 2>/dev/null && break; sleep 0.05; done\n"
            ));
        }
    }
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg(format!(
            "trap 'kill $(jobs -p) 2>/dev/null; adb kill-server >/dev/null 2>&1' EXIT\n{script}"
        ))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("ANDROID_ADB_SERVER_PORT", &adb_port)
        .env("DROIDWARDEN__ADB__SERVER", format!("127.0.0.1:{adb_port}"));
    let out = run_with_timeout(cmd, Duration::from_secs(120));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{script}\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
    // One line of `devices`, then one JSON result per call.
    assert!(stdout.contains("Pixel 8"), "{stdout}");
    assert!(stdout.contains("\"level_percent\""), "{stdout}");
    assert!(stdout.contains("\"level\": 40"), "{stdout}");
    assert!(stdout.contains("\"enabled\": false"), "{stdout}");
    wait_for(
        "nothing left on the sim's port",
        Duration::from_secs(10),
        || {
            std::net::TcpStream::connect(("127.0.0.1", sim_port.parse::<u16>().unwrap()))
                .is_err()
                .then_some(())
        },
    );
}
