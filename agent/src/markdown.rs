//! A session rendered as readable markdown: each turn with timestamps, the
//! user's prompt, tool calls with their arguments, results, and answers.
//! Runs still in progress (or interrupted) come last.

use crate::clock::rfc3339;
use crate::events::ApprovalOutcome;
use crate::graph::CallStatus;
use crate::message::{Message, TimedMessage};
use crate::store::{ChildRecord, SessionDetail};
use std::fmt::Write as _;

fn fence(text: &str) -> String {
    let pretty = serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok());
    match pretty {
        Some(p) => format!("```json\n{p}\n```\n"),
        None => format!("```\n{text}\n```\n"),
    }
}

/// The line that says how the approval of a call ended, if it asked for one.
fn approval(out: &mut String, approvals: &[ApprovalOutcome], call_id: &str) {
    // A screen action may be asked about again when the app in front
    // raised its risk: every request of the call, in order.
    for a in approvals.iter().filter(|a| a.request.call_id == call_id) {
        approval_line(out, a);
    }
}

fn approval_line(out: &mut String, a: &ApprovalOutcome) {
    let mut line = format!("**Approval** `{}`: {}", a.request.approval_id, a.status);
    if let Some(app) = &a.request.app {
        let _ = write!(line, " ({} risk in {app})", a.request.risk.as_str());
    }
    if let Some(by) = &a.decided_by {
        let _ = write!(line, " by {by}");
    }
    if let Some(at) = a.decided_at {
        let _ = write!(line, " · {}", rfc3339(at));
    }
    if let Some(reason) = a.reason.as_deref().filter(|_| a.status == "denied") {
        let _ = write!(line, " — {reason}");
    }
    if let Some(edited) = &a.edited_params {
        let _ = write!(
            line,
            " — with edited parameters {edited} (the model asked for {})",
            a.request.params
        );
    }
    if let Some(g) = &a.grant {
        match (&g.app, g.expires_at) {
            (Some(app), Some(until)) => {
                let _ = write!(
                    line,
                    " — app {app} allowed on {} until {}: grant `{}`",
                    g.device,
                    rfc3339(until),
                    g.grant_id
                );
            }
            _ => {
                let _ = write!(
                    line,
                    " — for the rest of this run: grant `{}`, {} actions up to {}",
                    g.grant_id,
                    g.device,
                    g.up_to.as_str()
                );
            }
        }
        if let (Some(at), Some(by)) = (g.revoked_at, &g.revoked_by) {
            let _ = write!(line, "; revoked by {by} · {}", rfc3339(at));
        }
    }
    let _ = write!(out, "{line}\n\n");
}

fn messages(out: &mut String, list: &[TimedMessage], approvals: &[ApprovalOutcome]) {
    for m in list {
        let at = rfc3339(m.at_ms);
        match &m.message {
            Message::User { text } => {
                let _ = write!(out, "**User** · {at}\n\n{text}\n\n");
            }
            Message::Assistant {
                text,
                thinking,
                tool_calls,
            } => {
                if !thinking.is_empty() {
                    let _ = write!(
                        out,
                        "<details><summary>Thinking</summary>\n\n{}\n\n</details>\n\n",
                        thinking
                            .iter()
                            .map(|t| t.text.as_str())
                            .collect::<Vec<_>>()
                            .join("\n\n")
                    );
                }
                if !text.is_empty() {
                    let _ = write!(out, "**Assistant** · {at}\n\n{text}\n\n");
                }
                for c in tool_calls {
                    let _ = write!(
                        out,
                        "**Tool call** `{}` (`{}`) · {at}\n\n{}\n",
                        c.name,
                        c.id,
                        fence(&c.arguments)
                    );
                    approval(out, approvals, &c.id);
                }
            }
            Message::Tool {
                call_id,
                name,
                content,
                is_error,
            } => {
                let _ = write!(
                    out,
                    "**Tool {}** `{name}` (`{call_id}`) · {at}\n\n{}\n",
                    if *is_error { "error" } else { "result" },
                    fence(content)
                );
            }
        }
    }
}

