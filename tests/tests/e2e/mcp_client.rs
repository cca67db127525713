//! MCP servers as agent tools (`[[mcp.servers]]`), end to end, with
//! servers nobody here wrote the SDK of: small servers written with the
//! official Python SDK (tests/python/mcp_tools_server.py over stdio,
//! tests/python/mcp_http_tools_server.py over Streamable HTTP), one with
//! the official TypeScript SDK at protocol 2025-11-25
//! (tests/npm/list_changed_server.cjs) and the reference server
//! `@modelcontextprotocol/server-everything` (npm), driven
//! by `droidwarden daemon`'s agent with the scripted language model over
//! real HTTP, mosquitto, the adb server and one emulated phone. Needs PyPI
//! `mcp` and the npm packages of tests/npm (`scripts/test` installs them).

use droidwarden_agent::testing::{Responder, ScriptStep, ScriptedLlm};
use droidwarden_agent::{ModelReply, ProviderKind};
use droidwarden_e2e::agent_rig::{self, answer_from_results};
use droidwarden_e2e::dbus::NO_BUS;
use droidwarden_e2e::mqtt::{Daemon, Mosquitto, NO_POLLS, Probe};
use droidwarden_e2e::npm::npm_bin;
use droidwarden_e2e::{
    AdbServer, KillOnDrop, Sim, SimOptions, binary, free_port, run_with_timeout,
    scripted_llm_config, wait_for,
};
use droidwarden_e2e::{P, WAIT};
use serde_json::{Value, json};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

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

/// The Python stdio server of tests/python/mcp_tools_server.py, as
/// `[[mcp.servers]]` (its pids go to `pid_file`).
fn python_stdio_server(pid_file: &Path) -> String {
    let server = concat!(env!("CARGO_MANIFEST_DIR"), "/python/mcp_tools_server.py");
    format!(
        r#"[[mcp.servers]]
name = "tools"
command = "python3"
args = [{server:?}]
env = {{ MCP_PID_FILE = {pids:?} }}
deny = ["secret"]
risk = {{ echo = "low", unlock = "low", late = "low" }}
timeout_s = 20
max_result_chars = 100
"#,
        pids = pid_file.display().to_string(),
    )
}

fn rig() -> Rig {
    rig_with(python_stdio_server)
}

/// The daemon with the `[[mcp.servers]]` that `servers` writes (given the
/// file where servers append their pids).
fn rig_with(servers: impl FnOnce(&Path) -> String) -> Rig {
    let (rt, llm) = droidwarden_e2e::scripted_model();
    let broker = Mosquitto::shared();
    let probe = Probe::connect_to(&broker);
    let adb = AdbServer::shared();
    let kitchen = adb.phone(SimOptions::default());
    let dir = tempfile::tempdir().expect("dir");
    let pid_file = dir.path().join("pids");
    let servers = servers(&pid_file);
    let config = format!(
        r#"[mqtt]
url = "mqtt://127.0.0.1:{port}"
{keys}[mqtt.homeassistant]
discovery = false
{NO_POLLS}[adb]
poll_interval_ms = 300
connect = ["{serial}"]
{llm}{servers}
[[devices]]
name = "kitchen"
transport = "adb"
serial = "{serial}"
"#,
        port = broker.port,
        keys = broker.mqtt_keys(),
        serial = kitchen.serial(),
        llm = scripted_llm_config(&llm, ProviderKind::Openai),
    );
    // `[dbus] bus = "auto"` with no bus reachable: the daemon serves its
    // private socket only (what `droidwarden approve --socket` reaches).
    let runtime = dir.path().join("runtime");
    std::fs::create_dir(&runtime).expect("runtime dir");
    let daemon = Daemon::start_without_bus(&adb, &config, &runtime);
    probe.wait_payload(&format!("{P}/devices/kitchen/availability"), WAIT, "online");
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

    /// Ask as request `id`, the model scripted to call `tool` with
    /// `arguments` and to answer with the tool result it was sent: that
    /// result. (The prompt only names the tool: the model does not read it.)
    ///
    /// # Panics
    /// When the run fails or its answer is not that JSON.
    fn tool_result(&self, id: &str, tool: &str, arguments: Value) -> Value {
        self.script_call(tool, arguments);
        self.ask_async(id, &format!("use {tool}"));
        let reply = self.wait_reply(id);
        assert_eq!(reply["ok"], true, "{reply}");
        reply_result(&reply)
    }

    /// Ask the model to call `tool` with `arguments`, then to answer with
    /// the tool result it was sent (as JSON text).
    fn script_call(&self, tool: &str, arguments: Value) {
        self.llm.push(agent_rig::call(tool, arguments));
        self.llm.push(answer_with_last_result());
    }
}

