//! `droidwarden mcp` with a client nobody here wrote: the official Python
//! MCP SDK (PyPI `mcp`, driven by `tests/python/mcp_client.py`) launches it
//! over stdio, lists the tools, checks every input and output schema with
//! `jsonschema`, calls `battery status` on an emulated phone through the
//! real adb server, and sees a high-risk call wait for `droidwarden approve`.
//! The hostile-input test writes raw JSON-RPC lines to the server itself.
//! The MCP Inspector CLI (npm `@modelcontextprotocol/inspector`, installed
//! by `scripts/test`) lists the tools and calls `battery status` too, and
//! reads the skills as prompts.

use droidwarden_agent::ProviderKind;
use droidwarden_e2e::P;
use droidwarden_e2e::dbus::{PrivateBus, no_bus_env};
use droidwarden_e2e::mqtt::{Daemon, Mosquitto, NO_POLLS, Probe};
use droidwarden_e2e::npm::npm_bin;
use droidwarden_e2e::{
    AdbServer, Droidwarden, KillOnDrop, Sim, SimOptions, binary, run_with_timeout,
    scripted_llm_config, wait_for,
};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(60);

fn client_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("python/mcp_client.py")
}

/// The Python client, running a plan; its JSON lines are collected.
struct PyClient {
    child: KillOnDrop,
    lines: Arc<Mutex<Vec<Value>>>,
    stderr: Arc<Mutex<String>>,
}

impl PyClient {
    fn start(server: &[String], steps: Value, env: &[(&str, &str)]) -> Self {
        Self::start_plan(json!({ "stdio": server, "steps": steps }), env)
    }

    fn start_plan(plan: Value, env: &[(&str, &str)]) -> Self {
        let mut python = Command::new("python3");
        python.arg(client_script());
        Self::start_command(
            python,
            plan,
            env,
            "python3 (with the `mcp` and `jsonschema` packages: scripts/test installs them)",
        )
    }

    /// The TypeScript SDK's client (`tests/npm/elicit_client.cjs`).
    fn start_node(plan: Value, env: &[(&str, &str)]) -> Self {
        let modules = droidwarden_e2e::npm::npm_dir().join("node_modules");
        assert!(
            modules.join("@modelcontextprotocol/sdk").exists(),
            "the TypeScript MCP SDK is missing from {}: scripts/test installs tests/npm",
            modules.display()
        );
        let mut node = Command::new("node");
        node.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("npm/elicit_client.cjs"))
            .env("NODE_PATH", modules);
        Self::start_command(node, plan, env, "node (scripts/test needs it for npm)")
    }

    fn start_command(mut command: Command, plan: Value, env: &[(&str, &str)], what: &str) -> Self {
        let mut child = command
            .arg(plan.to_string())
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect(what);
        let lines: Arc<Mutex<Vec<Value>>> = Arc::default();
        let stderr: Arc<Mutex<String>> = Arc::default();
        let out = child.stdout.take().expect("stdout");
        let err = child.stderr.take().expect("stderr");
        {
            let lines = Arc::clone(&lines);
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines() {
                    let Ok(line) = line else { return };
                    let value = serde_json::from_str(&line).unwrap_or(Value::String(line));
                    lines.lock().unwrap().push(value);
                }
            });
        }
        {
            let stderr = Arc::clone(&stderr);
            std::thread::spawn(move || {
                for line in BufReader::new(err).lines() {
                    let Ok(line) = line else { return };
                    let mut s = stderr.lock().unwrap();
                    s.push_str(&line);
                    s.push('\n');
                }
            });
        }
        Self {
            child: child.into(),
            lines,
            stderr,
        }
    }

    /// The `n`-th step's line (0-based; progress and withdrawn lines not
    /// counted),
    /// waiting for it; a failure line fails the test.
    fn line(&self, n: usize) -> Value {
        let got = wait_for(&format!("line {n} from the MCP client"), WAIT, || {
            let lines = self.lines.lock().unwrap();
            if let Some(failed) = lines.iter().find(|l| l["op"] == "failed") {
                return Some(Err(failed.clone()));
            }
            lines
                .iter()
                .filter(|l| l["op"] != "progress" && l["op"] != "withdrawn")
                .nth(n)
                .cloned()
                .map(Ok)
        });
        match got {
            Ok(v) => v,
            Err(failed) => panic!(
                "the MCP client failed: {failed}\nstderr:\n{}",
                self.stderr.lock().unwrap()
            ),
        }
    }

    /// Line `n` is the client's form (`elicited`): that line.
    fn asked(&self, n: usize) -> Value {
        let asked = self.line(n);
        assert_eq!(asked["op"], "elicited", "{asked}");
        // The SDK puts a progress token on every request it sends; the
        // server's form has no progress, so it is taken out.
        assert!(
            asked["params"]["_meta"].get("progressToken").is_none(),
            "{asked}"
        );
        asked
    }

    /// Line `n` is a call's result that is no error: that result.
    fn ran(&self, n: usize) -> Value {
        let ran = self.line(n);
        assert_eq!(ran["result"]["isError"], false, "{ran}");
        ran
    }

    /// Line `n` is the client's form (`elicited`) and line `n + 1` the
    /// call's result, refused as `denied`: that result.
    fn asked_then_denied(&self, n: usize) -> Value {
        self.asked(n);
        let denied = self.line(n + 1);
        assert_eq!(error_code(&denied), "denied", "{denied}");
        denied
    }

    /// The first progress notification's message.
    fn wait_progress(&self) -> String {
        wait_for("a progress notification", WAIT, || {
            let lines = self.lines.lock().unwrap();
            lines
                .iter()
                .find(|l| l["op"] == "progress")
                .map(|l| l["message"].as_str().unwrap_or_default().to_owned())
        })
    }

    fn wait_exit(&mut self) -> i32 {
        self.child.exit_code("the MCP client", WAIT)
    }
}

fn droidwarden_mcp(config: &Path, args: &[&str]) -> Vec<String> {
    let mut argv = vec![
        binary("droidwarden").display().to_string(),
        "--config".into(),
        config.display().to_string(),
        "mcp".into(),
    ];
    argv.extend(args.iter().map(|s| (*s).to_owned()));
    argv
}

fn tool<'a>(list: &'a Value, name: &str) -> &'a Value {
    list["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no tool {name} in {list}"))
}

fn sim_ran(sim: &Sim, word: &str) -> bool {
    sim.commands()
        .iter()
        .any(|argv| argv.join(" ").contains(word))
}

/// The daemon with one emulated phone, the agent on (approvals need it),
/// mosquitto and a probe. Field order is drop order.
struct Rig {
    daemon: Daemon,
    probe: Probe,
    kitchen: Sim,
    adb: AdbServer,
    config: String,
    _broker: Mosquitto,
    _llm: droidwarden_agent::testing::ScriptedLlm,
    _rt: tokio::runtime::Runtime,
}