/// The child runs (skills, wait-mode agents) of `parent`, each after the
/// other, nested ones under theirs, as quoted blocks.
fn children(out: &mut String, all: &[ChildRecord], parent: &str, depth: usize) {
    // Skills invoking skills are bounded by the depth limit; this bounds
    // the recursion even for a corrupt store.
    if depth > 16 {
        return;
    }
    for c in all.iter().filter(|c| c.parent_run == parent) {
        let mut block = format!(
            "**{} {}** (run `{}`, for call `{}`) · {} → {}{}\n\n",
            if c.kind == "agent" { "Agent" } else { "Skill" },
            c.name,
            c.run_id,
            c.call_id,
            rfc3339(c.started_at),
            rfc3339(c.finished_at),
            if c.is_error { ", failed" } else { "" }
        );
        tool_steps(&mut block, &c.steps);
        children(&mut block, all, &c.run_id, depth + 1);
        if let Some(text) = c.result["text"].as_str() {
            let _ = write!(block, "**Answer**\n\n{text}\n\n");
        } else if c.is_error {
            let _ = write!(block, "**Error**\n\n{}\n", fence(&c.result.to_string()));
        }
        for line in block.trim_end().lines() {
            out.push_str(if line.is_empty() { ">" } else { "> " });
            out.push_str(line);
            out.push('\n');
        }
        out.push('\n');
    }
}

/// Render a session.
pub(crate) fn render(detail: &SessionDetail) -> String {
    let SessionDetail {
        summary: session,
        turns,
        active,
        children: child_runs,
        approvals,
    } = detail;
    let mut out = format!(
        "# Session {}\n\n*{}* — started {}, last activity {}\n\n",
        session.id,
        session.title,
        rfc3339(session.created_at),
        rfc3339(session.updated_at)
    );
    for (n, t) in turns.iter().enumerate() {
        let _ = write!(
            out,
            "## Turn {} — {} (run `{}`, {})\n\n",
            n + 1,
            rfc3339(t.started_at),
            t.run_id,
            crate::store::stop_reason(&t.stop_reason)
                .map_or(t.stop_reason.clone(), |r| format!("{r:?}"))
        );
        messages(&mut out, &t.messages, approvals);
        children(&mut out, child_runs, &t.run_id, 0);
    }
    for r in active {
        let _ = write!(out, "## In progress — run `{}`\n\n", r.run_id);
        messages(&mut out, &r.messages, approvals);
        children(&mut out, child_runs, &r.run_id, 0);
        for slot in &r.calls {
            let status = match &slot.status {
                CallStatus::AwaitingApproval {
                    approval_id,
                    expires_at,
                } => format!(
                    "waiting for approval `{approval_id}` (expires {})",
                    rfc3339(*expires_at)
                ),
                CallStatus::Executing => "executing".into(),
                CallStatus::Done { is_error, .. } => {
                    if *is_error { "failed" } else { "done" }.into()
                }
            };
            let _ = writeln!(out, "- `{}` (`{}`): {status}", slot.call.name, slot.call.id);
        }
        out.push('\n');
    }
    for t in &session.tasks {
        let _ = write!(
            out,
            "## Background task `{}` — agent {} ({}, delegated {} by run `{}`)\n\n**Task**\n\n{}\n\n",
            t.task_id,
            t.agent,
            t.status.as_str(),
            rfc3339(t.created_at),
            t.parent_run,
            t.task
        );
        tool_steps(&mut out, &t.steps);
        if let Some(text) = t.result.as_ref().and_then(|r| r["text"].as_str()) {
            let _ = write!(out, "**Answer**\n\n{text}\n\n");
        }
        if let Some(e) = &t.error {
            let _ = write!(out, "**Error** `{}`: {}\n\n", e.code.as_str(), e.message);
        }
        if let Some(at) = t.finished_at {
            let _ = write!(out, "*ended {}*\n\n", rfc3339(at));
        }
    }
    out
}

/// Each tool call of a child run or a task, with its arguments and result.
fn tool_steps(out: &mut String, steps: &[crate::graph::ToolStep]) {
    for s in steps {
        let _ = write!(
            out,
            "**Tool call** `{}` (`{}`)\n\n{}\n**Tool {}**\n\n{}\n",
            s.tool,
            s.call_id,
            fence(&s.arguments.to_string()),
            if s.is_error { "error" } else { "result" },
            fence(&s.result.to_string())
        );
    }
}
