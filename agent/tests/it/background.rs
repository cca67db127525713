//! Background delegation in the agent crate: a scripted model over real
//! HTTP (OpenAI wire format) that answers by reading each request, the
//! fake tool host's call log as the "phone", and a real SQLite store that
//! is reopened to play a restart.

use crate::common::*;
use droidwarden_agent::config::ProviderKind;
use droidwarden_agent::delegation::{Delegates, RawDelegateConfig};
use droidwarden_agent::testing::{FakeToolHost, Responder, ScriptStep, ScriptedLlm};
use droidwarden_agent::{
    Agent, AgentEvent, AskRequest, Delegation, EventKind, ModelReply, StopReason, TaskStatus,
    provider,
};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

fn worker(mode: Option<&str>) -> RawDelegateConfig {
    RawDelegateConfig {
        name: Some("worker".into()),
        description: Some("Reads batteries.".into()),
        system_prompt: Some("WORKER: you read batteries.".into()),
        tools: Some(vec!["battery".into()]),
        max_iterations: Some(3),
        mode: mode.map(str::to_owned),
        ..RawDelegateConfig::default()
    }
}

/// A model: the worker reads the kitchen battery, then answers; the main
/// agent delegates (`DELEGATE`), asks for the status of `task` (`STATUS`),
/// then answers with the last tool result it saw.
fn responder(task: Arc<Mutex<Option<String>>>) -> Responder {
    Responder::new(move |r| {
        if r.system_prompt().starts_with("WORKER") {
            return if r.has_tool_result() {
                ModelReply::text("Kitchen battery at 77 %.")
            } else {
                calls(vec![dev("w1", "kitchen", "battery", "status")])
            };
        }
        if r.has_tool_result() {
            return ModelReply::text(format!("Tool said: {}", r.last_message()));
        }
        let p = r.last_user_message();
        if p.contains("DELEGATE") {
            calls(vec![tc(
                "d1",
                "delegate_to_worker",
                json!({"task": "Read the kitchen battery.", "mode": "background"}),
            )])
        } else if p.contains("STATUS") {
            let id = task.lock().unwrap().clone().unwrap_or_default();
            calls(vec![tc("s1", "delegation_status", json!({"task_id": id}))])
        } else {
            ModelReply::text("Nothing to do.")
        }
    })
}

/// A scripted model server that answers as [`responder`] does.
async fn responding(task: Arc<Mutex<Option<String>>>) -> ScriptedLlm {
    let server = ScriptedLlm::start([]).await.unwrap();
    server.set_fallback(ScriptStep::Compute(responder(task)));
    server
}

/// Spawn every delegation on the runtime with `token`.
fn drive_with(a: &Agent, token: &CancellationToken) {
    let token = token.clone();
    a.set_background_driver(move |d: Delegation| {
        tokio::spawn(d.drive(token.clone()));
    });
}

async fn finished(rx: &mut tokio::sync::mpsc::UnboundedReceiver<AgentEvent>) -> AgentEvent {
    loop {
        let ev = tokio::time::timeout(Duration::from_secs(20), rx.recv())
            .await
            .expect("delegation_finished in time")
            .expect("events");
        if matches!(ev.kind, EventKind::DelegationFinished { .. }) {
            return ev;
        }
    }
}