fn rig(extra: &str, env: &[(&str, &str)]) -> Rig {
    rig_on(AdbServer::shared(), extra, env)
}

/// [`rig`] on `adb`: one of the test's own for a phone it does not name.
fn rig_on(adb: AdbServer, extra: &str, env: &[(&str, &str)]) -> Rig {
    let (rt, llm) = droidwarden_e2e::scripted_model();
    let broker = Mosquitto::shared();
    let probe = Probe::connect_to(&broker);
    let kitchen = adb.phone(SimOptions::default());
    let config = format!(
        "[mqtt]\nurl = \"mqtt://127.0.0.1:{}\"\n{}[mqtt.homeassistant]\ndiscovery = false\n{NO_POLLS}[adb]\npoll_interval_ms = 300\nconnect = [\"{serial}\"]\n{}[[devices]]\nname = \"kitchen\"\ntransport = \"adb\"\nserial = \"{serial}\"\n{extra}\n",
        broker.port,
        broker.mqtt_keys(),
        scripted_llm_config(&llm, ProviderKind::Openai),
        serial = kitchen.serial(),
    );
    let daemon = Daemon::start_with_env(&adb, &config, tempfile::tempdir().expect("state"), env);
    probe.wait_payload(&format!("{P}/devices/kitchen/availability"), WAIT, "online");
    Rig {
        daemon,
        probe,
        kitchen,
        adb,
        config,
        _broker: broker,
        _llm: llm,
        _rt: rt,
    }
}

/// The token of [`http_rig`]'s endpoint, which belongs to "alice".
const ALICE_TOKEN: &str = "alice-s3cret-token";

/// A rig whose daemon serves MCP over HTTP (with `extra` configuration),
/// guarded by [`ALICE_TOKEN`] as alice's when `alices_token`: the rig, the
/// endpoint's URL, and the token's directory (kept while the rig runs).
fn http_rig(alices_token: bool, extra: &str) -> (Rig, String, tempfile::TempDir) {
    let port = droidwarden_e2e::free_port();
    let token_dir = tempfile::tempdir().expect("dir");
    let token_file = token_dir.path().join("mcp.token");
    std::fs::write(&token_file, format!("{ALICE_TOKEN}\n")).expect("token");
    let token = if alices_token {
        format!(
            "token_file = \"{}\"\ntoken_owner = \"alice\"\n",
            token_file.display()
        )
    } else {
        String::new()
    };
    let r = rig(
        &format!("[mcp]\nlisten = \"127.0.0.1:{port}\"\n{token}{extra}"),
        &[],
    );
    wait_for("the MCP endpoint", WAIT, || {
        std::net::TcpStream::connect(("127.0.0.1", port)).ok()
    });
    (r, format!("http://127.0.0.1:{port}/mcp"), token_dir)
}

/// A private session bus and a rig whose daemon serves its D-Bus API there
/// (ready once the daemon owns its name). The bus comes first, so that
/// `let (bus, r) = …` drops the daemon before its bus.
fn rig_on_bus(extra: &str) -> (PrivateBus, Rig) {
    rig_on_bus_with(AdbServer::shared(), extra)
}

/// [`rig_on_bus`] on `adb`.
fn rig_on_bus_with(adb: AdbServer, extra: &str) -> (PrivateBus, Rig) {
    let bus = PrivateBus::session();
    let env = bus.daemon_env();
    let r = rig_on(adb, extra, &env);
    bus.wait_for_daemon(WAIT);
    (bus, r)
}

#[test]
fn the_python_sdk_drives_the_phones_through_the_daemon_with_approvals() {
    let (bus, r) = rig_on_bus("");
    let (probe, kitchen, adb, config, daemon) =
        (&r.probe, &r.kitchen, &r.adb, &r.config, &r.daemon);
    let cli = Droidwarden::new(adb, config);
    let client_env = [
        &bus.daemon_env()[..],
        &[("HOME", adb.home().to_str().expect("home"))],
    ]
    .concat();
    let mut client = PyClient::start(
        &droidwarden_mcp(daemon.config_path(), &[]),
        json!([
            {"op": "list"},
            {"op": "call", "name": "android_device",
             "arguments": {"device": "kitchen", "service_id": "battery", "action": "status"}},
            {"op": "call", "name": "android_device",
             "arguments": {"service_id": "battery", "action": "status", "parameters": {"x": 1}}},
            {"op": "call", "name": "android_device",
             "arguments": {"service_id": "audio_automation", "action": "set_volume",
                           "parameters": {"stream": "music", "level": "loud"}}},
            {"op": "call", "name": "list_devices", "arguments": {}},
            {"op": "resources"},
            {"op": "call", "name": "android_device",
             "arguments": {"service_id": "wifi_automation", "action": "disable"}},
        ]),
        &client_env,
    );

    // Tools: the toolkit and list_devices, with schemas and annotations.
    let list = client.line(0);
    let toolkit = tool(&list, "android_device");
    assert_eq!(toolkit["inputSchema"]["type"], "object");
    assert_eq!(
        toolkit["inputSchema"]["properties"]["device"]["enum"],
        json!(["kitchen"])
    );
    assert_eq!(toolkit["outputSchema"]["type"], "object");
    assert_eq!(toolkit["annotations"]["destructiveHint"], true);
    assert_eq!(toolkit["annotations"]["readOnlyHint"], false);
    let listing = tool(&list, "list_devices");
    assert_eq!(listing["annotations"]["readOnlyHint"], true);

    // battery status, through the daemon's hub to the sim, validated.
    let battery = client.line(1);
    assert_eq!(battery["validated"], true, "{battery}");
    let structured = &battery["result"]["structuredContent"];
    assert_eq!(structured["device"], "kitchen");
    assert!(structured["result"]["level"].is_number(), "{structured}");
    assert!(sim_ran(kitchen, "battery"), "the sim read its battery");
    // The call shows in the status topics like any other.
    probe.wait("battery status on the status topic", WAIT, |m| {
        m.topic == format!("{P}/devices/kitchen/services/battery/status")
            && m.payload.contains("success")
    });

    // Catalogue errors are tool results with the structured error.
    for (n, code) in [(2, "invalid_params"), (3, "invalid_params")] {
        let bad = client.line(n);
        assert_eq!(bad["result"]["isError"], true, "{bad}");
        let error = &bad["result"]["structuredContent"]["error"];
        assert_eq!(error["code"], code, "{bad}");
        assert!(error["message"].as_str().is_some_and(|m| !m.is_empty()));
        assert_eq!(error["retryable"], false);
    }

    let devices = client.line(4);
    assert_eq!(devices["validated"], true, "{devices}");
    assert_eq!(
        devices["result"]["structuredContent"]["devices"][0]["name"],
        "kitchen"
    );

    let resources = client.line(5);
    assert_eq!(
        resources["resources"][0]["uri"],
        "droidwarden://devices/kitchen/state"
    );
    let text = resources["read"]["contents"][0]["text"]
        .as_str()
        .expect("state text");
    let state: Value = serde_json::from_str(text).expect("state JSON");
    assert_eq!(state["name"], "kitchen");
    assert_eq!(state["services"]["battery"]["state"], "success", "{state}");

    // A high-risk action waits for a person: listed by the CLI, announced
    // on MQTT, not run until approved.
    let listed = wait_for("the MCP approval request", WAIT, || {
        let run = cli.run_on_bus(&bus.address, &["approvals", "--json"]);
        run.json["approvals"]
            .as_array()
            .and_then(|a| a.first().cloned())
    });
    assert_eq!(listed["service"], "wifi_automation");
    assert_eq!(listed["action"], "disable");
    assert_eq!(listed["session"], "mcp");
    probe.wait("the approval on MQTT", WAIT, |m| {
        m.topic.starts_with(&format!("{P}/approvals/")) && m.payload.contains("wifi_automation")
    });
    assert!(
        !sim_ran(kitchen, "svc wifi disable"),
        "nothing runs before the approval"
    );
    // The client hears that the call is still waiting.
    let progress = client.wait_progress();
    assert!(progress.contains("approval"), "{progress}");
    let id = listed["approval_id"].as_str().expect("id");
    let approved = cli.run_on_bus(&bus.address, &["approve", id]);
    assert_eq!(approved.code, 0, "{}", approved.stderr);
    let done = client.line(6);
    assert_eq!(done["result"]["isError"], false, "{done}");
    assert_eq!(done["validated"], true);
    assert!(!done["progress"].as_array().expect("progress").is_empty());
    assert!(
        sim_ran(kitchen, "svc wifi disable"),
        "the approved call ran"
    );
    assert_eq!(client.wait_exit(), 0);

    // A subscribed device state is announced when a call changes it.
    let uri = "droidwarden://devices/kitchen/state";
    let mut watcher = PyClient::start_plan(
        json!({
            "stdio": droidwarden_mcp(daemon.config_path(), &[]),
            "listen": uri,
            "call": {"name": "android_device",
                     "arguments": {"service_id": "screen_control", "action": "status"}},
        }),
        &client_env,
    );
    assert_eq!(watcher.line(0)["op"], "listening");
    let updated = watcher.line(1);
    assert_eq!(updated["op"], "updated", "{updated}");
    assert_eq!(updated["uri"], uri, "{updated}");
    assert_eq!(watcher.wait_exit(), 0);
}