/// A model that answers with the last tool result it was sent, as JSON
/// text.
fn answer_with_last_result() -> ScriptStep {
    answer_from_results(|results| results.last().map(Value::to_string).unwrap_or_default())
}

fn reply_result(reply: &Value) -> Value {
    let text = reply["result"]["text"].as_str().unwrap_or_default();
    serde_json::from_str(text).unwrap_or_else(|_| panic!("model's answer: {reply}"))
}

#[test]
fn mcp_server_tools_are_offered_called_approved_and_survive_a_restart() {
    let r = rig();

    // 1. The harmless tool runs at once and its result reaches the model.
    let result = r.tool_result("echo-1", "mcp_tools_echo", json!({"text": "hello"}));
    assert_eq!(result["content"], "ECHO HELLO (5 chars)", "{result}");
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
    let result = r.tool_result("secret-1", "mcp_tools_secret", json!({}));
    assert!(
        result["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("unknown tool")),
        "{result}"
    );
    assert!(!result.to_string().contains("42"), "{result}");

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
    let result = r.tool_result("echo-long", "mcp_tools_echo", json!({"text": long}));
    assert_eq!(result["truncated"], true, "{result}");
    assert_eq!(
        result["content"].as_str().map(|s| s.chars().count()),
        Some(100)
    );

    // 6. Over stdio too, a tool added at runtime and announced with
    // notifications/tools/list_changed is offered to the next run.
    let result = r.tool_result("unlock", "mcp_tools_unlock", json!({}));
    assert_eq!(result["content"], "unlocked late", "{result}");
    wait_for("the daemon to list the new tool", WAIT, || {
        (log_lines(&r, &["MCP server tools changed", "mcp_tools_late"]) > 0).then_some(())
    });
    let result = r.tool_result("late", "mcp_tools_late", json!({"text": "y"}));
    assert_eq!(result["content"], "LATE y", "{result}");

    // 7. The server is killed: the daemon restarts it and a later call works.
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
    let result = r.tool_result("echo-2", "mcp_tools_echo", json!({"text": "again"}));
    assert_eq!(result["content"], "ECHO AGAIN (5 chars)", "{result}");
}

/// The names of the tools offered in the `n`-th model request.
fn offered(r: &Rig, n: usize) -> Vec<String> {
    r.llm.requests()[n].body["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
        .collect()
}

/// Lines of the daemon's log holding every one of `words`.
fn log_lines(r: &Rig, words: &[&str]) -> usize {
    r.daemon
        .log()
        .lines()
        .filter(|l| words.iter().all(|w| l.contains(w)))
        .count()
}

/// tests/python/mcp_http_tools_server.py on a port, requiring a token;
/// killed on drop.
struct HttpServer {
    child: KillOnDrop,
    port: u16,
    token: String,
}

impl HttpServer {
    fn start(port: u16, token: &str, pid_file: &Path) -> Self {
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/python/mcp_http_tools_server.py"
        );
        let child = Command::new("python3")
            .arg(script)
            .arg(port.to_string())
            .arg(token)
            .env("MCP_PID_FILE", pid_file)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("python3 (with PyPI mcp: scripts/test installs it)");
        wait_for("the Python MCP server to listen", WAIT, || {
            std::net::TcpStream::connect(("127.0.0.1", port)).ok()
        });
        Self {
            child: child.into(),
            port,
            token: token.to_owned(),
        }
    }
}

#[test]
fn reference_and_http_servers_change_their_tools_and_come_back() {
    let secrets = tempfile::tempdir().expect("dir");
    let token_file = secrets.path().join("token");
    let token = "t0k3n-for-the-python-server";
    std::fs::write(&token_file, format!("{token}\n")).expect("token");
    let wrong_file = secrets.path().join("wrong-token");
    std::fs::write(&wrong_file, "not-the-token\n").expect("token");
    let http_pids = secrets.path().join("http-pids");
    let http = HttpServer::start(free_port(), token, &http_pids);
    let everything = npm_bin("mcp-server-everything");
    let r = rig_with(|_| {
        format!(
            r#"[[mcp.servers]]
name = "everything"
command = {everything:?}
allow = ["echo", "get-sum"]
risk = {{ "*" = "low" }}
timeout_s = 30
[[mcp.servers]]
name = "web"
url = "http://127.0.0.1:{port}/mcp"
token_file = {token_file:?}
risk = {{ "*" = "low" }}
timeout_s = 10
[[mcp.servers]]
name = "wrong"
url = "http://127.0.0.1:{port}/mcp"
token_file = {wrong_file:?}
timeout_s = 5
"#,
            everything = everything.display().to_string(),
            port = http.port,
            token_file = token_file.display().to_string(),
            wrong_file = wrong_file.display().to_string(),
        )
    });
    let mut http = http;

    // 1. The reference server's get-sum, over stdio.
    let result = r.tool_result("sum", "mcp_everything_get-sum", json!({"a": 2, "b": 40}));
    assert_eq!(result["server"], "everything", "{result}");
    assert_eq!(result["content"], "The sum of 2 and 40 is 42.", "{result}");
    let names = offered(&r, 0);
    for name in [
        "mcp_everything_echo",
        "mcp_everything_get-sum",
        "mcp_web_add",
        "mcp_web_unlock",
    ] {
        assert!(names.iter().any(|n| n == name), "{name} not in {names:?}");
    }
    // The daemon speaks the current protocol (server/discover) with the
    // Python SDK, and falls back to the initialize handshake of 2025-11-25
    // with the reference server (pinned: it does not know 2026-07-28): the
    // list change below arrives on a subscriptions/listen stream.
    assert_eq!(
        log_lines(
            &r,
            &["MCP server up", "server=web", r#"protocol="2026-07-28""#]
        ),
        1,
        "{}",
        r.daemon.log()
    );
    assert_eq!(
        log_lines(
            &r,
            &[
                "MCP server up",
                "server=everything",
                r#"protocol="2025-11-25""#
            ]
        ),
        1,
        "{}",
        r.daemon.log()
    );
    // The server refuses a wrong token: that server offers nothing, and
    // the log says why without showing the token.
    assert!(
        !names.iter().any(|n| n.starts_with("mcp_wrong_")),
        "{names:?}"
    );
    wait_for("the refused token in the log", WAIT, || {
        (log_lines(&r, &["wrong", "refused the bearer token"]) > 0).then_some(())
    });
    assert!(
        !r.daemon.log().contains("not-the-token"),
        "a token reached the log"
    );
    // Not allowed, not offered; not there yet.
    assert!(
        !names.iter().any(|n| n == "mcp_everything_get-env"),
        "{names:?}"
    );
    assert!(!names.iter().any(|n| n == "mcp_web_late"), "{names:?}");

    // 2. Its echo, and the Python server's add over Streamable HTTP (with
    // the bearer token: the server answers 401 without it).
    let result = r.tool_result(
        "echo",
        "mcp_everything_echo",
        json!({"message": "hi there"}),
    );
    assert_eq!(result["content"], "Echo: hi there", "{result}");
    let result = r.tool_result("add", "mcp_web_add", json!({"a": 2, "b": 3}));
    assert_eq!(result["content"], "2 + 3 = 5", "{result}");
    assert!(
        !r.daemon.log().contains(&http.token),
        "the bearer token reached the log"
    );

    // 3. The server adds a tool at runtime and says so: the daemon lists
    // again, and the next run is offered the new tool and can call it.
    let result = r.tool_result("unlock", "mcp_web_unlock", json!({}));
    assert_eq!(result["content"], "unlocked late", "{result}");
    wait_for("the daemon to list the new tool", WAIT, || {
        (log_lines(&r, &["MCP server tools changed", "mcp_web_late"]) > 0).then_some(())
    });
    let before = r.llm.requests().len();
    let result = r.tool_result("late", "mcp_web_late", json!({"text": "x"}));
    assert_eq!(result["content"], "LATE x", "{result}");
    assert!(
        offered(&r, before).iter().any(|n| n == "mcp_web_late"),
        "{:?}",
        offered(&r, before)
    );

    // 4. The server is killed in the middle of a run that was offered its
    // tools: the model's call gets a clear error naming the server.
    let pid = http.child.id();
    let ups = log_lines(&r, &["MCP server up", "web"]);
    let before = r.llm.requests().len();
    r.llm.push(ScriptStep::Compute(Responder::new(move |_| {
        let killed = Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status()
            .expect("kill");
        assert!(killed.success());
        ModelReply::tool_calls([("mcp_web_add", r#"{"a": 1, "b": 1}"#)])
    })));
    r.llm.push(answer_with_last_result());
    r.ask_async("gone", "add 1 and 1");
    let reply = r.wait_reply("gone");
    assert!(
        offered(&r, before).iter().any(|n| n == "mcp_web_add"),
        "the run had the tool"
    );
    let error = &reply_result(&reply)["error"];
    let message = error["message"].as_str().unwrap_or_default();
    assert!(message.contains("MCP server web"), "{reply}");
    assert!(message.contains("reconnecting"), "{reply}");
    assert!(
        !message.contains("rmcp::"),
        "the model sees Rust type names: {reply}"
    );
    assert_eq!(error["retryable"], true, "{reply}");
    assert!(!reply.to_string().contains("1 + 1 = 2"), "{reply}");
    let _ = http.child.wait();

    // Meanwhile a new run is not offered its tools; the other server's stay.
    wait_for("the daemon to notice", WAIT, || {
        (log_lines(&r, &["MCP server connection lost", "web"]) > 0).then_some(())
    });
    let before = r.llm.requests().len();
    r.llm.push(agent_rig::text("nothing to do"));
    r.ask_async("meanwhile", "what can you do?");
    r.wait_reply("meanwhile");
    let names = offered(&r, before);
    assert!(
        !names.iter().any(|n| n.starts_with("mcp_web_")),
        "{names:?}"
    );
    assert!(
        names.iter().any(|n| n == "mcp_everything_echo"),
        "{names:?}"
    );

    // 5. It comes back on the same port: the daemon reconnects (with
    // backoff) and a later run calls it again.
    let http = HttpServer::start(http.port, token, &http_pids);
    wait_for("the daemon to reconnect", WAIT, || {
        (log_lines(&r, &["MCP server up", "web"]) > ups).then_some(())
    });
    let result = r.tool_result("back", "mcp_web_add", json!({"a": 20, "b": 22}));
    assert_eq!(result["content"], "20 + 22 = 42", "{result}");
    drop(http);
}

/// The JSON-RPC messages tests/npm/list_changed_server.cjs traced:
/// `(direction, message)` in the order it saw them.
fn server_trace(path: &Path) -> Vec<(String, Value)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|v| {
            (
                v["dir"].as_str().unwrap_or_default().to_owned(),
                v["message"].clone(),
            )
        })
        .collect()
}

#[test]
fn a_2025_11_25_server_announces_a_new_tool_unasked() {
    let modules = droidwarden_e2e::npm::npm_dir().join("node_modules");
    assert!(
        modules.join("@modelcontextprotocol/sdk").exists(),
        "the TypeScript MCP SDK is missing from {}: scripts/test installs tests/npm",
        modules.display()
    );
    let dir = tempfile::tempdir().expect("dir");
    let trace = dir.path().join("trace");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/npm/list_changed_server.cjs");
    let r = rig_with(|_| {
        format!(
            r#"[[mcp.servers]]
name = "ts"
command = "node"
args = [{script:?}]
env = {{ NODE_PATH = {modules:?}, MCP_TRACE_FILE = {trace:?} }}
risk = {{ "*" = "low" }}
timeout_s = 20
"#,
            modules = modules.display().to_string(),
            trace = trace.display().to_string(),
        )
    });

    // 1. The first run is offered the one tool; calling it makes the
    // server register a second one and say so.
    let result = r.tool_result("unlock", "mcp_ts_unlock", json!({}));
    assert_eq!(result["content"], "unlocked late", "{result}");
    let names = offered(&r, 0);
    assert!(names.iter().any(|n| n == "mcp_ts_unlock"), "{names:?}");
    assert!(!names.iter().any(|n| n == "mcp_ts_late"), "{names:?}");

    // 2. The daemon asked for 2026-07-28 (server/discover, which this SDK
    // does not know), fell back to the initialize handshake, and the server
    // answered with its own version, 2025-11-25: the one spoken. So the
    // change comes unasked: no subscriptions/listen stream was opened.
    let seen = server_trace(&trace);
    assert_eq!(seen[0].1["method"], "server/discover", "{seen:?}");
    assert_eq!(seen[1].1["error"]["code"], -32601, "{seen:?}");
    let initialize = seen
        .iter()
        .find(|(d, m)| d == "in" && m["method"] == "initialize")
        .unwrap_or_else(|| panic!("no initialize request: {seen:?}"));
    let answer = seen
        .iter()
        .find(|(d, m)| d == "out" && m["id"] == initialize.1["id"] && m.get("result").is_some())
        .unwrap_or_else(|| panic!("no initialize answer: {seen:?}"));
    assert_eq!(
        answer.1["result"]["protocolVersion"], "2025-11-25",
        "{seen:?}"
    );
    assert_eq!(
        answer.1["result"]["capabilities"]["tools"]["listChanged"], true,
        "{seen:?}"
    );
    assert_eq!(
        log_lines(
            &r,
            &["MCP server up", "server=ts", r#"protocol="2025-11-25""#]
        ),
        1,
        "{}",
        r.daemon.log()
    );

    // 3. The daemon hears the notification and lists the tools again.
    wait_for("the daemon to list the new tool", WAIT, || {
        (log_lines(&r, &["MCP server tools changed", "mcp_ts_late"]) > 0).then_some(())
    });
    let seen = server_trace(&trace);
    let notified = seen
        .iter()
        .position(|(d, m)| d == "out" && m["method"] == "notifications/tools/list_changed")
        .unwrap_or_else(|| panic!("no list change sent: {seen:?}"));
    assert!(
        seen[notified + 1..]
            .iter()
            .any(|(d, m)| d == "in" && m["method"] == "tools/list"),
        "no tools/list after the change: {seen:?}"
    );
    assert!(
        !seen
            .iter()
            .any(|(d, m)| d == "in" && m["method"] == "subscriptions/listen"),
        "{seen:?}"
    );

    // 4. The next run is offered the new tool, with its schema, and calls it.
    let before = r.llm.requests().len();
    let result = r.tool_result("late", "mcp_ts_late", json!({"text": "z"}));
    assert_eq!(result["content"], "LATE z", "{result}");
    let tools = r.llm.requests()[before].body["tools"].clone();
    let late = tools
        .as_array()
        .expect("tools")
        .iter()
        .find(|t| t["function"]["name"] == "mcp_ts_late")
        .unwrap_or_else(|| panic!("mcp_ts_late not offered: {tools}"));
    assert_eq!(
        late["function"]["parameters"]["required"],
        json!(["text"]),
        "{late}"
    );
}