#[tokio::test]
async fn a_background_task_answers_at_once_runs_alone_and_reports_its_result() {
    let dir = tempfile::tempdir().unwrap();
    let task = Arc::new(Mutex::new(None));
    let server = responding(task.clone()).await;
    let h = host();
    let cfg = delegating_config(vec![worker(None)], None);
    let p = provider::from_config(&scripted_llm(&server)).unwrap();
    let a = agent(dir.path(), cfg, p, h.clone()).await;
    let token = CancellationToken::new();
    drive_with(&a, &token);
    let mut events = all_events(&a);

    // The call asks for background mode; the tool result is the task id.
    let run = a.ask(AskRequest::new("DELEGATE please")).await.unwrap();
    let (session, parent) = (run.session_id().to_owned(), run.run_id().to_owned());
    let out = run.drive(CancellationToken::new()).await.unwrap();
    assert_eq!(out.stop_reason, StopReason::FinalAnswer);
    let result = &out.steps[0].result;
    assert!(!out.steps[0].is_error, "{result}");
    assert_eq!(result["status"], "delegated");
    let task_id = result["task_id"].as_str().unwrap().to_owned();
    assert!(task_id.starts_with("t-"), "{task_id}");
    *task.lock().unwrap() = Some(task_id.clone());

    // Events: started (tagged with the agent and the parent run), the
    // child's own tool calls, finished with the answer.
    let ev = finished(&mut events).await;
    assert_eq!(ev.run_id, task_id);
    assert_eq!(ev.session_id, session);
    assert_eq!(ev.parent_run.as_deref(), Some(parent.as_str()));
    assert_eq!(ev.skill.as_deref(), Some("agent:worker"));
    let EventKind::DelegationFinished { status, result, .. } = &ev.kind else {
        unreachable!()
    };
    assert_eq!(*status, TaskStatus::Succeeded);
    assert_eq!(result.as_ref().unwrap()["text"], "Kitchen battery at 77 %.");
    assert_eq!(h.count("battery", "status"), 1);

    // Stored, listed with its session, shown in the session's markdown.
    let stored = a.task(&task_id).await.unwrap().unwrap();
    assert_eq!(stored.status, TaskStatus::Succeeded);
    assert_eq!(stored.steps.len(), 1);
    assert_eq!(stored.steps[0].tool, "android_device");
    let sessions = a.sessions().await.unwrap();
    let s = sessions.iter().find(|s| s.id == session).unwrap();
    assert_eq!(s.tasks.len(), 1);
    assert_eq!(s.tasks[0].task_id, task_id);
    let md = a.session_markdown(&session).await.unwrap();
    assert!(
        md.contains(&format!(
            "Background task `{task_id}` — agent worker (succeeded"
        )),
        "{md}"
    );
    assert!(md.contains("Kitchen battery at 77 %."), "{md}");

    // delegation_status in a later turn of the same session: the result.
    let run = a
        .ask(AskRequest::new("STATUS of it").in_session(&session))
        .await
        .unwrap();
    let out = run.drive(CancellationToken::new()).await.unwrap();
    let status = &out.steps[0].result;
    assert!(!out.steps[0].is_error, "{status}");
    assert_eq!(status["status"], "succeeded");
    assert_eq!(status["result"]["text"], "Kitchen battery at 77 %.");

    // Another session cannot read it.
    let run = a.ask(AskRequest::new("STATUS elsewhere")).await.unwrap();
    let out = run.drive(CancellationToken::new()).await.unwrap();
    assert!(out.steps[0].is_error);
    assert_eq!(out.steps[0].result["error"]["code"], "not_found");
}

#[tokio::test]
async fn a_background_task_on_its_own_failing_model_is_stored_failed() {
    let dir = tempfile::tempdir().unwrap();
    let task = Arc::new(Mutex::new(None));
    let main = responding(task).await;
    // The worker has its own model (another endpoint), which refuses.
    let own = ScriptedLlm::start([]).await.unwrap();
    own.set_fallback(ScriptStep::Status {
        status: 400,
        retry_after: None,
        body: json!({"error": {"message": "model overloaded with nonsense"}}).to_string(),
    });
    let mut raw = worker(Some("background"));
    raw.model = Some("worker-model".into());
    raw.base_url = Some(own.base_url(ProviderKind::Openai));
    let cfg = delegating_config(vec![raw], None);
    let main_llm = scripted_llm(&main);
    let own_llm = cfg.agents[0].llm.as_ref().unwrap().apply(&main_llm);
    assert_eq!(own_llm.model, "worker-model");
    let set = Delegates::new(cfg.agents.clone())
        .with_provider("worker", provider::from_config(&own_llm).unwrap());
    let h = host();
    let a = agent(
        dir.path(),
        cfg,
        provider::from_config(&main_llm).unwrap(),
        h.clone(),
    )
    .await;
    a.set_agents(set);
    let token = CancellationToken::new();
    drive_with(&a, &token);
    let mut events = all_events(&a);
    let run = a.ask(AskRequest::new("DELEGATE")).await.unwrap();
    let out = run.drive(CancellationToken::new()).await.unwrap();
    assert_eq!(
        out.steps[0].result["status"], "delegated",
        "{:?}",
        out.steps
    );
    let ev = finished(&mut events).await;
    let EventKind::DelegationFinished { status, error, .. } = &ev.kind else {
        unreachable!()
    };
    assert_eq!(*status, TaskStatus::Failed);
    let error = error.as_ref().unwrap();
    assert!(error.message.contains("agent worker failed"), "{error:?}");
    // The worker's request went to its own endpoint with its own model.
    let own_reqs = own.requests();
    assert_eq!(own_reqs.len(), 1);
    assert_eq!(own_reqs[0].body["model"], "worker-model");
    assert!(
        main.requests()
            .iter()
            .all(|r| r.body["model"] == "scripted")
    );
    assert!(h.calls().is_empty());
    let stored = a.task(ev.run_id.as_str()).await.unwrap().unwrap();
    assert_eq!(stored.status, TaskStatus::Failed);
}