#[test]
fn clients_hear_that_the_tools_changed_when_a_phone_comes() {
    // The phone that comes is not named: an adb server of its own.
    let (bus, r) = rig_on_bus_with(AdbServer::start(), "");
    let client_env = [
        &bus.daemon_env()[..],
        &[("HOME", r.adb.home().to_str().expect("home"))],
    ]
    .concat();
    let server = droidwarden_mcp(r.daemon.config_path(), &[]);
    // A 2025-11-25 session (unscoped notifications) and a 2026-07-28 one
    // (subscriptions/listen).
    let legacy = PyClient::start_plan(
        json!({"stdio": server, "tools_changed": "legacy"}),
        &client_env,
    );
    let modern = PyClient::start_plan(
        json!({"stdio": server, "tools_changed": "listen"}),
        &client_env,
    );
    for client in [&legacy, &modern] {
        assert_eq!(client.line(0)["op"], "listening");
    }
    // A second phone comes: both hear it, and the tools name it. The first
    // announcement each client gets is this one: one that came before the
    // phone (nothing had changed) would be followed by a list of one phone.
    let _hall = r.adb.phone(SimOptions::default());
    for client in [&legacy, &modern] {
        let updated = client.line(1);
        assert_eq!(updated["op"], "updated", "{updated}");
        let list = client.line(2);
        let devices = &tool(&list, "android_device")["inputSchema"]["properties"]["device"]["enum"];
        assert_eq!(devices.as_array().map(Vec::len), Some(2), "{devices}");
    }
}

