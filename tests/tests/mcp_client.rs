//! MCP servers as agent tools (`[[mcp.servers]]`), end to end: a small MCP
//! server written with the official Python SDK (tests/python/
//! mcp_tools_server.py) spawned by `droidwarden daemon`, the scripted
//! language model over real HTTP, mosquitto, the adb server and one
//! emulated phone. Needs PyPI `mcp` (`scripts/test` installs it).

use droidwarden_agent::ModelReply;
use droidwarden_agent::testing::{RecordedRequest, Responder, ScriptStep, ScriptedLlm};
use droidwarden_e2e::mqtt::{Daemon, Mosquitto, Probe};
use droidwarden_e2e::{AdbServer, Sim, SimOptions, binary, run_with_timeout, wait_for};
use serde_json::{Value, json};
use std::time::Duration;

const P: &str = "droidwarden";
const WAIT: Duration = Duration::from_secs(30);
/// An address where no D-Bus is.
const NO_BUS: &str = "unix:path=/nonexistent/droidwarden-test/bus";

/// Field order is drop order: the daemon (and its MCP server) stops first.
struct Rig {
    daemon: Daemon,
    probe: Probe,
    _kitchen: Sim,
    llm: ScriptedLlm,
    _adb: AdbServer,
    _broker: Mosquitto,
    _rt: tokio::runtime::Runtime,
    pid_file: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

fn rig() -> Rig {
    let (rt, llm) = droidwarden_e2e::scripted_model();
    let broker = Mosquitto::start();
    let probe = Probe::connect(broker.port);
    let adb = AdbServer::start();
    let kitchen = Sim::start(SimOptions::default());
    adb.connect(&kitchen.serial());
    let dir = tempfile::tempdir().expect("dir");
    let pid_file = dir.path().join("pids");
    let server = concat!(env!("CARGO_MANIFEST_DIR"), "/python/mcp_tools_server.py");
    let config = format!(
        r#"[mqtt]
url = "mqtt://127.0.0.1:{port}"
[mqtt.homeassistant]
discovery = false
[poll]
battery = 0
wifi_automation = 0
bluetooth_automation = 0
airplane_mode = 0
audio_automation = 0
screen_control = 0
device_state = 0
[adb]
poll_interval_ms = 300
connect = ["{serial}"]
[llm]
provider = "openai"
base_url = "http://{llm}/v1"
model = "scripted"
max_retry_wait_s = 5
[[mcp.servers]]
name = "tools"
command = "python3"
args = [{server:?}]
env = {{ MCP_PID_FILE = {pids:?} }}
deny = ["secret"]
risk = {{ echo = "low" }}
timeout_s = 20
max_result_chars = 100
[[devices]]
name = "kitchen"
transport = "adb"
serial = "{serial}"
"#,
        port = broker.port,
        serial = kitchen.serial(),
        llm = llm.addr(),
        pids = pid_file.display().to_string(),
    );
    // `[dbus] bus = "auto"` with no bus reachable: the daemon serves its
    // private socket only (what `droidwarden approve --socket` reaches).
    let runtime = dir.path().join("runtime");
    std::fs::create_dir(&runtime).expect("runtime dir");
    let daemon = Daemon::start_with_env(
        &adb,
        &config,
        tempfile::tempdir().expect("state"),
        &[
            ("DBUS_SESSION_BUS_ADDRESS", NO_BUS),
            ("DBUS_SYSTEM_BUS_ADDRESS", NO_BUS),
            ("DROIDWARDEN__DBUS__BUS", "auto"),
            ("XDG_RUNTIME_DIR", runtime.to_str().expect("utf-8 path")),
        ],
    );
    probe.wait_last(&format!("{P}/devices/kitchen/availability"), WAIT, |m| {
        m.payload == "online"
    });
    Rig {
        daemon,
        probe,
        _kitchen: kitchen,
        llm,
        _adb: adb,
        _broker: broker,
        _rt: rt,
        pid_file,
        _dir: dir,
    }
}

impl Rig {
    fn pids(&self) -> Vec<String> {
        std::fs::read_to_string(&self.pid_file)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    fn ask_async(&self, id: &str, prompt: &str) {
        self.probe.publish(
            &format!("{P}/cmd/ask"),
            json!({"id": id, "prompt": prompt}).to_string(),
        );
    }

    fn wait_reply(&self, id: &str) -> Value {
        let topic = format!("{P}/reply/{id}");
        self.probe
            .wait(&format!("a reply on {topic}"), WAIT, |m| m.topic == topic)
            .json()
    }

    /// Ask the model to call `tool` with `arguments`, then to answer with
    /// the tool result it was sent (as JSON text).
    fn script_call(&self, tool: &str, arguments: Value) {
        self.llm.push(ScriptStep::Reply(ModelReply::tool_calls([(
            tool.to_owned(),
            arguments.to_string(),
        )])));
        self.llm.push(ScriptStep::Compute(Responder::new(|request| {
            ModelReply::text(
                tool_results(request)
                    .last()
                    .map(Value::to_string)
                    .unwrap_or_default(),
            )
        })));
    }
}

/// The tool results in a request (OpenAI `role: tool` messages), parsed.
fn tool_results(request: &RecordedRequest) -> Vec<Value> {
    request.body["messages"]
        .as_array()
        .map(|messages| {
            messages
                .iter()
                .filter(|m| m["role"] == "tool")
                .map(|m| {
                    let text = m["content"].as_str().unwrap_or_default();
                    serde_json::from_str(text).unwrap_or_else(|_| json!(text))
                })
                .collect()
        })
        .unwrap_or_default()
}

fn reply_result(reply: &Value) -> Value {
    let text = reply["result"]["text"].as_str().unwrap_or_default();
    serde_json::from_str(text).unwrap_or_else(|_| panic!("model's answer: {reply}"))
}

#[test]
fn mcp_server_tools_are_offered_called_approved_and_survive_a_restart() {
    let r = rig();

    // 1. The harmless tool runs at once and its result reaches the model.
    r.script_call("mcp_tools_echo", json!({"text": "hello"}));
    r.ask_async("echo-1", "echo hello");
    let reply = r.wait_reply("echo-1");
    assert_eq!(reply["ok"], true, "{reply}");
    let result = reply_result(&reply);
    assert_eq!(result["content"], "ECHO HELLO (5 chars)", "{reply}");
    assert_eq!(result["server"], "tools");

    // 2. The tools the model was offered: echo and wipe with the server's
    // own schemas; the denied one is not there.
    let first = &r.llm.requests()[0].body;
    let tools: Vec<&Value> = first["tools"].as_array().expect("tools").iter().collect();
    let names: Vec<&str> = tools
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(names.contains(&"mcp_tools_echo"), "{names:?}");
    assert!(names.contains(&"mcp_tools_wipe"), "{names:?}");
    assert!(
        !names.iter().any(|n| n.contains("secret")),
        "a denied tool is offered: {names:?}"
    );
    let echo = tools
        .iter()
        .find(|t| t["function"]["name"] == "mcp_tools_echo")
        .expect("echo");
    assert_eq!(
        echo["function"]["parameters"]["required"],
        json!(["text"]),
        "{echo}"
    );

    // 3. A denied tool called anyway is refused before any server sees it.
    r.script_call("mcp_tools_secret", json!({}));
    r.ask_async("secret-1", "tell me the secret");
    let reply = r.wait_reply("secret-1");
    let result = reply_result(&reply);
    assert!(
        result["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("unknown tool")),
        "{reply}"
    );
    assert!(!reply.to_string().contains("42"), "{reply}");

    // 4. The destructive one waits for approval, then runs.
    r.script_call("mcp_tools_wipe", json!({"box": "b7"}));
    r.ask_async("wipe-1", "wipe box b7");
    let approval = r
        .probe
        .wait("an approval request", WAIT, |m| {
            m.topic.starts_with(&format!("{P}/approvals/")) && !m.payload.is_empty()
        })
        .json();
    assert_eq!(approval["service"], "mcp", "{approval}");
    assert_eq!(approval["action"], "mcp_tools_wipe", "{approval}");
    assert_eq!(approval["risk"], "high", "{approval}");
    assert_eq!(approval["params"], json!({"box": "b7"}), "{approval}");
    // The run is parked on the request: no answer yet, and the tool's
    // result has reached no model request (the reply below proves it ran
    // after the approval).
    assert!(
        r.probe.on(&format!("{P}/reply/wipe-1")).is_empty(),
        "the run went on without approval"
    );
    assert!(
        !r.llm
            .requests()
            .iter()
            .any(|q| q.body.to_string().contains("wiped box b7")),
        "the tool ran before the approval"
    );
    let id = approval["approval_id"].as_str().expect("id");
    // Approved with the CLI, on the daemon's private D-Bus socket.
    let mut cli = std::process::Command::new(binary("droidwarden"));
    cli.arg("--config")
        .arg(r.daemon.config_path())
        .arg("--socket")
        .arg(r.daemon.state_dir.path().join("api.sock"))
        .args(["approve", id])
        .env("DBUS_SESSION_BUS_ADDRESS", NO_BUS)
        .env("DBUS_SYSTEM_BUS_ADDRESS", NO_BUS);
    let out = run_with_timeout(cli, Duration::from_secs(60));
    assert!(
        out.status.success(),
        "droidwarden approve: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reply = r.wait_reply("wipe-1");
    assert_eq!(reply_result(&reply)["content"], "wiped box b7", "{reply}");

    // 5. Long results are cut at max_result_chars (100).
    let long = "x".repeat(300);
    r.script_call("mcp_tools_echo", json!({"text": long}));
    r.ask_async("echo-long", "echo a lot");
    let result = reply_result(&r.wait_reply("echo-long"));
    assert_eq!(result["truncated"], true, "{result}");
    assert_eq!(
        result["content"].as_str().map(|s| s.chars().count()),
        Some(100)
    );

    // 6. The server is killed: the daemon restarts it and a later call works.
    let pids = r.pids();
    assert_eq!(pids.len(), 1, "{pids:?}");
    let killed = std::process::Command::new("kill")
        .args(["-9", &pids[0]])
        .status()
        .expect("kill");
    assert!(killed.success());
    wait_for("the MCP server restarted", WAIT, || {
        (r.daemon.log().matches("MCP server up").count() >= 2).then_some(())
    });
    assert_eq!(r.pids().len(), 2, "{:?}", r.pids());
    r.script_call("mcp_tools_echo", json!({"text": "again"}));
    r.ask_async("echo-2", "echo again");
    let reply = r.wait_reply("echo-2");
    assert_eq!(
        reply_result(&reply)["content"],
        "ECHO AGAIN (5 chars)",
        "{reply}"
    );
}
