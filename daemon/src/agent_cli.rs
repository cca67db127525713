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
use droidwarden_services::time::now_ms;
use droidwarden_services::{Catalogue, ErrorCode, WireError};
use futures_util::StreamExt;
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

/// How `event` ends the run, if it is a run's last event (`final` or
/// `error`).
fn end_of(event: &Value) -> Option<End> {
    let calls = event["model_calls"].as_u64().unwrap_or(0);
    match event["event"].as_str()? {
        "final" => {
            let limit = match event["stop_reason"].as_str() {
                Some("max_iterations") => Some("its iteration limit ([agent] max_iterations)"),
                Some("step_limit") => Some("its step limit ([agent] max_steps)"),
                _ => None,
            };
            Some(match limit {
                Some(limit) => End::NoAnswer(format!(
                    "the run stopped at {limit} after {calls} model call(s), before the model answered; ask again to go on, or raise the limit"
                )),
                None if event["text"].as_str().is_none_or(|t| t.trim().is_empty()) => {
                    End::NoAnswer(format!(
                        "the model gave an empty answer after {calls} model call(s)"
                    ))
                }
                None => End::Answered,
            })
        }
        "error" => Some(End::Failed(
            serde_json::from_value(event["error"].clone())
                .unwrap_or_else(|_| WireError::new(ErrorCode::Internal, "the run failed")),
        )),
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
        let Ok(event) = serde_json::from_str::<Value>(&event_json) else {
            continue;
        };
        match event["event"].as_str() {
            Some("approval_requested") => {
                let approval = &event["approval"];
                if let (Some(call), Some(id)) = (
                    approval["call_id"].as_str(),
                    approval["approval_id"].as_str(),
                ) {
                    pending.insert(call.to_owned(), id.to_owned());
                }
            }
            Some("tool_result") => {
                if let Some(call) = event["call_id"].as_str() {
                    pending.remove(call);
                }
            }
            _ => {}
        }
        if json {
            // JSON lines, one event each, times as RFC 3339 like every --json.
            let mut line = event.clone();
            crate::client::rfc3339_times(&mut line);
            outln!("{line}");
        } else {
            printer.print(&event);
        }
        match end_of(&event) {
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
    fn print(&mut self, event: &Value) {
        let kind = event["event"].as_str().unwrap_or_default();
        // A skill's own events are tagged with the skill.
        let skill = event["skill"].as_str().unwrap_or_default();
        let tag = if skill.is_empty() {
            String::new()
        } else {
            format!("[{skill}] ")
        };
        match kind {
            "plan" => {
                self.end_stream();
                let title = if event["replan"] == true {
                    "new plan"
                } else {
                    "plan"
                };
                outln!("☰ {title}:");
                for (i, step) in event["steps"].as_array().into_iter().flatten().enumerate() {
                    outln!("  {}. {}", i + 1, step.as_str().unwrap_or_default());
                }
            }
            "step_started" => {
                self.end_stream();
                outln!("▷ step: {}", event["task"].as_str().unwrap_or_default());
            }
            "step_finished" => {
                self.end_stream();
                outln!(
                    "{} {}",
                    if event["complete"] == true {
                        "✔"
                    } else {
                        "…"
                    },
                    event["finding"].as_str().unwrap_or_default()
                );
            }
            "skill_started" => {
                self.end_stream();
                outln!("▶ skill {skill} {}", short(&event["input"]));
            }
            "skill_finished" => {
                self.end_stream();
                let how = if event["is_error"] == true {
                    "failed"
                } else {
                    "done"
                };
                outln!("■ skill {skill} {how}");
            }
            "delegation_started" => {
                self.end_stream();
                outln!(
                    "▶ background task {} for agent {}",
                    event["task_id"].as_str().unwrap_or_default(),
                    event["agent"].as_str().unwrap_or_default()
                );
            }
            "delegation_finished" => {
                self.end_stream();
                outln!(
                    "■ background task {} {}",
                    event["task_id"].as_str().unwrap_or_default(),
                    event["status"].as_str().unwrap_or_default()
                );
            }
            "text_delta" => {
                out!("{}", event["text"].as_str().unwrap_or_default());
                let _ = std::io::stdout().flush();
                self.streamed = true;
            }
            "final" => {
                if self.streamed {
                    outln!();
                    self.streamed = false;
                } else if let Some(text) = event["text"].as_str().filter(|t| !t.is_empty()) {
                    outln!("{text}");
                }
            }
            // The error (printed by the caller) starts a line of its own.
            "error" => self.end_stream(),
            "tool_call" => {
                self.end_stream();
                outln!(
                    "{tag}→ {} {}",
                    event["tool"].as_str().unwrap_or_default(),
                    short(&event["arguments"])
                );
            }
            "tool_result" => {
                let mark = if event["is_error"] == true {
                    "✗"
                } else {
                    "✓"
                };
                outln!(
                    "{tag}{mark} {} {}",
                    event["tool"].as_str().unwrap_or_default(),
                    short(&event["content"])
                );
            }
            "approval_requested" => {
                self.end_stream();
                let a = &event["approval"];
                let id = a["approval_id"].as_str().unwrap_or_default();
                outln!(
                    "{tag}? approval needed: {}.{} on {} (risk {}) {}\n  answer with: droidwarden approve {id}   or: droidwarden deny {id} --reason …",
                    a["service"].as_str().unwrap_or_default(),
                    a["action"].as_str().unwrap_or_default(),
                    a["device"].as_str().unwrap_or("the default device"),
                    a["risk"].as_str().unwrap_or_default(),
                    short(&a["params"]),
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

/// Print a JSON array the daemon returned: with `--json` as `{key: [...]}`
/// (the CLI's one convention), else a `header` row and one `line` per item
/// (or `empty` when there is none).
fn print_list(
    listed: Result<Value, WireError>,
    json: bool,
    (key, header, empty): (&str, &str, &str),
    line: impl Fn(&Value) -> String,
) -> ExitCode {
    match listed {
        Err(e) => fail_as(&e, json),
        Ok(list) if json => {
            print_json(&serde_json::json!({ key: list }));
            ExitCode::SUCCESS
        }
        Ok(list) => {
            let items = list.as_array().cloned().unwrap_or_default();
            if items.is_empty() {
                outln!("{empty}");
            } else {
                outln!("{header}");
            }
            for item in &items {
                outln!("{}", line(item));
            }
            ExitCode::SUCCESS
        }
    }
}

/// An approval request's action as a line shows it: `service.action on
/// device`, and `in APP` when the app in front raised its risk.
fn action_on(a: &Value) -> String {
    let app = a["app"]
        .as_str()
        .map(|app| format!(" in {app}"))
        .unwrap_or_default();
    format!(
        "{}.{} on {}{app}",
        a["service"].as_str().unwrap_or_default(),
        a["action"].as_str().unwrap_or_default(),
        a["device"].as_str().unwrap_or("default device"),
    )
}

/// `droidwarden approvals`: the requests waiting, then the grants for a
/// run that still hold (with `--json`, `{"approvals": […], "grants": […]}`).
pub(crate) async fn approvals(config: &Config, bus: Option<Bus>, json: bool) -> ExitCode {
    let listed = async {
        let client = daemon(bus, config, false).await?;
        let approvals = client.list_approvals().await?;
        let grants = client.list_grants().await?;
        Ok::<_, WireError>((serde_json::json!(approvals), serde_json::json!(grants)))
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
        |a| {
            let expires_in = a["expires_at"]
                .as_u64()
                .map(|t| t.saturating_sub(now_ms()) / 1000)
                .unwrap_or(0);
            format!(
                "{}  {}  risk {}  {}  (session {}, expires in {expires_in} s)",
                a["approval_id"].as_str().unwrap_or_default(),
                action_on(a),
                a["risk"].as_str().unwrap_or_default(),
                short(&a["params"]),
                a["session"].as_str().unwrap_or_default(),
            )
        },
    );
    let grants = grants.as_array().cloned().unwrap_or_default();
    if !grants.is_empty() {
        outln!();
        outln!("GRANTS  (revoke: droidwarden approvals revoke GRANT)");
        outln!("GRANT  DEVICE  SCOPE  UP TO  BY  (SESSION, RUN, SINCE)");
        let time = |t: &Value| {
            t.as_u64()
                .map_or_else(|| "-".to_owned(), droidwarden_agent::clock::rfc3339)
        };
        for g in &grants {
            let scope = match g["app"].as_str() {
                Some(app) => format!("app {app} until {}", time(&g["expires_at"])),
                None => "this run".to_owned(),
            };
            outln!(
                "{}  {}  {scope}  {}  {}  (session {}, run {}, since {})",
                g["grant_id"].as_str().unwrap_or_default(),
                g["device"].as_str().unwrap_or_default(),
                g["up_to"].as_str().unwrap_or_default(),
                g["granted_by"].as_str().unwrap_or_default(),
                g["session_id"].as_str().unwrap_or_default(),
                g["run_id"].as_str().unwrap_or_default(),
                time(&g["granted_at"]),
            );
        }
    }
    code
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
            .map(|answered| serde_json::json!(answered))
    };
    let header = "ANSWERED  OUTCOME  BY  ACTION ON DEVICE  ID";
    print_list(
        listed.await,
        json,
        ("approvals", header, "no approval request answered yet"),
        |a| {
            let when = a["decided_at"]
                .as_u64()
                .map_or_else(|| "-".to_owned(), droidwarden_agent::clock::rfc3339);
            let outcome = match (a["status"].as_str(), a["reason"].as_str()) {
                (Some("denied"), Some(reason)) => {
                    format!("denied ({})", short(&Value::from(reason)))
                }
                (Some(status), _) => status.to_owned(),
                (None, _) => "?".to_owned(),
            };
            format!(
                "{when}  {outcome}  {}  {}  {}",
                a["decided_by"].as_str().unwrap_or("-"),
                action_on(a),
                a["approval_id"].as_str().unwrap_or_default(),
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
    let listed = async {
        let listed = daemon(bus, config, false).await?.list_sessions().await;
        listed.map(|listed| serde_json::json!(listed))
    };
    let header = "ID  UPDATED  TURNS  TITLE";
    print_list(
        listed.await,
        json,
        ("sessions", header, "no sessions yet"),
        |s| {
            let updated = s["updated_at"]
                .as_u64()
                .map(droidwarden_services::time::rfc3339)
                .unwrap_or_default();
            let active = s["active_runs"].as_u64().unwrap_or(0);
            let mut line = format!(
                "{}  {updated}  {} turn(s){}  {}",
                s["id"].as_str().unwrap_or_default(),
                s["turns"].as_u64().unwrap_or(0),
                if active > 0 {
                    format!(", {active} running")
                } else {
                    String::new()
                },
                s["title"].as_str().unwrap_or_default(),
            );
            // Its background delegations, one line each.
            for t in s["tasks"].as_array().into_iter().flatten() {
                let task: String = t["task"]
                    .as_str()
                    .unwrap_or_default()
                    .chars()
                    .take(60)
                    .collect();
                line.push_str(&format!(
                    "\n    task {}  {}  {}  {task}",
                    t["task_id"].as_str().unwrap_or_default(),
                    t["agent"].as_str().unwrap_or_default(),
                    t["status"].as_str().unwrap_or_default(),
                ));
            }
            line
        },
    )
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

    #[test]
    fn a_run_without_an_answer_says_why_and_is_not_a_success() {
        let end = |event: Value| end_of(&event).expect("an end");
        let no_answer = |event: Value| match end(event) {
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
        for text in [json!(""), json!("  \n"), Value::Null] {
            let why = no_answer(json!({"event": "final", "text": text,
                "stop_reason": "final_answer", "model_calls": 1}));
            assert!(why.contains("empty answer"), "{why}");
        }
        let failed = end(json!({"event": "error", "stop_reason": "cut_off",
            "error": {"code": "invalid_request", "message": "cut off", "retryable": false}}));
        assert!(matches!(failed, End::Failed(e) if e.message == "cut off"));
        assert_eq!(end_of(&json!({"event": "text_delta", "text": "x"})), None);
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
        printer.print(&json!({"event": "text_delta", "text": "The kitchen phone is"}));
        assert!(printer.streamed);
        printer.print(&json!({"event": "error",
            "error": {"code": "timeout", "message": "stalled", "retryable": true}}));
        assert!(!printer.streamed, "the line was ended before the error");
    }
}
