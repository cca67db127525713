//! Approval requests for calls from outside a run (an MCP client through
//! the daemon): stored and announced like a run's, answered by approve or
//! deny, denied on expiry, and expired at the next start when their caller
//! is gone.

use droidwarden_agent::config::{AgentConfig, RawAgentConfig, RawApprovalConfig};
use droidwarden_agent::testing::{FakeToolHost, ScriptedModel};
use droidwarden_agent::{Agent, Durability, EventKind, ExternalAnswer, ExternalRequest, Store};
use droidwarden_services::{Catalogue, Risk};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

async fn agent(dir: &std::path::Path, timeout_s: f64) -> Agent {
    let cfg = AgentConfig::try_from(RawAgentConfig {
        approval: Some(RawApprovalConfig {
            timeout_s: Some(timeout_s),
            ..RawApprovalConfig::default()
        }),
        ..RawAgentConfig::default()
    })
    .unwrap();
    let store = Store::open(dir, Durability::Process).await.unwrap();
    Agent::new(
        cfg,
        Arc::new(ScriptedModel::new([])),
        Arc::new(FakeToolHost::two_phones()),
        store,
    )
}

fn wifi_off() -> ExternalRequest {
    ExternalRequest {
        caller: "mcp".into(),
        device: Some("kitchen".into()),
        command: Catalogue::get()
            .parse("wifi_automation", "disable", &json!({}))
            .unwrap(),
        risk: Risk::High,
        app: None,
    }
}

#[tokio::test]
async fn external_requests_are_announced_answered_and_expire() {
    let dir = tempfile::tempdir().unwrap();
    let agent = agent(dir.path(), 30.0).await;
    let mut events = agent.subscribe();

    // Approved from elsewhere while the caller waits.
    let waiting = tokio::spawn({
        let agent = agent.clone();
        async move { agent.request_external_approval(wifi_off(), |_| {}).await }
    });
    let event = tokio::time::timeout(Duration::from_secs(10), events.recv())
        .await
        .unwrap()
        .unwrap();
    let EventKind::ApprovalRequested { approval } = event.kind else {
        panic!("expected an approval request, got {event:?}");
    };
    assert_eq!(approval.session, "mcp");
    assert_eq!(approval.service, "wifi_automation");
    assert_eq!(approval.device.as_deref(), Some("kitchen"));
    let pending = agent.pending_approvals().await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].approval_id, approval.approval_id);
    // A call from outside a run can be neither granted for a run nor
    // edited: nothing is recorded, and it still waits.
    for decision in [
        droidwarden_agent::ApprovalDecision::ApproveForRun {
            up_to: droidwarden_services::Risk::Medium,
        },
        droidwarden_agent::ApprovalDecision::ApproveWithEdits {
            params: serde_json::Map::new(),
        },
    ] {
        assert!(matches!(
            agent.answer(&approval.approval_id, decision, "Alice").await,
            Err(droidwarden_agent::AgentError::InvalidAnswer(_))
        ));
    }
    agent
        .approve(&approval.approval_id, "D-Bus uid 1000 (:1.7)")
        .await
        .unwrap();
    let answer = waiting.await.unwrap().unwrap();
    assert_eq!(answer, ExternalAnswer::Approved);
    // Who answered, announced.
    let answered = tokio::time::timeout(Duration::from_secs(10), events.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(&answered.kind, EventKind::ApprovalAnswered { approval_id, approved: true, by: Some(by), .. }
            if *approval_id == approval.approval_id && by == "D-Bus uid 1000 (:1.7)"),
        "{answered:?}"
    );
    // The request is closed for everyone showing open ones.
    let closed = tokio::time::timeout(Duration::from_secs(10), events.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(closed.kind, EventKind::ToolResult { ref call_id, is_error: false, .. } if *call_id == approval.call_id),
        "{closed:?}"
    );
    assert!(agent.pending_approvals().await.unwrap().is_empty());

    // Denied, with the reason.
    let waiting = tokio::spawn({
        let agent = agent.clone();
        async move { agent.request_external_approval(wifi_off(), |_| {}).await }
    });
    let id = loop {
        if let Ok(e) = events.recv().await
            && let EventKind::ApprovalRequested { approval } = e.kind
        {
            break approval.approval_id;
        }
    };
    agent.deny(&id, "not now", "test").await.unwrap();
    assert_eq!(
        waiting.await.unwrap().unwrap(),
        ExternalAnswer::Denied("not now".into())
    );
}

#[tokio::test]
async fn unanswered_requests_expire_and_orphans_are_expired_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let agent = agent(dir.path(), 0.2).await;
    let answer = agent
        .request_external_approval(wifi_off(), |_| {})
        .await
        .unwrap();
    assert!(
        matches!(answer, ExternalAnswer::Denied(ref r) if r.contains("expired")),
        "{answer:?}"
    );
    assert!(agent.pending_approvals().await.unwrap().is_empty());

    // A caller that went away (the process stopped) leaves a request
    // pending; the next start expires it.
    let dir = tempfile::tempdir().unwrap();
    let agent = self::agent(dir.path(), 30.0).await;
    let (stored, is_stored) = tokio::sync::oneshot::channel();
    let caller = agent.clone();
    let abandoned = tokio::spawn(async move {
        caller
            .request_external_approval(wifi_off(), move |a| {
                let _ = stored.send(a.approval_id.clone());
            })
            .await
    });
    let id = is_stored.await.unwrap();
    abandoned.abort();
    let pending = agent.pending_approvals().await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].approval_id, id);
    assert_eq!(agent.expire_orphaned_external_approvals().await.unwrap(), 1);
    assert!(agent.pending_approvals().await.unwrap().is_empty());
}
