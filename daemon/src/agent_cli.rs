//! The agent's commands: `droidwarden ask`, `approvals`, `approve`, `deny`,
//! `sessions` and `session show`, all through the running daemon on D-Bus
//! (`crate::dbus::client`): the daemon owns the model, the phones and the
//! session store.
//!
//! `ask` subscribes to the daemon's `SessionEvent` signals before it asks,
//! so it sees every event of its run, prints them as they come (or one
//! JSON object per line with `--json`), and ends with the answer. While
//! the run waits (for the model, a phone, an approval) it checks every few
//! seconds that the daemon is still there.
//!
//! Exit status: 0 with an answer; 1 when the run failed (the error on a
//! line of its own, after any text already streamed), or the daemon
//! stopped (the run resumes when it starts again); [`NO_ANSWER`] (3) when
//! the run ended without one: it stopped at `[agent] max_iterations` or
//! `max_steps`, or the model's answer was empty. 130 after Ctrl-C.

use crate::client::{daemon, fail, fail_as, print_json};
use crate::config::Config;
use crate::dbus::Bus;
use droidwarden_agent::{
    AgentEvent, ApprovalOutcome, EventKind, Grant, PendingApproval, SessionSummary, StopReason,
};
use droidwarden_services::time::now_ms;
use droidwarden_services::{Catalogue, ErrorCode, WireError};
use futures_util::StreamExt;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

/// How long `ask` waits for an event before checking the daemon is alive.
const LIVENESS_CHECK: Duration = Duration::from_secs(5);

/// `ask`'s exit status when the run ended without an answer (at a limit,
/// or empty): not 1, so a script can tell it from a failure.
const NO_ANSWER: u8 = 3;

/// How the event that ends a run ends `ask`.
#[derive(Debug, PartialEq)]
enum End {
    /// An answer.
    Answered,
    /// No answer: why, for a person.
    NoAnswer(String),
    /// The run failed.
    Failed(WireError),
}

/// How an event ends the run, if it is a run's last event (`final` or
/// `error`).
fn end_of(event: &EventKind) -> Option<End> {
    match event {
        EventKind::Final {
            text,
            stop_reason,
            model_calls,
            ..
        } => {
            let limit = match stop_reason {
                StopReason::MaxIterations => Some("its iteration limit ([agent] max_iterations)"),
                StopReason::StepLimit => Some("its step limit ([agent] max_steps)"),
                _ => None,
            };
            Some(match limit {
                Some(limit) => End::NoAnswer(format!(
                    "the run stopped at {limit} after {model_calls} model call(s), before the model answered; ask again to go on, or raise the limit"
                )),
                None if text.trim().is_empty() => End::NoAnswer(format!(
                    "the model gave an empty answer after {model_calls} model call(s)"
                )),
                None => End::Answered,
            })
        }
        EventKind::Error { error, .. } => Some(End::Failed(error.clone())),
        _ => None,
    }
}

/// The daemon went away while `ask` followed session `session`: a clean
/// stop keeps the run, and the next start resumes it.
fn daemon_stopped(session: &str) -> WireError {
    let mut e = WireError::new(
        ErrorCode::Internal,
        format!(
            "the daemon stopped before the answer; the run resumes when it starts again (droidwarden session show {session})"
        ),
    );
    e.retryable = true;
    e
}

/// `droidwarden ask`.
pub(crate) async fn ask(
    config: &Config,
    bus: Option<Bus>,
    session: Option<String>,
    prompt: &str,
    json: bool,
    plan: bool,
) -> ExitCode {
    let start = if plan {
        Start::Plan(prompt)
    } else {
        Start::Ask(prompt)
    };
    match ask_inner(config, bus, session.as_deref(), start, json).await {
        Ok(code) => code,
        Err(e) => fail_as(&e, json),
    }
}

