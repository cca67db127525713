//! The `org.droidwarden.Daemon1` interface: every method, signal and
//! property, written once. zbus generates the server side and the client's
//! proxy (`Daemon1Proxy`) from this block, so the two cannot drift apart.

use super::*;

/// The interface, and with it the client's proxy: zbus generates
/// `Daemon1Proxy` from this very block (`proxy(…)`), a method for each
/// method, signal and property here, with the same D-Bus names, argument
/// types and reply types ([`Json`] for the JSON ones). A method renamed or
/// changed here is renamed or changed in the proxy, and every call the
/// client makes through the old one fails to compile; no name is spelled
/// twice. The D-Bus names are `CamelCase` of the Rust ones, as
/// documented in docs/dbus-api.md (checked by a test against that page).
#[zbus::interface(
    name = "org.droidwarden.Daemon1",
    proxy(
        default_service = "org.droidwarden.Daemon1",
        default_path = "/org/droidwarden/Daemon1",
        visibility = "pub(crate)"
    )
)]
impl Daemon1 {
    /// Every device as a JSON array: name, transport, online, serial,
    /// model, state_detail (the objects of `droidwarden devices --json`).
    #[zbus(out_args("devices_json"))]
    async fn list_devices(&self) -> Json<Vec<DeviceInfo>> {
        Json(self.hub.registry().list())
    }

    /// The service catalogue as JSON (the output of
    /// `droidwarden services --json`).
    #[zbus(out_args("services_json"))]
    async fn list_services(&self) -> Json<Value> {
        Json(Value::Array(droidwarden_bridge::services_json()))
    }

    /// Perform one action. `device` empty: the only online device.
    /// `params_json`: a JSON object (empty string: no parameters). Returns
    /// the JSON result; failures are `org.droidwarden.Error.*` errors.
    #[zbus(out_args("result_json"))]
    async fn call(
        &self,
        device: &str,
        service: &str,
        action: &str,
        params_json: &str,
    ) -> Result<Json<Value>, DbusError> {
        let call = parse_call(device, service, action, params_json)?;
        let result = self.calls.track_future(self.hub.call(call)).await?;
        Ok(Json(result))
    }

    /// Perform one action as `Call` does, under the agent's approval policy
    /// (`[agent.approval]`): an action above the threshold waits for a
    /// person (an approval request, as the agent's, answered by `Approve`
    /// or `Deny`; expiry denies), a listed one is refused. For clients that
    /// act for a model, such as `droidwarden mcp` (docs/mcp.md).
    #[zbus(out_args("result_json"))]
    async fn call_checked(
        &self,
        device: &str,
        service: &str,
        action: &str,
        params_json: &str,
    ) -> Result<Json<Value>, DbusError> {
        let call = parse_call(device, service, action, params_json)?;
        let result = self
            .calls
            .track_future(crate::gate::call_checked(
                &self.hub,
                self.assistant.as_ref(),
                call,
            ))
            .await?;
        Ok(Json(result))
    }

    /// `CallChecked` for a client that asks the person itself (MCP
    /// elicitation, docs/mcp.md): when the call waits for approval, the
    /// signal `CallAwaitsApproval(ticket, approval_id)` goes to this
    /// connection, so the client can answer it with `Approve` or `Deny`.
    /// `ticket`: the client's own random tag for this call (1–128 chars).
    #[zbus(out_args("result_json"))]
    async fn call_checked_ticket(
        &self,
        #[zbus(signal_emitter)] emitter: SignalEmitter<'_>,
        device: &str,
        service: &str,
        action: &str,
        params_json: &str,
        ticket: &str,
    ) -> Result<Json<Value>, DbusError> {
        let call = parse_call(device, service, action, params_json)?;
        let run = crate::gate::ticketed_call(
            &self.hub,
            self.assistant.as_ref(),
            call,
            ticket,
            |id| async move {
                let sent = Self::call_awaits_approval(&emitter, ticket, &id);
                if !matches!(tokio::time::timeout(EMIT_TIMEOUT, sent).await, Ok(Ok(()))) {
                    tracing::debug!(approval = id, "CallAwaitsApproval not sent");
                }
            },
        );
        let result = self.calls.track_future(run).await?;
        Ok(Json(result))
    }

