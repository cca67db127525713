//! Agent-loop overhead: how much time the graph, the driver, tool
//! validation and checkpointing add per tool round, with a zero-cost
//! in-process model and a no-op device (no HTTP, no phone).
//!
//! Run with `cargo bench -p droidwarden-agent --bench agent_loop`.
//!
//! * Per round: the time of a run with R tool rounds minus the time of a
//!   run with none, divided by R (so session set-up and the final turn's
//!   bookkeeping are not counted), without and with a durable SQLite
//!   checkpoint per step.
//! * Throughput: 100 sessions at once, 3 tool rounds each, on a 2-worker
//!   runtime; runs per second, with and without checkpoints.
//! * Plan mode, per step: the time of a plan run of 10 steps minus one of
//!   1 step, divided by 9. A step is an executor's tool round (two model
//!   calls) and a refinery decision (one model call), all zero-cost.
//!
//! Arguments after `--` that do not start with `-` select the cases whose
//! label contains one of them (`-- "read, no" plan`).

use droidwarden_agent::testing::{FakeToolHost, ScriptedModel};
use droidwarden_agent::{
    Agent, AgentConfig, AskRequest, ChatRequest, Durability, Message, ModelReply, RunMode, Store,
    ToolCall,
};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// A read: checkpointed once per round (after its result).
const READ: &str = r#"{"service_id":"battery","action":"status","parameters":{}}"#;
/// A change (low risk, auto-approved): checkpointed before it runs and after.
const WRITE: &str = r#"{"service_id":"screen_control","action":"wake","parameters":{}}"#;

/// A model that asks for `rounds` tool calls (`call`), one per reply, then answers.
fn model(rounds: usize, call: &'static str) -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::from_fn(move |req: &ChatRequest| {
        let done = req
            .messages
            .iter()
            .filter(|m| matches!(m, Message::Tool { .. }))
            .count();
        if done < rounds {
            ModelReply::with_calls(vec![ToolCall::new(
                format!("c{done}"),
                "android_device",
                call,
            )])
        } else {
            ModelReply::text("done")
        }
    }))
}

/// A plan-mode model: a plan of `steps` steps, one read per step, always
/// "continue", then the answer.
fn plan_model(steps: usize) -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::from_fn(move |req: &ChatRequest| {
        if req.system.contains("You are the planner") {
            let list: Vec<String> = (0..steps).map(|i| format!("step {i}")).collect();
            ModelReply::text(serde_json::json!({ "steps": list }).to_string())
        } else if req.system.contains("reviewing a plan") {
            ModelReply::text(r#"{"decision": "continue"}"#)
        } else if req.system.contains("executing one step") {
            if req
                .messages
                .iter()
                .any(|m| matches!(m, Message::Tool { .. }))
            {
                ModelReply::text("found")
            } else {
                ModelReply::with_calls(vec![ToolCall::new("c", "android_device", READ)])
            }
        } else {
            ModelReply::text("done")
        }
    }))
}

/// Plan mode: the cost of one more plan step.
fn per_plan_step(checkpoint: bool) -> (Duration, Duration, Duration) {
    runtime().block_on(async {
        const STEPS: usize = 10;
        let make = |dir: std::path::PathBuf, steps: usize| async move {
            let store = Store::open(dir, Durability::Process).await.expect("store");
            let config = AgentConfig {
                max_iterations: 1000,
                max_steps: 10_000,
                checkpoint_steps: checkpoint,
                plan: droidwarden_agent::plan::PlanLimits {
                    max_plan_steps: 50,
                    max_model_calls: 10_000,
                    ..AgentConfig::default().plan
                },
                ..AgentConfig::default()
            };
            let host = Arc::new(FakeToolHost::one_phone().without_log());
            Agent::new(config, plan_model(steps), host, store)
        };
        let d0 = tempfile::tempdir().expect("tempdir");
        let d1 = tempfile::tempdir().expect("tempdir");
        let one = make(d0.path().to_owned(), 1).await;
        let many = make(d1.path().to_owned(), STEPS).await;
        let plan = || AskRequest::new("plan it").with_mode(RunMode::Plan);
        let t0 = mean_run_time(&one, 100, plan).await;
        let t1 = mean_run_time(&many, 100, plan).await;
        (t1.saturating_sub(t0) / (STEPS as u32 - 1), t0, t1)
    })
}

async fn agent(
    dir: &std::path::Path,
    rounds: usize,
    call: &'static str,
    checkpoint: bool,
    durability: Durability,
) -> Agent {
    let store = Store::open(dir, durability).await.expect("store");
    let config = AgentConfig {
        max_iterations: 1000,
        max_steps: 10_000,
        checkpoint_steps: checkpoint,
        // The throughput case drives 100 sessions at once: the daemon's
        // default bound (4 running, 32 waiting) would refuse most of them.
        max_concurrent_runs: 128,
        ..AgentConfig::default()
    };
    let host = Arc::new(FakeToolHost::one_phone().without_log());
    Agent::new(config, model(rounds, call), host, store)
}

