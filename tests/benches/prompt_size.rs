//! Benchmark of size, not time: what droidwarden's tool surface costs a
//! model before the user has said a word, with two phones that offer the
//! whole catalogue.
//!
//! It prints one JSON line per surface, each holding what really goes over
//! the wire (nothing is rebuilt by hand), with the tools as an index
//! (`tool_schemas = "index"`, the default) and with every schema in them
//! (`"full"`, the surface before the index, labelled `-full`):
//!
//! * `toolkit` and `direct`: the agent's first two OpenAI-compatible
//!   requests of a run (a tool call, then the answer), as its provider
//!   serialised them to a scripted model server, with the built-in skills
//!   the daemon loads;
//! * `mcp`: the `tools/list` result of `droidwarden mcp --local`, in
//!   toolkit and direct mode, over two emulated phones on the real adb
//!   server.
//!
//! `scripts/prompt-tokens.py` reads these lines and counts tokens with the
//! Qwen2.5 tokenizer. Run:
//!
//! ```text
//! cargo build --workspace --bins
//! cargo bench --workspace --bench prompt_size > /tmp/surfaces.jsonl
//! python3 scripts/prompt-tokens.py /tmp/surfaces.jsonl
//! ```

use droidwarden_agent::config::{
    AgentConfig, LlmConfig, ProviderKind, RawAgentConfig, RawLlmConfig,
};
use droidwarden_agent::skills::SkillSet;
use droidwarden_agent::testing::{FakeToolHost, ScriptStep, ScriptedLlm};
use droidwarden_agent::tools::ToolSchemas;
use droidwarden_agent::{Agent, AskRequest, Durability, ModelReply, Store, ToolCall, ToolMode};
use droidwarden_e2e::{AdbServer, SimOptions};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The agent's first two requests of a run in `mode`: the user's question
/// (answered with a tool call), then the tool's result (answered in text).
async fn agent_requests(mode: ToolMode, schemas: ToolSchemas) -> Vec<Value> {
    let call = ToolCall::new(
        "c1",
        match mode {
            ToolMode::Toolkit => "android_device",
            ToolMode::Direct => "android_battery",
        },
        match mode {
            ToolMode::Toolkit => r#"{"device":"kitchen","service_id":"battery","action":"status"}"#,
            ToolMode::Direct => r#"{"device":"kitchen","action":"status"}"#,
        },
    );
    let llm = ScriptedLlm::start([
        ScriptStep::Reply(ModelReply::with_calls(vec![call])),
        ScriptStep::Reply(ModelReply::text("The kitchen phone is at 77 %.")),
    ])
    .await
    .expect("scripted model");
    let provider = droidwarden_agent::provider::from_config(
        &LlmConfig::try_from(RawLlmConfig {
            provider: Some(ProviderKind::Openai),
            base_url: Some(llm.base_url(ProviderKind::Openai)),
            model: Some("qwen2.5-coder-0.5b-instruct".into()),
            stream: Some(true),
            max_retries: Some(0),
            ..RawLlmConfig::default()
        })
        .expect("llm config"),
    )
    .expect("provider");
    let config = AgentConfig::try_from(RawAgentConfig {
        tool_mode: Some(mode),
        tool_schemas: Some(schemas),
        ..RawAgentConfig::default()
    })
    .expect("agent config");
    let dir = tempfile::tempdir().expect("state");
    let store = Store::open(dir.path(), Durability::Process)
        .await
        .expect("store");
    let host = Arc::new(
        FakeToolHost::two_phones()
            .with_handler(|_| Ok(json!({"level_percent": 77, "charging": false}))),
    );
    let agent = Agent::new(config, provider, host, store);
    // What the daemon loads with no skill directory of its own.
    agent.set_skills(SkillSet::builtin());
    let run = agent
        .ask(AskRequest::new("How full is the kitchen phone's battery?"))
        .await
        .expect("ask");
    run.drive(CancellationToken::new()).await.expect("run");
    llm.requests().into_iter().map(|r| r.body).collect()
}

/// `tools/list` of `droidwarden mcp --local` in `mode` over two phones.
fn mcp_tools(adb: &AdbServer, serials: &[String], mode: &str, schemas: &str) -> Value {
    let config = tempfile::NamedTempFile::new().expect("config");
    std::fs::write(
        config.path(),
        format!(
            "[adb]\nconnect = [\"{}\", \"{}\"]\n[mcp]\ntool_mode = \"{mode}\"\ntool_schemas = \"{schemas}\"\n[[devices]]\nname = \"kitchen\"\ntransport = \"adb\"\nserial = \"{}\"\n[[devices]]\nname = \"bedroom\"\ntransport = \"adb\"\nserial = \"{}\"\n",
            serials[0], serials[1], serials[0], serials[1]
        ),
    )
    .expect("write config");
    let mut child = adb.mcp_local(config.path());
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut send = |message: Value| writeln!(stdin, "{message}").expect("send");
    let mut reply = || {
        let mut line = String::new();
        stdout.read_line(&mut line).expect("read");
        serde_json::from_str::<Value>(&line).expect("JSON-RPC reply")
    };
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "prompt_size", "version": "0"}}}),
    );
    let _ = reply();
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let list = reply();
    let _ = child.kill();
    let _ = child.wait();
    list["result"].clone()
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    for (label, mode) in [("toolkit", ToolMode::Toolkit), ("direct", ToolMode::Direct)] {
        for (suffix, schemas) in [("-full", ToolSchemas::Full), ("", ToolSchemas::Index)] {
            let requests = rt.block_on(agent_requests(mode, schemas));
            println!(
                "{}",
                json!({"surface": format!("{label}{suffix}"), "requests": requests})
            );
        }
    }
    let adb = AdbServer::start();
    let phones = [
        adb.phone(SimOptions::default()),
        adb.phone(SimOptions::default()),
    ];
    let serials: Vec<String> = phones.iter().map(|p| p.serial()).collect();
    for mode in ["toolkit", "direct"] {
        for (suffix, schemas) in [("-full", "full"), ("", "index")] {
            let list = mcp_tools(&adb, &serials, mode, schemas);
            println!(
                "{}",
                json!({"surface": format!("mcp-{mode}{suffix}"), "tools_list": list})
            );
        }
    }
}