    /// A `CallCheckedTicket` call waits for approval `approval_id`; sent
    /// to the caller's connection only on the socket, on the bus to all.
    #[zbus(signal)]
    pub(crate) async fn call_awaits_approval(
        emitter: &SignalEmitter<'_>,
        ticket: &str,
        approval_id: &str,
    ) -> zbus::Result<()>;

    /// The longest a `Call` on `device` can take before the daemon answers
    /// it, in milliseconds: its turn behind earlier calls on the device,
    /// then the call, each bounded by the device's own bound (`[calls]
    /// timeout_ms` for an ADB phone; for a companion phone its queue time,
    /// its turn behind earlier changes and the answer deadline). `device`
    /// empty: the longest over every device. 0 when there is no such
    /// device. Clients wait that long, plus a margin, for `Call`'s reply.
    #[zbus(out_args("timeout_ms"))]
    async fn call_timeout(&self, device: &str) -> u64 {
        let registry = self.hub.registry();
        let bound = if device.is_empty() {
            registry
                .list()
                .iter()
                .filter_map(|info| registry.get(info.name.as_str()))
                .map(|handle| crate::hub::call_bound(&handle))
                .max()
        } else {
            registry
                .get(device)
                .map(|handle| crate::hub::call_bound(&handle))
        };
        bound.map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    /// Devices, their availability, and the last status of each (device,
    /// service) since the daemon started, as JSON.
    #[zbus(out_args("status_json"))]
    async fn status(&self) -> Json<StatusReport> {
        let registry = self.hub.registry();
        let devices = lock(&self.table).devices(registry.list());
        let problems = registry
            .problems()
            .into_iter()
            .map(|(transport, e)| TransportProblem {
                transport: transport.to_owned(),
                error: e.to_wire(),
            })
            .collect();
        let daemon = self
            .health
            .report(&self.approvals(), &self.automations)
            .await;
        Json(StatusReport {
            devices,
            problems,
            daemon,
        })
    }

    /// Pair a phone for wireless debugging (Android 11+) through the adb
    /// server, as `droidwarden pair` does: `address` is the phone's
    /// pairing address (HOST:PORT under Wireless debugging > Pair device
    /// with pairing code), `code` its six digits, `timeout_ms` how long to
    /// wait for the phone (0: 20 s; 100 to 120000). Returns the object of
    /// `droidwarden pair --json`; an adb server older than platform-tools
    /// 30 is `UnsupportedAction`, the phone's refusal `DeviceError` with
    /// the server's words.
    #[zbus(out_args("paired_json"))]
    async fn pair(
        &self,
        address: &str,
        code: &str,
        timeout_ms: u32,
    ) -> Result<Json<crate::wireless::PairReport>, DbusError> {
        use droidwarden_bridge::adb::host::{PairingCode, PhoneAddress};
        let target = PhoneAddress::try_from(address).map_err(|e| e.to_wire())?;
        let code = PairingCode::try_from(code.to_owned()).map_err(|e| e.to_wire())?;
        let timeout_ms = match u64::from(timeout_ms) {
            0 => crate::wireless::PAIR_TIMEOUT_MS,
            ms @ crate::wireless::PAIR_TIMEOUT_MIN_MS..=crate::wireless::PAIR_TIMEOUT_MAX_MS => ms,
            _ => {
                return Err(WireError::new(
                    ErrorCode::InvalidParams,
                    "timeout_ms must be 0 (20 s) or from 100 to 120000",
                )
                .into());
            }
        };
        let adb = self.adb()?;
        let paired =
            crate::wireless::pair(adb, &target, &code, Duration::from_millis(timeout_ms)).await?;
        tracing::info!(address = %target, guid = paired.guid.as_deref(), "paired over D-Bus Pair");
        Ok(Json(paired))
    }

    /// The phones the adb server sees over mDNS, as `droidwarden discover
    /// --json`: `adb_server`, `mdns` (`running`, `check`) and `services`,
    /// each with the device it is when the server lists it.
    #[zbus(out_args("discovered_json"))]
    async fn discover(&self) -> Result<Json<crate::wireless::DiscoverReport>, DbusError> {
        let adb = self.adb()?;
        let devices = self.hub.registry().list();
        Ok(Json(crate::wireless::discover(adb, &devices).await?))
    }

    /// Ask the agent. `session` empty: a new session. Returns the session
    /// id at once; the run's progress comes as `SessionEvent` signals for
    /// that session, ending with a `final` or `error` event.
    #[zbus(out_args("session"))]
    async fn ask(&self, session: &str, prompt: &str) -> Result<String, DbusError> {
        let session = optional(session);
        let started = self
            .assistant()?
            .ask(prompt, session, None, None, None)
            .await?;
        tracing::debug!(session = started.session, run = started.run, "D-Bus Ask");
        Ok(started.session)
    }

    /// `Ask` with options: `options_json` is a JSON object (empty string:
    /// none) with `"mode": "react" | "plan"` (plan-and-execute; default
    /// `[agent] mode`).
    #[zbus(out_args("session"))]
    async fn ask_with(
        &self,
        session: &str,
        prompt: &str,
        options_json: &str,
    ) -> Result<String, DbusError> {
        let bad = |m: String| WireError::new(ErrorCode::InvalidParams, m);
        let Value::Object(mut options) = json_arg("options_json", options_json)? else {
            return Err(bad("options_json must be a JSON object".into()).into());
        };
        let mode = match options.remove("mode") {
            None | Some(Value::Null) => None,
            Some(Value::String(m)) => droidwarden_agent::RunMode::named(Some(&m)).map_err(bad)?,
            Some(_) => return Err(bad("mode must be a string".into()).into()),
        };
        if let Some(key) = options.keys().next() {
            return Err(bad(format!("unknown option {key:?}; options: mode")).into());
        }
        let session = optional(session);
        let started = self
            .assistant()?
            .ask(prompt, session, None, mode, None)
            .await?;
        tracing::debug!(
            session = started.session,
            run = started.run,
            "D-Bus AskWith"
        );
        Ok(started.session)
    }

    /// The skills as JSON (`droidwarden skills --json`): `skills`, each
    /// with name, description, allowed_tools, risk, enabled, builtin and
    /// source, and `problems`, the files that failed to load and why.
    #[zbus(out_args("skills_json"))]
    async fn list_skills(&self) -> Result<Json<Value>, DbusError> {
        Ok(Json(crate::assistant::skills_json(
            &self.assistant()?.skills(),
        )))
    }

    /// Run a skill through the agent. `session` empty: a new session;
    /// `input_json`: a JSON object (empty string: `{}`). Returns the
    /// session id at once; progress comes as `SessionEvent` signals (the
    /// skill's own events tagged with `skill`), ending with `final` or
    /// `error`.
    #[zbus(out_args("session"))]
    async fn run_skill(
        &self,
        session: &str,
        skill: &str,
        input_json: &str,
    ) -> Result<String, DbusError> {
        let input = json_arg("input_json", input_json)?;
        let session = optional(session);
        let started = self
            .assistant()?
            .run_skill(skill, input, session, None, None)
            .await?;
        tracing::debug!(
            session = started.session,
            run = started.run,
            skill,
            "D-Bus RunSkill"
        );
        Ok(started.session)
    }

    /// Approval requests waiting for an answer, the agent's and the
    /// automations' (`automation:<name>`), oldest first, as a JSON array
    /// (the payloads of the MQTT `approvals/<id>` topics).
    #[zbus(out_args("approvals_json"))]
    async fn list_approvals(&self) -> Result<Json<Vec<PendingApproval>>, DbusError> {
        Ok(Json(self.approvals().pending().await?))
    }

    /// The `limit` approval requests answered (or expired) last, the most
    /// recent first, as a JSON array: each request's fields with `status`,
    /// `reason`, `decided_at` and `decided_by` (who answered). `limit` 0
    /// means 50; at most 1,000.
    #[zbus(out_args("history_json"))]
    async fn approval_history(&self, limit: u32) -> Result<Json<Vec<ApprovalOutcome>>, DbusError> {
        let limit = match limit {
            0 => 50,
            n => usize::try_from(n).unwrap_or(usize::MAX).min(1000),
        };
        Ok(Json(self.assistant()?.approval_history(limit).await?))
    }

    /// Approve a pending request: the waiting run goes on. The caller's
    /// uid is recorded as who answered.
    async fn approve(
        &self,
        approval_id: &str,
        #[zbus(connection)] connection: &zbus::Connection,
        #[zbus(header)] header: zbus::message::Header<'_>,
    ) -> Result<(), DbusError> {
        let by = caller(connection, &header).await;
        self.approvals()
            .answer(approval_id, Decision::Approve, &by)
            .await?;
        Ok(())
    }

    /// Answer a pending request with options, as a JSON object: `decision`
    /// (`approve` or `deny`), then `scope` (`once`, the default, or `run`:
    /// a grant for the rest of the run, same device, actions up to
    /// `up_to`, `low` or `medium`, default `medium`; or `app`: the app in
    /// front of a screen action allowed on its device for `minutes`,
    /// default 30), or `params` (edited
    /// parameters, approved once), or `reason` for a denial
    /// (docs/agent.md, "Answers beyond yes or no"). The caller's uid is
    /// recorded as who answered. Approve and Deny remain for yes and no.
    async fn answer_approval(
        &self,
        approval_id: &str,
        options_json: &str,
        #[zbus(connection)] connection: &zbus::Connection,
        #[zbus(header)] header: zbus::message::Header<'_>,
    ) -> Result<(), DbusError> {
        let decision = answer_options(options_json)?;
        let by = caller(connection, &header).await;
        self.approvals().answer(approval_id, decision, &by).await?;
        Ok(())
    }

    /// The grants for a run that still hold, oldest first, as a JSON
    /// array: `grant_id`, `run_id`, `session_id`, `device`, `up_to`,
    /// `granted_by`, `granted_at`, `approval_id`.
    #[zbus(out_args("grants_json"))]
    async fn list_grants(&self) -> Result<Json<Vec<droidwarden_agent::Grant>>, DbusError> {
        Ok(Json(self.approvals().grants().await?))
    }

    /// Revoke a grant: the next action it covered asks again. The caller's
    /// uid is recorded as who revoked it.
    async fn revoke_grant(
        &self,
        grant_id: &str,
        #[zbus(connection)] connection: &zbus::Connection,
        #[zbus(header)] header: zbus::message::Header<'_>,
    ) -> Result<(), DbusError> {
        let by = caller(connection, &header).await;
        self.approvals().revoke(grant_id, &by).await?;
        Ok(())
    }

    /// Deny a pending request; `reason` (may be empty) reaches the model.
    /// The caller's uid is recorded as who answered.
    async fn deny(
        &self,
        approval_id: &str,
        reason: &str,
        #[zbus(connection)] connection: &zbus::Connection,
        #[zbus(header)] header: zbus::message::Header<'_>,
    ) -> Result<(), DbusError> {
        let by = caller(connection, &header).await;
        let decision = Decision::Deny {
            reason: reason.to_owned(),
        };
        self.approvals().answer(approval_id, decision, &by).await?;
        Ok(())
    }

    /// Every agent session, most recent first, as a JSON array.
    #[zbus(out_args("sessions_json"))]
    async fn list_sessions(&self) -> Result<Json<Vec<SessionSummary>>, DbusError> {
        Ok(Json(self.assistant()?.sessions().await?))
    }

    /// Manage automations: `request_json` is `{"op": "list" | "show" |
    /// "run" | "enable" | "disable" | "approve" | "deny" | "add" |
    /// "remove", "name": …, "definition": {…}}` (docs/automations.md); the
    /// answer is JSON.
    /// The caller is recorded as who answered an approval.
    #[zbus(out_args("answer_json"))]
    async fn automation(
        &self,
        request_json: &str,
        #[zbus(connection)] connection: &zbus::Connection,
        #[zbus(header)] header: zbus::message::Header<'_>,
    ) -> Result<Json<Value>, DbusError> {
        let body: Value = serde_json::from_str(request_json).map_err(|e| {
            DbusError::Wire(WireError::new(
                ErrorCode::InvalidRequest,
                format!("the request is not JSON: {e}"),
            ))
        })?;
        // Only an answer to an approval records who sent it: the bus is
        // asked for the caller's uid then, not on every request.
        let answers = matches!(
            body.get("op").and_then(Value::as_str),
            Some("approve" | "deny")
        );
        let by = if answers {
            caller(connection, &header).await
        } else {
            String::new()
        };
        let op = automations::Op::parse(&body, &by)?;
        Ok(Json(self.automations.request(op).await?))
    }

    /// An automation's run started, waits, ended, or was skipped or
    /// missed: its name and the outcome (as on MQTT
    /// `automations/<name>/runs`).
    #[zbus(signal)]
    pub(crate) async fn automation_run(
        emitter: &SignalEmitter<'_>,
        name: &str,
        outcome_json: Json<Value>,
    ) -> zbus::Result<()>;

    /// A session as markdown: the conversation with timestamps, tool calls
    /// and results.
    #[zbus(out_args("markdown"))]
    async fn show_session(&self, session: &str) -> Result<String, DbusError> {
        Ok(self.assistant()?.session_markdown(session).await?)
    }

    /// An agent action waits for a person's answer. `details_json`:
    /// approval_id, session, device, service, action, params, risk,
    /// requested_at, expires_at (unix ms).
    #[zbus(signal)]
    pub(crate) async fn approval_requested(
        emitter: &SignalEmitter<'_>,
        approval_id: &str,
        details_json: Json<PendingApproval>,
    ) -> zbus::Result<()>;

    /// An event of an agent run in `session`: tool_call, tool_result,
    /// approval_requested, text_delta, final or error (docs/agent.md).
    #[zbus(signal)]
    pub(crate) async fn session_event(
        emitter: &SignalEmitter<'_>,
        session: &str,
        event_json: Json<AgentEvent>,
    ) -> zbus::Result<()>;

    /// A call on (device, service) changed state: `executing`, then
    /// `success` or `error`. `details_json` is the status object of the
    /// MQTT status topic (action, times, duration, error).
    #[zbus(signal)]
    pub(crate) async fn service_status_changed(
        emitter: &SignalEmitter<'_>,
        device: &str,
        service: &str,
        state: &str,
        details_json: Json<ServiceStatus>,
    ) -> zbus::Result<()>;

    /// A device came online or went offline.
    #[zbus(signal)]
    pub(crate) async fn device_availability_changed(
        emitter: &SignalEmitter<'_>,
        device: &str,
        online: bool,
    ) -> zbus::Result<()>;

    /// The daemon's version.
    #[zbus(property(emits_changed_signal = "const"))]
    async fn version(&self) -> String {
        env!("CARGO_PKG_VERSION").to_owned()
    }

    /// How many devices the daemon knows (online or not), as `ListDevices`.
    #[zbus(property)]
    async fn device_count(&self) -> u32 {
        self.device_count.load(Ordering::Relaxed)
    }
}
