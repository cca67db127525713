//! The home eval against a real model (`docs/eval.md`): the tasks of
//! `tests/benches/eval/tasks.json` on two emulated phones behind the real
//! adb server, `droidwarden daemon` talking to an OpenAI-compatible
//! endpoint, and — when asked — LangGraph's prebuilt ReAct agent with the
//! same model and system prompt, calling the same daemon through its MCP
//! endpoint, interleaved task by task on the same phones. Each task is
//! judged by the phones' end state, the answer and the approvals
//! (`droidwarden_e2e::eval`). Prints a table and writes JSON.
//!
//! ```sh
//! cargo build --release --workspace --bins
//! EVAL_BASE_URL=http://127.0.0.1:8080/v1 EVAL_MODEL=qwen2.5-coder-0.5b \
//!   cargo bench -p droidwarden-e2e --bench eval
//! ```
//!
//! Environment:
//! - `EVAL_BASE_URL` (required), `EVAL_MODEL` (required), `EVAL_PROVIDER`
//!   (`openai`, `ollama`, …; default `openai`), `EVAL_API_KEY_ENV` (the
//!   variable holding the key, if the endpoint needs one);
//! - `EVAL_LLM_TOML`: more `[llm]` lines (e.g. `first_byte_timeout_s = 900`);
//!   `EVAL_AGENT_TOML`: `[agent]` lines (e.g. `max_iterations = 6`);
//! - `EVAL_TASKS`: task ids or kinds, comma-separated (default: all);
//! - `EVAL_AGENTS`: `droidwarden`, `langgraph` or both, comma-separated, run
//!   in that order on each task (default `droidwarden`);
//! - `EVAL_ANCHOR_BASE_URL`: the OpenAI-compatible URL the anchor uses
//!   (default `EVAL_BASE_URL`; for Ollama, its `/v1`);
//! - `EVAL_PYTHON`: the Python with `tests/benches/eval/requirements.txt`
//!   installed (default `python3`), for `langgraph`;
//! - `EVAL_TASK_TIMEOUT_S` (default 900), `EVAL_OUT` (JSON report path,
//!   default `target/eval-report.json`).

use droidwarden_e2e::eval::{Agent, Anchor, EVAL_TOML, Eval, report, select, table};
use std::path::Path;
use std::time::Duration;

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let (Some(base_url), Some(model)) = (env("EVAL_BASE_URL"), env("EVAL_MODEL")) else {
        eprintln!("eval: set EVAL_BASE_URL and EVAL_MODEL (docs/eval.md); nothing run");
        return;
    };
    let provider = env("EVAL_PROVIDER").unwrap_or_else(|| "openai".into());
    let mut llm = format!(
        "[llm]\nprovider = \"{provider}\"\nbase_url = \"{base_url}\"\nmodel = \"{model}\"\n"
    );
    let key_env = env("EVAL_API_KEY_ENV");
    if let Some(k) = &key_env {
        llm.push_str(&format!("api_key_env = \"{k}\"\n"));
    }
    let more = env("EVAL_LLM_TOML").unwrap_or_default();
    if !more.contains("temperature") {
        // Greedy decoding for both agents (the anchor sends 0 too), so a
        // rerun gives the same answers.
        llm.push_str("temperature = 0.0\n");
    }
    llm.push_str(&more);
    llm.push('\n');
    let mcp_port = droidwarden_e2e::free_port();
    let extra = format!(
        "[agent]\n{}\n{EVAL_TOML}[mcp]\nlisten = \"127.0.0.1:{mcp_port}\"\n",
        env("EVAL_AGENT_TOML").unwrap_or_default()
    );
    let tasks = select(&env("EVAL_TASKS").unwrap_or_default());
    let python = env("EVAL_PYTHON").unwrap_or_else(|| "python3".into());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/eval/langgraph_agent.py");
    let agents: Vec<Agent> = env("EVAL_AGENTS")
        .unwrap_or_else(|| "droidwarden".into())
        .split(',')
        .map(str::trim)
        .map(|name| match name {
            "droidwarden" => Agent::Droidwarden,
            "langgraph" => {
                let mut argv = vec![
                    python.clone(),
                    script.display().to_string(),
                    "--mcp-url".into(),
                    format!("http://127.0.0.1:{mcp_port}/mcp"),
                    "--base-url".into(),
                    env("EVAL_ANCHOR_BASE_URL").unwrap_or_else(|| base_url.clone()),
                    "--model".into(),
                    model.clone(),
                    "--system-prompt".into(),
                    droidwarden_agent::config::DEFAULT_SYSTEM_PROMPT.into(),
                ];
                if let Some(k) = &key_env {
                    argv.extend(["--api-key-env".into(), k.clone()]);
                }
                Agent::Anchor(Anchor {
                    name: "langgraph".into(),
                    argv,
                })
            }
            other => panic!("EVAL_AGENTS: unknown agent {other:?} (droidwarden, langgraph)"),
        })
        .collect();

    let rig = droidwarden_e2e::agent_rig::rig_llm(
        tempfile::tempdir().expect("skills dir"),
        &[],
        &extra,
        Some(llm.as_str()),
    );
    let mut eval = Eval::new(&rig);
    eval.task_timeout = Duration::from_secs(
        env("EVAL_TASK_TIMEOUT_S")
            .and_then(|v| v.parse().ok())
            .unwrap_or(900),
    );
    println!(
        "eval: {} tasks × {} agent(s), model {model} at {base_url}",
        tasks.len(),
        agents.len()
    );
    let mut outcomes = Vec::new();
    for task in &tasks {
        for agent in &agents {
            let o = eval.run(task, agent);
            println!(
                "{:<12} {:<28} {} in {:.1} s, {} steps, {} model calls, {}+{} tokens{}",
                o.agent,
                o.id,
                if o.success { "passed" } else { "FAILED" },
                o.seconds,
                o.steps,
                o.model_calls,
                o.prompt_tokens,
                o.completion_tokens,
                if o.success {
                    String::new()
                } else {
                    format!(": {}", o.failures.join("; "))
                }
            );
            outcomes.push(o);
        }
    }
    println!("\n{}", table(&outcomes));
    let json = report(
        &outcomes,
        serde_json::json!({"model": model, "base_url": base_url, "provider": provider,
                           "llm_toml": env("EVAL_LLM_TOML"), "agent_toml": env("EVAL_AGENT_TOML")}),
    );
    let out = env("EVAL_OUT").unwrap_or_else(|| {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../target/eval-report.json")
            .display()
            .to_string()
    });
    match std::fs::write(
        &out,
        serde_json::to_string_pretty(&json).unwrap_or_default(),
    ) {
        Ok(()) => println!("JSON report: {out}"),
        Err(e) => eprintln!("eval: cannot write {out}: {e}"),
    }
}