/// The MCP Inspector CLI launching `server` over stdio with `env`, running
/// `method_args`; its JSON output, or a failure with what it printed.
fn inspector(server: &[String], env: &[(&str, &str)], method_args: &[&str], home: &Path) -> Value {
    let mut cmd = Command::new(npm_bin("mcp-inspector"));
    cmd.arg("--cli").args(method_args);
    // The Inspector passes the server only the variables it is given.
    for (k, v) in env {
        cmd.arg("-e").arg(format!("{k}={v}"));
    }
    // `--`: the rest is the server's argv (droidwarden's own `--config`
    // is not the Inspector's).
    cmd.arg("--")
        .args(server)
        .env("HOME", home)
        .env("MCP_CATALOG_PATH", home.join("inspector-catalog.json"));
    let out = run_with_timeout(cmd, WAIT);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "mcp-inspector {method_args:?}: {}\nstdout: {stdout}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "mcp-inspector {method_args:?} printed no JSON ({e}): {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[test]
fn the_mcp_inspector_cli_lists_and_calls_through_the_daemon() {
    let (bus, r) = rig_on_bus("");
    let server = droidwarden_mcp(r.daemon.config_path(), &[]);
    let home = r.adb.home();
    let server_env = [
        &bus.daemon_env()[..],
        &[("HOME", home.to_str().expect("home"))],
    ]
    .concat();

    // tools/list, with the Inspector's schema portability check (exit 6 on
    // an error-severity problem).
    let list = inspector(
        &server,
        &server_env,
        &["--method", "tools/list", "--strict"],
        home,
    );
    let toolkit = tool(&list, "android_device");
    assert_eq!(
        toolkit["inputSchema"]["properties"]["device"]["enum"],
        json!(["kitchen"])
    );
    assert_eq!(toolkit["annotations"]["destructiveHint"], true);
    assert!(toolkit["outputSchema"].is_object(), "{toolkit}");
    tool(&list, "list_devices");

    // tools/call battery status: through the daemon to the sim.
    let called = inspector(
        &server,
        &server_env,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "android_device",
            "--tool-arg",
            "device=kitchen",
            "service_id=battery",
            "action=status",
        ],
        home,
    );
    assert_ne!(called["isError"], true, "{called}");
    let structured = &called["structuredContent"];
    assert_eq!(structured["device"], "kitchen", "{called}");
    assert_eq!(structured["service"], "battery", "{called}");
    assert!(structured["result"]["level"].is_number(), "{called}");
    assert!(sim_ran(&r.kitchen, "battery"), "the sim read its battery");

    // The skills are prompts: listed with their parameters, and a prompt
    // carries the skill's instructions with its input.
    let prompts = inspector(&server, &server_env, &["--method", "prompts/list"], home);
    let find = prompts["prompts"]
        .as_array()
        .expect("prompts")
        .iter()
        .find(|p| p["name"] == "find-my-phone")
        .unwrap_or_else(|| panic!("no find-my-phone prompt in {prompts}"));
    assert_eq!(find["arguments"][0]["name"], "device", "{find}");
    let prompt = inspector(
        &server,
        &server_env,
        &[
            "--method",
            "prompts/get",
            "--prompt-name",
            "find-my-phone",
            "--prompt-args",
            "device=kitchen",
        ],
        home,
    );
    let text = prompt["messages"][0]["content"]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {prompt}"));
    assert!(text.contains(r#"Input: {"device":"kitchen"}"#), "{text}");
    assert!(text.contains("screen_control.wake"), "{text}");

    r.probe
        .wait("battery status on the status topic", WAIT, |m| {
            m.topic == format!("{P}/devices/kitchen/services/battery/status")
                && m.payload.contains("success")
        });
}

/// A raw HTTP/1.1 POST to the daemon's endpoint: the status line.
fn post_status(port: u16, path: &str, headers: &[&str]) -> String {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}})
    .to_string();
    post(port, path, headers, &body)
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// A raw HTTP/1.1 POST of `body` to the daemon's endpoint: the whole answer.
fn post(port: u16, path: &str, headers: &[&str], body: &str) -> String {
    use std::io::Read as _;
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut request = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-06-18\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for h in headers {
        request.push_str(h);
        request.push_str("\r\n");
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).expect("send");
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer
}

#[test]
fn the_python_sdk_over_streamable_http_with_a_token_and_approvals() {
    let port = droidwarden_e2e::free_port();
    let token_dir = tempfile::tempdir().expect("token dir");
    let token_file = token_dir.path().join("mcp.token");
    std::fs::write(&token_file, "s3cret-token\n").expect("token");
    let r = rig(
        &format!(
            "[mcp]\nlisten = \"127.0.0.1:{port}\"\ntoken_file = \"{}\"\n",
            token_file.display()
        ),
        &[],
    );
    let url = format!("http://127.0.0.1:{port}/mcp");
    wait_for("the MCP endpoint", WAIT, || {
        std::net::TcpStream::connect(("127.0.0.1", port)).ok()
    });
    // The guards: the token, the path, the Origin header.
    assert!(post_status(port, "/mcp", &[]).contains(" 401 "));
    assert!(post_status(port, "/mcp", &["Authorization: Bearer wrong"]).contains(" 401 "));
    assert!(post_status(port, "/other", &["Authorization: Bearer s3cret-token"]).contains(" 404 "));
    let foreign = post_status(
        port,
        "/mcp",
        &[
            "Authorization: Bearer s3cret-token",
            "Origin: https://evil.example",
        ],
    );
    assert!(foreign.contains(" 403 "), "{foreign}");
    let local = post_status(
        port,
        "/mcp",
        &[
            "Authorization: Bearer s3cret-token",
            "Origin: http://localhost:3000",
        ],
    );
    assert!(local.contains(" 200 "), "{local}");
    // A body that is not JSON: JSON-RPC's parse error, as JSON (not the
    // SDK's plain-text 415).
    let auth = ["Authorization: Bearer s3cret-token"];
    let garbage = post(port, "/mcp", &auth, "{this is not json");
    assert!(garbage.starts_with("HTTP/1.1 400 "), "{garbage}");
    assert!(garbage.contains(r#""code":-32700"#), "{garbage}");
    assert!(garbage.contains("application/json"), "{garbage}");
    // Arguments that are not an object: invalid params.
    let bad_args = post(
        port,
        "/mcp",
        &auth,
        r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"android_device","arguments":"battery"}}"#,
    );
    assert!(bad_args.contains(r#""code":-32602"#), "{bad_args}");
    assert!(bad_args.contains(r#""id":9"#), "{bad_args}");

    // A client that sends and never reads holds only its own connection.
    let mut silent = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "silent", "version": "0"}}})
    .to_string();
    for _ in 0..200 {
        let request = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer s3cret-token\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        if silent.write_all(request.as_bytes()).is_err() {
            break;
        }
    }

    let plan = json!({
        "http": url,
        "token": "s3cret-token",
        "steps": [
            {"op": "list"},
            {"op": "call", "name": "android_device",
             "arguments": {"service_id": "battery", "action": "status"}},
            {"op": "call", "name": "android_device",
             "arguments": {"service_id": "wifi_automation", "action": "disable"}},
        ]
    });
    let mut client = PyClient::start_plan(plan, &[]);
    let list = client.line(0);
    assert!(tool(&list, "android_device")["outputSchema"].is_object());
    let battery = client.line(1);
    assert_eq!(battery["validated"], true, "{battery}");
    assert!(battery["result"]["structuredContent"]["result"]["level"].is_number());
    // The risky call waits; the request is announced and answered on MQTT.
    let approval = r
        .probe
        .wait("an approval request", WAIT, |m| {
            m.topic.starts_with(&format!("{P}/approvals/")) && m.payload.contains("wifi_automation")
        })
        .json();
    assert!(!sim_ran(&r.kitchen, "svc wifi disable"));
    r.probe.publish(
        &format!("{P}/cmd/approve"),
        json!({"approval_id": approval["approval_id"], "decision": "deny", "reason": "not now"})
            .to_string(),
    );
    let denied = client.line(2);
    assert_eq!(denied["result"]["isError"], true, "{denied}");
    let error = &denied["result"]["structuredContent"]["error"];
    assert_eq!(error["code"], "denied");
    assert!(
        error["message"]
            .as_str()
            .unwrap_or_default()
            .contains("not now"),
        "{error}"
    );
    assert!(
        !sim_ran(&r.kitchen, "svc wifi disable"),
        "a denied call never runs"
    );
    assert_eq!(client.wait_exit(), 0);
    drop(silent);
}

#[test]
fn local_mode_refuses_what_needs_approval_and_serves_direct_tools() {
    let adb = AdbServer::shared();
    let sim = adb.phone(SimOptions::default());
    // `intents.open_url` needs no person here, but the phone policy still
    // allows only http(s) links: `--local` meets the same policy as the
    // daemon's callers.
    let config = format!(
        "[adb]\nconnect = [\"{s}\"]\n[agent.approval]\nallow = [\"intents.open_url\"]\n[mcp]\ntool_mode = \"direct\"\n[[devices]]\nname = \"pixel\"\ntransport = \"adb\"\nserial = \"{s}\"\n",
        s = sim.serial()
    );
    let config_file = tempfile::NamedTempFile::new().expect("config");
    std::fs::write(config_file.path(), &config).expect("write config");
    let vars = adb.client_vars();
    let env: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut client = PyClient::start(
        &droidwarden_mcp(config_file.path(), &["--local"]),
        json!([
            {"op": "list"},
            {"op": "call", "name": "android_battery", "arguments": {"action": "status"}},
            {"op": "call", "name": "android_wifi_automation", "arguments": {"action": "disable"}},
            {"op": "call", "name": "android_nope", "arguments": {}},
            {"op": "call", "name": "android_intents", "arguments": {"action": "open_url", "url": "geo:0,0?q=home"}},
        ]),
        &env,
    );
    let list = client.line(0);
    let battery_tool = tool(&list, "android_battery");
    assert_eq!(battery_tool["annotations"]["readOnlyHint"], true);
    assert_eq!(battery_tool["annotations"]["idempotentHint"], true);
    assert_eq!(
        tool(&list, "android_wifi_automation")["annotations"]["destructiveHint"],
        true
    );
    let battery = client.line(1);
    assert_eq!(battery["validated"], true, "{battery}");
    assert_eq!(battery["result"]["structuredContent"]["device"], "pixel");
    let refused = client.line(2);
    assert_eq!(refused["result"]["isError"], true);
    assert_eq!(
        refused["result"]["structuredContent"]["error"]["code"], "denied",
        "{refused}"
    );
    assert!(
        !sim_ran(&sim, "svc wifi"),
        "a refused call never reaches the phone"
    );
    let unknown = client.line(3);
    assert_eq!(unknown["result"]["isError"], true);
    assert_eq!(
        unknown["result"]["structuredContent"]["error"]["code"],
        "invalid_request"
    );
    let scheme = client.line(4);
    assert_eq!(scheme["result"]["isError"], true, "{scheme}");
    assert_eq!(
        scheme["result"]["structuredContent"]["error"]["code"], "denied",
        "{scheme}"
    );
    assert!(
        scheme["result"]["structuredContent"]["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("url_schemes")),
        "{scheme}"
    );
    assert!(
        !sim_ran(&sim, "am start"),
        "a link the phone policy refuses never reaches the phone"
    );
    assert_eq!(client.wait_exit(), 0);
}

/// Raw JSON-RPC lines to `droidwarden mcp --local`, one reply line read
/// back for each request.
struct RawServer {
    child: KillOnDrop,
    out: BufReader<std::process::ChildStdout>,
}

impl RawServer {
    fn send(&mut self, line: &str) {
        let stdin = self.child.stdin.as_mut().expect("stdin");
        stdin.write_all(line.as_bytes()).expect("write");
        stdin.write_all(b"\n").expect("write");
        stdin.flush().expect("flush");
    }

    fn reply(&mut self) -> Value {
        let mut line = String::new();
        self.out.read_line(&mut line).expect("read a reply");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
    }
}

#[test]
fn hostile_json_rpc_gets_errors_and_the_server_keeps_serving() {
    // Its phone is not named: an adb server of its own.
    let adb = AdbServer::start();
    let sim = adb.phone(SimOptions::default());
    let config_file = tempfile::NamedTempFile::new().expect("config");
    std::fs::write(
        config_file.path(),
        format!("[adb]\nconnect = [\"{}\"]\n", sim.serial()),
    )
    .expect("write config");
    let mut child = adb.mcp_local(config_file.path());
    let out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut s = RawServer {
        child: child.into(),
        out,
    };
    s.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}})
        .to_string(),
    );
    let init = s.reply();
    assert_eq!(init["id"], 1);
    assert!(
        init["result"]["capabilities"]["tools"].is_object(),
        "{init}"
    );
    s.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);

    // Not JSON at all: a parse error (-32700) with a null id, as JSON-RPC
    // says, and the server goes on.
    s.send("{this is not json");
    let reply = s.reply();
    assert_eq!(reply["error"]["code"], -32700, "{reply}");
    assert!(reply["id"].is_null(), "{reply}");
    // An unknown method: -32601.
    s.send(r#"{"jsonrpc":"2.0","id":2,"method":"phones/explode","params":{}}"#);
    let reply = s.reply();
    assert_eq!(reply["id"], 2, "{reply}");
    assert_eq!(reply["error"]["code"], -32601, "{reply}");
    // Arguments that are not an object: invalid params (-32602), not
    // "method not found".
    s.send(
        r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"android_device","arguments":["battery"]}}"#,
    );
    let reply = s.reply();
    assert_eq!(reply["id"], 6, "{reply}");
    assert_eq!(reply["error"]["code"], -32602, "{reply}");

    // Wrong argument types: a tool result with the structured error.
    s.send(
        &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "android_device",
            "arguments": {"service_id": 7, "action": ["status"]}}})
        .to_string(),
    );
    let reply = s.reply();
    assert_eq!(reply["id"], 3, "{reply}");
    assert_eq!(reply["result"]["isError"], true, "{reply}");
    assert_eq!(
        reply["result"]["structuredContent"]["error"]["code"],
        "invalid_params"
    );

    // 10 MB of arguments: refused (an error, or the line dropped), and the
    // phone sees nothing.
    let huge = "a".repeat(10 * 1024 * 1024);
    s.send(
        &json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
            "name": "android_device",
            "arguments": {"service_id": "app_launcher", "action": "launch",
                          "parameters": {"package": huge}}}})
        .to_string(),
    );
    s.send(r#"{"jsonrpc":"2.0","id":5,"method":"ping"}"#);
    let mut reply = s.reply();
    if reply["id"] == 4 {
        assert!(
            reply["result"]["isError"] == true || reply["error"].is_object(),
            "{}",
            reply.to_string().chars().take(300).collect::<String>()
        );
        reply = s.reply();
    }
    assert_eq!(reply["id"], 5, "the server still answers: {reply}");
    assert!(!sim_ran(&sim, "monkey"), "nothing was launched");
    assert!(
        !sim_ran(&sim, "aaaaaaaa"),
        "the huge value never reached the phone"
    );
}