#[tokio::test]
async fn shutdown_interrupts_a_task_and_a_restart_reports_one_left_running() {
    let dir = tempfile::tempdir().unwrap();
    let task = Arc::new(Mutex::new(None));
    let server = responding(task).await;
    // A phone that takes a minute: the task is mid-call when stopped.
    let slow = Arc::new(FakeToolHost::two_phones().with_delay(Duration::from_secs(60)));
    let p = provider::from_config(&scripted_llm(&server)).unwrap();
    let a = agent(
        dir.path(),
        delegating_config(vec![worker(Some("background"))], None),
        p.clone(),
        slow.clone(),
    )
    .await;
    let token = CancellationToken::new();
    drive_with(&a, &token);
    let mut events = all_events(&a);
    let run = a.ask(AskRequest::new("DELEGATE")).await.unwrap();
    let out = run.drive(CancellationToken::new()).await.unwrap();
    let task_id = out.steps[0].result["task_id"].as_str().unwrap().to_owned();
    // Wait until the worker's phone call started, then shut down.
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let ev = events.recv().await.unwrap();
            if ev.run_id == task_id && matches!(ev.kind, EventKind::ToolCall { .. }) {
                break;
            }
        }
    })
    .await
    .expect("the worker called the phone");
    token.cancel();
    let ev = finished(&mut events).await;
    assert!(
        matches!(
            ev.kind,
            EventKind::DelegationFinished {
                status: TaskStatus::Interrupted,
                ..
            }
        ),
        "{ev:?}"
    );
    assert_eq!(
        a.task(&task_id).await.unwrap().unwrap().status,
        TaskStatus::Interrupted
    );

    // A process killed mid-task: the delegation is stored but nothing
    // drives it (this driver keeps it and is dropped with the agent).
    let kept: Arc<Mutex<Vec<Delegation>>> = Arc::default();
    let keep = kept.clone();
    a.set_background_driver(move |d| keep.lock().unwrap().push(d));
    let run = a.ask(AskRequest::new("DELEGATE again")).await.unwrap();
    let out = run.drive(CancellationToken::new()).await.unwrap();
    let lost = out.steps[0].result["task_id"].as_str().unwrap().to_owned();
    assert_eq!(
        a.task(&lost).await.unwrap().unwrap().status,
        TaskStatus::Running
    );
    kept.lock().unwrap().clear();
    drop(a);
    // The next start reports it interrupted, with a reason.
    let b = agent(
        dir.path(),
        delegating_config(vec![worker(Some("background"))], None),
        p,
        slow,
    )
    .await;
    b.expire_orphan_approvals().await.unwrap();
    let t = b.task(&lost).await.unwrap().unwrap();
    assert_eq!(t.status, TaskStatus::Interrupted);
    assert!(t.error.unwrap().message.contains("daemon stopped"));
    let all = b.tasks(None).await.unwrap();
    assert_eq!(all.len(), 2);
}

#[tokio::test]
async fn background_tasks_are_bounded_and_refused_without_a_driver() {
    let dir = tempfile::tempdir().unwrap();
    let server = ScriptedLlm::start([]).await.unwrap();
    // Two background delegations in one step, then an answer.
    server.set_fallback(ScriptStep::Compute(Responder::new(|r| {
        if r.has_tool_result() {
            ModelReply::text("ok")
        } else {
            calls(vec![
                tc(
                    "a",
                    "delegate_to_worker",
                    json!({"task": "one", "mode": "background"}),
                ),
                tc(
                    "b",
                    "delegate_to_worker",
                    json!({"task": "two", "mode": "background"}),
                ),
            ])
        }
    })));
    let p = provider::from_config(&scripted_llm(&server)).unwrap();
    let a = agent(
        dir.path(),
        delegating_config(vec![worker(None)], Some(1)),
        p,
        host(),
    )
    .await;

    // No driver: a clear tool error, the run goes on.
    let run = a.ask(AskRequest::new("go")).await.unwrap();
    let out = run.drive(CancellationToken::new()).await.unwrap();
    assert_eq!(out.text, "ok");
    assert!(
        out.steps
            .iter()
            .all(|s| s.is_error && s.result.to_string().contains("not available")),
        "{:?}",
        out.steps
    );

    // One open task at most: the second is refused as busy.
    let kept: Arc<Mutex<Vec<Delegation>>> = Arc::default();
    let keep = kept.clone();
    a.set_background_driver(move |d| keep.lock().unwrap().push(d));
    let run = a.ask(AskRequest::new("go")).await.unwrap();
    let out = run.drive(CancellationToken::new()).await.unwrap();
    let codes: Vec<Value> = out
        .steps
        .iter()
        .map(|s| {
            if s.is_error {
                s.result["error"]["code"].clone()
            } else {
                s.result["status"].clone()
            }
        })
        .collect();
    assert_eq!(
        codes,
        vec![json!("delegated"), json!("busy")],
        "{:?}",
        out.steps
    );
    assert_eq!(kept.lock().unwrap().len(), 1);
}