/// What starts the run `ask_inner` follows.
pub(crate) enum Start<'a> {
    /// `Ask(prompt)`.
    Ask(&'a str),
    /// `AskWith(prompt, {"mode": "plan"})`.
    Plan(&'a str),
    /// `RunSkill(skill, input_json)`.
    Skill(&'a str, &'a str),
}

/// Start a run through the daemon and print its events until its answer.
pub(crate) async fn ask_inner(
    config: &Config,
    bus: Option<Bus>,
    session: Option<&str>,
    start: Start<'_>,
    json: bool,
) -> Result<ExitCode, WireError> {
    let client = daemon(bus, config, false).await?;
    let mut events = client.session_events().await?;
    let session = match start {
        Start::Ask(prompt) => client.ask(session, prompt).await?,
        Start::Plan(prompt) => {
            client
                .ask_with(session, prompt, r#"{"mode":"plan"}"#)
                .await?
        }
        Start::Skill(skill, input) => client.run_skill(session, skill, input).await?,
    };
    if !json {
        outln!("session {session}");
    }
    let mut printer = Printer::default();
    // Approvals this run waits for (call id → approval id), for Ctrl-C.
    let mut pending: BTreeMap<String, String> = BTreeMap::new();
    let interrupt = tokio::signal::ctrl_c();
    tokio::pin!(interrupt);
    loop {
        let next = tokio::select! {
            _ = &mut interrupt => {
                printer.end_stream();
                eprintln!("{}", interrupted(&session, &pending));
                return Ok(ExitCode::from(130));
            }
            next = tokio::time::timeout(LIVENESS_CHECK, events.next()) => next,
        };
        let message = match next {
            Err(_) => {
                if client.daemon_running().await {
                    continue;
                }
                printer.end_stream();
                return Err(daemon_stopped(&session));
            }
            // Over the daemon's private socket, its stop closes the
            // connection.
            Ok(None) => {
                printer.end_stream();
                return Err(daemon_stopped(&session));
            }
            Ok(Some(Err(e))) => {
                tracing::debug!(error = %e, "unreadable D-Bus message");
                continue;
            }
            Ok(Some(Ok(message))) => message,
        };
        let Ok((event_session, event_json)) = message.body().deserialize::<(String, String)>()
        else {
            continue;
        };
        if event_session != session {
            continue;
        }
        let Ok(mut line) = serde_json::from_str::<Value>(&event_json) else {
            continue;
        };
        // A daemon newer than this command may send an event it does not
        // know: still a JSON line with --json, not shown to a person.
        let event = serde_json::from_value::<AgentEvent>(line.clone());
        if json {
            // JSON lines, one event each, times as RFC 3339 like every --json.
            crate::client::rfc3339_times(&mut line);
            outln!("{line}");
        }
        let Ok(event) = event else {
            tracing::debug!(event = %event_json, "an event this command does not know");
            continue;
        };
        match &event.kind {
            EventKind::ApprovalRequested { approval } => {
                pending.insert(approval.call_id.clone(), approval.approval_id.clone());
            }
            EventKind::ToolResult { call_id, .. } => {
                pending.remove(call_id);
            }
            _ => {}
        }
        if !json {
            printer.print(&event);
        }
        match end_of(&event.kind) {
            None => {}
            Some(End::Answered) => return Ok(ExitCode::SUCCESS),
            Some(End::NoAnswer(why)) => {
                if !json {
                    eprintln!("droidwarden: {why}");
                }
                return Ok(ExitCode::from(NO_ANSWER));
            }
            Some(End::Failed(_)) if json => return Ok(ExitCode::FAILURE),
            Some(End::Failed(error)) => return Err(error),
        }
    }
}

/// What Ctrl-C on `ask` leaves behind: the run is the daemon's, not this
/// process's, so it goes on; an approval it waits for stays open.
fn interrupted(session: &str, pending: &BTreeMap<String, String>) -> String {
    let mut text = format!(
        "stopped following session {session}; the run goes on in the daemon (droidwarden session show {session})"
    );
    for id in pending.values() {
        text.push_str(&format!(
            "\napproval {id} still waits: droidwarden approve {id}, or droidwarden deny {id}; unanswered, it is denied when it expires"
        ));
    }
    text
}

/// Human-readable progress.
#[derive(Debug, Default)]
struct Printer {
    /// Whether answer text was streamed (then `final` only ends the line).
    streamed: bool,
}

impl Printer {
    fn print(&mut self, event: &AgentEvent) {
        // A skill's own events are tagged with the skill.
        let skill = event.skill.as_deref().unwrap_or_default();
        let tag = if skill.is_empty() {
            String::new()
        } else {
            format!("[{skill}] ")
        };
        match &event.kind {
            EventKind::Plan { steps, replan } => {
                self.end_stream();
                outln!("☰ {}:", if *replan { "new plan" } else { "plan" });
                for (i, step) in steps.iter().enumerate() {
                    outln!("  {}. {step}", i + 1);
                }
            }
            EventKind::StepStarted { task, .. } => {
                self.end_stream();
                outln!("▷ step: {task}");
            }
            EventKind::StepFinished {
                finding, complete, ..
            } => {
                self.end_stream();
                outln!("{} {finding}", if *complete { "✔" } else { "…" });
            }
            EventKind::SkillStarted { input, .. } => {
                self.end_stream();
                outln!("▶ skill {skill} {}", short(input));
            }
            EventKind::SkillFinished { is_error, .. } => {
                self.end_stream();
                outln!(
                    "■ skill {skill} {}",
                    if *is_error { "failed" } else { "done" }
                );
            }
            EventKind::DelegationStarted { task_id, agent, .. } => {
                self.end_stream();
                outln!("▶ background task {task_id} for agent {agent}");
            }
            EventKind::DelegationFinished {
                task_id, status, ..
            } => {
                self.end_stream();
                outln!("■ background task {task_id} {}", status.as_str());
            }
            EventKind::TextDelta { text } => {
                out!("{text}");
                let _ = std::io::stdout().flush();
                self.streamed = true;
            }
            EventKind::Final { text, .. } => {
                if self.streamed {
                    outln!();
                    self.streamed = false;
                } else if !text.is_empty() {
                    outln!("{text}");
                }
            }
            // The error (printed by the caller) starts a line of its own.
            EventKind::Error { .. } => self.end_stream(),
            EventKind::ToolCall {
                tool, arguments, ..
            } => {
                self.end_stream();
                outln!("{tag}→ {tool} {}", short(arguments));
            }
            EventKind::ToolResult {
                tool,
                is_error,
                content,
                ..
            } => {
                let mark = if *is_error { "✗" } else { "✓" };
                outln!("{tag}{mark} {tool} {}", short(content));
            }
            EventKind::ApprovalRequested { approval: a } => {
                self.end_stream();
                let id = &a.approval_id;
                outln!(
                    "{tag}? approval needed: {}.{} on {} (risk {}) {}\n  answer with: droidwarden approve {id}   or: droidwarden deny {id} --reason …",
                    a.service,
                    a.action,
                    a.device.as_deref().unwrap_or("the default device"),
                    a.risk.as_str(),
                    short(&a.params),
                );
            }
            _ => {}
        }
    }

    fn end_stream(&mut self) {
        if self.streamed {
            outln!();
            self.streamed = false;
        }
    }
}

/// JSON on one line, cut at 200 characters.
fn short(v: &Value) -> String {
    let text = v.to_string();
    if text.chars().count() <= 200 {
        return text;
    }
    let cut: String = text.chars().take(200).collect();
    format!("{cut}…")
}

/// Print a list the daemon returned: with `--json` as `{key: [...]}` (the
/// CLI's one convention), else a `header` row and one `line` per item (or
/// `empty` when there is none).
fn print_list<T: Serialize>(
    listed: Result<Vec<T>, WireError>,
    json: bool,
    (key, header, empty): (&str, &str, &str),
    line: impl Fn(&T) -> String,
) -> ExitCode {
    match listed {
        Err(e) => fail_as(&e, json),
        Ok(list) if json => {
            print_json(&serde_json::json!({ key: list }));
            ExitCode::SUCCESS
        }
        Ok(items) => {
            outln!("{}", if items.is_empty() { empty } else { header });
            for item in &items {
                outln!("{}", line(item));
            }
            ExitCode::SUCCESS
        }
    }
}

/// An approval request's action as a line shows it: `service.action on
/// device`, and `in APP` when the app in front raised its risk.
fn action_on(a: &PendingApproval) -> String {
    let app = a
        .app
        .as_deref()
        .map(|app| format!(" in {app}"))
        .unwrap_or_default();
    format!(
        "{}.{} on {}{app}",
        a.service,
        a.action,
        a.device.as_deref().unwrap_or("default device"),
    )
}

/// `droidwarden approvals`: the requests waiting, then the grants for a
/// run that still hold (with `--json`, `{"approvals": […], "grants": […]}`).
pub(crate) async fn approvals(config: &Config, bus: Option<Bus>, json: bool) -> ExitCode {
    let listed = async {
        let client = daemon(bus, config, false).await?;
        let approvals = client.list_approvals().await?;
        let grants = client.list_grants().await?;
        Ok::<_, WireError>((approvals, grants))
    };
    let (approvals, grants) = match listed.await {
        Ok(both) => both,
        Err(e) => return fail_as(&e, json),
    };
    if json {
        print_json(&serde_json::json!({"approvals": approvals, "grants": grants}));
        return ExitCode::SUCCESS;
    }
    let header = "ID  ACTION ON DEVICE  RISK  PARAMETERS  (SESSION, EXPIRY)";
    let code = print_list(
        Ok(approvals),
        false,
        ("approvals", header, "no approval requests waiting"),
        |a: &PendingApproval| {
            let expires_in = a.expires_at.saturating_sub(now_ms()) / 1000;
            format!(
                "{}  {}  risk {}  {}  (session {}, expires in {expires_in} s)",
                a.approval_id,
                action_on(a),
                a.risk.as_str(),
                short(&a.params),
                a.session,
            )
        },
    );
    if !grants.is_empty() {
        outln!();
        outln!("GRANTS  (revoke: droidwarden approvals revoke GRANT)");
        outln!("GRANT  DEVICE  SCOPE  UP TO  BY  (SESSION, RUN, SINCE)");
        for g in &grants {
            outln!("{}", grant_line(g));
        }
    }
    code
}

/// A grant as `droidwarden approvals` lists it.
fn grant_line(g: &Grant) -> String {
    let time = |t: Option<u64>| t.map_or_else(|| "-".to_owned(), droidwarden_agent::clock::rfc3339);
    let scope = match &g.app {
        Some(app) => format!("app {app} until {}", time(g.expires_at)),
        None => "this run".to_owned(),
    };
    format!(
        "{}  {}  {scope}  {}  {}  (session {}, run {}, since {})",
        g.grant_id,
        g.device,
        g.up_to.as_str(),
        g.granted_by,
        g.session_id,
        g.run_id,
        time(Some(g.granted_at)),
    )
}

/// `droidwarden approvals --history`.
pub(crate) async fn approval_history(
    config: &Config,
    bus: Option<Bus>,
    json: bool,
    limit: u32,
) -> ExitCode {
    let listed = async {
        daemon(bus, config, false)
            .await?
            .approval_history(limit)
            .await
    };
    let header = "ANSWERED  OUTCOME  BY  ACTION ON DEVICE  ID";
    print_list(
        listed.await,
        json,
        ("approvals", header, "no approval request answered yet"),
        |a: &ApprovalOutcome| {
            let when = a
                .decided_at
                .map_or_else(|| "-".to_owned(), droidwarden_agent::clock::rfc3339);
            let outcome = match (a.status.as_str(), &a.reason) {
                ("denied", Some(reason)) => {
                    format!("denied ({})", short(&Value::from(reason.as_str())))
                }
                (status, _) => status.to_owned(),
            };
            format!(
                "{when}  {outcome}  {}  {}  {}",
                a.decided_by.as_deref().unwrap_or("-"),
                action_on(&a.request),
                a.request.approval_id,
            )
        },
    )
}

/// `droidwarden approve ID` and `droidwarden deny ID [--reason …]`.
pub(crate) async fn answer(
    config: &Config,
    bus: Option<Bus>,
    approval_id: &str,
    deny_reason: Option<&str>,
) -> ExitCode {
    let answered = async {
        let client = daemon(bus, config, false).await?;
        match deny_reason {
            None => client.approve(approval_id).await,
            Some(reason) => client.deny(approval_id, reason).await,
        }
    };
    match answered.await {
        Ok(()) => {
            outln!(
                "{} {approval_id}",
                if deny_reason.is_some() {
                    "denied"
                } else {
                    "approved"
                }
            );
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

/// How far an approval from the command line reaches.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Scope<'a> {
    /// `--for-run [--up-to RISK]`.
    Run(&'a str),
    /// `--for-app MINUTES`.
    App(u32),
    /// `--edit KEY=VALUE…`.
    Edits(&'a [String]),
}

/// `droidwarden approve ID --for-run [--up-to RISK]`, `--for-app MINUTES`
/// or `--edit KEY=VALUE…`: the edits are typed by the waiting action's
/// schema, as `droidwarden call` types its parameters, and checked again
/// by the daemon.
pub(crate) async fn answer_with(
    config: &Config,
    bus: Option<Bus>,
    approval_id: &str,
    scope: Scope<'_>,
) -> ExitCode {
    let answered = async {
        let client = daemon(bus, config, false).await?;
        let options = match scope {
            Scope::Run(up_to) => {
                serde_json::json!({"decision": "approve", "scope": "run", "up_to": up_to})
            }
            Scope::App(minutes) => {
                serde_json::json!({"decision": "approve", "scope": "app", "minutes": minutes})
            }
            Scope::Edits(edits) => {
                let waiting = client.list_approvals().await?;
                let request = waiting
                    .iter()
                    .find(|a| a.approval_id == approval_id)
                    .ok_or_else(|| {
                        WireError::new(
                            ErrorCode::InvalidParams,
                            format!("no approval request {approval_id:?} is waiting (droidwarden approvals lists them)"),
                        )
                    })?;
                let (_, action) = Catalogue::get()
                    .action(&request.service, &request.action)
                    .map_err(|_| {
                        WireError::new(
                            ErrorCode::InvalidParams,
                            format!(
                                "{approval_id} is not a device action ({}.{}): only a device action's parameters can be edited",
                                request.service, request.action
                            ),
                        )
                    })?;
                let mut params = serde_json::Map::new();
                for pair in edits {
                    let (key, value) = crate::call::typed_pair(action, pair)?;
                    params.insert(key, value);
                }
                serde_json::json!({"decision": "approve", "params": params})
            }
        };
        client.answer_approval(approval_id, &options).await
    };
    match answered.await {
        Ok(()) => {
            match scope {
                Scope::Run(up_to) => outln!(
                    "approved {approval_id}, and the rest of its run may act on the same device up to {up_to} risk (droidwarden approvals lists the grant)"
                ),
                Scope::App(minutes) => outln!(
                    "approved {approval_id}, and its app is allowed on the same device for {minutes} min (droidwarden approvals lists the grant)"
                ),
                Scope::Edits(_) => outln!("approved {approval_id} with edited parameters"),
            }
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

/// `droidwarden approvals revoke GRANT`.
pub(crate) async fn revoke(config: &Config, bus: Option<Bus>, grant_id: &str) -> ExitCode {
    let revoked = async {
        daemon(bus, config, false)
            .await?
            .revoke_grant(grant_id)
            .await
    };
    match revoked.await {
        Ok(()) => {
            outln!("revoked {grant_id}: its run asks again");
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

/// `droidwarden sessions`.
pub(crate) async fn sessions(config: &Config, bus: Option<Bus>, json: bool) -> ExitCode {
    let listed = async { daemon(bus, config, false).await?.list_sessions().await };
    let header = "ID  UPDATED  TURNS  TITLE";
    print_list(
        listed.await,
        json,
        ("sessions", header, "no sessions yet"),
        session_lines,
    )
}

/// A session as `droidwarden sessions` lists it, with its background
/// delegations, one line each.
fn session_lines(s: &SessionSummary) -> String {
    let active = if s.active_runs > 0 {
        format!(", {} running", s.active_runs)
    } else {
        String::new()
    };
    let mut line = format!(
        "{}  {}  {} turn(s){active}  {}",
        s.id,
        droidwarden_services::time::rfc3339(s.updated_at),
        s.turns,
        s.title,
    );
    for t in &s.tasks {
        let task: String = t.task.chars().take(60).collect();
        line.push_str(&format!(
            "\n    task {}  {}  {}  {task}",
            t.task_id,
            t.agent,
            t.status.as_str(),
        ));
    }
    line
}

/// `droidwarden session show ID`.
pub(crate) async fn show_session(config: &Config, bus: Option<Bus>, id: &str) -> ExitCode {
    let shown = async { daemon(bus, config, false).await?.show_session(id).await };
    match shown.await {
        Ok(markdown) => {
            out!("{markdown}");
            if !markdown.ends_with('\n') {
                outln!();
            }
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// An event of run r-1 in session s-1, as the daemon sends it.
    fn event(mut kind: Value) -> AgentEvent {
        kind["run_id"] = json!("r-1");
        kind["session_id"] = json!("s-1");
        if kind["event"] == "final" {
            kind["usage"] = json!({"input_tokens": 10, "output_tokens": 2});
        }
        serde_json::from_value(kind).expect("an event")
    }

    #[test]
    fn a_run_without_an_answer_says_why_and_is_not_a_success() {
        let end = |kind: Value| end_of(&event(kind).kind).expect("an end");
        let no_answer = |kind: Value| match end(kind) {
            End::NoAnswer(why) => why,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            end(json!({"event": "final", "text": "77 %", "stop_reason": "final_answer"})),
            End::Answered
        );
        let why = no_answer(json!({"event": "final", "text": "Let me check",
            "stop_reason": "max_iterations", "model_calls": 10}));
        assert!(
            why.contains("max_iterations") && why.contains("10 model call(s)"),
            "{why}"
        );
        let why = no_answer(json!({"event": "final", "text": "", "stop_reason": "step_limit"}));
        assert!(why.contains("max_steps"), "{why}");
        for text in ["", "  \n"] {
            let why = no_answer(json!({"event": "final", "text": text,
                "stop_reason": "final_answer", "model_calls": 1}));
            assert!(why.contains("empty answer"), "{why}");
        }
        let failed = end(json!({"event": "error", "stop_reason": "cut_off",
            "error": {"code": "invalid_request", "message": "cut off", "retryable": false}}));
        assert!(matches!(failed, End::Failed(e) if e.message == "cut off"));
        assert_eq!(
            end_of(&event(json!({"event": "text_delta", "text": "x"})).kind),
            None
        );
    }

    #[test]
    fn the_daemon_stopping_says_the_run_resumes() {
        let e = daemon_stopped("s-1");
        assert!(
            e.message.contains("resumes when it starts again")
                && e.message.contains("droidwarden session show s-1"),
            "{e:?}"
        );
        assert!(e.retryable);
    }

    #[test]
    fn an_error_after_streamed_text_starts_a_line_of_its_own() {
        let mut printer = Printer::default();
        printer.print(&event(
            json!({"event": "text_delta", "text": "The kitchen phone is"}),
        ));
        assert!(printer.streamed);
        printer.print(&event(json!({"event": "error",
            "error": {"code": "timeout", "message": "stalled", "retryable": true}})));
        assert!(!printer.streamed, "the line was ended before the error");
    }
}