/// How many commands the sim ran that contain `word`.
/// Wait for the `mcp` session's `approval_answered` event whose JSON
/// contains every one of `parts` (who answered, as the daemon recorded it).
fn answered_by(r: &Rig, parts: &[&str]) {
    r.probe
        .wait("who answered, in the session's events", WAIT, |m| {
            m.topic == format!("{P}/sessions/mcp/events")
                && m.payload.contains(r#""event":"approval_answered""#)
                && parts.iter().all(|part| m.payload.contains(part))
        });
}

fn sim_count(sim: &Sim, word: &str) -> usize {
    sim.commands()
        .iter()
        .filter(|argv| argv.join(" ").contains(word))
        .count()
}

fn wifi(action: &str) -> Value {
    json!({"service_id": "wifi_automation", "action": action})
}

/// Plan steps: one `android_device` Wi-Fi call for each of `actions`, in
/// order.
fn wifi_calls(actions: &[&str]) -> Value {
    actions
        .iter()
        .map(|a| json!({"op": "call", "name": "android_device", "arguments": wifi(a)}))
        .collect()
}

/// The structured error code of a tool result line.
fn error_code(line: &Value) -> &str {
    line["result"]["structuredContent"]["error"]["code"]
        .as_str()
        .unwrap_or_default()
}

/// Protocol 2026-07-28 through `droidwarden mcp` and the daemon's D-Bus
/// API: the SDK's Client gets an `InputRequiredResult`, asks its
/// elicitation callback and retries with the answer; the answer is the
/// daemon approval's decision. Forged, mismatched and reused
/// `requestState`s approve nothing. Then the same server with a client
/// forced to the 2025-11-25 handshake: `elicitation/create` during the
/// call.
#[test]
fn the_python_sdk_answers_approvals_in_the_client_over_stdio() {
    let (bus, r) = rig_on_bus("");
    let cli = Droidwarden::new(&r.adb, &r.config);
    let client_env = [
        &bus.daemon_env()[..],
        &[("HOME", r.adb.home().to_str().expect("home"))],
    ]
    .concat();
    let device = "android_device";
    let approve = json!({"action": "accept", "content": {"approve": true}});
    let mut client = PyClient::start_plan(
        json!({
            "stdio": droidwarden_mcp(r.daemon.config_path(), &[]),
            "elicit": "auto",
            "answers": [approve, {"action": "decline"}],
            "steps": [
                {"op": "call", "name": device, "arguments": wifi("disable")},
                {"op": "call", "name": device, "arguments": wifi("enable")},
                {"op": "once", "name": device, "arguments": wifi("disable")},
                {"op": "retry", "name": device, "arguments": wifi("disable"),
                 "state": "0".repeat(64), "answer": approve},
                {"op": "retry", "name": device, "arguments": wifi("enable"),
                 "from": 2, "answer": approve},
                {"op": "retry", "name": device, "arguments": wifi("disable"),
                 "from": 2, "answer": null},
                {"op": "retry", "name": device, "arguments": wifi("disable"),
                 "from": 2, "answer": approve},
            ],
        }),
        &client_env,
    );
    assert_eq!(
        client.line(0)["protocol"],
        "2026-07-28",
        "{}",
        client.line(0)
    );

    // Approved in the client: the daemon's request, answered, and run.
    let asked = client.asked(1);
    let message = asked["params"]["message"].as_str().expect("message");
    let request = r
        .probe
        .wait("the approval request on MQTT", WAIT, |m| {
            m.topic.starts_with(&format!("{P}/approvals/")) && m.payload.contains("disable")
        })
        .json();
    let id = request["approval_id"].as_str().expect("approval id");
    for part in ["wifi_automation.disable", "risk", id] {
        assert!(message.contains(part), "{part} in {message}");
    }
    assert_eq!(
        asked["params"]["requestedSchema"]["properties"]["approve"]["type"],
        "boolean"
    );
    let ran = client.ran(2);
    assert_eq!(ran["result"]["structuredContent"]["action"], "disable");
    assert_eq!(
        sim_count(&r.kitchen, "svc wifi disable"),
        1,
        "approved: ran once"
    );
    // The decision is the daemon's: the request closed, its session
    // event says it was approved.
    r.probe.wait("the approval closed on MQTT", WAIT, |m| {
        m.topic == format!("{P}/approvals/{id}") && m.payload.is_empty()
    });
    r.probe.wait("the approval's outcome event", WAIT, |m| {
        m.topic == format!("{P}/sessions/mcp/events") && m.payload.contains(r#""approved":true"#)
    });
    // Who answered: `droidwarden mcp`'s uid, as the bus daemon vouches.
    let by = format!(
        r#""by":"D-Bus uid {} (:"#,
        droidwarden_e2e::own_uid().expect("own uid")
    );
    answered_by(&r, &[&by]);

    // Declined in the client: denied, recorded with the reason, not run.
    client.asked(3);
    let declined = client.line(4);
    assert_eq!(declined["result"]["isError"], true, "{declined}");
    assert_eq!(error_code(&declined), "denied", "{declined}");
    let reason = declined["result"]["structuredContent"]["error"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(reason.contains("declined in the MCP client"), "{reason}");
    r.probe.wait("the denial's event", WAIT, |m| {
        m.topic == format!("{P}/sessions/mcp/events")
            && m.payload.contains("declined in the MCP client")
    });
    assert_eq!(
        sim_count(&r.kitchen, "svc wifi enable"),
        0,
        "declined: not run"
    );

    // One round by hand: the InputRequiredResult and its handle.
    let once = client.line(5);
    let input = &once["result"];
    assert_eq!(input["resultType"], "input_required", "{once}");
    assert_eq!(
        input["inputRequests"]["approval"]["method"],
        "elicitation/create"
    );
    let state = input["requestState"].as_str().expect("requestState");
    assert_eq!(state.len(), 64, "{state}");
    // A forged handle and one replayed on other arguments approve nothing.
    for n in [6, 7] {
        let refused = client.line(n);
        assert_eq!(refused["result"]["isError"], true, "{refused}");
        assert_eq!(error_code(&refused), "invalid_request_state", "{refused}");
    }
    // The retry without an answer denies that same request …
    let unanswered = client.line(8);
    assert_eq!(error_code(&unanswered), "denied", "{unanswered}");
    // … and its handle is spent.
    let reused = client.line(9);
    assert_eq!(error_code(&reused), "invalid_request_state", "{reused}");
    assert_eq!(client.wait_exit(), 0);
    assert_eq!(
        sim_count(&r.kitchen, "svc wifi disable"),
        1,
        "nothing ran after the first approval"
    );
    let open = cli.run_on_bus(&bus.address, &["approvals", "--json"]);
    assert_eq!(open.json["approvals"], json!([]), "{}", open.stdout);

    // The 2025-11-25 handshake: elicitation/create during the call.
    let mut legacy = PyClient::start_plan(
        json!({
            "stdio": droidwarden_mcp(r.daemon.config_path(), &[]),
            "elicit": "legacy",
            "answers": [approve, {"action": "accept",
                                  "content": {"approve": false, "reason": "not tonight"}}],
            "steps": wifi_calls(&["enable", "disable"]),
        }),
        &client_env,
    );
    assert_eq!(legacy.line(0)["protocol"], "2025-11-25");
    legacy.asked(1);
    legacy.ran(2);
    assert_eq!(sim_count(&r.kitchen, "svc wifi enable"), 1, "approved: ran");
    let denied = legacy.asked_then_denied(3);
    let reason = denied["result"]["structuredContent"]["error"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(
        reason.contains("in the MCP client (elicitation): not tonight"),
        "{reason}"
    );
    assert_eq!(
        sim_count(&r.kitchen, "svc wifi disable"),
        1,
        "denied: not run"
    );
    assert_eq!(legacy.wait_exit(), 0);
}

/// The daemon's Streamable HTTP endpoint: a 2026-07-28 client approves in
/// the client; a 2025-11-25 client is asked during the call, an approval
/// given elsewhere first wins (its own answer then ignored), and a
/// declined one is denied.
#[test]
fn the_python_sdk_answers_approvals_in_the_client_over_http() {
    // Only a client holding a token the daemon knows as a person's may
    // answer approvals itself.
    let (r, url, _token) = http_rig(true, "");
    let approve = json!({"action": "accept", "content": {"approve": true}});
    let mut modern = PyClient::start_plan(
        json!({
            "http": url,
            "token": ALICE_TOKEN,
            "elicit": "auto",
            "answers": [approve],
            "steps": wifi_calls(&["disable"]),
        }),
        &[],
    );
    assert_eq!(modern.line(0)["protocol"], "2026-07-28");
    modern.asked(1);
    modern.ran(2);
    assert_eq!(
        sim_count(&r.kitchen, "svc wifi disable"),
        1,
        "approved: ran"
    );
    assert_eq!(modern.wait_exit(), 0);
    // Answered in the daemon's own MCP endpoint: recorded as the token's
    // owner, then the client by the name it gave (quoted, as it is the
    // client's word).
    answered_by(
        &r,
        &[
            r#""by":"\"alice\" (holder of the MCP token) via MCP client \""#,
            r#"(elicitation)""#,
        ],
    );

    let hold = tempfile::tempdir().expect("dir");
    let held = hold.path().join("answer-now");
    let mut legacy = PyClient::start_plan(
        json!({
            "http": url,
            "token": ALICE_TOKEN,
            "elicit": "legacy",
            "answers": [
                {"action": "decline", "hold": held.display().to_string()},
                {"action": "decline"},
            ],
            "steps": wifi_calls(&["enable", "disable"]),
        }),
        &[],
    );
    assert_eq!(legacy.line(0)["protocol"], "2025-11-25");
    legacy.asked(1);
    // While the client's form is open, the approval is given on MQTT.
    let request = r
        .probe
        .wait("the approval request on MQTT", WAIT, |m| {
            m.topic.starts_with(&format!("{P}/approvals/")) && m.payload.contains("enable")
        })
        .json();
    r.probe.publish(
        &format!("{P}/cmd/approve"),
        json!({"approval_id": request["approval_id"], "decision": "approve"}).to_string(),
    );
    legacy.ran(2);
    assert_eq!(
        sim_count(&r.kitchen, "svc wifi enable"),
        1,
        "approved elsewhere: ran"
    );
    let approval_id = format!(
        r#""approval_id":"{}""#,
        request["approval_id"].as_str().unwrap_or_default()
    );
    answered_by(&r, &[&approval_id, r#""by":"MQTT""#]);
    // The client's form was withdrawn (notifications/cancelled).
    wait_for("the elicitation withdrawn", WAIT, || {
        let lines = legacy.lines.lock().unwrap();
        lines.iter().any(|l| l["op"] == "withdrawn").then_some(())
    });
    std::fs::write(&held, "").expect("release the held answer");
    legacy.asked_then_denied(3);
    assert_eq!(
        sim_count(&r.kitchen, "svc wifi disable"),
        1,
        "declined: not run again"
    );
    assert_eq!(legacy.wait_exit(), 0);
}

/// A requester never approves itself: on an endpoint without a token (so
/// nobody vouches for who a client is) a client that declares
/// elicitation is not asked, and a `critical` action is never asked in
/// any client; both wait for an answer given elsewhere.
#[test]
fn a_client_nobody_vouches_for_or_a_critical_action_is_never_approved_in_the_client() {
    let shell_on = "[phone_services.shell]\nenabled = true\n";
    let (r, url, _token) = http_rig(false, shell_on);
    let approve = json!({"action": "accept", "content": {"approve": true}});
    for (mode, action) in [("auto", "disable"), ("legacy", "enable")] {
        let mut client = PyClient::start_plan(
            json!({
                "http": url,
                "elicit": mode,
                "answers": [approve, approve],
                "steps": wifi_calls(&[action]),
            }),
            &[],
        );
        let request = r
            .probe
            .wait("the approval request on MQTT", WAIT, |m| {
                m.topic.starts_with(&format!("{P}/approvals/")) && m.payload.contains(action)
            })
            .json();
        // The client's own form would have been answered at once; nothing
        // ran, so it was not asked.
        assert_eq!(sim_count(&r.kitchen, &format!("svc wifi {action}")), 0);
        r.probe.publish(
            &format!("{P}/cmd/approve"),
            json!({"approval_id": request["approval_id"], "decision": "deny", "reason": "not from here"})
                .to_string(),
        );
        let denied = client.line(1);
        assert_eq!(error_code(&denied), "denied", "{denied}");
        assert_eq!(client.wait_exit(), 0);
        let lines = client.lines.lock().unwrap();
        assert!(
            lines.iter().all(|l| l["op"] != "elicited"),
            "{mode}: the client was asked: {lines:?}"
        );
    }
    assert_eq!(sim_count(&r.kitchen, "svc wifi"), 0, "nothing ran");
    drop(r);

    // With a person's token the client is asked — but never for `critical`.
    let (r, url, _token) = http_rig(true, shell_on);
    let shell = json!({"service_id": "shell", "action": "run", "parameters": {"argv": ["id"]}});
    let mut client = PyClient::start_plan(
        json!({
            "http": url,
            "token": ALICE_TOKEN,
            "elicit": "legacy",
            "answers": [approve],
            "steps": [{"op": "call", "name": "android_device", "arguments": shell}],
        }),
        &[],
    );
    let request = r
        .probe
        .wait("the shell approval request on MQTT", WAIT, |m| {
            m.topic.starts_with(&format!("{P}/approvals/")) && m.payload.contains("shell")
        })
        .json();
    let ran_id = |sim: &Sim| {
        sim.commands()
            .iter()
            .filter(|argv| argv.join(" ") == "id")
            .count()
    };
    assert_eq!(ran_id(&r.kitchen), 0, "not run on the client's word");
    r.probe.publish(
        &format!("{P}/cmd/approve"),
        json!({"approval_id": request["approval_id"], "decision": "deny"}).to_string(),
    );
    let denied = client.line(1);
    assert_eq!(error_code(&denied), "denied", "{denied}");
    assert_eq!(client.wait_exit(), 0);
    assert_eq!(ran_id(&r.kitchen), 0, "denied: not run");
    let lines = client.lines.lock().unwrap();
    assert!(
        lines.iter().all(|l| l["op"] != "elicited"),
        "critical was asked in the client: {lines:?}"
    );
}

/// An independent client of protocol 2025-11-25, the official TypeScript
/// SDK, answers `elicitation/create` during the call through
/// `droidwarden mcp`, which reaches the daemon on its private socket (no
/// bus): approved runs, declined is denied and does not run.
#[test]
fn the_typescript_sdk_answers_approvals_in_the_client() {
    // No bus at all: the daemon serves its API on its private socket, and
    // `droidwarden mcp` finds it there.
    let runtime = tempfile::tempdir().expect("runtime dir");
    let env = no_bus_env(runtime.path());
    let r = rig("", &env);
    let client_env = [&env[..], &[("HOME", r.adb.home().to_str().expect("home"))]].concat();
    let mut client = PyClient::start_node(
        json!({
            "stdio": droidwarden_mcp(r.daemon.config_path(), &[]),
            "answers": [
                {"action": "accept", "content": {"approve": true}},
                {"action": "decline"},
            ],
            "steps": wifi_calls(&["disable", "enable"]),
        }),
        &client_env,
    );
    assert_eq!(client.line(0)["protocol"], "2025-11-25");
    let asked = client.asked(1);
    let message = asked["params"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("wifi_automation.disable"), "{message}");
    let ran = client.ran(2);
    assert_eq!(ran["result"]["structuredContent"]["action"], "disable");
    assert_eq!(
        sim_count(&r.kitchen, "svc wifi disable"),
        1,
        "approved: ran"
    );
    client.asked_then_denied(3);
    r.probe.wait("the denial's event", WAIT, |m| {
        m.topic == format!("{P}/sessions/mcp/events")
            && m.payload.contains("declined in the MCP client")
    });
    // Who answered: `droidwarden mcp`'s uid, from the socket's peer.
    let by = format!(
        r#""by":"API socket uid {}""#,
        droidwarden_e2e::own_uid().expect("own uid")
    );
    answered_by(&r, &[&by]);
    assert_eq!(
        sim_count(&r.kitchen, "svc wifi enable"),
        0,
        "declined: not run"
    );
    assert_eq!(client.wait_exit(), 0);
}

/// The updates a client reported, in order: `(uri, line index)`.
fn updates(lines: &[Value]) -> Vec<(String, usize)> {
    lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l["op"] == "updated")
        .map(|(n, l)| (l["uri"].as_str().unwrap_or_default().to_owned(), n))
        .collect()
}

/// A client of protocol 2025-11-25 (the Python SDK's `ClientSession`)
/// subscribes with `resources/subscribe`: a call that changes a phone's
/// state brings `notifications/resources/updated`; after
/// `resources/unsubscribe` a change brings none, while a second phone's
/// subscription still reports its own (the marker: the watcher reads the
/// states in the order of their URIs each round, `porch` after `kitchen`,
/// so an update for the kitchen would come first); an unknown URI is
/// refused with invalid params.
#[test]
fn a_2025_11_25_client_subscribes_to_a_phones_state() {
    let porch = Sim::start(SimOptions::default());
    let (bus, r) = rig_on_bus(&format!(
        "[[devices]]\nname = \"porch\"\ntransport = \"adb\"\nserial = \"{}\"\n",
        porch.serial()
    ));
    r.adb.connect(&porch.serial());
    r.probe
        .wait_payload(&format!("{P}/devices/porch/availability"), WAIT, "online");
    let client_env = [
        &bus.daemon_env()[..],
        &[("HOME", r.adb.home().to_str().expect("home"))],
    ]
    .concat();
    let kitchen = "droidwarden://devices/kitchen/state";
    let porch_uri = "droidwarden://devices/porch/state";
    let battery = |device: &str| {
        json!({"op": "call", "name": "android_device",
               "arguments": {"device": device, "service_id": "battery", "action": "status"}})
    };
    let mut client = PyClient::start_plan(
        json!({
            "stdio": droidwarden_mcp(r.daemon.config_path(), &[]),
            "subscribe": "legacy",
            "steps": [
                {"op": "subscribe", "uri": "droidwarden://devices/nosuch/state"},
                {"op": "subscribe", "uri": "file:///etc/passwd"},
                {"op": "subscribe", "uri": kitchen},
                {"op": "subscribe", "uri": kitchen},
                {"op": "subscribe", "uri": porch_uri},
                battery("kitchen"),
                {"op": "wait", "uri": kitchen},
                {"op": "unsubscribe", "uri": kitchen},
                battery("kitchen"),
                battery("porch"),
                {"op": "wait", "uri": porch_uri},
            ],
        }),
        &client_env,
    );
    assert_eq!(client.wait_exit(), 0, "{}", client.stderr.lock().unwrap());
    let lines = client.lines.lock().unwrap().clone();
    let connected = &lines[0];
    assert_eq!(connected["protocol"], "2025-11-25", "{connected}");
    assert_eq!(
        connected["capabilities"]["resources"]["subscribe"], true,
        "{connected}"
    );
    let steps: Vec<&Value> = lines[1..].iter().filter(|l| l["op"] != "updated").collect();
    // Unknown resources: the spec's invalid params, naming the URI.
    for (n, uri) in [
        (0, "droidwarden://devices/nosuch/state"),
        (1, "file:///etc/passwd"),
    ] {
        let refused = steps[n];
        assert_eq!(refused["op"], "subscribe", "{refused}");
        assert_eq!(refused["error"]["code"], -32602, "{refused}");
        assert_eq!(refused["error"]["data"]["uri"], uri, "{refused}");
    }
    // Known ones, twice (idempotent), and the unsubscribe: accepted.
    for n in [2, 3, 4, 7] {
        assert_eq!(steps[n]["error"], Value::Null, "{}", steps[n]);
    }
    for n in [5, 8, 9] {
        assert_eq!(steps[n]["result"]["isError"], false, "{}", steps[n]);
    }
    let at = |op: &str, uri: &str| {
        lines
            .iter()
            .position(|l| l["op"] == op && l["uri"] == uri)
            .unwrap_or_else(|| panic!("no {op} {uri} in {lines:?}"))
    };
    let subscribed = at("subscribe", kitchen);
    let unsubscribed = at("unsubscribe", kitchen);
    let marker = at("waited", porch_uri);
    let seen = updates(&lines);
    // The call on the kitchen phone was announced while subscribed …
    assert!(
        seen.iter()
            .any(|(uri, n)| uri == kitchen && *n > subscribed && *n < unsubscribed),
        "{lines:?}"
    );
    // … the one after the unsubscribe was not, though the porch phone's
    // later change was.
    assert!(
        !seen
            .iter()
            .any(|(uri, n)| uri == kitchen && *n > unsubscribed),
        "{lines:?}"
    );
    assert!(
        seen.iter()
            .any(|(uri, n)| uri == porch_uri && *n > unsubscribed && *n < marker),
        "{lines:?}"
    );
}