/// The tool-loop benchmarks' request.
fn read_battery() -> AskRequest {
    AskRequest::new("read the battery")
}

/// A current-thread runtime for one measurement.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

async fn run_once(a: &Agent, request: AskRequest) {
    let out = a
        .ask(request)
        .await
        .expect("ask")
        .drive(CancellationToken::new())
        .await
        .expect("drive");
    assert_eq!(out.text, "done");
}

async fn mean_run_time(a: &Agent, runs: usize, request: fn() -> AskRequest) -> Duration {
    for _ in 0..runs / 10 {
        run_once(a, request()).await; // warm-up
    }
    let start = Instant::now();
    for _ in 0..runs {
        run_once(a, request()).await;
    }
    start.elapsed() / runs as u32
}

fn per_round(
    call: &'static str,
    checkpoint: bool,
    durability: Durability,
) -> (Duration, Duration, Duration) {
    runtime().block_on(async {
        const ROUNDS: usize = 10;
        let d0 = tempfile::tempdir().expect("tempdir");
        let d1 = tempfile::tempdir().expect("tempdir");
        let zero = agent(d0.path(), 0, call, checkpoint, durability).await;
        let many = agent(d1.path(), ROUNDS, call, checkpoint, durability).await;
        let runs = if durability == Durability::Power {
            20
        } else {
            200
        };
        let t0 = mean_run_time(&zero, runs, read_battery).await;
        let t1 = mean_run_time(&many, runs, read_battery).await;
        (t1.saturating_sub(t0) / ROUNDS as u32, t0, t1)
    })
}

fn throughput(call: &'static str, checkpoint: bool) -> f64 {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = agent(dir.path(), 3, call, checkpoint, Durability::Process).await;
        const SESSIONS: usize = 100;
        const BATCHES: usize = 10;
        // Warm-up batch.
        let batch = |a: Agent| async move {
            let mut set = tokio::task::JoinSet::new();
            for _ in 0..SESSIONS {
                let a = a.clone();
                set.spawn(async move { run_once(&a, read_battery()).await });
            }
            while let Some(r) = set.join_next().await {
                r.expect("run");
            }
        };
        batch(a.clone()).await;
        let start = Instant::now();
        for _ in 0..BATCHES {
            batch(a.clone()).await;
        }
        (SESSIONS * BATCHES) as f64 / start.elapsed().as_secs_f64()
    })
}

/// The median of five measurements (the machine is shared).
fn median_of_five(
    measure: impl FnMut() -> (Duration, Duration, Duration),
) -> (Duration, Duration, Duration) {
    let mut samples: Vec<_> = std::iter::repeat_with(measure).take(5).collect();
    samples.sort();
    samples[2]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs us too.
    let quick = std::env::args().any(|a| a == "--test");
    if quick {
        println!("agent_loop: skipped in test mode");
        return;
    }
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wanted = |label: &str| filters.is_empty() || filters.iter().any(|f| label.contains(f));
    println!("agent_loop: zero-cost in-process model, no-op device, toolkit mode, 1 phone");
    let cases: [(&str, &'static str, bool, Durability); 5] = [
        ("read, no checkpoint", READ, false, Durability::Process),
        ("change, no checkpoint", WRITE, false, Durability::Process),
        (
            "read, SQLite checkpoint (WAL, NORMAL)",
            READ,
            true,
            Durability::Process,
        ),
        (
            "change, SQLite checkpoints (WAL, NORMAL)",
            WRITE,
            true,
            Durability::Process,
        ),
        (
            "change, SQLite checkpoints (WAL, FULL)",
            WRITE,
            true,
            Durability::Power,
        ),
    ];
    for (label, call, checkpoint, durability) in cases {
        if !wanted(label) {
            continue;
        }
        let (r, t0, t1) = median_of_five(|| per_round(call, checkpoint, durability));
        println!(
            "  per tool round, {label:<42} {:>8.1} µs   (run with 0 rounds {:.1} µs, 10 rounds {:.1} µs)",
            micros(r),
            micros(t0),
            micros(t1)
        );
    }
    for (label, call, checkpoint) in [
        ("reads, no checkpoint", READ, false),
        ("reads, checkpointed", READ, true),
        ("changes, checkpointed", WRITE, true),
    ] {
        if !wanted(label) {
            continue;
        }
        let mut samples: Vec<f64> = (0..3).map(|_| throughput(call, checkpoint)).collect();
        samples.sort_by(f64::total_cmp);
        println!(
            "  100 concurrent sessions x 3 rounds, {label:<24} {:>8.0} runs/s (median of 3)",
            samples[1]
        );
    }
    for (label, checkpoint) in [
        ("plan, no checkpoint", false),
        ("plan, SQLite checkpoints (WAL, NORMAL)", true),
    ] {
        if !wanted(label) {
            continue;
        }
        let (r, t0, t1) = median_of_five(|| per_plan_step(checkpoint));
        println!(
            "  per plan step, {label:<43} {:>8.1} µs   (plan of 1 step {:.1} µs, 10 steps {:.1} µs)",
            micros(r),
            micros(t0),
            micros(t1)
        );
    }
}
